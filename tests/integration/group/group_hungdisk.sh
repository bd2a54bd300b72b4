#!/bin/bash
# A leader whose changelog disk hangs (frozen) while its loop goes on: it
# lets its lease go, another member leads, and the clients' changes go
# on there (tests/integration/group/group_hungdisk.py does the work and
# says how).

. "$(dirname "$0")/../lib.sh"
sw_init group_hungdisk --root
# Whatever the driver could not take down (killed): thawed first (a
# master on a frozen disk cannot even exit), then unmounted and detached.
sw_group_unblock() {
	local i
	for i in 1 2 3; do
		! mountpoint -q "$SW_TMP/m$i" ||
			fsfreeze -u "$SW_TMP/m$i" 2>/dev/null || true
	done
}
sw_group_cleanup() {
	local i
	sw_group_unblock
	for i in 1 2 3; do
		! mountpoint -q "$SW_TMP/m$i" ||
			umount -l "$SW_TMP/m$i" 2>/dev/null || true
		[[ ! -f "$SW_TMP/disk$i.img" ]] ||
			losetup -j "$SW_TMP/disk$i.img" -O NAME -n 2>/dev/null |
			xargs -r -n1 losetup -d 2>/dev/null || true
	done
}
sw_group_driver group_hungdisk.py hungdisk
