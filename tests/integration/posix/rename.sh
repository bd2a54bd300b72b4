#!/bin/bash
# rename(2) and renameat2(2) through the mount: the POSIX rules, the
# RENAME_NOREPLACE and RENAME_EXCHANGE flags, link counts of the parents,
# an open file that is renamed over, and the changelog replay of it all.
. "$(dirname "$0")/../lib.sh"
sw_init rename --root

umask 022
start_master
start_mount
M=$SW_MNT
cd "$M"

ino() { stat -c %i "$1"; }

mkdir -p d1 d2 full/inner empty1 empty2 tree/sub/deeper
touch f1 f2 d1/a d2/b full/inner/x

# ---- plain rename: the POSIX errors -----------------------------------------
log "rename errors"
expect_errno ENOTEMPTY fsop rename empty1 full
assert_exists empty1 full/inner/x
expect_errno ENOTDIR fsop rename empty1 f1
assert_stat %F directory empty1 "source dir after a failed rename over a file"
assert_stat %F "regular empty file" f1 "target file after a failed rename"
expect_errno EISDIR fsop rename f1 empty1
assert_stat %F directory empty1 "target dir after a failed rename of a file over it"
expect_errno EINVAL fsop rename tree tree/sub/deeper/t
expect_errno EINVAL fsop rename tree/sub tree/sub/deeper/t
assert_exists tree/sub/deeper
expect_errno ENOENT fsop rename nothing f9
expect_errno ENOENT fsop rename f1 nowhere/f1
expect_errno ENOTDIR fsop rename f1 f2/x

# ---- rename to itself and to another link of the same file: no-ops ----------
log "no-op renames"
i=$(ino f1)
expect_ok fsop rename f1 f1
assert_stat %i "$i" f1 "rename to itself"
ln f1 f1.link
expect_ok fsop rename f1 f1.link
assert_exists f1 f1.link
assert_stat %h 2 f1 "nlink after a rename between two links of one file"
assert_stat %i "$i" f1.link "inode of the other link"
expect_ok fsop rename f1.link d1/../f1.link
expect_ok fsop rename d1 d1
assert_stat %h 2 d1 "nlink of a dir renamed to itself"
expect_errno EEXIST fsop rename2 f1 f1.link noreplace
rm f1.link

# ---- a replacing rename frees the old inode ---------------------------------
touch victim
before=$(free_inodes)
i=$(ino f2)
expect_ok fsop rename f2 victim
assert_missing f2
assert_stat %i "$i" victim "inode of the renamed file"
assert_eq $((before + 1)) "$(free_inodes)" "free inodes after a replacing rename"
mv victim f2
# a directory over an empty directory, across parents
i=$(ino empty1)
expect_ok fsop rename empty1 d2/empty2x
mkdir d2/gone
expect_ok fsop rename d2/empty2x d2/gone
assert_stat %i "$i" d2/gone "dir renamed over an empty dir"
assert_stat %h 3 d2 "parent nlink after a dir replaced a dir"
expect_ok fsop rename d2/gone empty1

# ---- RENAME_NOREPLACE ---------------------------------------------------------
log "RENAME_NOREPLACE"
expect_errno EEXIST fsop rename2 f1 f2 noreplace
assert_exists f1 f2
expect_errno EEXIST fsop rename2 empty1 empty2 noreplace
i=$(ino f1)
expect_ok fsop rename2 f1 d1/f1 noreplace
assert_missing f1
assert_stat %i "$i" d1/f1 "noreplace rename to a new name"
expect_ok fsop rename2 d1/f1 f1 noreplace
expect_errno EINVAL fsop rename2 f1 f2 noreplace,exchange

# ---- RENAME_EXCHANGE ----------------------------------------------------------
log "RENAME_EXCHANGE"
i1=$(ino f1)
i2=$(ino f2)
expect_ok fsop rename2 f1 f2 exchange
assert_stat %i "$i2" f1 "f1 after exchange"
assert_stat %i "$i1" f2 "f2 after exchange"
expect_errno ENOENT fsop rename2 f1 nothing exchange
expect_errno ENOENT fsop rename2 nothing f1 exchange
# a file and a directory across directories
mkdir -p xa/dir/sub xb
touch xb/file xa/dir/sub/y
assert_stat %h 3 xa "xa nlink before"
assert_stat %h 2 xb "xb nlink before"
idir=$(ino xa/dir)
ifile=$(ino xb/file)
expect_ok fsop rename2 xa/dir xb/file exchange
assert_stat %i "$ifile" xa/dir "xa/dir after exchange"
assert_stat %i "$idir" xb/file "xb/file after exchange"
assert_stat %F "regular empty file" xa/dir "type of xa/dir after exchange"
assert_stat %F directory xb/file "type of xb/file after exchange"
assert_stat %h 2 xa "xa nlink after its subdir left"
assert_stat %h 3 xb "xb nlink after a subdir arrived"
assert_exists xb/file/sub/y
assert_eq "$(ino xb)" "$(ino xb/file/..)" "'..' of the exchanged directory"
find xa xb | sort >"$SW_TMP/x.got"
printf '%s\n' xa xa/dir xb xb/file xb/file/sub xb/file/sub/y >"$SW_TMP/x.expected"
assert_same_text "$SW_TMP/x.expected" "$SW_TMP/x.got" "find after exchange"
# two directories in different parents
mkdir -p ya/one/1 yb/two
expect_ok fsop rename2 ya/one yb/two exchange
assert_exists ya/one yb/two/1
assert_missing ya/one/1
assert_stat %h 3 ya "ya nlink after a dir-dir exchange"
assert_stat %h 3 yb "yb nlink after a dir-dir exchange"
# a directory with one of its own descendants
expect_errno EINVAL fsop rename2 tree tree/sub/deeper exchange
expect_errno EINVAL fsop rename2 tree/sub/deeper tree exchange
assert_exists tree/sub/deeper
# an exchange of one file with itself (two links) changes nothing
ln f1 f1.same
expect_ok fsop rename2 f1 f1.same exchange
assert_stat %h 2 f1 "nlink after exchanging two links of one file"
rm f1.same

# ---- renaming over an open file -------------------------------------------------
log "rename over an open file"
touch openme replacer
truncate -s 777 openme
before=$(free_inodes)
"$PYTHON" - "$M" <<'EOF'
import os, sys
m = sys.argv[1]
fd = os.open(os.path.join(m, "openme"), os.O_RDONLY)
st0 = os.fstat(fd)
os.rename(os.path.join(m, "replacer"), os.path.join(m, "openme"))
assert os.stat(os.path.join(m, "openme")).st_ino != st0.st_ino
for _ in range(3):
    st = os.fstat(fd)   # past the attribute cache, too
    assert st.st_ino == st0.st_ino, (st.st_ino, st0.st_ino)
    assert st.st_size == 777, st.st_size
    assert st.st_nlink == 0, st.st_nlink
    assert len(os.pread(fd, 1000, 0)) == 777
    import time; time.sleep(0.6)
os.close(fd)
EOF
assert_stat %s 0 openme "the new file under the name"
freed_one() { [[ $(free_inodes) == $((before + 1)) ]]; }
wait_until 5 "the replaced file to be freed after close" freed_one

# ---- the same after a crash: replay of renames and exchanges -----------------------
log "replay"
cd /
snap() { (cd "$M" && find . -printf '%y %i %n %m %p\n' | sort -k5); }
snap >"$SW_TMP/before.txt"
restart_master kill
wait_until 10 "the mount reconnects" ls "$M/xb/file"
snap >"$SW_TMP/after.txt"
assert_same_text "$SW_TMP/before.txt" "$SW_TMP/after.txt" "tree after replay"
sw_pass
