"""adapt.ray on a real local Ray cluster of two nodes (ray_job.py, bounded
in time, its processes killed on expiry), where `ray[data]` is installed:
every sample of the epoch exactly once, pixels equal to adapt's own
loader's, blocks read on both nodes; adapt.DataLoader fed from the Ray
stream (whole and as streaming_split shares) gives adapt's own f32 batches;
what either cannot take is refused by name."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("ray.data", reason="ray[data] is not installed: not tested here")

import adapt  # noqa: E402
import adapt.ray  # noqa: E402
from conftest import run_job, xtask_binary  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def ray_job(script, args, timeout):
    """Runs `script` (beside this file) in its own process group, bounded,
    without Ray's usage reporting; returns what it wrote to its OUT.json."""
    env = dict(os.environ, PYTHONPATH=HERE, RAY_DISABLE_USAGE_STATS="1", RAY_USAGE_STATS_ENABLED="0")
    done = run_job([sys.executable, os.path.join(HERE, script), *map(str, args)], env, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(args[-1].read_text())


def images(tmp_path, classes):
    """60 images of 24×20 in `classes` classes, as gen writes an image folder."""
    data = tmp_path / "images"
    subprocess.run([xtask_binary(), "gen", "--dataset", "imagefolder", "--out", str(data),
                    "--count", "60", "--classes", str(classes), "--size", "24x20"], check=True,
                   capture_output=True)
    return data


def test_a_two_node_cluster_reads_every_sample_once_as_adapt_does(tmp_path):
    got = ray_job("ray_job.py", [images(tmp_path, 60), tmp_path / "out.json"], timeout=240)
    assert got["nodes"] == 2
    rows, ours = got["ray"], {r["index"]: r for r in got["adapt"]}
    assert sorted(r["index"] for r in rows) == list(range(60)), "every sample exactly once"
    for r in rows:
        assert r["shape"] == [16, 16, 3]
        assert (r["label"], r["digest"]) == (ours[r["index"]]["label"], ours[r["index"]]["digest"]), r
    assert len({r["node"] for r in rows}) == 2, "blocks were read on both nodes"
    # One image per class: a label is a sample id. adapt.DataLoader fed
    # from the stream normalises exactly what adapt's own loader does.
    f32 = dict(got["f32"])
    assert sorted(l for l, _ in got["fed"]) == list(range(60))
    assert all(f32[l] == d for l, d in got["fed"])
    a, b = ({l for l, _ in share} for share in got["shares"])
    assert a and b and not a & b and len(a | b) == 60, "two streaming_split shares, disjoint, covering"
    assert all(f32[l] == d for share in got["shares"] for l, d in share)


def test_tune_finds_ray_datas_knobs_with_adapts_search(tmp_path):
    got = ray_job("ray_tune_job.py", [images(tmp_path, 6), tmp_path / "out.json"], timeout=300)
    # A pipeline of known cost (ray_tune_job.py): 64-row map batches are
    # the cheapest per row (32 within Ray's start-up noise of it), the
    # untuned 256 rows cost 4x. (Whether two map tasks beat one is Ray's
    # scheduling of the fused read and map: not asserted.)
    known, r = got["known"], got["known_report"]
    assert known["read"]["batch_size"] in (32, 64), r["trace"]
    assert known["read"]["concurrency"] in (1, 2)
    assert set(known["iter_batches"]) == {"prefetch_batches"}
    assert r["default"]["config"] == {"batch_size": 256, "concurrency": 2, "num_blocks": 8,
                                      "prefetch_batches": 1}
    assert r["speedup_vs_default"] > 1.3, (r["default"], r["adapt"])
    assert r["search_trials"] < r["configurations"], "the descent measures fewer than the grid"
    assert [t["purpose"] for t in r["trace"]][:1] == ["warm-up"] and r["noise"], r["trace"]
    assert all(rows == 1024 for rows, how in r["rows"] if how != "cut short"), r["rows"]
    # adapt's own reader through adapt.ray.read: each whole trial read the
    # trial's 48 samples, the pick is in the space.
    folder, r = got["folder"], got["folder_report"]
    assert folder["read"]["concurrency"] in (1, 2) and folder["read"]["batch_size"] in (8, 16)
    assert folder["read"]["num_blocks"] in (2, 4)
    assert folder["iter_batches"]["prefetch_batches"] in (1, 2)
    assert all(rows == 48 for rows, how in r["rows"] if how != "cut short"), r["rows"]
    assert len(r["rows"]) == len([t for t in r["trace"] if t["note"] is None
                                  or not t["note"].startswith("skipped")]), r["trace"]


def test_a_cut_short_trial_counts_rays_start_up_once():
    # 0.8 s to the first batch, then 0.05 s a batch: 5 of 20 batches read
    # at 1.0 s, so the whole trial is about 1.0 + 15 x 0.05 s, not 4 s.
    assert adapt.ray._estimate(1.0, 0.8, 5, 20) == pytest.approx(1.75)
    assert adapt.ray._estimate(1.0, 0.9, 1, 20) == pytest.approx(20.0)  # one batch: no pace yet
    assert adapt.ray._estimate(2.0, 0.1, 19, 20) >= 2.0


def test_what_adapt_ray_cannot_read_is_refused_by_name():
    # In a process of its own: ray.shutdown() leaves Ray's gRPC threads in
    # the process that called ray.init, and the pool among them grows and
    # shrinks, which a later test counting this process's threads (the
    # soak) would take for adapt's.
    env = dict(os.environ, PYTHONPATH=HERE, RAY_DISABLE_USAGE_STATS="1", RAY_USAGE_STATS_ENABLED="0")
    done = run_job([sys.executable, "-c", "import test_ray; test_ray.refusals_on_a_local_ray()"], env,
                   timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refusals checked" in done.stdout, done.stdout[-2000:]


def refusals_on_a_local_ray():
    import ray

    ray.init(num_cpus=1, include_dashboard=False)  # ray.data.range starts one otherwise
    try:
        refusals(ray.data.range(4))
    finally:
        ray.shutdown()
    print("refusals checked")


def refusals(stream):
    for kw, says in ((dict(distributed=(0, 2)), "streaming_split"), (dict(shuffle=True), "random_shuffle"),
                     (dict(num_workers=2), "prefetch_factor"), (dict(collate_fn=list), "iter_torch_batches")):
        with pytest.raises(adapt.ConfigValueError, match=says):
            adapt.DataLoader(stream, batch_size=2, **kw)
    with pytest.raises(adapt.ConfigValueError, match="not supported"):
        adapt.DataLoader(stream, batch_size=2).state_dict()
    with pytest.raises(adapt.ConfigTypeError, match="from_items"):
        adapt.ray.read([1, 2, 3])
    with pytest.raises(adapt.ConfigTypeError, match="map_batches"):
        adapt.ray.read(adapt.datasets.CIFAR10("nowhere"), transform=lambda x: x)
    with pytest.raises(adapt.ConfigValueError, match="adapt.ray.tune searches prefetch_batches, "
                       "batch_size, num_blocks, concurrency"):
        adapt.ray.tune(lambda **kw: stream, batch_size=2, trial_samples=4, space={"num_workers": [1]})
    with pytest.raises(adapt.ConfigValueError, match="positive ints"):
        adapt.ray.tune(lambda **kw: stream, batch_size=2, trial_samples=4, space={"concurrency": []})
    with pytest.raises(adapt.ConfigValueError, match="at least batch_size"):
        adapt.ray.tune(lambda **kw: stream, batch_size=8, trial_samples=4)
    with pytest.raises(adapt.ConfigTypeError, match="make\\(concurrency=, batch_size=, num_blocks=\\)"):
        adapt.ray.tune(stream, batch_size=2, trial_samples=4)
