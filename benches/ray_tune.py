"""adapt.ray.tune on the ImageNet read (adapt.ray.read of a JPEG folder,
`random_resized_crop(224),hflip` in the read tasks, feeding
adapt.DataLoader with `normalize(imagenet)`) on a local Ray of this
machine's CPUs: what the tuning costs, what it picks, and a whole epoch
with Ray's defaults against one with the pick, alternated.

    python benches/ray_tune.py --data DIR [--rounds 3] [--trial-samples 512]

(DIR: `cargo xtask gen --dataset imagefolder --out DIR --count 2000
--classes 10`; ray[data] in the venv, not a project dependency.) One JSON
line per measurement, then a summary line.
"""

import argparse
import json
import os
import statistics
import time

READ = "random_resized_crop(224),hflip"
BATCH = 128


def epoch_rate(data, e, read_knobs, prefetch):
    """samples/s of epoch `e` read with `read_knobs` and `prefetch` batches."""
    import adapt
    import adapt.ray

    ds = adapt.ray.read(adapt.datasets.ImageFolder(data), transform=READ, shuffle=True, seed=0,
                        epoch=e, **read_knobs)
    loader = adapt.DataLoader(ds, batch_size=BATCH, transform="normalize(imagenet)",
                              prefetch_factor=prefetch)
    t0 = time.perf_counter()
    n = sum(len(labels) for _, labels in loader)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trial-samples", type=int, default=512)
    a = ap.parse_args()
    import ray

    import adapt
    import adapt.ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="ERROR")
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        t0 = time.perf_counter()
        knobs = adapt.ray.tune(adapt.datasets.ImageFolder(a.data), batch_size=BATCH, transform=READ,
                               trial_samples=a.trial_samples, progress=False)
        r = adapt.ray.tune.last_report
        tuning = {"tuning_seconds": time.perf_counter() - t0, "knobs": knobs,
                  "trials": len(r["trace"]), "search_trials": r["search_trials"],
                  "configurations": r["configurations"], "threshold": r["threshold"],
                  "trial_speedup_vs_default": r["speedup_vs_default"]}
        print(json.dumps(tuning), flush=True)
        rates = {"ray-defaults": [], "tuned": []}
        contenders = {"ray-defaults": ({}, 1),
                      "tuned": (knobs["read"], knobs["iter_batches"]["prefetch_batches"])}
        epoch_rate(a.data, 0, {}, 1)  # warm: Ray's workers, the page cache
        for rnd in range(a.rounds):
            for name, (read_knobs, prefetch) in contenders.items():
                s = epoch_rate(a.data, rnd + 1, read_knobs, prefetch)
                rates[name].append(s)
                print(json.dumps({"round": rnd, "loader": name, "samples_per_s": s}), flush=True)
    finally:
        ray.shutdown()
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(json.dumps({"medians": med, "tuned_over_defaults": med["tuned"] / med["ray-defaults"],
                      **tuning}))


if __name__ == "__main__":
    main()
