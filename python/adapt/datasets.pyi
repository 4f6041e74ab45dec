from collections.abc import Sequence
from os import PathLike
from typing import Any

_Path = str | PathLike[str]
_Urls = _Path | Sequence[_Path]

class _Spec:
    kind: str
    root: str
    has_text: bool
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> tuple[Any, ...]: ...
    @property
    def classes(self) -> list[str]: ...
    @property
    def class_to_idx(self) -> dict[str, int]: ...
    @property
    def targets(self) -> list[int]: ...
    def __add__(self, other: _Spec) -> Concat: ...

class CIFAR10(_Spec):
    train: bool
    def __init__(self, root: _Path, train: bool = True, download: bool = False, *,
                 resize: tuple[int, int] | None = None) -> None: ...

class CIFAR100(CIFAR10): ...

class CelebA(_Spec):
    def __init__(self, root: _Path, *, resize: tuple[int, int] | None = None) -> None: ...

class DigiFace1M(_Spec):
    def __init__(self, root: _Path, *, resize: tuple[int, int] | None = None) -> None: ...

class ImageFolder(_Spec):
    def __init__(self, root: _Path, *, resize: tuple[int, int] | None = None) -> None: ...
    @property
    def samples(self) -> list[tuple[str, int]]: ...

class Pack(_Spec):
    def __init__(self, root: _Path, *, resize: tuple[int, int] | None = None) -> None: ...

class CelebADigiFace(_Spec):
    def __init__(self, root: _Path, *, resize: tuple[int, int] | None = None) -> None: ...

class _Files(_Spec):
    urls: list[str]
    image: str
    label: str | None
    text: str | None
    split: str | None

class WebDataset(_Files):
    def __init__(self, urls: _Urls, image: str = "jpg;jpeg;png;webp", label: str | None = "cls", *,
                 text: str | None = None, split: str | None = None,
                 resize: tuple[int, int] | None = None) -> None: ...

class Parquet(_Files):
    def __init__(self, urls: _Urls, image: str = "image", label: str | None = "label", *,
                 text: str | None = None, split: str | None = None,
                 resize: tuple[int, int] | None = None) -> None: ...

class HuggingFace(_Files):
    def __init__(self, dataset: Any, image: str = "image", label: str | None = "label", *,
                 text: str | None = None, resize: tuple[int, int] | None = None) -> None: ...

class Concat(_Spec):
    def __init__(self, parts: Sequence[_Spec]) -> None: ...
