/*
 * The shape two admin commands share: a value kept per file or directory
 * that "sweepfs setX [-r] VALUE PATH..." sets (-r: the whole tree below
 * each directory) and "sweepfs getX PATH..." prints. cmd_goal.c (goals)
 * and cmd_trash.c (trash times) differ only in the value and the request.
 */
#ifndef SWEEPFS_TOOLS_PATHATTR_H
#define SWEEPFS_TOOLS_PATHATTR_H

#include <stdbool.h>
#include <stdint.h>

#include "sweepfs.pb-c.h"

struct sw_client;

struct pathattr {
	const char *set_name; /* "setgoal": the command, for messages */
	const char *get_name; /* "getgoal" */
	const char *value;    /* "N": the value in the usage line */
	/* @arg as a value >= 0; or -1 after saying on stderr what is wrong. */
	int64_t (*parse)(const char *arg);
	/* Set @path's value to @value (-1: print it instead), @recursive;
	 * 0 or -errno, said on stderr. */
	int (*one)(const char *path, int64_t value, bool recursive);
};

/* A path's node, opened for a request about it (pathattr_open()). */
struct pathattr_node {
	struct sw_client *c; /* to the master that has it; owned */
	uint64_t ino;
	uint32_t mode;
	Sweepfs__Cred cred; /* the caller's, for the request */
	uint32_t groups[256];
};

/* Open @path's node into *@pn (tool_open_ino(), tool_cred()): 0, or
 * -errno after saying why on stderr. Close @pn->c with sw_client_close()
 * on success. */
int pathattr_open(const char *path, struct pathattr_node *pn);

/* "sweepfs setX [-r] VALUE PATH...": exit status 0, 1 (some path
 * failed) or 2 (usage). */
int pathattr_set(const struct pathattr *a, int argc, char **argv);

/* "sweepfs getX PATH...": exit status 0, 1 or 2, as above. */
int pathattr_get(const struct pathattr *a, int argc, char **argv);

#endif
