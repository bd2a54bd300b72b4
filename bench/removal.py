#!/usr/bin/env python3
"""Removal benchmark (issue 5): how long `sweepfs rmr` and `sweepfs
rmsnapshot` take to return on trees of each size, how fast the purge then
frees the nodes, and what latency another client sees for stat and create
while a purge of the biggest tree runs, against the same client with the
master idle. One run, one master; JSON result with the run's context.

Trees are made quickly with snapshots: a directory of 1,000 empty files
is copied N/1,000 times (each copy is small enough to be made at once).

  bench/removal.py --sizes 100000,1000000
"""

import argparse
import json
import multiprocessing as mp
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

PER_DIR = 1000


def build_tree(cl, mnt, name, n):
    """mnt/name: n/1000 directories of 1000 empty files. Returns seconds."""
    base = os.path.join(mnt, "base")
    if not os.path.isdir(base):
        os.mkdir(base)
        for i in range(PER_DIR):
            os.close(os.open(os.path.join(base, "f%04d" % i),
                             os.O_CREAT | os.O_WRONLY, 0o644))
    root = os.path.join(mnt, name)
    os.mkdir(root)
    t0 = time.perf_counter()
    for i in range(max(1, n // PER_DIR)):
        cl.tool("snapshot", base, os.path.join(root, "s%05d" % i))
    return time.perf_counter() - t0


def removed(out):
    """(nodes, ms) from `sweepfs rmr -v` / `rmsnapshot -v`."""
    m = re.search(r": ([0-9]+) nodes in ([0-9.]+) ms", out)
    if not m:
        raise SystemExit("cannot read the tool's timing from %r" % out)
    return int(m.group(1)), float(m.group(2))


def wait_purge(cl, timeout=600, poll=0.01):
    """Until the purge queue is empty: (seconds, nodes freed, busy ms).
    Each poll runs the sweepfs tool: poll slowly while probing."""
    before = cl.info()
    t0 = time.perf_counter()
    while True:
        s = cl.info()
        if s["purge_left"] == 0 and s["purge_roots"] == 0:
            break
        if time.perf_counter() - t0 > timeout:
            raise SystemExit("purge did not finish in %d s" % timeout)
        time.sleep(poll)
    wall = time.perf_counter() - t0
    return (wall, s["purged"] - before["purged"],
            s["purge_busy_ms"] - before["purge_busy_ms"])


# ---- the second client's probe ----------------------------------------------

def probe(mnt, tag, stop, ops, out):
    """stat a file and create a new one, in turn, timing each call."""
    d = os.path.join(mnt, "probe-" + tag)
    os.mkdir(d)
    target = os.path.join(d, "target")
    os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    stat_ns, create_ns = [], []
    i = 0
    while not stop.is_set() and i < ops:
        t = time.perf_counter_ns()
        os.stat(target)
        stat_ns.append(time.perf_counter_ns() - t)
        p = os.path.join(d, "c%07d" % i)
        t = time.perf_counter_ns()
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        create_ns.append(time.perf_counter_ns() - t)
        i += 1
    out.put((stat_ns, create_ns))


def summary(ns):
    if not ns:
        return None
    s = sorted(ns)
    return {"n": len(s), "p50_us": s[len(s) // 2] / 1e3,
            "p99_us": s[min(len(s) - 1, int(len(s) * 0.99))] / 1e3,
            "max_us": s[-1] / 1e3, "mean_us": statistics.mean(s) / 1e3}


def run_probe(mnt, tag, ops, during=None):
    """Probe for @ops rounds, or while @during() runs (then stop)."""
    stop = mp.Event()
    out = mp.Queue()
    p = mp.Process(target=probe, args=(mnt, tag, stop, ops, out))
    p.start()
    extra = None
    if during:
        extra = during()
        stop.set()
    stat_ns, create_ns = out.get()
    p.join()
    return {"stat": summary(stat_ns), "create": summary(create_ns)}, extra


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000,1000000",
                    help="tree sizes in files (100000,1000000)")
    ap.add_argument("--idle-ops", type=int, default=5000,
                    help="probe rounds with the master idle (5000)")
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--set", action="append", default=[],
                    help="master config KEY=VALUE")
    ap.add_argument("--out", help="JSON result file")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    build = os.path.abspath(a.build) if a.build else cluster.default_build()
    cl = cluster.Cluster(build, master_set=a.set).start()
    # The second client sees every stat at the master: no caching.
    probe_mnt = cl.mount_extra(
        "probe", "attr_timeout=0,entry_timeout=0,negative_timeout=0")
    results = {"sizes": {}}

    for n in sizes:
        r = {}
        print("rmr: building %d files" % n, file=sys.stderr)
        r["build_s"] = build_tree(cl, cl.mnt, "rmr%d" % n, n)
        t0 = time.perf_counter()
        out = cl.tool("rmr", "-v", os.path.join(cl.mnt, "rmr%d" % n))
        r["rmr_tool_s"] = time.perf_counter() - t0
        r["rmr_nodes"], r["rmr_ms"] = removed(out)
        wall, freed, busy = wait_purge(cl)
        r["purge"] = {"seconds": wall, "nodes": freed, "busy_ms": busy,
                      "nodes_per_s": freed / wall if wall else None,
                      "nodes_per_busy_s": freed / (busy / 1e3)
                      if busy else None}

        print("rmsnapshot: building %d files" % n, file=sys.stderr)
        build_tree(cl, cl.mnt, "snap%d" % n, n)
        cl.tool("seteattr", "-f", "snapshot", "-r",
                os.path.join(cl.mnt, "snap%d" % n))
        t0 = time.perf_counter()
        out = cl.tool("rmsnapshot", "-v", os.path.join(cl.mnt, "snap%d" % n))
        r["rmsnapshot_tool_s"] = time.perf_counter() - t0
        r["rmsnapshot_nodes"], r["rmsnapshot_ms"] = removed(out)
        wait_purge(cl)
        results["sizes"][str(n)] = r
        print("  %d files: rmr %.2f ms, rmsnapshot %.2f ms, purge %.0f "
              "nodes/s" % (n, r["rmr_ms"], r["rmsnapshot_ms"],
                           r["purge"]["nodes_per_s"] or 0), file=sys.stderr)

    # Latency a second client sees: idle, then during the biggest purge.
    big = max(sizes)
    print("probe: idle", file=sys.stderr)
    before = cl.status()
    idle, _ = run_probe(probe_mnt, "idle", a.idle_ops)
    after = cl.status()
    getattrs = (after["total"]["requests"].get("getattr", 0) -
                before["total"]["requests"].get("getattr", 0))
    print("probe: building %d files to purge" % big, file=sys.stderr)
    build_tree(cl, cl.mnt, "busy%d" % big, big)

    def purge_it():
        time.sleep(0.2)  # the probe gets going first
        cl.tool("rmr", os.path.join(cl.mnt, "busy%d" % big))
        return wait_purge(cl, poll=0.25)

    busy, (wall, freed, busy_ms) = run_probe(probe_mnt, "busy", 10 ** 9,
                                             purge_it)
    bg = cl.info()
    results["probe"] = {
        "idle": idle, "during_purge": busy,
        "purge": {"seconds": wall, "nodes": freed, "busy_ms": busy_ms},
        "idle_getattr_requests_at_master": getattrs,
        # The loop's side: the longest background slice is the most a
        # request can have waited behind the purge.
        "background": {k: bg.get(k) for k in (
            "bg_slices", "bg_slice_max_us", "bg_slice_max_cpu_us",
            "bg_slices_over_1ms")},
        "ratio_p99": {
            k: busy[k]["p99_us"] / idle[k]["p99_us"] for k in ("stat",
                                                               "create")},
    }
    cl.stop()

    print("\n%-10s %12s %14s" % ("files", "rmr ms", "rmsnapshot ms"))
    for n in sizes:
        r = results["sizes"][str(n)]
        print("%-10d %12.2f %14.2f" % (n, r["rmr_ms"], r["rmsnapshot_ms"]))
    if len(sizes) > 1:
        lo, hi = str(min(sizes)), str(max(sizes))
        print("ratio %s/%s: rmr %.2f, rmsnapshot %.2f" % (
            hi, lo,
            results["sizes"][hi]["rmr_ms"] / results["sizes"][lo]["rmr_ms"],
            results["sizes"][hi]["rmsnapshot_ms"] /
            results["sizes"][lo]["rmsnapshot_ms"]))
    for n in sizes:
        p = results["sizes"][str(n)]["purge"]
        print("purge of %d: %.0f nodes/s wall, %.0f nodes per busy second"
              % (n, p["nodes_per_s"] or 0, p["nodes_per_busy_s"] or 0))
    print("\nsecond client, %d-file purge running vs master idle "
          "(%d getattr requests reached the master in %d idle rounds):"
          % (big, getattrs, a.idle_ops))
    print("%-8s %-6s %10s %10s %10s" % ("op", "", "p50 us", "p99 us",
                                         "max us"))
    for op in ("stat", "create"):
        for label, d in (("idle", idle), ("purge", busy)):
            s = d[op]
            print("%-8s %-6s %10.1f %10.1f %10.1f" % (
                op, label, s["p50_us"], s["p99_us"], s["max_us"]))
        print("%-8s p99 ratio %.2f" % (op, results["probe"]["ratio_p99"][op]))
    b = results["probe"]["background"]
    print("master: %s background slices, longest %.3f ms (%.3f ms on the "
          "CPU), %s over 1 ms" % (
              b["bg_slices"], (b["bg_slice_max_us"] or 0) / 1000,
              (b.get("bg_slice_max_cpu_us") or 0) / 1000,
              b["bg_slices_over_1ms"]))

    ctx = cluster.context(build, {"benchmark": "removal", "sizes": sizes,
                                  "master_config": a.set,
                                  "loadavg": os.getloadavg()})
    out = a.out
    if not out:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "results")
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, "removal-%s.json" %
                           time.strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump({"context": ctx, "results": results}, f, indent=1)
    print("\nresult: %s" % out)


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()
