"""adapt.DataLoader from Python: the same bytes as `cargo xtask load`,
zero copy, ranks from the launcher, checkpoints, errors and interrupts.
CI has no torch: everything here is numpy; torch interop is in
test_torch.py and runs only where torch is installed."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import adapt

RECIPE = "random_crop(32,padding=4),hflip,normalize(cifar10)"


def digest(images, labels):
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.asarray(labels, dtype="<i8").tobytes())
    return h.hexdigest()


def xtask_batches(xtask, path, args):
    out = subprocess.run([xtask, "load", "--dataset", "cifar10", "--path", str(path),
                          "--print-batches", *args], check=True, capture_output=True, text=True)
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    return [(l["epoch"], l["indices"], l["sha256"]) for l in lines if "batch" in l]


def ours(loader, epochs):
    got = []
    for e in range(epochs):
        loader.set_epoch(e)
        for data, labels in loader.batches():
            got.append((e, data.indices(), digest(data.array(), labels)))
    return got


@pytest.mark.parametrize("knobs", [
    dict(num_workers=0),
    dict(num_workers=1, prefetch_factor=1),
    dict(num_workers=2, prefetch_factor=4, persistent_workers=True),
])
@pytest.mark.parametrize("transform,output", [(None, "f32"), (RECIPE, "f32"),
                                              ("random_crop(32,padding=4),hflip", "u8-nhwc")])
def test_batches_are_byte_identical_to_cargo_xtask_load(xtask, cifar, knobs, transform, output):
    args = ["--batch-size", "64", "--shuffle", "--seed", "7", "--epochs", "2", "--output", output]
    if transform:
        args += ["--transform", transform]
    want = xtask_batches(xtask, cifar, args)
    loader = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=64, shuffle=True, seed=7,
                              transform=transform, output=output, **knobs)
    assert len(loader) == 10
    assert ours(loader, 2) == want


def test_batches_are_views_of_the_loader_buffers_and_memory_stays_flat(cifar):
    loader = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=100, num_workers=2,
                              persistent_workers=True, transform=RECIPE)
    for data, labels in loader.batches():
        images = data.array()
        assert not images.flags.owndata, "the array does not own a copy"
        assert images.base is data
        assert images.__array_interface__["data"][0] == data.address()
        assert images.shape == (100, 3, 32, 32) and images.dtype == np.float32

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    for _ in range(3):  # warm the pool
        for images, labels in loader:
            pass
    before = rss()
    for _ in range(20):
        for images, labels in loader:
            assert images.shape[1:] == (3, 32, 32)
    grown = rss() - before
    # 20 epochs of 6 batches of 1.2 MB went through: buffers are recycled.
    assert grown < 8 << 20, f"memory grew by {grown} bytes"


def test_held_batches_keep_their_data(cifar):
    loader = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=50, num_workers=2)
    # np.array: batches are torch tensors where torch imports.
    held = [(images, np.array(images, copy=True)) for images, _ in loader]
    assert len(held) == 12
    for view, copy in held:
        np.testing.assert_array_equal(np.asarray(view), copy)


def test_dlpack_exports_the_buffer_without_a_copy(cifar):
    loader = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=8, output="u8")
    for data, _ in loader.batches():
        arr = np.from_dlpack(data)
        assert arr.__array_interface__["data"][0] == data.address()
        np.testing.assert_array_equal(arr, data.array())
        assert arr.shape == (8, 3, 32, 32) and arr.dtype == np.uint8
        break
    assert data.__dlpack_device__() == (1, 0)


def run_rank(cifar, rank, world):
    script = textwrap.dedent(f"""
        import json, adapt
        loader = adapt.DataLoader(adapt.datasets.CIFAR10({str(cifar)!r}), batch_size=32,
                                  shuffle=True, num_workers=1, distributed="auto")
        print(json.dumps({{"launch": loader.launch,
                          "indices": [i for d, _ in loader.batches() for i in d.indices()]}}))
    """)
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    return subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)


def test_ranks_from_the_launcher_split_the_epoch():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([__import__("conftest").xtask_binary(), "gen", "--dataset", "cifar10",
                        "--count", "300", "--out", d], check=True, capture_output=True)
        procs = [run_rank(d, r, 2) for r in range(2)]
        outs = [json.loads(p.communicate()[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    a, b = (set(o["indices"]) for o in outs)
    assert outs[0]["launch"][:2] == [0, 2] and outs[0]["launch"][4] == "torchrun"
    assert a.isdisjoint(b) and a | b == set(range(300))


def test_state_dict_resumes_exactly(cifar):
    def make():
        return adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=40, shuffle=True,
                                num_workers=2, transform=RECIPE)
    full = make()
    full.set_epoch(3)
    want = [digest(i, l) for i, l in full]
    first = make()
    first.set_epoch(3)
    it = iter(first)
    head = [digest(*next(it)) for _ in range(6)]
    state = json.loads(json.dumps(first.state_dict()))
    second = make()
    second.load_state_dict(state)
    tail = [digest(i, l) for i, l in second]
    assert head + tail == want
    bad = make()
    with pytest.raises(adapt.CheckpointError):
        bad.load_state_dict({"adapt_loader_state": state["adapt_loader_state"].replace('"epoch": 3', '"epoch": 4')})
        list(bad)


def test_errors_are_typed_and_keep_the_message(cifar, jpegs, tmp_path):
    ds = adapt.datasets.CIFAR10(cifar)
    with pytest.raises(adapt.ConfigError, match=r"blur\(3\)"):
        adapt.DataLoader(ds, transform="hflip,blur(3)")
    with pytest.raises(adapt.ConfigError, match="larger than the padded"):
        adapt.DataLoader(ds, transform="random_crop(64,padding=4)")
    with pytest.raises(adapt.ConfigError, match="prefetch_factor"):
        adapt.DataLoader(ds, prefetch_factor=2)
    with pytest.raises(adapt.ConfigError, match="persistent_workers"):
        adapt.DataLoader(ds, persistent_workers=True)
    with pytest.raises(adapt.DataError, match="does not exist"):
        adapt.DataLoader(adapt.datasets.CIFAR10(tmp_path / "absent"))
    with pytest.raises(TypeError, match="map-style dataset"):
        adapt.DataLoader(42)
    # A corrupt image: the error names the file.
    victim = sorted(p for p in jpegs.rglob("*.JPEG"))[5]
    broken = tmp_path / "broken"
    import shutil
    shutil.copytree(jpegs, broken)
    target = broken / victim.relative_to(jpegs)
    target.write_bytes(target.read_bytes()[:200])
    loader = adapt.DataLoader(adapt.datasets.ImageFolder(broken), batch_size=4, num_workers=2,
                              transform="resize(32x32)")
    with pytest.raises(adapt.SampleError, match=target.name):
        list(loader)
    assert issubclass(adapt.SampleError, adapt.AdaptError)


def test_ctrl_c_ends_the_epoch_promptly_and_the_loader_stays_usable(xtask, tmp_path):
    big = tmp_path / "big"
    subprocess.run([xtask, "gen", "--dataset", "imagefolder", "--count", "16", "--classes", "2",
                    "--size", "1600x1200", "--out", str(big)], check=True, capture_output=True)
    script = textwrap.dedent(f"""
        import signal, sys, time, adapt
        # A process started in the background by a non-interactive shell
        # inherits SIGINT ignored, and Python then installs no handler:
        # put the default one back, as an interactive run has it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        loader = adapt.DataLoader(adapt.datasets.ImageFolder({str(big)!r}), batch_size=16,
                                  transform="resize(64x64)")
        print("ready", flush=True)
        try:
            while True:
                for _ in loader:
                    pass
        except KeyboardInterrupt:
            print("interrupted", time.monotonic(), flush=True)
        n = sum(len(l) for _, l in loader)
        print("usable", n, flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # inside a batch: 16 large JPEGs decode in one call
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    line = p.stdout.readline().split()
    assert line[0] == "interrupted"
    assert float(line[1]) - sent < 1.0, "Ctrl-C took effect within a second"
    assert p.stdout.readline().split() == ["usable", "16"]
    assert p.wait(timeout=60) == 0


def test_tune_returns_knobs_and_a_profile_builds_a_loader(cifar, tmp_path):
    profile = tmp_path / "profile.json"
    picks = adapt.tune(adapt.datasets.CIFAR10(cifar), transform=RECIPE, batch_size=64,
                       profile=profile, trial_samples=256, final_repeats=1, trial_seconds=None,
                       noise_repeats=2, step_ms=1)
    knobs = picks[64]
    assert set(knobs) == {"num_workers", "prefetch_factor", "pin_memory", "persistent_workers"}
    assert adapt.tune.last_report["dataset"]["pipeline"]["transforms"].startswith("random_crop")
    assert adapt.tune.last_report["strategy"]["threshold_from"] == "measured"
    assert len(adapt.tune.last_report["runs"][0]["noise"]["seconds"]) == 2
    loader = adapt.DataLoader.from_profile(profile, adapt.datasets.CIFAR10(cifar), batch_size=64,
                                           transform=RECIPE)
    assert loader.num_workers == knobs["num_workers"]
    with pytest.warns(UserWarning, match="no entry for this pipeline at batch size 64"):
        other = adapt.DataLoader.from_profile(profile, adapt.datasets.CIFAR10(cifar), batch_size=64)
    assert other.num_workers == 0, "no entry for another pipeline: PyTorch's defaults, said"
    with pytest.raises(adapt.ConfigError, match="batch size 32"):
        adapt.DataLoader.from_profile(profile, adapt.datasets.CIFAR10(cifar), batch_size=32,
                                      transform=RECIPE, strict=True)
    with pytest.raises(ValueError, match="no such profile"):
        adapt.DataLoader.from_profile(tmp_path / "absent.json", adapt.datasets.CIFAR10(cifar),
                                      strict=True)
    one = adapt.DataLoader.from_profile(profile, adapt.datasets.CIFAR10(cifar), batch_size=64,
                                        transform=RECIPE, num_workers=1)
    assert one.num_workers == 1 and one.prefetch_factor is None, "the profile's prefetch was for its own workers"


def test_autotune_keeps_the_data_settles_and_saves_to_the_profile(cifar, tmp_path):
    profile = tmp_path / "online.json"
    fixed = [bytes(memoryview(np.ascontiguousarray(b[0]))) for b in
             adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=2, shuffle=True, seed=3,
                              transform=RECIPE, output="u8")]
    loader = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=2, shuffle=True, seed=3,
                              transform=RECIPE, output="u8", autotune=True, autotune_profile=profile)
    got = []
    for data, _ in loader:
        got.append(bytes(memoryview(np.ascontiguousarray(data))))
        time.sleep(0.001)
    assert got == fixed, "the same batches through every switch"
    status = loader.autotune_status()
    assert len(status["tried"]) >= 3, status
    # 300 batches cover the whole descent up to 16 cores (worker tree of
    # height 6, prefetch tree of 3: at most 18 candidates of 10 batches):
    # it settles and saves.
    assert status["settled"] is not None, status
    assert json.loads(profile.read_text())["entries"][0]["strategy"]["search"] == "online"
    assert adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=2).autotune_status() is None


def test_tune_on_the_test_split_saves_an_entry_the_test_split_loader_finds(cifar, tmp_path):
    profile = tmp_path / "test-split.json"
    test = adapt.datasets.CIFAR10(cifar, train=False)
    picks = adapt.tune(test, batch_size=16, profile=profile, trial_samples=64, final_repeats=1,
                       trial_seconds=None, noise_repeats=0)
    assert adapt.tune.last_report["dataset"]["samples"] == 120, "the test split's records"
    loader = adapt.DataLoader.from_profile(profile, adapt.datasets.CIFAR10(cifar, train=False),
                                           batch_size=16)
    assert loader.num_workers == picks[16]["num_workers"]
    assert adapt.tune.last_report["dataset"]["pipeline"]["identity"] == \
        loader._backend.raw.info()["identity"]
    train = adapt.DataLoader.from_profile(profile, adapt.datasets.CIFAR10(cifar), batch_size=16)
    assert train._backend.raw.info()["identity"] != loader._backend.raw.info()["identity"]


def test_tune_on_a_concatenation_keys_the_profile_by_the_concatenation(cifar, tmp_path):
    profile = tmp_path / "concat.json"
    both = adapt.datasets.CIFAR10(cifar) + adapt.datasets.CIFAR10(cifar, train=False)
    adapt.tune(both, batch_size=16, profile=profile, trial_samples=64, final_repeats=1,
               trial_seconds=None, noise_repeats=0)
    assert adapt.tune.last_report["dataset"]["samples"] == 720
    loader = adapt.DataLoader.from_profile(profile, both, batch_size=16)
    assert adapt.tune.last_report["dataset"]["pipeline"]["identity"] == \
        loader._backend.raw.info()["identity"]


def test_the_command_line_ships_with_the_package(tmp_path, xtask):
    """`python -m adapt` has the xtask's verbs and flags, run by the same code:
    the data it generates and the digest of an epoch are the xtask's."""
    def cli(*args, cwd=None):
        return subprocess.run([sys.executable, "-m", "adapt", *args], capture_output=True,
                              text=True, cwd=cwd, timeout=600)
    help_text = cli("--help").stdout
    for verb in ("gen", "inspect", "load", "pack", "tune"):
        assert f"  {verb}" in help_text, help_text
    assert cli("frobnicate").returncode == 2
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert cli("gen", "--dataset", "cifar10", "--count", "50", "--out", str(ours)).returncode == 0
    subprocess.run([xtask, "gen", "--dataset", "cifar10", "--count", "50", "--out", str(theirs)],
                   check=True, capture_output=True)
    files = sorted(p.relative_to(theirs) for p in theirs.rglob("*.bin"))
    assert len(files) == 6
    for f in files:
        assert (ours / f).read_bytes() == (theirs / f).read_bytes(), f
    load = ["load", "--dataset", "cifar10", "--path", str(ours), "--batch-size", "8",
            "--shuffle", "--transform", "random_crop(32,padding=4),hflip"]
    a = cli(*load)
    b = subprocess.run([xtask, *load], capture_output=True, text=True, check=True)
    assert a.returncode == 0, a.stderr
    assert json.loads(a.stdout)["digest"] == json.loads(b.stdout)["digest"]
    pack = tmp_path / "pack"
    r = cli("pack", "--dataset", "cifar10", "--path", str(ours), "--out", str(pack),
            "--shard-size", "20")
    assert r.returncode == 0, r.stderr
    assert cli("shard", "--verify", str(pack)).returncode == 0
    r = cli("tune", "--dataset", "cifar10", "--path", str(ours), "--batch-size", "8",
            "--trial-samples", "32", "--trial-seconds", "0", "--noise-repeats", "0",
            "--final-repeats", "1", "--final-samples", "32", "--json", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["batch_size"] == 8
    r = cli("load", "--dataset", "cifar10", "--path", str(tmp_path / "absent"))
    assert r.returncode == 1 and "does not exist" in r.stderr


def _largest_scan(jpeg):
    """(start, end) of the largest entropy-coded segment of `jpeg`: the data
    after an SOS header up to the next marker that is not a restart."""
    scans, at = [], 0
    while (at := jpeg.find(b"\xff\xda", at)) >= 0:
        start = end = at + 2 + int.from_bytes(jpeg[at + 2:at + 4], "big")
        while not (jpeg[end] == 0xFF and jpeg[end + 1] not in (0, 0xFF, *range(0xD0, 0xD8))):
            end += 1
        scans.append((end - start, start, end))
        at = end
    return max(scans)[1:]


def test_a_jpeg_cut_and_closed_with_its_end_marker_is_refused_naming_it(tmp_path):
    """#26: PIL's encoder in the variants datasets hold (optimised tables,
    4:4:4 / 4:2:2 / 4:2:0, restart markers, progressive, greyscale) packs whole; the
    same file cut at half its scan data and closed with FF D9, which the
    decoder would fill with grey, is refused when packing and when loading
    (by default; ADAPT_STRICT_DECODE=0 opts out), naming the file."""
    from PIL import Image
    variants = [dict(quality=90), dict(quality=95, optimize=True),
                dict(quality=75, subsampling=0), dict(quality=80, subsampling=1),
                dict(quality=90, restart_marker_blocks=1), dict(quality=60, restart_marker_rows=1),
                dict(quality=85, progressive=True), dict(quality=90, progressive=True, optimize=True,
                                                         restart_marker_blocks=2)]
    rng = np.random.default_rng(26)
    root = tmp_path / "folder"
    for k, kw in enumerate(variants + [dict(quality=85)]):
        d = root / ("a" if k % 2 else "b")
        d.mkdir(parents=True, exist_ok=True)
        pixels = np.clip(np.linspace(0, 255, 48)[None, :, None] + rng.normal(0, 20, (40, 48, 3)),
                         0, 255).astype(np.uint8)
        image = Image.fromarray(pixels)
        if k == len(variants):
            image = image.convert("L")
        image.save(d / f"{k}.jpg", **kw)

    def cli(*args, env=None):
        return subprocess.run([sys.executable, "-m", "adapt", *args], capture_output=True,
                              text=True, timeout=600, env={**os.environ, **(env or {})})

    def pack(out):
        return cli("pack", "--dataset", "imagefolder", "--path", str(root), "--out",
                   str(tmp_path / out), "--store", "encoded", "--shard-size", "4")

    r = pack("whole")
    assert r.returncode == 0, r.stderr
    load = ["load", "--dataset", "imagefolder", "--path", str(root), "--batch-size", "7"]
    r = cli(*load)
    assert r.returncode == 0, r.stderr
    # baseline, restart markers, progressive (with restart markers), greyscale
    for k in (0, 4, 6, 7, len(variants)):
        victim = root / ("a" if k % 2 else "b") / f"{k}.jpg"
        whole = victim.read_bytes()
        start, end = _largest_scan(whole)
        victim.write_bytes(whole[:(start + end) // 2] + b"\xff\xd9")
        r = pack(f"cut{k}")
        assert r.returncode != 0 and f"{k}.jpg" in r.stderr and "truncated JPEG" in r.stderr, r.stderr
        r = cli(*load)
        assert r.returncode != 0 and f"{k}.jpg" in r.stderr and "truncated JPEG" in r.stderr, r.stderr
        if k == 0:
            r = cli(*load, env={"ADAPT_STRICT_DECODE": "0"})
            assert r.returncode == 0, "the opt-out decodes it as the decoder does: " + r.stderr
        victim.write_bytes(whole)


def test_stats_name_each_stage_and_the_bottleneck(jpegs):
    loader = adapt.DataLoader(adapt.datasets.ImageFolder(jpegs), batch_size=4, num_workers=2,
                              transform="resize(32),center_crop(32),hflip")
    assert loader.stats() is None
    assert sum(len(labels) for _, labels in loader) == 24
    s = loader.stats()
    assert {"read", "decode", "collate"} <= set(s["seconds"]), s
    assert any(k.startswith("resize") for k in s["seconds"]), s
    assert s["num_workers"] == 2 and len(s["workers"]) == 2
    assert sum(w["samples"] for w in s["workers"]) == 24
    assert 0 < s["busy_seconds"] and 0 <= s["wait_share"] <= 1 and s["epoch_seconds"] > 0
    assert "-bound: " in s["verdict"], s["verdict"]
    quiet = adapt.DataLoader(adapt.datasets.ImageFolder(jpegs), batch_size=4, stage_timing=False,
                             transform="resize(32),center_crop(32)")
    list(quiet)
    assert quiet.stats() is None


def test_tune_writes_the_report_page_with_the_stages_of_default_and_pick(jpegs, tmp_path):
    page = tmp_path / "report.html"
    adapt.tune(adapt.datasets.ImageFolder(jpegs), transform="resize(32),center_crop(32)", batch_size=8,
               trial_samples=16, final_repeats=1, trial_seconds=None, noise_repeats=2,
               progress=False, report=page)
    html = page.read_text()
    run = adapt.tune.last_report["runs"][0]
    assert f"{run['adapt']['seconds']:.3f}" in html and "Batch size 8" in html
    assert html.count('class="verdict"') == 2 and ">decode</span>" in html


def test_the_loader_options_cross_into_rust_by_name(cifar):
    from adapt._adapt import RawLoader

    loader = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=100)
    with pytest.raises(adapt.ConfigError, match="unknown field `bogus`"):
        RawLoader(loader._pipeline_json, '{"batch_size": 1, "bogus": 1}')
    with pytest.raises(adapt.ConfigError, match="missing field `shuffle`"):
        RawLoader(loader._pipeline_json, '{"batch_size": 1}')
