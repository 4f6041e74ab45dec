"""A/B of two `xtask` builds on the ImageNet recipe over a JPEG folder, alternated.

    python3 benches/ab_imagenet.py NEW_XTASK OLD_XTASK FOLDER [WORKERS=2] [PAIRS=5]

Each run is `load --epochs 3` of `random_resized_crop(224),hflip,normalize(imagenet)`
at batch 128 (prefetch 4, persistent when WORKERS > 0); a run's figures are
its best samples/s of epochs 2-3 and its CPU time (user + system). Prints
each pair, then the medians of the per-pair ratios new/old with their range.
"""
import json, subprocess, statistics, sys, resource
new, old, path = sys.argv[1:4]
workers = sys.argv[4] if len(sys.argv) > 4 else "2"
T = "random_resized_crop(224),hflip,normalize(imagenet)"
def run(x):
    cmd = [x, "load", "--dataset", "imagefolder", "--path", path, "--batch-size", "128", "--num-workers", workers,
           "--shuffle", "--no-digest", "--epochs", "3", "--transform", T]
    if workers != "0": cmd += ["--prefetch-factor", "4", "--persistent-workers"]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rates = [json.loads(l)["samples_per_s"] for l in out.splitlines() if l.startswith("{")]
    return max(rates[1:]), (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
R, C = [], []
for k in range(int(sys.argv[5]) if len(sys.argv) > 5 else 5):
    a = run(new) if k % 2 == 0 else None
    b = run(old)
    if a is None: a = run(new)
    R.append(a[0] / b[0]); C.append(a[1] / b[1])
    print(f"new {a[0]:.0f}/s {a[1]:.1f}s cpu  old {b[0]:.0f}/s {b[1]:.1f}s cpu", flush=True)
print(f"rate new/old median {statistics.median(R):.3f} ({min(R):.3f}-{max(R):.3f}); cpu new/old {statistics.median(C):.3f} ({min(C):.3f}-{max(C):.3f})")
