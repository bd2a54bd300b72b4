/*
 * group.h and what a group's members compare: the group's member list as
 * the configuration gives it, and ns_digest() (namespace.h), which must
 * depend on what a namespace holds, not on how it came to be laid out.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "catchup.h"
#include "crc32c.h"
#include "group.h"
#include "namespace.h"
#include "unit.h"
#include "unit_ns.h"
#include "util.h"

static void test_group_members_parse(void **state)
{
	struct group_member m[GROUP_MAX];
	size_t n = 99;

	(void)state;
	assert_int_equal(group_members_parse("1=10.0.0.1:9420", m, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(m[0].id, 1);
	assert_string_equal(m[0].addr, "10.0.0.1:9420");
	assert_int_equal(group_members_parse("1=a:1,2=b:2,30=[::1]:3", m, &n),
			 0);
	assert_int_equal(n, 3);
	assert_int_equal(m[2].id, 30);
	assert_string_equal(m[1].addr, "b:2");
	assert_string_equal(m[2].addr, "[::1]:3");
	assert_int_equal(
		group_members_parse("1=a,2=b,3=c,4=d,5=e,6=f,7=g", m, &n), 0);
	assert_int_equal(n, GROUP_MAX);
}

static void test_group_members_parse_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"1",
		"=a:1",
		"0=a:1",
		"256=a:1",
		"x=a:1",
		"1=",
		"1=a:1,",
		"1=a:1,,2=b:2",
		"1=a:1,1=b:2",
		"1a=a:1",
		"-1=a:1",
		"1=a:1,2",
		"1=a,2=b,3=c,4=d,5=e,6=f,7=g,8=h",
	};
	struct group_member m[GROUP_MAX];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (group_members_parse(bad[i], m, &n) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
	}
}

/* Two namespaces built in a different order, with different inode
 * numbers handed out for nothing between, hold the same: equal digests.
 * Any change to a name, a mode, a time or an owner tells them apart. */
static void build(struct ns *ns, bool reverse)
{
	struct node *root = ns_get(ns, 1), *d;

	if (!reverse) {
		d = unit_mk(ns, root, "d", S_IFDIR | 0755, 10);
		unit_mk(ns, d, "a", S_IFREG | 0644, 11);
		unit_mk(ns, d, "b", S_IFREG | 0600, 12);
	} else {
		d = unit_mk(ns, root, "d", S_IFDIR | 0755, 10);
		unit_mk(ns, d, "b", S_IFREG | 0600, 12);
		unit_mk(ns, d, "a", S_IFREG | 0644, 11);
	}
}

static void test_ns_digest(void **state)
{
	struct ns a, b;
	struct node *n;
	uint64_t da, db;

	(void)state;
	assert_int_equal(ns_init(&a, 1), 0);
	assert_int_equal(ns_init(&b, 1), 0);
	assert_int_equal(ns_digest(&a), ns_digest(&b));
	build(&a, false);
	build(&b, true);
	/* Same names, but "a" and "b" got each other's inode numbers in
	 * b: not the same namespace. */
	assert_int_not_equal(ns_digest(&a), ns_digest(&b));
	ns_release(&b);
	assert_int_equal(ns_init(&b, 1), 0);
	build(&b, false);
	da = ns_digest(&a);
	db = ns_digest(&b);
	assert_int_equal(da, db);
	/* A name removed and made again: new cookie, same content. */
	n = ns_get(&b, 3);
	assert_non_null(n);
	assert_int_equal(ns_unlink(&b, ns_get(&b, 2), "a", 1, false, 13), 0);
	assert_int_not_equal(ns_digest(&b), da);
	ns_release(&b);
	assert_int_equal(ns_init(&b, 1), 0);
	build(&b, false);
	n = ns_get(&b, 4);
	n->uid = 7;
	assert_int_not_equal(ns_digest(&b), da);
	n->uid = 0;
	assert_int_equal(ns_digest(&b), da);
	n->mtime++;
	assert_int_not_equal(ns_digest(&b), da);
	ns_release(&a);
	ns_release(&b);
}

/* @f (@size bytes) put together from pieces that end at @cuts (the last
 * at @size): the header, trailer and sum a member checks are @f's own. */
static void check_pieces(const uint8_t *f, size_t size, const size_t *cuts,
			 size_t ncuts)
{
	struct catchup_ends e = { .size = size };
	size_t at = 0;

	for (size_t i = 0; i < ncuts; i++) {
		catchup_take(&e, f + at, cuts[i] - at);
		at = cuts[i];
	}
	assert_int_equal(at, size);
	assert_int_equal(e.got, size);
	assert_memory_equal(e.head, f, CHECKPOINT_HEAD);
	assert_memory_equal(e.tail, f + size - CHECKPOINT_TAIL,
			    CHECKPOINT_TAIL);
	assert_int_equal(e.crc, sw_crc32c(0, f, size - CHECKPOINT_TAIL));
}

/*
 * A member reads the leader's checkpoint in pieces (catchup_fetch()), and
 * the pieces may cut the file anywhere: in the header, in the trailer,
 * a byte before either. Every cut of files of a few sizes, then pairs
 * of cuts near both ends, then random pieces of a byte or more.
 */
static void test_catchup_pieces(void **state)
{
	static const size_t sizes[] = { CHECKPOINT_HEAD + CHECKPOINT_TAIL,
					CHECKPOINT_HEAD + CHECKPOINT_TAIL + 1,
					37, 100, 4096 };
	struct rng r;
	uint8_t f[4096];
	size_t cuts[4096];

	(void)state;
	rng_seed(&r, 29);
	rng_fill(&r, f, sizeof(f));
	for (size_t s = 0; s < SW_ARRAY_SIZE(sizes); s++) {
		size_t size = sizes[s];

		cuts[0] = size;
		check_pieces(f, size, cuts, 1);
		for (size_t a = 1; a < size; a++) {
			cuts[0] = a;
			cuts[1] = size;
			check_pieces(f, size, cuts, 2);
		}
		for (size_t a = 1; a < size && a < 24; a++)
			for (size_t b = SW_MAX(a + 1, size - 8); b < size;
			     b++) {
				cuts[0] = a;
				cuts[1] = b;
				cuts[2] = size;
				check_pieces(f, size, cuts, 3);
			}
		for (int round = 0; round < 50; round++) {
			size_t n = 0, at = 0;

			while (at < size) {
				at += 1 + rng_below(&r, round % 2 ? 3 : 700);
				cuts[n++] = SW_MIN(at, size);
			}
			check_pieces(f, size, cuts, n);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_members_parse),
		cmocka_unit_test(test_group_members_parse_bad),
		cmocka_unit_test(test_ns_digest),
		cmocka_unit_test(test_catchup_pieces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
