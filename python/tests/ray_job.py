"""Reads an image folder through adapt.ray on a real local Ray cluster of
two nodes (a 1-CPU head and a 1-CPU worker node on 127.0.0.1, started and
stopped here), for test_ray.py:

    python ray_job.py DATA OUT.json

OUT.json holds, per row of the Ray Dataset, its sample index, label and a
digest of its pixels, the node that read its block, and the same for
adapt's own loader over the same epoch; then the labels and f32 digests of
adapt.DataLoader fed from the Ray stream (`normalize` in adapt's steps),
whole and as two `streaming_split` shares read at once, against adapt's
own f32 batches."""

import threading

import hashlib
import json
import sys

import numpy as np
import ray
from ray.cluster_utils import Cluster

import adapt
import adapt.ray

STEPS, SEED, EPOCH = "random_resized_crop(16),hflip", 4, 1


def digest(a):
    return hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()


def tag_node(batch):
    node = ray.get_runtime_context().get_node_id()
    return {**batch, "node": np.array([node] * len(batch["label"]))}


def fed_from_ray(source):
    """(label, f32 digest) of each sample adapt.DataLoader gives from `source`."""
    loader = adapt.DataLoader(source, batch_size=5, transform="normalize(imagenet)")
    return [(int(l), digest(np.asarray(a))) for x, y in loader for a, l in zip(x, y)]


def main(data, out):
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address)
        ds = adapt.ray.read(adapt.datasets.ImageFolder(data), transform=STEPS, shuffle=True,
                            seed=SEED, epoch=EPOCH, batch_size=8, num_blocks=4)
        rows = ds.map_batches(tag_node, batch_format="numpy").take_all()
        nodes = len(ray.nodes())
        fed = fed_from_ray(ds)
        shares = [[] for _ in range(2)]
        splits = ds.streaming_split(2, equal=False)
        threads = [threading.Thread(target=lambda r=r: shares[r].extend(fed_from_ray(splits[r])))
                   for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        ray.shutdown()
        cluster.shutdown()
    ours = adapt.DataLoader(adapt.datasets.ImageFolder(data), batch_size=8, shuffle=True, seed=SEED,
                            transform=STEPS, output="u8-nhwc")
    ours.set_epoch(EPOCH)
    order = list(ours.sampler)
    batches = [(np.asarray(b[0]), np.asarray(b[1])) for b in ours]  # one epoch: iterate once
    images = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    native = adapt.DataLoader(adapt.datasets.ImageFolder(data), batch_size=8, shuffle=True, seed=SEED,
                              transform=STEPS + ",normalize(imagenet)")
    native.set_epoch(EPOCH)
    f32 = [(int(l), digest(np.asarray(a))) for x, y in native for a, l in zip(x, y)]
    with open(out, "w") as f:
        json.dump({
            "nodes": nodes,
            "ray": [{"index": int(r["index"]), "label": int(r["label"]), "digest": digest(r["image"]),
                     "shape": list(r["image"].shape), "node": str(r["node"])} for r in rows],
            "adapt": [{"index": int(i), "label": int(l), "digest": digest(a)}
                      for i, l, a in zip(order, labels, images)],
            "fed": fed, "shares": shares, "f32": f32,
        }, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
