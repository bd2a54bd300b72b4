/*
 * The table of inodes the kernel knows (inode.h): lookup and open counts
 * in a hash table under one mutex.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "hash.h"
#include "inode.h"
#include "util.h"

/* Attributes as a reply gave them (the inode number is the entry's). */
struct mattr {
	uint32_t mode, nlink, uid, gid;
	uint64_t rdev, size;
	int64_t atime, mtime, ctime;
};

/*
 * Handles open on an inode with one access mode by one caller: what a
 * reconnecting mount claims (Hello.opens), and the master checks each
 * claim as it would that open. Usually one per open inode.
 */
/* What of an open's flags its claim carries: the access mode, and whether
 * it is execve()'s (which needs x, not r). */
#define OPEN_MODE (O_ACCMODE | SW_O_EXEC)

struct mopen {
	struct mopen *next;
	uint32_t count;
	uint32_t accmode; /* flags & OPEN_MODE */
	uint32_t uid, gid;
	uint32_t ngroups;
	uint32_t groups[];
};

struct minode {
	uint64_t ino;
	uint64_t nlookup;
	uint32_t nopen; /* the counts of opens, added up */
	struct mopen *opens;
	int64_t attr_expires;  /* mono ns; 0: no attributes */
	int64_t attr_fetched;  /* mono ns they were set; 0: none */
	int64_t attr_stale_at; /* mono ns something changed them; 0: no */
	int64_t noxattr_until; /* mono ns: known to have no xattrs until */
	struct mattr attr;
	/* Its handle (Attr.handle), 0 until a reply gives it; the last
	 * one given (a new master key makes new ones). */
	uint64_t handle;
	/* Its attributes changed after the kernel first had them (a chown,
	 * a chmod, a rename's ctime, or attr_stale_at): what a listing cached
	 * before then is older, and must not outlive this entry. */
	bool changed;
	struct minode *next;
};

int itable_init(struct itable *t)
{
	pthread_mutex_init(&t->mu, NULL);
	t->nbuckets = 1024;
	t->count = 0;
	t->changed_gone_at = 0;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	return t->buckets ? 0 : -ENOMEM;
}

void itable_release(struct itable *t)
{
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct minode *n, *next;

		for (n = t->buckets[i]; n; n = next) {
			next = n->next;
			while (n->opens) {
				struct mopen *o = n->opens;

				n->opens = o->next;
				free(o);
			}
			free(n);
		}
	}
	free(t->buckets);
	pthread_mutex_destroy(&t->mu);
}

static struct minode **slot(struct itable *t, uint64_t ino)
{
	struct minode **pp = &t->buckets[sw_hash_u64(ino) & (t->nbuckets - 1)];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

static void grow(struct itable *t)
{
	size_t n = t->nbuckets * 2;
	struct minode **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct minode *e, *next;

		for (e = t->buckets[i]; e; e = next) {
			size_t h = sw_hash_u64(e->ino) & (n - 1);

			next = e->next;
			e->next = b[h];
			b[h] = e;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
}

static struct minode *get(struct itable *t, uint64_t ino)
{
	struct minode **pp = slot(t, ino);

	if (*pp)
		return *pp;
	*pp = calloc(1, sizeof(**pp));
	if (!*pp)
		return NULL;
	(*pp)->ino = ino;
	if (++t->count > t->nbuckets)
		grow(t);
	return *slot(t, ino);
}

static void put(struct itable *t, uint64_t ino)
{
	struct minode **pp = slot(t, ino), *n = *pp;

	if (!n || n->nlookup || n->nopen)
		return;
	/* What it knew goes with it: from now on, attributes listed before
	 * now are suspect for every inode the table does not hold (one
	 * stamp, not a list: forgetting a changed inode is rare, and the
	 * price is a round trip for a stat). */
	if (n->changed || n->attr_stale_at)
		t->changed_gone_at = sw_mono_ns();
	*pp = n->next;
	free(n);
	t->count--;
}

/* Learn @handle as @n's: the master's last word (0 says nothing). A
 * handle is a function of the number under the master's key, and a new
 * key (session.key replaced) makes new ones. mu held. */
static void learn_handle(struct minode *n, uint64_t handle)
{
	if (handle)
		n->handle = handle;
}

int itable_ref(struct itable *t, uint64_t ino, uint64_t handle)
{
	struct minode *n;

	pthread_mutex_lock(&t->mu);
	n = get(t, ino);
	if (n) {
		n->nlookup++;
		learn_handle(n, handle);
	}
	pthread_mutex_unlock(&t->mu);
	return n ? 0 : -ENOMEM;
}

void itable_set_handle(struct itable *t, uint64_t ino, uint64_t handle)
{
	struct minode *n;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	if (n)
		learn_handle(n, handle);
	pthread_mutex_unlock(&t->mu);
}

uint64_t itable_handle(struct itable *t, uint64_t ino)
{
	const struct minode *n;
	uint64_t h = 0;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	if (n)
		h = n->handle;
	pthread_mutex_unlock(&t->mu);
	return h;
}

void itable_forget(struct itable *t, uint64_t ino, uint64_t count)
{
	struct minode *n;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	if (n) {
		n->nlookup = count > n->nlookup ? 0 : n->nlookup - count;
		put(t, ino);
	}
	pthread_mutex_unlock(&t->mu);
}

static bool mopen_is(const struct mopen *o, uint32_t accmode,
		     const Sweepfs__Cred *c)
{
	return o->accmode == accmode && o->uid == c->uid && o->gid == c->gid &&
	       o->ngroups == c->n_groups &&
	       (!c->n_groups || memcmp(o->groups, c->groups,
				       c->n_groups * sizeof(*c->groups)) == 0);
}

int itable_open(struct itable *t, uint64_t ino, uint32_t flags,
		const Sweepfs__Cred *cred)
{
	uint32_t accmode = flags & OPEN_MODE;
	struct minode *n;
	struct mopen *o = NULL;

	pthread_mutex_lock(&t->mu);
	n = get(t, ino);
	if (n) {
		for (o = n->opens; o; o = o->next)
			if (mopen_is(o, accmode, cred))
				break;
		if (!o) {
			o = malloc(sizeof(*o) +
				   cred->n_groups * sizeof(o->groups[0]));
			if (o) {
				o->count = 0;
				o->accmode = accmode;
				o->uid = cred->uid;
				o->gid = cred->gid;
				o->ngroups = (uint32_t)cred->n_groups;
				if (cred->n_groups)
					memcpy(o->groups, cred->groups,
					       cred->n_groups *
						       sizeof(o->groups[0]));
				o->next = n->opens;
				n->opens = o;
			}
		}
		if (o) {
			o->count++;
			n->nopen++;
		} else {
			put(t, ino);
		}
	}
	pthread_mutex_unlock(&t->mu);
	return o ? 0 : -ENOMEM;
}

uint32_t itable_nopen(struct itable *t, uint64_t ino)
{
	struct minode *n;
	uint32_t k;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	k = n ? n->nopen : 0;
	pthread_mutex_unlock(&t->mu);
	return k;
}

void itable_close(struct itable *t, uint64_t ino, uint32_t flags)
{
	struct minode *n;
	struct mopen **pp, **victim = NULL;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	/* Releases do not say who opened: one of this access mode's. */
	for (pp = n ? &n->opens : NULL; pp && *pp; pp = &(*pp)->next)
		if (!victim || (*pp)->accmode == (flags & OPEN_MODE))
			victim = pp;
	if (victim) {
		struct mopen *o = *victim;

		if (!--o->count) {
			*victim = o->next;
			free(o);
		}
		n->nopen--;
		put(t, ino);
	}
	pthread_mutex_unlock(&t->mu);
}

/* Room for @o's claim in itable_open_claims()'s block. */
static size_t claim_size(const struct mopen *o)
{
	return sizeof(Sweepfs__OpenClaim *) + sizeof(Sweepfs__OpenClaim) +
	       sizeof(Sweepfs__Cred) + o->ngroups * sizeof(uint32_t);
}

void itable_open_claims(struct itable *t, Sweepfs__OpenClaim ***claims,
			size_t *count)
{
	size_t n = 0, size = 0;
	Sweepfs__OpenClaim **v = NULL, *c;
	Sweepfs__Cred *cr;
	uint32_t *g;

	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct minode *e = t->buckets[i]; e; e = e->next)
			for (struct mopen *o = e->opens; o; o = o->next) {
				size += claim_size(o);
				n++;
			}
	if (n)
		v = malloc(size);
	if (!v)
		goto out;
	/* One block: the pointers, then the claims, their credentials and
	 * their groups; freed with one free(). */
	c = (Sweepfs__OpenClaim *)(v + n);
	cr = (Sweepfs__Cred *)(c + n);
	g = (uint32_t *)(cr + n);
	n = 0;
	for (size_t i = 0; i < t->nbuckets; i++) {
		for (struct minode *e = t->buckets[i]; e; e = e->next) {
			for (struct mopen *o = e->opens; o; o = o->next) {
				sweepfs__open_claim__init(&c[n]);
				sweepfs__cred__init(&cr[n]);
				c[n].ino = e->ino;
				c[n].flags = o->accmode;
				c[n].has_count = 1;
				c[n].count = o->count;
				c[n].cred = &cr[n];
				c[n].has_handle = e->handle != 0;
				c[n].handle = e->handle;
				cr[n].uid = o->uid;
				cr[n].gid = o->gid;
				cr[n].n_groups = o->ngroups;
				cr[n].groups = g;
				memcpy(g, o->groups, o->ngroups * sizeof(*g));
				g += o->ngroups;
				v[n] = &c[n];
				n++;
			}
		}
	}
out:
	pthread_mutex_unlock(&t->mu);
	*claims = v;
	*count = v ? n : 0;
}

static bool attr_differs(const struct mattr *m, const Sweepfs__Attr *a)
{
	return m->mode != a->mode || m->nlink != a->nlink || m->uid != a->uid ||
	       m->gid != a->gid || m->size != a->size || m->mtime != a->mtime ||
	       m->ctime != a->ctime;
}

void itable_set_attr(struct itable *t, const Sweepfs__Attr *a, int64_t expires)
{
	struct minode *n;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, a->ino);
	if (n) {
		if (n->attr_fetched && a->nlink && attr_differs(&n->attr, a))
			n->changed = true;
		n->attr = (struct mattr){
			.mode = a->mode,
			.nlink = a->nlink,
			.uid = a->uid,
			.gid = a->gid,
			.rdev = a->rdev,
			.size = a->size,
			.atime = a->atime,
			.mtime = a->mtime,
			.ctime = a->ctime,
		};
		if (a->has_handle)
			learn_handle(n, a->handle);
		n->attr_expires = expires;
		n->attr_fetched = sw_mono_ns();
		n->attr_stale_at = 0;
		/* Writes expire the attributes, not this: they do not
		 * change a file's xattrs. */
		n->noxattr_until = a->has_xattrs && !a->xattrs ? expires : 0;
	}
	pthread_mutex_unlock(&t->mu);
}

bool itable_noxattr(struct itable *t, uint64_t ino)
{
	struct minode *n;
	bool none;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	none = n && n->noxattr_until > sw_mono_ns();
	pthread_mutex_unlock(&t->mu);
	return none;
}

void itable_set_noxattr(struct itable *t, uint64_t ino, int64_t until)
{
	struct minode *n;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	if (n)
		n->noxattr_until = until;
	pthread_mutex_unlock(&t->mu);
}

void itable_xattr_changed(struct itable *t, uint64_t ino)
{
	struct minode *n;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	if (n)
		n->noxattr_until = 0;
	pthread_mutex_unlock(&t->mu);
}

void itable_set_attr_expired(struct itable *t, uint64_t ino)
{
	struct minode *n;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	if (n) {
		n->attr_expires = 0;
		n->attr_stale_at = sw_mono_ns();
	}
	pthread_mutex_unlock(&t->mu);
}

void itable_expire_all_attrs(struct itable *t)
{
	pthread_mutex_lock(&t->mu);
	t->all_stale_at = sw_mono_ns();
	pthread_mutex_unlock(&t->mu);
}

/* Whether @n's attributes are older than an expiry of all of them. */
static bool all_stale(const struct itable *t, const struct minode *n)
{
	return n->attr_fetched <= t->all_stale_at;
}

static void attr_out(const struct minode *n, Sweepfs__Attr *a)
{
	sweepfs__attr__init(a);
	a->ino = n->ino;
	a->mode = n->attr.mode;
	a->nlink = n->attr.nlink;
	a->uid = n->attr.uid;
	a->gid = n->attr.gid;
	a->rdev = n->attr.rdev;
	a->size = n->attr.size;
	a->atime = n->attr.atime;
	a->mtime = n->attr.mtime;
	a->ctime = n->attr.ctime;
	a->has_handle = n->handle != 0;
	a->handle = n->handle;
}

bool itable_get_attr(struct itable *t, uint64_t ino, Sweepfs__Attr *a,
		     int64_t *expires, int64_t *fetched)
{
	struct minode *n;
	bool fresh = false;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	if (n && n->attr_expires > sw_mono_ns() && !all_stale(t, n)) {
		attr_out(n, a);
		*expires = n->attr_expires;
		if (fetched)
			*fetched = n->attr_fetched;
		fresh = true;
	}
	pthread_mutex_unlock(&t->mu);
	return fresh;
}

int itable_newer_attr(struct itable *t, uint64_t ino, int64_t at,
		      Sweepfs__Attr *a, int64_t *fetched)
{
	struct minode *n;
	int rc = 0;

	pthread_mutex_lock(&t->mu);
	n = *slot(t, ino);
	if (n && (n->attr_stale_at > at ||
		  (all_stale(t, n) && t->all_stale_at > at))) {
		rc = -1;
	} else if (!n && t->changed_gone_at > at) {
		rc = -1; /* it may have been one of the forgotten changed */
	} else if (n && n->attr_fetched > at) {
		attr_out(n, a);
		*fetched = n->attr_fetched;
		rc = 1;
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}
