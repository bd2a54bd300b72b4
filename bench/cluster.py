"""A throwaway sweepfs cluster for benchmarks: a master and a mount on
temporary directories, started from a build directory and torn down on
exit, including on Ctrl-C. Also the run context every result records."""

import atexit
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_build():
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in ("build", "build-dev", "build-release"):
        p = os.path.join(here, "..", cand)
        if os.path.exists(os.path.join(p, "master", "sweepfs-master")):
            return os.path.abspath(p)
    raise SystemExit("no build directory found; run meson setup build && "
                     "ninja -C build, or pass --build")


class Cluster:
    def __init__(self, build=None, master_set=(), mount_opts="", base=None,
                 chunkservers=0, cs_set=()):
        self.build = build or default_build()
        self.dir = tempfile.mkdtemp(prefix="sweepfs-bench-", dir=base)
        self.meta = os.path.join(self.dir, "meta")
        self.mnt = os.path.join(self.dir, "mnt")
        os.makedirs(self.meta)
        os.makedirs(self.mnt)
        self.port = free_port()
        self.master_set = list(master_set)
        self.mount_opts = mount_opts
        self.master = None
        self.mounted = False
        self.extra_mounts = []
        self.nchunkservers = chunkservers
        self.cs_set = list(cs_set)
        self.chunkservers = []  # (Popen, data dir, port)
        atexit.register(self.stop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        self.stop()
        raise SystemExit(128 + signum)

    def bin(self, *parts):
        return os.path.join(self.build, *parts)

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def start(self):
        args = [self.bin("master", "sweepfs-master"), "-f", "-d", self.meta,
                "-l", self.address]
        for kv in self.master_set:
            args += ["--set", kv]
        self.master_log = open(os.path.join(self.dir, "master.log"), "w")
        self.master = subprocess.Popen(args, stdout=self.master_log,
                                       stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                if time.time() > deadline or self.master.poll() is not None:
                    raise SystemExit("master did not start; see " +
                                     self.master_log.name)
                time.sleep(0.05)
        for i in range(self.nchunkservers):
            self.start_chunkserver(i)
        self.wait_chunkservers(self.nchunkservers)
        margs = [self.bin("mount", "sweepfs-mount"), self.address, self.mnt]
        if self.mount_opts:
            margs += ["-o", self.mount_opts]
        subprocess.check_call(margs)
        self.mounted = True
        return self

    def start_chunkserver(self, i):
        data = os.path.join(self.dir, "cs%d" % i)
        os.makedirs(data, exist_ok=True)
        port = free_port()
        args = [self.bin("chunkserver", "sweepfs-chunkserver"), "-f",
                "-d", data, "-l", "127.0.0.1:%d" % port, "-m", self.address]
        for kv in self.cs_set:
            args += ["--set", kv]
        log = open(os.path.join(self.dir, "cs%d.log" % i), "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.chunkservers.append((p, data, port))
        return p

    def wait_chunkservers(self, n, timeout=20):
        deadline = time.time() + timeout
        while n:
            up = sum(1 for s in self.info().get("servers", [])
                     if s["connected"])
            if up >= n:
                return
            if time.time() > deadline:
                raise SystemExit("chunkservers did not register")
            time.sleep(0.1)

    def mount_extra(self, name, opts=""):
        """Another mount of the same master (another client session)."""
        mnt = os.path.join(self.dir, name)
        os.makedirs(mnt)
        margs = [self.bin("mount", "sweepfs-mount"), self.address, mnt]
        if opts:
            margs += ["-o", opts]
        subprocess.check_call(margs)
        self.extra_mounts.append(mnt)
        return mnt

    def tool(self, *args, check=True):
        """Run `sweepfs -m MASTER ARGS`; returns its stdout."""
        r = subprocess.run([self.bin("tools", "sweepfs"), "-m",
                            self.address] + list(args),
                           stdout=subprocess.PIPE, text=True)
        if check and r.returncode:
            raise SystemExit("sweepfs %s failed (%d)" % (" ".join(args),
                                                         r.returncode))
        return r.stdout

    def info(self):
        return json.loads(self.tool("status", "--json"))

    def status(self):
        out = subprocess.check_output([self.bin("tools", "sweepfs"), "-m",
                                       self.address, "stats", "--json"])
        return json.loads(out)

    def stop(self):
        for mnt in self.extra_mounts:
            subprocess.call(["fusermount3", "-u", "-z", mnt],
                            stderr=subprocess.DEVNULL)
        self.extra_mounts = []
        if self.mounted:
            subprocess.call(["fusermount3", "-u", "-z", self.mnt],
                            stderr=subprocess.DEVNULL)
            self.mounted = False
        for p, _, _ in self.chunkservers:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.chunkservers = []
        if self.master and self.master.poll() is None:
            self.master.terminate()
            try:
                self.master.wait(30)
            except subprocess.TimeoutExpired:
                self.master.kill()
        if os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)


def _cmd(args):
    try:
        return subprocess.check_output(args, stderr=subprocess.DEVNULL,
                                       text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def context(build, extra=None):
    """What a result needs to be comparable: code, build, machine."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    buildopts = {}
    intro = _cmd(["meson", "introspect", "--buildoptions", build])
    if intro:
        for o in json.loads(intro):
            if o["name"] in ("buildtype", "b_sanitize", "optimization",
                             "debug", "b_ndebug"):
                buildopts[o["name"]] = o["value"]
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    ctx = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": _cmd(["git", "-C", src, "rev-parse", "HEAD"]),
        "dirty": bool(_cmd(["git", "-C", src, "status", "--porcelain",
                            "--untracked-files=no"])),
        "build_dir": build,
        "build": buildopts,
        "kernel": platform.release(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_bytes": mem,
        "hostname": platform.node(),
    }
    if extra:
        ctx.update(extra)
    return ctx
