#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_stall_report.py - the Python helper's StallReport (contrib/python/tierd_hints.py) against
a stand-in tierd: an HTTP server on a Unix socket in a thread that records each POST /v1/progress
body and answers as told. No tierd, no torch (the loader is a generator). Behaviour, not timing:
the measured seconds are checked only from below (a sleep lasts at least its time, however
loaded the machine), and every count exactly.

usage: test_stall_report.py SOURCE_DIR
"""
import http.server
import json
import os
import socketserver
import sys
import tempfile
import threading
import time
import unittest
import warnings

sys.path.insert(0, os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "contrib", "python"))
import tierd_hints  # noqa: E402


class Server:
    """A stand-in tierd: records the bodies of POST /v1/progress, answers `status`."""

    def __init__(self, path):
        self.bodies = []
        self.status = 200
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n))
                if outer.status == 200:
                    outer.bodies.append((self.path, body))
                out = json.dumps({"name": body.get("name"), "tenant": "t"}).encode()
                self.send_response(outer.status)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

            def address_string(self):
                return "unix"

        class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        self.srv = S(path, H)
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def loader(n, wait_s):
    for i in range(n):
        time.sleep(wait_s)  # the loader's work: the loop waits this long for batch i
        yield i


class StallReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.sock = os.path.join(self.dir, "api.sock")

    def tearDown(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        os.rmdir(self.dir)

    def test_reports_add_up(self):
        srv = Server(self.sock)
        try:
            r = tierd_hints.StallReport(list(range(0)), socket_path=self.sock)
            self.assertEqual(list(r), [])
            self.assertEqual(srv.bodies, [])  # an empty epoch sends nothing
            r = tierd_hints.StallReport(loader(12, 0.01), name="job7-0", socket_path=self.sock,
                                        interval_s=0.02)
            got = []
            for b in r:
                got.append(b)
                time.sleep(0.005)  # the step
            self.assertEqual(got, list(range(12)))
            self.assertEqual(r.total_steps, 12)
            self.assertGreaterEqual(r.total_wait_s, 12 * 0.01)
            self.assertGreaterEqual(r.total_compute_s, 12 * 0.005)
            self.assertEqual(r.steps, 0)  # everything sent at the epoch's end
            self.assertEqual(r.reports, len(srv.bodies))
            self.assertGreaterEqual(len(srv.bodies), 2)  # every interval, and the end
            for path, body in srv.bodies:
                self.assertEqual(path, "/v1/progress")
                self.assertEqual(set(body), {"name", "wait_s", "compute_s", "steps"})
                self.assertEqual(body["name"], "job7-0")
            self.assertEqual(sum(b["steps"] for _, b in srv.bodies), 12)
            wait = sum(b["wait_s"] for _, b in srv.bodies)
            comp = sum(b["compute_s"] for _, b in srv.bodies)
            self.assertAlmostEqual(wait, r.total_wait_s, delta=1e-6 * len(srv.bodies))
            self.assertAlmostEqual(comp, r.total_compute_s, delta=1e-6 * len(srv.bodies))
        finally:
            srv.close()

    def test_break_sends_the_rest_and_names(self):
        srv = Server(self.sock)
        try:
            os.environ["SLURM_JOB_ID"], os.environ["RANK"] = "4242", "3"
            r = tierd_hints.report_stalls(loader(10, 0), socket_path=self.sock,
                                          tenant="job-4242", interval_s=3600)
            for b in r:
                if b == 3:
                    time.sleep(0.01)
                    break
            self.assertEqual(len(srv.bodies), 1)  # the loop was left: one report, at once
            body = srv.bodies[0][1]
            self.assertEqual(body["name"], "py-4242-3")
            self.assertEqual(body["tenant"], "job-4242")
            self.assertEqual(body["steps"], 4)
            self.assertGreaterEqual(body["compute_s"], 0.01)  # the broken-off step counts
        finally:
            del os.environ["SLURM_JOB_ID"], os.environ["RANK"]
            srv.close()

    def test_no_tierd_warns_once_and_keeps_the_totals(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = tierd_hints.StallReport(loader(6, 0), socket_path=self.sock, interval_s=0)
            self.assertEqual(len(list(r)), 6)  # the job goes on
            self.assertEqual([str(x.message)[:40] for x in w],
                             ["tierd_hints: no stall reports for tierd "])
            self.assertEqual(r.reports, 0)
            self.assertEqual(r.steps, 6)  # kept for the next try
            srv = Server(self.sock)  # tierd comes (back)
            try:
                r._next_try = 0  # the back-off's wait, over at once
                r.flush()
                self.assertEqual(r.reports, 1)
                self.assertEqual(srv.bodies[0][1]["steps"], 6)
                self.assertEqual(len(w), 1)
            finally:
                srv.close()

    def test_refused_report_is_dropped(self):
        srv = Server(self.sock)
        srv.status = 403
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = tierd_hints.StallReport(loader(3, 0), socket_path=self.sock, interval_s=0)
                self.assertEqual(len(list(r)), 3)
                self.assertEqual(len(w), 1)
                self.assertIn("HTTP 403", str(w[0].message))
            self.assertEqual(r.steps, 0)  # refused: not sent again
            self.assertEqual(r.reports, 0)
        finally:
            srv.close()

    def test_server_error_keeps_the_totals(self):
        srv = Server(self.sock)
        srv.status = 503  # tierd failed, it did not refuse: the report is kept for the next try
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = tierd_hints.StallReport(loader(3, 0), socket_path=self.sock, interval_s=0)
                self.assertEqual(len(list(r)), 3)
                self.assertEqual(len(w), 1)
                self.assertIn("HTTP 503", str(w[0].message))
            self.assertEqual(r.steps, 3)
            self.assertEqual(r.reports, 0)
            srv.status = 200
            r._next_try = 0  # the back-off's wait, over at once
            r.flush()
            self.assertEqual(r.reports, 1)
            self.assertEqual(srv.bodies[-1][1]["steps"], 3)
        finally:
            srv.close()


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
