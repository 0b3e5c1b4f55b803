#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""dataloader.py - one epoch of a PyTorch DataLoader over the files of a directory, with
emulated accelerator compute, for bench/dataloader.sh (issue 12). Needs Debian's python3-torch
(run it with /usr/bin/python3).

    dataloader.py DIR COMPUTE_MS [--hint NAME --socket SOCK] [--workers 4] [--batch 32] [--seed 7]
                  [--epochs 1] [--stall NAME --socket SOCK] [--drop]

The dataset is every file of DIR (sorted); each sample is one file read whole with plain reads.
The order is a shuffled RandomSampler (seeded), wrapped in contrib/python/tierd_hints.py's
HintedSampler with --hint. For each batch the main process "computes" COMPUTE_MS per sample
(a sleep: an accelerator works while the host waits). Prints one JSON line: wall_s (the epoch,
from the first batch request to the last batch's compute), compute_s, util = compute_s / wall_s,
samples, bytes. With --epochs N the loader runs N epochs (a new shuffle each, the same workers) and
the figures cover all of them. With --stall the loader is wrapped in tierd_hints.StallReport (reports to
tierd every 2 s as NAME), and the line also has wait_s and steps, the wrapper's own totals: the
seconds the loop waited for its batches and the batches it got (bench/advice.sh, issue 27).
With --drop each file's pages are dropped from the kernel's page cache after it is read
(posix_fadvise DONTNEED), as on a node whose page cache cannot hold the datasets: every epoch's
reads then reach the mount.
"""
import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contrib", "python"))
import tierd_hints  # noqa: E402


class Files(Dataset):
    def __init__(self, d, drop=False):
        self.files = [os.path.join(d, n) for n in sorted(os.listdir(d))]
        self.drop = drop

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            b = bytearray(f.read())
            if self.drop:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            return torch.frombuffer(b, dtype=torch.uint8)


def collate(batch):
    return sum(len(b) for b in batch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("compute_ms", type=float)
    ap.add_argument("--hint")
    ap.add_argument("--socket")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--stall")
    ap.add_argument("--drop", action="store_true")
    a = ap.parse_args()
    ds = Files(a.dir, a.drop)
    g = torch.Generator()
    g.manual_seed(a.seed)
    sampler = RandomSampler(ds, generator=g)
    if a.hint:
        sampler = tierd_hints.HintedSampler(sampler, paths=ds.files, name=a.hint,
                                            socket_path=a.socket)
    # several epochs: the workers are kept between them (persistent_workers), as a training
    # loop of many epochs keeps them, so the wait measured is the data's, not worker start-up
    loader = DataLoader(ds, sampler=sampler, batch_size=a.batch, num_workers=a.workers,
                        collate_fn=collate, persistent_workers=a.epochs > 1 and a.workers > 0)
    if a.stall:
        loader = tierd_hints.StallReport(loader, name=a.stall, socket_path=a.socket,
                                         interval_s=2.0)
    t0 = time.monotonic()
    compute = 0.0
    samples = nbytes = 0
    for _ in range(a.epochs):
        left = len(ds)
        for nb in loader:
            n = min(a.batch, left)
            left -= n
            samples += n
            nbytes += nb
            c = a.compute_ms * n / 1000.0
            time.sleep(c)
            compute += c
    wall = time.monotonic() - t0
    out = {"wall_s": round(wall, 3), "compute_s": round(compute, 3),
           "util": round(compute / wall, 4), "samples": samples, "bytes": nbytes}
    if a.stall:
        out["wait_s"] = round(loader.total_wait_s, 3)
        out["steps"] = loader.total_steps
        out["reports"] = loader.reports
    print(json.dumps(out))


if __name__ == "__main__":
    main()
