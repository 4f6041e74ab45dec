from typing import Any

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
