#!/bin/bash
# Changes whose reply is lost are made exactly once. A relay between the
# mount and the master (lossy_proxy.py) drops the reply to one change and
# cuts the connection, as a broken network would after the master made
# it; the mount sends the request again with the same id, flagged
# SW_FRAME_AGAIN, and the master answers it as the first time from what
# its changelog recorded (master/replies.h) instead of making it twice:
# mkdir, mknod, symlink,
# link, rename, unlink, rmdir, chmod, truncate, setxattr, removexattr,
# exclusive creates (one whose mode the creator could not open again)
# all succeed, with the result made once. Then the same across a kill -9
# of the master (the change comes back from the changelog) and across a
# clean restart (from the checkpoint), with the master restarted before
# the request is sent again. A change that failed is made again when sent
# again, and fails again the same way.
. "$(dirname "$0")/../lib.sh"
sw_init once --root

CTL=$SW_TMP/proxy
mkdir -p "$CTL"
start_master
PROXY_PORT=$(pick_port)
"$PYTHON" "$SW_HERE/lossy_proxy.py" "$PROXY_PORT" "$SW_MASTER_HOST:$SW_PORT" \
	"$CTL" >"$SW_TMP/proxy.out" 2>"$SW_TMP/proxy.log" &
PROXY_PID=$!
sw_scenario_cleanup() {
	kill "$PROXY_PID" 2>/dev/null
	wait "$PROXY_PID" 2>/dev/null
}
wait_until 10 "the relay to listen" grep -q ready "$SW_TMP/proxy.out"
# wsync: every change goes to the master as it is made, none under a
# delegation (those travel in batches that are idempotent already).
start_mount "$SW_TMP/mnt" "127.0.0.1:$PROXY_PORT" wsync,master_timeout=30
M=$SW_MNT

# lost WANT OP ARGS...: fsop OP ARGS with the reply to its change lost;
# it must end with WANT ("OK" or an errno name) and a reply must have
# been dropped on the way.
lost() {
	local want=$1
	shift
	rm -f "$CTL/dropped" "$CTL/again"
	touch "$CTL/arm"
	expect_errno "$want" fsop "$@"
	[[ -e "$CTL/dropped" ]] || fail "no reply was lost for $*"
	assert_same_text "$CTL/dropped" "$CTL/again" \
		"$*: the request sent again (type, id), flagged again"
}

log "each kind of change, its reply lost"
mkdir "$M/d"
lost OK mkdir "$M/d/sub"
assert_stat %F directory "$M/d/sub" "the directory made once"
lost OK mknod "$M/d/fifo" 010644
assert_stat %F fifo "$M/d/fifo" "the fifo made once"
lost OK symlink target "$M/d/sym"
assert_eq target "$(readlink "$M/d/sym")" "the symlink made once"
lost OK create "$M/d/excl"
assert_stat %F "regular empty file" "$M/d/excl" "the file created exclusively"
lost OK create "$M/d/ro" 0444
assert_stat %a 444 "$M/d/ro" "a file its creator may not open again"
lost OK link "$M/d/excl" "$M/d/hard"
assert_stat %h 2 "$M/d/excl" "links after a link made once"
lost OK rename "$M/d/hard" "$M/d/moved"
assert_missing "$M/d/hard"
assert_stat %h 2 "$M/d/moved" "links after a rename made once"
lost OK chmod "$M/d/moved" 0600
assert_stat %a 600 "$M/d/excl" "the mode set once"
echo hello >"$M/d/data"
lost OK truncate "$M/d/data" 2
assert_stat %s 2 "$M/d/data" "the size set once"
lost OK setxattr "$M/d/data" user.k v
assert_eq "OK v" "$(fsop getxattr "$M/d/data" user.k)" "the xattr set once"
lost OK removexattr "$M/d/data" user.k
expect_errno ENODATA fsop getxattr "$M/d/data" user.k
lost OK unlink "$M/d/moved"
assert_missing "$M/d/moved"
assert_stat %h 1 "$M/d/excl" "links after an unlink made once"
lost OK rmdir "$M/d/sub"
assert_missing "$M/d/sub"
grep -q "answered again" "$SW_TMP/master.log" ||
	fail "the master's log does not say it answered a request again"

log "a change that failed, its reply lost, fails again"
mkdir "$M/d/full"
touch "$M/d/full/f"
# The kernel cannot know the directory is not empty: the master says so.
lost ENOTEMPTY rmdir "$M/d/full"
assert_stat %F directory "$M/d/full" "a directory that could not go"

# across WAY OP ARGS...: the reply is lost, then the master is restarted
# (WAY: kill for kill -9, term for a clean stop with a checkpoint) before
# the request is sent again; it must succeed.
across() {
	local way=$1 op
	shift
	op="$*"
	rm -f "$CTL/dropped" "$SW_TMP/across.out"
	touch "$CTL/hold" "$CTL/arm"
	fsop "$@" >"$SW_TMP/across.out" 2>&1 &
	local p=$!
	wait_until 20 "the reply to $op to be lost" test -e "$CTL/dropped"
	restart_master "$way"
	rm -f "$CTL/hold"
	wait "$p"
	assert_eq OK "$(cat "$SW_TMP/across.out")" "$op, its reply lost, across a restart ($way)"
}

log "across a kill -9 of the master: from the changelog"
across kill mkdir "$M/d/k1"
assert_stat %F directory "$M/d/k1" "the directory made once across a kill"
across kill unlink "$M/d/data"
assert_missing "$M/d/data"
across kill create "$M/d/k2"
assert_stat %F "regular empty file" "$M/d/k2" "the exclusive create across a kill"

log "across a clean restart: from the checkpoint"
across term mkdir "$M/d/t1"
assert_stat %F directory "$M/d/t1" "the directory made once across a restart"
across term rename "$M/d/k2" "$M/d/t2"
assert_missing "$M/d/k2"
assert_stat %F "regular empty file" "$M/d/t2" "the file renamed once across a restart"

log "the namespace as made"
assert_eq "excl fifo full k1 ro sym t1 t2" \
	"$(ls "$M/d" | sort | tr '\n' ' ' | sed 's/ $//')" "names in the directory"
stop_mount "$M"
fsck_ok
sw_pass
