#!/bin/bash
# The chunkserver on its own, before any master manages chunks: the
# program tests/integration/progs/cs_driver.c plays the master and the
# clients against real sweepfs-chunkserver processes (registration,
# commands, tokens, pipelined I/O, corruption, bad peers, kill -9 and
# restart, replication between two chunkservers; its header lists every
# check). Then the daemon as an administrator meets it: --dump-config,
# bad options, daemon mode with a pid file, and the lock that keeps a
# second chunkserver out of a data directory in use.
#
# Needs no FUSE. CS_SEED repeats the driver's random choices.
. "$(dirname "$0")/../lib.sh"

SW_NAME=chunkserver
[[ -n "${SWEEPFS_BUILD:-}" ]] ||
	{ echo "SWEEPFS_BUILD is not set (meson sets it)" >&2; exit 1; }
CS_BIN=$SWEEPFS_BUILD/chunkserver/sweepfs-chunkserver
DRIVER=$SWEEPFS_BUILD/tests/integration/progs/cs_driver
[[ -x "$CS_BIN" ]] || fail "no $CS_BIN"
[[ -x "$DRIVER" ]] || fail "no $DRIVER (build with -Dtests=enabled)"
CS_PID=

cs_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +eE
	if [[ -n "$CS_PID" ]] && alive "$CS_PID"; then
		kill -KILL "$CS_PID" 2>/dev/null
		wait_dead "$CS_PID" 5
	fi
	if ! sanitizer_reports; then
		echo "FAIL [$SW_NAME]: sanitizer reports in the daemon logs" >&2
		((rc == 0)) && rc=1
	fi
	if ((rc != 0)) && [[ -n "$SW_TMP" ]]; then
		for f in "$SW_TMP"/*.log; do
			[[ -f "$f" ]] || continue
			echo "==== last lines of $f" >&2
			tail -n 25 "$f" >&2
		done
	fi
	if [[ -n "$SW_TMP" && "${SWEEPFS_KEEP_TMP:-0}" != 1 ]]; then
		rm -rf "$SW_TMP"
	elif [[ -n "$SW_TMP" ]]; then
		echo "kept $SW_TMP" >&2
	fi
	exit "$rc"
}

SW_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sweepfs-it.chunkserver.XXXXXX")
trap cs_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "temporary directory $SW_TMP"

# ---- the protocol, through the driver ------------------------------------

log "cs_driver: the chunkserver against a fake master and clients"
if ! timeout 240 "$DRIVER" -b "$CS_BIN" -d "$SW_TMP" \
	${CS_SEED:+-s "$CS_SEED"} >"$SW_TMP/driver.out" 2>&1; then
	cat "$SW_TMP/driver.out" >&2
	fail "cs_driver"
fi
sed 's/^/    /' "$SW_TMP/driver.out" >&2

# ---- the daemon ---------------------------------------------------------

log "configuration"
out=$("$CS_BIN" --dump-config -d /x -d /y -m m1:7 -l 10.0.0.1:9000 \
	--set open_files=9)
grep -qx 'data_dirs = /x,/y.*' <<<"$out" || fail "data_dirs: $out"
grep -qx 'master = m1:7.*' <<<"$out" || fail "master: $out"
grep -qx 'listen = 10.0.0.1:9000.*' <<<"$out" || fail "listen: $out"
grep -qx 'open_files = 9.*' <<<"$out" || fail "open_files: $out"
st=0
"$CS_BIN" --set no_such_key=1 --dump-config >/dev/null 2>&1 || st=$?
assert_eq 2 "$st" "exit status for an unknown key"
st=0
"$CS_BIN" -l 'not an address:' -d "$SW_TMP/x" -f >/dev/null 2>&1 || st=$?
assert_eq 2 "$st" "exit status for a bad listen address"

log "no start without the master's chunkserver key, or with a bad one"
port=$(pick_port)
mport=$(pick_port)
for bad in "$SW_TMP/no-such.key" "$SW_TMP/open.key"; do
	[[ $bad == */open.key ]] && cp "$SW_TMP/cs.key" "$bad" && chmod 644 "$bad"
	st=0
	"$CS_BIN" -f -d "$SW_TMP/nokey" -l "127.0.0.1:$port" -m "127.0.0.1:$mport" \
		--set "master_key_file=$bad" >"$SW_TMP/cs-nokey.log" 2>&1 || st=$?
	assert_ne 0 "$st" "exit status without a usable key ($bad)"
	grep -q "cannot use the master's chunkserver key $bad" "$SW_TMP/cs-nokey.log" ||
		fail "no clear message: $(cat "$SW_TMP/cs-nokey.log")"
done

log "daemon mode, pid file, one chunkserver per data directory"
KEY=(--set "master_key_file=$SW_TMP/cs.key")
"$CS_BIN" -d "$SW_TMP/locked" -l "127.0.0.1:$port" -m "127.0.0.1:$mport" \
	"${KEY[@]}" -p "$SW_TMP/cs.pid" ||
	fail "the daemon did not report readiness"
[[ -s "$SW_TMP/cs.pid" ]] || fail "no pid file"
CS_PID=$(cat "$SW_TMP/cs.pid")
alive "$CS_PID" || fail "the daemon is not running"
st=0
"$CS_BIN" -f -d "$SW_TMP/other,$SW_TMP/locked" -l "127.0.0.1:$(pick_port)" \
	-m "127.0.0.1:$mport" "${KEY[@]}" >"$SW_TMP/cs-second.log" 2>&1 || st=$?
assert_ne 0 "$st" "a second chunkserver on a locked data directory"
grep -q 'in use by another chunkserver' "$SW_TMP/cs-second.log" ||
	fail "no message about the lock: $(cat "$SW_TMP/cs-second.log")"
kill -TERM "$CS_PID"
wait_dead "$CS_PID" 20 || fail "the daemon did not stop on SIGTERM"
CS_PID=
[[ ! -e "$SW_TMP/cs.pid" ]] || fail "the pid file is still there"

sw_pass
