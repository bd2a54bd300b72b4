#!/usr/bin/env python3
"""Slow clients against a daemon's metrics endpoint (metrics_slow.sh):
HOST PORT PID FAMILY [TOOL]. Each phase opens slow clients that start a
request and send one more header byte a second, never finishing it, and
meanwhile scrapes from another address every 0.3 s; each scrape must be
answered (200, with metric FAMILY) within SCRAPE_MAX, each slow client
must be closed within CLOSED_MAX of its connect, the daemon's (PID)
resident memory may grow by RSS_BUDGET at most, and with TOOL (the
master) a master request (`sweepfs status`, a process of its own) must
be answered within MASTER_MAX. Prints the figures; exit status 1 with
the reason on a failure. Bounded: every socket has a timeout and every
phase ends after PHASE_S."""

import json
import socket
import subprocess
import sys
import time

SCRAPE_MAX = 1.0
# metrics.c: REQUEST_DEADLINE_MS 5000, swept every 500 ms; slack for a
# loaded 2-core machine.
CLOSED_MAX = 5.0 + 0.5 + 1.5
PHASE_S = CLOSED_MAX + 2.0
PER_HOST = 4     # metrics.c CONNS_PER_HOST
CONNS_MAX = 32   # metrics.c CONNS_MAX
SLOW_BYTES = b"X-Slow: 1\r\n"
# 64 connections of a few hundred bytes each, and MHD's per-connection
# pool (32 KiB by default): far less than this.
RSS_BUDGET = 8 << 20
# sweepfs status, process start included (a few ms when idle).
MASTER_MAX = 0.5
FAMILY = b"sweepfs_master_nodes"


class Fail(Exception):
    pass


class Slow:
    """A slowloris client from @src: a request line, then a header byte
    every tick(); closed is when the server closed it (None: open)."""

    def __init__(self, host, port, src):
        self.t0 = time.monotonic()
        self.closed = None
        self.sent = 0
        self.s = socket.socket()
        self.s.settimeout(2)
        self.s.bind((src, 0))
        self.s.connect((host, port))
        self.s.setblocking(False)
        self._send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")

    def _send(self, b):
        try:
            self.s.send(b)
        except BlockingIOError:
            pass
        except OSError:
            self.closed = self.closed or time.monotonic()

    def poll(self):
        if self.closed:
            return
        try:
            if self.s.recv(4096) == b"":
                self.closed = time.monotonic()
        except BlockingIOError:
            pass
        except OSError:
            self.closed = time.monotonic()

    def tick(self):
        if not self.closed:
            self._send(SLOW_BYTES[self.sent % len(SLOW_BYTES):][:1])
            self.sent += 1

    def close(self):
        self.s.close()


def scrape(host, port, src):
    return scrape_timed(host, port, src)[0]


def scrape_text(host, port, src):
    return scrape_timed(host, port, src)[1]


def scrape_timed(host, port, src):
    """(seconds, text) of a scrape from @src; Fail unless answered
    (200, with the master's metrics) within SCRAPE_MAX."""
    t = time.monotonic()
    try:
        s = socket.create_connection((host, port), timeout=SCRAPE_MAX + 1,
                                     source_address=(src, 0))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                  b"Connection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
    except OSError as e:
        raise Fail("a scrape from %s failed after %.2f s: %s" %
                   (src, time.monotonic() - t, e))
    dt = time.monotonic() - t
    if not data.startswith(b"HTTP/1.1 200") or FAMILY not in data:
        raise Fail("a scrape from %s got %r" % (src, data[:80]))
    if dt > SCRAPE_MAX:
        raise Fail("a scrape from %s took %.2f s" % (src, dt))
    return dt, data.decode(errors="replace")


def master_request(tool):
    t = time.monotonic()
    p = subprocess.run([tool, "status"], capture_output=True, timeout=10)
    dt = time.monotonic() - t
    if p.returncode or dt > MASTER_MAX:
        raise Fail("sweepfs status: status %d in %.2f s: %s" %
                   (p.returncode, dt, p.stderr.decode(errors="replace")))
    return dt


def phase(host, port, tool, sources, scraper, held_max):
    """Slow clients from @sources (one each), scrapes from @scraper:
    at most @held_max held after a second."""
    slow = [Slow(host, port, src) for src in sources]
    r = {"slow": len(slow), "scrapes": 0, "scrape_max_s": 0.0}
    start = time.monotonic()
    next_tick = start + 1
    held_checked = False
    try:
        while time.monotonic() - start < PHASE_S:
            for c in slow:
                c.poll()
            now = time.monotonic()
            if now >= next_tick:
                for c in slow:
                    c.tick()
                next_tick += 1
            if not held_checked and now - start >= 1.5:
                held = sum(1 for c in slow if not c.closed)
                r["held_after_1.5s"] = held
                if held > held_max or held < 1:
                    raise Fail("%d slow clients held (expected 1..%d)" %
                               (held, held_max))
                if tool:
                    r["master_request_s"] = round(master_request(tool), 3)
                held_checked = True
            r["scrape_max_s"] = max(r["scrape_max_s"],
                                    scrape(host, port, scraper))
            r["scrapes"] += 1
            time.sleep(0.3)
        for c in slow:
            c.poll()
        lives = [(c.closed or time.monotonic()) - c.t0 for c in slow]
        r["slow_life_max_s"] = round(max(lives), 2)
        open_ = [c for c in slow if not c.closed]
        if open_:
            raise Fail("%d slow clients still open after %.1f s" %
                       (len(open_), PHASE_S))
        if max(lives) > CLOSED_MAX:
            raise Fail("a slow client lived %.1f s (at most %.1f)" %
                       (max(lives), CLOSED_MAX))
        r["scrape_max_s"] = round(r["scrape_max_s"], 3)
        return r
    finally:
        for c in slow:
            c.close()


def sanitized(pid):
    """Whether the daemon runs under AddressSanitizer, whose quarantine
    keeps freed memory resident for a while."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    raise Fail("no VmRSS for pid %d" % pid)


def main():
    global FAMILY
    host, port, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    FAMILY = sys.argv[4].encode()
    tool = sys.argv[5] if len(sys.argv) > 5 else None
    out = {}
    try:
        before = rss(pid)
        out["one_host"] = phase(host, port, tool, ["127.0.0.1"] * 24,
                                "127.0.0.2", PER_HOST)
        out["many_hosts"] = phase(
            host, port, tool, ["127.0.0.%d" % (10 + i) for i in range(40)],
            "127.0.0.3", CONNS_MAX)
        # The attackers' own address is served again once they are gone.
        out["after_s"] = round(scrape(host, port, "127.0.0.1"), 3)
        # Each slow client the endpoint took was closed by its guard, and
        # counted: 4 from the one address, all 40 from the others.
        text = scrape_text(host, port, "127.0.0.1")
        closed = [float(line.split()[1]) for line in text.splitlines()
                  if line.startswith(
                      "sweepfs_metrics_connections_closed_total ")]
        out["closed_total"] = closed[0] if closed else None
        if not closed or closed[0] < PER_HOST + 40:
            raise Fail("sweepfs_metrics_connections_closed_total: %s, "
                       "expected at least %d" % (closed, PER_HOST + 40))
        out["rss_growth_bytes"] = rss(pid) - before
        budget = RSS_BUDGET * (4 if sanitized(pid) else 1)
        if out["rss_growth_bytes"] > budget:
            raise Fail("the daemon grew by %d bytes (budget %d)" %
                       (out["rss_growth_bytes"], budget))
    except Fail as e:
        print(json.dumps(out, indent=1))
        print("FAIL: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
