"""Issue 15's benchmark: `cargo xtask tune --strategy both` repeated, then
the table of docs/benchmarks.md ("Honest tuning").

Each run writes its full report (trace included) as JSON; the summary reads
them back, so `--summarize` alone rebuilds the table from earlier runs.

    python3 benches/tune_honest.py --xtask target/release/xtask \\
        --dataset cifar10 --path DATA/cifar10 \\
        --transform "random_crop(32,padding=4),hflip,normalize(cifar10)" \\
        --batch-sizes 8,128,2048 --runs 3 --trial-seconds 0.5 \\
        --out docs/reports --tag cifar
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time


def run_one(args, batch, run):
    out = os.path.join(args.out, f"tune-honest-{args.tag}-b{batch}-run{run}.json")
    cmd = [
        args.xtask, "tune",
        "--dataset", args.dataset, "--path", args.path,
        "--strategy", "both", "--batch-size", str(batch),
        "--trial-seconds", str(args.trial_seconds),
        "--json", out,
    ]
    if args.transform:
        cmd += ["--transform", args.transform]
    if args.trial_samples:
        cmd += ["--trial-samples", str(args.trial_samples)]
    if args.final_samples:
        cmd += ["--final-samples", str(args.final_samples)]
    cmd += args.extra
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print(f"batch {batch} run {run}: {time.monotonic() - t:.0f} s -> {out}", file=sys.stderr)


def summarize(out, tag):
    rows = {}
    for f in sorted(glob.glob(os.path.join(out, f"tune-honest-{tag}-b*-run*.json"))):
        report = json.load(open(f))
        for r in report["runs"]:
            # The final comparison's length is sized by time, per run: compare
            # runs per epoch.
            r["final_epochs"] = report["final_epochs"]
            # Reports before issue 23 ran the paper's plain descent without
            # the race beside ADaPT, under the names plain / avl_plain.
            r.setdefault("other", r.get("plain"))
            r["search"].setdefault("avl_other", r["search"].get("avl_plain"))
            r.setdefault("other_avl", "plain, no race" if r.get("plain") else None)
            r["descent"] = report["strategy"]["avl"]
            rows.setdefault(r["batch_size"], []).append(r)
    print(
        "| batch | runs | noise (per run) | ADaPT / optimum (per run) | within 1 + noise |"
        " ADaPT s per epoch (per run) | run-to-run spread | grid / ADaPT search time (per run) |"
        " ADaPT trials | other AVL | other / optimum | other within 1 + noise |"
        " grid / other search time | other trials | grid trials | cheapest (per run) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for batch in sorted(rows):
        rs = rows[batch]
        noise = [r["noise"]["relative_spread"] if r.get("noise") else 0.0 for r in rs]
        ratio = [r["adapt_over_optimal"] for r in rs]
        met = sum(1 for q, n in zip(ratio, noise) if q <= 1 + n)
        wall = [r["search"]["grid_over_avl"] for r in rs]
        plain = [r["other"]["seconds"] / r["optimal"]["seconds"] for r in rs if r.get("other")]
        plain_met = sum(p <= 1 + n for p, n in zip(plain, noise))
        plain_wall = [
            r["search"]["grid"]["seconds"] / r["search"]["avl_other"]["seconds"]
            for r in rs
            if r["search"].get("avl_other")
        ]
        fmt = lambda v, p: ", ".join(f"{x:.{p}f}" for x in v)
        final = [r["adapt"]["seconds"] / r["final_epochs"] for r in rs]
        spread = (max(final) - min(final)) / statistics.median(final)
        knobs = lambda c: f"{c['num_workers']}w p{c['prefetch_factor']}" + (" pers" if c["persistent_workers"] else "")
        cheapest = [knobs(r["cheapest"]["config"]) for r in rs if r.get("cheapest")]
        print(
            f"| {batch} | {len(rs)} | {fmt([n * 100 for n in noise], 1)} % | {fmt(ratio, 2)} |"
            f" {met} of {len(rs)} | {fmt(final, 3)} | {spread * 100:.1f} % |"
            f" {fmt(wall, 1)} (median {statistics.median(wall):.1f}) |"
            f" {fmt([r['search']['avl']['trials'] for r in rs], 0)} |"
            f" {', '.join(sorted({str(r['other_avl']) for r in rs}))} | {fmt(plain, 2)} |"
            f" {plain_met} of {len(plain)} | {fmt(plain_wall, 1)} |"
            f" {fmt([r['search']['avl_other']['trials'] for r in rs if r['search'].get('avl_other')], 0)} |"
            f" {fmt([r['search']['grid']['trials'] for r in rs], 0)} | {'; '.join(cheapest)} |"
        )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--xtask", default="target/release/xtask")
    p.add_argument("--dataset", default="cifar10")
    p.add_argument("--path")
    p.add_argument("--transform")
    p.add_argument("--batch-sizes", default="8,128,2048")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--trial-seconds", type=float, default=0.5)
    p.add_argument("--trial-samples", type=int)
    p.add_argument("--final-samples", type=int, help="samples per epoch of the final comparison")
    p.add_argument("--out", default="docs/reports")
    p.add_argument("--tag", default="cifar")
    p.add_argument("--summarize", action="store_true", help="only print the table")
    p.add_argument("--first-run", type=int, default=1, help="number of the first run (to add runs)")
    p.add_argument("extra", nargs="*", help="more arguments for every `tune` (after --), e.g. --no-prune")
    args = p.parse_args()
    if not args.summarize:
        os.makedirs(args.out, exist_ok=True)
        for run in range(args.first_run, args.first_run + args.runs):
            for batch in (int(b) for b in args.batch_sizes.split(",")):
                run_one(args, batch, run)
    summarize(args.out, args.tag)


if __name__ == "__main__":
    main()
