#!/bin/bash
# Clients given a list of masters (issue 12, a group), the first of which
# is dead (nothing listens on its port): the chunkserver registers with
# the live one, the mount (its source the list, also through mount.sweepfs
# as fstab would run it) writes and reads a file, the sweepfs command
# with -m LIST, $SWEEPFS_MASTER=LIST and the mount's own source reaches
# the master, and after the master is killed and started again on its
# port, everything goes on without a remount. Each switch of master is a
# line in the client's log. (The leader a follower names, EREMOTE, needs
# a group of masters: tests/unit/test_frame.c covers the walk.)
. "$(dirname "$0")/lib.sh"
sw_init master_list --root

SW_CHUNKSERVERS=0 # started below, with the list
start_master
DEAD=$(pick_port)
LIVE=127.0.0.1:$SW_PORT
LIST=127.0.0.1:$DEAD,$LIVE

log "a chunkserver with master = $LIST"
start_chunkservers 1 --set "master=$LIST"
grep -Eq "master 127.0.0.1:$DEAD: .*onnection refused; trying $LIVE" \
	"$SW_TMP/cs1.log" || fail "no switch line in the chunkserver's log"

log "a mount of $LIST"
start_mount "$SW_TMP/mnt" "$LIST"
M=$SW_MNT
assert_eq "sweepfs:$LIST" "$(findmnt -n -M "$M" -o SOURCE)" "the mount's source"
grep -q "master 127.0.0.1:$DEAD: Connection refused; trying $LIVE" "$M.log" ||
	fail "no switch line in the mount's log"
head -c 3000000 /dev/urandom >"$SW_TMP/data"
cp "$SW_TMP/data" "$M/f1"
drop_caches
cmp "$SW_TMP/data" "$M/f1" || fail "f1 read back differs"

log "the sweepfs command with a list"
unset SWEEPFS_MASTER
"$SW_TOOL_BIN" -m "$LIST" status >"$SW_TMP/st1" || fail "sweepfs -m LIST status"
grep -q . "$SW_TMP/st1" || fail "sweepfs -m LIST status printed nothing"
SWEEPFS_MASTER=$LIST "$SW_TOOL_BIN" status >/dev/null ||
	fail "SWEEPFS_MASTER=LIST sweepfs status"
(cd "$M" && "$SW_TOOL_BIN" status >/dev/null) ||
	fail "sweepfs status inside the mount (the source from mountinfo)"
rc=0
t0=$(date +%s%N)
"$SW_TOOL_BIN" -m "127.0.0.1:$DEAD,127.0.0.1:$(pick_port)" status \
	2>"$SW_TMP/err" || rc=$?
t1=$(date +%s%N)
assert_eq 4 "$rc" "exit status with every master of the list down"
grep -q "cannot reach the master at 127.0.0.1:$DEAD,127.0.0.1:" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
# five rounds, 0.1 + 0.2 + 0.4 + 0.8 s of pauses between them
assert_le 5000 $(((t1 - t0) / 1000000)) "ms before giving up on a dead list"
rc=0
"$SW_TOOL_BIN" -m "127.0.0.1:$DEAD,,$LIVE" status 2>"$SW_TMP/err" || rc=$?
assert_eq 3 "$rc" "exit status for a list with an empty element"
grep -q "bad master address" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"

log "mount.sweepfs with a list, as fstab would"
[[ -x "$SW_HELPER_BIN" ]] || fail "no mount.sweepfs in $SWEEPFS_BUILD/mount"
mkdir "$SW_TMP/h"
timeout 30 "$SW_HELPER_BIN" "$LIST:/" "$SW_TMP/h" -o defaults,_netdev ||
	fail "mount.sweepfs $LIST:/ failed"
is_sweepfs_mount "$SW_TMP/h" || fail "no sweepfs mount after mount.sweepfs"
adopt_mount "$SW_TMP/h"
cmp "$SW_TMP/data" "$SW_TMP/h/f1" || fail "f1 through the helper's mount differs"
stop_adopted "$SW_TMP/h" "$SW_ADOPTED_PID"

log "the master restarts on its port"
restart_master kill # returns once the chunkserver registered again
wait_until 15 "the mount to reconnect" test -e "$M/f1"
cp "$SW_TMP/data" "$M/f2"
drop_caches
cmp "$SW_TMP/data" "$M/f1" || fail "f1 differs after the restart"
cmp "$SW_TMP/data" "$M/f2" || fail "f2 differs after the restart"
grep -q "reconnected to the master at $LIVE" "$M.log" ||
	fail "no reconnect line in the mount's log"
"$SW_TOOL_BIN" -m "$LIST" status >/dev/null || fail "sweepfs -m LIST status after the restart"
stop_mount "$M"
sw_pass
