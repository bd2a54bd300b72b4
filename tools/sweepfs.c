/*
 * sweepfs: the administration command. `sweepfs [-m MASTER] COMMAND ...`;
 * each command lives in its own file as cmd_<name>() (the git builtin
 * layout).
 */
#include <stdio.h>
#include <string.h>

#include "tool.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
	{ "status", cmd_status, "the master's state, sessions, memory" },
	{ "stats", cmd_stats, "request counters, total and per session" },
	{ "top", cmd_top, "a live view: requests, purge, slowest requests" },
	{ "rmr", cmd_rmr, "remove trees on the master, in one request each" },
	{ "rm", cmd_rm, "remove trees, fast, on any filesystem" },
	{ "snapshot", cmd_snapshot, "copy a tree at once, sharing its data" },
	{ "rmsnapshot", cmd_rmsnapshot, "remove a tree of snapshot objects" },
	{ "seteattr", cmd_seteattr, "set the snapshot flag (-f snapshot)" },
	{ "geteattr", cmd_geteattr, "show the snapshot flag" },
	{ "deleattr", cmd_deleattr, "clear the snapshot flag" },
	{ "settrashtime", cmd_settrashtime, "how long removed files stay" },
	{ "gettrashtime", cmd_gettrashtime, "show a directory's trash time" },
	{ "trash", cmd_trash, "list, restore or purge removed files" },
	{ "setgoal", cmd_setgoal, "copies kept of files' data" },
	{ "getgoal", cmd_getgoal, "show a file's or directory's goal" },
	{ "fsck", cmd_fsck, "check the master's namespace and chunks" },
	{ "group", cmd_group, "a group of masters: transfer, add, remove" },
	{ "compare-delete", cmd_compare_delete,
	  "rm -rf vs Go's RemoveAll vs rmr vs snapshots, measured" },
	{ 0 },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sweepfs [-m HOST[:PORT][,HOST[:PORT]...]] "
		   "[--fs-path] COMMAND [ARGS]\n\n"
		   "A command given a path acts on the cluster of the sweepfs "
		   "mount the path is\non, always; given -m or "
		   "$SWEEPFS_MASTER too, it refuses unless that master\n"
		   "serves the same cluster. --fs-path takes paths as paths "
		   "inside the filesystem\nof -m (or $SWEEPFS_MASTER), from "
		   "its root. Other commands talk to -m, else\n"
		   "$SWEEPFS_MASTER, else the master of the mount the working "
		   "directory is on,\nelse 127.0.0.1. A list (a group of "
		   "masters) is tried in turn; followers name\nthe leader.\n\n"
		   "commands:\n");
	for (const struct command *c = commands; c->name; c++)
		fprintf(f, "  %-16s %s\n", c->name, c->help);
}

int main(int argc, char **argv)
{
	int i = 1;

	while (i < argc && argv[i][0] == '-') {
		if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--master")) &&
		    i + 1 < argc) {
			tool_opts.master = argv[i + 1];
			i += 2;
		} else if (!strcmp(argv[i], "--fs-path")) {
			tool_opts.fs_path = true;
			i++;
		} else if (!strcmp(argv[i], "-h") ||
			   !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "-V") ||
			   !strcmp(argv[i], "--version")) {
			printf("sweepfs %s\n", SWEEPFS_VERSION);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (i == argc) {
		usage(stderr);
		return 2;
	}
	for (const struct command *c = commands; c->name; c++)
		if (!strcmp(c->name, argv[i]))
			return tool_exit_status(c->fn(argc - i, argv + i));
	fprintf(stderr, "sweepfs: unknown command '%s'\n\n", argv[i]);
	usage(stderr);
	return 2;
}
