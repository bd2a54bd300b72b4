#!/bin/bash
# Fault injection: crashes, a cut network and a full disk, each followed
# by a check that no acknowledged operation was lost. An operation is
# acknowledged when its system call (for data: write and fsync) returned
# success; only acknowledged operations are logged and checked, and
# failures must be EIO (or ENOSPC where the disk is full).
#
# The clients are "machines": network namespaces c1..c5 on a bridge,
# each with its own sweepfs mount (the mount process runs in the
# namespace through nsenter --net, so its FUSE mount stays visible on the
# host). The master and the chunkservers listen on the bridge's address.
# The master runs with changelog_sync=always (a reply waits for the
# fdatasync of its record: acknowledged means durable, power loss
# included) on a metadata directory that is a small tmpfs of its own.
#
#  1. create storm from 4 clients (create, mkdir, rename, write+fsync of
#     small files); the master gets SIGKILL 2 or 3 times at random
#     moments and is restarted; the mounts reconnect by themselves, calls
#     in flight are sent again and succeed, each made once (a write of
#     new data may fail with EIO just after a restart), nothing hangs
#     (every wait is bounded).
#     Then, through a fresh mount: every acknowledged name is there with
#     its type and (fsync'd) content, nothing unknown is; fsck is clean.
#  2. rmr of a 100,000-node tree (snapshots of a 500-file tree) with a
#     slow purge; SIGKILL of the master in the middle of the purge,
#     restart: the tree stays gone, the purge resumes and drains, the
#     node and chunk counts return to what they were, acknowledged files
#     beside it are intact, fsck is clean.
#  3. goal 2 on two chunkservers; kill -9 of one under a writer that
#     fsyncs each block: every acknowledged block reads back, and fsck is
#     clean after the restart and re-replication.
#  4. a client whose network is cut (its eth0 goes down) holds a file
#     open; another client unlinks it: the master keeps it (orphan,
#     chunk) while the session may come back, and frees it once the dead
#     connection is noticed (peer_timeout) and session_timeout has passed;
#     a call made on the cut client fails with EIO in bounded time; when
#     the network returns the client works again. If flock between two
#     mounts works (probed), a flock held by the cut client is released
#     the same way.
#  5. the metadata directory's tmpfs fills up: mutations through the
#     mount fail with ENOSPC, reads and lookups work, the master stays
#     up; once space is freed mutations succeed again; after a SIGKILL
#     and restart everything acknowledged (before, during and after the
#     full disk) is there and nothing refused with ENOSPC is; fsck clean.
#  6. a client holding a directory's delegation is cut from the network;
#     another client removes a file there and makes one (the master
#     takes the delegation back after deleg_timeout): from then on the
#     cut client must not show the removed file nor deny the new one (it
#     dropped what it held when its lease ran out, and the kernel's
#     long-lived names with it); back on the network, it sees both.
#  7. the same with no delegation, only a directory's summary cached (a
#     listing bigger than dircache_entries): past its lease the cut
#     client does not deny a name another client made.
# At the end every client's storm is checked again (after all the later
# restarts), and the script prints
#   faults: injected N, acknowledged ops checked M, lost 0
# where M counts distinct acknowledged operations, each checked after at
# least one fault. FAULTS_SEED (random, printed) repeats the choices.
. "$(dirname "$0")/../lib.sh"
sw_init faults --root
command -v nsenter >/dev/null || skip "nsenter is not installed"
command -v ip >/dev/null || skip "ip (iproute2) is not installed"

SEED=${FAULTS_SEED:-$(date +%s%N | cut -c10-18)}
SEED=$((10#$SEED)) # digits from the clock may start with 0: not octal
log "seed $SEED (FAULTS_SEED=$SEED to repeat)"
RANDOM=$SEED
FP=$SW_HERE/faults.py
DF=$SW_SRC/datafile.py
SESSION_TIMEOUT=3 # s
PEER_TIMEOUT=2    # s
MASTER_TIMEOUT=5  # s, the mounts' -o master_timeout
FAULTS=0          # faults injected
CHECKED=0         # distinct acknowledged operations checked after a fault
BG_PIDS=()        # our background workers, stopped before the cleanup

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# fsop_ok OP ARGS...: the call succeeds (fsop prints the errno otherwise).
fsop_ok() { [[ "$("$PYTHON" "$SW_SRC/fsop.py" "$@" 2>&1)" == OK* ]]; }

# ---- the machines -----------------------------------------------------------

# A /24 for the bridge that no route on this host touches.
sw_free_prefix
NET_PREFIX=$SW_NET_PREFIX
BR=swft$$br
NETNS=() # namespaces made

sw_scenario_cleanup() {
	local ns
	for ns in "${NETNS[@]}"; do
		ip netns del "$ns" 2>/dev/null
		# the pair goes with the namespace, but not at once (nor while
		# a socket keeps the namespace alive): delete our end now
		ip link del "swft$$${ns##*-}" 2>/dev/null
	done
	ip link del "$BR" 2>/dev/null
	return 0
}

# Our own workers first (a holder keeps a mount busy), then lib.sh's.
_faults_exit() {
	local rc=$? p
	trap - ERR
	set +eE
	# TERM first: timeout(1) passes it on to its child
	for p in "${BG_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	((${#BG_PIDS[@]})) && sleep 0.5
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	(exit $rc) # _cleanup takes the scenario's status from $?
	_cleanup
}
trap _faults_exit EXIT

ip link add "$BR" type bridge 2>/dev/null || skip "cannot create a bridge"
ip addr add "$NET_PREFIX.1/24" dev "$BR"
ip link set "$BR" up
SW_MASTER_HOST=$NET_PREFIX.1
SW_CS_HOST=$NET_PREFIX.1

# add_machine K: network namespace swft-PID-cK with eth0 at .K+1.
add_machine() {
	local k=$1 ns=swft-$$-c$1 veth=swft$$c$1
	ip netns add "$ns" || skip "cannot create a network namespace"
	NETNS+=("$ns")
	ip link add "$veth" type veth peer name eth0 netns "$ns"
	ip link set "$veth" master "$BR" up
	ip -n "$ns" addr add "$NET_PREFIX.$((k + 1))/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" link set lo up
}

# machine_mount K MOUNTPOINT [OPTIONS]: a sweepfs mount whose client runs
# in machine cK (network namespace only: the FUSE mount is the host's),
# cleaned up like lib.sh's mounts.
machine_mount() {
	local k=$1 mnt=$2 opts=${3:-master_timeout=$MASTER_TIMEOUT}
	start_mount "$mnt" "" "$opts" "/run/netns/swft-$$-c$k"
}

for k in 1 2 3 4 5; do
	add_machine "$k"
done

# ---- the servers -------------------------------------------------------------

SW_META=$SW_TMP/meta
sw_tmpfs "$SW_META" 160m
SW_CHUNKSERVERS=2
MASTER_BASE=(--set changelog_sync=always --set session_timeout=${SESSION_TIMEOUT}s
	--set peer_timeout=${PEER_TIMEOUT}s)
start_master "${MASTER_BASE[@]}"
start_mount "$SW_TMP/mnt" "" master_timeout=$MASTER_TIMEOUT
M=$SW_MNT

status_is() { [[ "$(sw_status "d[\"$1\"]")" == "$2" ]]; }
nodes() { sw_status 'd["nodes"]'; }
chunks() { sw_status 'd["chunks"]'; }
lines() { wc -l <"$1"; }
master_alive() { [[ -n "$SW_MASTER_PID" ]] && alive "$SW_MASTER_PID"; }

# verify_storm K MOUNT: check client K's storm through MOUNT; prints the
# number of acknowledged operations checked.
verify_storm() {
	local k=$1 v=$2 out
	if ! out=$("$PYTHON" "$FP" verify "$v/s1/c$k" "$SW_TMP/ok.$k" \
		"$SW_TMP/fail.$k" 2>&1); then
		printf '%s\n' "$out" >&2
		fail "client $k: acknowledged operations lost or mangled (seed $SEED)"
	fi
	log "client $k: $out"
	sed -n 's/^checked \([0-9]*\) .*/\1/p' <<<"$out" | head -n 1
}

# ==== 1. SIGKILL of the master during a create storm from 4 clients =========
log "== 1. SIGKILL of the master during a create storm from 4 clients"
mkdir "$M/s1"
for k in 1 2 3 4; do
	mkdir "$M/s1/c$k"
	machine_mount "$k" "$SW_TMP/c$k"
done
rm -f "$SW_TMP/stop1"
storm_pids=()
for k in 1 2 3 4; do
	: >"$SW_TMP/ok.$k"
	: >"$SW_TMP/fail.$k"
	timeout 240 "$PYTHON" "$FP" storm "$SW_TMP/c$k/s1/c$k" "$SEED.$k" \
		"$SW_TMP/ok.$k" "$SW_TMP/fail.$k" "$SW_TMP/stop1" 1000000 \
		2>"$SW_TMP/storm.$k.err" &
	storm_pids+=($!)
	BG_PIDS+=($!)
done
acked_total() { cat "$SW_TMP"/ok.[1-4] | wc -l; }
# wait_acked N SECONDS: the clients together acknowledged N operations.
acked_or_ended() {
	local p
	(($(acked_total) >= $1)) && return 0
	for p in "${storm_pids[@]}"; do
		alive "$p" || return 0
	done
	return 1
}
wait_acked() {
	local p
	sw_poll "$2" 0.05 acked_or_ended "$1" ||
		fail "timed out after $2 s waiting for $1 acknowledged operations (have $(acked_total))"
	for p in "${storm_pids[@]}"; do
		alive "$p" || fail "a storm client ended early: $(cat "$SW_TMP"/storm.*.err)"
	done
}
# reconnected_all N: every mount has logged N reconnections.
reconnected_all() {
	local k
	for k in 1 2 3 4; do
		(($(grep -c 'reconnected to the master' "$SW_TMP/c$k.log") >= $1)) || return 1
	done
}
KILLS=$((2 + RANDOM % 2))
target=0
for ((j = 1; j <= KILLS; j++)); do
	target=$((target + 300 + RANDOM % 500))
	delay_ms=$((RANDOM % 60))
	down_ms=$((RANDOM % 700))
	wait_acked "$target" 90
	sleep "$(printf '0.%03d' "$delay_ms")"
	kill_master
	FAULTS=$((FAULTS + 1))
	log "kill $j/$KILLS: SIGKILL at $(acked_total) acknowledged (+$delay_ms ms), down $down_ms ms"
	sleep "$(printf '0.%03d' "$down_ms")"
	restart_master start
	# Every mount is back before the next kill: one killed while the
	# mounts were still retrying would not be seen by them.
	wait_until 30 "every mount to reconnect after kill $j" reconnected_all "$j"
done
for k in 1 2 3 4; do
	at_restart[k]=$(lines "$SW_TMP/ok.$k")
done
# every client goes on by itself after the last restart
wait_acked $(($(acked_total) + 400)) 90
rm_wait=$(now_ms)
touch "$SW_TMP/stop1"
for k in 1 2 3 4; do
	p=${storm_pids[k - 1]}
	wait "$p" || fail "storm client $k failed or hung (status $?): $(cat "$SW_TMP/storm.$k.err")"
	(($(lines "$SW_TMP/ok.$k") > at_restart[k])) ||
		fail "client $k acknowledged nothing after the last restart"
	n=$(grep -c 'reconnected to the master' "$SW_TMP/c$k.log" || true)
	assert_ge "$KILLS" "$n" "client $k: reconnections logged by its mount"
	# Namespace calls do not fail: those in flight at a kill are sent
	# again, flagged once (proto/frame.h), and those made while the
	# master is down wait for it. (Writes of new data may fail, with
	# EIO, in the second or so after a restart before the chunkservers
	# have registered again.)
	n=$(grep -vc '^data ' "$SW_TMP/fail.$k" || true)
	assert_eq 0 "$n" "client $k: namespace calls that failed"
done
BG_PIDS=()
log "storm: $(acked_total) acknowledged, $(cat "$SW_TMP"/fail.[1-4] | wc -l) failed calls ($(cat "$SW_TMP"/fail.[1-4] | awk '{ print $1, $NF }' | sort | uniq -c | xargs)); clients stopped in $(($(now_ms) - rm_wait)) ms"
start_mount "$SW_TMP/v" "" master_timeout=$MASTER_TIMEOUT
for k in 1 2 3 4; do
	n=$(verify_storm "$k" "$SW_TMP/v")
	CHECKED=$((CHECKED + n))
done
stop_mount "$SW_TMP/v"
wait_fsck_clean 30 "after the storm"
for k in 1 2 3 4; do
	stop_mount "$SW_TMP/c$k"
done
S1_ACKED=$CHECKED
log "1: $KILLS kills, $S1_ACKED acknowledged operations checked, lost 0"

# ==== 2. SIGKILL of the master during a purge ===============================
log "== 2. SIGKILL of the master during the purge of a 100,000-node tree"
SW_MASTER_ARGS=("${MASTER_BASE[@]}" --set purge_duty=1 --set purge_slice=20)
restart_master term
mkdir -p "$M/s2/keep"
declare -A keep_sum
for i in $(seq 1 20); do
	keep_sum[$i]=$("$PYTHON" "$DF" write "$M/s2/keep/k$i" $((1000 + i * 777)) "$SEED$i" seq --fsync)
done
n_base=$(nodes)
c_base=$(chunks)
"$PYTHON" - "$M/s2/big/src" "$SEED" <<'EOF'
import os, random, sys
d, seed = sys.argv[1], sys.argv[2]
rng = random.Random("big/" + seed)
os.makedirs(d)
for i in range(500):
    with open(os.path.join(d, "f%03d" % i), "wb") as f:
        f.write(rng.randbytes(100 + i))
EOF
SNAPS=199
for ((i = 1; i <= SNAPS; i++)); do
	sw_tool snapshot "$M/s2/big/src" "$M/s2/big/s$i" >/dev/null
done
n_big=$((1 + (SNAPS + 1) * 501))
assert_eq $((n_base + n_big)) "$(nodes)" "nodes with the big tree"
assert_eq $((c_base + 500)) "$(chunks)" "chunks with the big tree (shared by its snapshots)"
sw_tool rmr "$M/s2/big" >/dev/null
gone() { ! stat "$1" >/dev/null 2>&1; }
wait_until 3 "the removed tree to disappear from the mount" gone "$M/s2/big"
# Killed as soon as a poll finds it between a quarter and three quarters
# done (at purge_duty=1, seconds from either end): a
# second read before the kill once found it nearly done on a loaded
# machine, and the restart then found nothing left to resume.
mid() {
	left_kill=$(sw_status 'd["purge_left"]')
	((left_kill > n_big / 4 && left_kill < n_big * 3 / 4))
}
wait_until 60 "the purge to get going" mid
kill_master
FAULTS=$((FAULTS + 1))
# Read before waiting for the chunkservers: their reconnect back-off may
# take seconds, and the purge goes on meanwhile (this read once found it
# done already).
_launch_master --fixed-port || fail "the master did not restart"
left_restart=$(sw_status 'd["purge_left"]')
wait_chunkservers
log "purge: $left_kill nodes left at the kill, $left_restart after the restart"
assert_ge 1 "$left_restart" "nodes left to purge after the restart (the purge resumes)"
start_mount "$SW_TMP/v" "" master_timeout=$MASTER_TIMEOUT
assert_missing "$SW_TMP/v/s2/big"
stop_mount "$SW_TMP/v"
# the purge goes on by itself; then a clean restart (a checkpoint in the
# middle of it) with a faster pace, to drain it
purge_below() { (($(sw_status 'd["purge_left"]') < $1)); }
wait_until 30 "the purge to go on after the restart" purge_below "$left_restart"
SW_MASTER_ARGS=("${MASTER_BASE[@]}")
restart_master term
start_mount "$SW_TMP/v" "" master_timeout=$MASTER_TIMEOUT
assert_missing "$SW_TMP/v/s2/big"
wait_until 120 "the purge to finish after the restart" status_is purge_left 0
assert_eq 0 "$(sw_status 'd["purge_roots"]')" "trees being purged"
assert_eq "$n_base" "$(nodes)" "nodes after the purge"
assert_eq "$c_base" "$(chunks)" "chunks after the purge"
for i in $(seq 1 20); do
	assert_eq "OK ${keep_sum[$i]}" "$("$PYTHON" "$DF" read "$SW_TMP/v/s2/keep/k$i")" \
		"acknowledged file k$i beside the purged tree"
done
CHECKED=$((CHECKED + 20 + 1)) # the files beside it, and the rmr itself
stop_mount "$SW_TMP/v"
settled() { status_is chunk_deletes_pending 0 && fsck_ok; }
wait_until 60 "chunk deletions to drain and fsck to be clean after the purge" settled
log "2: purge resumed after the kill and drained, lost 0"

# ==== 3. kill -9 of a chunkserver under fsync'd writes, goal 2 ================
log "== 3. kill -9 of a chunkserver under fsync'd writes, goal 2"
mkdir "$M/s3"
sw_tool setgoal 2 "$M/s3" >/dev/null
BLOCK=$((64 << 10))
MAXBLOCKS=4000 # the writer stops at the stop file long before
kill_at=$((8 + RANDOM % 40))
victim=$((1 + RANDOM % 2))
: >"$SW_TMP/ack3"
rm -f "$SW_TMP/stop3"
"$PYTHON" "$DF" append "$M/s3/g2" "$SEED" "$SW_TMP/ack3" "$BLOCK" "$MAXBLOCKS" \
	"$SW_TMP/stop3" 2>"$SW_TMP/ack3.err" &
writer=$!
BG_PIDS+=($writer)
# wait_blocks N: the writer acknowledged N blocks (and still writes);
# within 60 s of a loaded machine.
blocks_or_ended() { (($(lines "$SW_TMP/ack3") >= $1)) || ! alive "$writer"; }
wait_blocks() {
	sw_poll 60 0.01 blocks_or_ended "$1" || true
	(($(lines "$SW_TMP/ack3") >= $1)) || fail "the writer did not reach block $1"
	alive "$writer" || fail "the writer ended before the fault"
}
wait_blocks "$kill_at"
kill_chunkserver "$victim"
FAULTS=$((FAULTS + 1))
k=$(lines "$SW_TMP/ack3")
log "chunkserver $victim killed after $k acknowledged blocks"
sleep 1
restart_chunkserver "$victim" start
# the writer goes on, through the restarted server too
wait_blocks $(($(lines "$SW_TMP/ack3") + 20))
touch "$SW_TMP/stop3"
wait "$writer" || { cat "$SW_TMP/ack3.err" >&2; fail "the writer failed (goal 2)"; }
BG_PIDS=()
n3=$(lines "$SW_TMP/ack3")
log "writer: $n3 blocks acknowledged, $(grep -c . "$SW_TMP/ack3.err" || true) failed calls"
wait_fsck_clean 90 "re-replication after the chunkserver's restart"
drop_caches
start_mount "$SW_TMP/v" "" master_timeout=$MASTER_TIMEOUT
assert_ge $((n3 * BLOCK)) "$(stat -c %s "$SW_TMP/v/s3/g2")" "size of the written file"
out=$("$PYTHON" "$DF" verify "$SW_TMP/v/s3/g2" "$SW_TMP/ack3") ||
	{ printf '%s\n' "$out" >&2; fail "fsync'd blocks lost after kill -9 of a chunkserver (seed $SEED)"; }
stop_mount "$SW_TMP/v"
CHECKED=$((CHECKED + n3))
log "3: $out, lost 0"

# cut_c5 [WHAT]: machine c5 loses its network; t_cut says when.
cut_c5() {
	ip -n "$CUT_NS" link set eth0 down
	t_cut=$(now_ms)
	FAULTS=$((FAULTS + 1))
	log "machine c5 cut from the network${1:+, $1}"
}

# ==== 4. a client cut from the network =====================================
log "== 4. a client cut from the network holds a file open"
CUT_NS=swft-$$-c5
CM=$SW_TMP/c5
machine_mount 5 "$CM" "master_timeout=$MASTER_TIMEOUT"
mkdir "$M/s4"
sum4=$("$PYTHON" "$DF" write "$M/s4/held" 100000 "$SEED" seq --fsync)
touch "$M/s4/lockfile"
c0=$(chunks)
o0=$(sw_status 'd["orphans"]')
rm -f "$SW_TMP/held.ready"
"$PYTHON" - "$CM/s4/held" "$SW_TMP/held.ready" <<'EOF' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
assert len(os.pread(fd, 100000, 0)) == 100000
open(sys.argv[2], "w").close()
time.sleep(600)
EOF
holder=$!
BG_PIDS+=($holder)
wait_until 20 "the cut client to open its file" test -e "$SW_TMP/held.ready"
cut_open() {
	sw_status '[s["open_files"] for s in d["sessions"] if s["peer"].startswith("'"$NET_PREFIX.6"':")]' |
		grep -q '\[[1-9]'
}
cut_open || { sw_tool status >&2; fail "the master does not list the cut client's open file"; }

# An optional flock: only if a flock taken through one mount is seen by
# another (the master arbitrates locks); otherwise it is skipped.
FLOCK=0
# hold_flock FILE READYFILE SECONDS: take an exclusive flock on FILE,
# touch READYFILE, hold the lock (one process: killing it drops the lock
# and the file).
# Run it in the background only: it execs, so that $! is the holder.
hold_flock() {
	exec "$PYTHON" -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(float(sys.argv[3]))' "$@"
}
flock_probe() {
	local h got
	hold_flock "$M/s4/lockfile" "$SW_TMP/probe.held" 10 &
	h=$!
	wait_until 10 "the probe to take its lock" test -e "$SW_TMP/probe.held"
	# status 75 (-E): the lock is taken; anything else: not seen, or
	# flock itself failed
	got=0
	timeout 5 flock -E 75 -n -x "$SW_TMP/c1/s4/lockfile" -c true 2>/dev/null || got=$?
	kill "$h" 2>/dev/null || true
	wait "$h" 2>/dev/null || true
	((got == 75))
}
machine_mount 1 "$SW_TMP/c1"
if flock_probe; then
	FLOCK=1
	rm -f "$SW_TMP/lock.held"
	hold_flock "$CM/s4/lockfile" "$SW_TMP/lock.held" 600 &
	locker=$!
	BG_PIDS+=($locker)
	wait_until 10 "the cut client to take its flock" test -e "$SW_TMP/lock.held"
	log "flock works across mounts: the cut client holds one"
else
	log "flock is local to each mount (probed): the flock check is skipped"
fi

rm "$M/s4/held"
assert_eq $((o0 + 1)) "$(sw_status 'd["orphans"]')" "orphans once the open file is unlinked"
assert_eq "$c0" "$(chunks)" "chunks once the open file is unlinked (its data stays)"

cut_c5
# a call on the cut client ends (EIO) instead of hanging
timeout 60 "$PYTHON" "$SW_SRC/fsop.py" mkdir "$CM/s4/during-cut" >"$SW_TMP/cut.call" 2>&1 &
caller=$!
BG_PIDS+=($caller)
sleep 1
assert_eq $((o0 + 1)) "$(sw_status 'd["orphans"]')" "orphans 1 s into the cut (the session may come back)"
if ((FLOCK)); then
	st=0
	timeout 5 flock -E 75 -n -x "$M/s4/lockfile" -c true 2>/dev/null || st=$?
	assert_eq 75 "$st" "flock -n on the cut client's locked file, 1 s into the cut"
fi
released() {
	(($(sw_status 'd["orphans"]') == o0)) && (($(chunks) == c0 - 1))
}
bound=$(((PEER_TIMEOUT + SESSION_TIMEOUT) * 1000 + 10000))
for ((i = 0; ; i++)); do
	released && break
	if (($(now_ms) - t_cut > bound)); then
		sw_tool status >&2 || true
		fail "the cut client's open file is still kept $bound ms after the cut (session_timeout ${SESSION_TIMEOUT}s, peer_timeout ${PEER_TIMEOUT}s)"
	fi
	sleep 0.1
done
t_rel=$(($(now_ms) - t_cut))
log "the unlinked file was released $t_rel ms after the cut"
assert_ge $((SESSION_TIMEOUT * 1000)) "$t_rel" "ms from the cut to the release (at least session_timeout)"
if ((FLOCK)); then
	# Each try may take seconds on a loaded machine: 15 s for a few.
	wait_until 15 "the cut client's flock to go with its session" \
		timeout 5 flock -n -x "$M/s4/lockfile" -c true
	log "the cut client's flock was released with its session"
fi
wait "$caller" || fail "the call on the cut client hung (timeout)"
assert_eq EIO "$(cat "$SW_TMP/cut.call")" "mkdir on the cut client"
log "a call on the cut client failed with EIO within $(($(now_ms) - t_cut)) ms of the cut"
assert_le $((2 * MASTER_TIMEOUT * 1000 + 5000)) $(($(now_ms) - t_cut)) "ms before a call on the cut client gave up"
ip -n "$CUT_NS" link set eth0 up
log "machine c5 back on the network"
# back: the cut client works again without a remount
wait_until 30 "the cut client to reach the master again" \
	fsop_ok mkdir "$CM/s4/after-cut"
[[ "$("$PYTHON" "$SW_SRC/fsop.py" stat "$CM/s4/after-cut")" == OK* ]] ||
	fail "the cut client cannot see what it made after the cut"
assert_exists "$M/s4/after-cut"
wait_fsck_clean 30 "after the cut client's session expired"
kill -KILL "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
if ((FLOCK)); then
	kill -KILL "$locker" 2>/dev/null || true
	wait "$locker" 2>/dev/null || true
fi
BG_PIDS=()
stop_mount "$CM"
stop_mount "$SW_TMP/c1"
CHECKED=$((CHECKED + 2)) # the fsync'd file (kept, then freed) and after-cut
log "4: released after $t_rel ms (session_timeout ${SESSION_TIMEOUT}s, peer_timeout ${PEER_TIMEOUT}s), lost 0"

# ==== 5. the metadata directory's disk fills up ===============================
log "== 5. the master's metadata directory fills up"
# a clean restart: a checkpoint, old changelog files pruned, a fresh one
restart_master term
mkdir "$M/s5"
declare -A sum5
for i in 1 2 3; do
	sum5[pre$i]=$("$PYTHON" "$DF" write "$M/s5/pre$i" 5000 "$SEED$i" seq --fsync)
done
touch "$M/s5/empty" "$M/s5/victim"
mkdir "$M/s5/dir"
log "metadata tmpfs: $(df -h --output=used,avail "$SW_META" | tail -n 1)"
filled=$("$PYTHON" "$FP" fill "$SW_META")
FAULTS=$((FAULTS + 1))
log "filled the metadata tmpfs with $filled bytes: $(df -h --output=used,avail "$SW_META" | tail -n 1)"
# The changelog's preallocation still has room: use it up with big
# xattrs (each record ~60 KiB) until the master refuses with ENOSPC.
out=$("$PYTHON" - "$M/s5/xa" "$SW_TMP/xattr.ok" <<'EOF'
import errno, os, sys
path, oklog = sys.argv[1], sys.argv[2]
open(path, "w").close()
with open(oklog, "w") as log:
    for i in range(2000):
        try:
            os.setxattr(path, "user.fill", (b"%06d" % i) * 10000)
        except OSError as e:
            print(i, errno.errorcode.get(e.errno, e.errno))
            break
        log.write("%d\n" % i)
        log.flush()
    else:
        print(2000, "none")
EOF
)
read -r n_x err_x <<<"$out"
log "xattrs: $n_x acknowledged before the master refused with $err_x"
assert_eq ENOSPC "$err_x" "the refusal once the changelog's space is used up"
assert_ge 1 "$n_x" "setxattrs acknowledged on the full disk (preallocated space)"
master_alive || fail "the master died when its disk filled up"
# mutations fail with ENOSPC ...
expect_errno ENOSPC fsop mkdir "$M/s5/refused-dir"
expect_errno ENOSPC fsop create "$M/s5/refused-file"
expect_errno ENOSPC fsop rename "$M/s5/victim" "$M/s5/refused-rename"
expect_errno ENOSPC fsop unlink "$M/s5/victim"
expect_errno ENOSPC fsop chmod "$M/s5/victim" 600
expect_errno ENOSPC fsop setxattr "$M/s5/victim" user.x y
wout=$("$PYTHON" - "$M/s5/empty" <<'EOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    os.write(fd, b"x" * 4096)
    os.fsync(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
finally:
    try:
        os.close(fd)
    except OSError:
        pass
EOF
)
log "write+fsync of new data on the full disk: $wout"
[[ "$wout" == ENOSPC || "$wout" == OK ]] ||
	fail "write+fsync on the full metadata disk: expected ENOSPC (or success), got $wout"
# ... reads and lookups work, and the master stays up
expect_ok fsop stat "$M/s5/victim"
expect_ok fsop listdir "$M/s5"
for i in 1 2 3; do
	assert_eq "OK ${sum5[pre$i]}" "$("$PYTHON" "$DF" read "$M/s5/pre$i")" "reading pre$i on the full disk"
done
start_mount "$SW_TMP/v" "" master_timeout=$MASTER_TIMEOUT
expect_ok fsop stat "$SW_TMP/v/s5/pre1"
[[ "$(fsop getxattr "$SW_TMP/v/s5/xa" user.fill | cut -c1-9)" == "OK $(printf '%06d' $((n_x - 1)))" ]] ||
	fail "the last acknowledged xattr through a fresh mount on the full disk"
stop_mount "$SW_TMP/v"
sw_tool status >/dev/null || fail "sweepfs status on the full disk"
master_alive || fail "the master died on the full disk"
# space back: mutations succeed again
rm -f "$SW_META/filler"
log "space freed: $(df -h --output=used,avail "$SW_META" | tail -n 1)"
t0=$(now_ms)
wait_until 10 "mutations to be admitted again after space came back" \
	fsop_ok mkdir "$M/s5/after"
log "mutations admitted again $(($(now_ms) - t0)) ms after the space came back"
[[ -d "$M/s5/after" ]] || fail "mkdir after the space came back"
for i in 1 2 3; do
	sum5[post$i]=$("$PYTHON" "$DF" write "$M/s5/post$i" 7000 "$SEED$i$i" seq --fsync)
done
expect_ok fsop rename "$M/s5/victim" "$M/s5/renamed"
# everything acknowledged survives a crash; nothing refused exists
kill_master
FAULTS=$((FAULTS + 1))
restart_master start
start_mount "$SW_TMP/v" "" master_timeout=$MASTER_TIMEOUT
V=$SW_TMP/v
for n in pre1 pre2 pre3 post1 post2 post3; do
	assert_eq "OK ${sum5[$n]}" "$("$PYTHON" "$DF" read "$V/s5/$n")" "acknowledged file $n after the restart"
done
[[ "$(fsop getxattr "$V/s5/xa" user.fill | cut -c1-9)" == "OK $(printf '%06d' $((n_x - 1)))" ]] ||
	fail "the last acknowledged xattr after the restart"
assert_exists "$V/s5/dir" "$V/s5/after" "$V/s5/renamed" "$V/s5/empty"
assert_missing "$V/s5/refused-dir" "$V/s5/refused-file" "$V/s5/refused-rename" "$V/s5/victim"
assert_stat %a 644 "$V/s5/renamed" "mode of the file whose chmod was refused"
[[ "$(fsop getxattr "$V/s5/renamed" user.x)" == ENODATA ]] || fail "a refused setxattr is there"
CHECKED=$((CHECKED + 6 + n_x + 5))
wait_fsck_clean 30 "after the full disk and the restart"
log "5: $n_x xattrs acknowledged on the full disk, ENOSPC then, lost 0"

# look_over DIR SECS NAME...: one process per NAME looks it up over and
# over for SECS, from a descriptor of DIR opened now (not from the root,
# whose lookup of DIR the master would answer; one per name, as a call
# that waits for the master holds up only its own): "START_MS NAME
# OUTCOME" lines in $SW_TMP/seen.NAME. Their pids go to LOOKERS.
look_over() {
	local dir=$1 secs=$2 name
	shift 2
	LOOKERS=()
	rm -f "$SW_TMP"/seen.*
	for name in "$@"; do
		"$PYTHON" - "$dir/$name" "$SW_TMP/seen.$name" "$secs" <<'EOF' &
import os, sys, time
path, out, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
name = os.path.basename(path)
dfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
end = time.monotonic() + secs
with open(out, "w", buffering=1) as f:
    while time.monotonic() < end:
        t = time.time_ns() // 1000000
        # O_PATH needs the name only, no attributes and no open: what
        # the caches answer, the kernel's and the mount's.
        try:
            os.close(os.open(name, os.O_PATH, dir_fd=dfd))
            r = "OK"
        except OSError as e:
            r = os.strerror(e.errno).replace(" ", "_")
        f.write("%d %s %s\n" % (t, name, r))
        time.sleep(0.1)
EOF
		LOOKERS+=($!)
		BG_PIDS+=($!)
	done
	for name in "$@"; do
		wait_until 10 "the lookers to start" test -s "$SW_TMP/seen.$name"
	done
}

# seen_after MS: the lookers' lines from MS on.
seen_after() { cat "$SW_TMP"/seen.* | awk -v t="$1" '$1 >= t'; }

# none_stale MS AWK WHEN: at least one of the lookers' lines from MS on,
# and none that AWK matches (a stale answer); their count in ASKED.
none_stale() {
	local since=$1 match=$2 when=$3 stale
	ASKED=$(seen_after "$since" | wc -l)
	stale=$(seen_after "$since" | awk "$match" | wc -l)
	assert_ge 1 "$ASKED" "lookups on the cut client $when"
	if ((stale)); then
		seen_after "$since" | awk 'NR <= 20' >&2
		fail "the cut client answered $stale of $ASKED lookups stale $when"
	fi
}

# uncut NAME: machine c5 back on the network, until it sees NAME.
uncut() {
	ip -n "$CUT_NS" link set eth0 up
	log "machine c5 back on the network"
	wait_until 30 "the cut client to see $1" fsop_ok stat "$CM/$1"
}

# ==== 6. a client holding a delegation cut from the network ===================
log "== 6. a client holding a delegation cut from the network"
machine_mount 5 "$CM" "master_timeout=$MASTER_TIMEOUT"
# Made on the cut client, which comes to hold the directory's delegation;
# f0 is made under it (answered there, its name long-lived in the kernel),
# then sent to the master (fsync).
mkdir "$CM/s6"
touch "$CM/s6/first"
held6() {
	ls "$CM/s6" >/dev/null
	sw_status '[s["delegations"] for s in d["sessions"] if s["peer"].startswith("'"$NET_PREFIX.6"':")]' |
		grep -q '\[[1-9]'
}
wait_until 20 "the client to hold s6's delegation" held6
touch "$CM/s6/f0"
"$PYTHON" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)' "$CM/s6"
[[ "$(fsop stat "$CM/s6/new")" == ENOENT ]] || fail "s6/new before it was made"
# The client looks each name up over and over (look_over), from before
# the cut.
look_over "$CM/s6" 30 f0 new
cut_c5 "holding s6"
rm "$M/s6/f0"
touch "$M/s6/new"
t_done=$(now_ms)
log "the other client removed s6/f0 and made s6/new $((t_done - t_cut)) ms after the cut"
wait "${LOOKERS[@]}" || true
BG_PIDS=()
none_stale "$t_done" '($2 == "f0" && $3 == "OK") ||
	($2 == "new" && $3 == "No_such_file_or_directory")' \
	"after another client changed s6"
uncut s6/new
[[ "$(fsop stat "$CM/s6/f0")" == ENOENT ]] || fail "the cut client, back, still sees s6/f0"
stop_mount "$CM"
CHECKED=$((CHECKED + 2))
log "6: $ASKED lookups on the cut client after the change, none stale"

# ==== 7. a client caching a summarized listing cut from the network ==========
log "== 7. a client caching a directory's summary, and nothing else, cut from the network"
# No delegations (wsync) and a bound below two directories' size: listing
# s7 then s7b leaves a summary of s7's names (mount/dircache.c), which
# answers "absent" here, and s7b's removal by another client drops what
# was cached of s7b: the cut client then holds no entry, no delegation,
# only the summary. That too is held under the lease: once the lease
# has run out the cut client must not deny a name another client made.
N7=600
mkdir "$M/s7" "$M/s7b"
"$PYTHON" - "$M" "$N7" <<'EOF'
import os, sys
for d in ("s7", "s7b"):
    for i in range(int(sys.argv[2])):
        os.close(os.open(os.path.join(sys.argv[1], d, "f%05d" % i),
                         os.O_CREAT | os.O_WRONLY, 0o644))
EOF
# attr_timeout: the kernel's check that the caller may search s7 takes
# its attributes from its own cache, so what answers each lookup while
# the client is cut is the mount's summary, not the master.
machine_mount 5 "$CM" "master_timeout=$MASTER_TIMEOUT,wsync,dircache_entries=1000,attr_timeout=60"
assert_eq "$N7" "$(ls "$CM/s7" | wc -l)" "names of s7 listed on the cut client"
assert_eq "$N7" "$(ls "$CM/s7b" | wc -l)" "names of s7b listed on the cut client"
rm -r "$M/s7b"
look_over "$CM/s7" 20 new
# Its lookups of s7/new, from s7's descriptor, every 100 ms: the summary
# answers them, none reaches the master (nothing else runs meanwhile).
l0=$(sw_requests lookup)
sleep 1
assert_le 2 $(($(sw_requests lookup) - l0)) "master lookups in a second of looking s7/new up on the summary"
cut_c5 "caching s7's summary"
touch "$M/s7/new"
log "the other client made s7/new $(($(now_ms) - t_cut)) ms after the cut"
wait "${LOOKERS[@]}" || true
BG_PIDS=()
# The lease is half of peer_timeout here: it has run out a second after
# the cut, and the next ping a quarter of it later.
t_lapsed=$((t_cut + PEER_TIMEOUT * 1000))
before=$(seen_after 0 | awk -v t="$t_cut" '$1 < t && $3 == "No_such_file_or_directory"' | wc -l)
assert_ge 1 "$before" "lookups of s7/new denied before the cut"
none_stale "$t_lapsed" '$3 == "No_such_file_or_directory"' \
	"after its lease ran out"
uncut s7/new
stop_mount "$CM"
CHECKED=$((CHECKED + 1))
log "7: $ASKED lookups on the cut client after its lease, none denied"

# ==== again, after everything ===============================================
log "== every client's storm again, after all the restarts"
for k in 1 2 3 4; do
	verify_storm "$k" "$V" >/dev/null
done
stop_mount "$V"
wait_fsck_clean 30 "at the end"
master_alive || fail "the master died"
log "faults: injected $FAULTS, acknowledged ops checked $CHECKED, lost 0"
echo "faults: injected $FAULTS, acknowledged ops checked $CHECKED, lost 0"
sw_pass
