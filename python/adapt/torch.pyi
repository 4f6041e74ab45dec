from collections.abc import Callable, Sequence
from os import PathLike
from typing import Any, Literal

from . import plot as plot

def tune(dataset: Any, batch_size: int | Sequence[int] = 128, *, collate_fn: Callable[[list[Any]], Any] | None = None,
         sampler: Any = None, shuffle: bool = True, step: Callable[[Any], Any] | None = None,
         step_ms: float | None = None, strategy: str = "avl", trial_seconds: float | None = 1.0,
         trial_samples: int = 4096, space: Literal["machine", "paper"] = "machine",
         profile: str | PathLike[str] | None = None, key: str | None = None, retune: bool = False,
         **kwargs: Any) -> dict[int, dict[str, Any]]: ...
def DataLoader(dataset: Any, batch_size: int | None = 1, *, profile: str | PathLike[str] | None = None,
               key: str | None = None, strict: bool = False, **kwargs: Any) -> Any: ...
def space(name: Literal["machine", "paper"] = "machine") -> list[dict[str, Any]]: ...
