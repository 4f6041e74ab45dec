"""The loader over the user's own Python dataset (map-style or iterable),
with PyTorch's DataLoader semantics, in thread or process workers.

The index order, the ranks' shares and exact and elastic resume are the
Rust loader's (`_adapt.IndexPlan`); Python only reads and collates. When a
sample is fixed-shape arrays (numpy, torch, PIL, numbers, in tuples or
dicts) and no `collate_fn` is given, a worker writes each sample straight
into its row of a pooled batch buffer (shared memory for process workers),
and the batch handed out is a view of that buffer, back in the pool when
released: one copy per byte and nothing pickled. Anything else goes through
`collate_fn` (PyTorch's `default_collate` when none is given).
"""

import itertools
import json
import mmap
import queue
import signal
import sys
import threading
import time
import weakref

import numpy as np

from . import _workers
from ._iteration import Epochs, OneAtATime
from ._adapt import IndexPlan, LoaderTimeout, SampleError, WorkerError

_POLL = 0.05
# Seconds an epoch ended by an exception (Ctrl-C, a worker's error) waits
# for its workers before terminating them.
_INTERRUPTED_GRACE = 0.2


def is_iterable_dataset(ds):
    """An iterable-style dataset: torch's IterableDataset, or an object with
    `__iter__` and no `__getitem__`."""
    torch = sys.modules.get("torch")  # not imported: the dataset is no torch class
    if hasattr(torch, "from_numpy") and isinstance(ds, torch.utils.data.IterableDataset):
        return True
    return hasattr(ds, "__iter__") and not hasattr(ds, "__getitem__")


class _Slots:
    """The pool of batch buffers: shared memory for process workers, heap
    for threads. Never blocks: with every buffer out it makes another."""

    def __init__(self, nbytes, shared):
        self.nbytes, self.shared = nbytes, shared
        self.lock = threading.Lock()
        self.free, self.bufs, self.shms = [], [], []

    def take(self):
        with self.lock:
            if self.free:
                return self.free.pop()
            if self.shared:
                from multiprocessing import shared_memory

                shm = shared_memory.SharedMemory(create=True, size=self.nbytes)
                # Mapped again as a plain mmap and the SharedMemory closed:
                # arrays handed out keep the mapping alive, and nothing
                # complains at exit about exported buffers.
                mapped = _workers._attach(shm.name, self.nbytes)
                if isinstance(mapped, mmap.mmap):
                    shm.close()
                self.shms.append(shm)
                self.bufs.append(np.frombuffer(mapped, dtype=np.uint8, count=self.nbytes))
            else:
                self.bufs.append(np.zeros(self.nbytes, dtype=np.uint8))
                self.shms.append(None)
            return len(self.bufs) - 1

    def describe(self, sid):
        """What a worker needs to write into slot `sid`."""
        shm = self.shms[sid]
        if shm is None:
            return (sid, f"heap-{id(self)}-{sid}", self.nbytes, self.bufs[sid])
        return (sid, shm.name, self.nbytes, None)

    def release(self, sid):
        with self.lock:
            self.free.append(sid)

    def addresses(self):
        return [b.__array_interface__["data"][0] for b in self.bufs]

    def close(self):
        for shm in self.shms:
            if shm is not None:
                try:
                    shm.unlink()
                except FileNotFoundError:
                    pass
        self.bufs, self.free = [], []


class _Pool:
    """The workers: threads or processes, one task queue each, one result
    queue. `close` ends them all; none outlives it."""

    def __init__(self, job, n, method, context):
        self.method, self.gen = method, 0
        if method == "thread":
            self.results = queue.Queue()
            self.tasks = [queue.Queue() for _ in range(n)]
            self.workers = [threading.Thread(
                target=_workers.Worker(i, job, self.tasks[i], self.results, process=False).run,
                name=f"adapt-worker-{i}", daemon=True) for i in range(n)]
        else:
            import multiprocessing

            ctx = context if not isinstance(context, (str, type(None))) else multiprocessing.get_context(context)
            # Results are written to the pipe by put() itself (no feeder
            # thread), so what a worker sent before it died is there to read.
            self.results = ctx.SimpleQueue()
            self.tasks = [ctx.Queue() for _ in range(n)]
            self.workers = [ctx.Process(target=_workers.worker_main, args=(i, job, self.tasks[i], self.results),
                                        name=f"adapt-worker-{i}", daemon=True) for i in range(n)]
        for w in self.workers:
            w.start()

    def get(self, timeout):
        """The next result, or queue.Empty after `timeout` seconds."""
        if self.method == "thread":
            return self.results.get(timeout=timeout)
        if not self.results._reader.poll(timeout):
            raise queue.Empty
        return self.results.get()

    def dead(self):
        """(worker id, pid, exit code) of every worker process that ended."""
        if self.method == "thread":
            return []
        return [(i, w.pid, w.exitcode) for i, w in enumerate(self.workers) if not w.is_alive()]

    def close(self, grace=5.0):
        """Ends the workers: each is asked to stop, and processes still
        running after `grace` seconds in all are terminated. (A thread
        blocked in the dataset cannot be ended: it is a daemon, and ends
        with its sample or the process.)"""
        for q in self.tasks:
            try:
                q.put(None)
            except (ValueError, OSError):
                pass
        deadline = time.monotonic() + grace
        for w in self.workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            if self.method != "thread" and w.is_alive():
                w.terminate()
                w.join(timeout=5)
        if self.method != "thread":
            for q in self.tasks:
                q.cancel_join_thread()
                q.close()
            self.results.close()
        self.workers = []


def _signal_name(code):
    if code is None or code >= 0:
        return f"exit code {code}"
    try:
        return f"signal {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


class PythonLoader:
    """adapt.DataLoader over a Python dataset (see `adapt.DataLoader`)."""

    def __init__(self, dataset, *, batch_size, shuffle, sampler, batch_sampler, num_workers,
                 collate_fn, pin_memory, drop_last, timeout, worker_init_fn, multiprocessing_context,
                 prefetch_factor, persistent_workers, in_order, seed, rank, world_size, worker_method,
                 steps=None, output="f32", reseed_globals="batch", stage_timing=True):
        self.dataset = dataset
        self.iterable = is_iterable_dataset(dataset)
        self.batch_size, self.drop_last, self.shuffle = batch_size, drop_last, bool(shuffle)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.num_workers, self.prefetch_factor = num_workers, prefetch_factor or 2
        self.persistent_workers, self.in_order = persistent_workers, in_order
        self.collate_fn, self.worker_init_fn = collate_fn, worker_init_fn
        self.timeout, self.seed = timeout or 0, seed
        self.rank, self.world_size = rank, world_size
        self.worker_method, self.context = worker_method, multiprocessing_context
        self.pin_memory = pin_memory and _cuda_available()
        self.steps_text, self.output = steps, output
        self.reseed_globals = _workers.reseed_mode(reseed_globals)
        self._steps_args = None
        self._plan = None
        if not (self.iterable or sampler is not None or batch_sampler is not None):
            identity = f"python|{type(dataset).__module__}.{type(dataset).__qualname__}|{len(dataset)}"
            self._plan = IndexPlan(len(dataset), json.dumps(dict(
                batch_size=batch_size or 1, shuffle=self.shuffle, drop_last=bool(drop_last),
                seed=seed, rank=rank, world_size=world_size, identity=identity)))
        self._pool = None
        self._slots = None
        self._layout = None
        self._layout_known = False
        self._epochs = Epochs()
        self._current = None  # [epoch plan or None, batches delivered, epoch]
        self._running = []
        self.stage_timing, self._stats = stage_timing, None
        self._iteration = OneAtATime()
        self._finalizer = weakref.finalize(self, PythonLoader._cleanup, self._iteration, [None], [None])

    # ---- what the epoch visits -------------------------------------------

    def __len__(self):
        if self._plan is not None:
            return len(self._plan.start(0))
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _epoch_batches(self):
        """(epoch, index batches from the first not delivered, batches
        already delivered, plan) of the epoch this iteration runs (`Epochs`
        decides which)."""
        epoch, resume = self._epochs.take()
        if self._plan is not None:
            plan = self._plan.resume(resume) if resume is not None else self._plan.start(epoch)
            self._epochs.ran(plan.epoch)
            return plan.epoch, plan.batches(), plan.skip, plan
        if self.batch_sampler is not None:
            batches = [list(b) for b in self.batch_sampler]
        else:
            indices = list(self.sampler)
            size = self.batch_size or 1
            batches = [indices[i:i + size] for i in range(0, len(indices), size)]
            if self.drop_last and batches and len(batches[-1]) < size:
                batches.pop()
        skip = 0
        if resume is not None:
            epoch, skip = resume["epoch"], resume["batches"]
        self._epochs.ran(epoch)
        return epoch, batches[skip:], skip, None

    # ---- the pieces shared by every epoch ---------------------------------

    def _job(self):
        return {"dataset": self.dataset, "seed": self.seed, "base_seed": _workers.sample_seed(self.seed, 1 << 62, 0),
                "num_workers": self.num_workers, "rank": self.rank or 0, "world_size": self.world_size or 1,
                "worker_init_fn": self.worker_init_fn, "collate_fn": self.collate_fn,
                "batch_size": self.batch_size, "drop_last": self.drop_last, "layout": self._layout,
                "steps": self._steps_args, "reseed_globals": self.reseed_globals}

    def _find_layout(self, epoch, first_index):
        """The batch layout, from the first sample (read once here, with its
        RNGs seeded as a worker seeds them, the main process's put back)."""
        self._layout_known = True
        if (self.collate_fn is not None or self.batch_size is None or self.iterable or first_index is None
                or self.batch_sampler is not None):
            return
        try:
            with _workers.GlobalRngs(True):  # this read leaves the caller's generators as they were
                sample = _workers.fetch(self.dataset, self.seed, epoch, first_index,
                                        self.reseed_globals is not None)
        except Exception:
            # The worker that loads it raises it, with index and traceback;
            # the layout is looked for again next epoch.
            self._layout_known = False
            return
        if self.steps_text is not None:
            self._layout = self._steps_layout(sample, first_index)
        else:
            tree = _workers.describe(sample)
            self._layout = None if tree is None else _workers.Layout(tree, self.batch_size)
        if self._layout is not None:
            shared = self.worker_method == "process" and self.num_workers > 0
            self._slots = _Slots(self._layout.nbytes, shared=shared)

    def _steps_layout(self, sample, index):
        """adapt's steps for samples like the first: built for any size when
        a step fixes it, else for the first sample's size."""
        from ._adapt import ConfigError, Steps

        keys = _workers.sample_keys(sample, index)
        pixels, planar = _workers.image_of(_workers.split_sample(sample, index)[0], index)
        if planar:
            c, h, w = pixels.shape
        elif pixels.ndim == 2:
            (h, w), c = pixels.shape, 1
        else:
            h, w, c = pixels.shape
        try:
            args = (self.steps_text, self.output, 0, 0, c)
            steps = Steps(*args)
        except ConfigError:
            args = (self.steps_text, self.output, h, w, c)
            steps = Steps(*args)
        self._steps_args = args
        return _workers.steps_layout(steps, self.output, self.batch_size, keys)

    def _get_pool(self):
        if self._pool is None:
            self._pool = _Pool(self._job(), self.num_workers, self.worker_method, self.context)
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, PythonLoader._cleanup, self._iteration, [self._pool],
                                               [self._slots])
        return self._pool

    @staticmethod
    def _cleanup(iteration, pools, slots):
        if not iteration.in_owner():
            return  # a forked child's copy: the workers and buffers are the parent's
        for p in pools:
            if p is not None:
                p.close()
        for s in slots:
            if s is not None:
                s.close()

    def _to_tensor(self):
        torch = _torch()
        return torch.from_numpy if torch is not None else None

    def _finish(self, item):
        """A received batch as the training loop gets it (a worker's
        exception raised)."""
        if item[0] == "err":
            raise item[1].exception(SampleError)
        if item[0] == "slot":
            sid, n = item[1]
            owner = _SlotOwner(self._slots, sid)
            batch = self._layout.build(self._slots.bufs[sid], n, owner, self._to_tensor())
        else:
            batch = item[1]
        if self.pin_memory:
            from torch.utils.data._utils.pin_memory import pin_memory

            batch = pin_memory(batch)
        return batch

    # ---- iteration --------------------------------------------------------

    def set_epoch(self, epoch):
        self._epochs.set(epoch)

    def __iter__(self):
        if self._iteration.closed:
            raise RuntimeError("this adapt.DataLoader was closed")
        with self._iteration.begin() as mine:
            self._stats = _EpochStats(self) if self.stage_timing else None
            if self.iterable:
                epoch, _ = self._epochs.take()
                self._epochs.ran(epoch)
                gen = self._iterate_iterable(epoch)
            else:
                epoch, batches, skip, plan = self._epoch_batches()
                if not self._layout_known:
                    self._find_layout(epoch, batches[0][0] if batches and batches[0] else None)
                self._current = [plan, skip, epoch]
                gen = self._iterate_map(epoch, batches, skip)
        return self._iteration.steps(gen, mine)

    def _iterate_map(self, epoch, batches, skip):
        if self.num_workers == 0:
            # The main process loads: one worker state for the epoch (its
            # steps built once), global generators put back after each batch.
            worker = _workers.Worker(0, self._job(), None, None, process=False, reseed=True)
            for k, indices in enumerate(batches):
                asked = time.perf_counter()
                with _workers.GlobalRngs(worker.reseed):
                    item = self._inline_batch(worker, epoch, indices, skip + k)
                self._current[1] = skip + k + 1
                self._waited(asked, k + 1 == len(batches))
                yield self._finish(item)
            return
        yield from self._run_pool(epoch, batches, skip)

    def _inline_batch(self, worker, epoch, indices, number):
        slot = self._slots.describe(self._slots.take()) if self._layout is not None else None
        _, _, status, payload, times = worker.batch(0, epoch, 0, indices, slot, number)
        if self._stats is not None:
            self._stats.add(0, times)
        if status == "err" and slot is not None:
            self._slots.release(slot[0])
        return (status, payload)

    def _run_pool(self, epoch, batches, skip):
        pool = self._get_pool()
        pool.gen += 1
        gen, n, nw = pool.gen, len(batches), self.num_workers
        self._running = batches
        outstanding = [dict() for _ in range(nw)]
        ready, state = {}, {"sent": 0, "out": 0}
        rr = itertools.cycle(range(nw))

        def dispatch():
            # In flight: sent and not yet handed out (received ones included),
            # at most num_workers x prefetch_factor, as the Rust loader.
            while state["sent"] < n and state["sent"] - state["out"] < nw * self.prefetch_factor:
                w = next((w for w in (next(rr) for _ in range(nw)) if len(outstanding[w]) < self.prefetch_factor), None)
                if w is None:
                    return
                sid = self._slots.take() if self._layout is not None else None
                outstanding[w][state["sent"]] = sid
                slot = self._slots.describe(sid) if sid is not None else None
                pool.tasks[w].put(("batch", gen, epoch, state["sent"], batches[state["sent"]], slot,
                                   skip + state["sent"]))
                state["sent"] += 1

        grace = 5.0
        try:
            dispatch()
            while state["out"] < n:
                key = state["out"] if self.in_order else next(iter(ready), None)
                if key not in ready:
                    asked = time.perf_counter()
                    self._receive(pool, gen, outstanding, ready)
                    self._waited(asked, False)
                    continue
                item = ready.pop(key)
                state["out"] += 1
                if state["out"] == n and self._stats is not None:
                    self._stats.end()
                self._current[1] = skip + state["out"]
                dispatch()
                yield self._finish(item)
        except BaseException:
            grace = _INTERRUPTED_GRACE  # Ctrl-C or an error: no waiting on a blocked worker
            raise
        finally:
            for item in ready.values():
                if item[0] == "slot":
                    self._slots.release(item[1][0])
            self._end_epoch(pool, gen, grace)

    def _receive(self, pool, gen, outstanding, ready):
        """Waits for the next result, watching for dead workers and the
        timeout, and puts it in `ready`."""
        waited = 0.0
        while True:
            try:
                msg = pool.get(_POLL)
                break
            except queue.Empty:
                waited += _POLL
            dead = pool.dead()
            if dead:
                self._drain(pool, gen, outstanding, ready)
                raise self._death(dead, outstanding)
            if self.timeout and waited >= self.timeout:
                raise LoaderTimeout(f"DataLoader timed out after {self.timeout} seconds")
        self._accept(msg, gen, outstanding, ready)

    def _drain(self, pool, gen, outstanding, ready):
        """Takes what the workers sent before one died (so the batch named
        is the one the dead worker was on, not one it had finished)."""
        while True:
            try:
                self._accept(pool.get(0.2), gen, outstanding, ready)
            except queue.Empty:
                return

    def _death(self, dead, outstanding):
        for wid, pid, code in dead:
            busy = sorted(outstanding[wid]) if wid < len(outstanding) else []
            where = ""
            if busy:
                first = self._running[busy[0]] if busy[0] < len(self._running) else []
                where = (f" while loading batch {busy[0]} (indices {list(first[:8])}"
                         f"{', ...' if len(first) > 8 else ''})")
            if busy or wid == dead[-1][0]:
                return WorkerError(f"DataLoader worker {wid} (pid {pid}) exited unexpectedly with "
                                   f"{_signal_name(code)}{where}")

    def _accept(self, msg, gen, outstanding, ready):
        mgen, key, status, payload = msg[:4]
        if status == "init":
            raise payload.exception(WorkerError)
        if mgen != gen:
            if status == "slot":
                self._slots.release(payload[0])
            return
        sid, wid = None, key[0] if isinstance(key, tuple) else None
        if isinstance(key, int):
            for w, o in enumerate(outstanding):
                if key in o:
                    sid, wid = o.pop(key), w
        if len(msg) > 4 and self._stats is not None and wid is not None:
            self._stats.add(wid, msg[4])
        if status == "err" and sid is not None:
            self._slots.release(sid)
        # An error is raised in its batch's turn, as PyTorch raises it.
        ready[key] = (status, payload)

    def _iterate_iterable(self, epoch):
        if self.num_workers == 0:
            job = self._job()
            it = iter(self.dataset)
            clock = [0.0, 0.0, 0.0, 0]
            batches = _workers._batched(it, job, epoch, 0, self.reseed_globals, clock)
            while True:
                asked = time.perf_counter()
                with _workers.GlobalRngs(self.reseed_globals):
                    batch = next(batches, None)
                if self._stats is not None:
                    self._stats.add(0, (time.perf_counter() - asked, clock[3], *clock[:3]))
                clock[:] = [0.0, 0.0, 0.0, 0]
                self._waited(asked, batch is None)
                if batch is None:
                    return
                yield self._finish(("obj", batch))
        pool = self._get_pool()
        pool.gen += 1
        gen, nw = pool.gen, self.num_workers
        for w in range(nw):
            pool.tasks[w].put(("iter", gen, epoch))
            for _ in range(self.prefetch_factor):
                pool.tasks[w].put(("more",))
        active, nextk, ready, pos = list(range(nw)), [0] * nw, {}, 0
        grace = 5.0
        try:
            while active:
                if self.in_order:
                    w = active[pos % len(active)]
                    key = (w, nextk[w])
                else:
                    key = next(iter(ready), None)
                if key not in ready:
                    asked = time.perf_counter()
                    self._receive(pool, gen, [dict() for _ in range(nw)], ready)
                    self._waited(asked, False)
                    continue
                status, payload = ready.pop(key)
                w = key[0]
                if status == "end":
                    active.remove(w)
                    if not active and self._stats is not None:
                        self._stats.end()
                    continue
                nextk[w] += 1
                pos += 1
                pool.tasks[w].put(("more",))
                yield self._finish((status, payload))
        except BaseException:
            grace = _INTERRUPTED_GRACE
            raise
        finally:
            if pool.gen == gen:  # a superseded epoch's workers serve the newer one
                for w in range(nw):
                    pool.tasks[w].put(("stop",))
            self._end_epoch(pool, gen, grace)

    def _waited(self, asked, last):
        """The consumer waited since `asked` (for its last batch when `last`)."""
        if self._stats is not None:
            self._stats.wait += time.perf_counter() - asked
            if last:
                self._stats.end()

    def autotune_status(self):
        """Online autotuning is adapt's own datasets' (refused at
        construction here): always None."""
        return None

    def batches(self):
        from . import ConfigTypeError

        raise ConfigTypeError("batches() is for adapt's own datasets; iterate the loader")

    def stats(self):
        """Where the current (or last) epoch's time went (see
        `adapt.DataLoader.stats`); None before the first or without stage timing."""
        return None if self._stats is None else self._stats.report()

    def _end_epoch(self, pool, gen, grace):
        """Without persistent workers, closes the pool of epoch `gen` when
        it ends, unless a newer epoch has taken the pool over."""
        if not self.persistent_workers and self._pool is pool and pool.gen == gen:
            self._pool = None
            pool.close(grace)

    # ---- checkpoints ------------------------------------------------------

    def state_dict(self):
        self._iteration.check_process()
        if self.iterable:
            raise NotImplementedError(
                "state_dict of a loader over an iterable dataset is not supported: a map-style "
                "dataset resumes exactly")
        if not self.in_order:
            raise NotImplementedError("state_dict with in_order=False: batches came out of order, "
                                      "so no batch count says which were delivered (use in_order=True)")
        plan, delivered, epoch = self._current or (None, 0, self._epochs.next)
        if self._plan is not None:
            plan = plan if plan is not None else self._plan.start(epoch)
            return {"adapt_loader_state": plan.state(delivered), "epoch": plan.epoch}
        return {"adapt_sampler_state": {"epoch": epoch, "batches": delivered}, "epoch": epoch}

    def load_state_dict(self, state):
        self._iteration.check_process()
        if "adapt_loader_state" in state and self._plan is not None:
            # Checked now, not at the next iteration.
            epoch = self._plan.resume(state["adapt_loader_state"]).epoch
            self._epochs.load(state["adapt_loader_state"], epoch)
        elif "adapt_sampler_state" in state and self._plan is None:
            resume = dict(state["adapt_sampler_state"])
            self._epochs.load(resume, resume["epoch"])
        else:
            raise ValueError("this state_dict is not from a loader with the same kind of sampler")

    def close(self):
        self._iteration.close()
        self._finalizer()

    def _buffer_addresses(self):
        """Base addresses of the pooled batch buffers (for tests)."""
        return [] if self._slots is None else self._slots.addresses()


class _EpochStats:
    """One epoch of a Python dataset: each worker's busy seconds and
    samples, the seconds of `__getitem__`, adapt's steps and collation
    summed over the workers, and the consumer's waits."""

    def __init__(self, loader):
        self.started, self.ended, self.wait = time.perf_counter(), None, 0.0
        self.num_workers = loader.num_workers
        self.workers = [[0.0, 0] for _ in range(max(loader.num_workers, 1))]
        self.stages = [0.0, 0.0, 0.0]
        read = "next()" if loader.iterable else "__getitem__"
        collate = "collate_fn" if loader.collate_fn is not None else "collate"
        steps = f"steps {loader.steps_text} and collation" if loader.steps_text else None
        self.names = [read, steps, collate]

    def add(self, wid, times):
        busy, samples = times[0], times[1]
        if wid < len(self.workers):
            self.workers[wid][0] += busy
            self.workers[wid][1] += samples
        for k in range(3):
            self.stages[k] += times[2 + k]

    def end(self):
        self.ended = time.perf_counter()

    def report(self):
        from ._adapt import stage_report

        seconds = (self.ended or time.perf_counter()) - self.started
        stages = [(n, s) for n, s in zip(self.names, self.stages) if n is not None]
        return json.loads(stage_report(stages, seconds, self.num_workers,
                                       [tuple(w) for w in self.workers], self.wait))


class _SlotOwner:
    """Held by every array of one batch: when the last is released, the
    batch's slot goes back to the pool."""

    __slots__ = ("__weakref__",)

    def __init__(self, slots, sid):
        weakref.finalize(self, slots.release, sid)


def _torch():
    """torch, or None where it is not installed (adapt's one check)."""
    from . import _torch_module

    return _torch_module()


def _cuda_available():
    torch = _torch()
    return torch is not None and torch.cuda.is_available()
