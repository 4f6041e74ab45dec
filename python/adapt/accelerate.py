"""adapt.accelerate: adapt's loader under Hugging Face Accelerate.

    from accelerate import Accelerator
    import adapt, adapt.accelerate

    accelerator = Accelerator()
    loader = adapt.DataLoader(adapt.datasets.CIFAR10("data"), batch_size=128, shuffle=True,
                              num_workers=2, distributed="auto")  # after Accelerator()
    model, optimizer = accelerator.prepare(model, optimizer)
    loader = adapt.accelerate.prepare(accelerator, loader)
    ...
    accelerator.save_state("ckpt")   # the loader's position included
    accelerator.load_state("ckpt")   # resumes it exactly

`accelerator.prepare` shards, places and checkpoints only torch's own
DataLoader; it hands any other loader back untouched, so every process
would read the whole dataset on the CPU and `save_state` would skip it.
`prepare` here does the three for adapt's loader, or refuses by name.
"""

from . import ConfigValueError

__all__ = ["prepare"]


def prepare(accelerator, loader, device_placement=None):
    """Checks that `loader` reads this process's share (built with
    `distributed="auto"` after `Accelerator()`, or `(rank, world_size)`
    matching `accelerator.process_index` and `num_processes`), registers
    it with `accelerator.register_for_checkpointing` (so `save_state` and
    `load_state` keep its position), and returns it wrapped so that each
    batch is on `accelerator.device` (`device_placement=False`, or the
    accelerator's own `device_placement=False`, leaves batches where they
    are). The wrapper answers everything else as the loader does
    (`len`, `set_epoch`, `sampler`, `state_dict`, `stats` …)."""
    processes, index = accelerator.num_processes, accelerator.process_index
    world = loader.world_size or 1
    rank = loader.rank or 0
    if (world, rank) != (processes, index):
        raise ConfigValueError(
            f"this adapt.DataLoader reads the share of rank {rank} of {world} but Accelerate runs "
            f"process {index} of {processes}: build it with distributed=\"auto\" after "
            "Accelerator() (each process then reads its own share)")
    accelerator.register_for_checkpointing(loader)
    place = accelerator.device_placement if device_placement is None else device_placement
    return _Placed(loader, accelerator.device if place else None)


class _Placed:
    """An adapt loader whose batches are sent to `device` (None: left)."""

    def __init__(self, loader, device):
        self.loader, self.device = loader, device

    def __iter__(self):
        if self.device is None or self.device.type == "cpu":
            # Batches are CPU tensors already: nothing to move.
            yield from self.loader
            return
        from accelerate.utils import send_to_device

        blocking = not getattr(self.loader, "pin_memory", False)
        for batch in self.loader:
            yield send_to_device(batch, self.device, non_blocking=not blocking)

    def __len__(self):
        return len(self.loader)

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def __repr__(self):
        return f"adapt.accelerate.prepare({self.loader!r}, device={self.device})"
