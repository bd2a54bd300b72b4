#!/usr/bin/env python3
"""swcluster: start and stop sweepfs clusters on this machine (a master,
chunkservers, mounts), for demo.sh, the integration tests
(tests/integration/lib.sh) and the benchmarks (bench/cluster.py,
bench/stress.py, bench/stress_agent.py). Starting a daemon, picking its
port, knowing when it is ready, stopping it in order and finding
sanitizer reports in its log are written here once.

From Python (a benchmark that lives as long as its cluster):

    import swcluster
    c = swcluster.Cluster(workdir, swcluster.Binaries.find(build))
    c.start_master(args=["--set", "goal=2"])
    c.start_chunkservers(2)
    mnt = c.mount(os.path.join(workdir, "mnt"))
    ...
    c.teardown()

From a shell, one step per call; the calls share the cluster through a
registry in WORKDIR/.swcluster/ (what was started, with which options):

    swcluster.py -w WORKDIR --build BUILD master start [-- ARGS]   PID PORT
    swcluster.py -w WORKDIR chunkserver start [-- ARGS]            I PID PORT
    swcluster.py -w WORKDIR wait-registered
    swcluster.py -w WORKDIR mount MNT                              PID
    swcluster.py -w WORKDIR master kill; ... master start          PID PORT
    swcluster.py -w WORKDIR down
    swcluster.py -w WORKDIR sanitizer              (reports; status 1 if any)

`swcluster.py --help` and `swcluster.py COMMAND --help` list the options.
A daemon started from the shell runs under a small watcher process (this
file, `_watch`) that reaps it and keeps its exit status for a later `stop`
(the shell that asked is not its parent); with --owner PID (or
$SWCLUSTER_OWNER) the watcher also stops its daemon, unmounting first,
when that process ends without having cleaned up: a test killed with
SIGKILL leaves nothing running.

Ports: unless told one, a daemon gets a random free port in 20000-32000
(outside the usual ephemeral range, so that outgoing connections do not
take it between the pick and the bind), and another if the daemon reports
the address in use. Ready means: the daemon logged "listening on" once
more than before (masters and chunkservers), or the mount point shows a
fuse.sweepfs mount; chunkservers are registered when the master's
`sweepfs status --json` lists their address as connected.

Logs: each daemon's stdout and stderr go to its log file, appended to
across restarts with a "==== start"/"==== killed" line each time. Sanitizer
builds report there (ASAN_OPTIONS and UBSAN_OPTIONS are set for it);
sanitizer_reports() finds them.

Stopping: mounts first (unmounted, lazily if they are busy; the client
then exits), chunkservers, the master last; each with SIGTERM and, after a
time limit, SIGKILL. Children are started with posix_spawn in process
groups of their own (DESIGN.md, "Priority"): a Ctrl-C on the terminal
reaches the caller only, which then stops them in order.
"""

import argparse
import ctypes
import fcntl
import json
import os
import random
import re
import select
import signal
import socket
import sys
import time

SANITIZER_RE = re.compile(r"ERROR: (Address|Leak)Sanitizer|runtime error:")
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1:abort_on_error=0",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=0",
}
PORT_RANGE = (20000, 32000)
READY_S = 30      # for a daemon to listen, a mount to appear
REGISTER_S = 30   # for chunkservers to register
STOP_S = 30       # SIGTERM to SIGKILL, daemons
UNMOUNT_S = 20    # unmount to SIGKILL, mount clients
COPIES_S = 2      # unmount to looking for copies in other namespaces
PORT_TRIES = 5

# Signals a child gets back at their default disposition.
_SIGDEF = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE,
           signal.SIGXFSZ, signal.SIGQUIT)


class Error(Exception):
    """A daemon did not start, a mount did not appear: the message says
    which and where its log is."""


# ---- processes --------------------------------------------------------------

class Child:
    """A process started with posix_spawn, in its own process group.

    stdin, stdout and stderr are file descriptors or None (/dev/null);
    the caller keeps ownership of those it passes. wait() reaps the child
    and keeps its exit status (returncode: negative for a signal, as in
    subprocess) and its resource usage (rusage)."""

    def __init__(self, argv, stdin=None, stdout=None, stderr=None, env=None):
        self.argv = list(argv)
        actions = []
        for target, fd, flags in ((0, stdin, os.O_RDONLY),
                                  (1, stdout, os.O_WRONLY),
                                  (2, stderr, os.O_WRONLY)):
            if fd is None:
                actions.append((os.POSIX_SPAWN_OPEN, target, os.devnull,
                                flags, 0))
            else:
                actions.append((os.POSIX_SPAWN_DUP2, fd, target))
        self.pid = os.posix_spawnp(self.argv[0], self.argv,
                                   os.environ if env is None else env,
                                   file_actions=actions, setpgroup=0,
                                   setsigdef=_SIGDEF, setsigmask=())
        # A pidfd: signals and waits that cannot hit a recycled pid.
        self._pidfd = os.pidfd_open(self.pid)
        self.returncode = None
        self.rusage = None

    def poll(self):
        """The exit status if the child has ended (reaping it), else None."""
        if self.returncode is None:
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self._reaped(status, ru)
        return self.returncode

    def _reaped(self, status, ru):
        self.returncode = os.waitstatus_to_exitcode(status)
        self.rusage = ru
        os.close(self._pidfd)
        self._pidfd = None

    def wait(self, timeout=None):
        """Wait at most @timeout seconds (None: for ever); the exit status,
        or None if the child still runs."""
        if self.returncode is not None:
            return self.returncode
        if timeout is not None:
            r, _, _ = select.select([self._pidfd], [], [], max(0, timeout))
            if not r:
                return None
        pid, status, ru = os.wait4(self.pid, 0)
        self._reaped(status, ru)
        return self.returncode

    def send_signal(self, sig):
        if self.returncode is None and self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout=10, sig=signal.SIGTERM):
        """@sig, then SIGKILL if it has not ended within @timeout s."""
        if self.returncode is not None:
            return self.returncode
        self.send_signal(sig)
        self.send_signal(signal.SIGCONT)  # one a test stopped, as systemd
        if self.wait(timeout) is None:
            self.send_signal(signal.SIGKILL)
            self.wait(10)
        return self.returncode

    def cpu_seconds(self):
        """User + system CPU of the ended child (None while it runs)."""
        if self.rusage is None:
            return None
        return self.rusage.ru_utime + self.rusage.ru_stime


class Watched:
    """A daemon that a watcher process (`_watch`) started and reaps: the
    shell-facing side of Child. The watcher writes the daemon's exit
    status to @status_path once it has reaped it; until then the daemon's
    pid is not reused, so signals by pid reach the right process as long
    as that file does not exist."""

    def __init__(self, pid, watcher, status_path):
        self.pid = pid
        self.watcher = watcher
        self.status_path = status_path
        self.returncode = None

    def _read_status(self):
        if not self.status_path:
            return self.returncode
        try:
            with open(self.status_path) as f:
                self.returncode = int(f.read().strip())
        except (OSError, ValueError):
            pass
        return self.returncode

    def _gone(self):
        """Whether the daemon has ended (then returncode is set, or None
        when the watcher itself was killed)."""
        if self._read_status() is not None:
            return True
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            fields = None
        if fields and fields[0] != "Z" and (self.watcher is None or
                                            int(fields[1]) == self.watcher):
            return False
        if self.watcher is None:
            return True  # not ours: its status is unknown
        # Ended (a zombie the watcher is about to reap, or gone): the
        # watcher writes the status right after reaping.
        for _ in range(100):
            if self._read_status() is not None or not _alive(self.watcher):
                break
            time.sleep(0.02)
        self._read_status()
        return True

    def poll(self):
        self._gone()
        return self.returncode

    def running(self):
        return not self._gone()

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._gone():
            if deadline is not None and time.monotonic() > deadline:
                return None
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, sig):
        if not self._gone():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout=10, sig=signal.SIGTERM):
        self.send_signal(sig)
        self.send_signal(signal.SIGCONT)  # as Child.stop()
        if self.wait(timeout) is None and not self._gone():
            self.send_signal(signal.SIGKILL)
            self.wait(10)
        return self.returncode


def _alive(pid):
    """Whether @pid is a live process (a zombie is not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def shell_status(code):
    """A Child/Watched returncode as a shell shows it: 128+N for signal
    N; "" if unknown."""
    if code is None:
        return ""
    return str(128 - code if code < 0 else code)


def run(argv, timeout=60, check=True, input_=None):
    """Run @argv to completion (killed after @timeout s); returns
    (status, stdout, stderr) as text. With @check, a non-zero status
    raises RuntimeError with the command and its stderr."""
    rin = win = None
    if input_ is not None:
        rin, win = os.pipe()
    rout, wout = os.pipe()
    rerr, werr = os.pipe()
    try:
        child = Child(argv, stdin=rin, stdout=wout, stderr=werr)
    finally:
        for fd in (rin, wout, werr):
            if fd is not None:
                os.close(fd)
    if win is not None:
        with os.fdopen(win, "w") as f:
            f.write(input_)
    out = {rout: [], rerr: []}
    deadline = time.monotonic() + timeout
    try:
        open_fds = [rout, rerr]
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                child.stop(1, signal.SIGKILL)
                raise RuntimeError("%s: no answer in %d s" %
                                   (" ".join(argv), timeout))
            r, _, _ = select.select(open_fds, [], [], left)
            for fd in r:
                b = os.read(fd, 65536)
                if b:
                    out[fd].append(b)
                else:
                    open_fds.remove(fd)
        status = child.wait(max(0, deadline - time.monotonic()))
        if status is None:
            child.stop(1, signal.SIGKILL)
            raise RuntimeError("%s: did not exit in %d s" %
                               (" ".join(argv), timeout))
    finally:
        os.close(rout)
        os.close(rerr)
    stdout = b"".join(out[rout]).decode(errors="replace")
    stderr = b"".join(out[rerr]).decode(errors="replace")
    if check and status != 0:
        raise RuntimeError("%s: exit status %d: %s" %
                           (" ".join(argv), status, stderr.strip()))
    return status, stdout, stderr


# ---- binaries, ports, mounts, logs ------------------------------------------

class Binaries:
    """Where the programs are: a meson build directory, or an installed
    tree (a prefix such as /usr, or a scratch root that `dpkg -x` made)."""

    NAMES = {"master": "sweepfs-master", "chunkserver": "sweepfs-chunkserver",
             "mount": "sweepfs-mount", "tool": "sweepfs",
             "helper": "mount.sweepfs"}
    BUILD = {"master": "master", "chunkserver": "chunkserver",
             "mount": "mount", "tool": "tools", "helper": "mount"}

    def __init__(self, paths):
        self.paths = dict(paths)
        for k, v in self.paths.items():
            setattr(self, k, v)

    @classmethod
    def find(cls, where):
        where = os.path.abspath(where)
        if os.path.exists(os.path.join(where, "master", "sweepfs-master")):
            return cls({k: os.path.join(where, cls.BUILD[k], n)
                        for k, n in cls.NAMES.items()})
        paths = {}
        for k, n in cls.NAMES.items():
            for d in ("sbin", "bin", "usr/sbin", "usr/bin",
                      "usr/local/sbin", "usr/local/bin"):
                p = os.path.join(where, d, n)
                if os.access(p, os.X_OK):
                    paths[k] = p
                    break
            else:
                paths[k] = None
        if not paths["master"]:
            raise Error("no sweepfs-master in %s (a build directory or an "
                        "installed tree)" % where)
        return cls(paths)


def pick_port(host="127.0.0.1", avoid=()):
    """A TCP port nobody listens on in PORT_RANGE."""
    r = random.SystemRandom()
    for _ in range(200):
        p = r.randrange(*PORT_RANGE)
        if p in avoid:
            continue
        s = socket.socket()
        try:
            s.bind((host, p))
        except OSError:
            continue
        finally:
            s.close()
        return p
    raise Error("no free port in %d-%d" % PORT_RANGE)


def _unescape(field):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_type(path):
    """The filesystem type mounted on @path last (in our mount
    namespace), or None."""
    path = os.path.abspath(path)
    found = None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) > 4 and _unescape(fields[4]) == path:
                    found = right.split()[0]
    except OSError:
        pass
    return found


def is_sweepfs_mount(path):
    return mount_type(path) == "fuse.sweepfs"


def unmount(mnt, tries=5):
    """Unmount @mnt (a FUSE mount), lazily when a plain unmount does not
    work. Returns whether nothing is mounted there afterwards."""
    for _ in range(tries):
        if mount_type(mnt) is None:
            return True
        try:
            if run(["fusermount3", "-u", mnt], timeout=10,
                   check=False)[0] == 0:
                return True
        except (OSError, RuntimeError):
            pass
        time.sleep(0.2)
    for argv in (["fusermount3", "-u", "-z", mnt], ["umount", "-l", mnt]):
        if mount_type(mnt) is None:
            break
        try:
            run(argv, timeout=10, check=False)
        except (OSError, RuntimeError):
            pass
    return mount_type(mnt) is None


def in_netns(netns, argv):
    """@argv run in network namespace @netns (a name under /run/netns, or
    a path; None: as it is), with nsenter --net, not `ip netns exec`:
    that makes a mount namespace too, a copy of every mount there is at
    that moment, and a FUSE mount copied so (another scenario's, or this
    one's) stays alive in it after its unmount here, its client never
    told, until the daemon ends: the client did not exit, and was killed
    (integration.deleg_make, at load)."""
    if not netns:
        return list(argv)
    path = netns if "/" in netns else os.path.join("/run/netns", netns)
    return ["nsenter", "--net=" + path, "--"] + list(argv)


def release_copied_mounts():
    """In a mount namespace of its own (`ip netns exec`, unshare --mount),
    which began as a copy of every mount there was: detach the copies of
    sweepfs mounts, which are others' (another machine's, scenario's or
    cluster's). A copy kept here would keep such a FUSE mount alive after
    its unmount there, its client never told, until this namespace ends
    (see in_netns()). Nothing in the namespace of our parent, where those
    mounts belong. Returns how many were detached."""
    try:
        if os.readlink("/proc/self/ns/mnt") == \
                os.readlink("/proc/%d/ns/mnt" % os.getppid()):
            return 0
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0
    libc = None
    n = 0
    for line in lines:
        head, _, tail = line.partition(" - ")
        if not tail.startswith("fuse.sweepfs "):
            continue
        mnt = _unescape(head.split()[4])
        if libc is None:
            libc = ctypes.CDLL(None, use_errno=True)
        if libc.umount2(os.fsencode(mnt), 2) == 0:  # MNT_DETACH
            n += 1
    return n


def unmount_copies(mnt):
    """Detach the copies of sweepfs mount @mnt that other mount namespaces
    hold (made while it was up, by unshare or `ip netns exec`: ours before
    in_netns(), or anyone's): each keeps its FUSE connection, and so its
    client, alive after the unmount here (see in_netns()). Returns how
    many namespaces it was detached in."""
    mnt = os.path.abspath(mnt)
    ours = os.readlink("/proc/self/ns/mnt")
    seen = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ns = os.readlink("/proc/%s/ns/mnt" % pid)
            if ns == ours or ns in seen:
                continue
            with open("/proc/%s/mountinfo" % pid) as f:
                held = any(
                    line.partition(" - ")[2].startswith("fuse.sweepfs ") and
                    _unescape(line.split()[4]) == mnt for line in f)
        except OSError:
            continue
        if not held:
            continue
        seen.add(ns)
        try:
            run(["nsenter", "--mount=/proc/%s/ns/mnt" % pid, "--",
                 "umount", "-l", mnt], timeout=10, check=False)
        except (OSError, RuntimeError):
            pass
    return len(seen)


def _count_lines(path, needle):
    try:
        with open(path, errors="replace") as f:
            return sum(1 for line in f if needle in line)
    except OSError:
        return 0


def _tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def _mark(path, what):
    with open(path, "a") as f:
        f.write("==== %s %s\n" % (what, time.strftime("%H:%M:%S")))


def sanitizer_reports(d, context=30):
    """Sanitizer reports in the logs of directory @d (*.log, and
    *.log.PID that a sanitizer's log_path writes): a list of (file name,
    the report's first @context lines)."""
    found = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return found
    for name in names:
        if not (name.endswith(".log") or ".log." in name):
            continue
        p = os.path.join(d, name)
        if not os.path.isfile(p):
            continue
        with open(p, errors="replace") as f:
            lines = f.readlines()
        for i, line in enumerate(lines):
            if SANITIZER_RE.search(line):
                found.append((name, "".join(lines[i:i + context])))
                break
    return found


def daemon_env(extra=None):
    """Our environment, with the sanitizer options the logs rely on
    (unless the caller set its own)."""
    env = dict(os.environ)
    for k, v in SANITIZER_ENV.items():
        env.setdefault(k, v)
    env.update(extra or {})
    return env


# ---- the cluster ------------------------------------------------------------

class Cluster:
    """The daemons of one cluster: records of what was started (name,
    kind, pid, port, directories, arguments) and a handle on each
    process (a Child, or a Watched when @watch: shell use, where every
    call is a new process and the registry in WORKDIR/.swcluster/ carries
    the records from one call to the next).

    @workdir holds the default data directories and logs (meta/,
    master.log, csI/, csI.log). @log_level is passed to the daemons as -v
    (None: their default). @netns runs the master and the chunkservers in
    that network namespace (in_netns()); mounts do not take it: see
    mount()).
    @owner (watch mode): the process whose end stops the daemons."""

    def __init__(self, workdir, bins, log_level="info", watch=False,
                 netns=None, owner=None, env=None):
        self.workdir = os.path.abspath(workdir)
        self.bins = bins
        self.log_level = log_level
        # How long a daemon may take to listen: a master loading a large
        # checkpoint needs longer (bench/seed.py sets it by its size).
        self.ready_s = READY_S
        self.watch = watch
        self.netns = netns
        self.owner = owner
        self.env = daemon_env(env)
        self.records = {}   # name -> record (a dict that JSON can hold)
        self.handles = {}   # name -> Child or Watched
        self.state_dir = os.path.join(self.workdir, ".swcluster")

    # ---- the registry (shell use) --------------------------------------

    def save(self):
        os.makedirs(self.state_dir, exist_ok=True)
        tmp = os.path.join(self.state_dir, "state.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"bins": self.bins.paths, "log_level": self.log_level,
                       "netns": self.netns, "records": self.records}, f,
                      indent=1)
        os.rename(tmp, os.path.join(self.state_dir, "state.json"))

    @classmethod
    def load(cls, workdir, bins=None, owner=None):
        """The cluster the registry in @workdir describes (watch mode), or
        a new one if there is none (then @bins is needed)."""
        path = os.path.join(workdir, ".swcluster", "state.json")
        try:
            with open(path) as f:
                st = json.load(f)
        except FileNotFoundError:
            if bins is None:
                raise Error("no cluster in %s (and no --build)" % workdir)
            return cls(workdir, bins, watch=True, owner=owner)
        c = cls(workdir, bins or Binaries(st["bins"]),
                log_level=st.get("log_level"), watch=True,
                netns=st.get("netns"), owner=owner)
        c.records = st["records"]
        for name, rec in c.records.items():
            if rec.get("pid"):
                c.handles[name] = Watched(rec["pid"], rec.get("watcher"),
                                          rec.get("status"))
        return c

    # ---- processes -----------------------------------------------------

    def running(self, name):
        h = self.handles.get(name)
        if h is None:
            return False
        return h.poll() is None if isinstance(h, Child) else h.running()

    def pid(self, name):
        return self.records[name]["pid"] if self.running(name) else None

    def _spawn(self, name, argv, log, mnt=None):
        """Start @argv logging to @log; its handle."""
        logfd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if not self.watch:
                return Child(argv, stdout=logfd, stderr=logfd, env=self.env)
            os.makedirs(self.state_dir, exist_ok=True)
            status = os.path.join(self.state_dir,
                                  re.sub(r"[^A-Za-z0-9_.-]", "_", name) +
                                  ".status")
            try:
                os.unlink(status)
            except FileNotFoundError:
                pass
            r, w = os.pipe()
            try:
                watcher = Child([sys.executable, os.path.abspath(__file__),
                                 "_watch", "--status", status,
                                 "--owner", str(self.owner or 0),
                                 "--mnt", mnt or "", "--"] + argv,
                                stdout=w, stderr=logfd, env=self.env)
            finally:
                os.close(w)
            with os.fdopen(r) as f:
                ready, _, _ = select.select([f], [], [], 10)
                line = f.readline() if ready else ""
            if not line.strip().isdigit():
                watcher.stop(5)
                raise Error("could not start %s (see %s)" % (argv[0], log))
            return Watched(int(line), watcher.pid, status)
        finally:
            os.close(logfd)

    def _in_netns(self, argv):
        return in_netns(self.netns, argv)

    def _launch(self, name, argv, log):
        """Start daemon @name and wait until its log says it listens: its
        handle, or None if it died first (its status in the log)."""
        n0 = _count_lines(log, "listening on")
        h = self._spawn(name, self._in_netns(argv), log)
        self.handles[name] = h
        deadline = time.monotonic() + self.ready_s
        while time.monotonic() < deadline:
            if _count_lines(log, "listening on") > n0:
                return h
            if not self.running(name):
                return None
            time.sleep(0.05)
        h.stop(5, signal.SIGKILL)
        return None

    def _start_daemon(self, name, rec, make_argv):
        """Launch @name with the port in @rec (picking one, and another
        if it is taken, unless rec["fixed_port"]); records it."""
        for _ in range(PORT_TRIES):
            if not rec.get("port"):
                rec["port"] = pick_port(rec["host"])
            _mark(rec["log"], "start port %d" % rec["port"])
            h = self._launch(name, make_argv(rec), rec["log"])
            if h is not None:
                rec.update(pid=h.pid, watcher=getattr(h, "watcher", None),
                           status=getattr(h, "status_path", None))
                self.records[name] = rec
                return rec
            if "address already in use" in _tail(rec["log"], 5) and \
                    not rec.get("fixed_port"):
                rec["port"] = None
                continue
            break
        self.records[name] = dict(rec, pid=None)
        raise Error("%s did not start; the end of %s:\n%s" %
                    (name, rec["log"], _tail(rec["log"])))

    def _level(self):
        return ["-v", self.log_level] if self.log_level else []

    def start_master(self, args=None, host=None, port=None, fixed_port=False,
                     data=None, log=None):
        """Start the master (again: what is not given is as last time);
        returns once it listens. Its record: host, port, pid, ..."""
        if self.running("master"):
            raise Error("the master is running (pid %d)" %
                        self.records["master"]["pid"])
        old = self.records.get("master", {})
        rec = {"kind": "master",
               "host": host or old.get("host") or "127.0.0.1",
               "port": port or old.get("port"),
               # a restart keeps its address: mounts know it
               "fixed_port": fixed_port or (not port and
                                            bool(old.get("port"))),
               "data": data or old.get("data") or
               os.path.join(self.workdir, "meta"),
               "log": log or old.get("log") or
               os.path.join(self.workdir, "master.log"),
               "args": list(args if args is not None else
                            old.get("args", []))}
        os.makedirs(rec["data"], exist_ok=True)

        def argv(r):
            return [self.bins.master, "-f", "-d", r["data"], "-l",
                    "%s:%d" % (r["host"], r["port"])] + self._level() + \
                r["args"]
        return self._start_daemon("master", rec, argv)

    def master_address(self):
        m = self.records.get("master")
        if not m or not m.get("port"):
            raise Error("no master yet")
        return "%s:%d" % (m["host"], m["port"])

    def chunkserver_names(self):
        return sorted((n for n in self.records
                       if self.records[n]["kind"] == "chunkserver"),
                      key=lambda n: self.records[n]["index"])

    def start_chunkserver(self, index=None, args=None, host=None, port=None,
                          fixed_port=False, data=None, log=None):
        """Start chunkserver @index (default: a new one, numbered from 1),
        pointed at the master; returns once it listens (not yet
        registered: wait_registered())."""
        if index is None:
            index = 1 + max([self.records[n]["index"]
                             for n in self.chunkserver_names()] or [0])
        name = "cs%d" % index
        if self.running(name):
            raise Error("chunkserver %d is running" % index)
        old = self.records.get(name, {})
        rec = {"kind": "chunkserver", "index": index,
               "host": host or old.get("host") or
               self.records.get("master", {}).get("host", "127.0.0.1"),
               "port": port or old.get("port"),
               "fixed_port": fixed_port or (not port and
                                            bool(old.get("port"))),
               "data": data or old.get("data") or
               os.path.join(self.workdir, name),
               "log": log or old.get("log") or
               os.path.join(self.workdir, name + ".log"),
               "args": list(args if args is not None else
                            old.get("args", []))}
        os.makedirs(rec["data"], exist_ok=True)
        master = self.master_address()
        # The master made its chunkserver key at its first start; a
        # chunkserver must hold it (--set in r["args"] may say otherwise).
        key = os.path.join(self.records["master"]["data"], "chunkserver.key")

        def argv(r):
            return [self.bins.chunkserver, "-f", "-d", r["data"], "-l",
                    "%s:%d" % (r["host"], r["port"]), "-m", master,
                    "--set", "master_key_file=" + key] + \
                self._level() + r["args"]
        return self._start_daemon(name, rec, argv)

    def start_chunkservers(self, n, args=None, wait=True, **kw):
        recs = [self.start_chunkserver(args=args, **kw) for _ in range(n)]
        if wait:
            self.wait_registered()
        return recs

    def run_tool(self, *args, timeout=120, check=True):
        """`sweepfs -m MASTER ARGS`: (status, stdout, stderr)."""
        return run([self.bins.tool, "-m", self.master_address()] +
                   list(args), timeout=timeout, check=check)

    def registered(self):
        """Whether the master lists every running chunkserver as
        connected."""
        want = {"%s:%d" % (self.records[n]["host"], self.records[n]["port"])
                for n in self.chunkserver_names() if self.running(n)}
        if not want:
            return True
        try:
            st, out, _ = self.run_tool("status", "--json", timeout=10,
                                       check=False)
            d = json.loads(out) if st == 0 else {}
        except (RuntimeError, ValueError):
            return False
        if d.get("limited"):
            # No chunkserver is listed to anyone but admin root: waiting
            # would only time out.
            raise Error("status is limited: run as root on an admin "
                        "export (maproot=0)")
        got = {s["listen"] for s in d.get("servers", ())
               if s.get("connected")}
        return want <= got

    def wait_registered(self, timeout=REGISTER_S):
        deadline = time.monotonic() + timeout
        while not self.registered():
            if time.monotonic() > deadline:
                raise Error("the chunkservers did not register with the "
                            "master within %d s" % timeout)
            time.sleep(0.05)

    def mount(self, mnt, spec=None, opts="", net=None, log=None):
        """Mount @spec (default: the master) on @mnt with sweepfs-mount in
        the foreground, logging to MNT.log; returns @mnt once mounted.
        @net: a network namespace file (/run/netns/NAME) to run the client
        in, entered with nsenter so that the mount stays in our mount
        namespace (the cluster's netns is not used for mounts, since `ip
        netns exec` would hide the mount from everyone else)."""
        mnt = os.path.abspath(mnt)
        os.makedirs(mnt, exist_ok=True)
        name = "mount:" + mnt
        if self.running(name):
            raise Error("%s is mounted already" % mnt)
        spec = spec or self.master_address()
        log = log or mnt + ".log"
        argv = [self.bins.mount, spec, mnt, "-f"] + \
            (["-o", opts] if opts else [])
        if net:
            argv = ["nsenter", "--net=" + net, "--"] + argv
        _mark(log, "mount " + spec)
        h = self._spawn(name, argv, log, mnt=mnt)
        self.handles[name] = h
        self.records[name] = {"kind": "mount", "mnt": mnt, "spec": spec,
                              "log": log, "pid": h.pid,
                              "watcher": getattr(h, "watcher", None),
                              "status": getattr(h, "status_path", None)}
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if is_sweepfs_mount(mnt):
                return mnt
            if not self.running(name):
                break
            time.sleep(0.05)
        raise Error("mounting %s on %s failed; the end of %s:\n%s" %
                    (spec, mnt, log, _tail(log, 20)))

    def adopt(self, mnt, pid):
        """A mount some other program started (mount.sweepfs daemonizes):
        stopped with the others."""
        mnt = os.path.abspath(mnt)
        name = "mount:" + mnt
        self.handles[name] = Watched(pid, None, None)
        self.records[name] = {"kind": "mount", "mnt": mnt, "pid": pid,
                              "watcher": None, "status": None,
                              "adopted": True}

    def _find(self, name_or_mnt):
        if name_or_mnt in self.records:
            return name_or_mnt
        name = "mount:" + os.path.abspath(name_or_mnt)
        return name if name in self.records else None

    def stop(self, name, how="term", timeout=None):
        """Stop daemon or mount @name ("master", "csI", a mount point):
        SIGTERM (a mount: unmount) and SIGKILL after @timeout s, or
        SIGKILL at once (@how "kill"). Its exit status (None: unknown or
        not running)."""
        name = self._find(name)
        if name is None:
            return None
        rec, h = self.records[name], self.handles.get(name)
        if rec["kind"] == "mount" and how != "kill":
            unmount(rec["mnt"])  # also when its client is gone
        if not self.running(name):
            return h.poll() if h else None
        if how == "kill":
            h.send_signal(signal.SIGKILL)
            code = h.wait(10)
            if rec["kind"] != "mount":
                _mark(rec["log"], "killed")
            return code
        if rec["kind"] == "mount":
            # Gone from our namespace, but still mounted in another one,
            # the client hears of no unmount: take the copies away too.
            code = h.wait(COPIES_S)
            if code is None and unmount_copies(rec["mnt"]):
                code = h.wait(timeout or UNMOUNT_S)
            elif code is None:
                code = h.wait(max((timeout or UNMOUNT_S) - COPIES_S, 1))
            if code is None and self.running(name):
                h.send_signal(signal.SIGKILL)
                code = h.wait(5)
            return code
        return h.stop(timeout or STOP_S)

    def teardown(self):
        """Stop everything that runs: mounts, chunkservers, the master.
        Returns {name: exit status} of what it stopped."""
        done = {}
        # Every mount point, also those whose client is gone (a test
        # that killed it leaves a dead mount behind).
        for r in self.records.values():
            if r["kind"] == "mount" and mount_type(r["mnt"]) is not None:
                unmount(r["mnt"])
        mounts = [n for n, r in self.records.items() if r["kind"] == "mount"
                  and self.running(n)]
        for n in mounts:
            h = self.handles[n]
            done[n] = h.wait(COPIES_S)
            if done[n] is None:
                unmount_copies(self.records[n]["mnt"])
                done[n] = h.wait(10)
            if done[n] is None and self.running(n):
                h.send_signal(signal.SIGKILL)
                done[n] = h.wait(5)
        servers = [n for n in self.chunkserver_names() if self.running(n)]
        for n in servers:
            self.handles[n].send_signal(signal.SIGTERM)
        for n in servers:
            done[n] = self.handles[n].stop(STOP_S)
        if self.running("master"):
            done["master"] = self.handles["master"].stop(STOP_S)
        return done


# ---- the watcher ------------------------------------------------------------

def watch_main(a, argv):
    """Run @argv (stdout and stderr: our stderr, the daemon's log), print
    its pid on stdout and close it, reap it and write its exit status to
    a.status. If a.owner ends first: unmount a.mnt (if any) and stop the
    daemon."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    owner_fd = None
    if a.owner:
        try:
            owner_fd = os.pidfd_open(a.owner)
        except OSError:
            owner_fd = -1  # gone already
    child = Child(argv, stdout=2, stderr=2)
    os.write(1, b"%d\n" % child.pid)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    orphaned = owner_fd == -1
    while not orphaned:
        fds = [child._pidfd] + ([owner_fd] if owner_fd is not None else [])
        r, _, _ = select.select(fds, [], [])
        if child._pidfd in r:
            break
        orphaned = True
    if orphaned and child.poll() is None:
        if a.mnt:
            unmount(a.mnt)
            if child.wait(UNMOUNT_S) is None:
                child.stop(5, signal.SIGKILL)
        else:
            child.stop(STOP_S)
    code = child.wait()
    tmp = a.status + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % code)
    os.rename(tmp, a.status)
    return 0


# ---- command line -----------------------------------------------------------

def _split_args(argv):
    """(our arguments, the daemon's after "--" or None if no "--")."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def _parser():
    ap = argparse.ArgumentParser(
        prog="swcluster.py",
        description="Start and stop a sweepfs cluster, one step per call "
        "(see the top of this file). Arguments after -- go to the daemon.")
    ap.add_argument("-w", "--workdir", help="the cluster's directory: "
                    "registry, default data directories and logs")
    ap.add_argument("--build", help="a meson build directory or an "
                    "installed tree (first call)")
    ap.add_argument("--log-level", default="info",
                    help="the daemons' -v (first call; 'default': none)")
    ap.add_argument("--owner", type=int,
                    default=int(os.environ.get("SWCLUSTER_OWNER") or 0),
                    help="stop the daemons when this process ends "
                    "(default $SWCLUSTER_OWNER)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("port", help="print a free port")
    p.add_argument("--host", default="127.0.0.1")
    for kind in ("master", "chunkserver"):
        p = sub.add_parser(kind, help="start|stop|kill the %s" % kind)
        p.add_argument("action", choices=("start", "stop", "kill"))
        if kind == "chunkserver":
            p.add_argument("index", type=int, nargs="?",
                           help="which one (start: default a new one)")
            p.add_argument("--count", type=int, default=1,
                           help="start: this many new ones")
        p.add_argument("--host", help="address to listen on")
        p.add_argument("--port", type=int, help="default: a free one")
        p.add_argument("--fixed-port", action="store_true",
                       help="fail rather than move when the port is taken")
        p.add_argument("--data", help="data directory")
        p.add_argument("--log", help="log file (appended to)")
        p.add_argument("--timeout", type=float, help="stop: SIGKILL after")
    p = sub.add_parser("wait-registered",
                       help="until the master lists every running "
                       "chunkserver as connected")
    p.add_argument("--timeout", type=float, default=REGISTER_S)
    p = sub.add_parser("mount", help="mount on MNT; print the client's pid")
    p.add_argument("mnt")
    p.add_argument("--spec", help="default: the master's HOST:PORT")
    p.add_argument("-o", "--options", default="")
    p.add_argument("--net", help="network namespace file to run the "
                   "client in (nsenter --net)")
    p.add_argument("--log", help="default: MNT.log")
    p = sub.add_parser("unmount", help="unmount MNT and wait for its "
                       "client; print its exit status")
    p.add_argument("mnt")
    p.add_argument("--timeout", type=float)
    p = sub.add_parser("adopt", help="stop PID, the client of MNT, with "
                       "the cluster")
    p.add_argument("mnt")
    p.add_argument("pid", type=int)
    sub.add_parser("down", help="stop every mount and daemon, in order")
    p = sub.add_parser("sanitizer", help="print sanitizer reports in the "
                       "logs of DIR (default: the workdir); status 1 if any")
    p.add_argument("dir", nargs="?")
    p = sub.add_parser("_watch")
    p.add_argument("--status", required=True)
    p.add_argument("--owner", type=int, default=0)
    p.add_argument("--mnt", default="")
    return ap


def _stop_cmd(c, name, a):
    """stop|kill @name (or unmount it): print its exit status; fail if it
    still runs afterwards."""
    code = c.stop(name, a.action, a.timeout)
    if c.running(name):
        raise Error("%s still runs (pid %d)" % (name, c.pid(name)))
    print(shell_status(code))
    return 0


def _daemon_cmd(c, a, extra):
    kw = dict(host=a.host, port=a.port, fixed_port=a.fixed_port,
              data=a.data, log=a.log)
    if a.cmd == "master":
        if a.action != "start":
            return _stop_cmd(c, "master", a)
        rec = c.start_master(args=extra, **kw)
        print(rec["pid"], rec["port"])
        return 0
    if a.action != "start":
        if a.index is None:
            raise Error("chunkserver %s: which one?" % a.action)
        return _stop_cmd(c, "cs%d" % a.index, a)
    if a.index is not None:
        recs = [c.start_chunkserver(a.index, args=extra, **kw)]
    else:
        recs = [c.start_chunkserver(args=extra, **kw)
                for _ in range(a.count)]
    for r in recs:
        print(r["index"], r["pid"], r["port"])
    return 0


def _command(c, a, extra):
    if a.cmd in ("master", "chunkserver"):
        return _daemon_cmd(c, a, extra)
    if a.cmd == "wait-registered":
        c.wait_registered(a.timeout)
    elif a.cmd == "mount":
        c.mount(a.mnt, spec=a.spec, opts=a.options, net=a.net, log=a.log)
        print(c.records["mount:" + os.path.abspath(a.mnt)]["pid"])
    elif a.cmd == "unmount":
        if c._find(a.mnt) is None:
            unmount(a.mnt)  # not ours: unmount it all the same
            print("")
        else:
            a.action = "term"
            return _stop_cmd(c, c._find(a.mnt), a)
    elif a.cmd == "adopt":
        c.adopt(a.mnt, a.pid)
    elif a.cmd == "down":
        c.teardown()
    return 0


def main(argv=None):
    ours, extra = _split_args(sys.argv[1:] if argv is None else argv)
    a = _parser().parse_args(ours)
    if a.cmd == "_watch":
        return watch_main(a, extra or [])
    if a.cmd == "port":
        print(pick_port(a.host))
        return 0
    if a.cmd == "sanitizer":
        d = a.dir or a.workdir
        if not d:
            raise SystemExit("swcluster.py sanitizer: which directory?")
        reports = sanitizer_reports(d)
        for name, text in reports:
            sys.stderr.write("==== sanitizer report in %s:\n%s" %
                             (os.path.join(d, name), text))
        return 1 if reports else 0
    if not a.workdir:
        raise SystemExit("swcluster.py: -w WORKDIR is needed")
    os.makedirs(os.path.join(a.workdir, ".swcluster"), exist_ok=True)
    lock = open(os.path.join(a.workdir, ".swcluster", "lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        c = Cluster.load(a.workdir, Binaries.find(a.build) if a.build
                         else None, owner=a.owner or None)
        if not c.records:
            c.log_level = None if a.log_level == "default" else a.log_level
        try:
            return _command(c, a, extra)
        finally:
            c.save()
    except Error as e:
        sys.stderr.write("swcluster: %s\n" % e)
        return 1
    finally:
        lock.close()


if __name__ == "__main__":
    sys.exit(main())
