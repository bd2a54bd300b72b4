/*
 * A master for the unit tests of what runs above the namespace core
 * (fsck, the chunk health census): its namespace and its parts, with
 * chunkservers that count as connected, and the fixture's teardown.
 * Include after cmocka.h, csrv.h and master.h.
 */
#ifndef SWEEPFS_TESTS_UNIT_MASTER_H
#define SWEEPFS_TESTS_UNIT_MASTER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * @m (zeroed) with an empty namespace, its parts, goal 1, and chunkservers
 * @srv[1..@n] (zeroed; the caller's, as long as @m) with ids 1..@n, named
 * "csI:9522" and "connected" (csrv_up() looks at conn only: it points at
 * the csrv itself, never used as a connection). Returns 0, or -1 with
 * nothing to release.
 */
static inline int unit_master_init(struct master *m, struct csrv *srv,
				   uint32_t n)
{
	if (ns_init(&m->ns, 1000) < 0)
		return -1;
	if (master_parts_new(m) < 0) {
		ns_release(&m->ns);
		return -1;
	}
	m->cfg.goal = 1;
	for (uint32_t i = 1; i <= n; i++) {
		srv[i].id = i;
		snprintf(srv[i].listen, sizeof(srv[i].listen), "cs%u:9522", i);
		srv[i].conn = (struct conn *)&srv[i];
		m->cs->srv[i] = &srv[i];
	}
	m->cs->n = n;
	return 0;
}

/* Release what unit_master_init() made in @m. */
static inline void unit_master_release(struct master *m)
{
	ns_release(&m->ns);
	master_parts_free(m);
}

/*
 * The cmocka teardown of a fixture that begins with the struct master
 * unit_master_init() made, in calloc(3)ed memory: releases and frees it.
 */
static inline int unit_master_teardown(void **state)
{
	struct master *m = *state; /* the fixture's first member */

	unit_master_release(m);
	free(*state);
	return 0;
}

#endif
