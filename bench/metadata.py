#!/usr/bin/env python3
"""Metadata benchmark: create, stat and unlink N empty files through a
sweepfs mount and in a local directory, in the same run, with W writer
processes; then `rm -rf` of an N-file tree on both. Prints ops/s and the
sweepfs/local ratio per phase, the master's resident memory per file, and
writes a JSON result with the run's context.

By default it starts its own master and mount from the build directory
(--mount uses an existing mount instead, --master its master for the
memory figures).

  bench/metadata.py -n 100000 -w 4
"""

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402


def drop_caches():
    """Forget dentries and inodes so that stat measures lookups, not the
    kernel's cache (root only; otherwise the numbers say so)."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
        return True
    except OSError:
        return False


def worker(phase, paths, barrier, out):
    barrier.wait()
    t0 = time.perf_counter()
    errors = 0
    if phase == "create":
        for p in paths:
            try:
                os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                                 0o644))
            except OSError:
                errors += 1
    elif phase == "stat":
        for p in paths:
            try:
                os.stat(p)
            except OSError:
                errors += 1
    elif phase == "unlink":
        for p in paths:
            try:
                os.unlink(p)
            except OSError:
                errors += 1
    out.put((time.perf_counter() - t0, errors))


def run_phase(phase, names, writers):
    """All writers start together; the phase lasts until the last ends."""
    barrier = mp.Barrier(writers + 1)
    out = mp.Queue()
    procs = [mp.Process(target=worker,
                        args=(phase, names[k::writers], barrier, out))
             for k in range(writers)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    results = [out.get() for _ in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    errors = sum(e for _, e in results)
    return {"seconds": wall, "ops": len(names), "errors": errors,
            "ops_per_s": len(names) / wall if wall > 0 else 0.0}


def tree_names(root, n, writers, per_writer_dirs):
    if per_writer_dirs:
        for k in range(writers):
            os.makedirs(os.path.join(root, "w%d" % k), exist_ok=True)
        return [os.path.join(root, "w%d" % (i % writers), "f%07d" % i)
                for i in range(n)]
    os.makedirs(root, exist_ok=True)
    return [os.path.join(root, "f%07d" % i) for i in range(n)]


def bench_fs(label, base, n, writers, per_writer_dirs, status=None):
    res = {}
    root = os.path.join(base, "meta-bench")
    names = tree_names(root, n, writers, per_writer_dirs)
    before = status() if status else None
    res["create"] = run_phase("create", names, writers)
    if status:
        after = status()
        res["master_right_after_create"] = {
            k: after[k] for k in ("rss_bytes", "meta_bytes", "nodes")}
        # Hash tables grow a little at a time (master/htab.h): the old
        # array of one that just doubled lives on until the master's
        # housekeeping has moved everything, a fraction of a second.
        # Memory is read once none is resizing (at most 15 s).
        for _ in range(150):
            if not after.get("tables_resizing"):
                break
            time.sleep(0.1)
            after = status()
        res["master_after_create"] = {
            k: after[k] for k in ("rss_bytes", "meta_bytes", "nodes")}
        res["master_before"] = {
            k: before[k] for k in ("rss_bytes", "meta_bytes", "nodes")}
    drop_caches()
    res["stat"] = run_phase("stat", names, writers)
    res["unlink"] = run_phase("unlink", names, writers)
    # rm -rf of an N-file tree, as the MooseFS comparison does.
    run_phase("create", names, writers)
    drop_caches()
    t0 = time.perf_counter()
    rc = subprocess.call(["rm", "-rf", root])
    wall = time.perf_counter() - t0
    res["rm_rf"] = {"seconds": wall, "ops": n, "errors": int(rc != 0),
                    "ops_per_s": n / wall if wall > 0 else 0.0}
    if os.path.exists(root):
        shutil.rmtree(root, ignore_errors=True)
    print("  %s done" % label, file=sys.stderr)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100000, help="files (100000)")
    ap.add_argument("-w", "--writers", type=int, default=4,
                    help="writer processes (4)")
    ap.add_argument("--per-writer-dirs", action="store_true",
                    help="each writer in its own directory")
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--mount", help="use this sweepfs mount")
    ap.add_argument("--master", help="its master, for memory figures")
    ap.add_argument("--local", help="local directory to compare with "
                    "(default: a temporary directory in /var/tmp)")
    ap.add_argument("--set", action="append", default=[],
                    help="master config KEY=VALUE for the cluster started")
    ap.add_argument("--mount-opts", default="",
                    help="sweepfs-mount -o options for the cluster started")
    ap.add_argument("--out", help="JSON result file (default: "
                    "bench/results/metadata-DATE.json)")
    a = ap.parse_args()

    build = os.path.abspath(a.build) if a.build else cluster.default_build()
    cl = None
    if a.mount:
        mnt = a.mount
        master = a.master
    else:
        cl = cluster.Cluster(build, master_set=a.set,
                             mount_opts=a.mount_opts).start()
        mnt, master = cl.mnt, cl.address
    local = a.local or tempfile.mkdtemp(prefix="sweepfs-local-",
                                        dir="/var/tmp")

    def status():
        out = subprocess.check_output(
            [os.path.join(build, "tools", "sweepfs"), "-m", master,
             "status", "--json"])
        return json.loads(out)

    print("metadata: n=%d writers=%d on %s and %s" % (a.n, a.writers, mnt,
                                                       local),
          file=sys.stderr)
    cached = drop_caches()
    sw = bench_fs("sweepfs", mnt, a.n, a.writers, a.per_writer_dirs,
                  status if master else None)
    lo = bench_fs("local", local, a.n, a.writers, a.per_writer_dirs)
    master_status = status() if master else None
    if cl:
        cl.stop()
    if not a.local:
        shutil.rmtree(local, ignore_errors=True)

    phases = ["create", "stat", "unlink", "rm_rf"]
    results = {}
    print("\n%-8s %14s %14s %10s" % ("phase", "sweepfs ops/s",
                                       "local ops/s", "ratio"))
    for ph in phases:
        ratio = sw[ph]["ops_per_s"] / lo[ph]["ops_per_s"]
        results[ph] = {"sweepfs": sw[ph], "local": lo[ph], "ratio": ratio}
        print("%-8s %14.0f %14.0f %10.3f" % (ph, sw[ph]["ops_per_s"],
                                           lo[ph]["ops_per_s"], ratio))
    mem = None
    if "master_after_create" in sw:
        b, c = sw["master_before"], sw["master_after_create"]
        files = c["nodes"] - b["nodes"]
        mem = {
            "files": files,
            "rss_bytes_per_file": (c["rss_bytes"] - b["rss_bytes"]) / files,
            "meta_bytes_per_file": (c["meta_bytes"] - b["meta_bytes"]) /
            files,
            "rss_bytes": c["rss_bytes"],
            "meta_bytes_per_file_right_after_create":
            (sw["master_right_after_create"]["meta_bytes"] -
             b["meta_bytes"]) / files,
        }
        print("\nmaster: %.0f bytes RSS per file (%.0f in namespace "
              "structures; %.0f right after the last create, while its "
              "tables finished growing), %d files" % (
                  mem["rss_bytes_per_file"], mem["meta_bytes_per_file"],
                  mem["meta_bytes_per_file_right_after_create"], files))
    if not cached:
        print("note: not root, caches not dropped: stat hits the kernel's "
              "cache", file=sys.stderr)

    ctx = cluster.context(build, {
        "benchmark": "metadata",
        "n": a.n, "writers": a.writers,
        "per_writer_dirs": a.per_writer_dirs,
        "mount": mnt, "local": local, "caches_dropped": cached,
        "master_config": a.set,
        "mount_opts": a.mount_opts,
        "changelog_sync": master_status and master_status.get(
            "changelog_sync"),
        "local_fs": subprocess.check_output(
            ["stat", "-f", "-c", "%T", "/var/tmp"], text=True).strip(),
    })
    result = {"context": ctx, "results": results, "master_memory": mem}
    out = a.out
    if not out:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "results")
        os.makedirs(d, exist_ok=True)
        out = os.path.join(d, "metadata-%s.json" %
                           time.strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print("\nresult: %s" % out)


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()
