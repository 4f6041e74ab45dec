"""What stage timing costs: one `xtask` build with it on (the default) and
off (`ADAPT_STAGE_TIMING=0`), alternated run by run on the same data.

    python3 benches/stage_overhead.py --xtask target/release/xtask --data DATA [--runs 5]

DATA is `bench --compare`'s data folder (target/bench-compare/data): CIFAR-10
(50,000) at batch 8 and 128 (the cheapest samples, where a per-batch cost
shows most), the CIFAR-10 train recipe, and the ImageNet recipe over 600
JPEGs; 2 workers, prefetch 4, persistent, 15-25 epochs (CIFAR-10) or 3, a
run's figure the median samples/s of the epochs after the first. Prints off/on medians of the per-pair ratios
(above 1: timing costs that much) with their range.
"""
import argparse
import json
import os
import statistics
import subprocess

JOBS = [
    ("cifar10 batch 8", "cifar10", "cifar10", 8, None, 15),
    ("cifar10 batch 128", "cifar10", "cifar10", 128, None, 25),
    ("cifar10 train recipe", "cifar10", "cifar10", 128, "random_crop(32,padding=4),hflip,normalize(cifar10)", 15),
    ("JPEG ImageNet recipe", "jpegs", "imagefolder", 64, "random_resized_crop(224),hflip,normalize(imagenet)", 3),
]


def rate(xtask, data, kind, batch, transform, on, epochs):
    cmd = [xtask, "load", "--dataset", kind, "--path", data, "--batch-size", str(batch),
           "--num-workers", "2", "--prefetch-factor", "4", "--persistent-workers", "--shuffle",
           "--no-digest", "--epochs", str(epochs)]
    if transform:
        cmd += ["--transform", transform]
    env = dict(os.environ, ADAPT_STAGE_TIMING="1" if on else "0")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    rates = [json.loads(l)["samples_per_s"] for l in out.splitlines() if l.startswith("{")]
    return statistics.median(rates[1:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--xtask", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    for name, folder, kind, batch, transform, epochs in JOBS:
        path = os.path.join(a.data, folder)
        ratios, ons, offs = [], [], []
        for k in range(a.runs):
            order = [True, False] if k % 2 == 0 else [False, True]
            got = {on: rate(a.xtask, path, kind, batch, transform, on, epochs) for on in order}
            ons.append(got[True])
            offs.append(got[False])
            ratios.append(got[False] / got[True])
        print(f"{name:<22} on {statistics.median(ons):>11,.0f}/s  off {statistics.median(offs):>11,.0f}/s  "
              f"off/on {statistics.median(ratios):.3f} (pairs {min(ratios):.3f}-{max(ratios):.3f})",
              flush=True)


if __name__ == "__main__":
    main()
