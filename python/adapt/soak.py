"""``python -m adapt.soak --seconds N``: the soak from Python.

Epochs for a given time over a seeded mix of `adapt.DataLoader`s: adapt's
own datasets (a CIFAR-10 folder, a pack read at random or streamed, three
pipelines) and a Python dataset with a random transform (thread and
process workers), with the knobs (`num_workers`, `prefetch_factor`,
`persistent_workers`) drawn per epoch, checkpoints taken at random batches
and resumed by a new loader with other knobs, and epochs broken out of and
run again. It checks as it goes: every epoch's digest equals the epoch read
with no workers; resident memory, threads, open descriptors and child
processes come back to their baseline after every epoch. It prints one
JSON line and exits non-zero on a mismatch, an error, or growth past the
margins. (`cargo xtask soak` is the same over the Rust API, with object
storage faults.)
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time

import numpy as np

import adapt

#: Resident memory may end an epoch this far above its baseline.
RSS_MARGIN = 128 << 20
#: Threads, descriptors and child processes must come back to their
#: baseline within SETTLE seconds after an epoch.
SETTLE = 5.0

PIPELINES = [
    (None, "f32"),
    ("random_crop(32,padding=4),hflip,normalize(cifar10)", "f32"),
    ("random_resized_crop(16),hflip", "u8"),
]


class NoisySquares:
    """A map-style Python dataset: an 8x8 image per index, with noise drawn
    from `adapt.sample_rng()` (the same for any worker count)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        rng = adapt.sample_rng()
        image = np.full((8, 8, 3), i % 251, dtype=np.uint8)
        image[0, 0, 0] = rng.integers(0, 256)
        return image, i % 10


def _usage():
    """(resident bytes, threads, descriptors, child processes) now."""
    rss = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) << 10
    threads = len(os.listdir("/proc/self/task"))
    fds = len(os.listdir("/proc/self/fd"))
    children = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/children") as f:
                children += len(f.read().split())
        except OSError:
            pass
    return rss, threads, fds, children


def _children():
    """The command lines of this process's children."""
    out = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/children") as f:
                pids = f.read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    out.append(f.read().replace(b"\0", b" ").decode(errors="replace")[:120])
            except OSError:
                out.append(pid)
    return out


def _thread_names():
    """The kernel's names of this process's threads, counted (a thread left
    behind is named here)."""
    names = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        names[name] = names.get(name, 0) + 1
    return dict(sorted(names.items()))


def _settled(baseline):
    """The usage once the last epoch's threads, descriptors and workers are
    gone (waiting up to SETTLE seconds for them)."""
    deadline = time.monotonic() + SETTLE
    while True:
        u = _usage()
        if baseline is None or all(a <= b for a, b in zip(u[1:], baseline[1:])):
            return u
        if time.monotonic() >= deadline:
            return u
        time.sleep(0.02)


def _digest(batches):
    h = hashlib.sha256()
    for images, labels in batches:
        h.update(np.ascontiguousarray(np.asarray(images)).tobytes())
        h.update(np.asarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()


class _Soak:
    def __init__(self, root, seed):
        self.root = root
        self.mix = random.Random(seed)
        self.references = {}
        self.report = {"epochs": 0, "resumes": 0, "breaks": 0, "digest_mismatches": 0,
                       "errors": 0}
        cifar = os.path.join(root, "cifar10")
        if not os.path.exists(os.path.join(cifar, "data_batch_1.bin")):
            self._cli(["gen", "--dataset", "cifar10", "--out", cifar, "--count", "640"])
        pack = os.path.join(root, "pack")
        if not os.path.exists(os.path.join(pack, "manifest.json")):
            self._cli(["pack", "--dataset", "cifar10", "--path", cifar, "--out", pack,
                       "--shard-size", "128"])
        self.cifar, self.pack = cifar, pack

    @staticmethod
    def _cli(args):
        from adapt.__main__ import main

        status = main(args)
        if status:
            raise RuntimeError(f"adapt {' '.join(args)} exited with {status}")

    def plan(self):
        m = self.mix
        source = m.choice(["folder", "pack", "stream", "python"])
        workers = m.randrange(4)
        return {
            "source": source,
            "pipeline": m.randrange(len(PIPELINES)),
            "epoch": m.randrange(3),
            "knobs": self._knobs(workers),
            "method": m.choice(["thread", "process"]),
            "resume": m.randrange(20) if m.random() < 0.4 else None,
            "resume_knobs": self._knobs(m.randrange(4)),
            "break": m.randrange(20) if m.random() < 0.2 else None,
        }

    def _knobs(self, workers):
        m = self.mix
        k = {"num_workers": workers}
        if workers:
            k["prefetch_factor"] = 1 + m.randrange(4)
            k["persistent_workers"] = m.random() < 0.5
        return k

    def loader(self, plan, knobs):
        common = {"batch_size": 32, "shuffle": True, "seed": 5, **knobs}
        if plan["source"] == "python":
            if knobs["num_workers"]:
                common["worker_method"] = plan["method"]
            return adapt.DataLoader(NoisySquares(300), **common)
        transform, output = PIPELINES[plan["pipeline"]]
        if plan["source"] == "folder":
            dataset = adapt.datasets.CIFAR10(self.cifar)
        else:
            dataset = adapt.datasets.Pack(self.pack)
        if plan["source"] == "stream":
            common["stream"] = 96
        return adapt.DataLoader(dataset, transform=transform, output=output, **common)

    def reference(self, plan):
        key = (plan["source"], plan["pipeline"] if plan["source"] != "python" else 0,
               plan["epoch"])
        if key not in self.references:
            loader = self.loader(plan, {"num_workers": 0})
            loader.set_epoch(plan["epoch"])
            self.references[key] = _digest(loader)
            loader.close()
        return self.references[key]

    def epoch(self, plan):
        """Runs one planned epoch; returns its digest."""
        loader = self.loader(plan, plan["knobs"])
        if plan["break"] is not None:
            # An epoch broken out of, then run again from its start.
            loader.set_epoch(plan["epoch"])
            for n, _ in enumerate(loader):
                if n >= plan["break"]:
                    break
            self.report["breaks"] += 1
        loader.set_epoch(plan["epoch"])
        out = []
        for n, batch in enumerate(loader):
            if n == plan["resume"]:
                state = loader.state_dict()
                loader.close()
                loader = self.loader(plan, plan["resume_knobs"])
                loader.load_state_dict(state)
                self.report["resumes"] += 1
                out.append(batch)
                out.extend(loader)
                break
            out.append(batch)
        loader.close()
        return _digest(out)


def run(seconds=120, seed=1, root=None):
    """Runs the soak for `seconds`; returns its report (a dict)."""
    made = root is None
    root = tempfile.mkdtemp(prefix="adapt-soak-") if made else root
    try:
        soak = _Soak(root, seed)
        # A warm-up round over every kind of loader, so the baseline holds
        # what stays for the whole process (multiprocessing's resource
        # tracker and its pipe, the allocator's arenas).
        workers = {"num_workers": 2, "prefetch_factor": 2, "persistent_workers": False}
        for source, method in [("folder", "thread"), ("stream", "thread"),
                               ("python", "thread"), ("python", "process")]:
            plan = dict(soak.plan(), source=source, method=method, knobs=workers, resume=None,
                        **{"break": None})
            soak.epoch(plan)
        baseline = _settled(None)
        most = baseline
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            plan = soak.plan()
            want = soak.reference(plan)
            try:
                got = soak.epoch(plan)
            except Exception as e:  # noqa: BLE001 - counted and reported
                soak.report["errors"] += 1
                print(f"error in {plan}: {type(e).__name__}: {e}", file=sys.stderr)
                got = None
            soak.report["epochs"] += 1
            if got is not None and got != want:
                soak.report["digest_mismatches"] += 1
                print(f"digest mismatch: {plan}", file=sys.stderr)
            now = _settled(baseline)
            if any(a > b for a, b in zip(now[1:], baseline[1:])):
                print(f"after {plan}: {now} (baseline {baseline}); children: {_children()}; "
                      f"threads: {_thread_names()}", file=sys.stderr)
            most = tuple(max(a, b) for a, b in zip(most, now))
        r = soak.report
        r["seconds"] = round(time.monotonic() - started, 1)
        r["rss_growth_bytes"] = most[0] - baseline[0]
        r["threads_growth"] = most[1] - baseline[1]
        r["fds_growth"] = most[2] - baseline[2]
        r["children_growth"] = most[3] - baseline[3]
        r["failed"] = bool(r["digest_mismatches"] or r["errors"]
                           or r["rss_growth_bytes"] > RSS_MARGIN or r["threads_growth"]
                           or r["fds_growth"] or r["children_growth"])
        return r
    finally:
        if made:
            shutil.rmtree(root, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m adapt.soak", description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dir", default=None, help="where the data goes (a temporary folder)")
    a = p.parse_args(argv)
    report = run(a.seconds, a.seed, a.dir)
    print(json.dumps(report, sort_keys=True))
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
