"""adapt's own sampler where trainers look for one (`loader.sampler`, as a
torch DataLoader always has): Lightning and Accelerate advance epochs by
calling `loader.sampler.set_epoch`, never a loader's own `set_epoch`."""

import itertools
import weakref


class Sampler:
    """The order an `adapt.DataLoader` draws its samples in, when it draws
    them itself (adapt's datasets, or a map-style dataset without a
    `sampler=`/`batch_sampler=`). `set_epoch(epoch)` sets the epoch the
    loader's next iteration runs, as `loader.set_epoch` does; iterating
    gives this rank's sample indices of that epoch in the order its batches
    hold them (the shuffle, the rank's share and, for streamed shards, the
    stream's order), read from nothing; `len()` is their number.
    `num_replicas`, `rank`, `shuffle`, `seed` and `drop_last` are named as
    `DistributedSampler` names them."""

    def __init__(self, backend, indices, *, shuffle, seed, rank, world_size, drop_last):
        self._backend = weakref.ref(backend)
        self._indices = indices
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.rank, self.num_replicas = rank or 0, world_size or 1

    def _loader(self):
        backend = self._backend()
        if backend is None:
            raise RuntimeError("the adapt.DataLoader of this sampler is gone")
        return backend

    @property
    def epoch(self):
        """The epoch the loader's next iteration runs."""
        return self._loader()._epochs.next

    def set_epoch(self, epoch):
        self._loader().set_epoch(epoch)

    def __iter__(self):
        return iter(self._indices(self._loader(), self.epoch))

    def __len__(self):
        return len(self._indices(self._loader(), 0))

    def __repr__(self):
        return (f"adapt.Sampler(shuffle={self.shuffle}, seed={self.seed}, rank={self.rank}, "
                f"num_replicas={self.num_replicas}, epoch={self.epoch})")


def engine_indices(backend, epoch):
    """An engine loader's order (adapt's datasets), from the Rust plan."""
    return backend.raw.epoch_indices(epoch)


def plan_indices(backend, epoch):
    """A Python dataset's order, from its index plan."""
    return list(itertools.chain.from_iterable(backend._plan.start(epoch).batches()))
