/*
 * cdel_go.h: where compare-delete finds the go-removeall program. Each
 * case lays out a fake build or install tree under a fresh directory
 * (a "sweepfs" binary, go-removeall/main.go where a layout puts it) and
 * checks which rule wins, and that an explicit choice that does not hold
 * is an error rather than a reason to look elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cdel_go.h"
#include "unit.h"

struct fx {
	char dir[256];
	char why[256];
	struct cdel_go_loc loc;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(unit_mkdtemp(f->dir, sizeof(f->dir), "cdel-go"), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	unit_rm_rf(f->dir);
	free(f);
	return 0;
}

/* mkdir -p of @rel under the fixture's directory; its path into @out. */
static void mkdirs(struct fx *f, const char *rel, char *out, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
	for (char *p = path + strlen(f->dir) + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
		*p = '/';
	}
	assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
	snprintf(out, len, "%s", path);
}

/* A file @rel (its directory made) with @mode; its path into @out. */
static void file(struct fx *f, const char *rel, mode_t mode, char *out,
		 size_t len)
{
	char dir[PATH_MAX], *slash;
	int fd;

	snprintf(dir, sizeof(dir), "%s", rel);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		mkdirs(f, dir, out, len);
	}
	snprintf(out, len, "%s/%s", f->dir, rel);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(chmod(out, mode), 0);
}

static void test_cdel_go_find_build_tree(void **state)
{
	struct fx *f = *state;
	char exe[PATH_MAX], src[PATH_MAX];
	struct cdel_go_hints h = { 0 };

	file(f, "build/tools/sweepfs", 0755, exe, sizeof(exe));
	file(f, "build/tools/compare_delete/go-removeall/main.go", 0644, src,
	     sizeof(src));
	h.exe = exe;
	h.rel = "../share/sweepfs/go-removeall";
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)), 0);
	*strrchr(src, '/') = '\0';
	assert_string_equal(f->loc.path, src);
	assert_false(f->loc.prebuilt);
	assert_string_equal(f->loc.how, "the build tree");
}

static void test_cdel_go_find_installed_relative(void **state)
{
	struct fx *f = *state;
	char exe[PATH_MAX], src[PATH_MAX];
	struct cdel_go_hints h = { 0 };

	/* Installed under one prefix, moved to another: the configured
	 * absolute path is wrong, the relative one right. */
	file(f, "opt/bin/sweepfs", 0755, exe, sizeof(exe));
	file(f, "opt/share/sweepfs/go-removeall/main.go", 0644, src,
	     sizeof(src));
	h.exe = exe;
	h.rel = "../share/sweepfs/go-removeall";
	h.dir = "/nonexistent/share/sweepfs/go-removeall";
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)), 0);
	assert_string_equal(f->loc.how, "the installed tree");
	assert_non_null(strstr(f->loc.path, "/opt/bin/../share/sweepfs/"));
}

static void test_cdel_go_find_install_prefix(void **state)
{
	struct fx *f = *state;
	char exe[PATH_MAX], src[PATH_MAX];
	struct cdel_go_hints h = { 0 };

	file(f, "usr/bin/sweepfs", 0755, exe, sizeof(exe));
	file(f, "elsewhere/go-removeall/main.go", 0644, src, sizeof(src));
	*strrchr(src, '/') = '\0';
	h.exe = exe;
	h.rel = "../share/sweepfs/go-removeall";
	h.dir = src;
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)), 0);
	assert_string_equal(f->loc.path, src);
	assert_string_equal(f->loc.how, "the install prefix");
}

static void test_cdel_go_find_nothing(void **state)
{
	struct fx *f = *state;
	char exe[PATH_MAX], dir[PATH_MAX];
	struct cdel_go_hints h = { 0 };

	file(f, "usr/bin/sweepfs", 0755, exe, sizeof(exe));
	/* A directory without main.go is not the program. */
	mkdirs(f, "usr/share/sweepfs/go-removeall", dir, sizeof(dir));
	h.exe = exe;
	h.rel = "../share/sweepfs/go-removeall";
	h.dir = dir;
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)),
			 -ENOENT);
	assert_non_null(strstr(f->why, "--go-bin"));
}

static void test_cdel_go_find_options_first(void **state)
{
	struct fx *f = *state;
	char exe[PATH_MAX], src[PATH_MAX], bin[PATH_MAX], other[PATH_MAX];
	struct cdel_go_hints h = { 0 };

	file(f, "build/tools/sweepfs", 0755, exe, sizeof(exe));
	file(f, "build/tools/compare_delete/go-removeall/main.go", 0644, src,
	     sizeof(src));
	file(f, "prebuilt/removeall", 0755, bin, sizeof(bin));
	file(f, "other/main.go", 0644, other, sizeof(other));
	*strrchr(other, '/') = '\0';
	h.exe = exe;
	h.env = other;
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)), 0);
	assert_string_equal(f->loc.path, other);
	assert_string_equal(f->loc.how, "$SWEEPFS_GO_REMOVEALL");
	h.src = other;
	h.env = bin; /* --go-src beats the environment */
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)), 0);
	assert_string_equal(f->loc.how, "--go-src");
	h.bin = bin; /* --go-bin beats everything */
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)), 0);
	assert_string_equal(f->loc.path, bin);
	assert_true(f->loc.prebuilt);
	h.bin = NULL;
	h.src = NULL;
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)), 0);
	assert_true(f->loc.prebuilt); /* the environment names a program */
}

static void test_cdel_go_find_bad_choice(void **state)
{
	struct fx *f = *state;
	char exe[PATH_MAX], src[PATH_MAX], plain[PATH_MAX];
	struct cdel_go_hints h = { 0 };

	/* The build tree has it, but what was asked for does not hold. */
	file(f, "build/tools/sweepfs", 0755, exe, sizeof(exe));
	file(f, "build/tools/compare_delete/go-removeall/main.go", 0644, src,
	     sizeof(src));
	file(f, "not-a-program", 0644, plain, sizeof(plain));
	h.exe = exe;
	h.bin = plain;
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)),
			 -ENOENT);
	assert_non_null(strstr(f->why, "not an executable"));
	h.bin = NULL;
	h.src = f->dir; /* no main.go */
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)),
			 -ENOENT);
	assert_non_null(strstr(f->why, "--go-src"));
	h.src = NULL;
	h.env = plain;
	assert_int_equal(cdel_go_find(&h, &f->loc, f->why, sizeof(f->why)),
			 -ENOENT);
	assert_non_null(strstr(f->why, "SWEEPFS_GO_REMOVEALL"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cdel_go_find_build_tree,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cdel_go_find_installed_relative, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cdel_go_find_install_prefix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cdel_go_find_nothing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cdel_go_find_options_first,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cdel_go_find_bad_choice,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
