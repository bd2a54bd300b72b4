#!/usr/bin/env python3
"""Sequential mutations, each waiting for the master: creates and unlinks
one at a time through a -o wsync mount (no delegation: every change is a
round trip and a changelog record), the latency a single-threaded client
sees. With --build-b, a second build's cluster runs beside the first in
the same run, in alternating rounds, and the ratios are printed (these
machines are noisy; alternation spreads the noise over both).

Per build: median and p99 microseconds per create and per unlink, and
what the master spent on them: CPU microseconds and context switches
(all its threads, /proc) per operation.

  bench/seqmut.py --build build --build-b /path/to/other/build -n 2000
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, write_result  # noqa: E402


def master_counts(pid):
    """(CPU seconds, context switches) of all of @pid's threads."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    switches = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if "ctxt_switches" in line:
                        switches += int(line.split()[1])
        except OSError:
            pass
    return cpu, switches


def one_round(mnt, rnd, n, lat):
    d = os.path.join(mnt, "r%d" % rnd)
    os.mkdir(d)
    names = [os.path.join(d, "f%d" % i) for i in range(n)]
    for p in names:
        t0 = time.perf_counter_ns()
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
        lat["create"].append(time.perf_counter_ns() - t0)
    for p in names:
        t0 = time.perf_counter_ns()
        os.unlink(p)
        lat["unlink"].append(time.perf_counter_ns() - t0)
    os.rmdir(d)


def summary(lat, cpu, switches, ops):
    out = {}
    for k, v in lat.items():
        v = sorted(v)
        out[k] = {"p50_us": round(statistics.median(v) / 1000, 1),
                  "p99_us": round(v[int(len(v) * 0.99)] / 1000, 1)}
    out["master_cpu_us_per_op"] = round(cpu * 1e6 / ops, 1)
    out["master_switches_per_op"] = round(switches / ops, 2)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--build-b", default=None)
    ap.add_argument("-n", type=int, default=2000, help="files a round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--set", action="append", default=[],
                    help="master config KEY=VALUE")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    builds = [a.build] + ([a.build_b] if a.build_b else [])
    sides = []
    for b in builds:
        c = Cluster(build=b, master_set=a.set, mount_opts="wsync").start()
        sides.append({"cluster": c, "pid": c.records["master"]["pid"],
                      "lat": {"create": [], "unlink": []},
                      "cpu": 0.0, "switches": 0})
    for rnd in range(a.rounds):
        order = sides if rnd % 2 == 0 else sides[::-1]
        for s in order:
            cpu0, sw0 = master_counts(s["pid"])
            one_round(s["cluster"].mnt, rnd, a.n, s["lat"])
            cpu1, sw1 = master_counts(s["pid"])
            s["cpu"] += cpu1 - cpu0
            s["switches"] += sw1 - sw0
    ops = 2 * a.n * a.rounds
    result = {"benchmark": "seqmut", "n": a.n, "rounds": a.rounds,
              "builds": builds, "master_config": a.set, "sides": []}
    for b, s in zip(builds, sides):
        r = summary(s["lat"], s["cpu"], s["switches"], ops)
        r["build"] = b
        result["sides"].append(r)
        print("%s: create p50/p99 %.1f/%.1f us, unlink %.1f/%.1f us; "
              "master %.1f us CPU and %.2f switches an op" %
              (b, r["create"]["p50_us"], r["create"]["p99_us"],
               r["unlink"]["p50_us"], r["unlink"]["p99_us"],
               r["master_cpu_us_per_op"], r["master_switches_per_op"]))
        s["cluster"].stop()
    if len(sides) == 2:
        a_, b_ = result["sides"]
        ratios = {k: round(b_[k]["p50_us"] / a_[k]["p50_us"], 3)
                  for k in ("create", "unlink")}
        result["b_over_a_p50"] = ratios
        print("b over a, p50 latency: create x%.3f, unlink x%.3f" %
              (ratios["create"], ratios["unlink"]))
    if a.out:
        write_result(result, a.build or sides[0]["cluster"].build, a.out)


if __name__ == "__main__":
    main()
