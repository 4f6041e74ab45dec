"""The pipelines' benchmark figures (docs/benchmarks.md), in one run.

    cargo build --release -p xtask --features libjpeg-turbo
    python3 benches/pipelines.py --xtask target/release/xtask --data target/bench-data \
        [--torch-python /path/to/venv/bin/python] [--runs 3]

For each recipe it times `cargo xtask load` at every num_workers x
prefetch_factor of a small grid (each setting --runs times, the median of
the last epoch's samples/s), and, with --torch-python, torchvision's
DataLoader through benches/torch/recipes.py on the same files (its own grid,
best setting). Ratios are of the two best medians. Data is generated under
--data when absent (synthetic, the real on-disk layouts).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

RECIPES = {
    "cifar-train": ("cifar10", "cifar10", "random_crop(32,padding=4),hflip,normalize(cifar10)", 128),
    "imagenet-train": ("imagefolder", "imagenet", "random_resized_crop(224),hflip,normalize(imagenet)", 128),
    "eval": ("imagefolder", "camera", "resize(256),center_crop(224),normalize(imagenet)", 64),
    # timm's training recipe with RandAugment and random erasing (torchvision's
    # RandAugment; RandomErasing after Normalize with value 0 = the mean).
    "imagenet-randaug": ("imagefolder", "imagenet",
                         "random_resized_crop(224),hflip,rand_augment(num_ops=2,magnitude=9),"
                         "random_erasing(p=0.25,value=mean),normalize(imagenet)", 128),
}


def sh(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out.stdout


def ensure_data(xtask, root):
    gens = {
        "cifar10": ["--dataset", "cifar10"],
        "imagenet": ["--dataset", "imagefolder", "--count", "2000", "--classes", "10"],
        "camera": ["--dataset", "imagefolder", "--count", "400", "--classes", "4", "--size", "1024x768"],
    }
    for name, args in gens.items():
        path = os.path.join(root, name)
        if not os.path.isdir(path):
            sh([xtask, "gen", *args, "--out", path])


def adapt_rate(xtask, kind, path, transform, batch, workers, prefetch, output="f32", extra=(), epochs=3):
    cmd = [xtask, "load", "--dataset", kind, "--path", path, "--batch-size", str(batch),
           "--num-workers", str(workers), "--shuffle", "--no-digest", "--epochs", str(epochs),
           "--output", output, *extra]
    if transform:
        cmd += ["--transform", transform]
    if workers:
        cmd += ["--prefetch-factor", str(prefetch), "--persistent-workers"]
    lines = [json.loads(l) for l in sh(cmd).splitlines() if l.startswith("{")]
    return lines[-1]["samples_per_s"]


def adapt_best(xtask, root, recipe, runs, output="f32", extra=()):
    kind, data, transform, batch = RECIPES[recipe]
    path = os.path.join(root, data)
    best = None
    for workers in (0, 1, 2):
        for prefetch in ((2, 8) if workers else (0,)):
            rates = [adapt_rate(xtask, kind, path, transform, batch, workers, prefetch, output, extra)
                     for _ in range(runs)]
            med = statistics.median(rates)
            if best is None or med > best["samples_per_s"]:
                best = {"num_workers": workers, "prefetch_factor": prefetch or None, "samples_per_s": med,
                        "runs": rates}
    return best


def torch_best(python, root, recipe):
    kind, data, _, _ = RECIPES[recipe]
    path = os.path.join(root, data)
    args = [python, os.path.join(HERE, "torch", "recipes.py"), recipe, "--path", path,
            "--workers", "0,1,2,3", "--prefetch", "2,8"]
    lines = [json.loads(l) for l in sh(args).splitlines() if l.startswith("{")]
    return lines[-1]["best"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xtask", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--torch-python")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", help="comma-separated: cifar,u8,imagenet,randaug,eval")
    a = ap.parse_args()
    ensure_data(a.xtask, a.data)
    only = set((a.only or "cifar,u8,imagenet,randaug,eval").split(","))
    results = {}

    def report(name, value):
        results[name] = value
        print(json.dumps({name: value}), flush=True)

    for key, recipe in (("cifar", "cifar-train"), ("imagenet", "imagenet-train"),
                        ("randaug", "imagenet-randaug")):
        if key not in only:
            continue
        ours = adapt_best(a.xtask, a.data, recipe, a.runs)
        report(f"{recipe}/adapt", ours)
        if a.torch_python:
            theirs = torch_best(a.torch_python, a.data, recipe)
            report(f"{recipe}/torchvision", theirs)
            report(f"{recipe}/ratio", ours["samples_per_s"] / theirs["samples_per_s"])
    if "u8" in only:
        # u8 against f32 on CIFAR-10: the dataset's default pipeline and the
        # train recipe, same knobs (2 workers, prefetch 8), alternated.
        path = os.path.join(a.data, "cifar10")
        for label, transform in (("default", None), ("train-recipe-no-normalize", "random_crop(32,padding=4),hflip")):
            f32s, u8s = [], []
            for _ in range(a.runs):
                f32s.append(adapt_rate(a.xtask, "cifar10", path, transform, 128, 2, 8, "f32"))
                u8s.append(adapt_rate(a.xtask, "cifar10", path, transform, 128, 2, 8, "u8"))
            report(f"cifar10-{label}/u8-over-f32", {
                "f32": statistics.median(f32s), "u8": statistics.median(u8s),
                "ratio": statistics.median(u / f for u, f in zip(u8s, f32s))})
    if "eval" in only:
        kind, data, transform, batch = RECIPES["eval"]
        path = os.path.join(a.data, data)
        reduced, exact = [], []
        for _ in range(a.runs):
            reduced.append(adapt_rate(a.xtask, kind, path, transform, batch, 2, 2, epochs=2))
            exact.append(adapt_rate(a.xtask, kind, path, transform, batch, 2, 2, extra=("--exact-decode",), epochs=2))
        report("eval/reduced-over-exact", {
            "reduced": statistics.median(reduced), "exact": statistics.median(exact),
            "ratio": statistics.median(r / e for r, e in zip(reduced, exact))})
    print(json.dumps({"all": results}))


if __name__ == "__main__":
    sys.exit(main())
