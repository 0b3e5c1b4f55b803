# SPDX-License-Identifier: Apache-2.0
"""crashlib.py - what the SIGKILL-cycle tests share (test_fuse_wb_crash.sh, test_policy_crash.sh):
runs of tierd in the foreground, each with its own log T/tierd.NNNN.log and its pid in T/pids
(the shell's cleanup kills them), the mount's readiness, polling waits and a failure that shows
the newest log's tail. No sleeps as synchronisation: waits poll a condition with a deadline."""
import os
import subprocess
import sys
import time


class Runs:
    def __init__(self, tierd, T, mnt):
        self.tierd, self.T, self.mnt = tierd, T, mnt
        self.run = 0
        self.pids = open(os.path.join(T, "pids"), "a")

    def log(self):
        """The current run's log file."""
        return os.path.join(self.T, f"tierd.{self.run:04d}.log")

    def fail(self, msg):
        print("FAIL: " + msg, file=sys.stderr, flush=True)
        try:
            print(open(self.log()).read()[-3000:], file=sys.stderr)
        except OSError:
            pass
        sys.exit(1)

    def wait_for(self, cond, secs, what):
        deadline = time.monotonic() + secs
        while not cond():
            if time.monotonic() > deadline:
                self.fail("timed out waiting for " + what)
            time.sleep(0.005)

    def mounted(self):
        """statvfs reaches the daemon (stat may be answered from the kernel's cache)."""
        try:
            os.statvfs(self.mnt)
            return os.stat(self.mnt).st_ino == 1
        except OSError:
            return False

    def start(self):
        """A new run of tierd on T/tierd.conf; returns once its mount answers."""
        self.run += 1
        log = open(self.log(), "w")
        p = subprocess.Popen([self.tierd, "-c", os.path.join(self.T, "tierd.conf"), "-f"],
                             stderr=log, stdout=log)
        self.pids.write(f"{p.pid}\n")
        self.pids.flush()
        # minutes: a loaded machine may take long to mount; a tierd that exits ends the wait
        self.wait_for(lambda: self.mounted() or p.poll() is not None, 180,
                      "the mount (run %d)" % self.run)
        if p.poll() is not None:
            self.fail("tierd exited during start-up (run %d, status %d)" % (self.run, p.returncode))
        return p
