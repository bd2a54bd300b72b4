/*
 * The start-up scan: build the inventory from the data directories.
 *
 * Each directory is scanned by its own thread (they are usually separate
 * disks), reading only each file's header. The 256 subdirectories xx/
 * are made when a chunk first goes into one, so a missing one is empty. What a scan does with what it
 * finds, per file in <dir>/<xx>/:
 *   chunk_<id>_<version>.swc   a chunk: its header must be valid and name
 *                              the same chunk, else the file goes to
 *                              <dir>/damaged/; a header whose version
 *                              differs from the name's is rewritten (a
 *                              set_version was interrupted before its
 *                              rename, which is its commit)
 *   the same + .tmp            an interrupted create/duplicate/import:
 *                              removed
 *   anything else              left alone, counted as junk
 * Then the directories' findings are merged; of two versions of one chunk
 * the newest stays and the other file is deleted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsio.h"
#include "log.h"
#include "store_i.h"
#include "util.h"

#define TAG "store"

struct found {
	uint64_t id;
	uint32_t version;
	uint32_t length;
};

struct scan_dir {
	struct store *s;
	size_t idx;	 /* index in s->dirs */
	struct found *v; /* chunks found */
	size_t n, cap;
	int rc;
	uint64_t junk, quarantined, leftovers;
	pthread_t thread;
	bool threaded; /* thread was started and must be joined */
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static bool parse_hex(const char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++) {
		int h = hexval(p[i]);

		if (h < 0)
			return false;
		v = v << 4 | (uint64_t)h;
	}
	*out = v;
	return true;
}

/*
 * Parse "chunk_<16 hex>_<8 hex>.swc" with an optional ".tmp". Returns
 * false for any other name.
 */
static bool parse_name(const char *name, uint64_t *id, uint32_t *version,
		       bool *tmp)
{
	size_t len = strlen(name);
	uint64_t v;

	if (len != 35 && len != 39)
		return false;
	if (strncmp(name, "chunk_", 6) || name[22] != '_' ||
	    strncmp(name + 31, ".swc", 4))
		return false;
	if (len == 39 && strcmp(name + 35, ".tmp"))
		return false;
	if (!parse_hex(name + 6, 16, id) || !parse_hex(name + 23, 8, &v))
		return false;
	*version = (uint32_t)v;
	*tmp = len == 39;
	return true;
}

static int found_add(struct scan_dir *sd, const struct found *f)
{
	if (sw_grow(&sd->v, &sd->cap, sd->n + 1, sizeof(*sd->v), 1024) < 0)
		return -ENOMEM;
	sd->v[sd->n++] = *f;
	return 0;
}

static void quarantine(struct scan_dir *sd, int subfd, const char *sub,
		       const char *name, const char *why)
{
	struct store_dir *d = &sd->s->dirs[sd->idx];
	char to[128];

	mkdirat(d->fd, "damaged", 0750);
	snprintf(to, sizeof(to), "damaged/%s-%s", sub, name);
	if (renameat(subfd, name, d->fd, to) < 0) {
		sw_err(TAG, "%s/%s/%s: %s, and it cannot be moved away: %s",
		       d->path, sub, name, why, strerror(errno));
		return;
	}
	sw_warn(TAG, "%s/%s/%s: %s; moved to %s/%s", d->path, sub, name, why,
		d->path, to);
	sd->quarantined++;
}

/* Check one chunk file and add it to the findings. */
static int check_file(struct scan_dir *sd, int subfd, const char *sub,
		      const char *name, uint64_t id, uint32_t version)
{
	struct cf_meta m;
	struct stat st;
	int fd, rc;

	fd = openat(subfd, name, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		sw_err(TAG, "%s/%s/%s: %s", sd->s->dirs[sd->idx].path, sub,
		       name, strerror(errno));
		return 0;
	}
	rc = fstat(fd, &st) < 0 ? -errno : 0;
	if (rc == 0 && st.st_size < (off_t)CF_DATA_OFF)
		rc = -EUCLEAN;
	if (rc == 0)
		rc = cf_read_header(fd, &m);
	if (rc == 0 && m.chunk_id != id)
		rc = -EUCLEAN;
	if (rc == 0 && m.version != version) {
		sw_notice(TAG,
			  "%s/%s/%s: header says version %08" PRIx32
			  "; the name wins",
			  sd->s->dirs[sd->idx].path, sub, name, m.version);
		m.version = version;
		rc = cf_put_header(fd, &m);
	}
	close(fd);
	if (rc == -EUCLEAN) {
		quarantine(sd, subfd, sub, name, "bad chunk header");
		return 0;
	}
	if (rc < 0) {
		sw_err(TAG, "%s/%s/%s: %s", sd->s->dirs[sd->idx].path, sub,
		       name, strerror(-rc));
		return 0;
	}
	return found_add(sd, &(struct found){ id, version, m.length });
}

static int scan_entry(struct scan_dir *sd, int subfd, unsigned subno,
		      const char *sub, const char *name)
{
	uint64_t id;
	uint32_t version;
	bool tmp;

	if (!parse_name(name, &id, &version, &tmp) || (id & 0xff) != subno) {
		sw_info(TAG, "%s/%s/%s: not a chunk file; ignored",
			sd->s->dirs[sd->idx].path, sub, name);
		sd->junk++;
		return 0;
	}
	if (tmp) {
		unlinkat(subfd, name, 0);
		sd->leftovers++;
		return 0;
	}
	return check_file(sd, subfd, sub, name, id, version);
}

static int scan_sub(struct scan_dir *sd, unsigned subno)
{
	struct store_dir *d = &sd->s->dirs[sd->idx];
	struct dirent *de;
	char sub[4];
	DIR *dp;
	int fd, rc = 0;

	snprintf(sub, sizeof(sub), "%02x", subno);
	fd = openat(d->fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno; /* made on first use */
	dp = fdopendir(fd);
	if (!dp) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while (rc == 0 && (de = readdir(dp))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		rc = scan_entry(sd, fd, subno, sub, de->d_name);
	}
	closedir(dp);
	return rc;
}

static void *scan_thread(void *arg)
{
	struct scan_dir *sd = arg;

	for (unsigned i = 0; i < 256 && sd->rc == 0; i++)
		sd->rc = scan_sub(sd, i);
	return NULL;
}

/* Add what @sd found to the map; the older of two versions goes. */
static int merge(struct store *s, struct scan_dir *sd)
{
	for (size_t i = 0; i < sd->n; i++) {
		const struct found *f = &sd->v[i];
		struct chunk *e = idmap_get(&s->map, f->id), *c;
		char name[64];

		if (e && e->meta.version >= f->version) {
			store_name(name, sizeof(name), f->id, f->version, "");
			sw_notice(TAG,
				  "%s/%s: older than version %08" PRIx32
				  " in %s; deleted",
				  s->dirs[sd->idx].path, name, e->meta.version,
				  s->dirs[e->dir].path);
			unlinkat(s->dirs[sd->idx].fd, name, 0);
			continue;
		}
		if (e) {
			store_name(name, sizeof(name), f->id, e->meta.version,
				   "");
			sw_notice(TAG,
				  "%s/%s: older than version %08" PRIx32
				  "; deleted",
				  s->dirs[e->dir].path, name, f->version);
			unlinkat(s->dirs[e->dir].fd, name, 0);
			s->dirs[e->dir].chunks--;
			s->dirs[e->dir].bytes -= e->meta.length;
			c = e;
		} else {
			c = calloc(1, sizeof(*c));
			if (!c || idmap_put(&s->map, f->id, c) < 0) {
				free(c);
				return -ENOMEM;
			}
		}
		c->meta = (struct cf_meta){ f->id, f->version, f->length };
		c->dir = (uint16_t)sd->idx;
		c->state = CHUNK_READY;
		s->dirs[sd->idx].chunks++;
		s->dirs[sd->idx].bytes += f->length;
	}
	return 0;
}

int store_scan(struct store *s)
{
	struct scan_dir *sds = calloc(s->ndirs, sizeof(*sds));
	int rc = 0;

	if (!sds)
		return -ENOMEM;
	for (size_t i = 0; i < s->ndirs; i++) {
		sds[i].s = s;
		sds[i].idx = i;
		sds[i].threaded = !pthread_create(&sds[i].thread, NULL,
						  scan_thread, &sds[i]);
		if (!sds[i].threaded)
			scan_thread(&sds[i]);
	}
	for (size_t i = 0; i < s->ndirs; i++)
		if (sds[i].threaded)
			pthread_join(sds[i].thread, NULL);
	for (size_t i = 0; i < s->ndirs; i++) {
		struct scan_dir *sd = &sds[i];

		if (sd->rc < 0 && rc == 0) {
			rc = sd->rc;
			sw_crit(TAG, "cannot scan %s: %s", s->dirs[i].path,
				strerror(-rc));
		}
		if (rc == 0)
			rc = merge(s, sd);
		sw_notice(TAG,
			  "%s: %zu chunks, %" PRIu64 " other files, %" PRIu64
			  " damaged, %" PRIu64 " leftovers removed",
			  s->dirs[i].path, sd->n, sd->junk, sd->quarantined,
			  sd->leftovers);
		free(sd->v);
	}
	free(sds);
	return rc;
}
