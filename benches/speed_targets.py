"""The loader's speed targets (docs/benchmarks.md, "Speed targets"), in one run.

    cargo build --release -p xtask        # the README's build: no optional feature
    python3 benches/speed_targets.py --xtask target/release/xtask --data DATA \
        --torch-python /path/to/venv/bin/python [--runs 3] [--only imagenet,digiface,cifar,batch8,u8]

Each row measures adapt and its baseline in the same run, alternated run by
run (adapt, baseline, adapt, ...), and reports medians:

- imagenet: `random_resized_crop(224),hflip,normalize(imagenet)` over 2,000
  JPEGs of about 500x375 in 10 class folders, batch 128; adapt at 2 workers,
  prefetch 4, persistent, against torchvision's DataLoader at its best of
  num_workers 0-3 x prefetch 2/8; each side's figure is its best of epochs
  2-3.  Target >= 3x.
- digiface: the DigiFace-like PNG set (10,000 RGBA 112x112, the layout's
  default pipeline: RGB, normalise), batch 128; each side at its best of its
  grid.  Target >= 5x.
- cifar: the CIFAR-10 train recipe `random_crop(32,padding=4),hflip,
  normalize(cifar10)`, batch 128; each side at its best.  Target >= 100x.
- batch8: CIFAR-10 (dataset default), samples/s at batch 8 over batch 128,
  each at its best of num_workers 0-2 x prefetch 2/8.  Target >= 0.7.
- u8: the train recipe with `--output u8` over f32 (normalise left to the
  device), 2 workers, prefetch 8, alternated.  Target >= 1.5x.

Data is generated under --data when absent (`xtask gen`, the real layouts).
Without --torch-python the rows against torchvision print adapt's side only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGENET = "random_resized_crop(224),hflip,normalize(imagenet)"
CIFAR = "random_crop(32,padding=4),hflip,normalize(cifar10)"
GRID = [(0, 0), (1, 2), (1, 8), (2, 2), (2, 8)]


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def ensure_data(xtask, root):
    gens = {
        "cifar10": ["--dataset", "cifar10"],
        "imagenet": ["--dataset", "imagefolder", "--count", "2000", "--classes", "10"],
        "digiface": ["--dataset", "digiface"],
    }
    for name, args in gens.items():
        if not os.path.isdir(os.path.join(root, name)):
            sh([xtask, "gen", *args, "--out", os.path.join(root, name)])


def adapt_rate(xtask, kind, path, batch, workers, prefetch, transform=None, output="f32", epochs=3):
    """Best samples/s of the epochs after the first."""
    cmd = [xtask, "load", "--dataset", kind, "--path", path, "--batch-size", str(batch),
           "--num-workers", str(workers), "--shuffle", "--no-digest", "--epochs", str(epochs),
           "--output", output]
    if workers:
        cmd += ["--prefetch-factor", str(prefetch), "--persistent-workers"]
    if transform:
        cmd += ["--transform", transform]
    rates = [json.loads(l)["samples_per_s"] for l in sh(cmd).splitlines() if l.startswith("{")]
    return max(rates[1:])


def adapt_best(xtask, kind, path, batch, transform=None, epochs=3):
    """The best setting of GRID, each measured once; returns (rate, setting)."""
    best = max((adapt_rate(xtask, kind, path, batch, w, p, transform, epochs=epochs), (w, p))
               for w, p in GRID)
    return best


def torch_best(python, recipe, path):
    if not python:
        return None
    args = [python, os.path.join(HERE, "torch", "recipes.py"), recipe, "--path", path,
            "--workers", "0,1,2,3", "--prefetch", "2,8", "--epochs", "3"]
    lines = [json.loads(l) for l in sh(args).splitlines() if l.startswith("{")]
    return lines[-1]["best"]["samples_per_s"]


def alternate(runs, *sides):
    """Runs each side's thunk in turn, `runs` times; their medians."""
    got = [[] for _ in sides]
    for _ in range(runs):
        for i, side in enumerate(sides):
            got[i].append(side())
    return [statistics.median(g) for g in got], got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xtask", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--torch-python")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="imagenet,digiface,cifar,batch8,u8")
    a = ap.parse_args()
    ensure_data(a.xtask, a.data)
    only = set(a.only.split(","))
    x, d, tp = a.xtask, a.data, a.torch_python
    rows = []

    def report(name, ours, theirs, target, runs):
        ratio = ours / theirs if theirs else None
        row = {"row": name, "adapt": ours, "baseline": theirs, "ratio": ratio, "target": target,
               "met": ratio is not None and ratio >= target, "runs": runs}
        rows.append(row)
        print(json.dumps(row), flush=True)

    if "imagenet" in only:
        path = os.path.join(d, "imagenet")
        (ours, theirs), runs = alternate(
            a.runs, lambda: adapt_rate(x, "imagefolder", path, 128, 2, 4, IMAGENET),
            lambda: torch_best(tp, "imagenet-train", path) or 0.0)
        report("imagenet", ours, theirs, 3.0, runs)
    if "digiface" in only:
        path = os.path.join(d, "digiface")
        (ours, theirs), runs = alternate(
            a.runs, lambda: adapt_best(x, "digiface", path, 128)[0],
            lambda: torch_best(tp, "digiface", path) or 0.0)
        report("digiface", ours, theirs, 5.0, runs)
    if "cifar" in only:
        path = os.path.join(d, "cifar10")
        (ours, theirs), runs = alternate(
            a.runs, lambda: adapt_best(x, "cifar10", path, 128, CIFAR, epochs=6)[0],
            lambda: torch_best(tp, "cifar-train", path) or 0.0)
        report("cifar", ours, theirs, 100.0, runs)
    if "batch8" in only:
        path = os.path.join(d, "cifar10")
        (small, large), runs = alternate(
            a.runs, lambda: adapt_best(x, "cifar10", path, 8, epochs=6)[0],
            lambda: adapt_best(x, "cifar10", path, 128, epochs=6)[0])
        report("batch8", small, large, 0.7, runs)
    if "u8" in only:
        path = os.path.join(d, "cifar10")
        (u8, f32), runs = alternate(
            a.runs, lambda: adapt_rate(x, "cifar10", path, 128, 2, 8, CIFAR, "u8", epochs=6),
            lambda: adapt_rate(x, "cifar10", path, 128, 2, 8, CIFAR, "f32", epochs=6))
        report("u8", u8, f32, 1.5, runs)
    print(json.dumps({"all": rows}))


if __name__ == "__main__":
    sys.exit(main())
