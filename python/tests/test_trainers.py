"""What trainers (Lightning, Accelerate) do to a loader, without them: an
`iter()` made and dropped, `loader.sampler.set_epoch` after `iter()`, a
checkpoint from the end of an epoch, launchers' variables, a distributed
job the loader was not told about. The trainers themselves are run in
test_lightning.py where they are installed."""

import hashlib
import warnings

import numpy as np
import pytest

import adapt


class Squares:
    """A map-style dataset whose samples say their index."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        return np.full(3, i, dtype=np.int64)


def loaders(cifar, **kw):
    """(name, a loader) over adapt's CIFAR-10 and over a Python dataset."""
    yield "engine", adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=50, shuffle=True,
                                     num_workers=1, seed=3, **kw)
    yield "python", adapt.DataLoader(Squares(), batch_size=5, shuffle=True, seed=3, **kw)


def key(batch):
    """What tells batches apart: the sample indices (a Python dataset's
    values) or, for adapt's datasets, the pixels' digest."""
    if isinstance(batch, tuple):
        return hashlib.sha1(np.ascontiguousarray(batch[0]).tobytes()).hexdigest()
    return tuple(int(x) for x in np.asarray(batch)[:, 0])


def epoch(it):
    """The keys of an iteration's batches (`it`: a loader or an iterator)."""
    return [key(b) for b in it]


def order(loader):
    """This rank's sample indices of the loader's next epoch, as its batches
    hold them (read through the loader: `batches()` for the engine)."""
    if isinstance(loader.dataset, Squares):
        return [i for b in epoch(loader) for i in b]
    return [i for data, _ in loader.batches() for i in data.indices()]


def test_an_iterator_made_and_dropped_costs_no_epoch(cifar):
    for name, loader in loaders(cifar):
        probe = iter(loader)  # Lightning's check that the loader is iterable
        del probe
        first = epoch(loader)
        fresh = dict(loaders(cifar))[name]
        assert first == epoch(fresh), f"{name}: the probe used up epoch 0"
        assert epoch(loader) != first, f"{name}: the next iteration is epoch 1"


def test_set_epoch_after_iter_counts_and_the_sampler_sets_it(cifar):
    for name, loader in loaders(cifar):
        reference = dict(loaders(cifar))[name]
        orders = []
        for e in range(3):
            reference.set_epoch(e)
            orders.append(epoch(reference))
        assert len({str(o) for o in orders}) == 3, f"{name}: 3 epochs, 3 orders"
        for e in (2, 0, 1):
            it = iter(loader)
            loader.sampler.set_epoch(e)  # as Lightning: after iter(), before next()
            assert epoch(it) == orders[e], f"{name}: epoch {e}"
        # The sampler's order is the loader's: this rank's indices, in order.
        loader.sampler.set_epoch(1)
        want = list(loader.sampler)
        assert len(loader.sampler) == len(want) == len(loader.dataset), name
        assert loader.sampler.epoch == 1 and loader.sampler.num_replicas == 1
        assert order(loader) == want, name
        assert sorted(want) == list(range(len(want))) and want != sorted(want), name


def test_a_checkpoint_from_an_epochs_end_then_the_next_epoch(cifar):
    for name, make in (("engine", lambda: dict(loaders(cifar))["engine"]),
                       ("python", lambda: dict(loaders(cifar))["python"])):
        uninterrupted = make()
        orders = []
        for e in range(3):
            uninterrupted.sampler.set_epoch(e)
            orders.append(epoch(uninterrupted))
        # End of epoch 0: the trainer resumes and says epoch 1.
        first = make()
        first.sampler.set_epoch(0)
        epoch(first)
        state = first.state_dict()
        resumed = make()
        resumed.load_state_dict(state)
        resumed.sampler.set_epoch(1)
        assert epoch(resumed) == orders[1], f"{name}: epoch 1 after an end-of-epoch resume"
        resumed.sampler.set_epoch(2)
        assert epoch(resumed) == orders[2], name
        # Mid-epoch: resumed where it stopped when the trainer names the
        # checkpoint's epoch (or names none).
        for say in (True, False):
            first = make()
            first.set_epoch(1)
            it = iter(first)
            head = epoch([next(it), next(it)])
            state = first.state_dict()
            del it
            resumed = make()
            resumed.load_state_dict(state)
            if say:
                resumed.sampler.set_epoch(1)
            assert head + epoch(resumed) == orders[1], f"{name}: mid-epoch resume, set_epoch {say}"
        # The trainer moved on to another epoch: that epoch, whole.
        resumed = make()
        resumed.load_state_dict(state)
        resumed.set_epoch(2)
        assert epoch(resumed) == orders[2], name


def test_lightnings_variables_shard_with_auto(cifar, monkeypatch):
    for k in ("RANK", "SLURM_PROCID", "SLURM_NTASKS", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("NODE_RANK", "0")
    shares = []
    for rank in (0, 1):
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        loader = adapt.DataLoader(Squares(), batch_size=5, shuffle=True, seed=3, distributed="auto")
        assert loader.launch[:2] == (rank, 2) and loader.launch[4] == "lightning"
        assert loader.sampler.rank == rank and loader.sampler.num_replicas == 2
        shares.append(order(loader))
    assert not set(shares[0]) & set(shares[1]) and sorted(shares[0] + shares[1]) == list(range(40))


def test_a_distributed_job_the_loader_was_not_told_about_warns_once(cifar, monkeypatch):
    monkeypatch.setattr(adapt, "_WARNED_UNSHARDED", [])
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.warns(UserWarning, match='rank 1 of 2.*distributed="auto"'):
        loader = adapt.DataLoader(Squares(), batch_size=5)
    assert len(loader) == 8, "None reads everything, as torch's DataLoader"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adapt.DataLoader(Squares(), batch_size=5)  # once per process
        monkeypatch.setattr(adapt, "_WARNED_UNSHARDED", [])
        adapt.DataLoader(Squares(), batch_size=5, distributed=False)  # on purpose: no word
        assert len(adapt.DataLoader(Squares(), batch_size=5, distributed="auto")) == 4
    with pytest.raises(TypeError, match="distributed=True"):
        adapt.DataLoader(Squares(), batch_size=5, distributed=True)
