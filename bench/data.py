#!/usr/bin/env python3
"""Data benchmark (issue 3): sequential write and read of a big file
through a sweepfs mount and on a local disk, in the same run, as MiB/s and
ratios; then files/s of deleting many 1 MiB files through the mount, and
how the chunk deletions that follow drain from the chunkservers at their
configured pace, with the space coming back in statfs.

  bench/data.py --size 1G --files 10000
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUF = 4 << 20


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def parse_size(s):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mul[s[-1].upper()] if s[-1].upper() in mul \
        else int(s)


def seq_write(path, size, block):
    """Write @size bytes in @block pieces, fsync: MiB/s."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
    left = size
    while left:
        n = os.write(fd, block[:min(left, len(block))])
        left -= n
    os.fsync(fd)
    os.close(fd)
    return size / (1 << 20) / (time.perf_counter() - t0)


def seq_read(path, size):
    drop_caches()
    t0 = time.perf_counter()
    got = 0
    fd = os.open(path, os.O_RDONLY)
    while True:
        b = os.read(fd, BUF)
        if not b:
            break
        got += len(b)
    os.close(fd)
    if got != size:
        raise SystemExit("%s: read %d bytes of %d" % (path, got, size))
    return size / (1 << 20) / (time.perf_counter() - t0)


def statfs_avail(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def chunk_files(cl):
    n = 0
    for data in cl.chunkserver_dirs():
        for root, _, files in os.walk(data):
            n += sum(1 for f in files if f.endswith(".swc"))
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="big file size (1G)")
    ap.add_argument("--files", type=int, default=10000,
                    help="1 MiB files to delete (10000)")
    ap.add_argument("--build", help="build directory (default: ./build)")
    ap.add_argument("--local", help="local directory to compare with "
                    "(default: a temporary directory in /var/tmp)")
    ap.add_argument("--set", action="append", default=[],
                    help="master config KEY=VALUE")
    ap.add_argument("--out", help="JSON result file")
    a = ap.parse_args()
    size = parse_size(a.size)
    build = os.path.abspath(a.build) if a.build else cluster.default_build()
    cl = cluster.Cluster(build, master_set=a.set, chunkservers=1).start()
    local = a.local or tempfile.mkdtemp(prefix="sweepfs-local-",
                                        dir="/var/tmp")
    block = os.urandom(BUF)
    res = {}

    print("sequential %s: sweepfs then local" % a.size, file=sys.stderr)
    for label, d in (("sweepfs", cl.mnt), ("local", local)):
        p = os.path.join(d, "big")
        w = seq_write(p, size, block)
        r = seq_read(p, size)
        os.unlink(p)
        res[label] = {"write_mib_s": w, "read_mib_s": r}
    res["ratio"] = {k: res["sweepfs"][k] / res["local"][k]
                    for k in ("write_mib_s", "read_mib_s")}

    print("deleting %d files of 1 MiB" % a.files, file=sys.stderr)
    tree = os.path.join(cl.mnt, "many")
    os.mkdir(tree)
    mib = block[:1 << 20]
    for i in range(a.files):
        with open(os.path.join(tree, "f%06d" % i), "wb") as f:
            f.write(mib)
    os.sync()
    time.sleep(1)
    before = cl.info()
    avail0 = statfs_avail(cl.mnt)
    files0 = chunk_files(cl)
    drop_caches()
    t0 = time.perf_counter()
    subprocess.check_call(["rm", "-rf", tree])
    rm_s = time.perf_counter() - t0
    after_rm = cl.info()
    # Chunk deletions drain at delete_rate per server: follow them.
    t0 = time.perf_counter()
    timeline = []
    while True:
        s = cl.info()
        n = chunk_files(cl)
        timeline.append((time.perf_counter() - t0,
                         s["chunk_deletes_pending"], n))
        if s["chunk_deletes_pending"] == 0 and n <= files0 - a.files:
            break
        if time.perf_counter() - t0 > 600:
            break
        time.sleep(0.5)
    drain_s = time.perf_counter() - t0
    time.sleep(6)  # a heartbeat, for the space figures
    avail1 = statfs_avail(cl.mnt)
    res["delete"] = {
        "files": a.files,
        "rm_rf_seconds": rm_s,
        "rm_rf_files_per_s": a.files / rm_s,
        "chunk_files_before": files0,
        "chunk_files_after": chunk_files(cl),
        "chunk_deletions_queued_after_rm": after_rm["chunk_deletes_pending"],
        "drain_seconds": drain_s,
        "chunk_deletions_per_s": a.files / drain_s if drain_s else None,
        "statfs_avail_before": avail0,
        "statfs_avail_after": avail1,
        "timeline": timeline,
        "master_requests": {
            k: after_rm["total"]["requests"].get(k, 0) -
            before["total"]["requests"].get(k, 0)
            for k in after_rm["total"]["requests"]}
        if "total" in after_rm else None,
    }
    conf = json.loads(cl.tool("status", "--json"))
    cl.stop()
    if not a.local:
        shutil.rmtree(local, ignore_errors=True)

    print("\n%-8s %12s %12s" % ("", "write MiB/s", "read MiB/s"))
    for label in ("sweepfs", "local"):
        print("%-8s %12.1f %12.1f" % (label, res[label]["write_mib_s"],
                                      res[label]["read_mib_s"]))
    print("%-8s %12.2f %12.2f" % ("ratio", res["ratio"]["write_mib_s"],
                                  res["ratio"]["read_mib_s"]))
    d = res["delete"]
    print("\nrm -rf of %d 1 MiB files: %.2f s, %.0f files/s" %
          (a.files, d["rm_rf_seconds"], d["rm_rf_files_per_s"]))
    print("chunk deletions: %d queued after rm, drained in %.1f s "
          "(%.0f/s); chunk files %d -> %d; statfs free %.2f -> %.2f GiB" %
          (d["chunk_deletions_queued_after_rm"], d["drain_seconds"],
           d["chunk_deletions_per_s"] or 0, d["chunk_files_before"],
           d["chunk_files_after"], d["statfs_avail_before"] / (1 << 30),
           d["statfs_avail_after"] / (1 << 30)))

    ctx = cluster.context(build, {
        "benchmark": "data", "size": size, "files": a.files,
        "master_config": a.set, "local": local,
        "local_fs": subprocess.check_output(
            ["stat", "-f", "-c", "%T", "/var/tmp"], text=True).strip(),
        "loadavg": os.getloadavg(), "server_version":
        conf.get("server_version")})
    out = a.out
    if not out:
        dd = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "results")
        os.makedirs(dd, exist_ok=True)
        out = os.path.join(dd, "data-%s.json" %
                           time.strftime("%Y%m%d-%H%M%S"))
    with open(out, "w") as f:
        json.dump({"context": ctx, "results": res}, f, indent=1)
    print("\nresult: %s" % out)


if __name__ == "__main__":
    main()
