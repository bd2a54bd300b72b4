"""Many machines on one host: network namespaces on a bridge, and the
processes that run in them (DESIGN.md, "Many machines").

A "machine" is a network namespace with one veth interface, eth0, whose
other end is a port of a bridge in the root namespace. The bridge has the
first address of the subnet, so programs on the host (the harness, the
sweepfs tool) reach every machine directly; the machines reach each other
through the bridge. Nothing is routed or forwarded anywhere else: the
subnet exists only on this bridge.

Every name a run creates carries a fixed prefix and the pid of the
process that owns the run, so that leftovers of a run that was killed can
be found by name and told apart from those of a run that is still going:

  network namespaces   swstress-PID-ROLE      (ROLE: srv, c0, c1, ...;
                                              seed.py: main, probe)
  bridge               swsPIDbr
  host end of a veth   swsPIDROLE             (at most 15 bytes: Linux)
  run directories      sweepfs-stress-PID-*   (in the temp directory)

and the owner claims its run in /run/sweepfs-machines/PID, with its
process's start time, before it creates anything: a run is going while
that process lives, whichever program it is (claim(), owner_alive()).

Processes started in a machine run under `ip netns exec`, which also gives
them a mount namespace of their own (a slave of the host's): a FUSE mount
made there is seen only by that machine's processes, and disappears when
the last of them exits. A killed run therefore never leaves a dead FUSE
mount on the host; killing every process of its namespaces is enough.

Children are started with posix_spawn (DESIGN.md, "Priority"): Python
3.11's subprocess would fork+exec whenever close_fds is true, so Child
(from the cluster launcher, scripts/swcluster.py, as is run()) calls
os.posix_spawnp itself. Descriptors Python opens are not inherited
(PEP 446), which closes everything but stdin, stdout and stderr in the
child; each child gets a process group of its own, so that a Ctrl-C on
the terminal reaches the harness only, which then stops the children in
order; and signals the parent ignores or handles are reset to their
default in the child.
"""

import errno
import ipaddress
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "scripts"))
from swcluster import Child, run  # noqa: E402,F401  (used by the harness)

PREFIX_NS = "swstress-"
PREFIX_LINK = "sws"
PREFIX_DIR = "sweepfs-stress-"
# A process that runs a stress harness has this in its command line.
OWNER_MARK = "stress.py"
# Every owner of a network claims it here, in a file named by its pid that
# holds the process's start time: a run is going while that process lives,
# whatever its command line (integration.group's group.py owns machines
# too, and a stress run's --cleanup once took its members down mid-test).
OWNERS_DIR = "/run/sweepfs-machines"

_NS_RE = re.compile(r"^swstress-([0-9]+)-([a-z0-9]+)$")
# Roles: bench/stress.py's srv and cN, bench/seed.py's main and probe.
_LINK_RE = re.compile(r"^sws([0-9]+)(br|srv|main|probe|c[0-9]+)$")
_DIR_RE = re.compile(r"^sweepfs-stress-([0-9]+)-")

class HostError(Exception):
    """Something this host lacks (root, ip, netns support): the message
    says what and how to get it."""


# ---- processes --------------------------------------------------------------

def ip(*args, check=True):
    return run(["ip"] + list(args), timeout=30, check=check)


# ---- who owns what ----------------------------------------------------------

def start_time(pid):
    """When process @pid started (field 22 of /proc/PID/stat, clock ticks
    since boot) as a string, None when there is no such process: with the
    pid, it names one process, not a recycled pid."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    # The name, field 2, is in parentheses and may hold spaces; field 3
    # comes after its closing one.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def _claim_path(pid):
    return os.path.join(OWNERS_DIR, str(pid))


def claim(pid):
    """Say that process @pid owns a network from now on (owner_alive())."""
    st = start_time(pid)
    if st is None:
        raise HostError("the owner of the network, pid %d, is gone" % pid)
    os.makedirs(OWNERS_DIR, exist_ok=True)
    tmp = "%s.%d.tmp" % (_claim_path(pid), os.getpid())
    with open(tmp, "w") as f:
        f.write(st + "\n")
    os.replace(tmp, _claim_path(pid))


def owner_alive(pid):
    """Whether @pid is a running owner of a network: one that claimed it
    (claim()) and still runs, not a recycled pid; or, for a run that
    claimed nothing, a stress harness by its command line."""
    st = start_time(pid)
    if st is None:
        return False
    try:
        with open(_claim_path(pid)) as f:
            if f.read().strip() == st:
                return True
    except OSError:
        pass
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().decode(errors="replace")
    except OSError:
        return False
    return OWNER_MARK in cmd


def list_netns():
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def list_links():
    _, out, _ = ip("-j", "link", "show")
    return [link["ifname"] for link in json.loads(out or "[]")]


def ns_pids(ns):
    """The processes in network namespace @ns."""
    status, out, _ = ip("netns", "pids", ns, check=False)
    if status:
        return []
    return [int(x) for x in out.split()]


def leftovers(tmpdirs=()):
    """What runs whose owner is gone left behind, and what runs still
    going own: ({"netns", "links", "dirs", "claims"}, [live owner
    pids])."""
    found = {"netns": [], "links": [], "dirs": [], "claims": []}
    live = set()

    def sort(pid, kind, what):
        if pid != os.getpid() and owner_alive(pid):
            live.add(pid)
        else:
            found[kind].append(what)

    for ns in list_netns():
        m = _NS_RE.match(ns)
        if m:
            sort(int(m.group(1)), "netns", ns)
    for name in list_links():
        m = _LINK_RE.match(name.split("@")[0])
        if m:
            sort(int(m.group(1)), "links", name.split("@")[0])
    try:
        claims = os.listdir(OWNERS_DIR)
    except OSError:
        claims = []
    for name in claims:
        if name.isdigit():
            sort(int(name), "claims", _claim_path(int(name)))
    for base in set(tmpdirs) | {tempfile.gettempdir()}:
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            m = _DIR_RE.match(name)
            if m and os.path.isdir(os.path.join(base, name)):
                sort(int(m.group(1)), "dirs", os.path.join(base, name))
    return found, sorted(live)


def kill_pids(pids, timeout=10):
    """SIGTERM, then SIGKILL what is left after @timeout s; pids that are
    not our children are waited for through /proc."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
        pids = [p for p in pids if _exists(p)]
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pids = [p for p in pids if _exists(p)]
            if not pids:
                return []
            time.sleep(0.05)
    return [p for p in pids if _exists(p)]


def _exists(pid):
    """Whether @pid is a process that has not ended (zombies have)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)  # ours: reap it
        except ChildProcessError:
            pass
        return False
    return True


def proc_cpu_seconds(pid):
    """User + system CPU of process @pid so far (0 if it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mounts_under(path):
    """FUSE mounts under @path that any process can see (all mount
    namespaces): [(pid, mount point)]."""
    path = os.path.realpath(path)
    seen = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/mountinfo" % d) as f:
                for line in f:
                    mp = line.split()[4]
                    if mp == path or mp.startswith(path + "/"):
                        seen.append((int(d), mp))
        except (OSError, IndexError):
            continue
    return seen


def remove_leftovers(found, log=print):
    """Remove what leftovers() found: processes of the namespaces first
    (their FUSE mounts go with them), then namespaces, links, directories.
    Returns the list of things it could not remove."""
    failed = []
    for ns in found["netns"]:
        pids = ns_pids(ns)
        if pids:
            log("stopping %d processes in %s" % (len(pids), ns))
            if kill_pids(pids):
                failed.append("processes in " + ns)
        status, _, err = ip("netns", "del", ns, check=False)
        if status:
            failed.append("%s (%s)" % (ns, err.strip()))
        else:
            log("removed network namespace " + ns)
    # Veths die with their namespace, but asynchronously; the bridge
    # does not: delete what is still there (a veth before its bridge).
    for name in sorted(found["links"], key=lambda n: n.endswith("br")):
        if os.path.exists("/sys/class/net/" + name):
            status, _, err = ip("link", "del", name, check=False)
            if status and os.path.exists("/sys/class/net/" + name):
                failed.append("%s (%s)" % (name, err.strip()))
                continue
        log("removed link " + name)
    for d in found["dirs"]:
        busy = mounts_under(d)
        if busy:
            failed.append("%s (mounts: %s)" % (
                d, ", ".join("%s in pid %d" % (m, p) for p, m in busy[:3])))
            continue
        shutil.rmtree(d, ignore_errors=True)
        if os.path.exists(d):
            failed.append(d)
        else:
            log("removed " + d)
    # Last: a claim kept while anything of its run is left keeps the run
    # out of other cleaners' way until this one is done.
    for c in found.get("claims", []):
        try:
            os.unlink(c)
        except FileNotFoundError:
            pass
    return failed


# ---- the network ------------------------------------------------------------

def check_environment(fuse=True):
    """Raise HostError unless this host can make machines (and, with
    @fuse, mount sweepfs in them)."""
    if os.geteuid() != 0:
        raise HostError(
            "this needs root: it creates network namespaces, a bridge and "
            "veth pairs (run it with sudo)")
    progs = [("ip", "iproute2")] + ([("fusermount3", "fuse3")] if fuse
                                    else [])
    for prog, pkg in progs:
        if not shutil.which(prog):
            raise HostError("%s is not installed (Debian package %s)" %
                            (prog, pkg))
    if fuse and not os.path.exists("/dev/fuse"):
        raise HostError("/dev/fuse is missing (modprobe fuse; in a "
                        "container: --device /dev/fuse)")


class Network:
    """A bridge on the host and machines (network namespaces) on it.

    Addresses, in @subnet: .1 the bridge (the host), then one per machine
    in the order add() is called. Nothing exists until create(); destroy()
    removes everything, also after a partial create()."""

    def __init__(self, subnet, owner=None):
        self.subnet = ipaddress.ip_network(subnet)
        if self.subnet.version != 4 or self.subnet.prefixlen > 24:
            raise ValueError("--subnet must be IPv4, /24 or wider")
        self.owner = owner or os.getpid()
        self.bridge = "%s%dbr" % (PREFIX_LINK, self.owner)
        hosts = self.subnet.hosts()
        self.host_address = str(next(hosts))
        self._free = hosts
        self.machines = {}   # role -> (netns, host veth, address)
        self._created = []   # ("netns"|"link", name), in order

    def add(self, role):
        """Reserve a machine @role ("srv", "c0", ...): its address."""
        addr = str(next(self._free))
        self.machines[role] = ("%s%d-%s" % (PREFIX_NS, self.owner, role),
                               "%s%d%s" % (PREFIX_LINK, self.owner, role),
                               addr)
        if len(self.machines[role][1]) > 15:
            raise ValueError("interface name too long: " +
                             self.machines[role][1])
        return addr

    def netns(self, role):
        return self.machines[role][0]

    def address(self, role):
        return self.machines[role][2]

    def _check_subnet(self):
        _, out, _ = ip("-j", "-4", "route", "show", "table", "all")
        for r in json.loads(out or "[]"):
            dst = r.get("dst")
            if not dst or dst == "default" or r.get("type") in (
                    "local", "broadcast"):
                continue
            try:
                net = ipaddress.ip_network(dst, strict=False)
            except ValueError:
                continue
            if net.overlaps(self.subnet):
                raise HostError(
                    "subnet %s overlaps the route to %s on %s; pick "
                    "another with --subnet" % (self.subnet, dst,
                                               r.get("dev", "?")))

    def create(self):
        self._check_subnet()
        # Before anything exists: another run's cleaner must see it owned.
        claim(self.owner)
        self._created.append(("claim", self.owner))
        status, _, err = ip("link", "add", self.bridge, "type", "bridge",
                            check=False)
        if status:
            raise HostError("cannot create a bridge (this needs "
                            "CAP_NET_ADMIN in the host's network "
                            "namespace): %s" % err.strip())
        self._created.append(("link", self.bridge))
        ip("addr", "add", "%s/%d" % (self.host_address,
                                     self.subnet.prefixlen),
           "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for role, (ns, veth, addr) in self.machines.items():
            status, _, err = ip("netns", "add", ns, check=False)
            if status:
                raise HostError(
                    "cannot create network namespace %s: %s (a container "
                    "without CAP_SYS_ADMIN cannot)" % (ns, err.strip()))
            self._created.append(("netns", ns))
            ip("link", "add", veth, "type", "veth", "peer", "name", "eth0",
               "netns", ns)
            self._created.append(("link", veth))
            ip("link", "set", veth, "master", self.bridge, "up")
            ip("-n", ns, "addr", "add",
               "%s/%d" % (addr, self.subnet.prefixlen), "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def processes(self):
        """{role: [pid]} of the processes still in each machine."""
        return {role: ns_pids(ns) for role, (ns, _, _) in
                self.machines.items()
                if ("netns", ns) in self._created}

    def destroy(self, log=print):
        """Stop whatever still runs in the machines, remove them and the
        bridge. Returns what could not be removed."""
        found = {"netns": [n for k, n in self._created if k == "netns"],
                 "links": [n for k, n in self._created if k == "link"],
                 "dirs": [],
                 "claims": [_claim_path(n) for k, n in self._created
                            if k == "claim"]}
        self._created = []
        return remove_leftovers(found, log)


def in_netns(ns, argv):
    """@argv run in network namespace @ns (and a mount namespace of its
    own, see the module comment)."""
    return ["ip", "netns", "exec", ns] + list(argv)


def errno_name(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else str(e)
