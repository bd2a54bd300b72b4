#!/usr/bin/env python3
"""Tree benchmark (issue 11): `mkdir -p` and create of an N-file tree ten
levels deep, one writer, as unpacking a source tree does: 1,000 empty
files in each leaf, leaves spread over the levels. Side by side in one
run: a sweepfs mount, a `-o wsync` mount of the same master, and a local
directory; files/s for each, as JSON with the run's context.

    bench/tree.py [-n 100000] [--build DIR] [--local DIR] [--also-opts OPTS]

Creates in one directory wait for each other in the kernel (it holds the
directory's lock across the request), so this measures the latency of a
create more than the master's throughput.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

PER_LEAF = 1000
LEVELS = 10


def make_tree(root, n):
    """The tree under @root; files/s."""
    t0 = time.perf_counter()
    for k in range(n // PER_LEAF):
        leaf = os.path.join(root, *["l%d_%d" % (lvl, (k >> lvl) % 3)
                                    for lvl in range(LEVELS)])
        os.makedirs(leaf, exist_ok=True)
        for i in range(PER_LEAF):
            os.close(os.open(os.path.join(leaf, "f%04d_%d.c" % (i, k)),
                             os.O_CREAT | os.O_WRONLY, 0o644))
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100000,
                    help="files (a multiple of 1000; default 100000)")
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--local", help="local directory to compare with "
                    "(default: a new one in /var/tmp)")
    ap.add_argument("--also-opts", metavar="OPTS",
                    help="a third mount of the same master with these "
                    "options (-o OPTS), side by side")
    ap.add_argument("--out", help="JSON result file (default: "
                    "tree-DATE.json here)")
    a = ap.parse_args()
    build = os.path.abspath(a.build) if a.build else cluster.default_build()
    local = a.local or tempfile.mkdtemp(prefix="sweepfs-tree-",
                                        dir="/var/tmp")
    c = cluster.Cluster(build=build)
    res = {}
    try:
        c.start()
        c.mount_extra("wsync", "wsync")
        sides = [("sweepfs", c.mnt)]
        if a.also_opts:
            c.mount_extra("also", a.also_opts)
            sides.append(("also", os.path.join(c.dir, "also")))
        sides += [("wsync", os.path.join(c.dir, "wsync")), ("local", local)]
        for label, base in sides:
            # The mounts share one namespace: a tree of its own for each,
            # or the second would only open the first one's files.
            res[label] = {"files_per_s": make_tree(
                os.path.join(base, "tree-" + label), a.n)}
            print("%-8s %8.0f files/s" % (label, res[label]["files_per_s"]),
                  flush=True)
    finally:
        c.stop()
        shutil.rmtree(os.path.join(local, "tree-local"), ignore_errors=True)
        if not a.local:
            shutil.rmtree(local, ignore_errors=True)
    res["ratio_to_wsync"] = (res["sweepfs"]["files_per_s"] /
                             res["wsync"]["files_per_s"])
    if a.also_opts:
        res["also"]["opts"] = a.also_opts
        res["also_ratio"] = (res["also"]["files_per_s"] /
                             res["sweepfs"]["files_per_s"])
    out = a.out or time.strftime("tree-%Y%m%d-%H%M%S.json")
    with open(out, "w") as f:
        json.dump({"context": cluster.context(build, {
            "benchmark": "tree", "n": a.n, "levels": LEVELS,
            "also_opts": a.also_opts,
            "per_leaf": PER_LEAF}), "results": res}, f, indent=1)
    print("result: %s" % out)


if __name__ == "__main__":
    main()
