/*
 * Table-driven configuration: a program describes its options once in an
 * array of struct sw_opt, and both its config file ("key = value" lines,
 * '#' comments) and its command line (--set key=value, or dedicated flags)
 * fill them through sw_opt_set(). Unknown keys and bad values are errors,
 * never silently ignored.
 */
#ifndef SWEEPFS_COMMON_CFG_H
#define SWEEPFS_COMMON_CFG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum sw_opt_type {
	SW_OPT_STRING,	 /* value: char[max] */
	SW_OPT_UINT,	 /* value: uint64_t, within [min, max] */
	SW_OPT_SIZE,	 /* value: uint64_t bytes, "64M" accepted */
	SW_OPT_DURATION, /* value: uint64_t milliseconds, "30s" accepted */
	SW_OPT_BOOL,	 /* value: bool */
	SW_OPT_ENUM,	 /* value: int, index into choices */
};

struct sw_opt {
	const char *name;
	enum sw_opt_type type;
	void *value;
	/* UINT, SIZE, DURATION: inclusive bounds; STRING: buffer size. */
	uint64_t min, max;
	/* ENUM: the accepted words, NULL-terminated. */
	const char *const *choices;
	const char *help;
};

/* Where a config file went wrong. */
struct sw_cfg_error {
	unsigned line;	 /* 1-based; 0 when the file could not be read */
	char key[64];	 /* the offending key, possibly truncated */
	char value[128]; /* its value as written, possibly truncated */
};

/*
 * Set option @name of the NULL-name-terminated table @opts from @value.
 * Returns 0, -ENOENT for an unknown name, -EINVAL for a value that does not
 * parse, -ERANGE for one outside the bounds or too long.
 */
int sw_opt_set(const struct sw_opt *opts, const char *name, const char *value);

/*
 * Parse "key=value" (as given to --set) and set it. Same returns, plus
 * -EINVAL when there is no '='.
 */
int sw_opt_set_kv(const struct sw_opt *opts, const char *kv);

/*
 * Read the config file @path into @opts. Returns 0, the negative errno of
 * opening or reading it (with @where->line 0), or sw_opt_set()'s error for
 * the first bad line, which @where then names.
 */
int sw_cfg_load(const char *path, const struct sw_opt *opts,
		struct sw_cfg_error *where);

/*
 * What is wrong with @value for option @name, as sw_opt_set() answered
 * @rc, into @buf: "KEY = VALUE: must be 1 to 8", "KEY: unknown key", so
 * that an error names the key, the value and what is valid.
 */
void sw_opt_explain(const struct sw_opt *opts, const char *name,
		    const char *value, int rc, char *buf, size_t len);

/* Write one line per option, "name = current value  # help", to @f. */
void sw_opt_dump(FILE *f, const struct sw_opt *opts);

#endif
