#!/usr/bin/env python3
"""The seed's experiment end to end (issue 29; ../shared/background/,
MooseFS's "Same Goal, Different Paths"): a tree of N empty files split
into two directories, copies of it made with `sweepfs snapshot` as the
MooseFS lab did, and clients each deleting their own copy, by `rm -rf`,
by Go's os.RemoveAll, by snapshot removal (`seteattr -f snapshot -r` +
`rmsnapshot`) and by `rmr`. Prints the post's table beside its own
figures; writes JSON with the run's context.

  bench/seed.py -n 1000000 -k 1 [--mount-opts io_uring]

The tree is not made through a mount (N = 34 million would take hours
of FUSE creates on a small machine): bench/nsbench.c writes a checkpoint
of the same shape (names f000000000..., mode 0644, owner root) into the
master's data directory before it starts, which also measures a cold
start at N files (the master logs its load time). Copies, deletions and
everything measured then go through the master and mounts as usual.

Per method, each of K clients deletes its own copy from a fresh mount
of its own, all K at once; meanwhile a probe client (another mount,
no attribute caching) stats a file in a loop. Reported per method:
completion time (for rmsnapshot and rmr: the tool's return and the
purge's end), files/s per client and in aggregate, the master's CPU %
and CPU seconds per million files, bytes in and out at the master, the
probe's stat p50/p99/max; and the master's RSS and namespace bytes per
node with every copy in place.

Last, the master is killed and started again: the cold start with the
run's changelog to replay (the load and the replay as the master logs
them), then, with checkpoint_interval=1s and the probe changing a file
now and then, a checkpoint every second for --checkpoint-seconds while
the probe times stat: what the checkpoint's writer (a forked child)
costs the requests.

With --machines, as the post's lab had them, every client is a machine
of its own (bench/machines.py: a network namespace with its own address
on a bridge, DESIGN.md "Many machines"): client i's mount talks to the
master from machine ci, and what the client runs there (rm -rf, Go's
os.RemoveAll, the tools) does too; the master runs in machine srv, the
probe's mount in machine probe, and the mount that makes the copies (and
with --via-mount the tree) in machine main. The mounts themselves stay in
the harness's mount namespace (their clients enter the machine's network
namespace only, swcluster.in_netns()), so the harness reads them as
before. Without it, clients are mounts on the host, over loopback.

At the post's size the copies do not fit in this machine's memory (34 M
files a copy at ~150 B each), and `rm -rf` of 17 M names takes most of an
hour. Two options make the experiment fit:

  --in-place   the methods delete the seeded directories themselves, one
               client each, in turn: rm -rf d0, os.RemoveAll d1, then
               rmsnapshot of what is left of d0 and rmr of what is left
               of d1 (a method whose directory is gone is skipped);
  --via-mount  the tree is made through the mount the tools then run on
               (creates, then a stat of each name), not seeded as a
               checkpoint: rmsnapshot and rmr return on the mount that
               made the tree, which holds its delegations and cached
               names (issue 29's everyday case). Implies --in-place;
               FUSE creates cost minutes at a million files;
  --limit S    rm -rf and os.RemoveAll are stopped after S seconds; their
               rate is the files the master lost meanwhile over the time,
               measured while the directory still holds nearly all its
               17 M names, which is what "the rate at 17 M entries per
               directory" asks.

Files per method are always counted by the master (nodes before minus
nodes after the purge), never assumed. -n takes a list
(`-n 200000,34000000`): each size runs in turn on a fresh cluster, in one
invocation, and the rates at the largest size are printed as ratios of
those at the smallest.

  bench/seed.py -n 200000,34000000 --in-place --limit 120
"""

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster  # noqa: E402
import machines  # noqa: E402
import swcluster  # noqa: E402

METHODS = ("rm", "go", "rmsnapshot", "rmr")
# --machines: the master's port in its machine (nothing else is there),
# and a subnet of the run's own (bench/stress.py's is 10.213.0.0/24).
MASTER_PORT = 9521
DEFAULT_SUBNET = "10.214.0.0/24"

# The post: 34 M empty files in two directories, 8 copies (272 M files),
# 8 client machines (moosefs-same-goal-different-paths.txt).
POST = {
    "files": 34_000_000, "copies": 8,
    "rm": {"what": "rm -rf, 8 clients", "seconds": 4 * 3600,
           "files_per_s_client": 2400, "master_cpu": "99.9%"},
    "go": {"what": "os.RemoveAll", "seconds": 20 * 86400,
           "note": "estimated, stopped early"},
    "rmsnapshot": {"what": "snapshot flag + removal", "seconds": 12.7,
                   "note": "0.7 s flag + 12 s removal, master blocked"},
    "rmr": None,
}


def fits(n, copies):
    """Whether N files and their copies fit in memory at ~200 B each,
    with room for the rest of the machine."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    return n * (copies + 1) * 200 < mem * 0.6


def seed_checkpoint(build, data, n):
    """A checkpoint of N files in two directories in @data: seconds."""
    t0 = time.perf_counter()
    subprocess.run([os.path.join(build, "bench", "sweepfs-nsbench"),
                    "make", data, str(n), "0", "2"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def make_via_mount(mnt, n, writers=4):
    """N empty files in @mnt/d0 and @mnt/d1 (the checkpoint's shape),
    made through the mount by @writers processes at once (a build's
    parallel jobs; one Python process is half as fast), then each
    stat'ed so that the kernel caches its name: seconds."""
    t0 = time.perf_counter()
    dirs = [os.path.join(mnt, "d0"), os.path.join(mnt, "d1")]
    for d in dirs:
        os.mkdir(d)
    pids = []
    for w in range(writers):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                # Interleaved, so that both directories grow together
                # as with one writer.
                for i in range(w, n, writers):
                    p = os.path.join(dirs[i % 2], "f%09d" % i)
                    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
                for i in range(w, n, writers):
                    os.stat(os.path.join(dirs[i % 2], "f%09d" % i))
                code = 0
            except OSError as e:
                print("writer %d: %s" % (w, e), file=sys.stderr)
            finally:
                os._exit(code)
        pids.append(pid)
    failed = sum(os.waitpid(pid, 0)[1] != 0 for pid in pids)
    if failed:
        raise RuntimeError("%d of %d writers failed" % (failed, writers))
    return time.perf_counter() - t0


def proc_memory(pid):
    """{rss_bytes, hwm_bytes} of process @pid (VmRSS, VmHWM), or {}."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[{"VmRSS": "rss_bytes", "VmHWM": "hwm_bytes"}[key]] = \
                        int(value.split()[0]) * 1024
    except (OSError, TypeError, ValueError, IndexError):
        return {}
    return out


def master_start(log):
    """The master's last start-up, from its log: {seconds, nodes, and,
    where it says, changes, load_s, replay_s}, or {}."""
    last = {}
    with open(log, errors="replace") as f:
        for line in f:
            m = re.search(r"checkpoint [0-9]+, ([0-9]+) changes replayed\): "
                          r"([0-9]+) nodes in ([0-9.]+) s", line)
            if not m:
                continue
            last = {"changes": int(m.group(1)), "nodes": int(m.group(2)),
                    "seconds": float(m.group(3))}
            m = re.search(r"\(([0-9]+) nodes loaded in ([0-9.]+) s, changes "
                          r"replayed in ([0-9.]+) s\)", line)
            if m:
                last.update(loaded_nodes=int(m.group(1)),
                            load_s=float(m.group(2)),
                            replay_s=float(m.group(3)))
    return last


def log_matches(log, pattern, since=0):
    """(match, line) for each line of the master's log from line @since
    on that @pattern matches."""
    with open(log, errors="replace") as f:
        for i, line in enumerate(f):
            m = i >= since and re.search(pattern, line)
            if m:
                yield m, line


def checkpoints_written(log, since=0):
    """The checkpoints the master's log says it wrote from line @since on
    (at log_level info): [{version, s, nodes, fork_ms, rotate_ms, at}],
    what each held the loop for (the fork copies the page tables; the
    rotation syncs the changelog's two files) and when it was logged
    (local time of day, s)."""
    return [{"version": int(m.group(1)), "s": float(m.group(2)),
             "nodes": int(m.group(3)), "fork_ms": float(m.group(4)),
             "rotate_ms": float(m.group(5)), "at": day_s(line)}
            for m, line in log_matches(
                log, r"checkpoint ([0-9]+) written in ([0-9.]+) s "
                r"\(([0-9]+) nodes; the fork held the loop "
                r"([0-9.]+) ms, the changelog's rotation "
                r"([0-9.]+) ms\)", since)]


def collapses(log, since=0):
    """The collapses after each child (master.c) from line @since of the
    master's log on: [{done, pages, ms, at}], huge pages made whole of
    those listed, how long it took in the pool and when it was logged
    (its end: local time of day, s)."""
    return [{"done": int(m.group(1)), "pages": int(m.group(2)),
             "ms": float(m.group(3)), "at": day_s(line)}
            for m, line in log_matches(
                log, r"([0-9]+) of ([0-9]+) (?:slab regions are huge "
                r"pages again|huge pages are whole again) "
                r"\(([0-9.]+) ms", since)]


def day_s(line):
    """The time of day (s, local) at the head of a log line, or None."""
    m = re.match(r"([0-9]{2}):([0-9]{2}):([0-9]{2}(?:\.[0-9]+)?) ", line)
    if not m:
        return None
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))


def near_checkpoints(slow, written, coll, late=()):
    """Each slow stat (time.time(), ms) beside the checkpoint nearest it:
    [{ms, after_fork_s, after_written_s, in_collapse, machine_late_ms}],
    the seconds from that checkpoint's fork (its line's time less its
    writing time) and from its line to the stat's start (None where no
    checkpoint's line has a time), whether it started while a collapse
    @coll ran, and how late the sleeper (@late) was meanwhile."""
    out = []
    for w, ms in slow:
        lt = time.localtime(w)
        t = lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec + w % 1
        inside = any(c["at"] is not None and
                     c["at"] - c["ms"] / 1e3 - 0.05 <= t <= c["at"]
                     for c in coll)
        best = None
        for c in written:
            if c["at"] is None:
                continue
            d = t - (c["at"] - c["s"])
            if best is None or abs(d) < abs(best[0]):
                best = (d, t - c["at"])
        out.append({"ms": ms,
                    "after_fork_s": best and round(best[0], 3),
                    "after_written_s": best and round(best[1], 3),
                    "in_collapse": inside,
                    "machine_late_ms": round(machine_late(w, ms, late), 2)})
    return out


def log_lines(log):
    with open(log, errors="replace") as f:
        return sum(1 for _ in f)


def go_removeall(workdir):
    """Build tools/compare_delete/go-removeall: its path, or None."""
    src = os.path.join(HERE, "..", "tools", "compare_delete",
                       "go-removeall")
    out = os.path.join(workdir, "removeall")
    try:
        subprocess.run(["go", "build", "-o", out, "."], cwd=src, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, GOFLAGS="-mod=mod",
                                GOCACHE=os.path.join(workdir, "gocache")))
    except (OSError, subprocess.CalledProcessError):
        return None
    return out


def cpu_ms(info):
    return info["cpu_user_ms"] + info["cpu_system_ms"]


def wire(stats):
    t = stats["total"]
    return t["bytes_in"], t["bytes_out"]


def wait_purge(cl, timeout):
    t0 = time.perf_counter()
    while True:
        s = cl.info()
        if s["purge_left"] == 0 and s["purge_roots"] == 0:
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout:
            raise SystemExit("purge did not finish in %d s" % timeout)
        time.sleep(0.05)


# ---- the probe: another client's stat -----------------------------------

def probe(target, stop, out, touch=False, slow=None, slow_ms=20):
    """stat @target in a loop, timing each; with @touch, also change its
    times now and then (untimed), so that the master has changes to
    checkpoint; with @slow (a queue), also when (time.time()) each stat
    over @slow_ms started, and how long it took, to set beside the
    master's log."""
    lat = []
    late = []
    i = 0
    while not stop.is_set():
        w = time.time()
        t = time.perf_counter_ns()
        os.stat(target)
        lat.append(time.perf_counter_ns() - t)
        if lat[-1] > slow_ms * 1e6:
            late.append((w, lat[-1] / 1e6))
        if touch and i % 20 == 0:
            os.utime(target)
        i += 1
        time.sleep(0.001)
    out.put(lat)
    if slow is not None:
        slow.put(late)


def steal_s():
    """The machine's steal time so far (s): what the hypervisor ran
    elsewhere while this VM's CPUs wanted to run (/proc/stat)."""
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    return int(cpu[8]) / os.sysconf("SC_CLK_TCK")


def sleeper(stop, out, late_ms=4):
    """Sleep 1 ms in a loop, as cyclictest does, and put on @out each
    wake-up at least @late_ms late: (time.time() woken, ms late). A
    process that does nothing else is late only when the machine is
    (the CPUs busy or taken by the hypervisor): a slow stat at the same
    moment is the machine's, not the master's."""
    late = []
    while not stop.is_set():
        t = time.perf_counter()
        time.sleep(0.001)
        d = (time.perf_counter() - t) * 1e3 - 1
        if d >= late_ms:
            late.append((time.time(), d))
    out.put(late)


def machine_late(w, ms, late):
    """The most the sleeper was late at a moment within the stat that
    started at @w and took @ms (0: never)."""
    most = 0.0
    for t, d in late:
        # Asleep from t - d - 1 ms; late from t - d ms.
        if t - d / 1e3 <= w + ms / 1e3 and t >= w:
            most = max(most, d)
    return most


def summary(ns):
    if not ns:
        return None
    s = sorted(ns)
    return {"n": len(s), "p50_ms": s[len(s) // 2] / 1e6,
            "p99_ms": s[min(len(s) - 1, int(len(s) * 0.99))] / 1e6,
            "max_ms": s[-1] / 1e6}


# ---- one method ------------------------------------------------------------

def bounded(argv, limit):
    """Run @argv; with @limit, stop it after that many seconds. Whether
    it was stopped."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    try:
        rc = p.wait(timeout=limit or None)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return True
    if rc != 0:
        raise subprocess.CalledProcessError(rc, argv)
    return False


# --strace-tools DIR: each tool run's calls that wait, and its process
# start, written to DIR (one file a run, the harness's own time at the
# end): where a tool run's wall time goes. strace slows what it traces.
STRACE_DIR = None
STRACE_CALLS = ("execve,connect,poll,read,sendto,getxattr,openat,"
                "newfstatat,exit_group")


def tool(cl, net, *args):
    """`sweepfs -m MASTER ARGS`, run in the network namespace file @net
    (None: here), as a client machine runs it."""
    argv = [cl.bins.tool, "-m", cl.address] + list(args)
    out = None
    if STRACE_DIR:
        # Named by when it ran (the methods run in children of their own).
        out = os.path.join(STRACE_DIR, "%.6f-%s.txt" % (time.time(),
                                                        args[0]))
        argv = ["strace", "-f", "-tt", "-T", "--seccomp-bpf", "-e",
                "trace=" + STRACE_CALLS, "-o", out] + argv
    t0 = time.time()
    swcluster.run(swcluster.in_netns(net, argv), timeout=600)
    if out:
        with open(out, "a") as f:
            f.write("# harness: started at %.6f (%s), took %.3f ms\n" % (
                t0, time.strftime("%H:%M:%S", time.localtime(t0)),
                (time.time() - t0) * 1e3))


def delete_one(method, cl, path, removeall, net, limit=None):
    """Delete @path by @method from the machine whose network namespace
    file is @net (None: this one), rm -rf and RemoveAll stopped after
    @limit seconds; (seconds, detail)."""
    t0 = time.perf_counter()
    if method in ("rm", "go"):
        argv = ["rm", "-rf", path] if method == "rm" else [removeall, path]
        stopped = bounded(swcluster.in_netns(net, argv), limit)
        return time.perf_counter() - t0, {"stopped": stopped}
    if method == "rmsnapshot":
        tool(cl, net, "seteattr", "-f", "snapshot", "-r", path)
        flag = time.perf_counter() - t0
        tool(cl, net, "rmsnapshot", path)
        return time.perf_counter() - t0, {"flag_s": flag}
    tool(cl, net, "rmr", path)
    return time.perf_counter() - t0, {}


def client(method, cl, path, removeall, net, out, limit):
    try:
        out.put(delete_one(method, cl, path, removeall, net, limit))
    except Exception as e:  # reported, not raised in a child
        out.put((None, {"error": str(e)}))


def machine_wire(cl, addrs):
    """{address: {session id: [bytes in, bytes out]}} of the mount
    sessions from each of @addrs, as the master counts them; raises
    unless each has one (the client did not come from its machine)."""
    out = {ad: {} for ad in addrs}
    if not addrs:
        return out
    for s in json.loads(cl.tool("stats", "--json", "--sessions")).get(
            "sessions", []):
        ad = s["peer"].rsplit(":", 1)[0]
        if s["role"] != "mount" or ad not in out:
            continue
        c = s.get("counters") or {}
        out[ad][s["id"]] = [c.get("bytes_in", 0), c.get("bytes_out", 0)]
    missing = [ad for ad in addrs if not out[ad]]
    if missing:
        raise SystemExit("no mount session from %s at the master" %
                         ", ".join(missing))
    return out


def wire_delta(before, after, ad):
    """Bytes in and out of @ad's mount sessions between two
    machine_wire()s: those alive at the end (an earlier method's, ended
    meanwhile, took no part), from 0 for those new since."""
    d = [0, 0]
    for sid, (bi, bo) in after[ad].items():
        b0 = before[ad].get(sid, [0, 0])
        d[0] += bi - b0[0]
        d[1] += bo - b0[1]
    return d


def machine_net(net, role):
    """The network namespace file of machine @role of @net (None: no
    machines, the host)."""
    return os.path.join("/run/netns", net.netns(role)) if net else None


def run_method(cl, method, copies, removeall, probe_target, opts, a,
               net=None):
    """K clients delete their copies (paths relative to the mount) at
    once; the probe stats. The files are what the master lost. With
    machines (@net), client i is machine ci: its own mount for every
    method, unless the tools run on the mount that made the tree
    (--via-mount)."""
    mounts = []
    own = method in ("rm", "go") or (net and not a.via_mount)
    nets = [machine_net(net, "c%d" % i if own else "main")
            for i in range(len(copies))]
    if own:
        for i in range(len(copies)):
            mounts.append(cl.mount_extra("c-%s-%d" % (method, i), opts,
                                         net=nets[i]))
    addrs = [net.address("c%d" % i if own else "main")
             for i in range(len(copies))] if net else []
    stop, pout, pslow = mp.Event(), mp.Queue(), mp.Queue()
    pr = None
    if not a.no_probe:
        pr = mp.Process(target=probe, args=(probe_target, stop, pout, False,
                                            pslow))
        pr.start()
        time.sleep(0.2)
    before, sbefore = cl.info(), cl.status()
    wire0 = machine_wire(cl, addrs)
    outs, procs = [], []
    t0 = time.perf_counter()
    for i, c in enumerate(copies):
        mnt = mounts[i] if mounts else cl.mnt
        path = os.path.join(mnt, c)
        q = mp.Queue()
        p = mp.Process(target=client,
                       args=(method, cl, path, removeall, nets[i], q,
                             a.limit))
        p.start()
        outs.append(q)
        procs.append(p)
    res = [q.get() for q in outs]
    for p in procs:
        p.join()
    returned = time.perf_counter() - t0
    purge = wait_purge(cl, a.timeout)
    done = time.perf_counter() - t0
    stop.set()
    lat = slow = []
    if pr:
        lat = pout.get()
        slow = pslow.get()
        pr.join()
    after, safter = cl.info(), cl.status()
    wire1 = machine_wire(cl, addrs)
    for m in mounts:
        cl.unmount(m)
    errors = [r[1]["error"] for r in res if r[0] is None]
    if errors:
        raise SystemExit("%s: %s" % (method, errors[0]))
    per_client = [r[0] for r in res]
    files = before["nodes"] - after["nodes"]
    n = files / len(copies)
    cpu_s = (cpu_ms(after) - cpu_ms(before)) / 1e3
    bin0, bout0 = wire(sbefore)
    bin1, bout1 = wire(safter)
    return {
        "clients": len(copies),
        # Each client's machine (its address on the bridge) and the
        # bytes its mount's session took in and sent out meanwhile, as
        # the master counted them; None: mounts on the host.
        "client_machines": [
            dict(zip(("address", "bytes_in", "bytes_out"),
                     [ad] + wire_delta(wire0, wire1, ad)))
            for ad in addrs] if net else None,
        "files": files,
        "returned_s": returned,
        "completion_s": done,
        "purge_after_return_s": purge,
        "client_s": per_client,
        "details": [r[1] for r in res],
        # A client is done when its files are gone: for rmsnapshot and
        # rmr that is when the purge ends, not when the tool returns.
        "files_per_s_client": [n / (done if method in ("rmsnapshot", "rmr")
                                    else s) for s in per_client],
        "files_per_s_aggregate": files / done,
        "master_cpu_pct": 100 * cpu_s / done,
        "master_cpu_s_per_mfile": cpu_s / files * 1e6,
        "master_files_per_cpu_s": files / cpu_s if cpu_s else None,
        # The master's CPU counts the probe's stats too (2 requests a
        # stat, one a millisecond or so: at one client most of it on
        # this VM); --no-probe measures the removal's own.
        "probe": pr is not None,
        "bytes_in": bin1 - bin0,
        "bytes_out": bout1 - bout0,
        "bytes_per_file": (bin1 - bin0 + bout1 - bout0) / files,
        "probe_stat": summary(lat),
        # When each stat over 20 ms started (time.time()), and its ms:
        # to set beside the master's log.
        "probe_slow": slow,
        # What the master did with the deleting clients' delegations.
        "deleg": {k: after.get(k, 0) - before.get(k, 0)
                  for k in ("deleg_granted", "deleg_refused",
                            "deleg_recalls", "deleg_timeouts")},
        # A checkpoint written meanwhile (the forked writer's copy-on-
        # write doubled the master's CPU per file at 34 M): the version
        # of the newest before and after.
        "checkpoint_versions": [before.get("checkpoint_version"),
                                after.get("checkpoint_version")],
        "requests": {k: v - sbefore["total"]["requests"].get(k, 0)
                     for k, v in safter["total"]["requests"].items()
                     if v - sbefore["total"]["requests"].get(k, 0)},
    }


def restart(cl, a, probe_target):
    """A cold restart after a crash, with the whole run's changelog to
    replay (every copy and deletion since the seeded checkpoint, unless
    the master checkpointed meanwhile), then checkpoints
    once a second for a while, the probe timing stat meanwhile: what a
    checkpoint's writer (a forked child) costs the requests."""
    print("restart, then checkpoints every second", file=sys.stderr)
    t0 = time.perf_counter()
    # Killed, as a crash: a master stopped cleanly checkpoints first,
    # and there would be nothing to replay.
    swcluster.Cluster.stop(cl, "master", how="kill")
    # The whole run's changes to replay (8 copies deleted: millions) take
    # what they take: that is the figure, not a reason to lose the run.
    cl.ready_s = max(cl.ready_s, a.restart_timeout)
    try:
        # log_level info: each checkpoint's line, checkpoints_written().
        cl.start_master(args=cluster._sets(a.set +
                                           ["checkpoint_interval=1s",
                                            "log_level=info"]))
    except swcluster.Error as e:
        print("restart: %s" % e, file=sys.stderr)
        return {"error": "not up within %d s" % a.restart_timeout,
                "start": master_start(cl.records["master"]["log"])}
    up_s = time.perf_counter() - t0
    start = master_start(cl.records["master"]["log"])
    since = log_lines(cl.records["master"]["log"])
    versions = set()
    stop, pout, pslow, sout = mp.Event(), mp.Queue(), mp.Queue(), mp.Queue()
    pr = mp.Process(target=probe,
                    args=(probe_target, stop, pout, True, pslow, 10))
    sl = mp.Process(target=sleeper, args=(stop, sout))
    pr.start()
    sl.start()
    t0 = time.perf_counter()
    steal0 = steal_s()
    while time.perf_counter() - t0 < a.checkpoint_seconds:
        versions.add(cl.info()["checkpoint_version"])
        time.sleep(0.5)
    stop.set()
    lat = pout.get()
    slow = pslow.get()
    late = sout.get()
    pr.join()
    sl.join()
    steal = steal_s() - steal0
    written = checkpoints_written(cl.records["master"]["log"], since)
    coll = collapses(cl.records["master"]["log"], since)
    return {"restart_s": up_s, "start": start,
            "nodes": cl.info()["nodes"],
            "checkpoint_seconds": a.checkpoint_seconds,
            "checkpoints_seen": len(versions) - 1,
            # What holds the loop at each checkpoint (the fork copies
            # the page tables; the rotation syncs the changelog's two
            # files): beside the probe's maximum, they say whether it
            # was one of them.
            "checkpoints_written": written,
            # Each stat over 10 ms (the bound), and how far
            # from the nearest checkpoint's fork and end it started.
            "probe_slow": near_checkpoints(slow, written, coll, late),
            # A process that only sleeps 1 ms at a time, woken 4 ms late
            # or more (how often, the worst), and the CPU time the
            # hypervisor took meanwhile: a slow stat beside one of these
            # is the machine's.
            "sleeper_late": {"n": len(late),
                             "max_ms": round(max((d for _, d in late),
                                                 default=0.0), 2)},
            "steal_s": round(steal, 2),
            # The huge pages made whole again after each writer, in
            # the pool (master.c): the loop's faults wait meanwhile.
            "collapses": coll,
            "probe_stat_during_checkpoints": summary(lat)}


def human_s(s):
    if s is None:
        return "-"
    if s >= 86400:
        return "%.1f d" % (s / 86400)
    if s >= 3600:
        return "%.1f h" % (s / 3600)
    if s >= 1:
        return "%.2f s" % s
    return "%.1f ms" % (s * 1e3)


def print_table(r):
    n = r["n"]
    what = ("%d copies" % r["copies_per_method"] if not r["in_place"]
            else "in place, one client a method")
    if r["limit_s"]:
        what += ", rm and RemoveAll stopped after %g s" % r["limit_s"]
    if r.get("via_mount"):
        what += ", tree made through the deleting mount"
    print("\nThe post (MooseFS, %d M files x %d copies, 8 clients) beside "
          "sweepfs (%d files, %s):" % (
              POST["files"] // 10 ** 6, POST["copies"], n, what))
    print("%-11s %12s %12s | %10s %10s %11s %11s %7s %8s %9s" % (
        "method", "post", "post f/s/cl", "returned", "complete",
        "f/s/client", "f/s total", "mCPU%", "B/file", "stat p99"))
    for m in METHODS:
        x = r["methods"].get(m)
        if not x:
            continue
        p = POST[m]
        pf = ""
        if p and p.get("files_per_s_client"):
            pf = "%d" % p["files_per_s_client"]
        elif p and m == "go":
            pf = "%.0f" % (POST["files"] / p["seconds"])
        st = x["probe_stat"]
        print("%-11s %12s %12s | %10s %10s %11.0f %11.0f %7.1f %8.1f "
              "%9s" % (
                  m, human_s(p["seconds"]) if p else "-", pf,
                  human_s(x["returned_s"]), human_s(x["completion_s"]),
                  min(x["files_per_s_client"]), x["files_per_s_aggregate"],
                  x["master_cpu_pct"], x["bytes_per_file"],
                  "%.2f ms" % st["p99_ms"] if st else "-"))
    for m, x in r["methods"].items():
        cm = x.get("client_machines")
        if cm:
            each = max(1, x["files"] / len(cm))
            print("%s from machines %s: their mounts' bytes in/out per "
                  "file %s" % (m, ", ".join(c["address"] for c in cm),
                               ", ".join("%.0f/%.0f" % (
                                   c["bytes_in"] / each,
                                   c["bytes_out"] / each) for c in cm)))
    x = r["methods"].get("rmsnapshot")
    if x:
        print("rmsnapshot returned: the flag (seteattr -f snapshot -r) in "
              "%s, rmsnapshot in %s" % (
                  human_s(min(d["flag_s"] for d in x["details"])),
                  human_s(min(s - d["flag_s"] for s, d in
                              zip(x["client_s"], x["details"])))))
    if r.get("via_mount"):
        mm = r.get("maker_mount_memory") or {}
        if mm:
            print("the mount that made it: %.0f MB RSS, %.0f MB at most "
                  "(%.0f B per file)" % (
                      mm["rss_bytes"] / 1e6, mm["hwm_bytes"] / 1e6,
                      mm["hwm_bytes"] / n))
        print("a stat of each directory on the mount that made it, just "
              "before its method: " + ", ".join(
                  "%s %s" % (m, human_s(x["walk_before_s"]))
                  for m, x in r["methods"].items()
                  if "walk_before_s" in x))
    print("stat of another client during each (p50 / p99 / max ms): " +
          ", ".join("%s %.2f/%.2f/%.2f" % (
              m, x["probe_stat"]["p50_ms"], x["probe_stat"]["p99_ms"],
              x["probe_stat"]["max_ms"])
              for m, x in r["methods"].items() if x["probe_stat"]))
    print("what the master's CPU per file allows (files/s per master "
          "core%s): " % (", the probe's stats counted in"
                         if any(x.get("probe", True)
                                for x in r["methods"].values()) else "") +
          ", ".join("%s %.0f" % (m, x["master_files_per_cpu_s"])
                    for m, x in r["methods"].items()
                    if x["master_files_per_cpu_s"]))
    rs = r.get("restart")
    if rs and rs.get("error"):
        print("restart: %s" % rs["error"])
    elif rs:
        st = rs["start"]
        p = rs["probe_stat_during_checkpoints"]
        print("restart: up in %s (%s nodes loaded in %s, %s changes "
              "replayed in %s); %d checkpoints of %d nodes in %d s, stat "
              "p50/p99/max %.2f/%.2f/%.2f ms" % (
                  human_s(rs["restart_s"]), st.get("loaded_nodes"),
                  human_s(st.get("load_s")), st.get("changes"),
                  human_s(st.get("replay_s")), rs["checkpoints_seen"],
                  rs["nodes"], rs["checkpoint_seconds"], p["p50_ms"],
                  p["p99_ms"], p["max_ms"]))
        w = rs.get("checkpoints_written")
        if w:
            fork = [c["fork_ms"] for c in w]
            rot = [c["rotate_ms"] for c in w]
            print("what %d checkpoints held the loop (ms, median/max): the "
                  "fork %.1f/%.1f, the changelog's rotation %.1f/%.1f" % (
                      len(w), statistics.median(fork), max(fork),
                      statistics.median(rot), max(rot)))
        slow = rs.get("probe_slow") or []
        sl = rs.get("sleeper_late")
        if sl:
            print("the machine meanwhile: a process sleeping 1 ms at a time "
                  "woke 4 ms late or more %d times (worst %.1f ms); the "
                  "hypervisor took %.1f CPU s of %d; %d of %d stats over "
                  "10 ms overlapped such a late wake-up" % (
                      sl["n"], sl["max_ms"], rs["steal_s"],
                      (os.cpu_count() or 1) * rs["checkpoint_seconds"],
                      sum(1 for x in slow if x.get("machine_late_ms")),
                      len(slow)))
        for x in slow:
            print("  a stat of %.1f ms, %s s after a checkpoint's fork, %s s "
                  "after it was written%s%s" % (
                      x["ms"], x["after_fork_s"], x["after_written_s"],
                      ", during a collapse" if x["in_collapse"] else "",
                      ", the sleeper %.1f ms late" % x["machine_late_ms"]
                      if x.get("machine_late_ms") else ""))
        for c in rs.get("collapses") or []:
            print("  a collapse: %d of %d huge pages whole again in %.0f ms"
                  % (c["done"], c["pages"], c["ms"]))
    mem = r["memory"]
    print("master: cold start %s for %d nodes; with all copies: %d nodes, "
          "%.0f B RSS and %.0f B in namespace structures per node" % (
              human_s(r["cold_start_s"]), r["cold_start_nodes"] or 0,
              mem["nodes"], mem["rss_per_node"], mem["meta_per_node"]))


def parse_sizes(text):
    sizes = []
    for x in text.split(","):
        try:
            sizes.append(int(x.replace("_", "")))
        except ValueError:
            raise SystemExit("-n: %r is not a number of files" % x)
    return sizes


def make_copies(cl, methods, a):
    """{method: [path under the mount, one a client]}: snapshots of the
    tree, or with --in-place the tree's own directories in turn."""
    copies = {}
    if a.in_place:
        for i, m in enumerate(methods):
            copies[m] = ["d%d" % (i % 2)]
        return copies
    for m in methods:
        copies[m] = []
        for i in range(a.k):
            name = "copy-%s-%d" % (m, i)
            os.mkdir(os.path.join(cl.mnt, name))
            for d in ("d0", "d1"):
                cl.tool("snapshot", os.path.join(cl.mnt, d),
                        os.path.join(cl.mnt, name, d))
            copies[m].append(name)
    return copies


def one_size(n, methods, removeall, build, a, net=None):
    """The experiment at @n files on a fresh cluster, in the machines of
    @net if given: its results."""
    kw = {}
    if net:
        kw = {"netns": net.netns("srv"), "host": net.address("srv"),
              "port": MASTER_PORT, "mount_net": machine_net(net, "main")}
    # Made through the mount the tools then run on: that mount is the
    # one --mount-opts names (the others are the rm and go clients').
    cl = cluster.Cluster(build, master_set=a.set,
                         mount_opts=a.mount_opts if a.via_mount else "",
                         **kw)
    # The master listens once its checkpoint is loaded: give it time
    # for N files even at a fraction of the load rate it should have.
    cl.ready_s = max(cl.ready_s, 30 + n / 250_000)
    data = os.path.join(cl.dir, "meta")
    os.makedirs(data)
    seed_s = made_s = maker_mem = None
    if not a.via_mount:
        print("seeding a checkpoint of %d files" % n, file=sys.stderr)
        seed_s = seed_checkpoint(build, data, n)
    try:
        cl.start()
        start = master_start(cl.records["master"]["log"])
        load_s, load_nodes = start.get("seconds"), start.get("nodes")
        probe_mnt = cl.mount_extra(
            "probe", "attr_timeout=0,entry_timeout=0,negative_timeout=0",
            net=machine_net(net, "probe"))
        probe_target = os.path.join(probe_mnt, "probe-target")
        with open(probe_target, "w"):
            pass
        if a.via_mount:
            print("making %d files through the mount" % n, file=sys.stderr)
            made_s = make_via_mount(cl.mnt, n)
            # What the mount that made it keeps (issue 29: bounded per
            # held directory, not growing with it).
            maker_mem = proc_memory(cl.pid("mount:" + cl.mnt))
        t0 = time.perf_counter()
        copies = make_copies(cl, methods, a)
        copy_s = time.perf_counter() - t0
        info = cl.info()
        r = {"n": n, "copies_per_method": 0 if a.in_place else a.k,
             "in_place": a.in_place, "limit_s": a.limit,
             "via_mount": a.via_mount, "made_through_mount_s": made_s,
             "maker_mount_memory": maker_mem if a.via_mount else None,
             "seed_s": seed_s, "first_start": start,
             "cold_start_s": load_s, "cold_start_nodes": load_nodes,
             "copy_s": copy_s,
             "memory": {"nodes": info["nodes"],
                        "rss_bytes": info["rss_bytes"],
                        "meta_bytes": info["meta_bytes"],
                        "rss_per_node": info["rss_bytes"] / info["nodes"],
                        "meta_per_node":
                        info["meta_bytes"] / info["nodes"]},
             "methods": {}}
        for m in methods:
            # A path walk on the mount that made the tree: after a
            # recall the kernel prunes the directory's cached names in
            # it (issue 29), so it is timed, not hidden before the tool.
            t0 = time.perf_counter()
            left = [c for c in copies[m]
                    if os.path.isdir(os.path.join(cl.mnt, c))]
            walk_s = time.perf_counter() - t0
            if not left:
                print("%s: nothing left to delete, skipped" % m,
                      file=sys.stderr)
                continue
            print("%s: %d client(s), n=%d" % (m, len(left), n),
                  file=sys.stderr)
            r["methods"][m] = run_method(cl, m, left, removeall,
                                         probe_target, a.mount_opts, a,
                                         net)
            r["methods"][m]["walk_before_s"] = walk_s
        r["restart"] = restart(cl, a, probe_target)
    finally:
        if a.keep_logs and cl.records.get("master"):
            os.makedirs(a.keep_logs, exist_ok=True)
            shutil.copy(cl.records["master"]["log"], os.path.join(
                a.keep_logs, "master-%d-%d.log" % (n, time.time_ns())))
        cl.stop()
    return r


def print_ratios(results):
    """The rates at the largest size over those at the smallest, per
    method: the issue's "within 20%"."""
    lo, hi = results[0], results[-1]
    print("\nrates at %d files over those at %d files, same run:" % (
        hi["n"], lo["n"]))
    for m in METHODS:
        a, b = lo["methods"].get(m), hi["methods"].get(m)
        if not a or not b:
            continue
        print("  %-11s %10.0f -> %10.0f files/s per client  x%.2f" % (
            m, min(a["files_per_s_client"]), min(b["files_per_s_client"]),
            min(b["files_per_s_client"]) / min(a["files_per_s_client"])))


def make_machines(a):
    """The run's machines (bench/machines.py), created: srv (the master),
    main (the mount that makes the copies), probe, and one a client."""
    machines.check_environment()
    found, live = machines.leftovers()
    if live:
        print("other runs with machines going (pid %s): this one needs "
              "a subnet of its own (--subnet)" %
              ", ".join(map(str, live)), file=sys.stderr)
    if any(found.values()):
        print("a run that was killed left %s; bench/stress.py --cleanup "
              "removes them" % ", ".join(sum(found.values(), [])[:4]),
              file=sys.stderr)
    net = machines.Network(a.subnet)
    for role in ["srv", "main", "probe"] + ["c%d" % i for i in
                                            range(1 if a.in_place
                                                  else a.k)]:
        net.add(role)
    try:
        net.create()
    except BaseException:
        net.destroy(log=lambda msg: print(msg, file=sys.stderr))
        raise
    print("machines: bridge %s (%s), master %s, clients from %s" % (
        net.bridge, net.host_address, net.address("srv"),
        net.address("c0")), file=sys.stderr)
    return net


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", default=None,
                    help="files in the tree, in two directories; a comma "
                    "list runs each size in turn (default 34000000 where "
                    "memory allows)")
    ap.add_argument("-k", type=int, default=1,
                    help="clients (copies) per method (1)")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="of %s (all)" % ",".join(METHODS))
    ap.add_argument("--in-place", action="store_true",
                    help="delete the seeded directories, not copies")
    ap.add_argument("--via-mount", action="store_true",
                    help="make the tree through the mount the tools run "
                    "on (implies --in-place)")
    ap.add_argument("--limit", type=float, default=None,
                    help="stop rm -rf and os.RemoveAll after this many "
                    "seconds; their rate is what they removed meanwhile")
    ap.add_argument("--mount-opts", default="",
                    help="options of the deleting clients' mounts, "
                    "and with --via-mount of the mount that makes the "
                    "tree (e.g. io_uring)")
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--set", action="append", default=[],
                    help="master config KEY=VALUE")
    ap.add_argument("--timeout", type=int, default=7200,
                    help="seconds a purge may take (7200)")
    ap.add_argument("--restart-timeout", type=int, default=900,
                    help="seconds the restarted master may take to replay "
                    "the run's changes (900)")
    ap.add_argument("--checkpoint-seconds", type=int, default=10,
                    help="after a restart, seconds of checkpoints every "
                    "second with the probe running (10)")
    ap.add_argument("--no-probe", action="store_true",
                    help="no other client's stat during the methods: the "
                    "master's CPU per removed file is then the removal's "
                    "own (the probe's stats cost the master much of it "
                    "at one client)")
    ap.add_argument("--machines", action="store_true",
                    help="every client, the probe and the master a machine "
                    "of its own (network namespaces on a bridge); "
                    "default: mounts on the host, over loopback")
    ap.add_argument("--subnet", default=DEFAULT_SUBNET,
                    help="the machines' subnet (%(default)s)")
    ap.add_argument("--keep-logs", metavar="DIR",
                    help="copy the master's log of each size into DIR "
                    "(with --set log_level=debug: why each delegation was "
                    "refused)")
    ap.add_argument("--strace-tools", metavar="DIR",
                    help="run each admin tool under strace, its trace in "
                    "DIR: where the time of flag, rmsnapshot and rmr goes")
    ap.add_argument("--out", help="JSON result file")
    a = ap.parse_args()
    if a.strace_tools:
        global STRACE_DIR
        os.makedirs(a.strace_tools, exist_ok=True)
        STRACE_DIR = a.strace_tools
    a.in_place = a.in_place or a.via_mount
    methods = [m for m in a.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            raise SystemExit("unknown method %s" % m)
    if a.in_place and a.k != 1:
        raise SystemExit("--in-place has one client a method (-k 1)")
    # Without the fuse module's enable_uring a mount asked for io_uring
    # says so in its log and reads /dev/fuse: the run would measure the
    # default mount under the other's name.
    uring = cluster.fuse_enable_uring()
    if "io_uring" in a.mount_opts.split(",") and uring != "Y":
        raise SystemExit("-o io_uring asked for, but %s is %s: echo Y "
                         "into it, or leave the option out"
                         % (cluster.URING_PARAM, uring or "absent"))
    ncopies = 0 if a.in_place else a.k * len(methods)
    if a.n is None:
        n = 34_000_000
        while not fits(n, ncopies) and n > 100_000:
            n //= 2
        print("-n %d (what memory allows)" % n, file=sys.stderr)
        sizes = [n]
    else:
        sizes = parse_sizes(a.n)
    for n in sizes:
        if not fits(n, ncopies):
            print("warning: %d files and %d copies may not fit in memory"
                  % (n, ncopies), file=sys.stderr)
    build = os.path.abspath(a.build) if a.build else cluster.default_build()
    work = tempfile.mkdtemp(prefix="sweepfs-seed-")
    net = None
    try:
        removeall = go_removeall(work) if "go" in methods else None
        if "go" in methods and not removeall:
            raise SystemExit("cannot build tools/compare_delete/"
                             "go-removeall (go build)")
        if a.machines:
            try:
                net = make_machines(a)
            except (machines.HostError, ValueError) as e:
                raise SystemExit("--machines: %s" % e)
        results = [one_size(n, methods, removeall, build, a, net)
                   for n in sizes]
    finally:
        if net:
            left = net.destroy(log=lambda msg: None)
            if left:
                print("warning: could not remove %s" % left,
                      file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    for r in results:
        print_table(r)
    if len(results) > 1:
        print_ratios(results)
    ctx = cluster.context(build, {
        "benchmark": "seed", "sizes": sizes, "k": a.k, "methods": methods,
        "in_place": a.in_place, "via_mount": a.via_mount,
        "limit_s": a.limit, "mount_opts": a.mount_opts, "master_config": a.set,
        "loadavg": os.getloadavg(),
        "clients": ("machines: network namespaces on bridge %s, subnet "
                    "%s; master in %s" % (net.bridge, net.subnet,
                                          net.address("srv"))
                    if net else "mounts on the host, loopback")})
    out = a.out
    if not out:
        d = os.path.join(HERE, "results")
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, "seed-%s.json" %
                           time.strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        # One size keeps the old shape ("results" an object).
        json.dump({"context": ctx,
                   "results": results[0] if len(results) == 1 else results,
                   "post": POST}, f, indent=1)
    print("\nresult: %s" % out)


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()
