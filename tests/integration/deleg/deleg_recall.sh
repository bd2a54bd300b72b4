#!/bin/bash
# A recall costs O(1) in the size of the directory (issue 29): the mount
# that holds a directory drops every name it handed the kernel for long
# with one invalidation, of the directory's own entry, not one per name.
#
#  1. `sweepfs rmr` of a tree of 2 x 5,000 files the same mount made (and
#     the kernel caches): the mount sends at most one kernel invalidation
#     per directory it gives back (counted by the mount, logged at
#     unmount), and the tree is gone for it and for another mount.
#  2. A live directory recalled by another mount: what the other removes,
#     adds or renames is seen by the holder at once, cached names and all.
#  3. A directory this mount renamed, then recalled: its names are still
#     dropped (the mount follows its own renames).
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
# One per directory at most, whatever its size (10,000 names before).
assert_le "$given" "$invals" "kernel invalidations"
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
assert_le "$given" "$invals" "kernel invalidations"
wait_fsck_clean
sw_pass
