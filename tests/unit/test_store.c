/*
 * The chunk store: chunkserver/store.h over chunkserver/chunkfile.h, and
 * the id map it keeps its inventory in (chunkserver/idmap.h).
 *
 * Each test gets two fresh data directories. Reads are checked against a
 * reference buffer; corruption and interrupted writes are made by editing
 * the chunk files directly, with the layout constants of chunkfile.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "chunkfile.h"
#include "crc32c.h"
#include "idmap.h"
#include "log.h"
#include "store.h"
#include "unit.h"
#include "util.h"

#define BS SW_BLOCK_SIZE
#define CS SW_CHUNK_SIZE

struct fixture {
	struct rng rng;
	char root[256];
	char dirs[2][300];
	const char *dirv[2];
	struct store *s;
	uint8_t *ref; /* expected chunk contents */
	uint8_t *buf; /* scratch, CS bytes */
};

static void quiet(int level, const char *tag, const char *msg, void *opaque)
{
}

static void open_store(struct fixture *f, unsigned max_open)
{
	struct store_opts o = { .dirs = f->dirv,
				.ndirs = 2,
				.max_open = max_open };

	assert_int_equal(store_open(&o, &f->s), 0);
}

static void reopen(struct fixture *f)
{
	store_close(f->s);
	f->s = NULL;
	open_store(f, 64);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	sw_log_set_sink(quiet, NULL);
	rng_seed(&f->rng, 1234);
	if (unit_mkdtemp(f->root, sizeof(f->root), "store") < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		snprintf(f->dirs[i], sizeof(f->dirs[i]), "%s/d%d", f->root, i);
		mkdir(f->dirs[i], 0750);
		f->dirv[i] = f->dirs[i];
	}
	f->ref = calloc(1, CS);
	f->buf = calloc(1, CS);
	if (!f->ref || !f->buf)
		return -1;
	open_store(f, 64);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	store_close(f->s);
	unit_rm_rf(f->root);
	free(f->ref);
	free(f->buf);
	free(f);
	return 0;
}

/* Path of chunk @id at @version in whichever directory has it, or "". */
static void chunk_path(struct fixture *f, uint64_t id, uint32_t version,
		       char *out, size_t len)
{
	char rel[64];

	store_relpath(rel, sizeof(rel), id, version);
	for (int i = 0; i < 2; i++) {
		snprintf(out, len, "%s/%s", f->dirs[i], rel);
		if (access(out, F_OK) == 0)
			return;
	}
	out[0] = '\0';
}

static bool chunk_exists(struct fixture *f, uint64_t id, uint32_t version)
{
	char p[512];

	chunk_path(f, id, version, p, sizeof(p));
	return p[0] != '\0';
}

/* Write @size random bytes at @off into chunk @id and the reference. */
static void put(struct fixture *f, uint64_t id, uint32_t version, uint32_t off,
		uint32_t size)
{
	rng_fill(&f->rng, f->ref + off, size);
	assert_int_equal(
		store_write(f->s, id, version, off, f->ref + off, size), 0);
}

/* Check [@off, @off + @size) of chunk @id against the reference, given
 * the chunk's @length. */
static void check(struct fixture *f, uint64_t id, uint32_t version,
		  uint32_t off, uint32_t size, uint32_t length)
{
	uint32_t want;
	int n;

	size = SW_MIN(size, CS - off);
	want = off >= length ? 0 : SW_MIN(size, length - off);
	n = store_read(f->s, id, version, off, size, f->buf);

	assert_int_equal(n, (int)want);
	assert_memory_equal(f->buf, f->ref + off, want);
}

/* Check the whole chunk, a megabyte at a time. */
static void check_all(struct fixture *f, uint64_t id, uint32_t version,
		      uint32_t length)
{
	struct store_chunk_info ci;

	assert_int_equal(store_stat(f->s, id, &ci), 0);
	assert_int_equal(ci.length, length);
	for (uint32_t off = 0; off < length; off += SW_IO_MAX)
		check(f, id, version, off, SW_IO_MAX, length);
}

static void file_pwrite(const char *path, const void *p, size_t n, off_t off)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, p, n, off), (ssize_t)n);
	close(fd);
}

static uint32_t file_le32(const char *path, off_t off)
{
	uint8_t b[4];
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, b, 4, off), 4);
	close(fd);
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- create, read, write ----------------------------------------------- */

static void test_store_create_empty(void **state)
{
	struct fixture *f = *state;
	struct store_chunk_info ci;

	assert_int_equal(store_create(f->s, 0x1234, 1), 0);
	assert_true(chunk_exists(f, 0x1234, 1));
	assert_int_equal(store_create(f->s, 0x1234, 1), -EEXIST);
	assert_int_equal(store_create(f->s, 0x1234, 2), -EEXIST);
	assert_int_equal(store_stat(f->s, 0x1234, &ci), 0);
	assert_int_equal(ci.version, 1);
	assert_int_equal(ci.length, 0);
	assert_int_equal(store_read(f->s, 0x1234, 1, 0, 100, f->buf), 0);
	assert_int_equal(store_read(f->s, 0x1234, 2, 0, 100, f->buf), -ESTALE);
	assert_int_equal(store_read(f->s, 0x9999, 1, 0, 100, f->buf), -ENOENT);
	assert_int_equal(store_count(f->s), 1);
}

static void test_store_write_boundaries(void **state)
{
	static const uint32_t cases[][2] = {
		{ 0, 1 },
		{ 1, 1 },
		{ BS - 1, 1 },
		{ BS, 1 },
		{ BS - 1, 2 },
		{ BS - 1, BS + 2 },
		{ BS + 1, BS - 1 },
		{ 0, BS },
		{ 3 * BS, 2 * BS },
		{ 5 * BS - 7, 1 << 20 },
		{ CS - 1, 1 },
		{ CS - BS - 1, BS + 1 },
		{ CS - (1 << 20), 1 << 20 },
		{ 10 * BS + 5, 0 },
	};
	struct fixture *f = *state;
	uint32_t length = 0;

	assert_int_equal(store_create(f->s, 7, 1), 0);
	for (size_t i = 0; i < SW_ARRAY_SIZE(cases); i++) {
		uint32_t off = cases[i][0], size = cases[i][1];

		put(f, 7, 1, off, size);
		if (size)
			length = SW_MAX(length, off + size);
		check(f, 7, 1, off >= BS ? off - BS : 0, size + 2 * BS, length);
	}
	assert_int_equal(store_write(f->s, 7, 1, CS - 1, f->buf, 2), -EINVAL);
	assert_int_equal(store_write(f->s, 7, 1, CS + 1, f->buf, 0), -EINVAL);
	assert_int_equal(store_read(f->s, 7, 1, CS, 1, f->buf), -EINVAL);
	assert_int_equal(store_read(f->s, 7, 1, CS - 1, 1, f->buf), 1);
	check_all(f, 7, 1, length);
	reopen(f);
	check_all(f, 7, 1, length);
}

/* A small chunk takes its bytes on disk, not whole blocks of zeros; what
 * a later write puts inside the block, or past it, reads back. */
static void test_store_small_chunk_small_file(void **state)
{
	struct fixture *f = *state;
	char p[512];
	struct stat st;

	assert_int_equal(store_create(f->s, 9, 1), 0);
	put(f, 9, 1, 0, 4096);
	chunk_path(f, 9, 1, p, sizeof(p));
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, CF_DATA_OFF + 4096);
	put(f, 9, 1, 100, 50);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, CF_DATA_OFF + 4096);
	put(f, 9, 1, BS - 10, 20);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, CF_DATA_OFF + BS + 10);
	check_all(f, 9, 1, BS + 10);
	reopen(f);
	check_all(f, 9, 1, BS + 10);
}

/* An offset near a block boundary more often than not. */
static uint32_t pick_off(struct rng *r)
{
	uint32_t b = (uint32_t)rng_below(r, SW_CHUNK_BLOCKS);

	switch (rng_below(r, 4)) {
	case 0:
		return b * BS;
	case 1:
		return b ? b * BS - 1 : 0;
	case 2:
		return b * BS + 1;
	default:
		return (uint32_t)rng_below(r, CS);
	}
}

static void test_store_random_io(void **state)
{
	struct fixture *f = *state;
	uint32_t length = 0;

	assert_int_equal(store_create(f->s, 0x77, 3), 0);
	for (int i = 0; i < 400; i++) {
		uint32_t off = pick_off(&f->rng);
		uint32_t size = (uint32_t)SW_MIN(
			rng_below(&f->rng, 4) ?
				rng_below(&f->rng, 3 * BS) :
				rng_below(&f->rng, SW_IO_MAX + 1),
			CS - off);

		put(f, 0x77, 3, off, size);
		if (size)
			length = SW_MAX(length, off + size);
		off = pick_off(&f->rng);
		size = (uint32_t)SW_MIN(rng_below(&f->rng, SW_IO_MAX + 1),
					CS - off);
		check(f, 0x77, 3, off, size, length);
		if (i == 200)
			reopen(f);
	}
	check_all(f, 0x77, 3, length);
}

static void test_store_holes(void **state)
{
	struct fixture *f = *state;
	char path[512];
	struct stat st;

	assert_int_equal(store_create(f->s, 9, 1), 0);
	put(f, 9, 1, 10u << 20, 100);
	check(f, 9, 1, 0, SW_IO_MAX, (10u << 20) + 100);
	check(f, 9, 1, (10u << 20) - BS, 2 * BS, (10u << 20) + 100);
	for (uint32_t i = 0; i < BS; i++)
		assert_int_equal(f->buf[i], 0);
	/* Only what was written takes space. */
	chunk_path(f, 9, 1, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_blocks * 512 < 1024 * 1024);
	/* A partial write into a hole. */
	put(f, 9, 1, 3 * BS + 17, 10);
	check(f, 9, 1, 3 * BS, BS, (10u << 20) + 100);
}

static void test_store_partial_rmw(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(store_create(f->s, 11, 1), 0);
	memset(f->ref, 0xaa, 2 * BS);
	assert_int_equal(store_write(f->s, 11, 1, 0, f->ref, 2 * BS), 0);
	put(f, 11, 1, 100, 50);
	put(f, 11, 1, BS - 3, 6);
	put(f, 11, 1, 2 * BS - 1, 1);
	check(f, 11, 1, 0, 2 * BS, 2 * BS);
	assert_int_equal(f->buf[99], 0xaa);
	assert_int_equal(f->buf[150], 0xaa);
	assert_int_equal(f->buf[BS + 3], 0xaa);
	reopen(f);
	check(f, 11, 1, 0, 2 * BS, 2 * BS);
}

static void test_store_truncate(void **state)
{
	struct fixture *f = *state;
	uint32_t len = 3 * BS + BS / 2;
	char path[512];
	struct stat st;

	assert_int_equal(store_create(f->s, 12, 1), 0);
	put(f, 12, 1, 0, len);
	assert_int_equal(store_truncate(f->s, 12, 1, BS + 100), 0);
	memset(f->ref + BS + 100, 0, len - BS - 100);
	check_all(f, 12, 1, BS + 100);
	chunk_path(f, 12, 1, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, CF_DATA_OFF + BS + 100);
	/* Growing shows zeros, not the old bytes. */
	assert_int_equal(store_truncate(f->s, 12, 1, 4 * BS), 0);
	check_all(f, 12, 1, 4 * BS);
	/* A write past the end after a shrink. */
	put(f, 12, 1, 5 * BS - 10, 20);
	check_all(f, 12, 1, 5 * BS + 10);
	assert_int_equal(store_truncate(f->s, 12, 1, BS), 0);
	memset(f->ref + BS, 0, 5 * BS);
	check_all(f, 12, 1, BS);
	assert_int_equal(store_truncate(f->s, 12, 1, CS + 1), -EINVAL);
	assert_int_equal(store_truncate(f->s, 12, 1, CS), 0);
	check(f, 12, 1, CS - 10, 10, CS);
	assert_int_equal(store_truncate(f->s, 12, 1, 0), 0);
	check_all(f, 12, 1, 0);
	reopen(f);
	check_all(f, 12, 1, 0);
	assert_int_equal(store_truncate(f->s, 12, 2, 0), -ESTALE);
}

/* ---- checksums ------------------------------------------------------------- */

static void test_store_corrupt_data(void **state)
{
	struct fixture *f = *state;
	struct store_chunk_info ci;
	char path[512];
	uint8_t x;

	assert_int_equal(store_create(f->s, 20, 1), 0);
	put(f, 20, 1, 0, 4 * BS);
	chunk_path(f, 20, 1, path, sizeof(path));
	x = f->ref[2 * BS + 5] ^ 0x40;
	file_pwrite(path, &x, 1, CF_DATA_OFF + 2 * BS + 5);
	assert_int_equal(store_read(f->s, 20, 1, 2 * BS, 10, f->buf), -EBADMSG);
	assert_int_equal(store_read(f->s, 20, 1, BS, 2 * BS, f->buf), -EBADMSG);
	assert_int_equal(store_stat(f->s, 20, &ci), 0);
	assert_true(ci.damaged);
	check(f, 20, 1, 0, 2 * BS, 4 * BS);
	check(f, 20, 1, 3 * BS, BS, 4 * BS);
	/* A partial write needs the damaged block: refused. */
	assert_int_equal(store_write(f->s, 20, 1, 2 * BS + 1, f->buf, 1),
			 -EBADMSG);
	/* Overwriting the whole block heals it. */
	put(f, 20, 1, 2 * BS, BS);
	check_all(f, 20, 1, 4 * BS);
}

static void test_store_corrupt_crc(void **state)
{
	struct fixture *f = *state;
	uint8_t bad[8];
	char path[512];
	uint32_t good;

	assert_int_equal(store_create(f->s, 21, 1), 0);
	put(f, 21, 1, 0, 3 * BS);
	store_close(f->s);
	f->s = NULL;
	chunk_path(f, 21, 1, path, sizeof(path));
	/* Both slots of block 1 wrong (and equal): damaged. */
	good = file_le32(path, CF_TABLE_OFF + 8);
	put_le32(bad, good ^ 1);
	put_le32(bad + 4, good ^ 1);
	file_pwrite(path, bad, 8, CF_TABLE_OFF + 8);
	/* Only the committed slot of block 2 wrong: the pending one has
	 * the right value and repairs it. */
	put_le32(bad, 0xdeadbeef);
	file_pwrite(path, bad, 4, CF_TABLE_OFF + 16);
	open_store(f, 64);
	assert_int_equal(store_read(f->s, 21, 1, BS + 7, 1, f->buf), -EBADMSG);
	check(f, 21, 1, 0, BS, 3 * BS);
	check(f, 21, 1, 2 * BS, BS, 3 * BS);
	assert_int_equal(file_le32(path, CF_TABLE_OFF + 16),
			 file_le32(path, CF_TABLE_OFF + 20));
}

/*
 * kill -9 in the middle of a write, simulated: the pending CRC and the
 * data are on disk, the commit is not.
 */
static void test_store_pending_crc_recovered(void **state)
{
	struct fixture *f = *state;
	uint8_t slot[4], *blk = f->buf;
	char path[512];
	uint32_t old;

	assert_int_equal(store_create(f->s, 22, 1), 0);
	put(f, 22, 1, 0, 2 * BS);
	store_close(f->s);
	f->s = NULL;
	chunk_path(f, 22, 1, path, sizeof(path));
	old = file_le32(path, CF_TABLE_OFF);

	/* 1. pending written, data not: the old data is read. */
	rng_fill(&f->rng, blk, BS);
	put_le32(slot, sw_crc32c(0, blk, BS));
	file_pwrite(path, slot, 4, CF_TABLE_OFF + 4);
	open_store(f, 64);
	check(f, 22, 1, 0, 2 * BS, 2 * BS);
	assert_int_equal(file_le32(path, CF_TABLE_OFF), old);
	store_close(f->s);
	f->s = NULL;

	/* 2. pending and data written: the new data is read and the
	 * committed slot takes the pending value. */
	file_pwrite(path, slot, 4, CF_TABLE_OFF + 4);
	file_pwrite(path, blk, BS, CF_DATA_OFF);
	memcpy(f->ref, blk, BS);
	open_store(f, 64);
	check(f, 22, 1, 0, 2 * BS, 2 * BS);
	assert_int_equal(file_le32(path, CF_TABLE_OFF),
			 sw_crc32c(0, f->ref, BS));
	store_close(f->s);
	f->s = NULL;

	/* 3. the data write stopped half-way: the block is taken as it
	 * is (the interrupted write was never acknowledged). */
	rng_fill(&f->rng, blk, BS);
	put_le32(slot, sw_crc32c(0, blk, BS));
	file_pwrite(path, slot, 4, CF_TABLE_OFF + 4);
	file_pwrite(path, blk, BS / 2, CF_DATA_OFF);
	memcpy(f->ref, blk, BS / 2);
	open_store(f, 64);
	check(f, 22, 1, 0, 2 * BS, 2 * BS);
	assert_int_equal(file_le32(path, CF_TABLE_OFF),
			 sw_crc32c(0, f->ref, BS));
	assert_int_equal(file_le32(path, CF_TABLE_OFF + 4),
			 sw_crc32c(0, f->ref, BS));
}

/* ---- versions, copies, deletion ------------------------------------------- */

static void test_store_set_version(void **state)
{
	struct fixture *f = *state;
	struct store_chunk_info ci;
	struct cf_meta m;
	char path[512];
	int fd;

	assert_int_equal(store_create(f->s, 30, 1), 0);
	put(f, 30, 1, 0, 3 * BS);
	assert_int_equal(store_set_version(f->s, 30, 1, 2, -1), 0);
	assert_false(chunk_exists(f, 30, 1));
	assert_true(chunk_exists(f, 30, 2));
	assert_int_equal(store_read(f->s, 30, 1, 0, 1, f->buf), -ESTALE);
	check_all(f, 30, 2, 3 * BS);
	assert_int_equal(store_set_version(f->s, 30, 1, 3, -1), -ESTALE);
	assert_int_equal(store_set_version(f->s, 31, 1, 3, -1), -ENOENT);
	assert_int_equal(store_set_version(f->s, 30, 2, 3, BS + 1), 0);
	memset(f->ref + BS + 1, 0, 2 * BS);
	check_all(f, 30, 3, BS + 1);
	reopen(f);
	assert_int_equal(store_stat(f->s, 30, &ci), 0);
	assert_int_equal(ci.version, 3);
	check_all(f, 30, 3, BS + 1);

	/* Interrupted before the rename: the header says 4, the name 3. */
	store_close(f->s);
	f->s = NULL;
	chunk_path(f, 30, 3, path, sizeof(path));
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(cf_read_header(fd, &m), 0);
	m.version = 4;
	assert_int_equal(cf_put_header(fd, &m), 0);
	close(fd);
	open_store(f, 64);
	assert_int_equal(store_stat(f->s, 30, &ci), 0);
	assert_int_equal(ci.version, 3);
	check_all(f, 30, 3, BS + 1);
}

static void test_store_duplicate(void **state)
{
	struct fixture *f = *state;
	uint8_t *copy = malloc(4 * BS);
	char path[512];
	struct stat st;

	assert_non_null(copy);
	assert_int_equal(store_create(f->s, 40, 5), 0);
	put(f, 40, 5, 0, 2 * BS + 3);
	put(f, 40, 5, 20u << 20, 7);
	assert_int_equal(store_duplicate(f->s, 40, 5, 41, 1), 0);
	check_all(f, 41, 1, (20u << 20) + 7);
	chunk_path(f, 41, 1, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_blocks * 512 < 4 * 1024 * 1024);
	/* Copy on write: the copies are independent. */
	memcpy(copy, f->ref, 4 * BS);
	put(f, 41, 1, 0, BS);
	memcpy(f->buf, f->ref, BS);
	memcpy(f->ref, copy, 4 * BS);
	check(f, 40, 5, 0, 4 * BS, (20u << 20) + 7);
	assert_int_equal(store_duplicate(f->s, 40, 5, 41, 2), -EEXIST);
	assert_int_equal(store_duplicate(f->s, 40, 4, 42, 1), -ESTALE);
	assert_int_equal(store_duplicate(f->s, 43, 1, 42, 1), -ENOENT);
	assert_int_equal(store_duplicate(f->s, 40, 5, 40, 6), -EINVAL);
	assert_false(chunk_exists(f, 42, 1));
	reopen(f);
	check(f, 40, 5, 0, 4 * BS, (20u << 20) + 7);
	free(copy);
}

static void test_store_delete(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(store_create(f->s, 50, 3), 0);
	put(f, 50, 3, 0, 10);
	assert_int_equal(store_delete(f->s, 50, 2), -ESTALE);
	assert_true(chunk_exists(f, 50, 3));
	assert_int_equal(store_delete(f->s, 50, 3), 0);
	assert_false(chunk_exists(f, 50, 3));
	assert_int_equal(store_read(f->s, 50, 3, 0, 10, f->buf), -ENOENT);
	assert_int_equal(store_delete(f->s, 50, 3), -ENOENT);
	assert_int_equal(store_count(f->s), 0);
	/* The id can be used again. */
	assert_int_equal(store_create(f->s, 50, 9), 0);
	assert_int_equal(store_delete(f->s, 50, 100), 0);
	reopen(f);
	assert_int_equal(store_count(f->s), 0);
}

/* ---- import ----------------------------------------------------------------- */

struct src {
	const uint8_t *data;
	uint32_t len;
	int fail_at; /* fail the fetch at this offset (MiB), or -1 */
};

static int fetch(void *arg, uint32_t off, uint8_t *buf, uint32_t size)
{
	struct src *sr = arg;
	uint32_t n;

	if (sr->fail_at >= 0 && off >= (uint32_t)sr->fail_at << 20)
		return -EIO;
	n = off >= sr->len ? 0 : SW_MIN(size, sr->len - off);
	memcpy(buf, sr->data + off, n);
	return (int)n;
}

static void test_store_import(void **state)
{
	struct fixture *f = *state;
	uint32_t len = (3u << 20) + 5;
	struct src sr = { f->ref, len, -1 };
	char path[512];
	struct stat st;

	rng_fill(&f->rng, f->ref, len);
	memset(f->ref + BS, 0, 5 * BS);
	assert_int_equal(store_import(f->s, 60, 2, fetch, &sr), 0);
	check_all(f, 60, 2, len);
	chunk_path(f, 60, 2, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	/* Five blocks of zeros are holes (less the tail block, written
	 * whole, and the header). */
	assert_true(st.st_blocks * 512 < len - 3 * BS);
	assert_int_equal(store_import(f->s, 60, 2, fetch, &sr), -EEXIST);
	/* A newer version replaces the old one. */
	sr.len = 2u << 20;
	assert_int_equal(store_import(f->s, 60, 3, fetch, &sr), 0);
	assert_false(chunk_exists(f, 60, 2));
	check_all(f, 60, 3, 2u << 20);
	/* A failed fetch leaves nothing behind. */
	sr.fail_at = 1;
	assert_int_equal(store_import(f->s, 61, 1, fetch, &sr), -EIO);
	assert_int_equal(store_read(f->s, 61, 1, 0, 1, f->buf), -ENOENT);
	reopen(f);
	assert_int_equal(store_count(f->s), 1);
	check_all(f, 60, 3, 2u << 20);
	/* An empty chunk. */
	sr = (struct src){ f->ref, 0, -1 };
	assert_int_equal(store_import(f->s, 62, 1, fetch, &sr), 0);
	check_all(f, 62, 1, 0);
}

/* ---- scan -------------------------------------------------------------------- */

/* Make the directory of @path (a chunk subdirectory) if need be. */
static void make_parent(const char *path)
{
	char dir[600];

	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	mkdir(dir, 0750);
}

static void write_file(const char *path, const void *p, size_t n)
{
	int fd;

	make_parent(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	close(fd);
}

static void test_store_scan(void **state)
{
	struct fixture *f = *state;
	struct store_chunk_info *inv, ci;
	char path[512], other[600], tmp[600], rel[64];
	size_t n;

	for (uint64_t id = 0x100; id < 0x120; id++) {
		assert_int_equal(store_create(f->s, id, (uint32_t)id & 7), 0);
		memset(f->ref, (int)id, (size_t)id);
		assert_int_equal(store_write(f->s, id, (uint32_t)id & 7, 0,
					     f->ref, (uint32_t)id),
				 0);
	}
	store_close(f->s);
	f->s = NULL;
	/* Junk is left alone. */
	snprintf(path, sizeof(path), "%s/05/notes.txt", f->dirs[0]);
	write_file(path, "hello", 5);
	snprintf(path, sizeof(path), "%s/05/chunk_zz.swc", f->dirs[1]);
	write_file(path, "x", 1);
	/* A bad header goes to damaged/. */
	store_relpath(rel, sizeof(rel), 0x3, 1);
	snprintf(path, sizeof(path), "%s/%s", f->dirs[0], rel);
	memset(f->buf, 0x5a, CF_DATA_OFF + 100);
	write_file(path, f->buf, CF_DATA_OFF + 100);
	/* A leftover .tmp goes. */
	store_relpath(rel, sizeof(rel), 0x4, 1);
	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", f->dirs[1], rel);
	write_file(tmp, "y", 1);
	/* Two versions of chunk 0x101: the older goes. */
	chunk_path(f, 0x101, 1, path, sizeof(path));
	store_relpath(rel, sizeof(rel), 0x101, 0);
	snprintf(other, sizeof(other), "%s/%s",
		 strstr(path, "/d0/") ? f->dirs[1] : f->dirs[0], rel);
	make_parent(other);
	assert_int_equal(link(path, other), 0);

	open_store(f, 64);
	assert_int_equal(store_inventory(f->s, &inv, &n), 0);
	assert_int_equal(n, 0x20);
	for (size_t i = 0; i < n; i++) {
		assert_true(inv[i].chunk_id >= 0x100 &&
			    inv[i].chunk_id < 0x120);
		assert_int_equal(inv[i].version, inv[i].chunk_id & 7);
		assert_int_equal(inv[i].length, inv[i].chunk_id);
	}
	free(inv);
	assert_int_equal(access(other, F_OK), -1);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(store_stat(f->s, 0x3, &ci), -ENOENT);
	snprintf(path, sizeof(path),
		 "%s/damaged/03-chunk_0000000000000003_00000001.swc",
		 f->dirs[0]);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/05/notes.txt", f->dirs[0]);
	assert_int_equal(access(path, F_OK), 0);
	for (uint64_t id = 0x100; id < 0x120; id++) {
		memset(f->ref, (int)id, (size_t)id);
		check_all(f, id, (uint32_t)id & 7, (uint32_t)id);
	}
}

/* ---- the file cache, space, concurrency --------------------------------- */

static void test_store_fd_cache_bound(void **state)
{
	struct fixture *f = *state;

	store_close(f->s);
	open_store(f, 4);
	for (uint64_t id = 1; id <= 20; id++) {
		assert_int_equal(store_create(f->s, id, 1), 0);
		put(f, id, 1, 0, 100);
		check(f, id, 1, 0, 100, 100);
		assert_true(store_open_files(f->s) <= 4);
	}
	for (uint64_t id = 1; id <= 20; id++)
		assert_int_equal(store_read(f->s, id, 1, 0, 100, f->buf), 100);
	assert_true(store_open_files(f->s) <= 4);
	assert_true(store_open_files(f->s) >= 1);
}

static void test_store_space(void **state)
{
	struct fixture *f = *state;
	uint64_t total, used, bytes;

	assert_int_equal(store_create(f->s, 1, 1), 0);
	put(f, 1, 1, 0, 1000);
	assert_int_equal(store_create(f->s, 2, 1), 0);
	put(f, 2, 1, 5000, 1000);
	store_refresh_space(f->s);
	store_space(f->s, &total, &used, &bytes);
	assert_true(total > 0);
	assert_true(used <= total);
	assert_int_equal(bytes, 7000);
	assert_int_equal(store_delete(f->s, 2, 1), 0);
	store_space(f->s, NULL, NULL, &bytes);
	assert_int_equal(bytes, 1000);
}

static void test_store_create_no_space(void **state)
{
	struct fixture *f = *state;
	struct store_opts o = { .dirs = f->dirv,
				.ndirs = 2,
				.max_open = 4,
				.reserve = UINT64_MAX / 2 };

	uint64_t total = 1;

	store_close(f->s);
	assert_int_equal(store_open(&o, &f->s), 0);
	/* The space reported is net of the reserve: none. */
	store_space(f->s, &total, NULL, NULL);
	assert_int_equal(total, 0);
	assert_int_equal(store_create(f->s, 1, 1), -ENOSPC);
	assert_int_equal(store_count(f->s), 0);
	assert_false(chunk_exists(f, 1, 1));
}

struct worker {
	struct fixture *f;
	uint64_t id;
	uint64_t seed;
	int errors;
};

/* Writes and reads its own chunk, and reads the shared chunk 1000. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct rng r;
	uint8_t *ref = calloc(1, 4u << 20), *buf = malloc(1u << 20);
	uint32_t length = 0;

	rng_seed(&r, w->seed);
	if (!ref || !buf || store_create(w->f->s, w->id, 1) < 0)
		w->errors++;
	for (int i = 0; i < 200 && !w->errors; i++) {
		uint32_t off = (uint32_t)rng_below(&r, 3u << 20);
		uint32_t size = (uint32_t)rng_below(&r, 1u << 20);
		int n;

		rng_fill(&r, ref + off, size);
		if (store_write(w->f->s, w->id, 1, off, ref + off, size) < 0)
			w->errors++;
		if (size)
			length = SW_MAX(length, off + size);
		off = (uint32_t)rng_below(&r, 4u << 20);
		n = store_read(w->f->s, w->id, 1, off, 1u << 20, buf);
		if (n != (int)(off >= length ?
				       0 :
				       SW_MIN(1u << 20, length - off)) ||
		    memcmp(buf, ref + off, (size_t)SW_MAX(n, 0)))
			w->errors++;
		if (store_read(w->f->s, 1000, 1, off % (2u << 20), 1u << 20,
			       buf) != 1 << 20)
			w->errors++;
	}
	free(ref);
	free(buf);
	return NULL;
}

static void test_store_concurrent(void **state)
{
	struct fixture *f = *state;
	struct worker w[4];
	pthread_t t[4];

	store_close(f->s);
	open_store(f, 3);
	assert_int_equal(store_create(f->s, 1000, 1), 0);
	put(f, 1000, 1, 0, 3u << 20);
	for (int i = 0; i < 4; i++) {
		/* Ids 1 + 1024 k share chunk 1's lock stripe. */
		w[i] = (struct worker){ f, 1 + 1024 * (uint64_t)i, 99 + i, 0 };
		assert_int_equal(
			pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].errors, 0);
	}
	assert_true(store_open_files(f->s) <= 3);
	check(f, 1000, 1, 0, 3u << 20, 3u << 20);
}

/* ---- idmap ------------------------------------------------------------------- */

static void test_idmap_put_get_del(void **state)
{
	static char vals[3];
	const int n = 20000;
	struct idmap m;

	idmap_init(&m);
	assert_null(idmap_get(&m, 5));
	assert_null(idmap_del(&m, 5));
	/* Keys that differ only in high bits, and key 0. */
	for (int i = 0; i < n; i++)
		assert_int_equal(idmap_put(&m, (uint64_t)i << 40, &vals[0]), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(idmap_put(&m, (uint64_t)i << 40, &vals[i % 3]),
				 0);
	assert_int_equal(idmap_count(&m), n);
	for (int i = 0; i < n; i += 2)
		assert_ptr_equal(idmap_del(&m, (uint64_t)i << 40),
				 &vals[i % 3]);
	assert_int_equal(idmap_count(&m), n / 2);
	for (int i = 0; i < n; i++) {
		void *v = idmap_get(&m, (uint64_t)i << 40);

		if (i % 2)
			assert_ptr_equal(v, &vals[i % 3]);
		else
			assert_null(v);
	}
	idmap_release(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store_create_empty, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_write_boundaries,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_store_small_chunk_small_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_random_io, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_holes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_partial_rmw, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_truncate, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_corrupt_data, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_corrupt_crc, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_store_pending_crc_recovered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_set_version, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_duplicate, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_delete, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_import, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_scan, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_fd_cache_bound,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_space, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store_create_no_space,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_concurrent, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_idmap_put_get_del, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
