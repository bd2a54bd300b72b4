/*
 * POSIX permission checks on the master's nodes against the credentials a
 * request carries. The rule itself is common/access.h, shared with the
 * mount's delegation code so that the two can never decide apart; this
 * header only applies it to a struct node.
 */
#ifndef SWEEPFS_MASTER_PERM_H
#define SWEEPFS_MASTER_PERM_H

#include <stdbool.h>
#include <stdint.h>

#include "access.h"
#include "namespace.h"

#define PERM_R SW_MAY_READ
#define PERM_W SW_MAY_WRITE
#define PERM_X SW_MAY_EXEC

/* Whether @c has @gid as its group or a supplementary group. */
static inline bool cred_in_group(const struct sw_cred *c, uint32_t gid)
{
	return sw_cred_in_group(c, gid);
}

static inline bool cred_is_root(const struct sw_cred *c)
{
	return c->uid == 0;
}

/* Whether @c is root or owns @n. */
static inline bool cred_owns(const struct sw_cred *c, const struct node *n)
{
	return c->uid == 0 || c->uid == n->uid;
}

/*
 * May @c access @n for @mask (PERM_* bits)? sw_access_check() on @n's
 * mode and owners. Returns 0 or -EACCES.
 */
static inline int perm_check(const struct sw_cred *c, const struct node *n,
			     int mask)
{
	return sw_access_check(c, n->mode, n->uid, n->gid, mask);
}

/* The access an open(2) with @flags (O_ACCMODE, O_TRUNC, SW_O_EXEC) needs:
 * PERM_* bits. */
static inline int perm_open_mask(uint32_t flags)
{
	return sw_access_open_mask(flags);
}

/*
 * What an allowed open of @n with @flags by @c lets its session do with
 * the file's data (struct sess_open's access): PERM_W if it is for
 * writing; PERM_R if it is for reading, or @c may read @n all the same
 * (an open for writing only by a caller who could have opened the file
 * for reading too). A writer who may not read gets no way to.
 */
static inline int perm_open_access(const struct sw_cred *c,
				   const struct node *n, uint32_t flags)
{
	int access = perm_open_mask(flags) & (PERM_R | PERM_W);

	if (!(access & PERM_R) && perm_check(c, n, PERM_R) == 0)
		access |= PERM_R;
	return access;
}

/*
 * May @c remove or rename @victim out of directory @dir, as far as the
 * sticky bit goes? Returns 0 or -EPERM.
 */
static inline int perm_sticky(const struct sw_cred *c, const struct node *dir,
			      const struct node *victim)
{
	return sw_access_sticky(c, dir->mode, dir->uid, victim->uid);
}

#endif
