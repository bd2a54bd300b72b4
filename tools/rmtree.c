/*
 * rmtree: remove a tree with the fewest system calls, on descriptors only.
 *
 * Work. The unit of work is a directory node (struct rm_node). A worker
 * takes a node from the shared queue, opens it through its parent's
 * descriptor, reads it with getdents64(), unlinks every non-directory at
 * once and queues a child node per subdirectory (a "pass"). A node's
 * `pending` counts its own pass (1 while it is queued or being read) plus
 * its children not yet finished. Whichever worker brings it to zero
 * finishes the node: unlinkat(AT_REMOVEDIR) in the parent, then decrement
 * the parent, and so on upwards (the cascade). Nobody ever waits for
 * anybody's subtree, so there is nothing to deadlock on, and the end state
 * is the same for any number of workers. The queue is LIFO: one worker is
 * a plain depth-first deleter, and N workers each go deep in a different
 * subtree (robocopy /MT, by subtree).
 *
 * Memory. Files are never remembered: they are unlinked as getdents64()
 * returns them. A pass queues at most max_pending subdirectories; if a
 * directory has more, it is read again from the start once those are gone
 * (only entries that failed, kept in the node's failed set, and subtrees
 * not yet seen remain). So memory is bounded by max_pending nodes per
 * level of the paths being worked on, whatever the tree's width.
 *
 * Descriptors. Each node caches its directory's descriptor while it has
 * pending children, because they need it to be opened and removed. The
 * engine keeps at most max_fds of them open (64 per worker by default): a
 * descriptor is pinned while a worker uses it, and an unpinned one sits in
 * an LRU list from which the oldest is closed when a slot is needed. The
 * oldest is the shallowest directory of a deep path, which is needed again
 * only last. Before closing, the node's identity (st_dev, st_ino) is
 * recorded; a directory is reopened
 *  - in the cascade, through ".." from its child, which is still open;
 *  - otherwise by name through its nearest open ancestor, one level at a
 *    time with O_NOFOLLOW;
 * and in both cases kept only if fstat() shows the recorded identity, else
 * the subtree is reported (-ESTALE) and left alone: a directory renamed or
 * swapped while its descriptor was closed never leads the deleter outside
 * the tree. So each level deeper than max_fds costs four more system
 * calls (fstat and close at eviction, openat("..") and fstat when going
 * back up), whatever the depth, and no path is ever longer than one name.
 *
 * The identity costs a fstat() only when needed: at eviction; or, with
 * several workers, at open time for directories at least half the
 * per-worker max_fds deep, so that eviction rarely issues a system call
 * under the lock; or for every directory with one_file_system, which
 * compares st_dev with the root's.
 *
 * Permissions. No chmod up front (Bazel's lesson: protected directories are
 * rare). When an unlinkat() fails with EACCES/EPERM, the directory it was
 * issued in gets one fstat() and, if it lacks u+rwx, one fchmod() adding
 * it; when opening a directory fails with EACCES, the parent and then the
 * directory itself (through an O_PATH descriptor and /proc/self/fd) are
 * treated the same way. At most once per directory, under the lock, so
 * that sibling workers see the same outcome.
 *
 * Locking. One mutex per call (eng->lock) protects the queue, the LRU, the
 * descriptor count and the node fields marked "locked". No system call is
 * issued under it, except the rare fstat()/fchmod() pairs above. A node
 * being read is owned by its worker: no child of it is pending during a
 * pass, so nobody else touches it. Callbacks are serialized by
 * eng->report_lock. Counters are per worker and summed at the end.
 *
 * Map: syscall wrappers; names set; reporting; descriptor cache (reserve,
 * evict, pin, reopen); removal of one entry; open, scan, finish (the pass);
 * the cascade; workers; rmtree_remove().
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rmtree.h"

/*
 * getdents64() buffer per worker. 64 KiB holds about 2,000 entries with
 * short names, so reading costs one call per 2,000 unlinks; more buys
 * nothing measurable.
 */
#define RMTREE_BUF (64 * 1024)

/*
 * The least max_fds per worker: each pins up to three descriptors and
 * reserves one (fd_reserve), and the cache needs victims beyond those.
 */
#define RMTREE_MIN_FDS 8

/*
 * Descriptors of the process's RLIMIT_NOFILE left to the caller (stdio,
 * its own files) when max_fds per worker would not fit under it.
 */
#define RMTREE_SPARE_FDS 32

/* Workers beyond this buy nothing but memory (64 KiB each). */
#define RMTREE_MAX_JOBS 256

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Names of entries that could not be removed, skipped by a second pass. */
struct name_set {
	char **slot; /* open addressing, NULL = empty */
	size_t cap;  /* power of two */
	size_t n;
};

/* A doubly linked list, circular through its head. */
struct lru_link {
	struct lru_link *prev;
	struct lru_link *next;
};

/*
 * A directory to empty and remove. Immutable after creation: parent, depth,
 * name. Owned by the worker during a pass (see above): more. Everything
 * else: locked.
 */
struct rm_node {
	struct rm_node *parent; /* holds a pending count for us; NULL: top */
	struct rm_node *next;	/* in the queue or a pass's list of children */
	struct lru_link lru;	/* in eng->lru iff fd >= 0 && !users */
	struct name_set failed_names; /* entries left behind */
	dev_t dev;		      /* identity, when have_id */
	ino_t ino;
	int fd;		  /* cached descriptor or -1 */
	unsigned users;	  /* pins on fd */
	unsigned pending; /* own pass + unfinished children */
	unsigned depth;	  /* root: 0 */
	int err;	  /* a reopen failed: children give up */
	bool have_id;	  /* dev and ino are valid */
	bool failed;	  /* something below remains: do not rmdir */
	bool gone;	  /* vanished (ENOENT): nothing to do below */
	bool more;	  /* subdirectories were left for another pass */
	bool rescan;	  /* the next pass is a second one */
	bool reported;	  /* err was reported */
	bool chmod_tried; /* the one permission fix was attempted */
	bool chmod_ok;	  /* ... and it changed the mode */
	char name[];	  /* in parent; "" for the top */
};

struct rm_engine {
	pthread_mutex_t lock;
	pthread_cond_t cond;	     /* queue not empty, or done */
	struct rm_node *queue;	     /* LIFO; locked */
	struct lru_link lru;	     /* list head, oldest first; locked */
	unsigned open_fds;	     /* open or being opened; locked */
	unsigned max_open;	     /* high-water mark; locked */
	bool done;		     /* the top's pending reached 0; locked */
	pthread_mutex_t report_lock; /* serializes callbacks, first_err */
	int first_err;		     /* report_lock */
	unsigned max_fds;	     /* all workers together */
	unsigned max_pending;	     /* subdirectories per pass */
	unsigned id_depth;	     /* fstat at open from this depth on */
	dev_t root_dev; /* one_file_system; set before any child opens */
	const struct rmtree_opts *opts;
	const struct rmtree_sys *sys;
	struct rm_node *top; /* the root's parent directory */
	const char *display; /* the root as given, trailing '/' cut */
};

struct rm_worker {
	struct rm_engine *eng;
	struct rmtree_stats st; /* summed after the join */
	char *buf;		/* RMTREE_BUF bytes for getdents64 */
	pthread_t thread;
};

/* What one pass found. */
struct pass {
	struct rm_node *kids; /* subdirectories to queue */
	unsigned nkids;
	bool failed; /* an entry of this directory remains */
	bool more;   /* subdirectories beyond max_pending */
};

static void complete(struct rm_worker *w, struct rm_node *x);

/* ---- system calls ------------------------------------------------- */

static int real_openat(int dirfd, const char *name, int flags)
{
	return openat(dirfd, name, flags);
}

static ssize_t real_getdents64(int fd, void *buf, size_t len)
{
	return syscall(SYS_getdents64, fd, buf, len);
}

static int real_fstat(int fd, struct stat *st)
{
	return fstat(fd, st);
}

const struct rmtree_sys rmtree_sys_default = {
	.openat = real_openat,
	.getdents64 = real_getdents64,
	.unlinkat = unlinkat,
	.fstatat = fstatat,
	.fstat = real_fstat,
	.fchmod = fchmod,
	.fchmodat = fchmodat,
	.close = close,
	.lseek = lseek,
};

static int sys_openat(struct rm_worker *w, int dirfd, const char *name,
		      int flags)
{
	w->st.sys_openat++;
	return w->eng->sys->openat(dirfd, name, flags);
}

static ssize_t sys_getdents64(struct rm_worker *w, int fd)
{
	w->st.sys_getdents64++;
	return w->eng->sys->getdents64(fd, w->buf, RMTREE_BUF);
}

static int sys_unlinkat(struct rm_worker *w, int dirfd, const char *name,
			int flags)
{
	if (flags & AT_REMOVEDIR)
		w->st.sys_rmdir++;
	else
		w->st.sys_unlinkat++;
	return w->eng->sys->unlinkat(dirfd, name, flags);
}

static int sys_fstatat(struct rm_worker *w, int dirfd, const char *name,
		       struct stat *st)
{
	w->st.sys_fstatat++;
	return w->eng->sys->fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW);
}

static int sys_fstat(struct rm_worker *w, int fd, struct stat *st)
{
	w->st.sys_fstat++;
	return w->eng->sys->fstat(fd, st);
}

static int sys_fchmod(struct rm_worker *w, int fd, mode_t mode)
{
	w->st.sys_fchmod++;
	return w->eng->sys->fchmod(fd, mode);
}

/* chmod through an O_PATH descriptor, which fchmod() refuses. */
static int sys_fchmod_opath(struct rm_worker *w, int fd, mode_t mode)
{
	char proc[40];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	w->st.sys_fchmod++;
	return w->eng->sys->fchmodat(AT_FDCWD, proc, mode, 0);
}

static void sys_close(struct rm_worker *w, int fd)
{
	w->st.sys_close++;
	w->eng->sys->close(fd);
}

static int sys_rewind(struct rm_worker *w, int fd)
{
	w->st.sys_lseek++;
	return w->eng->sys->lseek(fd, 0, SEEK_SET) < 0 ? -1 : 0;
}

/* ---- names set ---------------------------------------------------- */

static size_t name_hash(const char *s)
{
	size_t h = 14695981039346656037ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static bool name_set_has(const struct name_set *s, const char *name)
{
	if (!s->n)
		return false;
	for (size_t i = name_hash(name) & (s->cap - 1);;
	     i = (i + 1) & (s->cap - 1)) {
		if (!s->slot[i])
			return false;
		if (!strcmp(s->slot[i], name))
			return true;
	}
}

/* Takes ownership of @name (a malloc'd string) on success. */
static int name_set_put(struct name_set *s, char *name)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		char **slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return -ENOMEM;
		for (size_t j = 0; j < s->cap; j++) {
			if (!s->slot[j])
				continue;
			i = name_hash(s->slot[j]) & (cap - 1);
			while (slot[i])
				i = (i + 1) & (cap - 1);
			slot[i] = s->slot[j];
		}
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	for (i = name_hash(name) & (s->cap - 1); s->slot[i];
	     i = (i + 1) & (s->cap - 1))
		if (!strcmp(s->slot[i], name)) {
			free(name);
			return 0;
		}
	s->slot[i] = name;
	s->n++;
	return 0;
}

static void name_set_clear(struct name_set *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
	memset(s, 0, sizeof(*s));
}

/* ---- nodes and reporting ------------------------------------------ */

static struct rm_node *node_new(struct rm_node *parent, const char *name,
				size_t len)
{
	struct rm_node *x = calloc(1, sizeof(*x) + len + 1);

	if (!x)
		return NULL;
	x->parent = parent;
	x->fd = -1;
	x->pending = 1;
	x->depth = parent && parent->parent ? parent->depth + 1 : 0;
	memcpy(x->name, name, len);
	return x;
}

static void node_free(struct rm_node *x)
{
	name_set_clear(&x->failed_names);
	free(x);
}

/*
 * The display path of entry @name in directory @d (@name NULL: @d
 * itself): the root as given, then "/name" per level. Built only to report;
 * NULL if out of memory. Free with free(3).
 */
static char *node_path(struct rm_engine *eng, const struct rm_node *d,
		       const char *name)
{
	size_t len = strlen(eng->display), pos;
	const struct rm_node *a;
	char *p;

	/* The top's only entry is the root. */
	if (d == eng->top) {
		d = NULL;
		name = NULL;
	}
	for (a = d; a && a->parent != eng->top; a = a->parent)
		len += 1 + strlen(a->name);
	if (name)
		len += 1 + strlen(name);
	p = malloc(len + 1);
	if (!p)
		return NULL;
	pos = len;
	p[pos] = '\0';
	if (name) {
		pos -= strlen(name);
		memcpy(p + pos, name, strlen(name));
		p[--pos] = '/';
	}
	for (a = d; a && a->parent != eng->top; a = a->parent) {
		pos -= strlen(a->name);
		memcpy(p + pos, a->name, strlen(a->name));
		p[--pos] = '/';
	}
	memcpy(p, eng->display, pos);
	return p;
}

static void report_error(struct rm_worker *w, const struct rm_node *d,
			 const char *name, int err)
{
	struct rm_engine *eng = w->eng;
	char *path;

	w->st.errors++;
	pthread_mutex_lock(&eng->report_lock);
	if (!eng->first_err)
		eng->first_err = err;
	if (eng->opts->error) {
		path = node_path(eng, d, name);
		eng->opts->error(eng->opts->arg, path ? path : "?", err);
		free(path);
	}
	pthread_mutex_unlock(&eng->report_lock);
}

static void report_removed(struct rm_worker *w, const struct rm_node *d,
			   const char *name, bool dir)
{
	struct rm_engine *eng = w->eng;
	char *path;

	if (dir)
		w->st.dirs++;
	else
		w->st.files++;
	if (!eng->opts->removed)
		return;
	pthread_mutex_lock(&eng->report_lock);
	path = node_path(eng, d, name);
	eng->opts->removed(eng->opts->arg, path ? path : "?", dir);
	free(path);
	pthread_mutex_unlock(&eng->report_lock);
}

/* Remember that @name in @d remains (locked). */
static void note_failed_locked(struct rm_node *d, const char *name)
{
	char *copy = strdup(name);

	d->failed = true;
	/* Out of memory: a second pass may report it again, nothing worse. */
	if (copy && name_set_put(&d->failed_names, copy) < 0)
		free(copy);
}

static void note_failed(struct rm_engine *eng, struct rm_node *d,
			const char *name)
{
	pthread_mutex_lock(&eng->lock);
	note_failed_locked(d, name);
	pthread_mutex_unlock(&eng->lock);
}

/* ---- descriptor cache --------------------------------------------- */

static struct rm_node *lru_node(struct lru_link *l)
{
	return (struct rm_node *)((char *)l - offsetof(struct rm_node, lru));
}

static void lru_del(struct rm_node *x)
{
	x->lru.prev->next = x->lru.next;
	x->lru.next->prev = x->lru.prev;
	x->lru.prev = x->lru.next = NULL;
}

static void lru_add(struct rm_engine *eng, struct rm_node *x)
{
	x->lru.next = &eng->lru;
	x->lru.prev = eng->lru.prev;
	x->lru.prev->next = &x->lru;
	eng->lru.prev = &x->lru;
}

static void pin_locked(struct rm_node *x)
{
	if (x->users++ == 0 && x->lru.next)
		lru_del(x);
}

static void unpin_locked(struct rm_engine *eng, struct rm_node *x)
{
	if (--x->users == 0 && x->fd >= 0)
		lru_add(eng, x);
}

static void unpin(struct rm_engine *eng, struct rm_node *x)
{
	pthread_mutex_lock(&eng->lock);
	unpin_locked(eng, x);
	pthread_mutex_unlock(&eng->lock);
}

static void fd_unreserve(struct rm_engine *eng)
{
	pthread_mutex_lock(&eng->lock);
	eng->open_fds--;
	pthread_mutex_unlock(&eng->lock);
}

/*
 * Close the least recently used unpinned descriptor (locked; drops the
 * lock around close()). Its node keeps its identity for the reopen: if it
 * has none yet, fstat() it here, under the lock (rare, see the top).
 */
static void evict_locked(struct rm_worker *w, struct rm_node *v)
{
	struct rm_engine *eng = w->eng;
	struct stat st;
	int fd = v->fd;

	lru_del(v);
	if (!v->have_id) {
		if (sys_fstat(w, fd, &st) == 0) {
			v->dev = st.st_dev;
			v->ino = st.st_ino;
			v->have_id = true;
		} else {
			/* Cannot verify a reopen: its children give up. */
			v->err = -errno;
		}
	}
	v->fd = -1;
	w->st.evictions++;
	pthread_mutex_unlock(&eng->lock);
	sys_close(w, fd);
	pthread_mutex_lock(&eng->lock);
	eng->open_fds--;
}

/*
 * Reserve a slot for one descriptor about to be opened, evicting if the
 * cache is full. Give it back with fd_unreserve() if the open fails.
 * Every worker pins at most three descriptors and reserves one, so with
 * RMTREE_MIN_FDS per worker there is always a victim; were there none, the
 * bound would be exceeded rather than risk waiting forever.
 */
static void fd_reserve(struct rm_worker *w)
{
	struct rm_engine *eng = w->eng;

	pthread_mutex_lock(&eng->lock);
	while (eng->open_fds >= eng->max_fds && eng->lru.next != &eng->lru)
		evict_locked(w, lru_node(eng->lru.next));
	if (++eng->open_fds > eng->max_open)
		eng->max_open = eng->open_fds;
	pthread_mutex_unlock(&eng->lock);
}

/*
 * Make @fd (in a reserved slot) @x's descriptor, pinned. If another worker
 * opened @x meanwhile, keep theirs and close @fd. Returns @x's descriptor.
 */
static int install(struct rm_worker *w, struct rm_node *x, int fd)
{
	struct rm_engine *eng = w->eng;
	int extra = -1;

	pthread_mutex_lock(&eng->lock);
	if (x->fd >= 0)
		extra = fd;
	else
		x->fd = fd;
	pin_locked(x);
	fd = x->fd;
	pthread_mutex_unlock(&eng->lock);
	if (extra >= 0) {
		sys_close(w, extra);
		fd_unreserve(eng);
	}
	return fd;
}

/* Close @x's descriptor for good (@x is finished; no pin but ours). */
static void release_fd(struct rm_worker *w, struct rm_node *x)
{
	struct rm_engine *eng = w->eng;
	int fd;

	pthread_mutex_lock(&eng->lock);
	fd = x->fd;
	x->fd = -1;
	x->users = 0;
	if (x->lru.next)
		lru_del(x);
	pthread_mutex_unlock(&eng->lock);
	if (fd >= 0) {
		sys_close(w, fd);
		fd_unreserve(eng);
	}
}

/*
 * Open directory @name relative to @dirfd, and keep it only if it is the
 * directory @x was (dev, ino). Returns the descriptor in a reserved slot,
 * or -errno (-ESTALE: something else is there now).
 */
static int reopen(struct rm_worker *w, int dirfd, const char *name, dev_t dev,
		  ino_t ino)
{
	struct stat st;
	int fd, err;

	fd_reserve(w);
	w->st.reopens++;
	fd = sys_openat(w, dirfd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = errno == ENOTDIR || errno == ELOOP ? -ESTALE : -errno;
		fd_unreserve(w->eng);
		return err;
	}
	if (sys_fstat(w, fd, &st) < 0) {
		err = -errno;
	} else if (st.st_dev != dev || st.st_ino != ino) {
		err = -ESTALE;
	} else {
		return fd;
	}
	sys_close(w, fd);
	fd_unreserve(w->eng);
	return err;
}

/*
 * A reopen of @a failed with @err: record it so that its children give up,
 * and report it once (ENOENT: it went away, which is no failure).
 */
static void reopen_failed(struct rm_worker *w, struct rm_node *a, int err)
{
	struct rm_engine *eng = w->eng;
	bool report;

	pthread_mutex_lock(&eng->lock);
	if (err == -ENOENT) {
		a->gone = true;
		report = false;
	} else {
		if (!a->err)
			a->err = err;
		report = !a->reported;
		a->reported = true;
	}
	pthread_mutex_unlock(&eng->lock);
	if (report)
		report_error(w, a, NULL, err);
}

/* Whether @a can be reopened; if not, the error to give (locked). */
static int node_usable_locked(const struct rm_node *a)
{
	if (a->gone)
		return -ENOENT;
	if (a->err)
		return a->err;
	if (!a->have_id)
		return -ESTALE;
	return 0;
}

/*
 * Pin @x's descriptor, reopening it and closed ancestors by name from the
 * nearest open one, each verified. Returns the descriptor (unpin() it) or
 * -errno (already reported; -ENOENT: @x or an ancestor vanished).
 */
static int node_pin(struct rm_worker *w, struct rm_node *x)
{
	struct rm_engine *eng = w->eng;
	struct rm_node *b, *a;
	dev_t dev;
	ino_t ino;
	int fd, rc;

	pthread_mutex_lock(&eng->lock);
	for (b = x; b->fd < 0; b = b->parent)
		;
	pin_locked(b);
	pthread_mutex_unlock(&eng->lock);
	while (b != x) {
		/* @a: the child of @b on the way to @x. */
		for (a = x; a->parent != b; a = a->parent)
			;
		pthread_mutex_lock(&eng->lock);
		if (a->fd >= 0) {
			pin_locked(a);
			unpin_locked(eng, b);
			pthread_mutex_unlock(&eng->lock);
			b = a;
			continue;
		}
		rc = node_usable_locked(a);
		dev = a->dev;
		ino = a->ino;
		pthread_mutex_unlock(&eng->lock);
		fd = rc < 0 ? rc : reopen(w, b->fd, a->name, dev, ino);
		if (fd >= 0)
			install(w, a, fd);
		unpin(eng, b);
		if (fd < 0) {
			if (rc == 0)
				reopen_failed(w, a, fd);
			return fd;
		}
		b = a;
	}
	return x->fd;
}

/*
 * Pin @x's parent to remove @x from it. If the parent's descriptor was
 * closed and @x's is open, go through "..": one openat() and one fstat()
 * instead of a walk from the nearest open ancestor.
 */
static int pin_parent(struct rm_worker *w, struct rm_node *x)
{
	struct rm_engine *eng = w->eng;
	struct rm_node *p = x->parent;
	dev_t dev;
	ino_t ino;
	int fd, rc;

	pthread_mutex_lock(&eng->lock);
	if (p->fd >= 0) {
		pin_locked(p);
		pthread_mutex_unlock(&eng->lock);
		return p->fd;
	}
	rc = node_usable_locked(p);
	dev = p->dev;
	ino = p->ino;
	fd = x->fd;
	pthread_mutex_unlock(&eng->lock);
	if (rc < 0)
		return rc;
	if (fd >= 0) {
		fd = reopen(w, fd, "..", dev, ino);
		if (fd >= 0)
			return install(w, p, fd);
	}
	return node_pin(w, p);
}

/* ---- removing one entry ------------------------------------------- */

/*
 * The permission fix for directory @d, open as @dfd: if it lacks u+rwx,
 * add it. Once per directory, under the lock, so that every worker sees
 * the same outcome. Returns 0 if the mode changed (retry), else -EPERM.
 */
static int make_writable(struct rm_worker *w, struct rm_node *d, int dfd,
			 bool opath)
{
	struct rm_engine *eng = w->eng;
	struct stat st;

	if (d == eng->top)
		return -EPERM;
	pthread_mutex_lock(&eng->lock);
	if (!d->chmod_tried) {
		d->chmod_tried = true;
		if (sys_fstat(w, dfd, &st) == 0 &&
		    (st.st_mode & 0700) != 0700) {
			mode_t m = (st.st_mode & 07777) | 0700;

			d->chmod_ok = (opath ? sys_fchmod_opath(w, dfd, m) :
					       sys_fchmod(w, dfd, m)) == 0;
		}
	}
	pthread_mutex_unlock(&eng->lock);
	return d->chmod_ok ? 0 : -EPERM;
}

/*
 * unlinkat(@dfd, @name, @flags), @dfd being @d's: on EACCES/EPERM, fix
 * @d's mode once and retry. Returns 0 (also if it had vanished), -EISDIR
 * for a directory when @flags is 0 (not reported), or -errno (reported).
 */
static int remove_entry(struct rm_worker *w, struct rm_node *d, int dfd,
			const char *name, int flags)
{
	for (int tries = 0;; tries++) {
		int err;

		if (sys_unlinkat(w, dfd, name, flags) == 0) {
			report_removed(w, d, name, flags & AT_REMOVEDIR);
			return 0;
		}
		err = errno;
		if (err == ENOENT)
			return 0;
		if (err == EISDIR && !(flags & AT_REMOVEDIR))
			return -EISDIR;
		if ((err == EACCES || err == EPERM) && tries == 0 &&
		    make_writable(w, d, dfd, false) == 0)
			continue;
		report_error(w, d, name, -err);
		return -err;
	}
}

/*
 * Opening directory @x failed with EACCES: make its parent @p searchable
 * (@fixed bit 1), then @x itself readable (bit 2), each at most once.
 * Returns 0 to retry, or -EACCES.
 */
static int grant_access(struct rm_worker *w, struct rm_node *p, int pfd,
			struct rm_node *x, unsigned *fixed)
{
	int fd, rc;

	if (!(*fixed & 1)) {
		*fixed |= 1;
		if (make_writable(w, p, pfd, false) == 0)
			return 0;
	}
	if (*fixed & 2)
		return -EACCES;
	*fixed |= 2;
	/* O_PATH needs no permission on @x; fchmod() refuses it, /proc not. */
	fd_reserve(w);
	fd = sys_openat(w, pfd, x->name,
			O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fd_unreserve(w->eng);
		return -EACCES;
	}
	rc = make_writable(w, x, fd, true);
	sys_close(w, fd);
	fd_unreserve(w->eng);
	return rc == 0 ? 0 : -EACCES;
}

/* ---- a pass over one directory ------------------------------------ */

/*
 * Open @x (child of @p, open as @pfd) and pin it. Returns the descriptor,
 * or -1 when there is nothing to read: it was not a directory (then it was
 * unlinked), it vanished, it is on another device (one_file_system), or it
 * cannot be opened (reported, pass->failed set).
 */
static int open_dir(struct rm_worker *w, struct rm_node *p, int pfd,
		    struct rm_node *x, struct pass *ps)
{
	struct rm_engine *eng = w->eng;
	unsigned fixed = 0;
	struct stat st;
	int fd, err;

	for (;;) {
		fd_reserve(w);
		fd = sys_openat(w, pfd, x->name,
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					O_CLOEXEC);
		if (fd >= 0)
			break;
		err = -errno;
		fd_unreserve(eng);
		if (err == -ENOTDIR || err == -ELOOP) {
			/* A symlink or a file took its place: never follow. */
			err = remove_entry(w, p, pfd, x->name, 0);
			if (err == -EISDIR) /* and back again */
				report_error(w, p, x->name, err);
			if (err < 0)
				ps->failed = true;
			return -1;
		}
		if (err == -ENOENT && (p != eng->top || eng->opts->force)) {
			x->gone = true;
			return -1;
		}
		if (err == -EACCES && grant_access(w, p, pfd, x, &fixed) == 0)
			continue;
		report_error(w, p, x->name, err);
		ps->failed = true;
		return -1;
	}
	if (eng->opts->one_file_system ||
	    (eng->id_depth && x->depth >= eng->id_depth)) {
		if (sys_fstat(w, fd, &st) < 0) {
			err = -errno;
			goto out_close;
		}
		x->dev = st.st_dev;
		x->ino = st.st_ino;
		x->have_id = true;
		if (p == eng->top)
			eng->root_dev = st.st_dev;
		if (eng->opts->one_file_system && st.st_dev != eng->root_dev) {
			err = -EXDEV;
			goto out_close;
		}
	}
	return install(w, x, fd);

out_close:
	sys_close(w, fd);
	fd_unreserve(eng);
	report_error(w, p, x->name, err);
	ps->failed = true;
	return -1;
}

/*
 * Read @x (open as @fd) to the end: unlink non-directories, collect up to
 * max_pending subdirectories into @ps.
 */
static void scan(struct rm_worker *w, struct rm_node *x, int fd,
		 struct pass *ps)
{
	struct rm_engine *eng = w->eng;
	struct stat st;

	for (;;) {
		ssize_t n = sys_getdents64(w, fd);

		if (n <= 0) {
			if (n < 0) {
				report_error(w, x, NULL, -errno);
				ps->failed = true;
			}
			return;
		}
		for (ssize_t off = 0; off < n;) {
			struct linux_dirent64 *d = (void *)(w->buf + off);
			const char *name = d->d_name;
			unsigned char type = d->d_type;
			struct rm_node *kid;
			int rc;

			off += d->d_reclen;
			if (name[0] == '.' &&
			    (!name[1] || (name[1] == '.' && !name[2])))
				continue;
			/* A second pass: no child is pending, no lock needed. */
			if (x->rescan && name_set_has(&x->failed_names, name))
				continue;
			if (type == DT_UNKNOWN) {
				if (sys_fstatat(w, fd, name, &st) < 0) {
					if (errno == ENOENT)
						continue;
					report_error(w, x, name, -errno);
					note_failed(eng, x, name);
					ps->failed = true;
					continue;
				}
				type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
			}
			if (type != DT_DIR) {
				rc = remove_entry(w, x, fd, name, 0);
				if (rc != -EISDIR) {
					if (rc < 0) {
						note_failed(eng, x, name);
						ps->failed = true;
					}
					continue;
				}
			}
			if (ps->nkids >= eng->max_pending) {
				ps->more = true;
				continue;
			}
			kid = node_new(x, name, strlen(name));
			if (!kid) {
				report_error(w, x, name, -ENOMEM);
				note_failed(eng, x, name);
				ps->failed = true;
				continue;
			}
			kid->next = ps->kids;
			ps->kids = kid;
			ps->nkids++;
		}
	}
}

/*
 * End @x's pass: queue the children found and drop the pass's own count.
 * @pinned: we hold a pin on @x's descriptor.
 */
static void finish_pass(struct rm_worker *w, struct rm_node *x, struct pass *ps,
			bool pinned)
{
	struct rm_engine *eng = w->eng;
	bool zero;

	pthread_mutex_lock(&eng->lock);
	if (ps->failed)
		x->failed = true;
	x->more = ps->more;
	x->rescan = false;
	x->pending += ps->nkids;
	while (ps->kids) {
		struct rm_node *kid = ps->kids;

		ps->kids = kid->next;
		kid->next = eng->queue;
		eng->queue = kid;
	}
	if (ps->nkids)
		pthread_cond_broadcast(&eng->cond);
	zero = --x->pending == 0;
	if (zero && x->more) {
		/* Nothing below was pending: go again at once. */
		x->more = false;
		x->rescan = true;
		x->pending = 1;
		x->next = eng->queue;
		eng->queue = x;
		zero = false;
	}
	if (pinned && !zero)
		unpin_locked(eng, x);
	pthread_mutex_unlock(&eng->lock);
	if (zero)
		complete(w, x);
}

/* One pass over @x, taken from the queue. */
static void process(struct rm_worker *w, struct rm_node *x)
{
	struct rm_engine *eng = w->eng;
	struct rm_node *p = x->parent;
	struct pass ps = { 0 };
	int fd, pfd;

	if (x->rescan) {
		fd = node_pin(w, x);
		if (fd >= 0 && sys_rewind(w, fd) < 0) {
			report_error(w, x, NULL, -errno);
			ps.failed = true;
			finish_pass(w, x, &ps, true);
			return;
		}
		if (fd == -ENOENT)
			x->gone = true;
		else if (fd < 0)
			ps.failed = true;
	} else {
		pfd = node_pin(w, p);
		if (pfd >= 0) {
			fd = open_dir(w, p, pfd, x, &ps);
			unpin(eng, p);
		} else {
			/* Already reported for @p. */
			fd = -1;
			if (pfd == -ENOENT)
				x->gone = true;
			else
				ps.failed = true;
		}
	}
	if (fd >= 0)
		scan(w, x, fd, &ps);
	finish_pass(w, x, &ps, fd >= 0);
}

/* ---- the cascade -------------------------------------------------- */

/*
 * @x has nothing pending: remove it from its parent, then count it done
 * there, and go on upwards while that finishes parents too. On entry we
 * hold the only pin on @x's descriptor if it is open.
 */
static void complete(struct rm_worker *w, struct rm_node *x)
{
	struct rm_engine *eng = w->eng;

	while (x->parent) {
		struct rm_node *p = x->parent;
		bool failed = x->failed, zero;
		int pfd = -1;

		if (!x->failed && !x->gone) {
			pfd = pin_parent(w, x);
			release_fd(w, x);
			if (pfd >= 0)
				failed = remove_entry(w, p, pfd, x->name,
						      AT_REMOVEDIR) < 0;
			else if (pfd != -ENOENT)
				failed = true;
		} else {
			release_fd(w, x);
		}
		pthread_mutex_lock(&eng->lock);
		if (failed)
			note_failed_locked(p, x->name);
		zero = --p->pending == 0;
		if (zero && p->more) {
			p->more = false;
			p->rescan = true;
			p->pending = 1;
			p->next = eng->queue;
			eng->queue = p;
			pthread_cond_signal(&eng->cond);
			zero = false;
		}
		/*
		 * The pin passes on to the next round if @p is finished; if we
		 * had none, take one, lest @p's descriptor be evicted while we
		 * go through its "..".
		 */
		if (pfd >= 0 && !zero)
			unpin_locked(eng, p);
		else if (pfd < 0 && zero && p->fd >= 0)
			pin_locked(p);
		pthread_mutex_unlock(&eng->lock);
		node_free(x);
		if (!zero)
			return;
		x = p;
	}
	/* The top: everything is done. */
	pthread_mutex_lock(&eng->lock);
	eng->done = true;
	pthread_cond_broadcast(&eng->cond);
	pthread_mutex_unlock(&eng->lock);
}

/* ---- workers ------------------------------------------------------ */

static void *worker_main(void *arg)
{
	struct rm_worker *w = arg;
	struct rm_engine *eng = w->eng;

	pthread_mutex_lock(&eng->lock);
	for (;;) {
		struct rm_node *x;

		while (!eng->queue && !eng->done)
			pthread_cond_wait(&eng->cond, &eng->lock);
		x = eng->queue;
		if (!x)
			break;
		eng->queue = x->next;
		x->next = NULL;
		pthread_mutex_unlock(&eng->lock);
		process(w, x);
		pthread_mutex_lock(&eng->lock);
	}
	pthread_mutex_unlock(&eng->lock);
	return NULL;
}

uint64_t rmtree_stats_syscalls(const struct rmtree_stats *st)
{
	return st->sys_openat + st->sys_getdents64 + st->sys_unlinkat +
	       st->sys_rmdir + st->sys_fstatat + st->sys_fstat +
	       st->sys_fchmod + st->sys_close + st->sys_lseek;
}

void rmtree_stats_add(struct rmtree_stats *to, const struct rmtree_stats *from)
{
	to->sys_openat += from->sys_openat;
	to->sys_getdents64 += from->sys_getdents64;
	to->sys_unlinkat += from->sys_unlinkat;
	to->sys_rmdir += from->sys_rmdir;
	to->sys_fstatat += from->sys_fstatat;
	to->sys_fstat += from->sys_fstat;
	to->sys_fchmod += from->sys_fchmod;
	to->sys_close += from->sys_close;
	to->sys_lseek += from->sys_lseek;
	to->files += from->files;
	to->dirs += from->dirs;
	to->errors += from->errors;
	to->evictions += from->evictions;
	to->reopens += from->reopens;
	if (from->max_open_fds > to->max_open_fds)
		to->max_open_fds = from->max_open_fds;
}

/* Run the workers: the calling thread plus jobs - 1 threads. */
static void run_workers(struct rm_worker *ws, unsigned jobs)
{
	unsigned started = 1;

	for (unsigned i = 1; i < jobs; i++) {
		/* A thread that cannot start leaves its work to the others. */
		if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]))
			break;
		started++;
	}
	worker_main(&ws[0]);
	for (unsigned i = 1; i < started; i++)
		pthread_join(ws[i].thread, NULL);
}

/*
 * Split @path into the directory holding the root and the root's name.
 * Returns 0, or -EINVAL for "/", ".", ".." (refused like rm), or -ENOENT
 * for "".
 */
static int split_path(const char *path, size_t *len, size_t *base)
{
	size_t n = strlen(path), b;

	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n == 0)
		return -ENOENT;
	if (n == 1 && path[0] == '/')
		return -EINVAL;
	for (b = n; b > 0 && path[b - 1] != '/'; b--)
		;
	if ((n - b == 1 && path[b] == '.') ||
	    (n - b == 2 && path[b] == '.' && path[b + 1] == '.'))
		return -EINVAL;
	*len = n;
	*base = b;
	return 0;
}

static int engine_init(struct rm_engine *eng, const struct rmtree_opts *opts,
		       unsigned jobs)
{
	unsigned per = opts->max_fds ? opts->max_fds : RMTREE_MAX_FDS;
	struct rlimit rl;

	/* Leave RMTREE_SPARE_FDS of the process's limit to the caller. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)per * jobs + RMTREE_SPARE_FDS &&
	    rl.rlim_cur > RMTREE_SPARE_FDS)
		per = (unsigned)((rl.rlim_cur - RMTREE_SPARE_FDS) / jobs);
	if (per < RMTREE_MIN_FDS)
		per = RMTREE_MIN_FDS;
	memset(eng, 0, sizeof(*eng));
	eng->opts = opts;
	eng->sys = opts->sys ? opts->sys : &rmtree_sys_default;
	eng->max_fds = per * jobs;
	eng->max_pending = opts->max_pending ? opts->max_pending :
					       RMTREE_MAX_PENDING;
	/* One worker may fstat under the lock: nobody waits for it. */
	eng->id_depth = jobs > 1 ? per / 2 : 0;
	eng->lru.next = eng->lru.prev = &eng->lru;
	if (pthread_mutex_init(&eng->lock, NULL))
		return -ENOMEM;
	if (pthread_mutex_init(&eng->report_lock, NULL))
		goto out_lock;
	if (pthread_cond_init(&eng->cond, NULL))
		goto out_report_lock;
	return 0;

out_report_lock:
	pthread_mutex_destroy(&eng->report_lock);
out_lock:
	pthread_mutex_destroy(&eng->lock);
	return -ENOMEM;
}

static void engine_destroy(struct rm_engine *eng)
{
	pthread_cond_destroy(&eng->cond);
	pthread_mutex_destroy(&eng->report_lock);
	pthread_mutex_destroy(&eng->lock);
}

/*
 * The directory holding the root into *@fd: @dirfd itself, or opened
 * O_PATH (rm needs no read right on it), also for AT_FDCWD, since a
 * node's descriptor is never negative.
 */
static int open_top(struct rm_worker *w, int dirfd, const char *path,
		    size_t base, int *fd)
{
	char *dir;

	*fd = dirfd;
	if (base == 0 && dirfd >= 0)
		return 0;
	dir = base ? strndup(path, base) : strdup(".");
	if (!dir)
		return -ENOMEM;
	*fd = sys_openat(w, dirfd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	return *fd < 0 ? -errno : 0;
}

int rmtree_remove(int dirfd, const char *path, const struct rmtree_opts *opts,
		  struct rmtree_stats *stats)
{
	static const struct rmtree_opts defaults;
	struct rmtree_stats sum = { 0 };
	struct rm_node *top, *root;
	struct rm_engine eng;
	struct rm_worker *ws;
	size_t len, base;
	unsigned jobs;
	int rc, topfd;

	if (!opts)
		opts = &defaults;
	rc = split_path(path, &len, &base);
	if (rc < 0)
		return rc;
	jobs = opts->jobs ? opts->jobs : 1;
	if (jobs > RMTREE_MAX_JOBS)
		jobs = RMTREE_MAX_JOBS;
	rc = engine_init(&eng, opts, jobs);
	if (rc < 0)
		return rc;
	rc = -ENOMEM;
	ws = calloc(jobs, sizeof(*ws));
	if (!ws)
		goto out_engine;
	for (unsigned i = 0; i < jobs; i++) {
		ws[i].eng = &eng;
		ws[i].buf = malloc(RMTREE_BUF);
		if (!ws[i].buf)
			goto out_workers;
	}
	eng.display = strndup(path, len);
	top = node_new(NULL, "", 0);
	root = node_new(NULL, path + base, len - base);
	if (!eng.display || !top || !root)
		goto out_nodes;
	eng.top = top;
	root->parent = top;

	rc = open_top(&ws[0], dirfd, path, base, &topfd);
	if (rc < 0) {
		if (rc != -ENOENT || !opts->force)
			report_error(&ws[0], top, NULL, rc);
		else
			rc = 0;
		goto out_nodes;
	}
	top->fd = topfd;
	top->users = 1; /* never evicted */
	eng.open_fds = topfd != dirfd;
	eng.max_open = eng.open_fds;
	eng.queue = root;
	root = NULL;

	run_workers(ws, jobs);
	/*
	 * A missing root is the one failure @force forgives (open_dir). A
	 * root left behind without a report (cannot happen) still fails.
	 */
	rc = eng.first_err;
	if (!rc && top->failed)
		rc = -ENOTEMPTY;
	if (topfd != dirfd)
		sys_close(&ws[0], topfd);

out_nodes:
	if (root)
		node_free(root);
	if (top)
		node_free(top);
	free((char *)eng.display);
out_workers:
	for (unsigned i = 0; i < jobs; i++) {
		rmtree_stats_add(&sum, &ws[i].st);
		free(ws[i].buf);
	}
	free(ws);
	sum.max_open_fds = eng.max_open;
	if (stats)
		rmtree_stats_add(stats, &sum);
out_engine:
	engine_destroy(&eng);
	return rc;
}
