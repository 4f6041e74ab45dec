"""A small Accelerate training job over adapt's loader, for
test_accelerate.py, run by torchrun with 2 CPU processes
(`python -m torch.distributed.run --nproc_per_node=2 accelerate_job.py DATA
OUT`): each process trains 5 steps of epoch 0, saves the state, trains on
to the epoch's end; a fresh loader then loads the state and trains the
rest of the epoch again. OUT/rank-R.json holds what each saw."""

import hashlib
import json
import sys

import torch
from accelerate import Accelerator

import adapt
import adapt.accelerate


def digest(images):
    return hashlib.sha1(images.contiguous().numpy().tobytes()).hexdigest()


def make(data):
    return adapt.DataLoader(adapt.datasets.CIFAR10(data), batch_size=50, shuffle=True,
                            num_workers=1, seed=5, distributed="auto")


def main(data, out):
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(3 * 32 * 32, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    loader = adapt.accelerate.prepare(accelerator, make(data))
    seen, after = [], []
    for step, (images, labels) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(images.flatten(1)), labels)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        seen.append(digest(images))
        if step == 4:
            accelerator.save_state(f"{out}/state")
    # A restart: a new loader, the saved state loaded back into it.
    accelerator._custom_objects.clear()
    again = adapt.accelerate.prepare(accelerator, make(data))
    accelerator.load_state(f"{out}/state")
    after = [digest(images) for images, _ in again]
    refused = None
    try:
        adapt.accelerate.prepare(accelerator, adapt.DataLoader(
            adapt.datasets.CIFAR10(data), batch_size=50, distributed=False))
    except adapt.ConfigValueError as e:
        refused = str(e)
    rank = accelerator.process_index
    with open(f"{out}/rank-{rank}.json", "w") as f:
        json.dump({"seen": seen, "after": after, "order": list(loader.sampler),
                   "world": accelerator.num_processes, "refused": refused}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
