"""Issue 23's benchmark: ADaPT over PyTorch's own DataLoader, in the
training process (`adapt.torch.tune`), against the grid and against
`cargo xtask tune --command` on the same workload.

Not a project dependency: run it where torch, torchvision and the adapt
wheel are installed. Two workloads, each with a small CNN's training step
(forward, backward, SGD; one intra-op thread, the GPU's stand-in on a
CPU-only machine) on every batch:

    cifar:  torchvision's CIFAR train recipe (RandomCrop(32, padding=4),
            RandomHorizontalFlip, ToTensor, Normalize) over CIFAR-10's
            binary batches, a PIL image per sample (benches/torch/recipes.py)
    folder: torchvision.datasets.ImageFolder of JPEGs (PIL decoding),
            RandomResizedCrop(64), RandomHorizontalFlip, ToTensor, Normalize

Per run, interleaved: (1) `adapt.torch.tune(strategy="both")` — the AVL
search, the other descent, the grid, and the final comparison in one
process; (2) `xtask tune --command` running this script's `--trial` mode
(a fresh interpreter per trial, the same subset, epochs and step) with the
AVL search. Every report is written as JSON under --out; `--summarize`
rebuilds the table from them.

    python benches/torch/tune_torch.py --workload cifar --path DATA/cifar10 \\
        --batch 128 --runs 3 --xtask target/release/xtask --out docs/reports/tune-torch
"""

import argparse
import glob
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import time

import torch
from torchvision import datasets, transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recipes import CIFAR_MEAN, CIFAR_STD, IMAGENET_MEAN, IMAGENET_STD, Cifar10Bin  # noqa: E402

METRIC = r"trial-seconds: ([0-9.]+)"


def workload(name, path):
    if name == "cifar":
        t = transforms.Compose([
            transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(),
            transforms.ToTensor(), transforms.Normalize(CIFAR_MEAN, CIFAR_STD)])
        return Cifar10Bin(path, t)
    if name == "folder":
        t = transforms.Compose([
            transforms.RandomResizedCrop(64), transforms.RandomHorizontalFlip(),
            transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
        return datasets.ImageFolder(path, t)
    raise SystemExit(f"unknown workload {name}")


class Step:
    """A small CNN's training step on every batch."""

    def __init__(self, classes=10):
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, classes))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def __call__(self, batch):
        images, labels = batch
        self.opt.zero_grad()
        torch.nn.functional.cross_entropy(self.model(images), labels).backward()
        self.opt.step()


def trial(a):
    """One `--command` trial: the trial adapt.torch.tune runs (the same
    seeded subset, shuffle, epochs and step), timed from the loader's
    creation to the end of its last epoch."""
    torch.set_num_threads(1)
    ds, step = workload(a.workload, a.path), Step()
    kwargs = json.loads(a.trial)
    indices = random.Random(a.seed).sample(range(len(ds)), min(a.samples, len(ds)))
    g = torch.Generator()
    g.manual_seed(a.seed)
    start = time.perf_counter()
    loader = torch.utils.data.DataLoader(torch.utils.data.Subset(ds, indices), batch_size=a.batch,
                                         shuffle=True, generator=g, **kwargs)
    for _ in range(a.epochs):
        for batch in loader:
            step(batch)
    del loader
    print(f"trial-seconds: {time.perf_counter() - start:.6f}", flush=True)


def run_in_process(a, run):
    import adapt.torch as at
    torch.set_num_threads(1)
    ds = workload(a.workload, a.path)
    t = time.monotonic()
    at.tune(ds, a.batch, step=Step(), strategy="both", trial_seconds=a.trial_seconds,
            trial_samples=a.trial_samples, seed=run, progress=False)
    wall = time.monotonic() - t
    report = dict(at.tune.last_report, bench_wall_seconds=wall)
    path = os.path.join(a.out, f"tune-torch-{a.workload}-b{a.batch}-run{run}-inprocess.json")
    with open(path, "w") as f:
        json.dump(report, f)
    return report


def run_command(a, run, samples, epochs):
    me = os.path.abspath(__file__)
    cmd = (f"{shlex.quote(sys.executable)} {shlex.quote(me)} --workload {a.workload} "
           f"--path {shlex.quote(a.path)} --batch {a.batch} --samples {samples} "
           f"--epochs {epochs} --seed {run} --trial '{{kwargs}}'")
    path = os.path.join(a.out, f"tune-torch-{a.workload}-b{a.batch}-run{run}-command.json")
    t = time.monotonic()
    subprocess.run([a.xtask, "tune", "--command", cmd, "--metric", METRIC, "--batch-size",
                    str(a.batch), "--strategy", "avl", "--json", path], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t
    with open(path) as f:
        report = json.load(f)
    report["bench_wall_seconds"] = wall
    with open(path, "w") as f:
        json.dump(report, f)
    return report


def key(config):
    return tuple(config[k] for k in ("num_workers", "prefetch_factor", "pin_memory",
                                     "persistent_workers"))


def summarize(a):
    rows = []
    for ip in sorted(glob.glob(os.path.join(a.out, f"tune-torch-{a.workload}-b*-inprocess.json"))):
        cp = ip.replace("-inprocess.json", "-command.json")
        with open(ip) as f:
            r = json.load(f)
        c = None
        if os.path.exists(cp):
            with open(cp) as f:
                c = json.load(f)
        run = r["runs"][0]
        noise = run["noise"]["relative_spread"]
        grid = {key(g["config"]): g["seconds"] for g in run["grid"]}
        row = dict(
            run=os.path.basename(ip),
            noise=noise,
            adapt_over_opt=run["adapt_over_optimal"],
            within=run["adapt_over_optimal"] <= 1 + noise,
            other=run.get("other_avl"),
            other_over_opt=run["other"]["seconds"] / run["optimal"]["seconds"],
            grid_over_avl=run["search"]["grid"]["seconds"] / run["search"]["avl"]["seconds"],
            grid_over_other=run["search"]["grid"]["seconds"] / run["search"]["avl_other"]["seconds"],
            avl_trials=run["search"]["avl"]["trials"],
            other_trials=run["search"]["avl_other"]["trials"],
            grid_trials=run["search"]["grid"]["trials"],
            avl_seconds=run["search"]["avl"]["seconds"],
            pick=run["adapt"]["config"],
            optimum=run["optimal"]["config"],
        )
        if c is not None:
            crun = c["runs"][0]
            cpick = key(crun["adapt"]["config"])
            row.update(
                command_search_over_avl=crun["search"]["avl"]["seconds"] / row["avl_seconds"],
                command_wall=c["bench_wall_seconds"],
                inprocess_wall=r["bench_wall_seconds"],
                command_pick=crun["adapt"]["config"],
                # The command's pick, timed in the in-process grid, against
                # the in-process pick's grid time.
                command_pick_in_grid=grid.get(cpick, float("nan")) / grid[key(run["adapt"]["config"])],
            )
        rows.append(row)
    for row in rows:
        print(json.dumps(row))
    if rows:
        med = lambda k: statistics.median(r[k] for r in rows if k in r)
        print(json.dumps({"median_" + k: med(k) for k in (
            "adapt_over_opt", "other_over_opt", "grid_over_avl", "grid_over_other",
            "command_search_over_avl") if any(k in r for r in rows)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True, choices=("cifar", "folder"))
    ap.add_argument("--path", required=True)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trial-seconds", type=float, default=0.5)
    ap.add_argument("--trial-samples", type=int, default=4096)
    ap.add_argument("--xtask", default="target/release/xtask")
    ap.add_argument("--out", default="docs/reports/tune-torch")
    ap.add_argument("--summarize", action="store_true")
    ap.add_argument("--no-command", action="store_true", help="skip the --command runs")
    # --trial mode (what xtask tune --command runs)
    ap.add_argument("--trial")
    ap.add_argument("--samples", type=int)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.trial is not None:
        return trial(a)
    os.makedirs(a.out, exist_ok=True)
    if not a.summarize:
        for run in range(1, a.runs + 1):
            r = run_in_process(a, run)
            t = r["runs"][0]["trial"]
            print(f"run {run} in process: {r['bench_wall_seconds']:.0f} s", file=sys.stderr)
            if not a.no_command:
                c = run_command(a, run, t["samples"], t["epochs"])
                print(f"run {run} --command: {c['bench_wall_seconds']:.0f} s", file=sys.stderr)
    summarize(a)


if __name__ == "__main__":
    main()
