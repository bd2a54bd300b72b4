#!/bin/bash
# A crash right after a big removal replays a bounded amount of work: the
# master checkpoints once replaying what came after its newest checkpoint
# would cost checkpoint_changes (master_checkpoint_due(): a change each,
# plus a node each that a purge freed), not once that many records were
# written. The purge journals a slice of freed nodes per record, so the
# removal of FILES files is a few hundred records, far below the bound,
# while it frees four times the bound in nodes; counting records, no
# checkpoint would come until checkpoint_interval (an hour) and a kill -9
# would replay every node of it.
#
# The tree is a checkpoint sweepfs-nsbench writes (FILES empty files in
# two directories, in a second), the removal `sweepfs rmr` of both.
. "$(dirname "$0")/../lib.sh"
sw_init restart --root
SW_CHUNKSERVERS=0 # empty files: no chunk

FILES=200000
BOUND=50000
NSBENCH=$SWEEPFS_BUILD/bench/sweepfs-nsbench
[[ -x "$NSBENCH" ]] || fail "no $NSBENCH"

SW_META=$SW_TMP/meta
mkdir -p "$SW_META"
"$NSBENCH" make "$SW_META" "$FILES" 0 2 >/dev/null 2>&1 ||
	fail "sweepfs-nsbench make"
start_master --set checkpoint_changes=$BOUND
start_mount
M=$SW_MNT
seed=$(sw_status 'd["checkpoint_version"]')
assert_eq "$((FILES + 3))" "$(sw_status 'd["nodes"]')" "nodes loaded"

purged() {
	[[ "$(sw_status 'd["purge_left"] + d["purge_roots"]')" == 0 ]]
}
sw_tool rmr "$M/d0" "$M/d1" || fail "sweepfs rmr"
wait_slowly 120 "the purge of $FILES files" purged
records=$(($(sw_status 'd["meta_version"]') - seed))
log "the removal: $records records for $FILES files"
# What the old trigger counted stays far below the bound...
assert_le "$((BOUND / 10))" "$records" "records of the removal"

# ... and the work makes checkpoints: a tick (1 s) that finds BOUND
# since the newest starts one. Once none started for 3 s, what a crash
# would replay is less than BOUND.
newer() {
	(($(sw_status 'd["checkpoint_version"]') > seed))
}
wait_slowly 60 "a checkpoint after the purge's work" newer
last=
same=0
end=$((SECONDS + 60))
while ((same < 3)); do
	((SECONDS < end)) || fail "the checkpoints did not settle in 60 s"
	v=$(sw_status 'd["checkpoint_version"]')
	if [[ "$v" == "$last" ]]; then
		same=$((same + 1))
	else
		same=0
		last=$v
	fi
	sleep 1
done
log "newest checkpoint $last (the seed's: $seed)"

restart_master kill
line=$(grep 'metadata at version' "$SW_MASTER_LOG" | tail -n 1)
log "restart: $line"
loaded=$(sed -E 's/.*\(([0-9]+) nodes loaded.*/\1/' <<<"$line")
nodes=$(sw_status 'd["nodes"]')
[[ "$loaded" =~ ^[0-9]+$ ]] || fail "no load figure in: $line"
# The nodes the replay freed are at most the bound (less the records).
assert_le "$BOUND" "$((loaded - nodes))" "nodes the replay freed"
assert_eq 1 "$nodes" "nodes after the restart (the root)"
[[ -z "$(ls "$M")" ]] || fail "the removed directories came back"
sw_pass
