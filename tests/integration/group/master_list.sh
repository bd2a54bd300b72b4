#!/bin/bash
# Clients given a list of masters (issue 12, a group), the first of which
# is dead (nothing listens on its port): the chunkserver registers with
# the live one, the mount (its source the list, also through mount.sweepfs
# as fstab would run it) writes and reads a file, the sweepfs command
# with -m LIST, $SWEEPFS_MASTER=LIST and the mount's own source reaches
# the master, and after the master is killed and started again on its
# port, everything goes on without a remount. Each switch of master is a
# line in the client's log. A stand-in follower, which refuses every hello
# with EREMOTE and names the live master as the leader (or no one), is
# followed by all three kinds of client; tests/unit/test_frame.c covers
# the walk's rounds and limits.
. "$(dirname "$0")/../lib.sh"
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

log "a follower that names the leader"
# The stand-in: refuses every hello as a follower naming the leader given
# ("": no one), on a port it prints; it quits by itself within a minute,
# its output in files so that nothing waits for it.
cat >"$SW_TMP/follower.py" <<'EOF'
import errno, socket, struct, sys, threading
leader = sys.argv[1].encode()
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
def serve(c):
    with c:
        hdr = b""
        while len(hdr) < 16:
            b = c.recv(16 - len(hdr))
            if not b:
                return
            hdr += b
        n, typ, flags, hi, lo = struct.unpack(">IHHII", hdr)
        body = b""
        while len(body) < n:
            b = c.recv(n - len(body))
            if not b:
                return
            body += b
        # HelloReply: err = EREMOTE (field 1), leader (field 10)
        reply = bytes([0x08, errno.EREMOTE])
        if leader:
            reply += bytes([0x52, len(leader)]) + leader
        c.sendall(struct.pack(">IHHII", len(reply), typ, 1, hi, lo) + reply)
        c.recv(1)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
timeout 60 "$PYTHON" "$SW_TMP/follower.py" "$LIVE" >"$SW_TMP/follower.port" \
	2>"$SW_TMP/follower.log" &
FOLLOWER_PID=$!
timeout 60 "$PYTHON" "$SW_TMP/follower.py" "" >"$SW_TMP/lost.port" \
	2>"$SW_TMP/lost.log" &
LOST_PID=$!
wait_until 10 "the stand-in followers" test -s "$SW_TMP/follower.port" -a -s "$SW_TMP/lost.port"
F=127.0.0.1:$(cat "$SW_TMP/follower.port")
L=127.0.0.1:$(cat "$SW_TMP/lost.port")
"$SW_TOOL_BIN" -m "$F" status >/dev/null || fail "sweepfs -m FOLLOWER status"
"$SW_TOOL_BIN" -m "$L,$F" status >/dev/null || fail "sweepfs -m LOST,FOLLOWER status"
rc=0
"$SW_TOOL_BIN" -m "$L" status 2>"$SW_TMP/err" || rc=$?
assert_eq 4 "$rc" "exit status when no master leads"
grep -q "no master of $L leads" "$SW_TMP/err" ||
	fail "unclear message: $(cat "$SW_TMP/err")"
start_mount "$SW_TMP/m2" "$L,$F"
grep -q "master $F is a follower; leader is $LIVE" "$SW_TMP/m2.log" ||
	fail "no redirect line in the second mount's log"
cmp "$SW_TMP/data" "$SW_TMP/m2/f1" || fail "f1 through the redirected mount differs"
stop_mount "$SW_TMP/m2"
start_chunkservers 1 --set "master=$F"
grep -q "master $F is a follower; leader is $LIVE" "$SW_TMP/cs2.log" ||
	fail "no redirect line in the second chunkserver's log"
# Its only master is the stand-in, which goes now.
stop_chunkserver 2
kill "$FOLLOWER_PID" "$LOST_PID" 2>/dev/null || true
wait "$FOLLOWER_PID" "$LOST_PID" 2>/dev/null || true

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
