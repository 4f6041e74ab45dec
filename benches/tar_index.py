"""The open of WebDataset shards with their member lists kept in
`CACHE/index/` against one that lists every tar header, alternated.

    cargo xtask gen --dataset webdataset --count 50000 --size 32x24 --out DATA/wds
    python3 benches/tar_index.py --xtask target/release/xtask --wds DATA/wds [--runs 9] [--cold]

An open is `inspect --index 0` (process start, open, one sample). "listed"
runs into an empty cache folder each time (every header read, the lists
written); "kept" into the folder the first listed run filled (the lists
read). With `--cold` the page cache is dropped before every open (root
only: `/proc/sys/vm/drop_caches`), as a process meets shards on a disk it
has not read since boot; without, the shards are in memory. Prints the
median of each and their ratio.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sharded_read import inspect_seconds  # noqa: E402


def drop_page_cache():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xtask", required=True)
    ap.add_argument("--wds", required=True)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--cold", action="store_true")
    a = ap.parse_args()
    shards = [f for f in os.listdir(a.wds) if f.endswith(".tar")]
    with tempfile.TemporaryDirectory() as tmp:
        kept_dir = os.path.join(tmp, "kept")
        inspect_seconds(a.xtask, "webdataset", a.wds, {**os.environ, "ADAPT_CACHE_DIR": kept_dir})
        lists = os.listdir(os.path.join(kept_dir, "index"))
        size = sum(os.path.getsize(os.path.join(kept_dir, "index", f)) for f in lists)
        print(f"{len(shards)} shards, {len(lists)} lists of {size / 2**20:.2f} MiB in all")
        times = {"listed": [], "kept": []}
        for r in range(a.runs):
            for name in ("listed", "kept"):
                cache = kept_dir if name == "kept" else os.path.join(tmp, f"empty{r}")
                if a.cold:
                    drop_page_cache()
                env = {**os.environ, "ADAPT_CACHE_DIR": cache}
                times[name].append(inspect_seconds(a.xtask, "webdataset", a.wds, env))
        listed, kept = (statistics.median(times[k]) for k in ("listed", "kept"))
        page = "cold page cache" if a.cold else "shards in memory"
        print(f"open ({page}, median of {a.runs}): listed {listed * 1000:.0f} ms, "
              f"kept {kept * 1000:.0f} ms: kept/listed {kept / listed:.3f}")


if __name__ == "__main__":
    main()
