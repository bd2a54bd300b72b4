#!/usr/bin/env python3
"""What replication costs: create and unlink of N empty files, W writers
(each in a directory of its own), through a master alone and through a
group of three masters on loopback (master/group.h: each change committed
by etcd before it is answered), side by side in one run, with default
mounts (directory delegations: changes reach the master in batches) and
with -o wsync mounts (every change waits for the master, and so for
etcd). Prints ops/s per side and the ratio group/alone per phase; then
a tree of N files removed with `sweepfs rmr --wait` on each side (the
purge's rate, and how long after the leader's purge the followers had
applied it); writes a JSON result. At the end every member must stop with
the same namespace digest.

Both sides keep the changelog the same way (--sync: changelog_sync,
default interval); etcd runs with its defaults (an fdatasync per commit),
its data beside the masters'. With -o wsync every change waits for that
fdatasync in the group, and for none (interval) or its own (always)
alone: compare with --sync always for the cost of replication alone.

  bench/group.py -n 200000 -w 4
"""

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import cluster  # noqa: E402
import swgroup  # noqa: E402
from swcluster import is_sweepfs_mount, unmount  # noqa: E402


def _create(d, n):
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        os.close(os.open(os.path.join(d, "f%d" % i),
                         os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))


def _unlink(d, n):
    for i in range(n):
        os.unlink(os.path.join(d, "f%d" % i))


def phase(fn, root, writers, per):
    dirs = [os.path.join(root, "w%d" % k) for k in range(writers)]
    procs = [mp.Process(target=fn, args=(d, per)) for d in dirs]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit("a writer failed in %s" % root)
    os.sync()
    return writers * per / (time.monotonic() - t0)


def mount(build, spec, mnt, opts, log):
    os.makedirs(mnt, exist_ok=True)
    argv = [os.path.join(build, "mount", "sweepfs-mount"), spec, mnt, "-f"]
    if opts:
        argv += ["-o", opts]
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    h = swgroup.Child(argv, stdout=fd, stderr=fd)
    os.close(fd)
    deadline = time.monotonic() + 20
    while not is_sweepfs_mount(mnt):
        if time.monotonic() > deadline or h.poll() is not None:
            raise SystemExit("mounting %s failed (%s)" % (spec, log))
        time.sleep(0.05)
    return h


def purge(root, tool, group=None):
    """Remove @root with sweepfs rmr and wait for its purge: nodes freed
    per second; for the group, also how long after the leader's purge its
    followers had applied it (PurgeSteps)."""
    t0 = time.monotonic()
    tool("rmr", "--skip-trash", "--wait", root)
    dt = time.monotonic() - t0
    out = {"seconds": dt}
    if group:
        _, st = group.leader()
        want, t1 = st["meta_version"], time.monotonic()
        while min(m.get("meta_version", 0) for m in st["members"]) < want:
            if time.monotonic() - t1 > 60:
                raise SystemExit("the followers did not apply the purge")
            time.sleep(0.05)
            _, st = group.leader()
        out["followers_after_s"] = time.monotonic() - t1
    return out


def rss(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory(group):
    """Bytes per node of every member, the N files there: the leader's
    namespace structures (its status) and each member's resident set.
    The followers have applied the same changes (a second to catch up)."""
    time.sleep(2)
    lid, st = group.leader()
    out = {"nodes": st["nodes"],
           "leader_meta_per_node": st["meta_bytes"] / st["nodes"]}
    for i, h in group.master.items():
        role = "leader" if i == lid else "follower%d" % i
        out[role + "_rss_per_node"] = rss(h.pid) / st["nodes"]
    print("memory: " + ", ".join("%s %.0f B" % (k, v) for k, v in
                                 out.items() if k != "nodes"), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200000, help="files (200000)")
    ap.add_argument("-w", "--writers", type=int, default=4)
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--skip-wsync", action="store_true",
                    help="only the default mounts")
    ap.add_argument("--sync", choices=("interval", "always"),
                    default="interval",
                    help="changelog_sync of every master (interval: the "
                    "default; always: the master alone fdatasyncs each "
                    "group commit too, as etcd does for the group)")
    ap.add_argument("--out", help="JSON result (default: bench-group.json)")
    a = ap.parse_args()
    build = a.build or cluster.default_build()
    if not shutil.which("etcd"):
        raise SystemExit("etcd is not installed (apt-get install "
                         "etcd-server)")
    per = a.n // a.writers
    base = tempfile.mkdtemp(prefix="sweepfs-bench-group.")
    sync = ["changelog_sync=" + a.sync]
    alone = cluster.Cluster(build=build, base=base, master_set=sync)
    members = swgroup.loopback_members(3)
    gdir = os.path.join(base, "group")
    os.makedirs(gdir)
    # The daemons' default log level, as bench/cluster.py has it.
    group = swgroup.Group(gdir, build, members, master_set=sync,
                          log_level="notice")
    handles, mnts = [], []
    result = {"n": per * a.writers, "writers": a.writers, "sync": a.sync,
              "phases": {}}
    try:
        alone.start()
        group.start()
        kinds = [("default", "")] + ([] if a.skip_wsync else
                                     [("wsync", "wsync")])
        where = {("alone", "default"): alone.mnt}
        if not a.skip_wsync:
            where[("alone", "wsync")] = alone.mount_extra("mnt-wsync",
                                                          opts="wsync")
        for kind, opts in kinds:
            mnt = os.path.join(base, "mnt-group-%s" % kind)
            handles.append(mount(build, group.list, mnt, opts,
                                 mnt + ".log"))
            mnts.append(mnt)
            where[("group", kind)] = mnt
        # Alternating sides, so that neither has the machine's better
        # moments to itself.
        for kind, _ in kinds:
            for ph, fn in (("create", _create), ("unlink", _unlink)):
                rates = {}
                for side in ("alone", "group"):
                    rates[side] = phase(fn, where[(side, kind)], a.writers,
                                        per)
                key = "%s %s" % (ph, kind)
                rates["ratio"] = rates["group"] / rates["alone"]
                result["phases"][key] = rates
                print("%-16s alone %9.0f/s   group of 3 %9.0f/s   %.2fx" %
                      (key, rates["alone"], rates["group"],
                       rates["ratio"]), flush=True)
                if ph == "create" and kind == "default":
                    result["memory"] = memory(group)
            if kind != "default":
                continue
            # Removed trees: the leader purges, the followers apply.
            rm = {}
            for side, tool in (("alone", alone.tool), ("group", group.tool)):
                root = os.path.join(where[(side, kind)], "rmr")
                phase(_create, root, a.writers, per)
                rm[side] = purge(root, tool,
                                 group if side == "group" else None)
            rm["ratio"] = rm["alone"]["seconds"] / rm["group"]["seconds"]
            result["phases"]["rmr default"] = rm
            print("rmr (purge)      alone %9.0f/s   group of 3 %9.0f/s   "
                  "%.2fx; followers done %.2f s after the leader" %
                  (per * a.writers / rm["alone"]["seconds"],
                   per * a.writers / rm["group"]["seconds"], rm["ratio"],
                   rm["group"]["followers_after_s"]), flush=True)
        for m in mnts:
            unmount(m)
        mnts = []
        # Every member applied the same changes, purges included.
        lid = group.leader()[0]
        ends = group.stop_for_digests([i for i in group.master
                                       if i != lid] + [lid])
        result["ends"] = {str(i): v for i, v in ends.items()}
        print("members at the end: %s" % ", ".join(
            "%s %s" % kv for kv in sorted(result["ends"].items())),
            flush=True)
    finally:
        for m in mnts:
            unmount(m)
        for h in handles:
            h.stop(10)
        group.stop()
        alone.stop()
        shutil.rmtree(base, ignore_errors=True)
    cluster.write_result(result, build, a.out or "bench-group.json")


if __name__ == "__main__":
    main()
