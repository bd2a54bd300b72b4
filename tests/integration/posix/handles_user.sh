#!/bin/bash
# Node handles through the mount, for a user who is not root (threat-model
# row 1). The master believes a node named by number only with the handle
# a reply gave for it; root's requests need none, so a request the mount
# sends without its node's handle shows only for another user. Uid 1000,
# in a directory of its own:
#
#  1. makes directories, files, hard and symbolic links, writes, renames,
#     chmods, truncates, sets and reads xattrs and locks;
#  2. with the kernel's caches dropped (it looks every name up again and
#     names the nodes those lookups gave), lists, stats and reads it all;
#  3. makes and removes a tree of many directories under delegations
#     (batches of creates and removals naming many parents, the new
#     nodes named by their handles once the batches are answered);
#  4. holds a file open across a kill -9 and restart of the master (the
#     reconnect's reclaim names it by its handle) and writes and reads it
#     after.
#
# Every step must succeed, the master must have refused nothing for want
# of a handle, and the mount must log no refused operation.
. "$(dirname "$0")/../lib.sh"
sw_init handles_user --root

U=1000
sw_user_python
start_master
start_mount
M=$SW_MNT
H=$M/home
mkdir "$H"
chown $U:$U "$H"
chmod 0700 "$H"
mkdir -m 0777 "$SW_TMP/sync"

# user SCRIPT: run the bash SCRIPT as uid 1000 in $H.
user() {
	as_user $U $U "" env H="$H" bash -eu -o pipefail -c "cd \"\$H\"; $1"
}

# ---- 1. the usual things ------------------------------------------------
log "making, writing, renaming, linking as uid $U"
user '
mkdir -p a/b/c d
for i in $(seq 1 20); do printf "file %s\n" $i >a/b/c/f$i; done
cp -r a e
mv a/b/c/f1 d/g1
ln d/g1 d/h1
ln -s ../d/g1 a/s1
chmod 0600 d/g1
truncate -s 100 a/b/c/f2
touch -d "2020-01-02 03:04:05" a/b/c/f3
mv e/b e/moved
flock d/g1 true
'
ufsop $U $U "" setxattr "$H/d/g1" user.k v >/dev/null ||
	fail "setxattr as uid $U"
assert_eq "OK v" "$(ufsop $U $U "" getxattr "$H/d/g1" user.k)" \
	"getxattr as uid $U"

# ---- 2. everything again, looked up afresh -------------------------------
log "after drop_caches: listing, stat, reading"
drop_caches
user '
[ "$(find . | wc -l)" = 50 ] || { find . | sort; exit 1; }
find . -exec stat -c "%i %h %s %a" {} + >/dev/null
[ "$(cat d/h1)" = "file 1" ]
[ "$(readlink a/s1)" = ../d/g1 ]
[ "$(cat a/s1)" = "file 1" ]
[ "$(stat -c %s a/b/c/f2)" = 100 ]
[ "$(stat -c %Y a/b/c/f3)" = "$(date -d "2020-01-02 03:04:05" +%s)" ]
[ "$(stat -c %h d/g1)" = 2 ]
cmp a/b/c/f5 e/moved/c/f5
ls -lR >/dev/null
'
assert_eq "OK v" "$(ufsop $U $U "" getxattr "$H/d/g1" user.k)" \
	"getxattr after drop_caches"

# ---- 3. many directories under delegations -------------------------------
log "a tree of many directories made and removed under delegations"
batches0=$(sw_requests batch)
user '
mkdir t
for i in $(seq -w 0 79); do mkdir t/d$i; done
for i in $(seq -w 0 79); do touch t/d$i/x t/d$i/y; done
'
drop_caches
user '
[ "$(find t -type f | wc -l)" = 160 ]
for i in $(seq -w 0 79); do rm t/d$i/x; done
rm -rf t
[ ! -e t ]
'
drop_caches
assert_missing "$H/t"
batches=$(($(sw_requests batch) - batches0))
log "batches sent: $batches"
[[ $batches -gt 0 ]] || fail "no batch was sent: no delegation was used"

# ---- 4. an open file across a master restart -----------------------------
log "a file held open across a kill -9 of the master"
cat >"$SW_TMP/sync/holder.py" <<'EOF'
import os, sys
fd = os.open("held", os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, b"before\n")
os.fsync(fd)
open(sys.argv[1] + "/ready", "w").close()
open(sys.argv[1] + "/go").read()
os.write(fd, b"after\n")
os.fsync(fd)
os.lseek(fd, 0, 0)
sys.stdout.write(os.read(fd, 100).decode())
os.close(fd)
EOF
mkfifo -m 0666 "$SW_TMP/sync/go"
(cd "$H" && as_user $U $U "" "$SW_USER_PYTHON" "$SW_TMP/sync/holder.py" \
	"$SW_TMP/sync" >"$SW_TMP/sync/held.out") &
holder=$!
wait_until 20 "the holder to open its file" test -e "$SW_TMP/sync/ready"
restart_master kill
# The mount reconnects, and reclaims the open file, on its next request.
drop_caches
wait_until 20 "the mount to reconnect" stat "$H/d" >/dev/null
echo go >"$SW_TMP/sync/go"
wait "$holder" || fail "the holder failed after the master's restart"
assert_eq "$(printf 'before\nafter')" "$(cat "$SW_TMP/sync/held.out")" \
	"what the held file has"

# ---- nothing refused -------------------------------------------------------
if grep -E "not reclaimed" "$SW_MASTER_LOG" >&2; then
	fail "the master refused the mount's reclaim of the held file"
fi
if grep "refused by the master" "$M.log" >&2; then
	fail "the mount logged refused operations"
fi
user '[ "$(cat d/h1)" = "file 1" ] && [ "$(cat held)" = "before
after" ]'
sw_pass
