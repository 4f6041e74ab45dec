"""adapt.ray: adapt's readers as a Ray Data datasource.

    import ray, adapt, adapt.ray
    ds = adapt.ray.read(adapt.datasets.ImageFolder("datasets/imagenet"),
                        transform="random_resized_crop(224),hflip", output="u8-nhwc")
    for batch in ds.iter_batches(batch_size=256):   # {"image", "label", "index"}
        ...

Each read task is one share of adapt's order of the epoch (as a rank of
`distributed=(task, tasks)` would read it, with the share's padding left
out, so every sample comes exactly once), read, decoded and transformed by
adapt's own readers and Rust steps in the Ray worker, so Ray spreads the
decoding over a cluster's CPU nodes. The pixels of a sample are those
adapt's own loader gives it: its random steps draw from (seed, epoch,
index), whichever task reads it. Packs, WebDataset, Parquet, image folders,
CIFAR-10 and the other `adapt.datasets`, local or at `s3://`/`https://`.
Needs `ray[data]` (not a dependency of adapt).

`adapt.ray.tune` finds Ray Data's own knobs for such a read (or for your
own pipeline): the read's `concurrency`, tasks and rows per block, and
`iter_batches`' `prefetch_batches`, with ADaPT's search and noise rules:

    knobs = adapt.ray.tune(data, batch_size=256, transform=..., step=train_step)
    ds = adapt.ray.read(data, transform=..., **knobs["read"])
    for batch in ds.iter_batches(batch_size=256, **knobs["iter_batches"]):
        ...
"""

import json
import math
import time

import numpy as np

from . import ConfigTypeError, ConfigValueError, DataLoader, _is_adapt_dataset, _progress_printer

__all__ = ["read", "tune"]


def _ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise ImportError("adapt.ray needs Ray Data: pip install 'ray[data]'") from e
    return ray


def _share(dataset, task, tasks, batch_size, shuffle, seed, epoch, transform, output):
    """Task `task`'s share of the epoch as blocks of {"image", "label",
    "index"}. A share is rank `task`'s of `tasks` (adapt's per-rank order,
    interleaved as torch's DistributedSampler); where the ranks' equal
    shares were padded past the dataset's end, the padding (the share's
    last sample) is dropped."""
    from ray.data.block import BlockAccessor

    loader = DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, seed=seed,
                        distributed=(task, tasks) if tasks > 1 else False,
                        transform=transform, output=output, num_workers=0)
    loader.set_epoch(epoch)
    n = len(dataset)
    indices = list(loader.sampler)
    keep = len(indices) - (1 if (len(indices) - 1) * tasks + task >= n else 0)
    start = 0
    for images, labels in loader:
        images, labels = np.asarray(images), np.asarray(labels)
        rows = min(len(labels), keep - start)
        if rows <= 0:
            break
        yield BlockAccessor.batch_to_block({
            "image": images[:rows], "label": labels[:rows].astype(np.int64),
            "index": np.asarray(indices[start:start + rows], dtype=np.int64)})
        start += rows


def _datasource(dataset, options):
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    n = len(dataset)

    class AdaptDatasource(Datasource):
        """adapt's reader over one dataset: a read task per share."""

        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            tasks = max(1, min(parallelism, n))
            out = []
            for task in range(tasks):
                meta = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None,
                                     input_files=None)

                def read_fn(task=task):
                    return _share(dataset, task, tasks, **options)

                out.append(ReadTask(read_fn, meta, per_task_row_limit=per_task_row_limit))
            return out

        def get_name(self):
            return f"adapt({type(dataset).__name__})"

    return AdaptDatasource()


def read(dataset, *, transform=None, output="u8-nhwc", batch_size=256, shuffle=False, seed=0,
         epoch=0, num_blocks=None, concurrency=None, num_cpus=1):
    """A `ray.data.Dataset` of rows {"image", "label", "index"} read by
    adapt's readers: `dataset` is an `adapt.datasets` object (or a pipeline
    description dict), `transform` and `output` as `adapt.DataLoader`'s
    (u8 NHWC by default, what Ray's tensor columns hold compactly),
    `batch_size` the rows of each block a task yields, `shuffle`, `seed`
    and `epoch` adapt's order and random steps, `num_blocks` the read tasks
    (Ray's `override_num_blocks`; by default Ray's choice), `concurrency`
    how many run at once (Ray's; by default as many as the CPUs allow) and
    `num_cpus` each task's CPUs."""
    ray = _ray()
    if not _is_adapt_dataset(dataset):
        raise ConfigTypeError(f"adapt.ray.read reads an adapt.datasets object, got "
                              f"{type(dataset).__name__}: for your own Python dataset use "
                              "ray.data.from_items or a Ray datasource of your own")
    if callable(transform):
        raise ConfigTypeError("transform= is the text form of adapt's Rust steps; a Python "
                              "function runs after the read: ds.map_batches(fn)")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigValueError(f"batch_size {batch_size!r}: expected a positive int")
    if len(dataset) == 0:
        raise ConfigValueError(f"{dataset!r} has no samples")
    # Built here once, so a bad step or path is refused in the driver, not in a task.
    DataLoader(dataset, batch_size=batch_size, transform=transform, output=output, num_workers=0)
    options = dict(batch_size=batch_size, shuffle=shuffle, seed=seed, epoch=epoch,
                   transform=transform, output=output)
    return ray.data.read_datasource(_datasource(dataset, options), override_num_blocks=num_blocks,
                                    concurrency=concurrency, num_cpus=num_cpus)


#: The knobs `tune` searches, outermost first (the last is searched first,
#: under every other): where each goes, and its untuned value.
_KNOBS = (("prefetch_batches", "iter_batches"), ("batch_size", "read"), ("num_blocks", "read"),
          ("concurrency", "read"))
_UNTUNED = {"prefetch_batches": 1, "batch_size": 256}


def _cluster_cpus(ray):
    """The CPUs of the cluster this process is connected to (connecting,
    as Ray Data would, where it is not)."""
    if not ray.is_initialized():
        ray.init()
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _space(ray, space, trial_samples):
    """The knobs as the tuner takes them: concurrency 1 … the cluster's
    CPUs (Ray's own default runs as many read tasks at once as there are
    CPUs), read tasks (`num_blocks`) the CPUs × 1, 2, 4 … 32 beside Ray's
    own choice for a source of unknown size (`read_op_min_num_blocks`,
    200), rows per read block 32 … 1024 in powers of two (at most the
    trial's samples), prefetch_batches 1 … 16; `space` replaces a knob's
    values (the untuned value is then the nearest of them)."""
    cpus = _cluster_cpus(ray)
    ray_blocks = int(getattr(ray.data.DataContext.get_current(), "read_op_min_num_blocks", 200))
    concurrency = list(range(1, min(cpus, 16) + 1))
    concurrency += [c for c in (32, 64, 128, 256, 512) if 16 < c < cpus] + [cpus] * (cpus > 16)
    values = {
        "concurrency": concurrency,
        "num_blocks": sorted({cpus * k for k in (1, 2, 4, 8, 16, 32)} | {ray_blocks}),
        "batch_size": [b for b in (32, 64, 128, 256, 512, 1024) if b <= max(32, trial_samples)],
        "prefetch_batches": [1, 2, 4, 8, 16],
    }
    untuned = dict(_UNTUNED, concurrency=cpus, num_blocks=ray_blocks)
    for name, given in (space or {}).items():
        if name not in values:
            raise ConfigValueError(f"space= names {name!r}: adapt.ray.tune searches "
                                   f"{', '.join(n for n, _ in _KNOBS)}")
        if (not isinstance(given, (list, tuple)) or not given
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in given)):
            raise ConfigValueError(f"space[{name!r}] = {given!r}: expected a list of positive ints")
        values[name] = sorted(set(given))
    knobs = []
    for name, _ in _KNOBS:
        vs = values[name]
        knobs.append(dict(name=name, values=vs, default=min(vs, key=lambda v: abs(v - untuned[name]))))
    return knobs


def _estimate(spent, first, done, total):
    """A cut-short trial's whole time: the start-up (to the first batch)
    once, then the batches left at the pace of those after the first (at
    least the time spent: pruning needs an estimate past its bound)."""
    if done < 2:
        return spent * total / done
    return spent + (total - done) * (spent - first) / (done - 1)


class _RayTrials:
    """The trial function the Rust tuner calls: a fresh Ray Dataset built
    with the configuration's read knobs, limited to `samples` rows, read
    through `iter_batches` with its `prefetch_batches`, `step` on every
    batch."""

    def __init__(self, make, batch_size, samples, step, step_ms):
        self.make, self.batch_size, self.samples = make, batch_size, samples
        self.step, self.step_s = step, None if step_ms is None else step_ms / 1000.0
        self.rows = []  # (rows read, purpose or "cut short") of each trial, in order

    def __call__(self, knobs, purpose, give_up_after=None):
        start = time.perf_counter()
        ds = self.make(**{name: knobs[name] for name, where in _KNOBS if where == "read"})
        total = math.ceil(self.samples / self.batch_size)
        done = rows = 0
        first = None  # seconds to the first batch: Ray's start-up, paid once
        it = ds.limit(self.samples).iter_batches(batch_size=self.batch_size, batch_format="numpy",
                                                 prefetch_batches=knobs["prefetch_batches"])
        try:
            for batch in it:
                if first is None:
                    first = time.perf_counter() - start
                rows += len(next(iter(batch.values())))
                if purpose != "warm-up":
                    if self.step is not None:
                        self.step(batch)
                    elif self.step_s:
                        time.sleep(self.step_s)
                done += 1
                spent = time.perf_counter() - start
                if give_up_after is not None and spent > give_up_after and done < total:
                    self.rows.append((rows, "cut short"))
                    return ("cut_short", _estimate(spent, first, done, total))
        finally:
            it = ds = None  # Ray's executor for this trial ends here
        self.rows.append((rows, purpose))
        return None


def tune(source, batch_size=256, *, transform=None, output="u8-nhwc", shuffle=False, seed=0,
         num_cpus=1, step=None, step_ms=None, trial_samples=4096, space=None, noise_repeats=3,
         final_repeats=3, avl=None, race=True, prune=True, plain=False, progress=True):
    """Tunes Ray Data's knobs for a training loop reading `batch_size`
    rows at a time, with ADaPT's search (the AVL descent, the noise race,
    pruning, the final comparison with Ray's defaults) and returns
    `{"read": {"concurrency": c, "batch_size": rows, "num_blocks": tasks},
    "iter_batches": {"prefetch_batches": p}}`: the read's keywords
    (`adapt.ray.read`'s, or your pipeline's) and `iter_batches`'
    (`adapt.DataLoader` over the stream takes it as `prefetch_factor=`).

    `source` is an `adapt.datasets` object, read with `adapt.ray.read`
    (`transform`, `output`, `shuffle`, `seed`, `num_cpus` as its), or a
    callable `make(concurrency=, batch_size=, num_blocks=)` returning the
    `ray.data.Dataset` of your own pipeline (`read_images(path,
    override_num_blocks=num_blocks).map_batches(fn, batch_size=batch_size,
    concurrency=concurrency)`, say). Each trial
    builds a fresh Dataset, reads its first `trial_samples` rows
    (`ds.limit`) and calls `step(batch)` on every batch (your training
    step, or `step_ms` of sleep as its stand-in; neither: the loop does
    nothing else). `space` replaces the values searched: a dict of
    `concurrency` (default 1 … the cluster's CPUs), `num_blocks` (the
    CPUs × 1 … 32 and Ray's 200), `batch_size` (32 … 1024) and
    `prefetch_batches` (1 … 16) to lists of positive ints.
    `noise_repeats` trials each of the defaults and the busiest
    configuration measure the noise; `final_repeats` the comparison. The
    whole report is in `tune.last_report`."""
    ray = _ray()
    if step is not None and step_ms is not None:
        raise ConfigValueError("pass step (your training step) or step_ms (a stand-in), not both")
    if step is not None and not callable(step):
        raise ConfigTypeError(f"step must be a callable taking a batch, not {step!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigValueError(f"batch_size {batch_size!r}: expected a positive int")
    if not isinstance(trial_samples, int) or trial_samples < batch_size:
        raise ConfigValueError(f"trial_samples {trial_samples!r}: expected an int of at least "
                               f"batch_size ({batch_size})")
    if _is_adapt_dataset(source):
        data = source
        read(data, transform=transform, output=output)  # refuses a bad dataset or step here

        def make(**read_knobs):
            return read(data, transform=transform, output=output, shuffle=shuffle, seed=seed,
                        num_cpus=num_cpus, **read_knobs)
    elif callable(source):
        if transform is not None:
            raise ConfigValueError("transform= is adapt.ray.read's: your make() builds its own pipeline")
        make = source
    else:
        raise ConfigTypeError(f"adapt.ray.tune tunes reading an adapt.datasets object or a callable "
                              f"make(concurrency=, batch_size=, num_blocks=) returning a "
                              f"ray.data.Dataset, not {type(source).__name__}")
    knobs = _space(ray, space, trial_samples)
    trials = _RayTrials(make, batch_size, trial_samples, step, step_ms)
    options = dict(avl=avl, race=race, prune=prune, plain=plain, noise_repeats=noise_repeats,
                   final_repeats=final_repeats)
    from ._adapt import tune_given

    with _progress_printer(progress) as show:
        text = tune_given(trials, json.dumps(knobs), options, show)
    report = json.loads(text)
    report["rows"] = trials.rows
    tune.last_report = report
    pick = report["pick"]
    return {where: {name: pick[name] for name, w in _KNOBS if w == where}
            for where in ("read", "iter_batches")}


tune.last_report = None
