"""WebDataset shards written by the `webdataset` package itself (its
`ShardWriter` and `TarWriter`), read by `adapt.datasets.WebDataset`: the
samples equal what webdataset's own reader yields, in order, and load in
batches the same for any worker count, random access or streamed."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import adapt

wds = pytest.importorskip("webdataset")
PIL = pytest.importorskip("PIL.Image")


def _image(i):
    rng = np.random.default_rng(i)
    return rng.integers(0, 256, size=(12 + i % 5, 16, 3), dtype=np.uint8)


def _png(i):
    out = io.BytesIO()
    PIL.fromarray(_image(i)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """40 samples in shards of 15 (15, 15, 10), written by ShardWriter: a
    PNG (bytes), the class as an int (webdataset encodes it), a caption."""
    d = tmp_path_factory.mktemp("wds")
    with wds.ShardWriter(str(d / "train-%06d.tar"), maxcount=15, verbose=0) as sink:
        for i in range(40):
            sink.write({"__key__": f"sample{i:05d}", "png": _png(i), "cls": i % 4,
                        "txt": f"caption {i}"})
    return d


def test_samples_equal_webdatasets_own_reader(shards):
    urls = str(shards / "train-{000000..000002}.tar")
    theirs = list(wds.WebDataset(urls, shardshuffle=False).decode("rgb8").to_tuple("__key__", "png", "cls"))
    ours = adapt.datasets.WebDataset(urls, image="png", label="cls")
    assert len(ours) == len(theirs) == 40
    for i, (key, image, label) in enumerate(theirs):
        pixels, got_label = ours[i]
        assert key == f"sample{i:05d}"
        np.testing.assert_array_equal(pixels, image)
        np.testing.assert_array_equal(pixels, _image(i))
        assert got_label == label == i % 4
    assert ours.targets == [i % 4 for i in range(40)]
    # A folder, a list and a `::` list name the same shards.
    names = sorted(str(p) for p in shards.glob("*.tar"))
    for spec in (str(shards), names, "::".join(names)):
        assert len(adapt.datasets.WebDataset(spec)) == 40


def test_member_lists_are_kept_in_the_cache_folder(shards, tmp_path, monkeypatch):
    """#24: each shard's member list is kept in CACHE/index/ once listed;
    an open from the kept lists reads the same samples."""
    monkeypatch.setenv("ADAPT_CACHE_DIR", str(tmp_path / "cache"))
    first = adapt.datasets.WebDataset(str(shards), image="png")
    assert len(first) == 40
    lists = sorted((tmp_path / "cache" / "index").glob("*.idx"))
    assert len(lists) == 3, lists
    inodes = [p.stat().st_ino for p in lists]
    again = adapt.datasets.WebDataset(str(shards), image="png")
    assert len(again) == 40
    # A list written again is a new file (renamed into place): the same
    # inodes say the second open read the kept lists.
    assert sorted((tmp_path / "cache" / "index").glob("*.idx")) == lists
    assert [p.stat().st_ino for p in lists] == inodes
    for i in (0, 14, 15, 39):
        pixels, label = again[i]
        np.testing.assert_array_equal(pixels, _image(i))
        assert label == i % 4


def test_tarwriter_members_and_unlabelled_reads(tmp_path):
    # TarWriter encoding a PIL image as JPEG itself, and no label.
    path = tmp_path / "one.tar"
    with wds.TarWriter(str(path)) as sink:
        for i in range(3):
            sink.write({"__key__": f"k{i}", "jpg": PIL.fromarray(_image(i)), "json": {"i": i}})
    ds = adapt.datasets.WebDataset(str(path), label=None)
    assert len(ds) == 3
    theirs = list(wds.WebDataset(str(path), shardshuffle=False).decode("rgb8").to_tuple("jpg"))
    for i in range(3):
        pixels, label = ds[i]
        assert label == -1
        assert pixels.shape == theirs[i][0].shape
        # Two JPEG decoders: equal within a few levels, not bit for bit.
        assert np.abs(pixels.astype(int) - theirs[i][0].astype(int)).mean() < 2.0
    with pytest.raises(adapt.DataError, match=r"one\.tar: member k0: sample without a \.cls"):
        len(adapt.datasets.WebDataset(str(path)))


def test_gzip_compressed_shards_are_read_as_webdatasets_own_reader_reads_them(tmp_path,
                                                                             monkeypatch,
                                                                             http_folder):
    # ShardWriter gzips shards named .tar.gz (tarfile's "w|gz"); adapt
    # decompresses each once into the cache folder's unpacked/.
    monkeypatch.setenv("ADAPT_CACHE_DIR", str(tmp_path / "cache"))
    gz = tmp_path / "gz"
    gz.mkdir()
    with wds.ShardWriter(str(gz / "train-%06d.tar.gz"), maxcount=15, verbose=0) as sink:
        for i in range(40):
            sink.write({"__key__": f"sample{i:05d}", "png": _png(i), "cls": i % 4})
    urls = str(gz / "train-{000000..000002}.tar.gz")
    theirs = list(wds.WebDataset(urls, shardshuffle=False).decode("rgb8").to_tuple("png", "cls"))
    for spec in (urls, str(gz), str(gz / "*.tar.gz")):
        ours = adapt.datasets.WebDataset(spec, image="png")
        assert len(ours) == len(theirs) == 40
        for i, (image, label) in enumerate(theirs):
            np.testing.assert_array_equal(ours[i][0], image)
            assert ours[i][1] == label
    copies = sorted(p.name for p in (tmp_path / "cache" / "unpacked").glob("*.tar"))
    assert len(copies) == 3 and copies[0].startswith("train-000000-"), copies
    kw = dict(batch_size=8, shuffle=True, seed=5, transform="random_crop(8)", output="u8")
    a = _epoch(adapt.DataLoader(adapt.datasets.WebDataset(urls, image="png"), num_workers=2, **kw))
    plain = tmp_path / "plain"
    plain.mkdir()
    with wds.ShardWriter(str(plain / "train-%06d.tar"), maxcount=15, verbose=0) as sink:
        for i in range(40):
            sink.write({"__key__": f"sample{i:05d}", "png": _png(i), "cls": i % 4})
    assert a == _epoch(adapt.DataLoader(adapt.datasets.WebDataset(str(plain), image="png"), **kw))
    assert len(adapt.datasets.WebDataset(str(gz), split="train", image="png")) == 40
    # Over HTTP: fetched into the cache, then decompressed from there.
    remote = adapt.datasets.WebDataset(http_folder(gz) + "/train-{000000..000002}.tar.gz",
                                       image="png")
    assert [remote[i][1] for i in range(40)] == [label for _, label in theirs]
    np.testing.assert_array_equal(remote[39][0], theirs[39][0])
    (gz / "train-000003.tar.gz").write_bytes((gz / "train-000000.tar.gz").read_bytes()[:300])
    with pytest.raises(adapt.DataError, match=r"train-000003\.tar\.gz: cannot decompress"):
        len(adapt.datasets.WebDataset(str(gz / "train-000003.tar.gz"), image="png"))


def test_text_members_come_with_each_sample_and_batch(shards):
    # The fixture's `txt` member: "caption {i}".
    ds = adapt.datasets.WebDataset(str(shards), image="png", text="txt")
    theirs = list(wds.WebDataset(str(shards / "train-{000000..000002}.tar"), shardshuffle=False)
                  .decode("rgb8").to_tuple("png", "cls", "txt"))
    for i in (0, 17, 39):
        pixels, label, text = ds[i]
        np.testing.assert_array_equal(pixels, theirs[i][0])
        assert (label, text) == (theirs[i][1], theirs[i][2]) == (i % 4, f"caption {i}")
    assert "text='txt'" in repr(ds)
    for stream in (None, 8):
        base = None
        for workers in (0, 2):
            loader = adapt.DataLoader(ds, batch_size=6, shuffle=True, seed=1, num_workers=workers,
                                      transform="random_crop(10)", output="u8", stream=stream)
            got = [(np.asarray(x).tobytes(), list(y.tolist()), texts) for x, y, texts in loader]
            seen = [t for _, _, texts in got for t in texts]
            assert sorted(seen) == sorted(f"caption {i}" for i in range(40))
            for _, labels, texts in got:
                assert [int(t.split()[1]) % 4 for t in texts] == labels
            base = base or got
            assert got == base, f"{workers} workers, stream {stream}"
    with pytest.raises(adapt.DataError, match=r"\.json text member"):
        len(adapt.datasets.WebDataset(str(shards), image="png", text="json"))
    with pytest.raises(ValueError, match="with and without text"):
        adapt.datasets.Concat([ds, adapt.datasets.WebDataset(str(shards), image="png")])


def _epoch(loader):
    return [(np.asarray(b[0]).tobytes(), np.asarray(b[1]).tobytes()) for b in loader]


def test_the_command_line_reads_texts_with_text(shards, tmp_path):
    """#24: `--text` on the command line: inspect shows the sample's text,
    load reads every batch's (into its digest, its bytes counted); tune and
    pack, which read none, refuse it by name."""
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "adapt", *args], capture_output=True,
                              text=True, timeout=600)
    data = ["--dataset", "webdataset", "--path", str(shards), "--image", "png"]
    r = cli("inspect", *data, "--text", "txt", "--index", "17")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["text"] == "caption 17"
    assert "text" not in json.loads(cli("inspect", *data, "--index", "17").stdout)
    load = ["load", *data, "--resize", "16x12", "--batch-size", "8", "--shuffle",
            "--num-workers", "2"]
    with_text, without = (json.loads(cli(*load, *extra).stdout.splitlines()[-1])
                          for extra in (["--text", "txt"], []))
    assert with_text["text_bytes"] == sum(len(f"caption {i}") for i in range(40))
    assert "text_bytes" not in without and with_text["digest"] != without["digest"]
    r = cli(*load, "--text", "json")
    assert r.returncode == 1 and ".json" in r.stderr, r.stderr
    for verb in (["tune", *data], ["pack", *data, "--out", str(tmp_path / "p")]):
        r = cli(*verb, "--text", "txt")
        assert r.returncode == 1 and "--text" in r.stderr and "load --text" in r.stderr, r.stderr

@pytest.mark.parametrize("stream", [None, 8])
def test_batches_are_the_same_for_any_worker_count(shards, stream):
    ds = adapt.datasets.WebDataset(str(shards), image="png")
    base = None
    for workers in (0, 1, 3):
        loader = adapt.DataLoader(ds, batch_size=6, shuffle=True, num_workers=workers, seed=3,
                                  transform="random_crop(10),hflip", output="u8", stream=stream)
        got = _epoch(loader)
        assert len(got) == 7
        if base is None:
            base = got
        assert got == base, f"{workers} workers, stream {stream}"
    labels = sorted(int(x) for _, lab in base for x in np.frombuffer(lab, dtype=np.int64))
    assert labels == sorted(i % 4 for i in range(40))


def test_interleave_sets_the_shards_a_stream_reads_at_once(shards):
    ds = adapt.datasets.WebDataset(str(shards), image="png")

    def labels_in_order(**kw):
        loader = adapt.DataLoader(ds, batch_size=5, num_workers=2, seed=3, output="u8",
                                  transform="center_crop(10)", stream=8, **kw)
        return [int(x) for b in loader for x in np.frombuffer(np.asarray(b[1]).tobytes(), dtype=np.int64)]

    one, three = labels_in_order(interleave=1), labels_in_order(interleave=3)
    assert sorted(one) == sorted(three) == sorted(i % 4 for i in range(40))
    assert one != three
    assert labels_in_order() == labels_in_order(interleave=64)
    with pytest.raises(ValueError, match="interleave option should be positive"):
        adapt.DataLoader(ds, batch_size=5, stream=8, interleave=0)
    with pytest.raises(adapt.ConfigError, match="--stream"):
        adapt.DataLoader(ds, batch_size=5, interleave=2)
    with pytest.raises(ValueError, match="a Python dataset orders its own samples"):
        adapt.DataLoader(list(range(10)), batch_size=5, interleave=2)


def test_damaged_shards_name_the_shard_and_member(shards, tmp_path):
    data = (shards / "train-000000.tar").read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[:len(data) // 2 + 100])
    with pytest.raises(adapt.DataError, match=r"cut\.tar: member .*truncated"):
        len(adapt.datasets.WebDataset(str(cut)))
    with pytest.raises(ValueError, match="brace pattern"):
        adapt.datasets.WebDataset("https://example.org/shards-*.tar")
    with pytest.raises(adapt.DataError, match="none-0.tar"):
        len(adapt.datasets.WebDataset(str(tmp_path / "none-{0..1}.tar")))


def test_shards_written_by_adapt_read_in_webdatasets_own_reader(cifar, tmp_path):
    # `pack --format webdataset` hands a dataset to other tools: the
    # reference reader sees every source sample once, pixels and label.
    from adapt.__main__ import main

    out = tmp_path / "wds"
    assert main(["pack", "--dataset", "cifar10", "--path", str(cifar), "--out", str(out),
                 "--format", "webdataset", "--shard-size", "256"]) == 0
    names = sorted(str(p) for p in out.glob("train-*.tar"))
    assert len(names) == 3  # 600 samples, 256 a shard
    source = adapt.datasets.CIFAR10(str(cifar))
    seen = set()
    for key, image, label in wds.WebDataset(names, shardshuffle=False).decode("rgb8").to_tuple(
            "__key__", "png", "cls"):
        i = int(key)
        pixels, want = source[i]
        np.testing.assert_array_equal(image, pixels)
        assert label == want
        seen.add(i)
    assert seen == set(range(len(source)))
    # Written again without --overwrite: refused.
    assert main(["pack", "--dataset", "cifar10", "--path", str(cifar), "--out", str(out),
                 "--format", "webdataset"]) != 0


def test_split_picks_a_folders_shards(shards, tmp_path):
    import shutil

    for split in ("train", "test"):
        (tmp_path / split).mkdir()
    for p in sorted(shards.glob("train-*.tar"))[:2]:
        shutil.copy(p, tmp_path / "train" / p.name)
    shutil.copy(sorted(shards.glob("train-*.tar"))[2], tmp_path / "test" / "test-000000.tar")
    train = adapt.datasets.WebDataset(str(tmp_path), split="train", image="png")
    test = adapt.datasets.WebDataset(str(tmp_path), split="test", image="png")
    assert len(train) + len(test) == 40 and len(test) > 0
    with pytest.raises(FileNotFoundError, match="no WebDataset shards of split 'val'"):
        adapt.datasets.WebDataset(str(tmp_path), split="val")


@pytest.fixture
def served(shards, http_folder):
    return http_folder(shards)


def test_shards_over_http_are_fetched_and_read_as_local_ones(shards, served):
    local = adapt.datasets.WebDataset(str(shards / "train-{000000..000002}.tar"), image="png")
    remote = adapt.datasets.WebDataset(served + "/train-{000000..000002}.tar", image="png")
    assert len(remote) == 40
    for i in range(40):
        np.testing.assert_array_equal(remote[i][0], local[i][0])
        assert remote[i][1] == local[i][1]
    kw = dict(batch_size=8, shuffle=True, seed=5, transform="random_crop(8)", output="u8")
    ours = [(np.asarray(x).tobytes(), np.asarray(y).tobytes()) for x, y in adapt.DataLoader(remote, num_workers=2, **kw)]
    theirs = [(np.asarray(x).tobytes(), np.asarray(y).tobytes()) for x, y in adapt.DataLoader(local, **kw)]
    assert ours == theirs
    with pytest.raises(adapt.DataError, match="train-000009.tar"):
        len(adapt.datasets.WebDataset(served + "/train-000009.tar"))


@pytest.mark.parametrize("variable", ["HF_HUB_OFFLINE", "ADAPT_OFFLINE"])
def test_offline_the_cached_shards_are_read_with_the_server_gone(shards, http_folder, monkeypatch,
                                                                   variable):
    base = http_folder(shards)
    online = adapt.datasets.WebDataset(base + "/train-{000000..000001}.tar", image="png")
    want = [online[i][1] for i in range(len(online))]
    http_folder.stop()
    monkeypatch.setenv(variable, "1")
    offline = adapt.datasets.WebDataset(base + "/train-{000000..000001}.tar", image="png")
    assert [offline[i][1] for i in range(len(offline))] == want
    with pytest.raises(adapt.DataError, match=r"train-000002.tar: not in the cache folder .*offline"):
        len(adapt.datasets.WebDataset(base + "/train-{000000..000002}.tar", image="png"))
