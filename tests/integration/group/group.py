#!/usr/bin/env python3
"""A group of three masters on three "machines" (network namespaces on a
bridge, bench/machines.py), each with its etcd member beside it; a
chunkserver and two mounts on the host, given the masters' list.

A writer saves files through the first mount as editors and package
managers do (an exclusive create of a new name, write, fsync, close,
rename over the final name) and notes each one acknowledged. Meanwhile the leader is, in turns, killed
(kill -9), cut off the network (its veth down: it must stop acknowledging
and exit, status 75), and restarted cleanly (SIGTERM); each time the
member is started again. At the end every acknowledged file must read
back whole through the second mount, fsck must be clean, and the three
masters, stopped, must log the same version and namespace digest.

Prints one JSON object: the failover times (event to the writer's next
acknowledged file), the writer's longest stall, counts. Exit status 0
pass, 1 fail, 77 skip (no etcd, no namespaces)."""

import argparse
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import machines  # noqa: E402
import swgroup  # noqa: E402
from swcluster import is_sweepfs_mount, unmount  # noqa: E402

MASTER_PORT = 9420
ETCD_CLIENT = 2379
ETCD_PEER = 2380
FILE_BYTES = 8192


Fail = swgroup.Error


def content(i):
    seed = hashlib.sha256(b"group-%d" % i).digest()
    return (seed * (FILE_BYTES // len(seed) + 1))[:FILE_BYTES]


class Group(swgroup.Group):
    """Three members, one per machine, a chunkserver and two mounts on
    the host (which reaches the machines through the bridge)."""

    def __init__(self, a):
        self.a = a
        self.net = machines.Network(a.subnet)
        members = []
        for i in (1, 2, 3):
            addr = self.net.add("m%d" % i)
            members.append(swgroup.Member(i, addr, MASTER_PORT, ETCD_CLIENT,
                                          ETCD_PEER,
                                          netns=self.net.netns("m%d" % i)))
        # Default settings: the failover figures are what users get.
        super().__init__(a.tmp, a.build, members)
        self.ids = sorted(self.members)
        self.others = []   # chunkserver, mounts
        self.mnt = []

    def veth(self, i):
        return self.net.machines["m%d" % i][1]

    def start(self):
        self.net.create()
        super().start()
        cs = self.path("cs")
        os.makedirs(cs, exist_ok=True)
        self.others.append(self._spawn(
            [self.build + "/chunkserver/sweepfs-chunkserver", "-f", "-d", cs,
             "-l", "%s:%d" % (self.net.host_address, self.a.cs_port),
             "-m", self.list, "--set",
             "master_key_file=" + self.chunkserver_key, "-v", "info"],
            self.path("cs.log")))
        deadline = time.monotonic() + 30
        while True:
            _, st = self.leader()
            if any(s["connected"] for s in st.get("servers", [])):
                break
            if time.monotonic() > deadline:
                raise Fail("the chunkserver did not register")
            time.sleep(0.1)
        for name in ("a", "b"):
            mnt = self.path("mnt-" + name)
            os.makedirs(mnt, exist_ok=True)
            self.others.append(self._spawn(
                [self.build + "/mount/sweepfs-mount", self.list, mnt, "-f"],
                self.path("mnt-%s.log" % name)))
            deadline = time.monotonic() + 20
            while not is_sweepfs_mount(mnt):
                if time.monotonic() > deadline:
                    raise Fail("mount %s did not come up" % mnt)
                time.sleep(0.05)
            self.mnt.append(mnt)

    def stop(self):
        for mnt in self.mnt:
            unmount(mnt)
        for h in self.others:
            h.stop(10)
        super().stop()
        return self.net.destroy(log=lambda *a: None)


class Writer(threading.Thread):
    """Files 0, 1, 2, ... in mnt/w: an exclusive create of fN.new, write,
    fsync, close, rename to fN; one is acknowledged when all of that
    returned. (Creates and renames in flight at a failover are sent
    again: made twice, one would fail with EEXIST or ENOENT.)"""

    def __init__(self, mnt):
        super().__init__(daemon=True)
        self.dir = os.path.join(mnt, "w")
        self.acked = []        # (i, monotonic time)
        self.errors = []       # (i, step, errno, monotonic time)
        self.halt = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        os.makedirs(self.dir, exist_ok=True)
        i = 0
        while not self.halt.is_set():
            p = os.path.join(self.dir, "f%06d" % i)
            ts = [time.monotonic()]
            step = "open"
            try:
                fd = os.open(p + ".new", os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             0o644)
                ts.append(time.monotonic())
                try:
                    step = "write"
                    os.write(fd, content(i))
                    ts.append(time.monotonic())
                    step = "fsync"
                    os.fsync(fd)
                    ts.append(time.monotonic())
                finally:
                    if len(ts) == 4:
                        step = "close"
                    os.close(fd)
                    ts.append(time.monotonic())
                step = "rename"
                os.rename(p + ".new", p)
                ts.append(time.monotonic())
                with self.lock:
                    self.acked.append((i, time.monotonic()))
            except OSError as e:
                with self.lock:
                    self.errors.append((i, step, e.errno, time.monotonic()))
                print("file %d: %s failed after %.3f s: %s" % (
                    i, step, time.monotonic() - ts[0], e.strerror),
                    file=sys.stderr, flush=True)
                time.sleep(0.05)
            if ts[-1] - ts[0] > 1 and len(ts) == 6:
                # Where a slow one waited: open, write, fsync, close,
                # rename.
                print("file %d: %.3f s (%s)" % (
                    i, ts[-1] - ts[0],
                    " ".join("%.3f" % (b - a) for a, b in zip(ts, ts[1:]))),
                    file=sys.stderr, flush=True)
            i += 1

    def first_ack_after(self, t, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                after = [at for _, at in self.acked[-1000:] if at > t]
            if after:
                return min(after) - t
            time.sleep(0.02)
        raise Fail("the writer acknowledged nothing within %d s" % timeout)

    def stall_after(self, t0, end):
        """The writer's longest wait for an acknowledgement between @t0
        and @end (the next event): the event's cost as the writer saw it,
        also when a file in flight at @t0 still got through."""
        ts = [at for _, at in self.acked]
        return max((min(b, end) - max(a, t0) for a, b in zip(ts, ts[1:])
                    if b > t0 and a < end), default=0.0)

    def longest_stall(self):
        ts = [at for _, at in self.acked]
        return max((b - a for a, b in zip(ts, ts[1:])), default=0.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--subnet", default="10.231.0.0/24")
    ap.add_argument("--cs-port", type=int, default=9431)
    ap.add_argument("--duration", type=float, default=60)
    a = ap.parse_args()
    if not shutil.which("etcd"):
        print("etcd is not installed", file=sys.stderr)
        return 77
    # Stopped (meson's timeout, group.sh's clean-up): take everything
    # down on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    g = Group(a)
    result = {"events": []}
    rc = 1
    try:
        g.start()
        w = Writer(g.mnt[0])
        w.start()
        t_end = time.monotonic() + a.duration
        kinds = ["kill", "cut", "restart"]
        n = 0
        while time.monotonic() < t_end or n < len(kinds):
            time.sleep(3)
            lid, _ = g.leader()
            kind = kinds[n % len(kinds)]
            n += 1
            t0 = time.monotonic()
            if kind == "kill":
                g.master[lid].send_signal(signal.SIGKILL)
                g.master_exit(lid, 10)
            elif kind == "restart":
                g.master[lid].send_signal(signal.SIGTERM)
                st = g.master_exit(lid, 30)
                if st != 0:
                    raise Fail("member %d exited with %s on SIGTERM" %
                               (lid, st))
            else:
                subprocess.run(["ip", "link", "set", g.veth(lid), "down"],
                               check=True)
            w.first_ack_after(t0)
            ev = {"event": kind, "member": lid, "t0": t0}
            new, _ = g.leader()
            ev["new_leader"] = new
            if new == lid:
                raise Fail("member %d still leads after %s" % (lid, kind))
            if kind == "cut":
                # Cut off, it must stop: its lease runs out and it exits
                # as a deposed leader.
                st = g.master_exit(lid, 30)
                ev["cut_member_exit"] = st
                if st != 75:
                    raise Fail("the cut-off leader %d exited with %s, "
                               "not 75" % (lid, st))
                subprocess.run(["ip", "link", "set", g.veth(lid), "up"],
                               check=True)
            g.start_master(lid)
            result["events"].append(ev)
        w.halt.set()
        w.join(60)
        evs = result["events"]
        for k, ev in enumerate(evs):
            end = evs[k + 1]["t0"] if k + 1 < len(evs) else ev["t0"] + 30
            ev["failover_s"] = round(w.stall_after(ev["t0"], end), 3)
        for ev in evs:
            del ev["t0"]
            print(json.dumps(ev), file=sys.stderr)
        time.sleep(1)
        # Every acknowledged file, whole, through the other mount.
        bad = []
        for i, _ in w.acked:
            p = os.path.join(g.mnt[1], "w", "f%06d" % i)
            try:
                with open(p, "rb") as f:
                    if f.read() != content(i):
                        bad.append((i, "content"))
            except OSError as e:
                bad.append((i, e.strerror))
            if os.path.lexists(p + ".new"):
                bad.append((i, "its temporary name is left"))
        kinds_of = {}
        for _, step, err, _ in w.errors:
            k = "%s %s" % (step, errno.errorcode.get(err, err))
            kinds_of[k] = kinds_of.get(k, 0) + 1
        result.update(acked=len(w.acked), errors=len(w.errors),
                      error_kinds=kinds_of,
                      lost=len(bad),
                      longest_stall_s=round(w.longest_stall(), 3))
        for kind in kinds:
            result["%s_max_s" % kind] = max(e["failover_s"] for e in evs
                                            if e["event"] == kind)
        if bad:
            raise Fail("%d acknowledged files lost or damaged: %s" %
                       (len(bad), bad[:10]))
        p = g.tool("fsck", "--json", timeout=60, check=False)
        try:
            fsck = json.loads(p.stdout)
        except ValueError:
            raise Fail("fsck: %s %s" % (p.stdout, p.stderr))
        result["fsck_problems"] = fsck.get("problems", fsck)
        if p.returncode != 0:
            raise Fail("fsck is not clean: %s" % p.stdout)
        # The leadership moved by hand, to a member chosen.
        lid, _ = g.leader()
        to = [i for i in g.ids if i != lid][0]
        p = g.tool("group", "transfer", str(to), timeout=60)
        if "member %d " % to not in p.stdout or g.leader()[0] != to:
            raise Fail("transfer to %d: %s" % (to, p.stdout))
        if g.master_exit(lid, 30) != 75:
            raise Fail("the leader that handed over did not exit with 75")
        g.start_master(lid)
        result["transfer"] = p.stdout.strip()
        # Membership: a member added, then removed.
        g.tool("group", "add", "9=192.0.2.9:%d" % MASTER_PORT)
        _, st = g.leader()
        if sorted(m["id"] for m in st["members"]) != [1, 2, 3, 9]:
            raise Fail("after group add: %s" % st["members"])
        if g.tool("group", "add", "9=192.0.2.9:1", check=False).returncode \
                == 0:
            raise Fail("a second member 9 was added")
        g.tool("group", "remove", "9")
        _, st = g.leader()
        if sorted(m["id"] for m in st["members"]) != [1, 2, 3]:
            raise Fail("after group remove: %s" % st["members"])
        # Admin is root on an admin export: another user of the same
        # client is told no member's address and changes no member.
        as_user = ["setpriv", "--reuid=4242", "--regid=4242",
                   "--clear-groups", g.build + "/tools/sweepfs", "-m",
                   g.list]
        p = subprocess.run(as_user + ["status", "--json"],
                           capture_output=True, text=True, timeout=20)
        try:
            st = json.loads(p.stdout)
        except ValueError:
            raise Fail("a user's status: %s %s" % (p.stdout, p.stderr))
        if not st.get("limited") or st.get("members") or \
                st.get("servers") or not st.get("leader"):
            raise Fail("a user's status tells the members: %s" % p.stdout)
        p = subprocess.run(as_user + ["group", "add",
                                      "9=192.0.2.9:%d" % MASTER_PORT],
                           capture_output=True, text=True, timeout=20)
        if p.returncode != 6 or "only root may" not in p.stderr:
            raise Fail("a user's group add: status %d, %s" %
                       (p.returncode, p.stderr))
        _, st = g.leader()
        if sorted(m["id"] for m in st["members"]) != [1, 2, 3]:
            raise Fail("after a user's group add: %s" % st["members"])
        result["user_refused"] = p.stderr.strip()
        # The members' namespaces: stopped in turn, followers first.
        lid, _ = g.leader()
        for mnt in g.mnt:
            unmount(mnt)
        g.mnt = []
        ends = g.stop_for_digests([j for j in g.ids if j != lid] + [lid])
        result["ends"] = {str(i): v for i, v in ends.items()}
        rc = 0
    except (Fail, machines.HostError) as e:
        result["fail"] = str(e)
        print("FAIL: %s" % e, file=sys.stderr)
        if isinstance(e, machines.HostError):
            rc = 77
    finally:
        left = g.stop()
        if left:  # what could not be removed (machines.remove_leftovers)
            result["left"] = left
            rc = rc or 1
    print(json.dumps(result, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
