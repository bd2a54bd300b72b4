#!/bin/bash
# What a user's snapshots cost every writer (threat model, finding 13):
# uid 1000 pipelines 800 SNAPSHOTs of its own 1-node directory while
# root's session writes a file elsewhere; that writer keeps its lease
# (its chunk's version never moves), and a snapshot takes back only the
# lease of a file it copies, whose writer's next write goes to a copy
# while the snapshot keeps the data of before (copy-on-write). While a
# snapshot waits (its chunkserver stopped), snapshots queue at most 8 a
# user, however many sessions it has, and 256 in all, EAGAIN past. The master's
# sweepfs_master_lease_revocations_total counts one revocation in all.
# tests/integration/progs/snaplease.c says exactly what each check
# asserts.
#
# Needs no mount. SNAPLEASE_MEASURE=1 only prints the writer's CHUNK
# round trips while the 800 snapshots go (for any build's binaries:
# SWEEPFS_BUILD; SNAPLEASE_PROG names this program).
. "$(dirname "$0")/../lib.sh"

sw_init snaplease
SNAPLEASE=${SNAPLEASE_PROG:-$SWEEPFS_BUILD/tests/integration/progs/snaplease}
[[ -x "$SNAPLEASE" ]] || fail "no $SNAPLEASE (build with -Dtests=enabled)"
command -v curl >/dev/null || skip "curl is not installed"

MPORT=$(pick_port)
SW_CHUNKSERVERS=0
start_master --set metrics_listen="$SW_MASTER_HOST:$MPORT"
start_chunkservers 1
CS_PID=${SW_CS_PIDS[1]}
# A stopped chunkserver is let go on whatever way this ends (lib.sh's
# clean-up calls this first).
continue_cs() { kill -CONT "$CS_PID" 2>/dev/null || true; }
sw_scenario_cleanup() { continue_cs; }

rc=0
"$SNAPLEASE" -m "$SW_PORT" -p "$SW_MASTER_PID" -c "${SW_CS_PORTS[1]}" \
	-C "$CS_PID" -n 800 ${SNAPLEASE_MEASURE:+-M} \
	>"$SW_TMP/snaplease.out" 2>&1 || rc=$?
continue_cs
sed 's/^/    /' "$SW_TMP/snaplease.out" >&2
((rc == 0)) || fail "snaplease"

revoked=$(curl -sf "http://$SW_MASTER_HOST:$MPORT/metrics" |
	awk '$1 == "sweepfs_master_lease_revocations_total" { print $2 }')
log "leases taken back: ${revoked:-none reported}"
if [[ -z "${SNAPLEASE_MEASURE:-}" ]]; then
	[[ "$revoked" == 1 ]] ||
		fail "the master took back ${revoked:-?} leases, not 1 (/t/g's)"
fi

log "the master stops cleanly"
stop_master
sw_pass
