/*
 * changelog.h: the writer under each sync policy on a real libuv loop, and
 * the reader: exact replay, torn tails cut, corruption elsewhere refused,
 * gaps refused, rotation and pruning.
 *
 * Each test writes into its own temporary directory. The expected payload
 * of every version is kept as the packed bytes of the mutation appended,
 * and replay must hand back exactly those.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "changelog.h"
#include "crc32c.h"
#include "log.h"
#include "meta.pb-c.h"
#include "unit.h"
#include "util.h"

#define MAXV 2000

/* Every stage's bit in f->hinted[]. */
#define ALL_STAGES ((1u << CHANGELOG_STAGES) - 1)

struct fixture {
	char dir[256];
	uv_loop_t loop;
	bool loop_inited;
	struct changelog *cl;
	struct rng rng;

	/* on_durable */
	uint64_t durable;
	unsigned durable_calls;
	int durable_fd; /* > 0: each version reported is written here too */
	uint64_t max_behind;	 /* changelog_opts's, for cl_open() */
	bool thread_only;	 /* changelog_opts's, for cl_open() */
	int64_t direct_slow_ns;	 /* changelog_opts's, for cl_open() */
	uint64_t append_at;	 /* on_durable of it appends append_at + 1 */
	uint64_t durable_first;	 /* first version of the file being written */
	long long durable_short; /* bytes it lacked at on_durable, at worst */

	/* Packed mutation per version, as appended. */
	uint8_t *payload[MAXV + 1];
	size_t plen[MAXV + 1];

	/* replay */
	uint64_t next;	  /* version the callback expects next */
	unsigned seen;	  /* records delivered */
	uint64_t fail_at; /* the callback fails at this version (0: never) */

	unsigned log_lines; /* captured log messages */

	/* replay with hints (changelog_replay_ahead()) */
	bool ahead;
	uint8_t hinted[MAXV + 1]; /* versions hinted in this replay */
	uint64_t hint_max;	  /* the newest version hinted */

	/* ship (a gated changelog) */
	uint8_t shipped[1 << 16];
	size_t nshipped;
	uint64_t shipped_last;
};

static void release_holds(void);

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	if (unit_mkdtemp(f->dir, sizeof(f->dir), "changelog") < 0 ||
	    uv_loop_init(&f->loop) < 0) {
		free(f);
		return -1;
	}
	f->loop_inited = true;
	release_holds();
	/* A case that hangs (a hold never released) fails before the
	 * suite's timeout (60 s for all of them). */
	alarm(20);
	rng_seed(&f->rng, 99);
	sw_log_set_sink(unit_quiet_sink, &f->log_lines);
	*state = f;
	return 0;
}

static void cl_close(struct fixture *f)
{
	if (!f->cl)
		return;
	changelog_close(f->cl);
	f->cl = NULL;
	/* The changelog frees itself in its close callback. */
	uv_run(&f->loop, UV_RUN_DEFAULT);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	/* A case that failed while it held the threads lets them go. */
	release_holds();
	cl_close(f);
	if (f->loop_inited) {
		uv_run(&f->loop, UV_RUN_DEFAULT);
		uv_loop_close(&f->loop);
	}
	alarm(0);
	sw_log_set_sink(NULL, NULL);
	for (size_t v = 0; v <= MAXV; v++)
		free(f->payload[v]);
	unit_rm_rf(f->dir);
	free(f);
	return 0;
}

static long long seg_size(struct fixture *f, uint64_t first);
static void append_one(struct fixture *f, uint64_t v);
static void append_big(struct fixture *f, uint64_t v, size_t len);
static long long expected_size(struct fixture *f, uint64_t from, uint64_t to);

static void on_durable(void *arg, uint64_t version)
{
	struct fixture *f = arg;

	/* Durability only moves forward. */
	assert_true(version > f->durable);
	f->durable = version;
	f->durable_calls++;
	if (f->append_at && version >= f->append_at) {
		uint64_t v = f->append_at + 1;

		f->append_at = 0;
		append_one(f, v);
	}
	if (f->durable_fd > 0)
		assert_int_equal(write(f->durable_fd, &version,
				       sizeof(version)),
				 sizeof(version));
	/* And only once the records are in the file (written by the
	 * changelog's thread, which may still be at it after the flush). */
	if (f->durable_first) {
		long long lack = expected_size(f, f->durable_first, version) -
				 seg_size(f, f->durable_first);

		if (lack > f->durable_short)
			f->durable_short = lack;
	}
}

static void on_ship(void *arg, const uint8_t *recs, size_t len, uint64_t last)
{
	struct fixture *f = arg;

	assert_true(f->nshipped + len <= sizeof(f->shipped));
	memcpy(f->shipped + f->nshipped, recs, len);
	f->nshipped += len;
	f->shipped_last = last;
}

static void cl_open(struct fixture *f, enum cl_sync sync, uint64_t last)
{
	struct changelog_opts o = {
		.dir = f->dir,
		.sync = sync,
		.interval_ms = 5,
		.prealloc = 64 << 10,
		.max_behind = f->max_behind,
		.thread_only = f->thread_only,
		.direct_slow_ns = f->direct_slow_ns,
		.on_durable = on_durable,
		.ship = on_ship,
		.arg = f,
	};

	assert_int_equal(changelog_open(&f->loop, &o, last, &f->cl), 0);
	assert_int_equal(changelog_last(f->cl), last);
	assert_int_equal(changelog_durable(f->cl), last);
	assert_int_equal(changelog_admit(f->cl), 0);
	f->durable = last;
}

/*
 * Append version @v: a mutation of a kind and size that vary with @v,
 * packed and remembered as the expected payload.
 */
static void append_one(struct fixture *f, uint64_t v)
{
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;
	Sweepfs__Meta__Rename r = SWEEPFS__META__RENAME__INIT;
	Sweepfs__Meta__Setattr sa = SWEEPFS__META__SETATTR__INIT;
	Sweepfs__Meta__Setxattr sx = SWEEPFS__META__SETXATTR__INIT;
	char name[64], target[600];
	size_t n;

	assert_true(v <= MAXV);
	snprintf(name, sizeof(name), "name-%" PRIu64, v);
	m.time = (int64_t)v * 1000 - 7;
	switch (v % 5) {
	case 0:
		m.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
		m.create = &c;
		c.parent = 1;
		c.name.data = (uint8_t *)name;
		c.name.len = strlen(name);
		c.ino = v + 100;
		c.edge = v + 1000;
		c.mode = S_IFLNK | 0777;
		/* A long target now and then: records of many sizes. */
		memset(target, 'a' + (int)(v % 26), sizeof(target));
		c.has_target = 1;
		c.target.data = (uint8_t *)target;
		c.target.len = (size_t)rng_below(&f->rng, sizeof(target));
		break;
	case 1:
		m.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
		m.unlink = &u;
		u.parent = v;
		u.name.data = (uint8_t *)name;
		u.name.len = strlen(name);
		u.has_keep = 1;
		u.keep = v % 2;
		break;
	case 2:
		m.op_case = SWEEPFS__META__MUTATION__OP_RENAME;
		m.rename = &r;
		r.parent = 1;
		r.name.data = (uint8_t *)name;
		r.name.len = strlen(name);
		r.newparent = 2;
		r.newname.data = (uint8_t *)"x";
		r.newname.len = 1;
		r.edge = v;
		break;
	case 3:
		m.op_case = SWEEPFS__META__MUTATION__OP_SETATTR;
		m.setattr = &sa;
		sa.ino = v;
		sa.valid = 8;
		sa.has_size = 1;
		sa.size = v << 20;
		break;
	default:
		m.op_case = SWEEPFS__META__MUTATION__OP_SETXATTR;
		m.setxattr = &sx;
		sx.ino = v;
		sx.name.data = (uint8_t *)"user.k";
		sx.name.len = 6;
		sx.has_value = 1;
		sx.value.data = (uint8_t *)name;
		sx.value.len = strlen(name);
		break;
	}
	n = sweepfs__meta__mutation__get_packed_size(&m);
	free(f->payload[v]);
	f->payload[v] = malloc(n ? n : 1);
	assert_non_null(f->payload[v]);
	assert_int_equal(sweepfs__meta__mutation__pack(&m, f->payload[v]), n);
	f->plen[v] = n;
	assert_int_equal(changelog_prepare(f->cl, &m), 0);
	changelog_append(f->cl, &m, v);
	assert_int_equal(changelog_last(f->cl), v);
}

/* Append versions @from..@to, flushing now and then. */
static void append_range(struct fixture *f, uint64_t from, uint64_t to)
{
	for (uint64_t v = from; v <= to; v++) {
		append_one(f, v);
		if (rng_below(&f->rng, 7) == 0)
			changelog_flush(f->cl);
	}
	changelog_flush(f->cl);
}

static void on_timeout(uv_timer_t *t)
{
	*(bool *)t->data = true;
}

/* Run the loop until on_durable has reported @v (at most 10 s). */
static void wait_durable(struct fixture *f, uint64_t v)
{
	uv_timer_t timer;
	bool expired = false;

	assert_int_equal(uv_timer_init(&f->loop, &timer), 0);
	timer.data = &expired;
	assert_int_equal(uv_timer_start(&timer, on_timeout, 10000, 0), 0);
	while (f->durable < v && !expired)
		uv_run(&f->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&timer, NULL);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	if (f->durable < v)
		fail_msg("durable %" PRIu64 " after 10 s, want %" PRIu64,
			 f->durable, v);
}

static int apply(void *arg, uint64_t version, const uint8_t *payload,
		 size_t len)
{
	struct fixture *f = arg;
	Sweepfs__Meta__Mutation *m;

	if (version != f->next)
		fail_msg("replayed version %" PRIu64 ", expected %" PRIu64,
			 version, f->next);
	if (f->fail_at && version == f->fail_at)
		return -EIO;
	assert_true(version <= MAXV);
	assert_non_null(f->payload[version]);
	assert_int_equal(len, f->plen[version]);
	assert_memory_equal(payload, f->payload[version], len);
	/* And it is the mutation that was appended. */
	m = sweepfs__meta__mutation__unpack(NULL, len, payload);
	assert_non_null(m);
	assert_int_equal(m->time, (int64_t)version * 1000 - 7);
	sweepfs__meta__mutation__free_unpacked(m, NULL);
	/* Hinted before, and not too far before. */
	if (f->ahead) {
		assert_int_equal(f->hinted[version], ALL_STAGES);
		assert_true(f->hint_max <= version + CHANGELOG_AHEAD);
	}
	f->next++;
	f->seen++;
	return 0;
}

/* A hint: a whole record (never a torn one), each once a stage per
 * replay, stage after stage. */
static void hint(void *arg, unsigned stage, const uint8_t *payload, size_t len)
{
	struct fixture *f = arg;
	Sweepfs__Meta__Mutation *m;
	uint64_t version;

	m = sweepfs__meta__mutation__unpack(NULL, len, payload);
	assert_non_null(m);
	version = (uint64_t)(m->time + 7) / 1000;
	sweepfs__meta__mutation__free_unpacked(m, NULL);
	assert_true(version >= 1 && version <= MAXV);
	assert_int_equal(len, f->plen[version]);
	assert_true(stage < CHANGELOG_STAGES);
	/* Once a stage, in stage order. */
	assert_int_equal(f->hinted[version], (1u << stage) - 1);
	f->hinted[version] |= (uint8_t)(1u << stage);
	if (stage == 0 && version > f->hint_max)
		f->hint_max = version;
}

/* Replay after @after (with hints if f->ahead); returns its result, with
 * *@last. */
static int replay(struct fixture *f, uint64_t after, uint64_t *last)
{
	f->next = after + 1;
	f->seen = 0;
	*last = 0xdead;
	memset(f->hinted, 0, sizeof(f->hinted));
	f->hint_max = 0;
	if (f->ahead)
		return changelog_replay_ahead(f->dir, after, apply, hint, f,
					      last);
	return changelog_replay(f->dir, after, apply, f, last);
}

static void seg_path(struct fixture *f, uint64_t first, char *buf, size_t len)
{
	snprintf(buf, len, "%s/changelog.%020" PRIu64, f->dir, first);
}

static long long seg_size(struct fixture *f, uint64_t first)
{
	char path[512];

	seg_path(f, first, path, sizeof(path));
	return unit_file_size(path);
}

/* Bytes a file with records @from..@to takes. */
static long long expected_size(struct fixture *f, uint64_t from, uint64_t to)
{
	long long n = 16;

	for (uint64_t v = from; v <= to; v++)
		n += 16 + (long long)f->plen[v];
	return n;
}

static void read_seg(struct fixture *f, uint64_t first, uint8_t **data,
		     size_t *len)
{
	char path[512];
	long long size;
	FILE *fp;

	seg_path(f, first, path, sizeof(path));
	size = unit_file_size(path);
	assert_true(size >= 0);
	*data = malloc((size_t)size + 1);
	assert_non_null(*data);
	fp = fopen(path, "rb");
	assert_non_null(fp);
	assert_int_equal(fread(*data, 1, (size_t)size, fp), (size_t)size);
	fclose(fp);
	*len = (size_t)size;
}

static void write_path(const char *path, const uint8_t *data, size_t len)
{
	FILE *fp = fopen(path, "wb");

	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

static void write_seg(struct fixture *f, uint64_t first, const uint8_t *data,
		      size_t len)
{
	char path[512];

	seg_path(f, first, path, sizeof(path));
	write_path(path, data, len);
}

/* Offset of version @v's record in a file whose first version is @first. */
static size_t rec_off(struct fixture *f, uint64_t first, uint64_t v)
{
	return (size_t)expected_size(f, first, v - 1);
}

/* ---- writing under each policy -------------------------------------- */

static void write_and_replay(struct fixture *f, enum cl_sync sync)
{
	enum { N = 300 };
	uint64_t last;

	cl_open(f, sync, 0);
	f->durable_first = 1;
	append_range(f, 1, N);
	assert_int_equal(changelog_last(f->cl), N);
	/* The changelog's thread writes them: durable when it says so, and
	 * never before they are in the file. */
	wait_durable(f, N);
	assert_int_equal(f->durable, N);
	assert_int_equal(changelog_durable(f->cl), N);
	assert_true(f->durable_calls >= 1);
	assert_int_equal(f->durable_short, 0);
	cl_close(f);
	/* Preallocation beyond the end is given back at close. */
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, N));

	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, N);
	assert_int_equal(f->seen, N);
	/* From the middle, and from the end. */
	assert_int_equal(replay(f, 123, &last), 0);
	assert_int_equal(last, N);
	assert_int_equal(f->seen, N - 123);
	assert_int_equal(replay(f, N, &last), 0);
	assert_int_equal(last, N);
	assert_int_equal(f->seen, 0);
	/* Replay cuts nothing from a clean file. */
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, N));
}

static void test_changelog_replay_sync_always(void **state)
{
	write_and_replay(*state, CL_SYNC_ALWAYS);
}

static void test_changelog_replay_sync_interval(void **state)
{
	write_and_replay(*state, CL_SYNC_INTERVAL);
}

static void test_changelog_replay_sync_never(void **state)
{
	write_and_replay(*state, CL_SYNC_NEVER);
}

/* Starting after a checkpoint: the file and the versions start there. */
static void test_changelog_open_after_last(void **state)
{
	struct fixture *f = *state;
	uint64_t last;

	cl_open(f, CL_SYNC_NEVER, 500);
	assert_true(seg_size(f, 501) >= 16);
	append_range(f, 501, 520);
	cl_close(f);
	assert_int_equal(seg_size(f, 501), expected_size(f, 501, 520));
	assert_int_equal(replay(f, 500, &last), 0);
	assert_int_equal(last, 520);
	assert_int_equal(f->seen, 20);
	assert_int_equal(replay(f, 510, &last), 0);
	assert_int_equal(f->seen, 10);
}

/*
 * A file already named for the records after @last (replay stopped before
 * it) is moved aside whole, never truncated: it may hold acknowledged
 * records someone wants back.
 */
static void test_changelog_open_keeps_existing_file(void **state)
{
	struct fixture *f = *state;
	char path[512], aside[600];
	long long size;
	DIR *d;
	struct dirent *de;
	int found = 0;

	cl_open(f, CL_SYNC_NEVER, 500);
	append_range(f, 501, 520);
	cl_close(f);
	size = seg_size(f, 501);
	/* Open again after 500, as if replay had stopped there. */
	cl_open(f, CL_SYNC_NEVER, 500);
	cl_close(f);
	snprintf(path, sizeof(path), "changelog.%020d", 501);
	d = opendir(f->dir);
	assert_non_null(d);
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, path, strlen(path)) ||
		    !strstr(de->d_name, ".unreplayed-"))
			continue;
		snprintf(aside, sizeof(aside), "%s/%s", f->dir, de->d_name);
		assert_int_equal(unit_file_size(aside), size);
		found++;
	}
	closedir(d);
	assert_int_equal(found, 1);
}

static void test_changelog_open_bad_dir(void **state)
{
	struct fixture *f = *state;
	struct changelog_opts o = { .on_durable = on_durable, .arg = f };
	char path[512];

	snprintf(path, sizeof(path), "%s/nosuch", f->dir);
	o.dir = path;
	assert_int_equal(changelog_open(&f->loop, &o, 0, &f->cl), -ENOENT);
	f->cl = NULL;
}

/*
 * changelog_replay_ahead(): every record is hinted once, before it is
 * applied and at most CHANGELOG_AHEAD records before, across files and
 * after a checkpoint's version; the same records are applied as without.
 */
static void test_changelog_replay_ahead_hints(void **state)
{
	struct fixture *f = *state;
	enum { N = 60 };
	uint64_t last;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, 30);
	assert_int_equal(changelog_rotate(f->cl), 0);
	append_range(f, 31, 33);
	assert_int_equal(changelog_rotate(f->cl), 0);
	append_range(f, 34, N);
	cl_close(f);
	f->ahead = true;
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, N);
	assert_int_equal(f->seen, N);
	for (uint64_t v = 1; v <= N; v++)
		assert_int_equal(f->hinted[v], ALL_STAGES);
	assert_int_equal(replay(f, 40, &last), 0);
	assert_int_equal(last, N);
	assert_int_equal(f->seen, N - 40);
	for (uint64_t v = 41; v <= N; v++)
		assert_int_equal(f->hinted[v], ALL_STAGES);
	assert_int_equal(replay(f, N, &last), 0);
	assert_int_equal(last, N);
	assert_int_equal(f->seen, 0);
}

/* changelog_hint() on a buffer: each whole record, then the end. */
static void test_changelog_hint_buffer(void **state)
{
	struct fixture *f = *state;
	uint8_t *data;
	size_t len, off = 16, next;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, 5);
	cl_close(f);
	read_seg(f, 1, &data, &len);
	for (uint64_t v = 1; v <= 5; v++) {
		next = changelog_hint(data, len, off, 0, hint, f);
		assert_int_equal(f->hinted[v], 1);
		assert_int_equal(next - off, 16 + f->plen[v]);
		off = next;
	}
	assert_int_equal(off, len);
	assert_int_equal(changelog_hint(data, len, off, 0, hint, f), len);
	/* A torn record: not hinted, and the end. */
	memset(f->hinted, 0, sizeof(f->hinted));
	off = rec_off(f, 1, 5);
	assert_int_equal(changelog_hint(data, len - 1, off, 0, hint, f),
			 len - 1);
	assert_false(f->hinted[5]);
	free(data);
}

/*
 * A follower's append of records as they came (changelog_append_record())
 * writes the same bytes as the appends that made them, and replays the
 * same; a reservation holds room for the record.
 */
static void test_changelog_append_record_as_is(void **state)
{
	struct fixture *f = *state;
	enum { N = 25 };
	uint8_t *data, *again;
	size_t len, len2, off = 16, rec, plen;
	const uint8_t *payload;
	char path[512];
	uint64_t v, last;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, N);
	cl_close(f);
	read_seg(f, 1, &data, &len);
	seg_path(f, 1, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	cl_open(f, CL_SYNC_NEVER, 0);
	while ((rec = changelog_record(data + off, len - off, &v, &payload,
				       &plen)) > 0) {
		assert_int_equal(changelog_reserve(f->cl, rec), 0);
		changelog_append_record(f->cl, data + off, rec, v);
		assert_int_equal(changelog_last(f->cl), v);
		off += rec;
	}
	assert_int_equal(off, len);
	assert_int_equal(v, N);
	cl_close(f);
	read_seg(f, 1, &again, &len2);
	assert_int_equal(len2, len);
	assert_memory_equal(again, data, len);
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, N);
	assert_int_equal(f->seen, N);
	free(again);
	free(data);
}

/*
 * The readers ahead of a buffer's apply (a follower's log): before record
 * v is applied, every stage has hinted it, and stage s has hinted nothing
 * past v + (CHANGELOG_AHEAD >> s); a torn record and what follows it are
 * hinted by none, however many steps are asked for.
 */
static void test_changelog_ahead_stages(void **state)
{
	struct fixture *f = *state;
	enum { N = 40 };
	struct changelog_ahead a;
	uint8_t *data;
	size_t len, torn;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, N);
	cl_close(f);
	read_seg(f, 1, &data, &len);
	/* Cut in the middle of record N - 2's payload. */
	torn = rec_off(f, 1, N - 2) + 20;
	memset(f->hinted, 0, sizeof(f->hinted));
	changelog_ahead_init(&a, data, torn, 16, hint, f);
	for (uint64_t v = 1; v <= N; v++) {
		changelog_ahead_step(&a);
		for (uint64_t w = 1; w <= N; w++) {
			uint8_t want = 0;

			for (unsigned s = 0; s < CHANGELOG_STAGES; s++)
				if (w < N - 2 &&
				    w <= v + (CHANGELOG_AHEAD >> s))
					want |= (uint8_t)(1u << s);
			assert_int_equal(f->hinted[w], want);
		}
	}
	for (unsigned s = 0; s < CHANGELOG_STAGES; s++)
		assert_int_equal(a.off[s], torn);
	free(data);
}

static void test_changelog_replay_empty(void **state)
{
	struct fixture *f = *state;
	char path[512];
	uint64_t last;

	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 0);
	assert_int_equal(replay(f, 77, &last), 0);
	assert_int_equal(last, 77);
	assert_int_equal(f->seen, 0);
	snprintf(path, sizeof(path), "%s/nosuch", f->dir);
	assert_int_equal(changelog_replay(path, 0, apply, f, &last), -ENOENT);
	/* Files with other names are not changelogs. */
	snprintf(path, sizeof(path), "%s/changelog.1", f->dir);
	write_path(path, (const uint8_t *)"x", 1);
	snprintf(path, sizeof(path), "%s/changelog.%020d.tmp", f->dir, 1);
	write_path(path, (const uint8_t *)"x", 1);
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(f->seen, 0);
	assert_int_equal(last, 0);
}

/* ---- damage --------------------------------------------------------- */

enum damage {
	CUT_MID_PAYLOAD,
	CUT_MID_HEADER,
	CUT_ONE_BYTE,
	FLIP_PAYLOAD,
	FLIP_CRC,
	FLIP_VERSION,
	FLIP_LENGTH,
	ZEROS_AFTER,
	GARBAGE_AFTER,
	NDAMAGE,
};

static const char *const damage_names[] = {
	"cut mid payload", "cut mid header", "cut one byte",
	"flip payload",	   "flip crc",	     "flip version",
	"flip length",	   "zeros after",    "garbage after",
};

/*
 * Copy @orig (@len bytes of a changelog file) to @buf (room for 100 more)
 * and damage its last record, which starts at @off, as @d says. Returns
 * the new length.
 */
static size_t damage(struct fixture *f, uint8_t *buf, const uint8_t *orig,
		     size_t len, size_t off, enum damage d)
{
	size_t rec = len - off;

	memcpy(buf, orig, len);
	switch (d) {
	case CUT_MID_PAYLOAD:
		return off + 16 + (rec - 16) / 2;
	case CUT_MID_HEADER:
		return off + 7;
	case CUT_ONE_BYTE:
		return len - 1;
	case FLIP_PAYLOAD:
		buf[off + 16 + rng_below(&f->rng, rec - 16)] ^= 0x20;
		return len;
	case FLIP_CRC:
		buf[off + 5] ^= 0x01;
		return len;
	case FLIP_VERSION:
		buf[off + 8] ^= 0x04;
		return len;
	case FLIP_LENGTH:
		buf[off + 1] ^= 0x01;
		return len;
	case ZEROS_AFTER:
		memset(buf + len, 0, 100);
		return len + 100;
	case GARBAGE_AFTER:
		rng_fill(&f->rng, buf + len, 100);
		return len + 100;
	default:
		fail();
	}
	return 0;
}

/* A torn or corrupt last record of the newest file: cut off, replay ends
 * one record early, and a second replay sees the same. */
static void test_changelog_replay_torn_tail(void **state)
{
	struct fixture *f = *state;
	enum { N = 25 };
	uint8_t *orig, *buf;
	size_t len, off;
	uint64_t last;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, N);
	cl_close(f);
	read_seg(f, 1, &orig, &len);
	assert_int_equal(len, expected_size(f, 1, N));
	off = rec_off(f, 1, N);
	buf = malloc(len + 100);
	assert_non_null(buf);
	/* Each damage twice: without hints, then with them (a hint must
	 * never see the bad record). */
	for (int k = 0; k < 2 * NDAMAGE; k++) {
		int d = k % NDAMAGE;
		size_t dlen = damage(f, buf, orig, len, off, (enum damage)d);
		/* Extra bytes after a whole last record cost nothing else. */
		bool after = d == ZEROS_AFTER || d == GARBAGE_AFTER;
		unsigned lines = f->log_lines;

		f->ahead = k >= NDAMAGE;
		write_seg(f, 1, buf, dlen);
		if (replay(f, 0, &last) != 0)
			fail_msg("%s: replay failed", damage_names[d]);
		assert_int_equal(last, after ? N : N - 1);
		assert_int_equal(f->seen, after ? N : N - 1);
		/* The file was cut at the bad record. */
		assert_int_equal(seg_size(f, 1),
				 after ? (long long)len : (long long)off);
		assert_true(f->log_lines > lines);
		/* Idempotent. */
		assert_int_equal(replay(f, 0, &last), 0);
		assert_int_equal(last, after ? N : N - 1);
		assert_int_equal(seg_size(f, 1),
				 after ? (long long)len : (long long)off);
	}
	free(buf);
	free(orig);
}

/* Records 1..10 in one file and 11..20 in the next, closed. */
static void two_segments(struct fixture *f)
{
	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, 10);
	assert_int_equal(changelog_rotate(f->cl), 0);
	append_range(f, 11, 20);
	cl_close(f);
}

/* A torn tail in the newest of several files; earlier files are intact. */
static void test_changelog_replay_torn_tail_newest_file(void **state)
{
	struct fixture *f = *state;
	uint64_t last;

	two_segments(f);
	{
		char path[512];

		seg_path(f, 11, path, sizeof(path));
		assert_int_equal(truncate(path, seg_size(f, 11) - 2), 0);
	}
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 19);
	assert_int_equal(f->seen, 19);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 10));
	assert_int_equal(seg_size(f, 11), expected_size(f, 11, 19));
}

/* The same damage in a file that is not the newest: -EUCLEAN, and the
 * file is left alone for a human to look at. */
static void test_changelog_replay_corrupt_older_file(void **state)
{
	struct fixture *f = *state;
	uint8_t *orig, *buf;
	size_t len, off;
	uint64_t last;

	two_segments(f);
	read_seg(f, 1, &orig, &len);
	buf = malloc(len + 100);
	assert_non_null(buf);
	/* Any damage to the file's last record. */
	off = rec_off(f, 1, 10);
	for (int d = 0; d < NDAMAGE; d++) {
		bool after = d == ZEROS_AFTER || d == GARBAGE_AFTER;
		size_t dlen = damage(f, buf, orig, len, off, (enum damage)d);

		write_seg(f, 1, buf, dlen);
		if (replay(f, 0, &last) != -EUCLEAN)
			fail_msg("%s: not refused", damage_names[d]);
		assert_int_equal(f->seen, after ? 10 : 9);
		assert_int_equal(seg_size(f, 1), (long long)dlen);
		assert_int_equal(seg_size(f, 11), expected_size(f, 11, 20));
	}
	/* A flipped byte in a record in the middle. */
	for (int i = 0; i < 20; i++) {
		off = rec_off(f, 1, 5);
		memcpy(buf, orig, len);
		buf[off + (size_t)rng_below(&f->rng, 16 + f->plen[5])] ^=
			(uint8_t)(1u << rng_below(&f->rng, 8));
		write_seg(f, 1, buf, len);
		assert_int_equal(replay(f, 0, &last), -EUCLEAN);
		assert_int_equal(f->seen, 4);
		assert_int_equal(seg_size(f, 1), (long long)len);
	}
	free(buf);
	free(orig);
}

/* Versions must follow on from one another, within and across files. */
static void test_changelog_replay_gap(void **state)
{
	struct fixture *f = *state;
	uint64_t last;
	long long size;

	/* A missing file: 1..5, then a file starting at 8. */
	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, 5);
	cl_close(f);
	cl_open(f, CL_SYNC_NEVER, 7);
	append_range(f, 8, 10);
	cl_close(f);
	assert_int_equal(replay(f, 0, &last), -EUCLEAN);
	assert_int_equal(f->seen, 5);
	/* Starting after the gap is fine. */
	assert_int_equal(replay(f, 7, &last), 0);
	assert_int_equal(last, 10);
	assert_int_equal(f->seen, 3);
	unit_rm_rf(f->dir);
	assert_int_equal(mkdir(f->dir, 0700), 0);

	/* A skipped version inside the newest file is not a torn tail. */
	cl_open(f, CL_SYNC_NEVER, 0);
	append_one(f, 1);
	append_one(f, 2);
	append_one(f, 4);
	append_one(f, 5);
	changelog_flush(f->cl);
	cl_close(f);
	size = seg_size(f, 1);
	assert_int_equal(replay(f, 0, &last), -EUCLEAN);
	assert_int_equal(f->seen, 2);
	assert_int_equal(seg_size(f, 1), size);
	/* Nor is a repeated one. */
	cl_open(f, CL_SYNC_NEVER, 10);
	append_one(f, 11);
	append_one(f, 12);
	append_one(f, 12);
	changelog_flush(f->cl);
	cl_close(f);
	assert_int_equal(replay(f, 10, &last), -EUCLEAN);
	assert_int_equal(f->seen, 2);
}

/* A file whose header names another first version than its file name. */
static void test_changelog_replay_bad_header(void **state)
{
	struct fixture *f = *state;
	uint8_t *data;
	size_t len;
	uint64_t last;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, 5);
	cl_close(f);
	read_seg(f, 1, &data, &len);
	data[8] = 2;
	write_seg(f, 1, data, len);
	assert_int_equal(replay(f, 0, &last), -EUCLEAN);
	assert_int_equal(seg_size(f, 1), (long long)len);
	data[8] = 1;
	data[0] = 'X';
	write_seg(f, 1, data, len);
	assert_int_equal(replay(f, 0, &last), -EUCLEAN);
	assert_int_equal(f->seen, 0);
	free(data);
}

/* A newest file cut inside its header (a crash right after creating it)
 * is removed; an older one is refused. */
static void test_changelog_replay_headerless_file(void **state)
{
	struct fixture *f = *state;
	uint64_t last;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, 5);
	cl_close(f);
	write_seg(f, 6, (const uint8_t *)"SWCL\1", 5);
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 5);
	assert_int_equal(seg_size(f, 6), -1);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 5));

	write_seg(f, 1, (const uint8_t *)"SW", 2);
	cl_open(f, CL_SYNC_NEVER, 5);
	cl_close(f);
	assert_int_equal(replay(f, 0, &last), -EUCLEAN);
}

static void test_changelog_replay_callback_error(void **state)
{
	struct fixture *f = *state;
	uint64_t last;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, 12);
	cl_close(f);
	f->fail_at = 7;
	assert_int_equal(replay(f, 0, &last), -EIO);
	assert_int_equal(f->seen, 6);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 12));
	f->fail_at = 0;
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 12);
}

/*
 * What a mutation points to may go between prepare and append (applying
 * an unlink frees the name it carries): the record holds what was there
 * at prepare. A prepare without its append is forgotten.
 */
static void test_changelog_prepare_encodes(void **state)
{
	struct fixture *f = *state;
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;
	char *name = strdup("going-away");
	uint64_t last;
	size_t n;

	assert_non_null(name);
	cl_open(f, CL_SYNC_NEVER, 0);
	append_one(f, 1);
	m.time = 2 * 1000 - 7;
	m.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
	m.unlink = &u;
	u.parent = 1;
	u.name.data = (uint8_t *)name;
	u.name.len = strlen(name);
	/* Prepared, never appended (say the apply failed). */
	assert_int_equal(changelog_prepare(f->cl, &m), 0);
	u.parent = 2;
	n = sweepfs__meta__mutation__get_packed_size(&m);
	f->payload[2] = malloc(n);
	assert_non_null(f->payload[2]);
	sweepfs__meta__mutation__pack(&m, f->payload[2]);
	f->plen[2] = n;
	assert_int_equal(changelog_prepare(f->cl, &m), 0);
	memset(name, 'x', strlen(name));
	free(name);
	u.name.data = NULL;
	u.name.len = 0;
	changelog_append(f->cl, &m, 2);
	append_one(f, 3);
	changelog_flush(f->cl);
	cl_close(f);
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 3);
	assert_int_equal(f->seen, 3);
}

/* ---- a group's leader: gated ------------------------------------------ */

/*
 * Gated, flushed records go to ship() whole and in order, and reach the
 * file (and on_durable) only as far as changelog_release() says; what was
 * never released is not in the file after a close.
 */
static void test_changelog_gate_release(void **state)
{
	struct fixture *f = *state;
	const uint8_t *payload;
	uint64_t last, ver, expect = 4;
	size_t off = 0, rec, len;

	cl_open(f, CL_SYNC_NEVER, 0);
	append_range(f, 1, 3);
	changelog_gate(f->cl);
	wait_durable(f, 3);
	assert_int_equal(changelog_durable(f->cl), 3);
	assert_int_equal(f->nshipped, 0);
	for (uint64_t v = 4; v <= 9; v++) {
		append_one(f, v);
		if (v % 2)
			changelog_flush(f->cl);
	}
	changelog_flush(f->cl);
	assert_int_equal(f->shipped_last, 9);
	assert_int_equal(changelog_durable(f->cl), 3);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 3));
	/* What was shipped is records 4..9, whole, each as appended. */
	while ((rec = changelog_record(f->shipped + off, f->nshipped - off,
				       &ver, &payload, &len)) > 0) {
		assert_int_equal(ver, expect);
		assert_int_equal(len, f->plen[ver]);
		assert_memory_equal(payload, f->payload[ver], len);
		off += rec;
		expect++;
	}
	assert_int_equal(off, f->nshipped);
	assert_int_equal(expect, 10);
	/* A torn record is not one. */
	assert_int_equal(changelog_record(f->shipped, 10, &ver, &payload, &len),
			 0);
	f->shipped[20] ^= 1;
	assert_int_equal(changelog_record(f->shipped, f->nshipped, &ver,
					  &payload, &len),
			 0);
	changelog_release(f->cl, 6);
	wait_durable(f, 6);
	assert_int_equal(changelog_durable(f->cl), 6);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 6));
	changelog_release(f->cl, 6);
	assert_int_equal(changelog_durable(f->cl), 6);
	cl_close(f);
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 6);
	assert_int_equal(f->seen, 6);
}

/* ---- rotation and pruning ------------------------------------------- */

static void test_changelog_rotate_new_file(void **state)
{
	struct fixture *f = *state;
	uint64_t last;

	cl_open(f, CL_SYNC_ALWAYS, 0);
	append_range(f, 1, 7);
	assert_int_equal(seg_size(f, 8), -1);
	assert_int_equal(changelog_rotate(f->cl), 0);
	/* Everything before the rotation is durable, the new file exists. */
	assert_int_equal(changelog_durable(f->cl), 7);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 7));
	assert_int_equal(seg_size(f, 8), 16);
	append_range(f, 8, 30);
	wait_durable(f, 30);
	assert_int_equal(changelog_rotate(f->cl), 0);
	assert_int_equal(seg_size(f, 31), 16);
	append_range(f, 31, 40);
	wait_durable(f, 40);
	cl_close(f);
	assert_int_equal(seg_size(f, 8), expected_size(f, 8, 30));
	assert_int_equal(seg_size(f, 31), expected_size(f, 31, 40));
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 40);
	assert_int_equal(f->seen, 40);
	/* Starting in the middle of the second file skips the first. */
	assert_int_equal(replay(f, 20, &last), 0);
	assert_int_equal(f->seen, 20);
	assert_int_equal(replay(f, 30, &last), 0);
	assert_int_equal(f->seen, 10);
}

/* The bytes a replay from a version reads: the files that may hold
 * versions after it, whole. */
static void test_changelog_bytes_after(void **state)
{
	struct fixture *f = *state;
	long long s1, s6, s11;
	uint64_t bytes = 1;

	assert_int_equal(changelog_bytes_after(f->dir, 0, &bytes), 0);
	assert_int_equal(bytes, 0);
	/* Files 1..5, 6..10 and the current 11..12. */
	cl_open(f, CL_SYNC_NEVER, 0);
	for (uint64_t first = 1; first <= 6; first += 5) {
		append_range(f, first, first + 4);
		assert_int_equal(changelog_rotate(f->cl), 0);
	}
	append_range(f, 11, 12);
	cl_close(f);
	s1 = seg_size(f, 1);
	s6 = seg_size(f, 6);
	s11 = seg_size(f, 11);
	assert_true(s1 > 0 && s6 > 0 && s11 > 0);
	assert_int_equal(changelog_bytes_after(f->dir, 0, &bytes), 0);
	assert_int_equal(bytes, s1 + s6 + s11);
	assert_int_equal(changelog_bytes_after(f->dir, 4, &bytes), 0);
	assert_int_equal(bytes, s1 + s6 + s11);
	assert_int_equal(changelog_bytes_after(f->dir, 5, &bytes), 0);
	assert_int_equal(bytes, s6 + s11);
	assert_int_equal(changelog_bytes_after(f->dir, 12, &bytes), 0);
	assert_int_equal(bytes, s11);
}

static void test_changelog_prune_whole_files(void **state)
{
	struct fixture *f = *state;
	uint64_t last;

	/* Files 1..5, 6..10, 11..15 and the current 16..17. */
	cl_open(f, CL_SYNC_NEVER, 0);
	for (uint64_t first = 1; first <= 11; first += 5) {
		append_range(f, first, first + 4);
		assert_int_equal(changelog_rotate(f->cl), 0);
	}
	append_range(f, 16, 17);
	cl_close(f);
	assert_int_equal(changelog_prune(f->dir, 0), 0);
	assert_int_equal(changelog_prune(f->dir, 4), 0);
	assert_true(seg_size(f, 1) > 0);
	assert_int_equal(changelog_prune(f->dir, 5), 1);
	assert_int_equal(seg_size(f, 1), -1);
	assert_true(seg_size(f, 6) > 0);
	assert_int_equal(changelog_prune(f->dir, 9), 0);
	assert_int_equal(changelog_prune(f->dir, 15), 2);
	assert_int_equal(seg_size(f, 6), -1);
	assert_int_equal(seg_size(f, 11), -1);
	/* The newest file is the one being written: always kept. */
	assert_int_equal(changelog_prune(f->dir, 1000), 0);
	assert_true(seg_size(f, 16) > 0);
	/* What is left replays from the newest checkpoint on. */
	assert_int_equal(replay(f, 15, &last), 0);
	assert_int_equal(last, 17);
	assert_int_equal(f->seen, 2);
	/* But not from before what was pruned. */
	assert_int_equal(replay(f, 3, &last), -EUCLEAN);
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/nosuch", f->dir);
		assert_int_equal(changelog_prune(path, 5), -ENOENT);
	}
}

/* ---- a failed fdatasync ------------------------------------------------ */

/*
 * The link wraps fdatasync(): while fdatasync_fails is set, the calls of
 * the changelog's thread (none of the test's own, nor a new file's at a
 * rotation) fail with EIO, each counted in fdatasync_failed; with
 * fdatasync_once only the first (Linux reports a writeback error to the
 * first fsync after it, and the next one says 0).
 */
static atomic_bool fdatasync_fails, fdatasync_once;
static atomic_uint fdatasync_failed;
static atomic_uint fdatasync_thread_calls; /* all but the test's own */
static pthread_t test_thread;
/* And the test thread's own calls (a rotation's): >= 0, how many pass
 * before one fails; -1: none fails. */
static atomic_int fdatasync_here_after = -1;

static atomic_bool fdatasync_held;	 /* the thread's wait while set */
static atomic_uint fdatasync_held_calls; /* calls that came to wait */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;

/* Wait while @held is set (not on the test's thread). */
static void held_here(atomic_bool *held)
{
	if (pthread_equal(pthread_self(), test_thread))
		return;
	pthread_mutex_lock(&hold_mu);
	while (atomic_load(held))
		pthread_cond_wait(&hold_cond, &hold_mu);
	pthread_mutex_unlock(&hold_mu);
}

static void hold(atomic_bool *held, bool on)
{
	pthread_mutex_lock(&hold_mu);
	atomic_store(held, on);
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_mu);
}

/* And fallocate(): the sync thread's wait while fallocate_held is set. */
static atomic_bool fallocate_held;

int __real_fallocate64(int fd, int mode, off_t off, off_t len);
int __wrap_fallocate64(int fd, int mode, off_t off, off_t len);
int __wrap_fallocate64(int fd, int mode, off_t off, off_t len)
{
	held_here(&fallocate_held);
	return __real_fallocate64(fd, mode, off, len);
}

int __real_fallocate(int fd, int mode, off_t off, off_t len);
int __wrap_fallocate(int fd, int mode, off_t off, off_t len);
int __wrap_fallocate(int fd, int mode, off_t off, off_t len)
{
	held_here(&fallocate_held);
	return __real_fallocate(fd, mode, off, len);
}

int __real_fdatasync(int fd);
int __wrap_fdatasync(int fd);
int __wrap_fdatasync(int fd)
{
	if (atomic_load(&fdatasync_held) &&
	    !pthread_equal(pthread_self(), test_thread))
		atomic_fetch_add(&fdatasync_held_calls, 1);
	held_here(&fdatasync_held);
	if (pthread_equal(pthread_self(), test_thread) &&
	    atomic_load(&fdatasync_here_after) >= 0 &&
	    atomic_fetch_sub(&fdatasync_here_after, 1) == 0) {
		errno = EIO;
		return -1;
	}
	if (!pthread_equal(pthread_self(), test_thread))
		atomic_fetch_add(&fdatasync_thread_calls, 1);
	if (atomic_load(&fdatasync_fails) &&
	    !pthread_equal(pthread_self(), test_thread)) {
		atomic_store(&fdatasync_fails, !atomic_load(&fdatasync_once));
		atomic_fetch_add(&fdatasync_failed, 1);
		errno = EIO;
		return -1;
	}
	return __real_fdatasync(fd);
}

/*
 * And write(): while write_fails is set, the writer thread's calls (not
 * the test's own) fail with EIO, each counted in write_failed; while
 * write_held is set, they wait until it is cleared.
 */
static atomic_bool write_fails, write_held;
static atomic_uint write_failed, writes_held;
/* The writer's write(2)s: how many, the largest, and how long each
 * takes at least (a slow disk; 0: as long as it takes). */
static atomic_uint writes;
/* Of them, how many have returned; with hold_after, the writer is held
 * (write_held) once that many have. */
static atomic_uint writes_done, hold_after;
static atomic_size_t write_max;
static atomic_uint write_delay_ms;
/* And the test thread's (the loop's) own. */
static atomic_uint write_delay_here_ms;

ssize_t __real_write(int fd, const void *p, size_t n);
ssize_t __wrap_write(int fd, const void *p, size_t n);
ssize_t __wrap_write(int fd, const void *p, size_t n)
{
	struct stat st;
	ssize_t rc;

	if (!pthread_equal(pthread_self(), test_thread)) {
		if (atomic_load(&write_held))
			atomic_fetch_add(&writes_held, 1);
		held_here(&write_held);
		atomic_fetch_add(&writes, 1);
		if (n > atomic_load(&write_max))
			atomic_store(&write_max, n);
		if (atomic_load(&write_delay_ms))
			usleep(atomic_load(&write_delay_ms) * 1000);
	} else if (atomic_load(&write_delay_here_ms)) {
		usleep(atomic_load(&write_delay_here_ms) * 1000);
	}
	/* Any thread's (the loop writes too while the disk is calm), to
	 * the file: not the test's pipes. */
	if (atomic_load(&write_fails) && fstat(fd, &st) == 0 &&
	    S_ISREG(st.st_mode)) {
		atomic_fetch_add(&write_failed, 1);
		errno = EIO;
		return -1;
	}
	rc = __real_write(fd, p, n);
	if (!pthread_equal(pthread_self(), test_thread) &&
	    atomic_fetch_add(&writes_done, 1) + 1 == atomic_load(&hold_after))
		hold(&write_held, true);
	return rc;
}

static void hold_writes(bool on)
{
	hold(&write_held, on);
}

static void release_holds(void)
{
	hold(&write_held, false);
	hold(&fdatasync_held, false);
	hold(&fallocate_held, false);
	atomic_store(&writes_held, 0);
	atomic_store(&writes, 0);
	atomic_store(&writes_done, 0);
	atomic_store(&hold_after, 0);
	atomic_store(&write_max, 0);
	atomic_store(&write_delay_ms, 0);
	atomic_store(&write_delay_here_ms, 0);
}

enum after_failure { RUN_LOOP, ROTATE, CLOSE };

/*
 * In a child: versions 1-3 durable, then 4-9 appended with fdatasync
 * failing (@once: only the first) or, @write, write(2) failing (and the
 * policy "never", where a write is all it takes; the writer thread's
 * with f->thread_only, else the loop's own), then the loop runs, or the
 * file is rotated or closed at once. The child's exit status, and the
 * newest version it reported durable past 3 (0: none).
 */
static int child_after_failure(struct fixture *f, bool write, bool once,
			       enum after_failure then, uint64_t *reported)
{
	uint64_t got;
	int pfd[2], status;
	pid_t pid;

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		alarm(20); /* a hang is a failure, not a stuck suite */
		if (uv_loop_fork(&f->loop) < 0)
			_exit(2);
		cl_open(f, write ? CL_SYNC_NEVER : CL_SYNC_ALWAYS, 0);
		append_range(f, 1, 3);
		wait_durable(f, 3);
		f->durable_fd = pfd[1];
		test_thread = pthread_self();
		atomic_store(&fdatasync_once, once);
		atomic_store(write ? &write_fails : &fdatasync_fails, true);
		append_range(f, 4, 9);
		/* The thread's write or fdatasync of 4-9 has failed before
		 * what comes next (the loop is not run meanwhile). */
		for (int i = 0; i < 5000 && !atomic_load(&fdatasync_failed) &&
				!atomic_load(&write_failed);
		     i++)
			usleep(1000);
		if (!atomic_load(&fdatasync_failed) &&
		    !atomic_load(&write_failed))
			_exit(3);
		if (then == ROTATE && changelog_rotate(f->cl) < 0)
			_exit(4);
		else if (then == CLOSE)
			cl_close(f);
		/* The loop hears of the failure and exits before it. */
		for (int i = 0; i < 2000 && f->durable < 9; i++) {
			uv_run(&f->loop, UV_RUN_NOWAIT);
			usleep(1000);
		}
		_exit(0);
	}
	close(pfd[1]);
	*reported = 0;
	while (read(pfd[0], &got, sizeof(got)) == sizeof(got))
		*reported = got;
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/*
 * With "always", a failed fdatasync acknowledges nothing it covered, and
 * the master exits (70) so that a restart replays what is on disk: a
 * second fdatasync could succeed after the kernel dropped the pages the
 * first could not write. Whether the loop hears of it first, or a
 * rotation's or the close's own fdatasync comes next (and, the error
 * reported once, says 0). (It once went unchecked: the records were
 * reported durable all the same; and a close after it spun on fdatasync
 * for ever.)
 */
static void test_changelog_fdatasync_failure_is_fatal(void **state)
{
	struct fixture *f = *state;
	const enum after_failure then[] = { RUN_LOOP, ROTATE, CLOSE };
	uint64_t reported;

	for (size_t i = 0; i < 2 * sizeof(then) / sizeof(then[0]); i++) {
		int status = child_after_failure(f, false, i % 2, then[i / 2],
						 &reported);

		if (!WIFEXITED(status) || WEXITSTATUS(status) != 70)
			fail_msg(
				"case %zu (once %d): status 0x%x, want exit 70",
				i / 2, (int)(i % 2), (unsigned)status);
		assert_int_equal(reported, 0);
	}
}

/*
 * A write(2) that fails is fatal (70), and acknowledges nothing: memory
 * is ahead of the disk. On the writer's thread, whether the loop hears
 * of it first, or a rotation or the close waits for the writer; and on
 * the loop, which writes while the disk is calm.
 */
static void test_changelog_write_failure_is_fatal(void **state)
{
	struct fixture *f = *state;
	const enum after_failure then[] = { RUN_LOOP, ROTATE, CLOSE };
	uint64_t reported;

	/* The last: the loop's own write fails in the append, before any
	 * of RUN_LOOP, ROTATE or CLOSE. */
	for (size_t i = 0; i < 4; i++) {
		int status;

		f->thread_only = i < 3;
		/* The loop's own write, even on a loaded machine. */
		f->direct_slow_ns = 10 * SW_NSEC_PER_SEC;
		status = child_after_failure(f, true, false, then[i % 3],
					     &reported);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 70)
			fail_msg("case %zu (thread %d): status 0x%x, want "
				 "exit 70",
				 i % 3, (int)f->thread_only, (unsigned)status);
		assert_int_equal(reported, 0);
	}
}

/*
 * While the disk is calm the loop writes itself: no hand-over (two
 * thread wake-ups a loop turn), and the records are durable per
 * "interval" as the flush returns. A write slower than a millisecond
 * sends the next ones to the writer, and so does changelog_defer()
 * (a checkpoint being written) until it is turned off.
 */
static void test_changelog_writes_here_while_calm(void **state)
{
	struct fixture *f = *state;

	test_thread = pthread_self();
	f->durable_first = 1;
	/* Slow: 200 ms (a loaded machine's 1 ms is not the disk's). */
	f->direct_slow_ns = 200 * 1000000LL;
	cl_open(f, CL_SYNC_INTERVAL, 0);
	append_range(f, 1, 10);
	assert_int_equal(f->durable, 10); /* no loop turn needed */
	assert_int_equal(atomic_load(&writes), 0);
	assert_int_equal(changelog_lag_ns(f->cl, sw_mono_ns()), 0);

	/* Deferred: handed to the writer, durable once it wrote them. */
	changelog_defer(f->cl, true);
	append_range(f, 11, 20);
	wait_durable(f, 20);
	assert_true(atomic_load(&writes) >= 1);
	changelog_defer(f->cl, false);
	atomic_store(&writes, 0);
	append_range(f, 21, 30);
	assert_int_equal(f->durable, 30);
	assert_int_equal(atomic_load(&writes), 0);

	/* A slow write here: the next records go to the writer. */
	atomic_store(&write_delay_here_ms, 250);
	append_one(f, 31);
	changelog_flush(f->cl);
	atomic_store(&write_delay_here_ms, 0);
	assert_int_equal(f->durable, 31);
	append_range(f, 32, 40);
	wait_durable(f, 40);
	assert_true(atomic_load(&writes) >= 1);
	assert_int_equal(f->durable_short, 0);
	cl_close(f);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 40));
}

/* Close, and replay what the file holds: versions 1 to @n, in order. */
static void close_and_replay(struct fixture *f, uint64_t n)
{
	uint64_t last;

	cl_close(f);
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, n);
	assert_int_equal(f->seen, n);
}

/*
 * The end of a deferral (or of the back-off after a slow write) while the
 * writer is at records 1-5 (@queued: with 6-10 waiting behind them): the
 * next flush is handed over too, behind them, never written on the loop
 * ahead of them (replay would find the versions out of order). Once the
 * writer is done, the loop writes again.
 */
static void no_write_ahead(struct fixture *f, bool queued)
{
	uint64_t next = queued ? 11 : 6;

	test_thread = pthread_self();
	f->durable_first = 1;
	cl_open(f, CL_SYNC_NEVER, 0);
	changelog_defer(f->cl, true);
	hold_writes(true);
	append_range(f, 1, 5);
	for (int i = 0; i < 5000 && !atomic_load(&writes_held); i++)
		usleep(1000);
	if (queued)
		append_range(f, 6, 10);
	changelog_defer(f->cl, false);
	append_range(f, next, next + 4);
	assert_true(f->durable < next);
	hold_writes(false);
	wait_durable(f, next + 4);
	atomic_store(&writes, 0);
	append_range(f, next + 5, next + 9);
	assert_int_equal(f->durable, next + 9);
	assert_int_equal(atomic_load(&writes), 0);
	assert_int_equal(f->durable_short, 0);
	close_and_replay(f, next + 9);
}

static void test_changelog_no_write_here_past_the_writer(void **state)
{
	no_write_ahead(*state, true);
}

/* Busy on its only batch, nothing queued: busy is enough. */
static void test_changelog_no_write_here_beside_the_writer(void **state)
{
	no_write_ahead(*state, false);
}

/*
 * What on_durable appends while the loop writes (it is called from
 * inside the flush) is neither lost nor written ahead of what was being
 * flushed: it goes with the next flush.
 */
static void test_changelog_append_from_on_durable(void **state)
{
	struct fixture *f = *state;

	test_thread = pthread_self();
	cl_open(f, CL_SYNC_NEVER, 0);
	f->append_at = 5;
	append_range(f, 1, 5); /* on_durable(5) appends 6 */
	assert_int_equal(changelog_last(f->cl), 6);
	append_range(f, 7, 9);
	wait_durable(f, 9);
	close_and_replay(f, 9);
}

/*
 * With "always", a reply waits for its fdatasync, not for the fallocate
 * the sync thread runs after it in the same pass (at the lowest I/O
 * priority, behind a checkpoint's writes).
 */
static void test_changelog_sync_not_behind_fallocate(void **state)
{
	struct fixture *f = *state;
	unsigned held = atomic_load(&fdatasync_held_calls);
	uint64_t v;
	int i;

	test_thread = pthread_self();
	cl_open(f, CL_SYNC_ALWAYS, 0);
	append_range(f, 1, 2);
	wait_durable(f, 2);
	/* One pass held in its fdatasync; the records after it want both
	 * an fdatasync and (5 MiB: past the preallocation) a fallocate.
	 * Each step waits for the one before: a pass that began before
	 * the records were written would sync fewer, and then wait in
	 * the held fallocate (it did under load, 2 runs in 60). */
	hold(&fdatasync_held, true);
	append_range(f, 3, 3);
	for (i = 0; i < 10000 && atomic_load(&fdatasync_held_calls) == held;
	     i++)
		usleep(1000);
	assert_int_equal(atomic_load(&fdatasync_held_calls), held + 1);
	for (v = 4; v < 4 + 80; v++)
		append_big(f, v, 64 << 10);
	changelog_flush(f->cl);
	/* Written (append_big() records no payload to check). */
	for (i = 0; i < 10000 && seg_size(f, 1) < 80LL * (64 << 10); i++)
		usleep(1000);
	assert_true(seg_size(f, 1) >= 80LL * (64 << 10));
	hold(&fallocate_held, true);
	hold(&fdatasync_held, false);
	wait_durable(f, v - 1); /* with the fallocate still held */
	hold(&fallocate_held, false);
	cl_close(f);
}

/*
 * Past max_behind the loop waits for the writer's next chunk (a MiB),
 * not for its whole batch: here 3 MiB may wait, 3.5 MiB do, and the
 * flush goes on once the first chunk is written. Counted, not timed: the
 * writer is held after its first chunk, so a flush that waited for more
 * would not return (the fixture's 20 s alarm fails it).
 */
static void test_changelog_behind_waits_a_chunk(void **state)
{
	struct fixture *f = *state;
	uint64_t v;

	test_thread = pthread_self();
	f->thread_only = true;
	f->max_behind = 3 << 20;
	cl_open(f, CL_SYNC_NEVER, 0);
	hold_writes(true);
	for (v = 1; v <= 56; v++)
		append_big(f, v, 64 << 10);
	changelog_flush(f->cl);
	for (int i = 0; i < 5000 && !atomic_load(&writes_held); i++)
		usleep(1000);
	assert_int_equal(atomic_load(&writes_done), 0);
	atomic_store(&hold_after, 1);
	hold_writes(false);
	append_big(f, v, 100);
	changelog_flush(f->cl); /* waits: 3.5 MiB are not yet written */
	assert_int_equal(atomic_load(&writes_done), 1);
	atomic_store(&hold_after, 0);
	hold_writes(false);
	wait_durable(f, v);
	cl_close(f);
}

/* Milliseconds until fdatasync_thread_calls passes @n (at most @ms, else
 * -1), the loop run meanwhile. */
static int64_t ms_until_thread_syncs_past(struct fixture *f, unsigned n,
					  int64_t ms)
{
	int64_t t0 = sw_mono_ns();

	while (atomic_load(&fdatasync_thread_calls) <= n) {
		if (sw_mono_ns() - t0 > ms * 1000000)
			return -1;
		uv_run(&f->loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	return (sw_mono_ns() - t0) / 1000000;
}

/*
 * With "interval", an fdatasync is due only when something was written
 * since the last one: an idle master's sync thread, and the loop it
 * tells of each, no longer wake every interval (5 ms here) for nothing.
 * The first write after a quiet spell still gets its fdatasync within
 * the interval: the thread, asleep for up to a second, is woken by it.
 * (Before, 20 quiet intervals made 20 fdatasyncs.)
 */
static void test_changelog_interval_syncs_only_what_was_written(void **state)
{
	struct fixture *f = *state;
	unsigned n;
	int64_t ms;

	test_thread = pthread_self();
	/* The count runs on from the tests before. */
	n = atomic_load(&fdatasync_thread_calls);
	cl_open(f, CL_SYNC_INTERVAL, 0);
	/* One flush: one write, one periodic fdatasync, then quiet. */
	for (uint64_t v = 1; v <= 3; v++)
		append_one(f, v);
	changelog_flush(f->cl);
	wait_durable(f, 3);
	assert_true(ms_until_thread_syncs_past(f, n, 2000) >= 0);
	usleep(20 * 1000);
	n = atomic_load(&fdatasync_thread_calls);
	assert_int_equal(ms_until_thread_syncs_past(f, n, 150), -1);
	/* One more record, at least 150 ms into the thread's quiet second:
	 * synced long before that second ends (a thread left asleep would
	 * take 800 ms more). */
	n = atomic_load(&fdatasync_thread_calls);
	append_one(f, 4);
	changelog_flush(f->cl);
	wait_durable(f, 4);
	ms = ms_until_thread_syncs_past(f, n, 2000);
	if (ms < 0 || ms > 600)
		fail_msg("the first write after a quiet spell was synced "
			 "after %" PRId64 " ms",
			 ms);
	usleep(20 * 1000);
	n = atomic_load(&fdatasync_thread_calls);
	assert_int_equal(ms_until_thread_syncs_past(f, n, 150), -1);
	cl_close(f);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 4));
}

/*
 * The loop hands records over and goes on while the disk takes its time
 * (on ext4 a write(2) of the changelog waited up to 117 ms while a big
 * checkpoint was written): nothing is reported durable before its write
 * returns, and changelog_lag_ns() says how long the disk has been stuck,
 * for the lease and the watchdog.
 */
static void test_changelog_loop_does_not_wait_for_the_disk(void **state)
{
	struct fixture *f = *state;
	int64_t t0, lag;

	test_thread = pthread_self();
	f->durable_first = 1;
	f->thread_only = true;
	cl_open(f, CL_SYNC_INTERVAL, 0);
	assert_int_equal(changelog_lag_ns(f->cl, sw_mono_ns()), 0);
	hold_writes(true);
	t0 = sw_mono_ns();
	append_range(f, 1, 10);
	/* Handed over, not written. */
	for (int i = 0; i < 50; i++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(f->durable, 0);
	lag = changelog_lag_ns(f->cl, sw_mono_ns());
	assert_true(lag >= 50 * 1000000LL);
	assert_true(lag <= sw_mono_ns() - t0);
	hold_writes(false);
	wait_durable(f, 10);
	assert_int_equal(f->durable_short, 0);
	assert_int_equal(changelog_lag_ns(f->cl, sw_mono_ns()), 0);
	cl_close(f);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 10));
}

/*
 * With "always", progress is an fdatasync done: a disk that takes writes
 * into the page cache while its fdatasync hangs releases no reply, and
 * changelog_lag_ns() grows all the same.
 */
static void test_changelog_lag_while_fdatasync_hangs(void **state)
{
	struct fixture *f = *state;

	test_thread = pthread_self();
	cl_open(f, CL_SYNC_ALWAYS, 0);
	hold(&fdatasync_held, true);
	append_range(f, 1, 3);
	usleep(60 * 1000);
	/* Written later: a write is no progress. */
	append_range(f, 4, 9);
	for (int i = 0; i < 5000 && seg_size(f, 1) < expected_size(f, 1, 9);
	     i++)
		usleep(1000);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 9));
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->durable, 0);
	assert_true(changelog_lag_ns(f->cl, sw_mono_ns()) >= 60 * 1000000LL);
	hold(&fdatasync_held, false);
	wait_durable(f, 9);
	assert_int_equal(changelog_lag_ns(f->cl, sw_mono_ns()), 0);
	cl_close(f);
}

struct releaser {
	atomic_bool released;
};

static void *release_writes(void *arg)
{
	struct releaser *r = arg;

	usleep(100 * 1000);
	atomic_store(&r->released, true);
	hold_writes(false);
	return NULL;
}

/*
 * What waits for the disk in memory is bounded (max_behind): past it the
 * loop waits, as it did when it wrote itself, so that a disk far too
 * slow for the load fills no memory and stalls the loop (which the lease
 * and the watchdog then see) rather than the machine.
 */
static void test_changelog_behind_is_bounded(void **state)
{
	struct fixture *f = *state;
	struct releaser r = { .released = false };
	pthread_t t;
	uint64_t last;

	test_thread = pthread_self();
	f->max_behind = 1; /* one flush's records wait, no more */
	cl_open(f, CL_SYNC_NEVER, 0);
	changelog_defer(f->cl, true); /* to the writer, all of them */
	hold_writes(true);
	append_one(f, 1);
	append_one(f, 2);
	changelog_flush(f->cl); /* the writer took them, and waits */
	for (int i = 0; i < 5000 && !atomic_load(&writes_held); i++)
		usleep(1000);
	assert_int_equal(atomic_load(&writes_held), 1);
	assert_int_equal(pthread_create(&t, NULL, release_writes, &r), 0);
	append_one(f, 3);
	changelog_flush(f->cl); /* the loop waits until the disk moves */
	assert_true(atomic_load(&r.released));
	append_range(f, 4, 6);
	assert_int_equal(pthread_join(t, NULL), 0);
	wait_durable(f, 6);
	cl_close(f);
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 6);
	assert_int_equal(f->seen, 6);
}

/* Hand over one record of @len bytes of payload as version @v. */
static void append_big(struct fixture *f, uint64_t v, size_t len)
{
	uint8_t *rec = calloc(1, 16 + len);

	assert_non_null(rec);
	memset(rec + 16, (int)v, len);
	/* u32 length | u32 crc32c(version, payload) | u64 version */
	for (int i = 0; i < 4; i++)
		rec[i] = (uint8_t)(len >> (8 * i));
	for (int i = 0; i < 8; i++)
		rec[8 + i] = (uint8_t)(v >> (8 * i));
	{
		uint32_t crc = sw_crc32c(0, rec + 8, 8 + len);

		for (int i = 0; i < 4; i++)
			rec[4 + i] = (uint8_t)(crc >> (8 * i));
	}
	assert_int_equal(changelog_reserve(f->cl, 16 + len), 0);
	changelog_append_record(f->cl, rec, 16 + len, v);
	free(rec);
}

/*
 * A disk slower than the load: what waits is written a MiB at a time,
 * whole records, each reported as written, so changelog_lag_ns() sees
 * a disk that progresses, not one stuck for as long as the whole
 * backlog takes (which would cost a healthy leader its lease).
 */
static void test_changelog_slow_disk_progresses(void **state)
{
	struct fixture *f = *state;
	int64_t t0, lag_max = 0;
	uint64_t v;

	test_thread = pthread_self();
	f->thread_only = true;
	cl_open(f, CL_SYNC_NEVER, 0);
	hold_writes(true);
	/* 56 records of 64 KiB, one batch: 3.5 MiB. */
	for (v = 1; v <= 56; v++)
		append_big(f, v, 64 << 10);
	changelog_flush(f->cl);
	for (int i = 0; i < 5000 && !atomic_load(&writes_held); i++)
		usleep(1000);
	atomic_store(&write_delay_ms, 100);
	t0 = sw_mono_ns();
	hold_writes(false);
	while (f->durable < 56 && sw_mono_ns() - t0 < 10 * SW_NSEC_PER_SEC) {
		int64_t lag = changelog_lag_ns(f->cl, sw_mono_ns());

		if (lag > lag_max)
			lag_max = lag;
		uv_run(&f->loop, UV_RUN_NOWAIT);
		usleep(2000);
	}
	assert_int_equal(f->durable, 56);
	/* Four writes of at most 1 MiB, 100 ms each. */
	assert_true(atomic_load(&writes) >= 4);
	assert_true(atomic_load(&write_max) <= 1u << 20);
	assert_true(sw_mono_ns() - t0 >= 400 * 1000000LL);
	/* Each write was seen: the lag never reached the whole 400 ms. */
	if (lag_max >= 250 * 1000000LL)
		fail_msg("lag %" PRId64 " ms with a disk that progresses",
			 lag_max / 1000000);
	assert_true(f->durable_calls >= 2);
	cl_close(f);
}

/*
 * A rotation whose fdatasync of the old file fails exits (70) before it
 * makes the new file: a new file would claim versions the old one lost,
 * and a restart may then refuse to start.
 */
static void test_changelog_rotate_sync_failure(void **state)
{
	struct fixture *f = *state;
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(20);
		if (uv_loop_fork(&f->loop) < 0)
			_exit(2);
		test_thread = pthread_self();
		cl_open(f, CL_SYNC_ALWAYS, 0);
		append_range(f, 1, 5);
		wait_durable(f, 5);
		atomic_store(&fdatasync_here_after, 0);
		changelog_rotate(f->cl);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 70);
	assert_int_equal(seg_size(f, 6), -1);
}

/*
 * A rotation that cannot make its new file (its header's fdatasync
 * fails here) says so and leaves the old file current, its records and
 * the ones after them durable and replayed from it.
 */
static void test_changelog_rotate_no_new_file(void **state)
{
	struct fixture *f = *state;
	uint64_t last;

	test_thread = pthread_self();
	cl_open(f, CL_SYNC_ALWAYS, 0);
	append_range(f, 1, 5);
	wait_durable(f, 5);
	/* The old file's fdatasync passes; the new file's fails. */
	atomic_store(&fdatasync_here_after, 1);
	assert_int_equal(changelog_rotate(f->cl), -EIO);
	atomic_store(&fdatasync_here_after, -1);
	assert_int_equal(seg_size(f, 6), -1);
	/* Its preallocation kept (64 KiB here): the disk may be full. */
	{
		char path[512];
		struct stat st;

		seg_path(f, 1, path, sizeof(path));
		assert_int_equal(stat(path, &st), 0);
		assert_true(st.st_blocks * 512 >= 64 << 10);
	}
	append_range(f, 6, 12);
	wait_durable(f, 12);
	cl_close(f);
	assert_int_equal(seg_size(f, 1), expected_size(f, 1, 12));
	assert_int_equal(replay(f, 0, &last), 0);
	assert_int_equal(last, 12);
	assert_int_equal(f->seen, 12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_sync_always, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_sync_interval, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_sync_never, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_open_after_last,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_open_keeps_existing_file, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_fdatasync_failure_is_fatal, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_rotate_sync_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_rotate_no_new_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_open_bad_dir,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_ahead_hints, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_append_record_as_is, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_ahead_stages,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_hint_buffer,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_replay_empty,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_replay_torn_tail,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_torn_tail_newest_file, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_corrupt_older_file, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_changelog_replay_gap,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_bad_header, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_headerless_file, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_replay_callback_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_prepare_encodes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_gate_release,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_write_failure_is_fatal, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_writes_here_while_calm, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_no_write_here_past_the_writer, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_no_write_here_beside_the_writer, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_append_from_on_durable, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_sync_not_behind_fallocate, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_behind_waits_a_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_interval_syncs_only_what_was_written,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_loop_does_not_wait_for_the_disk, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_behind_is_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_lag_while_fdatasync_hangs, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_slow_disk_progresses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_rotate_new_file,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_changelog_prune_whole_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changelog_bytes_after,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
