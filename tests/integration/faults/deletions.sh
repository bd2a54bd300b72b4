#!/bin/bash
# Chunk deletions survive a kill of both daemons half-way (issue 32),
# without waiting for stray_grace: a restarted master knows which chunk
# files are of chunks gone for good (csrv.c, ns_chunk_dead()) and deletes
# them at once, and never one it still knows or may yet learn of.
#
#  1. K files to keep, N to remove, a snapshot of 100 of the N (their
#     chunks shared) and 100 more files removed into the trash (their
#     chunks still referenced); rm -rf of the N with delete_rate capped,
#     and kill -9 of the master and of the chunkserver half-way through
#     the deletions;
#  2. meanwhile on the chunkserver's disk, two chunk files no master
#     made: one numbered far above every chunk (a chunk the master may
#     yet learn of: kept for stray_grace) and one numbered 2^64-1 (a
#     hostile inventory: it must not use up the master's chunk ids);
#  3. both restarted with stray_grace at an hour: the restarted master
#     says at registration that the files of removed chunks are queued,
#     status, top and /metrics show them pending on that server with the
#     rate delete_rate allows and an ETA to match, and within a minute
#     the disk holds exactly the live chunk files (the K, the snapshot's
#     and the trash's) and the two planted ones; the K and the
#     snapshot's files read back intact, new files can still be made,
#     nothing stays pending, fsck is clean.
# Before, the removed chunks' files waited out stray_grace as strays.
. "$(dirname "$0")/../lib.sh"
sw_init deletions --root

N=${DELETIONS_N:-4000}
K=200
RATE=200 # deletions/s: N/2 of them take 10 s, top measures for 3
BOUND=60 # seconds for the disk to come down to the live files
M=$SW_TMP/mnt

start_metrics_cluster --set goal=1 --set "delete_rate=$RATE" \
	--set changelog_sync=always --set stray_grace=1h
start_mount

# ---- 1. kill -9 of both daemons half-way through the deletions -----------
log "1. $N files removed, master and chunkserver killed half-way through"
make_small_files "$M/keep" "$K"
make_small_files "$M/many" "$N"
sw_tool snapshot "$M/many/w0_0000" "$M/snap" >/dev/null || fail "sweepfs snapshot"
mkdir "$M/trash"
sw_tool settrashtime -r 3600 "$M/trash" >/dev/null || fail "sweepfs settrashtime"
make_small_files "$M/trash/d" 100
rm -rf "$M/trash/d"
assert_eq $((N + K + 100)) "$(chunk_files)" "chunk files for $N + $K + 100 one-chunk files (the snapshot shares)"
((K += 200)) # live after the rm: the snapshot's and the trash's too
rm -rf "$M/many"
half() { (($(chunk_files) <= K + N / 2)); }
wait_slowly 120 "half of the chunk files to go" half
stop_mount
kill_master
kill_chunkserver 1
left=$(chunk_files)
log "killed with $left chunk files on the disk ($K live)"
((left > K + 2 * RATE)) || fail "too few deletions left to measure ($((left - K))): raise DELETIONS_N"

# ---- 2. chunk files no master made ------------------------------------------
log "2. two chunk files planted: one far above every chunk, one at 2^64-1"
high=$(plant_chunk 1 0000000100000000)
top_id=$(plant_chunk 1 ffffffffffffffff)

# ---- 3. restarted: the removed chunks' files go at once ----------------------
log "3. both restarted, stray_grace 1 h"
t0=$(date +%s%N)
restart_master start
restart_chunkserver 1 start
grep -E "chunk files of chunks deleted before|chunk files the master does not know" \
	"$SW_MASTER_LOG" | tail -n 2 >&2
# Every file of a removed chunk is known as such, at registration: none
# waits as a stray.
queued=$(sed -n 's/.*: \([0-9]*\) chunk files of chunks deleted before.*/\1/p' "$SW_MASTER_LOG" | tail -n 1)
assert_eq $((left - K)) "${queued:-0}" "files of removed chunks queued at registration"
# one status: the counts move between two
read -r pending s_pending s_deleted listen <<<"$(sw_status \
	'"%d %d %d %s" % (d["chunk_deletes_pending"], d["servers"][0]["deletes_pending"], d["servers"][0]["deleted"], d["servers"][0]["listen"])')"
log "after the restart: $pending deletions pending ($s_pending on $listen, $s_deleted done), $(chunk_files) chunk files"
assert_ge $((3 * RATE)) "$pending" "deletions pending after the restart"
assert_eq "$pending" "$s_pending" "deletions pending on $listen (the only server)"
assert_eq "$queued" $((s_pending + s_deleted)) "deletions pending and done on $listen"
scrape "$MURL" \
	"v('sweepfs_master_chunk_deletions_pending', server='$listen') >= 1" \
	"v('sweepfs_master_chunk_strays', server='$listen') == 2" \
	"v('sweepfs_master_chunk_deletions_total', server='$listen') + v('sweepfs_master_chunk_deletions_pending', server='$listen') == $queued"

# top: the rate delete_rate allows, and an ETA of pending / rate
sw_tool top -b -n 3 -d 1 "$M" >"$SW_TMP/top.out" 2>&1 ||
	{ cat "$SW_TMP/top.out" >&2; fail "sweepfs top failed"; }
t_top=$(date +%s%N)
sed -n '/^chunks /,/^$/p' "$SW_TMP/top.out" | tail -n 3 >&2
read -r t_pending t_rate t_eta <<<"$(top_deletions "$SW_TMP/top.out" "$listen")" || true
[[ -n "$t_eta" ]] || fail "no pending/rate/ETA line for $listen in sweepfs top"
log "top: $t_pending pending on $listen, $t_rate/s, done in $t_eta s"
assert_ge $((RATE / 4)) "$t_rate" "deletions/s top shows (delete_rate $RATE)"
assert_le $((RATE * 3 / 2 + 1)) "$t_rate" "deletions/s top shows (delete_rate $RATE)"
assert_le "$pending" "$t_pending" "deletions pending top shows"
want=$(((t_pending + t_rate - 1) / t_rate))
assert_le 1 $((t_eta - want < 0 ? want - t_eta : t_eta - want)) "ETA against pending / rate"

live() { (($(chunk_files) == K + 2)); }
wait_slowly "$BOUND" "the chunk files to come down to the $K live ones and the 2 planted (now $(chunk_files))" live
t=$((($(date +%s%N) - t0) / 1000000))
log "exactly the live chunk files left $t ms after the restart (stray_grace 1 h); top said $t_eta s $((($(date +%s%N) - t_top) / 1000000)) ms ago"
pend() { (($(sw_status 'd["chunk_deletes_pending"]') == 0)); }
wait_until 10 "no deletion pending" pend
assert_exists "$high"
assert_exists "$top_id"
assert_eq "$K" "$(sw_status 'd["chunks"]')" "chunks the master counts"
assert_eq 100 "$(sw_status 'd["trash_items"]')" "files in the trash"
scrape "$MURL" \
	"v('sweepfs_master_chunk_deletions_pending', server='$listen') == 0" \
	"v('sweepfs_master_chunk_strays', server='$listen') == 2" \
	"v('sweepfs_master_chunk_deletions_total', server='$listen') == $queued"

# The kept files are intact, and chunk ids are not used up: a new file.
start_mount
assert_eq $((K - 200)) "$(check_small_files "$M/keep")" "kept files read back intact"
assert_eq 100 "$(check_small_files "$M/snap")" "the snapshot's files read back intact"
echo fresh >"$M/fresh" || fail "writing a new file after the planted chunk 2^64-1"
sync "$M/fresh"
assert_eq fresh "$(cat "$M/fresh")" "the new file"
assert_eq $((K + 3)) "$(chunk_files)" "chunk files with the new one"
wait_fsck_clean 30 "after the restarts (the 2 planted files wait as strays)"
sw_pass
