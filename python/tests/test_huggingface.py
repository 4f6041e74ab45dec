"""Hugging Face `datasets` read natively (`adapt.datasets.HuggingFace`),
where `datasets` is installed: a Dataset's own Arrow files (embedded PNGs
from `from_dict`, path-only JPEGs from `load_dataset("imagefolder")`, a
`save_to_disk` folder) give the pixels, labels and class names `datasets`
decodes; what reading the files would get wrong is refused by name; and
`gen --dataset arrow` writes a folder `datasets.load_from_disk` opens."""

import subprocess
import sys

import numpy as np
import pytest

datasets = pytest.importorskip("datasets", reason="datasets is not installed: not tested here")
from PIL import Image  # noqa: E402

import adapt  # noqa: E402

NAMES = ["cat", "dog", "eel"]


def pictures(n, size=(12, 9)):
    rng = np.random.default_rng(4)
    return [rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8) for _ in range(n)]


@pytest.fixture
def saved(tmp_path):
    """A Dataset of 30 embedded PNGs (ClassLabel) saved to disk and loaded
    back, as a user has it."""
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=NAMES)})
    images = [Image.fromarray(a) for a in pictures(30)]
    ds = datasets.Dataset.from_dict({"image": images, "label": [i % 3 for i in range(30)]},
                                    features=features)
    ds.save_to_disk(str(tmp_path / "saved"), max_shard_size="2KB")
    return datasets.load_from_disk(str(tmp_path / "saved")), tmp_path / "saved"


def same_as_datasets(hf, ours, exact=True):
    assert len(ours) == len(hf)
    for i in range(len(hf)):
        want = np.asarray(hf[i]["image"].convert("RGB"))
        got, label = ours[i]
        assert label == hf[i]["label"], i
        if exact:
            assert np.array_equal(got, want), f"row {i}"
        else:  # JPEG: another decoder (chroma upsampling differs on noise)
            diff = np.abs(got.astype(int) - want)
            assert got.shape == want.shape and diff.mean() < 2.5, (i, diff.mean())


def test_a_saved_dataset_reads_as_datasets_decodes_it(saved):
    hf, folder = saved
    for source in (hf, str(folder)):
        ours = adapt.datasets.HuggingFace(source)
        same_as_datasets(hf, ours)
        assert ours.classes == NAMES
    assert len(hf.cache_files) > 1, "several Arrow files (max_shard_size)"
    loader = adapt.DataLoader(adapt.datasets.HuggingFace(hf), batch_size=8, shuffle=True,
                              num_workers=2, transform="random_crop(8),hflip", output="u8")
    seen = sorted(int(i) for data, _ in loader.batches() for i in data.indices())
    assert seen == list(range(30))


def test_path_only_images_from_an_imagefolder_load(tmp_path):
    root = tmp_path / "pics"
    for i, a in enumerate(pictures(12, (20, 14))):
        d = root / NAMES[i % 3]
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(a).save(d / f"{i}.png")
        Image.fromarray(a).save(d / f"{i}.jpg", quality=90)
    for ext, exact in (("png", True), ("jpg", False)):
        hf = datasets.load_dataset("imagefolder", data_files=str(root / f"*/*.{ext}"),
                                   split="train", cache_dir=str(tmp_path / f"cache-{ext}"))
        storage = hf.data.column("image").chunk(0)
        assert storage.field("bytes").null_count == len(hf), "datasets kept paths only"
        ours = adapt.datasets.HuggingFace(hf)
        same_as_datasets(hf, ours, exact)
        assert ours.classes == sorted(NAMES)


def test_what_reading_the_files_would_get_wrong_is_refused(saved, tmp_path):
    hf, _ = saved
    refusals = [
        (datasets.DatasetDict({"train": hf, "test": hf}), TypeError, "one split"),
        (hf.shuffle(seed=0), ValueError, "flatten_indices"),
        (hf.select([1, 0]), ValueError, "indices mapping"),
        (hf.with_transform(lambda b: b), ValueError, "with_transform"),
        (datasets.Dataset.from_dict({"image": [], "label": []}), ValueError, "save_to_disk"),
        (hf.to_iterable_dataset(), TypeError, "streaming"),
        ({"image": 1}, TypeError, "datasets.Dataset"),
    ]
    for source, error, words in refusals:
        with pytest.raises(error, match=words):
            adapt.datasets.HuggingFace(source)
    with pytest.raises(TypeError, match="HuggingFace"):
        adapt.datasets.Parquet(hf)
    assert len(adapt.datasets.HuggingFace(hf.shuffle(seed=0).flatten_indices())) == 30
    with pytest.raises(adapt.DataError, match="no image column \"img\""):
        len(adapt.datasets.HuggingFace(hf, image="img"))


def test_gen_writes_a_folder_load_from_disk_opens(tmp_path):
    out = tmp_path / "gen"
    # The package's own command line (built with the Arrow reader and writer).
    subprocess.run([sys.executable, "-m", "adapt", "gen", "--dataset", "arrow", "--count", "12",
                    "--classes", "3", "--size", "24x16", "--out", str(out)], check=True,
                   capture_output=True)
    hf = datasets.load_from_disk(str(out))
    ours = adapt.datasets.HuggingFace(str(out))
    same_as_datasets(hf, ours, exact=False)
    assert hf.features["label"].names == ours.classes


def test_the_readmes_huggingface_example_runs(jpegs, tmp_path, monkeypatch):
    from conftest import run_readme_example

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    run_readme_example("With Hugging Face datasets", tmp_path, imagenet=jpegs)


def test_transform_applies_to_the_image_field_of_a_datasets_row(saved):
    """A Dataset given as a Python dataset (rows {"image": PIL, "label": int})
    runs adapt's steps on its image field; the batch is a dict as
    default_collate makes it, pixel-equal to the native reader's."""
    hf, _ = saved
    loader = adapt.DataLoader(hf, batch_size=10, output="u8-nhwc", transform="hflip(p=1)")
    rows = list(loader)
    assert sorted(rows[0]) == ["image", "label"]
    got = np.concatenate([np.asarray(b["image"]) for b in rows])
    want = np.stack([np.asarray(hf[i]["image"].convert("RGB"))[:, ::-1] for i in range(len(hf))])
    assert np.array_equal(got, want)
    assert np.concatenate([np.asarray(b["label"]) for b in rows]).tolist() == hf["label"]
    native = adapt.DataLoader(adapt.datasets.HuggingFace(hf), batch_size=10, output="u8-nhwc",
                              transform="hflip(p=1)")
    assert np.array_equal(np.concatenate([np.asarray(b[0]) for b in native]), got)
