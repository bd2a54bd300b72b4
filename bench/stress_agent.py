#!/usr/bin/env python3
"""One machine of bench/stress.py: mounts sweepfs in the machine it is
started in, then does what the harness asks, one JSON object per line on
stdin, answering each with one JSON line on stdout ({"ok": true, ...} or
{"ok": false, "error": "..."}). Not meant to be run by hand.

The harness starts it with `ip netns exec NS`: the agent, its mount and
the programs it runs share that network namespace and a mount namespace
of their own, so the mount is this machine's alone.

Requests (paths are relative to the root of the file system):
  mkflat    {path, n}            the `flat` tree: n empty files in d0, d1
  snapshot  {src, dst}           `sweepfs snapshot`, as an admin
  mkdir     {paths}
  rmr       {path}               `sweepfs rmr`
  count     {paths}              entries in each directory (None: absent)
  prepare   {workload, ...}      untimed set-up of a workload (mixed)
  run       {workload, start_at, timeout, ...}   the timed part
  verify    {dir, manifest}      read every file back (mixed)
The agent stops, unmounting, on "quit", at the end of stdin, on SIGTERM,
and when the harness dies (PR_SET_PDEATHSIG).
"""

import argparse
import array
import ctypes
import json
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machines  # noqa: E402  (puts scripts/ on the path)
import swcluster  # noqa: E402

PR_SET_PDEATHSIG = 1
# A workload checks its deadline every this many operations.
CHECK_EVERY = 64
# Mixed load: how many files a client keeps at most, as a multiple of
# its initial population (deletes win beyond it).
MIXED_GROWTH = 2


class Stop(Exception):
    """A signal asked the agent to stop."""


def on_signal(signum, frame):
    raise Stop("signal %d" % signum)


def die_with_parent(parent):
    """SIGTERM when the harness goes, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # it went before prctl
        raise Stop("the harness is gone")


def summary(ns):
    """Percentiles of latencies in ns, in us (nearest rank)."""
    if not ns:
        return None
    s = sorted(ns)

    def pick(q):
        return s[min(len(s) - 1, int(len(s) * q))] / 1e3

    return {"n": len(s), "p50_us": pick(0.50), "p99_us": pick(0.99),
            "max_us": s[-1] / 1e3}


def content(seed, size):
    """What a file of the mixed load holds: a function of its seed."""
    return random.Random(seed).randbytes(size)


class Agent:
    def __init__(self, a):
        self.a = a
        self.role = a.role
        self.mnt = os.path.realpath(a.mnt)
        self.cluster = None    # swcluster.Cluster holding our mount
        self.mount = None
        self.child = None      # the workload program running, if any
        self.mixed = None      # MixedLoad after prepare
        self.tool = os.path.join(a.build, "tools", "sweepfs")

    def log(self, msg):
        print("%s [%s] %s" % (time.strftime("%H:%M:%S"), self.role, msg),
              file=sys.stderr, flush=True)

    def path(self, rel):
        return os.path.join(self.mnt, rel.lstrip("/"))

    # ---- mount ----------------------------------------------------------

    def start_mount(self):
        """Mount with the cluster launcher (scripts/swcluster.py), in this
        machine: its mount namespace is ours (ip netns exec made it), a
        copy of the host's mounts, whose sweepfs ones it lets go of first
        so as not to keep them alive after their unmount there."""
        swcluster.release_copied_mounts()
        self.cluster = swcluster.Cluster(
            self.a.run_dir, swcluster.Binaries.find(self.a.build),
            log_level=None)
        try:
            self.cluster.mount(self.mnt, spec=self.a.master,
                               opts=self.a.mount_opts,
                               log=os.path.join(self.a.run_dir, "mount-%s.log"
                                                % self.role))
        except swcluster.Error as e:
            raise RuntimeError(str(e))
        self.mount = self.cluster.handles["mount:" + self.mnt]

    def close(self):
        if self.child:
            self.child.stop(5)
            self.child = None
        if self.cluster:
            # Unmounted (lazily if busy); the client then ends.
            self.cluster.teardown()
            self.cluster = None

    # ---- requests -------------------------------------------------------

    def handle(self, req):
        fn = getattr(self, "req_" + req["cmd"], None)
        if not fn:
            raise ValueError("unknown request %r" % req["cmd"])
        return fn(req) or {}

    def req_mkdir(self, req):
        for p in req["paths"]:
            os.makedirs(self.path(p), exist_ok=True)

    def req_count(self, req):
        out = {}
        for p in req["paths"]:
            try:
                out[p] = len(os.listdir(self.path(p)))
            except FileNotFoundError:
                out[p] = None
        return {"count": out}

    def req_mkflat(self, req):
        """The flat shape of sweepfs compare-delete (tools/treegen.c):
        n files in d0 and d1, f00000000 ... in one sequence."""
        root, n = self.path(req["path"]), req["n"]
        t0 = time.monotonic()
        os.mkdir(root)
        for d in (0, 1):
            lo, hi = (0, n - n // 2) if d == 0 else (n - n // 2, n)
            os.mkdir(os.path.join(root, "d%d" % d))
            dfd = os.open(os.path.join(root, "d%d" % d),
                          os.O_RDONLY | os.O_DIRECTORY)
            try:
                for i in range(lo, hi):
                    os.mknod("f%08d" % i, 0o100644, dir_fd=dfd)
            finally:
                os.close(dfd)
        return {"seconds": time.monotonic() - t0}

    def req_snapshot(self, req):
        t0 = time.monotonic()
        machines.run([self.tool, "-m", self.a.master, "snapshot",
                      self.path(req["src"]), self.path(req["dst"])],
                     timeout=req.get("timeout", 600))
        # The tool talks to the master, not to this mount, and the master
        # answers it before this mount has dropped its cached listing of
        # the parent: for a few ms the copy can look absent here.
        deadline = time.monotonic() + 10
        while not os.path.isdir(self.path(req["dst"])):
            if time.monotonic() > deadline:
                raise RuntimeError("snapshot %s: no copy 10 s after the "
                                   "tool returned" % req["dst"])
            time.sleep(0.005)
        return {"seconds": time.monotonic() - t0}

    def req_rmr(self, req):
        machines.run([self.tool, "-m", self.a.master, "rmr",
                      self.path(req["path"])], timeout=600)

    def req_prepare(self, req):
        if req["workload"] == "mixed":
            self.mixed = MixedLoad(self, req)
            self.mixed.populate()

    def req_run(self, req):
        wait = req["start_at"] - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        cpu0 = machines.proc_cpu_seconds(self.mount.pid)
        own0 = time.process_time()
        fn = {"delete": self.run_delete, "create": self.run_create,
              "mixed": self.run_mixed}[req["workload"]]
        r = fn(req)
        r["mount_cpu_s"] = machines.proc_cpu_seconds(self.mount.pid) - cpu0
        if "cpu_s" not in r:  # the agent did the work itself
            r["cpu_s"] = time.process_time() - own0
        return r

    def req_verify(self, req):
        """Read back every file of @manifest ({name: [seed, size]}) in
        @dir through this mount, and compare the directory's listing."""
        d = self.path(req["dir"])
        manifest = req["manifest"]
        bad = []
        names = set(os.listdir(d))
        if names != set(manifest):
            bad.append("listing: %d names, %d expected; %d missing, %d "
                       "extra" % (len(names), len(manifest),
                                  len(set(manifest) - names),
                                  len(names - set(manifest))))
        checked = 0
        for name, (seed, size) in sorted(manifest.items()):
            try:
                with open(os.path.join(d, name), "rb") as f:
                    data = f.read()
            except OSError as e:
                bad.append("%s: %s" % (name, machines.errno_name(e)))
                continue
            checked += 1
            if data != content(seed, size):
                bad.append("%s: %d bytes differ from the %d written" %
                           (name, len(data), size))
        return {"checked": checked, "bad": bad[:20], "nbad": len(bad)}

    # ---- workloads ------------------------------------------------------

    def save_latencies(self, tag, op, ns):
        path = os.path.join(self.a.run_dir, "lat-%s-%s-%s.bin" %
                            (tag, self.role, op))
        with open(path, "wb") as f:
            array.array("q", ns).tofile(f)
        return path

    def run_delete(self, req):
        path = self.path(req["path"])
        method = req["method"]
        if method == "rm-rf":
            argv = ["rm", "-rf", "--", path]
        elif method == "removeall":
            argv = [req["removeall"], path]
        else:
            argv = [self.tool, "rm", "--stats-json", path]
        out = os.path.join(self.a.run_dir, "%s-%s.out" % (req["tag"],
                                                          self.role))
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        t0 = time.monotonic()
        try:
            self.child = machines.Child(argv, stdout=fd, stderr=fd)
        finally:
            os.close(fd)
        status = self.child.wait(req["timeout"])
        timed_out = status is None
        if timed_out:
            self.child.stop(5)
        t1 = time.monotonic()
        child, self.child = self.child, None
        r = {"t_start": t0, "t_end": t1, "seconds": t1 - t0,
             "status": child.returncode, "timed_out": timed_out,
             "cpu_s": child.cpu_seconds(),
             "gone": not os.path.lexists(path), "command": argv}
        if not r["gone"]:  # what it did remove counts
            r["files_left"] = sum(len(files) for _, _, files in
                                  os.walk(path))
        with open(out) as f:
            text = f.read()
        if method == "sweepfs-rm" and status == 0:
            try:
                r["rm_stats"] = json.loads(text.strip().splitlines()[-1])
            except (ValueError, IndexError):
                pass
        elif status != 0:
            r["output"] = text[-2000:]
        return r

    def run_create(self, req):
        d = self.path(req["dir"])
        n, deadline = req["n"], time.monotonic() + req["timeout"]
        prefix = self.role + "-f"
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC
        lat = array.array("q")
        errors = {}
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        clock = time.perf_counter_ns
        t0 = time.monotonic()
        try:
            for i in range(n):
                if i % CHECK_EVERY == 0 and time.monotonic() > deadline:
                    break
                name = "%s%08d" % (prefix, i)
                t = clock()
                try:
                    os.close(os.open(name, flags, 0o644, dir_fd=dfd))
                except OSError as e:
                    k = machines.errno_name(e)
                    errors[k] = errors.get(k, 0) + 1
                    continue
                lat.append(clock() - t)
        finally:
            os.close(dfd)
        t1 = time.monotonic()
        return {"t_start": t0, "t_end": t1, "seconds": t1 - t0,
                "ops": len(lat), "ops_by_type": {"create": len(lat)},
                "errors": errors, "timed_out": len(lat) + sum(
                    errors.values()) < n,
                "latency": {"create": summary(lat)},
                "latency_files": {"create": self.save_latencies(
                    req["tag"], "create", lat)}}

    def run_mixed(self, req):
        if not self.mixed:
            raise RuntimeError("run mixed before prepare")
        return self.mixed.run(req)


class MixedLoad:
    """Small files through the chunkservers, in one directory of this
    client's: write new files, rewrite, read back and compare, stat and
    compare the size, list and compare the names, delete. The agent knows
    what each file holds (a seed and a size), so every read and listing is
    checked; anything that differs is an error."""

    OPS = ("read", "write", "rewrite", "stat", "list", "delete")

    def __init__(self, agent, req):
        self.agent = agent
        self.dir = agent.path(req["dir"])
        self.initial = req["files"]
        self.max_size = req["max_size"]
        self.rng = random.Random(req["seed"])
        weights = dict(req["weights"])
        self.ops = [op for op in self.OPS if weights.get(op, 0) > 0]
        self.weights = [weights[op] for op in self.ops]
        self.files = {}        # name -> (seed, size)
        self.names = []        # the same names, for random.choice
        self.serial = 0        # names and seeds never repeat
        self.seed_base = req["seed"] << 32

    def _new_seed(self):
        self.serial += 1
        return self.seed_base + self.serial

    def _write(self, name):
        seed = self._new_seed()
        size = self.rng.randint(1, self.max_size)
        with open(os.path.join(self.dir, name), "wb") as f:
            f.write(content(seed, size))
        if name not in self.files:
            self.names.append(name)
        self.files[name] = (seed, size)

    def populate(self):
        os.makedirs(self.dir, exist_ok=True)
        for _ in range(self.initial):
            self._write("m%08d" % self.serial)

    def _one(self, op, errors):
        """Do @op once; bytes moved. Wrong results go into @errors."""
        if op in ("read", "rewrite", "stat", "delete") and not self.names:
            op = "write"
        if op == "write":
            self._write("m%08d" % self.serial)
            return self.files[self.names[-1]][1]
        name = self.rng.choice(self.names)
        path = os.path.join(self.dir, name)
        seed, size = self.files[name]
        if op == "read":
            with open(path, "rb") as f:
                data = f.read()
            if data != content(seed, size):
                errors.append("read %s: %d bytes, not the %d written" %
                              (name, len(data), size))
            return len(data)
        if op == "rewrite":
            self._write(name)
            return self.files[name][1]
        if op == "stat":
            st = os.stat(path)
            if st.st_size != size:
                errors.append("stat %s: size %d, not %d" %
                              (name, st.st_size, size))
            return 0
        if op == "list":
            names = os.listdir(self.dir)
            if set(names) != set(self.files) or len(names) != len(
                    self.files):
                errors.append("list: %d names, %d expected" %
                              (len(names), len(self.files)))
            return 0
        # delete
        os.unlink(path)
        del self.files[name]
        i = self.names.index(name)
        self.names[i] = self.names[-1]
        self.names.pop()
        return 0

    def run(self, req):
        deadline = time.monotonic() + min(req["duration"], req["timeout"])
        max_ops = req["max_ops"]
        lat = {op: array.array("q") for op in self.OPS}
        wrong = []             # results that differ from what was written
        failed = {}            # "op errno" -> count
        moved = 0
        clock = time.perf_counter_ns
        limit = self.initial * MIXED_GROWTH
        t0 = time.monotonic()
        done = 0
        while done < max_ops:
            if done % CHECK_EVERY == 0 and time.monotonic() > deadline:
                break
            op = self.rng.choices(self.ops, self.weights)[0]
            if op == "write" and len(self.files) >= limit:
                op = "delete"
            t = clock()
            try:
                moved += self._one(op, wrong)
            except OSError as e:
                k = "%s %s" % (op, machines.errno_name(e))
                failed[k] = failed.get(k, 0) + 1
                continue
            finally:
                done += 1
            lat[op].append(clock() - t)
        t1 = time.monotonic()
        return {"t_start": t0, "t_end": t1, "seconds": t1 - t0,
                "ops": sum(len(v) for v in lat.values()),
                "ops_by_type": {op: len(v) for op, v in lat.items() if v},
                "errors": failed, "wrong": wrong[:20], "nwrong": len(wrong),
                "bytes": moved, "timed_out": False,
                "latency": {op: summary(v) for op, v in lat.items() if v},
                "latency_files": {op: self.agent.save_latencies(
                    req["tag"], op, v) for op, v in lat.items() if v},
                "manifest": {n: list(v) for n, v in self.files.items()}}


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--mnt", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--mount-opts", default="")
    ap.add_argument("--parent", type=int, required=True)
    a = ap.parse_args()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    agent = Agent(a)
    status = 0
    try:
        die_with_parent(a.parent)
        agent.start_mount()
        reply({"ok": True, "mount_pid": agent.mount.pid})
        while True:
            line = sys.stdin.readline()
            if not line:
                break
            req = json.loads(line)
            if req["cmd"] == "quit":
                break
            try:
                r = agent.handle(req)
                r["ok"] = True
            except (OSError, RuntimeError, ValueError, KeyError) as e:
                agent.log("%s failed: %s" % (req["cmd"], e))
                r = {"ok": False, "error": "%s: %s" % (req["cmd"], e)}
            reply(r)
    except Stop as e:
        agent.log("stopping: %s" % e)
        status = 1
    except (OSError, RuntimeError) as e:
        agent.log("failed: %s" % e)
        try:
            reply({"ok": False, "error": str(e)})
        except OSError:
            pass
        status = 1
    finally:
        # Signals now would only interrupt the tidying up.
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        agent.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
