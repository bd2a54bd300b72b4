#!/bin/bash
# A recall costs O(1) in the size of the directory (issue 29): the mount
# that holds a directory drops every name it handed the kernel for long
# with a bounded number of notices (each of a few names, or the
# directory's own entry, or all at once), not one per name.
#
#  1. `sweepfs rmr` of a tree of 2 x 5,000 files the same mount made (and
#     the kernel caches): the mount sends at most LONG_NAMES_MAX + 1 (17)
#     kernel notices per directory it gives back (counted by the mount,
#     logged at unmount), and the tree is gone for it and for another
#     mount.
#  2. A live directory recalled by another mount: what the other removes,
#     adds or renames is seen by the holder at once, cached names and all.
#  3. A directory this mount renamed, then recalled: its names are still
#     dropped (the mount follows its own renames).
#  4. Snapshot removal (`seteattr -f snapshot -r`, `rmsnapshot`) of trees
#     the same mount made, of 2 x 500 and 2 x 5,000 files: the flag sets
#     a mark, so the master visits no name and writes no mark out at
#     either size (its counters, `sweepfs status`); every name reads as
#     flagged; the mount sends at most one invalidation per directory;
#     the flag outlives a master crash and a clean restart.
#  5. Removal of one of three trees of 5,000 files the same mount made
#     (rmsnapshot, then rmr): the others keep their cached names: a stat
#     of each of their files after makes no dentry again (counted in
#     /proc/sys/fs/dentry-state; before, all 5,000: the recall made the
#     kernel forget every name of the mount, and the next walk there
#     pruned them, 2.5 us each, 1.3 s at 500,000). A removal refused
#     after its recall (rmsnapshot without the flag; rmr by a user who may
#     not): the holder was told the tree goes and kept its names, so the
#     master keeps it watching the tree: a process whose working
#     directory is in it sees at once what another mount removes,
#     replaces and renames there, also after the holder's watch would
#     have idled out.
#  6. A directory this mount made and holds, a file made there, and at
#     once another mount's rmdir of it: ENOTEMPTY, the file stays (the
#     rmdir recalled the parent only; the master found the directory
#     empty, removed it, and the file this mount had acknowledged was
#     lost with it).
. "$(dirname "$0")/../lib.sh"
sw_init deleg_recall --root
sw_user_python

start_master --set deleg_timeout=2s --set session_timeout=5s
start_mount "$SW_TMP/m1"
start_mount "$SW_TMP/m2"
A=$SW_TMP/m1
B=$SW_TMP/m2

# make_files DIR N: N empty files in DIR, then stat each (cached names)
make_files() {
	"$PYTHON" -c '
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.close(os.open(os.path.join(d, "f%06d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
for i in range(n):
    os.stat(os.path.join(d, "f%06d" % i))
' "$1" "$2"
}

# given_back MNT: "GIVEN INVALS" from the line MNT's mount logs at unmount
given_back() {
	sed -n 's/.* \([0-9]*\) delegation(s) given back, \([0-9]*\) kernel invalidation(s).*/\1 \2/p' \
		"$1.log" | tail -n 1
}

# ---- 1. rmr of a tree this mount made ------------------------------------
log "rmr of 2 x 5,000 files made by the same mount"
mkdir -p "$A/t/d1" "$A/t/d2"
make_files "$A/t/d1" 5000
make_files "$A/t/d2" 5000
t0=$(date +%s%N)
sw_tool rmr "$A/t" >/dev/null || fail "rmr of the tree"
ms=$((($(date +%s%N) - t0) / 1000000))
log "rmr returned in $ms ms"
expect_errno ENOENT fsop stat "$A/t"
expect_errno ENOENT fsop stat "$A/t/d1/f000001"
expect_errno ENOENT fsop stat "$B/t"
stop_mount "$A"
read -r given invals <<<"$(given_back "$A")"
[[ -n "$given" ]] || fail "no count of kernel invalidations in $A.log"
log "$given delegation(s) given back, $invals kernel invalidation(s)"
assert_ge 3 "$given" "delegations given back (t, d1, d2)"
# A bounded number per directory, whatever its size (10,000 names once).
assert_le "$((given * 17))" "$invals" "kernel invalidations"
# Generous: the point is the count; this catches a per-name walk.
assert_le 5000 "$ms" "milliseconds for rmr"

# ---- 2. a live directory recalled ----------------------------------------
log "a live directory recalled by another mount"
start_mount "$A"
mkdir -p "$A/l/sub"
make_files "$A/l" 300
touch "$A/l/sub/x"
ls -l "$A/l" "$A/l/sub" >/dev/null
rm "$B/l/f000005" # recalls l
touch "$B/l/new"
mv "$B/l/sub" "$B/l/sub2"
expect_errno ENOENT fsop stat "$A/l/f000005"
expect_errno ENOENT fsop stat "$A/l/sub/x"
assert_exists "$A/l/new"
assert_exists "$A/l/sub2/x"
assert_exists "$A/l/f000006"

# ---- 3. renamed here, then recalled --------------------------------------
log "a directory renamed by its holder, then recalled"
mkdir -p "$A/r/in"
make_files "$A/r/in" 200
mv "$A/r/in" "$A/r/moved"
make_files "$A/r/moved" 210 # the first 200 exist: stat only
ls -l "$A/r/moved" >/dev/null
rm "$B/r/moved/f000007" # recalls r/moved
expect_errno ENOENT fsop stat "$A/r/moved/f000007"
expect_errno ENOENT fsop stat "$A/r/in/f000001"
assert_exists "$A/r/moved/f000209"

stop_mount "$A"
read -r given invals <<<"$(given_back "$A")"
log "$given delegation(s) given back, $invals kernel invalidation(s)"
assert_ge 1 "$given" "delegations given back"
assert_le "$((given * 17))" "$invals" "kernel invalidations"

# ---- 4. snapshot removal of trees this mount made --------------------------
# sync_dirs DIR...: fsync each directory, which sends what the mount has
# acknowledged there but not yet sent (a batch waits up to 20 ms). The
# flag is another session's: like the walk before it, it does not recall
# the holder, so names still in the holder's queue would miss it.
sync_dirs() {
	"$PYTHON" -c '
import os, sys
for d in sys.argv[1:]:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
' "$@"
}
# snapcost: "WALKED SETTLED" of the snapshot flag since the master started
snapcost() {
	sw_status '"%d %d" % (d["snapflag_walked"], d["snapflag_settled"])'
}
start_mount "$A"
for n in 500 5000; do
	log "seteattr -f snapshot -r and rmsnapshot of 2 x $n files made here"
	mkdir -p "$A/s$n/d1" "$A/s$n/d2"
	make_files "$A/s$n/d1" "$n"
	make_files "$A/s$n/d2" "$n"
	sync_dirs "$A/s$n/d1" "$A/s$n/d2"
	read -r walked0 settled0 <<<"$(snapcost)"
	sw_tool seteattr -f snapshot -r "$A/s$n" >/dev/null ||
		fail "seteattr -r of s$n"
	assert_eq "$A/s$n/d2/f000007: snapshot" \
		"$(sw_tool geteattr "$A/s$n/d2/f000007")" "geteattr below the mark"
	sw_tool rmsnapshot "$A/s$n" >/dev/null || fail "rmsnapshot of s$n"
	read -r walked settled <<<"$(snapcost)"
	log "names visited $((walked - walked0)), marks written out $((settled - settled0))"
	assert_eq 0 "$((walked - walked0))" "names the flag visited at 2 x $n"
	assert_eq 0 "$((settled - settled0))" "marks written out at 2 x $n"
	expect_errno ENOENT fsop stat "$A/s$n/d1/f000001"
	expect_errno ENOENT fsop stat "$B/s$n"
done
# A recursive clear of what only a mark flagged visits no name either.
mkdir "$A/c"
make_files "$A/c" 20
sync_dirs "$A/c"
sw_tool seteattr -f snapshot -r "$A/c" >/dev/null
read -r walked0 settled0 <<<"$(snapcost)"
sw_tool deleattr -f snapshot -r "$A/c" >/dev/null
read -r walked settled <<<"$(snapcost)"
assert_eq 0 "$((walked - walked0))" "names a recursive clear of a mark visits"
assert_eq 0 "$((settled - settled0))" "marks a recursive clear writes out"
assert_eq "$A/c/f000003: -" "$(sw_tool geteattr "$A/c/f000003")" \
	"geteattr after the clear of a mark"
assert_eq "$A/c: -" "$(sw_tool geteattr "$A/c")" "geteattr of the top"
# The count can move: a file made after the flag keeps the tree from
# going without -f, and the failed rmsnapshot writes the mark out as
# the names' own bits, which a clear then walks to clear.
sw_tool seteattr -f snapshot -r "$A/c" >/dev/null
touch "$A/c/late"
st=0
sw_tool rmsnapshot "$A/c" >/dev/null 2>&1 || st=$?
assert_ne 0 "$st" "rmsnapshot of a tree with a file made after the flag"
read -r walked0 settled0 <<<"$(snapcost)"
sw_tool deleattr -f snapshot -r "$A/c" >/dev/null
read -r walked settled <<<"$(snapcost)"
assert_ge 21 "$((walked - walked0))" "names a recursive clear of bits visits"
assert_eq "$A/c/f000003: -" "$(sw_tool geteattr "$A/c/f000003")" \
	"geteattr after the clear"
# A mark outlives the master as a mark: a crash replays its changelog
# record, a clean stop's checkpoint keeps it ('M' records), so a
# recursive clear after a restart costs no walk either.
mkdir -p "$A/k/sub"
make_files "$A/k/sub" 30
sync_dirs "$A/k/sub"
sw_tool seteattr -f snapshot -r "$A/k" >/dev/null
marks=$(sw_status 'd["snapflag_marks"]')
assert_ge 1 "$marks" "marks after seteattr -r of k"
for how in kill term; do
	restart_master "$how"
	assert_eq "$marks" "$(sw_status 'd["snapflag_marks"]')" \
		"marks after a master restart ($how)"
	assert_eq "$A/k/sub/f000004: snapshot" \
		"$(sw_tool geteattr "$A/k/sub/f000004")" \
		"geteattr below the mark after a master restart ($how)"
	assert_eq "$A/k: snapshot" "$(sw_tool geteattr "$A/k")" \
		"geteattr of the top after a master restart ($how)"
done
read -r walked0 settled0 <<<"$(snapcost)"
sw_tool deleattr -f snapshot -r "$A/k" >/dev/null
read -r walked settled <<<"$(snapcost)"
assert_eq "0 0" "$((walked - walked0)) $((settled - settled0))" \
	"names visited and marks written out by a clear after restarts"
assert_eq "$A/k/sub/f000004: -" "$(sw_tool geteattr "$A/k/sub/f000004")" \
	"geteattr after the clear"
sw_tool seteattr -f snapshot -r "$A/k" >/dev/null
sw_tool rmsnapshot "$A/k" >/dev/null || fail "rmsnapshot of k after restarts"
expect_errno ENOENT fsop stat "$B/k"
stop_mount "$A"
read -r given invals <<<"$(given_back "$A")"
log "$given delegation(s) given back, $invals kernel invalidation(s)"
assert_le "$((given * 17))" "$invals" \
	"kernel invalidations of snapshot removal"

# ---- 5. the trees beside a removed one ------------------------------------
# remade DIR N: dentries the kernel made to stat() DIR's N files (0 when
# it still had their names)
remade() {
	"$PYTHON" -c '
import os, sys
def dentries():
    with open("/proc/sys/fs/dentry-state") as f:
        return int(f.read().split()[0])
d, n = sys.argv[1], int(sys.argv[2])
before = dentries()
for i in range(n):
    os.stat(os.path.join(d, "f%06d" % i))
print(max(0, dentries() - before))
' "$1" "$2"
}
start_mount "$A"
log "removal of one of three trees of 5,000 files made here"
mkdir -p "$A/p/d0" "$A/p/d1" "$A/p/d2"
for d in d0 d1 d2; do
	make_files "$A/p/$d" 5000
done
sync_dirs "$A/p/d0" "$A/p/d1" "$A/p/d2"
sw_tool seteattr -f snapshot -r "$A/p/d0" >/dev/null || fail "seteattr of d0"
sw_tool rmsnapshot "$A/p/d0" >/dev/null || fail "rmsnapshot of d0"
made=$(remade "$A/p/d1" 5000)
log "stat of d1's 5,000 files after d0's rmsnapshot: $made dentries made again"
assert_le 1000 "$made" "dentries made again in d1 after d0 went"
sw_tool rmr "$A/p/d1" >/dev/null || fail "rmr of d1"
made=$(remade "$A/p/d2" 5000)
log "stat of d2's 5,000 files after d1's rmr: $made dentries made again"
assert_le 1000 "$made" "dentries made again in d2 after d1 went"
expect_errno ENOENT fsop stat "$A/p/d0/f000001"
expect_errno ENOENT fsop stat "$A/p/d1/f000001"
expect_errno ENOENT fsop stat "$B/p/d1"
assert_exists "$A/p/d2/f004999" "$B/p/d2/f004999"

# refused_in_cwd HOW: a process on A whose working directory is p/HOW,
# made by A (names held for long), sees what B changes there after a
# removal of p/HOW that the master recalled and then refused
refused_in_cwd() {
	local how=$1 d=$A/p/$1 st=0
	mkdir "$d"
	chmod 755 "$A/p" "$d"
	inside_start "$d" "$SW_TMP/cwd-$how" "$SW_TMP/go-$how"
	if [[ $how == snap ]]; then
		sw_tool rmsnapshot "$d" >/dev/null 2>&1 || st=$?
	else
		as_user 65534 65534 "" "$SW_TOOL_BIN" \
			-m "$SW_MASTER_HOST:$SW_PORT" rmr "$d" \
			>/dev/null 2>&1 || st=$?
	fi
	assert_ne 0 "$st" "the refused removal of p/$how"
	# Past A's watch's idle time (cache_ms 1 s): B asks for the
	# directory, which an idle watch would lose to it.
	sleep 1.5
	touch "$B/p/$how/bx"
	inside_change "$B/p/$how"
	inside_check "$SW_TMP/cwd-$how" "$SW_TMP/go-$how" "p/$how on A"
}
log "removals refused after their recall, a process inside"
refused_in_cwd snap
refused_in_cwd rmr

# ---- 6. rmdir of a directory another mount holds ---------------------------
log "rmdir by B of a directory A holds, right after A made a file there"
mkdir "$B/q"
ls "$B/q" >/dev/null # B watches q: A is not granted it, but its entries
ls "$A/q" >/dev/null
for i in 1 2 3 4 5; do
	mkdir "$A/q/e$i"
	ls "$A/q/e$i" >/dev/null # A asks for it
	sleep 0.3            # ... and holds it
	"$PYTHON" -c '
import errno, os, sys
a, b = sys.argv[1], sys.argv[2]
os.close(os.open(os.path.join(a, "x"), os.O_CREAT | os.O_WRONLY, 0o644))
try:
    os.rmdir(b)
    sys.exit("%s: rmdir succeeded, after a file was made there" % b)
except OSError as e:
    if e.errno != errno.ENOTEMPTY:
        sys.exit("%s: %s, not ENOTEMPTY" % (b, e.strerror))
' "$A/q/e$i" "$B/q/e$i" || fail "rmdir of q/e$i"
	assert_exists "$A/q/e$i/x" "$B/q/e$i/x"
done
log "granted/recalls: $(sw_status "'%d/%d' % (d['deleg_granted'], d['deleg_recalls'])")"
stop_mount "$A"
wait_fsck_clean
sw_pass
