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
import warnings

from . import datasets
from ._engine_loader import EngineLoader
from ._iteration import LazyEpoch
from ._sampler import Sampler, engine_indices, plan_indices
from ._workers import default_collate, get_worker_info, reseed_mode as _reseed_mode, sample_rng
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
    plot as _plot,
    report_page as _report_page,
    profile_knobs as _profile_knobs,
    tune as _tune,
)

__all__ = [
    "DataLoader", "datasets", "tune", "plot", "launch_from_env", "get_worker_info", "sample_rng",
    "default_collate", "AdaptError", "BatchData",
    "CheckpointError", "ConfigError", "ConfigValueError", "ConfigTypeError", "DataError", "LoaderTimeout", "SampleError", "WorkerError",
]

_OUTPUTS = ("f32", "u8", "u8-nhwc")
_torch = None


def _torch_module():
    global _torch
    if _torch is None:
        try:
            import torch  # noqa: F401

            # A folder named torch on sys.path (a script's own torch/ beside
            # it) imports as an empty namespace package where torch is not
            # installed: that is no torch.
            _torch = torch if hasattr(torch, "from_numpy") else False
        except ImportError:
            _torch = False
    return _torch or None


def launch_from_env():
    """The launcher's (rank, world_size, local_rank, local_world_size,
    launcher) from torchrun's RANK/WORLD_SIZE, Lightning's launcher's
    WORLD_SIZE/LOCAL_RANK/NODE_RANK or Slurm's SLURM_PROCID/SLURM_NTASKS,
    or None."""
    return _launch_from_env()


def _process_group():
    """(rank, world_size) of an initialised torch.distributed process
    group, or None (no torch, no group)."""
    torch = _torch_module()
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist.get_rank(), dist.get_world_size()


def _launch_auto():
    """What distributed="auto" reads: an initialised torch.distributed
    process group first (Lightning, Accelerate and DDP scripts start one
    before they build loaders), then the launchers' variables; None when
    this process runs alone."""
    group = _process_group()
    if group is not None:
        env = os.environ.get
        local = env("LOCAL_RANK")
        local_world = env("LOCAL_WORLD_SIZE")
        return (group[0], group[1], int(local) if local and local.isdigit() else None,
                int(local_world) if local_world and local_world.isdigit() else None,
                "torch.distributed")
    return _launch_from_env()


_WARNED_UNSHARDED = []


def _warn_unsharded():
    """Says once per process that every rank reads the whole dataset when
    a distributed job runs and the loader was not told (torch's
    DataLoader is as silent, but Lightning shards it for its users)."""
    if _WARNED_UNSHARDED:
        return
    try:
        launch = _launch_auto()
    except ConfigError:
        launch = None
    if launch is None or launch[1] <= 1:
        return
    _WARNED_UNSHARDED.append(True)
    warnings.warn(
        f"this process is rank {launch[0]} of {launch[1]} ({launch[4]}) and this DataLoader reads "
        "the whole dataset in the same order on every rank: pass distributed=\"auto\" to give "
        "each rank its share (or distributed=False to read everything on purpose)",
        UserWarning, stacklevel=3)


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
            f"dataset must be an adapt.datasets object ({', '.join(datasets.__all__)}) or a "
            f"pipeline description, not {type(dataset).__name__}"
        )
    if transform is not None:
        p["transforms"] = _parse_transform(transform)
    p["output"] = output or p.get("output", "f32")
    if p["output"] not in _OUTPUTS:
        raise ConfigError(f"output {p['output']!r}: expected one of {', '.join(_OUTPUTS)}")
    p["exact_decode"] = bool(exact_decode or p.get("exact_decode", False))
    return json.dumps(p)


class ConfigValueError(ConfigError, ValueError):
    """A refused argument: a ConfigError, and the ValueError PyTorch raises."""


class ConfigTypeError(ConfigError, TypeError):
    """An argument of the wrong type: a ConfigError, and the TypeError
    PyTorch raises."""


def _check_int(name, value, minimum, allow_none=False):
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigTypeError(f"{name} option should be an integer, got {type(value).__name__}")
    if value < minimum:
        what = "non-negative" if minimum == 0 else "positive"
        raise ConfigValueError(f"{name} option should be {what}, got {value}")


def _is_adapt_dataset(dataset):
    return isinstance(dataset, datasets._Spec) or (isinstance(dataset, dict) and "dataset" in dataset)


def _is_ray_source(dataset):
    from ._ray_loader import is_ray_source

    return is_ray_source(dataset)


def _refuse_torch_only(dataset, **given):
    """What adapt does not honour, refused by name with what to use."""
    if given.get("generator") is not None:
        raise ConfigValueError("generator= is not honoured: adapt draws the shuffle and every sample's "
                         "random numbers from seed= (an int), the same for any worker count")
    if given.get("pin_memory_device"):
        raise ConfigValueError("pin_memory_device= is not honoured: pin_memory=True pins for the CUDA "
                         "device batches are copied to")
    sampler = given.get("sampler")
    if sampler is not None and type(sampler).__name__ == "DistributedSampler":
        raise ConfigValueError("DistributedSampler is not honoured: pass distributed=(rank, world_size) "
                         "or distributed='auto' (torchrun's or Slurm's variables), and set_epoch on "
                         "the loader")
    if _is_adapt_dataset(dataset):
        for name in ("sampler", "batch_sampler", "collate_fn", "worker_init_fn", "multiprocessing_context"):
            if given.get(name) is not None:
                raise ConfigValueError(
                    f"{name}= with an adapt.datasets object: its batches are read, transformed and "
                    f"collated in Rust; drop {name}=, or wrap the data in your own Python dataset "
                    "(any object with __getitem__ and __len__) to run Python code on it")
        if given.get("in_order") is False:
            raise ConfigValueError("in_order=False with an adapt.datasets object: its batches always come "
                             "out in order (workers never wait on each other)")
        if given.get("worker_method") not in (None, "thread"):
            raise ConfigValueError("worker_method= with an adapt.datasets object: its workers are Rust "
                             "threads (no Python runs per sample)")
        if callable(given.get("transform")):
            raise ConfigTypeError(
                "transform= of an adapt.datasets object is the text form of adapt's Rust steps "
                "(\"random_crop(32,padding=4),hflip,normalize(cifar10)\"), not a callable: give a "
                "Python dataset that applies your transform in __getitem__")


class DataLoader:
    """PyTorch's DataLoader names, defaults and refusals, over adapt.

    `dataset` is either an `adapt.datasets` object (or a pipeline
    description dict), read, transformed and collated in Rust, or **your
    own dataset**: any map-style object (`__getitem__` and `__len__`, a
    `torch.utils.data.Dataset`, a list, a `Subset`) or iterable one
    (`__iter__`, splitting itself by `adapt.get_worker_info()` or torch's
    `get_worker_info()`), read by Python workers.

    For adapt's datasets, `transform` is the text form of the Rust steps
    (`"random_crop(32,padding=4),hflip,normalize(cifar10)"`). The rule for
    normalisation: `transform=None` applies the dataset's usual
    normalisation (its mean and std); a transform string is taken as
    written, so one without a `normalize` step only scales to [0, 1] (f32)
    or leaves the bytes as they are (u8). `output` `"f32"` (normalised
    NCHW), `"u8"` (NCHW) or `"u8-nhwc"`.

    For your own dataset, PyTorch's arguments keep PyTorch's meaning:
    `sampler`, `batch_sampler`, `collate_fn` (default: PyTorch's
    `default_collate`), `worker_init_fn`, `multiprocessing_context`,
    `in_order`, `timeout`, `drop_last`, `batch_size=None`. Workers are
    processes (`worker_method="process"`, as PyTorch's) or threads
    (`worker_method="thread"`: no pickling, the GIL shared; code that
    releases it — PIL decoding, numpy, torch ops — runs in parallel). A
    sample made of fixed-shape arrays (numpy, torch, PIL, numbers; in tuples,
    lists or dicts) is written by the worker straight into its row of a
    pooled batch buffer (shared memory for processes), so collation is the
    one copy and nothing is pickled. Randomness is seeded so that a random
    transform gives the same batches for any worker count:
    `adapt.sample_rng()` per sample from (seed, epoch, index), in any
    worker; and in process workers and without workers, `random`,
    `numpy.random` and torch's CPU generator (which torchvision's transforms
    draw from) reseeded at each batch from (seed, epoch, rank, batch
    number) — `reseed_globals="batch"`, the default, which costs about 7 µs
    a batch. `reseed_globals="sample"` reseeds them at each sample from
    (seed, epoch, index) instead, so a sample's draws do not depend on the
    batch it is in (about 7 µs a sample); `False` leaves them alone (for a
    dataset that draws only from `adapt.sample_rng()`, or nothing). Without
    workers the main process's own states are put back after each batch.
    In thread workers the global generators are shared and never reseeded:
    a transform drawing from them is then not reproducible across worker
    counts.
    An exception in `__getitem__` or `collate_fn` is raised in the training
    loop with its type, the index and the worker's traceback; a worker
    process that dies is a `WorkerError` naming it and the signal.

    Both: `shuffle` reshuffles on every iteration (or per `set_epoch`);
    `distributed`: `"auto"` (an initialised torch.distributed process
    group, else torchrun's, Lightning's or Slurm's variables) or
    `(rank, world_size)` give each rank its share; None reads everything
    and warns once when a distributed job runs; False reads everything
    without a word; `timeout` in seconds (0 or None: wait forever);
    `state_dict()` / `load_state_dict()` resume exactly, on the same or
    another world size (map-style datasets with adapt's own sampler).
    `generator=` is refused: the shuffle and the per-sample randomness come
    from `seed=`.

    `autotune=True` (adapt's datasets) tunes num_workers and
    prefetch_factor while training: during the first epoch the ADaPT
    descent moves them between batches by how long the training loop waits
    for each batch (the data and its order do not change), starting from
    `autotune_profile`'s entry when it has one and saving what it settled
    on there. `autotune_status()` says where it is.

    `stats()` says where the epoch's time went: seconds per stage, the
    workers' busy share, the training loop's wait and a one-line verdict
    naming the bottleneck (`stage_timing=False` records nothing)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="", in_order=True,
                 seed=0, transform=None, output="f32", distributed=None, exact_decode=False,
                 stream=None, autotune=False, autotune_profile=None, worker_method=None,
                 reseed_globals="batch", interleave=None, stage_timing=True):
        _check_int("batch_size", batch_size, 1, allow_none=True)
        _check_int("num_workers", num_workers, 0)
        _check_int("prefetch_factor", prefetch_factor, 1, allow_none=True)
        _check_int("interleave", interleave, 1, allow_none=True)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigTypeError(f"seed option should be an integer, got {type(seed).__name__}")
        if num_workers == 0 and prefetch_factor is not None and not _is_ray_source(dataset):
            raise ConfigValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers == 0 and persistent_workers:
            raise ConfigValueError("persistent_workers option needs num_workers > 0")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout < 0):
            raise ConfigValueError("timeout option should be non-negative")
        _refuse_torch_only(dataset, generator=generator, pin_memory_device=pin_memory_device,
                           sampler=sampler, batch_sampler=batch_sampler, collate_fn=collate_fn,
                           worker_init_fn=worker_init_fn, multiprocessing_context=multiprocessing_context,
                           in_order=in_order, worker_method=worker_method, transform=transform)
        if worker_method not in (None, "thread", "process"):
            raise ConfigValueError(f"worker_method {worker_method!r}: expected 'thread' or 'process'")
        _warn_like_pytorch(num_workers, pin_memory)
        rank = world = None
        self.launch = None
        if distributed == "auto":
            self.launch = _launch_auto()
            if self.launch is not None:
                rank, world = self.launch[0], self.launch[1]
        elif distributed is None:
            _warn_unsharded()
        elif distributed is not False:
            if (not isinstance(distributed, (tuple, list)) or len(distributed) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) for v in distributed)):
                raise ConfigTypeError(f"distributed={distributed!r}: expected \"auto\", "
                                      "(rank, world_size), None or False")
            rank, world = distributed
        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers
        self.drop_last = drop_last
        self.seed = seed
        self.rank, self.world_size = rank, world
        self.collate_fn, self.sampler, self.batch_sampler = collate_fn, sampler, batch_sampler
        self.timeout = timeout
        self.stage_timing = bool(stage_timing)
        if _is_ray_source(dataset):
            self._init_ray(dataset, distributed, shuffle, transform, output, num_workers)
            return
        if not _is_adapt_dataset(dataset):
            if interleave is not None:
                raise ConfigValueError("interleave= is the shards an adapt.datasets.WebDataset or "
                                       "Parquet stream reads at once; a Python dataset orders "
                                       "its own samples (give it a sampler=)")
            self._init_python(dataset, shuffle, transform, output, stream, autotune, worker_method,
                              worker_init_fn, multiprocessing_context, in_order, reseed_globals)
            if getattr(self._backend, "_plan", None) is not None:
                self.sampler = self._own_sampler(plan_indices)
            return
        if batch_size is None:
            raise ConfigValueError("batch_size=None with an adapt.datasets object: its samples are always "
                             "batched (batch_size=1 for one at a time)")
        self.shuffle = bool(shuffle)
        self.worker_method = "thread"
        self._pipeline_json = _pipeline(dataset, transform, output, exact_decode)
        knobs = dict(num_workers=num_workers, prefetch_factor=prefetch_factor,
                     pin_memory=bool(pin_memory), persistent_workers=bool(persistent_workers))
        options = dict(batch_size=batch_size, shuffle=self.shuffle, knobs=knobs, drop_last=bool(drop_last),
                       seed=seed, rank=rank, world_size=world,
                       timeout=float(timeout) if timeout else None, stream=stream,
                       autotune=bool(autotune),
                       autotune_profile=os.fspath(autotune_profile) if autotune_profile else None,
                       interleave=interleave, stage_timing=self.stage_timing)
        raw = _RawLoader(self._pipeline_json, json.dumps(options))
        info = raw.info()
        self.output = info["output"]
        self.sample_shape = tuple(info["sample_shape"])
        self.device_normalize = info["device_normalize"]
        self.page_locked = info["page_locked"]
        self.transforms = info["transforms"]
        self._backend = EngineLoader(raw, dataset, _torch_module)
        self.sampler = self._own_sampler(engine_indices)

    def _own_sampler(self, indices):
        return Sampler(self._backend, indices, shuffle=self.shuffle, seed=self.seed, rank=self.rank,
                       world_size=self.world_size, drop_last=self.drop_last)

    def _init_ray(self, source, distributed, shuffle, transform, output, num_workers):
        """A Ray Data stream as the source: Ray reads and prefetches
        (`prefetch_factor` batches, Ray's `prefetch_batches`), adapt's steps
        collate each batch into its pooled buffers."""
        from ._ray_loader import RayLoader

        for name, value, instead in (
                ("distributed", distributed not in (None, False), "pass one rank's share: "
                 "ds.streaming_split(world_size)[rank] (Ray Train gives it as get_dataset_shard)"),
                ("shuffle", shuffle, "shuffle in Ray (ds.random_shuffle()) or read with "
                 "adapt.ray.read(..., shuffle=True)"),
                ("num_workers", num_workers, "Ray's read tasks are the workers; prefetch_factor= "
                 "sets Ray's prefetch_batches"),
                ("sampler", self.sampler, "order the stream in Ray"),
                ("batch_sampler", self.batch_sampler, "batch_size= batches the stream"),
                ("collate_fn", self.collate_fn, "use ds.iter_torch_batches(collate_fn=...) instead")):
            if value:
                raise ConfigValueError(f"{name}= with a Ray Data stream: {instead}")
        if output not in _OUTPUTS:
            raise ConfigValueError(f"output {output!r}: expected one of {', '.join(_OUTPUTS)}")
        if transform is not None:
            _parse_transform(transform)
        self.shuffle = False
        self.worker_method = "thread"
        self.transforms, self.output = transform, output
        self._backend = RayLoader(source, self.batch_size, transform, output, bool(self.drop_last),
                                  bool(self.pin_memory), self.seed, self.prefetch_factor or 1)

    def _init_python(self, dataset, shuffle, transform, output, stream, autotune, worker_method,
                     worker_init_fn, multiprocessing_context, in_order, reseed_globals):
        from ._python_loader import PythonLoader, is_iterable_dataset

        iterable = is_iterable_dataset(dataset)
        for name, value in (("stream", stream), ("autotune", autotune)):
            if value:
                raise ConfigValueError(f"{name}= with a Python dataset is not supported yet (it "
                                       "needs adapt's own datasets)")
        if callable(transform):
            raise ConfigTypeError(
                "transform= is the text form of adapt's Rust steps (\"random_resized_crop(224),"
                "hflip,normalize(imagenet)\"), run after your __getitem__; apply a callable "
                "transform (a torchvision Compose) in __getitem__")
        if transform is not None:
            if output not in _OUTPUTS:
                raise ConfigValueError(f"output {output!r}: expected one of {', '.join(_OUTPUTS)}")
            _parse_transform(transform)  # a bad step is refused now, naming it
            for name, value in (("collate_fn", self.collate_fn), ("batch_sampler", self.batch_sampler),
                                ("iterable dataset", iterable or None)):
                if value is not None:
                    raise ConfigValueError(
                        f"transform= with {'an ' if name[0] == 'i' else ''}{name}: adapt's steps "
                        "collate in Rust over (image, label) samples of a map-style dataset; "
                        "apply your transform in __getitem__ instead")
            if self.batch_size is None:
                raise ConfigValueError("transform= with batch_size=None: adapt's steps batch")
        elif output != "f32":
            raise ConfigValueError("output= with a Python dataset needs transform=: without adapt's "
                                   "steps the batches are your samples, collated")
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", self.sampler),
                                ("batch_sampler", self.batch_sampler)):
                if value:
                    raise ConfigValueError(f"DataLoader with IterableDataset: expected unspecified {name} "
                                     f"option, but got {name}={value!r}")
        if self.sampler is not None and shuffle:
            raise ConfigValueError("sampler option is mutually exclusive with shuffle")
        if self.batch_sampler is not None:
            if self.batch_size != 1 or shuffle or self.sampler is not None or self.drop_last:
                raise ConfigValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
        if self.batch_size is None and self.drop_last:
            raise ConfigValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if not iterable and not hasattr(dataset, "__getitem__"):
            raise ConfigTypeError(
                f"dataset must be an adapt.datasets object, a map-style dataset (__getitem__ and "
                f"__len__) or an iterable one (__iter__), not {type(dataset).__name__}")
        if not iterable and not hasattr(dataset, "__len__"):
            raise ConfigTypeError(f"dataset of type {type(dataset).__name__} has __getitem__ but no "
                            "__len__: a map-style dataset needs both (or give it __iter__)")
        try:
            reseed_globals = _reseed_mode(reseed_globals)
        except ValueError as e:
            raise ConfigValueError(str(e)) from None
        method = worker_method or "process"
        if method == "thread" and multiprocessing_context is not None:
            raise ConfigValueError("multiprocessing_context= with worker_method='thread': threads need none")
        self.shuffle = bool(shuffle)
        self.worker_method = method
        self._backend = PythonLoader(
            dataset, batch_size=self.batch_size, shuffle=self.shuffle, sampler=self.sampler,
            batch_sampler=self.batch_sampler, num_workers=self.num_workers, collate_fn=self.collate_fn,
            pin_memory=self.pin_memory, drop_last=self.drop_last, timeout=self.timeout,
            worker_init_fn=worker_init_fn, multiprocessing_context=multiprocessing_context,
            prefetch_factor=self.prefetch_factor, persistent_workers=self.persistent_workers,
            in_order=in_order, seed=self.seed, rank=self.rank, world_size=self.world_size,
            worker_method=method, steps=transform, output=output, reseed_globals=reseed_globals,
            stage_timing=self.stage_timing)
        self.transforms = transform
        self.output = output if transform is not None else None

    @classmethod
    def from_profile(cls, path, dataset, batch_size=1, transform=None, output="f32", strict=False,
                     **kwargs):
        """A loader with the knobs `cargo xtask tune --profile` (or
        `adapt.tune(profile=...)`) saved for this pipeline, batch size and
        machine. Without an entry (no such file, or none for this pipeline,
        batch size or machine) it warns, naming the reason, and uses
        PyTorch's defaults; `strict=True` raises instead. Knobs given here
        win; giving `num_workers` drops the profile's `prefetch_factor` and
        `persistent_workers`, which belonged to its own worker count."""
        path = os.fspath(path)
        pipeline = _pipeline(dataset, transform, output, kwargs.get("exact_decode", False))
        knobs, reason = None, None
        if not os.path.exists(path):
            reason = f"{path}: no such profile"
        else:
            knobs = _profile_knobs(path, pipeline, batch_size)
            if knobs is None:
                reason = (f"{path} has no entry for this pipeline at batch size {batch_size} on this "
                          "machine (tune it with adapt.tune(..., profile=path))")
        if reason is not None:
            if strict:
                raise ConfigValueError(reason)
            warnings.warn(f"{reason}: using PyTorch's defaults (num_workers=0)", UserWarning,
                          stacklevel=2)
            knobs = {}
        knobs = dict(knobs)
        if "num_workers" in kwargs:
            for k in ("prefetch_factor", "persistent_workers"):
                if k not in kwargs:
                    knobs.pop(k, None)
        return cls(dataset, batch_size=batch_size, transform=transform, output=output,
                   **{**knobs, **kwargs})

    def __len__(self):
        return len(self._backend)

    def autotune_status(self):
        """With autotune: {"settled": (num_workers, prefetch_factor) or None,
        "current": (num_workers, prefetch_factor), "tried": [((num_workers,
        prefetch_factor), mean wait seconds), ...]} (prefetch_factor None with
        0 workers, as PyTorch has it); None without."""
        return self._backend.autotune_status()

    def stats(self):
        """Where the current (or last) epoch's time went, as `load --stages`
        prints it: {"seconds": {stage: seconds summed over the workers},
        "busy_seconds", "busy_share", "wait_seconds", "wait_share",
        "epoch_seconds", "num_workers", "workers": [{"busy_seconds",
        "samples"}], "verdict": one line naming the bottleneck}. The stages
        of adapt's datasets are read, decode, each step and collate; of
        your own dataset, your `__getitem__` (or `next()`), adapt's steps
        (with `transform=`) and `collate_fn` (or adapt's collation into the
        batch). None before the first epoch, or with `stage_timing=False`
        (or `ADAPT_STAGE_TIMING=0` for adapt's datasets)."""
        return self._backend.stats()

    def set_epoch(self, epoch):
        """As DistributedSampler.set_epoch: the next iteration is this epoch
        (its shuffle and random draws). Without it, each iteration moves to
        the next epoch, as PyTorch draws a new order on every iter()."""
        self._backend.set_epoch(epoch)

    def state_dict(self):
        """Where the loader stands: after the last batch handed out. Resume
        with load_state_dict on the same or another number of ranks."""
        return self._backend.state_dict()

    def load_state_dict(self, state):
        """The next iteration resumes the checkpointed epoch where it
        stopped (byte for byte what an uninterrupted run would yield)."""
        self._backend.load_state_dict(state)

    def batches(self):
        """Iterates `(BatchData, labels)` without converting (for tools and
        tests; adapt's datasets only)."""
        return self._backend.batches()

    def __iter__(self):
        return LazyEpoch(self._backend)

    def close(self):
        """Stops the loader's threads and worker processes now (they also
        stop when it is collected)."""
        self._backend.close()

    def __repr__(self):
        return (f"adapt.DataLoader({self.dataset!r}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers}, transform={self.transforms!r}, output={self.output!r})")


def _warn_like_pytorch(num_workers, pin_memory):
    """PyTorch's warnings: workers above the cores, pinning without a GPU."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cores and num_workers > cores:
        warnings.warn(
            f"This DataLoader will create {num_workers} worker processes in total. Our suggested max "
            f"number of worker in current system is {cores}, which is smaller than what this "
            "DataLoader is going to create. Please be aware that excessive worker creation might get "
            "DataLoader running slow or even freeze, lower the worker number to avoid potential "
            "slowness/freeze if necessary.", UserWarning, stacklevel=3)
    if pin_memory:
        torch = _torch_module()
        if torch is None or not torch.cuda.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then "
                          "device pinned memory won't be used.", UserWarning, stacklevel=3)


def tune(dataset, transform=None, output="f32", batch_size=(128,), strategy="avl", profile=None,
         retune=False, budget_bytes=None, trial_samples=16384, final_repeats=5, avl=None, race=True,
         plain=False, seed=0, exact_decode=False, trial_seconds=1.0, noise_repeats=5, step_ms=None,
         space="machine", progress=True, prune=True, report=None):
    """Runs the tuner (as `cargo xtask tune`) on this pipeline and returns
    {batch_size: knobs} for ADaPT's picks; with `profile`, saves them there
    for DataLoader.from_profile. Trials are sized to about `trial_seconds`
    (None: `trial_samples` as given); `noise_repeats` trials measure the
    noise first; `step_ms` is a consumer's time per batch, and the report's
    `cheapest` is the fewest-threads configuration within the noise of the
    best. `space` is "machine" (num_workers 0 … 2 × cores) or "paper".
    `avl` is the descent, "plain" (the paper's) or "refined" (None: the
    default, chosen by measurement, docs/tuning.md); `race=False` drops
    the noise race (and pruning, which needs its measured noise);
    `prune=False` runs every search trial whole and skips none;
    `plain=True` is the paper's algorithm as published.
    `progress`: True prints a line per trial to stderr (configuration,
    seconds, best so far, time left where known), False is silent, a
    callable gets each line. The whole report is in `tune.last_report`;
    `report` (a path) also writes it as one self-contained HTML page, with
    where an epoch's time goes under the pick against the default
    (measured after the tuning, one epoch each), as `tune --report`."""
    if isinstance(batch_size, int):
        batch_size = (batch_size,)
    pipeline = _pipeline(dataset, transform, output, exact_decode)
    options = dict(batch_sizes=list(batch_size), strategy=strategy, space=space,
                   profile=os.fspath(profile) if profile else None, retune=retune,
                   budget_bytes=budget_bytes, trial_samples=trial_samples,
                   final_repeats=final_repeats, avl=avl, race=race, prune=prune, plain=plain,
                   seed=seed, trial_seconds=trial_seconds,
                   noise_repeats=noise_repeats, step_ms=step_ms)
    with _progress_printer(progress) as show:
        text = _tune(pipeline, options, show)
    if report is not None:
        _report_page(text, os.fspath(report), pipeline)
    report = json.loads(text)
    tune.last_report = report
    return _picks(report)


def _picks(report):
    """{batch_size: DataLoader kwargs} of a report's picks."""
    picks = {}
    for run in report["runs"]:
        k = dict(run["adapt"]["config"])
        if k.get("num_workers", 0) == 0:
            k["prefetch_factor"] = None
            k["persistent_workers"] = False
        picks[run["batch_size"]] = k
    return picks


class _progress_printer:
    """What `progress=` asks for, as a callable for the tuner (None when
    silent). On a terminal each line replaces the last; elsewhere (a log,
    a notebook's captured stderr) every line is printed."""

    def __init__(self, progress):
        import sys

        self.stream = sys.stderr
        self.live = False
        if progress is True:
            self.live = hasattr(self.stream, "isatty") and self.stream.isatty()
            self.callback = self._print
        elif progress is False or progress is None:
            self.callback = None
        elif callable(progress):
            self.callback = progress
        else:
            raise ConfigTypeError(f"progress must be True, False or a callable, not {progress!r}")

    def _print(self, line):
        if self.live:
            import shutil

            width = shutil.get_terminal_size((100, 20)).columns - 1
            self.stream.write("\r" + line[:width].ljust(width))
        else:
            self.stream.write(f"adapt: {line}\n")
        self.stream.flush()

    def __enter__(self):
        return self.callback

    def __exit__(self, *exc):
        if self.live:
            self.stream.write("\n")
            self.stream.flush()
        return False


def plot(report, path):
    """Writes the SVG plot of a tuning report (`tune.last_report`, or the
    JSON `cargo xtask tune --json` wrote, as a dict or a path) to `path`."""
    if isinstance(report, (str, os.PathLike)) and os.path.exists(report):
        with open(report) as f:
            report = json.load(f)
    _plot(json.dumps(report), os.fspath(path))


tune.last_report = None
