#!/bin/bash
# Checkpoints every second while files are made: each written checkpoint
# lets the older ones and the changelog files only they needed go
# (removed in the master's thread pool, not on its loop: master.c), so
# that at most keep_checkpoints stay and no changelog file older than the
# oldest one kept; and a kill -9 afterwards brings back every file from
# what is left: the newest checkpoint and the changelog after it.
. "$(dirname "$0")/../lib.sh"
sw_init checkpoints --root

KEEP=2
start_master --set checkpoint_interval=1s --set keep_checkpoints=$KEEP \
	--set log_level=info
start_mount
M=$SW_MNT

# The checkpoints on disk, oldest first (written ones, not .tmp).
checkpoints() {
	ls "$SW_META" | grep -E '^checkpoint\.[0-9]+$' | sort
}
written() {
	grep -c 'checkpoint [0-9]* written' "$SW_MASTER_LOG"
}
# Pruned: at most KEEP checkpoints, and at most one changelog file
# starting at or before the oldest one's version + 1 (the one holding
# the changes after it; every older file would be needed by none).
pruned() {
	local oldest n=0 f first
	(($(checkpoints | wc -l) <= KEEP)) || return 1
	oldest=$(checkpoints | head -n 1 | sed 's/^checkpoint\.//')
	[[ -n "$oldest" ]] || return 1
	for f in "$SW_META"/changelog.*; do
		first=${f##*/changelog.}
		[[ "$first" =~ ^[0-9]+$ ]] || continue
		((10#$first <= 10#$oldest + 1)) && n=$((n + 1))
	done
	((n <= 1))
}

# Files are made until four checkpoints are written: one is written only
# when something changed since the last.
mkdir "$M/d"
made=0
end=$((SECONDS + 60))
while (($(written) < 4)); do
	((SECONDS < end)) || fail "four checkpoints not written in 60 s"
	for ((i = 0; i < 50; i++)); do
		: >"$M/d/f$made" || fail "creating f$made"
		made=$((made + 1))
	done
	sleep 0.1
done
# Durable: fsync of the directory sends what a delegation holds back.
"$PYTHON" -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' \
	"$M/d" || fail "fsync of the directory"
log "made $made files, $(written) checkpoints written so far"
wait_until 20 "old checkpoints and changelogs removed" pruned
log "on disk: $(checkpoints | tr '\n' ' ')"

restart_master kill
start_mount "$SW_TMP/fresh"
got=$(ls "$SW_TMP/fresh/d" | wc -l)
assert_eq "$made" "$got" "files after a kill -9 and a restart"
sw_pass
