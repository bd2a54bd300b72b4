/*
 * Small helpers every sweepfs program needs: clocks, name checks, and
 * integer parsing with range checks. All inline or pure; nothing logs.
 */
#ifndef SWEEPFS_COMMON_UTIL_H
#define SWEEPFS_COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#define SW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SW_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SW_MAX(a, b) ((a) > (b) ? (a) : (b))

#define SW_NSEC_PER_SEC 1000000000LL

/* Wall-clock time in nanoseconds since the epoch. */
static inline int64_t sw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SW_NSEC_PER_SEC + ts.tv_nsec;
}

/* CPU time this thread has used, in nanoseconds. */
static inline int64_t sw_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Monotonic time in nanoseconds, for intervals and timeouts. */
static inline int64_t sw_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * SW_NSEC_PER_SEC + ts.tv_nsec;
}

/* Sleep @ms milliseconds, whatever signals come meanwhile. */
void sw_sleep_ms(int ms);

/* Initialise @c to time its waits by CLOCK_MONOTONIC, the clock of
 * sw_mono_ns(): pthread_cond_timedwait() with sw_ns_to_timespec() of it.
 * 0 or a positive errno, as pthread_cond_init(). */
int sw_cond_init_mono(pthread_cond_t *c);

static inline struct timespec sw_ns_to_timespec(int64_t ns)
{
	struct timespec ts;

	ts.tv_sec = ns / SW_NSEC_PER_SEC;
	ts.tv_nsec = ns % SW_NSEC_PER_SEC;
	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += SW_NSEC_PER_SEC;
	}
	return ts;
}

static inline int64_t sw_timespec_to_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * SW_NSEC_PER_SEC + ts->tv_nsec;
}

/*
 * A directory entry name sweepfs accepts: 1..255 bytes, no '/' and no NUL,
 * and neither "." nor "..".
 */
static inline bool sw_name_valid(const void *name, size_t len)
{
	const char *s = name;

	if (len == 0 || len > 255)
		return false;
	if (s[0] == '.' && (len == 1 || (len == 2 && s[1] == '.')))
		return false;
	return !memchr(s, '/', len) && !memchr(s, '\0', len);
}

/*
 * Parse a decimal unsigned integer with an optional binary suffix (k, M, G,
 * T; case-insensitive, optional "iB") into *out. Returns 0 or -EINVAL.
 */
int sw_parse_size(const char *s, uint64_t *out);

/* Parse a duration: a number with ms, s, m, h or d ("30s"; no suffix is
 * seconds) into milliseconds. Returns 0 or -EINVAL. */
int sw_parse_duration_ms(const char *s, uint64_t *out);

/* Parse a boolean: 1/0, yes/no, true/false, on/off. 0 or -EINVAL. */
int sw_parse_bool(const char *s, bool *out);

/*
 * The type and permission bits of a node made with @mode (type and
 * permissions, umask applied) in a directory of @dir_mode, by Linux's
 * rules, for the master and a mount that answers for it alike: a
 * subdirectory of a set-group-ID directory inherits the bit; a file keeps
 * its set-group-ID bit only if @may_keep_sgid (its maker is root or in
 * the file's group); a symlink is 0777.
 */
uint32_t sw_new_node_mode(uint32_t mode, uint32_t dir_mode, bool may_keep_sgid);

#endif
