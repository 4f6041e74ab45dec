"""adapt: a data loader for deep-learning training that tunes itself.

    import adapt
    loader = adapt.DataLoader(
        adapt.datasets.CIFAR10("datasets/cifar10"),
        batch_size=128, shuffle=True, num_workers=2,
        transform="random_crop(32,padding=4),hflip,normalize(cifar10)",
    )
    for epoch in range(10):
        loader.set_epoch(epoch)
        for images, labels in loader:  # torch tensors when torch is installed
            ...

Batches come straight from the loader's buffers: numpy arrays (and torch
tensors over them) that do not own a copy; a batch's buffer goes back to
the loader's pool when its array is released. The loader's threads run
without the GIL; Ctrl-C ends an epoch promptly and leaves the loader usable.
"""

import json
import os

from . import datasets
from ._adapt import (
    AdaptError,
    BatchData,
    CheckpointError,
    ConfigError,
    DataError,
    LoaderTimeout,
    SampleError,
    WorkerError,
    RawLoader as _RawLoader,
    launch_from_env as _launch_from_env,
    parse_transform as _parse_transform,
    profile_knobs as _profile_knobs,
    tune as _tune,
)

__all__ = [
    "DataLoader", "datasets", "tune", "launch_from_env", "AdaptError", "BatchData",
    "CheckpointError", "ConfigError", "DataError", "LoaderTimeout", "SampleError", "WorkerError",
]

_OUTPUTS = ("f32", "u8", "u8-nhwc")
_torch = None


def _torch_module():
    global _torch
    if _torch is None:
        try:
            import torch  # noqa: F401

            _torch = torch
        except ImportError:
            _torch = False
    return _torch or None


def launch_from_env():
    """The launcher's (rank, world_size, local_rank, local_world_size,
    launcher) from torchrun's RANK/WORLD_SIZE or Slurm's
    SLURM_PROCID/SLURM_NTASKS, or None."""
    return _launch_from_env()


def _pipeline(dataset, transform, output, exact_decode):
    """The pipeline description (adapt_pipeline::Pipeline) as JSON: the
    dataset, the steps (text form, parsed in Rust: errors name the step),
    the output type."""
    if isinstance(dataset, datasets._Spec):
        p = {"dataset": dataset._spec(), "transforms": None}
    elif isinstance(dataset, dict) and "dataset" in dataset:
        p = dict(dataset)
    else:
        raise TypeError(
            "dataset must be an adapt.datasets object (CIFAR10, CelebA, DigiFace1M, "
            f"ImageFolder, Pack, Concat) or a pipeline description, not {type(dataset).__name__}"
        )
    if transform is not None:
        p["transforms"] = _parse_transform(transform)
    p["output"] = output or p.get("output", "f32")
    if p["output"] not in _OUTPUTS:
        raise ConfigError(f"output {p['output']!r}: expected one of {', '.join(_OUTPUTS)}")
    p["exact_decode"] = bool(exact_decode or p.get("exact_decode", False))
    return json.dumps(p)


class DataLoader:
    """PyTorch's DataLoader names, defaults and refusals, over adapt's
    Rust loader. `dataset` is an `adapt.datasets` object or a pipeline
    description (dict); `transform` the text form of the command line
    (`"random_crop(32,padding=4),hflip,normalize(cifar10)"`). With
    `transform=None` the dataset's usual normalisation is applied (its mean
    and std); a transform string is taken as written, so one without a
    `normalize` step only scales to [0, 1] (f32) or leaves the bytes as
    they are (u8). `output`
    `"f32"` (normalised NCHW), `"u8"` (NCHW) or `"u8-nhwc"`; `distributed`
    None, `"auto"` (torchrun's or Slurm's variables) or `(rank,
    world_size)`; `timeout` in seconds (0 or None: wait forever).

    `autotune=True` tunes num_workers and prefetch_factor while training:
    during the first epoch the ADaPT descent moves them between batches by
    how long the training loop waits for each batch (the data and its order
    do not change), starting from `autotune_profile`'s entry when it has one
    and saving what it settled on there. `autotune_status()` says where it
    is."""

    def __init__(self, dataset, batch_size=1, shuffle=False, num_workers=0, prefetch_factor=None,
                 pin_memory=False, persistent_workers=False, drop_last=False, seed=0, transform=None,
                 output="f32", distributed=None, timeout=None, exact_decode=False, stream=None,
                 autotune=False, autotune_profile=None):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"batch_size should be a positive integer, got {batch_size!r}")
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ConfigError("num_workers option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ConfigError("prefetch_factor option could only be specified in multiprocessing. "
                              "let num_workers > 0 to enable multiprocessing")
        if num_workers == 0 and persistent_workers:
            raise ConfigError("persistent_workers option needs num_workers > 0")
        if timeout is not None and timeout < 0:
            raise ConfigError("timeout option should be non-negative")
        rank = world = None
        self.launch = None
        if distributed == "auto":
            self.launch = _launch_from_env()
            if self.launch is not None:
                rank, world = self.launch[0], self.launch[1]
        elif distributed is not None:
            rank, world = distributed
        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        self.rank, self.world_size = rank, world
        self._pipeline_json = _pipeline(dataset, transform, output, exact_decode)
        self._raw = _RawLoader(self._pipeline_json, batch_size, shuffle, num_workers, prefetch_factor,
                               pin_memory, persistent_workers, drop_last, seed, rank, world,
                               float(timeout) if timeout else None, stream, bool(autotune),
                               os.fspath(autotune_profile) if autotune_profile else None)
        info = self._raw.info()
        self.output = info["output"]
        self.sample_shape = tuple(info["sample_shape"])
        self.device_normalize = info["device_normalize"]
        self.page_locked = info["page_locked"]
        self.transforms = info["transforms"]
        self._epoch = 0
        self._epoch_set = False
        self._resume = None

    @classmethod
    def from_profile(cls, path, dataset, batch_size=1, transform=None, output="f32", **kwargs):
        """A loader with the knobs `cargo xtask tune --profile` (or
        `adapt.tune(profile=...)`) saved for this pipeline, batch size and
        machine; PyTorch's defaults when the profile has none."""
        pipeline = _pipeline(dataset, transform, output, kwargs.get("exact_decode", False))
        knobs = _profile_knobs(os.fspath(path), pipeline, batch_size) or {}
        return cls(dataset, batch_size=batch_size, transform=transform, output=output,
                   **{**knobs, **kwargs})

    def __len__(self):
        return self._raw.batches_per_epoch()

    def autotune_status(self):
        """With autotune: {"settled": (num_workers, prefetch_factor) or None,
        "current": (num_workers, prefetch_factor), "tried": [((num_workers,
        prefetch_factor), mean wait seconds), ...]}; None without."""
        s = self._raw.autotune_status()
        if s is None:
            return None
        settled, tried, current = s
        return {"settled": settled, "current": current, "tried": tried}

    def set_epoch(self, epoch):
        """As DistributedSampler.set_epoch: the next iteration is this epoch
        (its shuffle and random draws). Without it, each iteration moves to
        the next epoch."""
        self._epoch = int(epoch)
        self._epoch_set = True

    def state_dict(self):
        """Where the loader stands: after the last batch handed out. Resume
        with load_state_dict on the same or another number of ranks."""
        return {"adapt_loader_state": self._raw.state(), "epoch": self._epoch}

    def load_state_dict(self, state):
        """The next iteration resumes the checkpointed epoch where it
        stopped (byte for byte what an uninterrupted run would yield)."""
        text = state.get("adapt_loader_state")
        if text is None:
            self._epoch = int(state.get("epoch", 0))
            self._epoch_set = True
            return
        self._resume = text

    def _convert(self, data, labels):
        images = data.array()
        torch = _torch_module()
        if torch is not None:
            return torch.from_numpy(images), torch.from_numpy(labels)
        return images, labels

    def batches(self):
        """Iterates `(BatchData, labels)` without converting (for tools and
        tests)."""
        if self._resume is not None:
            text, self._resume = self._resume, None
            epoch, _ = self._raw.resume(text)
        else:
            epoch = self._epoch
            self._raw.start(epoch)
        self._epoch = epoch
        self._epoch_set = False
        while True:
            item = self._raw.next()
            if item is None:
                break
            yield item
        if not self._epoch_set:
            self._epoch = epoch + 1

    def __iter__(self):
        for data, labels in self.batches():
            yield self._convert(data, labels)

    def close(self):
        """Stops the loader's threads now (they also stop when it is collected)."""
        self._raw.close()

    def __repr__(self):
        return (f"adapt.DataLoader({self.dataset!r}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers}, transform={self.transforms!r}, output={self.output!r})")


def tune(dataset, transform=None, output="f32", batch_size=(128,), strategy="avl", profile=None,
         retune=False, budget_bytes=None, trial_samples=16384, final_repeats=5, plain=False, seed=0,
         exact_decode=False, trial_seconds=1.0, noise_repeats=5, step_ms=None):
    """Runs the tuner (as `cargo xtask tune`) on this pipeline and returns
    {batch_size: knobs} for ADaPT's picks; with `profile`, saves them there
    for DataLoader.from_profile. Trials are sized to about `trial_seconds`
    (None: `trial_samples` as given); `noise_repeats` trials measure the
    noise first; `step_ms` is a consumer's time per batch, and the report's
    `cheapest` is the fewest-threads configuration within the noise of the
    best. The whole report is in `tune.last_report`."""
    if isinstance(batch_size, int):
        batch_size = (batch_size,)
    pipeline = _pipeline(dataset, transform, output, exact_decode)
    text = _tune(pipeline, list(batch_size), strategy, os.fspath(profile) if profile else None, retune,
                 budget_bytes, trial_samples, final_repeats, plain, seed, trial_seconds, noise_repeats,
                 step_ms)
    report = json.loads(text)
    tune.last_report = report
    picks = {}
    for run in report["runs"]:
        k = dict(run["adapt"]["config"])
        if k.get("num_workers", 0) == 0:
            k["prefetch_factor"] = None
        picks[run["batch_size"]] = k
    return picks


tune.last_report = None
