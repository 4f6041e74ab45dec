"""A small DDP training job for test_torchrun.py, run by torchrun (gloo, CPU):

    python -m torch.distributed.run --nproc_per_node=2 --max-restarts=1 \
        torchrun_job.py --data DATA --out OUT [--loader adapt|torch] [--kill-at N]

Every rank trains a linear model over an image folder of one image per
class (so a label is a sample id), two epochs, batch 4, logging each batch
it trained on to OUT/rank-R.jsonl. Rank 0 checkpoints the model and the
loader every --every steps (OUT/ckpt-STEP.pt, then OUT/latest). With
--kill-at N, rank 1 of the first attempt SIGKILLs itself before training
global step N; torchrun restarts the job, which resumes from OUT/latest.

--loader adapt: adapt.DataLoader(..., distributed="auto"), resumed with
load_state_dict. --loader torch: adapt.torch.DataLoader (torch's own
loader) over a DistributedSampler, resumed by skipping the checkpointed
batches of its epoch in the sampler (torch's loader has no state_dict).
"""

import argparse
import itertools
import json
import os
import signal

import numpy as np
import torch
import torch.distributed as dist
from PIL import Image

import adapt
import adapt.torch

EPOCHS, BATCH, SEED = 2, 4, 3


def init():
    """gloo with a store prefix per restart attempt: without it a restarted
    rank can dial the killed attempt's address, still in the launcher's
    store, and fail or hang (docs: README "Distributed training")."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
    dist.init_process_group("gloo", store=dist.PrefixStore(f"attempt{attempt}", store),
                            rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    return int(attempt)


class Folder(torch.utils.data.Dataset):
    """The image folder as torch users read it: (CHW float tensor, class)."""

    def __init__(self, root):
        classes = sorted(os.listdir(root))
        self.items = [(os.path.join(root, c, f), i) for i, c in enumerate(classes)
                      for f in sorted(os.listdir(os.path.join(root, c)))]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        a = np.asarray(Image.open(path).convert("RGB").resize((16, 16)), dtype=np.float32) / 255
        return torch.from_numpy(a).permute(2, 0, 1), label


class Skip(torch.utils.data.Sampler):
    """A sampler's order without its first `skip` indices."""

    def __init__(self, inner, skip):
        self.inner, self.skip = inner, skip

    def set_epoch(self, epoch):
        self.inner.set_epoch(epoch)

    def __iter__(self):
        return itertools.islice(iter(self.inner), self.skip, None)

    def __len__(self):
        return len(self.inner) - self.skip


def adapt_loader(data, ckpt):
    loader = adapt.DataLoader(adapt.datasets.ImageFolder(data), batch_size=BATCH, shuffle=True,
                              seed=SEED, num_workers=1, distributed="auto",
                              transform="resize(16x16),normalize(mean=(0.5,0.5,0.5),std=(0.5,0.5,0.5))")
    if ckpt is not None:
        loader.load_state_dict(ckpt["loader"])
    return loader, lambda epoch: loader.set_epoch(epoch)


def torch_loader(data, ckpt):
    ds = Folder(data)
    sampler = torch.utils.data.DistributedSampler(ds, shuffle=True, seed=SEED)
    skip = Skip(sampler, 0)
    loader = adapt.torch.DataLoader(ds, batch_size=BATCH, sampler=skip, num_workers=1)

    def start(epoch):
        skip.set_epoch(epoch)
        resumed = ckpt is not None and epoch == ckpt["epoch"]
        skip.skip = ckpt["step"] * BATCH if resumed else 0

    return loader, start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--loader", default="adapt")
    ap.add_argument("--every", type=int, default=3)
    ap.add_argument("--kill-at", type=int, default=0)
    a = ap.parse_args()
    attempt = init()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3 * 16 * 16, 64))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    latest = os.path.join(a.out, "latest")
    ckpt = None
    if os.path.exists(latest):
        with open(latest) as f:
            ckpt = torch.load(os.path.join(a.out, f.read().strip()), weights_only=False)
        model.module.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    loader, start = (adapt_loader if a.loader == "adapt" else torch_loader)(a.data, ckpt)
    first_epoch = ckpt["epoch"] if ckpt else 0
    global_step = ckpt["global_step"] if ckpt else 0
    log = open(os.path.join(a.out, f"rank-{rank}.jsonl"), "a")
    for epoch in range(first_epoch, EPOCHS):
        start(epoch)
        step = ckpt["step"] if ckpt and epoch == ckpt["epoch"] else 0
        for images, labels in loader:
            step += 1
            global_step += 1
            if attempt == 0 and rank == 1 and global_step == a.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            images, labels = torch.as_tensor(images), torch.as_tensor(labels)
            loss = torch.nn.functional.cross_entropy(model(images.flatten(1)), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            log.write(json.dumps({"attempt": attempt, "world": world, "epoch": epoch, "step": step,
                                  "global_step": global_step, "ids": labels.tolist()}) + "\n")
            log.flush()
            if rank == 0 and global_step % a.every == 0:
                state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                         "epoch": epoch, "step": step, "global_step": global_step}
                if a.loader == "adapt":
                    state["loader"] = loader.state_dict()
                name = f"ckpt-{global_step}.pt"
                torch.save(state, os.path.join(a.out, name + ".tmp"))
                os.replace(os.path.join(a.out, name + ".tmp"), os.path.join(a.out, name))
                with open(latest + ".tmp", "w") as f:
                    f.write(name)
                os.replace(latest + ".tmp", latest)
        ckpt = None if ckpt and epoch == ckpt["epoch"] else ckpt
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
