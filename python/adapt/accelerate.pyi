from typing import Any

from . import DataLoader

def prepare(accelerator: Any, loader: DataLoader, device_placement: bool | None = None) -> DataLoader: ...
