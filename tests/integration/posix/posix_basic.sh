#!/bin/bash
# POSIX basics through the mount with ordinary tools: directories, files,
# renames, links, modes (with the set-ID and sticky bits), owners, sizes,
# times to the nanosecond, special files, xattrs, link counts, statfs; a
# second mount sees the changes within the cache timeouts; and all of it
# survives a clean restart (checkpoint) and a kill -9 (changelog replay)
# of the master.
. "$(dirname "$0")/../lib.sh"
sw_init posix_basic --root

export TZ=UTC
umask 022
start_master
start_mount
M=$SW_MNT
cd "$M"

free0=$(free_inodes)

# ---- mkdir -p, touch, find ------------------------------------------------
log "directories and find"
mkdir -p a/b/c/d/e/f/g/h
mkdir -p a/b/x
touch a/b/c/file1 a/b/x/file2 top
cat >"$SW_TMP/find.expected" <<'EOF'
.
./a
./a/b
./a/b/c
./a/b/c/d
./a/b/c/d/e
./a/b/c/d/e/f
./a/b/c/d/e/f/g
./a/b/c/d/e/f/g/h
./a/b/c/file1
./a/b/x
./a/b/x/file2
./top
EOF
find . | sort >"$SW_TMP/find.got"
assert_same_text "$SW_TMP/find.expected" "$SW_TMP/find.got" "find | sort"
assert_eq 10 "$(find . -type d | wc -l)" "find -type d count"
assert_eq 3 "$(find . -type f | wc -l)" "find -type f count"
assert_eq 12 "$((free0 - $(free_inodes)))" "statfs free inodes used by 12 new nodes"

# ---- directory link counts: 2 + subdirectories ----------------------------
log "directory link counts"
mkdir nl nl/s1 nl/s2 nl/s3
touch nl/f1 nl/f2
assert_stat %h 5 nl "nlink of a dir with 3 subdirs"
rmdir nl/s1
assert_stat %h 4 nl "nlink after rmdir of a subdir"
mv nl/s2 a/
assert_stat %h 3 nl "nlink after moving a subdir out"
assert_stat %h 4 a "nlink of the dir it moved into"
mv a/s2 nl/s2
assert_stat %h 4 nl "nlink after moving it back"
assert_stat %h 3 a "nlink of the dir it left"
assert_stat %h 2 nl/s3 "nlink of an empty dir"
root_links=$(stat -c %h .)
mkdir rootsub
assert_eq $((root_links + 1)) "$(stat -c %h .)" "nlink of the mount root after mkdir"
rmdir rootsub
assert_eq "$root_links" "$(stat -c %h .)" "nlink of the mount root after rmdir"

# ---- rmdir of a non-empty dir ---------------------------------------------
expect_errno ENOTEMPTY fsop rmdir nl
expect_errno ENOTEMPTY fsop rmdir a/b/c/d/e/f/g
if rmdir nl 2>/dev/null; then fail "rmdir of a non-empty dir succeeded"; fi
assert_exists nl/f1 nl/s2
expect_errno ENOTDIR fsop rmdir nl/f1
expect_errno EISDIR fsop unlink nl/s2
expect_errno ENOENT fsop rmdir nl/nothing
expect_errno EEXIST fsop mkdir nl/s2

# ---- mv -------------------------------------------------------------------
log "mv"
ino=$(stat -c %i top)
mv top a/b/x/moved
assert_missing top
assert_stat %i "$ino" a/b/x/moved "inode kept by mv across directories"
mv a/b/x/moved top
assert_stat %i "$ino" top "inode kept by mv back"
mv top top2
assert_missing top
assert_stat %i "$ino" top2 "inode kept by mv in one directory"
# over an existing file: the old one goes, its inode count too
touch victim
victim_ino=$(stat -c %i victim)
before=$(free_inodes)
mv top2 victim
assert_missing top2
assert_stat %i "$ino" victim "mv over an existing file: source inode"
assert_ne "$victim_ino" "$(stat -c %i victim)" "replaced inode"
assert_eq $((before + 1)) "$(free_inodes)" "free inodes after replacing a file"
mv victim top
# a directory with contents, across directories
dino=$(stat -c %i a/b/x)
mv a/b/x nl/x
assert_missing a/b/x
assert_stat %i "$dino" nl/x "inode of a moved directory"
assert_exists nl/x/file2
assert_eq "$(stat -c %i nl)" "$(stat -c %i nl/x/..)" "'..' of a moved directory"
# over an empty directory (mv -T replaces it)
mkdir emptydst
mv -T nl/x emptydst
assert_missing nl/x
assert_stat %i "$dino" emptydst "mv -T over an empty dir"
assert_exists emptydst/file2
mv -T emptydst a/b/x
# over a non-empty directory fails
mkdir -p full/inner
if mv -T a/b/x full 2>/dev/null; then fail "mv over a non-empty dir succeeded"; fi
assert_exists a/b/x/file2 full/inner
rm -r full

# ---- hard links, symlinks -------------------------------------------------
log "links"
touch l1
ln l1 l2
assert_stat %h 2 l1 "nlink after ln"
assert_eq "$(stat -c %i l1)" "$(stat -c %i l2)" "hard links share the inode"
ln l1 a/l3
assert_stat %h 3 l2 "nlink with three names"
rm l1
assert_stat %h 2 l2 "nlink after removing one name"
expect_errno EPERM fsop link a a_link
expect_errno EEXIST fsop link l2 a/l3
ln -s a/b/c/file1 sym
ln -s /nonexistent/target dangling
assert_eq a/b/c/file1 "$(readlink sym)" "readlink"
assert_eq /nonexistent/target "$(readlink dangling)" "readlink of a dangling link"
assert_stat %F "symbolic link" sym "type of a symlink"
assert_stat %s 11 sym "size of a symlink is its target's length"
assert_eq "$(stat -c %i a/b/c/file1)" "$(stat -L -c %i sym)" "stat through a symlink"
long=$(printf 'x%.0s' $(seq 1 1000))
ln -s "$long" longsym
assert_eq "$long" "$(readlink longsym)" "readlink of a 1000-byte target"
expect_errno EINVAL fsop readlink l2
ls a/b/c/../c/file1 >/dev/null

# ---- chmod, chown, chgrp --------------------------------------------------
log "modes and owners"
touch m
for mode in 0 644 4755 2755 6711 1777 7777 0400; do
	chmod "$mode" m
	assert_stat %a "$(printf %o $((8#$mode)))" m "chmod $mode"
done
mkdir sticky && chmod 1777 sticky
assert_stat %A drwxrwxrwt sticky "sticky dir mode string"
chmod 6755 m
assert_stat %A -rwsr-sr-x m "setuid+setgid mode string"
chmod u-s,g-s,o+t m
assert_stat %A -rwxr-xr-t m "symbolic chmod"
chmod 2775 sticky
assert_stat %A drwxrwsr-x sticky "setgid dir mode string"
chown 1234:5678 m
assert_stat '%u %g' '1234 5678' m "chown uid:gid"
chgrp 4321 m
assert_stat '%u %g' '1234 4321' m "chgrp"
chown 99 m
assert_stat '%u %g' '99 4321' m "chown uid only"
chmod 6755 m
chown 100 m
assert_stat %a 755 m "chown clears set-user-ID and set-group-ID"
chmod 2745 m
chown 101 m
assert_stat %a 2745 m "chown keeps set-group-ID without group execute"
chown -h 77:88 sym
assert_stat '%u %g' '77 88' sym "chown -h of a symlink"
assert_stat '%u %g' '0 0' a/b/c/file1 "the symlink's target is unchanged"

# ---- ls -l fields ---------------------------------------------------------
mkdir lsdir lsdir/sub
touch lsdir/f
chmod 640 lsdir/f
chown 1001:1002 lsdir/f
ln lsdir/f lsdir/g
ln -s f lsdir/s
mkfifo lsdir/p
ls -ln lsdir | awk 'NR > 1 { print $1, $2, $3, $4, $NF }' >"$SW_TMP/ls.got"
cat >"$SW_TMP/ls.expected" <<'EOF'
-rw-r----- 2 1001 1002 f
-rw-r----- 2 1001 1002 g
prw-r--r-- 1 0 0 p
lrwxrwxrwx 1 0 0 f
drwxr-xr-x 2 0 0 sub
EOF
assert_same_text "$SW_TMP/ls.expected" "$SW_TMP/ls.got" "ls -ln fields"
assert_eq "root root" "$(ls -l lsdir | awk '$NF == "sub" { print $3, $4 }')" "ls -l owner names"

# ---- truncate ---------------------------------------------------------------
log "sizes"
touch sz
truncate -s 12345 sz
assert_stat %s 12345 sz "truncate -s"
truncate -s 1T sz
assert_stat %s 1099511627776 sz "truncate -s 1T"
truncate -s 0 sz
assert_stat %s 0 sz "truncate -s 0"
truncate -s 100 sz
assert_eq 100 "$(wc -c <sz)" "bytes read from a 100-byte file"
assert_eq 0 "$(tr -d '\0' <sz | wc -c)" "a file without data reads as zeros"
expect_errno EISDIR fsop truncate a 10
expect_errno EFBIG fsop truncate sz $((1 << 48))
assert_stat %s 4096 a "size of a directory"

# ---- times ----------------------------------------------------------------
log "times"
touch -d '2021-03-04 05:06:07.123456789' t
assert_stat %y '2021-03-04 05:06:07.123456789 +0000' t "mtime from touch -d"
assert_stat %x '2021-03-04 05:06:07.123456789 +0000' t "atime from touch -d"
assert_eq 1614834367123456789 \
	"$("$PYTHON" -c 'import os,sys; print(os.stat(sys.argv[1]).st_mtime_ns)' t)" \
	"st_mtime_ns"
touch -a -d '2000-01-01 00:00:00.5' t
assert_stat %x '2000-01-01 00:00:00.500000000 +0000' t "touch -a sets atime"
assert_stat %y '2021-03-04 05:06:07.123456789 +0000' t "touch -a leaves mtime"
touch -m -d '1999-12-31 23:59:59.000000001' t
assert_stat %y '1999-12-31 23:59:59.000000001 +0000' t "touch -m sets mtime"
assert_stat %x '2000-01-01 00:00:00.500000000 +0000' t "touch -m leaves atime"
before=$(date +%s)
touch -m t
now_m=$(stat -c %Y t)
assert_ge "$before" "$now_m" "touch -m (now) mtime"
assert_stat %x '2000-01-01 00:00:00.500000000 +0000' t "touch -m (now) leaves atime"
ctime=$(stat -c %Z t)
assert_ge "$before" "$ctime" "ctime after a change"
touch -d '1960-06-01 12:00:00' old
assert_stat %Y -302443200 old "a time before 1970"
# a new entry changes the directory's mtime
mkdir tdir2 && touch -d '2001-01-01' tdir2
touch tdir2/new
assert_ge "$before" "$(stat -c %Y tdir2)" "mtime of a directory after create"

# ---- special files ----------------------------------------------------------
log "special files"
mknod fifo p
mknod chr c 1 3
mknod blk b 8 1
assert_stat %F fifo fifo "mknod p"
assert_stat '%F %t %T' 'character special file 1 3' chr "mknod c 1 3"
assert_stat '%F %t %T' 'block special file 8 1' blk "mknod b 8 1"
mkfifo -m 600 fifo2
assert_stat '%F %a' 'fifo 600' fifo2 "mkfifo -m 600"
"$PYTHON" -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' sock
assert_stat %F socket sock "a bound unix socket"

# ---- xattrs -----------------------------------------------------------------
log "xattrs"
touch x
"$PYTHON" - x <<'EOF'
import errno, os, sys
p = sys.argv[1]
def expect_err(code, fn, *a):
    try:
        fn(*a)
    except OSError as e:
        if e.errno != code:
            sys.exit("%s%r: expected %s, got %s" % (fn.__name__, a,
                     errno.errorcode[code], errno.errorcode.get(e.errno)))
        return
    sys.exit("%s%r: expected %s, succeeded" % (fn.__name__, a, errno.errorcode[code]))
os.setxattr(p, "user.one", b"1")
os.setxattr(p, "user.two", b"second value")
os.setxattr(p, "user.empty", b"")
os.setxattr(p, "user.bin", bytes(range(256)))
assert os.getxattr(p, "user.one") == b"1", os.getxattr(p, "user.one")
assert os.getxattr(p, "user.two") == b"second value"
assert os.getxattr(p, "user.empty") == b""
assert os.getxattr(p, "user.bin") == bytes(range(256))
assert sorted(os.listxattr(p)) == ["user.bin", "user.empty", "user.one", "user.two"], os.listxattr(p)
os.setxattr(p, "user.one", b"replaced", os.XATTR_REPLACE)
assert os.getxattr(p, "user.one") == b"replaced"
expect_err(errno.EEXIST, os.setxattr, p, "user.one", b"x", os.XATTR_CREATE)
expect_err(errno.ENODATA, os.setxattr, p, "user.nope", b"x", os.XATTR_REPLACE)
os.removexattr(p, "user.two")
expect_err(errno.ENODATA, os.getxattr, p, "user.two")
expect_err(errno.ENODATA, os.removexattr, p, "user.two")
assert sorted(os.listxattr(p)) == ["user.bin", "user.empty", "user.one"], os.listxattr(p)
os.setxattr(p, "trusted.t", b"root only")
assert os.getxattr(p, "trusted.t") == b"root only"
expect_err(errno.EOPNOTSUPP, os.setxattr, p, "bogus.name", b"x")
big = b"v" * 65536
os.setxattr(p, "user.big", big)
assert os.getxattr(p, "user.big") == big
expect_err(errno.E2BIG, os.setxattr, p, "user.toobig", b"v" * 65537)
os.removexattr(p, "user.big")
os.setxattr(".", "user.ondir", b"d")
assert os.getxattr(".", "user.ondir") == b"d"
expect_err(errno.EPERM, os.setxattr, "fifo", "user.x", b"x")
# A node's names fit what listxattr(2) returns (XATTR_LIST_MAX, 64 KiB):
# the name that would not fit is ENOSPC; the listing works, and after a
# removal there is room again.
q = "manynames"
open(q, "w").close()
names = []
while len(names) < 1000:  # 262 fit
    n = "user.%04d.%s" % (len(names), "n" * 240)
    try:
        os.setxattr(q, n, b"")
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        break
    names.append(n)
else:
    sys.exit("1000 names of 250 bytes on one file: no ENOSPC")
assert sum(len(n) + 1 for n in names) <= 65536 < sum(
    len(n) + 1 for n in names + [n]), len(names)
assert sorted(os.listxattr(q)) == names, len(os.listxattr(q))
os.setxattr(q, names[0], b"a value may change")
os.removexattr(q, names[-1])
os.setxattr(q, n.replace("user.", "user.x", 1)[:-1], b"")
assert len(os.listxattr(q)) == len(names)
os.unlink(q)
EOF
expect_errno ENODATA fsop getxattr top user.none

# ---- rm -rf -------------------------------------------------------------------
log "rm -rf"
before=$(free_inodes)
mkdir -p tree/a/b/c tree/d
for i in 1 2 3 4 5; do touch tree/f$i tree/a/f$i tree/a/b/c/f$i; done
ln -s ../f1 tree/d/s
mkfifo tree/d/p
ln tree/f1 tree/a/b/hard
assert_eq $((before - 22)) "$(free_inodes)" "free inodes after building the tree"
rm -rf tree
assert_missing tree
assert_eq "$before" "$(free_inodes)" "free inodes after rm -rf"

# ---- statfs -----------------------------------------------------------------
log "statfs"
assert_eq "255 65536" "$(stat -f -c '%l %S' .)" "statfs name length and block size"
total=$(stat -f -c %c .)
free=$(stat -f -c %d .)
assert_ge 1 "$((total - free))" "statfs inodes in use"
assert_ge 1 "$(stat -f -c %b .)" "statfs total blocks"
assert_le "$(stat -f -c %b .)" "$(stat -f -c %f .)" "statfs free blocks <= total"

# ---- a change outlives the kernel forgetting the inode -----------------------
# A directory this mount made is delegated to it: it answers lookups from
# the listing it keeps, which holds each file's attributes as created.
# After a chown and a chmod, and the kernel dropping its inodes
# (drop_caches: FORGET), stat must show the change, not the creation
# (pjdfstest chown/00.t saw 0644 0:0 now and then).
log "attributes after the kernel forgets"
mkdir forgot
for i in 1 2 3 4 5 6 7 8; do
	touch "forgot/f$i"
	chown 65534:65533 "forgot/f$i"
	chmod 0711 "forgot/f$i"
done
drop_caches
for i in 1 2 3 4 5 6 7 8; do
	assert_stat %u:%g:%a 65534:65533:711 "forgot/f$i" "owner and mode after a forget"
done
rm -r forgot

# ---- a second mount sees the changes -------------------------------------------
# within the attribute and entry timeouts (1 s), also for a file it has
# cached (stat before the change)
log "two mounts"
O=$SW_TMP/other
start_mount "$O"
touch coh
rm -f cohgone && touch cohgone
stat "$O/coh" "$O/cohgone" >/dev/null
assert_missing "$O/cohnew"
truncate -s 777 coh
chmod 640 coh
touch -m -d '2002-02-02 02:02:02' coh
rm cohgone
mkdir cohnew
seen() { [[ "$(stat -c "$1" "$2" 2>&1)" == "$3" ]]; }
wait_until 3 "the other mount to see the new mode" seen %a "$O/coh" 640
wait_until 3 "the other mount to see the new size" seen %s "$O/coh" 777
wait_until 3 "the other mount to see the new mtime" seen %Y "$O/coh" 1012615322
wait_until 3 "the other mount to see the new directory" test -d "$O/cohnew"
wait_until 3 "the other mount to lose the removed file" test ! -e "$O/cohgone"
# A listing another mount read (and now caches: 1,500 entries, more than
# one page) follows every change made here, each in turn, at once: the
# master tells it. Its attribute and entry timeouts are long, so that
# nothing expiring can stand in for the invalidation: any wait well
# below them proves it. 10 s, not 1: each try lists both mounts (3,000
# names), which alone takes a second on a loaded machine.
L=$SW_TMP/lister
start_mount "$L" "" attr_timeout=60,entry_timeout=60
mkdir listed
(cd listed && seq -f 'e%g' 1500 | xargs touch)
listing() { ls -a "$1" | tr '\n' ' '; }
same_listing() { [[ "$(listing "$L/listed")" == "$(listing "$M/listed")" ]]; }
assert_eq 1500 "$(ls "$L/listed" | wc -l)" "entries the other mount lists"
touch listed/added
wait_until 10 "the other mount to list a created file" same_listing
rm listed/e700
wait_until 10 "the other mount to drop a removed file" same_listing
mv listed/e1 listed/renamed
wait_until 10 "the other mount to list a rename" same_listing
rm listed/e1500 listed/added
wait_until 10 "the other mount to drop the last entries" same_listing
assert_eq 1498 "$(ls "$L/listed" | wc -l)" "entries the other mount lists"
rm -r listed
wait_until 10 "the other mount to lose the directory" test ! -e "$L/listed"
stop_mount "$L"
stop_mount "$O"

# ---- everything survives a clean restart --------------------------------------
log "restart with a checkpoint"
snapshot() {
	(cd "$M" && find . -printf '%y %m %n %U %G %s %T@ %A@ %p -> %l\n' | sort)
	(cd "$M" && "$PYTHON" -c '
import os
for root, dirs, files in os.walk("."):
    for n in sorted(dirs + files):
        p = os.path.join(root, n)
        for x in sorted(os.listxattr(p, follow_symlinks=False)):
            print(p, x, os.getxattr(p, x, follow_symlinks=False).hex())
        st = os.lstat(p)
        print(p, st.st_rdev, st.st_mtime_ns, st.st_atime_ns)
')
}
snapshot >"$SW_TMP/before.txt"
cd /
stop_mount
stop_master
grep -q 'stopped at version' "$SW_MASTER_LOG" || fail "no clean-stop line in the master log"
start_master
start_mount
snapshot >"$SW_TMP/after.txt"
assert_same_text "$SW_TMP/before.txt" "$SW_TMP/after.txt" "tree after a checkpoint restart"
# and after a crash (changelog replay)
cd "$M"
touch after_cp1
mkdir after_cp2
chmod 1750 after_cp2
"$PYTHON" -c 'import os; os.setxattr("after_cp1", "user.k", b"v")'
cd /
snapshot >"$SW_TMP/before2.txt"
restart_master kill
wait_until 10 "the mount reconnects" stat "$M/a"
snapshot >"$SW_TMP/after2.txt"
assert_same_text "$SW_TMP/before2.txt" "$SW_TMP/after2.txt" "tree after a crash and replay"
sw_pass
