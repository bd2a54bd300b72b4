#!/bin/bash
# progress: long-running commands draw a progress line on a terminal (a
# count, a rate, a percentage and the time left when the total is known,
# redrawn in place with \r and erase-to-end-of-line, on stderr) and write
# none of it when stderr is not a terminal. The terminal is a pty from
# script(1); the other case a pipe.
#
#   sweepfs rmr --wait          the purge that frees the tree (slowed down)
#   sweepfs trash purge --wait  the items, then the purge
#   sweepfs rm                  a local tree: count and rate
#   sweepfs snapshot            a big tree copied in the background
#   sweepfs compare-delete      building trees, deleting them

. "$(dirname "$0")/../lib.sh"
sw_init progress
command -v script >/dev/null || skip "script(1) (util-linux) is not installed"

# A slow purge: 1% of the master's time, short slices.
start_master --set purge_duty=1 --set purge_duty_busy=1 --set purge_slice=50 \
	--set snapshot_sync_max=100
start_mount
M=$SW_MNT
SWEEPFS=$SW_TOOL_BIN
export SWEEPFS_MASTER=$SW_MASTER_HOST:$SW_PORT
unset SWEEPFS_PROGRESS

# tree DIR N: N*1000 files under DIR, made as snapshots of one directory.
tree() {
	local dir=$1 n=$2 i
	mkdir -p "$M/one" "$dir"
	[[ -e "$M/one/f1000" ]] || (cd "$M/one" && seq -f 'f%g' 1000 | xargs touch)
	for ((i = 1; i <= n; i++)); do
		"$SWEEPFS" snapshot "$M/one" "$dir/s$i"
	done
}

# on_tty NAME CMD...: run CMD with stderr (and stdout) on a pty; its
# output in $SW_TMP/NAME.tty. Fails if CMD fails.
on_tty() {
	local name=$1 cmd
	shift
	printf -v cmd '%q ' "$@"
	TERM=xterm COLUMNS=120 script -qefc "$cmd" "$SW_TMP/$name.tty" \
		</dev/null >/dev/null || fail "$name on a terminal: status $?"
}

# drawn NAME PATTERN MIN: the pty output holds at least MIN redraws (\r,
# then the line, then erase to the end of the line) and PATTERN (grep -E)
# in one of them.
drawn() {
	local n
	n=$(grep -ao $'\r[^\r]*\033\\[K' "$SW_TMP/$1.tty" | wc -l)
	((n >= $3)) || fail "$1: $n redraws, expected at least $3: $(cat -v "$SW_TMP/$1.tty")"
	grep -aqE -- "$2" "$SW_TMP/$1.tty" ||
		fail "$1: no '$2' in: $(cat -v "$SW_TMP/$1.tty" | tail -c 600)"
	log "$1: $n redraws, last: $(grep -ao $'\r[^\r]*\033\\[K' "$SW_TMP/$1.tty" | tail -n 1 | cat -v)"
}

# quiet NAME CMD...: stderr is a pipe: nothing of the progress line.
quiet() {
	local name=$1
	shift
	"$@" 2>&1 >/dev/null | cat >"$SW_TMP/$name.pipe"
	[[ "${PIPESTATUS[0]}" == 0 ]] || fail "$name through a pipe failed"
	if grep -aq $'\r\|\033' "$SW_TMP/$name.pipe"; then
		fail "$name wrote a progress line into a pipe: $(cat -v "$SW_TMP/$name.pipe")"
	fi
}

log "rmr --wait of 10,000 files, the purge slowed down"
tree "$M/big" 10
on_tty rmr "$SWEEPFS" rmr --wait "$M/big"
drawn rmr 'purging big: [0-9,]+/10,0[0-9][0-9] nodes .*[0-9]+%.*/s' 3
grep -aqE 'ETA [0-9]+:[0-9]{2}:[0-9]{2}' "$SW_TMP/rmr.tty" || fail "rmr: no ETA"
grep -aqE '10,0[0-9][0-9]/10,0[0-9][0-9] nodes  100%' "$SW_TMP/rmr.tty" ||
	fail "rmr: the last line is not the end"
tree "$M/big2" 2
quiet rmr "$SWEEPFS" rmr --wait "$M/big2"

log "trash purge --wait"
mkdir "$M/t"
"$SWEEPFS" settrashtime 3600 "$M/t"
tree "$M/t/x" 5
"$SWEEPFS" rmr "$M/t/x" # into the trash, whole
"$SWEEPFS" trash ls --json "$M" >"$SW_TMP/trash.json"
id=$("$PYTHON" -c 'import json, sys
print(json.load(open(sys.argv[1]))["items"][0]["id"])' "$SW_TMP/trash.json") ||
	fail "no trash item: $(cat "$SW_TMP/trash.json")"
on_tty trash "$SWEEPFS" trash purge --wait "$id"
drawn trash 'trash purge: 1/1 items  100%' 1
drawn trash 'purging the trash: [0-9,]+/[0-9,]+ nodes' 2

log "rm of a local tree"
mkdir "$SW_TMP/local"
mkdir "$SW_TMP/local2"
"$PYTHON" -c 'import os, sys
for d in sys.argv[1:]:
    for i in range(40):
        os.mkdir("%s/d%d" % (d, i))
        for j in range(500):
            os.mknod("%s/d%d/f%d" % (d, i, j))' "$SW_TMP/local" "$SW_TMP/local2"
on_tty rm "$SWEEPFS" rm "$SW_TMP/local"
drawn rm 'sweepfs rm: [0-9,]+ removed' 1
grep -aqE '20,041 removed' "$SW_TMP/rm.tty" || fail "rm: the last count is not 20,041 (files, directories and the root)"
assert_missing "$SW_TMP/local"
quiet rm "$SWEEPFS" rm "$SW_TMP/local2"
assert_missing "$SW_TMP/local2"

log "snapshot of a big tree (in the background)"
tree "$M/src" 20
on_tty snap "$SWEEPFS" snapshot "$M/src" "$M/copy"
drawn snap 'snapshot src: [0-9,]+ nodes' 1
quiet snap "$SWEEPFS" snapshot "$M/src" "$M/copy2"
assert_eq 1000 "$(ls "$M/copy2/s20" | wc -l)" "files in a copied snapshot"

log "compare-delete"
mkdir "$M/cd"
on_tty cdel "$SWEEPFS" compare-delete -n 8000 --methods rm-rf --strace off \
	--json "$SW_TMP/cd.json" "$M/cd"
drawn cdel '[0-9,]+/[0-9,]+ entries' 2

sw_pass
