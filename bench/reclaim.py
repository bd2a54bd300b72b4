#!/usr/bin/env python3
"""Reclaim benchmark (issue 32): how fast deleted files' chunk files leave
the chunkserver's disk, and what that costs everyone else.

One master, one chunkserver, goal 1. N files of 4 KiB are made in 2
directories by 4 writers through one mount, then removed with `rm -rf`
through a fresh mount, while another mount streams a big file (the
reader) and rewrites another (the writer). The chunk files are followed
until all of them are gone ("space back"). Side by side, in the same run:
`rm -rf` of N files of 4 KiB laid out as the chunkserver lays them out,
directly on the chunkserver's file system (the ceiling).

Printed and written as JSON with the run's context: space-back time and
chunk files/s (sweepfs and ceiling), the reader's and the writer's MB/s
idle and during the deletion, and the reader's p99 latency per 1 MiB
read idle and during. --big GIB adds the same for a tree of 1 GiB files.
The timeline of each deletion has, every 0.25 s, the deletions pending
and the share of their time the chunkserver's deletion threads had
(its /metrics, sweepfs_chunkserver_delete_share: chunkserver/delpace.c
lowers it while deletions slow the clients down), and the mean share
is printed.

  bench/reclaim.py --files 200000
  bench/reclaim.py --files 20000 --big 10
"""

import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

MIB = 1 << 20


def count_chunk_files(dirs):
    n = 0
    for d in dirs:
        for sub in os.scandir(d):
            if sub.is_dir() and len(sub.name) == 2:
                n += sum(1 for e in os.scandir(sub.path)
                         if e.name.endswith(".swc"))
    return n


def make_files(root, w, n, size):
    """Writer @w: @n files of @size bytes under @root/d{w%2}."""
    d = os.path.join(root, "d%d" % (w % 2))
    data = os.urandom(size)
    for i in range(n):
        with open(os.path.join(d, "w%d_%07d" % (w, i)), "wb") as f:
            f.write(data)


def make_tree(root, n, writers, size):
    os.makedirs(os.path.join(root, "d0"), exist_ok=True)
    os.makedirs(os.path.join(root, "d1"), exist_ok=True)
    ps = [mp.Process(target=make_files,
                     args=(root, w, n // writers + (w < n % writers), size))
          for w in range(writers)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        if p.exitcode:
            raise SystemExit("a writer of the files failed")


def reader(path, stop, out):
    """Stream @path over and over in 1 MiB reads, dropping its cached
    pages before each pass; (end time, latency) of every read."""
    samples = []
    fd = os.open(path, os.O_RDONLY)
    while not stop.is_set():
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        off = 0
        while not stop.is_set():
            t0 = time.monotonic()
            b = os.pread(fd, MIB, off)
            t1 = time.monotonic()
            if not b:
                break
            samples.append((t1, t1 - t0, len(b)))
            off += len(b)
    os.close(fd)
    with open(out, "w") as f:
        json.dump(samples, f)


def writer(path, size, mbs, stop, out):
    """Rewrite @path (@size bytes) over and over in 1 MiB writes, fsync
    every 16 MiB, at most @mbs MB/s (0: no limit); (end time, latency,
    bytes) of every fsync'd 16 MiB."""
    samples = []
    block = os.urandom(MIB)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    off = 0
    t_start = time.monotonic()
    done = 0
    while not stop.is_set():
        t0 = time.monotonic()
        for _ in range(16):
            os.pwrite(fd, block, off)
            off = (off + MIB) % size
        os.fsync(fd)
        samples.append((time.monotonic(), time.monotonic() - t0, 16 * MIB))
        done += 16 * MIB
        if mbs:
            ahead = done / (mbs * 1e6) - (time.monotonic() - t_start)
            if ahead > 0:
                stop.wait(ahead)
    os.close(fd)
    with open(out, "w") as f:
        json.dump(samples, f)


def window(samples, t0, t1):
    """MB/s and p99 latency (ms) of the samples that ended in [t0, t1]."""
    s = [x for x in samples if t0 <= x[0] <= t1]
    if not s or t1 <= t0:
        return {"mb_s": None, "p99_ms": None, "samples": len(s)}
    lat = sorted(x[1] for x in s)
    return {"mb_s": sum(x[2] for x in s) / 1e6 / (t1 - t0),
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
            "samples": len(s)}


def ceiling(base, n, size):
    """rm -rf of @n files of @size bytes in 256 subdirectories, as the
    chunkserver lays them out, on @base's file system: seconds."""
    root = tempfile.mkdtemp(prefix="sweepfs-ceiling-", dir=base)
    data = os.urandom(size)
    for i in range(256):
        os.mkdir(os.path.join(root, "%02x" % i))
    for i in range(n):
        with open(os.path.join(root, "%02x" % (i & 255),
                               "chunk_%016x_00000001.swc" % i), "wb") as f:
            f.write(data)
    os.sync()
    t0 = time.monotonic()
    subprocess.check_call(["rm", "-rf", root])
    return time.monotonic() - t0


class Load:
    """The reader and the writer on their own mount."""

    def __init__(self, cl, stream_size, write_size, write_mbs):
        self.mnt = cl.mount_extra("load")
        self.rpath = os.path.join(self.mnt, "stream")
        self.wpath = os.path.join(self.mnt, "written")
        block = os.urandom(MIB)
        # Both files whole before anything is counted: the writer
        # rewrites its file in place and makes no chunk meanwhile.
        for path, size in ((self.rpath, stream_size),
                           (self.wpath, write_size)):
            with open(path, "wb") as f:
                for _ in range(size // MIB):
                    f.write(block)
        self.write_size = write_size
        self.write_mbs = write_mbs
        self.tmp = tempfile.mkdtemp(prefix="sweepfs-reclaim-")

    def start(self):
        self.stop_ev = mp.Event()
        self.procs = [
            mp.Process(target=reader, args=(self.rpath, self.stop_ev,
                                            os.path.join(self.tmp, "r"))),
            mp.Process(target=writer, args=(self.wpath, self.write_size,
                                            self.write_mbs, self.stop_ev,
                                            os.path.join(self.tmp, "w")))]
        for p in self.procs:
            p.start()

    def stop(self):
        self.stop_ev.set()
        for p in self.procs:
            p.join()
        with open(os.path.join(self.tmp, "r")) as f:
            r = json.load(f)
        with open(os.path.join(self.tmp, "w")) as f:
            w = json.load(f)
        return r, w


def cpu_times():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle and iowait
    return sum(v) - idle, sum(v)


def busy(a, b):
    """The machine's busy share of its CPUs between cpu_times() @a, @b."""
    return (b[0] - a[0]) / (b[1] - a[1]) if b[1] > a[1] else None


def pending(cl):
    return cl.info()["chunk_deletes_pending"]


def free_port():
    """A loopback port nothing listens on now (for the chunkserver's
    /metrics)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def delete_share(metrics):
    """The chunkserver's deletion share from its /metrics at @metrics,
    or None (an older build, or no answer)."""
    if not metrics:
        return None
    try:
        with urllib.request.urlopen(metrics, timeout=1) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("sweepfs_chunkserver_delete_share "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def reclaim(cl, load, tree, nchunks, idle_s, timeout, metrics=None):
    """Idle load for @idle_s, then rm -rf @tree through a fresh mount and
    follow the chunk files until @nchunks of them are gone (and the
    chunkserver's deletion share at @metrics, its /metrics URL)."""
    dirs = cl.chunkserver_dirs()
    before = count_chunk_files(dirs)
    rmmnt = cl.mount_extra("rm%d" % int(time.monotonic() * 1000))
    load.start()
    t_idle = time.monotonic()
    time.sleep(1)
    cpu_idle = cpu_times()
    time.sleep(max(idle_s - 1, 0))
    t_rm = time.monotonic()
    cpu_rm = cpu_times()
    subprocess.check_call(["rm", "-rf", os.path.join(rmmnt,
                                                     os.path.basename(tree))])
    t_rm_end = time.monotonic()
    cpu_rm_end = cpu_times()
    timeline = []
    t_back = None
    while time.monotonic() - t_rm_end < timeout:
        p = pending(cl)
        timeline.append((time.monotonic() - t_rm_end, p,
                         delete_share(metrics)))
        if p == 0:
            n = count_chunk_files(dirs)
            if n <= before - nchunks:
                t_back = time.monotonic()
                cpu_back = cpu_times()
                break
        time.sleep(0.25)
    if not t_back:
        cpu_back = cpu_times()
    r, w = load.stop()
    cl.unmount(rmmnt)
    end = t_back or time.monotonic()
    shares = [x[2] for x in timeline if x[2] is not None]
    return {
        "delete_share_mean": sum(shares) / len(shares) if shares else None,
        "chunk_files_before": before,
        "chunk_files_after": count_chunk_files(dirs),
        "rm_rf_s": t_rm_end - t_rm,
        "space_back_after_rm_s": (t_back - t_rm_end) if t_back else None,
        "chunk_files_per_s": nchunks / (t_back - t_rm) if t_back else None,
        "reader_idle": window(r, t_idle + 1, t_rm),
        "reader_during": window(r, t_rm, end),
        "writer_idle": window(w, t_idle + 1, t_rm),
        "writer_during": window(w, t_rm, end),
        # The removal itself (the mount and the master busy with the
        # unlinks), then the chunk deletions alone.
        "reader_during_rm": window(r, t_rm, t_rm_end),
        "reader_during_reclaim": window(r, t_rm_end, end),
        "writer_during_reclaim": window(w, t_rm_end, end),
        # The machine's CPUs: how much of them the reader and the
        # writer took alone, and with the removal or the deletions.
        "cpu_busy_idle": busy(cpu_idle, cpu_rm),
        "cpu_busy_rm": busy(cpu_rm, cpu_rm_end),
        "cpu_busy_reclaim": busy(cpu_rm_end, cpu_back),
        "timeline": timeline,
    }


def ratio(a, b):
    return a / b if a is not None and b else None


def show(label, n, x, ceil_s=None):
    def f(v, fmt):
        return fmt % v if v is not None else "-"
    print("%s: %d chunk files; rm -rf %.1f s; space back %s s after it "
          "(%s chunk files/s)%s" %
          (label, n, x["rm_rf_s"], f(x["space_back_after_rm_s"], "%.1f"),
           f(x["chunk_files_per_s"], "%.0f"),
           "; ceiling rm -rf on the disk %.1f s (%.0f/s)" %
           (ceil_s, n / ceil_s) if ceil_s else ""))
    print("  chunkserver's deletion share, mean over the deletion: %s" %
          f(x["delete_share_mean"], "%.2f"))
    print("  CPUs busy: idle load %s, during rm -rf %s, during the deletion "
          "after it %s" % tuple(f(x.get(k), "%.2f") for k in
                                ("cpu_busy_idle", "cpu_busy_rm",
                                 "cpu_busy_reclaim")))
    for who in ("reader", "writer"):
        i, d = x[who + "_idle"], x[who + "_during"]
        c = x[who + "_during_reclaim"]
        print("  %s MB/s idle %s, during rm -rf and deletion %s (%s), "
              "during the deletion after rm -rf %s (%s); p99 ms idle %s, "
              "during %s" %
              (who, f(i["mb_s"], "%.0f"), f(d["mb_s"], "%.0f"),
               f(ratio(d["mb_s"], i["mb_s"]), "%.2fx"),
               f(c["mb_s"], "%.0f"), f(ratio(c["mb_s"], i["mb_s"]), "%.2fx"),
               f(i["p99_ms"], "%.1f"), f(d["p99_ms"], "%.1f")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=20000,
                    help="files of 4 KiB to delete (20000)")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--big", type=int, default=0,
                    help="also a tree of this many 1 GiB files (0)")
    ap.add_argument("--stream", type=int, default=512,
                    help="MiB of the reader's file (512)")
    ap.add_argument("--write-mbs", type=float, default=50,
                    help="the writer's pace, MB/s; 0: as fast as it can "
                    "(50: a steady writer, not one that saturates the "
                    "disk's writeback, which stalls every metadata "
                    "operation of the file system, unlinks included)")
    ap.add_argument("--idle", type=float, default=5,
                    help="seconds of load measured before rm -rf (5)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--base", help="directory for the cluster (and the "
                    "ceiling's files): its file system is measured")
    ap.add_argument("--set", action="append", default=[],
                    help="master config KEY=VALUE")
    ap.add_argument("--cs-set", action="append", default=[],
                    help="chunkserver config KEY=VALUE")
    ap.add_argument("--out", help="JSON result file")
    a = ap.parse_args()
    build = os.path.abspath(a.build) if a.build else cluster.default_build()
    res = {}

    print("ceiling: rm -rf of %d files of 4 KiB on the disk" % a.files,
          file=sys.stderr)
    res["ceiling_rm_rf_s"] = ceiling(a.base or tempfile.gettempdir(),
                                     a.files, 4096)

    port = free_port()
    metrics = "http://127.0.0.1:%d/metrics" % port
    cl = cluster.Cluster(build, master_set=["goal=1"] + a.set,
                         chunkservers=1, base=a.base,
                         cs_set=["heartbeat_interval=500ms",
                                 "metrics_listen=127.0.0.1:%d" % port] +
                         a.cs_set).start()
    load = Load(cl, a.stream * MIB, 256 * MIB, a.write_mbs)
    tree = os.path.join(cl.mnt, "many")
    print("making %d files of 4 KiB with %d writers" % (a.files, a.writers),
          file=sys.stderr)
    t0 = time.monotonic()
    make_tree(tree, a.files, a.writers, 4096)
    res["make_files_per_s"] = a.files / (time.monotonic() - t0)
    os.sync()
    print("rm -rf, following the chunk files", file=sys.stderr)
    res["small"] = reclaim(cl, load, tree, a.files, a.idle, a.timeout,
                           metrics)
    res["small"]["files"] = a.files
    if a.big:
        big = os.path.join(cl.mnt, "big")
        os.mkdir(big)
        block = os.urandom(MIB)
        print("making %d files of 1 GiB" % a.big, file=sys.stderr)
        for i in range(a.big):
            with open(os.path.join(big, "f%03d" % i), "wb") as f:
                for _ in range(1024):
                    f.write(block)
        os.sync()
        res["big"] = reclaim(cl, load, big, a.big * 16, a.idle, a.timeout,
                             metrics)
        res["big"]["files"] = a.big
    conf = cl.info()
    cl.stop()
    shutil.rmtree(load.tmp, ignore_errors=True)

    print()
    show("%d files of 4 KiB" % a.files, a.files, res["small"],
         res["ceiling_rm_rf_s"])
    if a.big:
        show("%d files of 1 GiB" % a.big, a.big * 16, res["big"])
    ctx = cluster.context(build, {
        "benchmark": "reclaim", "files": a.files, "writers": a.writers,
        "big_gib": a.big, "stream_mib": a.stream,
        "write_mbs": a.write_mbs,
        "master_config": ["goal=1"] + a.set, "chunkserver_config": a.cs_set,
        "fs": subprocess.check_output(
            ["stat", "-f", "-c", "%T", a.base or tempfile.gettempdir()],
            text=True).strip(),
        "loadavg": os.getloadavg(),
        "server_version": conf.get("server_version")})
    out = a.out
    if not out:
        dd = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "results")
        os.makedirs(dd, exist_ok=True)
        out = os.path.join(dd, "reclaim-%s.json" %
                           time.strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump({"context": ctx, "results": res}, f, indent=1)
    print("\nresult: %s" % out)


if __name__ == "__main__":
    main()
