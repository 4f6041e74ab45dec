"""Datasets by their real on-disk layouts, as adapt's readers open them.

Each is a description (kind, folder, options), not loaded data: the loader
opens it in Rust, once, shared by its worker threads.
"""

import os

__all__ = ["CIFAR10", "CelebA", "DigiFace1M", "ImageFolder", "Pack", "CelebADigiFace", "Concat"]


class _Spec:
    kind = ""

    def __init__(self, root, *, resize=None):
        self.root = os.fspath(root)
        self.resize = resize

    def _spec(self):
        return {
            "kind": self.kind,
            "path": os.path.abspath(self.root),
            "test_split": False,
            "resize": list(self.resize) if self.resize else None,
            "parts": [],
        }

    def __add__(self, other):
        return Concat([self, other])

    def __repr__(self):
        return f"{type(self).__name__}({self.root!r})"


class CIFAR10(_Spec):
    """CIFAR-10's binary layout (`data_batch_1.bin` … `test_batch.bin`)."""

    kind = "cifar10"

    def __init__(self, root, train=True, **kw):
        super().__init__(root, **kw)
        self.train = train

    def _spec(self):
        s = super()._spec()
        s["test_split"] = not self.train
        return s


class CelebA(_Spec):
    """CelebA aligned (`img_align_celeba/`, `identity_CelebA.txt`), with its usual crop."""

    kind = "celeba"


class DigiFace1M(_Spec):
    """DigiFace1M's class folders of RGBA PNGs (converted to RGB)."""

    kind = "digiface"


class ImageFolder(_Spec):
    """Class-per-folder images, as torchvision's ImageFolder (give a
    transform that fixes the size, or `resize=(w, h)`, for mixed sizes)."""

    kind = "imagefolder"


class Pack(_Spec):
    """A pack written by `cargo xtask pack` (sharded, checksummed)."""

    kind = "pack"


class CelebADigiFace(_Spec):
    """A folder holding `celeba/` and `digiface/`, labels kept apart, both at 112×112."""

    kind = "celeba+digiface"


class Concat(_Spec):
    """Datasets read one after the other (labels unchanged), as PyTorch's ConcatDataset."""

    kind = "concat"

    def __init__(self, parts):
        parts = list(parts)
        if not parts or not all(isinstance(p, _Spec) for p in parts):
            raise TypeError("Concat takes adapt datasets")
        self.parts = parts
        self.root = ""
        self.resize = None

    def _spec(self):
        return {
            "kind": "concat",
            "path": "",
            "test_split": False,
            "resize": None,
            "parts": [p._spec() for p in self.parts],
        }

    def __repr__(self):
        return f"Concat({self.parts!r})"
