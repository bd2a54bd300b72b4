#!/usr/bin/env python3
"""Instructions the master executes per create and per unlink, counted
by valgrind's callgrind: a number that does not drift with the machine's
load, for comparing two builds of the master (a refactoring must not make
the same work cost more).

The master runs under callgrind; a mount creates N empty files in one
directory and then unlinks them. The counters are zeroed before each
phase and dumped after it (callgrind_control), so start-up, the mount's
hello and the listing do not count. Each phase is run with the mount's
default (delegated, batched removals) and with -o wsync (one request per
operation), each on a fresh mount.

    bench/callgrind_master.py [--build DIR] [-n 5000] [--json FILE]

Compare two builds side by side:

    bench/callgrind_master.py --build build-old --build build
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402
import swcluster  # noqa: E402


def wrap_master(build, outdir):
    """A script that runs the build's master under callgrind."""
    real = swcluster.Binaries.find(build).master
    path = os.path.join(outdir, "master-callgrind")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec valgrind -q --tool=callgrind "
                "--callgrind-out-file=%s/cg.out.%%p %s \"$@\"\n" %
                (outdir, real))
    os.chmod(path, 0o755)
    return path


def dump_total(pid, outdir, tag):
    """Dump callgrind's counters for @pid now; the instructions since the
    last zeroing."""
    before = set(glob.glob(os.path.join(outdir, "cg.out.*")))
    subprocess.run(["callgrind_control", "-d", tag, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = set(glob.glob(os.path.join(outdir, "cg.out.*"))) - before
        for p in new:
            with open(p) as f:
                text = f.read()
            m = re.search(r"^summary: (\d+)", text, re.M) or \
                re.search(r"^totals: (\d+)", text, re.M)
            if m:
                return int(m.group(1))
        time.sleep(0.2)
    raise SystemExit("callgrind wrote no dump for %s" % tag)


def zero(pid):
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_one(build, n, opts, keep=None):
    work = tempfile.mkdtemp(prefix="sweepfs-cg-")
    c = cluster.Cluster(build=build, base=work, mount_opts=opts)
    c.bins.paths["master"] = c.bins.master = wrap_master(c.build, work)
    try:
        c.start_master()
        pid = c.records["master"]["pid"]
        c.mount(c.mnt, opts=opts)
        d = os.path.join(c.mnt, "d")
        os.mkdir(d)
        os.listdir(d)
        zero(pid)
        for i in range(n):
            os.close(os.open(os.path.join(d, "f%07d" % i),
                             os.O_CREAT | os.O_WRONLY, 0o644))
        os.stat(d)  # the creates reached the master
        create = dump_total(pid, work, "create")
        zero(pid)
        for i in range(n):
            os.unlink(os.path.join(d, "f%07d" % i))
        os.rmdir(d)  # flushes any batch first
        unlink = dump_total(pid, work, "unlink")
        return {"create": create / n, "unlink": unlink / n}
    finally:
        c.stop()
        if keep:
            os.makedirs(keep, exist_ok=True)
            tag = (opts or "default").replace(",", "_")
            for p in glob.glob(os.path.join(work, "cg.out.*")):
                shutil.copy(p, os.path.join(keep, "%s.%s" % (
                    tag, os.path.basename(p))))
        subprocess.run(["rm", "-rf", work])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append",
                    help="build directory (repeat to compare)")
    ap.add_argument("-n", type=int, default=5000, help="files per phase")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep callgrind's dumps here, for callgrind_annotate")
    a = ap.parse_args()
    for prog in ("valgrind", "callgrind_control"):
        if not shutil.which(prog):
            raise SystemExit("callgrind_master: no %s; apt-get install "
                             "valgrind" % prog)
    builds = a.build or [cluster.default_build()]
    rows = []
    for b in builds:
        for mode, opts in (("default", ""), ("wsync", "wsync")):
            r = run_one(os.path.abspath(b), a.n, opts, a.keep)
            r.update(build=b, mode=mode, n=a.n)
            rows.append(r)
            print("%-24s %-8s create %8.0f Ir/file   unlink %8.0f Ir/file"
                  % (b, mode, r["create"], r["unlink"]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
