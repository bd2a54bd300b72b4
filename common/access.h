/*
 * The one POSIX permission rule of sweepfs: Linux's generic_permission()
 * and check_sticky() (fs/namei.c) over the credentials a request carries,
 * for the master (master/perm.h applies it to its nodes) and for a mount
 * that answers for the master under a delegation (mount/deleg.c applies
 * it to the attributes it holds). A delegation is correct only while both
 * decide alike, so neither has a copy of its own.
 *
 * Everything here is pure: no I/O, no logging, no allocation.
 */
#ifndef SWEEPFS_COMMON_ACCESS_H
#define SWEEPFS_COMMON_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Who is asking: the kernel's view of the calling process. */
struct sw_cred {
	uint32_t uid;
	uint32_t gid;
	size_t ngroups;
	const uint32_t *groups; /* supplementary groups, not owned */
};

/* Access wanted, as mode bits (and as the kernel's MAY_* are). */
#define SW_MAY_READ 4
#define SW_MAY_WRITE 2
#define SW_MAY_EXEC 1

/* Whether @c has @gid as its group or a supplementary group. */
bool sw_cred_in_group(const struct sw_cred *c, uint32_t gid);

/*
 * May @c access a node of @mode (type and permission bits) owned by @uid
 * and @gid for @mask (SW_MAY_* bits)? Only the first class that matches
 * counts (owner, then group, then other), as in Linux. Root may read and
 * write anything and execute what has an x bit or is a directory.
 * Returns 0 or -EACCES.
 */
int sw_access_check(const struct sw_cred *c, uint32_t mode, uint32_t uid,
		    uint32_t gid, int mask);

/*
 * Whether the sticky bit of a directory of @dir_mode owned by @dir_uid
 * lets @c remove or rename any entry of it, whoever owns the entry: the
 * bit is clear, or @c is root or the directory's owner.
 */
bool sw_access_sticky_any(const struct sw_cred *c, uint32_t dir_mode,
			  uint32_t dir_uid);

/*
 * May @c remove or rename an entry owned by @victim_uid out of a
 * directory of @dir_mode owned by @dir_uid, as far as the sticky bit
 * goes? Returns 0 or -EPERM.
 */
int sw_access_sticky(const struct sw_cred *c, uint32_t dir_mode,
		     uint32_t dir_uid, uint32_t victim_uid);

/* The access an open(2) with @flags (O_ACCMODE, O_TRUNC, SW_O_EXEC) needs:
 * SW_MAY_* bits. */
int sw_access_open_mask(uint32_t flags);

#endif
