#!/bin/bash
# FUSE over io_uring (-o io_uring, mount/ring.c), with the fuse module's
# enable_uring parameter turned on for the scenario and put back after
# (skip where the kernel has no such parameter: before Linux 6.14, or
# built without CONFIG_FUSE_IO_URING):
#
#  1. a mount with the option says it set up a queue per CPU, and a
#     second mount without it sees what the first does;
#  2. files and directories made, listed, renamed, linked, changed and
#     removed through the ring, by several processes at once, are what
#     the other mount sees, and rm -rf leaves nothing;
#  3. file data written through the ring reads back the same on both
#     mounts (a chunkserver holds it; reads and writes go to the pool
#     of threads, not the CPU's queue);
#     after the chunkserver is killed under writers and restarted, the
#     mount still answers everything (entries answered by threads that
#     have since ended stay usable);
#  4. a flock that must wait is granted when the holder lets go: its
#     reply comes from the master connection's thread, not the one that
#     took the request; one given up (flock -w) is interrupted through
#     /dev/fuse and fails in time, and its entry is used again after;
#     24 waiters sent from one CPU, more than its queue's 16 entries,
#     are all granted in turn (the queue grows);
#  5. at unmount the mount exits 0 and counts the requests that came
#     through the ring: at least as many as the files it made;
#  6. with enable_uring off, -o io_uring says the kernel does not offer
#     the ring and the mount works through /dev/fuse;
#  7. fsck is clean.
. "$(dirname "$0")/../lib.sh"
sw_init ring --root
command -v flock >/dev/null || skip "flock(1) is not installed"
command -v taskset >/dev/null || skip "taskset(1) is not installed"

PARAM=/sys/module/fuse/parameters/enable_uring
[[ -w $PARAM ]] || skip "the fuse module has no enable_uring (Linux 6.14+)"
OLD=$(cat "$PARAM")
sw_scenario_cleanup() { echo "$OLD" >"$PARAM"; }
echo 1 >"$PARAM"

start_master
start_mount "$SW_TMP/a" "" io_uring
A=$SW_TMP/a
start_mount "$SW_TMP/b"
B=$SW_TMP/b

# 1. The queues were set up.
wait_until 10 "the mount to set up io_uring" \
	grep -q 'FUSE over io_uring: [0-9]* queue' "$A.log"
NQ=$(sed -n 's/.*FUSE over io_uring: \([0-9]*\) queue.*/\1/p' "$A.log")
assert_ge 1 "$NQ" "queues"
log "$NQ queue(s)"

# 2. Metadata by 4 processes at once, each in its own directory.
N=500
for w in 1 2 3 4; do
	(
		mkdir -p "$A/t/w$w/sub"
		for ((i = 0; i < N; i++)); do : >"$A/t/w$w/f$i"; done
		for ((i = 0; i < N; i += 2)); do rm "$A/t/w$w/f$i"; done
		mv "$A/t/w$w/f1" "$A/t/w$w/sub/moved"
		ln -s moved "$A/t/w$w/sub/link"
		ln "$A/t/w$w/f3" "$A/t/w$w/hard"
		chmod 600 "$A/t/w$w/f5"
	) &
done
wait
for w in 1 2 3 4; do
	# N/2 odd files, less f1 (moved), plus sub and hard.
	assert_eq $((N / 2 + 1)) "$(ls "$A/t/w$w" | wc -l)" "entries in w$w on A"
	assert_eq $((N / 2 + 1)) "$(ls "$B/t/w$w" | wc -l)" "entries in w$w on B"
	assert_eq moved "$(readlink "$B/t/w$w/sub/link")" "symlink on B"
	assert_eq 2 "$(stat -c %h "$B/t/w$w/f3")" "links of f3 on B"
	assert_eq 600 "$(stat -c %a "$B/t/w$w/f5")" "mode of f5 on B"
	assert_missing "$B/t/w$w/f0"
done

# 3. Data: 6 MiB of random bytes, written and read back on both.
head -c $((6 << 20)) /dev/urandom >"$SW_TMP/data"
cp "$SW_TMP/data" "$A/t/data"
sync "$A/t/data"
SUM=$(sha256sum <"$SW_TMP/data")
assert_eq "$SUM" "$(sha256sum <"$A/t/data")" "data read on A"
assert_eq "$SUM" "$(sha256sum <"$B/t/data")" "data read on B"
dd if="$SW_TMP/data" of="$A/t/data" bs=4k seek=100 count=3 conv=notrunc \
	status=none
dd if="$SW_TMP/data" of="$SW_TMP/data2" bs=4k count=3 status=none
assert_eq "$(sha256sum <"$SW_TMP/data2")" \
	"$(dd if="$B/t/data" bs=4k skip=100 count=3 status=none | sha256sum)" \
	"overwritten blocks on B"

# 3b. The chunkserver killed under writers that fsync, and restarted:
# threads of the mount that answered requests come and go with its
# connection, and the entries they answered must outlive them (once,
# requests given such entries failed with ECANCELED).
SUM2=$(sha256sum <"$B/t/data")
for w in 1 2 3 4; do
	(
		for ((i = 0; i < 30; i++)); do
			dd if=/dev/urandom of="$A/t/cs.$w.$i" bs=64k count=2 \
				conv=fsync status=none 2>/dev/null || true
		done
	) &
done
sleep 0.3
restart_chunkserver 1
wait
for ((i = 0; i < 300; i++)); do
	stat "$A/t/data" >/dev/null || fail "stat after the chunkserver's restart"
	: >"$A/t/after.$i" || fail "create after the chunkserver's restart"
done
assert_eq "$SUM2" "$(sha256sum <"$A/t/data")" "data read on A after the restart"
head -c 300000 /dev/urandom >"$SW_TMP/more"
cp "$SW_TMP/more" "$A/t/more"
assert_eq "$(sha256sum <"$SW_TMP/more")" "$(sha256sum <"$B/t/more")" \
	"data written after the restart, read on B"

# 4. Locks: a waiter is granted when the holder lets go; one that gives
# up is interrupted.
: >"$A/t/lock"
flock "$A/t/lock" sleep 2 &
HOLDER=$!
sleep 0.5
start=$(date +%s%N)
flock -w 0.3 "$A/t/lock" true && fail "flock -w got a held lock"
took=$((($(date +%s%N) - start) / 1000000))
assert_le 1500 "$took" "ms flock -w 0.3 took"
flock -w 10 "$A/t/lock" true || fail "the waiting flock was not granted"
took=$((($(date +%s%N) - start) / 1000000))
assert_ge 1000 "$took" "ms before the waiter was granted"
wait "$HOLDER"
# More lock waiters from one CPU than its queue has entries at first:
# it grows, and the holder's unlock, from the same CPU, still gets
# through (with 16 entries held by waiters it would wait for ever).
taskset -c 0 flock "$A/t/lock" sleep 1.5 &
HOLDER=$!
sleep 0.5
WAITERS=()
for ((i = 0; i < 24; i++)); do
	taskset -c 0 flock -w 30 "$A/t/lock" true &
	WAITERS+=($!)
done
wait "$HOLDER"
for p in "${WAITERS[@]}"; do
	wait "$p" || fail "a lock waiter was not granted the lock"
done
grep -q "queue 0: [0-9]* entries" "$A.log" ||
	fail "queue 0 did not grow for its lock waiters"
# The entries are all usable: more requests than a queue holds.
for ((i = 0; i < 100; i++)); do stat "$A/t/lock" >/dev/null; done

rm -rf "$A/t"
assert_missing "$A/t"
assert_missing "$B/t"

# 5. The requests came through the ring.
stop_mount "$A"
SERVED=$(sed -n 's/.*FUSE requests through io_uring: \([0-9]*\).*/\1/p' \
	"$A.log")
[[ -n "$SERVED" ]] || fail "the mount did not count its ring requests"
assert_ge $((4 * N)) "$SERVED" "requests through the ring"
log "$SERVED requests through the ring"

# 6. Without enable_uring: /dev/fuse.
echo 0 >"$PARAM"
start_mount "$SW_TMP/c" "" io_uring
C=$SW_TMP/c
grep -q "does not offer FUSE over io_uring" "$C.log" ||
	fail "no word of the missing ring: $(tail -n 5 "$C.log")"
mkdir "$C/u"
: >"$C/u/f"
assert_exists "$B/u/f"
rm -rf "$C/u"
stop_mount "$C"
grep -q "FUSE requests through io_uring: 0" "$C.log" ||
	fail "requests went through a ring the kernel did not offer"

# 7.
stop_mount "$B"
fsck_ok || fail "fsck: $(sw_tool fsck 2>&1 | tail -n 5)"
sw_pass
