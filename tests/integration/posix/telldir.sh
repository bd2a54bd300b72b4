#!/bin/bash
# readdir/telldir/seekdir while the directory changes: the reader itself
# unlinks and creates entries as it goes, then another process does so
# concurrently; no entry that stays is skipped or returned twice, and
# seekdir to a recorded position resumes at the same entry
# (tests/integration/progs/telldir.c says exactly what is checked). Then
# a listing that spans a kill -9 and restart of the master: each name once;
# directories still open when the mount goes are freed (sanitizer builds).
# A mount that caches no attributes (attr_timeout=0) lists a directory
# (its readdirplus fetched the listing again from the start forever,
# 20,000 READDIR requests a second, for fresher attributes).
# TELLDIR_FILES (5000) and TELLDIR_SEED (random, printed) to vary it.
. "$(dirname "$0")/../lib.sh"
sw_init telldir --root

TELLDIR=$(sw_prog telldir)
FILES=${TELLDIR_FILES:-5000}
SEED=${TELLDIR_SEED:-$(date +%s%N | cut -c10-18)}
log "seed $SEED (TELLDIR_SEED=$SEED to repeat), $FILES files"
start_master
start_mount
M=$SW_MNT

run_telldir() {
	local out
	if ! out=$(timeout 300 "$TELLDIR" "$@" 2>&1); then
		printf '%s\n' "$out" >&2
		fail "telldir $*"
	fi
	printf '%s\n' "$out" | sed 's/^/    /' >&2
}

log "the reader changes the directory itself"
mkdir "$M/single"
run_telldir -n "$FILES" -s "$SEED" "$M/single"

log "another process changes it concurrently"
mkdir "$M/concurrent"
run_telldir -n "$FILES" -s "$((SEED + 1))" -c "$M/concurrent"

log "the same directories listed by ls and find"
n=$(ls -f "$M/single" | grep -vc '^\.\{1,2\}$')
assert_eq "$n" "$(find "$M/single" -mindepth 1 -maxdepth 1 | wc -l)" "ls -f versus find entry count"
assert_eq "$n" "$(ls "$M/single" | sort -u | wc -l)" "ls entries are unique"

log "the same directory listed by a mount with attr_timeout=0"
# wsync: it holds no delegation, so nothing spares it the refetch.
start_mount "$SW_TMP/z" "" attr_timeout=0,entry_timeout=0,wsync
r0=$(sw_requests readdir)
# In the background: a listing that never ends waits in the kernel,
# where no signal reaches it; the mount's stop (cleanup) ends it.
ls -l "$SW_TMP/z/single" >"$SW_TMP/z.list" 2>&1 &
lister=$!
wait_until 60 "ls -l on the mount with attr_timeout=0 to finish" \
	sh -c "! kill -0 $lister 2>/dev/null"
wait "$lister" || fail "ls -l on a mount with attr_timeout=0"
assert_eq "$n" "$(grep -vc '^total ' "$SW_TMP/z.list")" \
	"entries ls -l lists with attr_timeout=0"
r1=$(sw_requests readdir)
log "READDIR requests for that listing: $((r1 - r0))"
# Twice the pages at most: the first is fetched once more, fresh.
assert_le $((2 * (n / 1000 + 2))) $((r1 - r0)) "READDIR requests for one listing"
stop_mount "$SW_TMP/z"

# A listing that spans a master restart: read half, kill -9 and restart,
# read the rest; every name exactly once.
log "a listing across a master restart"
mkdir "$M/restart"
(cd "$M/restart" && seq -f 'r%05g' 1 3000 | xargs touch)
"$PYTHON" - "$M/restart" "$SW_MASTER_PID" >"$SW_TMP/restart.names" <<'EOF' &
import os, sys, time
d = sys.argv[1]
names = []
with os.scandir(d) as it:
    for i, e in enumerate(it):
        names.append(e.name)
        if i == 1500:
            # let the test kill and restart the master now
            open(d + "/../restart.go", "w").close()
            for _ in range(200):
                if os.path.exists(d + "/../restart.done"):
                    break
                time.sleep(0.05)
print("\n".join(names))
EOF
reader=$!
wait_until 30 "the reader to reach the middle" test -e "$M/restart.go"
restart_master kill
touch "$M/restart.done"
wait "$reader" || fail "the reader failed across the restart"
sort "$SW_TMP/restart.names" >"$SW_TMP/restart.sorted"
seq -f 'r%05g' 1 3000 >"$SW_TMP/restart.expected"
assert_same_text "$SW_TMP/restart.expected" "$SW_TMP/restart.sorted" \
	"names listed across a master restart (each once)"

# Directories still open when the mount is told to go: the unmount is
# lazy, and when the holder closes them at last, the kernel queues their
# RELEASEDIR and tears the connection down without waiting for it. The
# mount frees those handles itself (a sanitizer build reports them as
# leaks otherwise).
log "directories open at the unmount"
"$PYTHON" - "$M" "$SW_TMP/holding" <<'EOF' &
import os, sys, time
fds = [os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
       for _ in range(100)]
open(sys.argv[2], "w").close()
time.sleep(3)
EOF
holder=$!
wait_until 30 "the directories to be open" test -e "$SW_TMP/holding"
stop_mount "$M"
wait "$holder" || fail "the process holding directories open failed"
sw_pass
