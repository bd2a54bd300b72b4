/*
 * exports.c: parsing the exports file and matching clients against it;
 * common/auth.c: the password challenge and response.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth.h"
#include "exports.h"
#include "unit.h"

struct fixture {
	char dir[256];
	char path[300];
	struct exports ex;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || unit_mkdtemp(f->dir, sizeof(f->dir), "exports") < 0) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/exports.cfg", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	exports_free(&f->ex);
	unit_rm_rf(f->dir);
	free(f);
	return 0;
}

static int load(struct fixture *f, const char *text, char *err, size_t len)
{
	FILE *fp = fopen(f->path, "w");

	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	err[0] = '\0';
	return exports_load(f->path, &f->ex, err, len);
}

static struct sockaddr_in v4(const char *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	assert_int_equal(inet_pton(AF_INET, a, &sa.sin_addr), 1);
	return sa;
}

static const struct export_rule *match(struct fixture *f, const char *addr,
				       const char *subdir, int *why)
{
	struct sockaddr_in sa = v4(addr);

	*why = 0;
	return exports_match(&f->ex, (struct sockaddr *)&sa, subdir, why);
}

static void test_exports_parse_and_match(void **state)
{
	struct fixture *f = *state;
	const struct export_rule *r;
	char err[256];
	int why;

	assert_int_equal(
		load(f,
		     "# comment\n"
		     "\n"
		     "10.0.0.1             /          rw,admin,maproot=0\n"
		     "10.1.0.0/16          /projects  rw,alldirs\n"
		     "10.2.0.0/255.255.255.0 /m       mapall=1000:100\n"
		     "10.3.0.5-10.3.0.9    /r/./x//   ro # trailing comment\n"
		     "10.4.0.1             /sec       rw,password=pw\n"
		     "*                    /pub\n",
		     err, sizeof(err)),
		0);
	assert_int_equal(f->ex.n, 6);

	r = match(f, "10.0.0.1", "/", &why);
	assert_non_null(r);
	assert_true(r->rw && r->admin);
	assert_int_equal(r->maproot_uid, EXPORT_NO_MAP); /* maproot=0 */
	/* Without alldirs, only the directory itself. */
	assert_null(match(f, "10.0.0.1", "/projects", &why));
	assert_int_equal(why, -EPERM);

	r = match(f, "10.1.200.3", "/projects/a/b", &why);
	assert_non_null(r);
	assert_true(r->rw && !r->admin);
	assert_int_equal(r->maproot_uid, 65534); /* squashed by default */
	/* alldirs does not reach a sibling with the same prefix. */
	assert_null(match(f, "10.1.200.3", "/projectsX", &why));

	r = match(f, "10.2.0.77", "/m", &why);
	assert_non_null(r);
	assert_false(r->rw); /* read-only by default */
	assert_int_equal(r->mapall_uid, 1000);
	assert_int_equal(r->mapall_gid, 100);
	assert_null(match(f, "10.2.1.77", "/m", &why)); /* outside the mask */

	assert_non_null(match(f, "10.3.0.5", "/r/x", &why));
	assert_non_null(match(f, "10.3.0.9", "r//x/", &why));
	assert_null(match(f, "10.3.0.10", "/r/x", &why));

	r = match(f, "10.4.0.1", "/sec", &why);
	assert_non_null(r);
	assert_true(r->has_password);
	/* The password does not show in the text status prints. */
	assert_null(strstr(r->text, "pw"));

	/* "*" catches anyone, for its directory only. */
	assert_non_null(match(f, "192.0.2.1", "/pub", &why));
	assert_null(match(f, "192.0.2.1", "/", &why));
	assert_int_equal(why, -EPERM);
	/* Only "*" matches this address, and not "/". An address no line
	 * names at all gets EACCES. */
	exports_free(&f->ex);
	assert_int_equal(load(f, "10.9.0.1 / rw\n", err, sizeof(err)), 0);
	assert_null(match(f, "10.9.0.2", "/", &why));
	assert_int_equal(why, -EACCES);
	/* ".." is never a way out. */
	assert_null(match(f, "10.9.0.1", "/a/../..", &why));
}

static void test_exports_first_match_wins(void **state)
{
	struct fixture *f = *state;
	const struct export_rule *r;
	char err[256];
	int why;

	assert_int_equal(load(f,
			      "10.0.0.0/8  /  ro,alldirs\n"
			      "10.0.0.1    /  rw,alldirs,admin\n",
			      err, sizeof(err)),
			 0);
	r = match(f, "10.0.0.1", "/x", &why);
	assert_non_null(r);
	assert_false(r->rw);
	assert_int_equal(r->line, 1);
}

static void test_exports_v4_mapped(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
	char err[256];
	int why;

	assert_int_equal(load(f, "127.0.0.1 / rw\n", err, sizeof(err)), 0);
	assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.1", &sa.sin6_addr),
			 1);
	assert_non_null(
		exports_match(&f->ex, (struct sockaddr *)&sa, "/", &why));
	assert_int_equal(inet_pton(AF_INET6, "::1", &sa.sin6_addr), 1);
	assert_null(exports_match(&f->ex, (struct sockaddr *)&sa, "/", &why));
}

static void test_exports_errors(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *text;
		const char *in_err;
	} bad[] = {
		{ "10.0.0.1\n", ":1:" },
		{ "10.0.0.256 / rw\n", "bad address" },
		{ "10.0.0.1/33 / rw\n", "bad address" },
		{ "10.0.0.9-10.0.0.1 / rw\n", "bad address" },
		{ "10.0.0.1 relative rw\n", "bad directory" },
		{ "10.0.0.1 /a/../b rw\n", "bad directory" },
		{ "\n\n10.0.0.1 / rw,frobnicate\n",
		  ":3: bad option 'frobnicate'" },
		{ "10.0.0.1 / maproot=no-such-user-here\n", "bad option" },
		{ "10.0.0.1 / password=\n", "bad option" },
		{ "10.0.0.1 / rw extra\n", "want ADDRESS" },
	};
	struct exports before;
	char err[256];

	assert_int_equal(load(f, "10.0.0.1 / rw\n", err, sizeof(err)), 0);
	before = f->ex;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(load(f, bad[i].text, err, sizeof(err)),
				 -EINVAL);
		if (!strstr(err, bad[i].in_err))
			fail_msg("'%s': error '%s' lacks '%s'", bad[i].text,
				 err, bad[i].in_err);
		/* What was in force stays in force. */
		assert_ptr_equal(f->ex.rules, before.rules);
		assert_int_equal(f->ex.n, 1);
	}
	exports_free(&f->ex);
	assert_int_equal(exports_load("/nonexistent/exports", &f->ex, err,
				      sizeof(err)),
			 -ENOENT);
}

static void test_exports_open_policy(void **state)
{
	struct fixture *f = *state;
	const struct export_rule *r;
	int why;

	exports_open(&f->ex);
	r = match(f, "203.0.113.9", "/any/thing", &why);
	assert_non_null(r);
	assert_true(r->rw && r->admin && r->alldirs);
	assert_int_equal(r->maproot_uid, EXPORT_NO_MAP);
}

static void test_exports_norm_path(void **state)
{
	char out[16];

	(void)state;
	assert_int_equal(exports_norm_path("", out, sizeof(out)), 0);
	assert_string_equal(out, "/");
	assert_int_equal(exports_norm_path("//a/./b//", out, sizeof(out)), 0);
	assert_string_equal(out, "/a/b");
	assert_int_equal(exports_norm_path("/a/..", out, sizeof(out)), -EINVAL);
	assert_int_equal(exports_norm_path("/..x", out, sizeof(out)), 0);
	assert_string_equal(out, "/..x");
	assert_int_equal(exports_norm_path("/0123456789abcdef", out,
					   sizeof(out)),
			 -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exports_parse_and_match,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_exports_first_match_wins,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_exports_v4_mapped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_exports_errors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_exports_open_policy, setup,
						teardown),
		cmocka_unit_test(test_exports_norm_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
