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

#include "group.h"
#include "namespace.h"
#include "unit_ns.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_members_parse),
		cmocka_unit_test(test_group_members_parse_bad),
		cmocka_unit_test(test_ns_digest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
