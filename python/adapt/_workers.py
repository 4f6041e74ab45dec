"""What runs in a worker (thread or process) of a loader over the user's own
Python dataset: per-sample seeding, `get_worker_info()`, the batch layout
that lets a worker write fixed-shape samples straight into a pooled batch
buffer, PyTorch's `default_collate`, and the worker loop.

The key rule is that a sample's random draws depend only on (seed, epoch,
index): before each `dataset[index]` the worker seeds `adapt.sample_rng()`
(and, in a process, `random`, `numpy.random` and torch) from them, so the
batches do not depend on the worker count or the method.
"""

import collections.abc
import mmap
import os
import random
import signal
import sys
import threading
import time
import traceback

import numpy as np

_MASK = (1 << 64) - 1
_local = threading.local()


def _splitmix(x):
    z = (x + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def sample_seed(seed, epoch, key):
    """The 64-bit seed of sample `key` (an index, or a worker's position in
    an iterable dataset) in `epoch`: a pure function of the three."""
    return _splitmix(_splitmix(_splitmix(seed & _MASK) ^ (epoch & _MASK)) ^ (key & _MASK))


# Batch seeds are drawn from epochs with this bit set, apart from samples'.
_BATCH_DOMAIN = 1 << 63


def batch_seed(seed, epoch, stream, number):
    """The seed of the global generators for batch `number` of `stream` (a
    rank's batches; an iterable dataset's rank and worker) in `epoch`."""
    return sample_seed(seed, epoch ^ _BATCH_DOMAIN, (stream << 40) | number)


def stream_of(rank, wid):
    """An iterable dataset's stream: one per (rank, worker), so that no two
    ranks draw the same numbers for their samples."""
    return ((rank & 0xFFFF) << 8) | (wid & 0xFF)


def reseed_mode(value):
    """`reseed_globals=` as the workers read it: "batch", "sample" or None."""
    if value is True or value == "batch":
        return "batch"
    if value == "sample":
        return "sample"
    if value is False or value is None:
        return None
    raise ValueError(f"reseed_globals={value!r}: expected 'batch' (the default, also True), "
                     "'sample' or False")


class WorkerInfo:
    """torch.utils.data.get_worker_info()'s fields (id, num_workers, seed,
    dataset), plus this process's rank and world_size."""

    __slots__ = ("id", "num_workers", "seed", "dataset", "rank", "world_size")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw[k])

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"rank={self.rank}, world_size={self.world_size})")


def get_worker_info():
    """In a worker of adapt.DataLoader (thread or process): its WorkerInfo;
    None in the main process, as torch's."""
    return getattr(_local, "info", None)


def sample_rng():
    """A numpy Generator for the sample being loaded, seeded from (seed,
    epoch, index): the same draws whatever the worker count or method."""
    key = getattr(_local, "sample_key", None)
    if key is None:
        raise RuntimeError("adapt.sample_rng() is for code adapt.DataLoader runs while it "
                           "loads a sample (a dataset's __getitem__ or __iter__)")
    rng = getattr(_local, "rng", None)
    if rng is None:
        rng = _local.rng = np.random.default_rng(sample_seed(*key))
    return rng


def _reseed_globals(seed):
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    torch = sys.modules.get("torch")
    if torch is not None:
        # The CPU generator, which CPU transforms draw from: torch.manual_seed
        # also seeds every accelerator's (100 µs, against 1 µs).
        torch.default_generator.manual_seed(seed & ((1 << 63) - 1))


class GlobalRngs:
    """Saves and restores the main process's global RNG states around work
    that reseeds them (the inline loader, num_workers=0), when `reseed` is
    a mode that does (about 70 µs a batch with numpy 2.4, most of it
    numpy's get_state and set_state)."""

    def __init__(self, reseed):
        self.reseed = reseed

    def __enter__(self):
        if not self.reseed:
            return self
        torch = sys.modules.get("torch")
        self.saved = (random.getstate(), np.random.get_state(),
                      torch.get_rng_state() if torch is not None else None)
        return self

    def __exit__(self, *exc):
        if not self.reseed:
            return
        random.setstate(self.saved[0])
        np.random.set_state(self.saved[1])
        torch = sys.modules.get("torch")
        if torch is not None and self.saved[2] is not None:
            torch.set_rng_state(self.saved[2])


def fetch(dataset, seed, epoch, key, reseed, get=None):
    """`dataset[key]` (or `get()`) with `adapt.sample_rng()` keyed to the
    sample, and the global generators reseeded from it when `reseed`."""
    _local.sample_key, _local.rng = (seed, epoch, key), None
    if reseed:
        _reseed_globals(sample_seed(seed, epoch, key))
    try:
        return dataset[key] if get is None else get()
    finally:
        _local.sample_key, _local.rng = None, None


# ---- the batch layout: a sample made of fixed-shape arrays ----------------

def _is_pil(x):
    return type(x).__module__.startswith("PIL.") and hasattr(x, "mode") and hasattr(x, "size")


def _leaf_array(x):
    """A leaf's value as a numpy array (no copy where one is not needed), or
    None when it is not an array-like leaf."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (bool, np.bool_)):
        return np.asarray(x, dtype=np.bool_)
    if isinstance(x, (int, np.integer)):
        return np.asarray(x, dtype=np.int64)
    if isinstance(x, (float, np.floating)):
        return np.asarray(x, dtype=np.float64)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        try:
            return x.detach().cpu().numpy()
        except (TypeError, RuntimeError):  # bfloat16 and other types numpy lacks
            return None
    if _is_pil(x):
        return np.asarray(x)
    return None


def describe(sample):
    """The sample's structure with (shape, dtype) leaves, or None when some
    part is not a fixed-shape array (strings, None, objects)."""
    if isinstance(sample, collections.abc.Mapping):
        parts = [describe(v) for v in sample.values()]
        return None if any(p is None for p in parts) else ("dict", list(sample.keys()), parts)
    if isinstance(sample, tuple) and hasattr(sample, "_fields"):
        parts = [describe(v) for v in sample]
        return None if any(p is None for p in parts) else ("named", type(sample), parts)
    if isinstance(sample, (tuple, list)):
        parts = [describe(v) for v in sample]
        return None if any(p is None for p in parts) else ("seq", None, parts)
    a = _leaf_array(sample)
    if a is None or a.dtype.hasobject:
        return None
    return ("leaf", tuple(a.shape), a.dtype.str)


class Layout:
    """Where each leaf of a batch lives in one flat buffer: leaf `l` of
    sample `j` is `views[l][j]`. Built from the first sample's structure."""

    def __init__(self, tree, batch_size):
        self.tree, self.batch_size = tree, batch_size
        self.leaves, self.offsets, self.paths = [], [], []
        self._collect(tree)
        off = 0
        for shape, dtype in self.leaves:
            self.offsets.append(off)
            n = batch_size * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            off += (n + 63) // 64 * 64
        self.nbytes = max(off, 64)

    def _collect(self, t, path=()):
        if t[0] == "leaf":
            self.leaves.append((t[1], t[2]))
            self.paths.append(path)
        else:
            keys = t[1] if t[0] == "dict" else range(len(t[2]))
            for k, p in zip(keys, t[2]):
                self._collect(p, path + (k,))

    def views(self, buf):
        return [np.ndarray((self.batch_size,) + shape, dtype=np.dtype(dtype), buffer=buf, offset=off)
                for (shape, dtype), off in zip(self.leaves, self.offsets)]

    def write_batch(self, views, samples, indices):
        """Writes `samples` as the batch's first rows, a leaf at a time (one
        C-level stack per leaf); on any difference from the layout, the
        sample-by-sample path finds and names it."""
        n = len(samples)
        try:
            for (shape, dtype), path, v in zip(self.leaves, self.paths, views):
                values = [_get(x, path) for x in samples]
                if shape:
                    np.stack(values, out=v[:n], casting="no")
                else:
                    a = np.asarray(values)
                    if a.dtype != v.dtype or a.shape != (n,):
                        raise TypeError("a scalar of another type")
                    v[:n] = a
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            for j, (x, i) in enumerate(zip(samples, indices)):
                self.write(views, j, x, i)
            raise ValueError(f"the batch of samples {indices[0]}..{indices[-1]} does not stack: {e}") from e

    def write(self, views, j, sample, index):
        """Writes `sample` as row `j` of the batch: one copy per byte."""
        values = []
        self._flatten(self.tree, sample, values, index, "sample")
        for (shape, dtype), v, a in zip(self.leaves, views, values):
            v[j] = a

    def _flatten(self, t, x, out, index, path):
        kind = t[0]
        if kind == "leaf":
            a = _leaf_array(x)
            if a is None or tuple(a.shape) != t[1] or a.dtype.str != t[2]:
                got = "no array" if a is None else f"shape {tuple(a.shape)} {a.dtype}"
                raise _mismatch(index,
                    f"sample {index}: {path} has {got}, the first sample's has shape {t[1]} "
                    f"{np.dtype(t[2])}: default_collate stacks equal shapes only (give a collate_fn "
                    "for samples that differ)")
            out.append(a)
            return
        if kind == "dict":
            if not isinstance(x, collections.abc.Mapping) or list(x.keys()) != t[1]:
                raise _mismatch(index, f"sample {index}: {path} has other keys than the first sample's {t[1]}")
            for k, p in zip(t[1], t[2]):
                self._flatten(p, x[k], out, index, f"{path}[{k!r}]")
            return
        if not isinstance(x, (tuple, list)) or len(x) != len(t[2]):
            raise _mismatch(index, f"sample {index}: {path} is not a sequence of {len(t[2])} like the first sample's")
        for i, (p, v) in enumerate(zip(t[2], x)):
            self._flatten(p, v, out, index, f"{path}[{i}]")

    def build(self, buf, n, owner, to_tensor):
        """The batch in `buf` as default_collate gives it: the same structure
        (tuples as lists, as PyTorch does), each leaf its first `n` rows, an
        array over the buffer whose base holds `owner` (so the buffer goes
        back to its pool once every leaf is released)."""
        addr = buf.__array_interface__["data"][0]
        it = iter(np.asarray(_Region(owner, buf, addr + off, (n,) + shape, dtype))
                  for (shape, dtype), off in zip(self.leaves, self.offsets))
        return self._build(self.tree, it, to_tensor)

    def _build(self, t, it, to_tensor):
        kind = t[0]
        if kind == "leaf":
            a = next(it)
            return to_tensor(a) if to_tensor else a
        parts = [self._build(p, it, to_tensor) for p in t[2]]
        if kind == "dict":
            return dict(zip(t[1], parts))
        if kind == "named":
            return t[1](*parts)
        return parts


def _mismatch(index, message):
    e = ValueError(message)
    e.adapt_index = index
    return e


def _get(x, path):
    for k in path:
        x = x[k]
    return x


class _Region:
    """Exports a region of a pooled buffer as an array; numpy keeps it as
    the array's base, and it keeps the buffer and its owner alive."""

    __slots__ = ("owner", "buf", "__array_interface__")

    def __init__(self, owner, buf, address, shape, dtype):
        self.owner, self.buf = owner, buf
        self.__array_interface__ = {"shape": shape, "typestr": dtype, "data": (address, False),
                                    "version": 3}


# ---- adapt's Rust steps after the user's own reading ----------------------

def image_of(x, index):
    """A sample's image as a C-contiguous u8 array and whether it is
    planar: numpy and PIL images are HWC (or HW), a torch tensor CHW."""
    torch = sys.modules.get("torch")
    planar = torch is not None and isinstance(x, torch.Tensor) and x.dim() == 3
    a = _leaf_array(x)
    if a is None or a.dtype != np.uint8 or a.ndim not in (2, 3):
        got = type(x).__name__ if a is None else f"{a.dtype} of shape {tuple(a.shape)}"
        raise TypeError(f"sample {index}: transform= runs adapt's steps on a u8 image (HWC numpy or "
                        f"PIL, CHW torch) as the sample's first part, got {got}")
    return np.ascontiguousarray(a), planar


IMAGE_KEYS = ("image", "img")
LABEL_KEYS = ("label", "labels")


def sample_keys(sample, index):
    """For a dict row (a Hugging Face dataset's), the (image, label) keys
    adapt's steps read: "image" or "img", "label" or "labels"; None for an
    (image, label) pair. A row with other fields is refused by name, since
    the batch could not carry them."""
    if not isinstance(sample, collections.abc.Mapping):
        return None
    keys = list(sample.keys())
    image = next((k for k in IMAGE_KEYS if k in sample), None)
    label = next((k for k in LABEL_KEYS if k in sample), None)
    if image is None or label is None:
        raise TypeError(f"sample {index}: with transform= a dict row needs an image field "
                        f"({' or '.join(IMAGE_KEYS)}) and a label field ({' or '.join(LABEL_KEYS)}); "
                        f"it has {keys}")
    extra = [k for k in keys if k not in (image, label)]
    if extra:
        raise TypeError(f"sample {index}: with transform= the batch holds {image!r} and {label!r}; "
                        f"the row's other fields {extra} would be lost: drop them first "
                        f"(a Hugging Face dataset: ds.select_columns([{image!r}, {label!r}]))")
    return image, label


def split_sample(sample, index):
    """(image, label) of a sample that adapt's steps batch: an (image,
    label) pair or a dict row with the keys `sample_keys` finds."""
    keys = sample_keys(sample, index)
    if keys is not None:
        image, label = sample[keys[0]], sample[keys[1]]
    elif not isinstance(sample, (tuple, list)) or len(sample) != 2:
        raise TypeError(f"sample {index}: with transform= a sample is (image, label) or a dict "
                        f"with image and label fields, got {type(sample).__name__}")
    else:
        image, label = sample
    if not isinstance(label, (int, np.integer)) and not (
            hasattr(label, "item") and getattr(label, "ndim", 1) == 0):
        raise TypeError(f"sample {index}: the label is {type(label).__name__}, expected an integer")
    return image, int(label)


def steps_layout(steps, output, batch_size, keys=None):
    """The layout of a batch adapt's steps collate: images as `output` lays
    them out, then int64 labels; a dict of the two under `keys` (image
    key, label key) for dict rows, as default_collate gives them."""
    h, w, c = steps.shape
    if output == "f32":
        image = ("leaf", (c, h, w), np.dtype(np.float32).str)
    elif output == "u8":
        image = ("leaf", (c, h, w), np.dtype(np.uint8).str)
    else:
        image = ("leaf", (h, w, c), np.dtype(np.uint8).str)
    label = ("leaf", (), np.dtype(np.int64).str)
    if keys is not None:
        return Layout(("dict", list(keys), [image, label]), batch_size)
    return Layout(("seq", None, [image, label]), batch_size)


# ---- PyTorch's default_collate, without torch -----------------------------

def default_collate(batch):
    """torch.utils.data.default_collate where torch is installed; otherwise
    the same rules over numpy: arrays and numbers stacked, mappings by key,
    sequences transposed (as lists), strings kept as lists."""
    torch = sys.modules.get("torch")
    if torch is not None:
        from torch.utils.data import default_collate as torch_collate

        return torch_collate(batch)
    elem = batch[0]
    if isinstance(elem, np.ndarray):
        return np.stack(batch)
    if _is_pil(elem):
        return np.stack([np.asarray(b) for b in batch])
    if isinstance(elem, (bool, np.bool_)):
        return np.asarray(batch, dtype=np.bool_)
    if isinstance(elem, (int, np.integer)):
        return np.asarray(batch, dtype=np.int64)
    if isinstance(elem, (float, np.floating)):
        return np.asarray(batch, dtype=np.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(b) != len(elem) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem)}")


def default_convert(sample):
    """What PyTorch's loader does to a sample without batching: arrays to
    tensors where torch is installed, the rest as it is."""
    torch = sys.modules.get("torch")
    if torch is not None:
        from torch.utils.data import default_convert as torch_convert

        return torch_convert(sample)
    return sample


# ---- errors across the worker boundary ------------------------------------

class Failure:
    """An exception in a worker, carried to the training loop: its type (by
    name, so it crosses a process boundary), the index and the traceback."""

    def __init__(self, exc, where, index):
        self.module = type(exc).__module__
        self.qualname = type(exc).__qualname__
        self.index = index
        self.message = (f"Caught {type(exc).__name__} in DataLoader {where} while loading index "
                        f"{index}.\nOriginal Traceback (most recent call last):\n"
                        + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[1:]))

    def exception(self, fallback):
        cls = None
        mod = sys.modules.get(self.module)
        if mod is not None:
            cls = mod
            for part in self.qualname.split("."):
                cls = getattr(cls, part, None)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            cls = fallback
        msg = self.message
        if cls is KeyError:  # KeyError shows its argument's repr: keep the newlines readable
            msg = KeyErrorMessage(msg)
        try:
            e = cls(msg)
        except Exception:  # a type that does not take one message
            e = fallback(f"{self.qualname}: {self.message}")
        try:
            e.index = self.index
        except AttributeError:
            pass
        return e


class KeyErrorMessage(str):
    """As PyTorch's: a KeyError whose message prints as written."""

    def __repr__(self):
        return self


# ---- the worker loop ------------------------------------------------------

def _attach(name, nbytes):
    """A worker process's view of the pool's shared buffer `name`, mapped
    from /dev/shm directly (attaching through SharedMemory would register
    it with the resource tracker, which unlinks it when a worker exits)."""
    try:
        fd = os.open(f"/dev/shm/{name}", os.O_RDWR)
    except OSError:
        from multiprocessing import shared_memory

        return shared_memory.SharedMemory(name=name).buf
    try:
        return mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)


class Worker:
    """One worker's state and loop; `job` describes the loader (dataset,
    seed, collation, layout, ...), fixed for the worker's life."""

    def __init__(self, wid, job, tasks, results, process, reseed=None):
        self.wid, self.job, self.tasks, self.results = wid, job, tasks, results
        self.process = process
        # Global RNGs are reseeded ("batch" or "sample") where nothing else
        # shares them (a process; the main process, whose states the caller
        # restores), unless the loader was told the dataset does not draw
        # from them.
        mode = reseed_mode(job.get("reseed_globals", "batch"))
        self.reseed = mode if (process if reseed is None else reseed) else None
        self.where = f"worker {wid}" if tasks is not None else "main process"
        self.buffers = {}
        self.clock = [0.0, 0.0, 0.0]

    def start(self):
        job = self.job
        base = (job["base_seed"] + self.wid) & _MASK
        if self.process:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _reseed_globals(base)
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_num_threads(1)
                _set_torch_worker_info(torch, self.wid, job, base)
        _local.info = WorkerInfo(id=self.wid, num_workers=job["num_workers"], seed=base,
                                 dataset=job["dataset"], rank=job["rank"], world_size=job["world_size"])
        if job["worker_init_fn"] is not None:
            job["worker_init_fn"](self.wid)

    def run(self):
        try:
            self.start()
        except Exception as e:
            self.results.put((None, None, "init", Failure(e, f"worker {self.wid}", None)))
            return
        while True:
            task = self.tasks.get()
            if task is None:
                return
            if task[0] == "batch":
                self.results.put(self.batch(*task[1:]))
            elif task[0] == "iter" and self.iterate(*task[1:]) == "exit":
                return

    def _buffer(self, slot):
        sid, name, nbytes, _ = slot
        buf = self.buffers.get(name)
        if buf is None:
            buf = self.buffers[name] = _attach(name, nbytes) if self.process else slot[3]
        return buf

    def _stepped(self, views, buf, epoch, indices, per_sample):
        """Batch rows through adapt's steps: the user's image, the Rust steps
        and collation straight into the buffer, the GIL released."""
        job = self.job
        steps = getattr(self, "steps", None)
        if steps is None:
            from ._adapt import Steps

            steps = self.steps = Steps(*job["steps"])
        flat = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
        base, size = job["layout"].offsets[0], steps.sample_bytes
        clock = self.clock
        for j, index in enumerate(indices):
            self.current = index
            t0 = time.perf_counter()
            image, label = split_sample(fetch(job["dataset"], job["seed"], epoch, index, per_sample), index)
            t1 = time.perf_counter()
            pixels, planar = image_of(image, index)
            steps.write(pixels, planar, (job["seed"], epoch, index), flat, base + j * size)
            views[1][j] = label
            clock[0] += t1 - t0
            clock[1] += time.perf_counter() - t1

    def batch(self, gen, epoch, bno, indices, slot, number):
        """Loads batch `number` of the epoch (`bno`, its place in the
        generation `gen`, keys the result)."""
        started = time.perf_counter()
        self.clock = [0.0, 0.0, 0.0]  # __getitem__, adapt's steps, collation
        status, payload = self._batch(epoch, indices, slot, number)
        times = (time.perf_counter() - started, len(indices), *self.clock)
        return (gen, bno, status, payload, times)

    def _batch(self, epoch, indices, slot, number):
        job, index = self.job, None
        self.current = None
        try:
            if self.reseed == "batch":
                _reseed_globals(batch_seed(job["seed"], epoch, job["rank"], number))
            per_sample = self.reseed == "sample"
            if slot is not None and job.get("steps") is not None:
                layout = job["layout"]
                buf = self._buffer(slot)
                self._stepped(layout.views(buf), buf, epoch, indices, per_sample)
                return ("slot", (slot[0], len(indices)))
            samples = []
            t0 = time.perf_counter()
            for index in indices:
                samples.append(fetch(job["dataset"], job["seed"], epoch, index, per_sample))
            index = None
            t1 = time.perf_counter()
            self.clock[0] += t1 - t0
            try:
                if slot is not None:
                    layout = job["layout"]
                    layout.write_batch(layout.views(self._buffer(slot)), samples, indices)
                    return ("slot", (slot[0], len(indices)))
                return ("obj", collate(job, samples))
            finally:
                self.clock[2] += time.perf_counter() - t1
        except Exception as e:
            index = getattr(e, "adapt_index", index if index is not None else self.current)
            return ("err", Failure(e, self.where, index))

    def iterate(self, gen, epoch):
        """An iterable dataset's share of the epoch: this worker's copy of
        the dataset iterated (it splits itself by get_worker_info()),
        batched here; one batch per credit the loader sends."""
        job, k, position = self.job, 0, 0
        it = None
        clock = [0.0, 0.0, 0.0, 0]  # __getitem__ (next()), -, collation, samples
        try:
            it = iter(job["dataset"])
            started = time.perf_counter()
            for batch in _batched(it, job, epoch, self.wid, self.reseed, clock):
                times = (time.perf_counter() - started, clock[3], *clock[:3])
                clock[:] = [0.0, 0.0, 0.0, 0]
                task = self.tasks.get()
                if task is None:
                    return "exit"
                if task[0] != "more":
                    return None
                self.results.put((gen, (self.wid, k), "obj", batch, times))
                started = time.perf_counter()
                k += 1
            self.results.put((gen, (self.wid, k), "end", None))
        except Exception as e:
            self.results.put((gen, (self.wid, k), "err", Failure(e, f"worker {self.wid}", position)))


def _batched(it, job, epoch, wid, reseed, clock):
    """Batches of an iterable dataset's samples, each drawn with its RNGs
    seeded from (seed, epoch, rank and worker, position); the global
    generators reseeded per batch or per sample as `reseed` says. The
    seconds of `next()` and of collation go to `clock[0]` and `clock[2]`,
    the samples to `clock[3]`."""
    size, drop_last, position = job["batch_size"], job["drop_last"], 0
    stream, number = stream_of(job["rank"], wid), 0
    sentinel = object()
    while True:
        if reseed == "batch":
            _reseed_globals(batch_seed(job["seed"], epoch, stream, number))
        samples = []
        t0 = time.perf_counter()
        while len(samples) < (size or 1):
            key = (stream << 40) | position
            s = fetch(None, job["seed"], epoch, key, reseed == "sample", get=lambda: next(it, sentinel))
            if s is sentinel:
                break
            samples.append(s)
            position += 1
        t1 = time.perf_counter()
        clock[0] += t1 - t0
        if not samples or (size and drop_last and len(samples) < size):
            return
        batch = collate(job, samples)
        clock[2] += time.perf_counter() - t1
        clock[3] += len(samples)
        yield batch
        number += 1
        if len(samples) < (size or 1):
            return


def collate(job, samples):
    fn = job["collate_fn"]
    if job["batch_size"] is None:
        return (fn or default_convert)(samples[0])
    return (fn or default_collate)(samples)


def _set_torch_worker_info(torch, wid, job, seed):
    """torch.utils.data.get_worker_info() answers in a process worker too
    (datasets written for PyTorch split themselves by it)."""
    try:
        from torch.utils.data._utils import worker as tw

        tw._worker_info = tw.WorkerInfo(id=wid, num_workers=job["num_workers"], seed=seed,
                                        dataset=job["dataset"])
    except Exception:  # a torch without that private module: adapt.get_worker_info() still answers
        pass


def worker_main(wid, job, tasks, results):
    """Entry point of a worker process."""
    Worker(wid, job, tasks, results, process=True).run()
