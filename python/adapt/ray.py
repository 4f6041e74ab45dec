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
"""

import numpy as np

from . import ConfigTypeError, ConfigValueError, DataLoader, _is_adapt_dataset

__all__ = ["read"]


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
