"""#26: the Python module under misuse, as users meet it: a loader used in
a forked child, two threads on one loader, an old iterator after a new
iter(), use after close(), a loader collected mid-epoch, another loader's
state. Each is a named error or works; none hangs."""

import gc
import os
import threading
import time

import numpy as np
import pytest

import adapt

from test_python_datasets import Squares

METHODS = ["thread", "process"]


def native(cifar, **kw):
    return adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=16, shuffle=True, **kw)


def python(method, **kw):
    return adapt.DataLoader(Squares(64), batch_size=4, num_workers=2, worker_method=method, **kw)


def loaders(cifar):
    yield "native", native(cifar, num_workers=2)
    for m in METHODS:
        yield m, python(m)


def in_fork(fn, timeout=60):
    """Runs `fn` in a forked child; returns what it wrote (the child's
    exception's text, or 'ok'), failing the test if the child hangs."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = f"{type(e).__name__}: {e}"
        os.write(w, out.encode()[:4000])
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung")
    with os.fdopen(r) as f:
        return f.read()


def test_a_forked_childs_copy_of_a_running_loader_is_refused_by_name(cifar):
    for name, loader in loaders(cifar):
        it = iter(loader)
        next(it)  # workers running, an epoch under way
        said = in_fork(lambda: str(sum(1 for _ in loader)))
        assert said.startswith("RuntimeError") and "a fork" in said and "spawn" in said, (name, said)
        said = in_fork(lambda: str(next(it)))
        assert "a fork" in said, (name, said)
        # The child closing its copy neither hangs nor touches the
        # parent's workers: the parent's epoch goes on.
        said = in_fork(lambda: (loader.close(), "ok")[1])
        assert said == "ok" or "a fork" in said, (name, said)
        assert sum(1 for _ in it) == len(loader) - 1, name
        loader.close()


def test_a_second_iter_supersedes_the_first_by_name(cifar):
    for name, loader in loaders(cifar):
        old = iter(loader)
        next(old)
        # An iterator starts its epoch at its first next(), as torch's reads
        # its sampler: until then the old one goes on.
        new = iter(loader)
        next(old)
        first = next(new)
        with pytest.raises(RuntimeError, match="superseded"):
            next(old)
        assert 1 + sum(1 for _ in new) == len(loader), name
        del first
        # Breaking out and iterating again is the next epoch, whole.
        for _ in loader:
            break
        assert sum(1 for _ in loader) == len(loader), name
        loader.close()


def test_two_threads_on_one_loader_get_a_named_error_never_a_hang(cifar):
    for name, loader in loaders(cifar):
        errors, counts = [], []

        def run():
            try:
                counts.append(sum(1 for _ in loader))
            except RuntimeError as e:
                errors.append(str(e))

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), f"{name}: a thread hung"
        for e in errors:
            assert "another thread" in e or "superseded" in e, (name, e)
        # Either one thread was refused, or they ran one after the other.
        assert len(errors) + len(counts) == 2 and all(c == len(loader) for c in counts), (name, errors, counts)
        assert sum(1 for _ in loader) == len(loader), f"{name}: usable after"
        loader.close()


def test_a_closed_loader_refuses_every_use(cifar):
    for name, loader in loaders(cifar):
        it = iter(loader)
        next(it)
        loader.close()
        loader.close()  # twice is nothing
        with pytest.raises(RuntimeError, match="closed"):
            iter(loader)
        with pytest.raises((RuntimeError, StopIteration)):
            # The interrupted epoch ends: a named error or its end, never a wait.
            next(it)


def task_count():
    return len(os.listdir("/proc/self/task"))


def settled_task_count():
    """The thread count once an earlier test's threads have ended: the same
    for half a second (a CI run once took its baseline while one was ending)."""
    gc.collect()
    deadline = time.monotonic() + 10
    count = task_count()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = task_count()
        if now == count:
            break
        count = now
    return count


@pytest.mark.parametrize("kind", ["native", "thread"])
def test_a_loader_collected_mid_epoch_ends_its_threads(cifar, kind):
    before = settled_task_count()
    for _ in range(3):
        loader = native(cifar, num_workers=3) if kind == "native" else python("thread")
        it = iter(loader)
        next(it)
        assert task_count() > before
        del it, loader
        gc.collect()
    deadline = time.monotonic() + 10
    while task_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    # At most the baseline: a thread of the process's own that ends meanwhile
    # is not a leak; one of the loaders' still running is.
    assert task_count() <= before, f"{task_count() - before} threads left"


def test_another_loaders_state_is_refused_at_load(cifar):
    a = native(cifar)
    it = iter(a)
    next(it)
    state = a.state_dict()
    other = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=8, shuffle=True)
    with pytest.raises(adapt.CheckpointError, match="batch"):
        other.load_state_dict(state)
    reseeded = adapt.DataLoader(adapt.datasets.CIFAR10(cifar), batch_size=16, shuffle=True, seed=5)
    with pytest.raises(adapt.CheckpointError, match="seed"):
        reseeded.load_state_dict(state)
    # Refused, the loader is as it was: its next epoch runs whole.
    assert sum(1 for _ in other) == len(other)
    mine = python("thread")
    with pytest.raises((adapt.CheckpointError, ValueError)):
        mine.load_state_dict(state)
    mine.close()


BLOCKED = """
import os, signal, sys, time, adapt, numpy as np
# A process started by a non-interactive shell inherits SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
fifo = sys.argv[2]

class Blocking:
    def __len__(self):
        return 16

    def __getitem__(self, i):
        if i == 5 and not os.environ.get("UNBLOCK"):
            with open(fifo) as f:  # blocks in I/O: the FIFO has no writer
                f.read()
        return np.full((4, 4, 3), i, dtype=np.uint8), i

loader = adapt.DataLoader(Blocking(), batch_size=2, num_workers=2, worker_method=sys.argv[1])
print("ready", flush=True)
try:
    for _ in loader:
        pass
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
os.environ["UNBLOCK"] = "1"
print("usable", sum(len(labels) for _, labels in loader), flush=True)
loader.close()
"""


@pytest.mark.parametrize("method", METHODS)
def test_ctrl_c_while_a_worker_is_blocked_in_io(tmp_path, method):
    import signal
    import subprocess
    import sys

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    p = subprocess.Popen([sys.executable, "-c", BLOCKED, method, str(fifo)], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(2.0)  # the worker on sample 5 is blocked in open()
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        line = p.stdout.readline().split()
        assert line and line[0] == "interrupted", line
        assert float(line[1]) - sent < 1.0, "Ctrl-C took effect within a second"
        assert p.stdout.readline().split() == ["usable", "16"], "the loader stays usable"
        assert p.wait(timeout=30) == 0, "the process exits, the blocked worker with it"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # No worker outlives it: with a reader left, a writer's open would succeed.
    time.sleep(0.2)
    with pytest.raises(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
