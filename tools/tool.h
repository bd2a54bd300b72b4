/*
 * Shared by the `sweepfs` subcommands: finding and connecting to the
 * master, and writing JSON.
 */
#ifndef SWEEPFS_TOOLS_TOOL_H
#define SWEEPFS_TOOLS_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "client.h"

/* Global options, parsed by the dispatcher before the subcommand. */
struct tool_opts {
	const char *master; /* -m HOST[:PORT], or NULL */
};

extern struct tool_opts tool_opts;

/*
 * The master to talk to about @path (may be NULL): -m, else
 * $SWEEPFS_MASTER, else the master of the sweepfs mount holding @path (or
 * the working directory), else 127.0.0.1. Returns 0 with *@t filled, or
 * -errno.
 */
int tool_target(const char *path, struct sw_target *t);

/*
 * Connect to the master for @path as a tool. Prints why on failure.
 * Returns 0 with *@out (close with sw_client_close) or -errno.
 */
int tool_connect(const char *path, struct sw_client **out);

/* Minimal JSON writer: objects and arrays nest; commas are automatic. */
struct json {
	FILE *f;
	int depth;
	bool first[32];
};

void json_init(struct json *j, FILE *f);
void json_obj_begin(struct json *j, const char *key);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);
void json_str(struct json *j, const char *key, const char *v);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
void json_dbl(struct json *j, const char *key, double v);
void json_bool(struct json *j, const char *key, bool v);

/* "1.5 GiB", "312 KiB": @v bytes into @buf of @len. */
const char *fmt_bytes(uint64_t v, char *buf, size_t len);

/* The subcommands. */
int cmd_status(int argc, char **argv);
int cmd_stats(int argc, char **argv);

#endif
