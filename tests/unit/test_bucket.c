/*
 * bucket.h: a token bucket starts full, refills at its rule's rate up to
 * its cap, refuses a cost it cannot pay without taking anything, and a
 * spend never leaves it owing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bucket.h"

#define SEC 1000000000ll

static const struct bucket_rule rule = { 100, 300 };

static void test_bucket_fill_starts_full_and_caps(void **state)
{
	struct bucket b = { 0 };

	(void)state;
	assert_true(bucket_fill(&b, &rule, 5 * SEC) == 300);
	assert_true(bucket_take(&b, &rule, 250, 5 * SEC));
	assert_true(bucket_fill(&b, &rule, 5 * SEC) == 50);
	/* Half a second: 50 more. */
	assert_true(bucket_fill(&b, &rule, 5 * SEC + SEC / 2) == 100);
	/* An hour: the cap, not more. */
	assert_true(bucket_fill(&b, &rule, 3600 * SEC) == 300);
}

static void test_bucket_take_refuses_whole(void **state)
{
	struct bucket b = { 0 };

	(void)state;
	assert_true(bucket_take(&b, &rule, 300, SEC));
	assert_false(bucket_take(&b, &rule, 1, SEC));
	/* Refused: nothing taken, and it refills from there. */
	assert_false(bucket_take(&b, &rule, 101, 2 * SEC));
	assert_true(bucket_take(&b, &rule, 100, 2 * SEC));
	assert_true(bucket_fill(&b, &rule, 2 * SEC) == 0);
}

static void test_bucket_spend_stops_at_empty(void **state)
{
	struct bucket b = { 0 };

	(void)state;
	bucket_fill(&b, &rule, SEC);
	bucket_spend(&b, 120);
	assert_true(bucket_fill(&b, &rule, SEC) == 180);
	bucket_spend(&b, 1000);
	assert_true(bucket_fill(&b, &rule, SEC) == 0);
	assert_true(bucket_fill(&b, &rule, 2 * SEC) == 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_fill_starts_full_and_caps),
		cmocka_unit_test(test_bucket_take_refuses_whole),
		cmocka_unit_test(test_bucket_spend_stops_at_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
