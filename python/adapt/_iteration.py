"""One epoch at a time per loader, refused by name otherwise: the iterator
of an older `iter()` once a newer one started, a second thread stepping a
loader while another does, an iterator of a closed loader, and a forked
child's copy of a loader each raise RuntimeError; none waits for ever or
yields batches of another epoch. Also: which epoch an iteration runs
(`Epochs`), and the iterator that starts it lazily (`LazyEpoch`)."""

import contextlib
import os
import threading

_FORKED = ("this adapt.DataLoader was created in process {parent} and is used in process {here}, "
           "a fork of it: its workers do not exist here; create the loader in the child, or start "
           "children with multiprocessing's 'spawn' or 'forkserver'")
_OTHER_THREAD = ("this adapt.DataLoader is in use by another thread: iterate a loader from one "
                 "thread at a time (give each thread its own DataLoader)")
_SUPERSEDED = ("this iterator was superseded by a newer iter() of the same adapt.DataLoader, which "
               "runs one epoch at a time: finish or drop the old iterator before starting another")


class OneAtATime:
    """The guard of one loader's iterations."""

    def __init__(self):
        self.pid = os.getpid()
        self.generation = 0
        self.lock = threading.Lock()
        self.closed = False

    def in_owner(self):
        """Whether this is the process that created the loader."""
        return os.getpid() == self.pid

    def check_process(self):
        if not self.in_owner():
            raise RuntimeError(_FORKED.format(parent=self.pid, here=os.getpid()))

    def close(self):
        """The loader was closed: its iterators refuse their next step."""
        self.closed = True

    def check_usable(self):
        """Refuses, by name, a closed loader and a forked child's copy."""
        self.check_process()
        if self.closed:
            raise RuntimeError("this adapt.DataLoader was closed")

    @contextlib.contextmanager
    def begin(self):
        """A new iteration, set up (its epoch started, its pool and batch
        layout made) inside the `with`, under the guard: older iterators
        are superseded, and another thread's iter() or step meanwhile is
        refused by name, never met half set up. Gives its generation for
        `steps`."""
        self.check_process()
        if not self.lock.acquire(blocking=False):
            raise RuntimeError(_OTHER_THREAD)
        try:
            self.generation += 1
            yield self.generation
        finally:
            self.lock.release()

    def steps(self, gen, mine):
        """`gen`'s items, one step at a time under the guard."""
        try:
            while True:
                self.check_process()
                if not self.lock.acquire(blocking=False):
                    raise RuntimeError(_OTHER_THREAD)
                try:
                    if self.closed:
                        raise RuntimeError("this adapt.DataLoader was closed")
                    if self.generation != mine:
                        raise RuntimeError(_SUPERSEDED)
                    try:
                        item = next(gen)
                    except StopIteration:
                        return
                finally:
                    self.lock.release()
                yield item
        finally:
            # A forked child's copy is left alone: its workers are the
            # parent's.
            if self.in_owner():
                gen.close()


class Epochs:
    """Which epoch the next iteration runs, decided when it starts (its
    first `next()`), as trainers expect: `set_epoch(e)` before then picks
    it (Lightning and Accelerate call it after `iter()`); a checkpoint
    loaded by `load_state_dict` resumes its own epoch unless `set_epoch`
    named another one since (the trainer moved on: that epoch starts from
    its first batch); without either, each iteration is the epoch after
    the last one run, as PyTorch draws a new order on every `iter()`."""

    def __init__(self):
        self.next = 0
        self.resume = None
        self.resume_epoch = None

    def set(self, epoch):
        self.next = int(epoch)

    def load(self, resume, epoch):
        """A checkpoint of `epoch` to resume (`resume`: what the backend
        resumes from)."""
        self.resume, self.resume_epoch, self.next = resume, int(epoch), int(epoch)

    def take(self):
        """(epoch, resume or None) for the iteration starting now."""
        resume = self.resume if self.resume is not None and self.next == self.resume_epoch else None
        self.resume = self.resume_epoch = None
        return self.next, resume

    def ran(self, epoch):
        """The iteration starting now runs `epoch` (a resumed epoch with
        nothing left runs the one after it): the next is `epoch + 1`
        unless `set` says otherwise before it starts."""
        self.next = epoch + 1


class LazyEpoch:
    """What `iter(loader)` returns: nothing starts until the first
    `next()`, so an iterator made and dropped (Lightning's check that a
    loader is iterable) costs no epoch, and a `set_epoch` after `iter()`
    still counts. `len()` is the loader's."""

    def __init__(self, backend):
        backend._iteration.check_usable()
        self._backend = backend
        self._steps = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._steps is None:
            self._steps = iter(self._backend)
        return next(self._steps)

    def __len__(self):
        return len(self._backend)

    def close(self):
        """Ends the epoch's iteration now (a generator's `close`)."""
        if self._steps is not None:
            self._steps.close()
