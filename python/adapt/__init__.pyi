# The public API of adapt, typed (checked by mypy --strict in python/tests/test_typing.py).
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from os import PathLike
from typing import Any, Literal

from . import datasets as datasets
from ._sampler import Sampler as Sampler

_Path = str | PathLike[str]
_Output = Literal["f32", "u8", "u8-nhwc"]
_Distributed = Literal["auto"] | tuple[int, int] | None | bool

class AdaptError(Exception): ...
class ConfigError(AdaptError): ...
class ConfigValueError(ConfigError, ValueError): ...
class ConfigTypeError(ConfigError, TypeError): ...
class DataError(AdaptError): ...
class SampleError(AdaptError): ...
class WorkerError(AdaptError): ...
class LoaderTimeout(AdaptError): ...
class CheckpointError(AdaptError): ...

class BatchData:
    """A batch's pixels in the loader's buffer (numpy and DLPack over it)."""

    def array(self) -> Any: ...
    def indices(self) -> list[int]: ...
    def address(self) -> int: ...
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...

class DataLoader:
    dataset: Any
    batch_size: int | None
    num_workers: int
    prefetch_factor: int | None
    pin_memory: bool
    persistent_workers: bool
    drop_last: bool
    seed: int
    shuffle: bool
    rank: int | None
    world_size: int | None
    sampler: Any
    batch_sampler: Any
    collate_fn: Callable[[list[Any]], Any] | None
    timeout: float | None
    launch: tuple[int, int, int | None, int | None, str] | None
    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Iterable[int] | None = None,
        batch_sampler: Iterable[Sequence[int]] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float | None = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        seed: int = 0,
        transform: str | None = None,
        output: _Output = "f32",
        distributed: _Distributed = None,
        exact_decode: bool = False,
        stream: int | None = None,
        autotune: bool = False,
        autotune_profile: _Path | None = None,
        worker_method: Literal["thread", "process"] | None = None,
        reseed_globals: Literal["batch", "sample"] | bool = "batch",
        interleave: int | None = None,
        stage_timing: bool = True,
    ) -> None: ...
    @classmethod
    def from_profile(
        cls,
        path: _Path,
        dataset: Any,
        batch_size: int = 1,
        transform: str | None = None,
        output: _Output = "f32",
        strict: bool = False,
        **kwargs: Any,
    ) -> DataLoader: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Any]: ...
    def set_epoch(self, epoch: int) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...
    def stats(self) -> dict[str, Any] | None: ...
    def autotune_status(self) -> dict[str, Any] | None: ...
    def batches(self) -> Iterator[tuple[BatchData, Any]]: ...
    def close(self) -> None: ...

def tune(
    dataset: Any,
    transform: str | None = None,
    output: _Output = "f32",
    batch_size: int | Sequence[int] = (128,),
    strategy: str = "avl",
    profile: _Path | None = None,
    retune: bool = False,
    budget_bytes: int | None = None,
    trial_samples: int = 16384,
    final_repeats: int = 5,
    avl: Literal["plain", "refined"] | None = None,
    race: bool = True,
    plain: bool = False,
    seed: int = 0,
    exact_decode: bool = False,
    trial_seconds: float | None = 1.0,
    noise_repeats: int = 5,
    step_ms: float | None = None,
    space: Literal["machine", "paper"] = "machine",
    progress: bool | Callable[[str], None] | None = True,
    prune: bool = True,
    report: _Path | None = None,
) -> dict[int, dict[str, Any]]: ...
def plot(report: Mapping[str, Any] | _Path, path: _Path) -> None: ...
def launch_from_env() -> tuple[int, int, int | None, int | None, str] | None: ...
def get_worker_info() -> Any: ...
def sample_rng() -> Any: ...
def default_collate(batch: list[Any]) -> Any: ...
