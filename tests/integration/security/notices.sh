#!/bin/bash
# What a client that does not read what it is sent may make the master
# hold (threat model, finding 5): a session that lists a directory and
# reads nothing while another makes 150,000 files there costs the
# master's RSS at most a few MiB more than the same creates without it
# (31 MiB more before the bound), and other sessions' pings stay quick;
# a session that stops reading for a while and reads again gets one
# invalidation of everything in place of those it missed, then names
# again; one whose hello does not say it takes that (an older mount) is
# closed instead once it stays behind (5 s). tests/integration/progs/notices.c says exactly what
# each check asserts.
#
# Needs no mount. NOTICES_CREATES, NOTICES_BOUND_MIB change the number
# of creates and the bound.
. "$(dirname "$0")/../lib.sh"

sw_init notices
NOTICES=$(sw_prog notices)

SW_CHUNKSERVERS=0
start_master

"$NOTICES" -m "$SW_PORT" -p "$SW_MASTER_PID" \
	-n "${NOTICES_CREATES:-150000}" -b "${NOTICES_BOUND_MIB:-8}" \
	>"$SW_TMP/notices.out" 2>&1 || {
	cat "$SW_TMP/notices.out" >&2
	fail "notices"
}
sed 's/^/    /' "$SW_TMP/notices.out" >&2
grep -q "has not read .* bytes of notices" "$SW_MASTER_LOG" ||
	fail "no 'has not read ... bytes of notices' in the master's log"

log "the master stops cleanly"
stop_master
sw_pass
