"""Parquet written by pyarrow itself in the Hugging Face layout (an `image`
struct of `{bytes, path}`, an integer label, the `huggingface` metadata
naming the `ClassLabel`), read by `adapt.datasets.Parquet`: the samples
equal what pyarrow reads (pixels and labels), for any compression, page
encoding and row-group size pyarrow writes, and load in batches the same
for any worker count, random access or streamed by row group."""

import io
import json

import numpy as np
import pytest

import adapt

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
PIL = pytest.importorskip("PIL.Image")

NAMES = ["ant", "bee", "cat", "dog"]


def _image(i):
    rng = np.random.default_rng(i)
    return rng.integers(0, 256, size=(10 + i % 4, 14, 3), dtype=np.uint8)


def _png(i):
    out = io.BytesIO()
    PIL.fromarray(_image(i)).save(out, format="PNG")
    return out.getvalue()


def _hf_table(rows, labels=None):
    """A table as `datasets` gives an Image + ClassLabel dataset."""
    images = pa.array([{"bytes": _png(i), "path": f"{i}.png"} for i in rows],
                      type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    labels = [i % 4 for i in rows] if labels is None else labels
    features = {"info": {"features": {"image": {"_type": "Image"},
                                      "label": {"names": NAMES, "_type": "ClassLabel"}}}}
    table = pa.table({"image": images, "label": pa.array(labels, type=pa.int64())})
    return table.replace_schema_metadata({"huggingface": json.dumps(features)})


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """`data/train-0000N-of-00003.parquet` (35 rows: 15, 15, 5, row groups
    of 4, each file another codec) and `data/test-00000-of-00001.parquet`."""
    d = tmp_path_factory.mktemp("hub")
    (d / "data").mkdir()
    for n, (start, stop, codec) in enumerate([(0, 15, "snappy"), (15, 30, "zstd"), (30, 35, "gzip")]):
        pq.write_table(_hf_table(range(start, stop)), d / "data" / f"train-{n:05d}-of-00003.parquet",
                       row_group_size=4, compression=codec)
    pq.write_table(_hf_table(range(100, 103)), d / "data" / "test-00000-of-00001.parquet")
    return d


def test_samples_equal_pyarrows_reading(hub):
    train = str(hub / "data" / "train-*.parquet")
    theirs = pq.read_table(sorted((hub / "data").glob("train-*.parquet"))).to_pylist()
    ours = adapt.datasets.Parquet(train)
    assert len(ours) == len(theirs) == 35
    for i, row in enumerate(theirs):
        pixels, label = ours[i]
        expected = np.asarray(PIL.open(io.BytesIO(row["image"]["bytes"])).convert("RGB"))
        np.testing.assert_array_equal(pixels, expected)
        np.testing.assert_array_equal(pixels, _image(i))
        assert label == row["label"] == i % 4
    assert ours.classes == NAMES
    assert ours.targets == [i % 4 for i in range(35)]
    # A brace pattern and a list name the same files; the folder holds two
    # splits and is refused, naming them.
    brace = str(hub / "data" / "train-{00000..00002}-of-00003.parquet")
    assert len(adapt.datasets.Parquet(brace)) == 35
    assert len(adapt.datasets.Parquet(sorted(str(p) for p in (hub / "data").glob("t*.parquet")))) == 38
    with pytest.raises(adapt.DataError, match="the splits test, train"):
        len(adapt.datasets.Parquet(str(hub)))


def test_binary_columns_other_names_nulls_and_dictionary_pages(tmp_path):
    # A raw binary image column, an int32 label named `cls` with a null,
    # dictionary-encoded pages, page-format v2, one row group per row.
    path = tmp_path / "raw.parquet"
    table = pa.table({"img": pa.array([_png(i) for i in range(6)], type=pa.binary()),
                      "cls": pa.array([3, None, 1, 0, 2, 2], type=pa.int32())})
    pq.write_table(table, path, row_group_size=1, use_dictionary=True, data_page_version="2.0")
    ds = adapt.datasets.Parquet(str(path), image="img", label="cls")
    assert len(ds) == 6
    assert [ds[i][1] for i in range(6)] == [3, -1, 1, 0, 2, 2]
    for i in range(6):
        np.testing.assert_array_equal(ds[i][0], _image(i))
    with pytest.raises(AttributeError, match="no class names"):
        ds.classes
    unlabelled = adapt.datasets.Parquet(str(path), image="img", label=None)
    assert unlabelled[0][1] == -1


def test_bad_files_name_the_file_column_and_row(tmp_path):
    path = tmp_path / "x.parquet"
    table = pa.table({"image": pa.array([{"bytes": _png(0), "path": None}, {"bytes": None, "path": "lost.png"},
                                         {"bytes": b"not an image", "path": None}],
                                        type=pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                      "label": pa.array([0, 1, 2], type=pa.int64())})
    pq.write_table(table, path)
    ds = adapt.datasets.Parquet(str(path))
    assert ds[0][1] == 0
    # A bad row fails its own read only (a SampleError), naming the row.
    # Row 1 stores only a path, to a file that is not there.
    with pytest.raises(adapt.SampleError, match=r"x\.parquet \(row group 0, row 1\): the image path \"lost\.png\""):
        ds[1]
    with pytest.raises(adapt.SampleError, match=r"x\.parquet \(row group 0, row 2\)"):
        ds[2]
    with pytest.raises(adapt.DataError, match=r"no label column \"target\" \(the file's columns: image\.bytes, image\.path, label\)"):
        len(adapt.datasets.Parquet(str(path), label="target"))
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(adapt.DataError, match=r"cut\.parquet: not a readable Parquet file"):
        len(adapt.datasets.Parquet(str(cut)))
    with pytest.raises(ValueError, match="brace pattern"):
        adapt.datasets.Parquet("https://huggingface.co/datasets/x/resolve/main/data/train-*.parquet")
    with pytest.raises(FileNotFoundError, match="no file matches"):
        adapt.datasets.Parquet(str(tmp_path / "none-*.parquet"))


def _epoch(loader):
    return [(np.asarray(b[0]).tobytes(), np.asarray(b[1]).tobytes()) for b in loader]


@pytest.mark.parametrize("stream", [None, 8])
def test_batches_are_the_same_for_any_worker_count(hub, stream):
    ds = adapt.datasets.Parquet(str(hub / "data" / "train-*.parquet"))
    base = None
    for workers in (0, 1, 3):
        loader = adapt.DataLoader(ds, batch_size=6, shuffle=True, num_workers=workers, seed=3,
                                  transform="random_crop(8),hflip", output="u8", stream=stream)
        got = _epoch(loader)
        assert len(got) == 6
        if base is None:
            base = got
        assert got == base, f"{workers} workers, stream {stream}"
    labels = sorted(int(x) for _, lab in base for x in np.frombuffer(lab, dtype=np.int64))
    assert labels == sorted(i % 4 for i in range(35))


def test_split_picks_a_splits_files_as_the_hub_lays_them_out(hub, tmp_path):
    # `data/train-*` found from the dataset's folder and from `data/`.
    assert len(adapt.datasets.Parquet(str(hub), split="train")) == 35
    test = adapt.datasets.Parquet(str(hub / "data"), split="test")
    assert len(test) == 3 and test.targets == [100 % 4, 101 % 4, 102 % 4]
    assert "split='test'" in repr(test)
    # refs/convert/parquet: CONFIG/SPLIT/0000.parquet.
    (tmp_path / "default" / "validation").mkdir(parents=True)
    pq.write_table(_hf_table(range(7)), tmp_path / "default" / "validation" / "0000.parquet")
    assert len(adapt.datasets.Parquet(str(tmp_path), split="validation")) == 7
    with pytest.raises(FileNotFoundError, match="split 'dev'.*looked for dev-\\*.parquet"):
        adapt.datasets.Parquet(str(hub), split="dev")
    with pytest.raises(ValueError, match="split= picks a split's files in a folder"):
        adapt.datasets.Parquet(str(hub / "data" / "train-*.parquet"), split="train")
    with pytest.raises(TypeError, match="split must be"):
        adapt.datasets.Parquet(str(hub), split="a/b")


def test_the_hubs_parquet_urls_are_fetched_and_read_as_local_files(hub, http_folder, tmp_path):
    # The Hub's conversion URLs hold an escaped ref (`refs%2Fconvert%2Fparquet`);
    # http.server unescapes it to folders, as the Hub resolves it to the ref.
    site = tmp_path / "site"
    files = site / "datasets" / "u" / "d" / "resolve" / "refs" / "convert" / "parquet" / "default" / "train"
    files.mkdir(parents=True)
    for n in range(3):
        src = hub / "data" / f"train-{n:05d}-of-00003.parquet"
        (files / f"{n:04d}.parquet").write_bytes(src.read_bytes())
    url = http_folder(site) + "/datasets/u/d/resolve/refs%2Fconvert%2Fparquet/default/train/{0000..0002}.parquet"
    remote = adapt.datasets.Parquet(url)
    local = adapt.datasets.Parquet(str(hub / "data" / "train-*.parquet"))
    assert len(remote) == len(local) == 35
    assert remote.classes == local.classes
    for i in range(35):
        np.testing.assert_array_equal(remote[i][0], local[i][0])
        assert remote[i][1] == local[i][1]


def test_a_text_column_comes_with_each_sample_and_batch(tmp_path):
    # A caption column as image-text datasets on the Hub have it (string,
    # one null, dictionary-encoded by pyarrow's default).
    rows = range(12)
    captions = [None if i == 7 else f"a picture, number {i} ✓" for i in rows]
    table = _hf_table(rows).append_column("caption", pa.array(captions, type=pa.string()))
    pq.write_table(table, tmp_path / "train-00000-of-00001.parquet", row_group_size=5)
    ds = adapt.datasets.Parquet(str(tmp_path), text="caption")
    theirs = pq.read_table(tmp_path / "train-00000-of-00001.parquet").to_pylist()
    for i in (0, 6, 11):
        pixels, label, text = ds[i]
        np.testing.assert_array_equal(pixels, _image(i))
        assert (label, text) == (theirs[i]["label"], theirs[i]["caption"])
    with pytest.raises(adapt.SampleError, match=r"row group 1, row 2\).*caption is null"):
        ds[7]
    kw = dict(batch_size=4, shuffle=True, seed=2, transform="random_crop(8)", output="u8")
    # The batch holding the null row fails, naming it.
    with pytest.raises(adapt.SampleError, match="caption is null"):
        list(adapt.DataLoader(ds, **kw))
    # Without the null: each batch's texts in its order, the same for any
    # worker count, random and streamed.
    clean = tmp_path / "clean"
    clean.mkdir()
    table = _hf_table(rows).append_column("caption", pa.array([f"a picture, number {i} ✓" for i in rows]))
    pq.write_table(table, clean / "train-00000-of-00001.parquet", row_group_size=5)
    for stream in (None, 4):
        epochs = []
        for workers in (0, 2):
            loader = adapt.DataLoader(adapt.datasets.Parquet(str(clean), text="caption"),
                                      num_workers=workers, stream=stream, **kw)
            epoch = [(labels.tolist(), texts) for _, labels, texts in loader]
            for labels, texts in epoch:
                assert [int(t.split()[-2]) % 4 for t in texts] == labels
            assert sorted(t for _, texts in epoch for t in texts) == sorted(
                f"a picture, number {i} ✓" for i in rows)
            epochs.append(epoch)
        assert epochs[0] == epochs[1]
    with pytest.raises(adapt.DataError, match=r"no text column \"nope\""):
        len(adapt.datasets.Parquet(str(tmp_path), text="nope"))
    with pytest.raises(adapt.DataError, match="the text column label is INT64, not a string"):
        len(adapt.datasets.Parquet(str(tmp_path), text="label"))


def test_images_stored_as_paths_only_are_read_from_their_files(tmp_path):
    # `datasets` keeps an Image it was given as a file as {bytes: None,
    # path} unless asked to embed it (push_to_hub does): read the file,
    # beside the Parquet file or as written.
    (tmp_path / "img").mkdir()
    absolute = tmp_path / "elsewhere"
    absolute.mkdir()
    rows = []
    for i in range(6):
        target = (tmp_path / "img" / f"{i}.png") if i % 2 else (absolute / f"{i}.png")
        target.write_bytes(_png(i))
        path = f"img/{i}.png" if i % 2 else str(target)
        rows.append({"bytes": _png(i) if i == 4 else None, "path": path})
    images = pa.array(rows, type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    pq.write_table(pa.table({"image": images, "label": pa.array([i % 4 for i in range(6)])}),
                   tmp_path / "train-00000-of-00001.parquet", row_group_size=4)
    ds = adapt.datasets.Parquet(str(tmp_path / "train-00000-of-00001.parquet"))
    for i in range(6):
        pixels, label = ds[i]
        np.testing.assert_array_equal(pixels, _image(i))
        assert label == i % 4
    kw = dict(batch_size=3, shuffle=True, seed=4, transform="random_crop(8)", output="u8")
    assert _epoch(adapt.DataLoader(ds, num_workers=2, **kw)) == _epoch(adapt.DataLoader(ds, **kw))
    (tmp_path / "img" / "3.png").unlink()
    with pytest.raises(adapt.SampleError, match=r"row group 0, row 3\): the image path \"img/3\.png\""):
        ds[3]
