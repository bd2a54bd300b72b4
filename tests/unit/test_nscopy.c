/*
 * nscopy.c: snapshot copies made from an image of the source tree.
 *
 * The yardstick is tree_dump(): everything a copy must reproduce (names
 * and their snapshot flags in order, types, modes, owners, times, sizes,
 * chunk ids, symlink targets, device numbers, xattrs, trash times, which
 * names are the same inode) rendered as text with inode numbers left
 * out, so "the copy is the tree as it was" is a string comparison.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "frame.h"
#include "hash.h"
#include "namespace.h"
#include "namespace_i.h"
#include "unit.h"
#include "util.h"

struct fixture {
	struct ns ns;
	int64_t now;
	uint64_t gone[64]; /* chunks the namespace let go of */
	size_t ngone;
};

static void on_chunk_gone(void *arg, const struct chunk *c)
{
	struct fixture *f = arg;

	if (f->ngone < SW_ARRAY_SIZE(f->gone))
		f->gone[f->ngone++] = c->id;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || ns_init(&f->ns, 1000) < 0) {
		free(f);
		return -1;
	}
	f->now = 1000;
	f->ns.chunk_gone = on_chunk_gone;
	f->ns.hook_arg = f;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ns_release(&f->ns);
	free(f);
	return 0;
}

static struct node *mk(struct fixture *f, struct node *dir, const char *name,
		       uint32_t mode)
{
	struct ns_create_args a = {
		.ino = f->ns.next_ino,
		.edge = f->ns.next_edge,
		.mode = mode,
		.uid = 1000 + (uint32_t)(f->now % 7),
		.gid = 100,
		.now = ++f->now,
	};
	struct node *n = NULL;

	if (S_ISLNK(mode)) {
		a.target = "../some/target";
		a.target_len = strlen(a.target);
	}
	if (S_ISCHR(mode) || S_ISBLK(mode))
		a.rdev = 0x0801;
	assert_int_equal(ns_create(&f->ns, dir, name, strlen(name), &a, &n), 0);
	return n;
}

static struct node *child(struct fixture *f, struct node *dir, const char *name)
{
	struct edge *e = ns_lookup(&f->ns, dir, name, strlen(name));

	return e ? e->child : NULL;
}

/* Give file @n @count chunks (every third slot a hole). */
static void give_chunks(struct fixture *f, struct node *n, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++)
		if (i % 3 != 1)
			assert_int_equal(ns_chunk_set(&f->ns, n, i,
						      f->ns.next_chunk, 1),
					 0);
	n->size = (uint64_t)count * SW_CHUNK_SIZE - 100;
}

/* ---- dumping a tree ----------------------------------------------------- */

struct dump {
	struct sw_buf out;
	const struct node *seen[256]; /* nodes with several names */
	size_t nseen;
};

static void dprintf_(struct dump *d, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < sizeof(line));
	assert_int_equal(sw_buf_add(&d->out, line, (size_t)n), 0);
}

static int dump_xattr(const void *name, size_t nlen, const void *value,
		      size_t vlen, void *arg)
{
	dprintf_(arg, " x:%.*s=%.*s", (int)nlen, (const char *)name, (int)vlen,
		 (const char *)value);
	return 0;
}

static void dump_node(struct dump *d, const struct ns *ns, const struct node *n,
		      int depth, const char *name, int namelen, uint8_t flags)
{
	dprintf_(d,
		 "%*s%.*s%s mode=%o uid=%u gid=%u t=%lld/%lld/%lld "
		 "size=%llu",
		 depth * 2, "", namelen, name,
		 flags & EDGE_SNAPSHOT ? "[s]" : "", n->mode, n->uid, n->gid,
		 (long long)n->atime, (long long)n->mtime, (long long)n->ctime,
		 (unsigned long long)n->size);
	if (S_ISDIR(n->mode)) {
		dprintf_(d, " trash=%u", n->u.dir->trashtime);
	} else {
		size_t i;

		if (S_ISLNK(n->mode))
			dprintf_(d, " ->%.*s", (int)n->size, n->u.target);
		if (S_ISCHR(n->mode) || S_ISBLK(n->mode))
			dprintf_(d, " rdev=%llx",
				 (unsigned long long)n->u.rdev);
		for (uint32_t s = 0; s < ns_chunk_slots(n); s++)
			dprintf_(d, " c%u=%llu", s,
				 (unsigned long long)ns_chunk_at(n, s));
		if (n->nlink > 1) {
			for (i = 0; i < d->nseen && d->seen[i] != n; i++)
				;
			if (i == d->nseen) {
				assert_true(d->nseen < SW_ARRAY_SIZE(d->seen));
				d->seen[d->nseen++] = n;
			}
			dprintf_(d, " link#%zu", i);
		}
	}
	ns_xattr_foreach(ns, n, dump_xattr, d);
	dprintf_(d, "\n");
}

static void dump_rec(struct dump *d, const struct ns *ns, const struct node *n,
		     int depth)
{
	if (!S_ISDIR(n->mode))
		return;
	for (const struct edge *e = n->u.dir->head; e; e = e->next) {
		if (!e->child)
			continue;
		dump_node(d, ns, e->child, depth, e->name, e->namelen,
			  e->flags);
		dump_rec(d, ns, e->child, depth + 1);
	}
}

/* The tree at @n as text (free it). Hard links are numbered in the order
 * met, so a tree and its copy dump the same. */
static char *tree_dump(const struct ns *ns, const struct node *n)
{
	struct dump d = { .out = SW_BUF_INIT };
	char *s;

	dump_node(&d, ns, n, 0, "", 0, 0);
	dump_rec(&d, ns, n, 1);
	assert_int_equal(sw_buf_add(&d.out, "", 1), 0);
	s = strdup((const char *)sw_buf_head(&d.out));
	sw_buf_release(&d.out);
	assert_non_null(s);
	return s;
}

/* A tree with one of everything under /src. */
static struct node *build_tree(struct fixture *f)
{
	struct node *src = mk(f, f->ns.root, "src", S_IFDIR | 0755);
	struct node *a = mk(f, src, "a", S_IFDIR | 0700);
	struct node *b = mk(f, a, "b", S_IFDIR | 0750);
	struct node *file = mk(f, b, "file", S_IFREG | 0644);
	struct node *big = mk(f, src, "big", S_IFREG | 0600);

	mk(f, src, "empty", S_IFDIR | 0755);
	mk(f, src, "link", S_IFLNK | 0777);
	mk(f, a, "fifo", S_IFIFO | 0644);
	mk(f, a, "chr", S_IFCHR | 0600);
	mk(f, a, "blk", S_IFBLK | 0600);
	mk(f, b, "sock", S_IFSOCK | 0755);
	give_chunks(f, file, 2);
	give_chunks(f, big, 7);
	assert_int_equal(ns_link(&f->ns, file, src, "file-again", 10,
				 f->ns.next_edge, ++f->now),
			 0);
	/* A third name outside the tree: the copy's count is its own. */
	assert_int_equal(ns_link(&f->ns, file, f->ns.root, "outside", 7,
				 f->ns.next_edge, ++f->now),
			 0);
	assert_int_equal(ns_xattr_set(&f->ns, big, "user.k", 6, "value", 5,
				      ++f->now),
			 0);
	assert_int_equal(
		ns_xattr_set(&f->ns, a, "user.empty", 10, "", 0, ++f->now), 0);
	assert_true(ns_set_eattr(&f->ns, src, "a", 1, true, false, NS_ANY_OWNER,
				 0) == 1);
	a->u.dir->trashtime = 3600;
	for (int i = 0; i < 40; i++) {
		char name[16];

		snprintf(name, sizeof(name), "many%02d", i);
		mk(f, b, name, S_IFREG | 0644);
	}
	return src;
}

/* Apply @img to a copy begun here, cutting it into parts after every
 * @every-th record (0: one part). Returns ns_copy_end()'s result. */
static int64_t copy_from(struct fixture *f, const uint8_t *img, size_t len,
			 size_t every, const char *name, uint64_t *ino)
{
	uint64_t id = f->ns.version + 1;
	size_t off = 0, start = 0, recs = 0;

	assert_int_equal(ns_copy_begin(&f->ns, id, NS_ROOT_INO, name,
				       strlen(name), f->ns.next_chunk),
			 0);
	while (off < len) {
		ssize_t r = ns_copy_record(img + off, len - off);

		assert_true(r > 0);
		off += (size_t)r;
		if (every && ++recs % every == 0) {
			assert_int_equal(ns_copy_part(&f->ns, id, img + start,
						      off - start,
						      f->ns.next_ino,
						      f->ns.next_edge),
					 0);
			start = off;
		}
	}
	if (start < len)
		ns_copy_part(&f->ns, id, img + start, len - start,
			     f->ns.next_ino, f->ns.next_edge);
	return ns_copy_end(&f->ns, id, f->ns.next_edge, 0, ++f->now, ino);
}

static void image_of(struct fixture *f, struct node *src, struct sw_buf *b)
{
	*b = (struct sw_buf)SW_BUF_INIT;
	assert_int_equal(ns_copy_image(&f->ns, src, b), 0);
}

/* ---- tests -------------------------------------------------------------- */

static void test_copy_reproduces_tree(void **state)
{
	struct fixture *f = *state;
	struct node *src = build_tree(f), *copy, *file;
	uint64_t nodes = f->ns.nnodes, ino = 0, refs_before;
	char *want, *got;
	struct sw_buf img;
	int64_t n;

	image_of(f, src, &img);
	want = tree_dump(&f->ns, src);
	file = child(f, child(f, child(f, src, "a"), "b"), "file");
	refs_before = chunk_get(&f->ns, ns_chunk_at(file, 0))->refs;
	n = copy_from(f, sw_buf_head(&img), sw_buf_used(&img), 0, "dst", &ino);
	/* Every node once; the hard link's two names inside: one node. */
	assert_int_equal(n, (int64_t)(nodes - 1));
	assert_int_equal(f->ns.nnodes, nodes + (uint64_t)n);
	copy = child(f, f->ns.root, "dst");
	assert_non_null(copy);
	assert_int_equal(copy->ino, ino);
	assert_true(copy->u.dir->parent == f->ns.root);
	got = tree_dump(&f->ns, copy);
	/* The root's own line differs in its ctime only if set: equal. */
	assert_string_equal(got, want);
	/* The hard link: two names in the copy, nlink 2 (not 3). */
	{
		struct node *c = child(f, copy, "file-again");

		assert_non_null(c);
		assert_true(c == child(f, child(f, child(f, copy, "a"), "b"),
				       "file"));
		assert_int_equal(c->nlink, 2);
		assert_int_equal(file->nlink, 3);
		assert_true(c != file);
	}
	/* Chunks shared, one more reference each. */
	assert_int_equal(chunk_get(&f->ns, ns_chunk_at(file, 0))->refs,
			 refs_before + 1);
	/* Named: in reach. */
	assert_false(ns_detached(copy));
	assert_false(ns_detached(child(f, child(f, copy, "a"), "b")));
	assert_false(ns_copy_active(&f->ns, NULL));
	free(want);
	free(got);
	sw_buf_release(&img);
}

/* A copy's nodes count as replay work, one each (ns_replay_work()): a
 * copy is a handful of changes that make a whole tree, and a restart
 * replays the tree, not the handful (master_checkpoint_due()). */
static void test_copy_counts_replay_work(void **state)
{
	struct fixture *f = *state;
	struct node *src = build_tree(f);
	uint64_t work = ns_replay_work(&f->ns), ino = 0;
	struct sw_buf img;
	int64_t n;

	image_of(f, src, &img);
	n = copy_from(f, sw_buf_head(&img), sw_buf_used(&img), 3, "dst", &ino);
	assert_true(n > 20);
	assert_int_equal(ns_replay_work(&f->ns) - work, (uint64_t)n);
	sw_buf_release(&img);
}

/* Cutting the image anywhere between records makes the same copy, with
 * the same inode numbers: what replay relies on. */
static void test_copy_parts_any_cut(void **state)
{
	struct fixture *f = *state;
	struct node *src = build_tree(f);
	char *want = tree_dump(&f->ns, src);
	struct sw_buf img;

	image_of(f, src, &img);
	for (size_t every = 0; every < 6; every++) {
		char name[16], *got;
		uint64_t ino;

		snprintf(name, sizeof(name), "copy%zu", every);
		assert_true(copy_from(f, sw_buf_head(&img), sw_buf_used(&img),
				      every, name, &ino) > 0);
		got = tree_dump(&f->ns, child(f, f->ns.root, name));
		assert_string_equal(got, want);
		free(got);
	}
	free(want);
	sw_buf_release(&img);
}

/* Two namespaces fed the same records end up the same, inode numbers
 * included, however the records are cut. */
static void test_copy_deterministic(void **state)
{
	struct fixture *f = *state, g = { 0 };
	struct node *src = build_tree(f), *gsrc;
	struct sw_buf img;
	uint64_t a = 0, b = 0;

	assert_int_equal(ns_init(&g.ns, 1000), 0);
	g.now = 1000;
	gsrc = build_tree(&g);
	(void)gsrc;
	image_of(f, src, &img);
	assert_true(copy_from(f, sw_buf_head(&img), sw_buf_used(&img), 1, "c",
			      &a) > 0);
	assert_true(copy_from(&g, sw_buf_head(&img), sw_buf_used(&img), 4, "c",
			      &b) > 0);
	assert_int_equal(a, b);
	assert_int_equal(f->ns.next_ino, g.ns.next_ino);
	assert_int_equal(f->ns.next_edge, g.ns.next_edge);
	for (uint64_t ino = a; ino < f->ns.next_ino; ino++) {
		struct node *x = ns_get(&f->ns, ino), *y = ns_get(&g.ns, ino);

		assert_true((x == NULL) == (y == NULL));
		if (x)
			assert_int_equal(x->mode, y->mode);
	}
	ns_release(&g.ns);
	sw_buf_release(&img);
}

/* The copy is of the image's instant: changes after it do not show. */
static void test_copy_is_point_in_time(void **state)
{
	struct fixture *f = *state;
	struct node *src = build_tree(f), *b, *file;
	char *want = tree_dump(&f->ns, src), *got;
	uint64_t id = f->ns.version + 1, chunk, ino;
	struct sw_buf img;

	assert_int_equal(ns_copy_begin(&f->ns, id, NS_ROOT_INO, "snap", 4,
				       f->ns.next_chunk),
			 0);
	image_of(f, src, &img);
	/* Now the tree changes under the copy: a file goes with its last
	 * names (its chunks with it, but for the hold), others come. */
	b = child(f, child(f, src, "a"), "b");
	file = child(f, b, "file");
	chunk = ns_chunk_at(file, 0);
	assert_int_equal(ns_unlink(&f->ns, b, "file", 4, false, ++f->now), 0);
	assert_int_equal(
		ns_unlink(&f->ns, src, "file-again", 10, false, ++f->now), 0);
	assert_int_equal(ns_unlink(&f->ns, f->ns.root, "outside", 7, false,
				   ++f->now),
			 0);
	assert_non_null(chunk_get(&f->ns, chunk)); /* held, not freed */
	assert_int_equal(chunk_get(&f->ns, chunk)->refs, 0);
	assert_int_equal(f->ngone, 0);
	mk(f, b, "new", S_IFREG | 0644);
	/* The image goes in two parts around more changes. */
	{
		const uint8_t *p = sw_buf_head(&img);
		size_t len = sw_buf_used(&img), half = 0;

		while (half < len / 2)
			half += (size_t)ns_copy_record(p + half, len - half);
		assert_int_equal(ns_copy_part(&f->ns, id, p, half,
					      f->ns.next_ino, f->ns.next_edge),
				 0);
		mk(f, src, "newer", S_IFDIR | 0755);
		assert_int_equal(ns_copy_part(&f->ns, id, p + half, len - half,
					      f->ns.next_ino, f->ns.next_edge),
				 0);
	}
	assert_true(ns_copy_end(&f->ns, id, f->ns.next_edge, 0, ++f->now,
				&ino) > 0);
	got = tree_dump(&f->ns, child(f, f->ns.root, "snap"));
	assert_string_equal(got, want);
	/* The held chunk now belongs to the copy. */
	assert_int_equal(chunk_get(&f->ns, chunk)->refs, 1);
	assert_int_equal(f->ngone, 0);
	free(want);
	free(got);
	sw_buf_release(&img);
}

/* A chunk held for a copy that does not take it is freed at the end. */
static void test_copy_releases_untaken_chunks(void **state)
{
	struct fixture *f = *state;
	struct node *src = mk(f, f->ns.root, "src", S_IFDIR | 0755);
	struct node *other = mk(f, f->ns.root, "other", S_IFREG | 0644);
	uint64_t id = f->ns.version + 1, chunk, ino;
	struct sw_buf img;

	mk(f, src, "x", S_IFREG | 0644);
	give_chunks(f, other, 1);
	chunk = ns_chunk_at(other, 0);
	image_of(f, src, &img);
	assert_int_equal(ns_copy_begin(&f->ns, id, NS_ROOT_INO, "snap", 4,
				       f->ns.next_chunk),
			 0);
	assert_int_equal(
		ns_unlink(&f->ns, f->ns.root, "other", 5, false, ++f->now), 0);
	assert_non_null(chunk_get(&f->ns, chunk));
	assert_int_equal(ns_copy_part(&f->ns, id, sw_buf_head(&img),
				      sw_buf_used(&img), f->ns.next_ino,
				      f->ns.next_edge),
			 0);
	assert_int_equal(
		ns_copy_end(&f->ns, id, f->ns.next_edge, 0, ++f->now, &ino), 2);
	assert_null(chunk_get(&f->ns, chunk));
	assert_int_equal(f->ngone, 1);
	assert_int_equal(f->gone[0], chunk);
	/* Chunks made during the copy were never frozen. */
	assert_int_equal(f->ns.copy_chunk_start, 0);
	sw_buf_release(&img);
}

/* Until it is named the copy is out of reach: marked detached. A name
 * taken meanwhile, or an abort, sends it to the purge. */
static void test_copy_end_refusals(void **state)
{
	struct fixture *f = *state;
	struct node *src = build_tree(f);
	uint64_t first, id, ino = 0;
	struct sw_buf img;

	image_of(f, src, &img);
	id = f->ns.version + 1;
	assert_int_equal(ns_copy_begin(&f->ns, id, NS_ROOT_INO, "snap", 4,
				       f->ns.next_chunk),
			 0);
	assert_int_equal(ns_copy_begin(&f->ns, id + 1, NS_ROOT_INO, "x", 1,
				       f->ns.next_chunk),
			 -EBUSY);
	assert_int_equal(ns_copy_part(&f->ns, id + 7, sw_buf_head(&img), 1, 0,
				      0),
			 -ENOENT);
	first = f->ns.next_ino;
	assert_int_equal(ns_copy_part(&f->ns, id, sw_buf_head(&img),
				      sw_buf_used(&img), f->ns.next_ino,
				      f->ns.next_edge),
			 0);
	/* Out of reach until named: every directory of it detached. */
	assert_true(ns_detached(ns_get(&f->ns, first)));
	assert_true(ns_detached(child(f, ns_get(&f->ns, first), "a")));
	mk(f, f->ns.root, "snap", S_IFREG | 0644);
	assert_int_equal(ns_copy_end(&f->ns, id, f->ns.next_edge, 0, ++f->now,
				     &ino),
			 -EEXIST);
	assert_int_equal(f->ns.purge_roots, 1);
	assert_false(ns_copy_active(&f->ns, NULL));

	/* Aborted half way: purged too. */
	id = f->ns.version + 100;
	assert_int_equal(ns_copy_begin(&f->ns, id, NS_ROOT_INO, "snap2", 5,
				       f->ns.next_chunk),
			 0);
	assert_int_equal(ns_copy_part(&f->ns, id, sw_buf_head(&img),
				      (size_t)ns_copy_record(sw_buf_head(&img),
							     sw_buf_used(&img)),
				      f->ns.next_ino, f->ns.next_edge),
			 0);
	assert_int_equal(ns_copy_end(&f->ns, id, f->ns.next_edge, -ECANCELED,
				     ++f->now, &ino),
			 -ECANCELED);
	assert_int_equal(f->ns.purge_roots, 2);
	assert_null(child(f, f->ns.root, "snap2"));
	sw_buf_release(&img);
}

/* Bad images: the error sticks, the copy is given up, nothing breaks. */
static void test_copy_malformed(void **state)
{
	struct fixture *f = *state;
	struct node *src = build_tree(f);
	struct sw_buf img;
	const uint8_t *p;
	size_t len, first;
	uint64_t ino;

	image_of(f, src, &img);
	p = sw_buf_head(&img);
	len = sw_buf_used(&img);
	first = (size_t)ns_copy_record(p, len);
	/* Every proper prefix of a record is "not all there yet". */
	for (size_t cut = 0; cut < first; cut++)
		assert_int_equal(ns_copy_record(p, cut), 0);
	assert_int_equal(ns_copy_record((const uint8_t *)"X", 1), -EUCLEAN);

	struct {
		const char *what;
		uint8_t bytes[8];
		size_t n;
	} bad[] = {
		{ "unknown record", { 'Q' }, 1 },
		{ "up past the root", { 'U', 'U' }, 2 },
		{ "end with nothing", { 'E' }, 1 },
	};
	for (size_t i = 0; i < SW_ARRAY_SIZE(bad); i++) {
		uint64_t id = f->ns.version + 1000 + i;

		assert_int_equal(ns_copy_begin(&f->ns, id, NS_ROOT_INO, "bad",
					       3, f->ns.next_chunk),
				 0);
		ns_copy_part(&f->ns, id, bad[i].bytes, bad[i].n, f->ns.next_ino,
			     f->ns.next_edge);
		assert_int_equal(ns_copy_end(&f->ns, id, f->ns.next_edge, 0,
					     ++f->now, &ino),
				 -EUCLEAN);
		assert_null(child(f, f->ns.root, "bad"));
	}
	/* A record cut in the middle of a part. */
	{
		uint64_t id = f->ns.version + 2000;

		assert_int_equal(ns_copy_begin(&f->ns, id, NS_ROOT_INO, "bad",
					       3, f->ns.next_chunk),
				 0);
		assert_int_equal(ns_copy_part(&f->ns, id, p, first - 1,
					      f->ns.next_ino, f->ns.next_edge),
				 -EUCLEAN);
		assert_int_equal(ns_copy_end(&f->ns, id, f->ns.next_edge, 0,
					     ++f->now, &ino),
				 -EUCLEAN);
	}
	/* A chunk the namespace does not have. */
	{
		struct node *g = mk(f, f->ns.root, "g", S_IFREG | 0644);
		struct sw_buf one;
		uint64_t id = f->ns.version + 3000, cid;

		give_chunks(f, g, 1);
		cid = ns_chunk_at(g, 0);
		image_of(f, g, &one);
		assert_int_equal(ns_copy_begin(&f->ns, id, NS_ROOT_INO, "gc", 2,
					       cid), /* not frozen */
				 0);
		assert_int_equal(ns_unlink(&f->ns, f->ns.root, "g", 1, false,
					   ++f->now),
				 0);
		assert_null(chunk_get(&f->ns, cid));
		assert_int_equal(ns_copy_part(&f->ns, id, sw_buf_head(&one),
					      sw_buf_used(&one), f->ns.next_ino,
					      f->ns.next_edge),
				 -ENOENT);
		assert_int_equal(ns_copy_end(&f->ns, id, f->ns.next_edge, 0,
					     ++f->now, &ino),
				 -ENOENT);
		sw_buf_release(&one);
	}
	sw_buf_release(&img);
}

/* A file alone is a tree of one. */
static void test_copy_single_file(void **state)
{
	struct fixture *f = *state;
	struct node *file = mk(f, f->ns.root, "f", S_IFREG | 0640), *c;
	struct sw_buf img;
	uint64_t ino;

	give_chunks(f, file, 4);
	image_of(f, file, &img);
	assert_int_equal(copy_from(f, sw_buf_head(&img), sw_buf_used(&img), 0,
				   "g", &ino),
			 1);
	c = child(f, f->ns.root, "g");
	assert_int_equal(c->ino, ino);
	assert_int_equal(c->nlink, 1);
	assert_int_equal(c->size, file->size);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(ns_chunk_at(c, i), ns_chunk_at(file, i));
	sw_buf_release(&img);
}

/* The image streamed through a descriptor is the image made in memory. */
static void test_copy_write_fd(void **state)
{
	struct fixture *f = *state;
	struct node *src = build_tree(f);
	struct sw_buf img, got = SW_BUF_INIT;
	int fds[2];
	pid_t pid;
	int status;

	image_of(f, src, &img);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		_exit(ns_copy_write(&f->ns, src, fds[1]) == 0 ? 0 : 1);
	}
	close(fds[1]);
	for (;;) {
		uint8_t buf[4096];
		ssize_t n = read(fds[0], buf, sizeof(buf));

		if (n <= 0)
			break;
		assert_int_equal(sw_buf_add(&got, buf, (size_t)n), 0);
	}
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(sw_buf_used(&got), sw_buf_used(&img));
	assert_memory_equal(sw_buf_head(&got), sw_buf_head(&img),
			    sw_buf_used(&img));
	sw_buf_release(&img);
	sw_buf_release(&got);
}

/* Goals: inherited, set recursively, carried by copies, and the chunks'
 * goals follow the files naming them. */
static void test_goals(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->ns;
	struct node *d = mk(f, ns->root, "d", S_IFDIR | 0755), *a, *b, *sub;
	struct chunk *ca, *cb;
	struct sw_buf img;
	uint64_t ino;

	assert_int_equal(ns_set_goal(ns, d, 3, false, NS_ANY_OWNER), 1);
	a = mk(f, d, "a", S_IFREG | 0644);
	sub = mk(f, d, "sub", S_IFDIR | 0755);
	b = mk(f, sub, "b", S_IFREG | 0644);
	assert_int_equal(ns_goal(a), 3); /* inherited */
	assert_int_equal(ns_goal(sub), 3);
	assert_int_equal(ns_goal(b), 3);
	give_chunks(f, a, 1);
	give_chunks(f, b, 1);
	ca = chunk_get(ns, ns_chunk_at(a, 0));
	cb = chunk_get(ns, ns_chunk_at(b, 0));
	assert_int_equal(chunk_goal(ca, 1), 3);
	/* A copy shares the chunks, and the goal goes with the files. */
	image_of(f, d, &img);
	assert_true(copy_from(f, sw_buf_head(&img), sw_buf_used(&img), 0,
			      "copy", &ino) > 0);
	assert_int_equal(ns_goal(child(f, ns_get(ns, ino), "a")), 3);
	/* Lowering one file's goal: its shared chunk keeps the highest. */
	assert_int_equal(ns_set_goal(ns, a, 1, false, NS_ANY_OWNER), 1);
	assert_int_equal(chunk_goal(ca, 1), 3);
	/* Both names lowered, recursively: a chunk named by files of goal 1
	 * and 2 wants 2, whatever the default. */
	assert_int_equal(
		ns_set_goal(ns, ns_get(ns, ino), 2, true, NS_ANY_OWNER), 4);
	assert_int_equal(
		ns_goal(child(f, child(f, ns_get(ns, ino), "sub"), "b")), 2);
	/* Recursion reached the directory and the file below it. */
	assert_int_equal(ns_set_goal(ns, d, 0, true, NS_ANY_OWNER), 4);
	assert_int_equal(ns_goal(b), 0);
	/* cb: named by b (default now) and by the copy's b (2); a shared
	 * chunk's goal only goes up while the master runs (it is worked out
	 * afresh from the files when a checkpoint loads): still 3. The
	 * default counts as soon as a file with it names the chunk. */
	assert_int_equal(chunk_goal(cb, 1), 3);
	assert_int_equal(chunk_goal(cb, 5), 5);
	/* A chunk only one file names takes that file's goal exactly. */
	{
		struct node *solo = mk(f, ns->root, "solo", S_IFREG | 0644);
		struct chunk *cs;

		give_chunks(f, solo, 1);
		cs = chunk_get(ns, ns_chunk_at(solo, 0));
		assert_int_equal(ns_set_goal(ns, solo, 4, false, NS_ANY_OWNER),
				 1);
		assert_int_equal(chunk_goal(cs, 1), 4);
		assert_int_equal(ns_set_goal(ns, solo, 1, false, NS_ANY_OWNER),
				 1);
		assert_int_equal(chunk_goal(cs, 3), 1);
	}
	sw_buf_release(&img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_copy_reproduces_tree,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_parts_any_cut, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_copy_deterministic, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_copy_is_point_in_time,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_copy_releases_untaken_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_end_refusals, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_copy_malformed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_copy_counts_replay_work,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_single_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_copy_write_fd, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_goals, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
