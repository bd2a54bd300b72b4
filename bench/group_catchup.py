#!/usr/bin/env python3
"""How long a member of a group of masters takes to catch up from the
leader's checkpoint (master/catchup.h), and what it costs the clients
meanwhile: a group of three on loopback with default settings, N empty
files made through a mount by W writers; then a follower is stopped, its
data directory emptied but for its keys, and started again. It finds the
log it lacks gone from etcd, reads the leader's checkpoint, loads it and
follows.

Prints the time from start to following, split as the member logs it
(reading the checkpoint, loading it), the checkpoint's size, and the
latency of statfs(2) through the mount, a request to the leader each
(p50/p99/max), while the member catches up, beside the same right before
it; writes a JSON result.

  bench/group_catchup.py -n 1000000 -w 4

With --seed DIR the first member starts from DIR's checkpoint and
changelog instead (as a master turned into a group does), which makes
the post's size affordable: `sweepfs-nsbench make DIR 34000000 0 2
create` writes 34 M files in a minute, where making them through a
mount takes hours. The others then catch up from the leader as the
group starts, and once more when measured.
"""

import argparse
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import cluster  # noqa: E402
import swgroup  # noqa: E402
from group import mount, phase, _create  # noqa: E402
from swcluster import unmount  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))] if v else 0.0


class Prober(threading.Thread):
    """statfs(2) of the mount, back to back: every one is a request to
    the leader (a stat would be answered by the kernel's cache)."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.lat = []
        self.on = True

    def run(self):
        while self.on:
            t0 = time.monotonic()
            os.statvfs(self.path)
            self.lat.append(time.monotonic() - t0)
            time.sleep(0.001)

    def take(self):
        v, self.lat = self.lat, []
        return {"n": len(v), "p50_ms": pct(v, 0.5) * 1e3,
                "p99_ms": pct(v, 0.99) * 1e3,
                "max_ms": max(v, default=0) * 1e3}


def log_of(group, i):
    with open(group.path("m%d.log" % i), errors="replace") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1000000, help="files (1000000)")
    ap.add_argument("-w", "--writers", type=int, default=4)
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (logs)")
    ap.add_argument("--seed", metavar="DIR",
                    help="start the first member from DIR's checkpoint "
                    "and changelog instead of making -n files")
    ap.add_argument("--drop-caches", action="store_true",
                    help="drop the page cache before the member starts "
                    "(the leader reads its checkpoint from disk)")
    ap.add_argument("--out", help="JSON result "
                    "(default: bench-group-catchup.json)")
    a = ap.parse_args()
    build = a.build or cluster.default_build()
    if not shutil.which("etcd"):
        raise SystemExit("etcd is not installed (apt-get install "
                         "etcd-server)")
    per = a.n // a.writers
    base = tempfile.mkdtemp(prefix="sweepfs-bench-catchup.")
    group = swgroup.Group(base, build, swgroup.loopback_members(3),
                          log_level="notice")
    mnt = os.path.join(base, "mnt")
    h = None
    result = {"n": per * a.writers, "writers": a.writers}
    try:
        if a.seed:
            result = {"seed": os.path.abspath(a.seed)}
            first = group.path("m%d" % min(group.members))
            os.makedirs(first)
            for name in sorted(os.listdir(a.seed)):
                if name.startswith(("checkpoint.", "changelog.")):
                    shutil.copyfile(os.path.join(a.seed, name),
                                    os.path.join(first, name))
            t0 = time.monotonic()
            group.start(leader_timeout=600, first_leads=True)
            # The others catch up as they start: measured alone below,
            # once both follow.
            while True:
                _, st = group.leader()
                if all(m.get("meta_version", 0) >= st["meta_version"]
                       for m in st["members"]):
                    break
                if time.monotonic() - t0 > 900:
                    raise SystemExit("the group did not catch up")
                time.sleep(0.5)
            print("a group of 3 from %s up and following in %.1f s" %
                  (a.seed, time.monotonic() - t0), flush=True)
        else:
            group.start()
        h = mount(build, group.list, mnt, "", mnt + ".log")
        if not a.seed:
            rate = phase(_create, mnt, a.writers, per)
            print("made %d files at %.0f/s" % (per * a.writers, rate),
                  flush=True)
        lid, st = group.leader()
        result["nodes"] = st["nodes"]
        f = next(i for i in group.members if i != lid)
        d = group.path("m%d" % f)
        group.master[f].send_signal(signal.SIGTERM)
        group.master_exit(f, 60)
        for name in os.listdir(d):
            if name not in swgroup.KEYS:
                p = os.path.join(d, name)
                (shutil.rmtree if os.path.isdir(p) else os.unlink)(p)
        if a.drop_caches:
            # The leader's checkpoint read from its disk, not from the
            # page cache it was written into.
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as dc:
                dc.write("3\n")
        result["drop_caches"] = a.drop_caches
        probe = Prober(mnt)
        probe.start()
        time.sleep(3)
        result["statfs_before"] = probe.take()
        since = len(log_of(group, f))
        t0 = time.monotonic()
        group.start_master(f)
        # Following: it says so after a checkpoint, or it has what the
        # leader has (a log etcd still holds whole is replayed instead;
        # members report their version every second).
        while True:
            if time.monotonic() - t0 > 600:
                raise SystemExit("member %d did not catch up" % f)
            text = log_of(group, f)[since:]
            if re.search(r"caught up: at version", text):
                break
            # What the leader says of it may be from before the restart,
            # when it had everything: not believed once the member says
            # it reads a checkpoint.
            if re.search(r"catching up from the leader's checkpoint", text):
                time.sleep(0.05)
                continue
            _, st = group.leader()
            have = [m.get("meta_version", 0) for m in st["members"]
                    if m["id"] == f]
            # (Nor in the first 2.5 s: a catch-up from etcd's log reads
            # as 2.5 s at least.)
            if (have and have[0] >= st["meta_version"] and
                    time.monotonic() - t0 > 2.5):
                break
            time.sleep(0.05)
        result["caught_up_s"] = time.monotonic() - t0
        result["statfs_during"] = probe.take()
        probe.on = False
        text = log_of(group, f)[since:]
        result["from_checkpoint"] = bool(re.search(r"caught up: at", text))
        m = re.search(r"checkpoint (\d+) \((\d+) bytes\) read from \S+ "
                      r"in ([0-9.]+) s", text)
        if m:
            result["checkpoint_version"] = int(m.group(1))
            result["checkpoint_bytes"] = int(m.group(2))
            result["read_s"] = float(m.group(3))
        loads = re.findall(r"nodes in ([0-9.]+) s", text)
        if loads:
            result["load_s"] = float(loads[-1])
        result["leader_wrote_one"] = bool(re.search(
            r"needs a checkpoint", log_of(group, lid)))
        print("caught up in %.2f s (%s): read %s bytes in %s s, loaded in %s s;"
              " statfs p99 %.2f ms before, %.2f ms during (max %.1f ms)" %
              (result["caught_up_s"],
               "from the leader's checkpoint" if result["from_checkpoint"]
               else "the log etcd still had",
               result.get("checkpoint_bytes"),
               result.get("read_s"), result.get("load_s"),
               result["statfs_before"]["p99_ms"],
               result["statfs_during"]["p99_ms"],
               result["statfs_during"]["max_ms"]), flush=True)
    finally:
        unmount(mnt)
        if h:
            h.stop(10)
        group.stop()
        if a.keep:
            print("kept %s" % base)
        else:
            shutil.rmtree(base, ignore_errors=True)
    cluster.write_result(result, build, a.out or "bench-group-catchup.json")


if __name__ == "__main__":
    main()
