/*
 * rmr.h: may_remove_tree_counted() decides as rm -rf run by the caller
 * would (read, write and search on every non-empty directory, the sticky
 * rule), and looks at no more than it must: one visit a directory for a
 * tree of leaf directories, whatever they hold, so that a user's rmr of a
 * 17 M-entry directory does not walk 17 M entries on the loop. Random
 * trees are checked against the rule applied to every directory. What a
 * walk still costs is bounded: it stops at its limit (-EAGAIN), and
 * may_remove_tree_paid() takes its limit from two token buckets, charges
 * the visits made whatever the verdict, and says E2BIG for a tree no
 * walk may afford; a session's full bucket affords a user's 1 M files.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "bucket.h"
#include "buf.h"
#include "namespace.h"
#include "perm.h"
#include "rmr.h"
#include "trash.h"
#include "util.h"

struct fixture {
	struct ns ns;
	uint64_t names; /* for mk() */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || ns_init(&f->ns, 1000) < 0) {
		free(f);
		return -1;
	}
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

/* A new node in @dir of @mode owned by @uid (group @uid). */
static struct node *mk(struct fixture *f, struct node *dir, uint32_t mode,
		       uint32_t uid)
{
	struct ns_create_args a = {
		.ino = f->ns.next_ino,
		.edge = f->ns.next_edge,
		.mode = mode,
		.uid = uid,
		.gid = uid,
		.now = 1,
	};
	struct node *n = NULL;
	char name[32];

	snprintf(name, sizeof(name), "n%" PRIu64, f->names++);
	assert_int_equal(ns_create(&f->ns, dir, name, strlen(name), &a, &n), 0);
	return n;
}

static const struct sw_cred user = { .uid = 1000, .gid = 1000 };

/* The verdict of a walk with no limit. */
static int may_remove_tree(const struct sw_cred *c, struct node *root)
{
	uint64_t visits;

	return may_remove_tree_counted(c, root, UINT64_MAX, &visits);
}

static void chmod_to(struct fixture *f, struct node *n, uint32_t mode)
{
	struct ns_setattr_args a = { .valid = NS_SET_MODE, .mode = mode };

	assert_int_equal(ns_setattr(&f->ns, n, &a), 0);
}

/* A directory of @files files and nothing else, in @in. */
static struct node *leaf(struct fixture *f, struct node *in, unsigned files)
{
	struct node *d = mk(f, in, S_IFDIR | 0755, 1000);

	for (unsigned i = 0; i < files; i++)
		mk(f, d, S_IFREG | 0644, 1000);
	return d;
}

static void test_leaf_directories_cost_one_visit(void **state)
{
	struct fixture *f = *state;
	uint64_t visits[2];

	for (int big = 0; big < 2; big++) {
		struct node *top = mk(f, f->ns.root, S_IFDIR | 0755, 1000);

		/* Files first, then the subdirectories: the list is read
		 * up to the last of them. */
		mk(f, top, S_IFREG | 0644, 1000);
		leaf(f, top, big ? 20000 : 10);
		leaf(f, top, big ? 20000 : 10);
		assert_int_equal(may_remove_tree_counted(&user, top, UINT64_MAX,
							 &visits[big]),
				 0);
	}
	assert_int_equal(visits[0], 3);
	assert_int_equal(visits[1], visits[0]);
}

static void test_refusals(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk(f, f->ns.root, S_IFDIR | 0755, 1000);
	struct node *ro = leaf(f, leaf(f, top, 3), 2);
	struct node *sticky = mk(f, top, S_IFDIR | 01777, 0);
	uint64_t visits;

	assert_int_equal(may_remove_tree(&user, top), 0);
	/* A non-empty directory it may not write, two levels down. */
	chmod_to(f, ro, 0555);
	assert_int_equal(may_remove_tree(&user, top), -EACCES);
	chmod_to(f, ro, 0755);
	/* A sticky directory root owns, with another user's file. */
	mk(f, sticky, S_IFREG | 0644, 1000);
	assert_int_equal(may_remove_tree(&user, top), 0);
	mk(f, sticky, S_IFREG | 0644, 2000);
	assert_int_equal(may_remove_tree_counted(&user, top, UINT64_MAX,
						 &visits),
			 -EPERM);
	/* Its owner, and root, may. */
	assert_int_equal(may_remove_tree(&(struct sw_cred){ .uid = 0 }, top),
			 0);
}

/* A directory of @files files owned by @uid, then an empty directory:
 * its list is read whole, @files + 1 visits. */
static struct node *subdir_last(struct fixture *f, struct node *in,
				unsigned files, uint32_t uid)
{
	struct node *d = mk(f, in, S_IFDIR | 0777, 0);

	for (unsigned i = 0; i < files; i++)
		mk(f, d, S_IFREG | 0644, uid);
	mk(f, d, S_IFDIR | 0755, uid);
	return d;
}

static void test_walk_stops_at_its_limit(void **state)
{
	struct fixture *f = *state;
	struct node *big = subdir_last(f, f->ns.root, 1000, 0);
	struct node *sticky = mk(f, f->ns.root, S_IFDIR | 01777, 0);
	struct node *leaves = mk(f, f->ns.root, S_IFDIR | 0755, 1000);
	uint64_t visits;

	assert_int_equal(may_remove_tree_counted(&user, big, 1001, &visits), 0);
	assert_int_equal(visits, 1001);
	assert_int_equal(may_remove_tree_counted(&user, big, 1000, &visits),
			 -EAGAIN);
	assert_int_equal(visits, 1000);
	assert_int_equal(may_remove_tree_counted(&user, big, 0, &visits),
			 -EAGAIN);
	assert_int_equal(visits, 0);
	/* A sticky directory another user owns: an entry a visit. */
	for (int i = 0; i < 500; i++)
		mk(f, sticky, S_IFREG | 0644, 1000);
	assert_int_equal(may_remove_tree_counted(&user, sticky, 500, &visits),
			 0);
	assert_int_equal(may_remove_tree_counted(&user, sticky, 499, &visits),
			 -EAGAIN);
	assert_int_equal(visits, 499);
	/* Leaves cost what they cost with no limit: a visit each. */
	leaf(f, leaves, 5000);
	leaf(f, leaves, 3000);
	assert_int_equal(may_remove_tree_counted(&user, leaves, 2, &visits), 0);
	assert_int_equal(visits, 2);
	assert_int_equal(may_remove_tree_counted(&user, leaves, 1, &visits),
			 -EAGAIN);
	/* A refusal found before the limit is that refusal. */
	mk(f, sticky, S_IFREG | 0644, 2000);
	assert_int_equal(may_remove_tree_counted(&user, sticky, 501, &visits),
			 -EPERM);
	assert_int_equal(visits, 501);
}

#define SEC 1000000000ll

/* Small enough to afford and to exceed in a test: a session's bucket
 * holds 5000 visits and refills at 1000 a second, everyone's 8000 at
 * 2000. */
static const struct rmr_budget small = {
	.session = { 1000, 5000 },
	.all = { 2000, 8000 },
	.walk = 5000,
};

static void test_paid_charges_what_it_walked(void **state)
{
	struct fixture *f = *state;
	struct node *t1000 = subdir_last(f, f->ns.root, 1000, 0);
	struct node *t4000 = subdir_last(f, f->ns.root, 4000, 0);
	struct bucket mine = { 0 }, all = { 0 };
	int64_t now = 10 * SEC;
	uint64_t visits;

	/* Full buckets: 1001 visits, paid from both. */
	assert_int_equal(may_remove_tree_paid(&small, &mine, &all, now, &user,
					      t1000, &visits),
			 0);
	assert_int_equal(visits, 1001);
	assert_true(bucket_fill(&mine, &small.session, now) == 5000 - 1001);
	assert_true(bucket_fill(&all, &small.all, now) == 8000 - 1001);
	/* 4001 more than its 3999: it stops where its bucket ran out,
	 * EAGAIN, and what it walked is paid all the same. */
	assert_int_equal(may_remove_tree_paid(&small, &mine, &all, now, &user,
					      t4000, &visits),
			 -EAGAIN);
	assert_int_equal(visits, 3999);
	assert_true(bucket_fill(&mine, &small.session, now) == 0);
	assert_true(bucket_fill(&all, &small.all, now) == 8000 - 5000);
	/* Sent again at once: refused without a visit. */
	for (int i = 0; i < 100; i++) {
		assert_int_equal(may_remove_tree_paid(&small, &mine, &all, now,
						      &user, t1000, &visits),
				 -EAGAIN);
		assert_int_equal(visits, 0);
	}
	/* A refusal pays too: a subdirectory the user may not write. */
	now += 5 * SEC; /* both full again */
	chmod_to(f, t1000->u.dir->tail->child, 0555);
	mk(f, t1000->u.dir->tail->child, S_IFREG | 0644, 0);
	assert_int_equal(may_remove_tree_paid(&small, &mine, &all, now, &user,
					      t1000, &visits),
			 -EACCES);
	assert_int_equal(visits, 1001);
	assert_true(bucket_fill(&mine, &small.session, now) == 5000 - 1001);
	/* Once its bucket refilled for 4001: done. */
	now += 5 * SEC;
	assert_int_equal(may_remove_tree_paid(&small, &mine, &all, now, &user,
					      t4000, &visits),
			 0);
	assert_int_equal(visits, 4001);
}

static void test_paid_everyone_shares_one_bucket(void **state)
{
	struct fixture *f = *state;
	struct node *t = subdir_last(f, f->ns.root, 2999, 0);
	struct bucket mine[4] = { { 0 } }, all = { 0 };
	int64_t now = 10 * SEC;
	uint64_t visits;

	/* Fresh sessions each have a full bucket; everyone's pays for
	 * two walks of 3000 and then 2000 visits of a third. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(may_remove_tree_paid(&small, &mine[i], &all,
						      now, &user, t, &visits),
				 0);
	assert_int_equal(may_remove_tree_paid(&small, &mine[2], &all, now,
					      &user, t, &visits),
			 -EAGAIN);
	assert_int_equal(visits, 2000);
	assert_int_equal(may_remove_tree_paid(&small, &mine[3], &all, now,
					      &user, t, &visits),
			 -EAGAIN);
	assert_int_equal(visits, 0);
	/* A second and a half later everyone's holds 3000 again. */
	now += 3 * SEC / 2;
	assert_int_equal(may_remove_tree_paid(&small, &mine[3], &all, now,
					      &user, t, &visits),
			 0);
}

static void test_paid_e2big_past_one_walk(void **state)
{
	struct fixture *f = *state;
	struct node *t = subdir_last(f, f->ns.root, 5000, 0);
	struct bucket mine = { 0 }, all = { 0 };
	uint64_t visits;

	/* Full buckets and still more than a walk may make: no retry
	 * will do, E2BIG. */
	assert_int_equal(may_remove_tree_paid(&small, &mine, &all, SEC, &user,
					      t, &visits),
			 -E2BIG);
	assert_int_equal(visits, 5000);
	/* With less in its bucket than a walk's worst, it cannot tell:
	 * EAGAIN. */
	assert_int_equal(may_remove_tree_paid(&small, &mine, &all, 2 * SEC,
					      &user, t, &visits),
			 -EAGAIN);
	assert_int_equal(visits, 1000);
}

/* The master's budget: one walk of a full session bucket removes a
 * user's directory of 1 M files with a subdirectory last, and a sticky
 * directory (another user's) of 1 M files of the user's. */
static void test_paid_master_budget_affords_a_million(void **state)
{
	struct fixture *f = *state;
	struct node *t = subdir_last(f, f->ns.root, 1000000, 1000);
	struct node *sticky = mk(f, f->ns.root, S_IFDIR | 01777, 0);
	struct bucket mine = { 0 }, all = { 0 };
	int64_t now = SEC;
	uint64_t visits;

	assert_int_equal(may_remove_tree_paid(&rmr_budget, &mine, &all, now,
					      &user, t, &visits),
			 0);
	assert_int_equal(visits, 1000001);
	for (int i = 0; i < 1000000; i++)
		mk(f, sticky, S_IFREG | 0644, 1000);
	now += 4 * SEC; /* a session's bucket refilled */
	assert_int_equal(may_remove_tree_paid(&rmr_budget, &mine, &all, now,
					      &user, sticky, &visits),
			 0);
	assert_int_equal(visits, 1000000);
	/* One walk of a full bucket is its cap, no more. */
	assert_true(rmr_budget.session.cap == rmr_budget.walk);
	assert_true(rmr_budget.all.cap == rmr_budget.walk);
}

/* However many fresh sessions send a walk in one turn of the loop (one
 * instant), the walks together make one walk's worth of visits at most:
 * what another session waits behind them. */
static void test_paid_master_budget_one_walk_a_turn(void **state)
{
	struct fixture *f = *state;
	struct node *t = subdir_last(f, f->ns.root, 300000, 0);
	struct bucket mine[16] = { { 0 } }, all = { 0 };
	uint64_t visits, total = 0;
	int walked = 0;

	for (size_t i = 0; i < SW_ARRAY_SIZE(mine); i++) {
		int rc = may_remove_tree_paid(&rmr_budget, &mine[i], &all, SEC,
					      &user, t, &visits);

		assert_true(rc == 0 || rc == -EAGAIN);
		walked += rc == 0;
		total += visits;
	}
	/* 300,001 visits a whole walk: six whole, then one cut short. */
	assert_int_equal(walked, rmr_budget.walk / 300001);
	assert_int_equal(total, rmr_budget.walk);
}

/* The rule, applied to every directory of the tree by a full walk. */
static int reference(const struct sw_cred *c, struct node *d)
{
	int rc = 0;

	if (d->u.dir->nentries) {
		rc = perm_check(c, d, PERM_R | PERM_W | PERM_X);
		for (struct edge *e = d->u.dir->head; !rc && e; e = e->next)
			if (e->child && (d->mode & S_ISVTX))
				rc = perm_sticky(c, d, e->child);
	}
	for (struct edge *e = d->u.dir->head; !rc && e; e = e->next)
		if (e->child && S_ISDIR(e->child->mode))
			rc = reference(c, e->child);
	return rc;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void grow(struct fixture *f, struct node *d, int depth)
{
	static const uint32_t modes[] = { 0755, 0755, 0755, 01777, 0555, 0700 };
	unsigned n = rnd(6);

	for (unsigned i = 0; i < n; i++) {
		uint32_t uid = rnd(4) ? 1000 : 2000;

		if (depth < 4 && rnd(3) == 0)
			grow(f,
			     mk(f, d,
				S_IFDIR | modes[rnd(SW_ARRAY_SIZE(modes))],
				uid),
			     depth + 1);
		else
			mk(f, d, S_IFREG | 0644, uid);
	}
}

static void test_as_the_rule_says(void **state)
{
	struct fixture *f = *state;
	unsigned refused = 0;

	for (int t = 0; t < 500; t++) {
		struct node *top = mk(f, f->ns.root, S_IFDIR | 0755, 1000);
		int want, got;

		grow(f, top, 0);
		want = reference(&user, top);
		got = may_remove_tree(&user, top);
		/* The same verdict, the same first refusal. */
		assert_int_equal(got, want);
		refused += got != 0;
	}
	/* Both outcomes were tried. */
	assert_true(refused > 50 && refused < 450);
}

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/*
 * Random changes of every kind a namespace takes, and after each, every
 * directory's nsubdirs against a count of its list, and
 * may_remove_tree_counted() with no limit against reference() (the same errno) for random directories and users:
 * the walk trusts nsubdirs, and a directory it missed would be a user
 * removing what it may not.
 */
static struct ns ns;
static int64_t now = 1;
static uint64_t names;

/* All live (dir, edge) pairs below root, and the directories. */
struct pair {
	struct node *dir;
	struct edge *e;
};
static struct pair pairs[100000];
static size_t npairs;
static struct node *dirs[100000];
static size_t ndirs;

static void collect(struct node *d)
{
	assert_true(ndirs < SW_ARRAY_SIZE(dirs));
	dirs[ndirs++] = d;
	for (struct edge *e = d->u.dir->head; e; e = e->next) {
		if (!e->child)
			continue;
		assert_true(npairs < SW_ARRAY_SIZE(pairs));
		pairs[npairs++] = (struct pair){ d, e };
		if (S_ISDIR(e->child->mode))
			collect(e->child);
	}
}

static void refresh(void)
{
	npairs = ndirs = 0;
	collect(ns.root);
}

static int check_counts(void *elem, void *arg)
{
	struct node *d = elem;
	uint64_t sub = 0;

	(void)arg;
	if (!S_ISDIR(d->mode))
		return 0;
	for (struct edge *e = d->u.dir->head; e; e = e->next)
		sub += e->child && S_ISDIR(e->child->mode);
	if (sub != d->u.dir->nsubdirs) {
		fprintf(stderr,
			"dir %" PRIu64 ": nsubdirs %" PRIu64
			", counted %" PRIu64 "\n",
			d->ino, d->u.dir->nsubdirs, sub);
		fail();
	}
	return 0;
}

static const uint32_t op_modes[] = {
	0755, 0755, 0755, 01777, 01777, 0555, 0700
};

#define NAME_LEN 32

static void new_name(char buf[NAME_LEN])
{
	snprintf(buf, NAME_LEN, "n%" PRIu64, names++);
}

static int mk_any(struct node *dir, uint32_t mode, uint32_t uid)
{
	struct ns_create_args a = {
		.ino = ns.next_ino,
		.edge = ns.next_edge,
		.mode = mode,
		.uid = uid,
		.gid = uid,
		.now = ++now,
	};
	char name[NAME_LEN];

	new_name(name);
	return ns_create(&ns, dir, name, strlen(name), &a, NULL);
}

static struct cursor cursors[64]; /* pinned: tombstones */
static uint64_t trash_ids[4096];
static size_t ntrash;
static uint64_t next_id = 1;

static void copy_tree(struct node *src, struct node *into)
{
	struct sw_buf b = SW_BUF_INIT;
	uint64_t id = next_id++ + 1000000, ino;
	char name[NAME_LEN];
	size_t off = 0, start = 0, recs = 0;

	if (ns_copy_image(&ns, src, &b) < 0)
		return;
	new_name(name);
	assert_int_equal(ns_copy_begin(&ns, id, into->ino, name, strlen(name),
				       ns.next_chunk),
			 0);
	while (off < b.len) {
		ssize_t r = ns_copy_record(b.data + off, b.len - off);

		assert_true(r > 0);
		off += (size_t)r;
		if (++recs % 3 == 0) { /* in slices */
			ns_copy_part(&ns, id, b.data + start, off - start,
				     ns.next_ino, ns.next_edge);
			start = off;
		}
	}
	if (start < off)
		ns_copy_part(&ns, id, b.data + start, off - start, ns.next_ino,
			     ns.next_edge);
	ns_copy_end(&ns, id, ns.next_edge, 0, ++now, &ino);
	sw_buf_release(&b);
}

static unsigned okc[13]; /* changes made, by kind */
static int last_rc;
static void one_op(void)
{
	unsigned op;
	struct pair p, q;
	struct node *d;
	char name[NAME_LEN];

	refresh();
	d = dirs[rnd((uint32_t)ndirs)];
	op = rnd(13);
	last_rc = -1;
	switch (op) {
	case 0:
	case 1:
		last_rc = mk_any(d, S_IFREG | 0644, rnd(3) ? 1000 : 2000);
		break;
	case 2:
		if (ndirs < 400)
			last_rc = mk_any(
				d,
				S_IFDIR |
					op_modes[rnd(SW_ARRAY_SIZE(op_modes))],
				rnd(3) ? 1000 : 2000);
		break;
	case 3: /* rename to a new name, anywhere */
		if (!npairs)
			break;
		p = pairs[rnd((uint32_t)npairs)];
		new_name(name);
		last_rc = ns_rename(&ns, p.dir, p.e->name, p.e->namelen, d,
				    name, strlen(name), 0, ns.next_edge, false,
				    ++now);
		break;
	case 4: /* rename over an existing name (dir over empty dir too) */
	case 5: /* RENAME_EXCHANGE */
		if (npairs < 2)
			break;
		p = pairs[rnd((uint32_t)npairs)];
		q = pairs[rnd((uint32_t)npairs)];
		{
			char sn[256], dn[256];
			size_t sl = p.e->namelen, dl = q.e->namelen;

			memcpy(sn, p.e->name, sl);
			memcpy(dn, q.e->name, dl);
			last_rc = ns_rename(&ns, p.dir, sn, sl, q.dir, dn, dl,
					    rnd(2) ? RENAME_EXCHANGE : 0,
					    ns.next_edge, false, ++now);
		}
		break;
	case 6: /* unlink / rmdir, maybe under a cursor (tombstone) */
		if (!npairs)
			break;
		p = pairs[rnd((uint32_t)npairs)];
		if (rnd(2)) {
			struct cursor *c = &cursors[rnd(64)];

			ns_cursor_set(&ns, c, p.dir, p.e);
		}
		last_rc = ns_unlink(&ns, p.dir, p.e->name, p.e->namelen, false,
				    ++now);
		break;
	case 7: /* trash a directory */
		if (!npairs || ntrash == 4096)
			break;
		p = pairs[rnd((uint32_t)npairs)];
		if (!S_ISDIR(p.e->child->mode))
			break;
		if (ns_trash_detach(&ns, p.dir, p.e->name, p.e->namelen,
				    next_id, now + 1000, now + 1) == 0) {
			trash_ids[ntrash++] = next_id;
			last_rc = 0;
		}
		next_id++;
		break;
	case 8: /* restore one */
		if (!ntrash)
			break;
		{
			size_t i = rnd((uint32_t)ntrash);

			new_name(name);
			if (ns_trash_restore(&ns, trash_ids[i], d, name,
					     strlen(name), ns.next_edge,
					     ++now) == 0) {
				trash_ids[i] = trash_ids[--ntrash];
				last_rc = 0;
			}
		}
		break;
	case 9: /* a snapshot copy of a directory, somewhere */
		if (ndirs < 300) {
			struct node *src = dirs[rnd((uint32_t)ndirs)];

			if (src != ns.root) {
				copy_tree(src, d);
				last_rc = 0;
			}
		}
		break;
	case 10: /* a name's snapshot flag */
		if (!npairs)
			break;
		p = pairs[rnd((uint32_t)npairs)];
		ns_edge_flag(p.dir, p.e, rnd(2));
		break;
	case 11: /* chmod */
		if (d != ns.root) {
			struct ns_setattr_args a = {
				.valid = NS_SET_MODE,
				.mode = op_modes[rnd(SW_ARRAY_SIZE(op_modes))],
				.now = ++now,
			};
			ns_setattr(&ns, d, &a);
		}
		break;
	case 12: /* move a cursor on */
	{
		struct cursor *c = &cursors[rnd(64)];

		if (rnd(2))
			ns_cursor_clear(&ns, c);
	} break;
	}
	okc[op] += last_rc == 0;
}

static void test_nsubdirs_through_every_change(void **state)
{
	static const struct sw_cred users[] = { { .uid = 1000, .gid = 1000 },
						{ .uid = 2000, .gid = 2000 } };
	unsigned refused = 0, checked = 0, deep = 0;

	(void)state;
	assert_int_equal(ns_init(&ns, 1), 0);
	for (int i = 0; i < 20; i++)
		mk_any(ns.root, S_IFDIR | 0755, 1000);
	for (int op = 0; op < 20000; op++) {
		one_op();
		ns_foreach_node(&ns, check_counts, NULL);
		refresh();
		for (int k = 0; k < 4; k++) {
			struct node *t = dirs[rnd((uint32_t)ndirs)];
			const struct sw_cred *c = &users[rnd(2)];
			int want = reference(c, t);
			uint64_t visits;
			int got = may_remove_tree_counted(c, t, UINT64_MAX,
							  &visits);

			assert_int_equal(got, want);
			checked++;
			refused += got != 0;
			deep += got != 0 && visits > 2;
		}
	}
	/* Every kind of change was made, and both verdicts came, some
	 * deep in a tree. */
	for (int i = 0; i < 12; i++)
		if (i != 10 && i != 11)
			assert_true(okc[i] > 0);
	assert_true(refused > checked / 10 && refused < checked - checked / 10);
	assert_true(deep > 100);
	for (int i = 0; i < 64; i++)
		ns_cursor_clear(&ns, &cursors[i]);
	ns_release(&ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_leaf_directories_cost_one_visit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_walk_stops_at_its_limit,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_paid_charges_what_it_walked, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_paid_everyone_shares_one_bucket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paid_e2big_past_one_walk,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_paid_master_budget_affords_a_million, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_paid_master_budget_one_walk_a_turn, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_as_the_rule_says, setup,
						teardown),
		cmocka_unit_test(test_nsubdirs_through_every_change),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
