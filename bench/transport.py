#!/usr/bin/env python3
"""What the FUSE transport costs: `rm -rf` of N empty files through
freshly started instances of libfuse's passthrough_ll example (or any
program that takes `-f -o source=DIR MOUNTPOINT`), run in turns, the
same tree each time, made beneath the instance before it starts. With
the example built from a libfuse that has FUSE-over-io-uring (3.18 and
later, `-Denable-io-uring=true`; Debian 12 ships 3.14), a side with
`-o io_uring` against one without shows what the kernel's io_uring
transport gains over reading /dev/fuse on this machine.

  bench/transport.py -n 200000 --rounds 2 \\
      --side 3.14=/usr/local/bin/passthrough_ll \\
      --side 3.19=/opt/libfuse/passthrough_ll \\
      --side 3.19-uring='/opt/libfuse/passthrough_ll -o io_uring'

io_uring needs Linux 6.14 or later, and the fuse module's enable_uring
parameter set (/sys/module/fuse/parameters/enable_uring); the program
says whether it is. Made beneath the instance, the tree is known to the
kernel only while it is removed: passthrough_ll keeps a descriptor for
every inode the kernel knows, and a process may hold too few for N.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import fuse_enable_uring  # noqa: E402
from metadata import drop_caches  # noqa: E402


def make_tree(src, n):
    os.makedirs(os.path.join(src, "t"))
    for i in range(n):
        os.close(os.open(os.path.join(src, "t", "f%d" % i),
                         os.O_CREAT | os.O_WRONLY, 0o644))
    drop_caches()


def rm_rf(cmd, src, mnt, n, log):
    """rm -rf of @src's tree through a fresh instance of @cmd: files/s."""
    make_tree(src, n)
    with open(log, "a") as err:
        p = subprocess.Popen(cmd + ["-f", "-o", "source=" + src, mnt],
                             stdout=subprocess.DEVNULL, stderr=err)
    try:
        for _ in range(200):
            if os.path.ismount(mnt):
                break
            if p.poll() is not None:
                raise SystemExit("%s exited with %d (see %s)" %
                                 (cmd[0], p.returncode, log))
            time.sleep(0.05)
        else:
            raise SystemExit("%s did not mount on %s" % (cmd[0], mnt))
        t0 = time.perf_counter()
        rc = subprocess.call(["rm", "-rf", os.path.join(mnt, "t")])
        wall = time.perf_counter() - t0
    finally:
        subprocess.call(["umount", mnt], stderr=subprocess.DEVNULL)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    left = os.path.join(src, "t")
    missed = len(os.listdir(left)) if os.path.exists(left) else 0
    shutil.rmtree(left, ignore_errors=True)
    if rc or missed:
        raise SystemExit("rm -rf through %s: status %d, %d files left" %
                         (" ".join(cmd), rc, missed))
    return n / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200000, help="files (200000)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="turns of every side (2)")
    ap.add_argument("--side", action="append", required=True,
                    metavar="LABEL=COMMAND",
                    help="a program and its options, e.g. "
                    "'uring=passthrough_ll -o io_uring'")
    ap.add_argument("--out", help="JSON result file")
    a = ap.parse_args()

    sides = []
    for s in a.side:
        label, sep, cmd = s.partition("=")
        if not sep or not cmd:
            ap.error("--side wants LABEL=COMMAND, not %r" % s)
        sides.append((label, shlex.split(cmd)))
    uring = fuse_enable_uring() or "absent"
    work = tempfile.mkdtemp(prefix="sweepfs-transport-", dir="/var/tmp")
    src, mnt = os.path.join(work, "src"), os.path.join(work, "mnt")
    os.makedirs(src)
    os.makedirs(mnt)
    runs = {label: [] for label, _ in sides}
    print("transport: rm -rf of %d files, %d round(s); fuse enable_uring: "
          "%s" % (a.n, a.rounds, uring), file=sys.stderr)
    try:
        for r in range(a.rounds):
            for label, cmd in sides:
                rate = rm_rf(cmd, src, mnt, a.n,
                             os.path.join(work, label + ".log"))
                runs[label].append(rate)
                print("  round %d %-14s %8.0f files/s" % (r + 1, label, rate),
                      file=sys.stderr)
    finally:
        subprocess.call(["umount", mnt], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)

    first = sides[0][0]
    base = sum(runs[first]) / len(runs[first])
    print("\n%-14s %10s %10s %10s" % ("side", "mean/s", "min/s", "x " + first))
    for label, _ in sides:
        v = runs[label]
        mean = sum(v) / len(v)
        print("%-14s %10.0f %10.0f %10.2f" % (label, mean, min(v),
                                              mean / base))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"n": a.n, "rounds": a.rounds, "enable_uring": uring,
                       "kernel": os.uname().release,
                       "sides": {label: {"command": cmd,
                                         "files_per_s": runs[label]}
                                 for label, cmd in sides}}, f, indent=1)
        print("\nresult: %s" % a.out)


if __name__ == "__main__":
    main()
