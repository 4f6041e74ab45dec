"""Shared fixtures: small datasets in the real layouts, written by `cargo
xtask gen` (the binary the workspace tests build), and the xtask itself for
byte-for-byte comparisons."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def xtask_binary():
    path = os.environ.get("ADAPT_XTASK")
    if path:
        return path
    for profile in ("debug", "release"):
        candidate = ROOT / "target" / profile / "xtask"
        if candidate.exists():
            return str(candidate)
    subprocess.run(["cargo", "build", "-q", "-p", "xtask"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "debug" / "xtask")


@pytest.fixture(scope="session")
def xtask():
    return xtask_binary()


@pytest.fixture(scope="session")
def cifar(tmp_path_factory, xtask):
    d = tmp_path_factory.mktemp("cifar10")
    subprocess.run([xtask, "gen", "--dataset", "cifar10", "--count", "600", "--out", str(d)],
                   check=True, capture_output=True)
    return d


@pytest.fixture(scope="session")
def jpegs(tmp_path_factory, xtask):
    d = tmp_path_factory.mktemp("jpegs")
    subprocess.run([xtask, "gen", "--dataset", "imagefolder", "--count", "24", "--classes", "3",
                    "--size", "96x72", "--out", str(d)], check=True, capture_output=True)
    return d


@pytest.fixture
def http_folder(tmp_path, monkeypatch):
    """`serve(folder)` -> its URL on Python's own `http.server` on
    127.0.0.1 (which answers no Range: adapt fetches each file whole), with
    a fresh cache folder; stopped after the test, or by `serve.stop()`."""
    import functools
    import http.server
    import threading

    servers = []

    def serve(folder):
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        handler = functools.partial(Quiet, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}"

    def stop():
        while servers:
            server, thread = servers.pop()
            server.shutdown()
            server.server_close()
            thread.join()

    serve.stop = stop
    monkeypatch.setenv("ADAPT_CACHE_DIR", str(tmp_path / "cache"))
    yield serve
    stop()


def run_job(args, env, timeout=300):
    """Runs a launcher (torchrun, a Lightning DDP script) in its own process
    group, bounded: on expiry the whole group (its ranks included) is
    killed and the test fails saying so. Returns the CompletedProcess."""
    import signal

    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{args[:4]} ran past {timeout} s (killed with its ranks): {err[-2000:]}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def readme_example(heading):
    """The first ```python block under the README's `### {heading}`."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"### {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def run_readme_example(heading, tmp_path, **data):
    """Runs that block as `python train.py` in a folder whose
    `datasets/NAME` is each `NAME=folder` given (the test's data); fails
    with its output."""
    import sys

    (tmp_path / "datasets").mkdir()
    for name, folder in data.items():
        (tmp_path / "datasets" / name).symlink_to(folder)
    script = tmp_path / "train.py"
    script.write_text(readme_example(heading))
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK")}
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        import signal

        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    assert proc.returncode == 0, f"README's {heading} example: {err[-3000:]}"
    return tmp_path
