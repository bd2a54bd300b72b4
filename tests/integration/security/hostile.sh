#!/bin/bash
# Hostile input: a real master and a real chunkserver, and a client that
# does everything a client must not (tests/integration/progs/hostile.c,
# whose header lists every check and its exact expected outcome):
# oversized frames, unknown types, requests before the hello, a second
# hello, frames flagged as replies, garbage; names with '/', NUL, ".",
# ".." or 256 bytes; chunk reads and writes with tokens it was not
# granted; connections that stall half-way through a frame while
# another client is served; 1000 connections at once, with the default
# max_connections and with a lower one; CHUNK requests pipelined without
# end against a chunk kept busy. Then both daemons must still be
# up, their logs must name each refusal, and they must stop cleanly.
#
# Needs no mount. HOSTILE_SEED repeats the random choices (printed).
. "$(dirname "$0")/../lib.sh"

sw_init hostile
HOSTILE=$SWEEPFS_BUILD/tests/integration/progs/hostile
[[ -x "$HOSTILE" ]] || fail "no $HOSTILE (build with -Dtests=enabled)"
SEED=${HOSTILE_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
FRAME_TIMEOUT_MS=2000
MAX_CONNECTIONS=200
log "seed $SEED (HOSTILE_SEED=$SEED repeats it)"

SW_CHUNKSERVERS=0
start_master --set frame_timeout=${FRAME_TIMEOUT_MS}ms
start_chunkservers 1 --set frame_timeout=${FRAME_TIMEOUT_MS}ms
CS_LOG=${SW_CS_LOGS[1]}
# The token epoch the master leads in (its log says so at start).
EPOCH=$(sed -n 's/.*chunk tokens: epoch \([0-9a-f]\{16\}\).*/\1/p' \
	"$SW_MASTER_LOG" | tail -n 1)
[[ -n "$EPOCH" ]] || fail "the master's log names no token epoch"

hostile() {
	"$HOSTILE" -m "$SW_PORT" -p "$SW_MASTER_PID" \
		-c "${SW_CS_PORTS[1]}" -q "${SW_CS_PIDS[1]}" \
		-k "$SW_META/token.key" -e "$EPOCH" -t "$FRAME_TIMEOUT_MS" -s "$SEED" "$@" \
		>"$SW_TMP/hostile.out" 2>&1 || {
		cat "$SW_TMP/hostile.out" >&2
		fail "hostile $*"
	}
	sed 's/^/    /' "$SW_TMP/hostile.out" >&2
}

log "bad frames, bad names, tokens not granted, stalls, floods"
hostile frames names tokens confine groups stall flood=1000 csflood=1000

# Each refusal left a line in the daemon's log.
for what in 'frame too large' 'request before hello' \
	'sent a frame flagged as reply' 'bad frame header' \
	'unparsable' 'unknown request type' 'stalled mid-frame'; do
	grep -q "$what" "$SW_MASTER_LOG" || fail "no '$what' in the master's log"
done
for what in 'frame too large' 'request before hello' \
	'sent a reply or notification frame' 'bad frame header' \
	'unparsable' 'is not served here' 'stalled mid-frame'; do
	grep -q "$what" "$CS_LOG" || fail "no '$what' in the chunkserver's log"
done

log "CHUNK requests pipelined against a busy chunk (the chunkserver stopped)"
hostile chunkjobs

log "300 unfinished largest writes on the chunkserver"
hostile csbig=300

log "1000 connections at once against max_connections = $MAX_CONNECTIONS"
SW_MASTER_ARGS=(--set frame_timeout=${FRAME_TIMEOUT_MS}ms
	--set max_connections=$MAX_CONNECTIONS)
restart_master term
hostile "flood=1000/$MAX_CONNECTIONS" flood=100
n=$(grep -c 'refused: .* connections open' "$SW_MASTER_LOG" || true)
assert_ge 1 "$n" "refusals logged by the master"

log "both daemons stop cleanly"
stop_chunkserver 1
stop_master
sw_pass
