"""adapt.DataLoader fed from a Ray Data stream: a `ray.data.Dataset` or one
rank's `DataIterator` (`ds.streaming_split(n)[rank]`) is read batch by
batch (`iter_batches`, Ray prefetching `prefetch_batches` of them), and
each batch's images go through adapt's Rust steps into a pooled batch
buffer (u8 or normalised f32, NCHW or NHWC, as `output=` says), labels
beside them, pinned for the device where `pin_memory=True`. A sample's
random steps draw from (seed, epoch, its `index` column, as `adapt.ray.read`
gives it, else its place in the epoch)."""

import numpy as np

from . import ConfigValueError
from . import _workers
from ._iteration import Epochs, OneAtATime
from ._python_loader import _SlotOwner, _Slots, _torch


def is_ray_source(x):
    """Whether `x` is a Ray Data Dataset or DataIterator."""
    module = type(x).__module__ or ""
    return module.startswith("ray.data") and hasattr(x, "iter_batches")


class RayLoader:
    """The backend of adapt.DataLoader over a Ray stream."""

    def __init__(self, source, batch_size, steps, output, drop_last, pin_memory, seed,
                 prefetch_batches):
        self.source, self.batch_size, self.drop_last = source, batch_size, drop_last
        self.steps_text = steps if steps is not None else ""
        self.output, self.pin_memory, self.seed = output, pin_memory, seed
        self.prefetch_batches = prefetch_batches
        self.image_key = self.label_key = None
        self._iteration, self._epochs = OneAtATime(), Epochs()
        self._steps = self._layout = self._slots = None

    def _ready(self, image):
        """adapt's steps and the batch layout for images like `image` (HWC u8)."""
        if self._steps is not None:
            return
        from ._adapt import ConfigError, Steps

        a = np.asarray(image)
        if a.dtype != np.uint8 or a.ndim not in (2, 3):
            raise TypeError(f"a Ray row's {self.image_key!r} is {a.dtype} of shape {a.shape}: adapt's "
                            "steps read u8 HWC images")
        h, w = a.shape[:2]
        c = 1 if a.ndim == 2 else a.shape[2]
        try:
            self._steps = Steps(self.steps_text, self.output, 0, 0, c)
        except ConfigError:
            self._steps = Steps(self.steps_text, self.output, h, w, c)
        self._layout = _workers.steps_layout(self._steps, self.output, self.batch_size)
        self._slots = _Slots(self._layout.nbytes, shared=False)

    def _batch(self, batch, epoch, first):
        """One Ray batch (numpy columns) as the training loop gets it."""
        if self.image_key is None:
            self.image_key = next((k for k in _workers.IMAGE_KEYS if k in batch), None)
            self.label_key = next((k for k in _workers.LABEL_KEYS if k in batch), None)
            if self.image_key is None or self.label_key is None:
                raise KeyError(f"a Ray batch has columns {sorted(batch)}: adapt reads an image column "
                               f"({' or '.join(_workers.IMAGE_KEYS)}) and a label column "
                               f"({' or '.join(_workers.LABEL_KEYS)}); rename them "
                               "(ds.rename_columns)")
        images, labels = batch[self.image_key], np.asarray(batch[self.label_key])
        keys = batch.get("index")
        n = len(labels)
        self._ready(images[0])
        sid = self._slots.take()
        buf = self._slots.bufs[sid]
        views = self._layout.views(buf)
        base, size = self._layout.offsets[0], self._steps.sample_bytes
        for j in range(n):
            key = int(keys[j]) if keys is not None else first + j
            pixels = np.ascontiguousarray(images[j])
            self._steps.write(pixels, False, (self.seed, epoch, key), buf, base + j * size)
        views[1][:n] = labels
        torch = _torch()
        out = self._layout.build(buf, n, _SlotOwner(self._slots, sid),
                                 torch.from_numpy if torch is not None else None)
        if self.pin_memory:
            from torch.utils.data._utils.pin_memory import pin_memory

            out = pin_memory(out)
        return out

    def _run(self, epoch):
        first = 0
        for batch in self.source.iter_batches(batch_size=self.batch_size, batch_format="numpy",
                                              prefetch_batches=self.prefetch_batches,
                                              drop_last=self.drop_last):
            out = self._batch(batch, epoch, first)
            first += len(out[1])
            yield out

    def __iter__(self):
        with self._iteration.begin() as mine:
            epoch, _ = self._epochs.take()
            self._epochs.ran(epoch)
        return self._iteration.steps(self._run(epoch), mine)

    def __len__(self):
        raise TypeError("len() of an adapt.DataLoader over a Ray stream: Ray does not know a "
                        "stream's length before reading it")

    def set_epoch(self, epoch):
        self._epochs.set(epoch)

    def state_dict(self):
        raise ConfigValueError("state_dict of a loader over a Ray stream is not supported: Ray Data "
                               "does not resume a stream mid-epoch; checkpoint at epoch ends "
                               "(set_epoch) or read adapt's datasets directly")

    def load_state_dict(self, state):
        self.state_dict()

    def stats(self):
        raise ConfigValueError("stats() of a loader over a Ray stream: see ds.stats()")

    def batches(self):
        raise ConfigValueError("batches() reads adapt's own datasets only")

    def autotune_status(self):
        return None

    def close(self):
        self._iteration.close()
