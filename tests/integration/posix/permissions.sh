#!/bin/bash
# Permission checks as unprivileged users, with the exact errno Linux
# gives: directory write/search/read bits, the sticky bit, chmod/chown/
# chgrp rules, explicit times versus "now", set-group-ID directories, open
# and truncate without write permission, user.* xattrs, and that the
# kernel's name cache does not let a user past a directory it cannot
# search, not even right after a chmod closed it, and execute permission.
#
# With SW_PERM_OPTS (permissions_own.sh) mount B leaves every check to the
# master and itself (-o no_default_permissions): the same outcomes, but
# for opening a FIFO, which the kernel then does without asking anyone.
#
# Users are plain numbers switched to with setpriv(1) (util-linux); nothing
# is added to /etc/passwd. The tree is built as root through one mount
# (A, no caching) and checked through a second one (B, default caching),
# so that the checks on B start with a cold kernel name cache; sizes and
# times are read back through a fresh third one (C).
. "$(dirname "$0")/../lib.sh"
sw_init "permissions${SW_PERM_OPTS:+_own}" --root
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"

umask 022
start_master
start_mount "$SW_TMP/a" "" attr_timeout=0,entry_timeout=0
A=$SW_TMP/a
start_mount "$SW_TMP/b" "" "${SW_PERM_OPTS:-}"
B=$SW_TMP/b
sw_user_python

U1=4001 G1=4001 # "alice"
U2=4002 G2=4002 # "bob"
SUP=4100        # a supplementary group of alice's
OTHER=4200      # a group alice is not in
SGID_GROUP=4300

# as alice (with her supplementary group) and as bob, through mount B
alice() { ufsop $U1 $G1 $SUP "$@"; }
bob() { ufsop $U2 $G2 "" "$@"; }

# ---- the tree, as root through A ----------------------------------------------
install -d -m 0555 -o $U1 -g $G1 "$A/nowrite"
install -d -m 0755 -o $U1 -g $G1 "$A/nosearch"
touch "$A/nosearch/f"
chmod 0666 "$A/nosearch"
install -d -m 0311 -o $U1 -g $G1 "$A/noread"
touch "$A/noread/f"
install -d -m 1777 "$A/sticky"
install -m 0666 -o $U2 -g $G2 /dev/null "$A/sticky/bobs"
install -m 0666 -o $U1 -g $G1 /dev/null "$A/sticky/alices"
install -m 0644 -o $U2 -g $G2 /dev/null "$A/bobs644"
install -m 0666 -o $U2 -g $G2 /dev/null "$A/bobs666"
install -m 0644 -o $U1 -g $G1 /dev/null "$A/alices"
install -d -m 2777 -o 0 -g $SGID_GROUP "$A/sgid"
install -d -m 0700 "$A/private"
touch "$A/private/secret"
chmod 0644 "$A/private/secret"
install -d -m 0777 -o $U1 -g $G1 "$A/alicedir"
install -d -m 0755 -o $U2 -g $G2 "$A/alicedir/bobsub"
install -d -m 0777 "$A/open"
install -d -m 0755 "$A/closing" "$A/closing2"
touch "$A/closing/f" "$A/closing2/f"
printf '#!/bin/sh\nexit 0\n' >"$A/script"
chmod 0744 "$A/script"
mkfifo -m 0600 "$A/fifo"

# ---- directories ------------------------------------------------------------------
log "directory permissions"
expect_errno EACCES alice create "$B/nowrite/x"
expect_errno EACCES alice mkdir "$B/nowrite/d"
expect_errno EACCES alice symlink t "$B/nowrite/l"
expect_errno EACCES alice mknod "$B/nowrite/p" 010644
assert_missing "$A/nowrite/x" "$A/nowrite/d"
expect_errno EACCES alice stat "$B/nosearch/f"
expect_errno EACCES alice open "$B/nosearch/f" r
expect_errno EACCES alice listdir "$B/noread"
expect_ok alice stat "$B/noread/f"
expect_errno EACCES bob listdir "$B/private"
expect_errno EACCES bob stat "$B/private/secret"
expect_errno EACCES bob create "$B/x"
expect_ok alice create "$B/open/by_alice"
assert_stat '%u %g' "$U1 $G1" "$A/open/by_alice" "owner of a file alice created"
expect_errno EPERM alice mknod "$B/open/chr" 020644
# moving a directory to another parent needs write permission on it
expect_errno EACCES alice rename "$B/alicedir/bobsub" "$B/open/bobsub"
expect_ok alice rename "$B/alicedir/bobsub" "$B/alicedir/bobsub2"

# ---- sticky directory ------------------------------------------------------------
log "sticky directory"
expect_errno EPERM alice unlink "$B/sticky/bobs"
expect_errno EPERM alice rename "$B/sticky/bobs" "$B/sticky/mine"
expect_errno EPERM alice rename "$B/sticky/alices" "$B/sticky/bobs"
assert_exists "$A/sticky/bobs" "$A/sticky/alices"
expect_ok alice unlink "$B/sticky/alices"
assert_missing "$A/sticky/alices"

# ---- chmod, chown, chgrp ------------------------------------------------------------
log "owners and modes"
expect_errno EPERM alice chmod "$B/bobs666" 777
assert_stat %a 666 "$A/bobs666" "mode after a refused chmod"
expect_ok alice chmod "$B/alices" 600
assert_stat %a 600 "$A/alices" "chmod by the owner"
expect_errno EPERM alice chown "$B/alices" $U2 -1
expect_errno EPERM alice chown "$B/bobs666" $U1 -1
expect_ok alice chown "$B/alices" $U1 -1
expect_errno EPERM alice chown "$B/alices" -1 $OTHER
expect_ok alice chown "$B/alices" -1 $SUP
assert_stat '%u %g' "$U1 $SUP" "$A/alices" "chgrp to a supplementary group"
expect_ok alice chown "$B/alices" -1 $G1
# set-group-ID for a group one is not in is dropped, silently
expect_ok alice chmod "$B/alices" 2755
assert_stat %a 2755 "$A/alices" "setgid for one's own group"
chgrp $OTHER "$A/alices"
expect_ok alice chmod "$B/alices" 2755
assert_stat %a 755 "$A/alices" "setgid for a group alice is not in"
chgrp $G1 "$A/alices"

# ---- times ------------------------------------------------------------------------
log "times"
expect_errno EPERM alice utime "$B/bobs666" 1000000 1000000
expect_ok alice utime_now "$B/bobs666"
expect_errno EACCES alice utime_now "$B/bobs644"
expect_ok alice utime "$B/alices" 1000000 2000000

# ---- set-group-ID directory -----------------------------------------------------------
log "setgid directory"
expect_ok alice create "$B/sgid/f"
expect_ok alice mkdir "$B/sgid/d"
assert_stat '%u %g' "$U1 $SGID_GROUP" "$A/sgid/f" "file in a setgid dir"
assert_stat '%u %g %a' "$U1 $SGID_GROUP 2755" "$A/sgid/d" "subdir of a setgid dir"
expect_ok alice mkdir "$B/sgid/d/deeper"
assert_stat '%g %a' "$SGID_GROUP 2755" "$A/sgid/d/deeper" "the bit passes on"
expect_ok alice create "$B/open/plain"
assert_stat %g "$G1" "$A/open/plain" "group of a file in a plain dir"

# ---- files ----------------------------------------------------------------------
log "open, truncate, xattr without write permission"
expect_errno EACCES alice open "$B/bobs644" w
expect_errno EACCES alice open "$B/bobs644" rw
expect_errno EACCES alice open "$B/bobs644" rt
expect_ok alice open "$B/bobs644" r
expect_ok alice open "$B/bobs666" w
expect_errno EACCES alice truncate "$B/bobs644" 10
expect_ok alice truncate "$B/bobs666" 10
expect_errno EACCES alice access "$B/bobs644" 2
expect_ok alice access "$B/bobs644" 4
"$PYTHON" -c 'import os,sys; os.setxattr(sys.argv[1], "user.k", b"v")' "$A/bobs644"
expect_errno EACCES alice setxattr "$B/bobs644" user.x v
expect_errno EACCES alice removexattr "$B/bobs644" user.k
expect_errno OK alice getxattr "$B/bobs644" user.k
expect_ok alice setxattr "$B/bobs666" user.x v
expect_errno EPERM alice setxattr "$B/bobs666" trusted.x v
# a file alice may not read
chmod 0600 "$A/bobs644"
expect_errno EACCES alice open "$B/bobs644" r
expect_errno EACCES alice getxattr "$B/bobs644" user.k
# execute permission is the caller's own
expect_errno EACCES alice exec "$B/script"
chmod 0755 "$B/script" # through B: its kernel caches the mode
expect_ok alice exec "$B/script"
# root may do all of it
expect_ok fsop open "$B/bobs644" w
expect_ok fsop chmod "$B/bobs644" 644

# Sizes and times as the master has them: through a fresh mount, since a
# mount that has a regular file cached keeps its own size and mtime.
C=$SW_TMP/c
start_mount "$C"
assert_ne 1000000 "$(stat -c %Y "$C/bobs666")" "mtime after a refused utime"
assert_stat '%X %Y' '1000000 2000000' "$C/alices" "explicit times by the owner"
assert_stat %s 0 "$C/bobs644" "size after a refused truncate"
assert_stat %s 10 "$C/bobs666" "size after truncate"
stop_mount "$C"

# ---- the kernel's name cache ----------------------------------------------------
# It must not open the way past a directory one cannot search: root looks
# the file up through B, then bob tries at once, while the kernel still
# holds the name.
log "name cache"
stat "$B/private/secret" >/dev/null
expect_errno EACCES bob stat "$B/private/secret"
expect_errno EACCES bob open "$B/private/secret" r
# ... nor right after a chmod through the same mount closed the directory
expect_ok bob stat "$B/closing/f"
chmod 0700 "$B/closing"
expect_errno EACCES bob stat "$B/closing/f"
expect_errno EACCES bob stat "$B/closing/nothing"
# ... and once attr_timeout (1 s) has passed after another client did
expect_ok bob stat "$B/closing2/f"
chmod 0700 "$A/closing2"
sleep 1.5
expect_errno EACCES bob stat "$B/closing2/f"

# ---- FIFOs ------------------------------------------------------------------------
# The kernel opens them itself: only it can check.
if [[ -z "${SW_PERM_OPTS:-}" ]]; then
	expect_errno EACCES alice open "$B/fifo" rn
else
	log "FIFO permissions are not checked with $SW_PERM_OPTS (README)"
fi
sw_pass
