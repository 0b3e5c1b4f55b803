#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""delayproxy.py - a TCP proxy that adds a fixed one-way delay, for benchmarks against an object
store that should look remote (this kernel has no netem). Started by scripts/netlink.sh.

    delayproxy.py --listen 127.0.0.1:0 --upstream 10.213.0.2:7480 --delay-ms 10 --port-file F

What it delays, exactly: every chunk the proxy reads from one side (up to 256 KiB, whatever one
recv returned) is written to the other side DELAY_MS after it was read, in order. Both directions
are delayed independently, so a request/response exchange gains 2 x DELAY_MS of round trip, like a
link with DELAY_MS of propagation delay each way. Reading goes on while earlier chunks wait, so the
delay is latency, not a throughput cap (up to QUEUE_CHUNKS chunks wait per direction; beyond that
the proxy stops reading and TCP backpressure applies). The TCP handshake with the client is not
delayed (it is on loopback); the upstream connection is opened when a client connects, so a new
connection's first request waits for that connect (one link RTT) plus DELAY_MS. A half-close
(EOF) is forwarded after the chunks before it, also delayed.

With --stream-rate R (bytes per second), each connection's each direction is also paced to at
most R: the per-connection limit of a real object store (AWS gives one GET stream roughly 90 MB/s
and asks clients to use parallel ranged GETs for more), which a rate on the link alone does not
model. 0 (the default) paces nothing.

Only loopback listen addresses are accepted; the upstream is what netlink.sh passes (its own
namespace's address).
"""

import argparse
import asyncio
import ipaddress
import os
import signal
import sys
import time

CHUNK = 256 * 1024
QUEUE_CHUNKS = 256


def parse_hostport(s):
    host, _, port = s.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"'{s}' is not HOST:PORT")
    ipaddress.IPv4Address(host)
    return host, int(port)


async def pump(reader, writer, delay, rate):
    """Copy reader to writer, each chunk written `delay` seconds after it was read, and (rate >
    0) no faster than rate bytes per second."""
    queue = asyncio.Queue(QUEUE_CHUNKS)
    paced = [0.0]  # the time the stream's bytes so far may all have been written, at rate

    async def read_side():
        while True:
            data = await reader.read(CHUNK)
            await queue.put((time.monotonic() + delay, data))
            if not data:
                return

    async def write_side():
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            if rate > 0:
                now = time.monotonic()
                paced[0] = max(paced[0], now) + len(data) / rate
                # write the chunk once its own time at rate has passed (a one-chunk reply too)
                ahead = paced[0] - now
                if ahead > 0:
                    await asyncio.sleep(ahead)
            writer.write(data)
            await writer.drain()

    await asyncio.gather(read_side(), write_side())


async def handle(client_r, client_w, upstream, delay, rate):
    try:
        up_r, up_w = await asyncio.open_connection(*upstream)
    except OSError as e:
        print(f"delayproxy: connect to {upstream[0]}:{upstream[1]}: {e}", file=sys.stderr)
        client_w.close()
        return
    tasks = [asyncio.create_task(pump(client_r, up_w, delay, rate)),
             asyncio.create_task(pump(up_r, client_w, delay, rate))]
    try:
        await asyncio.gather(*tasks)
    except (ConnectionError, OSError):
        pass  # a reset from either side ends the connection
    finally:
        for t in tasks:
            t.cancel()
        for w in (client_w, up_w):
            w.close()


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", type=parse_hostport, required=True)
    ap.add_argument("--upstream", type=parse_hostport, required=True)
    ap.add_argument("--delay-ms", type=float, required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--stream-rate", type=float, default=0.0,
                    help="bytes/s per connection and direction (0: no limit)")
    a = ap.parse_args()
    if not ipaddress.IPv4Address(a.listen[0]).is_loopback:
        ap.error(f"--listen {a.listen[0]} is not a loopback address")
    if not 0 <= a.delay_ms <= 10000:
        ap.error("--delay-ms must be between 0 and 10000")
    if a.stream_rate < 0:
        ap.error("--stream-rate must not be negative")
    delay = a.delay_ms / 1000.0
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, a.upstream, delay, a.stream_rate), a.listen[0], a.listen[1])
    port = server.sockets[0].getsockname()[1]
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, a.port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
