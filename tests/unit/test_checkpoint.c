/*
 * checkpoint.h: a namespace with every kind of node written and loaded
 * back identical; damaged checkpoints fall back to older ones or fail with
 * -EUCLEAN; pruning keeps the newest; write errors are reported.
 *
 * "Identical" is checked by rendering both namespaces as text (every node,
 * every live name in id order, every xattr) and comparing, and by using
 * the loaded one: lookups, seeks and further changes must work on it.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "changelog.h"
#include "checkpoint.h"
#include "crc32c.h"
#include "hash.h"
#include "log.h"
#include "mutation.h"
#include "namespace.h"
#include "unit.h"
#include "unit_ns.h"
#include "util.h"

struct fixture {
	char dir[256];
	struct ns a; /* written */
	struct ns b; /* loaded */
	bool a_init, b_init;
	int64_t now;
	struct rng rng;
	struct cursor cur;
	unsigned log_lines;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	if (unit_mkdtemp(f->dir, sizeof(f->dir), "checkpoint") < 0)
		goto out_free;
	f->now = 1700000000LL * 1000000000LL;
	if (ns_init(&f->a, f->now) < 0)
		goto out_rm;
	f->a_init = true;
	if (ns_init(&f->b, 0) < 0) {
		ns_release(&f->a);
		goto out_rm;
	}
	f->b_init = true;
	ns_cursor_init(&f->cur);
	rng_seed(&f->rng, 2024);
	sw_log_set_sink(unit_quiet_sink, &f->log_lines);
	*state = f;
	return 0;

out_rm:
	unit_rm_rf(f->dir);
out_free:
	free(f);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->a_init)
		ns_release(&f->a);
	if (f->b_init)
		ns_release(&f->b);
	sw_log_set_sink(NULL, NULL);
	unit_rm_rf(f->dir);
	free(f);
	return 0;
}

/* A fresh, empty f->b to load into. */
static void reset_b(struct fixture *f)
{
	ns_release(&f->b);
	f->b_init = false;
	assert_int_equal(ns_init(&f->b, 0), 0);
	f->b_init = true;
}

/* ---- building a namespace ------------------------------------------- */

static struct node *mk_full(struct fixture *f, struct node *dir,
			    const void *name, size_t len, uint32_t mode,
			    const char *target, size_t tlen)
{
	struct ns_create_args a = {
		.ino = f->a.next_ino,
		.edge = f->a.next_edge,
		.mode = mode,
		.uid = (uint32_t)rng_below(&f->rng, 70000),
		.gid = (uint32_t)rng_below(&f->rng, 70000),
		.rdev = rng_next(&f->rng),
		.target = target,
		.target_len = tlen,
		.now = ++f->now,
	};
	struct node *n = NULL;

	assert_int_equal(ns_create(&f->a, dir, name, len, &a, &n), 0);
	return n;
}

static struct node *mk(struct fixture *f, struct node *dir, const char *name,
		       uint32_t mode)
{
	return mk_full(f, dir, name, strlen(name), mode, "t", 1);
}

static void set_xattr(struct fixture *f, struct node *n, const char *name,
		      const void *value, size_t vlen)
{
	assert_int_equal(ns_xattr_set(&f->a, n, name, strlen(name), value, vlen,
				      ++f->now),
			 0);
}

/*
 * Every node type, hard links across directories, xattrs (binary, empty,
 * 64 KiB), an orphan, a deep chain of directories, a directory big enough
 * to be hashed and indexed, names of every length and byte, a tombstone,
 * gaps in edge ids, and odd attributes.
 */
static void build_rich(struct fixture *f)
{
	struct ns *ns = &f->a;
	struct node *r = ns->root, *d, *big, *file, *orphan, *deep;
	struct ns_setattr_args sa;
	char name[256], *value;
	uint32_t types[] = { S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR,
			     S_IFBLK, S_IFIFO, S_IFSOCK };

	d = mk(f, r, "types", S_IFDIR | 0755);
	for (size_t i = 0; i < SW_ARRAY_SIZE(types); i++) {
		snprintf(name, sizeof(name), "t%zu", i);
		mk(f, d, name, types[i] | 0640);
	}
	/* Symlinks: empty, ordinary, at the largest size. */
	mk_full(f, d, "empty-link", 10, S_IFLNK | 0777, "", 0);
	value = malloc(65536);
	assert_non_null(value);
	for (int i = 0; i < 65536; i++)
		value[i] = (char)('a' + i % 23);
	mk_full(f, d, "long-link", 9, S_IFLNK | 0777, value, 4096);

	/* Hard links in three directories. */
	file = mk(f, d, "linked", S_IFREG | 0600);
	assert_int_equal(ns_link(ns, file, r, "linked-root", 11, ns->next_edge,
				 ++f->now),
			 0);
	big = mk(f, r, "big", S_IFDIR | 0711);
	assert_int_equal(ns_link(ns, file, big, "linked-big", 10, ns->next_edge,
				 ++f->now),
			 0);
	/* A big directory with holes in its ids. */
	for (int i = 0; i < 700; i++) {
		snprintf(name, sizeof(name), "entry-%04d", i);
		mk(f, big, name, i % 50 ? S_IFREG | 0644 : S_IFDIR | 0755);
	}
	for (int i = 0; i < 700; i += 3) {
		snprintf(name, sizeof(name), "entry-%04d", i);
		if (i % 50)
			assert_int_equal(ns_unlink(ns, big, name, strlen(name),
						   false, ++f->now),
					 0);
	}
	/* A tombstone: pinned, unlinked; not part of the checkpoint. */
	ns_cursor_set(ns, &f->cur, big, ns_lookup(ns, big, "entry-0001", 10));
	assert_int_equal(ns_unlink(ns, big, "entry-0001", 10, false, ++f->now),
			 0);
	/* Names of every length, with every byte allowed. */
	for (size_t len = 1; len <= 255; len += 17) {
		for (size_t i = 0; i < len; i++) {
			uint8_t c = (uint8_t)(1 + rng_below(&f->rng, 255));

			name[i] = (char)(c == '/' ? '_' : c);
		}
		if (len <= 2)
			name[0] = 'n';
		mk_full(f, d, name, len, S_IFREG | 0644, NULL, 0);
	}
	/* A deep chain. */
	deep = r;
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "level%d", i);
		deep = mk(f, deep, name, S_IFDIR | 0700);
		if (i % 10 == 0)
			mk(f, deep, "file", S_IFREG | 0644);
	}
	/* Extended attributes, on several kinds of node. */
	set_xattr(f, r, "user.root", "r", 1);
	set_xattr(f, d, "user.empty", "", 0);
	set_xattr(f, d, "trusted.bin", "\0\1\2\377", 4);
	set_xattr(f, file, "user.big", value, 65536);
	set_xattr(f, file, "security.selinux", "system_u:object_r", 17);
	set_xattr(f, deep, "user.deep", "x", 1);
	set_xattr(f, ns_lookup(ns, d, "t2", 2)->child, "user.onlink", "l", 1);
	free(value);
	/* An orphan with an attribute. */
	orphan = mk(f, d, "orphan", S_IFREG | 0644);
	set_xattr(f, orphan, "user.o", "gone", 4);
	sa = (struct ns_setattr_args){ .valid = NS_SET_SIZE,
				       .size = 12345,
				       .now = ++f->now };
	assert_int_equal(ns_setattr(ns, orphan, &sa), 0);
	assert_int_equal(ns_unlink(ns, d, "orphan", 6, true, ++f->now), 0);
	/* Odd attributes: the root's, set-id bits, old and negative times,
	 * a huge size. */
	sa = (struct ns_setattr_args){
		.valid = NS_SET_MODE | NS_SET_UID | NS_SET_GID | NS_SET_ATIME |
			 NS_SET_MTIME,
		.mode = 01777,
		.uid = 4000000000u,
		.gid = 7,
		.atime = -1,
		.mtime = INT64_MAX,
		.now = ++f->now,
	};
	assert_int_equal(ns_setattr(ns, r, &sa), 0);
	sa = (struct ns_setattr_args){ .valid = NS_SET_MODE | NS_SET_SIZE,
				       .mode = 06755,
				       .size = UINT64_MAX - 1,
				       .now = INT64_MIN };
	assert_int_equal(ns_setattr(ns, file, &sa), 0);
}

/* A small namespace (a few hundred bytes of checkpoint). */
static void build_small(struct fixture *f)
{
	struct node *r = f->a.root, *d = mk(f, r, "d", S_IFDIR | 0755);
	struct node *file = mk(f, d, "f", S_IFREG | 0644), *o;

	mk(f, d, "l", S_IFLNK | 0777);
	mk(f, r, "c", S_IFCHR | 0600);
	assert_int_equal(ns_link(&f->a, file, r, "hard", 4, f->a.next_edge,
				 ++f->now),
			 0);
	set_xattr(f, file, "user.a", "value", 5);
	o = mk(f, r, "o", S_IFREG | 0644);
	assert_int_equal(ns_unlink(&f->a, r, "o", 1, true, ++f->now), 0);
	assert_true(o->flags & NODE_ORPHAN);
}

/* ---- comparing ------------------------------------------------------ */

static void put_hex(FILE *fp, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(fp, "%02x", ((const uint8_t *)p)[i]);
}

/*
 * What a checkpoint must preserve, as text: counters, every node, the live
 * names of every directory in id order, xattrs. Not tombstones, cursors,
 * or NODE_OPEN.
 */
static char *dump_ns(const struct ns *ns)
{
	struct unit_nodevec nv;
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);

	assert_non_null(fp);
	unit_all_nodes(ns, &nv);
	fprintf(fp,
		"nodes %" PRIu64 " dirs %" PRIu64 " edges %" PRIu64
		" next %" PRIu64 "/%" PRIu64 " orphans %zu\n",
		ns->nnodes, ns->ndirs, ns->nedges, ns->next_ino, ns->next_edge,
		htab_count(&ns->orphans));
	for (size_t i = 0; i < nv.n; i++) {
		const struct node *n = nv.v[i];

		fprintf(fp,
			"N %" PRIu64 " %o %u %u nlink %u flags %x %" PRId64
			" %" PRId64 " %" PRId64 " size %" PRIu64,
			n->ino, n->mode, n->uid, n->gid, n->nlink,
			n->flags &
				~(NODE_OPEN | NODE_XATTR | NODE_RUNTIME_FLAGS),
			n->atime, n->mtime, n->ctime, n->size);
		if (S_ISCHR(n->mode) || S_ISBLK(n->mode))
			fprintf(fp, " rdev %" PRIx64, n->u.rdev);
		if (S_ISLNK(n->mode)) {
			fputs(" -> ", fp);
			put_hex(fp, n->u.target, n->size);
		}
		fputc('\n', fp);
		unit_dump_xattrs(fp, ns, n);
		if (!ns_is_dir(n))
			continue;
		fprintf(fp,
			"  D parent %" PRIu64 " entries %" PRIu64
			" subdirs %" PRIu64 "\n",
			/* A detached tree's root has none. */
			n->u.dir->parent ? n->u.dir->parent->ino : 0,
			n->u.dir->nentries, n->u.dir->nsubdirs);
		for (const struct edge *e = n->u.dir->head; e; e = e->next) {
			if (!e->child)
				continue;
			fprintf(fp, "  E %" PRIu64 " ", e->id);
			put_hex(fp, e->name, e->namelen);
			fprintf(fp, " -> %" PRIu64 "\n", e->child->ino);
		}
	}
	free(nv.v);
	assert_int_equal(fclose(fp), 0);
	return text;
}

static void assert_same(const struct ns *a, const struct ns *b)
{
	char *da = dump_ns(a), *db = dump_ns(b);

	if (strcmp(da, db)) {
		/* Print the first difference, with some context. */
		size_t i = 0;

		while (da[i] && da[i] == db[i])
			i++;
		while (i && da[i - 1] != '\n')
			i--;
		fprintf(stderr, "written:\n%.400s\nloaded:\n%.400s\n", da + i,
			db + i);
		free(da);
		free(db);
		fail_msg("the loaded namespace differs");
	}
	free(da);
	free(db);
}

/* The loaded namespace works: names are found, seeks land right. */
static void check_usable(struct ns *ns)
{
	struct unit_nodevec nv;

	unit_all_nodes(ns, &nv);
	for (size_t i = 0; i < nv.n; i++) {
		const struct node *n = nv.v[i];
		const struct edge *prev = NULL;

		if (!ns_is_dir(n))
			continue;
		if (n->u.dir->nentries > NS_DIR_HASH_MIN)
			assert_true(htab_count(&n->u.dir->names) > 0);
		for (const struct edge *e = n->u.dir->head; e; e = e->next) {
			assert_non_null(e->child);
			assert_ptr_equal(ns_lookup(ns, n, e->name, e->namelen),
					 e);
			if (ns_is_dir(e->child))
				assert_ptr_equal(e->child->u.dir->parent, n);
			/* Seeking to just before each edge finds it. */
			assert_ptr_equal(ns_dir_seek(n, e->id - 1), e);
			if (prev)
				assert_ptr_equal(ns_dir_seek(n, prev->id), e);
			prev = e;
		}
	}
	free(nv.v);
}

static void cp_path(struct fixture *f, uint64_t version, const char *suffix,
		    char *buf, size_t len)
{
	snprintf(buf, len, "%s/checkpoint.%020" PRIu64 "%s", f->dir, version,
		 suffix);
}

static long long cp_size(struct fixture *f, uint64_t version)
{
	char path[512];

	cp_path(f, version, "", path, sizeof(path));
	return unit_file_size(path);
}

static void read_cp(struct fixture *f, uint64_t version, uint8_t **data,
		    size_t *len)
{
	char path[512];
	long long size;
	FILE *fp;

	cp_path(f, version, "", path, sizeof(path));
	size = unit_file_size(path);
	assert_true(size > 0);
	*data = malloc((size_t)size);
	assert_non_null(*data);
	fp = fopen(path, "rb");
	assert_non_null(fp);
	assert_int_equal(fread(*data, 1, (size_t)size, fp), (size_t)size);
	fclose(fp);
	*len = (size_t)size;
}

static void write_cp(struct fixture *f, uint64_t version, const uint8_t *data,
		     size_t len)
{
	char path[512];
	FILE *fp;

	cp_path(f, version, "", path, sizeof(path));
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

/* ---- tests ---------------------------------------------------------- */

static void test_checkpoint_load_round_trip(void **state)
{
	struct fixture *f = *state;
	uint64_t version = 0;
	char path[512];
	struct node *big;

	build_rich(f);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 4242), 0);
	assert_true(cp_size(f, 4242) > 65536);
	/* No temporary left behind. */
	cp_path(f, 4242, ".tmp", path, sizeof(path));
	assert_int_equal(unit_file_size(path), -1);

	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 4242);
	assert_int_equal(f->b.version, 4242);
	assert_same(&f->a, &f->b);
	assert_int_equal(htab_count(&f->b.orphans), 1);
	check_usable(&f->b);

	/* Work goes on in the loaded namespace: new numbers do not clash. */
	big = ns_lookup(&f->b, f->b.root, "big", 3)->child;
	{
		struct ns_create_args a = { .ino = f->b.next_ino,
					    .edge = f->b.next_edge,
					    .mode = S_IFREG | 0644,
					    .now = 1 };

		assert_int_equal(
			ns_create(&f->b, big, "after-load", 10, &a, NULL), 0);
		assert_ptr_equal(ns_dir_seek(big, a.edge - 1),
				 big->u.dir->tail);
	}
	assert_int_equal(ns_unlink(&f->b, big, "entry-0002", 10, false, 2), 0);
	check_usable(&f->b);
	/* A second write/load of the loaded namespace is the same again. */
	assert_int_equal(checkpoint_write(&f->b, f->dir, 5000), 0);
	ns_release(&f->a);
	f->a_init = false;
	assert_int_equal(ns_init(&f->a, 0), 0);
	f->a_init = true;
	assert_int_equal(checkpoint_load(&f->a, f->dir, &version), 0);
	assert_int_equal(version, 5000);
	assert_same(&f->b, &f->a);
}

/* Format 3 (no node count in the header) still loads. */
/*
 * The purge's walk is the same in a namespace loaded from a checkpoint
 * taken half way as in the one it was taken from: a follower (or a
 * replay) that makes the PurgeSteps a leader journaled frees exactly what
 * the leader freed.
 */
static void test_checkpoint_purge_walk_agrees(void **state)
{
	struct fixture *f = *state;
	struct node *r = f->a.root, *t, *a, *c, *keep, *x;
	struct ns_purge_step s = { 0 };
	uint64_t version, batches = 0, total = 0, keep_ino, x_ino, t_ino;
	char name[16];

	keep = mk(f, r, "keep", S_IFREG | 0644);
	t = mk(f, r, "t", S_IFDIR | 0755);
	a = mk(f, t, "a", S_IFDIR | 0755);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		mk(f, a, name, S_IFREG | 0644);
	}
	c = mk(f, mk(f, a, "b", S_IFDIR | 0755), "c", S_IFDIR | 0755);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "g%d", i);
		mk(f, c, name, S_IFREG | 0644);
	}
	mk(f, t, "empty", S_IFDIR | 0755);
	mk(f, t, "s", S_IFLNK | 0777);
	/* Names of one file in two places of the tree, and of one outside. */
	x = mk(f, t, "x", S_IFREG | 0644);
	assert_int_equal(
		ns_link(&f->a, x, c, "x2", 2, f->a.next_edge, ++f->now), 0);
	assert_int_equal(
		ns_link(&f->a, keep, a, "k", 1, f->a.next_edge, ++f->now), 0);
	/* Entries made and removed: the order is by edge id, not by name. */
	mk(f, a, "gone", S_IFREG | 0644);
	assert_int_equal(ns_unlink(&f->a, a, "gone", 4, false, ++f->now), 0);
	mk(f, a, "aa", S_IFREG | 0644);
	/* The purge frees these nodes of f->a: their numbers, kept. */
	keep_ino = keep->ino;
	x_ino = x->ino;
	t_ino = t->ino;
	assert_int_equal(ns_detach(&f->a, r, "t", 1, 77, ++f->now), 0);

	/* A few steps, then the checkpoint the other side starts from. */
	for (int i = 0; i < 4; i++) {
		assert_true(ns_purge_next(&f->a, &s));
		ns_purge_take(&f->a, &s, f->now);
	}
	assert_int_equal(checkpoint_write(&f->a, f->dir, 100), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_same(&f->a, &f->b);

	/* Slices of 1 to 5 changes, each journaled as count and last. */
	while (f->a.purge_roots) {
		uint64_t n = 0, want = 1 + batches % 5;

		while (n < want && ns_purge_next(&f->a, &s)) {
			ns_purge_take(&f->a, &s, f->now);
			n++;
		}
		/* The wrong last inode, or one step too many, is refused. */
		if (batches == 1)
			assert_int_equal(ns_purge_steps(&f->b, n, s.ino + 1000,
							f->now),
					 -EILSEQ);
		else
			assert_int_equal(
				ns_purge_steps(&f->b, n, s.ino, f->now), 0);
		if (batches == 1) {
			reset_b(f);
			assert_int_equal(checkpoint_write(&f->a, f->dir, 200),
					 0);
			assert_int_equal(
				checkpoint_load(&f->b, f->dir, &version), 0);
		}
		assert_same(&f->a, &f->b);
		total += n;
		batches++;
	}
	assert_int_equal(s.done, 77);
	assert_int_equal(f->b.purge_roots, 0);
	assert_int_equal(ns_purge_steps(&f->b, 1, s.ino, f->now), -EILSEQ);
	/* Every node of the tree went but the file also named outside it. */
	assert_non_null(ns_get(&f->b, keep_ino));
	assert_int_equal(ns_get(&f->b, keep_ino)->nlink, 1);
	assert_null(ns_get(&f->b, x_ino));
	assert_null(ns_get(&f->b, t_ino));
	assert_null(ns_get(&f->a, x_ino));
	assert_true(total > 10);
}

/*
 * The purge drops a directory's index of names as it starts emptying it
 * (namespace_i.h, nsi_dir_unindex()): its bytes leave dir_bytes at the
 * first step, no name there is found any more (NODE_PURGING: not by a
 * walk of the list either), and a replay of the same steps on a loaded
 * copy (which built the index) ends the same.
 */
static void test_purge_drops_name_index(void **state)
{
	struct fixture *f = *state;
	struct node *r = f->a.root, *t, *sub;
	struct ns_purge_step s = { 0 };
	size_t idx, before;
	uint64_t version, n = 0;
	char name[16];

	t = mk(f, r, "t", S_IFDIR | 0755);
	sub = mk(f, t, "sub", S_IFDIR | 0755);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		mk(f, t, name, S_IFREG | 0644);
		mk(f, sub, name, S_IFREG | 0644);
	}
	assert_int_equal(ns_detach(&f->a, r, "t", 1, 9, ++f->now), 0);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 100), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	idx = htab_bytes(&sub->u.dir->names);
	assert_true(idx > 0);
	before = f->a.dir_bytes;

	/* The walk goes down to sub first: its index goes, t's stays. */
	assert_true(ns_purge_next(&f->a, &s));
	assert_ptr_equal(s.dir, sub);
	ns_purge_take(&f->a, &s, f->now);
	n++;
	assert_int_equal(htab_bytes(&sub->u.dir->names), 0);
	assert_true(htab_bytes(&t->u.dir->names) > 0);
	assert_int_equal(f->a.dir_bytes, before - idx);
	/* Marked: no name is found there, none can be added. */
	assert_true(sub->flags & NODE_PURGING);
	assert_false(t->flags & NODE_PURGING);
	assert_null(ns_lookup(&f->a, sub, "f150", 4));
	assert_non_null(ns_lookup(&f->a, t, "f150", 4));

	while (ns_purge_next(&f->a, &s)) {
		ns_purge_take(&f->a, &s, f->now);
		n++;
	}
	assert_int_equal(s.done, 9);
	assert_int_equal(ns_purge_steps(&f->b, n, s.ino, f->now), 0);
	assert_same(&f->a, &f->b);
	assert_int_equal(f->a.dir_bytes, f->b.dir_bytes);
}

static void test_checkpoint_load_format3(void **state)
{
	struct fixture *f = *state;
	uint64_t version = 0;
	uint8_t *data, *old;
	uint32_t crc;
	size_t len;

	build_small(f);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 78), 0);
	read_cp(f, 78, &data, &len);
	/* magic, format, version, next_ino, next_edge, next_chunk, counts */
	assert_int_equal(data[4], 7);
	old = malloc(len - 32);
	assert_non_null(old);
	memcpy(old, data, 40);
	memcpy(old + 40, data + 72, len - 72);
	old[4] = 3;
	crc = sw_crc32c(0, old, len - 32 - 4);
	for (int i = 0; i < 4; i++)
		old[len - 32 - 4 + i] = (uint8_t)(crc >> (8 * i));
	write_cp(f, 78, old, len - 32);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 78);
	assert_same(&f->a, &f->b);
	/* A count the file cannot hold is corruption. */
	ns_release(&f->b);
	assert_int_equal(ns_init(&f->b, 0), 0);
	data[40 + 7] = 0x10;
	crc = sw_crc32c(0, data, len - 4);
	for (int i = 0; i < 4; i++)
		data[len - 4 + i] = (uint8_t)(crc >> (8 * i));
	write_cp(f, 78, data, len);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), -EUCLEAN);
	free(old);
	free(data);
}

/* Only the root: the smallest checkpoint. */
static void test_checkpoint_load_empty_namespace(void **state)
{
	struct fixture *f = *state;
	uint64_t version = 0;

	assert_int_equal(checkpoint_write(&f->a, f->dir, 1), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 1);
	assert_same(&f->a, &f->b);
}

/* The cluster's identity is kept; none written is none loaded. */
static void test_checkpoint_load_cluster_id(void **state)
{
	Sweepfs__Meta__ClusterId ci = SWEEPFS__META__CLUSTER_ID__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct fixture *f = *state;
	uint8_t id[NS_CLUSTER_ID_LEN];
	uint64_t version = 0;

	assert_int_equal(checkpoint_write(&f->a, f->dir, 1), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_false(ns_has_cluster_id(&f->b));
	/* Made by its record; the same again is nothing, another one or a
	 * short one is refused. */
	for (int i = 0; i < NS_CLUSTER_ID_LEN; i++)
		id[i] = (uint8_t)(0xa0 + i);
	ci.id.data = id;
	ci.id.len = 8;
	mut.op_case = SWEEPFS__META__MUTATION__OP_CLUSTER_ID;
	mut.cluster_id = &ci;
	assert_int_equal(mutation_apply(&f->a, &mut, 1), -EINVAL);
	assert_false(ns_has_cluster_id(&f->a));
	ci.id.len = NS_CLUSTER_ID_LEN;
	assert_int_equal(mutation_apply(&f->a, &mut, 1), 0);
	assert_memory_equal(f->a.cluster_id, id, NS_CLUSTER_ID_LEN);
	assert_int_equal(mutation_apply(&f->a, &mut, 2), 0);
	id[0] ^= 1;
	assert_int_equal(mutation_apply(&f->a, &mut, 3), -EINVAL);
	assert_int_equal(f->a.cluster_id[0], 0xa0);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 2), 0);
	ns_release(&f->b);
	assert_int_equal(ns_init(&f->b, 0), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 2);
	assert_true(ns_has_cluster_id(&f->b));
	assert_memory_equal(f->a.cluster_id, f->b.cluster_id,
			    NS_CLUSTER_ID_LEN);
}

/* No checkpoint at all: 0, version 0, the namespace untouched. */
static void test_checkpoint_load_none(void **state)
{
	struct fixture *f = *state;
	uint64_t version = 77;
	char path[512];
	FILE *fp;

	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 0);
	assert_int_equal(f->b.nnodes, 1);
	/* A leftover temporary is not a checkpoint. */
	cp_path(f, 9, ".tmp", path, sizeof(path));
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("SWCP", fp);
	fclose(fp);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 0);
	snprintf(path, sizeof(path), "%s/nosuch", f->dir);
	assert_int_equal(checkpoint_load(&f->b, path, &version), -ENOENT);
}

/*
 * Every single damaged byte of the newest checkpoint is caught: the load
 * falls back to the older one, whole and exact.
 */
static void test_checkpoint_load_falls_back(void **state)
{
	struct fixture *f = *state;
	uint8_t *orig, *buf;
	size_t len;
	char *older;
	uint64_t version;

	build_small(f);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 10), 0);
	older = dump_ns(&f->a);
	mk(f, f->a.root, "newer", S_IFDIR | 0755);
	set_xattr(f, f->a.root, "user.newer", "1", 1);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 20), 0);
	read_cp(f, 20, &orig, &len);
	buf = malloc(len);
	assert_non_null(buf);

	/* Intact, the newest wins. */
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 20);
	assert_same(&f->a, &f->b);

	for (size_t off = 0; off < len; off++) {
		char *got;

		memcpy(buf, orig, len);
		buf[off] ^= (uint8_t)(1u << (off % 8));
		write_cp(f, 20, buf, len);
		reset_b(f);
		if (checkpoint_load(&f->b, f->dir, &version) != 0 ||
		    version != 10)
			fail_msg("byte %zu of %zu flipped: version %" PRIu64,
				 off, len, version);
		got = dump_ns(&f->b);
		if (strcmp(got, older))
			fail_msg("byte %zu flipped: fell back to a different "
				 "namespace",
				 off);
		free(got);
	}
	/* Cut short anywhere: the same. */
	for (size_t cut = 0; cut < len; cut += 1 + cut / 8) {
		write_cp(f, 20, orig, cut);
		reset_b(f);
		assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
		if (version != 10)
			fail_msg(
				"cut to %zu of %zu bytes: loaded version %" PRIu64,
				cut, len, version);
	}
	free(older);
	free(buf);
	free(orig);
}

/* With every checkpoint damaged: -EUCLEAN and an empty namespace. */
static void test_checkpoint_load_all_corrupt(void **state)
{
	struct fixture *f = *state;
	uint8_t *data;
	size_t len;
	uint64_t version = 5;

	build_small(f);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 10), 0);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 20), 0);
	for (uint64_t v = 10; v <= 20; v += 10) {
		read_cp(f, v, &data, &len);
		data[len / 2] ^= 0x40;
		write_cp(f, v, data, len);
		free(data);
	}
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), -EUCLEAN);
	assert_int_equal(f->b.nnodes, 1);
	assert_int_equal(f->b.nedges, 0);

	/* A checkpoint under another version's name is refused too. */
	reset_b(f);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 30), 0);
	read_cp(f, 30, &data, &len);
	write_cp(f, 40, data, len);
	free(data);
	{
		char path[512];

		cp_path(f, 30, "", path, sizeof(path));
		assert_int_equal(unlink(path), 0);
	}
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), -EUCLEAN);
}

static void test_checkpoint_prune_keeps_newest(void **state)
{
	struct fixture *f = *state;
	uint64_t version;

	build_small(f);
	for (uint64_t v = 1; v <= 6; v++)
		assert_int_equal(checkpoint_write(&f->a, f->dir, v * 100), 0);
	assert_int_equal(checkpoint_prune(f->dir, 10), 100);
	assert_true(cp_size(f, 100) > 0);
	assert_int_equal(checkpoint_prune(f->dir, 3), 400);
	for (uint64_t v = 1; v <= 6; v++)
		assert_int_equal(cp_size(f, v * 100) > 0, v >= 4);
	assert_int_equal(checkpoint_prune(f->dir, 3), 400);
	assert_int_equal(checkpoint_prune(f->dir, 1), 600);
	assert_int_equal(cp_size(f, 500), -1);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 600);
	assert_int_equal(checkpoint_prune(f->dir, 0), 0);
	assert_int_equal(cp_size(f, 600), -1);
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/nosuch", f->dir);
		assert_int_equal(checkpoint_prune(path, 1), -ENOENT);
	}
}

/* checkpoint.h: prune deletes "stale .tmp files" as well. */
static void test_checkpoint_prune_removes_tmp(void **state)
{
	struct fixture *f = *state;
	char path[512];
	FILE *fp;

	assert_int_equal(checkpoint_write(&f->a, f->dir, 100), 0);
	cp_path(f, 50, ".tmp", path, sizeof(path));
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("half a checkpoint", fp);
	fclose(fp);
	assert_int_equal(checkpoint_prune(f->dir, 1), 100);
	assert_true(cp_size(f, 100) > 0);
	assert_int_equal(unit_file_size(path), -1);
}

static void test_checkpoint_write_bad_dir(void **state)
{
	struct fixture *f = *state;
	char path[512];

	snprintf(path, sizeof(path), "%s/nosuch", f->dir);
	assert_int_equal(checkpoint_write(&f->a, path, 1), -ENOENT);
}

struct write_ctx {
	struct fixture *f;
	rlim_t limit;
};

static int write_limited(void *arg)
{
	struct write_ctx *w = arg;
	struct rlimit rl = { w->limit, w->limit };
	char path[512];
	int rc;

	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
		return 100;
	rc = checkpoint_write(&w->f->a, w->f->dir, 77);
	if (rc != -EFBIG)
		return 101;
	cp_path(w->f, 77, ".tmp", path, sizeof(path));
	if (unit_file_size(path) != -1)
		return 102;
	if (cp_size(w->f, 77) != -1)
		return 103;
	return 0;
}

/*
 * A write error (here: the file size limit) fails the write with its
 * errno and removes the temporary file. In a child process with a time
 * limit: the limit must not affect the test runner, and a bug may hang.
 */
static void test_checkpoint_write_error(void **state)
{
	struct fixture *f = *state;
	struct write_ctx w = { f, 0 };
	static const rlim_t limits[] = { 1000, 300 << 10, 1500 << 10 };
	char *big;
	int rc;

	/* Over 2 MiB of checkpoint: several buffer flushes. */
	big = malloc(65536);
	assert_non_null(big);
	memset(big, 'x', 65536);
	for (int i = 0; i < 36; i++) {
		char name[16];

		snprintf(name, sizeof(name), "user.%d", i);
		set_xattr(f, f->a.root, name, big, 65536);
	}
	free(big);
	for (size_t i = 0; i < SW_ARRAY_SIZE(limits); i++) {
		w.limit = limits[i];
		rc = unit_run_child(write_limited, &w, 1500);
		if (rc != 0)
			fail_msg("limit %lu: %s (%d)", (unsigned long)limits[i],
				 rc == -ETIMEDOUT ? "checkpoint_write hangs" :
				 rc == 101	  ? "wrong error" :
				 rc == 102	  ? "temporary file left" :
						    "failed",
				 rc);
	}
	/* Without a limit, it works. */
	assert_int_equal(checkpoint_write(&f->a, f->dir, 77), 0);
}

/*
 * sync_file_range(), which the writer calls to keep what is dirty small
 * (checkpoint.c): counted, and failing with srf.err from call
 * srf.fail_at on (0: never).
 */
static struct {
	int calls, fail_at, err;
} srf;

int __real_sync_file_range(int fd, off64_t off, off64_t n, unsigned flags);
int __wrap_sync_file_range(int fd, off64_t off, off64_t n, unsigned flags);

int __wrap_sync_file_range(int fd, off64_t off, off64_t n, unsigned flags)
{
	srf.calls++;
	if (srf.fail_at && srf.calls >= srf.fail_at) {
		errno = srf.err;
		return -1;
	}
	return __real_sync_file_range(fd, off, n, flags);
}

/*
 * A checkpoint of several 8 MiB steps: the writer waits for each step's
 * writeback, and a failed wait (EIO: the error is reported once, and
 * the fdatasync() at the end would not see it) fails the write with no
 * file left; a file system without sync_file_range() (EINVAL) only
 * turns the steps off.
 */
static void test_checkpoint_write_steps(void **state)
{
	struct fixture *f = *state;
	char path[512];
	char *big = malloc(65536);

	assert_non_null(big);
	memset(big, 'y', 65536);
	for (int i = 0; i < 400; i++) { /* 25 MiB */
		char name[16];

		snprintf(name, sizeof(name), "user.%d", i);
		set_xattr(f, f->a.root, name, big, 65536);
	}
	free(big);
	/* Three steps: two writebacks started, two of them waited for. */
	srf = (__typeof__(srf)){ 0 };
	assert_int_equal(checkpoint_write(&f->a, f->dir, 81), 0);
	assert_int_equal(srf.calls, 5);
	assert_true(cp_size(f, 81) > 25 << 20);
	/* The first wait (the second call) fails: so does the write. */
	srf = (__typeof__(srf)){ .fail_at = 2, .err = EIO };
	assert_int_equal(checkpoint_write(&f->a, f->dir, 82), -EIO);
	assert_int_equal(srf.calls, 2);
	cp_path(f, 82, ".tmp", path, sizeof(path));
	assert_int_equal(unit_file_size(path), -1);
	assert_int_equal(cp_size(f, 82), -1);
	/* Not supported: tried once, and the write goes on without. */
	srf = (__typeof__(srf)){ .fail_at = 1, .err = EINVAL };
	assert_int_equal(checkpoint_write(&f->a, f->dir, 83), 0);
	assert_int_equal(srf.calls, 1);
	assert_int_equal(cp_size(f, 83), cp_size(f, 81));
	srf = (__typeof__(srf)){ 0 };
}

struct start_ctx {
	int rc;
	int calls;
};

static void on_done(void *arg, int rc)
{
	struct start_ctx *c = arg;

	c->rc = rc;
	c->calls++;
}

/* The forked writer: the file appears, and one at a time. */
static void test_checkpoint_start_background(void **state)
{
	struct fixture *f = *state;
	struct start_ctx c = { -1, 0 };
	struct checkpointer ck = { 0 };
	uv_loop_t loop;
	uint64_t version;

	build_small(f);
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(checkpoint_start(&ck, &loop, &f->a, f->dir, 31,
					  on_done, &c),
			 0);
	assert_true(checkpoint_running(&ck));
	assert_int_equal(checkpoint_start(&ck, &loop, &f->a, f->dir, 32,
					  on_done, &c),
			 -EBUSY);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_false(checkpoint_running(&ck));
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.rc, 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 31);
	assert_same(&f->a, &f->b);
}

/*
 * Chunk changes in flight (chunks.h): each ChunkSet and ChunkVersion
 * leaves an intent until a ChunkVersion with done; a freed chunk takes
 * its intent along; the checkpoint carries the open ones.
 */
static void apply(struct ns *ns, Sweepfs__Meta__Mutation *mut)
{
	mut->time = 1;
	assert_int_equal(mutation_apply(ns, mut, ns->version + 1), 0);
}

static void chunk_set(struct ns *ns, uint64_t ino, uint32_t index, uint64_t id,
		      uint64_t src, uint32_t src_version, int64_t length)
{
	Sweepfs__Meta__ChunkSet cs = SWEEPFS__META__CHUNK_SET__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

	cs.ino = ino;
	cs.index = index;
	cs.chunk_id = id;
	cs.version = 1;
	if (src) {
		cs.has_src_chunk_id = cs.has_src_version = 1;
		cs.src_chunk_id = src;
		cs.src_version = src_version;
	}
	if (length >= 0) {
		cs.has_length = 1;
		cs.length = (uint64_t)length;
	}
	mut.op_case = SWEEPFS__META__MUTATION__OP_CHUNK_SET;
	mut.chunk_set = &cs;
	apply(ns, &mut);
}

static void chunk_version(struct ns *ns, uint64_t id, uint32_t version,
			  int64_t length, bool done)
{
	Sweepfs__Meta__ChunkVersion cv = SWEEPFS__META__CHUNK_VERSION__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

	cv.chunk_id = id;
	cv.version = version;
	if (length >= 0) {
		cv.has_length = 1;
		cv.length = (uint64_t)length;
	}
	cv.has_done = cv.done = done;
	mut.op_case = SWEEPFS__META__MUTATION__OP_CHUNK_VERSION;
	mut.chunk_version = &cv;
	apply(ns, &mut);
}

static void assert_intent(const struct ns *ns, uint64_t id, uint8_t kind,
			  uint32_t version, uint64_t src, int64_t length)
{
	const struct chunk_intent *in = ns_intent_get(ns, id);

	assert_non_null(in);
	assert_int_equal(in->kind, kind);
	assert_int_equal(in->version, version);
	assert_int_equal(in->src, src);
	assert_int_equal(in->length, length);
}

static void test_checkpoint_chunk_intents(void **state)
{
	struct fixture *f = *state;
	struct ns_create_args a = { .mode = S_IFREG | 0644, .now = 1 };
	uint64_t version = 0;
	struct node *file;

	a.ino = f->a.next_ino;
	a.edge = f->a.next_edge;
	assert_int_equal(ns_create(&f->a, f->a.root, "f", 1, &a, &file), 0);

	chunk_set(&f->a, a.ino, 0, 10, 0, 0, -1); /* made */
	chunk_version(&f->a, 10, 1, -1, true);
	assert_null(ns_intent_get(&f->a, 10));
	chunk_version(&f->a, 10, 2, 4096, false); /* a cut, not done */
	assert_intent(&f->a, 10, INTENT_BUMP, 2, 0, 4096);
	assert_int_equal(chunk_get(&f->a, 10)->version, 2);
	/* A done record for an older version leaves the newer intent. */
	chunk_version(&f->a, 10, 1, -1, true);
	assert_intent(&f->a, 10, INTENT_BUMP, 2, 0, 4096);
	assert_int_equal(chunk_get(&f->a, 10)->version, 2);

	chunk_set(&f->a, a.ino, 1, 11, 0, 0, -1); /* never made */
	assert_intent(&f->a, 11, INTENT_CREATE, 1, 0, -1);
	chunk_set(&f->a, a.ino, 2, 12, 10, 2, 100); /* a copy, cut */
	assert_intent(&f->a, 12, INTENT_DUPLICATE, 1, 10, 100);
	chunk_set(&f->a, a.ino, 3, 13, 0, 0, -1);
	/* Replacing slot 3 frees chunk 13, and its intent with it. */
	chunk_set(&f->a, a.ino, 3, 14, 0, 0, -1);
	assert_null(chunk_get(&f->a, 13));
	assert_null(ns_intent_get(&f->a, 13));
	chunk_version(&f->a, 14, 1, -1, true);
	assert_null(ns_intent_get(&f->a, 14));
	assert_int_equal(htab_count(&f->a.intents), 3);

	/* A done record for a chunk that is not there is an error. */
	{
		Sweepfs__Meta__ChunkVersion cv =
			SWEEPFS__META__CHUNK_VERSION__INIT;
		Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

		cv.chunk_id = 99;
		cv.version = 1;
		cv.has_done = cv.done = 1;
		mut.op_case = SWEEPFS__META__MUTATION__OP_CHUNK_VERSION;
		mut.chunk_version = &cv;
		assert_int_equal(mutation_apply(&f->a, &mut, 1000), -ENOENT);
	}

	assert_int_equal(checkpoint_write(&f->a, f->dir, 300), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(htab_count(&f->b.intents), 3);
	assert_intent(&f->b, 10, INTENT_BUMP, 2, 0, 4096);
	assert_intent(&f->b, 11, INTENT_CREATE, 1, 0, -1);
	assert_intent(&f->b, 12, INTENT_DUPLICATE, 1, 10, 100);
	assert_int_equal(ns_intent_get(&f->b, 12)->src_version, 2);
	assert_int_equal(chunk_get(&f->b, 10)->version, 2);
	/* Replaying the rest on the loaded namespace closes them. */
	chunk_version(&f->b, 10, 2, -1, true);
	chunk_version(&f->b, 11, 1, -1, true);
	chunk_version(&f->b, 12, 1, -1, true);
	assert_int_equal(htab_count(&f->b.intents), 0);
}

/*
 * Chunks gone for good (ns_chunk_dead()): numbered below every id a change
 * named and in no table. next_chunk raised by a chunkserver's report
 * names nothing; the checkpoint keeps what was named, also of chunks
 * created and freed before it, so that a restarted master knows them.
 */
static void test_checkpoint_chunks_named(void **state)
{
	struct fixture *f = *state;
	struct ns_create_args a = { .mode = S_IFREG | 0644, .now = 1 };
	uint64_t version = 0;
	struct node *file;

	a.ino = f->a.next_ino;
	a.edge = f->a.next_edge;
	assert_int_equal(ns_create(&f->a, f->a.root, "f", 1, &a, &file), 0);
	assert_false(ns_chunk_dead(&f->a, 1));
	chunk_set(&f->a, a.ino, 0, 10, 0, 0, -1);
	chunk_version(&f->a, 10, 1, -1, true);
	chunk_set(&f->a, a.ino, 1, 11, 0, 0, -1);
	chunk_set(&f->a, a.ino, 1, 12, 0, 0, -1); /* frees 11 */
	chunk_set(&f->a, a.ino, 2, 20, 0, 0, -1);
	chunk_set(&f->a, a.ino, 2, 21, 0, 0, -1); /* frees 20 */
	assert_int_equal(f->a.next_chunk_named, 22);
	assert_true(ns_chunk_dead(&f->a, 11));
	assert_true(ns_chunk_dead(&f->a, 20));
	/* Skipped (the first chunk is 10): never named here, so a file of
	 * it may be another metadata's, and waits stray_grace. */
	assert_false(ns_chunk_dead(&f->a, 5));
	assert_true(ns_chunk_dead(&f->a, 11) && !ns_chunk_dead(&f->a, 9));
	assert_false(ns_chunk_dead(&f->a, 0));
	assert_false(ns_chunk_dead(&f->a, 10)); /* referenced */
	assert_false(ns_chunk_dead(&f->a, 12)); /* being created */
	assert_false(ns_chunk_dead(&f->a, 21));
	assert_false(ns_chunk_dead(&f->a, 22));
	/* A report of an unknown chunk 999 keeps its id from being handed
	 * out (csrv.c): that names nothing. */
	f->a.next_chunk = 1000;
	assert_false(ns_chunk_dead(&f->a, 500));
	assert_false(ns_chunk_dead(&f->a, 999));

	assert_int_equal(checkpoint_write(&f->a, f->dir, 40), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(f->b.next_chunk_named, 22);
	assert_int_equal(f->b.next_chunk, 1000);
	assert_true(ns_chunk_dead(&f->b, 11));
	assert_true(ns_chunk_dead(&f->b, 20));
	assert_false(ns_chunk_dead(&f->b, 10));
	assert_false(ns_chunk_dead(&f->b, 12));
	assert_false(ns_chunk_dead(&f->b, 21));
	assert_false(ns_chunk_dead(&f->b, 500));
	assert_false(ns_chunk_dead(&f->b, 5)); /* the 'U' record */
	/* Freed after the load, by a replayed change: dead too. */
	chunk_set(&f->b, a.ino, 2, 1000, 0, 0, -1); /* frees 21 */
	assert_true(ns_chunk_dead(&f->b, 21));
	assert_int_equal(f->b.next_chunk_named, 1001);
	/* ... but not the ids the master skipped for the report, though
	 * below the mark now: they wait stray_grace (a hostile review found
	 * them deleted at once on a master started on old metadata). */
	assert_false(ns_chunk_dead(&f->b, 500));
	assert_false(ns_chunk_dead(&f->b, 22));
	assert_false(ns_chunk_dead(&f->b, 5));
	assert_int_equal(checkpoint_write(&f->b, f->dir, 41), 0);
	ns_release(&f->a);
	assert_int_equal(ns_init(&f->a, 1), 0);
	assert_int_equal(checkpoint_load(&f->a, f->dir, &version), 0);
	assert_false(ns_chunk_dead(&f->a, 500));
	assert_false(ns_chunk_dead(&f->a, 5));
	assert_true(ns_chunk_dead(&f->a, 21));
}

/*
 * Ids never named are kept as at most NS_UNNAMED_MAX ranges: touching
 * ones join, and past the limit the two closest merge, so every id once
 * unnamed stays unnamed and named ids far from a gap stay dead.
 */
static void test_chunks_unnamed_ranges(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->a;

	ns->next_chunk_named = 100000;
	for (uint64_t k = 0; k < 12; k++)
		ns_chunk_unnamed(ns, 1000 * (k + 1), 1000 * (k + 1) + 10 + k);
	ns_chunk_unnamed(ns, 1005, 1020); /* overlaps the first */
	ns_chunk_unnamed(ns, 1020, 1030); /* touches it */
	assert_true(ns->n_unnamed <= NS_UNNAMED_MAX);
	for (uint64_t k = 0; k < 12; k++) {
		assert_false(ns_chunk_dead(ns, 1000 * (k + 1)));
		assert_false(ns_chunk_dead(ns, 1000 * (k + 1) + 9 + k));
	}
	assert_false(ns_chunk_dead(ns, 1029));
	assert_true(ns_chunk_dead(ns, 999));
	assert_true(ns_chunk_dead(ns, 50000));
	for (unsigned i = 0; i + 1 < ns->n_unnamed; i++)
		assert_true(ns->chunk_unnamed[i].hi <
			    ns->chunk_unnamed[i + 1].lo);
}

/*
 * The inode and chunk tables are written slot by slot, in the order of
 * their hashes; loaded into a table still growing, such entries would
 * pile up in its first slots (loading 200,000 files took 9 s). The
 * counts in the header size the tables once: they never resize while
 * loading.
 */
static void test_checkpoint_load_sizes_inode_table(void **state)
{
	struct fixture *f = *state;
	uint64_t version = 0;

	build_rich(f);
	{
		struct node *n = mk(f, f->a.root, "chunky", S_IFREG | 0644);

		for (uint32_t k = 0; k < 100; k++)
			chunk_set(&f->a, n->ino, k, 5000 + k, 0, 0, -1);
	}
	assert_int_equal(checkpoint_write(&f->a, f->dir, 77), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_int_equal(version, 77);
	assert_null(f->b.inodes.old);
	assert_int_equal(f->b.inodes.size, 2 * f->a.nnodes);
	assert_true(htab_count(&f->a.chunks) > 0);
	assert_null(f->b.chunks.old);
	assert_int_equal(f->b.chunks.size, 2 * htab_count(&f->a.chunks));
	assert_same(&f->a, &f->b);
}

/*
 * A directory's name table is sized once from the 'D' record's count, not
 * grown while its names load; lookups in it work.
 */
static void test_checkpoint_load_sizes_dir_table(void **state)
{
	struct fixture *f = *state;
	struct node *d, *dl;
	uint64_t version = 0;
	char name[32];

	d = mk(f, f->a.root, "big", S_IFDIR | 0755);
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		mk(f, d, name, S_IFREG | 0644);
	}
	assert_int_equal(checkpoint_write(&f->a, f->dir, 80), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	dl = ns_get(&f->b, d->ino);
	assert_non_null(dl);
	assert_null(dl->u.dir->names.old);
	assert_int_equal(dl->u.dir->names.size, 2 * 1000);
	assert_int_equal(htab_count(&dl->u.dir->names), 1000);
	assert_non_null(ns_lookup(&f->b, dl, "n999", 4));
	assert_same(&f->a, &f->b);
}

/*
 * At a size whose load checks its nodes on two threads (nsload.c): the
 * same namespace; and a file with no name and no reason for it (nlink 0)
 * is found wherever its slot is, in the first half of the inode table or
 * in the second. (Its helper thread faults in little here: regions that
 * earlier cases emptied are taken first, slab_ahead().)
 */
static void test_checkpoint_load_big_checked_by_halves(void **state)
{
	struct fixture *f = *state;
	struct node *d, *lo = NULL, *hi = NULL, *n;
	uint64_t version = 0;
	char name[32];

	d = mk(f, f->a.root, "many", S_IFDIR | 0755);
	for (int i = 0; i < 70000; i++) {
		uint64_t h;

		snprintf(name, sizeof(name), "f%d", i);
		n = mk(f, d, name, S_IFREG | 0644);
		/* A slot's place is its hash's fraction of the table (plus
		 * a probe or two): keep clear of the middle. */
		h = sw_hash_u64(n->ino);
		if (!lo && h < UINT64_MAX / 4)
			lo = n;
		if (!hi && h > UINT64_MAX / 4 * 3)
			hi = n;
	}
	assert_non_null(lo);
	assert_non_null(hi);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 90), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_null(f->b.prefault);
	assert_same(&f->a, &f->b);
	for (int k = 0; k < 2; k++) {
		char path[512];

		/* Nothing older to fall back to. */
		cp_path(f, 90 + k, "", path, sizeof(path));
		assert_int_equal(unlink(path), 0);
		n = k ? hi : lo;
		n->nlink = 0;
		reset_b(f);
		assert_int_equal(checkpoint_write(&f->a, f->dir, 91 + k), 0);
		assert_int_equal(checkpoint_load(&f->b, f->dir, &version),
				 -EUCLEAN);
		assert_null(f->b.prefault);
		n->nlink = 1;
	}
}

/*
 * Name @i of a directory whose names run from 1 to 255 bytes (the loader
 * reads a directory's names ahead of the one it adds, record by record:
 * every length must land it on the next record).
 */
static size_t varied_name(char *buf, unsigned i)
{
	int n = snprintf(buf, 256, "%u_", i);
	size_t len = 1 + (i * 37u) % 255;

	if (len < (size_t)n)
		len = (size_t)n;
	memset(buf + n, 'x', len - (size_t)n);
	return len;
}

/* Two big directories of names of every length, one after the other. */
static void build_varied(struct fixture *f, struct node **d1, struct node **d2)
{
	char name[256];

	*d1 = mk(f, f->a.root, "v1", S_IFDIR | 0755);
	*d2 = mk(f, f->a.root, "v2", S_IFDIR | 0755);
	for (unsigned i = 0; i < 600; i++) {
		size_t len = varied_name(name, i);

		mk_full(f, i % 3 ? *d1 : *d2, name, len, S_IFREG | 0644, "t",
			1);
	}
}

/* Loaded with names read ahead: the same namespace, every name found. */
static void test_checkpoint_load_names_ahead(void **state)
{
	struct fixture *f = *state;
	struct node *d1, *d2, *l1, *l2;
	uint64_t version = 0;
	char name[256];

	build_varied(f, &d1, &d2);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 84), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_same(&f->a, &f->b);
	l1 = ns_get(&f->b, d1->ino);
	l2 = ns_get(&f->b, d2->ino);
	assert_non_null(l1);
	assert_non_null(l2);
	assert_int_equal(htab_count(&l1->u.dir->names), 400);
	assert_int_equal(htab_count(&l2->u.dir->names), 200);
	for (unsigned i = 0; i < 600; i++) {
		size_t len = varied_name(name, i);

		assert_non_null(ns_lookup(&f->b, i % 3 ? l1 : l2, name, len));
		assert_null(ns_lookup(&f->b, i % 3 ? l2 : l1, name, len));
	}
}

/*
 * A checkpoint cut anywhere in its names (the read ahead meets the end of
 * the file before the loader does): corrupt, nothing read past the end.
 */
static void test_checkpoint_load_cut_in_names(void **state)
{
	struct fixture *f = *state;
	struct node *d1, *d2;
	uint64_t version = 0;
	uint8_t *data;
	size_t len;

	build_varied(f, &d1, &d2);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 85), 0);
	read_cp(f, 85, &data, &len);
	for (size_t k = 40; k < 100; k++) {
		size_t cut = len * k / 100 + k % 7;

		reset_b(f);
		write_cp(f, 85, data, cut);
		assert_int_equal(checkpoint_load(&f->b, f->dir, &version),
				 -EUCLEAN);
	}
	free(data);
}

/* Hard links: a directory with more names than there are nodes. */
static void test_checkpoint_load_links_outnumber_nodes(void **state)
{
	struct fixture *f = *state;
	uint64_t version = 0;
	struct node *d, *n;
	char name[32];

	d = mk(f, f->a.root, "links", S_IFDIR | 0755);
	n = mk(f, d, "n0", S_IFREG | 0644);
	for (int i = 1; i < 40; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		assert_int_equal(ns_link(&f->a, n, d, name, strlen(name),
					 f->a.next_edge, ++f->now),
				 0);
	}
	assert_true(d->u.dir->nentries > f->a.nnodes);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 83), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_same(&f->a, &f->b);
}

/*
 * Inode numbers far sparser than the nodes (most of what was made is
 * gone): the loader looks nodes up in the inode table rather than in an
 * array by number, with the same result.
 */
static void test_checkpoint_load_sparse_inodes(void **state)
{
	struct fixture *f = *state;
	uint64_t version = 0;

	build_small(f);
	f->a.next_ino += 1000000;
	mk(f, f->a.root, "late", S_IFREG | 0644);
	assert_int_equal(checkpoint_write(&f->a, f->dir, 81), 0);
	assert_int_equal(checkpoint_load(&f->b, f->dir, &version), 0);
	assert_same(&f->a, &f->b);
}

/* Two records of the same node: corrupt, whichever way it is looked up. */
static void test_checkpoint_load_duplicate_node(void **state)
{
	struct fixture *f = *state;
	uint64_t version = 0, records = 0;
	uint8_t *data, *dup;
	uint32_t crc;
	size_t len, at, rec = 61; /* 'N' of a plain file */

	mk(f, f->a.root, "x", S_IFREG | 0644);
	for (int sparse = 0; sparse < 2; sparse++) {
		reset_b(f);
		if (sparse)
			f->a.next_ino += 1000000;
		assert_int_equal(checkpoint_write(&f->a, f->dir, 82), 0);
		read_cp(f, 82, &data, &len);
		/* The root and "x", in either order: copy x's record. */
		at = data[73] == NS_ROOT_INO ? 72 + rec : 72;
		assert_int_equal(data[at], 'N');
		assert_int_not_equal(data[at + 1], NS_ROOT_INO);
		dup = malloc(len + rec);
		assert_non_null(dup);
		memcpy(dup, data, at + rec);
		memcpy(dup + at + rec, data + at, len - at);
		/* One more record in 'Z', and the crc. */
		for (int i = 7; i >= 0; i--)
			records = records << 8 | dup[len + rec - 12 + i];
		records++;
		for (int i = 0; i < 8; i++)
			dup[len + rec - 12 + i] = (uint8_t)(records >> (8 * i));
		crc = sw_crc32c(0, dup, len + rec - 4);
		for (int i = 0; i < 4; i++)
			dup[len + rec - 4 + i] = (uint8_t)(crc >> (8 * i));
		write_cp(f, 82, dup, len + rec);
		assert_int_equal(checkpoint_load(&f->b, f->dir, &version),
				 -EUCLEAN);
		free(dup);
		free(data);
		records = 0;
	}
}

/* A packed change of @mut, in *@buf (freed by the caller); its length. */
static size_t pack(Sweepfs__Meta__Mutation *mut, uint8_t **buf)
{
	size_t n = sweepfs__meta__mutation__get_packed_size(mut);

	*buf = malloc(n);
	assert_non_null(*buf);
	assert_int_equal(sweepfs__meta__mutation__pack(mut, *buf), n);
	return n;
}

/* Pack @mut and replay it as the next version with mutation_replay(). */
static int replay_packed(struct ns *ns, Sweepfs__Meta__Mutation *mut)
{
	uint8_t *buf;
	size_t n = pack(mut, &buf);
	int rc = mutation_replay(ns, ns->version + 1, buf, n);

	free(buf);
	return rc;
}

/* Pack @mut and give it to mutation_prefetch(), at every stage. */
static void prefetch_packed(const struct ns *ns, Sweepfs__Meta__Mutation *mut)
{
	uint8_t *buf;
	size_t n = pack(mut, &buf);

	for (unsigned s = 0; s < CHANGELOG_STAGES; s++)
		mutation_prefetch(ns, s, buf, n);
	free(buf);
}

/* What a hint must read of a change (NULL names: none). */
struct hint_want {
	unsigned op;
	uint64_t ino, parent, newparent;
	const char *name, *newname;
};

static void assert_name(ProtobufCBinaryData got, const char *want)
{
	if (!want) {
		assert_null(got.data);
		return;
	}
	assert_int_equal(got.len, strlen(want));
	assert_memory_equal(got.data, want, got.len);
}

/* @m packed: mutation_hint_read() reads @want of it, and no op of any
 * prefix of it. */
static void check_hint(const Sweepfs__Meta__Mutation *m,
		       const struct hint_want *want)
{
	size_t len = sweepfs__meta__mutation__get_packed_size(m);
	uint8_t *buf = malloc(len);
	struct mutation_hint h;

	assert_non_null(buf);
	sweepfs__meta__mutation__pack(m, buf);
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *part = malloc(cut ? cut : 1);

		assert_non_null(part);
		memcpy(part, buf, cut);
		mutation_hint_read(part, cut, &h);
		assert_int_equal(h.op, 0);
		free(part);
	}
	mutation_hint_read(buf, len, &h);
	assert_int_equal(h.op, want->op);
	assert_int_equal(h.ino, want->ino);
	assert_int_equal(h.parent, want->parent);
	assert_int_equal(h.newparent, want->newparent);
	assert_name(h.name, want->name);
	assert_name(h.newname, want->newname);
	free(buf);
}

/*
 * The hints read off the wire what an unpack gives: the op, and each
 * field a prefetch uses (distinct values, so that a field number mixed up
 * shows); changes that name no name, and junk, read as no op.
 */
static void test_mutation_hint_reads_the_wire(void **state)
{
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;
	Sweepfs__Meta__Rename r = SWEEPFS__META__RENAME__INIT;
	Sweepfs__Meta__Link l = SWEEPFS__META__LINK__INIT;
	Sweepfs__Meta__Detach d = SWEEPFS__META__DETACH__INIT;
	Sweepfs__Meta__SetTrashtime st = SWEEPFS__META__SET_TRASHTIME__INIT;
	ProtobufCBinaryData n1 = { 5, (uint8_t *)"alpha" },
			    n2 = { 4, (uint8_t *)"beta" };
	uint8_t junk[3] = { 0xff, 0xff, 0xff };
	struct mutation_hint h;

	(void)state;
	mut.time = -12345;
	mut.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
	mut.create = &c;
	c.parent = 1001;
	c.name = n1;
	c.ino = UINT64_C(1) << 40;
	c.mode = 0100644;
	check_hint(&mut, &(struct hint_want){ .op = mut.op_case,
					      .ino = UINT64_C(1) << 40,
					      .parent = 1001,
					      .name = "alpha" });
	mut.op_case = SWEEPFS__META__MUTATION__OP_LINK;
	mut.link = &l;
	l.ino = 77;
	l.parent = 1002;
	l.name = n2;
	l.edge = 99;
	check_hint(&mut, &(struct hint_want){ .op = mut.op_case,
					      .ino = 77,
					      .parent = 1002,
					      .name = "beta" });
	mut.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
	mut.unlink = &u;
	u.parent = 1003;
	u.name = n1;
	check_hint(&mut, &(struct hint_want){ .op = mut.op_case,
					      .parent = 1003,
					      .name = "alpha" });
	mut.op_case = SWEEPFS__META__MUTATION__OP_RENAME;
	mut.rename = &r;
	r.parent = 1004;
	r.name = n1;
	r.newparent = 1005;
	r.newname = n2;
	check_hint(&mut, &(struct hint_want){ .op = mut.op_case,
					      .parent = 1004,
					      .newparent = 1005,
					      .name = "alpha",
					      .newname = "beta" });
	mut.op_case = SWEEPFS__META__MUTATION__OP_DETACH;
	mut.detach = &d;
	d.parent = 1006;
	d.name = n2;
	check_hint(&mut, &(struct hint_want){ .op = mut.op_case,
					      .parent = 1006,
					      .name = "beta" });
	mut.op_case = SWEEPFS__META__MUTATION__OP_SET_TRASHTIME;
	mut.set_trashtime = &st;
	st.ino = 5;
	check_hint(&mut, &(struct hint_want){ .op = 0 });
	mutation_hint_read(junk, sizeof(junk), &h);
	assert_int_equal(h.op, 0);
	mutation_hint_read(junk, 0, &h);
	assert_int_equal(h.op, 0);
}

/* ---- changes read without protobuf-c (mutation_read_flat()) ---------- */

/* A number for a field: an edge of a varint's or a type's width, a
 * random one of random width, or any. */
static uint64_t some_number(struct rng *s)
{
	static const uint64_t edge[] = { 0,
					 1,
					 127,
					 128,
					 16383,
					 16384,
					 INT32_MAX,
					 (uint64_t)INT32_MIN,
					 UINT32_MAX,
					 (uint64_t)INT64_MAX,
					 (uint64_t)INT64_MIN,
					 UINT64_MAX };

	uint64_t kind = rng_next(s) % 3, a = rng_next(s), b = rng_next(s);

	switch (kind) {
	case 0:
		return edge[a % (sizeof(edge) / sizeof(edge[0]))];
	case 1:
		return a >> (b % 64);
	default:
		return a;
	}
}

/* Every field of @msg (message @d, initialised here) but a oneof's: a
 * value for each, an optional one present or not; bytes from @pool. */
static void fill_fields(const ProtobufCMessageDescriptor *d,
			ProtobufCMessage *msg, struct rng *s,
			const uint8_t *pool)
{
	d->message_init(msg);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[i];
		uint8_t *at = (uint8_t *)msg + fd->offset;
		uint64_t v = some_number(s);
		size_t len = rng_next(s) % 24;

		if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
			continue;
		if (fd->label == PROTOBUF_C_LABEL_OPTIONAL) {
			if (rng_next(s) & 1)
				continue;
			assert_true(fd->quantifier_offset);
			*(protobuf_c_boolean *)((uint8_t *)msg +
						fd->quantifier_offset) = 1;
		}
		switch (fd->type) {
		case PROTOBUF_C_TYPE_UINT64:
			*(uint64_t *)at = v;
			break;
		case PROTOBUF_C_TYPE_UINT32:
			*(uint32_t *)at = (uint32_t)v;
			break;
		case PROTOBUF_C_TYPE_INT32:
			*(int32_t *)at = (int32_t)v;
			break;
		case PROTOBUF_C_TYPE_SINT64:
			*(int64_t *)at = (int64_t)v;
			break;
		case PROTOBUF_C_TYPE_BOOL:
			*(protobuf_c_boolean *)at = v & 1;
			break;
		case PROTOBUF_C_TYPE_BYTES:
			*(ProtobufCBinaryData *)at = (ProtobufCBinaryData){
				len,
				len ? (uint8_t *)pool + rng_next(s) % 64 : NULL
			};
			break;
		default:
			/* A new type in meta.proto: teach this test, and
			 * flat_put() if replay should read it itself. */
			fail_msg("%s.%s: a type this test does not fill",
				 d->name, fd->name);
		}
	}
}

/* What packing again does not show: empty bytes without a buffer, as
 * protobuf-c gives them, and bools of 0 or 1; in the op's message too. */
static void check_unpacked_shape(const ProtobufCMessageDescriptor *d,
				 const ProtobufCMessage *msg)
{
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[i];
		const uint8_t *at = (const uint8_t *)msg + fd->offset;

		if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF &&
		    *(const uint32_t *)((const uint8_t *)msg +
					fd->quantifier_offset) != fd->id)
			continue;
		if (fd->type == PROTOBUF_C_TYPE_BYTES &&
		    !((const ProtobufCBinaryData *)at)->len)
			assert_null(((const ProtobufCBinaryData *)at)->data);
		else if (fd->type == PROTOBUF_C_TYPE_BOOL)
			assert_true(*(const protobuf_c_boolean *)at <= 1);
		else if (fd->type == PROTOBUF_C_TYPE_MESSAGE)
			check_unpacked_shape(fd->descriptor,
					     *(ProtobufCMessage *const *)at);
	}
}

/*
 * @n bytes at @p: whatever mutation_read_flat() reads, protobuf-c reads
 * too, and the two give the same change (packed again, byte for byte:
 * every field and its presence). Returns whether it was read.
 */
static bool check_flat(const uint8_t *p, size_t n)
{
	struct mutation_flat fl;
	Sweepfs__Meta__Mutation *u =
		sweepfs__meta__mutation__unpack(NULL, n, p);
	bool read = mutation_read_flat(p, n, &fl);

	if (read) {
		uint8_t *a, *b;
		size_t na, nb;

		assert_non_null(u);
		assert_int_equal(fl.m.op_case, u->op_case);
		check_unpacked_shape(&sweepfs__meta__mutation__descriptor,
				     &fl.m.base);
		na = pack(&fl.m, &a);
		nb = pack(u, &b);
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na);
		free(a);
		free(b);
	}
	if (u)
		sweepfs__meta__mutation__free_unpacked(u, NULL);
	return read;
}

/*
 * Replay and followers read changes without protobuf-c when they can
 * (mutation.c). Every op, with random values at the edges of their
 * widths and optional fields present or not, is read so and read as
 * protobuf-c reads it; a change cut short, with bytes changed, a field
 * given twice or a field this build does not know is either read alike
 * or left to protobuf-c, which a replay still applies.
 */
static void test_mutation_read_flat(void **state)
{
	const ProtobufCMessageDescriptor *md =
		&sweepfs__meta__mutation__descriptor;
	struct fixture *f = *state;
	/* Field 40 (no change has one): key 40 << 3 in two bytes, 1. */
	static const uint8_t field40[] = { 0xc0, 0x02, 0x01 };
	_Alignas(16) uint8_t sub[512];
	uint8_t pool[96];
	unsigned ops = 0, cut_read = 0;
	struct rng s;

	rng_seed(&s, 0);
	for (size_t i = 0; i < sizeof(pool); i++)
		pool[i] = (uint8_t)rng_next(&s);
	for (unsigned i = 0; i < md->n_fields; i++) {
		const ProtobufCFieldDescriptor *op = &md->fields[i];

		if (!(op->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
			continue;
		ops++;
		assert_true(((const ProtobufCMessageDescriptor *)op->descriptor)
				    ->sizeof_message <=
			    sizeof(((struct mutation_flat *)0)->op));
		for (int k = 0; k < 40; k++) {
			Sweepfs__Meta__Mutation mut;
			struct mutation_flat fl;
			uint8_t *buf, *again, *bad;
			size_t n, tn = 1;

			fill_fields(md, &mut.base, &s, pool);
			fill_fields(op->descriptor, (ProtobufCMessage *)sub, &s,
				    pool);
			mut.op_case = op->id;
			*(void **)((uint8_t *)&mut + op->offset) = sub;
			n = pack(&mut, &buf);
			/* Read, and exactly what was packed. */
			assert_true(mutation_read_flat(buf, n, &fl));
			assert_true(check_flat(buf, n));
			assert_int_equal(pack(&fl.m, &again), n);
			assert_memory_equal(again, buf, n);
			free(again);
			/* Cut short anywhere. */
			for (size_t cut = 0; cut < n; cut++)
				cut_read += check_flat(buf, cut);
			/* Bytes changed. */
			bad = malloc(n + 16);
			assert_non_null(bad);
			for (int j = 0; j < 30; j++) {
				size_t at = rng_next(&s) % n;

				memcpy(bad, buf, n);
				bad[at] = (uint8_t)rng_next(&s);
				if (j & 1) {
					at = rng_next(&s) % n;
					bad[at] ^= 0x80;
				}
				check_flat(bad, n);
			}
			/* The time given twice (protobuf-c: the last one
			 * wins), and field 40, which no change has (kept as
			 * unknown): both left to protobuf-c. */
			assert_int_equal(buf[0], 1 << 3);
			while (buf[tn++] & 0x80)
				;
			memcpy(bad, buf, n);
			memcpy(bad + n, buf, tn);
			assert_false(check_flat(bad, n + tn));
			memcpy(bad + n, field40, sizeof(field40));
			assert_false(check_flat(bad, n + sizeof(field40)));
			free(bad);
			free(buf);
		}
	}
	assert_true(ops >= 21);

	/* Varints not in their shortest form, which protobuf-c reads in
	 * its own ways (a key or a length of over 5 bytes refused, a
	 * bool's bits past the 64th looked at): left to it. */
	{
		/* time 1, unlink { parent 1, name "a" } */
		static const uint8_t plain[] = { 0x08, 0x02, 0x22, 0x05, 0x08,
						 0x01, 0x12, 0x01, 0x61 },
				     key6[] = { 0x88, 0x80, 0x80, 0x80, 0x80,
						0x00, 0x02, 0x22, 0x05, 0x08,
						0x01, 0x12, 0x01, 0x61 },
				     time2[] = { 0x08, 0x82, 0x00, 0x22, 0x05,
						 0x08, 0x01, 0x12, 0x01, 0x61 },
				     len6[] = { 0x08, 0x02, 0x22, 0x85, 0x80,
						0x80, 0x80, 0x80, 0x00, 0x08,
						0x01, 0x12, 0x01, 0x61 },
				     keep10[] = { 0x08, 0x02, 0x22, 0x10, 0x08,
						  0x01, 0x12, 0x01, 0x61, 0x18,
						  0x80, 0x80, 0x80, 0x80, 0x80,
						  0x80, 0x80, 0x80, 0x80, 0x02 };
		struct mutation_flat fl;

		assert_true(mutation_read_flat(plain, sizeof(plain), &fl));
		assert_int_equal(fl.m.op_case,
				 SWEEPFS__META__MUTATION__OP_UNLINK);
		assert_int_equal(fl.m.time, 1);
		assert_int_equal(fl.m.unlink->parent, 1);
		assert_int_equal(fl.m.unlink->name.len, 1);
		assert_false(fl.m.unlink->has_keep);
		assert_true(check_flat(plain, sizeof(plain)));
		assert_false(check_flat(key6, sizeof(key6)));
		assert_false(check_flat(time2, sizeof(time2)));
		assert_false(check_flat(len6, sizeof(len6)));
		assert_false(check_flat(keep10, sizeof(keep10)));
	}
	/* A record cut where a field ends, leaving every required one, is
	 * a whole change of its own: some are read, alike. */
	assert_true(cut_read > 0);

	/* One protobuf-c reads and this does not still replays. */
	{
		Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
		Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;
		struct mutation_flat fl;
		uint8_t *buf, *more;
		size_t n;

		build_small(f);
		mut.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
		mut.create = &c;
		c.parent = f->a.root->ino;
		c.name = (ProtobufCBinaryData){ 7, (uint8_t *)"unknown" };
		c.ino = f->a.next_ino;
		c.edge = f->a.next_edge;
		c.mode = S_IFREG | 0644;
		n = pack(&mut, &buf);
		more = malloc(n + sizeof(field40));
		assert_non_null(more);
		memcpy(more, buf, n);
		memcpy(more + n, field40, sizeof(field40));
		n += sizeof(field40);
		assert_false(mutation_read_flat(more, n, &fl));
		assert_int_equal(
			mutation_replay(&f->a, f->a.version + 1, more, n), 0);
		assert_non_null(ns_lookup(&f->a, f->a.root, "unknown", 7));
		assert_false(check_flat(more, n));
		free(more);
		free(buf);
	}
}

/*
 * mutation_prefetch() is a hint: on changes of every kind it reads ahead
 * for, on ones naming what is not there or not a directory, and on a
 * payload that does not unpack, it changes nothing.
 */
static void test_mutation_prefetch_changes_nothing(void **state)
{
	struct fixture *f = *state;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;
	Sweepfs__Meta__Rename r = SWEEPFS__META__RENAME__INIT;
	Sweepfs__Meta__Link l = SWEEPFS__META__LINK__INIT;
	Sweepfs__Meta__Detach d = SWEEPFS__META__DETACH__INIT;
	uint8_t junk[3] = { 0xff, 0xff, 0xff };
	struct node *big, *file;
	uint64_t parents[3];
	char *before, *after;
	size_t memory;

	build_small(f);
	big = mk(f, f->a.root, "big", S_IFDIR | 0755);
	for (int i = 0; i < 100; i++) {
		char name[16];

		snprintf(name, sizeof(name), "e%d", i);
		file = mk(f, big, name, S_IFREG | 0644);
	}
	/* A directory with a table, the root, a file, nothing. */
	parents[0] = big->ino;
	parents[1] = file->ino;
	parents[2] = f->a.next_ino + 1000;
	before = dump_ns(&f->a);
	memory = ns_memory(&f->a);
	for (int i = 0; i < 3; i++) {
		mut.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
		mut.create = &c;
		c.parent = parents[i];
		c.name.data = (uint8_t *)"new";
		c.name.len = 3;
		c.ino = f->a.next_ino;
		prefetch_packed(&f->a, &mut);
		mut.create = NULL;
		mut.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
		mut.unlink = &u;
		u.parent = parents[i];
		u.name.data = (uint8_t *)"e7";
		u.name.len = 2;
		prefetch_packed(&f->a, &mut);
		mut.unlink = NULL;
		mut.op_case = SWEEPFS__META__MUTATION__OP_RENAME;
		mut.rename = &r;
		r.parent = parents[i];
		r.name = u.name;
		r.newparent = parents[(i + 1) % 3];
		r.newname = c.name;
		prefetch_packed(&f->a, &mut);
		mut.rename = NULL;
		mut.op_case = SWEEPFS__META__MUTATION__OP_LINK;
		mut.link = &l;
		l.ino = file->ino;
		l.parent = parents[i];
		l.name = c.name;
		prefetch_packed(&f->a, &mut);
		mut.link = NULL;
		mut.op_case = SWEEPFS__META__MUTATION__OP_DETACH;
		mut.detach = &d;
		d.parent = parents[i];
		d.name = u.name;
		prefetch_packed(&f->a, &mut);
		mut.detach = NULL;
	}
	for (unsigned s = 0; s < CHANGELOG_STAGES; s++) {
		mutation_prefetch(&f->a, s, junk, sizeof(junk));
		mutation_prefetch(&f->a, s, junk, 0);
	}
	after = dump_ns(&f->a);
	assert_string_equal(before, after);
	assert_int_equal(ns_memory(&f->a), memory);
	assert_null(ns_lookup(&f->a, big, "new", 3));
	free(before);
	free(after);
}

/*
 * Replay unpacks into a buffer on the stack: a change that fits, one that
 * spills to malloc() (a 200 KiB xattr value), and one that does not
 * unpack.
 */
static void test_mutation_replay_arena(void **state)
{
	struct fixture *f = *state;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;
	Sweepfs__Meta__Setxattr x = SWEEPFS__META__SETXATTR__INIT;
	size_t vlen = 200 << 10;
	uint8_t *value = malloc(vlen), junk[3] = { 0xff, 0xff, 0xff };
	const void *got;
	size_t glen = 0;
	struct node *n;

	assert_non_null(value);
	memset(value, 'v', vlen);
	mut.time = 5;
	mut.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
	mut.create = &c;
	c.parent = NS_ROOT_INO;
	c.name.data = (uint8_t *)"r";
	c.name.len = 1;
	c.ino = f->a.next_ino;
	c.edge = f->a.next_edge;
	c.mode = S_IFREG | 0644;
	assert_int_equal(replay_packed(&f->a, &mut), 0);
	n = ns_get(&f->a, c.ino);
	assert_non_null(n);
	mut.op_case = SWEEPFS__META__MUTATION__OP_SETXATTR;
	mut.create = NULL;
	mut.setxattr = &x;
	x.ino = c.ino;
	x.name.data = (uint8_t *)"user.big";
	x.name.len = 8;
	x.has_value = 1;
	x.value.data = value;
	x.value.len = vlen;
	assert_int_equal(replay_packed(&f->a, &mut), 0);
	assert_int_equal(ns_xattr_get(&f->a, n, "user.big", 8, &got, &glen), 0);
	assert_int_equal(glen, vlen);
	assert_memory_equal(got, value, vlen);
	assert_int_equal(mutation_replay(&f->a, f->a.version + 1, junk,
					 sizeof(junk)),
			 -EUCLEAN);
	free(value);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_checkpoint_load_cluster_id,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_names_ahead, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_cut_in_names, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_mutation_prefetch_changes_nothing, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_load_round_trip,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_empty_namespace, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_sizes_inode_table, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_purge_walk_agrees, setup, teardown),
		cmocka_unit_test_setup_teardown(test_purge_drops_name_index,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_load_format3,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_load_none,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_load_falls_back,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_all_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_prune_keeps_newest, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_prune_removes_tmp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_write_bad_dir,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_write_error,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_write_steps,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_start_background, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunks_unnamed_ranges,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_chunks_named,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_chunk_intents,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_sizes_dir_table, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_sparse_inodes, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_big_checked_by_halves, setup,
			teardown),
		cmocka_unit_test(test_mutation_hint_reads_the_wire),
		cmocka_unit_test_setup_teardown(test_mutation_read_flat, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_mutation_replay_arena,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_links_outnumber_nodes, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_checkpoint_load_duplicate_node, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
