#!/bin/bash
# Threat model, finding 8: a user's TRASH list in a trash of many items of
# another uid answers its few items without walking the trash; the
# listing pages, for a user, for an admin and for a session confined to a
# subtree, which looks at a bounded number of items a page
# (tests/integration/progs/trashlist.c lists every check and its
# expected outcome). Threat model, finding 3: a session's first pages
# take another's delegations back four times at once and once a second
# after, its next pages and purges never (check "recalls"). Then the
# master must still be up and stop cleanly.
#
# `sweepfs trash ls` lists them all, a page at a time; after a restart
# (replay, then a checkpoint) the listing is the same. Needs no mount and
# setpriv (util-linux). TRASH_ITEMS sets the size of the trash (100,000).
. "$(dirname "$0")/../lib.sh"

sw_init trash_list
TRASHLIST=$SWEEPFS_BUILD/tests/integration/progs/trashlist
[[ -x "$TRASHLIST" ]] || fail "no $TRASHLIST (build with -Dtests=enabled)"
ITEMS=${TRASH_ITEMS:-100000}

SW_CHUNKSERVERS=0
start_master

log "$ITEMS items of one uid in the trash, 3 of another"
"$TRASHLIST" -m "$SW_PORT" -p "$SW_MASTER_PID" -n "$ITEMS" -l 2000 \
	setup own pipeline paging confined recalls \
	>"$SW_TMP/trashlist.out" 2>&1 || {
	cat "$SW_TMP/trashlist.out" >&2
	fail "trashlist"
}
sed 's/^/    /' "$SW_TMP/trashlist.out" >&2

# ids of `sweepfs trash ls --json` on stdin: their count, once each and in
# order, or a failure.
count_listed() {
	"$PYTHON" -c '
import json, sys
ids = [i["id"] for i in json.load(sys.stdin)["items"]]
assert ids == sorted(set(ids)), "an item twice or out of order"
print(len(ids))'
}

log "sweepfs trash ls pages through every item: root's, and a user's"
n=$(sw_tool trash ls --json | count_listed) || fail "sweepfs trash ls --json"
assert_eq $((ITEMS + 3)) "$n" "items root's trash ls listed"
n=$(setpriv --reuid=1000 --regid=1000 --clear-groups \
	"$SW_TOOL_BIN" -m "$SW_MASTER_HOST:$SW_PORT" trash ls --json |
	count_listed) || fail "sweepfs trash ls --json as uid 1000"
assert_eq "$ITEMS" "$n" "items uid 1000's trash ls listed"
sw_tool trash ls >"$SW_TMP/ls.txt" || fail "sweepfs trash ls"
assert_eq 1 "$(grep -c '^ID ' "$SW_TMP/ls.txt")" "header lines of trash ls"
assert_eq $((ITEMS + 4)) "$(wc -l <"$SW_TMP/ls.txt")" "lines of trash ls"

# The trees are made again from the changelog (kill -9: replay) and from
# a checkpoint (a clean stop writes one).
for how in kill term; do
	log "after a restart ($how) the trees list the same"
	restart_master "$how"
	"$TRASHLIST" -m "$SW_PORT" -p "$SW_MASTER_PID" -n "$ITEMS" own paging \
		>"$SW_TMP/trashlist.out" 2>&1 || {
		cat "$SW_TMP/trashlist.out" >&2
		fail "trashlist after a restart ($how)"
	}
	sed 's/^/    /' "$SW_TMP/trashlist.out" >&2
done

log "the master stops cleanly"
stop_master
sw_pass
