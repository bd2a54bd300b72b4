/*
 * Internals of sweepfs-mount shared by its files.
 *
 * Map:
 *   main.c         command line, FUSE session, daemon
 *   ops.c          the FUSE low-level callbacks (only those)
 *   master_conn.c  the pipelined connection to the master
 *   inode.c        lookup and open counts per inode
 *   cred.c         the caller's credentials, supplementary groups cached
 */
#ifndef SWEEPFS_MOUNT_MOUNT_I_H
#define SWEEPFS_MOUNT_MOUNT_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stdint.h>

#include "inode.h"
#include "master_conn.h"
#include "sweepfs.pb-c.h"

enum rdplus {
	RDPLUS_AUTO,   /* the kernel decides per page */
	RDPLUS_ALWAYS, /* every listing carries attributes */
	RDPLUS_NEVER,
};

struct mount {
	struct mconn *mc;
	struct itable inodes;
	uint64_t root_ino;	 /* master inode of FUSE_ROOT_ID */
	double attr_timeout;	 /* seconds the kernel may cache attributes */
	double entry_timeout;	 /* ... and names */
	double negative_timeout; /* ... and the absence of names */
	enum rdplus readdirplus;
	struct fuse_session *se;
};

/* The FUSE operations table (ops.c). */
extern const struct fuse_lowlevel_ops sw_mount_ops;

/*
 * Fill @c with the credentials of @req's caller; @groups (room for @cap)
 * receives the supplementary groups, which @c then points to. Groups are
 * cached per process for a second: reading them costs a /proc read.
 */
void cred_fill(fuse_req_t req, Sweepfs__Cred *c, uint32_t *groups,
	       size_t cap);

#define CRED_GROUPS_MAX 256

#endif
