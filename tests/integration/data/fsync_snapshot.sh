#!/bin/bash
# An fsync after a snapshot. A writer writes, syncs, writes again and
# keeps its descriptor open; a snapshot of its directory takes its lease
# back, which moves the chunk to a new version on its chunkserver; the
# writer's fsync then carries the version and token it wrote with, which
# the chunkserver refuses (ESTALE). The mount asks the master about the
# chunk again, as that chunk at that version only (mount/data.c,
# "fsync"): it has moved on, and the bump that moved it synced it, so
# the fsync succeeds with no copy made; the file and the snapshot hold
# both writes, and share the one chunk. Through the default mount and
# one with the kernel's writeback cache. (A token that runs out before
# the fsync, 10 minutes after the write, takes the same path:
# unit.data.)
. "$(dirname "$0")/../lib.sh"
sw_init fsync_snapshot --root # drop_caches

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
for path in sys.argv[1:]:
    got = open(path, "rb").read()
    if got != b"A" * 65536 + b"C" * 65536:
        sys.exit("%s: %d bytes, %d A, %d C" %
                 (path, len(got), got.count(b"A"), got.count(b"C")))
EOP
		fail "in $(basename "$m"), the file or its snapshot is wrong"
	chunk_of() { sw_tool info "$1" | sed -n 's/^  chunk 0: \([0-9a-f]*\) .*/\1/p'; }
	a=$(chunk_of "$d/f") b=$(chunk_of "$d.snap/f")
	[[ -n "$a" && "$a" == "$b" ]] ||
		fail "in $(basename "$m"), the fsync copied the chunk ($a, $b)"
done
sw_pass
