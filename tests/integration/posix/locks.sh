#!/bin/bash
# File locks across two mounts of one master (mount/lock.c, master/locks.h):
# flock(1) and Python's fcntl byte-range locks taken through mount A are
# seen by processes on mount B (and by other processes on A); a blocked
# flock is granted when the holder lets go, and not before; a blocked
# request dies with its process; a process killed with SIGKILL loses its
# locks; and the locks of a mount killed with SIGKILL outlive it for the
# master's session_timeout, then go.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
sw_init locks
command -v flock >/dev/null || skip "flock(1) is not installed"

SESSION_TIMEOUT=3
SW_CHUNKSERVERS=0 # locks need no file data
start_master --set session_timeout=${SESSION_TIMEOUT}s
start_mount "$SW_TMP/a"
A=$SW_TMP/a
A_PID=${SW_MOUNT_PIDS[0]}
start_mount "$SW_TMP/b"
B=$SW_TMP/b

# The locking helper: holds locks until told to let go, or tries one.
LK=$SW_TMP/lk.py
cat >"$LK" <<'EOF'
import errno, fcntl, os, struct, sys, time

def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.02)

cmd, path = sys.argv[1], sys.argv[2]
if cmd == "hold":
    # hold PATH READY RELEASE flock|lockf START LEN: take the lock, write
    # our pid to READY, keep it until RELEASE exists.
    ready, release, how = sys.argv[3], sys.argv[4], sys.argv[5]
    fd = os.open(path, os.O_RDWR)
    if how == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, int(sys.argv[7]),
                    int(sys.argv[6]))
    with open(ready + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(ready + ".tmp", ready)
    wait_for(release)
elif cmd == "try":
    # try PATH START LEN [STEPS...]: lockf(LOCK_EX|LOCK_NB) on each range
    # in turn in one process (one owner); prints OK or the errno name each.
    fd = os.open(path, os.O_RDWR)
    args = sys.argv[3:]
    out = []
    for i in range(0, len(args), 2):
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, int(args[i + 1]),
                        int(args[i]))
            out.append("OK")
        except OSError as e:
            out.append(errno.errorcode[e.errno])
    print(" ".join(out))
elif cmd == "getlk":
    # getlk PATH START LEN: F_GETLK for a write lock; prints
    # "TYPE START LEN PID" of the conflicting lock, or "UNLCK".
    fd = os.open(path, os.O_RDWR)
    fmt = "hhqqi4x"
    arg = struct.pack(fmt, fcntl.F_WRLCK, os.SEEK_SET, int(sys.argv[3]),
                      int(sys.argv[4]), 0)
    t, _, start, length, pid = struct.unpack(fmt, fcntl.fcntl(fd, fcntl.F_GETLK, arg))
    names = {fcntl.F_RDLCK: "RDLCK", fcntl.F_WRLCK: "WRLCK", fcntl.F_UNLCK: "UNLCK"}
    print(names[t] if t == fcntl.F_UNLCK else "%s %d %d %d" % (names[t], start, length, pid))
EOF

# Background lockers, killed if the scenario fails half-way (a holder
# waiting for its release file would outlive it).
BG=()
sw_scenario_cleanup() {
	local p
	for p in ${BG[@]+"${BG[@]}"}; do
		pkill -KILL -P "$p" 2>/dev/null # flock -c's shell
		kill -KILL "$p" 2>/dev/null
	done
	return 0
}

# What a flock(1) holder runs: say so, wait for f.go (2 minutes at most).
HOLD_SH="touch $SW_TMP/f.held; for i in \$(seq 2400); do [ -e $SW_TMP/f.go ] && break; sleep 0.05; done"

locks_held() {
	sw_status 'd["locks"]'
}
no_locks() { [[ $(locks_held) == 0 ]]; }

# ---- flock: exclusive across mounts ----------------------------------------
log "flock across mounts"
: >"$A/f"
flock "$A/f" -c "$HOLD_SH" &
HOLDER=$!
BG+=("$HOLDER")
wait_until 10 "the flock holder" test -e "$SW_TMP/f.held"
assert_fails flock -n "$B/f" true
# Another process on the same mount is another owner too.
assert_fails flock -n "$A/f" true
assert_fails flock -n -s "$B/f" true
assert_ge 1 "$(locks_held)" "locks the master reports"

# ---- a blocked flock waits for the holder, then gets the lock ---------------
log "blocking flock"
flock -w 60 "$B/f" -c "date +%s%N >$SW_TMP/f.got" &
WAITER=$!
BG+=("$WAITER")
sleep 1.5
alive "$WAITER" || fail "the blocked flock ended before the holder let go"
assert_missing "$SW_TMP/f.got"
T0=$(date +%s%N)
touch "$SW_TMP/f.go"
wait_dead "$HOLDER" 10 || fail "the flock holder did not finish"
wait_dead "$WAITER" 20 || fail "the blocked flock was not granted within 20 s"
assert_eq 0 "$SW_EXIT_STATUS" "the blocked flock's exit status"
assert_exists "$SW_TMP/f.got"
assert_ge "$T0" "$(cat "$SW_TMP/f.got")" "when the blocked flock got the lock"
wait_until 10 "the lock to be free again" flock -n "$A/f" true

# ---- a blocked flock dies with its process ---------------------------------
log "interrupting a blocked flock"
rm -f "$SW_TMP/f.held" "$SW_TMP/f.go"
flock "$A/f" -c "$HOLD_SH" &
HOLDER=$!
BG+=("$HOLDER")
wait_until 10 "the flock holder" test -e "$SW_TMP/f.held"
flock "$B/f" -c "touch $SW_TMP/f.wrong" &
WAITER=$!
BG+=("$WAITER")
sleep 1
alive "$WAITER" || fail "the second flock did not block"
assert_eq 1 "$(sw_status 'd["lock_waiters"]')" "lock requests waiting"
{ kill -KILL "$WAITER"; wait_dead "$WAITER" 10; } 2>/dev/null ||
	fail "a flock blocked on the master survived SIGKILL"
no_waiters() { [[ $(sw_status 'd["lock_waiters"]') == 0 ]]; }
wait_until 10 "the cancelled request to leave the master's queue" no_waiters
touch "$SW_TMP/f.go"
wait_dead "$HOLDER" 10 || fail "the flock holder did not finish"
# Had the dead waiter been granted the lock, nobody could take it now.
wait_until 10 "the lock to be free after the holder let go" flock -n "$B/f" true
assert_missing "$SW_TMP/f.wrong"

# ---- fcntl byte ranges ------------------------------------------------------
log "fcntl byte-range locks"
: >"$A/r"
"$PYTHON" "$LK" hold "$A/r" "$SW_TMP/r.held" "$SW_TMP/r.go" lockf 0 100 &
HOLDER=$!
BG+=("$HOLDER")
wait_until 10 "the range holder" test -e "$SW_TMP/r.held"
HPID=$(cat "$SW_TMP/r.held")
# One process on B: 100-199 is free, 50-60 is A's, 0-0 too.
assert_eq "OK EAGAIN EAGAIN" "$("$PYTHON" "$LK" try "$B/r" 100 100 50 11 0 1)" \
	"lockf from mount B"
assert_eq "OK" "$("$PYTHON" "$LK" try "$A/r" 200 10)" "lockf of 200-209 from A"
assert_eq "EAGAIN" "$("$PYTHON" "$LK" try "$A/r" 99 2)" \
	"lockf of 99-100 by another process on A"
assert_eq "WRLCK 0 100 $HPID" "$("$PYTHON" "$LK" getlk "$B/r" 50 11)" \
	"F_GETLK from B"
assert_eq "UNLCK" "$("$PYTHON" "$LK" getlk "$B/r" 100 100)" \
	"F_GETLK from B past A's range"
touch "$SW_TMP/r.go"
wait_dead "$HOLDER" 10 || fail "the range holder did not finish"
assert_eq 0 "$SW_EXIT_STATUS" "the range holder's exit status"
# Its close dropped the lock (FLUSH).
assert_eq "OK" "$("$PYTHON" "$LK" try "$B/r" 50 11)" "lockf of 50-60 after A closed"
assert_eq "UNLCK" "$("$PYTHON" "$LK" getlk "$B/r" 0 0)" "F_GETLK after A closed"

# hold_both: two processes on mount A that hold locks until killed, H1 a
# lockf of all of r, H2 a flock of f; returns once both hold them.
hold_both() {
	rm -f "$SW_TMP/r.held" "$SW_TMP/f.held"
	"$PYTHON" "$LK" hold "$A/r" "$SW_TMP/r.held" "$SW_TMP/never" lockf 0 0 &
	H1=$!
	BG+=("$H1")
	"$PYTHON" "$LK" hold "$A/f" "$SW_TMP/f.held" "$SW_TMP/never" flock &
	H2=$!
	BG+=("$H2")
	wait_until 10 "the holders" test -e "$SW_TMP/r.held" -a -e "$SW_TMP/f.held"
}

# ---- SIGKILL of a process holding locks ------------------------------------
log "a killed process loses its locks"
hold_both
assert_eq "EAGAIN" "$("$PYTHON" "$LK" try "$B/r" 1000 1)" "lockf while held"
assert_fails flock -n "$B/f" true
{ kill -KILL "$H1" "$H2"; wait_dead "$H1" 10 && wait_dead "$H2" 10; } \
	2>/dev/null || fail "a holder survived SIGKILL"
wait_until 10 "the killed process's flock to go" flock -n "$B/f" true
range_free() { [[ $("$PYTHON" "$LK" try "$B/r" 1000 1) == OK ]]; }
wait_until 10 "the killed process's fcntl lock to go" range_free
wait_until 10 "no locks left on the master" no_locks

# ---- SIGKILL of mount A: its locks last for session_timeout -----------------
log "a killed mount's locks go with its session"
hold_both
{ kill -KILL "$A_PID"; wait_dead "$A_PID" 10; } 2>/dev/null ||
	fail "mount A survived SIGKILL"
T0=$(date +%s%N)
{
	kill -KILL "$H1" "$H2" || true
	wait_dead "$H1" 10 && wait_dead "$H2" 10
} 2>/dev/null || fail "a holder on the dead mount survived SIGKILL"
# Its session lives on, and its locks with it: the master cannot tell a
# dead mount from one that is reconnecting.
sleep 1
assert_fails flock -n "$B/f" true
assert_eq "EAGAIN" "$("$PYTHON" "$LK" try "$B/r" 5 1)" "lockf while A's session lives"
wait_until $((SESSION_TIMEOUT + 15)) "A's flock to go with its session" \
	flock -n "$B/f" true
T1=$(date +%s%N)
assert_ge $(((SESSION_TIMEOUT - 1) * 1000)) $(((T1 - T0) / 1000000)) \
	"ms until A's locks went"
assert_eq "OK" "$("$PYTHON" "$LK" try "$B/r" 5 1)" "lockf after A's session expired"
wait_until 10 "no locks left on the master" no_locks
grep -q "timed out" "$SW_MASTER_LOG" || fail "the master did not expire A's session"

sw_pass
