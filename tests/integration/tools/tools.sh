#!/bin/bash
# Everyday tools on a tree of empty files, compared with the same tree on
# a local directory: ls -l, find, du, tar -c/-t, and rm -rf of a
# 10,000-file tree. Timestamps and directory sizes (local filesystems
# report their own) are left out of the comparisons.
. "$(dirname "$0")/../lib.sh"
sw_init tools --root

export TZ=UTC
umask 022
start_master
start_mount
M=$SW_MNT
L=$SW_TMP/local
mkdir "$L"
BIG=${TOOLS_BIG_FILES:-10000}

# build_tree DIR: the same tree wherever it is built.
build_tree() (
	cd "$1"
	mkdir tree
	cd tree
	for d in 0 1 2 3 4 5 6 7 8 9; do
		for s in 0 1 2 3 4 5 6 7 8 9; do
			mkdir -p "d$d/s$s"
			(cd "d$d/s$s" && touch f0 f1 f2 f3 f4 f5 f6 f7 f8 f9)
		done
	done
	mkdir empty 'with space' deep deep/er deep/er/est
	touch 'with space/a file' deep/er/est/leaf
	truncate -s 12345 sized
	truncate -s 1 one
	touch modes600 modes4755 owned
	chmod 600 modes600
	chmod 4755 modes4755
	chown 1234:4321 owned
	chmod 1777 empty
	ln -s d0/s0/f0 link
	ln -s ../../nowhere deep/er/dangling
	ln d1/s1/f1 hard1
	ln d1/s1/f1 deep/hard2
	mkfifo fifo
)

# The fields that do not depend on the filesystem: type, mode, links,
# owner, size (not for directories), path, link target.
find_listing() {
	(cd "$1" && find . -printf '%y %m %n %U %G %s %p -> %l\n') |
		awk '$1 == "d" { $6 = "-" } { print }' | sort
}

# ls -lnR without times, "total" lines and directory sizes.
ls_listing() {
	(cd "$1" && ls -lnR --time-style=+ .) |
		awk '/^total / { next }
		     /^d/ { $5 = "-" }
		     { print }'
}

log "building the tree on the mount and locally"
build_tree "$M"
build_tree "$L"

log "find"
find_listing "$M/tree" >"$SW_TMP/find.mnt"
find_listing "$L/tree" >"$SW_TMP/find.local"
assert_same_text "$SW_TMP/find.local" "$SW_TMP/find.mnt" "find -printf listing"
assert_eq 1009 "$(find "$M/tree" -type f | wc -l)" "find -type f | wc -l"
assert_eq 2 "$(find "$M/tree" -type l | wc -l)" "find -type l | wc -l"
assert_eq 1 "$(find "$M/tree" -type p | wc -l)" "find -type p | wc -l"
assert_eq 116 "$(find "$M/tree" -type d | wc -l)" "find -type d | wc -l"
assert_eq 3 "$(find "$M/tree" -samefile "$M/tree/hard1" | wc -l)" "find -samefile"
assert_eq ./sized "$(cd "$M/tree" && find . -size +10k)" "find -size +10k"
assert_eq ./modes4755 "$(cd "$M/tree" && find . -perm -4000)" "find -perm -4000"
assert_eq ./owned "$(cd "$M/tree" && find . -user 1234 -group 4321)" "find -user -group"

log "ls -l"
ls_listing "$M/tree" >"$SW_TMP/ls.mnt"
ls_listing "$L/tree" >"$SW_TMP/ls.local"
assert_same_text "$SW_TMP/ls.local" "$SW_TMP/ls.mnt" "ls -lnR"
assert_eq "$(ls -la "$L/tree/d3" | wc -l)" "$(ls -la "$M/tree/d3" | wc -l)" "ls -la line count"

log "du"
(cd "$M/tree" && du --inodes -al . | sort -k2) >"$SW_TMP/du.mnt"
(cd "$L/tree" && du --inodes -al . | sort -k2) >"$SW_TMP/du.local"
assert_same_text "$SW_TMP/du.local" "$SW_TMP/du.mnt" "du --inodes -al (hard links counted per name: traversal orders differ)"
# apparent size of the files (directories report their own sizes)
files_bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }'; }
assert_eq 12346 "$(files_bytes "$M/tree")" "bytes in files"
dirs=$(find "$M/tree" -type d | wc -l)
assert_eq $((12346 + dirs * 4096 + 8 + 13)) \
	"$(du -s --apparent-size -B1 "$M/tree" | cut -f1)" "du -s --apparent-size"

log "tar"
# tar reads the files: only empty ones here (sized ones would need data).
(cd "$M/tree" && tar -cf "$SW_TMP/mnt.tar" --numeric-owner d0 d1 empty 'with space' deep link hard1 fifo)
(cd "$L/tree" && tar -cf "$SW_TMP/local.tar" --numeric-owner d0 d1 empty 'with space' deep link hard1 fifo)
tar -tvf "$SW_TMP/mnt.tar" | awk '{ $4 = $5 = ""; print }' | sort >"$SW_TMP/tar.mnt"
tar -tvf "$SW_TMP/local.tar" | awk '{ $4 = $5 = ""; print }' | sort >"$SW_TMP/tar.local"
# directory entries in a tar carry size 0 either way; hard links are
# listed as such in both
assert_same_text "$SW_TMP/tar.local" "$SW_TMP/tar.mnt" "tar -tvf of archives made from both trees"
assert_eq 234 "$(tar -tf "$SW_TMP/mnt.tar" | wc -l)" "entries in the archive"
# and back: extract the archive into the mount and compare again
mkdir "$M/untar" "$L/untar"
tar -xf "$SW_TMP/local.tar" -C "$M/untar" --numeric-owner
tar -xf "$SW_TMP/local.tar" -C "$L/untar" --numeric-owner
find_listing "$M/untar" >"$SW_TMP/untar.mnt"
find_listing "$L/untar" >"$SW_TMP/untar.local"
assert_same_text "$SW_TMP/untar.local" "$SW_TMP/untar.mnt" "tree extracted by tar -x"

log "rm -rf of the trees"
rm -rf "$M/tree" "$M/untar"
assert_eq "" "$(ls -A "$M")" "the mount after rm -rf"

log "rm -rf of a $BIG-file tree"
nodes() { echo $((4294967296 - $(stat -f -c %d "$M"))); }
n0=$(nodes)
"$PYTHON" - "$M/big" "$BIG" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per = 100
os.mkdir(root)
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // per))
    if i % per == 0:
        os.mkdir(d)
    os.close(os.open(os.path.join(d, "f%05d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
EOF
subdirs=$(((BIG + 99) / 100))
assert_eq "$BIG" "$(find "$M/big" -type f | wc -l)" "files in the big tree"
assert_eq $((n0 + BIG + subdirs + 1)) "$(nodes)" "nodes with the big tree"
assert_stat %h $((subdirs + 2)) "$M/big" "nlink of the big tree's top"
t0=$SECONDS
timeout 300 rm -rf "$M/big" || fail "rm -rf of the big tree"
log "rm -rf of $BIG files took $((SECONDS - t0)) s"
assert_missing "$M/big"
assert_eq "$n0" "$(nodes)" "nodes after rm -rf of the big tree"
sw_pass
