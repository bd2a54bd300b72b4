#!/usr/bin/env python3
"""Chunk deletions survive a failover (issue 32): the group's new leader
deletes the files of chunks the old one freed without waiting out
stray_grace (csrv.c, ns_chunk_dead()).

Three masters with their etcd members on loopback, goal 1, delete_rate
capped so that the deletion takes seconds, stray_grace at an hour; one
chunkserver and a mount given the masters' list:

1. K files to keep and N to remove; rm -rf of the N; with about half of
   their chunk files left, the leader is killed (kill -9);
2. the new leader, at the chunkserver's registration, queues the files
   of the removed chunks at once (none waits as a stray), its status
   agrees (pending + done = queued), `sweepfs top` shows them pending
   on the server at about delete_rate with an ETA of pending / rate,
   and within BOUND s the chunkserver's disk holds exactly the K live
   chunk files;
3. the old leader comes back as a follower; no follower queued a
   deletion; the K files read back intact and fsck is clean.

Before, every removed chunk's file still on the disk at the failover
waited out the hour as a stray.

Prints one JSON object. Exit status 0 pass, 1 fail, 77 skip."""

import os
import re
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import swgroup  # noqa: E402
from swcluster import is_sweepfs_mount, pick_port, unmount  # noqa: E402

Fail = swgroup.Error
N = 2000
K = 100
RATE = 100   # deletions/s: N/2 of them take about 10 s
BOUND = 60   # s for the disk to come down to the live files
QUEUED = r"(\d+) chunk files of chunks deleted before"


class Group(swgroup.Group):
    def __init__(self, a):
        members = swgroup.loopback_members(3)
        super().__init__(a.tmp, a.build, members,
                         master_set=["goal=1", "delete_rate=%d" % RATE,
                                     "stray_grace=1h"])
        self.cs = None
        self.cs_dir = self.path("cs")
        self.mnt = None
        self.mount = None

    def start(self):
        super().start()
        os.makedirs(self.cs_dir, exist_ok=True)
        self.cs = self._spawn(
            [self.build + "/chunkserver/sweepfs-chunkserver", "-f", "-d",
             self.cs_dir, "-l", "127.0.0.1:%d" % pick_port(), "-m",
             self.list, "--set", "master_key_file=" + self.chunkserver_key,
             "--set", "heartbeat_interval=500ms", "-v", "info"],
            self.path("cs.log"))
        self.wait_registered()
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

    def wait_registered(self, timeout=30):
        """(id, status) of the leader once the chunkserver is registered
        with it."""
        deadline = time.monotonic() + timeout
        while True:
            lid, st = self.leader()
            if any(s["connected"] for s in st.get("servers", [])):
                return lid, st
            if time.monotonic() > deadline:
                raise Fail("the chunkserver did not register")
            time.sleep(0.1)

    def stop(self):
        if self.mnt:
            unmount(self.mnt)
            self.mnt = None
        if self.mount:
            self.mount.stop(10)
        if self.cs:
            self.cs.stop(10)
        super().stop()

    def log(self, i):
        with open(self.path("m%d.log" % i), errors="replace") as f:
            return f.read()

    def chunk_files(self):
        n = 0
        for _, _, files in os.walk(self.cs_dir):
            n += sum(1 for f in files
                     if f.startswith("chunk_") and f.endswith(".swc"))
        return n

    def wait_files(self, pred, what, timeout):
        deadline = time.monotonic() + timeout
        while True:
            n = self.chunk_files()
            if pred(n):
                return n
            if time.monotonic() > deadline:
                raise Fail("timed out after %d s waiting for %s (%d chunk "
                           "files)" % (timeout, what, n))
            time.sleep(0.2)


def make(d, n):
    """@n files of 4 KiB under @d, 100 a subdirectory, each holding its
    own path."""
    for i in range(n):
        sub = os.path.join(d, "s%03d" % (i // 100))
        if i % 100 == 0:
            os.makedirs(sub)
        p = os.path.join(sub, "f%03d" % (i % 100))
        with open(p, "wb") as f:
            f.write((p.encode() * 4096)[:4096])


def check_kept(d):
    n = 0
    for root, _, files in os.walk(d):
        for name in files:
            p = os.path.join(root, name)
            with open(p, "rb") as f:
                got = f.read()
            rel = p[len(d):]
            if len(got) != 4096 or rel.encode() not in got:
                raise Fail("%s: %d bytes, not its own" % (p, len(got)))
            n += 1
    return n


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def top_line(g, listen, result):
    """`sweepfs top` on the new leader: the server's pending deletions
    at about delete_rate, and an ETA of pending / rate."""
    out = g.tool("top", "-b", "-n", "3", "-d", "1", timeout=60).stdout
    hits = re.findall(re.escape(listen) +
                      r"\s+([\d,]+) pending, ([\d,.]+)/s, done in (\S+)",
                      out)
    if len(hits) < 3:
        raise Fail("%d frames of top with %s's line, not 3:\n%s"
                   % (len(hits), listen, out))
    pending, rate, eta = hits[-1]
    pending = int(pending.replace(",", ""))
    rate = float(rate.replace(",", ""))
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", eta)
    if eta == "?" or not m:
        raise Fail("no ETA in top's last frame: %r" % eta)
    h, mi, sec = (int(x or 0) for x in m.groups())
    eta_s = h * 3600 + mi * 60 + sec
    result["top"] = {"pending": pending, "rate": rate, "eta_s": eta_s}
    if not RATE / 4 <= rate <= RATE * 1.5 + 1:
        raise Fail("top shows %.0f deletions/s, delete_rate is %d"
                   % (rate, RATE))
    if abs(eta_s - -(-pending // int(rate))) > 1:
        raise Fail("top's ETA %d s for %d pending at %.0f/s"
                   % (eta_s, pending, rate))


def run(g, result):
    g.start()
    keep, many = os.path.join(g.mnt, "keep"), os.path.join(g.mnt, "many")
    make(keep, K)
    make(many, N)
    g.wait_files(lambda n: n == N + K, "a chunk file per file", 60)

    # 1. rm -rf, and the leader killed half-way through the deletions.
    old, _ = g.leader()
    t = time.monotonic()
    for root, dirs, files in os.walk(many, topdown=False):
        for name in files:
            os.unlink(os.path.join(root, name))
        for name in dirs:
            os.rmdir(os.path.join(root, name))
    os.rmdir(many)
    fsync_dir(g.mnt)  # what the mount acknowledged itself reaches the leader
    result["rm_s"] = round(time.monotonic() - t, 1)
    g.wait_files(lambda n: n <= K + N // 2, "half of the deletions", 120)
    g.master[old].send_signal(signal.SIGKILL)
    g.master_exit(old, 30)
    t0 = time.monotonic()
    left = g.chunk_files()
    result["left_at_kill"] = left
    if left <= K + 2 * RATE:
        raise Fail("too few deletions left at the kill (%d): raise N"
                   % (left - K))

    # 2. The new leader knows them at the registration.
    new, _ = g.wait_registered(60)
    if new == old:
        raise Fail("member %d leads again" % old)
    result["registered_s"] = round(time.monotonic() - t0, 1)
    deadline = time.monotonic() + 10
    while not re.search(QUEUED, g.log(new)):
        if time.monotonic() > deadline:
            raise Fail("the new leader %d queued no removed chunk's file"
                       % new)
        time.sleep(0.1)
    queued = int(re.findall(QUEUED, g.log(new))[-1])
    result["queued_by_new_leader"] = queued
    if "chunk files the master does not know" in g.log(new):
        raise Fail("the new leader took removed chunks' files for strays")
    # The chunkserver may have finished a batch in flight at the kill.
    if not left - K - 4 * 512 <= queued <= left - K:
        raise Fail("%d files queued, %d of removed chunks on the disk"
                   % (queued, left - K))
    _, st = g.leader()
    s = st["servers"][0]
    result["status_after"] = {"pending": st["chunk_deletes_pending"],
                              "server_pending": s["deletes_pending"],
                              "server_deleted": s["deleted"]}
    if s["deletes_pending"] + s["deleted"] != queued or \
            st["chunk_deletes_pending"] != s["deletes_pending"]:
        raise Fail("status after the failover: %s, %d queued"
                   % (result["status_after"], queued))
    top_line(g, s["listen"], result)
    g.wait_files(lambda n: n == K, "exactly the %d live chunk files" % K,
                 BOUND)
    result["live_s_after_kill"] = round(time.monotonic() - t0, 1)

    # 3. The old leader follows; followers deleted nothing.
    g.start_master(old)
    g.wait_listening(old)
    for i in (1, 2, 3):
        if i != new and re.search(QUEUED, g.log(i).rsplit(
                "==== start\n", 1)[-1]):
            raise Fail("follower %d queued deletions" % i)
    n = check_kept(keep)
    if n != K:
        raise Fail("%d kept files, not %d" % (n, K))
    if g.chunk_files() != K:
        raise Fail("%d chunk files after reading, not %d"
                   % (g.chunk_files(), K))
    deadline = time.monotonic() + 30
    while g.tool("fsck", check=False).returncode:
        if time.monotonic() > deadline:
            raise Fail("fsck: %s" % g.tool("fsck", check=False).stdout)
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(swgroup.scenario(Group, run))
