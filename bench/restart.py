#!/usr/bin/env python3
"""A crash after a big removal, and the restart that follows.

    bench/restart.py --checkpoint DIR [--build B]... [--rounds R]

For each build B in turn (--rounds times, alternating, so that old and new
binaries see the same machine), on a master started from the checkpoint in
DIR (made once by `sweepfs-nsbench make DIR FILES 0 2`, hard-linked, never
changed): `sweepfs rmr` of every directory under the root, then wait for
the purge to free them, another client's `stat` timed meanwhile (the
checkpoints the purge brings cost requests a fork and nothing more), then
kill -9 the master as a crash would and start it again: how long until it
listens, how many nodes it loaded and how many changes it replayed, each in
how long (the master's own log line), and the checkpoints written
meanwhile, each with its time and how long its fork held the loop, the
collapses of split huge pages after each child (their log lines), the
master's anonymous and huge-page memory each second, and when each stat
over 20 ms began (beside the master's log, kept with --keep-logs). The
purge runs at --duty percent of the master (default 90, not 25: the
bench is about what a restart replays after it and what its forks cost,
not about the clients meanwhile).

What it shows: the replay a restart faces after a removal is bounded by
checkpoint_changes counted as replay work (master.c) rather than by the
records, which are few (a PurgeSteps record frees up to a slice of nodes).
A JSON line per run on stdout; the context once, first.
"""

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster  # noqa: E402
import seed  # noqa: E402
import swcluster  # noqa: E402


def checkpoint_file(d):
    names = sorted(n for n in os.listdir(d) if n.startswith("checkpoint.")
                   and n[len("checkpoint."):].isdigit())
    if not names:
        raise SystemExit("no checkpoint in %s" % d)
    return os.path.join(d, names[-1])


def kib(path, field):
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def huge_pages(pid, stop, out):
    """What a fork would copy page by page, sampled each second: the
    master's anonymous memory and how much of it is in huge pages (a
    fork copies one entry per 2 MiB of those, one per 4 KiB of the rest,
    about 0.1 us each). VmPTE says nothing here: the kernel keeps a page
    table ready for every huge page too."""
    while not stop.wait(1):
        try:
            rollup = "/proc/%d/smaps_rollup" % pid
            out.append((kib(rollup, "Anonymous"),
                        kib(rollup, "AnonHugePages")))
        except OSError:
            break


def one_run(build, ckpt, a):
    # log_level info: each written checkpoint's line (its time, its
    # fork's), seed.checkpoints_written().
    cl = cluster.Cluster(build, master_set=[
        "purge_duty=%d" % a.duty, "purge_duty_busy=%d" % a.duty,
        "log_level=info"] + a.set)
    cl.ready_s = max(cl.ready_s, a.timeout)
    data = os.path.join(cl.dir, "meta")
    os.makedirs(data)
    os.link(ckpt, os.path.join(data, os.path.basename(ckpt)))
    try:
        cl.start()
        first = seed.master_start(cl.records["master"]["log"])
        probe_mnt = cl.mount_extra(
            "probe", "attr_timeout=0,entry_timeout=0,negative_timeout=0")
        target = os.path.join(probe_mnt, "probe-target")
        with open(target, "w"):
            pass
        stop, pout, pslow = mp.Event(), mp.Queue(), mp.Queue()
        pr = mp.Process(target=seed.probe,
                        args=(target, stop, pout, False, pslow))
        pr.start()
        pstop, ptab = threading.Event(), []
        pt = threading.Thread(target=huge_pages, daemon=True,
                              args=(cl.pid("master"), pstop, ptab))
        pt.start()
        t0 = time.perf_counter()
        for d in sorted(os.listdir(cl.mnt)):
            if d != "probe-target" and os.path.isdir(os.path.join(cl.mnt, d)):
                cl.tool("rmr", os.path.join(cl.mnt, d))
        versions = set()
        while True:
            s = cl.info()
            versions.add(s["checkpoint_version"])
            if s["purge_left"] == 0 and s["purge_roots"] == 0:
                break
            if time.perf_counter() - t0 > a.timeout:
                raise SystemExit("purge did not finish in %d s" % a.timeout)
            time.sleep(1)
        purge_s = time.perf_counter() - t0
        pstop.set()
        pt.join()
        stop.set()
        lat = pout.get()
        late = pslow.get()
        pr.join()
        # A crash right after the purge: whatever checkpoint is being
        # written is lost with it.
        written = seed.checkpoints_written(cl.records["master"]["log"])
        t0 = time.perf_counter()
        swcluster.Cluster.stop(cl, "master", how="kill")
        cl.start_master()
        up_s = time.perf_counter() - t0
        return {"build": build, "first_start": first, "purge_s": purge_s,
                "checkpoints_during_purge": len(versions) - 1,
                "checkpoints_written": written,
                "collapses": seed.collapses(cl.records["master"]["log"]),
                "anon_huge_kib": ptab,
                "stat_during_purge": seed.summary(lat),
                "stat_over_20ms": [
                    [time.strftime("%H:%M:%S", time.gmtime(w)) +
                     ".%03d" % int(w * 1000 % 1000), round(ms, 1)]
                    for w, ms in late],
                "restart_s": up_s,
                "restart": seed.master_start(cl.records["master"]["log"])}
    finally:
        if a.keep_logs:
            os.makedirs(a.keep_logs, exist_ok=True)
            shutil.copy(cl.records["master"]["log"], os.path.join(
                a.keep_logs, "master-%d.log" % time.time_ns()))
        cl.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True,
                    help="directory holding the checkpoint to start from")
    ap.add_argument("--build", action="append",
                    help="build directory (repeat to compare; default: "
                    "the tree's)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--duty", type=int, default=90,
                    help="purge_duty and purge_duty_busy (percent)")
    ap.add_argument("--set", action="append", default=[],
                    help="KEY=VALUE for the master (repeatable)")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--keep-logs", metavar="DIR",
                    help="copy each run's master log into DIR")
    a = ap.parse_args()
    builds = a.build or [cluster.default_build()]
    ckpt = checkpoint_file(a.checkpoint)
    print(json.dumps({"context": cluster.context(builds[0]),
                      "checkpoint": ckpt, "builds": builds, "duty": a.duty,
                      "set": a.set}), flush=True)
    for _ in range(a.rounds):
        for b in builds:
            print(json.dumps(one_run(b, ckpt, a)), flush=True)


if __name__ == "__main__":
    main()
