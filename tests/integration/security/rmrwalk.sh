#!/bin/bash
# What a user's RMR makes the master's loop walk (threat model, finding
# 4): the permission walk of a directory of 1,000,000 files with a
# subdirectory last is paid from the caller's session's bucket and
# everyone's (master/rmr.c). 64 sessions pipelining 4 such RMRs each as
# uid 1000, then one session pipelining 256, get a few walks and then
# cheap EAGAIN refusals, while another session's pings all come back
# within 200 ms; then a fresh session of the user removes the tree with
# its first RMR; 16 pipelined RMSNAPSHOT -f that read 1,000,000
# unflagged files each are paid from the same buckets (master/snapshot.c);
# RMSNAPSHOT -f of 1,000,000 flagged files removes 2,048 a request with
# the pings under the same bound (threat model, finding 24); and -f of
# 1,000,000 kept files and then 10,000 flagged reads the kept ones once.
# tests/integration/progs/rmrwalk.c says exactly what each check
# asserts.
#
# Needs no mount. RMRWALK_FILES, RMRWALK_BOUND_MS change the tree's size
# and the bound.
. "$(dirname "$0")/../lib.sh"

sw_init rmrwalk
RMRWALK=$SWEEPFS_BUILD/tests/integration/progs/rmrwalk
[[ -x "$RMRWALK" ]] || fail "no $RMRWALK (build with -Dtests=enabled)"

SW_CHUNKSERVERS=0
start_master

"$RMRWALK" -m "$SW_PORT" -p "$SW_MASTER_PID" \
	-f "${RMRWALK_FILES:-1000000}" -n 256 -s 64 \
	-b "${RMRWALK_BOUND_MS:-200}" >"$SW_TMP/rmrwalk.out" 2>&1 || {
	cat "$SW_TMP/rmrwalk.out" >&2
	fail "rmrwalk"
}
sed 's/^/    /' "$SW_TMP/rmrwalk.out" >&2

log "the master stops cleanly"
stop_master
sw_pass
