#!/bin/bash
# errors: the sweepfs command's failures a person can act on. Each gives
# exactly one line on stderr that says what is wrong, and its own exit
# status (sweepfs(1), EXIT STATUS):
#
#   3  a wrong master address: one that does not parse, a host that does
#      not resolve, a port where something else than a master answers
#   4  a master that is down: nothing listens, or it was killed under a
#      mount the command finds it through
#   5  a path that is not on a sweepfs mount
#   6  no permission: the master refuses an unprivileged user's rmr, or
#      the exports file refuses this client
#   7  rmr of a mount's root
#
# and 0/1/2 keep their meaning (success, a failure without a more precise
# status, a usage error).

. "$(dirname "$0")/../lib.sh"
sw_init errors --root

SWEEPFS=$SW_TOOL_BIN
start_master
start_mount
sw_user_python

# expect_fail STATUS PATTERN CMD...: CMD exits with STATUS and prints one
# line on stderr, matching PATTERN (grep -E), and nothing on stdout.
expect_fail() {
	local want=$1 pat=$2 rc=0 lines
	shift 2
	"$@" >"$SW_TMP/out" 2>"$SW_TMP/err" || rc=$?
	[[ "$rc" == "$want" ]] ||
		fail "$*: exit status $rc, expected $want; stderr: $(cat "$SW_TMP/err")"
	lines=$(wc -l <"$SW_TMP/err")
	[[ "$lines" == 1 ]] ||
		fail "$*: $lines lines on stderr, expected one: $(cat "$SW_TMP/err")"
	grep -Eq -- "$pat" "$SW_TMP/err" ||
		fail "$*: unclear message: $(cat "$SW_TMP/err")"
	[[ ! -s "$SW_TMP/out" ]] || fail "$*: wrote to stdout: $(cat "$SW_TMP/out")"
	log "status $rc: $(cat "$SW_TMP/err")"
}

log "a wrong master address"
expect_fail 3 "bad master address 'not an address:x'" \
	"$SWEEPFS" -m 'not an address:x' status
expect_fail 3 "bad master address 'no-such-host.invalid'" \
	"$SWEEPFS" -m no-such-host.invalid status
expect_fail 3 "bad master address" \
	env SWEEPFS_MASTER=127.0.0.1:99999 "$SWEEPFS" status
# Something that is not a master: it answers with a line of text.
"$PYTHON" -c 'import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"SSH-2.0-OpenSSH_9.2 not a master\r\n" * 8); c.close()' \
	>"$SW_TMP/other.port" &
OTHER=$!
wait_until 10 "the other server" test -s "$SW_TMP/other.port"
expect_fail 3 "does not answer as a sweepfs master" \
	"$SWEEPFS" -m "127.0.0.1:$(cat "$SW_TMP/other.port")" status
kill "$OTHER"
wait "$OTHER" 2>/dev/null || true

log "a master that is down"
expect_fail 4 "cannot reach the master at 127.0.0.1:[0-9]+: Connection refused" \
	"$SWEEPFS" -m "127.0.0.1:$(pick_port)" status

log "a path that is not on sweepfs"
mkdir "$SW_TMP/local"
expect_fail 5 "$SW_TMP/local: not on a sweepfs mount" "$SWEEPFS" rmr "$SW_TMP/local"
expect_fail 5 "not on a sweepfs mount" "$SWEEPFS" snapshot "$SW_TMP/local" "$SW_MNT/x"
expect_fail 5 "not on a sweepfs mount" "$SWEEPFS" getgoal "$SW_TMP/local"

log "no permission"
mkdir -p "$SW_MNT/rootonly/tree/sub"
chmod 755 "$SW_MNT/rootonly"
expect_fail 6 "cannot remove '.*/rootonly/tree': Permission denied" \
	as_user 65534 65534 "" "$SWEEPFS" rmr "$SW_MNT/rootonly/tree"
assert_exists "$SW_MNT/rootonly/tree/sub"
expect_fail 6 "Permission denied|Operation not permitted" \
	as_user 65534 65534 "" "$SWEEPFS" snapshot "$SW_MNT/rootonly/tree" "$SW_MNT/rootonly/copy"

log "rmr of a mount's root"
expect_fail 7 "is the root of a sweepfs mount" "$SWEEPFS" rmr "$SW_MNT"
assert_exists "$SW_MNT/rootonly"

log "the exports refuse this client"
# Only 127.0.0.1 (the mount, the chunkserver) may connect; the tool comes
# from 127.0.0.3.
printf '127.0.0.1 / rw,alldirs,admin,maproot=0\n' >"$SW_TMP/exports.cfg"
SW_MASTER_ARGS=(--set "exports_file=$SW_TMP/exports.cfg")
restart_master term
expect_fail 6 "refuses this client" \
	env SWEEPFS_BIND=127.0.0.3 "$SWEEPFS" -m "127.0.0.1:$SW_PORT" status

log "a master killed under a mount"
kill_master
expect_fail 4 "cannot reach the master" "$SWEEPFS" status "$SW_MNT"
restart_master start

log "a mount option out of range is refused before mounting"
mkdir -p "$SW_TMP/never"
expect_fail 2 "busy_poll = 2000000: must be microseconds" \
	"$SW_MOUNT_BIN" "$SW_MASTER_HOST:$SW_PORT" "$SW_TMP/never" -f \
	-o busy_poll=2000000
mountpoint -q "$SW_TMP/never" && fail "mounted despite a bad busy_poll"

log "usage errors keep status 2"
rc=0
"$SWEEPFS" rmr --no-such-option "$SW_MNT" 2>/dev/null || rc=$?
assert_eq 2 "$rc" "exit status of a bad option"

sw_pass
