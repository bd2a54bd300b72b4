#!/usr/bin/env python3
"""A leader whose changelog disk hangs while its loop goes on: it lets its
lease go, another member leads, and the clients' changes go on there
(master/changelog.h, changelog_lag_ns(); master/group.c, on_watch()).

The master writes its changelog on a thread of its own, so a disk that
stops answering no longer stops its loop: the loop would keep renewing
the lease and holding every client's change, for ever. Here each
member's data directory is an ext4 file system of its own (a loop
device), and the leader's is frozen (fsfreeze), which makes its write(2)
wait as a hung disk does. Meanwhile:

- another member is elected once group_disk_timeout has passed;
- a -o wsync mount connected to the old leader creates a file: the
  change goes through (it reached the group's log before the old leader
  wrote it), and another mount sees the file through the new leader;
- once the disk is thawed the old leader exits without serving again,
  and says why in its log.

Without the lag check the old leader keeps its lease and the create
hangs until the thaw. Prints one JSON object. Exit status 0 pass, 1
fail, 77 skip (no etcd, or no loop devices or fsfreeze)."""

import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import swgroup  # noqa: E402
from group_lease import Group as LeaseGroup, bounded  # noqa: E402

Fail = swgroup.Error
IMAGE_MB = 96
DISK_TIMEOUT_MS = 3000
GUARD_S = 170  # the scenario's timeout in meson.build is 180 s


class Skip(Exception):
    pass


def sh(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True,
                          timeout=60)


class Group(LeaseGroup):
    def __init__(self, a):
        super().__init__(a)
        # Quicker than the default 10 s, still five leases.
        self.master_set.append("group_disk_timeout=%dms" % DISK_TIMEOUT_MS)
        # The loop hands every change to the writer thread, as it does
        # while a checkpoint is written (by default, while the disk is
        # calm, the loop writes itself: a hung disk then stops the loop,
        # and the lease goes as in group_lease).
        self.master_set.append("changelog_writer=thread")
        self.loops = {}   # member id -> loop device
        self.frozen = set()

    def disks(self):
        """An ext4 file system of its own under each member's data
        directory; Skip where the machine has no loop devices."""
        for tool in ("losetup", "mkfs.ext4", "fsfreeze"):
            if not shutil.which(tool):
                raise Skip("%s is not installed" % tool)
        for i in sorted(self.members):
            img = self.path("disk%d.img" % i)
            d = self.path("m%d" % i)
            os.makedirs(d, exist_ok=True)
            with open(img, "wb") as f:
                f.truncate(IMAGE_MB << 20)
            p = sh("mkfs.ext4", "-q", "-F", img)
            if p.returncode:
                raise Fail("mkfs.ext4: %s" % p.stderr.strip())
            p = sh("losetup", "--find", "--show", img)
            if p.returncode:
                raise Skip("no loop device: %s" % p.stderr.strip())
            self.loops[i] = p.stdout.strip()
            p = sh("mount", self.loops[i], d)
            if p.returncode:
                raise Skip("cannot mount a loop device: %s" %
                           p.stderr.strip())

    def freeze(self, i):
        d = self.path("m%d" % i)
        # Whatever becomes of this driver (meson's timeout kills it
        # 0.5 s after asking), a guard in a session of its own thaws the
        # disk once the driver is gone, or after GUARD_S: a master on a
        # frozen disk could not even exit.
        subprocess.Popen(
            ["sh", "-c", 't=0; while kill -0 "$1" 2>/dev/null && '
             '[ $t -lt "$2" ]; do sleep 1; t=$((t+1)); done; '
             'fsfreeze -u "$3" 2>/dev/null', "guard", str(os.getpid()),
             str(GUARD_S), d],
            start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        p = sh("fsfreeze", "-f", d)
        if p.returncode:
            raise Skip("fsfreeze: %s" % p.stderr.strip())
        self.frozen.add(i)

    def thaw(self, i):
        if i in self.frozen:
            sh("fsfreeze", "-u", self.path("m%d" % i))
            self.frozen.discard(i)

    def stop(self):
        # A master waiting on a frozen disk cannot exit: thaw first.
        for i in list(self.frozen):
            self.thaw(i)
        super().stop()
        for i, dev in self.loops.items():
            sh("umount", self.path("m%d" % i))
            sh("losetup", "-d", dev)
        self.loops = {}


def create(path):
    """Create @path: the seconds it took."""
    t0 = time.monotonic()
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
    return round(time.monotonic() - t0, 3)


def run(g, result):
    try:
        g.disks()
    except Skip as e:
        print(str(e), file=sys.stderr)
        sys.exit(77)  # scenario() takes down what was made
    old, _ = g.start()
    a_mnt = g.add_mount("mnt-a", "wsync")
    d = os.path.join(a_mnt, "d")
    os.mkdir(d)
    os.stat(d)
    # The mount is connected to the leader; its disk stops answering.
    t0 = time.monotonic()
    try:
        g.freeze(old)
    except Skip as e:
        print(str(e), file=sys.stderr)
        sys.exit(77)
    seen = bounded(lambda: create(os.path.join(d, "x")), 45)
    result["create"] = seen
    result["create_s"] = round(time.monotonic() - t0, 3)
    new, _ = g.leader()
    result["leader_after"] = new
    if new == old:
        raise Fail("member %d still leads with its disk frozen" % old)
    if "ok" not in seen:
        raise Fail("the create while the leader's disk hung: %s" % seen)
    b_mnt = g.add_mount("mnt-b", "wsync")
    if not os.path.exists(os.path.join(b_mnt, "d", "x")):
        raise Fail("the file is not there through member %d" % new)
    g.thaw(old)
    st = g.master_exit(old, 30)
    result["old_leader_status"] = st
    if st == 0:
        raise Fail("the old leader exited 0 after its disk came back")
    log = g.log(old)
    if "changelog's disk has not made progress" not in log:
        raise Fail("the old leader did not say its disk hung")


if __name__ == "__main__":
    sys.exit(swgroup.scenario(Group, run))
