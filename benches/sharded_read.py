"""WebDataset shards and Hugging Face Parquet against the same JPEGs as
loose files, alternated.

    cargo xtask gen --dataset imagefolder --count 5000 --size 178x218 --out DATA/folder
    cargo xtask gen --dataset webdataset  --count 5000 --size 178x218 --out DATA/wds
    cargo xtask gen --dataset parquet     --count 5000 --size 178x218 --out DATA/parquet
    python3 benches/sharded_read.py --xtask target/release/xtask \\
        --folder DATA/folder [--wds DATA/wds] [--parquet DATA/parquet] [--runs 5] [--stream 2048]

`gen` writes the same JPEG bytes in the three layouts (CelebA-sized: about
178×218, one in five 218×178; Parquet in files of 1000 rows, row groups of
100, snappy, as `datasets` writes images). Each run is `load --epochs 4
--no-digest` (batch 128, 2 workers, prefetch 2, persistent, shuffled, the
same transform) of: the image folder, then each sharded layout given by
random access (the member index, the row-group cache) and streamed
(`--stream N`: shard by shard, row group by row group); a run's figure is
the median samples/s of epochs 2-4; the layouts alternate so a drift of the
machine hits all. The open is timed first, alone: `inspect --index 0`
(process start, open, one sample) of each layout, against one streamed
epoch.
Prints each layout's median, the per-run ratios to the folder, and each
open's share of an epoch.
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
    p.add_argument("--wds")
    p.add_argument("--parquet")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--stream", type=int, default=2048)
    a = p.parse_args()
    layouts = [(name, kind, path) for name, kind, path in
               (("wds", "webdataset", a.wds), ("parquet", "parquet", a.parquet)) if path]
    rows = {"folder": []}
    for name, _, _ in layouts:
        rows[f"{name} random"], rows[f"{name} stream"] = [], []
    # Opens first, on a quiet machine (each opens the data and reads one
    # sample).
    opens = {"folder": statistics.median(inspect_seconds(a.xtask, "imagefolder", a.folder)
                                         for _ in range(5))}
    for name, kind, path in layouts:
        opens[name] = statistics.median(inspect_seconds(a.xtask, kind, path) for _ in range(5))
    for _ in range(a.runs):
        rows["folder"].append(load(a.xtask, "imagefolder", a.folder))
        for name, kind, path in layouts:
            rows[f"{name} random"].append(load(a.xtask, kind, path))
            rows[f"{name} stream"].append(load(a.xtask, kind, path, a.stream))
    for name, rates in rows.items():
        ratios = [r / f for r, f in zip(rates, rows["folder"])]
        print(f"{name:>14}: median {statistics.median(rates):8.1f} samples/s  "
              f"ratio to folder {statistics.median(ratios):.3f} "
              f"(runs {', '.join(f'{x:.3f}' for x in ratios)})")
    n = load.samples
    for name, _, _ in layouts:
        epoch = n / statistics.median(rows[f"{name} stream"])
        print(f"open of {name}: inspect {opens[name] * 1000:.0f} ms (the folder's "
              f"{opens['folder'] * 1000:.0f} ms); one streamed epoch of {n} samples {epoch:.2f} s: "
              f"the open is {opens[name] / epoch * 100:.1f}% of an epoch (the folder's walk "
              f"{opens['folder'] / epoch * 100:.1f}%)")


if __name__ == "__main__":
    main()
