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


# ---- a typical PyTorch script, moved to adapt by changing the loader class --

class Faces(torch.utils.data.Dataset):
    """The user's own dataset: PIL images through a torchvision v2 random
    pipeline, as a training script writes it."""

    def __init__(self, n=40):
        import numpy as np
        from PIL import Image
        from torchvision.transforms import v2 as T

        rng = np.random.default_rng(0)
        self.images = [Image.fromarray(rng.integers(0, 255, (48, 40, 3), dtype=np.uint8)) for _ in range(n)]
        self.labels = [i % 3 for i in range(n)]
        self.transform = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(),
                                    T.ToImage(), T.ToDtype(torch.float32, scale=True),
                                    T.Normalize([0.5] * 3, [0.25] * 3)])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.labels[i]


def collate(batch):
    images, labels = zip(*batch)
    return {"images": torch.stack(images), "labels": torch.tensor(labels)}


def run_script(DataLoader, **extra):
    """The script: own dataset, torchvision transform, collate_fn and a
    WeightedRandomSampler; only the loader class changes."""
    ds = Faces()
    weights = [1.0 if label == 0 else 0.5 for label in ds.labels]
    sampler = torch.utils.data.WeightedRandomSampler(
        weights, num_samples=len(ds), generator=torch.Generator().manual_seed(1))
    loader = DataLoader(ds, batch_size=8, sampler=sampler, collate_fn=collate, num_workers=2,
                        drop_last=True, **extra)
    model = torch.nn.Linear(3 * 32 * 32, 3)
    seen = 0
    for batch in loader:
        loss = torch.nn.functional.cross_entropy(model(batch["images"].flatten(1)), batch["labels"])
        loss.backward()
        seen += len(batch["labels"])
    return seen, len(loader)


def test_a_pytorch_script_runs_by_changing_the_loader_class():
    assert run_script(adapt.DataLoader) == run_script(torch.utils.data.DataLoader) == (40, 5)
    assert run_script(adapt.DataLoader, worker_method="thread") == (40, 5)


def test_a_torchvision_random_pipeline_gives_the_same_batches_for_any_worker_count():
    def batches(workers, method="process"):
        loader = adapt.DataLoader(Faces(), batch_size=8, shuffle=True, seed=4, num_workers=workers,
                                  worker_method=method)
        return [(images.numpy().tobytes(), labels.tolist()) for images, labels in loader]

    want = batches(0)
    for workers in (1, 2, 4):
        assert batches(workers) == want, workers
    # In threads torch's global generator is shared: the draws then depend
    # on scheduling (said in the DataLoader's docstring), so only the
    # labels (the order) must match.
    assert [l for _, l in batches(2, "thread")] == [l for _, l in want]


def test_torchs_get_worker_info_answers_in_process_workers():
    class Split(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            assert info is not None and info.num_workers == 2
            return iter(range(info.id, 20, info.num_workers))

    got = sorted(x for b in adapt.DataLoader(Split(), batch_size=4, num_workers=2) for x in b.tolist())
    assert got == list(range(20))


def test_adapts_datasets_work_inside_torchs_own_loader(tmp_path):
    import subprocess
    from conftest import xtask_binary
    subprocess.run([xtask_binary(), "gen", "--dataset", "cifar10", "--count", "64", "--out",
                    str(tmp_path)], check=True, capture_output=True)
    ds = adapt.datasets.CIFAR10(tmp_path)
    loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2,
                                         multiprocessing_context="spawn")
    images, labels = next(iter(loader))
    assert images.shape == (16, 32, 32, 3) and labels.tolist() == ds.targets[:16]
