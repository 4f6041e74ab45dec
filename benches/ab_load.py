"""A/B loading speed of two `xtask` builds on CIFAR-10, alternated.

    python3 benches/ab_load.py NEW_XTASK OLD_XTASK CIFAR10_DIR [--runs 5] [--transform T]

Each run is `load --epochs 12 --no-digest` (batch 128, 2 workers, prefetch
2, persistent, shuffled); a run's figure is the median samples/s of epochs
3-12, and the runs alternate NEW, OLD, NEW, ... so a drift of the machine
hits both. Prints each binary's median and the median of the per-pair
ratios NEW/OLD with their range.
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(xtask, path, transform):
    cmd = [xtask, "load", "--dataset", "cifar10", "--path", path, "--epochs", "12",
           "--no-digest", "--batch-size", "128", "--num-workers", "2",
           "--prefetch-factor", "2", "--persistent-workers", "--shuffle"]
    if transform:
        cmd += ["--transform", transform]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr)
    rates = [json.loads(l)["samples_per_s"] for l in out.stdout.splitlines() if l.startswith("{")]
    return statistics.median(rates[2:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("new")
    p.add_argument("old")
    p.add_argument("path")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--transform", default=None)
    a = p.parse_args()
    new, old = [], []
    for _ in range(a.runs):
        new.append(run(a.new, a.path, a.transform))
        old.append(run(a.old, a.path, a.transform))
    ratios = [n / o for n, o in zip(new, old)]
    print(f"new {statistics.median(new) / 1e6:.2f} M/s, old {statistics.median(old) / 1e6:.2f} M/s, "
          f"new/old {statistics.median(ratios):.2f} (pairs {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
