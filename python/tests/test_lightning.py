"""adapt's loader under PyTorch Lightning, where Lightning is installed (CI
has no torch: skipped, and said so): epochs follow the trainer (3 epochs,
3 orders, each the loader's own epoch), a resume from an epoch's end or
from mid-epoch goes on exactly as the uninterrupted run, and under
`devices=2, strategy="ddp"` the ranks read disjoint shares that cover the
data (`distributed="auto"`), or are warned that they do not."""

import json
import os
import pathlib
import sys

import pytest
from conftest import run_job

L = pytest.importorskip("lightning", reason="lightning is not installed: trainer runs not tested here")

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import lightning_job as job  # noqa: E402


def reference(cifar, epochs, **kw):
    """[(epoch, digest)] of each batch, from the loader alone."""
    loader = job.loader(cifar, **kw)
    out = []
    for e in range(epochs):
        loader.set_epoch(e)
        out += [(e, job.digest(images)) for images, _ in loader]
    return out


def fit(cifar, out, epochs, ckpt_path=None, crash_at=None, callbacks=()):
    net = job.Net(cifar, crash_at=crash_at)
    try:
        job.trainer(out, epochs, callbacks).fit(net, ckpt_path=ckpt_path)
    except job.Crash:
        pass
    return [tuple(s) for s in net.seen]


def test_epochs_follow_the_trainer_and_resume_exactly(cifar, tmp_path):
    want = reference(cifar, 3)
    assert len({d for e, d in want if e == 0} & {d for e, d in want if e == 1}) == 0
    per_epoch = len(want) // 3
    every_epoch = L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "ends", save_top_k=-1,
                                                      every_n_epochs=1)
    assert fit(cifar, tmp_path, 3, callbacks=[every_epoch]) == want, "3 epochs, the loader's 3 orders"
    # From the end of epoch 0: epochs 1 and 2 as the uninterrupted run.
    end0 = next((tmp_path / "ends").glob("epoch=0-*.ckpt"))
    assert fit(cifar, tmp_path, 3, ckpt_path=end0) == want[per_epoch:]
    # Killed mid-epoch 1 after a checkpoint at step 15: the rest exactly.
    steps = L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "steps", save_top_k=-1,
                                                every_n_train_steps=15)
    crashed = fit(cifar, tmp_path, 3, crash_at=19, callbacks=[steps])
    assert crashed == want[:19]
    mid = tmp_path / "steps" / "epoch=1-step=15.ckpt"
    assert fit(cifar, tmp_path, 3, ckpt_path=mid) == want[15:]


@pytest.mark.parametrize("mode", ["auto", "default"])
def test_ddp_ranks_read_disjoint_shares_or_are_warned(cifar, tmp_path, mode):
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(job.__file__).parent)}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK"):
        env.pop(k, None)
    run = run_job([sys.executable, job.__file__, str(cifar), str(tmp_path), mode], env)
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    if mode == "default":
        # Every rank reads everything, as torch's loader would, and is told.
        for r in ranks:
            assert any('distributed="auto"' in w for w in r["warnings"]), r["warnings"]
        assert ranks[0]["seen"] == ranks[1]["seen"]
        return
    for e in range(2):
        a, b = ranks[0]["orders"][e], ranks[1]["orders"][e]
        assert not set(a) & set(b) and sorted(a + b) == list(range(600)), f"epoch {e}"
    assert ranks[0]["orders"][0] != ranks[0]["orders"][1], "set_epoch reached the ranks"
    for r, got in enumerate(ranks):
        assert not got["warnings"], got["warnings"]
        want = reference(cifar, 2, distributed=(r, 2))
        assert [tuple(s) for s in got["seen"]] == want, f"rank {r}: the batches of its share"


def test_the_readmes_lightning_example_runs(cifar, tmp_path):
    from conftest import run_readme_example

    run_readme_example("With PyTorch Lightning", tmp_path, cifar10=cifar)
