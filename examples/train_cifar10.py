"""A small PyTorch training loop on CIFAR-10, fed by adapt or by
torch.utils.data.DataLoader with the same recipe (CPU is enough).

    cargo xtask gen --dataset cifar10 --out datasets/cifar10
    pip install ./python torch
    python examples/train_cifar10.py --data datasets/cifar10 --loader adapt
    python examples/train_cifar10.py --data datasets/cifar10 --loader torch --workers 2 --prefetch 8
    python examples/train_cifar10.py --data datasets/cifar10 --compare   # both, one JSON line each

Tuning the loader of this training run (the tuner fills in the knobs; the
metric is the training loop's time, interpreter start-up and imports left
out):

    cargo xtask tune --strategy both --metric 'adapt-seconds: ([0-9.]+)' \
      --command 'python examples/train_cifar10.py --data datasets/cifar10 --loader torch \
        --workers {num_workers} --prefetch {prefetch_factor} --pin {pin_memory} \
        --persistent {persistent_workers} --max-batches 30'

Recipe: RandomCrop(32, padding=4), RandomHorizontalFlip, ToTensor,
Normalize(CIFAR-10). Each run prints one JSON line: epoch seconds, samples/s,
final loss, and the peak resident memory of the process and of its worker
processes (PyTorch's workers are processes, forked with the dataset in
memory; adapt's are threads sharing one memory map, so it reports 0); then
`adapt-seconds: X`, the whole training loop (loader creation, every epoch).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import torch
from torch import nn

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
RECIPE = "random_crop(32,padding=4),hflip,normalize(cifar10)"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def adapt_loader(args):
    import adapt

    return adapt.DataLoader(
        adapt.datasets.CIFAR10(args.data), batch_size=args.batch_size, shuffle=True,
        num_workers=args.workers, prefetch_factor=args.prefetch if args.workers else None,
        persistent_workers=args.persistent, pin_memory=args.pin, transform=RECIPE,
    )


def torch_loader(args):
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms

    class Cifar10Bin(Dataset):
        """CIFAR-10's binary layout, read as torchvision's CIFAR10 reads its
        pickles: every record in memory, a PIL image per sample."""

        def __init__(self, root, transform):
            files = [os.path.join(root, f"data_batch_{i}.bin") for i in range(1, 6)]
            raw = np.concatenate([np.fromfile(f, dtype=np.uint8) for f in files]).reshape(-1, 3073)
            self.targets = raw[:, 0].astype(np.int64)
            self.data = raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()
            self.transform = transform

        def __len__(self):
            return len(self.targets)

        def __getitem__(self, i):
            return self.transform(Image.fromarray(self.data[i])), int(self.targets[i])

    t = transforms.Compose([
        transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), transforms.Normalize(MEAN, STD),
    ])
    kw = dict(batch_size=args.batch_size, shuffle=True, num_workers=args.workers, pin_memory=args.pin)
    if args.workers:
        # prefetch None: PyTorch's own default (2).
        if args.prefetch is not None:
            kw["prefetch_factor"] = args.prefetch
        kw["persistent_workers"] = args.persistent
    return DataLoader(Cifar10Bin(args.data, t), **kw)


def worker_peak_kib():
    """Sum of the peak resident memory (VmHWM) of this process's live child
    processes: PyTorch's persistent workers (adapt's workers are threads).
    Pages shared with the parent count in each child, as `top` counts them."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                pids = f.read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            total += int(line.split()[1])
            except OSError:
                pass
    return total


def train(args):
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    began = time.perf_counter()
    loader = adapt_loader(args) if args.loader == "adapt" else torch_loader(args)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    times, loss = [], float("nan")
    for epoch in range(args.epochs):
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        start, n = time.perf_counter(), 0
        for b, (images, labels) in enumerate(loader):
            opt.zero_grad()
            out = loss_fn(model(images), labels)
            out.backward()
            opt.step()
            loss = out.item()
            n += images.shape[0]
            if args.max_batches and b + 1 >= args.max_batches:
                break
        times.append((time.perf_counter() - start, n))
    whole = time.perf_counter() - began
    seconds, samples = times[-1]
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = worker_peak_kib()
    print(json.dumps({
        "loader": args.loader, "num_workers": args.workers, "prefetch_factor": args.prefetch,
        "epoch_seconds": round(seconds, 3), "samples_per_s": round(samples / seconds, 1),
        "final_loss": round(loss, 4), "peak_rss_mib": round(own / 1024, 1),
        "peak_worker_rss_mib": round(children / 1024, 1),
    }), flush=True)
    print(f"adapt-seconds: {whole:.4f}", flush=True)


def optional_int(text):
    return None if text == "None" else int(text)


def flag(text):
    if text in ("True", "true", "1"):
        return True
    if text in ("False", "false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not True or False")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["adapt", "torch"], default="adapt")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--prefetch", type=optional_int, default=2, help="batches per worker; None: the loader's default")
    ap.add_argument("--pin", type=flag, default=False, help="pin_memory")
    ap.add_argument("--persistent", type=flag, default=None, help="persistent_workers (default: with workers)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="torch's intra-op threads")
    ap.add_argument("--max-batches", type=int, default=0, help="stop each epoch early (0: whole epoch)")
    ap.add_argument("--compare", action="store_true", help="run adapt and torch, one process each")
    args = ap.parse_args()
    if args.persistent is None:
        args.persistent = args.workers > 0
    args.persistent = args.persistent and args.workers > 0
    if not args.compare:
        return train(args)
    for loader, workers, prefetch in [("adapt", 2, 2), ("adapt", 1, 2), ("torch", 2, 8), ("torch", 1, 2)]:
        cmd = [sys.executable, __file__, "--data", args.data, "--loader", loader, "--workers", str(workers),
               "--prefetch", str(prefetch), "--epochs", str(args.epochs), "--threads", str(args.threads),
               "--batch-size", str(args.batch_size), "--max-batches", str(args.max_batches)]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
