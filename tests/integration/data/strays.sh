#!/bin/bash
# Orphaned chunk files wait out stray_grace (issue 32): a chunkserver
# that reports chunk files the master does not know has them deleted only
# after the grace, and never one the master knows by then.
#
#  1. KEEP files, then a clean stop and a copy of the metadata as it was;
#     LATE more files, and GONE files removed with delete_rate at 1/s, so
#     that their deletions are still queued when the master is killed;
#  2. the master starts on the old copy (an operator's mistake, or a
#     master behind the others): LATE and GONE chunk files are unknown to
#     it; within the grace none of them goes, and fsck counts them as
#     waiting (no inventory mismatch);
#  3. killed within the grace and started on the right metadata, the
#     master knows the LATE chunks again: they are never deleted, and read
#     back intact; the GONE ones are of chunks this metadata removed
#     (ns_chunk_dead()): they go at once, without the grace; a chunk
#     file planted meanwhile with an id above every chunk's is a stray
#     on this metadata too: it goes, but not before the grace has passed
#     since that master started;
#  4. deletions in flight when the chunkserver is killed go again as soon
#     as it is back, not after the grace.
. "$(dirname "$0")/../lib.sh"
sw_init strays --root

GRACE=12 # seconds: the dead chunks' files go well within it on a loaded machine
KEEP=20
LATE=10
GONE=40
M=$SW_TMP/mnt

start_master --set goal=1 --set delete_rate=1 --set "stray_grace=${GRACE}s" \
	--set changelog_sync=always
start_mount

# write DIR COUNT: COUNT files of 4 KiB, each holding its own name.
write() {
	"$PYTHON" - "$1" "$2" <<'EOF' || fail "writing $1"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
for i in range(n):
    p = os.path.join(d, "f%03d" % i)
    with open(p, "wb") as f:
        f.write((p.encode() * 4096)[:4096])
        os.fsync(f.fileno())
EOF
}

# check DIR COUNT: the COUNT files of DIR hold what write() put there.
check() {
	"$PYTHON" - "$1" "$2" <<'EOF' || fail "$1 lost data"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    p = os.path.join(d, "f%03d" % i)
    with open(p, "rb") as f:
        if f.read() != (p.encode() * 4096)[:4096]:
            sys.exit("%s: not what was written" % p)
EOF
}

# ---- 1. metadata without LATE; LATE written, GONE removed ---------------
log "1. $KEEP files, the metadata copied, $LATE more, $GONE removed"
write "$M/keep" "$KEEP"
stop_mount
stop_master
cp -a "$SW_META" "$SW_TMP/meta.old"
restart_master start
start_mount
write "$M/late" "$LATE"
write "$M/gone" "$GONE"
assert_eq $((KEEP + LATE + GONE)) "$(chunk_files)" "chunk files before the removal"
rm -rf "$M/gone"
stop_mount
kill_master
sleep 1 # a batch the chunkserver was unlinking ends
left=$(chunk_files)
log "master killed with $left chunk files on the disk"
((left > KEEP + LATE + GONE / 2)) || fail "most deletions went before the kill ($left files left)"

# ---- 2. the master on the old metadata: LATE and GONE are strays --------
log "2. the master on metadata without them: nothing goes within ${GRACE} s"
SW_META_RIGHT=$SW_META
SW_META=$SW_TMP/meta.old
SW_MASTER_ARGS=(--set goal=1 --set "stray_grace=${GRACE}s")
restart_master start
t0=$(date +%s%N)
assert_eq "$KEEP" "$(sw_status 'd["chunks"]')" "chunks the old metadata knows"
# 0 pending: they wait as strays, not as queued deletions
assert_eq 0 "$(sw_status 'd["chunk_deletes_pending"]')" "deletions queued for strays within the grace"
grep -q "$((left - KEEP)) chunk files the master does not know" "$SW_MASTER_LOG" ||
	fail "the master did not log $((left - KEEP)) unknown chunk files"
wait_fsck_clean $((GRACE / 2)) "with $((left - KEEP)) strays waiting"
sleep $((GRACE / 2))
assert_eq "$left" "$(chunk_files)" "chunk files $(( ($(date +%s%N) - t0) / 1000000 )) ms into the grace"

# ---- 3. within the grace, back on the right metadata ------------------------
log "3. the master back on the right metadata within the grace"
kill_master
kill_chunkserver 1
planted=$(plant_chunk 1 0000000100000000)
SW_META=$SW_META_RIGHT
t0=$(date +%s%N)
restart_master start
restart_chunkserver 1 start
assert_eq $((KEEP + LATE)) "$(sw_status 'd["chunks"]')" "chunks the right metadata knows"
grep -q "$((left - KEEP - LATE)) chunk files of chunks deleted before" "$SW_MASTER_LOG" ||
	fail "the master did not queue the $((left - KEEP - LATE)) removed files' chunk files at once"
dead_gone() { (($(chunk_files) == KEEP + LATE + 1)); }
wait_until $((GRACE - 2)) "the removed files' chunk files to go within the grace" dead_gone
log "the removed files' chunk files went $((($(date +%s%N) - t0) / 1000000)) ms after the master started"
assert_exists "$planted"
live() { (($(chunk_files) == KEEP + LATE)); }
wait_until $((GRACE + 60)) "the planted stray to go" live
t=$((($(date +%s%N) - t0) / 1000000))
log "the stray went $t ms after the master started (grace ${GRACE} s)"
assert_ge $((GRACE * 1000)) "$t" "ms before the stray went (not before the grace)"
pend() { (($(sw_status 'd["chunk_deletes_pending"]') == 0)); }
wait_until 10 "no deletion pending" pend
start_mount
check "$M/keep" "$KEEP"
check "$M/late" "$LATE"
assert_eq $((KEEP + LATE)) "$(chunk_files)" "chunk files after reading"
wait_fsck_clean 30 "after the strays went"

# ---- 4. deletions lost with the chunkserver: again at once -----------------
log "4. deletions in flight when the chunkserver dies go without the grace"
SW_MASTER_ARGS=(--set goal=1 --set "stray_grace=${GRACE}s" --set delete_rate=50 \
	--set changelog_sync=always)
restart_master term
write "$M/gone2" "$GONE"
# Stopped, it acknowledges nothing: the master's window of batches is in
# flight when it dies.
kill -STOP "${SW_CS_PIDS[1]}"
rm -rf "$M/gone2"
sleep 1
kill_chunkserver 1
t0=$(date +%s%N)
restart_chunkserver 1 start
wait_until $((GRACE - 2)) "the chunk files of $GONE removed files to go within the grace" live
log "gone $((($(date +%s%N) - t0) / 1000000)) ms after the chunkserver restarted"
wait_until 10 "no deletion pending" pend
sw_pass
