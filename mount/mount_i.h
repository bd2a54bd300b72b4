/*
 * Internals of sweepfs-mount shared by its files.
 *
 * Map:
 *   main.c         command line, FUSE session, daemon
 *   ops.c          the FUSE low-level callbacks (only those)
 *   reply.c        ops.c's replies to the kernel; no other file calls
 *                  fuse_reply_*(): the others return results or hand
 *                  them to reply.h from their completions
 *   readdir.c      directory handles, listings for the kernel
 *   dircache.c     cached listings, kept coherent by the master
 *   deleg.c        directories delegated to us: removals answered here
 *   inval.c        telling the kernel what others changed
 *   data.c         file contents, through cspool.c to chunkservers
 *   master_conn.c  the pipelined connection to the master
 *   inode.c        lookup and open counts per inode, attributes
 *   entry.c        attributes as the kernel wants them
 *   cred.c         the caller's credentials, supplementary groups cached
 *   lock.c         file locks (fcntl, flock), held by the master
 */
#ifndef SWEEPFS_MOUNT_MOUNT_I_H
#define SWEEPFS_MOUNT_MOUNT_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "devpoll.h"
#include "inode.h"
#include "master_conn.h"
#include "sweepfs.pb-c.h"

enum rdplus {
	RDPLUS_AUTO,   /* the kernel decides per page */
	RDPLUS_ALWAYS, /* every listing carries attributes */
	RDPLUS_NEVER,
};

struct cspool;
struct data;
struct deleg;
struct dircache;
struct inval;
struct lock_table;
struct ring;

struct mount {
	struct mconn *mc;
	struct cspool *cs;	   /* chunkserver connections */
	struct data *data;	   /* chunk locations, committed sizes */
	struct dircache *dcache;   /* directory listings */
	struct deleg *deleg;	   /* delegated directories (deleg.h) */
	struct inval *inval;	   /* kernel invalidations, queued */
	struct lock_table *locks;  /* blocked lock requests (lock.c) */
	struct devpoll devpoll;	   /* how FUSE requests are read */
	unsigned busy_poll_us;	   /* its polling bound (-o busy_poll) */
	struct ring *ring;	   /* FUSE over io_uring, if -o io_uring */
	uint64_t dircache_entries; /* bound of dcache */
	struct itable inodes;
	uint64_t root_ino;   /* master inode of FUSE_ROOT_ID */
	double attr_timeout; /* seconds the kernel may cache attributes */
	bool writeback;	     /* the kernel's writeback cache (-o) */
	bool own_perms;	     /* no default_permissions: main.c */
	bool io_uring;	     /* -o io_uring: ring.h */
	bool no_epoch; /* the kernel cannot drop all names at once (ops.c) */
	double entry_timeout;	 /* ... and names */
	double negative_timeout; /* ... and the absence of names */
	enum rdplus readdirplus;
	struct fuse_session *se;
	/*
	 * Open directory handles (readdir.c). The kernel sends RELEASEDIR
	 * in the background, and drops one still queued when the file
	 * system is unmounted: those left at exit are freed then.
	 */
	pthread_mutex_t dirs_mu;
	struct dirhandle *dirs;
	/* -o metrics_listen: where, and the counts (mmetrics.h), set
	 * before the connection's receiver thread starts. */
	const char *metrics_listen;
	struct mmetrics *metrics;
};

/*
 * Inode numbers are the master's, except that the exported root is
 * FUSE_ROOT_ID; a subtree export's root never contains the master's
 * inode 1, so the mapping is one-to-one.
 */
static inline uint64_t mount_to_master(const struct mount *m, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? m->root_ino : ino;
}

static inline fuse_ino_t mount_to_fuse(const struct mount *m, uint64_t ino)
{
	return ino == m->root_ino ? FUSE_ROOT_ID : ino;
}

/* A request's context when its completion needs more than the req. */
struct mount_opctx {
	fuse_req_t req;
	uint64_t ino;
	size_t size;
	struct fuse_file_info fi; /* libfuse's is gone once the op returns */
};

/*
 * entry.c: @a as struct stat, and as an entry reply with the timeouts.
 * @fetched: when the master gave them (mono ns), for attributes a cache
 * kept; MOUNT_ATTR_NOW for those of the reply at hand. Regular files'
 * are overlaid with this mount's writes the master may not have had
 * then (data_local_attr()).
 */
#define MOUNT_ATTR_NOW INT64_MAX
void mount_attr_to_stat(const struct mount *m, const Sweepfs__Attr *a,
			int64_t fetched, struct stat *st);
void mount_fill_entry(struct mount *m, uint64_t parent, const Sweepfs__Attr *a,
		      int64_t fetched, struct fuse_entry_param *e);

/*
 * Whether names in directory @dir may be cached by the kernel, and looked
 * up here: always where the kernel checks permissions; with
 * no_default_permissions (main.c) only if everyone may search @dir (all
 * three x bits), by attributes held or not older than attr_timeout.
 * Names in any other directory
 * are then handed to the kernel for no time at all, so that every walk
 * through them comes here, and lookups there go to the master, which
 * checks the caller's search permission.
 */
bool mount_searchable(struct mount *m, uint64_t dir);
/* Whether @mode lets everyone search: all three x bits. */
static inline bool mount_all_search(uint32_t mode)
{
	return (mode & 0111) == 0111;
}
/* How long the kernel may keep a name (or its absence, @negative) in
 * @parent: the configured timeout, or 0 (mount_searchable()). */
double mount_entry_timeout(struct mount *m, uint64_t parent, bool negative);

/* Seconds left of attr_timeout for attributes fetched at @fetched_at. */
double mount_attr_left(const struct mount *m, int64_t fetched_at);

/*
 * The freshest attributes this mount has for @ino: @a (fetched at @at,
 * mono ns) from a listing, unless a later reply (a chmod, a link, a
 * getattr) left newer ones in the inode table; those go into *@a and
 * *@at instead (expired or not: the kernel has them). True when they are
 * not to be handed out as current (as expired at most): the inode
 * table's are stale (changed elsewhere, or by this mount's unlink), or
 * this mount wrote to the file since. *@at stays when they came, which
 * the overlay of this mount's writes needs (data_local_attr()).
 */
bool mount_fresher_attr(struct mount *m, Sweepfs__Attr *a, int64_t *at);

/* Remember the attributes a reply carried (inode.h). */
void mount_cache_attrs(struct mount *m, const Sweepfs__Attr *a,
		       Sweepfs__Attr *const *changed, size_t n);

/*
 * readdir.c: open directories for the kernel. Open and read return 0
 * when under way (the completion answers @req, reply.h), or the -errno
 * the operation answers.
 */
int readdir_open(struct mount *m, fuse_req_t req, uint64_t ino,
		 struct fuse_file_info *fi);
int readdir_read(struct mount *m, fuse_req_t req, size_t size, off_t off,
		 struct fuse_file_info *fi, bool plus);
void readdir_release(struct mount *m, struct fuse_file_info *fi);
/* Free the handles the kernel never released. */
void readdir_release_all(struct mount *m);

/*
 * lock.c: file locks (@ino is the master's). Each returns 0 when the
 * request is under way: its completion answers @req (reply.h) from the
 * receiver thread; a blocking one (@sleep, flock without LOCK_NB) when
 * the master grants it or when the kernel interrupts it. A negative
 * return is the -errno the operation answers; nothing was sent.
 * lock_flush() drops @fi's owner's fcntl locks on @ino (close), or
 * returns 1 when that owner has none (the operation answers 0);
 * lock_release() its flock if fi->flock_release, and with @last (the
 * mount's last handle on @ino) forgets that @ino had fcntl locks.
 */
int lock_table_new(struct lock_table **out);
void lock_table_free(struct lock_table *t); /* after mconn_close() */
int lock_getlk(struct mount *m, fuse_req_t req, uint64_t ino,
	       struct fuse_file_info *fi, struct flock *lock);
int lock_setlk(struct mount *m, fuse_req_t req, uint64_t ino,
	       struct fuse_file_info *fi, struct flock *lock, bool sleep);
int lock_flock(struct mount *m, fuse_req_t req, uint64_t ino,
	       struct fuse_file_info *fi, int op);
int lock_flush(struct mount *m, fuse_req_t req, uint64_t ino,
	       struct fuse_file_info *fi);
void lock_release(struct mount *m, uint64_t ino,
		  const struct fuse_file_info *fi, bool last);

/* The FUSE operations table (ops.c). */
extern const struct fuse_lowlevel_ops sw_mount_ops;

/*
 * Fill @c with the credentials of @req's caller; @groups (room for @cap)
 * receives the supplementary groups, which @c then points to. Groups are
 * cached per process for a second: reading them costs a /proc read.
 */
void cred_fill(fuse_req_t req, Sweepfs__Cred *c, uint32_t *groups, size_t cap);

#define CRED_GROUPS_MAX 256

/* A caller's credentials as requests carry them, with room for its
 * supplementary groups. */
struct caller {
	Sweepfs__Cred cred;
	uint32_t groups[CRED_GROUPS_MAX];
};

/* cred_fill() into @c; returns &@c->cred. */
static inline Sweepfs__Cred *caller_cred(fuse_req_t req, struct caller *c)
{
	cred_fill(req, &c->cred, c->groups, CRED_GROUPS_MAX);
	return &c->cred;
}

#endif
