"""The first epoch from a cold cache over HTTP, served by nginx on
127.0.0.1, against the same epoch from local files, alternated.

    cargo build --release -p xtask --features s3,parquet
    cargo xtask gen --dataset webdataset --count 5000 --size 178x218 --out DATA/wds
    cargo xtask gen --dataset parquet    --count 5000 --size 178x218 --out DATA/parquet
    cargo xtask pack --dataset webdataset --path DATA/wds --out DATA/pack --store encoded --shard-size 1000
    python3 benches/cold_http.py --xtask target/release/xtask --nginx /usr/sbin/nginx \\
        --wds DATA/wds --parquet DATA/parquet --pack DATA/pack [--runs 3]

nginx (Debian's, `sendfile on`, access log off) serves the folder holding
the layouts. Each run is one process, `load --epochs 1 --stream 2048`
(`sharded_read.load`'s knobs: batch 128, 2 workers, prefetch 2, shuffled,
the same transform), timed whole (start, open, epoch): locally, then by
URL into an empty cache folder (`ADAPT_CACHE_DIR`), so the cold run pays
every byte's fetch (WebDataset and Parquet: each file fetched whole at
open; the pack: its shards fetched ahead of the stream by range
requests). The ratio is local seconds over cold seconds (the rate
ratio); the CPU seconds (user + system, from wait4) are per GB of the
layout's files, local and cold.
"""
import argparse
import glob
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sharded_read import TRANSFORM  # noqa: E402

NGINX_CONF = """daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    types {{ application/octet-stream tar parquet bin json; }}
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx over `root` on a free port, for `with`."""

    def __init__(self, binary, root):
        self.prefix = tempfile.mkdtemp(prefix="adapt-nginx-")
        port = free_port()
        conf = os.path.join(self.prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(prefix=self.prefix, port=port, root=root))
        self.proc = subprocess.Popen([binary, "-c", conf, "-p", self.prefix])
        self.url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                return
            except OSError:
                time.sleep(0.05)
        sys.exit("nginx did not start")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.prefix, ignore_errors=True)


def run(xtask, kind, path, env):
    """One epoch in a process: (wall seconds, CPU seconds)."""
    cmd = [xtask, "load", "--dataset", kind, "--path", path, "--epochs", "1", "--no-digest",
           "--batch-size", "128", "--num-workers", "2", "--prefetch-factor", "2",
           "--shuffle", "--stream", "2048", "--transform", TRANSFORM]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status:
        sys.exit(f"{' '.join(cmd)}: {proc.stderr.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def layout_files(path, ext):
    return sorted(glob.glob(os.path.join(path, "**", "*" + ext), recursive=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xtask", required=True)
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--wds")
    ap.add_argument("--parquet")
    ap.add_argument("--pack")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    layouts = [(n, k, os.path.abspath(p), e) for n, k, p, e in
               (("webdataset", "webdataset", a.wds, ".tar"),
                ("parquet", "parquet", a.parquet, ".parquet"),
                ("pack", "pack", a.pack, "")) if p]
    root = os.path.commonpath([p for _, _, p, _ in layouts])
    cache = tempfile.mkdtemp(prefix="adapt-cold-cache-")
    with Nginx(a.nginx, root) as server:
        rows = {n: {"local": [], "cold": []} for n, _, _, _ in layouts}
        sizes = {}
        for _ in range(a.runs):
            for name, kind, path, ext in layouts:
                if ext:
                    files = layout_files(path, ext)
                    remote = "::".join(f"{server.url}/{os.path.relpath(f, root)}" for f in files)
                else:
                    files = [f for f in glob.glob(os.path.join(path, "**"), recursive=True)
                             if os.path.isfile(f)]
                    remote = f"{server.url}/{os.path.relpath(path, root)}"
                sizes[name] = sum(os.path.getsize(f) for f in files)
                rows[name]["local"].append(run(a.xtask, kind, path, dict(os.environ)))
                shutil.rmtree(cache, ignore_errors=True)
                os.makedirs(cache)
                rows[name]["cold"].append(run(a.xtask, kind, remote,
                                              dict(os.environ, ADAPT_CACHE_DIR=cache)))
    shutil.rmtree(cache, ignore_errors=True)
    for name, r in rows.items():
        gb = sizes[name] / 1e9
        ratios = [l[0] / c[0] for l, c in zip(r["local"], r["cold"])]
        local_s = statistics.median(w for w, _ in r["local"])
        cold_s = statistics.median(w for w, _ in r["cold"])
        local_cpu = statistics.median(c for _, c in r["local"]) / gb
        cold_cpu = statistics.median(c for _, c in r["cold"]) / gb
        print(f"{name}: {sizes[name] / 2**20:.1f} MiB; local {local_s:.2f} s, cold over HTTP "
              f"{cold_s:.2f} s: ratio {statistics.median(ratios):.3f} "
              f"(runs {', '.join(f'{x:.3f}' for x in ratios)}); CPU s per GB local "
              f"{local_cpu:.1f}, cold {cold_cpu:.1f}")


if __name__ == "__main__":
    main()
