#!/usr/bin/env python3
"""`sweepfs rmr` on the mount that made the tree (issue 29): a tree of N
empty files in two directories is created through a mount, which holds
both directories delegated and has handed the kernel every name; then
`sweepfs rmr` of the tree, whose recalls that mount must answer before
the master removes anything. Reported: the tool's wall time, and the
same on a fresh mount (nothing cached) as the yardstick. Several builds
side by side in one run (--build A --build B), ratios against the first.
With --user UID the tree is made, and removed, by that user rather than
root: the master then checks the user may empty every directory of it
before it removes anything (rmr.c), on its loop.

  bench/rmr_maker.py -n 200000 --build build --build /tmp/base/build
  bench/rmr_maker.py -n 1000000 --user 4001 --build A --build B
"""

import argparse
import os
import subprocess
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


def make_tree_as(root, n, uid):
    """make_tree(), by @uid (None: this process) in a child."""
    if uid is None:
        make_tree(root, n)
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            make_tree(root, n)
            os._exit(0)
        except BaseException as e:  # noqa: B036 (the child must exit)
            print("making %s as uid %d: %s" % (root, uid, e),
                  file=sys.stderr)
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    if st:
        raise SystemExit("making the tree as uid %d failed" % uid)


def timed_rmr(cl, path, uid=None):
    """Wall milliseconds of `sweepfs rmr PATH`, as @uid if given."""
    cmd = [cl.bins.tool, "-m", cl.master_address(), "rmr", path]
    if uid is not None:
        cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid,
               "--clear-groups", "--"] + cmd
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode:
        raise SystemExit("%s failed (%d): %s" %
                         (" ".join(cmd), r.returncode, r.stderr.strip()))
    return ms


def run(build, n, opts, uid=None):
    """{maker_ms, fresh_ms, make_s} for one build."""
    cl = cluster.Cluster(build=build, mount_opts=opts).start()
    try:
        if uid is not None:
            # The bench's own directory (mkdtemp: 0700) must let the
            # user through to the mount.
            os.chmod(os.path.dirname(cl.mnt), 0o711)
            os.chmod(cl.mnt, 0o777)
        t0 = time.perf_counter()
        make_tree_as(os.path.join(cl.mnt, "maker"), n, uid)
        make_s = time.perf_counter() - t0
        maker_ms = timed_rmr(cl, os.path.join(cl.mnt, "maker"), uid)
        # The yardstick: the same tree, from a mount that cached nothing.
        make_tree_as(os.path.join(cl.mnt, "fresh"), n, uid)
        cl.unmount(cl.mnt)
        cl.mount(cl.mnt, opts=opts)
        fresh_ms = timed_rmr(cl, os.path.join(cl.mnt, "fresh"), uid)
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
    ap.add_argument("--user", type=int, default=None, metavar="UID",
                    help="make and remove the tree as this user")
    ap.add_argument("--out", help="JSON result file")
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in a.build or
              [cluster.default_build()]]
    rows = []
    for b in builds:
        r = run(b, a.n, a.opts, a.user)
        r["build"] = b
        rows.append(r)
    print("%-40s %12s %12s %8s" % ("build", "maker ms", "fresh ms", "ratio"))
    for r in rows:
        print("%-40s %12.1f %12.1f %8.2f" %
              (r["build"][-40:], r["maker_ms"], r["fresh_ms"],
               r["maker_ms"] / rows[0]["maker_ms"]))
    if a.out:
        cluster.write_result({"files": a.n, "mount_opts": a.opts,
                              "user": a.user, "runs": rows}, builds[0],
                             a.out)


if __name__ == "__main__":
    main()
