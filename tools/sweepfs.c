/*
 * sweepfs: the administration command. `sweepfs [-m MASTER] COMMAND ...`;
 * each command lives in its own file as cmd_<name>() (the git builtin
 * layout).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

/*
 * @usage: the synopsis the dispatcher prints for -h, --help and `sweepfs
 * help CMD`; NULL for a command that prints its own (passed -h).
 * @json: the command takes --json (its output as JSON), which may then
 * come before the command too; for the others --json is theirs to read
 * (compare-delete --json FILE).
 */
struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
	const char *usage;
	bool json;
};

static const struct command commands[] = {
	{ .name = "status",
	  .fn = cmd_status,
	  .help = "the master's state, sessions, memory",
	  .usage = "sweepfs status [--json] [-s|--sessions] [PATH]",
	  .json = true },
	{ .name = "stats",
	  .fn = cmd_stats,
	  .help = "request counters, total and per session",
	  .usage = "sweepfs stats [--json] [-s|--sessions] [PATH]",
	  .json = true },
	{ .name = "top",
	  .fn = cmd_top,
	  .help = "a live view: requests, purge, slowest requests" },
	{ .name = "rmr",
	  .fn = cmd_rmr,
	  .help = "remove trees on the master, in one request each" },
	{ .name = "rm",
	  .fn = cmd_rm,
	  .help = "remove trees, fast, on any filesystem" },
	{ .name = "snapshot",
	  .fn = cmd_snapshot,
	  .help = "copy a tree at once, sharing its data" },
	{ .name = "rmsnapshot",
	  .fn = cmd_rmsnapshot,
	  .help = "remove a tree of snapshot objects" },
	{ .name = "seteattr",
	  .fn = cmd_seteattr,
	  .help = "set the snapshot flag (-f snapshot)" },
	{ .name = "geteattr",
	  .fn = cmd_geteattr,
	  .help = "show the snapshot flag" },
	{ .name = "deleattr",
	  .fn = cmd_deleattr,
	  .help = "clear the snapshot flag" },
	{ .name = "settrashtime",
	  .fn = cmd_settrashtime,
	  .help = "how long removed files stay",
	  .usage = "sweepfs settrashtime [-r] TIME PATH..." },
	{ .name = "gettrashtime",
	  .fn = cmd_gettrashtime,
	  .help = "show a directory's trash time",
	  .usage = "sweepfs gettrashtime PATH..." },
	{ .name = "trash",
	  .fn = cmd_trash,
	  .help = "list, restore or purge removed files",
	  .usage = "sweepfs trash ls [--json] [PATH]\n"
		   "       sweepfs trash restore ID [DEST]\n"
		   "       sweepfs trash purge [--wait] ID...",
	  .json = true },
	{ .name = "setgoal",
	  .fn = cmd_setgoal,
	  .help = "copies kept of files' data",
	  .usage = "sweepfs setgoal [-r] N PATH..." },
	{ .name = "getgoal",
	  .fn = cmd_getgoal,
	  .help = "show a file's or directory's goal",
	  .usage = "sweepfs getgoal PATH..." },
	{ .name = "fsck",
	  .fn = cmd_fsck,
	  .help = "check the master's namespace and chunks",
	  .json = true },
	{ .name = "info",
	  .fn = cmd_info,
	  .help = "a file's chunks, their copies and servers",
	  .usage = "sweepfs info [--json] PATH...",
	  .json = true },
	{ .name = "du",
	  .fn = cmd_du,
	  .help = "files, directories, bytes, chunks of trees",
	  .usage = "sweepfs du [--json] PATH...",
	  .json = true },
	{ .name = "group",
	  .fn = cmd_group,
	  .help = "a group of masters: transfer, add, remove",
	  .usage = "sweepfs [-m MASTERS] group transfer [ID]\n"
		   "       sweepfs [-m MASTERS] group add ID=HOST:PORT\n"
		   "       sweepfs [-m MASTERS] group remove ID" },
	{ .name = "compare-delete",
	  .fn = cmd_compare_delete,
	  .help = "rm -rf vs Go's RemoveAll vs rmr vs snapshots, measured" },
	{ 0 },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sweepfs [-m HOST[:PORT][,HOST[:PORT]...]] "
		   "[--fs-path] [--json] COMMAND [ARGS]\n"
		   "       sweepfs help [COMMAND]\n\n"
		   "A command given a path acts on the cluster of the sweepfs "
		   "mount the path is\non, always; given -m or "
		   "$SWEEPFS_MASTER too, it refuses unless that master\n"
		   "serves the same cluster. --fs-path takes paths as paths "
		   "inside the filesystem\nof -m (or $SWEEPFS_MASTER), from "
		   "its root. Other commands talk to -m, else\n"
		   "$SWEEPFS_MASTER, else the master of the mount the working "
		   "directory is on,\nelse 127.0.0.1. A list (a group of "
		   "masters) is tried in turn; followers name\nthe leader. "
		   "-m, --fs-path and --json (for the commands that have\n"
		   "it) may also come after the command; -h or --help after "
		   "it shows its usage.\n\n"
		   "commands:\n");
	for (const struct command *c = commands; c->name; c++)
		fprintf(f, "  %-16s %s\n", c->name, c->help);
}

static const struct command *command_find(const char *name)
{
	for (const struct command *c = commands; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

/* A command's help on stdout: its own (-h), or its synopsis from the
 * table. */
static int command_help(const struct command *c)
{
	char *args[] = { (char *)c->name, "-h", NULL };

	if (!c->usage)
		return c->fn(2, args);
	printf("usage: %s\n\n%s. See sweepfs-%s(1).\n", c->usage, c->help,
	       c->name);
	return 0;
}

/* Whether @argv (a command's arguments) asks for help before any "--". */
static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return true;
	return false;
}

/*
 * A global option at @argv[*i]: -m HOST, --master HOST, --master=HOST,
 * --fs-path, and --json when @json is not NULL. Applies it and moves *@i
 * past it; false if @argv[*i] is none (or -m lacks its value).
 */
static bool global_option(int argc, char **argv, int *i, bool *json)
{
	const char *a = argv[*i];

	if ((!strcmp(a, "-m") || !strcmp(a, "--master")) && *i + 1 < argc) {
		tool_opts.master = argv[*i + 1];
		*i += 2;
	} else if (!strncmp(a, "--master=", 9)) {
		tool_opts.master = a + 9;
		*i += 1;
	} else if (!strcmp(a, "--fs-path")) {
		tool_opts.fs_path = true;
		*i += 1;
	} else if (json && !strcmp(a, "--json")) {
		*json = true;
		*i += 1;
	} else {
		return false;
	}
	return true;
}

/*
 * Run @c with @argv (@argv[0] its name): global options among its
 * arguments (before any "--") are taken out and applied, and --json,
 * given anywhere, is passed on to the command.
 */
static int command_run(const struct command *c, int argc, char **argv,
		       bool json)
{
	char **args = calloc((size_t)argc + 2, sizeof(*args));
	int n = 0, i = 1, rc;
	bool rest = false;

	if (!args) {
		fprintf(stderr, "sweepfs: out of memory\n");
		return 1;
	}
	args[n++] = argv[0];
	while (i < argc) {
		if (!rest && !strcmp(argv[i], "--")) {
			if (json)
				args[n++] = "--json";
			json = false;
			rest = true;
		}
		if (rest ||
		    !global_option(argc, argv, &i, c->json ? &json : NULL))
			args[n++] = argv[i++];
	}
	if (json)
		args[n++] = "--json";
	rc = c->fn(n, args);
	free(args);
	return rc;
}

int main(int argc, char **argv)
{
	const struct command *c;
	bool json = false;
	int i = 1;

	while (i < argc && argv[i][0] == '-') {
		if (global_option(argc, argv, &i, &json)) {
			continue;
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
	if (!strcmp(argv[i], "help")) {
		if (i + 1 == argc) {
			usage(stdout);
			return 0;
		}
		c = command_find(argv[i + 1]);
		if (c)
			return command_help(c);
		fprintf(stderr, "sweepfs help: unknown command '%s'\n\n",
			argv[i + 1]);
		usage(stderr);
		return 2;
	}
	c = command_find(argv[i]);
	if (!c) {
		fprintf(stderr, "sweepfs: unknown command '%s'\n\n", argv[i]);
		usage(stderr);
		return 2;
	}
	if (json && !c->json) {
		fprintf(stderr, "sweepfs %s: no --json output\n", c->name);
		return 2;
	}
	if (wants_help(argc - i, argv + i))
		return command_help(c);
	return tool_exit_status(command_run(c, argc - i, argv + i, json));
}
