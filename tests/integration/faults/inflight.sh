#!/bin/bash
# A master killed while chunk changes it journaled are still on their way
# to the chunkserver (master/dataops.c): nothing written before is lost,
# the changes are redone after the restart, fsck ends clean, and requests
# made right after the restart wait for the chunkserver instead of
# failing.
#
# The chunkserver is stopped (SIGSTOP) so that it cannot act on the
# commands, then two writers fsync through a second mount (a new session,
# so no write lease): one into a file with fsync'd data (the chunk moves
# to version 2), one into a new file (a new chunk). Once the master has
# both requests, it and the stopped chunkserver get SIGKILL: the journal
# has both changes, the disk neither. After the restart:
#  - the copy of the first file's chunk at version 1 is brought to
#    version 2, not deleted as stale (which would lose its data);
#  - a third writer writes into a file whose chunk a snapshot shares:
#    its copy (duplicate) that reached no server is made again from the
#    shared chunk, with the data fsync'd before the snapshot;
#  - a read of the first file issued before the chunkserver is back
#    waits for it and returns the fsync'd data;
#  - the writers succeed: the mount sends their chunk requests again
#    after the reconnect, and the master answers them once the
#    chunkserver is back and the changes are redone (the new file gets
#    a chunk in place of the one that reached no server);
#  - the data fsync'd before is intact, and the writers' data is there.
. "$(dirname "$0")/../lib.sh"
sw_init inflight

# A short grace: the chunkserver comes back within it, the redo follows.
start_master --set chunkserver_grace=3s
start_mount
M=$SW_MNT

chunk_requests() {
	sw_tool stats --json | "$PYTHON" -c \
		'import json, sys; print(json.load(sys.stdin)["total"]["requests"].get("chunk", 0))'
}

head -c $((3 << 20)) /dev/urandom >"$SW_TMP/a.orig"
head -c $((4 << 10)) /dev/urandom >"$SW_TMP/a.patch"
head -c $((64 << 10)) /dev/urandom >"$SW_TMP/b.new"
dd if="$SW_TMP/a.orig" of="$M/a" bs=1M conv=fsync status=none
touch "$M/b"
mkdir "$M/d"
dd if="$SW_TMP/a.orig" of="$M/d/c" bs=1M conv=fsync status=none
sw_tool snapshot "$M/d" "$M/d-snap" >/dev/null
wait_fsck_clean 30 "before the crash"

W=$SW_TMP/w
start_mount "$W"
cs=${SW_CS_PIDS[1]}
before=$(chunk_requests)
kill -STOP "$cs"
dd if="$SW_TMP/a.patch" of="$W/a" bs=4k seek=256 conv=notrunc,fsync \
	status=none 2>"$SW_TMP/wa.err" &
wa=$!
dd if="$SW_TMP/b.new" of="$W/b" bs=64k conv=fsync status=none \
	2>"$SW_TMP/wb.err" &
wb=$!
dd if="$SW_TMP/a.patch" of="$W/d/c" bs=4k seek=256 conv=notrunc,fsync \
	status=none 2>"$SW_TMP/wc.err" &
wc=$!
wait_until 30 "the writers' chunk requests at the master" \
	eval '(($(chunk_requests) >= before + 3))'
sleep 0.3 # the commands are sent right after the journal record
log "SIGKILL to the master and to the stopped chunkserver"
kill_master
kill_chunkserver 1
restart_master start

# A cold mount reads the first file before the chunkserver is back.
R=$SW_TMP/r
start_mount "$R"
cat "$R/a" >"$SW_TMP/a.read" 2>"$SW_TMP/ra.err" &
ra=$!
sleep 1
alive "$ra" || fail "the read did not wait for the chunkserver: $(cat "$SW_TMP/ra.err")"
restart_chunkserver 1 start

wait "$ra" || fail "reading the fsync'd file after the restart: $(cat "$SW_TMP/ra.err")"
wa_rc=0 wb_rc=0 wc_rc=0
wait "$wa" || wa_rc=$?
wait "$wb" || wb_rc=$?
wait "$wc" || wc_rc=$?
log "writers: patch exit $wa_rc, new file exit $wb_rc, shared file exit $wc_rc"
((wa_rc == 0)) || fail "the patch's writer failed: $(cat "$SW_TMP/wa.err")"
((wb_rc == 0)) || fail "the new file's writer failed: $(cat "$SW_TMP/wb.err")"
((wc_rc == 0)) || fail "the shared file's writer failed: $(cat "$SW_TMP/wc.err")"

grep -q 'chunk [0-9a-f]*: moving 1 copy from version 1 to 2' "$SW_MASTER_LOG" ||
	fail "the master did not bring the copy left behind forward"
grep -q 'chunk [0-9a-f]*: making it again on 1 server' "$SW_MASTER_LOG" ||
	fail "the master did not make the copy again"
wait_fsck_clean 30 "after the restart"

# What the read saw: the fsync'd data, with the patch or without it.
"$PYTHON" - "$SW_TMP/a.orig" "$SW_TMP/a.patch" "$SW_TMP/a.read" <<'EOF' ||
import sys
orig, patch, got = (open(p, "rb").read() for p in sys.argv[1:])
off = 1 << 20
new = orig[:off] + patch + orig[off + len(patch):]
sys.exit(0 if got in (orig, new) else 1)
EOF
	fail "the read after the restart returned neither the old nor the new data"

# Now from a cold cache again, after the writers are done.
stop_mount "$R"
start_mount "$R"
# Both patched files hold the patch, over the data fsync'd before.
cp "$SW_TMP/a.orig" "$SW_TMP/a.new"
dd if="$SW_TMP/a.patch" of="$SW_TMP/a.new" bs=4k seek=256 conv=notrunc \
	status=none
cmp "$SW_TMP/a.new" "$R/a" || fail "the first file lost data"
cmp "$SW_TMP/a.new" "$R/d/c" ||
	fail "the file sharing its chunk with a snapshot lost data"
cmp "$SW_TMP/a.orig" "$R/d-snap/c" || fail "the snapshot's copy changed"
cmp "$SW_TMP/b.new" "$R/b" || fail "the new file's acknowledged data"

# And the chunks take writes again.
dd if="$SW_TMP/a.patch" of="$M/a" bs=4k seek=10 conv=notrunc,fsync status=none
dd if="$SW_TMP/b.new" of="$M/b" bs=64k conv=fsync status=none
stop_mount "$R"
start_mount "$R"
cmp "$SW_TMP/b.new" "$R/b" || fail "rewriting the new file"
cmp -i 0:$((40 << 10)) -n $((4 << 10)) "$SW_TMP/a.patch" "$R/a" ||
	fail "rewriting the first file"
wait_fsck_clean 30 "at the end"
sw_pass
