"""torch interop, where torch is installed (CI has none: skipped, and said so)."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: torch interop not tested here")

import adapt  # noqa: E402


def test_batches_are_tensors_over_the_loader_buffers(tmp_path):
    import subprocess
    from conftest import xtask_binary
    subprocess.run([xtask_binary(), "gen", "--dataset", "cifar10", "--count", "64", "--out",
                    str(tmp_path)], check=True, capture_output=True)
    loader = adapt.DataLoader(adapt.datasets.CIFAR10(tmp_path), batch_size=16, num_workers=1,
                              transform="random_crop(32,padding=4),hflip,normalize(cifar10)")
    for (images, labels), (data, _) in zip(loader, adapt.DataLoader(
            adapt.datasets.CIFAR10(tmp_path), batch_size=16, num_workers=1,
            transform="random_crop(32,padding=4),hflip,normalize(cifar10)").batches()):
        assert isinstance(images, torch.Tensor) and images.dtype == torch.float32
        assert labels.dtype == torch.int64
        assert torch.equal(images, torch.from_dlpack(data))
    t = torch.from_dlpack(data)
    assert t.data_ptr() == data.address(), "DLPack import shares the buffer"
