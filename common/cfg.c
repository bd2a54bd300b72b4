/*
 * Table-driven configuration (cfg.h): config files, --set key=value and
 * the command line's own flags, checked against one option table.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"
#include "util.h"

static const struct sw_opt *opt_find(const struct sw_opt *opts,
				     const char *name)
{
	for (; opts->name; opts++)
		if (!strcmp(opts->name, name))
			return opts;
	return NULL;
}

int sw_opt_set(const struct sw_opt *opts, const char *name, const char *value)
{
	const struct sw_opt *o = opt_find(opts, name);
	uint64_t v;
	int rc;

	if (!o)
		return -ENOENT;
	switch (o->type) {
	case SW_OPT_STRING:
		if (strlen(value) >= o->max)
			return -ERANGE;
		strcpy(o->value, value);
		return 0;
	case SW_OPT_BOOL:
		return sw_parse_bool(value, o->value);
	case SW_OPT_ENUM:
		for (int i = 0; o->choices[i]; i++) {
			if (!strcmp(o->choices[i], value)) {
				*(int *)o->value = i;
				return 0;
			}
		}
		return -EINVAL;
	case SW_OPT_UINT:
	case SW_OPT_SIZE:
		rc = sw_parse_size(value, &v);
		if (rc == 0 && o->type == SW_OPT_UINT &&
		    !isdigit((unsigned char)value[strlen(value) - 1]))
			rc = -EINVAL;
		break;
	case SW_OPT_DURATION:
		rc = sw_parse_duration_ms(value, &v);
		break;
	default:
		return -EINVAL;
	}
	if (rc < 0)
		return rc;
	if (v < o->min || v > o->max)
		return -ERANGE;
	*(uint64_t *)o->value = v;
	return 0;
}

int sw_opt_set_kv(const struct sw_opt *opts, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char name[64];
	size_t n;

	if (!eq)
		return -EINVAL;
	n = (size_t)(eq - kv);
	if (n >= sizeof(name))
		return -ENOENT;
	memcpy(name, kv, n);
	name[n] = '\0';
	return sw_opt_set(opts, name, eq + 1);
}

/* "1 to 8", "at least 1000 ms", "" (no bounds), in @o's unit. */
static void explain_bounds(const struct sw_opt *o, char *buf, size_t len)
{
	const char *unit = o->type == SW_OPT_SIZE     ? " bytes" :
			   o->type == SW_OPT_DURATION ? " ms" :
							"";

	if (o->max == UINT64_MAX && o->min == 0)
		snprintf(buf, len, "%s", "");
	else if (o->max == UINT64_MAX)
		snprintf(buf, len, "at least %" PRIu64 "%s", o->min, unit);
	else
		snprintf(buf, len, "%" PRIu64 " to %" PRIu64 "%s", o->min,
			 o->max, unit);
}

void sw_opt_explain(const struct sw_opt *opts, const char *name,
		    const char *value, int rc, char *buf, size_t len)
{
	const struct sw_opt *o = opt_find(opts, name);
	char bounds[96], words[256] = "";
	const char *kind;
	size_t n = 0;

	if (!o || rc == -ENOENT) {
		snprintf(buf, len,
			 "%s: unknown key (--dump-config lists them all)",
			 name);
		return;
	}
	switch (o->type) {
	case SW_OPT_STRING:
		snprintf(buf, len,
			 "%s = %s: must be shorter than %" PRIu64 " bytes",
			 name, value, o->max);
		return;
	case SW_OPT_BOOL:
		snprintf(buf, len, "%s = %s: must be yes or no", name, value);
		return;
	case SW_OPT_ENUM:
		for (int i = 0; o->choices[i] && n < sizeof(words); i++)
			n += (size_t)snprintf(words + n, sizeof(words) - n,
					      "%s%s", i ? ", " : "",
					      o->choices[i]);
		snprintf(buf, len, "%s = %s: must be one of %s", name, value,
			 words);
		return;
	default:
		break;
	}
	explain_bounds(o, bounds, sizeof(bounds));
	kind = o->type == SW_OPT_SIZE	  ? "a size (such as 256M)" :
	       o->type == SW_OPT_DURATION ? "a duration (such as 30s)" :
					    "a whole number";
	if (rc == -ERANGE && bounds[0])
		snprintf(buf, len, "%s = %s: must be %s", name, value, bounds);
	else
		snprintf(buf, len, "%s = %s: must be %s%s%s", name, value, kind,
			 bounds[0] ? ", " : "", bounds);
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int sw_cfg_load(const char *path, const struct sw_opt *opts,
		struct sw_cfg_error *where)
{
	char line[4096];
	unsigned lineno = 0;
	int rc = 0;
	FILE *f;

	memset(where, 0, sizeof(*where));
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *hash, *eq, *key, *val;

		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		key = trim(line);
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			rc = -EINVAL;
		} else {
			*eq = '\0';
			val = trim(eq + 1);
			key = trim(key);
			rc = sw_opt_set(opts, key, val);
		}
		if (rc < 0) {
			where->line = lineno;
			snprintf(where->key, sizeof(where->key), "%s", key);
			snprintf(where->value, sizeof(where->value), "%s",
				 eq ? val : "");
			break;
		}
	}
	if (rc == 0 && ferror(f)) {
		rc = -EIO;
		where->line = 0;
	}
	fclose(f);
	return rc;
}

void sw_opt_dump(FILE *f, const struct sw_opt *opts)
{
	for (; opts->name; opts++) {
		fprintf(f, "%s = ", opts->name);
		switch (opts->type) {
		case SW_OPT_STRING:
			fprintf(f, "%s", (const char *)opts->value);
			break;
		case SW_OPT_BOOL:
			fprintf(f, "%s", *(bool *)opts->value ? "yes" : "no");
			break;
		case SW_OPT_ENUM:
			fprintf(f, "%s", opts->choices[*(int *)opts->value]);
			break;
		case SW_OPT_DURATION:
			fprintf(f, "%" PRIu64 "ms", *(uint64_t *)opts->value);
			break;
		default:
			fprintf(f, "%" PRIu64, *(uint64_t *)opts->value);
		}
		if (opts->help)
			fprintf(f, "\t# %s", opts->help);
		fputc('\n', f);
	}
}
