"""What checking each JPEG's scans once costs (issue 26): `xtask load`
with the default (every loose JPEG's Huffman codes read on its first
decode in the process, remembered by its xxh3 after) against
ADAPT_STRICT_DECODE=0, alternated, one process per run; prints the median
seconds of each epoch and their ratio.

    cargo xtask gen --dataset celeba --count 4000 --out DATA/celeba
    python3 benches/strict_decode.py --xtask target/release/xtask \\
        --dataset celeba --path DATA/celeba --runs 5
    python3 benches/strict_decode.py ... --dataset imagefolder --path DATA/folder \\
        -- --transform "random_resized_crop(224),hflip,normalize(imagenet)"
"""

import argparse
import json
import os
import statistics
import subprocess


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--xtask", default="target/release/xtask")
    p.add_argument("--dataset", required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("extra", nargs="*", help="more `load` arguments (after --)")
    a = p.parse_args()
    seconds = {"1": [], "0": []}
    for _ in range(a.runs):
        for strict in ("1", "0"):
            out = subprocess.run(
                [a.xtask, "load", "--dataset", a.dataset, "--path", a.path, "--num-workers", "2",
                 "--epochs", str(a.epochs), "--no-digest", *a.extra],
                env={**os.environ, "ADAPT_STRICT_DECODE": strict},
                capture_output=True, text=True, check=True).stdout
            seconds[strict].append([json.loads(line)["seconds"] for line in out.splitlines()
                                    if line.startswith('{"batches"')])
    for e in range(a.epochs):
        on = statistics.median(r[e] for r in seconds["1"])
        off = statistics.median(r[e] for r in seconds["0"])
        print(f"epoch {e + 1}: checked {on:.3f} s, unchecked {off:.3f} s, ratio {on / off:.3f}")


if __name__ == "__main__":
    main()
