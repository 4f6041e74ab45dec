"""adapt.DataLoader over the user's own Python datasets: PyTorch's
semantics, thread and process workers, zero-copy collation, per-sample
seeding, failures, resume (numpy and pillow only; torch's own pieces are in
test_torch.py)."""

import os
import signal
import time

import numpy as np
import pytest

import adapt

METHODS = ["thread", "process"]


class Squares:
    """Map-style: sample i is a 4×5×3 u8 image filled with i and the label i."""

    def __init__(self, n=23):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return np.full((4, 5, 3), i % 256, dtype=np.uint8), i


class Noisy(Squares):
    """Draws from adapt.sample_rng() and from numpy's global generator."""

    def __getitem__(self, i):
        img, label = super().__getitem__(i)
        noise = adapt.sample_rng().integers(0, 50, size=img.shape, dtype=np.uint8)
        return {"image": img + noise, "label": label, "jitter": float(np.random.rand())}


def collect(loader):
    return [(np.array(b[0]), np.array(b[1])) for b in loader]


def labels_of(loader):
    return [int(x) for b in loader for x in np.asarray(b[1])]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("workers", [0, 1, 2])
def test_batches_are_the_samples_stacked_in_sampler_order(method, workers):
    ds = Squares()
    loader = adapt.DataLoader(ds, batch_size=4, num_workers=workers, worker_method=method)
    batches = collect(loader)
    assert len(batches) == len(loader) == 6
    assert [int(x) for _, l in batches for x in l] == list(range(23))
    for imgs, labels in batches:
        assert imgs.shape == (len(labels), 4, 5, 3) and imgs.dtype == np.uint8
        assert all((imgs[j] == labels[j]).all() for j in range(len(labels)))


def test_shuffled_batches_are_identical_for_any_worker_count_and_method():
    def run(workers, method):
        loader = adapt.DataLoader(Noisy(), batch_size=5, shuffle=True, seed=7, num_workers=workers,
                                  worker_method=method)
        return [(np.asarray(b["image"]).tobytes(), b["label"].tolist()) for b in loader]

    want = run(0, "process")
    assert sorted(l for _, ls in want for l in ls) == list(range(23))
    for workers in (1, 2, 4):
        for method in METHODS:
            assert run(workers, method) == want, (workers, method)


def test_global_numpy_draws_are_reseeded_per_batch_or_sample_in_processes_and_inline():
    def jitter(workers, batch_size=5, **kw):
        loader = adapt.DataLoader(Noisy(), batch_size=batch_size, num_workers=workers,
                                  worker_method="process", **kw)
        return [x for b in loader for x in b["jitter"].tolist()]

    state = np.random.get_state()
    per_batch = jitter(0)
    assert per_batch == jitter(1) == jitter(2), "the same draws for any worker count"
    assert len(set(per_batch)) == len(per_batch), "every batch draws its own numbers"
    assert per_batch != jitter(0, seed=1) and per_batch != jitter(0, batch_size=4)
    per_sample = jitter(0, reseed_globals="sample")
    assert per_sample == jitter(2, reseed_globals="sample") == jitter(2, 3, reseed_globals="sample"), \
        "per sample: the same draws for any worker count and batch size"
    assert per_sample != per_batch
    assert (np.random.get_state()[1] == state[1]).all(), "the main process's generator is put back"
    np.random.seed(26)
    free = jitter(0, reseed_globals=False)
    np.random.seed(26)
    assert free == np.random.rand(23).tolist(), "False: the dataset draws from the caller's generator"
    with pytest.raises(adapt.ConfigValueError, match="reseed_globals='always'.*'batch'.*'sample'"):
        adapt.DataLoader(Noisy(), batch_size=5, reseed_globals="always")


def test_each_iteration_is_a_new_epoch_unless_set_epoch():
    loader = adapt.DataLoader(Squares(40), batch_size=8, shuffle=True, seed=1)
    first = next(iter(loader))[1].tolist()  # break out after one batch
    second = next(iter(loader))[1].tolist()
    assert first != second, "a new permutation on every iter(), as PyTorch"
    loader.set_epoch(0)
    assert next(iter(loader))[1].tolist() == first


@pytest.mark.parametrize("method", METHODS)
def test_fixed_shape_samples_are_written_into_pooled_buffers(method):
    loader = adapt.DataLoader(Squares(64), batch_size=8, num_workers=2, worker_method=method,
                              persistent_workers=True)
    counts = []
    for _ in range(3):
        for imgs, labels in loader:
            addr = np.asarray(imgs).__array_interface__["data"][0]
            bases = loader._backend._buffer_addresses()
            assert any(b <= addr < b + loader._backend._layout.nbytes for b in bases), "a view of a pooled buffer"
        counts.append(len(loader._backend._buffer_addresses()))
    # Released batches go back to the pool: the buffers are the ones in
    # flight (2 workers x prefetch 2), the batch handed out and the one the
    # loop variable still holds; none more per epoch.
    assert counts[0] == counts[2] <= 2 * 2 + 2, counts
    loader.close()


def test_structures_pil_images_and_strings():
    from PIL import Image

    class Mixed:
        def __len__(self):
            return 6

        def __getitem__(self, i):
            img = Image.fromarray(np.full((3, 2, 3), i, dtype=np.uint8))
            return {"img": img, "pair": (i, 0.5 * i)}

    b = next(iter(adapt.DataLoader(Mixed(), batch_size=3)))
    assert tuple(b["img"].shape) == (3, 3, 2, 3)
    assert b["pair"][0].tolist() == [0, 1, 2] and np.asarray(b["pair"][0]).dtype == np.int64
    assert np.asarray(b["pair"][1]).dtype == np.float64
    assert isinstance(b["pair"], list), "tuples collate to lists, as default_collate"

    class Named(Squares):
        def __getitem__(self, i):
            return f"name-{i}", i

    names, labels = next(iter(adapt.DataLoader(Named(), batch_size=2, num_workers=1)))
    names = list(names)
    assert names == ["name-0", "name-1"] and labels.tolist() == [0, 1]


@pytest.mark.parametrize("method", METHODS)
def test_collate_fn_sampler_and_batch_sampler_keep_pytorchs_meaning(method):
    def collate(samples):
        return sum(label for _, label in samples)

    got = list(adapt.DataLoader(Squares(), batch_size=5, collate_fn=collate, num_workers=2,
                                worker_method=method))
    assert got == [10, 35, 60, 85, 63]
    order = [3, 1, 4, 1, 5, 9, 2, 6]
    assert labels_of(adapt.DataLoader(Squares(), batch_size=3, sampler=order, num_workers=2,
                                      worker_method=method)) == order
    bs = [[0, 1], [5], [2, 3, 4]]
    got = [b[1].tolist() for b in adapt.DataLoader(Squares(), batch_sampler=bs, num_workers=1,
                                                    worker_method=method)]
    assert got == bs
    single = list(adapt.DataLoader(Squares(3), batch_size=None))
    assert [s[1] for s in single] == [0, 1, 2], "batch_size=None: samples one by one"


def test_refusals_name_the_argument_and_the_alternative():
    ds = Squares()
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        adapt.DataLoader(ds, sampler=[0, 1], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        adapt.DataLoader(ds, batch_sampler=[[0]], batch_size=4)
    with pytest.raises(ValueError, match="seed="):
        adapt.DataLoader(ds, generator=object())
    with pytest.raises(ValueError, match="pin_memory_device"):
        adapt.DataLoader(ds, pin_memory_device="cuda:1")

    class DistributedSampler(list):
        pass

    with pytest.raises(ValueError, match="distributed="):
        adapt.DataLoader(ds, sampler=DistributedSampler([0]))
    with pytest.raises(TypeError, match="num_workers option should be an integer, got str"):
        adapt.DataLoader(ds, num_workers="2")
    with pytest.raises(ValueError, match="disables auto-batching"):
        adapt.DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="collate_fn= with an adapt.datasets object"):
        adapt.DataLoader(adapt.datasets.CIFAR10("/nonexistent"), collate_fn=list)
    with pytest.raises(TypeError, match="not a callable"):
        adapt.DataLoader(adapt.datasets.CIFAR10("/nonexistent"), transform=lambda x: x)

    class Stream:
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        adapt.DataLoader(Stream(), shuffle=True)


def test_warnings_as_pytorch():
    with pytest.warns(UserWarning, match="no accelerator is found"):
        adapt.DataLoader(Squares(), pin_memory=True)
    with pytest.warns(UserWarning, match="excessive worker creation"):
        adapt.DataLoader(Squares(), num_workers=(os.cpu_count() or 1) + 1)


class Failing(Squares):
    def __getitem__(self, i):
        if i == 7:
            raise KeyError(f"no sample {i}")
        if i == 9:
            raise ZeroDivisionError("bad pixel")
        return super().__getitem__(i)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_sample_raises_its_own_type_with_index_and_traceback(method, workers):
    loader = adapt.DataLoader(Failing(), batch_size=4, num_workers=workers, worker_method=method)
    with pytest.raises(KeyError) as e:
        list(loader)
    assert e.value.index == 7
    text = str(e.value)
    assert "while loading index 7" in text and "Original Traceback" in text and "no sample 7" in text
    ordered = adapt.DataLoader(Failing(), batch_size=1, sampler=[9], num_workers=workers,
                               worker_method=method)
    with pytest.raises(ZeroDivisionError, match="index 9"):
        list(ordered)


class Killer(Squares):
    def __getitem__(self, i):
        if i == 5 and adapt.get_worker_info() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(i)


def test_a_killed_worker_process_is_a_worker_error_in_bounded_time():
    loader = adapt.DataLoader(Killer(), batch_size=2, num_workers=2, worker_method="process")
    t = time.monotonic()
    with pytest.raises(adapt.WorkerError, match="SIGKILL") as e:
        list(loader)
    assert time.monotonic() - t < 30
    assert "indices [4, 5]" in str(e.value)


def test_timeout_names_the_seconds():
    class Slow(Squares):
        def __getitem__(self, i):
            time.sleep(2)
            return super().__getitem__(i)

    loader = adapt.DataLoader(Slow(4), batch_size=2, num_workers=1, worker_method="thread", timeout=0.3)
    with pytest.raises(adapt.LoaderTimeout, match="0.3 seconds"):
        list(loader)


@pytest.mark.parametrize("method", METHODS)
def test_resume_mid_epoch_exactly_and_on_another_world_size(method):
    def make(**kw):
        return adapt.DataLoader(Noisy(), batch_size=3, shuffle=True, seed=5, num_workers=2,
                                worker_method=method, **kw)

    full = [b["label"].tolist() for b in make()]
    loader = make()
    it = iter(loader)
    head = [next(it)["label"].tolist() for _ in range(3)]
    state = loader.state_dict()
    del it
    again = make()
    again.load_state_dict(state)
    assert head + [b["label"].tolist() for b in again] == full
    # Elastic: the rest dealt across two ranks covers what was left, once.
    rest = []
    for rank in range(2):
        r = make(distributed=(rank, 2))
        r.load_state_dict(state)
        rest += [x for b in r for x in b["label"].tolist()]
    left = sorted(x for b in full[3:] for x in b)
    assert sorted(set(rest)) == left


def test_an_iterable_dataset_is_split_across_workers_and_ranks_once():
    class Shards:
        def __init__(self, rank, world):
            self.rank, self.world = rank, world

        def __iter__(self):
            info = adapt.get_worker_info()
            wid, nw = (info.id, info.num_workers) if info else (0, 1)
            for i in range(self.rank * nw + wid, 40, self.world * nw):
                yield np.full(2, i, dtype=np.int64)

    seen = []
    for method in METHODS:
        seen = []
        for rank in range(2):
            loader = adapt.DataLoader(Shards(rank, 2), batch_size=4, num_workers=2, worker_method=method,
                                      distributed=(rank, 2))
            seen += [int(x) for b in loader for x in np.asarray(b)[:, 0]]
        assert sorted(seen) == list(range(40)), method


def test_close_ends_the_workers_and_refuses_further_use():
    loader = adapt.DataLoader(Squares(), batch_size=4, num_workers=2, worker_method="process",
                              persistent_workers=True)
    list(loader)
    procs = list(loader._backend._pool.workers)
    loader.close()
    assert all(not p.is_alive() for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        iter(loader)


class CifarRecords:
    """The user's own reader of CIFAR-10's binary files (numpy), returning
    (HWC u8 image, label) and leaving the recipe to adapt's Rust steps."""

    def __init__(self, root):
        parts = [np.fromfile(root / f"data_batch_{k}.bin", dtype=np.uint8).reshape(-1, 3073)
                 for k in range(1, 6)]
        self.records = np.concatenate(parts)

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        r = self.records[i]
        return r[1:].reshape(3, 32, 32).transpose(1, 2, 0), int(r[0])


RECIPE = "random_crop(32,padding=4),hflip,normalize(cifar10)"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("output", ["f32", "u8-nhwc"])
def test_rust_steps_after_python_reading_give_adapts_own_batches(cifar, method, output):
    steps = RECIPE if output == "f32" else "random_crop(32,padding=4),hflip"
    ours = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=64, shuffle=True, seed=3,
                            transform=steps, output=output)
    theirs = adapt.DataLoader(CifarRecords(cifar), batch_size=64, shuffle=True, seed=3, num_workers=2,
                              worker_method=method, transform=steps, output=output)
    a, b = collect(ours), collect(theirs)
    assert len(a) == len(b) == len(theirs)
    for (ia, la), (ib, lb) in zip(a, b):
        assert ia.dtype == ib.dtype and ia.shape == ib.shape
        assert ia.tobytes() == ib.tobytes() and (la == lb).all()
    assert theirs.transforms == steps


def test_rust_steps_refuse_what_they_cannot_batch():
    with pytest.raises(TypeError, match="u8 image"):
        list(adapt.DataLoader([(np.zeros((4, 4, 3), np.float32), 0)], transform="hflip"))
    with pytest.raises(ValueError, match="collate_fn"):
        adapt.DataLoader(Squares(), transform="hflip", collate_fn=list)
    with pytest.raises(adapt.ConfigError, match="blur"):
        adapt.DataLoader(Squares(), transform="blur(3)")
    with pytest.raises(TypeError, match="in __getitem__"):
        adapt.DataLoader(Squares(), transform=lambda x: x)


@pytest.mark.parametrize("method", METHODS)
def test_a_sample_unlike_the_first_is_named(method):
    class Ragged(Squares):
        def __getitem__(self, i):
            img, label = super().__getitem__(i)
            return (img[:3] if i == 6 else img), label

    with pytest.raises(ValueError, match=r"sample 6: sample\[0\] has shape \(3, 5, 3\)") as e:
        list(adapt.DataLoader(Ragged(), batch_size=4, num_workers=1, worker_method=method))
    assert e.value.index == 6


def test_adapts_datasets_are_datasets(cifar, jpegs):
    ds = adapt.datasets.CIFAR10(cifar)
    records = CifarRecords(cifar)
    assert len(ds) == len(records) == 600
    image, label = ds[3]
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8 and 0 <= label < 10
    assert ds[-1][1] == ds[len(ds) - 1][1]
    with pytest.raises(IndexError):
        ds[600]
    assert len(ds.classes) == 10 and ds.class_to_idx[ds.classes[2]] == 2
    assert ds.targets[:5] == [ds[i][1] for i in range(5)]
    assert (image == records[3][0]).all() and label == records[3][1]
    loader = adapt.DataLoader(ds, batch_size=100)
    assert len(loader.dataset) == 600
    folder = adapt.datasets.ImageFolder(jpegs)
    assert len(folder.samples) == 24 and folder.samples[0][0].endswith(".JPEG")
    assert folder.targets == [t for _, t in folder.samples]
    with pytest.raises(ValueError, match="downloads nothing"):
        adapt.datasets.CIFAR10(cifar, download=True)


def write_torchvision_cifar(src, dst, protocol=2):
    """torchvision's cifar-10-batches-py layout (pickled dicts) from the
    binary fixture, by pickle and numpy themselves."""
    import pickle

    dst.mkdir()
    for k in range(1, 6):
        rec = np.fromfile(src / f"data_batch_{k}.bin", dtype=np.uint8).reshape(-1, 3073)
        with open(dst / f"data_batch_{k}", "wb") as f:
            pickle.dump({"batch_label": f"training batch {k} of 5", "labels": rec[:, 0].tolist(),
                         "data": rec[:, 1:].copy(), "filenames": [f"{i}.png" for i in range(len(rec))]},
                        f, protocol=protocol)
    rec = np.fromfile(src / "test_batch.bin", dtype=np.uint8).reshape(-1, 3073)
    with open(dst / "test_batch", "wb") as f:
        pickle.dump({"labels": rec[:, 0].tolist(), "data": rec[:, 1:].copy()}, f, protocol=protocol)
    names = (src / "batches.meta.txt").read_text().split()
    with open(dst / "batches.meta", "wb") as f:
        pickle.dump({"label_names": names, "num_cases_per_batch": 10000}, f, protocol=protocol)


class _Payload:
    """What a crafted batch file holds: unpickling calls os.system."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_torchvisions_cifar_pickles_are_read_at_any_protocol_in_rust(cifar, tmp_path, protocol):
    write_torchvision_cifar(cifar, tmp_path / "cifar-10-batches-py", protocol)
    ds, binary = adapt.datasets.CIFAR10(tmp_path), adapt.datasets.CIFAR10(cifar)
    assert len(ds) == len(binary) and ds.classes == binary.classes and ds.targets == binary.targets
    assert all((ds[i][0] == binary[i][0]).all() for i in (0, 7, len(ds) - 1))


def test_a_crafted_cifar_pickle_is_refused_and_runs_nothing(cifar, tmp_path):
    import pickle

    write_torchvision_cifar(cifar, tmp_path / "cifar-10-batches-py")
    marker = tmp_path / "ran"
    crafted = {"labels": [0], "data": _Payload(marker)}
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(pickle.dumps(crafted, protocol=2))
    with pytest.raises(Exception, match=r"data_batch_3.*global posix\.system"):
        len(adapt.datasets.CIFAR10(tmp_path))
    with pytest.raises(Exception, match="data_batch_3"):
        adapt.DataLoader(adapt.datasets.CIFAR10(tmp_path), batch_size=8)
    assert not marker.exists(), "the crafted pickle's code ran"
    # pickle.load, torchvision's reader, runs it (what the test guards against).
    pickle.loads((tmp_path / "cifar-10-batches-py" / "data_batch_3").read_bytes())
    assert marker.exists()


def test_cifar100_reads_as_pickle_and_numpy_wrote_it(tmp_path):
    import pickle

    rng = np.random.default_rng(3)
    root = tmp_path / "cifar-100-python"
    root.mkdir()
    data = {}
    for split, n in (("train", 40), ("test", 8)):
        data[split] = (rng.integers(0, 256, (n, 3072), dtype=np.uint8), rng.integers(0, 100, n).tolist())
        with open(root / split, "wb") as f:
            pickle.dump({"filenames": [f"{i}.png" for i in range(n)], "batch_label": split,
                         "fine_labels": data[split][1], "coarse_labels": [0] * n,
                         "data": data[split][0]}, f, protocol=2)
    names = [f"c{i}" for i in range(100)]
    with open(root / "meta", "wb") as f:
        pickle.dump({"fine_label_names": names, "coarse_label_names": ["x"] * 20}, f, protocol=2)
    for split, train in (("train", True), ("test", False)):
        ds = adapt.datasets.CIFAR100(tmp_path, train=train)
        images, labels = data[split]
        assert len(ds) == len(labels) and ds.targets == labels and ds.classes == names
        hwc = images.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        assert all((ds[i][0] == hwc[i]).all() and ds[i][1] == labels[i] for i in range(len(ds)))
    batch = next(iter(adapt.DataLoader(adapt.datasets.CIFAR100(tmp_path), batch_size=40)))
    mean = np.array([0.5071, 0.4865, 0.4409], dtype=np.float32).reshape(3, 1, 1)
    std = np.array([0.2673, 0.2564, 0.2762], dtype=np.float32).reshape(3, 1, 1)
    expected = (data["train"][0].reshape(-1, 3, 32, 32) / np.float32(255) - mean) / std
    assert np.allclose(batch[0], expected, atol=1e-5)


def test_no_code_reads_data_by_running_it():
    """The package never unpickles, evals or loads YAML or torch files
    unsafely: a tidy check over its source."""
    import ast
    import pathlib

    package = pathlib.Path(adapt.__file__).parent
    banned = {("pickle", "load"), ("pickle", "loads"), ("yaml", "load"), ("marshal", "loads")}
    found = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = (getattr(f.value, "id", None), f.attr) if isinstance(f, ast.Attribute) else (None, getattr(f, "id", None))
            keywords = {k.arg for k in node.keywords}
            if name in banned or name[1] in ("eval", "exec") and name[0] is None or (
                    name == ("torch", "load") and "weights_only" not in keywords):
                found.append(f"{path.name}:{node.lineno} {name[0]}.{name[1]}")
    assert not found, f"calls that can run code from data: {found}"


def test_torchvisions_cifar10_download_is_read_as_it_is(cifar, tmp_path):
    write_torchvision_cifar(cifar, tmp_path / "cifar-10-batches-py")
    ds = adapt.datasets.CIFAR10(tmp_path)
    binary = adapt.datasets.CIFAR10(cifar)
    assert len(ds) == len(binary) and ds.classes == binary.classes and ds.targets == binary.targets
    assert len(adapt.datasets.CIFAR10(tmp_path, train=False)) == len(adapt.datasets.CIFAR10(cifar, train=False))
    for transform in (None, RECIPE):
        a = collect(adapt.DataLoader(binary, batch_size=50, shuffle=True, seed=2, transform=transform))
        b = collect(adapt.DataLoader(ds, batch_size=50, shuffle=True, seed=2, transform=transform,
                                     num_workers=2))
        assert all(x[0].tobytes() == y[0].tobytes() and (x[1] == y[1]).all() for x, y in zip(a, b))
        assert len(a) == len(b)


def test_breaking_out_and_iterating_again_is_the_next_epoch_on_adapts_datasets_too(cifar):
    loader = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=16, shuffle=True, seed=1)
    first = next(iter(loader))[1].tolist()
    second = next(iter(loader))[1].tolist()
    assert first != second, "a new permutation on every iter(), as PyTorch"
    loader.set_epoch(0)
    assert next(iter(loader))[1].tolist() == first


def test_an_image_folder_of_mixed_png_modes_batches_at_the_size_the_reader_yields(tmp_path):
    """32x32 grey, grey+alpha, palette, RGBA and 16-bit PNGs beside RGB
    JPEGs: every one converts to 32x32 RGB, so no resize is needed."""
    from PIL import Image

    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)
    cls = tmp_path / "a"
    cls.mkdir()
    images = {
        "grey.png": Image.fromarray(rgb[..., 0], "L"),
        "grey_alpha.png": Image.fromarray(rgb[..., :2].copy(), "LA"),
        "palette.png": Image.fromarray(rgb).convert("P"),
        "rgba.png": Image.fromarray(np.dstack([rgb, rgb[..., :1]]), "RGBA"),
        "rgb.jpg": Image.fromarray(rgb),
    }
    for name, im in images.items():
        im.save(cls / name)
    Image.fromarray((rgb[..., 0].astype(np.uint16) * 257)).save(cls / "deep.png")
    ds = adapt.datasets.ImageFolder(tmp_path)
    loader = adapt.DataLoader(ds, batch_size=6, output="u8-nhwc", transform="hflip(p=0)")
    (batch, labels), = collect(loader)
    assert batch.shape == (6, 32, 32, 3)
    by_name = {os.path.basename(p): i for i, (p, _) in enumerate(ds.samples)}
    for name in ("grey.png", "grey_alpha.png", "palette.png", "rgba.png"):
        want = np.asarray(Image.open(cls / name).convert("RGB"))
        assert (batch[by_name[name]] == want).all(), name
    # A later image of another size is named where it is batched.
    Image.fromarray(rgb[:16]).save(cls / "zz_small.png")
    with pytest.raises(adapt.SampleError, match="zz_small.png"):
        list(adapt.DataLoader(adapt.datasets.ImageFolder(tmp_path), batch_size=7, output="u8-nhwc",
                              transform="hflip(p=0)"))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("workers", [0, 2])
def test_stats_time_the_users_getitem_and_collate_fn(method, workers):
    class Slow(Squares):
        def __getitem__(self, i):
            time.sleep(0.002)
            return super().__getitem__(i)

    def stack(samples):
        return np.stack([s[0] for s in samples]), [s[1] for s in samples]

    loader = adapt.DataLoader(Slow(), batch_size=4, num_workers=workers, worker_method=method,
                              collate_fn=stack)
    assert len(collect(loader)) == 6
    s = loader.stats()
    assert set(s["seconds"]) == {"__getitem__", "collate_fn"}, s
    assert s["seconds"]["__getitem__"] >= 23 * 0.002 * 0.9
    assert sum(w["samples"] for w in s["workers"]) == 23
    assert s["num_workers"] == workers
    assert s["verdict"].startswith("no workers") == (workers == 0), s["verdict"]
    it = adapt.DataLoader(Slow(), batch_size=4, num_workers=workers, worker_method=method)
    list(it)
    assert "collate" in it.stats()["seconds"]


class DictRows:
    """Rows as a Hugging Face dataset gives them: {"img": PIL-like array, "label": int}."""

    def __init__(self, n=10, extra=False, image_key="img"):
        rng = np.random.default_rng(3)
        self.images = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(n)]
        self.extra, self.image_key = extra, image_key

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        row = {self.image_key: self.images[i], "label": i % 4}
        if self.extra:
            row["file"] = f"{i}.png"
        return row


def test_transform_applies_to_the_image_field_of_dict_rows():
    ds = DictRows()
    loader = adapt.DataLoader(ds, batch_size=4, output="u8-nhwc", transform="hflip(p=1)")
    batches = list(loader)
    assert [sorted(b) for b in batches] == [["img", "label"]] * 3, "a dict batch, as default_collate"
    images = np.concatenate([np.asarray(b["img"]) for b in batches])
    labels = np.concatenate([np.asarray(b["label"]) for b in batches])
    assert np.array_equal(images, np.stack([a[:, ::-1] for a in ds.images]))
    assert labels.tolist() == [i % 4 for i in range(10)]
    f32 = next(iter(adapt.DataLoader(ds, batch_size=4, transform="normalize(mean=(0,0,0),std=(1,1,1))")))
    assert np.asarray(f32["img"]).shape == (4, 3, 6, 5)
    assert np.allclose(np.asarray(f32["img"])[0], ds.images[0].transpose(2, 0, 1) / 255.0)


def test_dict_rows_adapt_cannot_batch_are_refused_by_name():
    with pytest.raises(TypeError, match=r"select_columns\(\['img', 'label'\]\)"):
        list(adapt.DataLoader(DictRows(extra=True), batch_size=4, transform="hflip"))
    with pytest.raises(TypeError, match="needs an image field"):
        list(adapt.DataLoader(DictRows(image_key="pixels"), batch_size=4, transform="hflip"))
