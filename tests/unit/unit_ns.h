/*
 * Namespace fixtures shared by the master's unit tests: making nodes,
 * listing them all, dumping a node's extended attributes (include after
 * cmocka.h and namespace.h).
 */
#ifndef SWEEPFS_TESTS_UNIT_NS_H
#define SWEEPFS_TESTS_UNIT_NS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Nodes of a namespace, as unit_all_nodes() lists them. */
struct unit_nodevec {
	struct node **v;
	size_t n, cap;
};

static inline int unit_collect_node(void *node, void *arg)
{
	struct unit_nodevec *nv = arg;

	if (nv->n == nv->cap)
		return -ENOSPC;
	nv->v[nv->n++] = node;
	return 0;
}

static inline int unit_cmp_ino(const void *a, const void *b)
{
	const struct node *x = *(struct node *const *)a;
	const struct node *y = *(struct node *const *)b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Every node of @ns into @nv, sorted by inode number; free(nv->v). */
static inline void unit_all_nodes(const struct ns *ns, struct unit_nodevec *nv)
{
	nv->cap = htab_count(&ns->inodes) + 1;
	nv->n = 0;
	nv->v = malloc(nv->cap * sizeof(*nv->v));
	assert_non_null(nv->v);
	assert_int_equal(ns_foreach_node(ns, unit_collect_node, nv), 0);
	qsort(nv->v, nv->n, sizeof(*nv->v), unit_cmp_ino);
}

/* A node's extended attributes as text lines, while they are dumped. */
struct unit_xlines {
	char **v;
	size_t n;
};

static inline int unit_collect_xattr(const void *name, size_t nlen,
				     const void *value, size_t vlen, void *arg)
{
	struct unit_xlines *xl = arg;
	char *line = malloc(2 * (nlen + vlen) + 2);
	char *p = line;

	assert_non_null(line);
	for (size_t i = 0; i < nlen; i++)
		p += sprintf(p, "%02x", ((const uint8_t *)name)[i]);
	*p++ = '=';
	for (size_t i = 0; i < vlen; i++)
		p += sprintf(p, "%02x", ((const uint8_t *)value)[i]);
	*p = '\0';
	xl->v = realloc(xl->v, (xl->n + 1) * sizeof(*xl->v));
	assert_non_null(xl->v);
	xl->v[xl->n++] = line;
	return 0;
}

static inline int unit_cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* @n's extended attributes to @fp, a line "  X NAME=VALUE" each (both in
 * hex), sorted: the same text whatever order the namespace keeps. */
static inline void unit_dump_xattrs(FILE *fp, const struct ns *ns,
				    const struct node *n)
{
	struct unit_xlines xl = { NULL, 0 };

	ns_xattr_foreach(ns, n, unit_collect_xattr, &xl);
	if (xl.n)
		qsort(xl.v, xl.n, sizeof(*xl.v), unit_cmp_str);
	for (size_t k = 0; k < xl.n; k++) {
		fprintf(fp, "  X %s\n", xl.v[k]);
		free(xl.v[k]);
	}
	free(xl.v);
}

#endif
