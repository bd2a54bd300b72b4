#!/bin/bash
# Machines (bench/machines.py) of a run that is going are left alone by
# another run's clean-up, whatever program owns them: a stress run's
# --cleanup once took integration.group's etcd and masters down in the
# middle of the test, because only a process called stress.py counted as
# a live owner. Here a plain sleeper (not stress.py) owns a network of
# one machine with a process in it:
#  1. bench/stress.py --cleanup leaves the network and its process alone;
#  2. once the owner is gone, --cleanup removes the namespace, the bridge,
#     the process in it and the owner's claim;
#  3. a claim whose pid was recycled (another start time) does not count.

. "$(dirname "$0")/../lib.sh"
sw_init machines_owner --root

STRESS=$SW_SRC/../../bench/stress.py
BENCH=$SW_SRC/../../bench
command -v ip >/dev/null || skip "ip (iproute2) is not installed"
probe=sw-it-probe-$$
ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces"
ip netns del "$probe"
sw_free_prefix

OWNER=
sw_scenario_cleanup() {
	[[ -n "$OWNER" ]] && kill "$OWNER" 2>/dev/null
	[[ -n "$OWNER" ]] && "$PYTHON" - "$BENCH" "$OWNER" <<'PY' >&2 || true
import sys
sys.path.insert(0, sys.argv[1])
import machines
pid = int(sys.argv[2])
found, _ = machines.leftovers()
mine = {k: [x for x in v if str(pid) in x] for k, v in found.items()}
machines.remove_leftovers(mine, log=lambda *a: None)
PY
}

# The owner: nothing in its command line says stress.py.
sleep 600 &
OWNER=$!
NS=swstress-$OWNER-m1
BR=sws${OWNER}br

# Its network, made for it by a helper that exits at once (as group.py
# makes one for itself), with a process in the machine.
"$PYTHON" - "$BENCH" "$OWNER" "$SW_NET_PREFIX.0/24" <<'PY' || fail "cannot make the network"
import subprocess, sys
sys.path.insert(0, sys.argv[1])
import machines
net = machines.Network(sys.argv[3], owner=int(sys.argv[2]))
net.add("m1")
net.create()
subprocess.Popen(machines.in_netns(net.netns("m1"), ["sleep", "600"]),
                 start_new_session=True)
PY
ip netns list | grep -q "^$NS\b" || fail "no namespace $NS after create"
[[ -n "$(ip netns pids "$NS")" ]] || fail "no process in $NS"
[[ -f /run/sweepfs-machines/$OWNER ]] || fail "the owner claimed nothing"

# 1. Another run's clean-up, while the owner runs.
"$PYTHON" "$STRESS" --cleanup >"$SW_TMP/cleanup1.log" 2>&1 ||
	fail "stress.py --cleanup failed: $(cat "$SW_TMP/cleanup1.log")"
ip netns list | grep -q "^$NS\b" ||
	fail "--cleanup removed the network of a live owner: $(cat "$SW_TMP/cleanup1.log")"
[[ -n "$(ip netns pids "$NS")" ]] ||
	fail "--cleanup stopped a process of a live owner's machine"
[[ -e /sys/class/net/$BR ]] || fail "--cleanup removed a live owner's bridge"
grep -q "$OWNER" "$SW_TMP/cleanup1.log" ||
	fail "--cleanup did not say it left pid $OWNER's run alone"

# 3. A claim that names another process (a recycled pid): not an owner.
claim=$(cat "/run/sweepfs-machines/$OWNER")
echo 1 >"/run/sweepfs-machines/$OWNER"
"$PYTHON" - "$BENCH" "$OWNER" <<'PY' || fail "a claim with another start time counted"
import sys
sys.path.insert(0, sys.argv[1])
import machines
sys.exit(1 if machines.owner_alive(int(sys.argv[2])) else 0)
PY
echo "$claim" >"/run/sweepfs-machines/$OWNER"

# 2. The owner gone: its machines are leftovers.
kill "$OWNER"
wait "$OWNER" 2>/dev/null || true
"$PYTHON" "$STRESS" --cleanup >"$SW_TMP/cleanup2.log" 2>&1 ||
	fail "stress.py --cleanup failed: $(cat "$SW_TMP/cleanup2.log")"
! ip netns list | grep -q "^$NS\b" ||
	fail "--cleanup left the namespace of a dead owner"
[[ ! -e /sys/class/net/$BR ]] || fail "--cleanup left the bridge of a dead owner"
[[ ! -e /run/sweepfs-machines/$OWNER ]] || fail "--cleanup left the dead owner's claim"
OWNER=
sw_pass
