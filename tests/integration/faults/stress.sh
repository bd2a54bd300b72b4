#!/bin/bash
# The stress harness, bench/stress.py, in quick mode: client machines in
# network namespaces run each workload (delete with rm -rf, Go's RemoveAll
# and sweepfs rm; a create storm in one shared directory; the mixed
# small-file load) against one master. Its JSON must show every client
# finished with the right counts and the files gone, and nothing of a run
# may be left behind (namespaces, links, processes, mounts, directories):
# not after a normal run, not after a SIGINT in the middle of one, and
# not after a SIGKILL once --cleanup has run. Its runs use a subnet of
# their own, so that another worktree's run does not stop them.
#
# The harness starts its own master, chunkserver and mounts (in the
# namespaces), so this scenario starts none itself.

. "$(dirname "$0")/../lib.sh"
sw_init stress --root

STRESS=$SW_SRC/../../bench/stress.py
command -v ip >/dev/null || skip "ip (iproute2) is not installed"
probe=sw-it-probe-$$
ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces"
ip netns del "$probe"

# If the scenario fails half-way, take down what a harness left.
sw_scenario_cleanup() {
	"$PYTHON" "$STRESS" --cleanup --base "$SW_TMP" >&2 || true
}

# A /24 of its own: not the harness's default, which another worktree's
# run may hold.
sw_free_prefix
NET_PREFIX=$SW_NET_PREFIX

# stress NAME ARGS...: run the harness in quick mode, its JSON in
# $SW_TMP/NAME.json and its output in $SW_TMP/NAME.log; sets STRESS_PID
# and STRESS_RC. In the background with STRESS_BG=1 (then no wait).
stress() {
	local name=$1
	shift
	"$PYTHON" "$STRESS" --build "$SWEEPFS_BUILD" --quick --base "$SW_TMP" \
		--subnet "$NET_PREFIX.0/24" \
		--out "$SW_TMP/$name.json" "$@" >"$SW_TMP/$name.log" 2>&1 &
	STRESS_PID=$!
	STRESS_RC=
	[[ "${STRESS_BG:-0}" == 1 ]] && return 0
	STRESS_RC=0
	wait "$STRESS_PID" || STRESS_RC=$?
}

# check_json NAME EXPR WHAT: EXPR, a Python expression on the result (r)
# and its phases (p), must be true.
check_json() {
	local ok
	ok=$("$PYTHON" -c '
import json, sys
r = json.load(open(sys.argv[1]))
p = r["phases"]
print(bool(eval(sys.argv[2])))' "$SW_TMP/$1.json" "$2") ||
		fail "$3: cannot evaluate $2"
	[[ "$ok" == True ]] || {
		cat "$SW_TMP/$1.log" >&2
		fail "$1: $3 ($2)"
	}
}

# expect_ok NAME: the run passed; print its table.
expect_pass() {
	if [[ "$STRESS_RC" != 0 ]]; then
		cat "$SW_TMP/$1.log" >&2
		fail "$1: the harness exited with status $STRESS_RC"
	fi
	check_json "$1" 'r["ok"] and r["complete"]' "the run is not ok"
	check_json "$1" 'all(not ph["problems"] for ph in p)' "problems reported"
	check_json "$1" 'all(len(ph["per_client"]) == ph["clients"] for ph in p)' \
		"a client is missing from the results"
}

# no_leftovers PID WHAT: nothing of harness PID remains.
no_leftovers() {
	local pid=$1 what=$2 f
	if ip netns list | grep -q "^swstress-$pid-"; then
		fail "$what: network namespaces left: $(ip netns list | grep "^swstress-$pid-" | tr '\n' ' ')"
	fi
	if ip -o link show | grep -q ": sws$pid[a-z]"; then
		fail "$what: links left: $(ip -o link show | grep -o "sws$pid[a-z0-9]*" | tr '\n' ' ')"
	fi
	for f in "$SW_TMP"/sweepfs-stress-"$pid"-*; do
		[[ -e "$f" ]] && fail "$what: run directory left: $f"
	done
	# Processes and mounts of the run name its directory; mounts live in
	# the machines' own mount namespaces, so look at every process's.
	for f in /proc/[0-9]*; do
		if grep -qs "sweepfs-stress-$pid-" "$f/cmdline"; then
			fail "$what: process left: $(tr '\0' ' ' <"$f/cmdline")"
		fi
		if grep -qs "sweepfs-stress-$pid-" "$f/mountinfo"; then
			fail "$what: a mount left, seen by ${f#/proc/}: $(grep "sweepfs-stress-$pid-" "$f/mountinfo" | head -n 1)"
		fi
	done
}

# wait_running NAME: until the harness says its workload runs.
wait_running() {
	wait_until 120 "$1 to start its workload" \
		grep -q "phase 0: running" "$SW_TMP/$1.log"
	alive "$STRESS_PID" || fail "$1: the harness ended before the workload"
}

log "delete, rm -rf: 1 client, then 3, each on its own 3000-file tree"
stress rmrf --workload delete --method rm-rf --clients 1,3 --files 3000
expect_pass rmrf
check_json rmrf '[ph["clients"] for ph in p] == [1, 3]' "phases"
check_json rmrf 'all(c["ops"] == 3000 for ph in p for c in ph["per_client"])' \
	"every client deleted 3000 files"
check_json rmrf 'all(ph["master_nodes"]["after"] == ph["master_nodes"]["expected"] for ph in p)' \
	"the master freed every node"
# Each file one unlink: a request, or an operation in a batch (deleg.h).
check_json rmrf 'all(c["wire"]["by_type"].get("unlink", 0) + c["wire"]["batch_ops"] >= 3000 for ph in p for c in ph["per_client"])' \
	"per-session counters"
check_json rmrf 'len(r["scaling"]) == 1 and r["scaling"][0]["aggregate_ratio"] > 0' \
	"the scaling ratio"
check_json rmrf 'r["context"]["commit"] and r["context"]["command"]' "context"
no_leftovers "$STRESS_PID" "after rm -rf"

if command -v go >/dev/null; then
	log "delete, Go's RemoveAll: 2 clients"
	stress removeall --workload delete --method removeall --clients 2 \
		--files 3000
	expect_pass removeall
	check_json removeall 'all(c["ops"] == 3000 for c in p[0]["per_client"])' \
		"every client deleted 3000 files"
	no_leftovers "$STRESS_PID" "after removeall"
else
	log "go is not installed: no RemoveAll run"
fi

log "delete, sweepfs rm: 2 clients"
stress sweepfsrm --workload delete --method sweepfs-rm --clients 2 --files 3000
expect_pass sweepfsrm
check_json sweepfsrm 'all(c["rm_stats"]["files"] == 3000 for c in p[0]["per_client"])' \
	"sweepfs rm's own count"
no_leftovers "$STRESS_PID" "after sweepfs rm"

log "create storm: 3 clients, one shared directory"
stress create --workload create --shared --clients 3 --files 2000
expect_pass create
check_json create 'p[0]["ops"] == 6000 and p[0]["latency"]["create"]["n"] == 6000' \
	"6000 creates, each timed"
check_json create 'p[0]["master_nodes"]["after"] == p[0]["master_nodes"]["expected"]' \
	"the master holds every file"
no_leftovers "$STRESS_PID" "after the create storm"

log "mixed load: 2 clients, data through a chunkserver"
stress mixed --workload mixed --clients 2 --duration 3
expect_pass mixed
check_json mixed 'all(c["ops"] > 0 and not c.get("nwrong") for c in p[0]["per_client"])' \
	"every client worked and read back what it wrote"
check_json mixed 'p[0]["verified_files"] > 0 and p[0]["verify_failures"] == 0' \
	"another mount read every file back"
check_json mixed 'set(p[0]["latency"]) >= {"read", "write", "list", "delete"}' \
	"latencies per operation"
no_leftovers "$STRESS_PID" "after the mixed load"

log "SIGINT in the middle of a run"
STRESS_BG=1 stress sigint --workload mixed --clients 2 --duration 120
wait_running sigint
sleep 1
kill -INT "$STRESS_PID"
wait_dead "$STRESS_PID" 60 || fail "the harness did not stop within 60 s of SIGINT"
assert_eq 130 "$SW_EXIT_STATUS" "the harness's exit status after SIGINT"
no_leftovers "$STRESS_PID" "after SIGINT"
# (What --cleanup finds besides is other worktrees' runs' business.)
"$PYTHON" "$STRESS" --cleanup --base "$SW_TMP" >"$SW_TMP/cleanup1.log" 2>&1 ||
	fail "--cleanup after SIGINT: $(cat "$SW_TMP/cleanup1.log")"
no_leftovers "$STRESS_PID" "after SIGINT and --cleanup"

log "SIGKILL in the middle of a run, then --cleanup"
STRESS_BG=1 stress sigkill --workload mixed --clients 2 --duration 120
wait_running sigkill
sleep 1
kill -KILL "$STRESS_PID"
wait_dead "$STRESS_PID" 10 || fail "the harness survived SIGKILL"
killed=$STRESS_PID
ip netns list | grep -q "^swstress-$killed-" ||
	fail "a SIGKILLed harness left nothing: the test proves nothing"
# A new run on the same subnet refuses to start next to the leftovers,
# and says what to do.
stress refused --workload create --clients 1 --files 10
assert_eq 2 "$STRESS_RC" "a run next to a killed run's leftovers"
grep -q -- "--cleanup" "$SW_TMP/refused.log" ||
	fail "the refusal does not mention --cleanup: $(cat "$SW_TMP/refused.log")"
"$PYTHON" "$STRESS" --cleanup --base "$SW_TMP" >"$SW_TMP/cleanup2.log" 2>&1 ||
	fail "--cleanup after SIGKILL: $(cat "$SW_TMP/cleanup2.log")"
no_leftovers "$killed" "after SIGKILL and --cleanup"

sw_pass
