#!/usr/bin/env python3
"""`sweepfs rmr` on the mount that made the tree (issue 29): a tree of N
empty files in two directories is created through a mount, which holds
both directories delegated and has handed the kernel every name; then
`sweepfs rmr` of the tree, whose recalls that mount must answer before
the master removes anything. Reported: the tool's wall time, and the
same on a fresh mount (nothing cached) as the yardstick. Several builds
side by side in one run (--build A --build B), ratios against the first.

  bench/rmr_maker.py -n 200000 --build build --build /tmp/base/build
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402


def make_tree(root, n):
    """root/d0, root/d1: n/2 empty files each, made through the mount."""
    os.mkdir(root)
    for d in range(2):
        path = os.path.join(root, "d%d" % d)
        os.mkdir(path)
        for i in range(n // 2):
            os.close(os.open(os.path.join(path, "f%08d" % i),
                             os.O_CREAT | os.O_WRONLY, 0o644))


def timed_rmr(cl, path):
    """Wall milliseconds of `sweepfs rmr PATH`."""
    t0 = time.perf_counter()
    cl.tool("rmr", path)
    return (time.perf_counter() - t0) * 1000


def run(build, n, opts):
    """{maker_ms, fresh_ms, make_s} for one build."""
    cl = cluster.Cluster(build=build, mount_opts=opts).start()
    try:
        t0 = time.perf_counter()
        make_tree(os.path.join(cl.mnt, "maker"), n)
        make_s = time.perf_counter() - t0
        maker_ms = timed_rmr(cl, os.path.join(cl.mnt, "maker"))
        # The yardstick: the same tree, from a mount that cached nothing.
        make_tree(os.path.join(cl.mnt, "fresh"), n)
        cl.unmount(cl.mnt)
        cl.mount(cl.mnt, opts=opts)
        fresh_ms = timed_rmr(cl, os.path.join(cl.mnt, "fresh"))
    finally:
        cl.stop()
    return {"maker_ms": round(maker_ms, 1), "fresh_ms": round(fresh_ms, 1),
            "make_s": round(make_s, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=200000,
                    help="files in the tree, in two directories")
    ap.add_argument("--build", action="append",
                    help="build directory; repeat to compare builds")
    ap.add_argument("-o", dest="opts", default="",
                    help="mount options (e.g. io_uring)")
    ap.add_argument("--out", help="JSON result file")
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in a.build or
              [cluster.default_build()]]
    rows = []
    for b in builds:
        r = run(b, a.n, a.opts)
        r["build"] = b
        rows.append(r)
    print("%-40s %12s %12s %8s" % ("build", "maker ms", "fresh ms", "ratio"))
    for r in rows:
        print("%-40s %12.1f %12.1f %8.2f" %
              (r["build"][-40:], r["maker_ms"], r["fresh_ms"],
               r["maker_ms"] / rows[0]["maker_ms"]))
    if a.out:
        cluster.write_result({"files": a.n, "mount_opts": a.opts,
                              "runs": rows}, builds[0], a.out)


if __name__ == "__main__":
    main()
