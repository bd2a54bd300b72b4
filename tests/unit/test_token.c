/*
 * token.h: a chunk token grants what the master made it for and nothing
 * else: reading, writing and reading, or writing only (a writer who may
 * not read the file); not another chunk, version or expiry, not after it
 * runs out, not under another key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "token.h"

static const uint8_t key[SW_TOKEN_KEY] = "0123456789abcdef";
static const uint8_t other_key[SW_TOKEN_KEY] = "fedcba9876543210";

#define CHUNK 77
#define VERSION 3
#define EXPIRES 100000
#define NOW 50000

static bool check(const uint8_t *t, enum sw_token_need need)
{
	return sw_token_check(key, CHUNK, VERSION, need, EXPIRES, NOW, t,
			      SW_TOKEN_LEN);
}

static void make(enum sw_token_mode mode, uint8_t *t)
{
	sw_token_make(key, CHUNK, VERSION, mode, EXPIRES, t);
}

static void test_modes(void **state)
{
	static const struct {
		enum sw_token_mode mode;
		bool read, write;
	} cases[] = {
		{ SW_TOKEN_READ, true, false },
		{ SW_TOKEN_WRITE, true, true },
		{ SW_TOKEN_WRITE_ONLY, false, true },
	};
	uint8_t t[SW_TOKEN_LEN];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		make(cases[i].mode, t);
		assert_int_equal(check(t, SW_NEED_READ), cases[i].read);
		assert_int_equal(check(t, SW_NEED_WRITE), cases[i].write);
	}
}

static void test_bound_to_what_it_names(void **state)
{
	uint8_t t[SW_TOKEN_LEN];

	(void)state;
	make(SW_TOKEN_WRITE, t);
	assert_false(sw_token_check(key, CHUNK + 1, VERSION, SW_NEED_READ,
				    EXPIRES, NOW, t, SW_TOKEN_LEN));
	assert_false(sw_token_check(key, CHUNK, VERSION + 1, SW_NEED_READ,
				    EXPIRES, NOW, t, SW_TOKEN_LEN));
	/* A client that moves the expiry it sends along. */
	assert_false(sw_token_check(key, CHUNK, VERSION, SW_NEED_READ,
				    EXPIRES + 1, NOW, t, SW_TOKEN_LEN));
	assert_false(sw_token_check(key, CHUNK, VERSION, SW_NEED_READ, EXPIRES,
				    EXPIRES + 1, t, SW_TOKEN_LEN));
	assert_false(sw_token_check(other_key, CHUNK, VERSION, SW_NEED_READ,
				    EXPIRES, NOW, t, SW_TOKEN_LEN));
	assert_false(sw_token_check(key, CHUNK, VERSION, SW_NEED_READ, EXPIRES,
				    NOW, t, SW_TOKEN_LEN - 1));
	t[0] ^= 1;
	assert_false(check(t, SW_NEED_READ));
}

static void test_unknown_need(void **state)
{
	uint8_t t[SW_TOKEN_LEN];

	(void)state;
	make(SW_TOKEN_WRITE, t);
	assert_false(check(t, (enum sw_token_need)(SW_NEED_WRITE + 1)));
	assert_false(check(t, (enum sw_token_need) - 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_bound_to_what_it_names),
		cmocka_unit_test(test_unknown_need),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
