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
MPORT=$(pick_port)
start_master --set "exports_file=$EXPORTS" \
	--set deleg_timeout=${DELEG_MS}ms --set inval_timeout=${INVAL_MS}ms \
	--set metrics_listen="$SW_MASTER_HOST:$MPORT"

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
# /metrics counts what the log says, one for one.
metric() {
	python3 -c 'import sys, urllib.request as u
for l in u.urlopen(sys.argv[1], timeout=10).read().decode().splitlines():
    f = l.split()
    if len(f) == 2 and f[0] == sys.argv[2]:
        print(f[1])' "http://$SW_MASTER_HOST:$MPORT/metrics" "$1"
}
given_up=$(grep -cE 'did not acknowledge an invalidation|invalidations; not waited for again' \
	"$SW_MASTER_LOG")
taken=$(grep -c 'taken back: ' "$SW_MASTER_LOG")
log "$given_up sessions given up on for acks, $taken delegations taken back"
assert_eq "$given_up" "$(metric sweepfs_master_invalidation_ack_timeouts_total)" \
	"sessions given up on for acks, in /metrics"
assert_eq "$taken" "$(metric sweepfs_master_delegation_recall_timeouts_total)" \
	"delegations taken back, in /metrics"

log "the master stops cleanly"
stop_master
sw_pass
