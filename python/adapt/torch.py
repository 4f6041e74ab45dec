"""adapt.torch: ADaPT for PyTorch's own DataLoader, in the training process.

    import adapt.torch
    picks = adapt.torch.tune(train_set, batch_size=128, step=train_step,
                             profile="adapt-profile.json")
    loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True,
                                         **picks[128])
    # later, or in another script: the saved knobs, a plain torch DataLoader
    loader = adapt.torch.DataLoader(train_set, batch_size=128, shuffle=True,
                                    profile="adapt-profile.json")

The search, the trial sizing by time, the noise measurement, the race and
the final comparison are the Rust tuner's (the same as `cargo xtask tune`);
each trial builds a `torch.utils.data.DataLoader` with one configuration of
`num_workers`, `prefetch_factor`, `pin_memory` and `persistent_workers`,
and iterates a fixed random subset of the dataset for two epochs (or more,
as sized), calling `step(batch)` on every batch when given — so worker
start-up, epoch boundaries and the training step are paid as in training.
"""

import json
import math
import os
import random
import time
import warnings

from . import ConfigTypeError, ConfigValueError, _picks, _progress_printer, plot
from ._adapt import (
    profile_knobs_of as _profile_knobs_of,
    space_configurations as _space_configurations,
    tune_trials as _tune_trials,
)

__all__ = ["tune", "DataLoader", "space", "plot"]

# The knobs the tuner sets: passing one to `tune` is a contradiction.
_KNOBS = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers")
# DataLoader arguments a trial cannot take: the trial builds its own order
# over its subset.
_NOT_IN_TRIALS = {
    "batch_sampler": "pass sampler= (a trial then stops each epoch after its batch count) or "
                     "leave the order to the trial's shuffled subset",
    "generator": "pass seed= (the trial's subset and shuffle are seeded from it)",
    "dataset": "pass the dataset as the first argument",
    "batch_size": "pass batch_size as the second argument (an int or a list of them)",
}


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _gpu():
    """The accelerator torch sees (its name), or None."""
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return None


def _is_map_style(dataset):
    torch = _torch()
    if torch is not None and isinstance(dataset, torch.utils.data.IterableDataset):
        return False
    return hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")


def _length(dataset):
    try:
        return len(dataset)
    except TypeError:
        # An iterable dataset without a length: trials take as many
        # batches per epoch as they are sized to.
        return 1 << 40


def _identity(dataset, key):
    """What a profile entry is keyed by: the dataset's class, its length
    and the user's key (say, the transform's and the storage's names)."""
    cls = type(dataset)
    n = _length(dataset)
    text = f"torch:{cls.__module__}.{cls.__qualname__}(len={n})"
    return text + (f"[{key}]" if key is not None else "")


def _nbytes(obj):
    """Bytes of one sample as collated (arrays, tensors, PIL images, in
    tuples, lists and dicts), or None when unknown."""
    if hasattr(obj, "nbytes") and isinstance(getattr(obj, "nbytes"), int):
        return obj.nbytes
    if hasattr(obj, "element_size") and hasattr(obj, "numel"):
        return obj.element_size() * obj.numel()
    if hasattr(obj, "getbands") and hasattr(obj, "size"):
        w, h = obj.size
        return w * h * len(obj.getbands())
    if isinstance(obj, (bytes, bytearray)):
        return len(obj)
    if isinstance(obj, (int, float, bool)):
        return 8
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (tuple, list)):
        parts = [_nbytes(o) for o in obj]
        return None if any(p is None for p in parts) else sum(parts)
    return None


def _batch_bytes(dataset, batch_size):
    if not _is_map_style(dataset) or _length(dataset) == 0:
        return None
    try:
        one = _nbytes(dataset[0])
    except Exception:  # the first read fails: the trials will say why
        return None
    return None if one is None else one * batch_size


class _Subset:
    """A fixed subset in a given order (torch.utils.data.Subset's job,
    without needing torch)."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, i):
        return self.dataset[self.indices[i]]

    def __len__(self):
        return len(self.indices)


class _Trials:
    """The trial function the Rust tuner calls: one DataLoader per
    configuration over a fixed random subset, `epochs` epochs, `step` on
    every batch."""

    def __init__(self, dataset, factory, shuffle, sampler, step, step_ms, kwargs):
        self.dataset, self.factory, self.shuffle = dataset, factory, shuffle
        self.sampler, self.step, self.kwargs = sampler, step, kwargs
        self.step_s = None if step_ms is None else step_ms / 1000.0
        self.map_style = _is_map_style(dataset) and sampler is None
        self._kept = (None, None)  # the last subset drawn, by (samples, seed)

    def _subset(self, samples, seed):
        if self._kept[0] != (samples, seed):
            n = len(self.dataset)
            indices = random.Random(seed).sample(range(n), min(samples, n))
            self._kept = ((samples, seed), _Subset(self.dataset, indices))
        return self._kept[1]

    def _loader(self, knobs, batch_size, samples, seed):
        kwargs = dict(self.kwargs, batch_size=batch_size, **knobs)
        torch = _torch()
        if self.map_style:
            data = self._subset(samples, seed)
            kwargs["shuffle"] = self.shuffle
            if torch is not None and self.shuffle:
                g = torch.Generator()
                g.manual_seed(seed)
                kwargs["generator"] = g
            return self.factory(data, **kwargs), None
        if self.sampler is not None:
            kwargs["sampler"] = self.sampler
        return self.factory(self.dataset, **kwargs), math.ceil(samples / batch_size)

    def __call__(self, knobs, batch_size, samples, epochs, seed, purpose, give_up_after=None):
        """One trial; with `give_up_after` (seconds, the tuner's pruning)
        it stops after the first batch that ends past it and returns
        ("cut_short", its whole time estimated from the batches read)."""
        start = time.perf_counter()
        loader, cut = self._loader(knobs, batch_size, samples, seed)
        it = None
        try:
            per_epoch = cut if cut is not None else getattr(loader, "__len__", lambda: None)()
            if per_epoch is None:  # a loader that does not say its length: never cut
                give_up_after = None
            total, done = max(1, (per_epoch or 0) * epochs), 0
            for epoch in range(epochs):
                if self.sampler is not None and hasattr(self.sampler, "set_epoch"):
                    self.sampler.set_epoch(epoch)
                it = iter(loader)
                for i, batch in enumerate(it):
                    if cut is not None and i >= cut:
                        break
                    if self.step is not None and purpose != "warm-up":
                        self.step(batch)
                    elif self.step_s and purpose != "warm-up":
                        time.sleep(self.step_s)
                    del batch
                    done += 1
                    spent = time.perf_counter() - start
                    if give_up_after is not None and spent > give_up_after and done < total:
                        return ("cut_short", spent * total / done)
                it = None
        finally:
            # Workers end here, inside the trial's time (as they end when a
            # training run lets its loader go), even when the trial failed.
            it = loader = None
        return None


def tune(dataset, batch_size=128, *, collate_fn=None, sampler=None, shuffle=True, step=None,
         step_ms=None, strategy="avl", trial_seconds=1.0, trial_samples=4096, space="machine",
         profile=None, key=None, retune=False, final_repeats=5, noise_repeats=5, avl=None,
         race=True, prune=True, plain=False,
         seed=0, budget_bytes=None, progress=True, dataloader=None, report=None,
         **dataloader_kwargs):
    """Tunes `torch.utils.data.DataLoader`'s `num_workers`, `prefetch_factor`,
    `pin_memory` (only where CUDA is available) and `persistent_workers`
    over `dataset` with ADaPT's search and returns `{batch_size: kwargs}`
    to pass to `torch.utils.data.DataLoader(dataset, batch_size, **kwargs)`.

    Each trial iterates a fixed random subset (`trial_samples`, resized so
    a trial lasts about `trial_seconds`; None keeps it) for two epochs
    with a new DataLoader, calling `step(batch)` on each batch (your
    training step, or `step_ms` of sleep as its stand-in) so the tuner
    ranks what training feels. `collate_fn`, `shuffle` and other
    DataLoader arguments (`drop_last`, `worker_init_fn`,
    `multiprocessing_context`, `timeout`, `in_order`, …) go to every
    trial's loader; with a `sampler` (or an iterable-style dataset) each
    trial epoch stops after the subset's batch count. `space` is
    "machine" (num_workers 0 … 2 × cores) or "paper" (the paper's 1,584);
    `strategy` "avl", "grid" or "both" (the paper's Table 1; both AVL
    descents beside the grid); `avl` "plain" or "refined" (None: the
    measured default), `race=False` without the noise race, `prune=False`
    without pruning (a trial clearly losing is otherwise stopped, and a
    value that clearly lost under two other contexts not tried again).
    `profile`
    saves the picks keyed by the dataset's class, length and `key`, for
    `adapt.torch.DataLoader(..., profile=)`. `dataloader` replaces
    torch's DataLoader class (a callable taking the same arguments).
    A trial that raises is a failed trial in the report; Ctrl-C ends the
    run. The whole report is in `tune.last_report`; `report` (a path) also
    writes it as one self-contained HTML page (the comparison, the trace,
    the noise; PyTorch's DataLoader records no stages, so the page has
    none: `adapt.DataLoader(dataset, **pick).stats()` gives them)."""
    given = [k for k in _KNOBS if k in dataloader_kwargs]
    if given:
        raise ConfigValueError(f"{given[0]} is what adapt.torch.tune tunes: leave it out (pass "
                               "space= to choose the configurations searched)")
    for name, instead in _NOT_IN_TRIALS.items():
        if name in dataloader_kwargs:
            raise ConfigValueError(f"adapt.torch.tune does not take {name}: {instead}")
    if sampler is not None and shuffle and "shuffle" in dataloader_kwargs:
        raise ConfigValueError("sampler option is mutually exclusive with shuffle")
    if step is not None and not callable(step):
        raise ConfigTypeError(f"step must be a callable taking a batch, not {step!r}")
    if step is not None and step_ms is not None:
        raise ConfigValueError("pass step (your training step) or step_ms (a stand-in), not both")
    if dataloader is None:
        torch = _torch()
        if torch is None:
            raise ImportError("adapt.torch.tune tunes torch.utils.data.DataLoader: install torch, "
                              "or pass dataloader= (a class taking DataLoader's arguments)")
        dataloader = torch.utils.data.DataLoader
    sizes = [batch_size] if isinstance(batch_size, int) else list(batch_size)
    if collate_fn is not None:
        dataloader_kwargs["collate_fn"] = collate_fn
    trials = _Trials(dataset, dataloader, shuffle and sampler is None, sampler, step, step_ms,
                     dataloader_kwargs)
    gpu = _gpu()
    description = _description(dataset, dataloader, collate_fn, step, key, gpu)
    options = dict(batch_sizes=sizes, strategy=strategy, space=space,
                   profile=os.fspath(profile) if profile else None, retune=retune,
                   budget_bytes=budget_bytes, trial_samples=trial_samples,
                   final_repeats=final_repeats, avl=avl, race=race, prune=prune, plain=plain,
                   seed=seed,
                   trial_seconds=trial_seconds, noise_repeats=noise_repeats,
                   step_ms=step_ms if step is None else None)
    with _progress_printer(progress) as show:
        data = dict(len=_length(dataset), identity=_identity(dataset, key),
                    description=description, gpu=gpu,
                    batch_bytes=_batch_bytes(dataset, max(sizes)))
        text = _tune_trials(trials, json.dumps(data), options, show)
    if report is not None:
        from ._adapt import report_page

        report_page(text, os.fspath(report), None, _NO_STAGES)
    report = json.loads(text)
    tune.last_report = report
    return _picks(report)


_NO_STAGES = ("PyTorch's DataLoader records no stages: adapt.DataLoader(dataset, **pick).stats() "
              "says where the time of your own __getitem__ and collate_fn goes.")

tune.last_report = None


def _description(dataset, dataloader, collate_fn, step, key, gpu):
    """What the report says of the data and the loader tuned."""
    torch = _torch()
    name = lambda f: None if f is None else getattr(f, "__qualname__", type(f).__qualname__)
    return {
        "kind": "torch",
        "dataset": f"{type(dataset).__module__}.{type(dataset).__qualname__}",
        "samples": _length(dataset) if _is_map_style(dataset) else None,
        "key": key,
        "loader": f"{dataloader.__module__}.{dataloader.__qualname__}",
        "torch": getattr(torch, "__version__", None),
        "collate_fn": name(collate_fn),
        "train_step": name(step),
        "accelerator": gpu,
        # pin_memory is searched only where CUDA is there; thread workers
        # are not searched: no torch release so far has them (a DataLoader
        # taking worker_method= is said here, and only processes are tuned).
        "pin_memory_searched": gpu is not None,
        "thread_workers": _takes(dataloader, "worker_method"),
    }


def _takes(cls, name):
    """Whether `cls(...)` takes the keyword `name`."""
    import inspect
    try:
        return name in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def DataLoader(dataset, batch_size=1, *, profile=None, key=None, strict=False, **kwargs):
    """A plain `torch.utils.data.DataLoader` with the knobs
    `adapt.torch.tune(profile=...)` saved for this dataset (its class,
    length and `key`), batch size and machine. Without an entry it warns,
    naming the reason, and uses PyTorch's defaults; `strict=True` raises
    instead. Knobs given here win; giving `num_workers` drops the
    profile's `prefetch_factor` and `persistent_workers`."""
    torch = _torch()
    if torch is None:
        raise ImportError("adapt.torch.DataLoader returns a torch.utils.data.DataLoader: "
                          "install torch")
    knobs = {}
    if profile is not None:
        knobs, reason = _saved(profile, dataset, key, batch_size)
        if reason is not None:
            if strict:
                raise ConfigValueError(reason)
            warnings.warn(f"{reason}: using PyTorch's defaults (num_workers=0)", UserWarning,
                          stacklevel=2)
    if "num_workers" in kwargs:
        for k in ("prefetch_factor", "persistent_workers"):
            if k not in kwargs:
                knobs.pop(k, None)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, **{**knobs, **kwargs})


def _saved(profile, dataset, key, batch_size):
    """(knobs, None) from the profile, or ({}, why there are none)."""
    path = os.fspath(profile)
    if not os.path.exists(path):
        return {}, f"{path}: no such profile"
    knobs = _profile_knobs_of(path, _identity(dataset, key), batch_size, _gpu())
    if knobs is None:
        return {}, (f"{path} has no entry for {_identity(dataset, key)} at batch size {batch_size} "
                    "on this machine (tune it with adapt.torch.tune(..., profile=path))")
    return dict(knobs), None


def space(name="machine"):
    """The configurations `tune(space=name)` searches, as DataLoader kwargs:
    "machine" — num_workers 0 … 2 × cores, prefetch_factor 1 … 2048 in
    powers of two, pin_memory only where torch sees CUDA, both
    persistent_workers; "paper" — the paper's space as published
    (num_workers 1, 2, 4 … 64, 1,584 configurations; tuning without CUDA
    fixes pin_memory off, 792). Before the memory budget prunes."""
    if name == "paper":
        return _space_configurations("paper", "the paper's space")
    return _space_configurations(name, _gpu())
