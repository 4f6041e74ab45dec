"""Gzip-compressed WebDataset shards (`.tar.gz`) against the same shards as
`.tar`, alternated.

    cargo xtask gen --dataset webdataset --count 5000 --size 178x218 --out DATA/wds
    python3 benches/gzip_shards.py --xtask target/release/xtask --wds DATA/wds [--runs 3]

The `.tar` shards are gzipped (level 6, Python's `gzip`, as tarfile's
`w|gz` and so webdataset's `TarWriter` write them) into a temporary folder.
The open is `inspect --index 0` (process start, open, one sample) of the
`.tar` set, of the `.tar.gz` set into an empty cache folder (cold: every
shard decompressed into `CACHE/unpacked/`) and again (warm: the copies
reused), each the median of `--runs`, against one streamed epoch. Then
streamed runs (`--stream 2048`, `sharded_read.load`'s knobs) of the two
sets, alternated; a run's figure is the median samples/s of epochs 2-4.
"""
import argparse
import glob
import gzip
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sharded_read import inspect_seconds, load  # noqa: E402


def gzip_shards(src, dst):
    """`src`'s `.tar` shards as `.tar.gz` in `dst`; (tar bytes, gz bytes)."""
    sizes = [0, 0]
    for tar in sorted(glob.glob(os.path.join(src, "*.tar"))):
        out = os.path.join(dst, os.path.basename(tar) + ".gz")
        with open(tar, "rb") as f, gzip.open(out, "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g, 1 << 20)
        sizes[0] += os.path.getsize(tar)
        sizes[1] += os.path.getsize(out)
    return sizes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xtask", required=True)
    ap.add_argument("--wds", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stream", type=int, default=2048)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gz = os.path.join(tmp, "gz")
        os.mkdir(gz)
        tar_bytes, gz_bytes = gzip_shards(a.wds, gz)
        print(f"shards: {tar_bytes / 2**20:.1f} MiB as .tar, {gz_bytes / 2**20:.1f} MiB gzipped "
              f"({gz_bytes / tar_bytes:.3f})")
        env = dict(os.environ)
        opens = {"tar": [], "gz cold": [], "gz warm": []}
        for r in range(a.runs):
            env["ADAPT_CACHE_DIR"] = os.path.join(tmp, f"cache{r}")
            opens["tar"].append(inspect_seconds(a.xtask, "webdataset", a.wds, env))
            opens["gz cold"].append(inspect_seconds(a.xtask, "webdataset", gz, env))
            opens["gz warm"].append(inspect_seconds(a.xtask, "webdataset", gz, env))
        rates = {"tar": [], "gz": []}
        for _ in range(a.runs):
            rates["tar"].append(load(a.xtask, "webdataset", a.wds, a.stream, env))
            rates["gz"].append(load(a.xtask, "webdataset", gz, a.stream, env))
        epoch_s = load.samples / statistics.median(rates["tar"])
        for k, v in opens.items():
            m = statistics.median(v)
            print(f"open {k}: {m * 1000:.0f} ms ({m / epoch_s:.1%} of a streamed epoch)")
        for k, v in rates.items():
            print(f"streamed {k}: {statistics.median(v):,.0f} samples/s "
                  f"({', '.join(f'{x:,.0f}' for x in v)})")
        ratios = [g / t for g, t in zip(rates["gz"], rates["tar"])]
        print(f"gz / tar: {statistics.median(ratios):.3f} "
              f"({', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main()
