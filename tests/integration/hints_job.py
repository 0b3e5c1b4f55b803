#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hints_job.py - a training job's read loop for test_hints_fuse.sh: EPOCHS shuffled epochs over
the files of DIR, each file read whole with O_DIRECT (so the kernel's page cache cannot answer),
COMPUTE ms of emulated work per sample; with --hint, through contrib/python/tierd_hints.py's
HintedSampler. Before each epoch and at the end it fetches /metrics and prints one JSON line per
epoch: the bytes of reads tierd served from RAM or disk (hits) and from the backend.

usage: hints_job.py SOCKET DIR EPOCHS COMPUTE_MS SEED [--hint NAME]
SOCKET "-": no tierd (a local-disk baseline): hit and backend bytes are reported as 0.
"""
import json
import mmap
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "contrib", "python"))
import tierd_hints  # noqa: E402


class Shuffle:
    """A sampler as torch's RandomSampler behaves: a new permutation at every iteration."""

    def __init__(self, n, seed):
        self.n = n
        self.rng = random.Random(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        order = list(range(self.n))
        self.rng.shuffle(order)
        return iter(order)


def metrics(sock):
    conn = tierd_hints._UnixHTTPConnection(sock)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def served(sock):
    if sock == "-":
        return {"hit": 0, "backend": 0}
    text = metrics(sock)
    got = {"hit": 0, "backend": 0}
    for m in re.finditer(r'^tierd_op_bytes_total\{([^}]*)\} (\S+)$', text, re.M):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if lab.get("op") != "read":
            continue
        key = "backend" if lab.get("tier") == "backend" else "hit"
        got[key] += int(float(m.group(2)))
    return got


def read_whole(path, buf):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        while os.readv(fd, [buf]) == len(buf):
            pass
    finally:
        os.close(fd)


def main():
    sock, d, epochs, compute_ms, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    hint = sys.argv[7] if len(sys.argv) > 7 and sys.argv[6] == "--hint" else None
    files = sorted(os.path.join(d, f) for f in os.listdir(d))
    sampler = Shuffle(len(files), seed)
    if hint:
        sampler = tierd_hints.HintedSampler(sampler, paths=files, name=hint, socket_path=sock)
    # 32 KiB reads: a one-block file takes two reads that both touch its last block, and the
    # engine must count the file once (at its end), not twice
    buf = mmap.mmap(-1, 32 << 10)
    for e in range(epochs):
        before = served(sock)
        t0 = time.monotonic()
        for i in sampler:
            read_whole(files[i], buf)
            if compute_ms:
                time.sleep(compute_ms / 1000.0)  # the accelerator's work on the sample
        after = served(sock)
        hit = after["hit"] - before["hit"]
        be = after["backend"] - before["backend"]
        print(json.dumps({"epoch": e, "hit_bytes": hit, "backend_bytes": be,
                          "hit_ratio": hit / max(1, hit + be), "wall_s": time.monotonic() - t0}))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
