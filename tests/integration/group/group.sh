#!/bin/bash
# A group of three masters on three machines (network namespaces), each
# with its etcd member: the leader is killed, cut off the network and
# restarted in turns for a minute while a writer saves files (exclusive
# create, write, fsync, rename) through a mount given the masters'
# list. None of its calls may fail, nothing acknowledged may be lost,
# fsck must be clean and the members must end with the same namespace
# (tests/integration/group/group.py does the work and says how).

. "$(dirname "$0")/../lib.sh"
sw_init group --root

command -v etcd >/dev/null || skip "etcd is not installed (etcd-server)"
command -v ip >/dev/null || skip "ip (iproute2) is not installed"
probe=sw-it-probe-$$
ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces"
ip netns del "$probe"

GROUP_PID=
# If the scenario fails or is stopped half-way: the driver first (it takes
# down what it started), then whatever of its machines is left.
sw_scenario_cleanup() {
	local ns
	if [[ -n "$GROUP_PID" ]] && kill -0 "$GROUP_PID" 2>/dev/null; then
		kill -TERM "$GROUP_PID" 2>/dev/null || true
		wait_dead "$GROUP_PID" 30 || kill -KILL "$GROUP_PID" 2>/dev/null || true
	fi
	for ns in $(ip netns list 2>/dev/null | grep -o "^swstress-${GROUP_PID:-x}-m[0-9]*"); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	done
	ip link del "sws${GROUP_PID:-x}br" 2>/dev/null || true
	for m in "$SW_TMP"/mnt-*; do
		[[ -d "$m" ]] && umount -l "$m" 2>/dev/null || true
	done
}

# A /24 of its own: with group.py's default, another worktree's run at
# the same time had the chunkserver talk to its masters ("the chunkserver
# did not register").
sw_free_prefix
"$PYTHON" "$SW_HERE/group.py" --build "$SWEEPFS_BUILD" --tmp "$SW_TMP" \
	--subnet "$SW_NET_PREFIX.0/24" --duration "${GROUP_DURATION:-60}" >"$SW_TMP/group.json" \
	2>"$SW_TMP/group.log" &
GROUP_PID=$!
rc=0
wait "$GROUP_PID" || rc=$?
cat "$SW_TMP/group.log" >&2
cat "$SW_TMP/group.json"
((rc != 77)) || skip "$(tail -n 1 "$SW_TMP/group.log")"
((rc == 0)) || fail "the group scenario failed (status $rc)"

# A leader killed or stopped: the writer goes on within 5 s (the goal).
# Cut off the network, it is found out by the clients' dead-peer timeout
# (2 s for a group) and the lease: bounded, not as tight.
"$PYTHON" - "$SW_TMP/group.json" <<'PY' || fail "failover too slow, or calls failed"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["events"] and r["lost"] == 0, r
# The writer's calls in flight at a failover are sent again: none fails.
if r["errors"]:
    print("the writer's calls failed: %s" % r["error_kinds"], file=sys.stderr)
    sys.exit(1)
slow = [e for e in r["events"]
        if e["failover_s"] > (15.0 if e["event"] == "cut" else 5.0)]
if slow:
    print("too slow: %s" % slow, file=sys.stderr)
    sys.exit(1)
PY
sw_pass
