#!/bin/bash
# kill -9 of the master in the middle of a stream of creates, and a torn
# changelog tail: no acknowledged change may be lost.
#
# Each round:
#  1. a creator (crash.py, 4 threads) makes CRASH_ENTRIES entries in a new
#     directory through the mount and logs each name only after its
#     system call returned success;
#  2. once it has logged a random number of names, plus a random delay,
#     the master gets SIGKILL and is restarted after a random pause; the
#     mount reconnects by itself, calls in flight fail with EIO (and are
#     not counted), calls made meanwhile wait;
#  3. after the creator finished, a fresh mount (cold kernel caches, so
#     every lookup reaches the master) checks: every acknowledged name
#     exists with its type, readdir lists each name once and nothing
#     unknown, every listed name can be looked up, nlink = 2 + subdirs,
#     and the master counts exactly the nodes it had before the round
#     plus the directory and what it lists (no leaked or lost node);
#  4. torn tail: two more mkdirs, SIGKILL, the newest changelog file loses
#     a few bytes (the second mkdir's record is torn), restart: the master
#     logs the cut, the first mkdir is there, the second is not, nothing
#     else is lost.
# At the end, after a clean stop and start (a checkpoint of the replayed
# state), every round is checked again and the master's node count is
# compared with a walk of the whole tree.
# Rounds cycle through changelog_sync = always, interval, never: in each
# a reply leaves only after its record reached the kernel, which is all a
# kill -9 needs.
#
# CRASH_ROUNDS (default 3), CRASH_ENTRIES (10000) and CRASH_SEED (random,
# printed) make a failure reproducible in its choices.
. "$(dirname "$0")/../lib.sh"
sw_init crash --root

ROUNDS=${CRASH_ROUNDS:-3}
ENTRIES=${CRASH_ENTRIES:-10000}
SEED=${CRASH_SEED:-$(date +%s%N | cut -c10-18)}
SEED=$((10#$SEED)) # digits from the clock may start with 0: not octal
THREADS=4
POLICIES=(always interval never)
log "seed $SEED (CRASH_SEED=$SEED to repeat), $ROUNDS rounds of $ENTRIES entries"
RANDOM=$SEED

start_master --set changelog_sync=always
start_mount
M=$SW_MNT

# Wait until FILE has at least N lines; fails after SECONDS.
wait_lines() {
	local file=$1 n=$2 limit=$(($3 * 100)) i
	for ((i = 0; i < limit; i++)); do
		(($(wc -l <"$file") >= n)) && return 0
		# the creator ended early: nothing to wait for
		alive "$creator" || return 0
		sleep 0.01
	done
	fail "timed out waiting for $n acknowledged creates"
}

master_nodes() {
	# statfs: f_ffree = 2^32 - nodes (sweepfs's op_statfs)
	echo $((4294967296 - $(stat -f -c %d "$1")))
}

# check_round ROUND MOUNT: check round ROUND's directory through MOUNT;
# sets LISTED to the number of entries it lists.
check_round() {
	local r=$1 v=$2 out
	if ! out=$("$PYTHON" "$SW_HERE/crash.py" verify "$v/round$r" \
		"$SW_TMP/ok.$r" "$SW_TMP/fail.$r" $((THREADS * 2)) 2>&1); then
		printf '%s\n' "$out" >&2
		fail "round $r: the master lost or mangled entries (seed $SEED)"
	fi
	log "round $r: $out"
	LISTED=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9]*\) listed.*/\1/p')
}

# verify ROUND: check the round through a fresh mount (cold kernel
# caches: every lookup reaches the master), and that the master holds no
# node beyond what was there before the round, the round's directory and
# what it lists.
verify() {
	local r=$1 v=$SW_TMP/verify
	start_mount "$v"
	check_round "$r" "$v"
	assert_eq $((nodes_before + 1 + LISTED)) "$(master_nodes "$v")" \
		"round $r: nodes the master counts (before the round + directory + entries)"
	stop_mount "$v"
}

t_start=$SECONDS
for ((r = 1; r <= ROUNDS; r++)); do
	policy=${POLICIES[$(((r - 1) % 3))]}
	d=round$r
	nodes_before=$(master_nodes "$M")
	mkdir "$M/$d"
	: >"$SW_TMP/ok.$r"
	: >"$SW_TMP/fail.$r"
	kill_at=$((100 + RANDOM % (ENTRIES * 8 / 10)))
	delay_ms=$((RANDOM % 50))
	down_ms=$((RANDOM % 800))
	log "round $r ($policy): SIGKILL after $kill_at acknowledged creates + $delay_ms ms, down for $down_ms ms"
	timeout 600 "$PYTHON" "$SW_HERE/crash.py" create "$M/$d" "$ENTRIES" \
		"$THREADS" "$SW_TMP/ok.$r" "$SW_TMP/fail.$r" &
	creator=$!
	wait_lines "$SW_TMP/ok.$r" "$kill_at" 300
	sleep "$(printf '0.%03d' "$delay_ms")"
	kill_master
	acked_at_kill=$(wc -l <"$SW_TMP/ok.$r")
	sleep "$(printf '0.%03d' "$down_ms")"
	restart_master start
	wait "$creator" || fail "round $r: the creator failed (status $?)"
	log "round $r: $acked_at_kill acknowledged at the kill, $(wc -l <"$SW_TMP/fail.$r") failed calls"
	verify "$r"

	# Torn tail: the last record loses a few bytes.
	mkdir "$M/$d/torn_keep" "$M/$d/torn_lost"
	echo torn_keep >>"$SW_TMP/ok.$r"
	kill_master
	newest=$(ls "$SW_META"/changelog.* | sort | tail -n 1)
	size=$(stat -c %s "$newest")
	cut=$((1 + RANDOM % 8))
	truncate -s $((size - cut)) "$newest"
	next=${POLICIES[$((r % 3))]}
	SW_MASTER_ARGS=(--set changelog_sync="$next")
	# This start's lines only: the kill in the middle of the creates may
	# have torn a record itself (a write() cut short by SIGKILL, never
	# one acknowledged), and that start cut it too.
	logged=$(stat -c %s "$SW_MASTER_LOG")
	restart_master start
	n=$(tail -c +$((logged + 1)) "$SW_MASTER_LOG" |
		grep -c 'cutting .* bytes of torn tail' || true)
	assert_eq 1 "$n" "round $r: log lines about cutting the torn tail"
	verify "$r"
	start_mount "$SW_TMP/verify"
	assert_exists "$SW_TMP/verify/$d/torn_keep"
	assert_missing "$SW_TMP/verify/$d/torn_lost"
	stop_mount "$SW_TMP/verify"
	# The lost name can be made again, and the directory goes on.
	sleep 1.1 # the first mount's entry cache still holds torn_lost
	mkdir "$M/$d/torn_lost"
	echo torn_lost >>"$SW_TMP/ok.$r"
done
log "$ROUNDS rounds in $((SECONDS - t_start)) s"

# Everything again after a clean stop (a checkpoint of replayed state),
# and the master's node count against a walk of the whole tree.
restart_master term
# The clean stop wrote a checkpoint of everything (master_release()):
# the start after it replays nothing.
last=$(grep 'changes replayed' "$SW_MASTER_LOG" | tail -n 1)
[[ "$last" == *", 0 changes replayed)"* ]] ||
	fail "the start after a clean stop replayed changes: $last"
v=$SW_TMP/verify
start_mount "$v"
for ((r = 1; r <= ROUNDS; r++)); do
	check_round "$r" "$v"
done
assert_eq "$(find "$v" | wc -l)" "$(master_nodes "$v")" \
	"nodes the master counts versus nodes in the tree"
stop_mount "$v"
sw_pass
