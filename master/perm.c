/*
 * Linux's permission rules (perm.h): generic_permission() and
 * check_sticky() over the credentials a request carries.
 */
#include <errno.h>
#include <fcntl.h>

#include "frame.h"
#include "perm.h"

bool cred_in_group(const struct cred *c, uint32_t gid)
{
	if (c->gid == gid)
		return true;
	for (size_t i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

int perm_check(const struct cred *c, const struct node *n, int mask)
{
	unsigned mode = n->mode;
	unsigned granted;

	if (c->uid == 0) {
		if (!(mask & PERM_X) || S_ISDIR(mode) || (mode & 0111))
			return 0;
		return -EACCES;
	}
	if (c->uid == n->uid)
		granted = (mode >> 6) & 7;
	else if (cred_in_group(c, n->gid))
		granted = (mode >> 3) & 7;
	else
		granted = mode & 7;
	return ((unsigned)mask & ~granted) ? -EACCES : 0;
}

int perm_sticky(const struct cred *c, const struct node *dir,
		const struct node *victim)
{
	if (!(dir->mode & S_ISVTX) || c->uid == 0)
		return 0;
	if (c->uid == dir->uid || c->uid == victim->uid)
		return 0;
	return -EPERM;
}

int perm_open_mask(uint32_t flags)
{
	int mask;

	switch (flags & O_ACCMODE) {
	case O_WRONLY:
		mask = PERM_W;
		break;
	case O_RDWR:
		mask = PERM_R | PERM_W;
		break;
	default:
		mask = PERM_R;
	}
	if (flags & O_TRUNC)
		mask |= PERM_W;
	/* An execve(): the kernel checked only that some x bit is set. */
	if (flags & SW_O_EXEC)
		mask |= PERM_X;
	return mask;
}
