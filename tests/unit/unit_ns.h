/*
 * Namespace fixtures shared by the master's unit tests (include after
 * cmocka.h and namespace.h).
 */
#ifndef SWEEPFS_TESTS_UNIT_NS_H
#define SWEEPFS_TESTS_UNIT_NS_H

#include <string.h>

/* A new node @name in @dir with @mode, changed at @now; the test fails
 * if the namespace refuses it. */
static inline struct node *unit_mk(struct ns *ns, struct node *dir,
				   const char *name, uint32_t mode, int64_t now)
{
	struct ns_create_args a = {
		.ino = ns->next_ino,
		.edge = ns->next_edge,
		.mode = mode,
		.now = now,
	};
	struct node *n = NULL;

	assert_int_equal(ns_create(ns, dir, name, strlen(name), &a, &n), 0);
	return n;
}

#endif
