"""A group of sweepfs masters (master/group.h) with an etcd member beside
each, for the tests and the benchmarks: on loopback (each member on ports
of its own) or one per network namespace (a "machine", bench/machines.py).

    g = Group(workdir, build, [Member(1, "127.0.0.1", 9501, 23791, 23801),
                               ...])
    g.start()            # etcd members, then the masters; until one leads
    g.leader()           # (id, status JSON) of the leader
    g.stop()

Every member holds the same keys (token.key, session.key,
chunkserver.key): the first one makes them and the others get copies, as
an operator would copy them, so that tokens, sessions' secrets and
chunkservers stay valid across a failover."""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from swcluster import Child, in_netns, pick_port

KEYS = ("token.key", "session.key", "chunkserver.key")


class Error(Exception):
    pass


class Member:
    def __init__(self, id_, host, port, etcd_client, etcd_peer, netns=None):
        self.id = id_
        self.host = host
        self.port = port
        self.etcd_client = etcd_client
        self.etcd_peer = etcd_peer
        self.netns = netns

    @property
    def addr(self):
        return "%s:%d" % (self.host, self.port)


def loopback_members(n=3, host="127.0.0.1"):
    """@n members on @host, each with ports of its own nobody listens
    on: the master's, etcd's client and peer ports."""
    taken, members = set(), []
    for i in range(1, n + 1):
        ports = []
        for _ in range(3):
            p = pick_port(host, avoid=taken)
            taken.add(p)
            ports.append(p)
        members.append(Member(i, host, *ports))
    return members


def scenario(make_group, run):
    """The driver of an integration scenario on a group: --build and
    --tmp; make_group(args) makes the group, run(group, result) does the
    work and raises Error on a failure. Prints the result as JSON; exit
    status 0 pass, 1 fail, 77 skip (no etcd). SIGTERM (meson's timeout,
    the wrapper's clean-up) takes everything down on the way out."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--tmp", required=True)
    a = ap.parse_args()
    if not shutil.which("etcd"):
        print("etcd is not installed", file=sys.stderr)
        return 77
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    g = make_group(a)
    result = {}
    rc = 1
    try:
        run(g, result)
        rc = 0
    except Error as e:
        result["fail"] = str(e)
        print("FAIL: %s" % e, file=sys.stderr)
    finally:
        g.stop()
    print(json.dumps(result, indent=1))
    return rc


class Group:
    def __init__(self, workdir, build, members, master_set=(),
                 log_level="info"):
        self.workdir = workdir
        self.build = build
        self.members = {m.id: m for m in members}
        self.master_set = list(master_set)
        self.log_level = log_level
        self.etcd = {}
        self.master = {}
        self.status = {}
        self.spec = ",".join("%d=%s" % (m.id, m.addr) for m in members)
        self.list = ",".join(m.addr for m in members)

    def path(self, *p):
        return os.path.join(self.workdir, *p)

    def _argv(self, m, argv):
        return in_netns(m.netns, argv)  # not `ip netns exec`: see there

    def _spawn(self, argv, log):
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            return Child(argv, stdout=fd, stderr=fd)
        finally:
            os.close(fd)

    def start_etcd(self, i):
        m = self.members[i]
        cluster = ",".join("e%d=http://%s:%d" % (o.id, o.host, o.etcd_peer)
                           for o in self.members.values())
        d = self.path("etcd%d" % i)
        os.makedirs(d, exist_ok=True)
        urls = "http://%s:%d" % (m.host, m.etcd_client)
        if m.netns:
            urls += ",http://127.0.0.1:%d" % m.etcd_client
        argv = ["etcd", "--name", "e%d" % i, "--data-dir", d,
                "--listen-client-urls", urls,
                "--advertise-client-urls",
                "http://%s:%d" % (m.host, m.etcd_client),
                "--listen-peer-urls", "http://%s:%d" % (m.host, m.etcd_peer),
                "--initial-advertise-peer-urls",
                "http://%s:%d" % (m.host, m.etcd_peer),
                "--initial-cluster", cluster,
                "--initial-cluster-state", "new", "--log-level", "warn",
                # A member coming back from a cut does not depose the
                # etcd leader (the default from etcd 3.5 on).
                "--pre-vote"]
        self.etcd[i] = self._spawn(self._argv(m, argv),
                                   self.path("etcd%d.log" % i))

    def start_master(self, i):
        m = self.members[i]
        d = self.path("m%d" % i)
        os.makedirs(d, exist_ok=True)
        # Its own etcd member first: the others only when it is gone.
        own = "127.0.0.1" if m.netns else m.host
        endpoints = ",".join(["%s:%d" % (own, m.etcd_client)] +
                             ["%s:%d" % (o.host, o.etcd_client)
                              for o in self.members.values() if o.id != i])
        argv = [self.build + "/master/sweepfs-master", "-f", "-d", d,
                "-l", m.addr, "--id", str(i), "--group", self.spec,
                "-s", "etcd=" + endpoints,
                "-s", "exports_file=/nonexistent",
                "-v", self.log_level]
        for kv in self.master_set:
            argv += ["-s", kv]
        log = self.path("m%d.log" % i)
        with open(log, "a") as f:
            f.write("==== start\n")
        self.master[i] = self._spawn(self._argv(m, argv), log)

    def wait_listening(self, i, timeout=30):
        """Wait until member @i, as last started, listens (its signal
        handlers are in place from then on)."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.path("m%d.log" % i), errors="replace") as f:
                last = f.read().rsplit("==== start\n", 1)[-1]
            if "listening on " in last:
                return
            if self.master[i].poll() is not None:
                raise Error("member %d exited with %s as it started" %
                            (i, self.master[i].returncode))
            if time.monotonic() > deadline:
                raise Error("member %d does not listen %d s after its "
                            "start" % (i, timeout))
            time.sleep(0.05)

    def master_exit(self, i, timeout):
        st = self.master[i].wait(timeout)
        self.status[i] = st
        return st

    def tool(self, *args, timeout=20, check=True):
        p = subprocess.run([self.build + "/tools/sweepfs", "-m", self.list] +
                           list(args), capture_output=True, text=True,
                           timeout=timeout)
        if check and p.returncode:
            raise Error("sweepfs %s: %s" % (" ".join(args), p.stderr))
        return p

    def leader(self, timeout=30):
        """(id, status) of the leader, as the group says."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                p = self.tool("status", "--json", timeout=10, check=False)
                if p.returncode == 0:
                    st = json.loads(p.stdout)
                    if st.get("role") == "leader":
                        return st["member_id"], st
            except (ValueError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.1)
        raise Error("no leader within %d s" % timeout)

    def start(self, leader_timeout=60, first_leads=False):
        """Start etcd and the members, the lowest id first; with
        @first_leads, the others only once it leads (it holds the state
        the group starts from: a master turned into a group)."""
        ids = sorted(self.members)
        for i in ids:
            self.start_etcd(i)
        first = ids[0]
        self.start_master(first)
        if first_leads:
            lid, _ = self.leader(leader_timeout)
            if lid != first:
                raise Error("member %d leads, not %d" % (lid, first))
        deadline = time.monotonic() + 20
        while not all(os.path.exists(self.path("m%d" % first, k))
                      for k in KEYS):
            if time.monotonic() > deadline:
                raise Error("master %d made no keys" % first)
            time.sleep(0.05)
        time.sleep(0.2)
        for i in ids[1:]:
            os.makedirs(self.path("m%d" % i), exist_ok=True)
            for k in KEYS:
                shutil.copy2(self.path("m%d" % first, k),
                             self.path("m%d" % i, k))
            self.start_master(i)
        return self.leader(leader_timeout)

    def stop_for_digests(self, order):
        """Stop the members in @order (SIGTERM: each must exit 0) and
        return {id: "VERSION DIGEST"} as each logged it on its way out;
        Error when one did not, or when they differ."""
        ends = {}
        for i in order:
            # One restarted a moment ago may not handle SIGTERM yet.
            self.wait_listening(i)
            self.master[i].send_signal(signal.SIGTERM)
            if self.master_exit(i, 30) != 0:
                raise Error("member %d did not stop cleanly (status %s)" %
                            (i, self.status[i]))
            with open(self.path("m%d.log" % i), errors="replace") as f:
                m = re.findall(r"stopped at version (\d+), digest (\w+)",
                               f.read())
            if not m:
                raise Error("member %d logged no digest" % i)
            ends[i] = "%s %s" % m[-1]
        if len(set(ends.values())) != 1:
            raise Error("the members differ: %s" % ends)
        return ends

    @property
    def chunkserver_key(self):
        return self.path("m%d" % min(self.members), "chunkserver.key")

    def stop(self):
        for h in self.master.values():
            if h.poll() is None:
                h.stop(20)
        for h in self.etcd.values():
            h.stop(10)
