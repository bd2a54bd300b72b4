#!/bin/bash
# A leader of a group of masters frozen for longer than its lease, then
# let go, answers nothing more: a mount still connected to it finds the
# file another mount created through the new leader meanwhile
# (tests/integration/group_lease.py does the work and says how).

. "$(dirname "$0")/lib.sh"
sw_init group_lease --root

command -v etcd >/dev/null || skip "etcd is not installed (etcd-server)"

DRIVER_PID=
sw_scenario_cleanup() {
	if [[ -n "$DRIVER_PID" ]] && kill -0 "$DRIVER_PID" 2>/dev/null; then
		kill -TERM "$DRIVER_PID" 2>/dev/null || true
		wait_dead "$DRIVER_PID" 30 || kill -KILL "$DRIVER_PID" 2>/dev/null || true
	fi
	local m
	for m in "$SW_TMP"/mnt-*; do
		[[ -d "$m" ]] && umount -l "$m" 2>/dev/null || true
	done
}

"$PYTHON" "$SW_SRC/group_lease.py" --build "$SWEEPFS_BUILD" --tmp "$SW_TMP" \
	>"$SW_TMP/lease.json" 2>"$SW_TMP/lease.log" &
DRIVER_PID=$!
rc=0
wait "$DRIVER_PID" || rc=$?
cat "$SW_TMP/lease.log" >&2
cat "$SW_TMP/lease.json"
((rc != 77)) || skip "$(tail -n 1 "$SW_TMP/lease.log")"
((rc == 0)) || fail "the lease scenario failed (status $rc)"
sw_pass
