from typing import Any, Callable

def read(
    dataset: Any,
    *,
    transform: str | None = None,
    output: str = "u8-nhwc",
    batch_size: int = 256,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
    num_blocks: int | None = None,
    concurrency: int | None = None,
    num_cpus: float = 1,
) -> Any: ...

def tune(
    source: Any,
    batch_size: int = 256,
    *,
    transform: str | None = None,
    output: str = "u8-nhwc",
    shuffle: bool = False,
    seed: int = 0,
    num_cpus: float = 1,
    step: Callable[[Any], Any] | None = None,
    step_ms: float | None = None,
    trial_samples: int = 4096,
    space: dict[str, list[int]] | None = None,
    noise_repeats: int = 3,
    final_repeats: int = 3,
    avl: str | None = None,
    race: bool = True,
    prune: bool = True,
    plain: bool = False,
    progress: bool | Callable[[str], Any] = True,
) -> dict[str, dict[str, int]]: ...
