"""torchvision's DataLoader on the same files and recipes as `cargo xtask load`.

Not a project dependency: run it where torch and torchvision are installed
(`pip install torch torchvision`). It prints one JSON line per measured
configuration and a final line with the best one, in the same shape as
`cargo xtask load` (samples/s of the last epoch).

    python benches/torch/recipes.py cifar-train --path datasets/cifar10
    python benches/torch/recipes.py imagenet-train --path datasets/imagenet
    python benches/torch/recipes.py eval --path datasets/camera
    python benches/torch/recipes.py digiface --path datasets/digiface

Recipes (the same steps as adapt's text form):
    cifar-train:    random_crop(32,padding=4),hflip,normalize(cifar10)   batch 128
    imagenet-train: random_resized_crop(224),hflip,normalize(imagenet)   batch 128
    imagenet-randaug: random_resized_crop(224),hflip,rand_augment(num_ops=2,magnitude=9),
                    random_erasing(p=0.25,value=mean),normalize(imagenet)  batch 128
    eval:           resize(256),center_crop(224),normalize(imagenet)     batch 64
    digiface:       the dataset's default (RGBA PNG -> RGB, normalize 0.5)  batch 128
"""

import argparse
import json
import os
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class Cifar10Bin(Dataset):
    """CIFAR-10's binary layout (data_batch_*.bin), read as torchvision's
    CIFAR10 reads its pickles: all records in memory as NHWC uint8, a PIL
    image per sample, then the transform."""

    def __init__(self, root, transform):
        files = [os.path.join(root, f"data_batch_{i}.bin") for i in range(1, 6)]
        raw = np.concatenate([np.fromfile(f, dtype=np.uint8) for f in files])
        raw = raw.reshape(-1, 3073)
        self.targets = raw[:, 0].astype(np.int64)
        self.data = raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        img = Image.fromarray(self.data[i])
        return self.transform(img), int(self.targets[i])


def recipe(name, path):
    if name == "cifar-train":
        t = transforms.Compose([
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(CIFAR_MEAN, CIFAR_STD),
        ])
        return Cifar10Bin(path, t), 128
    if name == "imagenet-train":
        t = transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ])
        return datasets.ImageFolder(path, t), 128
    if name == "imagenet-randaug":
        t = transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.RandAugment(num_ops=2, magnitude=9),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
            transforms.RandomErasing(p=0.25),
        ])
        return datasets.ImageFolder(path, t), 128
    if name == "eval":
        t = transforms.Compose([
            transforms.Resize(256),
            transforms.CenterCrop(224),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ])
        return datasets.ImageFolder(path, t), 64
    if name == "digiface":
        # DigiFace1M's class folders of RGBA PNGs, read as RGB (adapt's
        # reader drops alpha), normalised as adapt's default for the layout.
        t = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
        return datasets.ImageFolder(path, t, loader=lambda f: Image.open(f).convert("RGB")), 128
    raise SystemExit(f"unknown recipe {name}")


def run(ds, batch, workers, prefetch, epochs, limit):
    kw = dict(batch_size=batch, shuffle=True, num_workers=workers, drop_last=False)
    if workers > 0:
        kw.update(prefetch_factor=prefetch, persistent_workers=True)
    loader = DataLoader(ds, **kw)
    rates = []
    for _ in range(epochs):
        start, n = time.perf_counter(), 0
        for x, y in loader:
            n += x.shape[0]
            if limit and n >= limit:
                break
        rates.append(n / (time.perf_counter() - start))
    # The best epoch after the first (start-up and first reads left out),
    # the first when there is only one.
    return max(rates[1:] or rates)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe")
    ap.add_argument("--path", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="samples per epoch (0: all)")
    ap.add_argument("--workers", default="0,1,2,3,4")
    ap.add_argument("--prefetch", default="2,4")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ds, batch = recipe(a.recipe, a.path)
    best = None
    for w in [int(v) for v in a.workers.split(",")]:
        for p in [int(v) for v in a.prefetch.split(",")] if w else [0]:
            rate = run(ds, batch, w, p, a.epochs, a.limit)
            line = {"recipe": a.recipe, "num_workers": w, "prefetch_factor": p or None,
                    "batch_size": batch, "samples_per_s": rate}
            print(json.dumps(line), flush=True)
            if best is None or rate > best["samples_per_s"]:
                best = line
    print(json.dumps({"best": best}))


if __name__ == "__main__":
    main()
