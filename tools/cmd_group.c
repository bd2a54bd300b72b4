/*
 * sweepfs group transfer [ID]: the leader of a group of masters
 * (master/group.h) hands the leadership over, to member ID or to whichever
 * follower wins; this waits until a new leader serves and names it.
 * sweepfs group add ID=HOST:PORT, sweepfs group remove ID: change the
 * group's membership, which the group keeps in etcd.
 * The members and their roles are in `sweepfs status`.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"
#include "util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sweepfs [-m MASTERS] group transfer [ID]\n"
		   "       sweepfs [-m MASTERS] group add ID=HOST:PORT\n"
		   "       sweepfs [-m MASTERS] group remove ID\n");
}

/* The leader now, as a connection to the group says: its member id, or
 * -errno when none answers yet. */
static int current_leader(const struct sw_target *t, char *addr, size_t len)
{
	Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;
	Sweepfs__InfoReply *s;
	ProtobufCMessage *reply;
	struct sw_client *c;
	int rc = sw_client_open(t, SWEEPFS__ROLE__ROLE_TOOL, "sweepfs", 2000,
				&c);

	if (rc < 0)
		return rc;
	rc = tool_call(c, SW_MSG_INFO, &q.base, &reply);
	sw_client_close(c);
	if (rc < 0)
		return rc;
	s = (Sweepfs__InfoReply *)reply;
	rc = s->role && !strcmp(s->role, "leader") ? (int)s->member_id :
						     -EAGAIN;
	snprintf(addr, len, "%s", s->leader ? s->leader : "");
	protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

/* What a refusal of the group's leader means for this client. */
static const char *whose(int rc)
{
	if (rc == -EROFS)
		return "this client's export is read-only";
	if (rc == -EPERM)
		return tool_admin_refusal();
	return strerror(-rc);
}

/* Send @q to the leader of the group @t names: 0 or -errno (the
 * connection's failures said already). */
static int send_group(const struct sw_target *t, Sweepfs__GroupReq *q)
{
	ProtobufCMessage *reply;
	struct tool_caller who;
	struct sw_client *c;
	int rc = tool_connect_target(t, &c);

	if (rc < 0)
		return rc;
	q->cred = tool_caller(&who);
	rc = tool_call(c, SW_MSG_GROUP, &q->base, &reply);
	q->cred = NULL;
	sw_client_close(c);
	if (rc == 0)
		protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

static int transfer(unsigned to)
{
	Sweepfs__GroupReq q = SWEEPFS__GROUP_REQ__INIT;
	struct sw_target t;
	char addr[300];
	int64_t deadline;
	int rc, old;

	rc = tool_target(NULL, &t);
	if (rc < 0)
		return rc;
	old = current_leader(&t, addr, sizeof(addr));
	q.has_transfer_to = 1;
	q.transfer_to = to;
	rc = send_group(&t, &q);
	if (rc < 0) {
		fprintf(stderr, "sweepfs group transfer: %s\n",
			rc == -ENOTSUP ? "this master is not in a group" :
			rc == -EINVAL  ? "no such other member" :
					 whose(rc));
		return tool_record_errno(rc);
	}
	/* The old leader exits once it has shipped what it had; the next
	 * one is elected within the lease. */
	deadline = sw_mono_ns() + 30 * SW_NSEC_PER_SEC;
	while (sw_mono_ns() < deadline) {
		int now = current_leader(&t, addr, sizeof(addr));

		if (now > 0 && now != old && (!to || (unsigned)now == to)) {
			printf("member %d (%s) leads the group\n", now, addr);
			return 0;
		}
		usleep(100 * 1000);
	}
	fprintf(stderr, "sweepfs group transfer: no new leader within 30 s\n");
	return -ETIMEDOUT;
}

/* Add member @add ("ID=HOST:PORT") or, with @add NULL, remove @remove. */
static int change(const char *add, unsigned remove)
{
	Sweepfs__GroupReq q = SWEEPFS__GROUP_REQ__INIT;
	struct sw_target t;
	int rc;

	rc = tool_target(NULL, &t);
	if (rc < 0)
		return rc;
	if (add) {
		q.add = (char *)add;
	} else {
		q.has_remove = 1;
		q.remove = remove;
	}
	rc = send_group(&t, &q);
	if (rc < 0) {
		fprintf(stderr, "sweepfs group %s: %s\n",
			add ? "add" : "remove",
			rc == -ENOTSUP ? "this master is not in a group" :
			rc == -EEXIST  ? "a member has that id already" :
			rc == -ENOENT  ? "no member has that id" :
			rc == -EINVAL ? "not ID=HOST:PORT, or the last member" :
			rc == -EAGAIN ? "the membership changed meanwhile; "
					"try again" :
					whose(rc));
		return tool_record_errno(rc);
	}
	return 0;
}

int cmd_group(int argc, char **argv)
{
	char *end;
	unsigned long to = 0;

	if (argc == 3 && !strcmp(argv[1], "add"))
		return change(argv[2], 0) < 0 ? 1 : 0;
	if (argc == 3 && !strcmp(argv[1], "remove")) {
		to = strtoul(argv[2], &end, 10);
		if (*end || to == 0 || to > 255) {
			usage(stderr);
			return 2;
		}
		return change(NULL, (unsigned)to) < 0 ? 1 : 0;
	}
	if (argc < 2 || strcmp(argv[1], "transfer") || argc > 3) {
		usage(stderr);
		return 2;
	}
	if (argc == 3) {
		to = strtoul(argv[2], &end, 10);
		if (*end || to == 0 || to > 255) {
			usage(stderr);
			return 2;
		}
	}
	return transfer((unsigned)to) < 0 ? 1 : 0;
}
