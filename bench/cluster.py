"""A throwaway sweepfs cluster for benchmarks: a master, chunkservers if
asked, and a mount on temporary directories, started from a build
directory with the cluster launcher (scripts/swcluster.py, which the
tests and demo.sh use too) and torn down on exit, including on Ctrl-C.
Also the run context every result records."""

import atexit
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "scripts"))
import swcluster  # noqa: E402


def default_build():
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in ("build", "build-dev", "build-release"):
        p = os.path.join(here, "..", cand)
        if os.path.exists(os.path.join(p, "master", "sweepfs-master")):
            return os.path.abspath(p)
    raise SystemExit("no build directory found; run meson setup build && "
                     "ninja -C build, or pass --build")


def _sets(kvs):
    return [x for kv in kvs for x in ("--set", kv)]


class Cluster(swcluster.Cluster):
    """swcluster.Cluster with the benchmarks' conveniences: one call to
    start it all, the tool's output, and removal of its directory."""

    def __init__(self, build=None, master_set=(), mount_opts="", base=None,
                 chunkservers=0, cs_set=(), netns=None, host=None,
                 port=None, mount_net=None):
        """@netns, @host, @port: the master and chunkservers run in that
        network namespace (bench/machines.py's "srv"), the master on
        @host:@port there; @mount_net: the network namespace file the
        first mount's client runs in (its "machine"; the mount itself
        stays in ours, see swcluster.Cluster.mount()). In a network
        namespace the chunkservers need ports of their own: a port is
        picked here by binding on the host, where @host is not."""
        self.build = build or default_build()
        self.dir = tempfile.mkdtemp(prefix="sweepfs-bench-", dir=base)
        # The daemons' default log level: info lines cost time.
        super().__init__(self.dir, swcluster.Binaries.find(self.build),
                         log_level=None, netns=netns)
        self.mnt = os.path.join(self.dir, "mnt")
        self.host, self.port, self.mount_net = host, port, mount_net
        self.master_set = list(master_set)
        self.mount_opts = mount_opts
        self.nchunkservers = chunkservers
        self.cs_set = list(cs_set)
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
        return self.master_address()

    def start(self):
        try:
            self.start_master(args=_sets(self.master_set), host=self.host,
                              port=self.port, fixed_port=bool(self.port))
            if self.nchunkservers:
                self.start_chunkservers(self.nchunkservers,
                                        args=_sets(self.cs_set))
            self.mount(self.mnt, opts=self.mount_opts, net=self.mount_net)
        except swcluster.Error as e:
            raise SystemExit(str(e))
        return self

    def chunkserver_dirs(self):
        return [self.records[n]["data"] for n in self.chunkserver_names()]

    def mount_extra(self, name, opts="", net=None):
        """Another mount of the same master (another client session),
        its client in network namespace file @net if given."""
        return self.mount(os.path.join(self.dir, name), opts=opts, net=net)

    def unmount(self, mnt):
        """Unmount @mnt and wait for its client (its exit status)."""
        return swcluster.Cluster.stop(self, mnt)

    def tool(self, *args, check=True):
        """Run `sweepfs -m MASTER ARGS`; returns its stdout."""
        st, out, err = self.run_tool(*args, check=False)
        if check and st:
            raise SystemExit("sweepfs %s failed (%d): %s" %
                             (" ".join(args), st, err.strip()))
        return out

    def info(self):
        return json.loads(self.tool("status", "--json"))

    def status(self):
        return json.loads(self.tool("stats", "--json"))

    def stop(self):
        self.teardown()
        if os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)


def _cmd(args):
    try:
        return subprocess.check_output(args, stderr=subprocess.DEVNULL,
                                       text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def build_commit(build):
    """The commit @build was configured from (its source tree's HEAD),
    for results that compare builds of other trees."""
    with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
        src = json.load(f)["directories"]["source"]
    return _cmd(["git", "-C", src, "rev-parse", "HEAD"])


def write_result(result, build, out):
    """@result with the run's context() as JSON in @out; say where."""
    result["context"] = context(build)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print("result in %s" % out)


URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


def fuse_enable_uring():
    """The fuse module's enable_uring ("Y", "N"), or None where the
    kernel has no FUSE over io_uring: whether -o io_uring can work."""
    try:
        with open(URING_PARAM) as f:
            return f.read().strip()
    except OSError:
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
        # Whether a mount's -o io_uring can take effect (README).
        "fuse_enable_uring": fuse_enable_uring(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_bytes": mem,
        "hostname": platform.node(),
    }
    if extra:
        ctx.update(extra)
    return ctx
