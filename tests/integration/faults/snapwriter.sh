#!/bin/bash
# A snapshot keeps its data against a writer whose token was granted
# before the master restarted (threat model, finding 20). The writer's
# mount keeps its write location, token and all, across the restart,
# and the restarted master knows no lease: before token epochs, the
# snapshot shared the chunk without moving its version, and the writer's
# next write went in place into the chunk the snapshot shares. Now the
# restarted master leads in a token epoch of its own, the chunkserver
# refuses the old token, the mount asks again, and the write goes to a
# copy (copy-on-write): the snapshot has the data of before, the file the
# new data, both through ordinary reads, and the writer's fsync of what
# it wrote before the restart succeeds; fsck ends clean. After a crash
# (SIGKILL), a clean stop (SIGTERM), and a crash whose master comes back
# late with the snapshot asked before the chunkserver is back. Then a
# snapshot whose
# writer's only chunkserver is down is refused with EIO, and made once
# it is back.
. "$(dirname "$0")/../lib.sh"
sw_init snapwriter --root

start_master
start_mount
M=$SW_MNT
SIG=$SW_TMP/sig # where the writer says how far it got
mkdir "$SIG"

# start_writer PATH synced|unsynced: a writer in the background (its pid
# in $writer) writes 64 KiB of "A"s at 0 and fsyncs; "unsynced" then
# writes 64 KiB of "C"s at 64 KiB and does not sync them (the fsync
# after the restart syncs them with the token they were written with:
# the chunkserver takes the previous key's tokens for a sync); it says
# "written", waits for "go", fsyncs, writes 64 KiB of "B"s at 0 and
# fsyncs again, its descriptor open all along.
start_writer() {
	"$PYTHON" - "$1" "$2" "$SIG" <<'EOP' &
import os, sys, time
path, mode, sig = sys.argv[1:]
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
assert os.pwrite(fd, b"A" * 65536, 0) == 65536
os.fsync(fd)
if mode == "unsynced":
    assert os.pwrite(fd, b"C" * 65536, 65536) == 65536
open(os.path.join(sig, "written"), "w").close()
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(sig, "go")):
    if time.monotonic() > deadline:
        sys.exit("writer: no go within 120 s")
    time.sleep(0.05)
os.fsync(fd)
assert os.pwrite(fd, b"B" * 65536, 0) == 65536
os.fsync(fd)
os.close(fd)
EOP
	writer=$!
}

# snapshot_then_write DIR WANT: snapshot DIR as DIR.snap, let the writer
# go on, and check through reads that DIR.snap/f begins with the "A"s of
# before and that DIR/f is WANT, 64 KiB of each letter ("B", or "BC" for
# an unsynced writer).
snapshot_then_write() {
	sw_tool snapshot "$1" "$1.snap" >/dev/null ||
		fail "sweepfs snapshot of $1"
	touch "$SIG/go"
	wait "$writer" || fail "the writer's fsync or write in $1 failed"
	drop_caches
	"$PYTHON" - "$1/f" "$1.snap/f" "$2" <<'EOP' ||
import sys
new = open(sys.argv[1], "rb").read()
old = open(sys.argv[2], "rb").read(65536)
want = b"".join(c.encode() * 65536 for c in sys.argv[3])
if old != b"A" * 65536:
    sys.exit("the snapshot's copy changed: %d bytes, %d of them B" %
             (len(old), old.count(b"B")))
if new != want:
    sys.exit("the file: %d bytes, %d B, %d C, not %s" %
             (len(new), new.count(b"B"), new.count(b"C"), sys.argv[3]))
EOP
		fail "in $1, the snapshot or the file is wrong"
}

# kill, term: restart_master waits for the chunkserver to register
# again. late: the master comes back 6 s after a crash (the chunkserver's
# backoff had grown) and the snapshot is asked at once, before the
# chunkserver is back: the copy waits for it (csrv_epoch_wait_ns()).
for how in kill term late; do
	log "a writer holds its token across a restart ($how), then a snapshot"
	mkdir "$M/$how"
	rm -f "$SIG"/*
	start_writer "$M/$how/f" unsynced
	wait_until 60 "the writer's first write" test -e "$SIG/written"
	if [[ $how == late ]]; then
		kill_master
		sleep 6
		_launch_master --fixed-port || fail "the master did not restart"
	else
		restart_master "$how"
	fi
	wait_until 60 "the mount to be answered again" stat "$M/$how/f"
	snapshot_then_write "$M/$how" BC
	log "the snapshot has the data of before, the file the new data"
done

# The writer's only chunkserver is down: the lease cannot be taken back
# (no copy up to move on), and the writer's token would write in place
# once it is back, so the snapshot is refused rather than reported made
# (finding 21), and so is the same snapshot asked again at once (the
# lease stays until it is taken back); once the chunkserver is back the
# snapshot is made, and the writer's next write goes to a copy.
log "a writer's chunkserver is down: a snapshot is refused twice, then made"
mkdir "$M/down"
rm -f "$SIG"/*
start_writer "$M/down/f" synced
wait_until 60 "the writer's write" test -e "$SIG/written"
kill_chunkserver 1
wait_until 30 "the master to see the chunkserver gone" \
	test -z "$(connected_chunkservers)"
for try in 1 2; do
	if sw_tool snapshot "$M/down" "$M/down.snap" 2>"$SW_TMP/snap.err"; then
		fail "snapshot $try sharing a chunk whose lease cannot be taken back was made"
	fi
	grep -q 'Input/output error' "$SW_TMP/snap.err" ||
		fail "refused snapshot $try said: $(cat "$SW_TMP/snap.err")"
	assert_missing "$M/down.snap"
done
grep -q 'could not be taken back' "$SW_MASTER_LOG" ||
	fail "the master's log does not say why the snapshot was given up"
restart_chunkserver 1 start
snapshot_then_write "$M/down" B
wait_fsck_clean 60 "after both restarts"
stop_mount
stop_master
sw_pass
