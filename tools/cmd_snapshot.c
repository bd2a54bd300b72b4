/*
 * Snapshots and the snapshot flag, in the MooseFS tools' words:
 *
 *   sweepfs snapshot SRC DST              copy SRC to DST, atomically
 *   sweepfs seteattr -f snapshot [-r] PATH...
 *   sweepfs geteattr PATH...
 *   sweepfs deleattr -f snapshot [-r] PATH...
 *   sweepfs rmsnapshot [-f] PATH...       remove a flagged tree at once
 *
 * A snapshot shares file data with its source until either side writes
 * it; the master copies the metadata in the background and attaches the
 * copy when it is complete, so DST appears in one step. As with
 * mfsmakesnapshot, a DST that is an existing directory receives the copy
 * under SRC's name.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "progress.h"
#include "tool.h"
#include "util.h"

/* The same export of the same masters: lists of one group may be given
 * in different orders, or in part, but share a member. */
static bool same_master(const struct sw_target *a, const struct sw_target *b)
{
	return sw_target_same(a, b) && !strcmp(a->subdir, b->subdir);
}

/*
 * While a big snapshot is copied (the master answers the request once
 * the copy is attached), a thread on a second connection polls the
 * master's INFO for the copy's node count and draws a progress line; on
 * a terminal only (progress.h), so nothing runs otherwise.
 */
struct snap_watch {
	pthread_t thread;
	bool started;
	atomic_bool stop;
	struct sw_client *c; /* the second connection */
	struct progress line;
	uint64_t nodes; /* copied so far, as last seen */
};

static void *snap_watch_main(void *arg)
{
	struct snap_watch *w = arg;

	while (!atomic_load(&w->stop)) {
		Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;
		ProtobufCMessage *reply;

		if (sw_client_call(w->c, SW_MSG_INFO, &q.base, &reply) < 0)
			break;
		if (sw_reply_err(reply) == 0) {
			Sweepfs__InfoReply *s = (Sweepfs__InfoReply *)reply;

			if (s->snapshot_id && s->snapshot_nodes > w->nodes)
				w->nodes = s->snapshot_nodes;
			if (w->nodes)
				progress_update(&w->line, w->nodes);
		}
		protobuf_c_message_free_unpacked(reply, NULL);
		for (int i = 0; i < 5 && !atomic_load(&w->stop); i++)
			usleep(20 * 1000);
	}
	return NULL;
}

static void snap_watch_start(struct snap_watch *w, const struct sw_target *t,
			     const char *src)
{
	char label[64], copy[PATH_MAX];

	memset(w, 0, sizeof(*w));
	snprintf(copy, sizeof(copy), "%s", src);
	snprintf(label, sizeof(label), "snapshot %s", basename(copy));
	progress_start(&w->line, label, "nodes", 0);
	atomic_init(&w->stop, false);
	/* The same target as the main connection (password included),
	 * which just worked. */
	if (!w->line.on || tool_connect_target(t, &w->c) < 0)
		return;
	w->started = pthread_create(&w->thread, NULL, snap_watch_main, w) == 0;
	if (!w->started)
		sw_client_close(w->c);
}

/* Stop watching; @nodes: the copy's size from the reply (0: failed). */
static void snap_watch_stop(struct snap_watch *w, uint64_t nodes)
{
	if (!w->started)
		return;
	atomic_store(&w->stop, true);
	pthread_join(w->thread, NULL);
	sw_client_close(w->c);
	/* A line only if the copy took long enough to draw one. */
	if (w->line.drawn)
		progress_end(&w->line, nodes ? nodes : w->nodes);
}

static int snapshot_one(const char *src, const char *dst)
{
	struct snap_watch watch;
	Sweepfs__SnapshotReq q = SWEEPFS__SNAPSHOT_REQ__INIT;
	char srel[PATH_MAX], drel[PATH_MAX], name[256], base[PATH_MAX];
	struct sw_target st, dt;
	struct sw_client *c;
	ProtobufCMessage *reply;
	uint64_t src_ino, dst_ino, parent;
	uint32_t mode, dmode;
	struct tool_caller who;
	int rc;

	if ((rc = tool_locate(src, &st, srel, sizeof(srel))) < 0) {
		fprintf(stderr, "sweepfs snapshot: %s: %s\n", src,
			rc == -EXDEV ? "not on a sweepfs mount" :
				       strerror(-rc));
		return rc;
	}
	/* DST need not exist: locate its directory. */
	snprintf(base, sizeof(base), "%s", dst);
	if (tool_locate(dst, &dt, drel, sizeof(drel)) < 0) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s", dst);
		rc = tool_locate(dirname(dir), &dt, drel, sizeof(drel));
		if (rc < 0) {
			fprintf(stderr, "sweepfs snapshot: %s: %s\n", dst,
				rc == -EXDEV ? "not on a sweepfs mount" :
					       strerror(-rc));
			return rc;
		}
		snprintf(base, sizeof(base), "%s", dst);
		snprintf(drel + strlen(drel), sizeof(drel) - strlen(drel),
			 "%s%s", drel[0] ? "/" : "", basename(base));
	}
	if (!same_master(&st, &dt)) {
		fprintf(stderr,
			"sweepfs snapshot: %s and %s are on different "
			"filesystems\n",
			src, dst);
		return -EXDEV;
	}
	if ((rc = tool_connect_target(&st, &c)) < 0)
		return rc;
	rc = tool_resolve(c, srel, &src_ino, &mode);
	if (rc < 0) {
		fprintf(stderr, "sweepfs snapshot: %s: %s\n", src,
			strerror(-rc));
		goto out;
	}
	/* An existing directory DST receives the copy under SRC's name. */
	if (tool_resolve(c, drel, &dst_ino, &dmode) == 0 && S_ISDIR(dmode)) {
		snprintf(base, sizeof(base), "%s", srel);
		parent = dst_ino;
		snprintf(name, sizeof(name), "%s",
			 srel[0] ? basename(base) : "root");
	} else {
		rc = tool_walk(c, drel, &parent, name, sizeof(name));
		if (rc < 0) {
			fprintf(stderr, "sweepfs snapshot: %s: %s\n", dst,
				strerror(-rc));
			goto out;
		}
	}
	q.cred = tool_caller(&who);
	q.src = src_ino;
	q.parent = parent;
	q.name = tool_name(name);
	snap_watch_start(&watch, &st, src);
	/* A big tree's copy takes as long as it takes, in the master's
	 * background slices: no time limit on this answer (a broken
	 * connection still ends the wait). The copy would go on after a
	 * time-out anyway, and "failed" would be a lie. */
	c->timeout_ms = 0;
	/* EAGAIN: too many snapshots wait on the master; asked again. */
	rc = tool_call_paced(c, SW_MSG_SNAPSHOT, &q.base, &reply,
			     TOOL_PACED_SNAPSHOT);
	snap_watch_stop(&watch,
			rc == 0 ? ((Sweepfs__SnapshotReply *)reply)->nodes : 0);
	if (rc < 0) {
		fprintf(stderr, "sweepfs snapshot: %s -> %s: %s\n", src, dst,
			rc == -EAGAIN ?
				"the master's queue of snapshots stayed "
				"full for 30 s; try again later" :
				strerror(-rc));
		goto out;
	}
	protobuf_c_message_free_unpacked(reply, NULL);
out:
	sw_client_close(c);
	return rc;
}

int cmd_snapshot(int argc, char **argv)
{
	if (argc != 3 || argv[1][0] == '-') {
		bool help = argc == 2 && (!strcmp(argv[1], "--help") ||
					  !strcmp(argv[1], "-h"));

		fprintf(help ? stdout : stderr,
			"usage: sweepfs snapshot SRC DST\n");
		return help ? 0 : 2;
	}
	return snapshot_one(argv[1], argv[2]) < 0 ? 1 : 0;
}

/* ---- the snapshot flag ------------------------------------------------ */

enum eattr_op { EATTR_GET, EATTR_SET, EATTR_DEL };

static int eattr_one(const char *path, enum eattr_op op, bool recursive)
{
	ProtobufCMessage *reply;
	struct sw_client *c;
	uint64_t parent;
	char name[256];
	int rc = tool_open_path(path, &c, &parent, name, sizeof(name));

	if (rc < 0)
		return rc;
	rc = tool_eattr(c, parent, name, op == EATTR_SET, op == EATTR_DEL,
			recursive, &reply);
	if (rc == 0) {
		if (op == EATTR_GET)
			printf("%s: %s\n", path,
			       ((Sweepfs__EattrReply *)reply)->snapshot ?
				       "snapshot" :
				       "-");
		protobuf_c_message_free_unpacked(reply, NULL);
	} else {
		fprintf(stderr, "sweepfs: %s: %s\n", path, strerror(-rc));
	}
	sw_client_close(c);
	return rc;
}

static int eattr_main(int argc, char **argv, enum eattr_op op)
{
	static const struct option longopts[] = {
		{ "flag", required_argument, NULL, 'f' },
		{ "recursive", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool recursive = false, flag = op == EATTR_GET;
	int opt, status = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, op == EATTR_GET ? "h" : "f:rh",
				  longopts, NULL)) != -1) {
		switch (opt) {
		case 'f':
			if (strcmp(optarg, "snapshot")) {
				fprintf(stderr,
					"sweepfs %s: unknown flag "
					"'%s' (there is one: snapshot)\n",
					argv[0], optarg);
				return 2;
			}
			flag = true;
			break;
		case 'r':
			recursive = true;
			break;
		default:
			goto usage;
		}
	}
	if (!flag || optind == argc)
		goto usage;
	for (int i = optind; i < argc; i++)
		if (eattr_one(argv[i], op, recursive) < 0)
			status = 1;
	return status;
usage:
	fprintf(opt == 'h' ? stdout : stderr,
		op == EATTR_GET ?
			"usage: sweepfs geteattr PATH...\n" :
			"usage: sweepfs %s -f snapshot [-r] PATH...\n",
		argv[0]);
	return opt == 'h' ? 0 : 2;
}

int cmd_seteattr(int argc, char **argv)
{
	return eattr_main(argc, argv, EATTR_SET);
}

int cmd_geteattr(int argc, char **argv)
{
	return eattr_main(argc, argv, EATTR_GET);
}

int cmd_deleattr(int argc, char **argv)
{
	return eattr_main(argc, argv, EATTR_DEL);
}

/* ---- rmsnapshot ------------------------------------------------------- */

static int rmsnapshot_one(const char *path, bool force, bool verbose)
{
	Sweepfs__RmsnapshotReq q = SWEEPFS__RMSNAPSHOT_REQ__INIT;
	struct sw_client *c;
	struct tool_caller who;
	struct tool_removal rm;
	uint64_t parent;
	char name[256];
	int64_t t0;
	int rc;

	if (tool_is_dot_path(path)) {
		fprintf(stderr,
			"sweepfs rmsnapshot: refusing to remove '.' or '..': "
			"skipping '%s' (name the directory itself)\n",
			path);
		return -EINVAL;
	}
	rc = tool_open_path(path, &c, &parent, name, sizeof(name));
	if (rc < 0)
		return rc;
	q.cred = tool_caller(&who);
	q.parent = parent;
	q.name = tool_name(name);
	q.has_force = 1;
	q.force = force;
	t0 = sw_mono_ns();
	rc = tool_remove_paced(c, SW_MSG_RMSNAPSHOT, &q.base, &rm);
	if (rc == 0) {
		if (verbose)
			printf("removed %s: %" PRIu64 " nodes in %.3f ms (%u "
			       "request%s)\n",
			       path, rm.nodes,
			       (double)(sw_mono_ns() - t0) / 1e6, rm.requests,
			       rm.requests == 1 ? "" : "s");
	} else if (rc == -EPERM && !force) {
		fprintf(stderr,
			"sweepfs rmsnapshot: %s: not removed: not "
			"every object in it has the snapshot flag "
			"(or you may not remove it); -f removes the "
			"flagged ones\n",
			path);
	} else if (rm.nodes) {
		fprintf(stderr,
			"sweepfs rmsnapshot: %s: %" PRIu64 " nodes removed, "
			"then: %s\n",
			path, rm.nodes, tool_remove_why(rc));
	} else {
		fprintf(stderr, "sweepfs rmsnapshot: %s: %s\n", path,
			tool_remove_why(rc));
	}
	sw_client_close(c);
	return rc;
}

int cmd_rmsnapshot(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool force = false, verbose = false;
	int opt, status = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "fvh", longopts, NULL)) != -1) {
		if (opt == 'f') {
			force = true;
		} else if (opt == 'v') {
			verbose = true;
		} else {
			fprintf(opt == 'h' ? stdout : stderr,
				"usage: sweepfs rmsnapshot [-f] [-v] PATH...\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind == argc) {
		fprintf(stderr,
			"usage: sweepfs rmsnapshot [-f] [-v] PATH...\n");
		return 2;
	}
	for (int i = optind; i < argc; i++)
		if (rmsnapshot_one(argv[i], force, verbose) < 0)
			status = 1;
	return status;
}
