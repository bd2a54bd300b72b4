/*
 * prefault.h: ranges given to the helper end up faulted in, contents
 * untouched, whether the loader writes them meanwhile or not; a stop
 * with work left returns at once; NULL and empty ranges do nothing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "prefault.h"

#define MIB ((size_t)1 << 20)

/* While set, madvise(MADV_POPULATE_WRITE) answers EINVAL, as a kernel
 * older than 5.14 does, after a pause (a step that takes its time). */
static volatile bool old_kernel;

int __real_madvise(void *addr, size_t len, int advice);
int __wrap_madvise(void *addr, size_t len, int advice);

int __wrap_madvise(void *addr, size_t len, int advice)
{
	if (old_kernel && advice == 23) {
		struct timespec ts = { 0, 200 * 1000000L };

		nanosleep(&ts, NULL);
		errno = EINVAL;
		return -1;
	}
	return __real_madvise(addr, len, advice);
}

static size_t page(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	/* Small pages, so that residency is counted page by page. */
	madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

/* Pages of [@p, @p + @len) (page aligned) in memory. */
static size_t resident(void *p, size_t len)
{
	size_t n = len / page(), in = 0;
	unsigned char *v = malloc(n);

	assert_non_null(v);
	assert_int_equal(mincore(p, len, v), 0);
	for (size_t i = 0; i < n; i++)
		in += v[i] & 1;
	free(v);
	return in;
}

/* Whether this kernel faults memory in on request (Linux 5.14): without
 * it the helper does nothing, and the checks below that it did skip. */
static bool can_populate(void)
{
	size_t len = page();
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool ok;

	assert_true(p != MAP_FAILED);
	ok = madvise(p, len, 23 /* MADV_POPULATE_WRITE */) == 0;
	munmap(p, len);
	return ok;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A mapping untouched is not resident: the checks below can fail. */
static void test_untouched_is_not_resident(void **state)
{
	size_t len = 8 * MIB;
	uint8_t *p = map(len);

	(void)state;
	assert_int_equal(resident(p, len), 0);
	p[0] = 1;
	assert_int_equal(resident(p, len), 1);
	munmap(p, len);
}

/* sw_prefault_now(): every page is in when it returns, and zero. */
static void test_now_faults_in_all(void **state)
{
	struct sw_prefault *pf = sw_prefault_start();
	size_t len = 24 * MIB + 3 * page();
	uint8_t *p = map(len);

	(void)state;
	if (!can_populate())
		skip();
	assert_non_null(pf);
	sw_prefault_now(pf, p, len);
	assert_int_equal(resident(p, len), len / page());
	for (size_t i = 0; i < len; i += page())
		assert_int_equal(p[i], 0);
	assert_true(sw_prefault_stop(pf) >= len / 2 - 2 * MIB);
	munmap(p, len);
}

/*
 * sw_prefault_ahead(): the range comes in, in the background, while this
 * thread writes into it; what was written stays.
 */
static void test_ahead_keeps_what_is_written(void **state)
{
	struct sw_prefault *pf = sw_prefault_start();
	size_t len = 64 * MIB;
	uint8_t *p = map(len);
	int waited = 0;

	(void)state;
	if (!can_populate())
		skip();
	assert_non_null(pf);
	sw_prefault_ahead(pf, p, len);
	for (size_t i = 0; i < len; i += 4096 * 7)
		p[i] = (uint8_t)(i / 4096 * 7 + 1);
	while (resident(p, len) < len / page() && waited++ < 10000)
		sleep_ms(1);
	assert_int_equal(resident(p, len), len / page());
	for (size_t i = 0; i < len; i += 4096 * 7)
		assert_int_equal(p[i], (uint8_t)(i / 4096 * 7 + 1));
	assert_true(sw_prefault_stop(pf) > 0);
	munmap(p, len);
}

/* Only the whole pages inside a range are faulted in, none outside. */
static void test_unaligned_range(void **state)
{
	struct sw_prefault *pf = sw_prefault_start();
	size_t len = 16 * MIB;
	uint8_t *p = map(len);

	(void)state;
	if (!can_populate())
		skip();
	assert_non_null(pf);
	/* From inside the first page to inside the last. */
	sw_prefault_now(pf, p + 1, len - 2);
	assert_int_equal(resident(p, page()), 0);
	assert_int_equal(resident(p + page(), len - 2 * page()),
			 len / page() - 2);
	assert_int_equal(resident(p + len - page(), page()), 0);
	/* Less than a page: nothing. */
	sw_prefault_now(pf, p + 1, page() - 2);
	assert_int_equal(resident(p, page()), 0);
	sw_prefault_stop(pf);
	munmap(p, len);
}

/*
 * A stop with much left ahead returns without faulting it all in: the
 * rest stays to the loader.
 */
static void test_stop_leaves_the_rest(void **state)
{
	struct sw_prefault *pf = sw_prefault_start();
	size_t len = 512 * MIB; /* address space only, mostly */
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint64_t bytes;

	(void)state;
	assert_true(p != MAP_FAILED);
	assert_non_null(pf);
	sw_prefault_ahead(pf, p, len);
	bytes = sw_prefault_stop(pf);
	assert_true(bytes < len);
	munmap(p, len);
}

/*
 * A kernel without the advice: the helper gives up in the middle of a
 * step ahead, while a sw_prefault_now() waits for its half, which must
 * then return (it hung once). Bounded by an alarm.
 */
static void test_old_kernel_gives_up(void **state)
{
	struct sw_prefault *pf = sw_prefault_start();
	size_t len = 64 * MIB;
	uint8_t *p = map(len);

	(void)state;
	assert_non_null(pf);
	old_kernel = true;
	alarm(10);
	sw_prefault_ahead(pf, p, len);
	sleep_ms(50); /* the helper is in its first step */
	sw_prefault_now(pf, p, MIB);
	/* And from then on nothing is asked of the kernel. */
	sw_prefault_now(pf, p, 8 * MIB);
	sw_prefault_ahead(pf, p, len);
	alarm(0);
	old_kernel = false;
	assert_int_equal(sw_prefault_stop(pf), 0);
	assert_int_equal(resident(p, len), 0);
	munmap(p, len);
}

/* Without a helper, nothing happens and nothing breaks. */
static void test_null_does_nothing(void **state)
{
	size_t len = 4 * MIB;
	uint8_t *p = map(len);

	(void)state;
	sw_prefault_now(NULL, p, len);
	sw_prefault_ahead(NULL, p, len);
	assert_int_equal(resident(p, len), 0);
	assert_int_equal(sw_prefault_stop(NULL), 0);
	munmap(p, len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_untouched_is_not_resident),
		cmocka_unit_test(test_now_faults_in_all),
		cmocka_unit_test(test_ahead_keeps_what_is_written),
		cmocka_unit_test(test_unaligned_range),
		cmocka_unit_test(test_stop_leaves_the_rest),
		cmocka_unit_test(test_old_kernel_gives_up),
		cmocka_unit_test(test_null_does_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
