"""adapt.DataLoader over the user's own Python datasets against
torch.utils.data.DataLoader, in one run, each at its best knobs.

    python benches/python_datasets.py [--jpegs DIR] [--epochs 2] [--json OUT]

Needs torch and torchvision (not project dependencies: a local venv). Three
cases, each loader's samples/s (median of its epochs after the first) for
every knob setting tried, and its peak PSS with its worker processes
counted (sampled every 50 ms from /proc):

  memory: an in-memory map-style dataset of 3x32x32 float32 arrays
          (the per-sample overhead of each loader; adapt with the global
          generators reseeded per batch, the default, and not at all, as
          this dataset draws from none);
  pil:    an image folder of JPEGs (DIR, e.g. `cargo xtask gen --dataset
          imagefolder --size 500x375`), the user's dataset opening each with
          PIL and running torchvision v2 RandomResizedCrop(224), flip,
          to-tensor, normalise;
  steps:  the same dataset returning the decoded u8 HWC image and leaving
          the recipe to adapt's Rust steps (transform=), against PyTorch's
          best on the `pil` case.
"""

import argparse
import json
import os
import pathlib
import statistics
import threading
import time

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import v2 as T

import adapt


class Memory(torch.utils.data.Dataset):
    def __init__(self, n=20000):
        self.data = np.random.default_rng(0).standard_normal((n, 3, 32, 32), dtype=np.float32)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i], i % 10


class Folder(torch.utils.data.Dataset):
    """Class folders of JPEGs, as torchvision's ImageFolder lists them."""

    def __init__(self, root, decoded=False):
        root = pathlib.Path(root)
        classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        self.samples = [(str(f), k) for k, c in enumerate(classes) for f in sorted((root / c).iterdir())]
        self.decoded = decoded
        self.transform = T.Compose([T.RandomResizedCrop(224, antialias=True), T.RandomHorizontalFlip(),
                                    T.ToImage(), T.ToDtype(torch.float32, scale=True),
                                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with Image.open(path) as im:
            im = im.convert("RGB")
            if self.decoded:
                return np.asarray(im), label
            return self.transform(im), label


def pss_of_tree(pid):
    """PSS in bytes of `pid` and its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return total


def measure(make, epochs):
    """(samples/s per epoch after the first, peak PSS) of the loader `make`."""
    peak, stop = [0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], pss_of_tree(os.getpid()))
            time.sleep(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    loader = make()
    rates = []
    for _ in range(epochs):
        start, n = time.perf_counter(), 0
        for batch in loader:
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            n += len(x)
        rates.append(n / (time.perf_counter() - start))
    stop.set()
    t.join()
    del loader
    return rates[1:] if len(rates) > 1 else rates, peak[0]


def case(name, dataset, settings, epochs, batch_size, **adapt_kw):
    rows = []
    for loader_name, workers, extra in settings:
        def make():
            if loader_name == "torch":
                return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                                   num_workers=workers, persistent_workers=workers > 0,
                                                   **extra)
            return adapt.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                    persistent_workers=workers > 0, **extra, **adapt_kw)
        rates, peak = measure(make, epochs)
        row = {"case": name, "loader": loader_name, "num_workers": workers, **{k: str(v) for k, v in extra.items()},
               "samples_per_s": statistics.median(rates), "peak_pss_mib": peak / 2**20}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jpegs")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    ws = sorted({0, 1, cores})
    rows = []
    mem = [("torch", w, {}) for w in ws] + [
        ("adapt", w, {"worker_method": m, "reseed_globals": r}) for w in ws
        for m in ("process", "thread") if w or m == "process" for r in ("batch", False)]
    rows += case("memory", Memory(), mem, a.epochs, 128)
    if a.jpegs:
        pil = [("torch", w, {}) for w in ws if w] + [("adapt", w, {"worker_method": m}) for w in ws if w
                                                     for m in ("process", "thread")]
        rows += case("pil", Folder(a.jpegs), pil, a.epochs, 32)
        steps = [("adapt", w, {"worker_method": m}) for w in ws if w for m in ("process", "thread")]
        rows += case("steps", Folder(a.jpegs, decoded=True), steps, a.epochs, 32,
                     transform="random_resized_crop(224),hflip,normalize(imagenet)")
    for name in ("memory", "pil", "steps"):
        mine = [r for r in rows if r["case"] == name and r["loader"] == "adapt"]
        base = [r for r in rows if r["case"] == ("pil" if name == "steps" else name) and r["loader"] == "torch"]
        if mine and base:
            best, ref = max(mine, key=lambda r: r["samples_per_s"]), max(base, key=lambda r: r["samples_per_s"])
            print(f"{name}: adapt best {best['samples_per_s']:.0f}/s ({best['num_workers']} "
                  f"{best.get('worker_method')}, reseed_globals {best.get('reseed_globals', 'batch')}, "
                  f"{best['peak_pss_mib']:.0f} MiB) vs torch best "
                  f"{ref['samples_per_s']:.0f}/s ({ref['num_workers']} workers, {ref['peak_pss_mib']:.0f} MiB): "
                  f"{best['samples_per_s'] / ref['samples_per_s']:.2f}x")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
