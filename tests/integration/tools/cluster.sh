#!/bin/bash
# cluster: the cluster launcher itself (scripts/swcluster.py), which every
# other scenario, demo.sh and the benchmarks start their daemons with.
#
#  1. A port that is taken: a master told to use it moves to a free one
#     and says which; with --fixed-port it fails, saying why, with the
#     end of its log, and leaves nothing running.
#  2. Restart keeps the address: `master kill` then `master start` comes
#     back on the same port, and the mount that was connected still works.
#  3. A caller that dies without cleaning up (SIGKILL: no trap runs):
#     the watchers unmount its mount and stop its chunkserver and master,
#     each with SIGTERM (exit status 0, so a clean shutdown).
#  4. Sanitizer reports in a log are found (status 1) and a clean log
#     is not.

. "$(dirname "$0")/../lib.sh"
sw_init cluster

SWC=(python3 "$SW_CLUSTER_PY")
[[ "$PYTHON" == python3 ]] || SWC=("$PYTHON" "$SW_CLUSTER_PY")

# ---- 1. a taken port ----------------------------------------------------------

log "a taken port: the master moves, or fails with --fixed-port"
W1=$SW_TMP/w1
mkdir -p "$W1"
swc1() { "${SWC[@]}" -w "$W1" --build "$SWEEPFS_BUILD" "$@"; }
# Hold a port with a listening socket for the length of this part.
"$PYTHON" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(600)' >"$SW_TMP/held" &
HOLDER=$!
wait_until 10 "the port holder" test -s "$SW_TMP/held"
held=$(cat "$SW_TMP/held")
rc=0
swc1 master start --port "$held" --fixed-port >"$SW_TMP/fixed.out" \
	2>"$SW_TMP/fixed.err" || rc=$?
assert_eq 1 "$rc" "exit status with a taken --fixed-port"
grep -q 'master did not start' "$SW_TMP/fixed.err" ||
	fail "no reason given: $(cat "$SW_TMP/fixed.err")"
grep -qi 'address already in use' "$SW_TMP/fixed.err" ||
	fail "the end of the log is not shown: $(cat "$SW_TMP/fixed.err")"
out=$(swc1 master start --port "$held")
read -r pid1 port1 <<<"$out"
assert_ne "$held" "$port1" "the master's port"
alive "$pid1" || fail "the master is not running"
grep -q "listening on 127.0.0.1:$port1" "$W1/master.log" ||
	fail "the master's log does not say it listens on $port1"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true

# ---- 2. a restart keeps the address ----------------------------------------

log "master kill + start: same port; the mount carries on"
swc1 chunkserver start >/dev/null
swc1 wait-registered
mpid=$(swc1 mount "$W1/mnt")
alive "$mpid" || fail "no mount client"
echo one >"$W1/mnt/f"
assert_eq 137 "$(swc1 master kill)" "exit status of a killed master"
out=$(swc1 master start)
read -r pid2 port2 <<<"$out"
assert_eq "$port1" "$port2" "the restarted master's port"
assert_ne "$pid1" "$pid2" "the restarted master's pid"
echo two >>"$W1/mnt/f"
assert_eq "one two" "$(tr '\n' ' ' <"$W1/mnt/f" | sed 's/ $//')" \
	"the file through the mount after the restart"
swc1 down
is_sweepfs_mount "$W1/mnt" && fail "down left the mount"
alive "$pid2" && fail "down left the master"
alive "$mpid" && fail "down left the mount client"

# ---- 3. the caller dies ----------------------------------------------------

log "a caller killed with SIGKILL: its watchers clean up"
W3=$SW_TMP/w3
mkdir -p "$W3"
# The caller, in a process of its own: starts a cluster, reports its
# pids, then waits to be killed.
SWEEPFS_BUILD=$SWEEPFS_BUILD W3=$W3 bash -c '
	export SWCLUSTER_OWNER=$$
	swc() { '"${SWC[*]}"' -w "$W3" --build "$SWEEPFS_BUILD" "$@"; }
	read -r m _ <<<"$(swc master start)"
	read -r _ c _ <<<"$(swc chunkserver start)"
	swc wait-registered
	p=$(swc mount "$W3/mnt")
	echo "$m $c $p" >"$W3/pids"
	exec sleep 600' >"$SW_TMP/caller.log" 2>&1 &
CALLER=$!
wait_until 60 "the caller's cluster" test -s "$W3/pids"
read -r m c p <"$W3/pids"
for x in "$m" "$c" "$p"; do
	alive "$x" || fail "process $x of the caller's cluster is not running"
done
is_sweepfs_mount "$W3/mnt" || fail "the caller's mount is missing"
kill -KILL "$CALLER"
wait "$CALLER" 2>/dev/null || true
gone() { ! alive "$m" && ! alive "$c" && ! alive "$p" && ! is_sweepfs_mount "$W3/mnt"; }
wait_until 60 "the caller's cluster to go" gone
for f in master cs1 "mount_$W3/mnt"; do
	f=$W3/.swcluster/${f//[^A-Za-z0-9_.-]/_}.status
	[[ -f "$f" ]] || fail "no exit status in $f"
	assert_eq 0 "$(cat "$f")" "exit status in $f"
done

# ---- 4. sanitizer reports --------------------------------------------------

log "sanitizer reports in logs are found"
mkdir "$SW_TMP/logs"
printf 'started\nall well\n' >"$SW_TMP/logs/clean.log"
"${SWC[@]}" sanitizer "$SW_TMP/logs" 2>"$SW_TMP/san.err" ||
	fail "a clean log was reported: $(cat "$SW_TMP/san.err")"
printf 'x\n==1==ERROR: LeakSanitizer: detected memory leaks\nDirect leak\n' \
	>"$SW_TMP/logs/cs9.log.1234"
rc=0
"${SWC[@]}" sanitizer "$SW_TMP/logs" 2>"$SW_TMP/san.err" || rc=$?
assert_eq 1 "$rc" "status with a report"
grep -q 'sanitizer report in .*cs9.log.1234' "$SW_TMP/san.err" ||
	fail "the report does not name its file: $(cat "$SW_TMP/san.err")"
grep -q 'Direct leak' "$SW_TMP/san.err" || fail "the report is not shown"
rm -r "$SW_TMP/logs"

sw_pass
