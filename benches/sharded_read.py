"""WebDataset shards and Hugging Face Parquet against the same JPEGs as
loose files, alternated.

    cargo xtask gen --dataset imagefolder --count 5000 --size 178x218 --out DATA/folder
    cargo xtask gen --dataset webdataset  --count 5000 --size 178x218 --out DATA/wds
    cargo xtask gen --dataset parquet     --count 5000 --size 178x218 --out DATA/parquet
    python3 benches/sharded_read.py --xtask target/release/xtask \\
        --folder DATA/folder [--wds DATA/wds] [--parquet DATA/parquet] [--runs 5] [--stream 2048] \\
        [--http-server target/release/http-server]

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

With `--http-server` (cargo build --release -p adapt-benches --bin
http-server: tower-http's file server on 127.0.0.1), each sharded layout is
also read over HTTP, its files named by URL: the cold open (`inspect`
fetching every file into an empty cache folder) against the local open,
then streamed runs from the warm cache, in the same alternation, as a
ratio to the same layout read locally. Server and cache share the disk
and page cache: this measures the client path, not a network.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TRANSFORM = "random_resized_crop(128),hflip,normalize(imagenet)"


def load(xtask, kind, path, stream=None, env=None):
    cmd = [xtask, "load", "--dataset", kind, "--path", path, "--epochs", "4", "--no-digest",
           "--batch-size", "128", "--num-workers", "2", "--prefetch-factor", "2",
           "--persistent-workers", "--shuffle", "--transform", TRANSFORM]
    if stream:
        cmd += ["--stream", str(stream)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        sys.exit(out.stderr)
    epochs = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")
              and "samples_per_s" in l]
    load.samples = epochs[0]["samples"]
    return statistics.median(e["samples_per_s"] for e in epochs[1:])


def inspect_seconds(xtask, kind, path, env=None):
    start = time.perf_counter()
    subprocess.run([xtask, "inspect", "--dataset", kind, "--path", path, "--index", "0"],
                   check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def urls(base, root, path, ext):
    """The layout's files under `path` as a `::` list of URLs under `base`."""
    files = sorted(glob.glob(os.path.join(path, "**", "*" + ext), recursive=True))
    return "::".join(base + "/" + os.path.relpath(f, root) for f in files)


class Served:
    """The HTTP server over `root` and a cache folder, for `with`."""

    def __init__(self, binary, root):
        self.proc = subprocess.Popen([binary, root], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        self.cache = tempfile.mkdtemp(prefix="adapt-http-cache-")
        self.env = dict(os.environ, ADAPT_CACHE_DIR=self.cache)

    def cold(self):
        shutil.rmtree(self.cache, ignore_errors=True)
        os.makedirs(self.cache)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        self.proc.wait()
        shutil.rmtree(self.cache, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--xtask", required=True)
    p.add_argument("--folder", required=True)
    p.add_argument("--wds")
    p.add_argument("--parquet")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--stream", type=int, default=2048)
    p.add_argument("--http-server")
    a = p.parse_args()
    if a.http_server:
        return over_http(a)
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


def over_http(a):
    """Each sharded layout locally and over HTTP from a warm cache,
    streamed, alternated; and the cold open against the local one."""
    layouts = [(name, kind, path, ext) for name, kind, path, ext in
               (("wds", "webdataset", a.wds, ".tar"), ("parquet", "parquet", a.parquet, ".parquet"))
               if path]
    root = os.path.commonpath([os.path.abspath(p) for _, _, p, _ in layouts])
    with Served(a.http_server, root) as server:
        remote = {name: urls(server.url, root, os.path.abspath(path), ext)
                  for name, _, path, ext in layouts}
        for name, kind, path, _ in layouts:
            local_open = statistics.median(inspect_seconds(a.xtask, kind, path) for _ in range(3))
            colds = []
            for _ in range(3):
                server.cold()
                colds.append(inspect_seconds(a.xtask, kind, remote[name], server.env))
            warm = statistics.median(inspect_seconds(a.xtask, kind, remote[name], server.env)
                                     for _ in range(3))
            print(f"open of {name}: local {local_open * 1000:.0f} ms, over HTTP cold (every "
                  f"file fetched) {statistics.median(colds) * 1000:.0f} ms, warm "
                  f"{warm * 1000:.0f} ms")
        rows = {}
        for _ in range(a.runs):
            for name, kind, path, _ in layouts:
                rows.setdefault(f"{name} local", []).append(load(a.xtask, kind, path, a.stream))
                rows.setdefault(f"{name} http warm", []).append(
                    load(a.xtask, kind, remote[name], a.stream, server.env))
        for name, _, _, _ in layouts:
            local, warm = rows[f"{name} local"], rows[f"{name} http warm"]
            ratios = [w / l for w, l in zip(warm, local)]
            print(f"{name:>8}: local {statistics.median(local):8.1f} samples/s, over HTTP warm "
                  f"{statistics.median(warm):8.1f}: ratio {statistics.median(ratios):.3f} "
                  f"(runs {', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main()
