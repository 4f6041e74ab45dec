"""A Hugging Face `datasets.Dataset` read natively by adapt
(`adapt.datasets.HuggingFace`: its Arrow files in Rust) against the way HF
users load it (`with_transform` + torch.utils.data.DataLoader), the same
data, the same recipe, alternated, in one run.

    python benches/huggingface.py [--jpegs DIR] [--rounds 3] [--json OUT]

Needs torch, torchvision and datasets (a local venv; not project
dependencies). Two datasets, made with `datasets` itself in a temp folder:

  cifar:    10,000 32x32 PNGs embedded by Dataset.from_dict (ClassLabel),
            saved to disk and loaded back; recipe random_crop(32,padding=4),
            hflip, normalize (torchvision v2 RandomCrop, flip, to-tensor,
            normalise on the HF side);
  imagenet: `load_dataset("imagefolder")` over DIR (JPEGs kept as paths, as
            datasets does), recipe random_resized_crop(224), hflip,
            normalize(imagenet).

Each round runs HF + torch then adapt (2 workers each, batch 128 / 64,
shuffled, 2 epochs, samples/s of the second epoch); the medians over the
rounds and their ratio are printed. torch runs with one intra-op thread
per process (`torch.set_num_threads(1)`, inherited by its workers), as a
2-worker loader on 2 cores wants.
"""

import argparse
import json
import os
import statistics
import tempfile
import time

import datasets
import numpy as np
import torch
from PIL import Image
from torchvision.transforms import v2 as T

import adapt

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def cifar(tmp):
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(10000)]
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=[str(i) for i in range(10)])})
    ds = datasets.Dataset.from_dict({"image": images, "label": [i % 10 for i in range(10000)]},
                                    features=features)
    ds.save_to_disk(f"{tmp}/cifar")
    return datasets.load_from_disk(f"{tmp}/cifar")


def imagenet(tmp, jpegs):
    return datasets.load_dataset("imagefolder", data_dir=jpegs, split="train", cache_dir=f"{tmp}/cache")


CASES = {
    "cifar": dict(batch=128, torch=lambda: T.Compose([
        T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToImage(),
        T.ToDtype(torch.float32, scale=True), T.Normalize(CIFAR_MEAN, CIFAR_STD)]),
        adapt="random_crop(32,padding=4),hflip,normalize(cifar10)"),
    "imagenet": dict(batch=64, torch=lambda: T.Compose([
        T.RandomResizedCrop(224, antialias=True), T.RandomHorizontalFlip(), T.ToImage(),
        T.ToDtype(torch.float32, scale=True), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)]),
        adapt="random_resized_crop(224),hflip,normalize(imagenet)"),
}


def hf_torch(ds, case):
    steps = case["torch"]()

    def apply(batch):
        batch["image"] = [steps(im.convert("RGB")) for im in batch["image"]]
        return batch

    data = ds.with_transform(apply)
    return torch.utils.data.DataLoader(data, batch_size=case["batch"], shuffle=True, num_workers=2,
                                       persistent_workers=True, collate_fn=lambda rows: (
                                           torch.stack([r["image"] for r in rows]),
                                           torch.tensor([r["label"] for r in rows])))


def native(ds, case):
    return adapt.DataLoader(adapt.datasets.HuggingFace(ds), batch_size=case["batch"], shuffle=True,
                            num_workers=2, persistent_workers=True, transform=case["adapt"])


def second_epoch(loader, n):
    """Samples/s of the second epoch."""
    for _ in loader:
        pass
    start = time.perf_counter()
    seen = sum(len(labels) for _, labels in loader)
    assert seen == n, (seen, n)
    return seen / (time.perf_counter() - start)


def main():
    torch.set_num_threads(1)
    p = argparse.ArgumentParser()
    p.add_argument("--jpegs", help="an image folder of JPEGs (cargo xtask gen --dataset imagefolder)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        made = {"cifar": cifar(tmp)}
        if args.jpegs:
            made["imagenet"] = imagenet(tmp, args.jpegs)
        for name, ds in made.items():
            case, rows = CASES[name], {"hf+torch": [], "adapt": []}
            for _ in range(args.rounds):
                for label, make in (("hf+torch", hf_torch), ("adapt", native)):
                    loader = make(ds, case)
                    rows[label].append(second_epoch(loader, len(ds)))
                    del loader
            med = {k: statistics.median(v) for k, v in rows.items()}
            ratio = med["adapt"] / med["hf+torch"]
            out[name] = {"rounds": rows, "median": med, "ratio": ratio}
            pairs = [round(a / b, 2) for a, b in zip(rows["adapt"], rows["hf+torch"])]
            print(f"{name}: {len(ds)} samples; HF + torch {med['hf+torch']:,.0f} samples/s, adapt "
                  f"{med['adapt']:,.0f} samples/s: {ratio:.2f}x (per round: {pairs})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
