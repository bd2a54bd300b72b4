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

/*
 * Exit statuses of `sweepfs`, listed in sweepfs(1). A subcommand returns
 * TOOL_OK, TOOL_FAILED or TOOL_USAGE; the dispatcher (tool_exit_status())
 * turns TOOL_FAILED into the more precise status that the first failure
 * of the run recorded with tool_record(), so that a script can tell a
 * master that is down from a path that is not on sweepfs.
 */
enum tool_exit {
	TOOL_OK = 0,
	TOOL_FAILED = 1,	/* it ran and failed, or found problems */
	TOOL_USAGE = 2,		/* bad options or arguments */
	TOOL_BAD_MASTER = 3,	/* no such master address, or not a master */
	TOOL_MASTER_DOWN = 4,	/* the master cannot be reached, or went away */
	TOOL_NOT_SWEEPFS = 5,	/* a path that is not on a sweepfs mount */
	TOOL_DENIED = 6,	/* permission denied (mode bits, exports) */
	TOOL_MOUNT_ROOT = 7,	/* rmr of a mount's root */
	TOOL_OTHER_CLUSTER = 8, /* a path and -m name different clusters */
};

/* Remember @st as the run's exit status, unless a failure before it
 * already did. */
void tool_record(enum tool_exit st);

/* tool_record() what a failed call's -errno @rc says: the master gone
 * (ECONNREFUSED, ECONNRESET, EPIPE, ETIMEDOUT, ENOTCONN) or a permission
 * refused (EACCES, EPERM); other errors record nothing. Returns @rc. */
int tool_record_errno(int rc);

/* The status `sweepfs` exits with after a subcommand returned @rc. */
int tool_exit_status(int rc);

/* Global options, parsed by the dispatcher before the subcommand. */
struct tool_opts {
	const char *master; /* -m HOST[:PORT], or NULL */
	/* --fs-path: PATH arguments are paths inside the filesystem (from
	 * the export's root) on the master -m or $SWEEPFS_MASTER names, not
	 * paths on a mount. */
	bool fs_path;
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
 * Where @path lives on sweepfs: the master's address and export of the
 * sweepfs mount holding @path and, in @rel, the path below the mount
 * point. A path always acts on the cluster that serves it: given -m or
 * $SWEEPFS_MASTER too, that master is used only if it serves the same
 * cluster (the mount's sweepfs.cluster_id against the master's hello);
 * otherwise one line says so and -EREMCHG is returned, recorded as
 * TOOL_OTHER_CLUSTER (or as what kept the check from being made). With
 * --fs-path, @path is taken as is, below the export's root, on the master
 * -m or $SWEEPFS_MASTER names (-EDESTADDRREQ, said, without one). Returns
 * 0, -EXDEV if @path is not on a sweepfs mount (recorded as
 * TOOL_NOT_SWEEPFS), or -errno from resolving it (-ENOENT: it does not
 * exist).
 */
int tool_locate(const char *path, struct sw_target *t, char *rel,
		size_t rellen);

/* The calling process's credentials, groups into @groups (room @cap). */
void tool_cred(Sweepfs__Cred *c, uint32_t *groups, size_t cap);

/* The calling process as a request names it: its credentials and the
 * room for its groups, in one place for the request that points at it.
 * cred.groups points into the struct: fill it where it stays, never copy
 * it. */
struct tool_caller {
	Sweepfs__Cred cred;
	uint32_t groups[256];
};

/* Fill @tc with the calling process's credentials (tool_cred()); returns
 * &@tc->cred for a request's cred. */
Sweepfs__Cred *tool_caller(struct tool_caller *tc);

/*
 * Why the master refused an admin request (FSCK, GROUP) with EPERM, or
 * answered INFO `limited`, for this process: admin is root (uid 0 once
 * the export mapped it) on a client whose export has the admin option
 * and covers the whole filesystem. Says which of these this process
 * lacks, as far as it can tell (its euid; not the export's options).
 * Points to a static buffer.
 */
const char *tool_admin_refusal(void);

/* @name (NUL-terminated, not copied) as a request's name field. */
ProtobufCBinaryData tool_name(const char *name);

/*
 * Look up the directories of @rel (relative to the export root) on the
 * master with the caller's credentials: its last component's directory
 * inode into *@parent and the component into @name. -EINVAL for an empty
 * path (the root itself has no parent here). Failures are recorded
 * (tool_record_errno()).
 */
int tool_walk(struct sw_client *c, const char *rel, uint64_t *parent,
	      char *name, size_t namelen);

/*
 * Connect to the master for @path as a tool. Prints why on failure.
 * Returns 0 with *@out (close with sw_client_close) or -errno.
 */
int tool_connect(const char *path, struct sw_client **out);

/*
 * For a path on a sweepfs mount: connect to its master (*@c, close with
 * sw_client_close) and look up its directory (*@parent) and last
 * component (@name). Prints why on failure. Returns 0 or -errno.
 */
int tool_open_path(const char *path, struct sw_client **c, uint64_t *parent,
		   char *name, size_t namelen);

/*
 * One line on stderr for a failure on @path: "sweepfs[ CMD]: PATH: why"
 * (-EXDEV: not on sweepfs; -EINVAL from tool_walk(): a mount's root,
 * recorded as TOOL_MOUNT_ROOT; -EREMCHG and -EDESTADDRREQ from
 * tool_locate(), said already: nothing; else strerror, recorded by
 * errno).
 */
void tool_path_error(const char *cmd, const char *path, int rc);

/*
 * Whether @path names "." or ".." (alone or as its last component,
 * trailing slashes aside), which rmr and rmsnapshot refuse, as rm does:
 * the tree meant is not the one the name resolves to.
 */
bool tool_is_dot_path(const char *path);

/* LOOKUP @name in @parent with the caller's credentials; *@out gets the
 * attributes (scalars only: no pointers into the reply). */
int tool_lookup(struct sw_client *c, uint64_t parent, const char *name,
		Sweepfs__Attr *out);

/*
 * EATTR on @name in @parent with the caller's credentials: the snapshot
 * flag, set first with @set or cleared with @clear (the master refuses
 * both, -EINVAL), on every name below too when @recursive. 0 with
 * *@reply, an EattrReply the caller frees
 * (protobuf_c_message_free_unpacked()), or -errno with *@reply NULL.
 */
int tool_eattr(struct sw_client *c, uint64_t parent, const char *name, bool set,
	       bool clear, bool recursive, ProtobufCMessage **reply);

/* The inode and mode of @rel (relative to the export root; "" is the
 * root) on @c. */
int tool_resolve(struct sw_client *c, const char *rel, uint64_t *ino,
		 uint32_t *mode);

/* tool_open_path() for the object itself: its inode and mode. */
int tool_open_ino(const char *path, struct sw_client **c, uint64_t *ino,
		  uint32_t *mode);

/* sw_client_call() plus the reply's own error: 0 with *@reply, or -errno
 * with *@reply NULL. */
int tool_call(struct sw_client *c, uint16_t type, const ProtobufCMessage *req,
	      ProtobufCMessage **reply);

/*
 * tool_call() of a removal whose permission check a user's budget on the
 * master pays for (RMR, RMSNAPSHOT; master/rmr.h), or of a SNAPSHOT the
 * master's full queue refuses (master/snapjob.h): while the master
 * answers EAGAIN (its buckets hold too little now), asked again after
 * TOOL_RETRY_FIRST_MS, twice as long each time up to TOOL_RETRY_MAX_MS
 * (a session's bucket refills in 4 s), for TOOL_RETRY_FOR_MS in all;
 * then -EAGAIN. Prints one line to stderr when it starts asking again,
 * "sweepfs @label; retrying ...", nothing else: @label names the command
 * and what the master is busy with.
 */
#define TOOL_RETRY_FIRST_MS 200
#define TOOL_RETRY_MAX_MS 4000
#define TOOL_RETRY_FOR_MS 30000
int tool_call_paced(struct sw_client *c, uint16_t type,
		    const ProtobufCMessage *req, ProtobufCMessage **reply,
		    const char *label);

/*
 * An RMR or RMSNAPSHOT (both answered by an RmrReply), paced as
 * tool_call_paced() says. An answer that removed part of the tree and
 * says EAGAIN (rmsnapshot -f stops after 2,048 removals, and goes on
 * where it stopped when asked again: master/snapshot.c) is asked again
 * at once, the pacing started over. Into *@rm, failed or not: the nodes
 * every answer removed, the highest purge id one gave (0: none), and how
 * many answers came.
 */
struct tool_removal {
	uint64_t nodes;
	uint64_t purge_id;
	unsigned requests;
};
int tool_remove_paced(struct sw_client *c, uint16_t type,
		      const ProtobufCMessage *req, struct tool_removal *rm);

/* tool_call_paced()'s labels of the commands that use it. */
#define TOOL_PACED_SNAPSHOT                                              \
	"snapshot: the master's queue of snapshots is full (others are " \
	"waiting)"
#define TOOL_PACED_RMR "rmr: the master is busy checking other removals"
#define TOOL_PACED_RMSNAPSHOT \
	"rmsnapshot: the master is busy checking other removals"

/* Why a removal the master refused failed, for a person: EAGAIN and
 * E2BIG of a user's check (tool_call_paced()) explained, others as
 * strerror(). */
const char *tool_remove_why(int rc);

/* Connect to the master @t names, as a tool. On failure prints one line
 * saying why and records it: TOOL_BAD_MASTER (unknown host, or what
 * answers is not a sweepfs master), TOOL_MASTER_DOWN (refused, timed out,
 * unreachable) or TOOL_DENIED (the exports refuse this client). */
int tool_connect_target(const struct sw_target *t, struct sw_client **out);

/*
 * Wait until the purge with id @id is done (0: until the master's purge
 * queue is empty), polling the master 10 times a second; on a terminal,
 * a progress line (progress.h) of the @nodes it frees (0: as many as are
 * queued when it starts), labelled with @what. Returns 0 or -errno.
 */
int tool_wait_purge(struct sw_client *c, const char *what, uint64_t id,
		    uint64_t nodes);

/*
 * JSON output through json-c: objects and arrays nest (a @key for a
 * member of an object, NULL in an array); the document is printed, one
 * line, when its outermost object or array ends. Strings are escaped so
 * that strict parsers read any bytes (json_str() of a file name that is
 * not UTF-8 included: such bytes as \udcXX). Nothing to free after the
 * outermost end.
 */
struct json_object;

struct json {
	FILE *f;
	int depth;
	struct json_object *stack[32]; /* the containers open */
};

void json_init(struct json *j, FILE *f);
void json_obj_begin(struct json *j, const char *key);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);
/* Drop everything still open, printing nothing: for output that failed
 * half way, which must not look like a whole document. */
void json_discard(struct json *j);
void json_str(struct json *j, const char *key, const char *v);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
/* The shortest decimal that reads back as @v; null for NaN, infinity. */
void json_dbl(struct json *j, const char *key, double v);
/* A time of @ns nanoseconds, in seconds, as an exact decimal
 * ("1795880000.123456789"), never rounded. */
void json_time_ns(struct json *j, const char *key, int64_t ns);
void json_flag(struct json *j, const char *key, bool v);

/* "1.5 GiB", "312 KiB": @v bytes into @buf of @len. */
const char *fmt_bytes(uint64_t v, char *buf, size_t len);

/* The subcommands. */
int cmd_status(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_rmr(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_seteattr(int argc, char **argv);
int cmd_geteattr(int argc, char **argv);
int cmd_deleattr(int argc, char **argv);
int cmd_rmsnapshot(int argc, char **argv);
int cmd_settrashtime(int argc, char **argv);
int cmd_gettrashtime(int argc, char **argv);
int cmd_trash(int argc, char **argv);
int cmd_fsck(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_du(int argc, char **argv);
int cmd_group(int argc, char **argv);
int cmd_setgoal(int argc, char **argv);
int cmd_getgoal(int argc, char **argv);
int cmd_compare_delete(int argc, char **argv);

#endif
