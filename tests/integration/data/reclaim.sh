#!/bin/bash
# Chunk deletion in batches (issue 32): nothing leaks, nothing lost.
#
#  1. N files of 4 KiB and K files to keep; rm -rf of the N through the
#     mount; with delete_rate capped so that the deletion takes seconds,
#     kill -9 of the master and of the chunkserver half-way through it;
#     restart both: the chunk files on the disk come down to exactly the
#     K live chunks (their count, every one of them read back intact,
#     none of the deleted ones left), no deletion stays pending, and
#     fsck is clean;
#  2. the same rm -rf without a cap: the chunk files go at the disk's
#     pace, in DELETE_BATCH commands (the rate is logged; the bound
#     allows for a loaded machine), and status agrees on 0 pending, per
#     server too, with every deletion acknowledged.
# RECLAIM_N (default 20000) sets N.
. "$(dirname "$0")/../lib.sh"
sw_init reclaim --root

N=${RECLAIM_N:-20000}
K=200
RATE=4000 # deletions/s in part 1: N/2 of them take a few seconds

M=$SW_TMP/mnt
# stray_grace: the deletions the killed master had queued come back as
# files of dead chunks, deleted at once (faults/deletions.sh checks it
# with an hour's grace); 1 s here only bounds what an orphan would wait.
start_master --set goal=1 --set "delete_rate=$RATE" --set changelog_sync=always \
	--set stray_grace=1s
start_mount

# ---- 1. kill -9 of both daemons half-way through the deletions -----------
log "1. $N files removed, master and chunkserver killed half-way through"
make_small_files "$M/keep" "$K"
make_small_files "$M/many" "$N"
assert_eq $((N + K)) "$(chunk_files)" "chunk files for $N + $K one-chunk files"
rm -rf "$M/many"
half() { (($(chunk_files) <= K + N / 2)); }
wait_slowly 120 "half of the chunk files to go" half
left=$(chunk_files)
kill_master
kill_chunkserver 1
log "killed with $left chunk files on the disk ($K live)"
((left > K)) || fail "the deletion finished before the kill ($left files left): raise RECLAIM_N"
restart_master start
restart_chunkserver 1 start
done_() { (($(chunk_files) == K)) && (($(sw_status 'd["chunk_deletes_pending"]') == 0)); }
wait_slowly 120 "the chunk files to come down to the $K live ones (now $(chunk_files))" done_
assert_eq "$K" "$(sw_status 'd["chunks"]')" "chunks the master counts"
stop_mount
start_mount
assert_eq "$K" "$(check_small_files "$M/keep")" "kept files read back intact"
assert_eq "$K" "$(chunk_files)" "chunk files after reading the kept ones"
wait_fsck_clean 30 "after the restarts"

# ---- 2. no cap: the disk's pace, in batches ------------------------------
log "2. $N files removed at the disk's pace"
stop_mount
stop_master
start_master --set goal=1 --set changelog_sync=always
start_mount
make_small_files "$M/many" "$N"
assert_eq $((N + K)) "$(chunk_files)" "chunk files before the second removal"
t0=$(date +%s%N)
rm -rf "$M/many"
t_rm=$((($(date +%s%N) - t0) / 1000000))
gone() { (($(chunk_files) == K)); }
wait_slowly 120 "the $N chunk files to go" gone
t_end=$((($(date +%s%N) - t0) / 1000000))
t_del=$((t_end - t_rm))
log "rm -rf took $t_rm ms; the chunk files were gone $t_del ms after it returned"
log "$((N * 1000 / (t_del > 0 ? t_del : 1))) chunk deletions/s (load average $(cut -d' ' -f1 /proc/loadavg))"
# Unloaded, it runs at thousands a second; a CI machine shared with
# other jobs (a load average of 18 on 2 cores) was seen at 960/s. The
# bound only catches a pace far below the former ceiling of 640/s.
assert_le $((N * 1000 / 300 + 2000)) "$t_del" "ms for $N chunk deletions after rm -rf (under 300/s)"
pend() { (($(sw_status 'd["chunk_deletes_pending"]') == 0)); }
wait_until 10 "status to show no deletion pending" pend
assert_eq 0 "$(sw_status 'sum(s["deletes_pending"] for s in d["servers"])')" "deletions pending per server"
assert_ge "$N" "$(sw_status 'sum(s["deleted"] for s in d["servers"])')" "deletions acknowledged"
check_small_files "$M/keep" >/dev/null
wait_fsck_clean 30 "after the second removal"
sw_pass
