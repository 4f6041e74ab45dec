"""adapt.ray.tune on a local Ray of 2 CPUs (started and stopped here), for
test_ray.py:

    python ray_tune_job.py DATA OUT.json

First over a pipeline of known cost: `make(concurrency, batch_size)` maps
`ray.data.range` with a batch function that sleeps 20 ms a call plus
0.2 ms a row up to 64 rows and 2 ms a row past them, so per row 64-row
blocks are cheapest (0.51 ms; 256 rows, the untuned value, 2.1 ms; 16
rows 1.45 ms). Then over adapt's image folder
read by adapt.ray.read. OUT.json holds both picks and reports."""

import json
import sys
import time

import numpy as np
import ray

import adapt
import adapt.ray


def costly(batch):
    rows = len(batch["id"])
    time.sleep(0.02 + 0.0002 * min(rows, 64) + 0.002 * max(0, rows - 64))
    return {"image": np.zeros((rows, 2, 2, 3), np.uint8), "label": batch["id"]}


def make(concurrency, batch_size, num_blocks):
    return ray.data.range(4096, override_num_blocks=num_blocks).map_batches(
        costly, batch_size=batch_size, concurrency=concurrency)


def main(data, out):
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        known = adapt.ray.tune(make, batch_size=32, trial_samples=1024, progress=False,
                               space={"concurrency": [1, 2], "batch_size": [16, 32, 64, 128, 256],
                                      "prefetch_batches": [1, 2], "num_blocks": [8]})
        known_report = adapt.ray.tune.last_report
        folder = adapt.ray.tune(adapt.datasets.ImageFolder(data), batch_size=8, trial_samples=48,
                                transform="random_resized_crop(16),hflip", progress=False,
                                space={"concurrency": [1, 2], "batch_size": [8, 16],
                                       "prefetch_batches": [1, 2], "num_blocks": [2, 4]},
                                noise_repeats=2, final_repeats=2)
        folder_report = adapt.ray.tune.last_report
    finally:
        ray.shutdown()
    with open(out, "w") as f:
        json.dump(dict(known=known, known_report=known_report, folder=folder,
                       folder_report=folder_report), f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
