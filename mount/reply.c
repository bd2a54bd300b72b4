/*
 * The mount's one reply point to the kernel (reply.h). Kept apart from
 * ops.c only because completions on other threads need it too; the
 * negative-to-positive errno conversion FUSE asks for happens here and
 * in ops.c, nowhere else.
 */
#include <errno.h>

#include "reply.h"

int reply_status(fuse_req_t req, int rc)
{
	return fuse_reply_err(req, -rc);
}

int reply_data(fuse_req_t req, int rc, const void *buf, size_t n)
{
	if (rc < 0)
		return fuse_reply_err(req, -rc);
	return fuse_reply_buf(req, buf, n);
}

int reply_written(fuse_req_t req, int rc, size_t n)
{
	if (rc < 0)
		return fuse_reply_err(req, -rc);
	return fuse_reply_write(req, n);
}

int reply_lock(fuse_req_t req, int rc, const struct flock *l)
{
	if (rc < 0)
		return fuse_reply_err(req, -rc);
	return fuse_reply_lock(req, l);
}

int reply_opened(fuse_req_t req, int rc, const struct fuse_file_info *fi)
{
	if (rc < 0)
		return fuse_reply_err(req, -rc);
	return fuse_reply_open(req, fi);
}

int reply_entry(fuse_req_t req, uint64_t parent, const Sweepfs__Attr *a)
{
	struct mount *m = fuse_req_userdata(req);
	struct fuse_entry_param e;
	int rc;

	if (!a)
		return fuse_reply_err(req, EIO);
	mount_fill_entry(m, parent, a, MOUNT_ATTR_NOW, &e);
	if (itable_ref(&m->inodes, a->ino, a->handle) < 0)
		return fuse_reply_err(req, ENOMEM);
	rc = fuse_reply_entry(req, &e);
	if (rc < 0)
		itable_forget(&m->inodes, a->ino, 1);
	return rc;
}
