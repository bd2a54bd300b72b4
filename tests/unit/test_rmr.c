/*
 * rmr.h: may_remove_tree() decides as rm -rf run by the caller would
 * (read, write and search on every non-empty directory, the sticky rule),
 * and looks at no more than it must: one visit a directory for a tree of
 * leaf directories, whatever they hold, so that a user's rmr of a
 * 17 M-entry directory does not walk 17 M entries on the loop. Random
 * trees are checked against the rule applied to every directory.
 */
#include <errno.h>
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

#include "namespace.h"
#include "perm.h"
#include "rmr.h"
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
		assert_int_equal(
			may_remove_tree_counted(&user, top, &visits[big]), 0);
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
	assert_int_equal(may_remove_tree_counted(&user, top, &visits), -EPERM);
	/* Its owner, and root, may. */
	assert_int_equal(may_remove_tree(&(struct sw_cred){ .uid = 0 }, top),
			 0);
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
		/* The same verdict; which refusal comes first may differ. */
		assert_int_equal(want == 0, got == 0);
		refused += got != 0;
	}
	/* Both outcomes were tried. */
	assert_true(refused > 50 && refused < 450);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_leaf_directories_cost_one_visit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_as_the_rule_says, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
