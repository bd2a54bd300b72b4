#!/usr/bin/env python3
"""What an idle master costs: its wake-ups and its CPU while nothing
happens.

    bench/idle.py [--build B]... [--rounds R] [--seconds S] [--mounts M]
                  [--out FILE]

For each build B in turn (--rounds times, alternating, so that old and
new binaries see the same machine), a master with M mounts (1) and no
chunkserver starts, is left alone for 3 s, and then `perf stat -p` counts
its context switches and CPU time for S seconds (10). An idle master
wakes only for its own timers and its mounts' keep-alives, so the counts
hardly drift with the machine's load: they say how often it is woken,
and the CPU time what each wake-up costs. Needs perf (linux-perf).
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster  # noqa: E402


def perf_stat(pid, seconds):
    """{event: count} of @pid over @seconds (task-clock in ms)."""
    out = subprocess.run(["perf", "stat", "-x,", "-e",
                          "context-switches,task-clock", "-p", str(pid),
                          "--", "sleep", str(seconds)],
                         capture_output=True, text=True, check=True).stderr
    counts = {}
    for line in out.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2] in ("context-switches", "task-clock"):
            try:
                counts[f[2]] = float(f[0])
            except ValueError:
                raise SystemExit("perf counted no %s: %s" % (f[2], line))
    if len(counts) != 2:
        raise SystemExit("perf stat said: %s" % out.strip())
    return counts


def one(build, mounts, seconds):
    c = cluster.Cluster(build=build).start()
    try:
        for i in range(1, mounts):
            c.mount_extra("mnt%d" % i)
        time.sleep(3)
        counts = perf_stat(c.records["master"]["pid"], seconds)
    finally:
        c.stop()
    return {"build": build, "commit": cluster.build_commit(build),
            "mounts": mounts, "seconds": seconds,
            "context_switches": counts["context-switches"],
            "cpu_ms": counts["task-clock"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append",
                    help="build directory (repeat to compare; ./build)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--mounts", type=int, default=1)
    ap.add_argument("--out", default="idle.json")
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in a.build or
              [cluster.default_build()]]
    runs = []
    for r in range(a.rounds):
        for b in builds:
            x = one(b, a.mounts, a.seconds)
            runs.append(x)
            print("%s: %d context switches, %.1f ms of CPU in %d s "
                  "(%d mounts)" % (b, x["context_switches"], x["cpu_ms"],
                                   a.seconds, a.mounts), flush=True)
    cluster.write_result({"benchmark": "idle", "runs": runs}, builds[-1],
                         a.out)


if __name__ == "__main__":
    main()
