/*
 * Small helpers (util.h) that are not inline: parsing sizes, durations
 * and booleans with range checks.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"

static int parse_u64(const char *s, uint64_t *out, const char **end)
{
	char *e;
	unsigned long long v;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &e, 10);
	if (errno)
		return -EINVAL;
	*out = v;
	*end = e;
	return 0;
}

int sw_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	const char *e;
	uint64_t v;
	int shift = 0;

	if (parse_u64(s, &v, &e) < 0)
		return -EINVAL;
	if (*e) {
		const char *u = strchr(units, tolower((unsigned char)*e));

		if (!u)
			return -EINVAL;
		shift = 10 * (int)(u - units + 1);
		e++;
		if (!strcasecmp(e, "ib") || !strcasecmp(e, "b"))
			e += strlen(e);
		if (*e)
			return -EINVAL;
		if (v > (UINT64_MAX >> shift))
			return -EINVAL;
	}
	*out = v << shift;
	return 0;
}

int sw_parse_duration_ms(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t ms;
	} units[] = { { "", 1000 },   { "ms", 1 },	{ "s", 1000 },
		      { "m", 60000 }, { "h", 3600000 }, { "d", 86400000 } };
	const char *e;
	uint64_t v;

	if (parse_u64(s, &v, &e) < 0)
		return -EINVAL;
	for (size_t i = 0; i < SW_ARRAY_SIZE(units); i++) {
		if (strcmp(e, units[i].suffix))
			continue;
		if (v > UINT64_MAX / units[i].ms)
			return -EINVAL;
		*out = v * units[i].ms;
		return 0;
	}
	return -EINVAL;
}

int sw_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };

	for (size_t i = 0; i < SW_ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

uint32_t sw_new_node_mode(uint32_t mode, uint32_t dir_mode, bool may_keep_sgid)
{
	uint32_t type = mode & S_IFMT, perms = mode & 07777;

	if (type == S_IFLNK)
		return S_IFLNK | 0777;
	if (type == S_IFDIR) {
		if (dir_mode & S_ISGID)
			perms |= S_ISGID;
	} else if ((perms & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) &&
		   !may_keep_sgid) {
		perms &= ~(uint32_t)S_ISGID;
	}
	return type | perms;
}

void sw_sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int sw_cond_init_mono(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	int rc = pthread_condattr_init(&ca);

	if (rc)
		return rc;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}
