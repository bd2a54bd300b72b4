/*
 * arena.h: allocations are aligned and do not overlap, across blocks;
 * a reset keeps one block the size of the last use; protobuf-c unpacks
 * into it.
 */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "arena.h"
#include "frame.h"
#include "sweepfs.pb-c.h"

static void test_alloc_and_reset(void **state)
{
	struct sw_arena a;
	unsigned char *p[3000];

	(void)state;
	sw_arena_init(&a);
	/* Sizes 1..37, 3000 of them: several blocks of 16 KiB and more. */
	for (size_t i = 0; i < 3000; i++) {
		size_t n = 1 + i % 37;

		p[i] = sw_arena_alloc(&a, n);
		assert_non_null(p[i]);
		assert_int_equal((uintptr_t)p[i] % alignof(max_align_t), 0);
		memset(p[i], (int)(i & 0xff), n);
	}
	/* Nothing overwrote anything. */
	for (size_t i = 0; i < 3000; i++)
		for (size_t k = 0; k < 1 + i % 37; k++)
			assert_int_equal(p[i][k], i & 0xff);
	assert_non_null(a.first->next); /* it took more than one block */
	sw_arena_reset(&a);
	assert_null(a.first->next);
	/* One block now holds what took several. */
	assert_true(a.first->size >= 3000 * 16);
	for (size_t i = 0; i < 3000; i++)
		assert_non_null(sw_arena_alloc(&a, 1 + i % 37));
	assert_null(a.first->next);
	/* Bigger than any block, and zero bytes. */
	assert_non_null(sw_arena_alloc(&a, 5u << 20));
	assert_non_null(sw_arena_alloc(&a, 0));
	assert_null(sw_arena_alloc(&a, SIZE_MAX - 8));
	sw_arena_release(&a);
	assert_null(a.first);
}

static void test_protobuf(void **state)
{
	Sweepfs__BatchReq q = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__BatchOp ops[100], *opp[100];
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	Sweepfs__BatchReq *got;
	struct sw_arena a;
	uint8_t buf[16384];
	char names[100][16];
	size_t len;

	(void)state;
	for (int i = 0; i < 100; i++) {
		sweepfs__batch_op__init(&ops[i]);
		ops[i].cred = &cred;
		ops[i].parent = 1;
		snprintf(names[i], sizeof(names[i]), "f%07d", i);
		ops[i].name.data = (uint8_t *)names[i];
		ops[i].name.len = strlen(names[i]);
		opp[i] = &ops[i];
	}
	cred.uid = 1000;
	cred.gid = 1000;
	q.n_ops = 100;
	q.ops = opp;
	len = sweepfs__batch_req__pack(&q, buf);
	sw_arena_init(&a);
	for (int round = 0; round < 3; round++) {
		got = sweepfs__batch_req__unpack(sw_arena_pb(&a), len, buf);
		assert_non_null(got);
		assert_int_equal(got->n_ops, 100);
		assert_int_equal(got->ops[99]->cred->uid, 1000);
		assert_memory_equal(got->ops[42]->name.data, "f0000042", 8);
		/* No free of the message: the reset takes it all. */
		sw_arena_reset(&a);
	}
	sw_arena_release(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alloc_and_reset),
		cmocka_unit_test(test_protobuf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
