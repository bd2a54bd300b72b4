/*
 * Goals: how many copies of a file's chunks the chunkservers keep.
 *
 *   sweepfs setgoal [-r] N PATH...   N: 1..8, or 0 for the master's default
 *   sweepfs getgoal PATH...
 *
 * A new file or directory takes its directory's goal. Raising a goal has
 * the missing copies made in the background; lowering it has the extra
 * ones deleted (paced like every chunk deletion). A chunk that a
 * snapshot shares keeps the highest goal of the files naming it.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "tool.h"
#include "util.h"

static int goal_one(const char *path, int64_t goal, bool recursive)
{
	Sweepfs__GoalReq q = SWEEPFS__GOAL_REQ__INIT;
	ProtobufCMessage *reply;
	uint32_t groups[256], mode;
	struct sw_client *c;
	Sweepfs__Cred cred;
	uint64_t ino;
	int rc = tool_open_ino(path, &c, &ino, &mode);

	if (rc < 0)
		return rc;
	tool_cred(&cred, groups, SW_ARRAY_SIZE(groups));
	q.cred = &cred;
	q.ino = ino;
	if (goal >= 0) {
		q.has_goal = q.has_recursive = 1;
		q.goal = (uint32_t)goal;
		q.recursive = recursive;
	}
	rc = tool_call(c, SW_MSG_GOAL, &q.base, &reply);
	if (rc == 0) {
		const Sweepfs__GoalReply *r = (const void *)reply;

		if (r->goal)
			printf("%s: %u\n", path, r->goal);
		else
			printf("%s: %u (the default)\n", path, r->effective);
		protobuf_c_message_free_unpacked(reply, NULL);
	} else {
		fprintf(stderr, "sweepfs: %s: %s\n", path, strerror(-rc));
	}
	sw_client_close(c);
	return rc;
}

int cmd_setgoal(int argc, char **argv)
{
	bool recursive = false;
	char *end;
	long goal;
	int opt, status = 0;

	optind = 1;
	while ((opt = getopt(argc, argv, "rh")) != -1) {
		if (opt != 'r')
			goto usage;
		recursive = true;
	}
	if (argc - optind < 2)
		goto usage;
	goal = strtol(argv[optind], &end, 10);
	if (*end || end == argv[optind] || goal < 0 || goal > SW_GOAL_MAX) {
		fprintf(stderr,
			"sweepfs setgoal: the goal is 1 to %u copies, "
			"or 0 for the default\n",
			SW_GOAL_MAX);
		return 2;
	}
	for (int i = optind + 1; i < argc; i++)
		if (goal_one(argv[i], goal, recursive) < 0)
			status = 1;
	return status;
usage:
	fprintf(opt == 'h' ? stdout : stderr,
		"usage: sweepfs setgoal [-r] N PATH...\n");
	return opt == 'h' ? 0 : 2;
}

int cmd_getgoal(int argc, char **argv)
{
	int status = 0;

	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: sweepfs getgoal PATH...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++)
		if (goal_one(argv[i], -1, false) < 0)
			status = 1;
	return status;
}
