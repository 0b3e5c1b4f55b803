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

Only the Python standard library is used; torch is not imported (DataLoader accepts any sampler
with __iter__ and __len__). If tierd cannot be reached, the wrapper warns once and goes on
without hints: a hint is advice, never a reason for a job to fail.
"""
import http.client
import json
import os
import socket
import warnings

DEFAULT_SOCKET = os.environ.get("TIERD_SOCKET", "/run/tierd/api.sock")
CHUNK = 100000  # entries per POST: well under tierd's bound for /v1/hints bodies


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("tierd", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _call(sock, method, url, body=None):
    conn = _UnixHTTPConnection(sock)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, url, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", "replace")
        if resp.status >= 300:
            raise OSError(f"tierd answered {method} {url}: HTTP {resp.status}: {text.strip()}")
        return json.loads(text) if text else {}
    finally:
        conn.close()


class HintedSampler:
    """A sampler that sends tierd each epoch's read order before the epoch starts."""

    def __init__(self, sampler, paths, name=None, socket_path=None, tenant=None, mount=None):
        self.sampler = sampler
        self.paths = paths
        # one set per job and rank: two jobs (or ranks) of a tenant must not replace each other's
        job = os.environ.get("SLURM_JOB_ID") or str(os.getpid())
        rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
        self.name = name or f"py-{job}-{rank}"
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
