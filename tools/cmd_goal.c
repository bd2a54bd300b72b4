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
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "pathattr.h"
#include "tool.h"
#include "util.h"

static int goal_one(const char *path, int64_t goal, bool recursive)
{
	Sweepfs__GoalReq q = SWEEPFS__GOAL_REQ__INIT;
	struct pathattr_node pn;
	ProtobufCMessage *reply;
	int rc = pathattr_open(path, &pn);

	if (rc < 0)
		return rc;
	q.cred = &pn.cred;
	q.ino = pn.ino;
	if (goal >= 0) {
		q.has_goal = q.has_recursive = 1;
		q.goal = (uint32_t)goal;
		q.recursive = recursive;
	}
	rc = tool_call(pn.c, SW_MSG_GOAL, &q.base, &reply);
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
	sw_client_close(pn.c);
	return rc;
}

/* A goal: 1..SW_GOAL_MAX copies, or 0 for the master's default. */
static int64_t parse_goal(const char *arg)
{
	char *end;
	long goal = strtol(arg, &end, 10);

	if (*end || end == arg || goal < 0 || goal > SW_GOAL_MAX) {
		fprintf(stderr,
			"sweepfs setgoal: the goal is 1 to %u copies, "
			"or 0 for the default\n",
			SW_GOAL_MAX);
		return -1;
	}
	return goal;
}

static const struct pathattr goal_cmd = {
	.set_name = "setgoal",
	.get_name = "getgoal",
	.value = "N",
	.parse = parse_goal,
	.one = goal_one,
};

int cmd_setgoal(int argc, char **argv)
{
	return pathattr_set(&goal_cmd, argc, argv);
}

int cmd_getgoal(int argc, char **argv)
{
	return pathattr_get(&goal_cmd, argc, argv);
}
