/*
 * namespace.h: nodes, edges, and every change to them.
 *
 * Two tools run through the file:
 *  - check_ns() recomputes what the namespace keeps redundantly (link
 *    counts, entry and subdirectory counts, the name tables, the cookie
 *    index, tombstones and pins, parents, the byte accounting) and fails
 *    on any disagreement; most tests call it after each change.
 *  - dump_ns() renders everything visible (nodes, names in id order,
 *    xattrs, orphans, counters) as text, so "nothing changed" is a string
 *    comparison. With the allocator wrappers below (linked with
 *    -Wl,--wrap=malloc,calloc,realloc) the ENOMEM test fails each
 *    allocation of an operation in turn and compares dumps.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "namespace.h"
#include "unit.h"
#include "unit_ns.h"
#include "util.h"

/* ---- allocation failure injection ----------------------------------- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

/*
 * The allocation numbered fail_at (counting from 0 since arming) fails;
 * fail_at < 0: none. Process-wide by nature; setup() disarms it.
 */
static long fail_at = -1;
static long alloc_seen;

static bool alloc_fails(void)
{
	if (fail_at < 0)
		return false;
	return alloc_seen++ == fail_at;
}

void *__wrap_malloc(size_t size)
{
	return alloc_fails() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	return alloc_fails() ? NULL : __real_realloc(p, size);
}

static void fail_alloc(long k)
{
	alloc_seen = 0;
	fail_at = k;
}

/* ---- fixture and helpers -------------------------------------------- */

#define NCURSORS 4

struct fixture {
	struct ns ns;
	bool inited;
	int64_t now;
	struct rng rng;
	struct cursor cur[NCURSORS];
};

static int setup(void **state)
{
	struct fixture *f;

	fail_at = -1;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->now = 1000;
	rng_seed(&f->rng, 12345);
	for (int i = 0; i < NCURSORS; i++)
		ns_cursor_init(&f->cur[i]);
	if (ns_init(&f->ns, f->now) < 0) {
		free(f);
		return -1;
	}
	f->inited = true;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	fail_at = -1;
	if (f->inited)
		ns_release(&f->ns);
	free(f);
	return 0;
}

static struct node *root(struct fixture *f)
{
	return f->ns.root;
}

static int create_full(struct fixture *f, struct node *dir, const char *name,
		       uint32_t mode, const char *target, struct node **out)
{
	struct ns_create_args a = {
		.ino = f->ns.next_ino,
		.edge = f->ns.next_edge,
		.mode = mode,
		.uid = 1000,
		.gid = 100,
		.now = ++f->now,
	};

	if (S_ISLNK(mode)) {
		a.target = target ? target : "target";
		a.target_len = strlen(a.target);
	}
	if (S_ISCHR(mode) || S_ISBLK(mode))
		a.rdev = 0x0801;
	return ns_create(&f->ns, dir, name, strlen(name), &a, out);
}

static int create_rc(struct fixture *f, struct node *dir, const char *name,
		     uint32_t mode)
{
	return create_full(f, dir, name, mode, NULL, NULL);
}

static struct node *mk(struct fixture *f, struct node *dir, const char *name,
		       uint32_t mode)
{
	struct node *n = NULL;
	int rc = create_full(f, dir, name, mode, NULL, &n);

	if (rc != 0)
		fail_msg("create %s: %d", name, rc);
	assert_non_null(n);
	return n;
}

static struct edge *edge_of(struct fixture *f, struct node *dir,
			    const char *name)
{
	return ns_lookup(&f->ns, dir, name, strlen(name));
}

static struct node *child(struct fixture *f, struct node *dir, const char *name)
{
	struct edge *e = edge_of(f, dir, name);

	return e ? e->child : NULL;
}

static int link_rc(struct fixture *f, struct node *n, struct node *dir,
		   const char *name)
{
	return ns_link(&f->ns, n, dir, name, strlen(name), f->ns.next_edge,
		       ++f->now);
}

static int unlink_rc(struct fixture *f, struct node *dir, const char *name,
		     bool keep)
{
	return ns_unlink(&f->ns, dir, name, strlen(name), keep, ++f->now);
}

static int rename_rc(struct fixture *f, struct node *sdir, const char *sname,
		     struct node *ddir, const char *dname, unsigned flags,
		     bool keep)
{
	return ns_rename(&f->ns, sdir, sname, strlen(sname), ddir, dname,
			 strlen(dname), flags, f->ns.next_edge, keep, ++f->now);
}

static bool hashed(const struct node *dir)
{
	return htab_count(&dir->u.dir->names) > 0;
}

/* The edges of @dir in list order, tombstones included. */
static size_t list_len(const struct node *dir)
{
	size_t n = 0;

	for (const struct edge *e = dir->u.dir->head; e; e = e->next)
		n++;
	return n;
}

static bool in_list(const struct node *dir, const struct edge *x)
{
	for (const struct edge *e = dir->u.dir->head; e; e = e->next)
		if (e == x)
			return true;
	return false;
}

/* ---- all nodes ------------------------------------------------------ */

static size_t node_index(const struct unit_nodevec *nv, const struct node *n)
{
	size_t lo = 0, hi = nv->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (nv->v[mid]->ino < n->ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == nv->n || nv->v[lo] != n)
		fail_msg("edge to node %p (ino %llu) not in the inode table",
			 (const void *)n, (unsigned long long)n->ino);
	return lo;
}

/* ---- invariants ----------------------------------------------------- */

static void check_dir(const struct ns *ns, const struct unit_nodevec *nv,
		      const struct node *n, unsigned *links, uint64_t *nedges,
		      size_t *dir_bytes, uint64_t *max_edge)
{
	const struct dir *d = n->u.dir;
	uint64_t live = 0, subdirs = 0, tomb = 0, indexed = 0;
	uint64_t plain = 0, tree_names = 0, tree_plain = 0;
	const struct edge *prev = NULL;

	*dir_bytes += sizeof(struct dir) + htab_bytes(&d->names) +
		      d->index_cap * sizeof(struct edge *);
	assert_non_null(d->parent);
	if (n == ns->root)
		assert_ptr_equal(d->parent, n);
	for (const struct edge *e = d->head; e; e = e->next) {
		assert_ptr_equal(e->prev, prev);
		if (prev && prev->id >= e->id)
			fail_msg("dir %llu: edge ids out of order",
				 (unsigned long long)n->ino);
		if (e->id > *max_edge)
			*max_edge = e->id;
		if (e->flags & EDGE_INDEXED)
			indexed++;
		if (!e->child) {
			tomb++;
			if (!e->pins)
				fail_msg("dir %llu: unpinned tombstone",
					 (unsigned long long)n->ino);
			assert_false(e->flags & EDGE_INDEXED);
		} else {
			size_t i = node_index(nv, e->child);

			live++;
			links[i]++;
			plain += !(e->flags & EDGE_SNAPSHOT);
			tree_names++;
			tree_plain += !(e->flags & EDGE_SNAPSHOT);
			if (ns_is_dir(e->child)) {
				subdirs++;
				assert_ptr_equal(e->child->u.dir->parent, n);
				/* The directory forest agrees. */
				assert_ptr_equal(
					lct_parent(&e->child->u.dir->lct),
					&d->lct);
				tree_names += ns_tree_names(e->child);
				tree_plain += ns_tree_plain(e->child);
			}
			/* Found by name, whichever way the dir looks up. */
			assert_ptr_equal(ns_lookup(ns, n, e->name, e->namelen),
					 e);
		}
		prev = e;
	}
	assert_ptr_equal(d->tail, prev);
	assert_int_equal(d->nentries, live);
	assert_int_equal(d->nsubdirs, subdirs);
	assert_int_equal(d->nplain, plain);
	/* Subtree counts: each directory's, from its children's. */
	assert_int_equal(ns_tree_names(n), tree_names);
	assert_int_equal(ns_tree_plain(n), tree_plain);
	assert_int_equal(d->tombstones, tomb);
	*nedges += live;
	/* Name table: all live edges or none; there past the threshold,
	 * gone below half of it. */
	if (htab_count(&d->names))
		assert_int_equal(htab_count(&d->names), live);
	if (live > NS_DIR_HASH_MIN)
		assert_true(htab_count(&d->names) > 0);
	if (live < NS_DIR_HASH_MIN / 2)
		assert_int_equal(htab_count(&d->names), 0);
	/* Cookie index: sorted, live, flagged, members of this list. */
	assert_true(d->index_len <= d->index_cap);
	assert_int_equal(indexed, d->index_len);
	for (uint32_t i = 0; i < d->index_len; i++) {
		const struct edge *e = d->index[i];

		assert_non_null(e->child);
		assert_true(e->flags & EDGE_INDEXED);
		if (i)
			assert_true(d->index[i - 1]->id < e->id);
		assert_true(in_list(n, e));
	}
	/* Cursors resting here, and the pins they hold. */
	{
		const struct cursor *cp = NULL;
		uint64_t pins = 0, cursor_pins = 0;

		for (const struct cursor *c = d->cursors; c; c = c->dnext) {
			assert_ptr_equal(c->dir, n);
			assert_ptr_equal(c->dprev, cp);
			if (c->pos) {
				assert_true(in_list(n, c->pos));
				cursor_pins++;
			}
			cp = c;
		}
		for (const struct edge *e = d->head; e; e = e->next)
			pins += e->pins;
		assert_int_equal(pins, cursor_pins);
	}
}

static void check_ns(const struct ns *ns)
{
	struct unit_nodevec nv;
	unsigned *links;
	uint64_t nedges = 0, ndirs = 0, norphans = 0, max_edge = 0;
	size_t dir_bytes = 0;

	unit_all_nodes(ns, &nv);
	assert_int_equal(nv.n, ns->nnodes);
	assert_ptr_equal(ns_get(ns, NS_ROOT_INO), ns->root);
	links = calloc(nv.n, sizeof(*links));
	assert_non_null(links);
	for (size_t i = 0; i < nv.n; i++) {
		const struct node *n = nv.v[i];

		assert_ptr_equal(ns_get(ns, n->ino), n);
		if (i)
			assert_true(nv.v[i - 1]->ino < n->ino);
		assert_true(n->ino < ns->next_ino);
		if (ns_is_dir(n)) {
			ndirs++;
			check_dir(ns, &nv, n, links, &nedges, &dir_bytes,
				  &max_edge);
		}
		if (S_ISLNK(n->mode))
			assert_non_null(n->u.target);
		if (!(n->flags & NODE_XATTR))
			assert_int_equal(ns_xattr_list(ns, n, NULL, 0), 0);
	}
	for (size_t i = 0; i < nv.n; i++) {
		const struct node *n = nv.v[i];
		bool orphan = n->flags & NODE_ORPHAN;

		if (orphan)
			norphans++;
		if (n == ns->root) {
			assert_int_equal(links[i], 0);
		} else if (ns_is_dir(n)) {
			/* One name, in the parent it points to. */
			if (links[i] != 1)
				fail_msg("dir %llu has %u names",
					 (unsigned long long)n->ino, links[i]);
			assert_false(orphan);
		} else if (orphan) {
			assert_int_equal(n->nlink, 0);
			assert_int_equal(links[i], 0);
		} else {
			if (n->nlink != links[i])
				fail_msg("node %llu: nlink %u, %u names",
					 (unsigned long long)n->ino, n->nlink,
					 links[i]);
			assert_true(links[i] > 0);
		}
	}
	/* Parents lead to the root without a cycle. */
	for (size_t i = 0; i < nv.n; i++) {
		const struct node *n = nv.v[i];
		size_t depth = 0;

		if (!ns_is_dir(n))
			continue;
		while (n != ns->root) {
			n = n->u.dir->parent;
			assert_true(++depth <= nv.n);
		}
	}
	assert_int_equal(ns->ndirs, ndirs);
	assert_int_equal(ns->nedges, nedges);
	assert_int_equal(htab_count(&ns->orphans), norphans);
	assert_true(max_edge < ns->next_edge);
	assert_int_equal(ns->dir_bytes, dir_bytes);
	free(links);
	free(nv.v);
}

/* ---- dumps ---------------------------------------------------------- */

/* Everything visible about @ns, as text; free() it. */
static char *dump_ns(const struct ns *ns)
{
	struct unit_nodevec nv;
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);

	assert_non_null(fp);
	unit_all_nodes(ns, &nv);
	fprintf(fp,
		"nodes %llu dirs %llu edges %llu next %llu/%llu v%llu "
		"orphans %zu\n",
		(unsigned long long)ns->nnodes, (unsigned long long)ns->ndirs,
		(unsigned long long)ns->nedges,
		(unsigned long long)ns->next_ino,
		(unsigned long long)ns->next_edge,
		(unsigned long long)ns->version, htab_count(&ns->orphans));
	for (size_t i = 0; i < nv.n; i++) {
		const struct node *n = nv.v[i];

		fprintf(fp,
			"N %llu mode %o uid %u gid %u nlink %u flags %x "
			"t %lld %lld %lld size %llu",
			(unsigned long long)n->ino, n->mode, n->uid, n->gid,
			n->nlink, n->flags & ~NODE_XATTR, (long long)n->atime,
			(long long)n->mtime, (long long)n->ctime,
			(unsigned long long)n->size);
		if (S_ISCHR(n->mode) || S_ISBLK(n->mode))
			fprintf(fp, " rdev %llx",
				(unsigned long long)n->u.rdev);
		if (S_ISLNK(n->mode))
			fprintf(fp, " -> %.*s", (int)n->size, n->u.target);
		fputc('\n', fp);
		unit_dump_xattrs(fp, ns, n);
		if (!ns_is_dir(n))
			continue;
		fprintf(fp,
			"  D parent %llu entries %llu subdirs %llu "
			"tombstones %u hashed %d\n",
			(unsigned long long)n->u.dir->parent->ino,
			(unsigned long long)n->u.dir->nentries,
			(unsigned long long)n->u.dir->nsubdirs,
			n->u.dir->tombstones, hashed(n));
		for (const struct edge *e = n->u.dir->head; e; e = e->next)
			fprintf(fp, "  E %llu %.*s -> %llu pins %u\n",
				(unsigned long long)e->id, (int)e->namelen,
				e->name,
				(unsigned long long)(e->child ? e->child->ino :
								0),
				e->pins);
		for (const struct cursor *c = n->u.dir->cursors; c;
		     c = c->dnext)
			fprintf(fp, "  C %llu\n",
				(unsigned long long)(c->pos ? c->pos->id : 0));
	}
	free(nv.v);
	assert_int_equal(fclose(fp), 0);
	return text;
}

/* Print the lines of @a that @b lacks, prefixed with @tag. */
static void print_missing(const char *a, const char *b, char tag)
{
	for (const char *l = a; *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) + 1 : strlen(l);
		bool found = false;

		for (const char *m = b; *m && !found;) {
			const char *mend = strchr(m, '\n');
			size_t mlen = mend ? (size_t)(mend - m) + 1 : strlen(m);

			found = mlen == len && !memcmp(l, m, len);
			m += mlen;
		}
		if (!found)
			fprintf(stderr, "%c %.*s", tag, (int)len, l);
		l += len;
	}
}

static void assert_dump(const struct ns *ns, const char *before,
			const char *what)
{
	char *after = dump_ns(ns);

	if (strcmp(before, after)) {
		fprintf(stderr, "%s changed the namespace:\n", what);
		print_missing(before, after, '-');
		print_missing(after, before, '+');
		free(after);
		fail();
	}
	free(after);
}

/* ---- create, lookup ------------------------------------------------- */

static void test_ns_init_root(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f);

	assert_non_null(r);
	assert_ptr_equal(ns_get(&f->ns, NS_ROOT_INO), r);
	assert_int_equal(r->ino, NS_ROOT_INO);
	assert_int_equal(r->mode, S_IFDIR | 0755);
	assert_int_equal(r->uid, 0);
	assert_int_equal(r->gid, 0);
	assert_int_equal(r->atime, 1000);
	assert_int_equal(r->mtime, 1000);
	assert_int_equal(r->ctime, 1000);
	assert_ptr_equal(r->u.dir->parent, r);
	assert_int_equal(ns_nlink(r), 2);
	assert_int_equal(f->ns.nnodes, 1);
	assert_int_equal(f->ns.ndirs, 1);
	assert_int_equal(f->ns.nedges, 0);
	assert_true(f->ns.next_ino > NS_ROOT_INO);
	assert_null(ns_get(&f->ns, 2));
	assert_null(edge_of(f, r, "x"));
	assert_null(ns_dir_seek(r, 0));
	assert_true(ns_is_ancestor(r, r));
	check_ns(&f->ns);
}

static void test_ns_create_every_type(void **state)
{
	struct fixture *f = *state;
	static const uint32_t modes[] = {
		S_IFREG | 0644, S_IFDIR | 0755, S_IFLNK | 0777,	 S_IFCHR | 0600,
		S_IFBLK | 0660, S_IFIFO | 0600, S_IFSOCK | 0755,
	};
	static const char *const names[] = { "reg", "dir",  "lnk", "chr",
					     "blk", "fifo", "sock" };
	struct node *r = root(f);
	size_t misc = f->ns.misc_bytes;

	for (size_t i = 0; i < SW_ARRAY_SIZE(modes); i++) {
		uint64_t ino = f->ns.next_ino, edge = f->ns.next_edge;
		struct node *n = mk(f, r, names[i], modes[i]);
		struct edge *e = edge_of(f, r, names[i]);

		assert_ptr_equal(ns_get(&f->ns, ino), n);
		assert_non_null(e);
		assert_ptr_equal(e->child, n);
		assert_int_equal(e->id, edge);
		assert_ptr_equal(r->u.dir->tail, e);
		assert_int_equal(n->ino, ino);
		assert_int_equal(n->mode, modes[i]);
		assert_int_equal(n->uid, 1000);
		assert_int_equal(n->gid, 100);
		assert_int_equal(n->nlink, 1);
		assert_int_equal(n->atime, f->now);
		assert_int_equal(n->mtime, f->now);
		assert_int_equal(n->ctime, f->now);
		/* The parent was modified now. */
		assert_int_equal(r->mtime, f->now);
		assert_int_equal(r->ctime, f->now);
		assert_true(f->ns.next_ino > ino);
		assert_true(f->ns.next_edge > edge);
		check_ns(&f->ns);
	}
	assert_int_equal(f->ns.nnodes, 8);
	assert_int_equal(f->ns.ndirs, 2);
	assert_int_equal(f->ns.nedges, 7);
	assert_int_equal(ns_nlink(r), 3);
	assert_int_equal(ns_nlink(child(f, r, "dir")), 2);
	assert_ptr_equal(child(f, r, "dir")->u.dir->parent, r);
	assert_int_equal(child(f, r, "lnk")->size, 6);
	assert_memory_equal(child(f, r, "lnk")->u.target, "target", 6);
	assert_int_equal(f->ns.misc_bytes, misc + 6);
	assert_int_equal(child(f, r, "chr")->u.rdev, 0x0801);
	assert_int_equal(child(f, r, "blk")->u.rdev, 0x0801);
	assert_int_equal(ns_nlink(child(f, r, "reg")), 1);

	/* An empty symlink target and a 255-byte name. */
	{
		char longname[256];
		struct node *l = NULL;

		memset(longname, 'L', 255);
		longname[255] = '\0';
		assert_int_equal(
			create_full(f, r, longname, S_IFLNK | 0777, "", &l), 0);
		assert_int_equal(l->size, 0);
		assert_ptr_equal(child(f, r, longname), l);
		assert_int_equal(edge_of(f, r, longname)->namelen, 255);
	}
	check_ns(&f->ns);
}

static void test_ns_create_errors(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *file = mk(f, r, "file", S_IFREG | 0644);
	struct ns_create_args a = {
		.ino = 2, .edge = 1000, .mode = S_IFREG, .now = 5
	};
	char *before = dump_ns(&f->ns);

	/* The name exists. */
	assert_int_equal(create_rc(f, r, "file", S_IFREG | 0644), -EEXIST);
	assert_int_equal(create_rc(f, r, "file", S_IFDIR | 0755), -EEXIST);
	/* The inode number is taken (and the name is free). */
	assert_int_equal(ns_create(&f->ns, r, "other", 5, &a, NULL), -EEXIST);
	a.ino = NS_ROOT_INO;
	assert_int_equal(ns_create(&f->ns, r, "other", 5, &a, NULL), -EEXIST);
	/* Not a directory. */
	assert_int_equal(create_rc(f, file, "x", S_IFREG | 0644), -ENOTDIR);
	/* No such type. */
	assert_int_equal(create_rc(f, r, "x", 0644), -EINVAL);
	assert_int_equal(create_rc(f, r, "x", 0170000 | 0644), -EINVAL);
	assert_int_equal(create_rc(f, r, "x", 0030000), -EINVAL);
	assert_dump(&f->ns, before, "a failed create");
	free(before);
	check_ns(&f->ns);
}

/* Lookup below, at and above the hashing threshold, and back down. */
static void test_ns_lookup_threshold(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "d", S_IFDIR | 0755);
	struct node *nodes[40];
	char name[32];
	int n = 40;

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "entry-%d", i);
		nodes[i] = mk(f, d, name, S_IFREG | 0644);
		/* Hashed exactly when more than NS_DIR_HASH_MIN entries. */
		assert_int_equal(hashed(d), i + 1 > NS_DIR_HASH_MIN);
		for (int k = 0; k <= i; k++) {
			snprintf(name, sizeof(name), "entry-%d", k);
			assert_ptr_equal(child(f, d, name), nodes[k]);
		}
		assert_null(child(f, d, "entry-"));
		assert_null(child(f, d, "entry-999"));
		/* A prefix and an extension of a real name. */
		assert_null(ns_lookup(&f->ns, d, "entry-1", 6));
		assert_null(ns_lookup(&f->ns, d, "entry-10x", 9));
		check_ns(&f->ns);
	}
	/* Shrink: the table stays down to half the threshold, then goes. */
	for (int i = n - 1; i >= 0; i--) {
		snprintf(name, sizeof(name), "entry-%d", i);
		assert_int_equal(unlink_rc(f, d, name, false), 0);
		assert_null(child(f, d, name));
		assert_int_equal(d->u.dir->nentries, (uint64_t)i);
		if (i > NS_DIR_HASH_MIN)
			assert_true(hashed(d));
		if (i < NS_DIR_HASH_MIN / 2)
			assert_false(hashed(d));
		for (int k = 0; k < i; k++) {
			snprintf(name, sizeof(name), "entry-%d", k);
			assert_ptr_equal(child(f, d, name), nodes[k]);
		}
		check_ns(&f->ns);
	}
	/* And up again. */
	for (int i = 0; i <= NS_DIR_HASH_MIN; i++) {
		snprintf(name, sizeof(name), "again-%d", i);
		mk(f, d, name, S_IFREG | 0644);
	}
	assert_true(hashed(d));
	check_ns(&f->ns);
}

/* Names that differ only in bytes a C string would stop at. */
static void test_ns_lookup_binary_names(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *a, *b;
	struct ns_create_args args = { .mode = S_IFREG | 0644, .now = 1 };

	for (int big = 0; big < 2; big++) {
		struct node *d =
			mk(f, r, big ? "big" : "small", S_IFDIR | 0755);

		if (big)
			for (int i = 0; i < 20; i++) {
				char name[8];

				snprintf(name, sizeof(name), "p%d", i);
				mk(f, d, name, S_IFREG);
			}
		args.ino = f->ns.next_ino;
		args.edge = f->ns.next_edge;
		assert_int_equal(ns_create(&f->ns, d, "a\xff", 2, &args, &a),
				 0);
		args.ino = f->ns.next_ino;
		args.edge = f->ns.next_edge;
		assert_int_equal(ns_create(&f->ns, d, "a\xfe", 2, &args, &b),
				 0);
		assert_ptr_equal(ns_lookup(&f->ns, d, "a\xff", 2)->child, a);
		assert_ptr_equal(ns_lookup(&f->ns, d, "a\xfe", 2)->child, b);
		assert_null(ns_lookup(&f->ns, d, "a", 1));
		assert_null(ns_lookup(&f->ns, d, "a\xff\xff", 3));
	}
	check_ns(&f->ns);
}

/* ---- link, unlink --------------------------------------------------- */

static void test_ns_link_rules(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d1 = mk(f, r, "d1", S_IFDIR | 0755);
	struct node *d2 = mk(f, r, "d2", S_IFDIR | 0755);
	struct node *file = mk(f, d1, "file", S_IFREG | 0644);
	char *before;

	assert_int_equal(link_rc(f, file, d2, "other"), 0);
	assert_int_equal(file->nlink, 2);
	assert_int_equal(ns_nlink(file), 2);
	assert_int_equal(file->ctime, f->now);
	assert_int_equal(d2->mtime, f->now);
	assert_ptr_equal(child(f, d2, "other"), file);
	assert_int_equal(link_rc(f, file, d1, "again"), 0);
	assert_int_equal(file->nlink, 3);
	check_ns(&f->ns);

	before = dump_ns(&f->ns);
	assert_int_equal(link_rc(f, file, d2, "other"), -EEXIST);
	assert_int_equal(link_rc(f, file, d1, "file"), -EEXIST);
	assert_int_equal(link_rc(f, d1, d2, "dirlink"), -EPERM);
	assert_int_equal(link_rc(f, file, file, "x"), -ENOTDIR);
	assert_dump(&f->ns, before, "a failed link");
	free(before);

	/* Names go one by one; the node with the last. */
	assert_int_equal(unlink_rc(f, d1, "file", false), 0);
	assert_int_equal(file->nlink, 2);
	assert_int_equal(file->ctime, f->now);
	assert_int_equal(unlink_rc(f, d1, "again", false), 0);
	assert_int_equal(file->nlink, 1);
	check_ns(&f->ns);
	{
		uint64_t ino = file->ino;

		assert_int_equal(unlink_rc(f, d2, "other", false), 0);
		assert_null(ns_get(&f->ns, ino));
	}
	check_ns(&f->ns);
}

static void test_ns_link_max(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "d", S_IFDIR | 0755);
	struct node *file = mk(f, d, "f0", S_IFREG | 0644);
	char name[16];

	for (unsigned i = 1; i < NS_LINK_MAX; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		assert_int_equal(link_rc(f, file, d, name), 0);
	}
	assert_int_equal(file->nlink, NS_LINK_MAX);
	assert_int_equal(link_rc(f, file, d, "one-more"), -EMLINK);
	assert_int_equal(file->nlink, NS_LINK_MAX);
	assert_null(child(f, d, "one-more"));
	assert_int_equal(unlink_rc(f, d, "f7", false), 0);
	assert_int_equal(link_rc(f, file, d, "one-more"), 0);
	check_ns(&f->ns);
}

static void test_ns_unlink_errors(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "d", S_IFDIR | 0755);
	struct node *file = mk(f, r, "file", S_IFREG | 0644);
	char *before;

	mk(f, d, "inner", S_IFREG | 0644);
	assert_int_equal(ns_nlink(r), 3);
	before = dump_ns(&f->ns);
	assert_int_equal(unlink_rc(f, r, "nosuch", false), -ENOENT);
	assert_int_equal(unlink_rc(f, r, "nosuch", true), -ENOENT);
	assert_int_equal(unlink_rc(f, file, "x", false), -ENOTDIR);
	assert_int_equal(unlink_rc(f, r, "d", false), -ENOTEMPTY);
	assert_int_equal(unlink_rc(f, r, "d", true), -ENOTEMPTY);
	assert_dump(&f->ns, before, "a failed unlink");
	free(before);

	/* Empty now: rmdir works, the parent's link count drops. */
	assert_int_equal(unlink_rc(f, d, "inner", false), 0);
	assert_int_equal(unlink_rc(f, r, "d", false), 0);
	assert_null(child(f, r, "d"));
	assert_int_equal(ns_nlink(r), 2);
	assert_int_equal(r->mtime, f->now);
	assert_int_equal(f->ns.ndirs, 1);
	check_ns(&f->ns);
}

/* ---- rename --------------------------------------------------------- */

static void test_ns_rename_plain(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *a = mk(f, r, "a", S_IFDIR | 0755);
	struct node *b = mk(f, r, "b", S_IFDIR | 0755);
	struct node *file = mk(f, a, "file", S_IFREG | 0644);
	struct node *sub = mk(f, a, "sub", S_IFDIR | 0755);
	uint64_t edge;

	mk(f, sub, "deep", S_IFREG | 0644);
	/* Within one directory: the name moves, the edge is new (last). */
	edge = f->ns.next_edge;
	assert_int_equal(rename_rc(f, a, "file", a, "renamed", 0, false), 0);
	assert_null(child(f, a, "file"));
	assert_ptr_equal(child(f, a, "renamed"), file);
	assert_int_equal(edge_of(f, a, "renamed")->id, edge);
	assert_ptr_equal(a->u.dir->tail, edge_of(f, a, "renamed"));
	assert_int_equal(file->ctime, f->now);
	assert_int_equal(a->mtime, f->now);
	assert_int_equal(file->nlink, 1);
	check_ns(&f->ns);

	/* A directory to another parent: counts and ".." follow. */
	assert_int_equal(ns_nlink(a), 3);
	assert_int_equal(ns_nlink(b), 2);
	assert_int_equal(rename_rc(f, a, "sub", b, "moved", 0, false), 0);
	assert_ptr_equal(child(f, b, "moved"), sub);
	assert_ptr_equal(sub->u.dir->parent, b);
	assert_int_equal(ns_nlink(a), 2);
	assert_int_equal(ns_nlink(b), 3);
	assert_int_equal(a->mtime, f->now);
	assert_int_equal(b->mtime, f->now);
	assert_non_null(child(f, sub, "deep"));
	assert_true(ns_is_ancestor(b, sub));
	assert_false(ns_is_ancestor(a, sub));
	check_ns(&f->ns);

	/* A file across directories. */
	assert_int_equal(rename_rc(f, a, "renamed", sub, "file", 0, false), 0);
	assert_ptr_equal(child(f, sub, "file"), file);
	assert_int_equal(a->u.dir->nentries, 0);
	check_ns(&f->ns);
}

static void test_ns_rename_over_file(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *src = mk(f, r, "src", S_IFREG | 0644);
	struct node *dst = mk(f, r, "dst", S_IFREG | 0644), *linked;
	uint64_t dst_ino = dst->ino, orphan_ino;

	/* The replaced node had one name: gone. */
	assert_int_equal(rename_rc(f, r, "src", r, "dst", 0, false), 0);
	assert_ptr_equal(child(f, r, "dst"), src);
	assert_null(child(f, r, "src"));
	assert_null(ns_get(&f->ns, dst_ino));
	assert_int_equal(f->ns.nnodes, 2);
	check_ns(&f->ns);

	/* With keep it stays as an orphan. */
	dst = mk(f, r, "dst2", S_IFREG | 0644);
	orphan_ino = dst->ino;
	assert_int_equal(rename_rc(f, r, "dst", r, "dst2", 0, true), 0);
	assert_ptr_equal(ns_get(&f->ns, orphan_ino), dst);
	assert_int_equal(dst->nlink, 0);
	assert_true(dst->flags & NODE_ORPHAN);
	assert_int_equal(htab_count(&f->ns.orphans), 1);
	check_ns(&f->ns);
	assert_int_equal(ns_release_orphan(&f->ns, dst), 0);
	assert_null(ns_get(&f->ns, orphan_ino));
	check_ns(&f->ns);

	/* A node with another name just loses one, keep or not. */
	linked = mk(f, r, "linked", S_IFREG | 0644);
	assert_int_equal(link_rc(f, linked, r, "alias"), 0);
	mk(f, r, "x", S_IFREG | 0644);
	assert_int_equal(rename_rc(f, r, "x", r, "linked", 0, true), 0);
	assert_int_equal(linked->nlink, 1);
	assert_false(linked->flags & NODE_ORPHAN);
	assert_ptr_equal(child(f, r, "alias"), linked);
	assert_int_equal(htab_count(&f->ns.orphans), 0);
	check_ns(&f->ns);
}

static void test_ns_rename_over_dir(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *p = mk(f, r, "p", S_IFDIR | 0755);
	struct node *src = mk(f, r, "src", S_IFDIR | 0755);
	struct node *empty = mk(f, p, "empty", S_IFDIR | 0755);
	struct node *full = mk(f, p, "full", S_IFDIR | 0755);
	uint64_t empty_ino = empty->ino;
	char *before;

	mk(f, src, "content", S_IFREG | 0644);
	mk(f, full, "content", S_IFREG | 0644);
	before = dump_ns(&f->ns);
	assert_int_equal(rename_rc(f, r, "src", p, "full", 0, false),
			 -ENOTEMPTY);
	assert_int_equal(rename_rc(f, r, "src", p, "full", 0, true),
			 -ENOTEMPTY);
	assert_dump(&f->ns, before, "rename over a non-empty directory");
	free(before);

	assert_int_equal(ns_nlink(r), 4);
	assert_int_equal(ns_nlink(p), 4);
	assert_int_equal(rename_rc(f, r, "src", p, "empty", 0, false), 0);
	assert_null(ns_get(&f->ns, empty_ino));
	assert_ptr_equal(child(f, p, "empty"), src);
	assert_ptr_equal(src->u.dir->parent, p);
	assert_int_equal(ns_nlink(r), 3);
	assert_int_equal(ns_nlink(p), 4);
	assert_int_equal(f->ns.ndirs, 4);
	check_ns(&f->ns);
}

static void test_ns_rename_type_mismatch(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f);
	char *before;

	mk(f, r, "dir", S_IFDIR | 0755);
	mk(f, r, "file", S_IFREG | 0644);
	mk(f, r, "lnk", S_IFLNK | 0777);
	before = dump_ns(&f->ns);
	assert_int_equal(rename_rc(f, r, "dir", r, "file", 0, false), -ENOTDIR);
	assert_int_equal(rename_rc(f, r, "dir", r, "lnk", 0, false), -ENOTDIR);
	assert_int_equal(rename_rc(f, r, "file", r, "dir", 0, false), -EISDIR);
	assert_int_equal(rename_rc(f, r, "lnk", r, "dir", 0, true), -EISDIR);
	assert_int_equal(rename_rc(f, r, "nosuch", r, "x", 0, false), -ENOENT);
	assert_int_equal(rename_rc(f, r, "file", child(f, r, "file"), "x", 0,
				   false),
			 -ENOTDIR);
	assert_int_equal(rename_rc(f, child(f, r, "lnk"), "x", r, "y", 0,
				   false),
			 -ENOTDIR);
	assert_dump(&f->ns, before, "a refused rename");
	free(before);
	check_ns(&f->ns);
}

static void test_ns_rename_into_subtree(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *a = mk(f, r, "a", S_IFDIR | 0755);
	struct node *b = mk(f, a, "b", S_IFDIR | 0755);
	struct node *c = mk(f, b, "c", S_IFDIR | 0755);
	char *before;

	mk(f, c, "empty", S_IFDIR | 0755);
	assert_true(ns_is_ancestor(a, c));
	assert_false(ns_is_ancestor(c, a));
	before = dump_ns(&f->ns);
	assert_int_equal(rename_rc(f, r, "a", c, "a2", 0, false), -EINVAL);
	assert_int_equal(rename_rc(f, r, "a", a, "self", 0, false), -EINVAL);
	assert_int_equal(rename_rc(f, r, "a", b, "x", 0, false), -EINVAL);
	/* Over an empty directory inside its own subtree, too. */
	assert_int_equal(rename_rc(f, a, "b", c, "empty", 0, false), -EINVAL);
	assert_int_equal(rename_rc(f, r, "a", a, "b", RENAME_EXCHANGE, false),
			 -EINVAL);
	assert_int_equal(rename_rc(f, b, "c", r, "a", RENAME_EXCHANGE, false),
			 -EINVAL);
	assert_dump(&f->ns, before, "a rename into its own subtree");
	free(before);
	/* Upwards is fine. */
	assert_int_equal(rename_rc(f, b, "c", r, "c", 0, false), 0);
	assert_ptr_equal(c->u.dir->parent, r);
	check_ns(&f->ns);
}

static void test_ns_rename_noreplace(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *a = mk(f, r, "a", S_IFREG | 0644);
	char *before;

	mk(f, r, "b", S_IFREG | 0644);
	before = dump_ns(&f->ns);
	assert_int_equal(rename_rc(f, r, "a", r, "b", RENAME_NOREPLACE, false),
			 -EEXIST);
	assert_int_equal(rename_rc(f, r, "a", r, "b",
				   RENAME_NOREPLACE | RENAME_EXCHANGE, false),
			 -EINVAL);
	assert_int_equal(rename_rc(f, r, "a", r, "b", 1u << 7, false), -EINVAL);
	assert_dump(&f->ns, before, "rename with RENAME_NOREPLACE");
	free(before);
	assert_int_equal(rename_rc(f, r, "a", r, "c", RENAME_NOREPLACE, false),
			 0);
	assert_ptr_equal(child(f, r, "c"), a);
	check_ns(&f->ns);
}

static void test_ns_rename_exchange(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d1 = mk(f, r, "d1", S_IFDIR | 0755);
	struct node *d2 = mk(f, r, "d2", S_IFDIR | 0755);
	struct node *x = mk(f, d1, "x", S_IFREG | 0644);
	struct node *y = mk(f, d1, "y", S_IFREG | 0644);
	struct node *sub = mk(f, d2, "sub", S_IFDIR | 0755);
	struct edge *ex = edge_of(f, d1, "x"), *ey = edge_of(f, d1, "y");
	uint64_t idx = ex->id, idy = ey->id, next_edge = f->ns.next_edge;
	char *before;

	mk(f, sub, "inside", S_IFREG | 0644);
	next_edge = f->ns.next_edge;
	/* Two files in one directory: names stay, nodes swap. */
	assert_int_equal(rename_rc(f, d1, "x", d1, "y", RENAME_EXCHANGE, false),
			 0);
	assert_ptr_equal(child(f, d1, "x"), y);
	assert_ptr_equal(child(f, d1, "y"), x);
	assert_int_equal(edge_of(f, d1, "x")->id, idx);
	assert_int_equal(edge_of(f, d1, "y")->id, idy);
	assert_int_equal(x->ctime, f->now);
	assert_int_equal(y->ctime, f->now);
	assert_int_equal(x->nlink, 1);
	assert_int_equal(f->ns.next_edge, next_edge);
	check_ns(&f->ns);

	/* A file and a directory across directories: subdirectory counts
	 * and the directory's parent move. */
	assert_int_equal(ns_nlink(d1), 2);
	assert_int_equal(ns_nlink(d2), 3);
	assert_int_equal(
		rename_rc(f, d1, "x", d2, "sub", RENAME_EXCHANGE, false), 0);
	assert_ptr_equal(child(f, d1, "x"), sub);
	assert_ptr_equal(child(f, d2, "sub"), y);
	assert_ptr_equal(sub->u.dir->parent, d1);
	assert_int_equal(ns_nlink(d1), 3);
	assert_int_equal(ns_nlink(d2), 2);
	assert_int_equal(d1->u.dir->nsubdirs, 1);
	assert_int_equal(d2->u.dir->nsubdirs, 0);
	assert_int_equal(d1->mtime, f->now);
	assert_int_equal(d2->mtime, f->now);
	check_ns(&f->ns);
	/* And back the other way round (directory as the source). */
	assert_int_equal(
		rename_rc(f, d1, "x", d2, "sub", RENAME_EXCHANGE, false), 0);
	assert_ptr_equal(child(f, d2, "sub"), sub);
	assert_ptr_equal(sub->u.dir->parent, d2);
	assert_int_equal(ns_nlink(d1), 2);
	assert_int_equal(ns_nlink(d2), 3);
	check_ns(&f->ns);
	/* Two directories. */
	mk(f, d1, "dir1", S_IFDIR | 0755);
	assert_int_equal(
		rename_rc(f, d1, "dir1", d2, "sub", RENAME_EXCHANGE, false), 0);
	assert_ptr_equal(sub->u.dir->parent, d1);
	assert_ptr_equal(child(f, d2, "sub")->u.dir->parent, d2);
	check_ns(&f->ns);

	before = dump_ns(&f->ns);
	assert_int_equal(rename_rc(f, d1, "x", d2, "nosuch", RENAME_EXCHANGE,
				   false),
			 -ENOENT);
	assert_int_equal(rename_rc(f, d1, "nosuch", d2, "sub", RENAME_EXCHANGE,
				   false),
			 -ENOENT);
	/* A directory with its own child. */
	assert_int_equal(rename_rc(f, r, "d1", d1, "dir1", RENAME_EXCHANGE,
				   false),
			 -EINVAL);
	assert_dump(&f->ns, before, "a refused exchange");
	free(before);
	check_ns(&f->ns);
}

/* Two names of one node, or one name twice: success, nothing happens. */
static void test_ns_rename_same_inode(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "d", S_IFDIR | 0755);
	struct node *file = mk(f, r, "a", S_IFREG | 0644);
	char *before;

	assert_int_equal(link_rc(f, file, d, "b"), 0);
	before = dump_ns(&f->ns);
	assert_int_equal(rename_rc(f, r, "a", d, "b", 0, false), 0);
	assert_int_equal(rename_rc(f, r, "a", d, "b", 0, true), 0);
	assert_int_equal(rename_rc(f, r, "a", r, "a", 0, false), 0);
	assert_int_equal(rename_rc(f, r, "d", r, "d", 0, false), 0);
	assert_int_equal(rename_rc(f, r, "a", d, "b", RENAME_EXCHANGE, false),
			 0);
	assert_int_equal(rename_rc(f, r, "a", r, "a", RENAME_EXCHANGE, false),
			 0);
	assert_dump(&f->ns, before, "a same-node rename");
	free(before);
	assert_ptr_equal(child(f, r, "a"), file);
	assert_ptr_equal(child(f, d, "b"), file);
	check_ns(&f->ns);
}

/* ---- orphans, setattr ----------------------------------------------- */

static void test_ns_release_orphan_after_unlink(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *file = mk(f, r, "file", S_IFREG | 0644);
	struct node *keep2;
	uint64_t ino = file->ino;
	char *before;

	mk(f, r, "d", S_IFDIR | 0755);
	assert_int_equal(ns_xattr_set(&f->ns, file, "user.a", 6, "v", 1, 1), 0);
	assert_int_equal(ns_release_orphan(&f->ns, file), -EINVAL);
	assert_int_equal(unlink_rc(f, r, "file", true), 0);
	assert_ptr_equal(ns_get(&f->ns, ino), file);
	assert_int_equal(file->nlink, 0);
	assert_int_equal(ns_nlink(file), 0);
	assert_true(file->flags & NODE_ORPHAN);
	assert_int_equal(file->ctime, f->now);
	assert_null(child(f, r, "file"));
	assert_int_equal(f->ns.nnodes, 3);
	assert_int_equal(htab_count(&f->ns.orphans), 1);
	check_ns(&f->ns);
	/* An orphan cannot get a name back. */
	before = dump_ns(&f->ns);
	assert_int_equal(link_rc(f, file, r, "back"), -ENOENT);
	assert_dump(&f->ns, before, "linking an orphan");
	free(before);
	/* Its attributes still work. */
	assert_int_equal(ns_xattr_set(&f->ns, file, "user.b", 6, "w", 1, 2), 0);
	assert_int_equal(ns_release_orphan(&f->ns, file), 0);
	assert_null(ns_get(&f->ns, ino));
	assert_int_equal(htab_count(&f->ns.orphans), 0);
	assert_int_equal(f->ns.misc_bytes, 0);
	check_ns(&f->ns);

	/* A directory is never kept; a hard-linked file just loses a name. */
	assert_int_equal(unlink_rc(f, r, "d", true), 0);
	assert_null(child(f, r, "d"));
	assert_int_equal(f->ns.ndirs, 1);
	keep2 = mk(f, r, "k", S_IFREG | 0644);
	assert_int_equal(link_rc(f, keep2, r, "k2"), 0);
	assert_int_equal(unlink_rc(f, r, "k", true), 0);
	assert_false(keep2->flags & NODE_ORPHAN);
	assert_int_equal(keep2->nlink, 1);
	assert_int_equal(ns_release_orphan(&f->ns, keep2), -EINVAL);
	assert_int_equal(ns_release_orphan(&f->ns, root(f)), -EINVAL);
	check_ns(&f->ns);
	/* Orphans still there at ns_release() are freed with the rest. */
	assert_int_equal(unlink_rc(f, r, "k2", true), 0);
	assert_int_equal(htab_count(&f->ns.orphans), 1);
}

static void test_ns_setattr_fields(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *file = mk(f, r, "f", S_IFREG | 0644);
	struct node *d = mk(f, r, "d", S_IFDIR | 0755);
	struct node *l = mk(f, r, "l", S_IFLNK | 0777);
	struct node *p = mk(f, r, "p", S_IFIFO | 0600);
	struct ns_setattr_args a = { .valid = NS_SET_MODE,
				     .mode = 0170000 | 04751,
				     .now = 50 };
	char *before;

	/* Permission bits change; the type does not. */
	assert_int_equal(ns_setattr(&f->ns, file, &a), 0);
	assert_int_equal(file->mode, S_IFREG | 04751);
	assert_int_equal(file->ctime, 50);
	assert_int_equal(file->size, 0);
	a = (struct ns_setattr_args){ .valid = NS_SET_UID | NS_SET_GID,
				      .uid = 7,
				      .gid = 8,
				      .mode = 0,
				      .now = 51 };
	assert_int_equal(ns_setattr(&f->ns, file, &a), 0);
	assert_int_equal(file->uid, 7);
	assert_int_equal(file->gid, 8);
	assert_int_equal(file->mode, S_IFREG | 04751);
	a = (struct ns_setattr_args){ .valid = NS_SET_SIZE,
				      .size = 1ull << 40,
				      .now = 52 };
	assert_int_equal(ns_setattr(&f->ns, file, &a), 0);
	assert_int_equal(file->size, 1ull << 40);
	a = (struct ns_setattr_args){ .valid = NS_SET_ATIME | NS_SET_MTIME,
				      .atime = -5,
				      .mtime = 123456789012345LL,
				      .now = 53 };
	assert_int_equal(ns_setattr(&f->ns, file, &a), 0);
	assert_int_equal(file->atime, -5);
	assert_int_equal(file->mtime, 123456789012345LL);
	assert_int_equal(file->ctime, 53);
	/* Nothing valid: only ctime. */
	a = (struct ns_setattr_args){ .valid = 0, .uid = 99, .now = 54 };
	assert_int_equal(ns_setattr(&f->ns, file, &a), 0);
	assert_int_equal(file->uid, 7);
	assert_int_equal(file->ctime, 54);
	/* Directory mode keeps S_IFDIR. */
	a = (struct ns_setattr_args){ .valid = NS_SET_MODE,
				      .mode = 01777,
				      .now = 55 };
	assert_int_equal(ns_setattr(&f->ns, d, &a), 0);
	assert_int_equal(d->mode, S_IFDIR | 01777);
	check_ns(&f->ns);

	/* Sizes only for regular files; the refusal changes nothing, not
	 * even the other fields asked for in the same call. */
	before = dump_ns(&f->ns);
	a = (struct ns_setattr_args){ .valid = NS_SET_SIZE | NS_SET_UID,
				      .size = 1,
				      .uid = 1,
				      .now = 60 };
	assert_int_equal(ns_setattr(&f->ns, d, &a), -EISDIR);
	assert_int_equal(ns_setattr(&f->ns, l, &a), -EINVAL);
	assert_int_equal(ns_setattr(&f->ns, p, &a), -EINVAL);
	assert_dump(&f->ns, before, "a refused setattr");
	free(before);
}

/* ---- xattrs --------------------------------------------------------- */

static void test_ns_xattr_set_get_list_remove(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *n = mk(f, r, "f", S_IFREG | 0644);
	const void *val;
	size_t vlen;
	char buf[256];
	long len;

	assert_int_equal(ns_xattr_list(&f->ns, n, NULL, 0), 0);
	assert_int_equal(ns_xattr_get(&f->ns, n, "user.a", 6, &val, &vlen),
			 -ENODATA);
	assert_int_equal(ns_xattr_remove(&f->ns, n, "user.a", 6, 9), -ENODATA);
	assert_int_equal(ns_xattr_set(&f->ns, n, "user.a", 6, "one", 3, 10), 0);
	assert_true(n->flags & NODE_XATTR);
	assert_int_equal(n->ctime, 10);
	assert_int_equal(ns_xattr_set(&f->ns, n, "user.b", 6, "", 0, 11), 0);
	assert_int_equal(
		ns_xattr_set(&f->ns, n, "security.c", 10, "\0bin\0", 5, 12), 0);
	assert_int_equal(ns_xattr_set(&f->ns, n, "user.d", 6, "four", 4, 13),
			 0);

	assert_int_equal(ns_xattr_get(&f->ns, n, "user.a", 6, &val, &vlen), 0);
	assert_int_equal(vlen, 3);
	assert_memory_equal(val, "one", 3);
	assert_int_equal(ns_xattr_get(&f->ns, n, "user.b", 6, &val, &vlen), 0);
	assert_int_equal(vlen, 0);
	assert_int_equal(ns_xattr_get(&f->ns, n, "security.c", 10, &val, &vlen),
			 0);
	assert_int_equal(vlen, 5);
	assert_memory_equal(val, "\0bin\0", 5);
	/* Names match whole: no prefixes. */
	assert_int_equal(ns_xattr_get(&f->ns, n, "user.", 5, &val, &vlen),
			 -ENODATA);
	assert_int_equal(ns_xattr_get(&f->ns, n, "user.aa", 7, &val, &vlen),
			 -ENODATA);

	/* Replace. */
	assert_int_equal(ns_xattr_set(&f->ns, n, "user.a", 6, "ONE!", 4, 14),
			 0);
	assert_int_equal(ns_xattr_get(&f->ns, n, "user.a", 6, &val, &vlen), 0);
	assert_int_equal(vlen, 4);
	assert_memory_equal(val, "ONE!", 4);

	/* List: measure, exact fit, one byte short. */
	len = ns_xattr_list(&f->ns, n, NULL, 0);
	assert_int_equal(len, 7 + 7 + 11 + 7);
	assert_int_equal(ns_xattr_list(&f->ns, n, buf, (size_t)len), len);
	{
		/* The four names, each NUL-terminated, in any order. */
		const char *want[] = { "user.a", "user.b", "security.c",
				       "user.d" };
		int seen = 0;

		for (long off = 0; off < len;
		     off += (long)strlen(buf + off) + 1)
			for (int k = 0; k < 4; k++)
				if (!strcmp(buf + off, want[k]))
					seen |= 1 << k;
		assert_int_equal(seen, 15);
	}
	memset(buf, 'Z', sizeof(buf));
	assert_int_equal(ns_xattr_list(&f->ns, n, buf, (size_t)len - 1),
			 -ERANGE);
	assert_int_equal(ns_xattr_list(&f->ns, n, buf, 0), -ERANGE);

	/* Remove, down to none. */
	assert_int_equal(ns_xattr_remove(&f->ns, n, "user.b", 6, 20), 0);
	assert_int_equal(n->ctime, 20);
	assert_int_equal(ns_xattr_get(&f->ns, n, "user.b", 6, &val, &vlen),
			 -ENODATA);
	assert_int_equal(ns_xattr_remove(&f->ns, n, "user.b", 6, 21), -ENODATA);
	assert_int_equal(n->ctime, 20);
	assert_int_equal(ns_xattr_list(&f->ns, n, NULL, 0), 7 + 11 + 7);
	assert_int_equal(ns_xattr_get(&f->ns, n, "user.d", 6, &val, &vlen), 0);
	assert_memory_equal(val, "four", 4);
	assert_int_equal(ns_xattr_remove(&f->ns, n, "user.a", 6, 22), 0);
	assert_int_equal(ns_xattr_remove(&f->ns, n, "security.c", 10, 23), 0);
	assert_int_equal(ns_xattr_remove(&f->ns, n, "user.d", 6, 24), 0);
	assert_false(n->flags & NODE_XATTR);
	assert_int_equal(ns_xattr_list(&f->ns, n, NULL, 0), 0);
	assert_int_equal(f->ns.misc_bytes, 0);
	check_ns(&f->ns);
}

static int count_xattr(const void *name, size_t nlen, const void *value,
		       size_t vlen, void *arg)
{
	(void)name;
	(void)value;
	*(size_t *)arg += nlen + vlen;
	return nlen == 3 ? 7 : 0;
}

/* Attribute @i of node @k in test_ns_xattr_set_many(), into @buf: its
 * length. */
static size_t many_name(char *buf, size_t size, int k, int i)
{
	int n = snprintf(buf, size, "user.%d.%d", k, i);

	assert_true(n > 0 && (size_t)n < size);
	return (size_t)n;
}

/* Many attributes on several kinds of node, each kept apart. */
static void test_ns_xattr_set_many(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f);
	struct node *nodes[] = { r, mk(f, r, "d", S_IFDIR | 0755),
				 mk(f, r, "l", S_IFLNK | 0777),
				 mk(f, r, "f", S_IFREG | 0644) };
	char name[32], value[64];
	const void *val;
	size_t vlen, total = 0;

	for (int k = 0; k < 4; k++)
		for (int i = 0; i < 50; i++) {
			size_t n = many_name(name, sizeof(name), k, i);
			int v = snprintf(value, sizeof(value), "value %d",
					 i * k);

			assert_int_equal(ns_xattr_set(&f->ns, nodes[k], name, n,
						      value, (size_t)v, 1),
					 0);
		}
	for (int k = 0; k < 4; k++)
		for (int i = 0; i < 50; i++) {
			size_t n = many_name(name, sizeof(name), k, i);
			int v = snprintf(value, sizeof(value), "value %d",
					 i * k);

			assert_int_equal(ns_xattr_get(&f->ns, nodes[k], name, n,
						      &val, &vlen),
					 0);
			assert_int_equal(vlen, (size_t)v);
			assert_memory_equal(val, value, vlen);
			/* Not on the neighbour. */
			assert_int_equal(ns_xattr_get(&f->ns,
						      nodes[(k + 1) % 4], name,
						      n, &val, &vlen),
					 -ENODATA);
		}
	assert_int_equal(
		ns_xattr_foreach(&f->ns, nodes[3], count_xattr, &total), 0);
	assert_true(total > 50 * 8);
	assert_int_equal(ns_xattr_set(&f->ns, nodes[3], "abc", 3, "", 0, 1), 0);
	assert_int_equal(
		ns_xattr_foreach(&f->ns, nodes[3], count_xattr, &total), 7);
	/* Unlinking the nodes frees their attributes. */
	assert_int_equal(unlink_rc(f, r, "l", false), 0);
	assert_int_equal(unlink_rc(f, r, "f", false), 0);
	assert_int_equal(unlink_rc(f, r, "d", false), 0);
	for (int i = 0; i < 50; i++) {
		int n = snprintf(name, sizeof(name), "user.0.%d", i);

		assert_int_equal(ns_xattr_remove(&f->ns, r, name, n, 1), 0);
	}
	assert_int_equal(f->ns.misc_bytes, 0);
	check_ns(&f->ns);
}

/* ---- readdir: seek, cursors, tombstones ----------------------------- */

/* The first edge with id > @cookie, the slow way. */
static struct edge *seek_slow(const struct node *dir, uint64_t cookie)
{
	struct edge *e = dir->u.dir->head;

	while (e && e->id <= cookie)
		e = e->next;
	return e;
}

/* ns_dir_seek() against a walk of the list for every cookie up to past
 * the last edge (in one pass: the walk advances with the cookie). */
static void check_seek_all(const struct node *dir)
{
	struct edge *e = dir->u.dir->head;
	uint64_t last = dir->u.dir->tail ? dir->u.dir->tail->id : 0;

	for (uint64_t cookie = 0; cookie <= last + 2; cookie++) {
		while (e && e->id <= cookie)
			e = e->next;
		if (ns_dir_seek(dir, cookie) != e)
			fail_msg(
				"seek(%llu): got edge %llu, want %llu",
				(unsigned long long)cookie,
				(unsigned long long)(ns_dir_seek(dir, cookie) ?
							     ns_dir_seek(dir,
									 cookie)
								     ->id :
							     0),
				(unsigned long long)(e ? e->id : 0));
	}
	assert_null(ns_dir_seek(dir, UINT64_MAX));
}

static void test_ns_dir_seek_sparse_index(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "big", S_IFDIR | 0755);
	struct node *other = mk(f, r, "other", S_IFDIR | 0755);
	enum { N = 10000 };
	char name[32];
	unsigned removed = 0;
	bool *gone = calloc(N, sizeof(*gone));

	assert_non_null(gone);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "e%05d", i);
		mk(f, d, name, S_IFREG | 0644);
		/* Gaps in the ids: edges of another directory in between. */
		if (rng_below(&f->rng, 10) == 0) {
			snprintf(name, sizeof(name), "o%05d", i);
			mk(f, other, name, S_IFREG | 0644);
		}
	}
	assert_true(d->u.dir->index_len >= N / NS_INDEX_STRIDE - 1);
	check_seek_all(d);
	check_ns(&f->ns);

	/* Random unlinks, indexed edges among them; check as we go. */
	for (int round = 0; round < 4; round++) {
		for (int k = 0; k < N / 8; k++) {
			int i = (int)rng_below(&f->rng, N);

			if (gone[i])
				continue;
			snprintf(name, sizeof(name), "e%05d", i);
			assert_int_equal(unlink_rc(f, d, name, false), 0);
			gone[i] = true;
			removed++;
		}
		check_seek_all(d);
		check_ns(&f->ns);
		/* New edges at the end keep the index growing. */
		for (int k = 0; k < 300; k++) {
			snprintf(name, sizeof(name), "r%d-%d", round, k);
			mk(f, d, name, S_IFREG | 0644);
		}
		check_seek_all(d);
	}
	assert_true(removed > N / 3);
	/* Runs of consecutive unlinks empty whole index gaps. */
	for (int i = 2000; i < 4000; i++) {
		if (gone[i])
			continue;
		snprintf(name, sizeof(name), "e%05d", i);
		assert_int_equal(unlink_rc(f, d, name, false), 0);
		gone[i] = true;
	}
	check_seek_all(d);
	check_ns(&f->ns);
	/* The seek is cheap: the index keeps up. */
	assert_true(d->u.dir->index_len >=
		    d->u.dir->nentries / (4 * NS_INDEX_STRIDE));
	free(gone);
}

/*
 * Unlinks in listing order (rm -rf, RemoveAll) drop the index's first
 * slot each time it empties: O(1), not a move of the whole index (issue
 * 29); appends after that reuse the room, and seeks stay right.
 */
static void test_ns_index_front_drops(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "big", S_IFDIR | 0755);
	enum { N = 20000 };
	uint32_t len0, cap0;
	char name[32];

	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "e%05d", i);
		mk(f, d, name, S_IFREG | 0644);
	}
	len0 = d->u.dir->index_len;
	cap0 = d->u.dir->index_cap;
	for (int i = 0; i < N / 2; i++) {
		snprintf(name, sizeof(name), "e%05d", i);
		assert_int_equal(unlink_rc(f, d, name, false), 0);
	}
	/* Half the slots dropped at the front, none moved. */
	assert_true(d->u.dir->index_skip >= len0 / 2 - 1);
	assert_int_equal(d->u.dir->index_skip + d->u.dir->index_len, len0);
	check_seek_all(d);
	check_ns(&f->ns);
	/* Appends fill the allocation, then slide back into the room the
	 * drops left (at most doubling it). */
	for (int i = 0; i < N / 2; i++) {
		snprintf(name, sizeof(name), "n%05d", i);
		mk(f, d, name, S_IFREG | 0644);
	}
	assert_true(d->u.dir->index_cap <= 2 * cap0);
	check_seek_all(d);
	check_ns(&f->ns);
	for (int i = N / 2; i < N; i++) {
		snprintf(name, sizeof(name), "e%05d", i);
		assert_int_equal(unlink_rc(f, d, name, false), 0);
	}
	check_seek_all(d);
	check_ns(&f->ns);
}

static void test_ns_cursor_set_tombstones(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "d", S_IFDIR | 0755);
	struct cursor *c0 = &f->cur[0], *c1 = &f->cur[1];
	struct edge *e3, *e4, *e5;
	char name[16];

	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		mk(f, d, name, S_IFREG | 0644);
	}
	e3 = edge_of(f, d, "n3");
	e4 = edge_of(f, d, "n4");
	e5 = edge_of(f, d, "n5");
	/* Rest a cursor on n3 and one on n4. */
	ns_cursor_set(&f->ns, c0, d, e3);
	ns_cursor_set(&f->ns, c1, d, e4);
	assert_ptr_equal(c0->dir, d);
	assert_ptr_equal(c0->pos, e3);
	assert_int_equal(e3->pins, 1);
	check_ns(&f->ns);

	/* Unlinking a pinned edge leaves a tombstone in the list. */
	assert_int_equal(unlink_rc(f, d, "n3", false), 0);
	assert_null(e3->child);
	assert_true(in_list(d, e3));
	assert_null(edge_of(f, d, "n3"));
	assert_int_equal(d->u.dir->tombstones, 1);
	assert_int_equal(d->u.dir->nentries, 199);
	assert_int_equal(list_len(d), 200);
	assert_ptr_equal(ns_dir_seek(d, e3->id - 1), e3);
	assert_ptr_equal(ns_edge_live(ns_dir_seek(d, e3->id - 1)), e4);
	assert_ptr_equal(ns_dir_seek(d, e3->id), e4);
	check_ns(&f->ns);
	/* The name can be used again meanwhile. */
	mk(f, d, "n3", S_IFREG | 0644);
	assert_ptr_not_equal(edge_of(f, d, "n3"), e3);
	check_ns(&f->ns);

	/* Two cursors on one tombstone: freed when the last one leaves. */
	ns_cursor_set(&f->ns, c1, d, e3);
	assert_int_equal(e3->pins, 2);
	assert_int_equal(e4->pins, 0);
	ns_cursor_set(&f->ns, c0, d, e5);
	assert_true(in_list(d, e3));
	assert_int_equal(e3->pins, 1);
	check_ns(&f->ns);
	ns_cursor_set(&f->ns, c1, d, e4);
	assert_false(in_list(d, e3));
	assert_int_equal(d->u.dir->tombstones, 0);
	check_ns(&f->ns);

	/* Clearing unpins; a cursor before the first entry pins nothing. */
	assert_int_equal(unlink_rc(f, d, "n4", false), 0);
	assert_true(in_list(d, e4));
	ns_cursor_clear(&f->ns, c1);
	assert_null(c1->dir);
	assert_null(c1->pos);
	assert_false(in_list(d, e4));
	ns_cursor_set(&f->ns, c1, d, NULL);
	assert_ptr_equal(c1->dir, d);
	assert_null(c1->pos);
	check_ns(&f->ns);
	/* Resting on a live edge then unlinking it; seek skips nothing. */
	assert_int_equal(unlink_rc(f, d, "n5", false), 0);
	assert_ptr_equal(ns_dir_seek(d, e5->id - 1), e5);
	check_seek_all(d);
	/* Moving the cursor to another directory frees it here. */
	ns_cursor_set(&f->ns, c0, r, NULL);
	assert_false(in_list(d, e5));
	assert_int_equal(d->u.dir->tombstones, 0);
	assert_ptr_equal(c0->dir, r);
	check_ns(&f->ns);
	ns_cursor_clear(&f->ns, c0);
	ns_cursor_clear(&f->ns, c0);
	ns_cursor_clear(&f->ns, c1);
	check_ns(&f->ns);
}

/* Tombstones among indexed edges: seek still lands on the first edge past
 * the cookie, tombstone or not. */
static void test_ns_dir_seek_tombstones(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "d", S_IFDIR | 0755);
	enum { N = 1000 };
	char name[16];
	struct edge *pinned[NCURSORS];

	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		mk(f, d, name, S_IFREG | 0644);
	}
	/* Pin indexed edges and their neighbours, then unlink them. */
	for (int c = 0; c < NCURSORS; c++) {
		struct edge *e = d->u.dir->index[c * 3];

		if (c % 2)
			e = e->next;
		pinned[c] = e;
		ns_cursor_set(&f->ns, &f->cur[c], d, e);
		assert_int_equal(
			ns_unlink(&f->ns, d, e->name, e->namelen, false, 1), 0);
		assert_null(e->child);
	}
	for (int i = 0; i < N; i += 3) {
		snprintf(name, sizeof(name), "n%d", i);
		if (edge_of(f, d, name))
			assert_int_equal(unlink_rc(f, d, name, false), 0);
	}
	check_seek_all(d);
	check_ns(&f->ns);
	for (int c = 0; c < NCURSORS; c++) {
		assert_ptr_equal(ns_dir_seek(d, pinned[c]->id - 1),
				 seek_slow(d, pinned[c]->id - 1));
		ns_cursor_clear(&f->ns, &f->cur[c]);
	}
	assert_int_equal(d->u.dir->tombstones, 0);
	check_seek_all(d);
	check_ns(&f->ns);
}

/* A directory going away unsets the cursors resting in it. */
static void test_ns_cursor_cleared_by_rmdir(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "d", S_IFDIR | 0755);
	struct node *d2 = mk(f, r, "d2", S_IFDIR | 0755);
	struct cursor *c0 = &f->cur[0], *c1 = &f->cur[1], *c2 = &f->cur[2];

	mk(f, d, "a", S_IFREG | 0644);
	mk(f, d, "b", S_IFREG | 0644);
	ns_cursor_set(&f->ns, c0, d, edge_of(f, d, "a"));
	ns_cursor_set(&f->ns, c1, d, NULL);
	ns_cursor_set(&f->ns, c2, r, edge_of(f, r, "d"));
	/* Emptied, with a tombstone still pinned, then removed. */
	assert_int_equal(unlink_rc(f, d, "a", false), 0);
	assert_int_equal(unlink_rc(f, d, "b", false), 0);
	assert_int_equal(d->u.dir->tombstones, 1);
	assert_int_equal(unlink_rc(f, r, "d", false), 0);
	assert_null(c0->dir);
	assert_null(c0->pos);
	assert_null(c1->dir);
	/* The cursor on d's own name in the root now rests on a tombstone. */
	assert_ptr_equal(c2->dir, r);
	assert_null(c2->pos->child);
	check_ns(&f->ns);
	ns_cursor_clear(&f->ns, c0);
	ns_cursor_set(&f->ns, c2, r, NULL);
	check_ns(&f->ns);

	/* Same when the directory is replaced by a rename. */
	ns_cursor_set(&f->ns, c0, d2, NULL);
	mk(f, r, "src", S_IFDIR | 0755);
	assert_int_equal(rename_rc(f, r, "src", r, "d2", 0, false), 0);
	assert_null(c0->dir);
	check_ns(&f->ns);
	/* Cursors still set at ns_release() are unset there. */
	ns_cursor_set(&f->ns, c0, r, edge_of(f, r, "d2"));
}

/* ---- atomicity ------------------------------------------------------ */

/* Build a namespace with a bit of everything; return a few of its nodes. */
struct scene {
	struct node *a, *b, *file, *linked, *sym, *big, *sub;
};

static void build_scene(struct fixture *f, struct scene *s, int bigsize)
{
	struct node *r = root(f);
	char name[32];

	s->a = mk(f, r, "a", S_IFDIR | 0755);
	s->b = mk(f, r, "b", S_IFDIR | 0755);
	s->sub = mk(f, s->a, "sub", S_IFDIR | 0755);
	s->file = mk(f, s->a, "file", S_IFREG | 0644);
	s->linked = mk(f, s->a, "linked", S_IFREG | 0644);
	assert_int_equal(link_rc(f, s->linked, s->b, "alias"), 0);
	s->sym = mk(f, s->b, "sym", S_IFLNK | 0777);
	mk(f, s->a, "mv", S_IFREG | 0644);
	s->big = mk(f, r, "big", S_IFDIR | 0755);
	for (int i = 0; i < bigsize; i++) {
		snprintf(name, sizeof(name), "big%d", i);
		mk(f, s->big, name, S_IFREG | 0644);
	}
	/* Two attributes fill the first array of them. */
	assert_int_equal(
		ns_xattr_set(&f->ns, s->file, "user.x", 6, "1", 1, f->now), 0);
	assert_int_equal(
		ns_xattr_set(&f->ns, s->file, "user.y", 6, "2", 1, f->now), 0);
	ns_cursor_set(&f->ns, &f->cur[0], s->a, edge_of(f, s->a, "file"));
}

static void refused(struct fixture *f, const char *before, int rc, int want,
		    const char *what)
{
	if (rc != want)
		fail_msg("%s: %d, expected %d", what, rc, want);
	assert_dump(&f->ns, before, what);
}

/* Every refused change leaves everything as it was. */
static void test_ns_atomic_on_error(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f);
	struct scene s;
	struct ns_setattr_args sa = { .valid = NS_SET_SIZE | NS_SET_MODE,
				      .mode = 0,
				      .size = 9,
				      .now = 1 };
	struct ns_create_args ca = { .mode = S_IFREG, .now = 1 };
	char *before;

	build_scene(f, &s, 20);
	mk(f, s.sub, "inner", S_IFREG | 0644);
	check_ns(&f->ns);
	before = dump_ns(&f->ns);
	refused(f, before, create_rc(f, s.a, "file", S_IFREG), -EEXIST,
		"create_rc(f, s.a, \"file\", S_IFREG)");
	refused(f, before, create_rc(f, s.big, "big7", S_IFDIR), -EEXIST,
		"create_rc(f, s.big, \"big7\", S_IFDIR)");
	refused(f, before, create_rc(f, s.file, "x", S_IFREG), -ENOTDIR,
		"create_rc(f, s.file, \"x\", S_IFREG)");
	refused(f, before, create_rc(f, s.a, "x", 0), -EINVAL,
		"create_rc(f, s.a, \"x\", 0)");
	ca.ino = s.file->ino;
	ca.edge = f->ns.next_edge;
	refused(f, before, ns_create(&f->ns, s.b, "fresh", 5, &ca, NULL),
		-EEXIST, "ns_create(&f->ns, s.b, \"fresh\", 5, &ca, NULL)");
	refused(f, before, link_rc(f, s.file, s.a, "linked"), -EEXIST,
		"link_rc(f, s.file, s.a, \"linked\")");
	refused(f, before, link_rc(f, s.file, s.big, "big3"), -EEXIST,
		"link_rc(f, s.file, s.big, \"big3\")");
	refused(f, before, link_rc(f, s.sub, s.b, "x"), -EPERM,
		"link_rc(f, s.sub, s.b, \"x\")");
	refused(f, before, link_rc(f, s.file, s.file, "x"), -ENOTDIR,
		"link_rc(f, s.file, s.file, \"x\")");
	refused(f, before, unlink_rc(f, s.a, "nosuch", true), -ENOENT,
		"unlink_rc(f, s.a, \"nosuch\", true)");
	refused(f, before, unlink_rc(f, s.big, "big99", false), -ENOENT,
		"unlink_rc(f, s.big, \"big99\", false)");
	refused(f, before, unlink_rc(f, s.a, "sub", false), -ENOTEMPTY,
		"unlink_rc(f, s.a, \"sub\", false)");
	refused(f, before, unlink_rc(f, r, "big", true), -ENOTEMPTY,
		"unlink_rc(f, r, \"big\", true)");
	refused(f, before, unlink_rc(f, s.sym, "x", false), -ENOTDIR,
		"unlink_rc(f, s.sym, \"x\", false)");
	refused(f, before, rename_rc(f, s.a, "nosuch", s.b, "x", 0, false),
		-ENOENT, "rename_rc(f, s.a, \"nosuch\", s.b, \"x\", 0, false)");
	refused(f, before,
		rename_rc(f, s.a, "file", s.b, "alias", RENAME_NOREPLACE, true),
		-EEXIST,
		"rename_rc(f, s.a, \"file\", s.b, \"alias\", RENAME_NOREPLACE, true)");
	refused(f, before, rename_rc(f, s.a, "file", s.a, "sub", 0, true),
		-EISDIR, "rename_rc(f, s.a, \"file\", s.a, \"sub\", 0, true)");
	refused(f, before, rename_rc(f, r, "b", s.a, "file", 0, false),
		-ENOTDIR, "rename_rc(f, r, \"b\", s.a, \"file\", 0, false)");
	refused(f, before, rename_rc(f, r, "big", r, "a", 0, false), -ENOTEMPTY,
		"rename_rc(f, r, \"big\", r, \"a\", 0, false)");
	refused(f, before, rename_rc(f, r, "a", s.sub, "a", 0, false), -EINVAL,
		"rename_rc(f, r, \"a\", s.sub, \"a\", 0, false)");
	refused(f, before,
		rename_rc(f, r, "a", s.sub, "inner", RENAME_EXCHANGE, false),
		-EINVAL,
		"rename_rc(f, r, \"a\", s.sub, \"inner\", RENAME_EXCHANGE, false)");
	refused(f, before,
		rename_rc(f, s.a, "file", s.b, "none", RENAME_EXCHANGE, false),
		-ENOENT,
		"rename_rc(f, s.a, \"file\", s.b, \"none\", RENAME_EXCHANGE, false)");
	refused(f, before, rename_rc(f, s.a, "file", s.b, "x", 1u << 5, false),
		-EINVAL,
		"rename_rc(f, s.a, \"file\", s.b, \"x\", 1u << 5, false)");
	refused(f, before, ns_setattr(&f->ns, s.sub, &sa), -EISDIR,
		"ns_setattr(&f->ns, s.sub, &sa)");
	refused(f, before, ns_setattr(&f->ns, s.sym, &sa), -EINVAL,
		"ns_setattr(&f->ns, s.sym, &sa)");
	refused(f, before, ns_release_orphan(&f->ns, s.file), -EINVAL,
		"ns_release_orphan(&f->ns, s.file)");
	refused(f, before, ns_xattr_remove(&f->ns, s.file, "user.q", 6, 1),
		-ENODATA, "ns_xattr_remove(&f->ns, s.file, \"user.q\", 6, 1)");
	refused(f, before, ns_xattr_remove(&f->ns, s.sub, "user.x", 6, 1),
		-ENODATA, "ns_xattr_remove(&f->ns, s.sub, \"user.x\", 6, 1)");
	refused(f, before,
		(int)ns_xattr_list(&f->ns, s.file, (char[4]){ 0 }, 4), -ERANGE,
		"(int)ns_xattr_list(&f->ns, s.file, (char[4]){ 0 }, 4)");
	free(before);
	check_ns(&f->ns);
}

/*
 * One change to try under allocation failure, on a scene built fresh for
 * each attempt.
 */
struct oom_case {
	const char *what;
	int bigsize;
	int (*op)(struct fixture *f, struct scene *s);
};

static int op_create_file(struct fixture *f, struct scene *s)
{
	return create_rc(f, s->big, "new", S_IFREG | 0644);
}

static int op_create_dir(struct fixture *f, struct scene *s)
{
	return create_rc(f, s->big, "newdir", S_IFDIR | 0755);
}

static int op_create_symlink(struct fixture *f, struct scene *s)
{
	return create_rc(f, s->big, "newlink", S_IFLNK | 0777);
}

static int op_link(struct fixture *f, struct scene *s)
{
	return link_rc(f, s->file, s->big, "hard");
}

static int op_unlink(struct fixture *f, struct scene *s)
{
	return unlink_rc(f, s->big, "big0", false);
}

static int op_unlink_keep(struct fixture *f, struct scene *s)
{
	return unlink_rc(f, s->a, "file", true);
}

static int op_rename_within(struct fixture *f, struct scene *s)
{
	return rename_rc(f, s->big, "big0", s->big, "moved", 0, false);
}

static int op_rename_across(struct fixture *f, struct scene *s)
{
	return rename_rc(f, s->a, "sub", s->big, "moved", 0, false);
}

static int op_rename_replace_keep(struct fixture *f, struct scene *s)
{
	return rename_rc(f, s->b, "sym", s->a, "file", 0, true);
}

static int op_rename_replace_into_big(struct fixture *f, struct scene *s)
{
	return rename_rc(f, s->a, "mv", s->big, "big0", 0, true);
}

static int op_exchange(struct fixture *f, struct scene *s)
{
	return rename_rc(f, s->a, "sub", s->b, "sym", RENAME_EXCHANGE, false);
}

static int op_xattr_new(struct fixture *f, struct scene *s)
{
	return ns_xattr_set(&f->ns, s->sub, "user.n", 6, "v", 1, 5);
}

static int op_xattr_more(struct fixture *f, struct scene *s)
{
	return ns_xattr_set(&f->ns, s->file, "user.z", 6, "vv", 2, 5);
}

static int op_xattr_replace(struct fixture *f, struct scene *s)
{
	return ns_xattr_set(&f->ns, s->file, "user.x", 6, "longer", 6, 5);
}

/* Count the allocations @op makes when none fails. */
static long count_allocs(struct fixture *f, const struct oom_case *c)
{
	struct scene s;
	long n;

	ns_release(&f->ns);
	assert_int_equal(ns_init(&f->ns, f->now), 0);
	build_scene(f, &s, c->bigsize);
	fail_alloc(LONG_MAX);
	assert_int_equal(c->op(f, &s), 0);
	n = alloc_seen;
	fail_at = -1;
	return n;
}

static void oom_case(struct fixture *f, const struct oom_case *c)
{
	long total = count_allocs(f, c);

	for (long k = 0; k < total; k++) {
		struct scene s;
		char *before;
		int rc;

		ns_release(&f->ns);
		assert_int_equal(ns_init(&f->ns, f->now), 0);
		build_scene(f, &s, c->bigsize);
		before = dump_ns(&f->ns);
		fail_alloc(k);
		rc = c->op(f, &s);
		fail_at = -1;
		if (rc == 0) {
			/* That allocation was optional (an accelerator). */
			check_ns(&f->ns);
		} else {
			char what[96];

			if (rc != -ENOMEM)
				fail_msg("%s (bigsize %d), allocation %ld "
					 "failed: %d",
					 c->what, c->bigsize, k, rc);
			snprintf(what, sizeof(what),
				 "%s (bigsize %d) failing allocation %ld",
				 c->what, c->bigsize, k);
			assert_dump(&f->ns, before, what);
			check_ns(&f->ns);
		}
		free(before);
	}
}

/* Fail each allocation of each kind of change in turn, in directories
 * around the sizes where tables are built, resized and indexed. */
static void test_ns_atomic_on_enomem(void **state)
{
	struct fixture *f = *state;
	static const struct oom_case cases[] = {
		{ "create file", 0, op_create_file },
		{ "create dir", 0, op_create_dir },
		{ "create symlink", 0, op_create_symlink },
		{ "link", 0, op_link },
		{ "unlink", 0, op_unlink },
		{ "unlink keep", 0, op_unlink_keep },
		{ "rename within", 0, op_rename_within },
		{ "rename across", 0, op_rename_across },
		{ "rename replace keep", 0, op_rename_replace_keep },
		{ "rename replace into big", 0, op_rename_replace_into_big },
		{ "exchange", 0, op_exchange },
		{ "xattr new", 0, op_xattr_new },
		{ "xattr more", 0, op_xattr_more },
		{ "xattr replace", 0, op_xattr_replace },
	};
	static const int sizes[] = { 1, 3, 4, 7, 8, 9, 11, 12, 13, 24, 63, 64 };

	for (size_t i = 0; i < SW_ARRAY_SIZE(cases); i++) {
		for (size_t k = 0; k < SW_ARRAY_SIZE(sizes); k++) {
			struct oom_case c = cases[i];

			c.bigsize = sizes[k];
			oom_case(f, &c);
		}
	}
}

/* ns_init() itself: every failure is -ENOMEM and leaks nothing. */
static void test_ns_init_enomem(void **state)
{
	struct fixture *f = *state;

	ns_release(&f->ns);
	f->inited = false;
	for (long k = 0;; k++) {
		int rc;

		fail_alloc(k);
		rc = ns_init(&f->ns, 1);
		fail_at = -1;
		if (rc == 0)
			break;
		assert_int_equal(rc, -ENOMEM);
		assert_true(k < 100);
	}
	f->inited = true;
	check_ns(&f->ns);
}

/* ---- everything at random ------------------------------------------- */

/*
 * Random changes over a small set of names and directories, so that
 * collisions, replacements, exchanges, emptied directories and cursors on
 * tombstones are common; the invariants are checked after every step.
 */
static void test_ns_rename_random_invariants(void **state)
{
	struct fixture *f = *state;
	struct node *dirs[64];
	size_t ndirs = 1;
	char sname[8], dname[8];
	int ok = 0;

	dirs[0] = root(f);
	for (int step = 0; step < 8000; step++) {
		struct node *d1 = dirs[rng_below(&f->rng, ndirs)];
		struct node *d2 = dirs[rng_below(&f->rng, ndirs)];
		unsigned what = (unsigned)rng_below(&f->rng, 100);
		struct node *n;
		int rc;

		snprintf(sname, sizeof(sname), "n%u",
			 (unsigned)rng_below(&f->rng, 12));
		snprintf(dname, sizeof(dname), "n%u",
			 (unsigned)rng_below(&f->rng, 12));
		if (what < 25) {
			bool dir = rng_below(&f->rng, 3) == 0 && ndirs < 64;

			n = NULL;
			rc = create_full(f, d1, sname,
					 dir ? S_IFDIR | 0755 : S_IFREG | 0644,
					 NULL, &n);
			if (rc == 0 && dir)
				dirs[ndirs++] = n;
		} else if (what < 35) {
			struct edge *e = edge_of(f, d1, sname);

			rc = e ? link_rc(f, e->child, d2, dname) : -ENOENT;
		} else if (what < 55) {
			struct edge *e = edge_of(f, d1, sname);
			struct node *gone = e ? e->child : NULL;
			bool gone_dir = gone && ns_is_dir(gone);

			/* @gone may be freed: compare the pointer only. */
			rc = unlink_rc(f, d1, sname, rng_below(&f->rng, 2));
			if (rc == 0 && gone_dir) {
				for (size_t i = 0; i < ndirs; i++)
					if (dirs[i] == gone)
						dirs[i] = dirs[--ndirs];
			}
		} else if (what < 90) {
			static const unsigned flags[] = { 0, 0, 0,
							  RENAME_NOREPLACE,
							  RENAME_EXCHANGE };
			struct edge *de = edge_of(f, d2, dname);
			struct node *victim = de ? de->child : NULL;
			bool victim_dir = victim && ns_is_dir(victim);
			unsigned fl = flags[rng_below(&f->rng, 5)];

			rc = rename_rc(f, d1, sname, d2, dname, fl,
				       rng_below(&f->rng, 2));
			/* A replaced directory is gone. */
			if (rc == 0 && victim_dir && fl != RENAME_EXCHANGE &&
			    child(f, d2, dname) != victim) {
				for (size_t i = 0; i < ndirs; i++)
					if (dirs[i] == victim)
						dirs[i] = dirs[--ndirs];
			}
		} else if (what < 96) {
			/* Rest a cursor somewhere in d1 (tombstones follow
			 * from later unlinks), or take it away. */
			struct cursor *c =
				&f->cur[rng_below(&f->rng, NCURSORS)];
			struct edge *e = ns_dir_seek(
				d1, rng_below(&f->rng, f->ns.next_edge));

			if (rng_below(&f->rng, 4) == 0)
				ns_cursor_clear(&f->ns, c);
			else
				ns_cursor_set(&f->ns, c, d1, e);
			rc = 0;
		} else {
			/* Release the orphans. */
			struct unit_nodevec nv;

			unit_all_nodes(&f->ns, &nv);
			for (size_t i = 0; i < nv.n; i++)
				if (nv.v[i]->flags & NODE_ORPHAN)
					assert_int_equal(
						ns_release_orphan(&f->ns,
								  nv.v[i]),
						0);
			free(nv.v);
			rc = 0;
		}
		if (rc == 0)
			ok++;
		else if (rc != -EEXIST && rc != -ENOENT && rc != -ENOTEMPTY &&
			 rc != -EISDIR && rc != -ENOTDIR && rc != -EINVAL &&
			 rc != -EPERM)
			fail_msg("step %d: unexpected %d", step, rc);
		check_ns(&f->ns);
	}
	assert_true(ok > 1500);
	/* Cursors left resting are unset by ns_release() in teardown. */
}

/* Creating and removing a lot gives back all accounted memory. */
static void test_ns_memory_returns_to_baseline(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d;
	size_t dir_bytes = f->ns.dir_bytes, misc = f->ns.misc_bytes;
	char name[32];

	assert_int_equal(misc, 0);
	assert_true(ns_memory(&f->ns) > 0);
	d = mk(f, r, "d", S_IFDIR | 0755);
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "entry%d", i);
		mk(f, d, name, i % 3 ? S_IFREG | 0644 : S_IFLNK | 0777);
	}
	assert_true(f->ns.dir_bytes > dir_bytes + 3000 / NS_INDEX_STRIDE * 8);
	assert_int_equal(f->ns.misc_bytes, 1000 * 6);
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "entry%d", i);
		assert_int_equal(unlink_rc(f, d, name, false), 0);
		if (i % 500 == 0)
			check_ns(&f->ns);
	}
	assert_int_equal(unlink_rc(f, r, "d", false), 0);
	while (ns_housekeep(&f->ns))
		;
	assert_int_equal(f->ns.dir_bytes, dir_bytes);
	assert_int_equal(f->ns.misc_bytes, 0);
	assert_int_equal(f->ns.nedges, 0);
	assert_int_equal(f->ns.nnodes, 1);
	check_ns(&f->ns);
}

/*
 * A directory's name table that started growing finishes through
 * ns_housekeep() alone, when no more entries come: the old array must not
 * stay allocated (and counted) for as long as nobody touches the
 * directory.
 */
static void test_ns_housekeep_finishes_name_resize(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *d = mk(f, r, "d", S_IFDIR | 0755);
	struct htab *names = &d->u.dir->names;
	size_t during, after;
	char name[32];
	int i;

	/* Create until a resize is under way, then stop. */
	for (i = 0; i < 200000 && !names->old; i++) {
		snprintf(name, sizeof(name), "entry%d", i);
		mk(f, d, name, S_IFREG | 0644);
	}
	assert_non_null(names->old);
	during = ns_memory(&f->ns);
	while (ns_housekeep(&f->ns))
		;
	assert_null(names->old);
	after = ns_memory(&f->ns);
	/* The old array (at least half the new one) is gone from the
	 * accounting too. */
	assert_true(after + htab_bytes(names) / 2 <= during);
	assert_int_equal(htab_count(names), (size_t)i);
	for (int k = 0; k < i; k += 97) {
		snprintf(name, sizeof(name), "entry%d", k);
		assert_non_null(child(f, d, name));
	}
	check_ns(&f->ns);
	/* A directory freed in the middle of a resize is forgotten. */
	for (int k = i; !names->old; k++) {
		snprintf(name, sizeof(name), "entry%d", k);
		mk(f, d, name, S_IFREG | 0644);
		i = k + 1;
	}
	for (int k = 0; k < i; k++) {
		snprintf(name, sizeof(name), "entry%d", k);
		assert_int_equal(unlink_rc(f, d, name, false), 0);
	}
	assert_int_equal(unlink_rc(f, r, "d", false), 0);
	while (ns_housekeep(&f->ns))
		;
	assert_int_equal(f->ns.nresizing, 0);
	check_ns(&f->ns);
}

/*
 * ns_subtree_find(): files reached by names below a directory, hard links
 * from elsewhere included, duplicates in the list all marked; nothing
 * outside, no directory, and an unlinked name is not reached.
 */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_ns_subtree_find(void **state)
{
	struct fixture *f = *state;
	struct node *r = root(f), *jail = mk(f, r, "jail", S_IFDIR | 0755);
	struct node *deep =
		mk(f, mk(f, jail, "a", S_IFDIR | 0755), "b", S_IFDIR | 0755);
	struct node *in1 = mk(f, jail, "in1", S_IFREG | 0644);
	struct node *in2 = mk(f, deep, "in2", S_IFREG | 0644);
	struct node *out = mk(f, r, "out", S_IFREG | 0644);
	struct node *linked = mk(f, r, "linked", S_IFREG | 0644);
	struct node *gone = mk(f, deep, "gone", S_IFREG | 0644);
	uint64_t want[8], gone_ino = gone->ino;
	bool found[8] = { false };
	size_t n = 0;

	assert_int_equal(ns_link(&f->ns, linked, deep, "hard", 4,
				 f->ns.next_edge, ++f->now),
			 0);
	assert_int_equal(ns_unlink(&f->ns, deep, "gone", 4, false, ++f->now),
			 0);
	want[n++] = in1->ino;
	want[n++] = in1->ino;
	want[n++] = in2->ino;
	want[n++] = out->ino;
	want[n++] = linked->ino;
	want[n++] = deep->ino;
	want[n++] = gone_ino; /* freed: it had one name */
	qsort(want, n, sizeof(want[0]), cmp_u64);
	assert_int_equal(ns_subtree_find(jail, want, n, found), 4);
	for (size_t i = 0; i < n; i++) {
		bool inside = want[i] == in1->ino || want[i] == in2->ino ||
			      want[i] == linked->ino;

		assert_int_equal(found[i], inside);
	}
	/* The root covers everything but the directory and the unlinked. */
	memset(found, 0, sizeof(found));
	assert_int_equal(ns_subtree_find(r, want, n, found), 5);
	check_ns(&f->ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ns_init_root, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_create_every_type,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_create_errors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_lookup_threshold, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_lookup_binary_names,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_link_rules, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_link_max, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_unlink_errors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_rename_plain, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_rename_over_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_rename_over_dir, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_rename_type_mismatch,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_rename_into_subtree,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_rename_noreplace, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_rename_exchange, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_rename_same_inode,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_ns_release_orphan_after_unlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_setattr_fields, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_ns_xattr_set_get_list_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_xattr_set_many, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_index_front_drops,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_dir_seek_sparse_index,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_cursor_set_tombstones,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_dir_seek_tombstones,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_cursor_cleared_by_rmdir,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_atomic_on_error, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_atomic_on_enomem, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_init_enomem, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_ns_rename_random_invariants, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_ns_memory_returns_to_baseline, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_ns_housekeep_finishes_name_resize, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_ns_subtree_find, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
