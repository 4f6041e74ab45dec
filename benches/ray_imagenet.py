"""The ImageNet recipe through Ray Data (adapt.ray.read feeding
adapt.DataLoader) on 1 and 2 local Ray nodes, against adapt alone and
torch's DataLoader, on the same JPEG folder: samples/s of the second epoch
and CPU-seconds per sample (the whole machine's busy time from /proc/stat
over the epoch, so Ray's own processes count), plus the driver's own CPU
per sample, which bounds what more nodes can give.

    python benches/ray_imagenet.py --data DIR [--rounds 3]

(DIR: `cargo xtask gen --dataset imagefolder --out DIR --count 2000
--classes 10`; torch, torchvision and ray[data] in the venv; not project
dependencies.) One JSON line per measurement, then a summary line.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np

READ = "random_resized_crop(224),hflip"
RECIPE = READ + ",normalize(imagenet)"
BATCH = 128


def busy_seconds():
    """The machine's busy CPU time so far (user+nice+system+irq+softirq)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / os.sysconf("SC_CLK_TCK")


def timed(epoch):
    """samples/s, machine CPU-s per sample and this process's CPU-s per sample of `epoch()`."""
    b0, p0, t0 = busy_seconds(), time.process_time(), time.perf_counter()
    n = epoch()
    wall = time.perf_counter() - t0
    return {"samples_per_s": n / wall, "cpu_s_per_sample": (busy_seconds() - b0) / n,
            "driver_cpu_s_per_sample": (time.process_time() - p0) / n, "samples": n}


def count(loader):
    return sum(len(labels) for _, labels in loader)


def adapt_alone(data):
    import adapt

    loader = adapt.DataLoader(adapt.datasets.ImageFolder(data), batch_size=BATCH, shuffle=True,
                              num_workers=2, prefetch_factor=8, persistent_workers=True,
                              transform=RECIPE)
    count(loader)
    return timed(lambda: count(loader))


def torch_loader(data):
    import torch
    from torchvision import datasets, transforms

    torch.set_num_threads(1)
    t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                            transforms.ToTensor(),
                            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    loader = torch.utils.data.DataLoader(datasets.ImageFolder(data, t), batch_size=BATCH,
                                         shuffle=True, num_workers=2, prefetch_factor=2,
                                         persistent_workers=True)
    count(loader)
    return timed(lambda: count(loader))


def through_ray(data, nodes):
    import ray
    from ray.cluster_utils import Cluster

    import adapt
    import adapt.ray

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2 // nodes})
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=2 // nodes)
        ray.init(address=cluster.address, logging_level="ERROR")
        ray.data.DataContext.get_current().enable_progress_bars = False

        def epoch(e):
            ds = adapt.ray.read(adapt.datasets.ImageFolder(data), transform=READ, shuffle=True,
                                seed=0, epoch=e, batch_size=BATCH, num_blocks=16)
            return count(adapt.DataLoader(ds, batch_size=BATCH, transform="normalize(imagenet)",
                                          prefetch_factor=4))

        epoch(0)
        return timed(lambda: epoch(1))
    finally:
        ray.shutdown()
        cluster.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    runs = {"adapt": [], "torch": [], "ray-1-node": [], "ray-2-nodes": []}
    for r in range(a.rounds):
        for name, fn in (("adapt", lambda: adapt_alone(a.data)), ("torch", lambda: torch_loader(a.data)),
                         ("ray-1-node", lambda: through_ray(a.data, 1)),
                         ("ray-2-nodes", lambda: through_ray(a.data, 2))):
            m = fn()
            runs[name].append(m)
            print(json.dumps({"round": r, "loader": name, **m}), flush=True)
    summary = {name: {k: statistics.median(m[k] for m in ms)
                      for k in ("samples_per_s", "cpu_s_per_sample", "driver_cpu_s_per_sample")}
               for name, ms in runs.items()}
    print(json.dumps({"medians": summary}))


if __name__ == "__main__":
    main()
