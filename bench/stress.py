#!/usr/bin/env python3
"""Stress harness (issue 6): K client machines, each a network namespace
with its own address and its own sweepfs mount, run one workload against
one master at the same moment; the harness reports aggregate and
per-client rates, the master's CPU, bytes on the wire per client session,
and latency percentiles per operation, as a table and as JSON with the
run's context (bench/results/stress-*.json).

  bench/stress.py --workload delete --method rm-rf --clients 1,8 --files 100000
  bench/stress.py --workload create --clients 8 --files 20000 [--shared]
  bench/stress.py --workload mixed --clients 4 --duration 60
  bench/stress.py --quick --workload delete --clients 2     (seconds)
  bench/stress.py --cleanup        (what a killed run left behind)

Workloads:
  delete  the MooseFS experiment: every client removes its own copy of a
          `flat` tree (N empty files in two directories; one tree is
          built, then copied with `sweepfs snapshot` once per client)
          with --method rm-rf (GNU rm -rf), removeall (Go's os.RemoveAll:
          tools/compare_delete/go-removeall/main.go, built with `go
          build`) or sweepfs-rm
          (`sweepfs rm`). Rate: files per second.
  create  a create storm: every client creates N empty files in a
          directory of its own, or with --shared all in one directory.
  mixed   for --duration seconds, every client writes, rewrites, reads
          back, stats, lists and deletes small files (1 byte to
          --max-size, data through a chunkserver) in its own directory,
          checking every result against what it wrote; then another
          mount reads every file back.

--clients 1,8 runs the workload with 1 client, then with 8, on the same
cluster, and reports the ratio of the aggregate rates (the scaling).

Machines (bench/machines.py): a bridge on the host holds the subnet's
first address; the server machine (netns swstress-PID-srv) runs the
master, the chunkservers and an admin mount; client machine i (netns
swstress-PID-ci) runs an agent (bench/stress_agent.py) that mounts sweepfs
and runs the workload there. The master sits in a namespace of its own,
not on the host, so that every process of a run lives in a namespace
named after it: a killed run is cleaned up completely by killing those
namespaces' processes (`--cleanup`), and the master's port cannot clash
with anything on the host. Clients are not admins in the exports file;
the host and the server machine are.

Measures: rates from the clients' own clocks (aggregate = all operations
/ from the first client's start to the last one's end); the master's CPU
and wire bytes from `sweepfs stats --json --sessions`, before and after
(bytes "in" are what the master received); latencies as each client saw
them, per system call, for create and mixed (a delete runs a whole
program: its wall and CPU time are reported instead).

Exit status: 0 every check passed, 1 a client failed or a check did not
pass, 2 bad usage or a host without what this needs (root, iproute2,
network namespaces, /dev/fuse), 128+N stopped by signal N.
"""

import argparse
import array
import atexit
import ipaddress
import json
import os
import select
import shlex
import signal
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster  # noqa: E402  (puts scripts/ on the path)
import machines  # noqa: E402
import swcluster  # noqa: E402

AGENT = os.path.join(HERE, "stress_agent.py")
GO_REMOVEALL = os.path.join(HERE, "..", "tools", "compare_delete",
                            "go-removeall")
MASTER_PORT = 9521
DEFAULT_SUBNET = "10.213.0.0/24"
MIXED_WEIGHTS = "read:35,write:20,rewrite:10,stat:10,list:5,delete:20"
# Clients start together this long after the harness sends "run", so
# that every agent has its request before the clock starts.
START_DELAY_S = 0.5
QUICK = {"clients": "2", "files": 2000, "duration": 3.0, "timeout": 120,
         "mixed_files": 50}


def log(msg):
    print("%s %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr,
          flush=True)


class Failure(Exception):
    """The run cannot go on (a daemon or an agent failed)."""


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__("signal %d" % signum)
        self.signum = signum


def on_signal(signum, frame):
    raise Interrupted(signum)


# ---- agents -----------------------------------------------------------------

class Agent:
    """The harness's end of a stress_agent.py in a machine: requests go
    down its stdin, replies come up its stdout, one JSON line each."""

    def __init__(self, role, ns, argv, logpath):
        self.role = role
        self.ns = ns
        self.logpath = logpath
        rin, self.w = os.pipe()
        self.r, wout = os.pipe()
        logfd = os.open(logpath, os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                        0o644)
        try:
            self.child = machines.Child(machines.in_netns(ns, argv),
                                        stdin=rin, stdout=wout, stderr=logfd)
        finally:
            for fd in (rin, wout, logfd):
                os.close(fd)
        self.buf = b""
        self.mount_pid = None
        self.busy = True  # until its first reply, "mounted"

    def send(self, msg):
        self.busy = True
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(self.w, data):]

    def _line(self):
        i = self.buf.find(b"\n")
        if i < 0:
            return None
        line, self.buf = self.buf[:i], self.buf[i + 1:]
        self.busy = False
        return json.loads(line)

    def feed(self):
        """Read what is there; False at the end of the stream."""
        b = os.read(self.r, 1 << 20)
        self.buf += b
        return bool(b)

    def log_tail(self, lines=15):
        try:
            with open(self.logpath) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def died(self):
        status = self.child.wait(5)
        return Failure("agent %s ended (status %s); its log:\n%s" %
                       (self.role, status, self.log_tail()))

    def quit(self):
        if self.w is not None:
            os.close(self.w)  # the end of its stdin: it unmounts and exits
            self.w = None

    def close(self):
        self.quit()
        self.child.stop(10)
        if self.r is not None:
            os.close(self.r)
            self.r = None


def collect(agents, timeout):
    """The next reply of every agent in @agents, {role: reply}, waiting at
    most @timeout seconds in all. A reply {"ok": false} raises Failure."""
    deadline = time.monotonic() + timeout
    replies = {}
    waiting = {}
    for ag in agents:
        msg = ag._line()
        if msg is None:
            waiting[ag.r] = ag
        else:
            replies[ag.role] = msg
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failure("no reply from %s in %d s" % (
                ", ".join(ag.role for ag in waiting.values()), timeout))
        ready, _, _ = select.select(list(waiting), [], [], left)
        for fd in ready:
            ag = waiting[fd]
            if not ag.feed():
                raise ag.died()
            msg = ag._line()
            if msg is not None:
                replies[ag.role] = msg
                del waiting[fd]
    for role, msg in replies.items():
        if not msg.get("ok"):
            raise Failure("%s: %s" % (role, msg.get("error")))
    return replies


def call(agent, msg, timeout=600):
    agent.send(msg)
    return collect([agent], timeout)[agent.role]


# ---- statistics -------------------------------------------------------------

def percentiles(samples):
    """Latency summary, in us, of samples in ns (nearest rank)."""
    if not samples:
        return None
    s = sorted(samples)

    def pick(q):
        return s[min(len(s) - 1, int(len(s) * q))] / 1e3

    return {"n": len(s), "p50_us": pick(0.50), "p99_us": pick(0.99),
            "max_us": s[-1] / 1e3}


def load_latencies(path):
    a = array.array("q")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def session_counters(stats, address):
    """The counters of the mount sessions from @address, summed (a
    client that reconnected has had more than one)."""
    out = {"bytes_in": 0, "bytes_out": 0, "requests": 0,
           "readdir_entries": 0, "errors": 0, "batch_ops": 0, "by_type": {}}
    for s in stats.get("sessions", []):
        if s["role"] != "mount" or s["peer"].rsplit(":", 1)[0] != address:
            continue
        c = s.get("counters") or {}
        for k in ("bytes_in", "bytes_out", "readdir_entries", "errors",
                  "batch_ops"):
            out[k] += c.get(k, 0)
        for op, n in c.get("requests", {}).items():
            out["requests"] += n
            out["by_type"][op] = out["by_type"].get(op, 0) + n
    return out


def delta(after, before):
    """@after - @before, key by key (nested one level, for by_type)."""
    out = {}
    for k, v in after.items():
        if isinstance(v, dict):
            d = {op: n - before.get(k, {}).get(op, 0) for op, n in v.items()}
            out[k] = {op: n for op, n in sorted(d.items()) if n}
        else:
            out[k] = v - before.get(k, 0)
    return out


def mb(n):
    return n / 1e6


# ---- the run ----------------------------------------------------------------

class Stress:
    """One run: the machines, the cluster in them, the agents, and the
    phases of the workload (one per --clients count)."""

    def __init__(self, a):
        self.a = a
        self.build = a.build
        self.dir = None
        self.net = None
        self.cluster = None   # swcluster.Cluster: master, chunkservers
        self.master = None
        self.chunkservers = []
        self.admin = None
        self.clients = []
        self.removeall = None
        self.source_made = False   # delete: the tree to snapshot
        self.sanitizer_reports = []  # from the daemons' logs, at the end
        self.torn_down = False

    # ---- set-up --------------------------------------------------------

    def setup(self):
        a = self.a
        machines.check_environment()
        for prog in ("master/sweepfs-master", "mount/sweepfs-mount",
                     "tools/sweepfs", "chunkserver/sweepfs-chunkserver"):
            if not os.access(os.path.join(self.build, prog), os.X_OK):
                raise machines.HostError("no %s in %s (ninja -C %s?)" %
                                         (prog, self.build, self.build))
        # Other runs, going or killed, are in the way only on the same
        # subnet, which machines.Network refuses (its bridge's route):
        # every name carries its run's pid. So runs on other subnets
        # (--subnet) go side by side: integration.stress failed when
        # another worktree's run was going, or had been killed.
        found, live = machines.leftovers([a.base] if a.base else [])
        if live:
            log("other stress runs going (pid %s): this one needs a "
                "subnet of its own" % ", ".join(map(str, live)))
        if any(found.values()):
            log("a stress run that was killed left %s; remove them with: "
                "%s --cleanup%s" % (", ".join(sum(found.values(), [])[:4]),
                                    sys.argv[0],
                                    " --base " + a.base if a.base else ""))
        self.dir = tempfile.mkdtemp(prefix="%s%d-" % (machines.PREFIX_DIR,
                                                      os.getpid()),
                                    dir=a.base)
        os.chmod(self.dir, 0o755)
        log("run directory %s" % self.dir)
        self.net = machines.Network(a.subnet)
        self.srv = self.net.add("srv")
        for i in range(max(a.clients)):
            self.net.add("c%d" % i)
        self.net.create()
        log("network: bridge %s (%s), server %s, %d clients from %s" % (
            self.net.bridge, self.net.host_address, self.srv,
            max(a.clients), self.net.address("c0")))
        if a.workload == "delete" and a.method == "removeall":
            self.build_removeall()
        self.start_master()
        self.start_chunkservers()
        self.start_agents()

    def build_removeall(self):
        self.removeall = os.path.join(self.dir, "removeall")
        try:
            machines.run(["go", "-C", GO_REMOVEALL,
                          "build", "-o", self.removeall, "."], timeout=300)
        except (OSError, RuntimeError) as e:
            raise machines.HostError("cannot build go-removeall (Go's "
                                     "os.RemoveAll): %s" % e)

    def start_master(self):
        a = self.a
        meta = os.path.join(self.dir, "meta")
        os.mkdir(meta)
        exports = os.path.join(self.dir, "exports.cfg")
        with open(exports, "w") as f:
            f.write("# bench/stress.py: the host and the server machine "
                    "administer;\n# the clients read and write as root.\n"
                    "%s-%s\t/\trw,alldirs,admin,maproot=0\n"
                    "%s\t/\trw,alldirs,maproot=0\n" % (
                        self.net.host_address, self.srv, self.net.subnet))
        # The cluster launcher runs the daemons in the server machine
        # (ip netns exec), on fixed ports: nothing else is there.
        self.cluster = swcluster.Cluster(
            self.dir, swcluster.Binaries.find(self.build), log_level=None,
            netns=self.net.netns("srv"))
        args = ["--set", "exports_file=" + exports]
        for kv in a.set:
            args += ["--set", kv]
        try:
            self.cluster.start_master(args=args, host=self.srv,
                                      port=MASTER_PORT, fixed_port=True,
                                      data=meta)
        except swcluster.Error as e:
            raise Failure(str(e))
        self.master = self.cluster.handles["master"]
        self.master_addr = self.cluster.master_address()
        try:
            socket.create_connection((self.srv, MASTER_PORT), 5).close()
        except OSError as e:
            raise Failure(
                "cannot reach the master at %s over the bridge: %s (is "
                "bridged traffic filtered? see "
                "net.bridge.bridge-nf-call-iptables)" % (self.master_addr, e))

    def start_chunkservers(self):
        try:
            for i in range(self.a.chunkservers):
                self.cluster.start_chunkserver(
                    i + 1, args=[], port=MASTER_PORT + 1 + i,
                    fixed_port=True)
                self.chunkservers.append(self.cluster.handles["cs%d" %
                                                              (i + 1)])
            self.cluster.wait_registered(30)
        except swcluster.Error as e:
            raise Failure(str(e))

    def agent_argv(self, role, mnt):
        argv = [sys.executable, AGENT, "--role", role, "--master",
                self.master_addr, "--mnt", mnt, "--build", self.build,
                "--run-dir", self.dir, "--parent", str(os.getpid())]
        if self.a.mount_opts:
            argv += ["--mount-opts", self.a.mount_opts]
        return argv

    def start_agents(self):
        roles = ["admin"] + ["c%d" % i for i in range(max(self.a.clients))]
        agents = []
        for role in roles:
            ns = self.net.netns("srv" if role == "admin" else role)
            mnt = os.path.join(self.dir, "mnt-" + role)
            os.mkdir(mnt)
            agents.append(Agent(role, ns, self.agent_argv(role, mnt),
                                os.path.join(self.dir, "agent-%s.log" %
                                             role)))
            if role == "admin":
                self.admin = agents[-1]
            else:
                self.clients.append(agents[-1])
        for role, r in collect(agents, 60).items():
            next(ag for ag in agents if ag.role == role).mount_pid = \
                r["mount_pid"]
        log("%d mounts up" % len(agents))

    # ---- tools ---------------------------------------------------------

    def tool(self, *args, timeout=120):
        _, out, _ = machines.run([os.path.join(self.build, "tools",
                                               "sweepfs"),
                                  "-m", self.master_addr] + list(args),
                                 timeout=timeout)
        return out

    def stats(self):
        return json.loads(self.tool("stats", "--json", "--sessions"))

    def wait_nodes(self, want, timeout=60):
        """Until the master holds @want nodes (the removal of unlinked
        nodes may trail the replies); the last count seen."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.stats()
            if s["nodes"] == want or time.monotonic() > deadline:
                return s
            time.sleep(0.2)

    def wait_purge(self, timeout=600):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.stats()
            if s["purge_left"] == 0 and s["purge_roots"] == 0:
                return
            time.sleep(0.2)
        raise Failure("the purge did not finish in %d s" % timeout)

    # ---- phases --------------------------------------------------------

    def phase(self, index, k):
        a = self.a
        tag = "p%d" % index
        who = self.clients[:k]
        log("phase %d: %s with %d client%s" % (index, a.workload, k,
                                               "s" * (k != 1)))
        prep = getattr(self, "prepare_" + a.workload)(tag, who)
        before = self.stats()
        cs_cpu = [machines.proc_cpu_seconds(cs.pid) for cs in
                  self.chunkservers]
        start_at = time.monotonic() + START_DELAY_S
        for ag in who:
            msg = {"cmd": "run", "workload": a.workload, "tag": tag,
                   "start_at": start_at, "timeout": a.timeout}
            msg.update(prep[ag.role])
            ag.send(msg)
        log("phase %d: running" % index)
        replies = collect(who, a.timeout + 120)
        after = self.stats()
        result = self.summarize(tag, k, who, replies, before, after)
        if self.chunkservers:
            result["chunkserver_cpu_s"] = sum(
                machines.proc_cpu_seconds(cs.pid) - c0
                for cs, c0 in zip(self.chunkservers, cs_cpu))
        getattr(self, "check_" + a.workload)(tag, who, replies, before,
                                             result)
        result["ok"] = not result["problems"]
        return result

    # delete

    def prepare_delete(self, tag, who):
        a = self.a
        if not self.source_made:
            log("building the flat tree: %d files" % a.files)
            r = call(self.admin, {"cmd": "mkflat", "path": "src",
                                  "n": a.files},
                     timeout=max(600, a.files / 100))
            log("built in %.1f s" % r["seconds"])
            self.source_made = True
        call(self.admin, {"cmd": "mkdir", "paths": [tag]})
        t = 0
        for ag in who:
            r = call(self.admin, {"cmd": "snapshot", "src": "src",
                                  "dst": "%s/%s" % (tag, ag.role),
                                  "timeout": max(600, a.files / 100)},
                     timeout=max(660, a.files / 100))
            t += r["seconds"]
        log("%d snapshots in %.1f s" % (len(who), t))
        return {ag.role: {"method": a.method, "removeall": self.removeall,
                          "path": "%s/%s" % (tag, ag.role)} for ag in who}

    def check_delete(self, tag, who, replies, before, result):
        a = self.a
        nodes = before["nodes"] - len(who) * (a.files + 3)
        # (A tree left half-removed already fails the run: no waiting.)
        gone = all(replies[ag.role]["gone"] for ag in who)
        after = self.wait_nodes(nodes, timeout=60 if gone else 0)
        result["master_nodes"] = {"before": before["nodes"],
                                  "after": after["nodes"],
                                  "expected": nodes}
        if after["nodes"] != nodes:
            result["problems"].append(
                "the master holds %d nodes, %d expected after removing "
                "%d trees" % (after["nodes"], nodes, len(who)))
        left = call(self.admin, {"cmd": "count", "paths": [tag]})["count"]
        if left[tag]:
            result["problems"].append("%d copies left in /%s" % (left[tag],
                                                                 tag))
        for c in result["per_client"]:
            r = replies[c["client"]]
            c["ops"] = a.files - r.get("files_left", 0)
            c["ops_per_s"] = c["ops"] / r["seconds"] if r["seconds"] else 0
            if not r["gone"]:
                result["problems"].append("%s: its tree is still there" %
                                          c["client"])
            if "rm_stats" in r:
                c["rm_stats"] = r["rm_stats"]
        self.aggregate(result)

    # create

    def prepare_create(self, tag, who):
        a = self.a
        dirs = {ag.role: "%s/shared" % tag if a.shared else
                "%s/%s" % (tag, ag.role) for ag in who}
        call(self.admin, {"cmd": "mkdir", "paths": sorted(set(
            dirs.values()))})
        return {ag.role: {"dir": dirs[ag.role], "n": a.files}
                for ag in who}

    def check_create(self, tag, who, replies, before, result):
        a = self.a
        k = len(who)
        nodes = before["nodes"] + k * a.files
        after = self.wait_nodes(nodes, timeout=10)
        result["master_nodes"] = {"before": before["nodes"],
                                  "after": after["nodes"],
                                  "expected": nodes}
        if after["nodes"] != nodes:
            result["problems"].append("the master holds %d nodes, %d "
                                      "expected" % (after["nodes"], nodes))
        dirs = ["%s/shared" % tag] if a.shared else [
            "%s/%s" % (tag, ag.role) for ag in who]
        counts = call(self.admin, {"cmd": "count", "paths": dirs})["count"]
        want = k * a.files if a.shared else a.files
        for d, n in counts.items():
            if n != want:
                result["problems"].append("/%s holds %s entries, %d "
                                          "expected" % (d, n, want))
        self.remove_phase_tree(tag)

    # mixed

    def prepare_mixed(self, tag, who):
        a = self.a
        call(self.admin, {"cmd": "mkdir", "paths": [tag]})
        for ag in who:
            ag.send({"cmd": "prepare", "workload": "mixed",
                     "dir": "%s/%s" % (tag, ag.role),
                     "files": a.mixed_files, "max_size": a.max_size,
                     "seed": a.seed * 1000 + int(ag.role[1:]),
                     "weights": a.weights})
        collect(who, 600)
        return {ag.role: {"duration": a.duration, "max_ops": a.max_ops}
                for ag in who}

    def check_mixed(self, tag, who, replies, before, result):
        # Another mount (its own page cache) reads every file back.
        bad = 0
        for ag in who:
            r = replies[ag.role]
            v = call(self.admin, {"cmd": "verify",
                                  "dir": "%s/%s" % (tag, ag.role),
                                  "manifest": r["manifest"]})
            bad += v["nbad"]
            for line in v["bad"][:5]:
                result["problems"].append("%s, read back by another "
                                          "mount: %s" % (ag.role, line))
        result["verified_files"] = sum(len(replies[ag.role]["manifest"])
                                       for ag in who)
        result["verify_failures"] = bad
        self.remove_phase_tree(tag)

    def remove_phase_tree(self, tag):
        call(self.admin, {"cmd": "rmr", "path": tag})
        self.wait_purge()

    # ---- results -------------------------------------------------------

    def summarize(self, tag, k, who, replies, before, after):
        a = self.a
        t0 = min(r["t_start"] for r in replies.values())
        t1 = max(r["t_end"] for r in replies.values())
        cpu = (after["cpu_user_ms"] + after["cpu_system_ms"] -
               before["cpu_user_ms"] - before["cpu_system_ms"]) / 1e3
        total = {k_: after["total"][k_] - before["total"].get(k_, 0)
                 for k_ in ("bytes_in", "bytes_out", "readdir_entries")}
        reqs = {op: n - before["total"]["requests"].get(op, 0)
                for op, n in after["total"]["requests"].items()}
        total["requests"] = {op: n for op, n in sorted(reqs.items()) if n}
        result = {"clients": k, "tag": tag, "wall_s": t1 - t0,
                  "master": {"cpu_s": cpu,
                             "cpu_pct": 100 * cpu / (t1 - t0)
                             if t1 > t0 else None,
                             "rss_bytes": after["rss_bytes"], **total},
                  "per_client": [], "problems": []}
        merged = {}
        for ag in who:
            r = replies[ag.role]
            addr = self.net.address(ag.role)
            c = {"client": ag.role, "address": addr,
                 "seconds": r["seconds"], "ops": r.get("ops", 0),
                 "cpu_s": r.get("cpu_s"), "mount_cpu_s": r.get("mount_cpu_s"),
                 "wire": delta(session_counters(after, addr),
                               session_counters(before, addr)),
                 "start_skew_s": r["t_start"] - t0}
            if "ops_by_type" in r:
                c["ops_by_type"] = r["ops_by_type"]
            c["ops_per_s"] = c["ops"] / r["seconds"] if r["seconds"] else 0
            for key in ("latency", "errors", "nwrong", "wrong", "bytes"):
                if r.get(key):
                    c[key] = r[key]
            for op, path in r.get("latency_files", {}).items():
                merged.setdefault(op, array.array("q")).extend(
                    load_latencies(path))
            if r.get("timed_out"):
                result["problems"].append("%s: stopped after --timeout %d s"
                                          % (ag.role, a.timeout))
            if r.get("status") and not r.get("timed_out"):
                result["problems"].append("%s: %s exited with status %d: %s"
                                          % (ag.role, a.method, r["status"],
                                             r.get("output", "")[-300:]))
            if r.get("errors"):
                result["problems"].append("%s: failed calls %s" %
                                          (ag.role, r["errors"]))
            for w in r.get("wrong", [])[:5]:
                result["problems"].append("%s: %s" % (ag.role, w))
            result["per_client"].append(c)
        result["latency"] = {op: percentiles(v) for op, v in
                             sorted(merged.items())}
        if a.workload == "mixed":
            result["bytes"] = sum(c.get("bytes", 0)
                                  for c in result["per_client"])
        self.aggregate(result)
        return result

    @staticmethod
    def aggregate(result):
        ops = sum(c["ops"] for c in result["per_client"])
        result["ops"] = ops
        result["ops_per_s"] = ops / result["wall_s"] if result[
            "wall_s"] else 0

    # ---- tear-down -----------------------------------------------------

    def teardown(self):
        if self.torn_down:
            return
        self.torn_down = True
        agents = ([self.admin] if self.admin else []) + self.clients
        # An idle agent stops at the end of its stdin; one that is busy
        # (we were interrupted, or gave up waiting) on SIGTERM. Either way
        # it stops its program and unmounts.
        for ag in agents:
            ag.quit()
            if ag.busy:
                ag.child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for ag in agents:
            ag.child.wait(max(0.1, deadline - time.monotonic()))
        for ag in agents:
            ag.close()
        if self.cluster:
            self.cluster.teardown()
        problems = []
        if self.net:
            problems += self.net.destroy(log=lambda m: None)
        if self.dir and os.path.isdir(self.dir):
            self.sanitizer_reports = sanitizer_reports(self.dir)
            if self.a.keep:
                log("kept %s" % self.dir)
            else:
                problems += machines.remove_leftovers(
                    {"netns": [], "links": [], "dirs": [self.dir]},
                    log=lambda m: None)
        for p in problems:
            log("could not remove %s (try --cleanup)" % p)


def sanitizer_reports(d):
    """The first lines of every sanitizer report in the logs of run
    directory @d (a sanitizer build writes them to the daemons' stderr)."""
    return ["%s: %s" % (name, text)
            for name, text in swcluster.sanitizer_reports(d, context=12)]


# ---- report -----------------------------------------------------------------

def unit(workload):
    return "files/s" if workload in ("delete", "create") else "ops/s"


def print_phase(a, r):
    what = {"delete": "delete (%s) of a flat tree of %d files per client" %
            (a.method, a.files),
            "create": "create storm: %d empty files per client%s" %
            (a.files, ", one shared directory" if a.shared else ""),
            "mixed": "mixed small-file load for %.0f s" % a.duration}
    print("\n== %d client%s: %s" % (r["clients"], "s" * (r["clients"] != 1),
                                    what[a.workload]))
    print("%-7s %-13s %10s %9s %7s %8s %9s %9s %9s %10s" % (
        "client", "address", unit(a.workload), "seconds", "cpu s",
        "mount s", "requests", "in MB", "out MB", "readdir"))
    for c in r["per_client"]:
        w = c["wire"]
        print("%-7s %-13s %10.0f %9.2f %7s %8s %9d %9.2f %9.2f %10d" % (
            c["client"], c["address"], c["ops_per_s"], c["seconds"],
            "%.2f" % c["cpu_s"] if c["cpu_s"] is not None else "-",
            "%.2f" % c["mount_cpu_s"] if c.get("mount_cpu_s") is not None
            else "-", w["requests"], mb(w["bytes_in"]), mb(w["bytes_out"]),
            w["readdir_entries"]))
    m = r["master"]
    print("%-7s %-13s %10.0f %9.2f   master CPU %.2f s (%.0f%% of one core),"
          " in %.2f MB, out %.2f MB, %d readdir entries" % (
              "all", "%d ops" % r["ops"], r["ops_per_s"], r["wall_s"],
              m["cpu_s"], m["cpu_pct"] or 0, mb(m["bytes_in"]),
              mb(m["bytes_out"]), m["readdir_entries"]))
    if "bytes" in r:
        print("data read and written by the clients: %.2f MB (%.2f MB/s); "
              "chunkserver CPU %.2f s" % (mb(r["bytes"]), mb(r["bytes"]) /
                                          r["wall_s"],
                                          r.get("chunkserver_cpu_s", 0)))
    if r["latency"]:
        print("%-9s %9s %10s %10s %10s" % ("latency", "n", "p50 us",
                                            "p99 us", "max us"))
        for op, s in r["latency"].items():
            print("%-9s %9d %10.1f %10.1f %10.1f" % (
                op, s["n"], s["p50_us"], s["p99_us"], s["max_us"]))
    for p in r["problems"]:
        print("PROBLEM: " + p)


LEGEND = """
cpu s: CPU of the client's program (delete) or agent (create, mixed);
mount s: CPU of its sweepfs-mount; requests, in, out, readdir: its
session at the master (requests, bytes received, bytes sent, directory
entries sent), from `sweepfs stats --sessions`."""


def scaling(results):
    if len(results) < 2:
        return None
    base = results[0]
    out = []
    for r in results[1:]:
        ratio = r["ops_per_s"] / base["ops_per_s"] if base["ops_per_s"] \
            else None
        out.append({"from_clients": base["clients"],
                    "to_clients": r["clients"], "aggregate_ratio": ratio,
                    "of_linear": ratio * base["clients"] / r["clients"]
                    if ratio else None})
    return out


# ---- command line -----------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Run as root. See the top of bench/stress.py for what is "
               "measured and how.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=("delete", "create", "mixed"),
                    default="delete")
    ap.add_argument("--method", choices=("rm-rf", "removeall", "sweepfs-rm"),
                    default="rm-rf", help="how clients delete (delete)")
    ap.add_argument("--clients", help="client machines; a list (1,8) runs "
                    "one phase per count and gives the scaling (4)")
    ap.add_argument("-n", "--files", type=int, help="files per tree "
                    "(delete) or per client (create) (100000)")
    ap.add_argument("--shared", action="store_true",
                    help="create: all clients in one directory")
    ap.add_argument("--duration", type=float, help="mixed: seconds (30)")
    ap.add_argument("--mixed-files", type=int,
                    help="mixed: files each client starts with (200)")
    ap.add_argument("--max-size", type=int, default=65536,
                    help="mixed: largest file in bytes (65536)")
    ap.add_argument("--weights", default=MIXED_WEIGHTS,
                    help="mixed: operation weights (%(default)s)")
    ap.add_argument("--max-ops", type=int, default=10 ** 7,
                    help="mixed: operations per client at most")
    ap.add_argument("--seed", type=int, default=1,
                    help="mixed: seed of every client's choices (1)")
    ap.add_argument("--chunkservers", type=int,
                    help="chunkservers (1 for mixed, else 0)")
    ap.add_argument("--timeout", type=int,
                    help="seconds a phase may run (3600)")
    ap.add_argument("--quick", action="store_true",
                    help="small defaults, for the test suite: %s" % QUICK)
    ap.add_argument("--subnet", default=DEFAULT_SUBNET,
                    help="the machines' subnet (%(default)s)")
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--set", action="append", default=[],
                    metavar="KEY=VALUE", help="master configuration")
    ap.add_argument("--mount-opts", default="",
                    help="sweepfs-mount -o options for the clients")
    ap.add_argument("--base", help="where the run directory goes "
                    "(default: the temp directory)")
    ap.add_argument("--out", help="JSON result (default: "
                    "bench/results/stress-WORKLOAD-DATE.json)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the run directory (logs, metadata)")
    ap.add_argument("--cleanup", action="store_true",
                    help="remove what killed runs left behind, and exit")
    a = ap.parse_args(argv)
    defaults = {"clients": "4", "files": 100000, "duration": 30.0,
                "timeout": 3600, "mixed_files": 200}
    if a.quick:
        defaults.update(QUICK)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    try:
        a.clients = [int(x) for x in str(a.clients).split(",")]
    except ValueError:
        ap.error("--clients takes counts: 4, or 1,8")
    if not a.clients or min(a.clients) < 1:
        ap.error("--clients must be at least 1")
    if a.files < 1:
        ap.error("--files must be at least 1")
    try:
        a.weights = {k: int(v) for k, v in
                     (x.split(":") for x in a.weights.split(","))}
    except ValueError:
        ap.error("--weights takes OP:N,...: " + MIXED_WEIGHTS)
    try:
        subnet = ipaddress.ip_network(a.subnet)
    except ValueError as e:
        ap.error("--subnet: %s" % e)
    if subnet.version != 4 or subnet.prefixlen > 24:
        ap.error("--subnet must be an IPv4 network of /24 or wider")
    if max(a.clients) > subnet.num_addresses - 4:
        ap.error("--subnet %s has room for %d clients" %
                 (a.subnet, subnet.num_addresses - 4))
    if a.chunkservers is None:
        a.chunkservers = 1 if a.workload == "mixed" else 0
    if a.workload == "mixed" and a.chunkservers < 1:
        ap.error("mixed writes data: it needs --chunkservers 1 or more")
    a.build = os.path.abspath(a.build) if a.build else \
        cluster.default_build()
    return a


def cleanup(a):
    try:
        machines.check_environment(fuse=False)
    except machines.HostError as e:
        print("stress.py: %s" % e, file=sys.stderr)
        return 2
    found, live = machines.leftovers([a.base] if a.base else [])
    if live:
        log("runs still going, left alone: pid %s" %
            ", ".join(map(str, live)))
    if not any(found.values()):
        log("nothing to clean up")
        return 0
    failed = machines.remove_leftovers(found, log)
    for f in failed:
        log("could not remove %s" % f)
    return 1 if failed else 0


def main(argv=None):
    a = parse_args(argv)
    if a.cleanup:
        return cleanup(a)
    command = " ".join(shlex.quote(x) for x in [sys.argv[0]] +
                       (sys.argv[1:] if argv is None else argv))
    stress = Stress(a)
    atexit.register(stress.teardown)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    results = []
    status = 0
    try:
        stress.setup()
        for i, k in enumerate(a.clients):
            results.append(stress.phase(i, k))
    except machines.HostError as e:
        print("stress.py: %s" % e, file=sys.stderr)
        status = 2
    except (Failure, RuntimeError, OSError) as e:
        print("stress.py: %s" % e, file=sys.stderr)
        status = 1
    except Interrupted as e:
        log("interrupted (signal %d): cleaning up" % e.signum)
        status = 128 + e.signum
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        stress.teardown()
    for rep in stress.sanitizer_reports:
        print("stress.py: sanitizer report in %s" % rep, file=sys.stderr)
    if stress.sanitizer_reports and status == 0:
        status = 1
    if not results:
        return status
    for r in results:
        print_phase(a, r)
    print(LEGEND)
    sc = scaling(results)
    for s in sc or []:
        print("\nscaling %d -> %d clients: aggregate %s x%.2f (%.0f%% of "
              "linear)" % (s["from_clients"], s["to_clients"],
                           unit(a.workload), s["aggregate_ratio"] or 0,
                           100 * (s["of_linear"] or 0)))
    ctx = cluster.context(a.build, {
        "benchmark": "stress", "command": command, "workload": a.workload,
        "method": a.method if a.workload == "delete" else None,
        "clients": a.clients, "files": a.files,
        "tree": {"shape": "flat", "files": a.files, "dirs": 2}
        if a.workload == "delete" else None,
        "shared": a.shared if a.workload == "create" else None,
        "mixed": {"duration_s": a.duration, "files": a.mixed_files,
                  "max_size": a.max_size, "weights": a.weights,
                  "seed": a.seed} if a.workload == "mixed" else None,
        "chunkservers": a.chunkservers, "master_config": a.set,
        "mount_opts": a.mount_opts, "quick": a.quick,
        "network": {"subnet": a.subnet, "layout": "bridge on the host; "
                    "master, chunkservers, admin mount in one netns; one "
                    "netns per client"},
        "loadavg": os.getloadavg()})
    out = a.out
    if not out:
        d = os.path.join(HERE, "results")
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, "stress-%s-%s.json" % (
            a.workload, time.strftime("%Y%m%d-%H%M%S")))
    with open(out, "w") as f:
        json.dump({"context": ctx, "phases": results, "scaling": sc,
                   "complete": len(results) == len(a.clients),
                   "sanitizer_reports": stress.sanitizer_reports,
                   "ok": status == 0 and all(r["ok"] for r in results)},
                  f, indent=1)
    print("\nresult: %s" % out)
    if status == 0 and not all(r["ok"] for r in results):
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
