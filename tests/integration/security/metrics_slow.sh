#!/bin/bash
# metrics_slow: slow clients (slowloris) on the metrics port cannot keep
# a scraper out. Clients that open a request and send a byte a second
# without ever finishing it, from one address (24 of them: at most 4 are
# taken) and from 40 addresses of their own (past the 32 connections in
# all, the oldest of the heaviest address makes room); meanwhile every
# scrape from another address is answered within 1 s, every slow client
# is closed within the 5 s request deadline (plus the sweep's 0.5 s and
# some slack), the daemon's memory stays within 8 MiB of where it was
# (32 under AddressSanitizer) and the master's service goes on.
# Afterwards a scrape from the attackers' own address is answered again.
# The master's endpoint, then the chunkserver's (both common/metrics.c).

. "$(dirname "$0")/../lib.sh"
sw_init metrics_slow

MPORT=$(pick_port)
CPORT=$(pick_port)
SW_CHUNKSERVERS=0
start_master --set metrics_listen=127.0.0.1:$MPORT
start_chunkservers 1 --set metrics_listen=127.0.0.1:$CPORT
export SWEEPFS_MASTER=$SW_MASTER_HOST:$SW_PORT
wait_until 20 "a first scrape" curl -sf -o /dev/null "http://127.0.0.1:$MPORT/metrics"
wait_until 20 "a first scrape of the chunkserver" curl -sf -o /dev/null "http://127.0.0.1:$CPORT/metrics"

slow() {
	"$PYTHON" "$SW_HERE/metrics_slow.py" "$@" >"$SW_TMP/slow.out" 2>&1 ||
		{ cat "$SW_TMP/slow.out"; fail "slow clients held the metrics endpoint of $2"; }
	cat "$SW_TMP/slow.out"
}
log "the master's endpoint"
slow 127.0.0.1 "$MPORT" "$SW_MASTER_PID" sweepfs_master_nodes "$SW_TOOL_BIN"
log "the chunkserver's endpoint"
slow 127.0.0.1 "$CPORT" "${SW_CS_PIDS[1]}" sweepfs_chunkserver_chunks
alive "$SW_MASTER_PID" || fail "the master died"
alive "${SW_CS_PIDS[1]}" || fail "the chunkserver died"
sw_pass
