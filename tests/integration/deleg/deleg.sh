#!/bin/bash
# Directory delegations (issue 11): a mount working alone in a directory
# removes there without waiting for the master, and whatever it
# acknowledged is visible to everyone else at once.
#
#  1. rm -rf through a mount goes out in batches: few UNLINK and LOOKUP
#     requests reach the master; the status shows the delegations.
#  2. Two mounts: what one removes is gone for the other at once (the
#     other's listing, stat and open recall the delegation first); a file
#     created on one is seen by the other at once. A tree one mount made
#     and the other removes right away: delegated once the maker's cache
#     of it has expired. Two mounts each wanting the directory the other
#     holds: no wait for the timeout.
#  3. One mount lists while the other rm -rf's the same tree: every
#     listing is a state the tree went through, and the end is empty.
#  4. `sweepfs rmr` of a tree a mount holds delegated: the same mount
#     then finds nothing.
#  5. -o wsync: no delegation, every unlink a request of its own.
#  6. fsync on the directory: everything acknowledged is durable: a
#     kill -9 of the master right after loses none of it.
#  7. kill -9 of the master during an rm -rf: the mount carries on, the
#     namespace is consistent, fsck clean.
#  8. kill -9 of a mount during an rm -rf: its delegations end, another
#     mount goes on at once, fsck clean.
#  9. A holder that never answers: the recall times out (deleg_timeout)
#     and the other mount's request goes through, no later than that;
#     that mount's other requests are answered meanwhile.
#     The same for a rename and an rmdir, which recall the entries they
#     change and the directories below (issue 29): one deleg_timeout,
#     not one per directory of the silent holder's it needs (once
#     nothing has come from a holder for deleg_timeout, its recalls are
#     waited for 250 ms).
. "$(dirname "$0")/../lib.sh"
sw_init deleg --root
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
sw_user_python

start_master --set deleg_timeout=2s --set session_timeout=5s
start_mount "$SW_TMP/m1"
start_mount "$SW_TMP/m2"
A=$SW_TMP/m1
B=$SW_TMP/m2

info() { sw_status "d['$1']"; }

# make_tree DIR N: N empty files in DIR
make_tree() {
	mkdir -p "$1"
	"$PYTHON" -c '
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.close(os.open(os.path.join(d, "f%06d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
' "$1" "$2"
}

# ---- 1. batches ---------------------------------------------------------
log "rm -rf in batches"
make_tree "$A/t1/a" 3000
make_tree "$A/t1/b" 3000
sleep 1.2 # past the entry timeout: what the kernel had is gone
u0=$(sw_requests unlink)
l0=$(sw_requests lookup)
b0=$(sw_requests batch)
ls "$A/t1" >/dev/null
ls "$A/t1/a" >/dev/null
# What a failure needs to be told apart: delegations refused or recalled
# meanwhile, and how long the listing and the removal took.
dstats() { sw_status "'%d granted, %d refused, %d recalls' % (d['deleg_granted'], d['deleg_refused'], d['deleg_recalls'])"; }
ds0=$(dstats)
held=$(info delegations)
assert_ge 2 "$held" "delegations held after listing t1 and t1/a"
sessions_held=$(sw_status "sum(s.get('delegations', 0) for s in d['sessions'])")
assert_ge 2 "$sessions_held" "delegations in the session list"
t_rm=$(date +%s%N)
rm -rf "$A/t1"
t_rm=$((($(date +%s%N) - t_rm) / 1000000))
assert_missing "$A/t1"
u1=$(sw_requests unlink)
l1=$(sw_requests lookup)
b1=$(sw_requests batch)
log "unlink requests $((u1 - u0)), lookups $((l1 - l0)), batches $((b1 - b0)); rm -rf $t_rm ms; delegations before: $ds0, after: $(dstats); load $(cut -d' ' -f1 /proc/loadavg)"
assert_le 10 $((u1 - u0)) "UNLINK requests for 6,000 files under delegations"
assert_le 100 $((l1 - l0)) "LOOKUP requests for 6,000 files under delegations"
assert_ge 6 $((b1 - b0)) "batches"
assert_ge 6000 "$(info batch_ops)" "operations applied from batches"
[[ ! -e "$B/t1" ]] || fail "the other mount still sees t1"

# ---- 1a. a listing read slowly -------------------------------------------
# rm -rf reads a big directory 100,000 names at a time, and reaches the
# rest long after the first page came: the attributes the listing holds
# have expired by then, and the listing must stay whole for the
# removals that follow.
log "a listing read in two parts, seconds apart, then removed"
make_tree "$A/t1a" 3000
sleep 1.2 # the attributes made here expire
u0=$(sw_requests unlink)
"$PYTHON" - "$A/t1a" <<'EOF'
import os, sys, time
d = sys.argv[1]
it = os.scandir(d)
names = [next(it).name for _ in range(100)]
time.sleep(1.2)
names += [e.name for e in it]
it.close()
assert len(names) == 3000, len(names)
for n in names:
    os.unlink(os.path.join(d, n))
EOF
u1=$(sw_requests unlink)
log "unlink requests $((u1 - u0)) for 3,000 files read in two parts"
assert_le 10 $((u1 - u0)) "UNLINK requests after a listing read in two parts"
rmdir "$A/t1a"

# ---- 1b. recalled in the middle, held again ---------------------------------
# A recall while rm -rf works through a listing it read (here: another
# session's request on the directory) gives the directory back, and the
# next removal takes it again: the names still to go are in the listing
# the master kept current meanwhile, and cost no LOOKUP each.
log "a delegation recalled in the middle of the removals, then held again"
make_tree "$A/t1b" 3000
sleep 1.2 # the attributes made here expire
ls "$A/t1b" >/dev/null
u0=$(sw_requests unlink)
l0=$(sw_requests lookup)
r0=$(info deleg_recalls)
"$PYTHON" - "$A/t1b" "$SW_TOOL_BIN" <<'EOF'
import os, subprocess, sys
d, tool = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(d))
for n in names[:1000]:
    os.unlink(os.path.join(d, n))
subprocess.run([tool, "getgoal", d], stdout=subprocess.DEVNULL, check=True)
for n in names[1000:]:
    os.unlink(os.path.join(d, n))
EOF
u1=$(sw_requests unlink)
l1=$(sw_requests lookup)
log "unlink requests $((u1 - u0)), lookups $((l1 - l0)), recalls $(($(info deleg_recalls) - r0))"
assert_ge 1 $(($(info deleg_recalls) - r0)) "recalls by the other session's request"
assert_le 10 $((u1 - u0)) "UNLINK requests around a recall"
assert_le 100 $((l1 - l0)) "LOOKUP requests for the 2,000 names left after a recall"
rmdir "$A/t1b"

# ---- 2. two mounts, at once --------------------------------------------
log "two mounts: removals and creations seen at once"
make_tree "$A/t2" 200
ls "$A/t2" >/dev/null # delegated to A
ls "$B/t2" >/dev/null # recalls it; now both have listings
ls "$A/t2" >/dev/null
for i in $(seq 0 20); do
	f=$(printf 'f%06d' "$i")
	rm "$A/t2/$f"
	[[ ! -e "$B/t2/$f" ]] || fail "$f removed on one mount, still on the other"
	"$PYTHON" -c 'import os, sys; os.open(sys.argv[1], os.O_RDONLY)' "$B/t2/$f" 2>/dev/null &&
		fail "$f removed on one mount, opened on the other"
done
n=$(ls "$B/t2" | wc -l)
assert_eq 179 "$n" "entries the other mount lists"
touch "$A/t2/new"
[[ -e "$B/t2/new" ]] || fail "created on one mount, not seen on the other"
recalls=$(info deleg_recalls)
assert_ge 1 "$recalls" "recalls"
rmax=$(info deleg_recall_max_us)
log "recalls $recalls, slowest answered in $rmax us"

# ---- 2a. made by one mount, removed by the other at once ----------------
log "created on one mount, removed by the other right after"
make_tree "$B/t2a" 20000
ls "$A/t2a" >/dev/null # refused: B has it cached
o0=$(info batch_ops)
rm -rf "$A/t2a"
o1=$(info batch_ops)
log "$((o1 - o0)) of 20000 removals batched once B's cache of t2a expired"
assert_ge 10000 $((o1 - o0)) "removals batched after asking again"
[[ ! -e "$B/t2a" ]] || fail "t2a still on the mount that made it"

# ---- 2b. crosswise ------------------------------------------------------
log "two mounts, each wanting the directory the other holds"
slowest=0
for round in 1 2 3 4 5; do
	make_tree "$A/xa$round" 20
	make_tree "$B/xb$round" 20
	ls "$A/xa$round" >/dev/null
	ls "$B/xb$round" >/dev/null
	t0=$(date +%s%N)
	ls "$A/xb$round" >/dev/null &
	p1=$!
	ls "$B/xa$round" >/dev/null &
	p2=$!
	wait "$p1" || fail "listing the other mount's directory"
	wait "$p2" || fail "listing the other mount's directory"
	ms=$((($(date +%s%N) - t0) / 1000000))
	((ms > slowest)) && slowest=$ms
done
log "slowest crosswise round: $slowest ms"
assert_le 1000 "$slowest" "ms for two crosswise listings (deleg_timeout is 2 s)"
assert_eq 0 "$(info deleg_timeouts)" "recalls timed out"

# ---- 3. one lists, the other removes ------------------------------------
log "one mount lists while the other removes"
make_tree "$A/t3" 4000
ls "$A/t3" >/dev/null
rm -rf "$A/t3" &
rmpid=$!
prev=4000
while kill -0 "$rmpid" 2>/dev/null; do
	n=$({ ls "$B/t3" 2>/dev/null || true; } | wc -l)
	assert_le "$prev" "$n" "entries listed during rm -rf (never more than before)"
	prev=$n
done
wait "$rmpid" || fail "rm -rf failed while another mount listed"
[[ ! -e "$B/t3" ]] || fail "t3 still listed after rm -rf returned"
assert_eq 0 "$(ls "$SW_TMP/m1" | grep -c '^t3$')" "t3 on the removing mount"

# ---- 4. rmr of a delegated tree ----------------------------------------
log "sweepfs rmr, then the same mount"
make_tree "$A/t4/sub" 100
ls "$A/t4/sub" >/dev/null
ls "$A/t4" >/dev/null
rm "$A/t4/sub/f000000" # a queued removal, and a held directory
sw_tool rmr "$A/t4" >/dev/null || fail "rmr of a delegated tree"
expect_errno ENOENT fsop stat "$A/t4"
expect_errno ENOENT fsop listdir "$A/t4/sub"

# ---- 4b. the master's errors, given by the mount -------------------------
log "errors under a delegation"
umask 022
mkdir -p "$A/t11/d"
touch "$A/t11/f" "$A/t11/d/x"
install -d -m 1777 "$A/t11/sticky"
install -m 0666 /dev/null "$A/t11/sticky/rootfile"
ls "$A/t11" "$A/t11/d" "$A/t11/sticky" >/dev/null
d0=$(info deleg_granted)
expect_errno EACCES ufsop 4001 4001 "" unlink "$A/t11/f"
expect_errno EPERM ufsop 4001 4001 "" unlink "$A/t11/sticky/rootfile"
expect_errno EISDIR fsop unlink "$A/t11/d"
expect_errno ENOTDIR fsop rmdir "$A/t11/f"
expect_errno ENOTEMPTY fsop rmdir "$A/t11/d"
expect_errno ENOENT fsop unlink "$A/t11/nothere"
u0=$(sw_requests unlink)
r0=$(sw_requests rmdir)
expect_errno OK fsop unlink "$A/t11/d/x"
expect_errno OK fsop rmdir "$A/t11/d"
expect_errno ENOENT fsop rmdir "$A/t11/d"
assert_eq "$u0 $r0" "$(sw_requests unlink) $(sw_requests rmdir)" \
	"UNLINK and RMDIR requests for removals answered by the mount"
assert_eq "$d0" "$(info deleg_granted)" "delegations granted (none lost)"
[[ -e "$B/t11/f" && ! -e "$B/t11/d" ]] || fail "t11 as the other mount sees it"

# ---- 5. -o wsync ----------------------------------------------------------
log "-o wsync: every unlink waits for the master"
start_mount "$SW_TMP/m3" "" wsync
make_tree "$SW_TMP/m3/t5" 300
ls "$SW_TMP/m3/t5" >/dev/null
u0=$(sw_requests unlink)
rm -rf "$SW_TMP/m3/t5"
u1=$(sw_requests unlink)
assert_eq 300 $((u1 - u0)) "UNLINK requests with -o wsync"
stop_mount "$SW_TMP/m3"

# ---- 6. fsync(dir), then kill -9 of the master ---------------------------
log "fsync on the directory: durable"
make_tree "$A/t6" 1000
ls "$A/t6" >/dev/null
"$PYTHON" - "$A/t6" <<'EOF'
import os, sys
d = sys.argv[1]
for n in sorted(os.listdir(d))[:600]:
    os.unlink(os.path.join(d, n))
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)
os.close(fd)
EOF
restart_master kill
n=$(ls "$A/t6" | wc -l)
assert_eq 400 "$n" "entries after fsync(dir) and kill -9 of the master"

# ---- 7. kill -9 of the master during rm -rf -----------------------------
log "kill -9 of the master during rm -rf"
make_tree "$A/t7/a" 5000
make_tree "$A/t7/b" 5000
rm -rf "$A/t7" 2>"$SW_TMP/rm7.err" &
rmpid=$!
sleep 0.3
restart_master kill
wait "$rmpid" || true
# What rm did not finish, it finishes now; nothing else is left behind.
rm -rf "$A/t7" || fail "rm -rf after the master came back"
assert_missing "$A/t7"
[[ ! -e "$B/t7" ]] || fail "t7 still on the other mount"
wait_fsck_clean 30 "after kill -9 of the master during rm -rf"

# ---- 8. kill -9 of a mount during rm -rf --------------------------------
log "kill -9 of a mount during rm -rf"
make_tree "$A/t8" 20000
ls "$A/t8" >/dev/null
rm -rf "$A/t8" 2>/dev/null &
rmpid=$!
sleep 0.3
kill -9 "${SW_MOUNT_PIDS[0]}"
wait "$rmpid" 2>/dev/null || true
t0=$(date +%s%N)
n=$({ ls "$B/t8" 2>/dev/null || true; } | wc -l) # at once: it went with the session
t1=$(date +%s%N)
assert_le 1000 $(((t1 - t0) / 1000000)) "ms to list t8 after its holder died"
log "$n of 20000 left by the killed mount"
rm -rf "$B/t8"
assert_missing "$B/t8"
assert_ge 1 "$n" "entries left: the mount was killed before rm -rf ended"
wait_fsck_clean 30 "after kill -9 of a mount during rm -rf"
_unmount "$A"
unset 'SW_MOUNTS[0]' 'SW_MOUNT_PIDS[0]'

# ---- 9. a holder that does not answer -----------------------------------
log "a holder that does not answer loses the delegation after deleg_timeout"
start_mount "$SW_TMP/m4"
C=$SW_TMP/m4
ls "$B" >/dev/null # B caches the top: C is not delegated it
make_tree "$C/t9" 50
# Asked for with the listing, granted a moment later: held by C at the
# master before C goes silent (at load it once was not yet, and the
# listing had nothing to wait for).
c_holds() {
	ls "$C/t9" >/dev/null
	sw_status "[s['delegations'] for s in d['sessions'] if s['name'].endswith(':$C')]" |
		grep -q '\[[1-9]'
}
wait_until 20 "C to hold t9's delegation" c_holds
cpid=${SW_MOUNT_PIDS[-1]}
kill -STOP "$cpid"
t0=$(date +%s%N)
ls "$B/t9" >"$SW_TMP/t9.ls" &
lspid=$!
# Meanwhile B's other requests are answered (issue 28, item 7): a
# lookup in another directory, on the same connection as the listing.
sleep 0.5
s0=$(date +%s%N)
stat "$B/not-t9-$RANDOM" >/dev/null 2>&1 || true
s1=$(date +%s%N)
wait "$lspid" || fail "ls past a silent holder"
t1=$(date +%s%N)
kill -CONT "$cpid"
n=$(wc -l <"$SW_TMP/t9.ls")
assert_eq 50 "$n" "entries listed past a silent holder"
ms=$(((t1 - t0) / 1000000))
log "listing waited $ms ms for the silent holder; a lookup elsewhere $(((s1 - s0) / 1000000)) ms"
assert_le 500 $(((s1 - s0) / 1000000)) "ms for a lookup elsewhere behind the waiting listing"
assert_ge 1500 "$ms" "ms the listing waited (deleg_timeout=2s)"
assert_le 2800 "$ms" "ms the listing waited (deleg_timeout=2s)"
assert_eq 1 "$(info deleg_timeouts)" "recalls timed out"
ls "$C/t9" >/dev/null || fail "the silent mount works again"

log "a rename and an rmdir past a holder that does not answer"
# C makes t9b and t9b/sub and works in both: it holds both.
mkdir "$C/t9b" "$C/t9b/sub"
touch "$C/t9b/x" "$C/t9b/sub/y"
rm "$C/t9b/x" "$C/t9b/sub/y"
ls "$B" >/dev/null # B caches the top again: C does not hold it
"$PYTHON" -c '
import os, sys
for d in sys.argv[1:]:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)' "$C/t9b/sub" "$C/t9b"
c_holds_two() {
	ls "$C/t9b" "$C/t9b/sub" >/dev/null
	local n
	n=$(sw_status "sum(s['delegations'] for s in d['sessions'] if s['name'].endswith(':$C'))")
	((n >= 2))
}
wait_until 20 "C to hold t9b and t9b/sub" c_holds_two
timeouts0=$(info deleg_timeouts)
kill -STOP "$cpid"
t0=$(date +%s%N)
mv "$B/t9b/sub" "$B/t9b/sub2" &
mvpid=$!
sleep 0.5
s0=$(date +%s%N)
stat "$B/not-t9b-$RANDOM" >/dev/null 2>&1 || true
s1=$(date +%s%N)
wait "$mvpid" || fail "rename past a silent holder"
t1=$(date +%s%N)
rmdir "$B/t9b/sub2" || fail "rmdir past a silent holder"
t2=$(date +%s%N)
kill -CONT "$cpid"
log "rename waited $(((t1 - t0) / 1000000)) ms, the rmdir after it $(((t2 - t1) / 1000000)) ms; a lookup elsewhere $(((s1 - s0) / 1000000)) ms"
assert_le 500 $(((s1 - s0) / 1000000)) "ms for a lookup elsewhere behind the waiting rename"
assert_le 2800 $(((t1 - t0) / 1000000)) "ms the rename waited (deleg_timeout=2s)"
assert_le 2800 $(((t2 - t1) / 1000000)) "ms the rmdir waited"
((${timeouts0} < $(info deleg_timeouts))) || fail "no recall timed out: C did not hold what the rename changes"
wait_until 20 "the silent mount to see the rename and the rmdir" \
	test ! -e "$C/t9b/sub" -a ! -e "$C/t9b/sub2"

stop_mount "$C"
stop_mount "$B"
stop_master
sw_pass
