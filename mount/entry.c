/*
 * Turning the master's attributes into what the kernel is told, and
 * remembering them (see mount_i.h).
 */
#include <errno.h>
#include <string.h>

#include "data.h"
#include "deleg.h"
#include "mount_i.h"
#include "util.h"

void mount_attr_to_stat(const struct mount *m, const Sweepfs__Attr *a,
			int64_t fetched, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = mount_to_fuse(m, a->ino);
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blksize = 65536;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_atim = sw_ns_to_timespec(a->atime);
	st->st_mtim = sw_ns_to_timespec(a->mtime);
	st->st_ctim = sw_ns_to_timespec(a->ctime);
	if (S_ISREG(a->mode) && m->data) {
		uint64_t size = a->size;
		int64_t mtime = a->mtime;

		/* Writes of ours the master has not heard of yet. */
		if (data_local_attr(m->data, a->ino, fetched, &size, &mtime)) {
			st->st_size = (off_t)size;
			st->st_blocks = (blkcnt_t)((size + 511) / 512);
			st->st_mtim = sw_ns_to_timespec(mtime);
		}
	}
}

bool mount_searchable(struct mount *m, uint64_t dir)
{
	Sweepfs__Attr a;
	int64_t expires;

	if (!m->own_perms)
		return true;
	/* Held: current, since another client's chmod recalls it first.
	 * Otherwise as fresh as the kernel would want them (attr_timeout):
	 * the master's lookup replies bring them. */
	if (!deleg_dir_attr(m->deleg, dir, &a) &&
	    !itable_get_attr(&m->inodes, dir, &a, &expires, NULL))
		return false;
	return S_ISDIR(a.mode) && mount_all_search(a.mode);
}

double mount_entry_timeout(struct mount *m, uint64_t parent, bool negative)
{
	if (!mount_searchable(m, parent))
		return 0;
	return negative ? m->negative_timeout : m->entry_timeout;
}

void mount_fill_entry(struct mount *m, uint64_t parent, const Sweepfs__Attr *a,
		      int64_t fetched, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = mount_to_fuse(m, a->ino);
	mount_attr_to_stat(m, a, fetched, &e->attr);
	e->attr_timeout = m->attr_timeout;
	e->entry_timeout = mount_entry_timeout(m, parent, false);
}

double mount_attr_left(const struct mount *m, int64_t fetched_at)
{
	double left;

	/* 0 is "expired" (dircache.h), not a time: on the monotonic clock
	 * it is the boot, less than attr_timeout ago on a fresh machine. */
	if (fetched_at <= 0)
		return 0;
	left = m->attr_timeout - (double)(sw_mono_ns() - fetched_at) / 1e9;
	return left > 0 ? left : 0;
}

bool mount_fresher_attr(struct mount *m, Sweepfs__Attr *a, int64_t *at)
{
	Sweepfs__Attr t;
	int64_t fetched;

	/* Expired or not: the kernel has them, and must not be handed
	 * older ones (a chown's owner replaced by the listing's). */
	switch (itable_newer_attr(&m->inodes, a->ino, *at, &t, &fetched)) {
	case 1:
		*a = t;
		*at = fetched;
		break;
	case -1:
		return true; /* changed since, the master knows how */
	}
	/* Written here since: as good as expired. */
	return S_ISREG(a->mode) && data_written_after(m->data, a->ino, *at);
}

void mount_cache_attrs(struct mount *m, const Sweepfs__Attr *a,
		       Sweepfs__Attr *const *changed, size_t n)
{
	int64_t expires = sw_mono_ns() + (int64_t)(m->attr_timeout * 1e9);

	if (a) {
		itable_set_attr(&m->inodes, a, expires);
		deleg_note_attr(m->deleg, a);
	}
	for (size_t i = 0; i < n; i++) {
		itable_set_attr(&m->inodes, changed[i], expires);
		deleg_note_attr(m->deleg, changed[i]);
	}
}
