#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# hintfile.py - write a hint file under <mount>/.tierd/hints the way a job does, and print what
# each system call returned (errno names), for tests/integration/test_hintfile_fuse.sh. Python's
# standard library only: it runs as another uid with the system's python3.
#
#   hintfile.py write FILE TEXT   open(O_WRONLY|O_CREAT|O_TRUNC), write TEXT, close
#   hintfile.py big FILE          write 1 MiB chunks until a write fails (at most 40 MiB), close
#   hintfile.py fsync FILE TEXT   write TEXT, fsync, read the set's status back before the close
#   hintfile.py reopen FILE       open(O_WRONLY|O_APPEND) an existing FILE, close without a write
#   hintfile.py hold FILE K       open FILE.0 .. FILE.K-1 and write 1 MiB chunks (no newline:
#                                 nothing is checked before the close) into each until a write
#                                 fails (at most 33 MiB each); print "held" and keep them open
#                                 until standard input ends, then close them
# Prints one line per step: "open ok", "write ok 123" / "write EFBIG 33554432", "fsync ok",
# "status <first lines of the status file>", "close ok" / "close EINVAL".
import errno
import os
import sys


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def hold(path, k):
    fds = []
    for i in range(k):
        name = "%s.%d" % (path, i)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as e:
            print("file%d open" % i, ename(e))
            continue
        fds.append(fd)
        total = 0
        try:
            while total < (33 << 20):
                total += os.write(fd, b"x" * 1048576)
            print("file%d write ok" % i, total)
        except OSError as e:
            print("file%d write" % i, ename(e), total)
    print("held", flush=True)
    sys.stdin.read()
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass  # a buffer over a bound: its close fails too, and nothing is taken


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "hold":
        hold(path, int(sys.argv[3]))
        return
    if mode == "reopen":
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            print("open ok")
            os.close(fd)
            print("close ok")
        except OSError as e:
            print("reopen", ename(e))
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        print("open", ename(e))
        return
    print("open ok")
    if mode in ("write", "fsync"):
        data = sys.argv[3].encode()
        try:
            n = 0
            while n < len(data):
                n += os.write(fd, data[n:])
            print("write ok", n)
        except OSError as e:
            print("write", ename(e), n)
    elif mode == "big":
        line = b"/ds/train/s01.bin\n"  # and a comment to fill the MiB: whole lines only
        chunk = line + b"#" * (1048576 - len(line) - 1) + b"\n"
        total = 0
        try:
            while total < (40 << 20):
                total += os.write(fd, chunk)
            print("write ok", total)
        except OSError as e:
            print("write", ename(e), total)
    if mode == "fsync":
        try:
            os.fsync(fd)
            print("fsync ok")
        except OSError as e:
            print("fsync", ename(e))
        with open(path) as f:  # the set, taken at fsync, while this writer still holds it open
            print("status", " ".join(f.read().split("\n")[:4]))
    try:
        os.close(fd)
        print("close ok")
    except OSError as e:
        print("close", ename(e))


main()
