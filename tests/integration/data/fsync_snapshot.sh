#!/bin/bash
# An fsync after a snapshot. A writer writes, syncs, writes again and
# keeps its descriptor open; a snapshot of its directory takes its lease
# back, which moves the chunk to a new version on its chunkserver; the
# writer's fsync then carries the version and token it wrote with, which
# the chunkserver refuses (ESTALE). The mount asks the master for the
# chunk again and syncs it there (mount/data.c, "fsync"): the fsync
# succeeds, the file holds both writes, and the snapshot what was
# written before it. Through the default mount and one with the
# kernel's writeback cache. (A token that runs out before the fsync, 10
# minutes after the write, takes the same path: unit.data.)
. "$(dirname "$0")/../lib.sh"
sw_init fsync_snapshot

start_master
start_mount "$SW_TMP/a"
start_mount "$SW_TMP/w" "" writeback_cache

for m in "$SW_TMP/a" "$SW_TMP/w"; do
	d=$m/$(basename "$m")
	mkdir "$d"
	log "$(basename "$m"): write, sync, write, snapshot, fsync"
	"$PYTHON" - "$d/f" "$SW_TOOL_BIN" "$SW_MASTER_HOST:$SW_PORT" "$d" <<'EOP' ||
import os, subprocess, sys
path, tool, master, d = sys.argv[1:]
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
assert os.pwrite(fd, b"A" * 65536, 0) == 65536
os.fsync(fd)
assert os.pwrite(fd, b"C" * 65536, 65536) == 65536
subprocess.run([tool, "-m", master, "snapshot", d, d + ".snap"],
               check=True, stdout=subprocess.DEVNULL)
try:
    os.fsync(fd)
except OSError as e:
    sys.exit("the fsync after the snapshot: %s" % e)
os.close(fd)
EOP
		fail "in $(basename "$m"), the writer's fsync failed"
	drop_caches
	"$PYTHON" - "$d/f" "$d.snap/f" <<'EOP' ||
import sys
new = open(sys.argv[1], "rb").read()
old = open(sys.argv[2], "rb").read()
for name, got in (("file", new), ("snapshot", old)):
    if got[:65536] != b"A" * 65536:
        sys.exit("the %s's first 64 KiB are not the A's" % name)
if new[65536:] != b"C" * 65536:
    sys.exit("the file's second 64 KiB: %d bytes, %d C" %
             (len(new) - 65536, new[65536:].count(b"C")))
EOP
		fail "in $(basename "$m"), the file or its snapshot is wrong"
done
sw_pass
