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

import json
import os
import shutil
import subprocess
import time

from swcluster import Child

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
        return (["ip", "netns", "exec", m.netns] + argv) if m.netns else argv

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

    def start(self):
        ids = sorted(self.members)
        for i in ids:
            self.start_etcd(i)
        first = ids[0]
        self.start_master(first)
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
        return self.leader(60)

    @property
    def chunkserver_key(self):
        return self.path("m%d" % min(self.members), "chunkserver.key")

    def stop(self):
        for h in self.master.values():
            if h.poll() is None:
                h.stop(20)
        for h in self.etcd.values():
            h.stop(10)
