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


# ---- adapt.torch.tune over torch's own DataLoader --------------------------

def quick_tune(dataset, batch_size, **kw):
    """A short real tuning run: small trials, one final repeat."""
    import adapt.torch as at
    args = dict(trial_seconds=None, trial_samples=256, final_repeats=1, noise_repeats=0,
                progress=False)
    args.update(kw)
    return at.tune(dataset, batch_size, **args)


class PngFaces(torch.utils.data.Dataset):
    """PNG bytes decoded by PIL in __getitem__, then flipped and scaled to a
    float tensor with torchvision: what an ImageFolder-style dataset does."""

    def __init__(self, n=96):
        import io
        import numpy as np
        from PIL import Image
        from torchvision.transforms import v2 as T

        rng = np.random.default_rng(1)
        self.files = []
        for _ in range(n):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 255, (24, 20, 3), dtype=np.uint8)).save(buf, "PNG")
            self.files.append(buf.getvalue())
        self.transform = T.Compose([T.RandomHorizontalFlip(), T.ToImage(),
                                    T.ToDtype(torch.float32, scale=True)])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import io
        from PIL import Image
        return self.transform(Image.open(io.BytesIO(self.files[i])).convert("RGB")), i % 4


def test_torch_tune_on_a_tensor_dataset_returns_kwargs_for_a_working_torch_loader():
    import adapt.torch as at
    ds = torch.utils.data.TensorDataset(torch.randn(512, 3, 8, 8), torch.arange(512) % 10)
    steps = []
    picks = quick_tune(ds, 32, step=lambda batch: steps.append(batch[0].shape[0]))
    kwargs = picks[32]
    assert set(kwargs) == {"num_workers", "prefetch_factor", "pin_memory", "persistent_workers"}
    report = at.tune.last_report
    assert report["dataset"]["dataset"] == "torch.utils.data.dataset.TensorDataset"
    assert report["dataset"]["loader"] == "torch.utils.data.dataloader.DataLoader"
    import inspect
    threads = "worker_method" in inspect.signature(torch.utils.data.DataLoader).parameters
    assert report["dataset"]["thread_workers"] is threads
    assert report["dataset"]["pin_memory_searched"] is torch.cuda.is_available()
    run = report["runs"][0]
    assert run["adapt_picked_by"] == "avl" and run["search"]["avl"]["trials"] >= 5
    assert steps and set(steps) == {32}, "the step saw the trials' batches"
    # The picks build torch's own DataLoader, which runs an epoch.
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, **kwargs)
    assert sum(images.shape[0] for images, _ in loader) == 512


def test_torch_tune_on_a_pil_decoding_dataset_with_a_collate_fn():
    import adapt.torch as at
    seen = []

    def collate(batch):
        images, labels = zip(*batch)
        seen.append(len(images))
        return torch.stack(images), torch.tensor(labels)

    picks = quick_tune(PngFaces(), 16, collate_fn=collate, drop_last=True, strategy="both")
    run = at.tune.last_report["runs"][0]
    assert run["optimal"] is not None and run["other"] is not None, "both searches and the grid ran"
    assert run["adapt_over_optimal"] > 0
    images, labels = next(iter(torch.utils.data.DataLoader(PngFaces(), batch_size=16,
                                                           collate_fn=collate, **picks[16])))
    assert images.shape == (16, 3, 24, 20) and images.dtype == torch.float32
    assert seen and set(seen) == {16}, "the trials collated with the user's collate_fn"


def test_torch_tune_profile_round_trip_gives_a_plain_torch_loader(tmp_path):
    import warnings
    import adapt.torch as at
    path = tmp_path / "profile.json"
    ds = torch.utils.data.TensorDataset(torch.randn(300, 4), torch.zeros(300))
    picks = quick_tune(ds, 20, profile=path, key="toy")
    loader = at.DataLoader(ds, 20, profile=path, key="toy", shuffle=True)
    assert type(loader) is torch.utils.data.DataLoader
    for k, v in picks[20].items():
        assert getattr(loader, k) == v, k
    assert sum(x.shape[0] for x, _ in loader) == 300
    # A second tune reuses the saved entry: no search runs.
    quick_tune(ds, 20, profile=path, key="toy")
    assert at.tune.last_report["runs"][0]["adapt_picked_by"] == "profile"
    # Another key has no entry: PyTorch's defaults, with a warning naming why.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = at.DataLoader(ds, 20, profile=path, key="other")
    assert other.num_workers == 0 and any("no entry" in str(w.message) for w in caught)
    with pytest.raises(adapt.ConfigValueError, match="no entry"):
        at.DataLoader(ds, 20, profile=path, key="other", strict=True)
