#!/usr/bin/env python3
"""What an admin command costs against a master holding N files.

    bench/toolcost.py [-n N] [--build B]... [--runs R] [--restarts K]
                      [--out FILE]

For each build B in turn: a checkpoint of N empty files in two
directories is seeded (bench/nsbench.c, as bench/seed.py does), its master
started in a machine of its own (a network namespace), one mount on the
host and one in a client machine, and each of `sweepfs status`,
`seteattr -f snapshot -r d0`, `deleattr -f snapshot -r d0` and
`geteattr d0` run R times (7) from the host and from the client machine,
timed as a user meets them: the whole process, and from the machine
`nsenter --net` with it, as bench/seed.py runs its tools (timed on its
own too). A command whose cost grows with the tree shows it here at 34 M
files (issue 29: the snapshot flag and its clear in O(1)), beside one
that does not (status). Then, K times (--restarts, 3; 0: none), the
flag is set, the master stopped cleanly (it writes a checkpoint) and
started again, and the first clear after the start timed from the host,
with the names the master's walks visited for it (`status`: the
checkpoint wrote the flag's mark out on every name before 2026-12-03,
and that clear walked them all with the loop held). Needs root; N files
take ~150 B each of the master's memory.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster  # noqa: E402
import seed  # noqa: E402
import swcluster  # noqa: E402

COMMANDS = (("status", ()),
            ("seteattr", ("-f", "snapshot", "-r", "{d0}")),
            ("deleattr", ("-f", "snapshot", "-r", "{d0}")),
            ("geteattr", ("{d0}",)))


def timed(argv, runs):
    """Milliseconds of each of @runs runs of @argv (which must succeed)."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def stats(ms):
    return {"median_ms": statistics.median(ms), "min_ms": min(ms),
            "max_ms": max(ms), "runs_ms": ms}


def walked(cl):
    """Names the snapshot flag's walks visited since the master started."""
    return cl.info()["snapflag_walked"]


def clear_after_restart(cl, d0, k):
    """@k times: the flag on @d0, a clean stop and start, then the clear
    timed (ms) with what it walked."""
    out = []
    for i in range(k):
        cl.tool("seteattr", "-f", "snapshot", "-r", d0)
        marks = cl.info()["snapflag_marks"]
        t0 = time.perf_counter()
        swcluster.Cluster.stop(cl, "master", timeout=600)
        stop_s = time.perf_counter() - t0
        cl.start_master()
        start = seed.master_start(cl.records["master"]["log"])
        w0 = walked(cl)
        ms = timed([cl.bins.tool, "-m", cl.address, "deleattr", "-f",
                    "snapshot", "-r", d0], 1)[0]
        r = {"ms": ms, "walked": walked(cl) - w0, "marks_before": marks,
             "stop_s": stop_s, "start": start}
        print("  restart %d: stopped in %.1f s, up in %.1f s; clear %.1f ms,"
              " %d names walked" % (i + 1, stop_s, start.get("seconds", 0),
                                   ms, r["walked"]), flush=True)
        out.append(r)
    return out


def one_build(build, n, runs, net, restarts=0):
    kw = {"netns": net.netns("srv"), "host": net.address("srv"),
          "port": seed.MASTER_PORT,
          "mount_net": seed.machine_net(net, "main")}
    cl = cluster.Cluster(build, **kw)
    cl.ready_s = max(cl.ready_s, 30 + n / 250_000)
    data = os.path.join(cl.dir, "meta")
    os.makedirs(data)
    print("%s: seeding %d files" % (build, n), file=sys.stderr, flush=True)
    seed_s = seed.seed_checkpoint(build, data, n)
    r = {"build": build, "commit": cluster.build_commit(build),
         "seed_s": seed_s, "commands": {}}
    try:
        cl.start()
        r["start"] = seed.master_start(cl.records["master"]["log"])
        client = net.netns("c0")
        where = {"host": (None, cl.mount_extra("c-host")),
                 "machine": (client, cl.mount_extra(
                     "c-machine", net=seed.machine_net(net, "c0")))}
        r["enter_machine"] = stats(timed(
            swcluster.in_netns(client, ["true"]), runs))
        for label, (ns, mnt) in where.items():
            for name, args in COMMANDS:
                argv = [cl.bins.tool, "-m", cl.address, name] + [
                    a.format(d0=os.path.join(mnt, "d0")) for a in args]
                if ns:
                    argv = swcluster.in_netns(ns, argv)
                s = stats(timed(argv, runs))
                r["commands"]["%s %s" % (label, name)] = s
                print("%s %-8s %-9s median %6.1f ms, min %6.1f, max %6.1f"
                      % (os.path.basename(os.path.dirname(build)) or build,
                         label, name, s["median_ms"], s["min_ms"],
                         s["max_ms"]), flush=True)
        if restarts:
            r["clear_after_restart"] = clear_after_restart(
                cl, os.path.join(where["host"][1], "d0"), restarts)
    finally:
        cl.stop()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1_000_000,
                    help="files in the seeded tree (two directories)")
    ap.add_argument("--build", action="append",
                    help="build directory (repeat to compare; ./build)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--restarts", type=int, default=3,
                    help="clean restarts, each followed by a timed clear")
    ap.add_argument("--subnet", default=seed.DEFAULT_SUBNET)
    ap.add_argument("--out", default="toolcost.json")
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in a.build or
              [cluster.default_build()]]
    if not seed.fits(a.n, 0):
        raise SystemExit("%d files do not fit in this machine's memory" %
                         a.n)
    net = seed.make_machines(types.SimpleNamespace(in_place=True, k=1,
                                                   subnet=a.subnet))
    try:
        runs = [one_build(b, a.n, a.runs, net, a.restarts) for b in builds]
    finally:
        net.destroy(log=lambda msg: print(msg, file=sys.stderr))
    cluster.write_result({"benchmark": "toolcost", "n": a.n,
                          "builds": runs}, builds[-1], a.out)


if __name__ == "__main__":
    main()
