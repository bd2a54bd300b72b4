#!/bin/bash
# package: the Debian packages, built and run.
#
#  1. dpkg-buildpackage -b -us -uc builds sweepfs-master,
#     sweepfs-chunkserver and sweepfs-client from a copy of the tree (the
#     files git tracks, as they are in the work tree), in a directory of
#     its own: nothing of the test build is used.
#  2. dpkg-deb -c: each package holds its programs, configuration
#     (conffiles), units, man pages and completion where Debian wants them,
#     and nothing of the others; the daemons' packages have the
#     maintainer scripts that make the sweepfs user and data directories.
#  3. The data survives an upgrade and a remove and goes only on purge:
#     the packages' postrm run in a mount namespace of their own, with a
#     tmpfs on /var/lib.
#  4. dpkg -x into a scratch root, and a smoke test on what was unpacked
#     only: the installed master (with the installed master.cfg and
#     exports.cfg), chunkserver (chunkserver.cfg) and sweepfs-mount, the
#     installed sweepfs tool and mount.sweepfs: create, write, read back,
#     rm -rf, rmr, fsck.
#
# Skipped (77) without dpkg-buildpackage, debhelper or the build
# dependencies (scripts/setup.sh BUILD -Dtests=enabled installs them).

. "$(dirname "$0")/../lib.sh"
sw_init package --root
command -v dpkg-buildpackage >/dev/null || skip "dpkg-buildpackage (dpkg-dev) is not installed"
command -v dh >/dev/null || skip "debhelper is not installed"
TOP=$(cd "$SW_SRC/../.." && pwd)
(cd "$TOP" && dpkg-checkbuilddeps) 2>"$SW_TMP/deps.err" ||
	skip "build dependencies missing: $(cat "$SW_TMP/deps.err")"

# ---- 1. build ---------------------------------------------------------------

log "dpkg-buildpackage -b -us -uc"
mkdir "$SW_TMP/pkg" "$SW_TMP/pkg/src"
if git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$TOP" ls-files -z | (cd "$TOP" && tar --null -T - -cf -) |
		tar -xf - -C "$SW_TMP/pkg/src"
else
	tar -C "$TOP" --exclude='./build*' --exclude=./.git -cf - . |
		tar -xf - -C "$SW_TMP/pkg/src"
fi
(cd "$SW_TMP/pkg/src" &&
	DEB_BUILD_OPTIONS="parallel=2 nocheck noddebs" \
		dpkg-buildpackage -b -us -uc) >"$SW_TMP/pkg/build.log" 2>&1 || {
	tail -n 40 "$SW_TMP/pkg/build.log" >&2
	fail "dpkg-buildpackage failed"
}
ver=$(dpkg-parsechangelog -l "$TOP/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
deb() { echo "$SW_TMP/pkg/$1_${ver}_$arch.deb"; }
for p in sweepfs-master sweepfs-chunkserver sweepfs-client; do
	[[ -f "$(deb $p)" ]] || fail "no $(basename "$(deb $p)")"
done
log "built $(cd "$SW_TMP/pkg" && ls ./*.deb | tr '\n' ' ')"

# ---- 2. contents ------------------------------------------------------------

# contains PACKAGE PATH...: dpkg-deb -c lists each PATH.
contains() {
	local p=$1 f
	shift
	dpkg-deb -c "$(deb "$p")" | awk '{ print $6 }' | sed 's|^\./|/|' >"$SW_TMP/$p.files"
	for f in "$@"; do
		grep -qxF "$f" "$SW_TMP/$p.files" || fail "$p lacks $f"
	done
}
contains sweepfs-master /usr/sbin/sweepfs-master /etc/sweepfs/master.cfg \
	/etc/sweepfs/exports.cfg /lib/systemd/system/sweepfs-master.service \
	/usr/share/man/man8/sweepfs-master.8.gz \
	/usr/share/man/man5/sweepfs-exports.cfg.5.gz \
	/usr/share/doc/sweepfs-master/README.Debian
contains sweepfs-chunkserver /usr/sbin/sweepfs-chunkserver \
	/etc/sweepfs/chunkserver.cfg /lib/systemd/system/sweepfs-chunkserver@.service \
	/usr/share/man/man8/sweepfs-chunkserver.8.gz
contains sweepfs-client /usr/bin/sweepfs /usr/bin/sweepfs-mount \
	/usr/sbin/mount.sweepfs /usr/share/man/man1/sweepfs.1.gz \
	/usr/share/man/man1/sweepfs-rmr.1.gz /usr/share/man/man8/mount.sweepfs.8.gz \
	/usr/share/bash-completion/completions/sweepfs \
	/usr/share/sweepfs/go-removeall/main.go \
	/usr/share/doc/sweepfs-client/examples/mnt-sweepfs.mount
# Each program in one package only.
grep -q sweepfs-master "$SW_TMP/sweepfs-client.files" && fail "the client package holds the master"
grep -q 'sbin/sweepfs-chunkserver' "$SW_TMP/sweepfs-master.files" && fail "the master package holds the chunkserver"
for p in sweepfs-master sweepfs-chunkserver; do
	dpkg-deb --ctrl-tarfile "$(deb $p)" | tar -xf - -C "$SW_TMP" ./postinst ./postrm ./conffiles
	mv "$SW_TMP/postinst" "$SW_TMP/$p.postinst"
	mv "$SW_TMP/postrm" "$SW_TMP/$p.postrm"
	mv "$SW_TMP/conffiles" "$SW_TMP/$p.conffiles"
	grep -q 'adduser --system --group' "$SW_TMP/$p.postinst" || fail "$p makes no user"
	grep -q 'install -d -o sweepfs -g sweepfs' "$SW_TMP/$p.postinst" ||
		fail "$p makes no data directory"
done
grep -qx /etc/sweepfs/master.cfg "$SW_TMP/sweepfs-master.conffiles" &&
	grep -qx /etc/sweepfs/exports.cfg "$SW_TMP/sweepfs-master.conffiles" ||
	fail "the master's configuration is not conffiles: $(cat "$SW_TMP/sweepfs-master.conffiles")"
dpkg-deb -f "$(deb sweepfs-client)" Depends | grep -q fuse3 || fail "the client does not depend on fuse3"
log "contents and maintainer scripts as expected"

# ---- 3. data kept on remove, gone on purge ----------------------------------

if command -v unshare >/dev/null; then
	# In a mount namespace of its own with a tmpfs on /var/lib: the real
	# /var/lib is never touched. Its copies of sweepfs mounts (other
	# scenarios') go first: they would keep those alive after their
	# unmount (swcluster.py, in_netns()).
	unshare --mount --propagation private bash -c '
		set -e
		grep " - fuse.sweepfs " /proc/self/mountinfo | cut -d" " -f5 |
			while read -r m; do umount -l "$(printf "%b" "$m")" || true; done
		mount -t tmpfs tmpfs /var/lib
		for p in master chunkserver; do
			dir=/var/lib/sweepfs/$p
			[ $p = chunkserver ] && dir=/var/lib/sweepfs/chunks
			mkdir -p $dir/sub && echo data >$dir/sub/file
			for action in upgrade remove; do
				sh "$1/sweepfs-$p.postrm" $action 0.1.0
				[ -f $dir/sub/file ] || { echo "postrm $action deleted $dir" >&2; exit 1; }
			done
			sh "$1/sweepfs-$p.postrm" purge
			[ ! -e $dir ] || { echo "postrm purge left $dir" >&2; exit 1; }
		done' postrm "$SW_TMP" >"$SW_TMP/postrm.log" 2>&1 ||
		fail "the maintainer scripts lose or keep data: $(grep -v 'deb-systemd\|systemctl' "$SW_TMP/postrm.log")"
	log "upgrade and remove keep the data, purge deletes it"
fi

# ---- 4. the unpacked programs, running -----------------------------------

R=$SW_TMP/root
for p in sweepfs-master sweepfs-chunkserver sweepfs-client; do
	dpkg -x "$(deb $p)" "$R"
done
for f in "$R/usr/sbin/sweepfs-master" "$R/usr/sbin/sweepfs-chunkserver" \
	"$R/usr/bin/sweepfs" "$R/usr/bin/sweepfs-mount" "$R/usr/sbin/mount.sweepfs"; do
	ldd "$f" | grep -q 'not found' && fail "$f: $(ldd "$f" | grep 'not found')"
	readelf -d "$f" | grep -qE 'RPATH|RUNPATH' && fail "$f has an RPATH"
done
# From here on everything runs from the scratch root.
SWEEPFS_BUILD=$R
SW_TOOL_BIN=$R/usr/bin/sweepfs
SW_MOUNT_BIN=$R/usr/bin/sweepfs-mount
log "a cluster from the unpacked packages"
SW_CHUNKSERVERS=0
start_master -c "$R/etc/sweepfs/master.cfg" \
	--set "exports_file=$R/etc/sweepfs/exports.cfg"
start_chunkservers 1 -c "$R/etc/sweepfs/chunkserver.cfg"
[[ "$(readlink "/proc/$SW_MASTER_PID/exe")" == "$R/usr/sbin/sweepfs-master" ]] ||
	fail "the master is not the unpacked one: $(readlink "/proc/$SW_MASTER_PID/exe")"
start_mount
M=$SW_MNT
mkdir -p "$M/a/b"
head -c 3000000 /dev/urandom >"$SW_TMP/data"
cp "$SW_TMP/data" "$M/a/b/file"
for i in $(seq 100); do echo "$i" >"$M/a/f$i"; done
drop_caches
cmp "$SW_TMP/data" "$M/a/b/file" || fail "the file read back differs"
assert_eq 100 "$(ls "$M/a" | grep -c '^f')" "files listed"
rm -rf "$M/a"
assert_missing "$M/a"
mkdir -p "$M/tree/x" && touch "$M/tree/x/y"
"$SW_TOOL_BIN" rmr --wait "$M/tree" || fail "the unpacked sweepfs rmr failed"
assert_missing "$M/tree"
wait_fsck_clean 30 "after the smoke test"
"$SW_TOOL_BIN" status "$M" | grep -q 'chunkserver .* connected' ||
	fail "the unpacked sweepfs status shows no chunkserver"
# The fstab way: mount.sweepfs runs the sweepfs-mount it finds on PATH
# (the unpacked one; it is not beside the helper, which is in sbin).
mkdir "$SW_TMP/fstab"
PATH=$R/usr/bin:$PATH timeout 30 "$R/usr/sbin/mount.sweepfs" \
	"127.0.0.1:$SW_PORT" "$SW_TMP/fstab" -o rw,_netdev ||
	fail "the unpacked mount.sweepfs failed"
adopt_mount "$SW_TMP/fstab"
[[ "$(readlink "/proc/$SW_ADOPTED_PID/exe")" == "$R/usr/bin/sweepfs-mount" ]] ||
	fail "mount.sweepfs ran another sweepfs-mount: $(readlink "/proc/$SW_ADOPTED_PID/exe")"
echo hello >"$SW_TMP/fstab/through-helper"
assert_eq hello "$(cat "$M/through-helper")" "a file written through mount.sweepfs"
stop_adopted "$SW_TMP/fstab" "$SW_ADOPTED_PID"
sw_pass
