#!/usr/bin/env python3
"""A peer floods a master whose etcd lease is in doubt (review L1).

While the lease is in doubt the master answers nothing (group.h,
group_may_answer()); it used to go on reading what a peer sent, without
limit, until frame_timeout. It must stop reading such a connection
instead, and go on once the lease is renewed.

A group of one member, lease 2.5 s (etcd's TTL 3 s). A peer
(progs/leaseflood.c) says hello and floods PINGs, reading its replies.
etcd is frozen (SIGSTOP): the master's renewals block, and 100 ms before
its lease would run out it is in doubt ("answering nothing"). The driver
sees that line, lets the flood go on for FLOOD_IN_DOUBT_S, and lets etcd
go (SIGCONT) while the master's last renewal still waits for it (it
waits 1 s; the doubt starts about 350 ms before that renewal gives up
and the master would be deposed). Then:

- the master's peak RSS (VmHWM) grew by less than BUDGET_MIB over the
  episode (before the fix it buffered whatever the peer sent meanwhile);
- it says "the lease is renewed: answering again", still leads, and
  answers a new connection's hello and ping, and sweepfs status.

On a loaded machine the window can be missed (etcd let go too late: the
master is deposed and exits 75, as it must). That episode does not
count; after three such misses the scenario is skipped (77), saying so.

Prints one JSON object. Exit status 0 pass, 1 fail, 77 skip."""

import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import swgroup  # noqa: E402

Fail = swgroup.Error

LEASE_MS = 2500
FLOOD_IN_DOUBT_S = 0.1
BUDGET_MIB = 8
TRIES = 3
DOUBT = "answering nothing until etcd renews it"
RENEWED = "the lease is renewed: answering again"


class Group(swgroup.Group):
    def __init__(self, a):
        super().__init__(a.tmp, a.build, swgroup.loopback_members(1),
                         master_set=["group_lease=%dms" % LEASE_MS])
        self.flood = None
        self.frozen = False

    def stop(self):
        if self.frozen:
            for h in self.etcd.values():
                h.send_signal(signal.SIGCONT)
            self.frozen = False
        if self.flood and self.flood.poll() is None:
            self.flood.kill()
            self.flood.wait()
        super().stop()


def asan(pid):
    """Whether process @pid runs with AddressSanitizer's runtime."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            return any("libasan" in line for line in f)
    except OSError:
        return False


def vm(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise Fail("no %s for pid %d" % (key, pid))


def log_tail(g, since):
    with open(g.path("m1.log"), errors="replace") as f:
        f.seek(since)
        return f.read()


def wait_line(g, since, what, timeout):
    """Seconds until @what appears in the master's log after @since, or
    None after @timeout s or once the master exited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if what in log_tail(g, since):
            return time.monotonic() - t0
        if g.master[1].poll() is not None:
            return None
        time.sleep(0.005)
    return None


def episode(g, result):
    """One freeze of etcd with the flood on: True when the lease came
    back, False when the window was missed (the master was deposed)."""
    m = g.members[1]
    pid = g.master[1].pid
    g.flood = subprocess.Popen(
        [g.build + "/tests/integration/progs/leaseflood", "-m",
         str(m.port), "-s", "8"], stdout=subprocess.PIPE, text=True)
    if g.flood.stdout.readline().strip() != "ready":
        raise Fail("the flooding peer did not start")
    time.sleep(1)
    since = os.path.getsize(g.path("m1.log"))
    hwm0 = vm(pid, "VmHWM")
    g.etcd[1].send_signal(signal.SIGSTOP)
    g.frozen = True
    doubt = wait_line(g, since, DOUBT, 10)
    if doubt is not None:
        time.sleep(FLOOD_IN_DOUBT_S)
    g.etcd[1].send_signal(signal.SIGCONT)
    g.frozen = False
    if doubt is None:
        raise Fail("the master never said its lease was in doubt")
    result["doubt_after_freeze_s"] = round(doubt, 3)
    renewed = wait_line(g, since, RENEWED, 5)
    out, _ = g.flood.communicate(timeout=30)
    if renewed is None:
        st = g.master_exit(1, 30)
        if st != 75:
            raise Fail("the master exited with %s, not 75, or did not "
                       "say its lease was renewed" % st)
        return False
    hwm1 = vm(pid, "VmHWM")
    result["renewed_after_s"] = round(renewed, 3)
    result["hwm_kib"] = [hwm0, hwm1]
    result["flood"] = out.split()
    if g.flood.returncode != 0 or "answered" not in out:
        raise Fail("the flooding peer: status %s, %r" %
                   (g.flood.returncode, out))
    # Under AddressSanitizer freed memory waits in its quarantine (up to
    # 256 MiB), so every ping answered after the renewal adds to the RSS
    # whatever the master holds: as integration.caps does, no budget
    # there (the normal build checks it).
    result["rss_checked"] = not asan(pid)
    if result["rss_checked"] and hwm1 - hwm0 > BUDGET_MIB * 1024:
        raise Fail("the master's peak RSS grew by %d MiB while its lease "
                   "was in doubt (budget %d MiB)" %
                   ((hwm1 - hwm0) // 1024, BUDGET_MIB))
    lead, _ = g.leader(30)
    if lead != 1:
        raise Fail("member 1 no longer leads")
    return True


def run(g, result):
    g.start()
    result["missed"] = 0
    for _ in range(TRIES):
        if episode(g, result):
            return
        result["missed"] += 1
        g.start_master(1)
        g.leader(60)
    print("the lease came back too late %d times in a row (a loaded "
          "machine): nothing was checked" % TRIES, file=sys.stderr)
    raise SystemExit(77)


if __name__ == "__main__":
    sys.exit(swgroup.scenario(Group, run))
