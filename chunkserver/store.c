/*
 * The chunk store: inventory, per-chunk locking, the open-file cache,
 * placement and space, and the operations on chunks.
 *
 * Map:
 *   chunk_get/put        find a chunk and hold it (users), release it
 *   op_begin/end         hold + stripe lock + version check + open file
 *   reserve/install      new files (create, duplicate, import) are built
 *                        under a .tmp name and renamed into place; the id
 *                        is reserved in the map meanwhile so that nothing
 *                        else takes it
 *   the operations       one function each, below
 *
 * Lock order: stripe rwlock -> stripe open mutex -> store lock. The store
 * lock is never held across disk I/O (closing evicted files included).
 *
 * Durability: data is durable after store_sync() (fdatasync). Operations
 * that change names (create, set_version, duplicate, import) are durable
 * when they return: file fdatasync'd, directory fsync'd, because the
 * master records their outcome as soon as it hears of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fsio.h"
#include "log.h"
#include "store_i.h"
#include "util.h"

#define TAG "store"

/* Free space taken off a directory's estimate per new chunk, until the
 * next statvfs says how much the chunks really took. */
#define PLACE_ESTIMATE (4u << 20)

void store_name(char *buf, size_t len, uint64_t id, uint32_t version,
		const char *suffix)
{
	snprintf(buf, len, "%02x/chunk_%016" PRIx64 "_%08" PRIx32 ".swc%s",
		 (unsigned)(id & 0xff), id, version, suffix);
}

void store_relpath(char *buf, size_t len, uint64_t id, uint32_t version)
{
	store_name(buf, len, id, version, "");
}

int store_sync_subdir(struct store_dir *dir, uint64_t id)
{
	char sub[8];

	snprintf(sub, sizeof(sub), "%02x", (unsigned)(id & 0xff));
	return sw_fsync_dirat(dir->fd, sub);
}

static struct stripe *stripe_of(struct store *s, uint64_t id)
{
	return &s->stripes[id % STORE_STRIPES];
}

static void report_log(const struct chunk *c, const struct cf_report *r)
{
	if (r->repaired)
		sw_info(TAG,
			"chunk %016" PRIx64 " v%u: %u checksum slot(s) "
			"completed after an interrupted write",
			c->meta.chunk_id, c->meta.version, r->repaired);
	if (r->torn)
		sw_warn(TAG,
			"chunk %016" PRIx64 " v%u: %u block(s) taken as "
			"written by an interrupted write",
			c->meta.chunk_id, c->meta.version, r->torn);
	if (r->bad_block >= 0)
		sw_err(TAG,
		       "chunk %016" PRIx64 " v%u: block %d failed its "
		       "checksum; chunk marked damaged",
		       c->meta.chunk_id, c->meta.version, r->bad_block);
}

/* ---- the open-file cache ------------------------------------------------ */

static void lru_remove(struct store *s, struct chunk *c)
{
	if (c->lru_prev)
		c->lru_prev->lru_next = c->lru_next;
	else
		s->lru_head = c->lru_next;
	if (c->lru_next)
		c->lru_next->lru_prev = c->lru_prev;
	else
		s->lru_tail = c->lru_prev;
	c->lru_prev = c->lru_next = NULL;
}

static void lru_push(struct store *s, struct chunk *c)
{
	c->lru_prev = NULL;
	c->lru_next = s->lru_head;
	if (s->lru_head)
		s->lru_head->lru_prev = c;
	else
		s->lru_tail = c;
	s->lru_head = c;
}

/*
 * Detach the files of idle chunks over the bound, least recently used
 * first, at most @max of them into @out; the store lock is held. The
 * caller closes them after unlocking. Returns how many.
 */
static size_t evict_locked(struct store *s, struct cf_file **out, size_t max)
{
	size_t n = 0;

	while (s->nopen > s->max_open && s->lru_tail && n < max) {
		struct chunk *c = s->lru_tail;

		lru_remove(s, c);
		out[n++] = c->f;
		c->f = NULL;
		s->nopen--;
	}
	return n;
}

static void close_files(struct cf_file **files, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cf_close(files[i]);
}

/* Hold chunk @id (not a reservation); NULL if there is none. */
static struct chunk *chunk_get(struct store *s, uint64_t id)
{
	struct chunk *c;

	pthread_mutex_lock(&s->lock);
	c = idmap_get(&s->map, id);
	if (c && c->state != CHUNK_READY)
		c = NULL;
	if (c) {
		if (c->users == 0 && c->f)
			lru_remove(s, c);
		c->users++;
	}
	pthread_mutex_unlock(&s->lock);
	return c;
}

static void chunk_put(struct store *s, struct chunk *c)
{
	struct cf_file *close_list[8];
	size_t n = 0;
	bool free_it = false;

	pthread_mutex_lock(&s->lock);
	if (--c->users == 0) {
		if (c->gone) {
			free_it = true;
			if (c->f) {
				close_list[n++] = c->f;
				c->f = NULL;
				s->nopen--;
			}
		} else if (c->f) {
			lru_push(s, c);
		}
	}
	n += evict_locked(s, close_list + n, SW_ARRAY_SIZE(close_list) - n);
	pthread_mutex_unlock(&s->lock);
	close_files(close_list, n);
	if (free_it)
		free(c);
}

/* Open @c's file if the cache has not got it; the stripe is held. */
static int chunk_open_file(struct store *s, struct chunk *c)
{
	struct stripe *st = stripe_of(s, c->meta.chunk_id);
	struct cf_file *f, *close_list[8];
	struct cf_meta m;
	char name[64];
	size_t n;
	int fd, rc = 0;

	pthread_mutex_lock(&st->open);
	if (c->f)
		goto out_unlock;
	store_name(name, sizeof(name), c->meta.chunk_id, c->meta.version, "");
	fd = openat(s->dirs[c->dir].fd, name, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		sw_err(TAG, "cannot open %s/%s: %s", s->dirs[c->dir].path, name,
		       strerror(-rc));
		goto out_unlock;
	}
	rc = cf_load(fd, &m, &f);
	if (rc == 0 && m.chunk_id != c->meta.chunk_id) {
		cf_close(f);
		fd = -1;
		rc = -EUCLEAN;
	}
	if (rc < 0) {
		if (fd >= 0 && rc != -EUCLEAN)
			close(fd);
		sw_err(TAG, "cannot load %s/%s: %s", s->dirs[c->dir].path, name,
		       strerror(-rc));
		goto out_unlock;
	}
	pthread_mutex_lock(&s->lock);
	c->f = f;
	s->nopen++;
	n = evict_locked(s, close_list, SW_ARRAY_SIZE(close_list));
	pthread_mutex_unlock(&s->lock);
	close_files(close_list, n);
out_unlock:
	pthread_mutex_unlock(&st->open);
	return rc;
}

/* ---- holding a chunk for an operation ---------------------------------- */

/*
 * Hold chunk @id, lock its stripe (@excl: exclusively), check that it is
 * at @version and open its file. On success the caller ends with
 * op_end().
 */
static int op_begin(struct store *s, uint64_t id, uint32_t version, bool excl,
		    struct chunk **out)
{
	struct stripe *st = stripe_of(s, id);
	struct chunk *c = chunk_get(s, id);
	int rc;

	if (!c)
		return -ENOENT;
	if (excl)
		pthread_rwlock_wrlock(&st->rw);
	else
		pthread_rwlock_rdlock(&st->rw);
	if (c->gone)
		rc = -ENOENT;
	else if (c->meta.version != version)
		rc = -ESTALE;
	else
		rc = chunk_open_file(s, c);
	if (rc < 0) {
		pthread_rwlock_unlock(&st->rw);
		chunk_put(s, c);
		return rc;
	}
	*out = c;
	return 0;
}

static void op_end(struct store *s, struct chunk *c)
{
	pthread_rwlock_unlock(&stripe_of(s, c->meta.chunk_id)->rw);
	chunk_put(s, c);
}

static void mark_damaged(struct chunk *c, int rc)
{
	if (rc == -EBADMSG)
		__atomic_store_n(&c->damaged, true, __ATOMIC_RELAXED);
}

/* Set @c's length; the stripe is held exclusively. */
static void set_length(struct store *s, struct chunk *c, uint32_t length)
{
	if (length == c->meta.length)
		return;
	pthread_mutex_lock(&s->lock);
	s->dirs[c->dir].bytes += length;
	s->dirs[c->dir].bytes -= c->meta.length;
	c->meta.length = length;
	pthread_mutex_unlock(&s->lock);
}

/* ---- data operations ---------------------------------------------------- */

int store_read(struct store *s, uint64_t id, uint32_t version, uint32_t off,
	       uint32_t size, uint8_t *buf)
{
	struct cf_report r;
	struct chunk *c;
	int rc;

	if (off > SW_CHUNK_SIZE || size > SW_CHUNK_SIZE - off)
		return -EINVAL;
	rc = op_begin(s, id, version, false, &c);
	if (rc < 0)
		return rc;
	cf_report_init(&r);
	rc = cf_read(c->f, &c->meta, off, size, buf, &r);
	mark_damaged(c, rc);
	report_log(c, &r);
	op_end(s, c);
	return rc;
}

int store_write(struct store *s, uint64_t id, uint32_t version, uint32_t off,
		const uint8_t *data, uint32_t size)
{
	struct cf_report r;
	struct chunk *c;
	uint32_t length;
	int rc;

	if (off > SW_CHUNK_SIZE || size > SW_CHUNK_SIZE - off)
		return -EINVAL;
	rc = op_begin(s, id, version, true, &c);
	if (rc < 0)
		return rc;
	cf_report_init(&r);
	rc = cf_write(c->f, &c->meta, off, data, size, &length, &r);
	set_length(s, c, length);
	mark_damaged(c, rc);
	report_log(c, &r);
	op_end(s, c);
	return rc;
}

int store_sync(struct store *s, uint64_t id, uint32_t version)
{
	struct chunk *c;
	int rc = op_begin(s, id, version, false, &c);

	if (rc < 0)
		return rc;
	if (fdatasync(c->f->fd) < 0)
		rc = -errno;
	op_end(s, c);
	return rc;
}

int store_truncate(struct store *s, uint64_t id, uint32_t version,
		   uint32_t length)
{
	struct cf_report r;
	struct chunk *c;
	uint32_t nl;
	int rc;

	if (length > SW_CHUNK_SIZE)
		return -EINVAL;
	rc = op_begin(s, id, version, true, &c);
	if (rc < 0)
		return rc;
	cf_report_init(&r);
	rc = cf_truncate(c->f, &c->meta, length, &nl, &r);
	set_length(s, c, nl);
	mark_damaged(c, rc);
	report_log(c, &r);
	op_end(s, c);
	return rc;
}

/* ---- versions and deletion ---------------------------------------------- */

static int rename_chunk(struct store *s, struct chunk *c, uint32_t version)
{
	struct store_dir *d = &s->dirs[c->dir];
	char from[64], to[64];

	store_name(from, sizeof(from), c->meta.chunk_id, c->meta.version, "");
	store_name(to, sizeof(to), c->meta.chunk_id, version, "");
	if (renameat(d->fd, from, d->fd, to) < 0)
		return -errno;
	return 0;
}

int store_set_version(struct store *s, uint64_t id, uint32_t old_version,
		      uint32_t version, int64_t length)
{
	struct cf_meta nm;
	struct cf_report r;
	struct chunk *c;
	uint32_t nl;
	int rc;

	if (length > (int64_t)SW_CHUNK_SIZE)
		return -EINVAL;
	rc = op_begin(s, id, old_version, true, &c);
	if (rc < 0)
		return rc;
	cf_report_init(&r);
	if (length >= 0) {
		rc = cf_truncate(c->f, &c->meta, (uint32_t)length, &nl, &r);
		set_length(s, c, nl);
		mark_damaged(c, rc);
		report_log(c, &r);
		if (rc < 0)
			goto out_end;
	}
	if (version == old_version)
		goto out_end;
	nm = c->meta;
	nm.version = version;
	rc = cf_put_header(c->f->fd, &nm);
	if (rc == 0 && fdatasync(c->f->fd) < 0)
		rc = -errno;
	if (rc == 0)
		rc = rename_chunk(s, c, version);
	if (rc < 0) {
		/* The name is the truth; put the header back in line. */
		cf_put_header(c->f->fd, &c->meta);
		goto out_end;
	}
	pthread_mutex_lock(&s->lock);
	c->meta.version = version;
	pthread_mutex_unlock(&s->lock);
	rc = store_sync_subdir(&s->dirs[c->dir], id);
out_end:
	op_end(s, c);
	return rc;
}

int store_delete(struct store *s, uint64_t id, uint32_t version)
{
	struct stripe *st = stripe_of(s, id);
	struct chunk *c = chunk_get(s, id);
	struct store_dir *d;
	char name[64];
	int rc = 0;

	if (!c)
		return -ENOENT;
	pthread_rwlock_wrlock(&st->rw);
	if (c->gone) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (c->meta.version > version) {
		rc = -ESTALE;
		goto out_unlock;
	}
	d = &s->dirs[c->dir];
	store_name(name, sizeof(name), id, c->meta.version, "");
	if (unlinkat(d->fd, name, 0) < 0 && errno != ENOENT) {
		rc = -errno;
		goto out_unlock;
	}
	pthread_mutex_lock(&s->lock);
	idmap_del(&s->map, id);
	c->gone = true;
	d->chunks--;
	d->bytes -= c->meta.length;
	pthread_mutex_unlock(&s->lock);
out_unlock:
	pthread_rwlock_unlock(&st->rw);
	chunk_put(s, c);
	return rc;
}

/* ---- new chunk files ------------------------------------------------------ */

/* A new chunk file being built under its .tmp name. */
struct newfile {
	struct chunk *c;   /* the reservation (state CREATING) */
	struct chunk *old; /* an older version to replace, held, or NULL */
	int fd;		   /* the .tmp file */
	char tmp[64];	   /* its name relative to the directory */
};

/* The directory with the most free space over the reserve; lock held. */
static int pick_dir(struct store *s, int prefer)
{
	bool preferred = prefer >= 0 && s->dirs[prefer].avail > s->reserve;
	int best = preferred ? prefer : -1;

	for (size_t i = 0; !preferred && i < s->ndirs; i++) {
		if (s->dirs[i].avail <= s->reserve)
			continue;
		if (best < 0 || s->dirs[i].avail > s->dirs[best].avail)
			best = (int)i;
	}
	if (best < 0)
		return -ENOSPC;
	s->dirs[best].avail -= SW_MIN(s->dirs[best].avail, PLACE_ESTIMATE);
	return best;
}

static void abandon(struct store *s, struct newfile *nf);

/* Create @name ("xx/..."), and its subdirectory xx on first use. */
static int create_file(struct store_dir *d, const char *name)
{
	const int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
	char sub[3] = { name[0], name[1], '\0' };
	int fd = openat(d->fd, name, flags, 0640);

	if (fd < 0 && errno == ENOENT) {
		if (mkdirat(d->fd, sub, 0750) < 0 && errno != EEXIST)
			return -1;
		fd = openat(d->fd, name, flags, 0640);
	}
	return fd;
}

/*
 * Reserve @id for a new file at @version in a directory (@prefer if it
 * has room) and create the .tmp file. With @replace, an existing older
 * version is held to be replaced at install; otherwise any existing
 * version is -EEXIST. On failure nothing is left reserved.
 */
static int reserve(struct store *s, uint64_t id, uint32_t version, int prefer,
		   bool replace, struct newfile *nf)
{
	struct chunk *e, *c = calloc(1, sizeof(*c));
	bool refreshed = false;
	int d, rc = 0;

	if (!c)
		return -ENOMEM;
	nf->c = c;
	nf->old = NULL;
	nf->fd = -1;
retry:
	pthread_mutex_lock(&s->lock);
	e = idmap_get(&s->map, id);
	if (e && (!replace || e->state != CHUNK_READY ||
		  e->meta.version >= version)) {
		rc = -EEXIST;
		goto out_unlock;
	}
	d = pick_dir(s, prefer);
	if (d == -ENOSPC && !refreshed) {
		/* The free space left is an estimate that takes
		 * PLACE_ESTIMATE off per new chunk until the next refresh,
		 * so many small chunks in a row exhaust it long before the
		 * disk fills: ask the filesystems before refusing. */
		pthread_mutex_unlock(&s->lock);
		store_refresh_space(s);
		refreshed = true;
		goto retry;
	}
	if (d < 0) {
		rc = d;
		goto out_unlock;
	}
	if (e) {
		if (e->users == 0 && e->f)
			lru_remove(s, e);
		e->users++;
		nf->old = e;
	} else {
		rc = idmap_put(&s->map, id, c);
		if (rc < 0)
			goto out_unlock;
	}
	c->meta = (struct cf_meta){ .chunk_id = id, .version = version };
	c->dir = (uint16_t)d;
	c->state = CHUNK_CREATING;
out_unlock:
	pthread_mutex_unlock(&s->lock);
	if (rc < 0) {
		free(c);
		return rc;
	}
	store_name(nf->tmp, sizeof(nf->tmp), id, version, ".tmp");
	nf->fd = create_file(&s->dirs[d], nf->tmp);
	if (nf->fd < 0) {
		rc = -errno;
		abandon(s, nf);
	}
	return rc;
}

/* Give up a reservation: remove the .tmp file and free what it held. */
static void abandon(struct store *s, struct newfile *nf)
{
	struct store_dir *d = &s->dirs[nf->c->dir];

	if (nf->fd >= 0) {
		close(nf->fd);
		unlinkat(d->fd, nf->tmp, 0);
	}
	pthread_mutex_lock(&s->lock);
	if (idmap_get(&s->map, nf->c->meta.chunk_id) == nf->c)
		idmap_del(&s->map, nf->c->meta.chunk_id);
	pthread_mutex_unlock(&s->lock);
	if (nf->old)
		chunk_put(s, nf->old);
	free(nf->c);
}

/* Retire the older version @old: the stripe is held exclusively. */
static void retire_old(struct store *s, struct chunk *old)
{
	struct store_dir *d = &s->dirs[old->dir];
	char name[64];

	store_name(name, sizeof(name), old->meta.chunk_id, old->meta.version,
		   "");
	unlinkat(d->fd, name, 0);
}

/*
 * Make the .tmp file of @nf (whose header says @m) the chunk: sync it,
 * rename it into place, sync the directory, publish it in the map.
 * Consumes @nf whatever happens. Returns 0 or -errno.
 */
static int install(struct store *s, struct newfile *nf, const struct cf_meta *m)
{
	struct stripe *st = stripe_of(s, m->chunk_id);
	struct chunk *c = nf->c, *old = nf->old;
	struct store_dir *d = &s->dirs[c->dir];
	char name[64];
	int rc = 0;

	if (fdatasync(nf->fd) < 0) {
		rc = -errno;
		abandon(s, nf);
		return rc;
	}
	if (old)
		pthread_rwlock_wrlock(&st->rw);
	if (old && (old->gone || old->meta.version >= m->version)) {
		rc = -EEXIST;
		goto out_fail;
	}
	store_name(name, sizeof(name), m->chunk_id, m->version, "");
	if (renameat(d->fd, nf->tmp, d->fd, name) < 0) {
		rc = -errno;
		goto out_fail;
	}
	close(nf->fd);
	store_sync_subdir(d, m->chunk_id);
	if (old)
		retire_old(s, old);
	pthread_mutex_lock(&s->lock);
	c->meta = *m;
	c->state = CHUNK_READY;
	d->chunks++;
	d->bytes += m->length;
	if (old) {
		old->gone = true;
		s->dirs[old->dir].chunks--;
		s->dirs[old->dir].bytes -= old->meta.length;
		/* The slot exists (old's): this cannot fail. */
		idmap_put(&s->map, m->chunk_id, c);
	}
	pthread_mutex_unlock(&s->lock);
	if (old) {
		pthread_rwlock_unlock(&st->rw);
		chunk_put(s, old);
	}
	return 0;

out_fail:
	if (old)
		pthread_rwlock_unlock(&st->rw);
	abandon(s, nf);
	return rc;
}

int store_create(struct store *s, uint64_t id, uint32_t version)
{
	struct cf_meta m = { .chunk_id = id, .version = version };
	struct newfile nf;
	int rc = reserve(s, id, version, -1, false, &nf);

	if (rc < 0)
		return rc;
	rc = cf_init(nf.fd, &m);
	if (rc < 0) {
		abandon(s, &nf);
		return rc;
	}
	return install(s, &nf, &m);
}

/* ---- copies ----------------------------------------------------------------- */

static int copy_rw(int src, int dst, uint64_t off, uint64_t len)
{
	size_t bufsize = 1u << 20;
	uint8_t *buf = malloc(bufsize);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	while (len && rc == 0) {
		size_t want = (size_t)SW_MIN(len, bufsize);
		ssize_t n = pread(src, buf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		for (ssize_t done = 0; done < n && rc == 0;) {
			ssize_t w = pwrite(dst, buf + done, (size_t)(n - done),
					   (off_t)(off + (uint64_t)done));

			if (w < 0 && errno != EINTR)
				rc = -errno;
			else if (w > 0)
				done += w;
		}
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	free(buf);
	return rc;
}

/* Copy [@off, @off + @len) in the kernel, or by hand if it cannot. */
static int copy_range(int src, int dst, uint64_t off, uint64_t len)
{
	while (len) {
		loff_t in = (loff_t)off, out = (loff_t)off;
		ssize_t n = copy_file_range(src, &in, dst, &out, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == ENOSYS ||
			      errno == EOPNOTSUPP || errno == EINVAL))
			return copy_rw(src, dst, off, len);
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the source shrank under us */
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/*
 * Make @dst (empty) a copy of the first @size bytes of @src: a reflink if
 * the file system shares extents, else the data extents one by one, so
 * that holes stay holes.
 */
static int copy_file(int src, int dst, uint64_t size)
{
	uint64_t off = 0;
	int rc;

	if (ioctl(dst, FICLONE, src) == 0)
		return 0;
	while (off < size) {
		off_t data = lseek(src, (off_t)off, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0)
			return copy_rw(src, dst, off, size - off);
		hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > size)
			hole = (off_t)size;
		rc = copy_range(src, dst, (uint64_t)data,
				(uint64_t)(hole - data));
		if (rc < 0)
			return rc;
		off = (uint64_t)hole;
	}
	if (ftruncate(dst, (off_t)size) < 0)
		return -errno;
	return 0;
}

int store_duplicate(struct store *s, uint64_t src_id, uint32_t src_version,
		    uint64_t id, uint32_t version)
{
	struct newfile nf;
	struct chunk *src;
	struct cf_meta m;
	struct stat st;
	int rc;

	if (src_id == id)
		return -EINVAL;
	rc = op_begin(s, src_id, src_version, false, &src);
	if (rc < 0)
		return rc;
	rc = reserve(s, id, version, src->dir, false, &nf);
	if (rc < 0)
		goto out_end;
	m = src->meta;
	m.chunk_id = id;
	m.version = version;
	if (fstat(src->f->fd, &st) < 0)
		rc = -errno;
	if (rc == 0)
		rc = copy_file(src->f->fd, nf.fd, (uint64_t)st.st_size);
	if (rc == 0)
		rc = cf_put_header(nf.fd, &m);
	op_end(s, src);
	if (rc < 0) {
		abandon(s, &nf);
		return rc;
	}
	return install(s, &nf, &m);

out_end:
	op_end(s, src);
	return rc;
}

/* Write the non-zero blocks of the @n bytes at @buf (chunk offset @off). */
static int import_piece(struct cf_file *f, struct cf_meta *m, uint32_t off,
			const uint8_t *buf, uint32_t n)
{
	struct cf_report r;
	uint32_t i = 0, start, length;
	int rc = 0;

	cf_report_init(&r);
	while (i < n && rc == 0) {
		while (i < n &&
		       cf_all_zero(buf + i, SW_MIN(SW_BLOCK_SIZE, n - i)))
			i += SW_BLOCK_SIZE;
		start = i;
		while (i < n &&
		       !cf_all_zero(buf + i, SW_MIN(SW_BLOCK_SIZE, n - i)))
			i += SW_BLOCK_SIZE;
		if (i > start) {
			rc = cf_write(f, m, off + start, buf + start,
				      SW_MIN(i, n) - start, &length, &r);
			m->length = length;
		}
	}
	return rc;
}

int store_import(struct store *s, uint64_t id, uint32_t version,
		 store_fetch_fn fetch, void *arg)
{
	struct cf_meta m = { .chunk_id = id, .version = version };
	struct cf_file *f = NULL;
	struct cf_report r;
	struct newfile nf;
	uint32_t off = 0;
	uint8_t *buf;
	int fd, n, rc;

	buf = malloc(SW_IO_MAX);
	if (!buf)
		return -ENOMEM;
	rc = reserve(s, id, version, -1, true, &nf);
	if (rc < 0)
		goto out_free;
	rc = cf_init(nf.fd, &m);
	fd = rc == 0 ? dup(nf.fd) : -1;
	if (rc == 0 && fd < 0)
		rc = -errno;
	if (rc == 0) {
		rc = cf_load(fd, &m, &f);
		if (rc < 0)
			close(fd);
	}
	while (rc == 0) {
		n = fetch(arg, off, buf, SW_IO_MAX);
		if (n < 0 || n > (int)SW_IO_MAX) {
			rc = n < 0 ? n : -EPROTO;
			break;
		}
		rc = import_piece(f, &m, off, buf, (uint32_t)n);
		off += (uint32_t)n;
		if (n < (int)SW_IO_MAX || off >= SW_CHUNK_SIZE)
			break;
	}
	cf_report_init(&r);
	if (rc == 0) {
		uint32_t length;

		rc = cf_truncate(f, &m, off, &length, &r);
		m.length = length;
	}
	cf_close(f);
	if (rc < 0)
		abandon(s, &nf);
	else
		rc = install(s, &nf, &m);
out_free:
	free(buf);
	return rc;
}

/* ---- inventory and space --------------------------------------------------- */

struct inv_ctx {
	struct store_chunk_info *v;
	size_t n;
};

static int inv_add(uint64_t key, void *value, void *arg)
{
	struct inv_ctx *x = arg;
	struct chunk *c = value;

	if (c->state != CHUNK_READY)
		return 0;
	x->v[x->n++] = (struct store_chunk_info){
		.chunk_id = key,
		.version = c->meta.version,
		.length = c->meta.length,
		.damaged = __atomic_load_n(&c->damaged, __ATOMIC_RELAXED),
	};
	return 0;
}

int store_inventory(struct store *s, struct store_chunk_info **out, size_t *n)
{
	struct inv_ctx x = { NULL, 0 };

	pthread_mutex_lock(&s->lock);
	x.v = malloc((idmap_count(&s->map) + 1) * sizeof(*x.v));
	if (x.v)
		idmap_foreach(&s->map, inv_add, &x);
	pthread_mutex_unlock(&s->lock);
	if (!x.v)
		return -ENOMEM;
	*out = x.v;
	*n = x.n;
	return 0;
}

int store_stat(struct store *s, uint64_t id, struct store_chunk_info *out)
{
	struct chunk *c;
	int rc = -ENOENT;

	pthread_mutex_lock(&s->lock);
	c = idmap_get(&s->map, id);
	if (c && c->state == CHUNK_READY) {
		out->chunk_id = id;
		out->version = c->meta.version;
		out->length = c->meta.length;
		out->damaged = __atomic_load_n(&c->damaged, __ATOMIC_RELAXED);
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

size_t store_count(struct store *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = 0;
	for (size_t i = 0; i < s->ndirs; i++)
		n += s->dirs[i].chunks;
	pthread_mutex_unlock(&s->lock);
	return n;
}

unsigned store_open_files(struct store *s)
{
	unsigned n;

	pthread_mutex_lock(&s->lock);
	n = s->nopen;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void store_refresh_space(struct store *s)
{
	for (size_t i = 0; i < s->ndirs; i++) {
		struct statvfs sv;

		if (fstatvfs(s->dirs[i].fd, &sv) < 0) {
			sw_err(TAG, "statvfs %s: %s", s->dirs[i].path,
			       strerror(errno));
			continue;
		}
		pthread_mutex_lock(&s->lock);
		s->dirs[i].total = (uint64_t)sv.f_blocks * sv.f_frsize;
		s->dirs[i].avail = (uint64_t)sv.f_bavail * sv.f_frsize;
		pthread_mutex_unlock(&s->lock);
	}
}

void store_space(struct store *s, uint64_t *total, uint64_t *used,
		 uint64_t *chunk_bytes)
{
	uint64_t t = 0, u = 0, b = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->ndirs; i++) {
		struct store_dir *d = &s->dirs[i];
		bool seen = false;

		b += d->bytes;
		for (size_t j = 0; j < i; j++)
			seen = seen || s->dirs[j].dev == d->dev;
		if (seen)
			continue;
		/* Net of the reserve, which no chunk may take: what the
		 * master places chunks by, and what status and df show. */
		t += d->total - SW_MIN(s->reserve, d->total);
		u += d->total - SW_MIN(d->avail, d->total);
	}
	pthread_mutex_unlock(&s->lock);
	if (total)
		*total = t;
	if (used)
		*used = u;
	if (chunk_bytes)
		*chunk_bytes = b;
}

void store_dir_info(struct store *s, size_t i, struct store_dir_info *out)
{
	const struct store_dir *d = &s->dirs[i];

	pthread_mutex_lock(&s->lock);
	*out = (struct store_dir_info){ .path = d->path,
					.total = d->total,
					.avail = SW_MIN(d->avail, d->total),
					.chunks = d->chunks,
					.bytes = d->bytes };
	pthread_mutex_unlock(&s->lock);
}

/* ---- open and close ------------------------------------------------------- */

static int stripes_init(struct store *s)
{
	pthread_rwlockattr_t attr;

	pthread_rwlockattr_init(&attr);
	/* A stream of readers must not starve a writer. */
	pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (size_t i = 0; i < STORE_STRIPES; i++) {
		pthread_rwlock_init(&s->stripes[i].rw, &attr);
		pthread_mutex_init(&s->stripes[i].open, NULL);
	}
	pthread_rwlockattr_destroy(&attr);
	return 0;
}

static int dirs_open(struct store *s, const struct store_opts *o)
{
	s->dirs = calloc(o->ndirs, sizeof(*s->dirs));
	if (!s->dirs)
		return -ENOMEM;
	for (size_t i = 0; i < o->ndirs; i++) {
		struct store_dir *d = &s->dirs[i];
		struct stat st;

		d->fd = -1;
		s->ndirs++;
		d->path = strdup(o->dirs[i]);
		if (!d->path)
			return -ENOMEM;
		d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d->fd < 0 || fstat(d->fd, &st) < 0) {
			int rc = -errno;

			sw_crit(TAG, "cannot open data directory %s: %s",
				d->path, strerror(-rc));
			return rc;
		}
		d->dev = st.st_dev;
	}
	return 0;
}

static int free_chunk(uint64_t key, void *value, void *arg)
{
	struct chunk *c = value;

	cf_close(c->f);
	free(c);
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	idmap_foreach(&s->map, free_chunk, NULL);
	idmap_release(&s->map);
	for (size_t i = 0; i < s->ndirs; i++) {
		if (s->dirs[i].fd >= 0) {
			if (syncfs(s->dirs[i].fd) < 0)
				sw_err(TAG, "syncfs %s: %s", s->dirs[i].path,
				       strerror(errno));
			close(s->dirs[i].fd);
		}
		free(s->dirs[i].path);
	}
	free(s->dirs);
	for (size_t i = 0; i < STORE_STRIPES; i++) {
		pthread_rwlock_destroy(&s->stripes[i].rw);
		pthread_mutex_destroy(&s->stripes[i].open);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/*
 * Say at start-up which directories can take no new chunk: their
 * filesystem is no bigger than the reserve, or has no more free. Without
 * this, the first sign is a write that fails (ENOSPC) much later.
 */
static void warn_reserve(const struct store *s)
{
	const double mib = 1024.0 * 1024.0;

	for (size_t i = 0; i < s->ndirs; i++) {
		const struct store_dir *d = &s->dirs[i];

		if (d->total <= s->reserve)
			sw_warn(TAG,
				"%s: its filesystem holds %.0f MiB, not more "
				"than reserve = %.0f MiB: no chunk will be "
				"made there (lower reserve, or use a bigger "
				"disk)",
				d->path, (double)d->total / mib,
				(double)s->reserve / mib);
		else if (d->avail <= s->reserve)
			sw_warn(TAG,
				"%s: %.0f MiB free, not more than reserve = "
				"%.0f MiB: no chunk will be made there until "
				"space is freed",
				d->path, (double)d->avail / mib,
				(double)s->reserve / mib);
	}
}

int store_open(const struct store_opts *o, struct store **out)
{
	struct store *s;
	int rc;

	if (o->ndirs == 0 || o->ndirs > UINT16_MAX)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	idmap_init(&s->map);
	stripes_init(s);
	s->max_open = o->max_open ? o->max_open : 1;
	s->reserve = o->reserve;
	rc = dirs_open(s, o);
	if (rc == 0) {
		store_refresh_space(s);
		warn_reserve(s);
		rc = store_scan(s);
	}
	if (rc < 0) {
		store_close(s);
		return rc;
	}
	*out = s;
	return 0;
}
