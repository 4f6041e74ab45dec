"""Datasets by their real on-disk layouts, as adapt's readers open them.

Each describes its data (kind, folder, options) for the loader, which opens
it in Rust, once, shared by its worker threads; each is also a dataset in
everyday code: `len(ds)`, `ds[i]` → `(image, label)` (a u8 HWC numpy array
as the reader yields it, after the format's fixed steps), `.classes`,
`.class_to_idx`, `.targets` where the format has them, so they work inside
`torch.utils.data.DataLoader` too. Nothing is downloaded: `download=True` is
refused with where to put the files.

torchvision's CIFAR-10 and CIFAR-100 downloads (`cifar-10-batches-py`,
`cifar-100-python`: pickles) are read as they are, in Rust, by a reader
that accepts only the layout's own values (dicts, lists of ints, texts, a
uint8 array) and runs nothing: a crafted batch file is refused naming the
file and what it holds, where `pickle.load` (torchvision's reader) would
run its code.
"""

import glob
import json
import os

import numpy as np

__all__ = ["CIFAR10", "CIFAR100", "CelebA", "DigiFace1M", "ImageFolder", "Pack", "CelebADigiFace",
           "Concat", "WebDataset", "Parquet", "HuggingFace"]


def _refuse_download(download, what, layout):
    if download:
        raise ValueError(f"download=True: adapt downloads nothing. Put {what} under root as {layout} "
                         "(its own download, or `python -m adapt gen` for synthetic data in the same "
                         "layout) and pass download=False")


class _Spec:
    kind = ""
    #: Whether each sample carries a text (a caption member or column).
    has_text = False

    def __init__(self, root, *, resize=None):
        self.root = os.fspath(root)
        self.resize = resize
        self._opened = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_opened"] = None  # reopened where it is used (a worker process)
        return state

    def _data(self):
        if self._opened is None:
            from ._adapt import Data

            self._opened = Data(json.dumps({"dataset": self._spec(), "transforms": None,
                                            "output": "f32", "exact_decode": False}))
        return self._opened

    def __len__(self):
        return len(self._data())

    def __getitem__(self, index):
        n = len(self)
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"dataset indices must be integers, not {type(index).__name__}")
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"index {index} is out of range for a dataset of {n}")
        pixels, label = self._data().get(int(index))
        if self.has_text:
            return pixels, label, self._data().texts([int(index)])[0]
        return pixels, label

    @property
    def classes(self):
        names = self._data().classes()
        if names is None:
            raise AttributeError(f"{type(self).__name__} has no class names (its labels are numbers)")
        return names

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    @property
    def targets(self):
        """Every sample's label (read apart from the pixels where the format
        keeps labels apart: CIFAR-10, image folders)."""
        return self._data().labels()

    def _spec(self):
        return {
            "kind": self.kind,
            "path": os.path.abspath(self.root),
            "test_split": False,
            "resize": list(self.resize) if self.resize else None,
            "parts": [],
        }

    def __add__(self, other):
        return Concat([self, other])

    def __repr__(self):
        return f"{type(self).__name__}({self.root!r})"


class CIFAR10(_Spec):
    """CIFAR-10: the binary layout (`data_batch_1.bin` … `test_batch.bin`)
    or torchvision's download (`cifar-10-batches-py/`, pickles read without
    running them), found under `root` or at it."""

    kind = "cifar10"

    def __init__(self, root, train=True, download=False, **kw):
        _refuse_download(download, "CIFAR-10", "cifar-10-batches-py/ (torchvision's layout) or "
                         "data_batch_1.bin … test_batch.bin (the binary version)")
        super().__init__(root, **kw)
        self.train = train

    def _spec(self):
        s = super()._spec()
        s["test_split"] = not self.train
        return s

    def __repr__(self):
        return f"{type(self).__name__}({self.root!r}, train={self.train})"


class CIFAR100(CIFAR10):
    """CIFAR-100 as torchvision downloads it (`cifar-100-python/`: `train`,
    `test`, `meta`), fine labels (100 classes), read without running its
    pickles."""

    kind = "cifar100"

    def __init__(self, root, train=True, download=False, **kw):
        _refuse_download(download, "CIFAR-100", "cifar-100-python/ (torchvision's layout)")
        _Spec.__init__(self, root, **kw)
        self.train = train


class CelebA(_Spec):
    """CelebA aligned (`img_align_celeba/`, `identity_CelebA.txt`), with its usual crop."""

    kind = "celeba"


class DigiFace1M(_Spec):
    """DigiFace1M's class folders of RGBA PNGs (converted to RGB)."""

    kind = "digiface"


class ImageFolder(_Spec):
    """Class-per-folder images, as torchvision's ImageFolder (give a
    transform that fixes the size, or `resize=(w, h)`, for mixed sizes)."""

    kind = "imagefolder"

    @property
    def samples(self):
        """(path, class index) of every image, as torchvision's ImageFolder."""
        d = self._data()
        return [(d.source(i), t) for i, t in enumerate(d.labels())]


class Pack(_Spec):
    """A pack written by `cargo xtask pack` (sharded, checksummed)."""

    kind = "pack"


#: Where a split's files lie in a folder, in the order looked at: the Hub's
#: `data/train-00000-of-00003.parquet` (or shards `train-000000.tar`), a
#: folder per split, and `refs/convert/parquet`'s `CONFIG/SPLIT/0000.parquet`.
_SPLIT_PATTERNS = ("{split}-*{ext}", "data/{split}-*{ext}", "{split}/*{ext}", "*/{split}/*{ext}")


def _split_files(folder, split, what, exts):
    """The files of `split` in `folder` (names ending in one of `exts`),
    sorted, by the first of _SPLIT_PATTERNS that finds any."""
    for pattern in _SPLIT_PATTERNS:
        found = sorted({f for ext in exts for f in glob.glob(os.path.join(
            glob.escape(folder), pattern.format(split=glob.escape(split), ext=ext)))})
        if found:
            return found
    looked = ", ".join(p.format(split=split, ext=exts[0]) for p in _SPLIT_PATTERNS)
    raise FileNotFoundError(f"{folder}: no {what}s of split {split!r} (looked for {looked})")


def _file_list(urls, what, kind, split=None, exts=("",)):
    """`urls` (a path, a pattern, a list of them) as one `::` list of
    absolute paths: `*`/`?` globs expanded here (sorted, as Hugging Face's
    `data_files`), brace patterns and folders left to the reader; with
    `split`, each folder gives that split's files."""
    if isinstance(urls, (str, os.PathLike)):
        urls = [urls]
    urls = [os.fspath(u) for u in urls]
    if not urls or not all(isinstance(u, str) and u for u in urls):
        raise TypeError(f"urls must be a {what} path or pattern, or a list of them")
    if split is not None and (not isinstance(split, str) or not split or "/" in split):
        raise TypeError("split must be a split's name, such as 'train' or 'test'")
    paths = []
    for u in urls:
        if split is not None:
            if "://" in u or not os.path.isdir(u):
                raise ValueError(f"{u}: split= picks a split's files in a folder; name the "
                                 "folder, or leave split=None to read the files named")
            paths.extend(_split_files(u, split, what, exts))
            continue
        if "://" in u:
            if not u.startswith(("s3://", "https://", "http://")):
                raise ValueError(f"{u}: {what}s are read from local files, s3:// or https://")
            if "*" in u or "?" in u:
                raise ValueError(f"{u}: globs are expanded on local disk only; name a store's "
                                 "files with a brace pattern (train-{000000..000099}.tar)")
            paths.append(u)
            continue
        if "*" in u or "?" in u:
            found = sorted(glob.glob(u, recursive=True))
            if not found:
                raise FileNotFoundError(f"{u}: no file matches")
            paths.extend(found)
        else:
            paths.append(u)
    return urls, "::".join(p if "://" in p else os.path.abspath(p) for p in paths)


class _Files(_Spec):
    """A format read from a file list with an image and a label field."""

    _what = ""
    _image_hint = ""
    _label_hint = ""

    _exts = ("",)

    _text_hint = ""

    def __init__(self, urls, image, label, *, text=None, split=None, resize=None):
        urls, spec = _file_list(urls, self._what, self.kind, split, self._exts)
        if not isinstance(image, str) or not image:
            raise TypeError(f"image must be {self._image_hint}")
        if label is not None and not isinstance(label, str):
            raise TypeError(f"label must be {self._label_hint}, or None")
        if text is not None and (not isinstance(text, str) or not text):
            raise TypeError(f"text must be {self._text_hint}, or None")
        super().__init__(spec, resize=resize)
        self.urls, self.image, self.label, self.split = urls, image, label, split
        self.text = text

    @property
    def has_text(self):
        return self.text is not None

    def _spec(self):
        s = super()._spec()
        s["path"] = self.root
        s["fields"] = {"image": self.image, "label": self.label}
        if self.text is not None:
            s["fields"]["text"] = self.text
        return s

    def __repr__(self):
        split = "" if self.split is None else f", split={self.split!r}"
        text = "" if self.text is None else f", text={self.text!r}"
        return (f"{type(self).__name__}({self.urls!r}, image={self.image!r}, "
                f"label={self.label!r}{text}{split})")


class WebDataset(_Files):
    """WebDataset `.tar` shards read in place: members sharing a key form a
    sample (WebDataset's grouping), `image` is the image member's extension
    (alternatives separated by `;`, as WebDataset's `to_tuple("jpg;png")`),
    `label` the label member's (an integer in ASCII, as `TarWriter` writes
    `cls`; `None` for unlabelled shards, labels -1).

    `urls` is a shard list as WebDataset users write it: a path, a brace
    pattern (`"shards-{000000..000099}.tar"`), `::`-separated paths, a glob,
    a list of those, or a folder of `.tar` files. Shards are indexed once at
    open (member offsets, as `wids`), so samples are read by random access:
    shuffling, exact resume and any world size work as for packs;
    `DataLoader(..., stream=N)` streams them instead, 64 shards at once
    (each read in order; `interleave=K` sets K), through a shuffle buffer
    of N samples. Shards at
    `s3://…` or `https://…` (named one by one or by a brace pattern) are
    fetched once into the cache folder (`ADAPT_CACHE_DIR`, bounded by
    `ADAPT_CACHE_BYTES`, shared by processes) and read from there, as
    Hugging Face's `load_dataset` downloads; with `HF_HUB_OFFLINE=1`,
    `HF_DATASETS_OFFLINE=1` or `ADAPT_OFFLINE=1` they are read from the
    cache without the network (one not cached is an error naming its URL).
    Gzip-compressed shards (`.tar.gz`, `.tgz`, as `TarWriter(...,
    compress=True)` writes) are decompressed once into the cache folder's
    `unpacked/` and read from there like `.tar` ones (gzip has no random
    access; the copies take their uncompressed size and are not evicted).
    `split="train"` reads a folder's `train-*.tar` (or `.tar.gz`, `.tgz`;
    or `data/train-*`, `train/*`, `*/train/*`).

    `text="txt"` (or `"json"`, read as its text) reads each sample's
    caption member too, which every sample must have: `ds[i]` is then
    `(image, label, text)`, as webdataset's `to_tuple("jpg", "cls", "txt")`,
    and a `DataLoader` over it yields `(images, labels, texts)`, `texts`
    the batch's captions as a list of str (what torch's `default_collate`
    makes of strings).
    """

    kind = "webdataset"
    _exts = (".tar", ".tar.gz", ".tgz")
    _what = "WebDataset shard"
    _image_hint = "an extension such as 'jpg' or 'jpg;png'"
    _label_hint = "an extension such as 'cls'"

    _text_hint = "an extension such as 'txt' or 'json'"

    def __init__(self, urls, image="jpg;jpeg;png;webp", label="cls", *, text=None, split=None,
                 resize=None):
        super().__init__(urls, image, label, text=text, split=split, resize=resize)


class Parquet(_Files):
    """Parquet files in the Hugging Face layout read in place: `image` names
    the image column (a `{bytes, path}` struct, as the `datasets` `Image`
    feature stores it, or a binary column; a row with null bytes is read
    from the file its `path` names, beside the Parquet file or as written,
    as `datasets` keeps images it was given as files), `label` the integer label
    column (`None` for unlabelled data, labels -1; a null label reads as
    -1). `classes` are the `ClassLabel` names when the files carry the
    `huggingface` metadata.

    `urls` names the files as `data_files` does: a path, a glob
    (`"data/train-*.parquet"`), a brace pattern, a list of those, or a
    folder holding one split (`data/` with both `train-*` and `test-*`
    files is refused: name the split's files). Row groups are the unit of
    reading: a read decodes its row group's image column once into a
    bounded cache; `DataLoader(..., stream=N)` streams row groups instead,
    16 at once (`interleave=K` sets K), through a shuffle buffer of N samples, which a shuffled
    dataset larger than the cache needs. Files at `s3://…` or `https://…`
    (the Hub's `…/resolve/refs%2Fconvert%2Fparquet/…` URLs, one by one or
    by a brace pattern; `HF_TOKEN` is sent to huggingface.co) are fetched
    once into the cache folder, as for WebDataset.
    `split="test"` reads a folder's split as the Hub lays it out
    (`data/test-*.parquet`, `test-*`, `test/*`, or `refs/convert/parquet`'s
    `CONFIG/test/*.parquet`).

    `text="text"` names a string column (captions) read at open and held
    in memory: `ds[i]` is then `(image, label, text)` and a `DataLoader`
    yields `(images, labels, texts)`, as for `WebDataset(..., text=...)`;
    a null text fails the read of its row, naming it.
    """

    kind = "parquet"
    _exts = (".parquet",)
    _what = "Parquet file"
    _image_hint = "a column name such as 'image'"
    _label_hint = "a column name such as 'label'"

    _text_hint = "a string column's name such as 'text'"

    def __init__(self, urls, image="image", label="label", *, text=None, split=None, resize=None):
        if (type(urls).__module__ or "").startswith("datasets"):
            raise TypeError(f"Parquet takes Parquet files; a datasets.{type(urls).__name__} is "
                            "read from its own Arrow files by adapt.datasets.HuggingFace(ds)")
        super().__init__(urls, image, label, text=text, split=split, resize=resize)


class HuggingFace(_Files):
    """A Hugging Face `datasets.Dataset` read from its own Arrow files, in
    Rust: memory-mapped, no Python per sample, so `adapt.DataLoader` runs it
    with adapt's workers and `transform=` steps. `dataset` is a `Dataset`
    (one split; a `DatasetDict` is refused, naming its splits), the folder
    `save_to_disk` wrote (`load_from_disk`'s argument), or `.arrow` files.
    `image` names the `Image` column (embedded bytes, or a path-only row
    read from its file, as `load_dataset("imagefolder")` keeps them),
    `label` the integer (`ClassLabel`) column, whose names are `.classes`;
    `text` a string column, as for `Parquet`. `ds[i]` and the batches are
    the images `datasets` decodes, as RGB.

    The Dataset's files are read as they are: a Dataset with an indices
    mapping (after `select`, `shuffle`, `filter`, `train_test_split`) is
    refused (`flatten_indices()` writes one without it; adapt shuffles
    itself), and so is one with `with_transform`/`set_transform` (adapt
    would skip it: use `transform=` steps, or give the Dataset to
    `adapt.DataLoader` as a Python dataset). A Dataset held only in memory
    (`from_dict`, `from_list`) has no files: `save_to_disk` it first."""

    kind = "arrow"
    _exts = (".arrow",)
    _what = "Arrow file"
    _image_hint = "a column name such as 'image'"
    _label_hint = "a column name such as 'label'"
    _text_hint = "a string column's name such as 'text'"

    def __init__(self, dataset, image="image", label="label", *, text=None, resize=None):
        super().__init__(_arrow_files(dataset), image, label, text=text, resize=resize)


def _arrow_files(dataset):
    """The Arrow files of a `datasets.Dataset`, or `dataset` itself (paths)."""
    if isinstance(dataset, (str, os.PathLike, list, tuple)):
        return dataset
    kind = type(dataset).__name__
    module = type(dataset).__module__ or ""
    if not module.startswith("datasets"):
        raise TypeError(f"HuggingFace takes a datasets.Dataset, a save_to_disk folder or .arrow "
                        f"files, not {kind}")
    if kind in ("DatasetDict", "IterableDatasetDict"):
        raise TypeError(f"a {kind} of splits {sorted(dataset)}: give one split "
                        f"(HuggingFace(ds[{sorted(dataset)[0]!r}]))")
    if kind == "IterableDataset":
        raise TypeError("an IterableDataset (streaming=True) has no local files: load it without "
                        "streaming, or give it to adapt.DataLoader as an iterable dataset")
    if getattr(dataset, "_indices", None) is not None:
        raise ValueError("this Dataset has an indices mapping (from select, shuffle, filter or "
                         "train_test_split) over its files: call ds.flatten_indices() first, or "
                         "give the Dataset before shuffling (adapt.DataLoader shuffles itself)")
    if getattr(dataset, "format", {}).get("type") == "custom":
        raise ValueError("this Dataset has a with_transform/set_transform, which reading its files "
                         "would skip: give adapt's steps as transform=, or pass the Dataset to "
                         "adapt.DataLoader as a Python dataset")
    files = [f["filename"] for f in getattr(dataset, "cache_files", [])]
    if not files:
        raise ValueError("this Dataset lives in memory (from_dict, from_list, ...) and has no "
                         "Arrow files: ds.save_to_disk(path), then HuggingFace(path)")
    return files


class CelebADigiFace(_Spec):
    """A folder holding `celeba/` and `digiface/`, labels kept apart, both at 112×112."""

    kind = "celeba+digiface"


class Concat(_Spec):
    """Datasets read one after the other (labels unchanged), as PyTorch's ConcatDataset."""

    kind = "concat"

    def __init__(self, parts):
        parts = list(parts)
        if not parts or not all(isinstance(p, _Spec) for p in parts):
            raise TypeError("Concat takes adapt datasets")
        texts = {p.has_text for p in parts}
        if len(texts) > 1:
            raise ValueError("Concat of datasets with and without text: give every part a text "
                             "field (WebDataset(..., text='txt')) or none")
        self.parts = parts
        self.has_text = texts == {True}
        self.root = ""
        self.resize = None
        self._opened = None

    def _spec(self):
        return {
            "kind": "concat",
            "path": "",
            "test_split": False,
            "resize": None,
            "parts": [p._spec() for p in self.parts],
        }

    def __repr__(self):
        return f"Concat({self.parts!r})"
