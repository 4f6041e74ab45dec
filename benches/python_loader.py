"""Python iteration against `cargo xtask load`, same knobs, alternated.

    cargo build --release -p xtask && pip install ./python
    python benches/python_loader.py --xtask target/release/xtask --data datasets/cifar10 [--runs 5]

For each setting of num_workers x prefetch_factor (persistent workers),
CIFAR-10 f32 batch 128, shuffled: the median samples/s of the last of 3
epochs over --runs runs of each side, A B A B..., and the ratio of the best
medians. The Python side iterates the public API (`for images, labels in loader`:
numpy arrays over the batch buffers, torch tensors where torch is
installed) and only reads each batch's shape, as the xtask with
--no-digest only counts.
"""

import argparse
import json
import statistics
import subprocess
import sys

PY = r"""
import adapt, sys, time
w, p, tr = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4] or None
loader = adapt.DataLoader(adapt.datasets.CIFAR10(sys.argv[3]), batch_size=128, shuffle=True,
                          num_workers=w, prefetch_factor=p if w else None, persistent_workers=w > 0,
                          transform=tr)
for _ in range(3):
    t, n = time.perf_counter(), 0
    for images, labels in loader:
        n += images.shape[0]
    rate = n / (time.perf_counter() - t)
print(rate)
"""


def xtask_rate(xtask, data, w, p, transform):
    cmd = [xtask, "load", "--dataset", "cifar10", "--path", data, "--batch-size", "128", "--shuffle",
           "--no-digest", "--epochs", "3", "--num-workers", str(w)]
    if w:
        cmd += ["--prefetch-factor", str(p), "--persistent-workers"]
    if transform:
        cmd += ["--transform", transform]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])["samples_per_s"]


def py_rate(data, w, p, transform):
    out = subprocess.run([sys.executable, "-c", PY, str(w), str(p), data, transform or ""],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xtask", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--transform", default="")
    a = ap.parse_args()
    best = {"xtask": 0.0, "python": 0.0}
    for w, p in [(0, 0), (1, 2), (2, 2), (2, 8)]:
        xs, ps = [], []
        for _ in range(a.runs):
            xs.append(xtask_rate(a.xtask, a.data, w, p, a.transform))
            ps.append(py_rate(a.data, w, p, a.transform))
        line = {"num_workers": w, "prefetch_factor": p or None, "xtask": statistics.median(xs),
                "python": statistics.median(ps), "ratio": statistics.median(q / x for q, x in zip(ps, xs))}
        best["xtask"] = max(best["xtask"], line["xtask"])
        best["python"] = max(best["python"], line["python"])
        print(json.dumps(line), flush=True)
    print(json.dumps({"best": best, "ratio_of_bests": best["python"] / best["xtask"]}))


if __name__ == "__main__":
    main()
