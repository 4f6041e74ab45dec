"""Pack read rates and object storage figures (docs/benchmarks.md), in one run.

    cargo build --release -p xtask -p adapt-benches --bin xtask --bin s3-server
    python3 benches/packs.py --xtask target/release/xtask \
        --s3-server target/release/s3-server --data target/bench-data [--runs 3]

1. Codecs: the CelebA-like set (20,000 JPEGs, 178x218 cropped to 128x128) as
   loose files and as packs (raw pixels with zstd / lz4 / none, encoded
   bytes with none / zstd), one shuffled epoch at batch 128, 2 workers,
   f32 output, random access and streaming (buffer 1024). Each source is
   timed --runs times, alternating; medians of samples/s; ratios to loose.
2. Object storage: the raw (codec none) pack published to a real S3 server
   on 127.0.0.1 (s3s-fs, benches/src/bin/s3-server.rs) and streamed from it
   with a cold cache and a warm one (the next run, same cache folder), against
   the same pack streamed from local disk; peak RSS of each process
   (/usr/bin/time). The server's folder and the local pack share a disk and
   the page cache, so this measures the client path, not a network.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

KEY, SECRET = "adapt-test", "adapt-test-secret"


def sh(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return out.stdout, out.stderr


def timed(cmd, env=None, cpu=None):
    """(json lines, peak RSS in MiB) of a command under /usr/bin/time;
    `cpu`, a list, gets the process's user + system seconds."""
    out, err = sh(["/usr/bin/time", "-f", "maxrss=%M cpu=%U+%S", *cmd], env=env)
    rss = [l for l in err.splitlines() if l.startswith("maxrss=")]
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if not rss:
        return lines, float("nan")
    fields = dict(f.split("=") for f in rss[-1].split())
    if cpu is not None:
        u, s_ = fields["cpu"].split("+")
        cpu.append(float(u) + float(s_))
    return lines, int(fields["maxrss"]) / 1024


def proc_cpu(pid):
    """User + system seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def load_cmd(xtask, kind, path, extra=(), epochs=1):
    return [xtask, "load", "--dataset", kind, "--path", path, "--batch-size", "128",
            "--num-workers", "2", "--shuffle", "--no-digest", "--epochs", str(epochs), *extra]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xtask", required=True)
    ap.add_argument("--s3-server", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="append one JSON line of every figure here")
    a = ap.parse_args()
    x = a.xtask
    celeba = os.path.join(a.data, "celeba")
    if not os.path.isdir(celeba):
        sh([x, "gen", "--dataset", "celeba", "--out", celeba])
    packs = {}
    for name, args in {
        "raw-zstd": ["--codec", "zstd"],
        "raw-lz4": ["--codec", "lz4"],
        "raw-none": ["--codec", "none"],
        "encoded-none": ["--store", "encoded", "--codec", "none"],
        "encoded-zstd": ["--store", "encoded", "--codec", "zstd"],
    }.items():
        out = os.path.join(a.data, f"celeba-{name}")
        msg, _ = sh([x, "shard", "--dataset", "celeba", "--path", celeba, "--out", out, *args])
        packs[name] = out
        print(msg.strip(), file=sys.stderr)

    sources = [("loose", "celeba", celeba, [])]
    for name, path in packs.items():
        sources.append((f"{name} random", "pack", path, []))
        sources.append((f"{name} stream", "pack", path, ["--stream", "1024"]))
    rates = {s[0]: [] for s in sources}
    for _ in range(a.runs):
        for label, kind, path, extra in sources:
            lines, _ = timed(load_cmd(x, kind, path, extra))
            rates[label].append(lines[-1]["samples_per_s"])
    med = {k: statistics.median(v) for k, v in rates.items()}
    print("| source | samples/s (median) | vs loose |")
    print("|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:,.0f} | {v / med['loose']:.2f}x |")

    # Object storage.
    root = tempfile.mkdtemp(prefix="adapt-s3-")
    server = subprocess.Popen([a.s3_server, root, "bench"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    endpoint = server.stdout.readline().strip()
    env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
               AWS_REGION="us-east-1", AWS_ENDPOINT=endpoint)
    cache = tempfile.mkdtemp(prefix="adapt-cache-")
    url = "s3://bench/celeba-raw-none"
    try:
        msg, _ = sh([x, "shard", "--dataset", "celeba", "--path", celeba, "--out", url,
                     "--codec", "none", "--cache-dir", cache], env=env)
        print(msg.strip(), file=sys.stderr)
        remote_cold, remote_warm, local, rss_r, rss_l = [], [], [], [], []
        cpu_r, cpu_l, cpu_server = [], [], []
        for _ in range(a.runs):
            run_cache = os.path.join(cache, "run")
            shutil.rmtree(run_cache, ignore_errors=True)
            before = proc_cpu(server.pid)
            lines, rss = timed(load_cmd(x, "pack", url, ["--stream", "1024", "--cache-dir", run_cache]),
                               env=env, cpu=cpu_r)
            cpu_server.append(proc_cpu(server.pid) - before)
            remote_cold.append(lines[0]["samples_per_s"])
            lines, _ = timed(load_cmd(x, "pack", url, ["--stream", "1024", "--cache-dir", run_cache]),
                             env=env)
            remote_warm.append(lines[0]["samples_per_s"])
            rss_r.append(rss)
            lines, rss = timed(load_cmd(x, "pack", packs["raw-none"], ["--stream", "1024"]), cpu=cpu_l)
            local.append(lines[0]["samples_per_s"])
            rss_l.append(rss)
        m = {k: statistics.median(v) for k, v in
             dict(cold=remote_cold, warm=remote_warm, local=local, rss_r=rss_r, rss_l=rss_l,
                  cpu_r=cpu_r, cpu_l=cpu_l, cpu_s=cpu_server).items()}
        print()
        print("| raw pack (codec none), streaming | samples/s (median) | vs local | peak RSS |")
        print("|---|---|---|---|")
        print(f"| local disk | {m['local']:,.0f} | 1.00x | {m['rss_l']:.0f} MiB |")
        print(f"| S3 on 127.0.0.1, cold cache (epoch 0) | {m['cold']:,.0f} | {m['cold'] / m['local']:.2f}x | {m['rss_r']:.0f} MiB |")
        print(f"| S3 on 127.0.0.1, warm cache (next run) | {m['warm']:,.0f} | {m['warm'] / m['local']:.2f}x | |")
        print()
        print(f"CPU seconds per epoch: loader local {m['cpu_l']:.2f}, loader remote (cold) {m['cpu_r']:.2f}, "
              f"S3 server {m['cpu_s']:.2f}")
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(dict(codecs=rates, remote=dict(cold=remote_cold, warm=remote_warm,
                                   local=local, rss_remote_mib=rss_r, rss_local_mib=rss_l,
                                   cpu_remote=cpu_r, cpu_local=cpu_l, cpu_server=cpu_server))) + "\n")
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
