#!/bin/bash
# mount.sweepfs, called the way mount(8) calls it for
#   mount -t sweepfs 127.0.0.1:PORT:/sub MOUNTPOINT -o defaults,_netdev
# (mount(8) only looks for helpers in /sbin, which a test should not
# touch, so the helper runs directly, through a symlink as it would be
# installed): only the /sub subtree is visible, ".." from the mount root
# does not lead into the rest of the filesystem, fstab-only options are
# dropped and the rest (ro) reach the mount.
. "$(dirname "$0")/../lib.sh"
sw_init mount_helper --root
[[ -x "$SW_HELPER_BIN" ]] || fail "no mount.sweepfs in $SWEEPFS_BUILD/mount"

umask 022
start_master
start_mount
M=$SW_MNT
mkdir -p "$M/sub/inner/deeper" "$M/other"
touch "$M/outside" "$M/sub/file" "$M/sub/inner/x" "$M/other/y"

# The helper's client daemonizes, its stderr goes nowhere: sanitizer
# reports go to files that lib.sh checks.
export ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$SW_TMP/helper.log"
export UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$SW_TMP/helper.log"

# As installed: a symlink in an sbin directory, beside nothing else.
mkdir "$SW_TMP/sbin"
ln -s "$SW_HELPER_BIN" "$SW_TMP/sbin/mount.sweepfs"
H=$SW_TMP/h1
mkdir "$H"

log "mount.sweepfs SPEC DIR -o defaults,_netdev"
# mount(8) runs: /sbin/mount.sweepfs SPEC DIR [-sfnv] [-o OPTIONS]
timeout 30 "$SW_TMP/sbin/mount.sweepfs" "127.0.0.1:$SW_PORT:/sub" "$H" \
	-o rw,defaults,_netdev,nofail,x-systemd.automount,comment=x ||
	fail "mount.sweepfs failed"
is_sweepfs_mount "$H" || fail "no sweepfs mount on $H after mount.sweepfs"
adopt_mount "$H"
assert_eq "sweepfs:127.0.0.1:$SW_PORT:/sub fuse.sweepfs" \
	"$(findmnt -n -M "$H" -o SOURCE,FSTYPE | tr -s ' ')" "findmnt source and type"
opts=$(findmnt -n -M "$H" -o VFS-OPTIONS,FS-OPTIONS)
case "$opts" in
*_netdev* | *defaults* | *x-systemd*) fail "fstab-only options reached the mount: $opts" ;;
esac

log "only the subtree is visible"
assert_eq "file inner" "$(ls "$H" | tr '\n' ' ' | sed 's/ $//')" "ls of the subdir mount's root"
assert_missing "$H/outside" "$H/other" "$H/sub"
assert_exists "$H/inner/deeper" "$H/inner/x"
(cd "$H" && find . | sort) >"$SW_TMP/find.got"
printf '%s\n' . ./file ./inner ./inner/deeper ./inner/x >"$SW_TMP/find.expected"
assert_same_text "$SW_TMP/find.expected" "$SW_TMP/find.got" "find in the subdir mount"
assert_stat %i 1 "$H" "inode of the subdir mount's root (FUSE root)"
assert_eq "$(stat -c %i "$H")" "$(stat -c %i "$H/inner/..")" "inner/.. is the mount root"
assert_eq "$(stat -c %i "$H")" "$(stat -c %i "$H/inner/deeper/../..")" "inner/deeper/../.. is the mount root"
assert_eq "$H" "$(cd "$H/inner/.." && pwd -P)" "cd inner/.. stays in the mount"
assert_eq "$SW_TMP" "$(cd "$H/.." && pwd -P)" "cd .. from the mount root leaves the mount, not into the master's root"
assert_missing "$H/../outside"
assert_eq "$(stat -c %i "$M/sub")" "$(stat -c %i "$M/sub/inner/..")" "the full mount still sees the real parent"

log "changes through the subdir mount land in /sub"
mkdir "$H/made_here"
touch "$H/made_here/f"
assert_exists "$M/sub/made_here/f"
mv "$H/file" "$H/inner/file2"
assert_exists "$M/sub/inner/file2"
# The other mount may hold the old name for a moment (the master's
# invalidation is asynchronous, the kernel's entry timeout is 1 s).
wait_until 5 "the full mount to forget sub/file" test ! -e "$M/sub/file"
stop_adopted "$H" "$SW_ADOPTED_PID"

log "ro and a missing subdirectory"
timeout 30 "$SW_TMP/sbin/mount.sweepfs" "127.0.0.1:$SW_PORT:/sub/inner" "$H" \
	-o ro,_netdev || fail "mount.sweepfs -o ro failed"
adopt_mount "$H"
assert_eq "deeper file2 x" "$(ls "$H" | tr '\n' ' ' | sed 's/ $//')" "ls of a read-only two-level subdir mount"
expect_errno EROFS fsop mkdir "$H/nope"
expect_errno EROFS fsop unlink "$H/x"
findmnt -n -M "$H" -o VFS-OPTIONS | grep -qw ro || fail "the mount is not read-only"
stop_adopted "$H" "$SW_ADOPTED_PID"
if timeout 30 "$SW_TMP/sbin/mount.sweepfs" "127.0.0.1:$SW_PORT:/no/such/dir" "$H" \
	-o defaults 2>"$SW_TMP/missing.err"; then
	adopt_mount "$H"
	fail "mounting a missing subdirectory succeeded"
fi
grep -q 'No such file or directory' "$SW_TMP/missing.err" ||
	fail "no useful message for a missing subdirectory: $(cat "$SW_TMP/missing.err")"
if findmnt -n -M "$H" >/dev/null; then fail "a failed mount left a mount behind"; fi
sw_pass
