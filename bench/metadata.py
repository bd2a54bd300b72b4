#!/usr/bin/env python3
"""Metadata benchmark: create, stat and unlink N empty files through a
sweepfs mount, through a second mount with -o wsync (no directory
delegations: every operation waits for the master) and in a local
directory, in the same run, with W writer processes; then `rm -rf` of an
N-file tree on each, the sweepfs ones through a freshly started mount (as
a user meets it: nothing cached). With --also-opts, a third sweepfs
mount with those options runs the same phases, for their ratio to the
default. Prints ops/s and the ratios per phase,
the master's CPU time per file removed by rm -rf, the stat latency
another client sees on another directory meanwhile (p50/p99, beside the
same figures idle), the master's resident memory per file, and writes a
JSON result with the run's context.

--fuse-yardstick BIN adds a side through BIN, libfuse's passthrough_ll
example (over a local directory), for what FUSE itself costs on the
machine; its rm -rf too goes through a freshly started instance. It
holds a descriptor for every file the kernel knows: where it may hold
fewer than N (a process without CAP_SYS_RESOURCE cannot raise its hard
limit), only its rm -rf is measured, of a tree made beneath it.

By default it starts its own master and mounts from the build directory
(--mount uses an existing mount instead, without the wsync side and the
fresh mounts; --master its master for the memory figures).

  bench/metadata.py -n 200000 -w 4
"""

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
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


class StatProbe:
    """stat() of one file in a loop, from another client, on a directory
    nobody else uses: the latency others see while a removal runs."""

    def __init__(self, path):
        self.path = path
        self.lat = []
        self.stop = threading.Event()
        self.t = None

    def _run(self):
        while not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                os.stat(self.path)
            except OSError:
                pass
            self.lat.append(time.perf_counter() - t0)
            time.sleep(0.001)

    def __enter__(self):
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()

    def summary(self):
        v = sorted(self.lat)
        if not v:
            return {"samples": 0}
        return {"samples": len(v), "p50_us": v[len(v) // 2] * 1e6,
                "p99_us": v[min(len(v) - 1, len(v) * 99 // 100)] * 1e6}


class Passthrough:
    """libfuse's passthrough_ll example over a local directory."""

    def __init__(self, binary, src, mnt):
        self.binary, self.src, self.mnt = binary, src, mnt
        self.proc = None
        os.makedirs(src, exist_ok=True)
        os.makedirs(mnt, exist_ok=True)

    @staticmethod
    def _many_files():
        # It holds a descriptor for every inode the kernel knows.
        try:  # root may go past the hard limit, up to fs.nr_open
            resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))
        except (ValueError, OSError):
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    def max_files(self):
        """How many descriptors the running instance may hold."""
        with open("/proc/%d/limits" % self.proc.pid) as f:
            for line in f:
                if line.startswith("Max open files"):
                    return int(line.split()[3])
        return 0

    def start(self):
        self.proc = subprocess.Popen(
            [self.binary, "-f", "-o", "source=" + self.src, self.mnt],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=self._many_files)
        for _ in range(200):
            if os.path.ismount(self.mnt):
                return self.mnt
            time.sleep(0.05)
        raise SystemExit("%s did not mount on %s" % (self.binary, self.mnt))

    def stop(self):
        if self.proc:
            subprocess.call(["fusermount3", "-u", self.mnt])
            self.proc.wait(timeout=30)
            self.proc = None

    def fresh(self):
        self.stop()
        return self.start(), lambda: None


def bench_fs(label, base, n, writers, per_writer_dirs, status=None,
             fresh=None, probe=None, direct=None):
    """@fresh(): (path of @base on a mount started just now, a function
    that unmounts it), for rm -rf; @probe: a file for StatProbe;
    @direct: the directory under @base's file system, for one that
    cannot hold N files at once (passthrough_ll, a descriptor per file
    the kernel knows): the tree is made there and only its rm -rf, through
    a fresh mount, is measured."""
    res = {}
    root = os.path.join(base, "meta-bench-" + label)
    if direct:
        return bench_rm_rf(label, root, direct, n, writers,
                           per_writer_dirs, fresh)
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
    # rm -rf of an N-file tree, as the MooseFS comparison does. Files
    # that could not be made are not removed either: they count as errors
    # of the rm -rf too (its rate is N over its time).
    missing = run_phase("create", names, writers)["errors"]
    drop_caches()
    rm_root, done = root, None
    if fresh:
        fbase, done = fresh()
        rm_root = os.path.join(fbase, os.path.basename(root))
    if probe:
        with StatProbe(probe) as idle:
            time.sleep(1)
        res["stat_idle"] = idle.summary()
    cpu0 = status() if status else None
    t0 = time.perf_counter()
    if probe:
        with StatProbe(probe) as busy:
            rc = subprocess.call(["rm", "-rf", rm_root])
        res["stat_during_rm"] = busy.summary()
    else:
        rc = subprocess.call(["rm", "-rf", rm_root])
    wall = time.perf_counter() - t0
    if done:
        done()  # the unmount sends what is queued: counted below
    res["rm_rf"] = rm_rf_result(n, wall, rc, missing)
    if cpu0:
        cpu1 = status()
        ms = (cpu1["cpu_user_ms"] + cpu1["cpu_system_ms"] -
              cpu0["cpu_user_ms"] - cpu0["cpu_system_ms"])
        res["rm_rf"]["master_cpu_us_per_file"] = ms * 1000.0 / n
    if os.path.exists(root):
        shutil.rmtree(root, ignore_errors=True)
    print("  %s done" % label, file=sys.stderr)
    return res


def rm_rf_result(n, wall, rc, missing):
    """An rm -rf of @n files in @wall seconds that exited @rc, @missing
    of them never made: they count as its errors."""
    return {"seconds": wall, "ops": n, "errors": int(rc != 0) + missing,
            "ops_per_s": n / wall if wall > 0 else 0.0}


def bench_rm_rf(label, root, direct, n, writers, per_writer_dirs, fresh):
    """rm -rf through a fresh mount of a tree made in @direct, the
    directory that mount shows: its files are then known to the kernel
    only while they are removed."""
    made = os.path.join(direct, os.path.basename(root))
    names = tree_names(made, n, writers, per_writer_dirs)
    missing = run_phase("create", names, writers)["errors"]
    drop_caches()
    fbase, done = fresh()
    t0 = time.perf_counter()
    rc = subprocess.call(["rm", "-rf",
                          os.path.join(fbase, os.path.basename(root))])
    wall = time.perf_counter() - t0
    done()
    shutil.rmtree(made, ignore_errors=True)
    print("  %s done (rm -rf only: the tree made beneath it)" % label,
          file=sys.stderr)
    return {"rm_rf": dict(rm_rf_result(n, wall, rc, missing),
                          tree_made_beneath=True)}


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
    ap.add_argument("--also-opts", metavar="OPTS",
                    help="also through a mount of the same cluster with "
                    "these -o options (e.g. no_default_permissions)")
    ap.add_argument("--fuse-yardstick", metavar="BIN",
                    help="also through libfuse's passthrough_ll BIN")
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
    if "io_uring" in ",".join(o for o in (a.mount_opts, a.also_opts) if o):
        print("metadata: fuse enable_uring: %s (-o io_uring is in effect "
              "only where it is Y)" % cluster.fuse_enable_uring(),
              file=sys.stderr)
    cached = drop_caches()
    probe = fresh = fresh_wsync = None
    if cl:
        # Another client, on a directory of its own, for the stat probe.
        pm = cl.mount_extra("probe")
        os.makedirs(os.path.join(pm, "probe-dir"), exist_ok=True)
        probe = os.path.join(pm, "probe-dir", "f")
        open(probe, "w").close()
        count = [0]

        def fresh_mount(opts):
            def make():
                count[0] += 1
                m = cl.mount_extra("fresh%d" % count[0], opts=opts)
                return m, lambda: cl.unmount(m)
            return make
        fresh = fresh_mount(a.mount_opts)
        fresh_wsync = fresh_mount(",".join(
            o for o in (a.mount_opts, "wsync") if o))
    sides = [("sweepfs", mnt, fresh)]
    if cl:
        wmnt = cl.mount_extra("mnt-wsync", opts=",".join(
            o for o in (a.mount_opts, "wsync") if o))
        sides.append(("wsync", wmnt, fresh_wsync))
        if a.also_opts:
            opts = ",".join(o for o in (a.mount_opts, a.also_opts) if o)
            sides.append(("also", cl.mount_extra("mnt-also", opts=opts),
                          fresh_mount(opts)))
    res = {}
    for label, base, fr in sides:
        res[label] = bench_fs(label, base, a.n, a.writers,
                              a.per_writer_dirs,
                              status if master else None, fr, probe)
    if a.fuse_yardstick:
        pdir = tempfile.mkdtemp(prefix="sweepfs-passthrough-",
                                dir="/var/tmp")
        pt = Passthrough(os.path.abspath(a.fuse_yardstick),
                         os.path.join(pdir, "src"), os.path.join(pdir, "mnt"))
        try:
            base = pt.start()
            # With fewer descriptors than files, only rm -rf is
            # measured, of a tree made beneath it.
            direct = None if pt.max_files() > a.n + 1000 else pt.src
            res["passthrough_ll"] = bench_fs(
                "passthrough_ll", base, a.n, a.writers,
                a.per_writer_dirs, fresh=pt.fresh, direct=direct)
        finally:
            pt.stop()
            shutil.rmtree(pdir, ignore_errors=True)
    lo = bench_fs("local", local, a.n, a.writers, a.per_writer_dirs)
    sw = res["sweepfs"]
    master_status = status() if master else None
    if cl:
        cl.stop()
    if not a.local:
        shutil.rmtree(local, ignore_errors=True)

    phases = ["create", "stat", "unlink", "rm_rf"]
    results = {}
    ws = res.get("wsync")
    pt = res.get("passthrough_ll")
    print("\n%-8s %14s %14s %14s %14s %9s %9s %9s" % (
        "phase", "sweepfs ops/s", "wsync ops/s", "passthrough", "local ops/s",
        "sw/wsync", "sw/pass", "sw/local"))
    for ph in phases:
        ratio = sw[ph]["ops_per_s"] / lo[ph]["ops_per_s"]
        results[ph] = {"sweepfs": sw[ph], "local": lo[ph], "ratio": ratio}
        wr = pr = None
        if ws:
            wr = sw[ph]["ops_per_s"] / ws[ph]["ops_per_s"]
            results[ph]["wsync"] = ws[ph]
            results[ph]["ratio_to_wsync"] = wr
        if pt and ph in pt:
            pr = sw[ph]["ops_per_s"] / pt[ph]["ops_per_s"]
            results[ph]["passthrough_ll"] = pt[ph]
            results[ph]["ratio_to_passthrough_ll"] = pr
        print("%-8s %14.0f %14s %14s %14.0f %9s %9s %9.3f" % (
            ph, sw[ph]["ops_per_s"],
            "%.0f" % ws[ph]["ops_per_s"] if ws else "-",
            "%.0f" % pt[ph]["ops_per_s"] if pt and ph in pt else "-",
            lo[ph]["ops_per_s"], "%.2f" % wr if wr else "-",
            "%.2f" % pr if pr else "-", ratio))
    al = res.get("also")
    if al:
        print("\n%-8s %14s %14s %9s   (-o %s, same cluster)" % (
            "phase", "sweepfs ops/s", "also ops/s", "also/sw", a.also_opts))
        for ph in phases:
            r = al[ph]["ops_per_s"] / sw[ph]["ops_per_s"]
            results[ph]["also"] = al[ph]
            results[ph]["ratio_also_to_sweepfs"] = r
            print("%-8s %14.0f %14.0f %9.2f" % (
                ph, sw[ph]["ops_per_s"], al[ph]["ops_per_s"], r))
    for label, r in list(res.items()) + [("local", lo)]:
        bad = {ph: r[ph]["errors"] for ph in phases
               if r.get(ph, {}).get("errors")}
        if bad:
            print("WARNING: %s had errors (its figures do not count): %r" %
                  (label, bad))
    for label, r in list(res.items()) + [("local", lo)]:
        extra = []
        if "master_cpu_us_per_file" in r["rm_rf"]:
            extra.append("master CPU %.1f us/file" %
                         r["rm_rf"]["master_cpu_us_per_file"])
        if r.get("stat_idle", {}).get("samples") and \
                r.get("stat_during_rm", {}).get("samples"):
            extra.append("another client's stat p50/p99 %.0f/%.0f us "
                         "(idle %.0f/%.0f)" % (
                             r["stat_during_rm"]["p50_us"],
                             r["stat_during_rm"]["p99_us"],
                             r["stat_idle"]["p50_us"],
                             r["stat_idle"]["p99_us"]))
        if extra:
            print("rm -rf %-7s: %s" % (label, "; ".join(extra)))
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
        "also_opts": a.also_opts,
        "fuse_yardstick": a.fuse_yardstick,
        "changelog_sync": master_status and master_status.get(
            "changelog_sync"),
        "local_fs": subprocess.check_output(
            ["stat", "-f", "-c", "%T", "/var/tmp"], text=True).strip(),
    })
    result = {"context": ctx, "results": results, "master_memory": mem,
              "rm_rf_details": {k: {x: v.get(x) for x in (
                  "rm_rf", "stat_idle", "stat_during_rm")}
                  for k, v in list(res.items()) + [("local", lo)]}}
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
