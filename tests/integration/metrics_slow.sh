#!/bin/bash
# metrics_slow: slow clients (slowloris) on the metrics port cannot keep
# a scraper out. Clients that open a request and send a byte a second
# without ever finishing it, from one address (24 of them: at most 4 are
# taken) and from 40 addresses of their own (past the 32 connections in
# all, the oldest of the heaviest address makes room); meanwhile every
# scrape from another address is answered within 1 s, every slow client
# is closed within the 5 s request deadline (plus the sweep's 0.5 s and
# some slack), and the master's filesystem service goes on. Afterwards a
# scrape from the attackers' own address is answered again. The metrics
# endpoint is common/metrics.c: the chunkserver's and the mount's are
# the same code.

. "$(dirname "$0")/lib.sh"
sw_init metrics_slow

MPORT=$(pick_port)
SW_CHUNKSERVERS=0
start_master --set metrics_listen=127.0.0.1:$MPORT
MURL=http://127.0.0.1:$MPORT/metrics
export SWEEPFS_MASTER=$SW_MASTER_HOST:$SW_PORT
wait_until 20 "a first scrape" curl -sf -o /dev/null "$MURL"

"$PYTHON" "$SW_SRC/metrics_slow.py" 127.0.0.1 "$MPORT" "$SW_TOOL_BIN" \
	>"$SW_TMP/slow.out" 2>&1 || { cat "$SW_TMP/slow.out"; fail "slow clients held the metrics endpoint"; }
cat "$SW_TMP/slow.out"
alive "$SW_MASTER_PID" || fail "the master died"
sw_pass
