/*
 * trash.h: a page of the trash costs what it returns (threat model,
 * finding 8). A user's listing in a trash of 20,000 items of others looks
 * at its own items only and steps through O(log n) others on the way;
 * paging with a cursor returns every item exactly once, in order of id,
 * while items come, go (the cursor's own among them) and change owner
 * between pages; a cursor that is no item costs no more than one that
 * is; the trees, the list and the index by inode stay in step through
 * every kind of change.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "namespace.h"
#include "trash.h"

#define OTHER 1000 /* the uid who owns most of the trash */
#define USER 2000  /* the uid who lists */

struct fixture {
	struct ns ns;
	struct node *dir; /* where the files are made and removed */
	uint64_t version; /* the next item id */
	uint64_t names;	  /* for mk() */
	uint64_t now;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ns_create_args a = { .mode = S_IFDIR | 0777, .now = 1 };

	if (!f || ns_init(&f->ns, 1) < 0) {
		free(f);
		return -1;
	}
	a.ino = f->ns.next_ino;
	a.edge = f->ns.next_edge;
	if (ns_create(&f->ns, f->ns.root, "d", 1, &a, &f->dir) < 0)
		return -1;
	f->version = 100;
	f->now = 2;
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

/* A new file (with @dir: a directory) owned by @uid, removed at once into
 * the trash: its item id. */
static uint64_t trash_one(struct fixture *f, uint32_t uid, bool dir)
{
	struct ns_create_args a = {
		.ino = f->ns.next_ino,
		.edge = f->ns.next_edge,
		.mode = dir ? S_IFDIR | 0755 : S_IFREG | 0644,
		.uid = uid,
		.gid = uid,
		.now = (int64_t)f->now,
	};
	char name[32];
	int len = snprintf(name, sizeof(name), "f%" PRIu64, f->names++);
	uint64_t id = f->version++;

	assert_int_equal(ns_create(&f->ns, f->dir, name, (size_t)len, &a, NULL),
			 0);
	if (dir)
		assert_int_equal(ns_trash_detach(&f->ns, f->dir, name,
						 (size_t)len, id, INT64_MAX,
						 (int64_t)f->now),
				 0);
	else
		assert_int_equal(ns_trash_unlink(&f->ns, f->dir, name,
						 (size_t)len, id, INT64_MAX,
						 (int64_t)f->now),
				 0);
	return id;
}

/* What a page took. */
struct taken {
	uint64_t *ids;
	size_t n, cap, max; /* max: the page's size */
	uint32_t uid;	    /* every item's owner (its key), 0: any */
};

static int take(const struct trash_item *t, void *arg)
{
	struct taken *k = arg;

	if (k->n == k->max)
		return 1;
	if (k->uid)
		assert_int_equal(t->uid, k->uid);
	if (k->n == k->cap) {
		k->cap = k->cap ? 2 * k->cap : 64;
		k->ids = realloc(k->ids, k->cap * sizeof(*k->ids));
		assert_non_null(k->ids);
	}
	k->ids[k->n++] = t->id;
	return 0;
}

/* One page of @owner's items after @after, at most @max: its cost and
 * cursor in *@p, the ids appended to @k. */
static void page(struct fixture *f, int64_t owner, uint64_t after, size_t max,
		 struct ns_trash_page *p, struct taken *k)
{
	memset(p, 0, sizeof(*p));
	p->after = after;
	p->owner = owner;
	p->max_visits = 10000;
	p->take = take;
	p->arg = k;
	k->max = k->n + max;
	ns_trash_page(&f->ns, p);
}

/* A user's listing among 20,000 items of another looks at its own 10
 * and steps through a handful of others: the walk of the whole trash
 * before (20,010 items looked at for 10 returned) is gone. An admin's
 * page of 100 looks at 101 (the one that did not fit). */
static void test_ns_trash_page_user_visits_own(void **state)
{
	struct fixture *f = *state;
	struct taken k = { .uid = USER };
	struct ns_trash_page p;
	uint64_t own[10];
	size_t o = 0;

	for (unsigned i = 0; i < 20010; i++) {
		bool mine = i % 2001 == 1000;

		if (mine)
			own[o++] = trash_one(f, USER, i % 2);
		else
			trash_one(f, OTHER, i % 7 == 0);
	}
	assert_int_equal(o, 10);
	assert_int_equal(f->ns.ntrash, 20010);
	page(f, USER, 0, 10000, &p, &k);
	assert_int_equal(k.n, 10);
	assert_memory_equal(k.ids, own, sizeof(own));
	assert_false(p.more);
	assert_int_equal(p.next, own[9]);
	assert_int_equal(p.visits, 10);
	printf("# a user's 10 items among 20,010: %" PRIu64
	       " looked at, %" PRIu64 " tree steps\n",
	       p.visits, p.steps);
	/* About 2 ln n to the start and one step an item after. */
	assert_in_range(p.steps, 1, 150);

	k.uid = 0;
	k.n = 0;
	page(f, NS_ANY_OWNER, 0, 100, &p, &k);
	assert_int_equal(k.n, 100);
	assert_true(p.more);
	assert_int_equal(p.visits, 101);
	assert_int_equal(p.next, k.ids[99]);
	assert_in_range(p.steps, 100, 300);
	free(k.ids);
}

/* A cursor that is no item (between two, below all, above all, the
 * largest there is) starts where it would and costs no more. */
static void test_ns_trash_page_any_cursor(void **state)
{
	struct fixture *f = *state;
	uint64_t ids[3000];
	struct taken k = { .uid = USER };
	struct ns_trash_page p;
	size_t n = 0;

	for (unsigned i = 0; i < 9000; i++) {
		if (i % 3 == 0)
			ids[n++] = trash_one(f, USER, false);
		else
			trash_one(f, OTHER, false);
	}
	page(f, USER, ids[1500] + 1, 1, &p, &k); /* an item of OTHER */
	assert_int_equal(k.ids[0], ids[1501]);
	assert_true(p.more);
	assert_in_range(p.steps, 1, 100);
	k.n = 0;
	page(f, USER, 0, 1, &p, &k);
	assert_int_equal(k.ids[0], ids[0]);
	k.n = 0;
	page(f, USER, ids[2999], 1, &p, &k);
	assert_int_equal(k.n, 0);
	assert_false(p.more);
	assert_int_equal(p.next, ids[2999]);
	page(f, USER, UINT64_MAX, 1, &p, &k);
	assert_int_equal(k.n, 0);
	assert_false(p.more);
	assert_in_range(p.steps, 0, 100);
	/* A uid with no items, between two that have many. */
	page(f, USER - 1, 0, 10, &p, &k);
	assert_int_equal(k.n, 0);
	assert_int_equal(p.visits, 0);
	assert_in_range(p.steps, 0, 100);
	free(k.ids);
}

static bool none_visible(const struct trash_item *t, void *arg)
{
	(void)t;
	(void)arg;
	return false;
}

/* A session that sees none of the items (confined elsewhere): a page
 * looks at max_visits of them, takes none, says there is more and where
 * to go on; the pages after it go on from there to the end. */
static void test_ns_trash_page_visit_cap(void **state)
{
	struct fixture *f = *state;
	struct taken k = { 0 };
	struct ns_trash_page p;
	uint64_t after = 0, pages = 0, last = 0;

	for (unsigned i = 0; i < 2500; i++)
		last = trash_one(f, USER, false);
	do {
		memset(&p, 0, sizeof(p));
		p.after = after;
		p.owner = USER;
		p.max_visits = 1000;
		p.visible = none_visible;
		p.take = take;
		p.arg = &k;
		ns_trash_page(&f->ns, &p);
		assert_int_equal(k.n, 0);
		assert_true(p.visits <= 1000);
		assert_true(p.next > after || !p.more);
		after = p.next;
		pages++;
	} while (p.more);
	assert_int_equal(pages, 3);
	assert_int_equal(after, last);
}

/* Every id of @k increasing, and each of @want (n) in it exactly once. */
static void assert_listed_once(const struct taken *k, const uint64_t *want,
			       size_t n)
{
	for (size_t i = 1; i < k->n; i++)
		assert_true(k->ids[i - 1] < k->ids[i]);
	for (size_t i = 0, j = 0; i < n; i++) {
		while (j < k->n && k->ids[j] < want[i])
			j++;
		assert_true(j < k->n);
		assert_int_equal(k->ids[j], want[i]);
	}
}

/*
 * Paging a user's 3,000 items 37 at a time among 6,000 of another's,
 * while between pages items come (the user's and the other's), go (the
 * cursor's own item, the next one, others further on) and change owner:
 * each item that was there all along comes exactly once, in order, and
 * no item comes that the user did not own when its page was made.
 */
static void test_ns_trash_page_every_item_once(void **state)
{
	struct fixture *f = *state;
	uint64_t *mine = calloc(4000, sizeof(*mine)), *stay, *gone;
	size_t nmine = 0, nstay = 0, ngone = 0, pages = 0;
	struct taken k = { .uid = USER };
	struct ns_trash_page p;
	uint64_t after = 0;

	assert_non_null(mine);
	for (unsigned i = 0; i < 9000; i++) {
		if (i % 3 == 1)
			mine[nmine++] = trash_one(f, USER, i % 9 == 1);
		else
			trash_one(f, OTHER, false);
	}
	stay = calloc(nmine, sizeof(*stay));
	gone = calloc(nmine, sizeof(*gone)); /* dropped or given away */
	assert_non_null(stay);
	assert_non_null(gone);
	/* Those left alone below: every 5th of the user's is dropped or
	 * given away, at some point, once the listing passed it or not. */
	for (size_t i = 0; i < nmine; i++)
		if (i % 5 != 2 && i % 5 != 3)
			stay[nstay++] = mine[i];
	do {
		size_t before = k.n;
		struct trash_item *t;

		page(f, USER, after, 37, &p, &k);
		assert_true(k.n - before <= 37);
		after = p.next;
		pages++;
		/* Between pages: a new item each, the cursor's own item
		 * dropped now and then (it is one that stays, re-added under
		 * a new id, so the check still counts it), and ahead of the
		 * cursor one dropped and one given away. */
		trash_one(f, USER, false);
		trash_one(f, OTHER, pages % 2);
		for (size_t i = 0; i < nmine; i++) {
			if (mine[i] <= after || !ns_trash_find(&f->ns, mine[i]))
				continue;
			if (i % 5 == 2) {
				assert_int_equal(ns_trash_drop(&f->ns, mine[i],
							       false, 3),
						 0);
				gone[ngone++] = mine[i];
				break;
			}
		}
		for (size_t i = nmine; i-- > 0;) {
			struct ns_setattr_args a = { .valid = NS_SET_UID,
						     .uid = OTHER };

			t = ns_trash_find(&f->ns, mine[i]);
			if (i % 5 != 3 || mine[i] <= after || !t ||
			    t->node->uid != USER)
				continue;
			assert_int_equal(ns_setattr(&f->ns, t->node, &a), 0);
			gone[ngone++] = mine[i];
			break;
		}
		/* The cursor's own item goes (dropped, or restored and
		 * removed again as a new one): the cursor is then no item
		 * at all. */
		t = pages % 4 == 2 ? ns_trash_find(&f->ns, after) : NULL;
		if (t && t->node->uid == USER)
			assert_int_equal(ns_trash_drop(&f->ns, after, false, 4),
					 0);
		t = pages % 4 == 0 ? ns_trash_find(&f->ns, after) : NULL;
		if (t && !S_ISDIR(t->node->mode) && t->node->uid == USER) {
			struct edge *e;
			uint64_t newid = f->version++;

			assert_int_equal(ns_trash_restore(&f->ns, after, f->dir,
							  "back", 4,
							  f->ns.next_edge, 4),
					 0);
			e = ns_lookup(&f->ns, f->dir, "back", 4);
			assert_non_null(e);
			assert_int_equal(ns_trash_unlink(&f->ns, f->dir, "back",
							 4, newid, INT64_MAX,
							 4),
					 0);
			assert_null(ns_trash_find(&f->ns, after));
		}
	} while (p.more);
	printf("# %zu items in %zu pages of 37\n", k.n, pages);
	assert_listed_once(&k, stay, nstay);
	/* Nothing that went before the listing came to it (take() checked
	 * that every item taken was USER's when taken). */
	printf("# %zu dropped or given away ahead of the cursor\n", ngone);
	assert_true(ngone > 100);
	for (size_t i = 0; i < ngone; i++)
		for (size_t j = 0; j < k.n; j++)
			assert_true(k.ids[j] != gone[i]);
	assert_true(pages >= nstay / 37);
	free(k.ids);
	free(gone);
	free(stay);
	free(mine);
}

static int in_order(const struct trash_item *t, void *arg)
{
	uint64_t *last = arg;

	assert_true(t->id > *last);
	*last = t->id;
	return 0;
}

/* A chown of a node in the trash (a file, a tree's root) moves its item
 * to the new owner's listing; dropping and restoring it afterwards finds
 * it under its new key; the list, the trees and the index by inode
 * agree through all of it. */
static void test_ns_trash_page_chown(void **state)
{
	struct fixture *f = *state;
	struct ns_setattr_args a = { .valid = NS_SET_UID, .uid = USER };
	struct taken k = { 0 };
	struct ns_trash_page p;
	uint64_t file, tree, last = 0;

	for (unsigned i = 0; i < 100; i++)
		trash_one(f, OTHER, i % 3 == 0);
	file = trash_one(f, OTHER, false);
	tree = trash_one(f, OTHER, true);
	for (unsigned i = 0; i < 100; i++)
		trash_one(f, OTHER, false);
	page(f, USER, 0, 10, &p, &k);
	assert_int_equal(k.n, 0);
	assert_int_equal(ns_trash_find(&f->ns, file)->uid, OTHER);
	assert_int_equal(
		ns_setattr(&f->ns, ns_trash_find(&f->ns, file)->node, &a), 0);
	assert_int_equal(
		ns_setattr(&f->ns, ns_trash_find(&f->ns, tree)->node, &a), 0);
	assert_int_equal(ns_trash_find(&f->ns, file)->uid, USER);
	assert_int_equal(ns_trash_find(&f->ns, tree)->uid, USER);
	page(f, USER, 0, 10, &p, &k);
	assert_int_equal(k.n, 2);
	assert_int_equal(k.ids[0], file);
	assert_int_equal(k.ids[1], tree);
	assert_false(p.more);
	/* A write of node->uid that bypasses nsi_trash_chown() (none does
	 * today) leaves the tree's order alone: the item stays where it
	 * was, under its old owner. */
	ns_trash_find(&f->ns, tree + 1)->node->uid = USER + 1;
	k.n = 0;
	page(f, OTHER, 0, 1000, &p, &k);
	assert_int_equal(k.n, 200);
	for (size_t i = 1; i < k.n; i++)
		assert_true(k.ids[i] > k.ids[i - 1]);
	assert_int_equal(ns_trash_drop(&f->ns, file, false, 5), 0);
	assert_int_equal(ns_trash_restore(&f->ns, tree, f->dir, "t", 1,
					  f->ns.next_edge, 5),
			 0);
	k.n = 0;
	page(f, USER, 0, 10, &p, &k);
	assert_int_equal(k.n, 0);
	assert_null(ns_trash_find(&f->ns, file));
	assert_null(ns_trash_find(&f->ns, tree));
	assert_int_equal(f->ns.ntrash, 200);
	assert_int_equal(htab_count(&f->ns.trash_inos), 200);
	assert_int_equal(ns_trash_foreach(&f->ns, in_order, &last), 0);
	assert_int_equal(last, f->ns.trash_tail->id);
	free(k.ids);
}

/* Drops in every order (the head, the tail, the middle) keep the list's
 * ends right and every other item findable; an id that does not grow is
 * refused (a checkpoint that lists one twice), with nothing changed. */
static void test_ns_trash_drop_keeps_list(void **state)
{
	struct fixture *f = *state;
	uint64_t ids[500], last = 0;
	size_t left = 500;

	for (unsigned i = 0; i < 500; i++)
		ids[i] = trash_one(f, i % 2 ? USER : OTHER, i % 11 == 0);
	for (unsigned i = 0; i < 500; i += 7) {
		assert_int_equal(ns_trash_drop(&f->ns, ids[i], false, 3), 0);
		left--;
	}
	assert_int_equal(ns_trash_drop(&f->ns, ids[499], false, 3), 0);
	left--;
	assert_int_equal(ns_trash_drop(&f->ns, ids[1], false, 3), 0);
	left--;
	assert_int_equal(f->ns.ntrash, left);
	assert_int_equal(f->ns.trash_head->id, ids[2]);
	assert_int_equal(f->ns.trash_tail->id, ids[498]);
	assert_int_equal(ns_trash_foreach(&f->ns, in_order, &last), 0);
	for (unsigned i = 2; i < 499; i++)
		assert_true(i % 7 == 0 || ns_trash_find(&f->ns, ids[i]));
	{
		struct trash_item *t = ns_trash_find(&f->ns, ids[100]);

		/* An id at or below the newest, or a node that is an item
		 * already. */
		assert_int_equal(ns_trash_load(&f->ns, ids[498], t->node->ino,
					       1, "/x", 2, 0, 0, 1),
				 -EEXIST);
		assert_int_equal(ns_trash_load(&f->ns, f->version, t->node->ino,
					       1, "/x", 2, 0, 0, 1),
				 -EEXIST);
	}
	assert_int_equal(f->ns.ntrash, left);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_ns_trash_page_user_visits_own, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_trash_page_any_cursor,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_trash_page_visit_cap,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_ns_trash_page_every_item_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ns_trash_page_chown, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ns_trash_drop_keeps_list,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
