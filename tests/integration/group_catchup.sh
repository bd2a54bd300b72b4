#!/bin/bash
# A member of a group of masters away for longer than etcd keeps the log,
# and one with an empty data directory, catch up from the leader's
# checkpoint by themselves; one with the wrong session key is refused it
# (tests/integration/group_catchup.py does the work and says how).

. "$(dirname "$0")/lib.sh"
sw_init group_catchup --root

command -v etcd >/dev/null || skip "etcd is not installed (etcd-server)"

DRIVER_PID=
sw_scenario_cleanup() {
	if [[ -n "$DRIVER_PID" ]] && kill -0 "$DRIVER_PID" 2>/dev/null; then
		kill -TERM "$DRIVER_PID" 2>/dev/null || true
		wait_dead "$DRIVER_PID" 30 || kill -KILL "$DRIVER_PID" 2>/dev/null || true
	fi
	[[ -d "$SW_TMP/mnt" ]] && umount -l "$SW_TMP/mnt" 2>/dev/null || true
}

"$PYTHON" "$SW_SRC/group_catchup.py" --build "$SWEEPFS_BUILD" --tmp "$SW_TMP" \
	>"$SW_TMP/catchup.json" 2>"$SW_TMP/catchup.log" &
DRIVER_PID=$!
rc=0
wait "$DRIVER_PID" || rc=$?
cat "$SW_TMP/catchup.log" >&2
cat "$SW_TMP/catchup.json"
((rc != 77)) || skip "$(tail -n 1 "$SW_TMP/catchup.log")"
((rc == 0)) || fail "the catch-up scenario failed (status $rc)"
sw_pass
