#!/usr/bin/env python3
"""A leader of a group of masters frozen past its lease: clients leave it
for the new leader, and once let go it answers nothing more, not even a
read (master/group.h, group_check_lease(); mount/master_conn.c).

Three masters with their etcd members on loopback; two -o wsync mounts
(so that lookups go to their master, not to a delegation of their own)
connected to the leader. The leader is frozen (SIGSTOP) for longer than
its lease: another member is elected, and a third mount creates a file
through it. Meanwhile:

- the first mount looks the file up while the old leader is still
  frozen: its kernel accepts the request, so only the mount's own
  liveness check can tell; it must give the old leader up and find the
  file through the new one;
- the second mount, idle so far, looks it up the moment the old leader
  is let go (SIGCONT): the old leader must exit (status 75) without
  answering, and the mount must find the file through the new leader.
  A "No such file" would be a read answered by a master that no longer
  leads.

Prints one JSON object. Exit status 0 pass, 1 fail, 77 skip."""

import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import swgroup  # noqa: E402
from group_catchup import Group as CatchupGroup  # noqa: E402
from swcluster import is_sweepfs_mount, unmount  # noqa: E402

Fail = swgroup.Error


class Group(CatchupGroup):
    def __init__(self, a):
        super().__init__(a)
        self.mounts = []

    def add_mount(self, name, opts=None):
        mnt = self.path(name)
        os.makedirs(mnt, exist_ok=True)
        argv = [self.build + "/mount/sweepfs-mount", self.list, mnt, "-f"]
        if opts:
            argv += ["-o", opts]
        h = self._spawn(argv, self.path(name + ".log"))
        self.mounts.append((mnt, h))
        deadline = time.monotonic() + 30
        while not is_sweepfs_mount(mnt):
            if time.monotonic() > deadline or h.poll() is not None:
                raise Fail("mount %s did not come up" % name)
            time.sleep(0.05)
        return mnt

    def stop(self):
        for mnt, h in self.mounts:
            unmount(mnt)
            h.stop(10)
        self.mounts = []
        super().stop()


def bounded(fn, timeout):
    """fn() in a thread: {"ok": what it returned}, {"err": strerror} or
    {"hung": True} after @timeout s."""
    seen = {}

    def run():
        try:
            seen["ok"] = fn()
        except OSError as e:
            seen["err"] = e.strerror
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return seen if seen else {"hung": True}


def look(path, timeout):
    """stat(@path) in a thread: {"ino": ...}, {"err": ...} or {"hung":
    True} after @timeout s."""
    seen = bounded(lambda: os.stat(path).st_ino, timeout)
    return {"ino": seen["ok"]} if "ok" in seen else seen


def run(g, result):
    g.start()
    a_mnt = g.add_mount("mnt-a", "wsync")
    c_mnt = g.add_mount("mnt-c", "wsync")
    d = os.path.join(a_mnt, "d")
    os.mkdir(d)
    os.stat(d)
    os.stat(os.path.join(c_mnt, "d"))
    old, _ = g.leader()
    g.master[old].send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        # Another member leads once the frozen one's lease is out.
        deadline = time.monotonic() + 30
        while True:
            new, _ = g.leader()
            if new != old:
                break
            if time.monotonic() > deadline:
                raise Fail("no other member was elected")
            time.sleep(0.2)
        result["elected_after_s"] = time.monotonic() - t0
        b_mnt = g.add_mount("mnt-b")
        os.close(os.open(os.path.join(b_mnt, "d", "x"),
                         os.O_CREAT | os.O_WRONLY, 0o644))
        fd = os.open(os.path.join(b_mnt, "d"), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        # The first mount, while the old leader is still frozen.
        t1 = time.monotonic()
        seen = look(os.path.join(d, "x"), 30)
        result["lookup_frozen"] = seen
        result["lookup_frozen_s"] = time.monotonic() - t1
        if "ino" not in seen:
            raise Fail("the first mount, during the freeze: %s" % seen)
    finally:
        g.master[old].send_signal(signal.SIGCONT)
    # At once, through the mount still connected to the old leader.
    seen = look(os.path.join(c_mnt, "d", "x"), 60)
    result["lookup_resumed"] = seen
    if "ino" not in seen:
        raise Fail("the second mount, after the freeze: %s" % seen)
    st = g.master_exit(old, 30)
    result["old_leader_status"] = st
    if st != 75:
        raise Fail("the old leader exited with %s, not 75" % st)
    log = g.log(old)
    if "lease may have run out" not in log and \
            "no longer the group's leader" not in log:
        raise Fail("the old leader did not say why it exited")
    result["said"] = ("lease may have run out" in log)


if __name__ == "__main__":
    sys.exit(swgroup.scenario(Group, run))
