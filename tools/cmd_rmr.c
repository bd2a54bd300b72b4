/*
 * sweepfs rmr [-w] PATH...: remove trees on the master. Each PATH leaves
 * the namespace in one request, whatever its size; the master's purge
 * frees it afterwards. With --wait, follow the purge until the tree is
 * gone, with a progress line on a terminal (tool_wait_purge()). A user's
 * removal the master cannot check now (EAGAIN: its budget for such
 * checks is spent) is asked again for a while (tool_remove_paced()).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"
#include "util.h"

static int rmr_one(const char *path, bool wait, bool skip_trash, bool verbose)
{
	Sweepfs__RmrReq q = SWEEPFS__RMR_REQ__INIT;
	char rel[PATH_MAX], name[256];
	struct sw_client *c;
	struct sw_target t;
	struct tool_caller who;
	struct tool_removal rm;
	uint64_t parent;
	int64_t t0;
	int rc;

	if (tool_is_dot_path(path)) {
		fprintf(stderr,
			"sweepfs rmr: refusing to remove '.' or '..': "
			"skipping '%s' (name the directory itself)\n",
			path);
		return -EINVAL;
	}
	rc = tool_locate(path, &t, rel, sizeof(rel));
	if (rc < 0) {
		tool_path_error("rmr", path, rc);
		return rc;
	}
	rc = tool_connect_target(&t, &c);
	if (rc < 0)
		return rc;
	rc = tool_walk(c, rel, &parent, name, sizeof(name));
	if (rc == -EINVAL && tool_opts.fs_path) {
		fprintf(stderr,
			"sweepfs rmr: %s: is the filesystem's root, which "
			"stays\n",
			path);
		tool_record(TOOL_MOUNT_ROOT);
		goto out;
	}
	if (rc == -EINVAL) {
		fprintf(stderr,
			"sweepfs rmr: %s: is the root of a sweepfs mount, "
			"which stays; remove what is in it (sweepfs rmr "
			"%s/*)\n",
			path, path);
		tool_record(TOOL_MOUNT_ROOT);
		goto out;
	}
	if (rc < 0) {
		tool_path_error("rmr", path, rc);
		goto out;
	}
	q.cred = tool_caller(&who);
	q.parent = parent;
	q.name = tool_name(name);
	q.has_skip_trash = 1;
	q.skip_trash = skip_trash;
	t0 = sw_mono_ns();
	rc = tool_remove_paced(c, SW_MSG_RMR, &q.base, &rm);
	if (rc == 0) {
		if (verbose)
			printf("removed %s: %" PRIu64 " nodes in %.3f ms%s\n",
			       path, rm.nodes,
			       (double)(sw_mono_ns() - t0) / 1e6,
			       rm.purge_id ? ", purging" : "");
		if (wait && rm.purge_id)
			rc = tool_wait_purge(c, name, rm.purge_id, rm.nodes);
	}
	if (rc < 0)
		fprintf(stderr, "sweepfs rmr: cannot remove '%s': %s\n", path,
			tool_remove_why(tool_record_errno(rc)));
out:
	sw_client_close(c);
	return rc;
}

int cmd_rmr(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "skip-trash", no_argument, NULL, 's' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool wait = false, skip_trash = false, verbose = false;
	int opt, status = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "wsvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'w':
			wait = true;
			break;
		case 's':
			skip_trash = true;
			break;
		case 'v':
			verbose = true;
			break;
		default:
			fprintf(opt == 'h' ? stdout : stderr,
				"usage: sweepfs rmr [-w|--wait] [--skip-trash] "
				"[-v] PATH...\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "usage: sweepfs rmr [-w] PATH...\n");
		return 2;
	}
	for (int i = optind; i < argc; i++)
		if (rmr_one(argv[i], wait, skip_trash, verbose) < 0)
			status = 1;
	return status;
}
