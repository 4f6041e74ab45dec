"""adapt's own datasets through the Rust engine: the backend
`adapt.DataLoader` picks for an `adapt.datasets` object (the other is
`_python_loader.PythonLoader`, for the user's own datasets). Both answer
the same calls, so the public class delegates without asking which."""

import json

from ._iteration import Epochs, OneAtATime


class EngineLoader:
    """The Rust loader `raw` over `dataset`: epochs, checkpoints, stats,
    batches converted to torch tensors where torch is installed."""

    def __init__(self, raw, dataset, torch_module):
        self.raw, self.dataset, self._torch = raw, dataset, torch_module
        self._epochs = Epochs()
        self._iteration = OneAtATime()

    def __len__(self):
        return self.raw.batches_per_epoch()

    def autotune_status(self):
        s = self.raw.autotune_status()
        if s is None:
            return None
        settled, tried, current = s
        return {"settled": settled, "current": current, "tried": tried}

    def stats(self):
        text = self.raw.stats()
        return None if text is None else json.loads(text)

    def set_epoch(self, epoch):
        self._epochs.set(epoch)

    def state_dict(self):
        return {"adapt_loader_state": self.raw.state(), "epoch": self._epochs.next}

    def load_state_dict(self, state):
        text = state.get("adapt_loader_state")
        if text is None:
            self._epochs.set(state.get("epoch", 0))
            return
        epoch = self.raw.check_state(text)  # refused now, not at the next iteration
        self._epochs.load(text, epoch)

    def _convert(self, data, labels):
        images = data.array()
        torch = self._torch()
        if torch is not None:
            images, labels = torch.from_numpy(images), torch.from_numpy(labels)
        if getattr(self.dataset, "has_text", False):
            return images, labels, self.dataset._data().texts(data.indices())
        return images, labels

    def _start(self):
        """Starts the epoch this iteration runs (`Epochs` decides which)."""
        epoch, text = self._epochs.take()
        if text is not None:
            epoch, _ = self.raw.resume(text)
        else:
            self.raw.start(epoch)
        self._epochs.ran(epoch)

    def _drain(self):
        while True:
            item = self.raw.next()
            if item is None:
                break
            yield item

    def batches(self):
        with self._iteration.begin() as mine:
            self._start()
        return self._iteration.steps(self._drain(), mine)

    def __iter__(self):
        with self._iteration.begin() as mine:
            self._start()
        return self._iteration.steps((self._convert(d, labels) for d, labels in self._drain()), mine)

    def close(self):
        self._iteration.close()
        self.raw.close()
