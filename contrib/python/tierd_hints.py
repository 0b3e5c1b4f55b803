# SPDX-License-Identifier: Apache-2.0
"""tierd_hints - tell tierd the order a training job will read its files in, one epoch ahead.

Wrap any sampler (a torch.utils.data.Sampler, or any re-iterable of dataset indexes):

    from tierd_hints import HintedSampler
    sampler = HintedSampler(RandomSampler(ds), paths=ds.files, name="job7")
    loader = DataLoader(ds, sampler=sampler, batch_size=32, num_workers=4)

`paths[i]` is the file dataset index i reads, a path under tierd's mount (or a mount path like
"/datasets/x/0001.jpg"). Before each epoch starts, the wrapper draws the order of that epoch and
of the next one from the wrapped sampler and sends them to tierd (POST /v1/hints on its control
socket), so tierd prefetches ahead of the reader and keeps what is read again soonest
(docs/HINTS.md). The orders are exactly what the wrapped sampler produces, in the same sequence;
only drawn one epoch earlier (a sampler that seeds from the global RNG at each epoch sees the
draws one epoch earlier too; an epoch-seeded one, like DistributedSampler, is asked for epoch + 1
through its set_epoch and set back, so its orders are exactly its own). Each job and rank gets
its own set (named after SLURM_JOB_ID or the pid, and RANK), unless `name` is given.

It also measures what the job waits on (docs/HINTS.md "Stall reports"): wrap the loader,

    for batch in StallReport(loader, name="job7"):
        ...

and the loop's time is split into the time spent asking the loader for the next batch (wait)
and the time between getting a batch and asking for the next (compute); every `interval_s`
(default 5 s), at the end of each epoch and when the loop is left, the totals since the last
report go to tierd (POST /v1/progress), which keeps each tenant's data-stall ratio (tierctl
top, /metrics).

Only the Python standard library is used; torch is not imported (DataLoader accepts any sampler
with __iter__ and __len__). If tierd cannot be reached, the wrappers warn once and go on
without it: hints and reports are advice, never a reason for a job to fail.
"""
import http.client
import json
import os
import socket
import time
import warnings

DEFAULT_SOCKET = os.environ.get("TIERD_SOCKET", "/run/tierd/api.sock")
CHUNK = 100000  # entries per POST: well under tierd's bound for /v1/hints bodies


def _default_name():
    """One name per job and rank: SLURM_JOB_ID (or the pid) and RANK (or SLURM_PROCID)."""
    job = os.environ.get("SLURM_JOB_ID") or str(os.getpid())
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
    return f"py-{job}-{rank}"


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("tierd", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except OSError:
            s.close()  # a tierd that is not there leaves no socket behind
            raise
        self.sock = s


class _Refused(OSError):
    """tierd answered, and refused the request itself (a 4xx status): the same would be refused
    again. A 5xx (or any other status of 300 or more) is a plain OSError: worth another try."""


def _call(sock, method, url, body=None, timeout=10):
    conn = _UnixHTTPConnection(sock, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, url, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", "replace")
        if resp.status >= 300:
            msg = f"tierd answered {method} {url}: HTTP {resp.status}: {text.strip()}"
            raise _Refused(msg) if 400 <= resp.status < 500 else OSError(msg)
        return json.loads(text) if text else {}
    finally:
        conn.close()


class HintedSampler:
    """A sampler that sends tierd each epoch's read order before the epoch starts."""

    def __init__(self, sampler, paths, name=None, socket_path=None, tenant=None, mount=None):
        self.sampler = sampler
        self.paths = paths
        # one set per job and rank: two jobs (or ranks) of a tenant must not replace each other's
        self.name = name or _default_name()
        self._epoch = None
        self.socket_path = socket_path or DEFAULT_SOCKET
        self.tenant = tenant
        self.mount = mount
        self._next = None  # the next epoch's order, drawn ahead
        self._sent = False
        self._warned = False

    def __len__(self):
        return len(self.sampler)

    def __getattr__(self, attr):
        # everything else is the wrapped sampler's (num_replicas, shuffle, ...)
        if attr == "sampler":
            raise AttributeError(attr)
        return getattr(self.sampler, attr)

    def set_epoch(self, epoch):
        """As DistributedSampler.set_epoch: passed on; the next epoch is drawn with epoch + 1."""
        self._epoch = epoch
        self._next = None  # an order drawn ahead for another epoch number is not this one's
        self.sampler.set_epoch(epoch)

    def _mount_path(self, p):
        p = os.fspath(p)
        if self.mount is None:
            self.mount = _call(self.socket_path, "GET", "/v1/status").get("mount", "")
        m = self.mount.rstrip("/")
        if m and (p == m or p.startswith(m + "/")):
            return p[len(m):] or "/"
        return p

    def _send(self, order, append):
        entries = [self._mount_path(self.paths[i]) for i in order]
        for k in range(0, max(len(entries), 1), CHUNK):
            body = {"name": self.name, "paths": entries[k:k + CHUNK], "append": append or k > 0}
            if self.tenant:
                body["tenant"] = self.tenant
            _call(self.socket_path, "POST", "/v1/hints", body)

    def _draw_next(self):
        if self._epoch is not None and hasattr(self.sampler, "set_epoch"):
            # an epoch-seeded sampler (DistributedSampler): draw epoch + 1, then set it back
            self.sampler.set_epoch(self._epoch + 1)
            try:
                return list(iter(self.sampler))
            finally:
                self.sampler.set_epoch(self._epoch)
        return list(iter(self.sampler))  # a sampler that draws anew at each iteration

    def __iter__(self):
        order = self._next if self._next is not None else list(iter(self.sampler))
        self._next = self._draw_next()
        try:
            if not self._sent:
                self._send(order + self._next, append=False)  # this epoch and the next
                self._sent = True
            else:
                self._send(self._next, append=True)  # this one was sent with the last
        except OSError as e:
            self._sent = False  # a failed or partial send: the next epoch sends the whole order
            if not self._warned:
                warnings.warn(f"tierd_hints: no hints for tierd ({e}); reading without them")
                self._warned = True
        return iter(order)


def drop(name, socket_path=None):
    """Drop hint set `name` (its held blocks go back to the cache's own eviction)."""
    _call(socket_path or DEFAULT_SOCKET, "DELETE", "/v1/hints/" + name)


class StallReport:
    """Wrap a loader (any iterable of batches): iterate it as before, and tierd learns how long
    the loop waited for each batch and how long it computed between batches.

    wait: the time spent in the loader iterator's __next__ (the first batch of an epoch
    included: worker start-up is a stall too; the __next__ that ends the epoch is not counted).
    compute: from getting a batch to asking for the next one. steps: batches received. Every
    interval_s, at the end of each epoch and when the loop is left (break, exception, close()),
    the totals since the last report are sent (POST /v1/progress, one short request). A tierd
    that cannot be reached is warned about once; its totals are kept for the next try, which
    waits twice as long after each failure (at most 5 minutes), so a hung or absent tierd costs
    the loop at most one timeout (2 s) now and then. A report tierd refuses (HTTP 4xx) is
    dropped and warned about once. Never raises because of tierd.
    """

    TIMEOUT_S = 2.0
    BACKOFF_MAX_S = 300.0

    def __init__(self, loader, name=None, socket_path=None, tenant=None, interval_s=5.0):
        self.loader = loader
        self.name = name or _default_name()
        self.socket_path = socket_path or DEFAULT_SOCKET
        self.tenant = tenant
        self.interval_s = float(interval_s)
        self.wait_s = self.compute_s = 0.0  # since the last report that tierd took
        self.steps = 0
        self.total_wait_s = self.total_compute_s = 0.0  # since this wrapper was made
        self.total_steps = 0
        self.reports = 0  # reports tierd took
        self._last = time.monotonic()
        self._next_try = 0.0
        self._backoff = self.interval_s
        self._warned = False

    def __len__(self):
        return len(self.loader)

    def __getattr__(self, attr):
        if attr == "loader":
            raise AttributeError(attr)
        return getattr(self.loader, attr)

    def __iter__(self):
        it = iter(self.loader)
        gave = None  # when the last batch went to the loop, until its compute is counted
        try:
            while True:
                t0 = time.monotonic()
                if gave is not None:
                    self._add(0.0, t0 - gave, 0)
                    gave = None
                try:
                    batch = next(it)
                except StopIteration:
                    return
                t1 = time.monotonic()
                self._add(t1 - t0, 0.0, 1)
                if t1 - self._last >= self.interval_s:
                    self.flush()
                gave = time.monotonic()  # the report's own time is neither wait nor compute
                yield batch
        finally:
            if gave is not None:  # the loop left (break, exception) while computing
                self._add(0.0, time.monotonic() - gave, 0)
            self.flush()

    def _add(self, wait_s, compute_s, steps):
        self.wait_s += wait_s
        self.compute_s += compute_s
        self.steps += steps
        self.total_wait_s += wait_s
        self.total_compute_s += compute_s
        self.total_steps += steps

    def flush(self):
        """Send the totals since the last report now (skipped while backing off)."""
        now = time.monotonic()
        self._last = now
        if (not self.steps and not self.wait_s and not self.compute_s) or now < self._next_try:
            return
        body = {"name": self.name, "wait_s": round(self.wait_s, 6),
                "compute_s": round(self.compute_s, 6), "steps": self.steps}
        if self.tenant:
            body["tenant"] = self.tenant
        try:
            _call(self.socket_path, "POST", "/v1/progress", body, timeout=self.TIMEOUT_S)
        except _Refused as e:
            self._reset()  # the same report would be refused again
            self._warn(e)
            return
        except (OSError, ValueError, http.client.HTTPException) as e:
            self._next_try = now + self._backoff
            self._backoff = min(self._backoff * 2, self.BACKOFF_MAX_S)
            self._warn(e)
            return
        self.reports += 1
        self._backoff = self.interval_s
        self._reset()

    close = flush

    def _reset(self):
        self.wait_s = self.compute_s = 0.0
        self.steps = 0

    def _warn(self, e):
        if not self._warned:
            warnings.warn(f"tierd_hints: no stall reports for tierd ({e}); training goes on")
            self._warned = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.flush()
        return False


def report_stalls(loader, **kw):
    """StallReport(loader, **kw): `for batch in report_stalls(loader): ...`"""
    return StallReport(loader, **kw)
