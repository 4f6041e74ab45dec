"""One epoch at a time per loader, refused by name otherwise: the iterator
of an older `iter()` once a newer one started, a second thread stepping a
loader while another does, an iterator of a closed loader, and a forked
child's copy of a loader each raise RuntimeError; none waits for ever or
yields batches of another epoch."""

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
