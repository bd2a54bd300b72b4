/*
 * POSIX permission checks against the credentials a request carries. The
 * rules are Linux's (fs/namei.c generic_permission, check_sticky), which
 * is what programs and conformance suites expect from a local filesystem.
 */
#ifndef SWEEPFS_MASTER_PERM_H
#define SWEEPFS_MASTER_PERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "namespace.h"

/* Who is asking: the kernel's view of the calling process. */
struct cred {
	uint32_t uid;
	uint32_t gid;
	size_t ngroups;
	const uint32_t *groups; /* supplementary groups, not owned */
};

#define PERM_R 4
#define PERM_W 2
#define PERM_X 1

/* Whether @c has @gid as its group or a supplementary group. */
bool cred_in_group(const struct cred *c, uint32_t gid);

static inline bool cred_is_root(const struct cred *c)
{
	return c->uid == 0;
}

/* Whether @c is root or owns @n. */
static inline bool cred_owns(const struct cred *c, const struct node *n)
{
	return c->uid == 0 || c->uid == n->uid;
}

/*
 * May @c access @n for @mask (PERM_* bits)? Root may read and write
 * anything and execute what has an x bit or is a directory. Returns 0 or
 * -EACCES.
 */
int perm_check(const struct cred *c, const struct node *n, int mask);

/* The access an open(2) with @flags (O_ACCMODE, O_TRUNC, SW_O_EXEC) needs:
 * PERM_* bits. */
int perm_open_mask(uint32_t flags);

/*
 * May @c remove or rename @victim out of directory @dir, as far as the
 * sticky bit goes? Returns 0 or -EPERM.
 */
int perm_sticky(const struct cred *c, const struct node *dir,
		const struct node *victim);

#endif
