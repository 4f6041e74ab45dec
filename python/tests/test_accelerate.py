"""adapt's loader under Hugging Face Accelerate with 2 CPU processes under
torchrun, where accelerate is installed (CI has no torch: skipped, and said
so): `adapt.accelerate.prepare` gives each process its own share, the
shares cover the data, `save_state`/`load_state` resume the loader
exactly, and a loader reading everything is refused by name."""

import json
import os
import pathlib
import socket
import sys

import pytest
from conftest import run_job

pytest.importorskip("accelerate", reason="accelerate is not installed: not tested here")

JOB = pathlib.Path(__file__).parent / "accelerate_job.py"


def test_two_processes_read_their_shares_and_resume_exactly(cifar, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK")}
    with socket.socket() as s:  # a free port for the rendezvous (0 hangs torchrun)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = run_job([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                   f"--master_port={port}", str(JOB), str(cifar), str(tmp_path)], env)
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    a, b = ranks[0]["order"], ranks[1]["order"]
    assert not set(a) & set(b) and sorted(a + b) == list(range(600))
    for r in ranks:
        assert r["world"] == 2 and len(r["seen"]) == 6
        assert r["after"] == r["seen"][5:], "load_state resumed after the 5th batch"
        assert "process" in r["refused"] and 'distributed="auto"' in r["refused"]
    assert ranks[0]["seen"] != ranks[1]["seen"]


def test_the_readmes_accelerate_example_runs(cifar, tmp_path):
    from conftest import run_readme_example

    folder = run_readme_example("With Hugging Face Accelerate", tmp_path, cifar10=cifar)
    saved = list((folder / "checkpoint").iterdir())
    assert any("custom_checkpoint" in p.name for p in saved), saved
