#!/bin/bash
# The mount and a master that goes away: with -o master_timeout=2, calls
# fail with EIO after about 2 s, never hang; calls made while the master is
# briefly down wait and succeed; once it is back everything works again
# without a remount; a create and a write in flight at a kill -9 are sent
# again and succeed, an exclusive create too (once.sh: its reply lost);
# a file unlinked while open stays usable across a kill -9 of the master
# (the mount reclaims it) and goes after close.
. "$(dirname "$0")/../lib.sh"
sw_init reconnect --root

TIMEOUT_S=2
start_master --set session_timeout=3s
start_mount "$SW_TMP/mnt" "" master_timeout=$TIMEOUT_S
M=$SW_MNT

nodes() { echo $((4294967296 - $(stat -f -c %d "$M"))); }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

mkdir "$M/d"
touch "$M/d/f"

# timed_fsop EXPECTED OP ARGS...: the call must end with EXPECTED after
# roughly the master timeout: not at once, and not much later.
timed_fsop() {
	local want=$1 t0 t1 got
	shift
	t0=$(now_ms)
	got=$(timeout 30 "$PYTHON" "$SW_SRC/fsop.py" "$@" 2>&1) || true
	t1=$(now_ms)
	got=${got%% *}
	assert_eq "$want" "$got" "fsop $* with the master down"
	assert_ge $((TIMEOUT_S * 1000 - 500)) $((t1 - t0)) "ms before fsop $* gave up"
	assert_le $((TIMEOUT_S * 1000 + 3000)) $((t1 - t0)) "ms before fsop $* gave up"
}

# ---- master down for longer than master_timeout --------------------------
log "master down longer than master_timeout"
kill_master
sleep 1.2 # past the attribute and entry caches
timed_fsop EIO stat "$M/d/f"
timed_fsop EIO stat "$M/never-looked-up"
timed_fsop EIO mkdir "$M/d/new"
timed_fsop EIO listdir "$M/d"
# several at once, all bounded
t0=$(now_ms)
pids=()
for i in 1 2 3 4 5 6; do
	timeout 30 "$PYTHON" "$SW_SRC/fsop.py" stat "$M/d/x$i" >"$SW_TMP/par.$i" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a parallel stat hung"; done
assert_le $((TIMEOUT_S * 1000 + 3000)) $(($(now_ms) - t0)) "ms for 6 parallel calls to give up"
for i in 1 2 3 4 5 6; do
	assert_eq EIO "$(cat "$SW_TMP/par.$i")" "parallel stat $i with the master down"
done

log "the master is back"
restart_master start
wait_until 10 "the mount to reconnect" stat "$M/d/f"
expect_ok fsop mkdir "$M/d/new"
expect_ok fsop stat "$M/d/new"
assert_eq f,new "$(fsop listdir "$M/d" | cut -d' ' -f2)" "listing after the master came back"
grep -q 'reconnected to the master' "$M.log" || fail "no reconnect line in the mount's log"

# ---- master down briefly: calls wait and succeed --------------------------
log "master down briefly"
kill_master
fsop mkdir "$M/d/during" >"$SW_TMP/during.out" 2>&1 &
waiter=$!
sleep 0.3
restart_master start
wait "$waiter"
assert_eq OK "$(cat "$SW_TMP/during.out")" "mkdir made while the master was down"
assert_stat %F directory "$M/d/during" "the directory made while the master was down"

# ---- calls in flight at a kill -9 -------------------------------------------
# The master is stopped (SIGSTOP) so that requests reach it and stay
# unanswered, then killed and started again. A synchronous mount (wsync:
# creates go to the master one by one). A create and a write's size
# commit lost with the connection are sent again and succeed; an
# exclusive create is not (a second one would fail with EEXIST): EIO.
log "calls in flight at a kill -9"
W=$SW_TMP/wsync
start_mount "$W" "" master_timeout=10,wsync,negative_timeout=60
head -c 100000 /dev/urandom >"$SW_TMP/w.data"
dd if="$SW_TMP/w.data" of="$W/d/written" bs=100000 conv=fsync status=none
# Known absent: the kernel sends the creates without a lookup first.
# (In two directories: it makes one create at a time in a directory.)
mkdir "$W/e"
assert_missing "$W/d/inflight" "$W/e/excl"
# A writer with the file open holds its chunk's location: its next write
# goes to the chunkserver alone, and only the new size to the master.
rm -f "$SW_TMP/wr.ready" "$SW_TMP/wr.go"
"$PYTHON" - "$W/d/written" "$SW_TMP" 2>"$SW_TMP/dd.err" <<'EOF' &
import os, sys, time
path, tmp = sys.argv[1], sys.argv[2]
data = open(os.path.join(tmp, "w.data"), "rb").read()
fd = os.open(path, os.O_WRONLY)
os.pwrite(fd, data[:4096], 0)
os.fsync(fd)
open(os.path.join(tmp, "wr.ready"), "w").close()
for _ in range(3000):
    if os.path.exists(os.path.join(tmp, "wr.go")):
        break
    time.sleep(0.01)
else:
    sys.exit("not told to go on")
os.pwrite(fd, data[:50000], 100000)
os.fsync(fd)
os.close(fd)
EOF
p_dd=$!
wait_until 10 "the writer to hold its chunk" test -e "$SW_TMP/wr.ready"
kill -STOP "$SW_MASTER_PID"
touch "$SW_TMP/wr.go"
fsop open "$W/d/inflight" wc >"$SW_TMP/inflight.out" 2>&1 &
p_open=$!
fsop create "$W/e/excl" >"$SW_TMP/excl.out" 2>&1 &
p_excl=$!
sleep 0.5
alive "$p_open" || fail "the create did not wait for the stopped master"
alive "$p_dd" || fail "the fsync did not wait for the stopped master"
restart_master kill # SIGKILL ends a stopped process too
wait "$p_open" "$p_excl"
wait "$p_dd" || fail "the write in flight at the kill: $(cat "$SW_TMP/dd.err")"
assert_eq OK "$(cat "$SW_TMP/inflight.out")" "a create in flight at the kill"
assert_stat %F "regular empty file" "$W/d/inflight" "the file created across the kill"
assert_eq OK "$(cat "$SW_TMP/excl.out")" "an exclusive create in flight at the kill"
assert_stat %F "regular empty file" "$W/e/excl" "the file created exclusively across the kill"
assert_stat %s 150000 "$W/d/written" "the size written across the kill"
cmp -n 100000 "$SW_TMP/w.data" "$W/d/written" || fail "the data written before the kill"
cmp -i 0:100000 -n 50000 "$SW_TMP/w.data" "$W/d/written" ||
	fail "the data written across the kill"
stop_mount "$W"

# ---- an open, unlinked file across a kill -9 ---------------------------------
log "open unlinked file across a master crash"
touch "$M/d/held"
truncate -s 4242 "$M/d/held"
n0=$(nodes)
rm -f "$SW_TMP/held.go" "$SW_TMP/held.done"
"$PYTHON" - "$M/d/held" "$SW_TMP" <<'EOF' &
import os, sys, time
path, tmp = sys.argv[1], sys.argv[2]
def wait_for(name):
    for _ in range(600):
        if os.path.exists(os.path.join(tmp, name)):
            return
        time.sleep(0.05)
    sys.exit("timed out waiting for " + name)
fd = os.open(path, os.O_RDONLY)
st0 = os.fstat(fd)
os.unlink(path)
assert not os.path.exists(path)
open(os.path.join(tmp, "held.go"), "w").close()
wait_for("held.restarted")
# past the attribute cache and the master's session timeout (3 s): what
# answers now is the master, and it kept the file for us
time.sleep(4.5)
st = os.fstat(fd)
assert st.st_ino == st0.st_ino, (st.st_ino, st0.st_ino)
assert st.st_size == 4242, st.st_size
assert st.st_nlink == 0, st.st_nlink
assert len(os.pread(fd, 10000, 0)) == 4242
os.close(fd)
open(os.path.join(tmp, "held.done"), "w").close()
EOF
holder=$!
wait_until 30 "the holder to unlink its file" test -e "$SW_TMP/held.go"
assert_eq "$n0" "$(nodes)" "nodes while the unlinked file is open"
restart_master kill
wait_until 10 "the mount to reconnect" stat "$M/d"
touch "$SW_TMP/held.restarted"
wait "$holder" || fail "the open file did not survive the master's restart"
unlinked_gone() { [[ $(nodes) == $((n0 - 1)) ]]; }
wait_until 10 "the unlinked file to go after close" unlinked_gone
if grep -q 'orphans nobody reclaimed' "$SW_MASTER_LOG"; then
	fail "the master dropped an orphan the mount had open"
fi
assert_missing "$M/d/held"
sw_pass
