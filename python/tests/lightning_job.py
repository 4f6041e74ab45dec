"""A small Lightning training job over adapt's loader, for test_lightning.py:
imported by the single-process tests, and run as a script for DDP
(`python lightning_job.py DATA OUT MODE`: Lightning's launcher starts the
second rank by running this file again). Every training step records the
epoch and the digest of its images; a DDP rank also records its sampler's
orders and the warnings it saw, into OUT/rank-R.json."""

import hashlib
import json
import sys
import warnings

import lightning as L
import torch

import adapt

BATCH = 50
RECIPE = "random_crop(32,padding=4),hflip,normalize(cifar10)"


def digest(images):
    return hashlib.sha1(images.detach().cpu().contiguous().numpy().tobytes()).hexdigest()


def loader(data, **kw):
    return adapt.DataLoader(adapt.datasets.CIFAR10(data), batch_size=BATCH, shuffle=True,
                            num_workers=1, seed=11, transform=RECIPE, **kw)


class Crash(Exception):
    """A job killed mid-epoch."""


class Net(L.LightningModule):
    """A linear classifier; `crash_at`: raise at that global step (a job
    killed mid-epoch)."""

    def __init__(self, data, crash_at=None, **loader_kw):
        super().__init__()
        self.data, self.crash_at, self.loader_kw = data, crash_at, loader_kw
        self.layer = torch.nn.Linear(3 * 32 * 32, 10)
        self.seen = []
        self.train_loader = None

    def train_dataloader(self):
        self.train_loader = loader(self.data, **self.loader_kw)
        return self.train_loader

    def training_step(self, batch, _):
        images, labels = batch
        if self.crash_at is not None and self.global_step == self.crash_at:
            raise Crash(f"simulated crash at step {self.global_step}")
        self.seen.append((self.current_epoch, digest(images)))
        return torch.nn.functional.cross_entropy(self.layer(images.flatten(1)), labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def trainer(out, epochs, callbacks=(), **kw):
    return L.Trainer(max_epochs=epochs, accelerator="cpu", default_root_dir=str(out),
                     logger=False, enable_progress_bar=False, enable_model_summary=False,
                     callbacks=list(callbacks), **kw)


def ddp(data, out, mode):
    """Two ranks, strategy="ddp" on CPU (gloo); `mode` "auto" or "default"
    (no `distributed=`)."""
    kw = {"distributed": "auto"} if mode == "auto" else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        net = Net(data, **kw)
        trainer(out, 2, devices=2, strategy="ddp", enable_checkpointing=False).fit(net)
    rank = net.global_rank
    sampler = net.train_loader.sampler
    orders = []
    for e in range(2):
        sampler.set_epoch(e)
        orders.append(list(sampler))
    with open(f"{out}/rank-{rank}.json", "w") as f:
        json.dump({"seen": net.seen, "orders": orders, "len": len(net.train_loader),
                   "warnings": [str(w.message) for w in caught if "adapt" in str(w.filename)
                                or "DataLoader reads" in str(w.message)]}, f)


if __name__ == "__main__":
    ddp(sys.argv[1], sys.argv[2], sys.argv[3])
