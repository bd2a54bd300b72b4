#!/usr/bin/env python3
"""A member of a group of masters that fell behind what etcd keeps of the
log catches up from the leader's checkpoint by itself (master/catchup.h).

Three masters with their etcd members on loopback, etcd keeping only 20
versions more than the slowest member and waiting 2 s for a silent one; a
mount given the masters' list:

1. a follower is stopped; files are made until the leader has deleted
   the log keys the follower lacks; started again, it must catch up from
   the leader's checkpoint and follow;
2. a follower starts with an empty data directory and the wrong session
   key: the leader must refuse it its checkpoint; with the right key it
   catches up;
3. the leadership goes to the member that caught up first, and every
   file made reads back through the mount;
4. a tree is removed (`sweepfs rmr`): every member must free it as the
   leader purges it (PurgeSteps), not only the leader; the members,
   stopped, must log the same version and namespace digest, which counts
   every node, detached ones too.

Prints one JSON object. Exit status 0 pass, 1 fail, 77 skip."""

import os
import re
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import swgroup  # noqa: E402
from swcluster import is_sweepfs_mount, unmount  # noqa: E402

Fail = swgroup.Error
KEEP = 20


class Group(swgroup.Group):
    def __init__(self, a):
        members = swgroup.loopback_members(3)
        super().__init__(a.tmp, a.build, members,
                         master_set=["group_log_keep=%d" % KEEP,
                                     "group_log_away=2000ms"])
        self.mnt = None
        self.mount = None

    def start_mount(self):
        self.mnt = self.path("mnt")
        os.makedirs(self.mnt, exist_ok=True)
        self.mount = self._spawn(
            [self.build + "/mount/sweepfs-mount", self.list, self.mnt, "-f"],
            self.path("mnt.log"))
        deadline = time.monotonic() + 20
        while not is_sweepfs_mount(self.mnt):
            if time.monotonic() > deadline:
                raise Fail("the mount did not come up")
            time.sleep(0.05)

    def stop(self):
        if self.mnt:
            unmount(self.mnt)
            self.mnt = None
        if self.mount:
            self.mount.stop(10)
        super().stop()

    def log(self, i):
        with open(self.path("m%d.log" % i), errors="replace") as f:
            return f.read()

    def wait_log(self, i, pattern, timeout, since=0):
        """The first match of @pattern in member @i's log past @since."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log(i)[since:])
            if m:
                return m
            time.sleep(0.1)
        raise Fail("member %d did not log /%s/ within %d s"
                   % (i, pattern, timeout))

    def stop_member(self, i):
        self.master[i].send_signal(signal.SIGTERM)
        if self.master_exit(i, 30) != 0:
            raise Fail("member %d did not stop cleanly" % i)
        v = re.findall(r"stopped at version (\d+)", self.log(i))
        return int(v[-1]) if v else 0

    def version_of(self, i):
        _, st = self.leader()
        for m in st["members"]:
            if m["id"] == i:
                return m.get("meta_version", 0)
        raise Fail("member %d is not in the status" % i)

    def wait_level(self, i, timeout=30):
        """Until member @i reports the leader's version."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _, st = self.leader()
            want = st["meta_version"]
            if self.version_of(i) >= want:
                return want
            time.sleep(0.2)
        raise Fail("member %d did not reach the leader's version" % i)

    def wait_pruned(self, past, timeout=40):
        """Until the leader deleted the log keys up to @past at least."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lid, _ = self.leader()
            for v in re.findall(r"log keys before version (\d+) deleted",
                                self.log(lid)):
                if int(v) > past + 1:
                    return int(v)
            time.sleep(0.5)
        raise Fail("the leader did not prune the log past %d" % past)


def make(d, n, pad=""):
    os.makedirs(d, exist_ok=True)
    for k in range(n):
        with open(os.path.join(d, "f%05d%s" % (k, pad)), "w") as f:
            f.write("")


# The leader's checkpoint is read in pieces of CATCHUP_PIECE bytes
# (master/catchup.h): 4,000 names of 240 bytes make it span three at
# 512 KiB, so that the sum runs on across pieces and the trailer comes
# in another than the header (the unit test test_catchup_pieces cuts
# files everywhere).
def catchup_piece():
    with open(os.path.join(HERE, "..", "..", "..", "master",
                           "catchup.h")) as f:
        m = re.search(r"#define CATCHUP_PIECE \((\d+)u << (\d+)\)",
                      f.read())
    if not m:
        raise Fail("no CATCHUP_PIECE in master/catchup.h")
    return int(m.group(1)) << int(m.group(2))


LONG, LONG_PAD = 4000, "x" * 234


def run(g, result):
    g.start()
    g.start_mount()
    make(os.path.join(g.mnt, "d0"), 100)
    make(os.path.join(g.mnt, "long"), LONG, LONG_PAD)
    lid, _ = g.leader()
    away, other = [i for i in (1, 2, 3) if i != lid]

    # 1. Away for longer than etcd keeps the log.
    g.wait_level(away)
    was = g.stop_member(away)
    make(os.path.join(g.mnt, "d1"), 500)
    result["pruned_to"] = g.wait_pruned(was)
    since = len(g.log(away))
    g.start_master(away)
    g.wait_log(away, r"catching up from the leader's checkpoint", 20,
               since)
    m = g.wait_log(away, r"caught up: at version (\d+)", 60, since)
    result["away"] = {"stopped_at": was,
                      "caught_up_at": int(m.group(1))}
    m = re.search(r"checkpoint \d+ \((\d+) bytes\) read from",
                  g.log(away)[since:])
    if not m or int(m.group(1)) <= 2 * catchup_piece():
        raise Fail("the checkpoint read was not three pieces or more: %s"
                   % (m.group(0) if m else "no log line"))
    result["checkpoint_bytes"] = int(m.group(1))
    make(os.path.join(g.mnt, "d2"), 100)
    g.wait_level(away)

    # 2. An empty data directory: the wrong key first.
    g.stop_member(other)
    d = g.path("m%d" % other)
    keys = {k: open(os.path.join(d, k), "rb").read()
            for k in swgroup.KEYS}
    shutil.rmtree(d)
    os.makedirs(d)
    for k, v in keys.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v if k != "session.key" else b"00" * 32 + b"\n")
        os.chmod(os.path.join(d, k), 0o600)
    lid, _ = g.leader()
    lsince = len(g.log(lid))
    since = len(g.log(other))
    g.start_master(other)
    g.wait_log(lid, r"refused: wrong member key", 20, lsince)
    g.wait_log(other, r"catching up from .*: Permission denied", 20,
               since)
    if re.search(r"caught up", g.log(other)[since:]):
        raise Fail("a member with the wrong key caught up")
    g.master[other].send_signal(signal.SIGTERM)
    g.master_exit(other, 30)
    with open(os.path.join(d, "session.key"), "wb") as f:
        f.write(keys["session.key"])
    since = len(g.log(other))
    g.start_master(other)
    m = g.wait_log(other, r"caught up: at version (\d+)", 60, since)
    result["empty_caught_up_at"] = int(m.group(1))
    make(os.path.join(g.mnt, "d3"), 100)
    g.wait_level(other)

    # 3. The member that caught up leads; everything is there.
    old, _ = g.leader()
    g.tool("group", "transfer", str(away))
    if g.master_exit(old, 30) != 75:
        raise Fail("the old leader did not hand over")
    new, _ = g.leader()
    if new != away:
        raise Fail("member %d leads, not %d" % (new, away))
    g.start_master(old)
    counts = {s: len(os.listdir(os.path.join(g.mnt, s)))
              for s in ("d0", "d1", "d2", "d3", "long")}
    result["files"] = counts
    if counts != {"d0": 100, "d1": 500, "d2": 100, "d3": 100,
                  "long": LONG}:
        raise Fail("files missing after the transfer: %s" % counts)
    for i in (1, 2, 3):
        g.wait_level(i)

    # 4. A removed tree goes from every member.
    for k in range(3):
        make(os.path.join(g.mnt, "d4", "s%d" % k), 100)
    # What the mount acknowledged itself reaches the master.
    for d in ["d4"] + ["d4/s%d" % k for k in range(3)]:
        fd = os.open(os.path.join(g.mnt, d), os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)
    _, st = g.leader()
    before = st["nodes"]
    g.tool("rmr", "--skip-trash", "--wait", os.path.join(g.mnt, "d4"),
           timeout=60)
    _, st = g.leader()
    if st["purge_roots"] or before - st["nodes"] != 304:
        raise Fail("the leader did not purge d4: %d -> %d nodes, %d trees"
                   " left" % (before, st["nodes"], st["purge_roots"]))
    result["purged"] = before - st["nodes"]
    for i in (1, 2, 3):
        g.wait_level(i)
    unmount(g.mnt)
    g.mnt = None
    result["ends"] = {str(i): v for i, v in g.stop_for_digests(
        [j for j in (1, 2, 3) if j != new] + [new]).items()}


if __name__ == "__main__":
    sys.exit(swgroup.scenario(Group, run))
