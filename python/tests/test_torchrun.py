"""adapt inside a real torchrun job (gloo on CPU), where torch is installed:
two ranks see disjoint shares covering each epoch, set_epoch changes the
order, a mid-epoch checkpoint survives a SIGKILLed rank (torchrun
--max-restarts 1 restarts the job, which delivers exactly the samples the
checkpoint had not covered), and the same checkpoint resumed on one rank
(elastic) delivers the rest of the epoch exactly once. The same job with
adapt.torch.DataLoader (torch's own loader) resumes its order by skipping
the checkpointed batches in its sampler."""

import json
import os
import shutil
import socket
import subprocess
import sys
from collections import Counter

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: not tested here")

from conftest import run_job, xtask_binary  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
N = 64  # one image per class: a label is a sample id


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("folder") / "images"
    subprocess.run([xtask_binary(), "gen", "--dataset", "imagefolder", "--out", str(out), "--count", str(N),
                    "--classes", str(N), "--size", "20x16"], check=True, capture_output=True)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(out, data, nproc, loader="adapt", kill_at=0):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=HERE)
    args = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
            "--max-restarts=1", "--master_addr=127.0.0.1", f"--master_port={free_port()}",
            os.path.join(HERE, "torchrun_job.py"), "--data", str(data), "--out", str(out),
            "--loader", loader, "--kill-at", str(kill_at)]
    done = run_job(args, env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def batches(out, rank):
    with open(out / f"rank-{rank}.jsonl") as f:
        return [json.loads(line) for line in f]


def covered(rows, ckpt_step):
    """The ids of the batches a checkpoint at global step `ckpt_step` covers."""
    return [i for r in rows if r["attempt"] == 0 and r["global_step"] <= ckpt_step for i in r["ids"]]


def check_restart(out, ckpt_step=3, kill_at=5):
    ranks = [batches(out, r) for r in (0, 1)]
    assert {r["attempt"] for r in ranks[1]} == {0, 1}, "rank 1 was killed and restarted"
    assert max(r["global_step"] for r in ranks[1] if r["attempt"] == 0) == kill_at - 1
    orders = {}
    for epoch in (0, 1):
        delivered = []
        for rows in ranks:
            before = covered([r for r in rows if r["epoch"] == epoch], ckpt_step) if epoch == 0 else []
            after = [i for r in rows if r["attempt"] == 1 and r["epoch"] == epoch for i in r["ids"]]
            assert not set(before) & set(after), f"epoch {epoch}: a checkpointed sample came again"
            delivered += before + after
        counts = Counter(delivered)
        assert sorted(counts) == list(range(N)) and set(counts.values()) == {1}, \
            f"epoch {epoch}: every sample exactly once over the two ranks"
        orders[epoch] = [i for r in ranks[0] if r["epoch"] == epoch and r["attempt"] == 1 for i in r["ids"]]
    shares = [{i for r in rows if r["epoch"] == 1 for i in r["ids"]} for rows in ranks]
    assert not shares[0] & shares[1] and len(shares[0] | shares[1]) == N, "disjoint covering shares"
    return orders


def test_a_killed_rank_restarts_and_resumes_exactly_then_resumes_elastically_on_one(folder, tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    torchrun(out, folder, 2, kill_at=5)
    check_restart(out)
    # The order changes with the epoch (set_epoch): epoch 0's and 1's first
    # batches on rank 0 differ.
    ranks = [batches(out, r) for r in (0, 1)]
    first = {e: next(r["ids"] for r in ranks[0] if r["epoch"] == e and r["step"] == 1) for e in (0, 1)}
    assert first[0] != first[1]

    # Elastic: the step-3 checkpoint resumed by one rank delivers the rest
    # of epoch 0 exactly once, then all of epoch 1.
    solo = tmp_path / "solo"
    solo.mkdir()
    shutil.copy(out / "ckpt-3.pt", solo / "ckpt-3.pt")
    (solo / "latest").write_text("ckpt-3.pt")
    torchrun(solo, folder, 1)
    rows = batches(solo, 0)
    assert {r["world"] for r in rows} == {1}
    done = covered([r for rs in ranks for r in rs if r["epoch"] == 0], 3)
    rest = [i for r in rows if r["epoch"] == 0 for i in r["ids"]]
    assert sorted(done + rest) == list(range(N)), "the rest of epoch 0, exactly once"
    assert sorted(i for r in rows if r["epoch"] == 1 for i in r["ids"]) == list(range(N))


def test_torchs_loader_through_adapt_torch_resumes_its_order_by_skipping(folder, tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    torchrun(out, folder, 2, loader="torch", kill_at=5)
    check_restart(out)
