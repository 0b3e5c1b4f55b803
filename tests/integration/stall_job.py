#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""stall_job.py - a training loop for test_stall_fuse.sh: one epoch of a real PyTorch DataLoader
(Debian's python3-torch; 2 worker processes, batches of BATCH) over the files of DIR, each sample
one file read whole through tierd's mount, wrapped in contrib/python/tierd_hints.py's
StallReport, COMPUTE_MS of emulated accelerator work per batch (a sleep: the host waits while an
accelerator computes). Prints one JSON line: the batches iterated and what the wrapper measured
and how many reports tierd took.

usage: stall_job.py SOCKET DIR BATCH COMPUTE_MS NAME [HELPER_DIR]
HELPER_DIR: where tierd_hints.py is (default: contrib/python of this tree).
"""
import json
import os
import sys
import time
import warnings

import torch
from torch.utils.data import DataLoader, Dataset

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[6] if len(sys.argv) > 6 else
                os.path.join(here, "..", "..", "contrib", "python"))
import tierd_hints  # noqa: E402


class Files(Dataset):
    def __init__(self, d):
        self.files = [os.path.join(d, n) for n in sorted(os.listdir(d))]

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


def collate(batch):
    return sum(len(b) for b in batch)


def main():
    sock, d, batch, compute_ms, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    ds = Files(d)
    loader = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=2, collate_fn=collate)
    # every warning is an error here: a report tierd refused must fail the test, not be warned
    # about and forgotten as a job would
    warnings.simplefilter("error")
    rep = tierd_hints.StallReport(loader, name=name, socket_path=sock, interval_s=0.2)
    batches = nbytes = 0
    for nb in rep:
        batches += 1
        nbytes += nb
        time.sleep(compute_ms / 1000.0)
    print(json.dumps({"batches": batches, "bytes": nbytes, "wait_s": rep.total_wait_s,
                      "compute_s": rep.total_compute_s, "steps": rep.total_steps,
                      "reports": rep.reports, "unsent_steps": rep.steps}))


if __name__ == "__main__":
    main()
