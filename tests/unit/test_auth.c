/*
 * common/auth.c: password keys are deterministic and differ per password;
 * a tag changes with its key, nonce, subtree and use; key files are made
 * once, private, atomically, and read back; bad key files are refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth.h"
#include "token.h"
#include "unit.h"

static void test_auth_response(void **state)
{
	uint8_t k1[SW_AUTH_KEY], k2[SW_AUTH_KEY], k3[SW_AUTH_KEY];
	uint8_t nonce[SW_AUTH_NONCE] = { 1, 2, 3 };
	uint8_t t1[SW_AUTH_TAG], t2[SW_AUTH_TAG];

	(void)state;
	assert_int_equal(sw_auth_key("hunter2", k1), 0);
	assert_int_equal(sw_auth_key("hunter2", k2), 0);
	assert_int_equal(sw_auth_key("hunter3", k3), 0);
	assert_memory_equal(k1, k2, sizeof(k1));
	assert_memory_not_equal(k1, k3, sizeof(k1));
	sw_auth_response(k1, nonce, "/sec", t1);
	sw_auth_response(k2, nonce, "/sec", t2);
	assert_true(sw_auth_equal(t1, t2, sizeof(t1)));
	/* Another nonce, subtree or key: another answer. */
	sw_auth_response(k1, nonce, "/other", t2);
	assert_false(sw_auth_equal(t1, t2, sizeof(t1)));
	nonce[15] ^= 1;
	sw_auth_response(k1, nonce, "/sec", t2);
	assert_false(sw_auth_equal(t1, t2, sizeof(t1)));
	nonce[15] ^= 1;
	sw_auth_response(k3, nonce, "/sec", t2);
	assert_false(sw_auth_equal(t1, t2, sizeof(t1)));
}

static void test_auth_tag_uses_differ(void **state)
{
	uint8_t key[SW_AUTH_KEY] = { 9 }, nonce[SW_AUTH_NONCE] = { 4 };
	uint8_t a[SW_AUTH_TAG], b[SW_AUTH_TAG];

	(void)state;
	/* A chunkserver's answer is not the master's, nor a session's. */
	sw_auth_tag(key, SW_AUTH_CHUNKSERVER, nonce, sizeof(nonce), NULL, 0, a);
	sw_auth_tag(key, SW_AUTH_MASTER, nonce, sizeof(nonce), NULL, 0, b);
	assert_false(sw_auth_equal(a, b, sizeof(a)));
	sw_auth_tag(key, SW_AUTH_SESSION, nonce, sizeof(nonce), NULL, 0, b);
	assert_false(sw_auth_equal(a, b, sizeof(a)));
	sw_auth_tag(key, SW_AUTH_CHUNKSERVER, nonce, sizeof(nonce), NULL, 0, b);
	assert_true(sw_auth_equal(a, b, sizeof(a)));
	/* The bytes count, not where the parts split: callers put a
	 * fixed-length part first. */
	sw_auth_tag(key, SW_AUTH_CHUNKSERVER, nonce, 8, nonce + 8, 8, b);
	assert_true(sw_auth_equal(a, b, sizeof(a)));
}

/*
 * Token epochs: one key per epoch, made again the same from token.key,
 * and a token made under one epoch's key is not one of another's, nor
 * of token.key itself (what builds before epochs signed with).
 */
static void test_token_epoch_keys(void **state)
{
	uint8_t base[SW_AUTH_KEY], k1[SW_TOKEN_KEY], k1b[SW_TOKEN_KEY];
	uint8_t k2[SW_TOKEN_KEY], t[SW_TOKEN_LEN];

	(void)state;
	memset(base, 0x5a, sizeof(base));
	sw_token_epoch_key(base, 1, k1);
	sw_token_epoch_key(base, 1, k1b);
	sw_token_epoch_key(base, 2, k2);
	assert_memory_equal(k1, k1b, sizeof(k1));
	assert_memory_not_equal(k1, k2, sizeof(k1));
	assert_memory_not_equal(k1, base, sizeof(k1));
	sw_token_make(k1, 9, 3, SW_TOKEN_WRITE, 5000, t);
	assert_true(sw_token_check(k1, 9, 3, SW_NEED_WRITE, 5000, 1000, t,
				   sizeof(t)));
	assert_false(sw_token_check(k2, 9, 3, SW_NEED_WRITE, 5000, 1000, t,
				    sizeof(t)));
	assert_false(sw_token_check(base, 9, 3, SW_NEED_WRITE, 5000, 1000, t,
				    sizeof(t)));
	/* The base key matters, not only the epoch. */
	base[0] ^= 1;
	sw_token_epoch_key(base, 1, k1b);
	assert_memory_not_equal(k1, k1b, sizeof(k1));
}

static void test_auth_key_files(void **state)
{
	uint8_t made[SW_AUTH_KEY], again[SW_AUTH_KEY], read[SW_AUTH_KEY];
	char dir[256], path[320], tmp[330];
	struct stat st;
	FILE *f;

	(void)state;
	assert_int_equal(unit_mkdtemp(dir, sizeof(dir), "auth"), 0);
	snprintf(path, sizeof(path), "%s/chunkserver.key", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	assert_int_equal(sw_auth_key_create(path, made), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(access(tmp, F_OK), -1); /* no temporary left */
	assert_int_equal(sw_auth_key_load(path, read), 0);
	assert_memory_equal(made, read, sizeof(made));
	/* Made once: a second call keeps the first key. */
	assert_int_equal(sw_auth_key_create(path, again), -EEXIST);
	assert_int_equal(sw_auth_key_load(path, read), 0);
	assert_memory_equal(made, read, sizeof(made));
	/* Readable by others: refused. */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(sw_auth_key_load(path, read), -EPERM);
	/* Not a key: too short, not hex, trailing junk. */
	assert_int_equal(chmod(path, 0600), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("abcd\n", f);
	fclose(f);
	assert_int_equal(sw_auth_key_load(path, read), -EINVAL);
	f = fopen(path, "w");
	fprintf(f, "%064d zz\n", 0);
	fclose(f);
	assert_int_equal(sw_auth_key_load(path, read), -EINVAL);
	f = fopen(path, "w");
	fprintf(f, "  %064d\n\n", 7);
	fclose(f);
	assert_int_equal(sw_auth_key_load(path, read), 0);
	assert_int_equal(read[31], 0x07);
	unlink(path);
	assert_int_equal(sw_auth_key_load(path, read), -ENOENT);
	unit_rm_rf(dir);
}

static void test_auth_password_sources(void **state)
{
	char dir[256], pw[64], file[320];
	FILE *fp;

	(void)state;
	assert_int_equal(unit_mkdtemp(dir, sizeof(dir), "auth"), 0);
	snprintf(file, sizeof(file), "%s/pw", dir);
	fp = fopen(file, "w");
	assert_non_null(fp);
	fputs("from-file\nsecond line\n", fp);
	fclose(fp);
	setenv("SWEEPFS_PASSWORD", "from-env", 1);
	assert_int_equal(sw_auth_password(file, pw, sizeof(pw)), 1);
	assert_string_equal(pw, "from-file");
	assert_int_equal(sw_auth_password(NULL, pw, sizeof(pw)), 1);
	assert_string_equal(pw, "from-env");
	unsetenv("SWEEPFS_PASSWORD");
	assert_int_equal(sw_auth_password(NULL, pw, sizeof(pw)), 0);
	assert_int_equal(sw_auth_password("/nonexistent/pw", pw, sizeof(pw)),
			 -ENOENT);
	unit_rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auth_response),
		cmocka_unit_test(test_auth_tag_uses_differ),
		cmocka_unit_test(test_token_epoch_keys),
		cmocka_unit_test(test_auth_key_files),
		cmocka_unit_test(test_auth_password_sources),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
