"""WebDataset shards against the same JPEGs as loose files, alternated.

    cargo xtask gen --dataset imagefolder --count 5000 --size 178x218 --out DATA/folder
    cargo xtask gen --dataset webdataset  --count 5000 --size 178x218 --out DATA/wds
    python3 benches/webdataset_read.py --xtask target/release/xtask \\
        --folder DATA/folder --wds DATA/wds [--runs 5] [--stream 2048]

`gen` writes the same JPEG bytes in both layouts (CelebA-sized: about
178×218, one in five 218×178). Each run is `load --epochs 4 --no-digest`
(batch 128, 2 workers, prefetch 2, persistent, shuffled, the same
transform) of: the image folder, the shards by random access (the member
index), and the shards streamed (`--stream N`); a run's figure is the
median samples/s of epochs 2-4; the three alternate so a drift of the
machine hits all. The index build is timed first, alone: `inspect --index
0` (process start, open, one sample) of the shards and of the folder,
against one streamed epoch.
Prints each layout's median, the per-run ratios to the folder, and the
index's share of an epoch.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

TRANSFORM = "random_resized_crop(128),hflip,normalize(imagenet)"


def load(xtask, kind, path, stream=None):
    cmd = [xtask, "load", "--dataset", kind, "--path", path, "--epochs", "4", "--no-digest",
           "--batch-size", "128", "--num-workers", "2", "--prefetch-factor", "2",
           "--persistent-workers", "--shuffle", "--transform", TRANSFORM]
    if stream:
        cmd += ["--stream", str(stream)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr)
    epochs = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")
              and "samples_per_s" in l]
    load.samples = epochs[0]["samples"]
    return statistics.median(e["samples_per_s"] for e in epochs[1:])


def inspect_seconds(xtask, kind, path):
    start = time.perf_counter()
    subprocess.run([xtask, "inspect", "--dataset", kind, "--path", path, "--index", "0"],
                   check=True, capture_output=True)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--xtask", required=True)
    p.add_argument("--folder", required=True)
    p.add_argument("--wds", required=True)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--stream", type=int, default=2048)
    a = p.parse_args()
    rows = {"folder": [], "wds random": [], "wds stream": []}
    # Index build first, on a quiet machine: inspect of the shards less
    # that of the folder (both open the data and read one sample).
    folder_open = statistics.median(inspect_seconds(a.xtask, "imagefolder", a.folder) for _ in range(5))
    wds_open = statistics.median(inspect_seconds(a.xtask, "webdataset", a.wds) for _ in range(5))
    for _ in range(a.runs):
        rows["folder"].append(load(a.xtask, "imagefolder", a.folder))
        rows["wds random"].append(load(a.xtask, "webdataset", a.wds))
        rows["wds stream"].append(load(a.xtask, "webdataset", a.wds, a.stream))
    for name, rates in rows.items():
        ratios = [r / f for r, f in zip(rates, rows["folder"])]
        print(f"{name:>11}: median {statistics.median(rates):8.1f} samples/s  "
              f"ratio to folder {statistics.median(ratios):.3f} "
              f"(runs {', '.join(f'{x:.3f}' for x in ratios)})")
    n = load.samples
    epoch = n / statistics.median(rows["wds stream"])
    print(f"index build: inspect of the shards {wds_open * 1000:.0f} ms, of the folder "
          f"{folder_open * 1000:.0f} ms; one epoch of {n} samples {epoch:.2f} s: the shards' "
          f"open is {wds_open / epoch * 100:.1f}% of an epoch (the folder's walk "
          f"{folder_open / epoch * 100:.1f}%)")


if __name__ == "__main__":
    main()
