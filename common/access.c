/*
 * Linux's permission rules (access.h): generic_permission() and
 * check_sticky() of fs/namei.c. The master and the mount's delegation
 * code both call these; a rule changed here changes for both at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "access.h"
#include "frame.h"

bool sw_cred_in_group(const struct sw_cred *c, uint32_t gid)
{
	if (c->gid == gid)
		return true;
	for (size_t i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

int sw_access_check(const struct sw_cred *c, uint32_t mode, uint32_t uid,
		    uint32_t gid, int mask)
{
	unsigned granted;

	if (c->uid == 0) {
		if (!(mask & SW_MAY_EXEC) || S_ISDIR(mode) || (mode & 0111))
			return 0;
		return -EACCES;
	}
	if (c->uid == uid)
		granted = (mode >> 6) & 7;
	else if (sw_cred_in_group(c, gid))
		granted = (mode >> 3) & 7;
	else
		granted = mode & 7;
	return ((unsigned)mask & ~granted) ? -EACCES : 0;
}

bool sw_access_sticky_any(const struct sw_cred *c, uint32_t dir_mode,
			  uint32_t dir_uid)
{
	return !(dir_mode & S_ISVTX) || c->uid == 0 || c->uid == dir_uid;
}

int sw_access_sticky(const struct sw_cred *c, uint32_t dir_mode,
		     uint32_t dir_uid, uint32_t victim_uid)
{
	if (sw_access_sticky_any(c, dir_mode, dir_uid) || c->uid == victim_uid)
		return 0;
	return -EPERM;
}

int sw_access_open_mask(uint32_t flags)
{
	int mask;

	switch (flags & O_ACCMODE) {
	case O_WRONLY:
		mask = SW_MAY_WRITE;
		break;
	case O_RDWR:
		mask = SW_MAY_READ | SW_MAY_WRITE;
		break;
	default:
		mask = SW_MAY_READ;
	}
	if (flags & O_TRUNC)
		mask |= SW_MAY_WRITE;
	/* An execve(): the kernel checked only that some x bit is set. */
	if (flags & SW_O_EXEC)
		mask |= SW_MAY_EXEC;
	return mask;
}
