#!/bin/bash
# Issue 28, items 6 to 8: no client holds the others up by not answering
# (tests/integration/progs/stall.c lists each check and its bound):
# listers that never acknowledge an invalidation, a delegation holder
# that ignores its recall, one that asks for a new directory each time a
# recall nears its end, a connection that pumps requests behind one
# that waits, and one that dribbles a byte at a time behind one. Another client's unrelated requests are answered within
# 100 ms throughout, and the master's RSS stays within a stated budget.
#
# Needs no mount.
. "$(dirname "$0")/../lib.sh"

sw_init stall
STALL=$SWEEPFS_BUILD/tests/integration/progs/stall
[[ -x "$STALL" ]] || fail "no $STALL (build with -Dtests=enabled)"
DELEG_MS=2000
INVAL_MS=300

EXPORTS=$SW_TMP/exports.cfg
cat >"$EXPORTS" <<EOT
127.0.0.1 /pub  ro
127.0.0.1 /jail rw,alldirs,maproot=nobody
127.0.0.1 /team rw,alldirs,maproot=0
127.0.0.1 /dl   rw,alldirs,maproot=0
127.0.0.1 /     rw,alldirs,admin,maproot=0
EOT

SW_CHUNKSERVERS=0
start_master --set "exports_file=$EXPORTS" \
	--set deleg_timeout=${DELEG_MS}ms --set inval_timeout=${INVAL_MS}ms

stall() {
	"$STALL" -m "$SW_PORT" -p "$SW_MASTER_PID" -t $DELEG_MS -i $INVAL_MS \
		"$@" >"$SW_TMP/stall.out" 2>&1 || {
		cat "$SW_TMP/stall.out" >&2
		fail "stall $*"
	}
	sed 's/^/    /' "$SW_TMP/stall.out" >&2
}

stall setup inval recall order renew pump dribble

for what in 'did not acknowledge an invalidation' 'taken back'; do
	grep -q "$what" "$SW_MASTER_LOG" || fail "no '$what' in the master's log"
done

log "the master stops cleanly"
stop_master
sw_pass
