/*
 * The dispatch table (dispatch.h), one column of proto/messages.def.
 * Roles (declared there): a chunkserver's session has no export (no
 * subtree, no squashing), so it reaches only its own messages and a
 * ping, and no one else reaches those; so does a group member's, which
 * reads the leader's checkpoint; delegations and batches are a mount's;
 * everything else is any client's (mounts and tools).
 */
#include <errno.h>
#include <fcntl.h>

#include "dispatch.h"
#include "handlers.h"
#include "context.h"
#include "session.h"

static bool open_writes(const ProtobufCMessage *msg)
{
	uint32_t fl = ((const Sweepfs__OpenReq *)msg)->flags;

	return (fl & O_ACCMODE) != O_RDONLY || (fl & O_TRUNC);
}

static bool chunk_writes(const ProtobufCMessage *msg)
{
	return ((const Sweepfs__ChunkReq *)msg)->write;
}

static bool eattr_writes(const ProtobufCMessage *msg)
{
	const Sweepfs__EattrReq *q = (const Sweepfs__EattrReq *)msg;

	return q->set || q->clear;
}

static bool trashtime_writes(const ProtobufCMessage *msg)
{
	return ((const Sweepfs__TrashtimeReq *)msg)->has_seconds;
}

static bool trash_writes(const ProtobufCMessage *msg)
{
	return ((const Sweepfs__TrashReq *)msg)->op != 1; /* 1: list */
}

/* A change of the group, never of the namespace: not journaled, and a
 * write all the same (messages.def). */
static bool group_writes(const ProtobufCMessage *msg)
{
	(void)msg;
	return true;
}

/*
 * The handler and the writes predicate of each type, from the one list
 * (proto/messages.def), with the roles and flags admission needs: the
 * same columns sw_msg_info() has, copied at compile time so that
 * admitting a request looks nothing up.
 */
#define NO_HANDLER NULL
#define ALWAYS NULL
#define MSG(type, nm, rq, rp, fl, who, handler, wr, nodes, not_nodes)      \
	[SW_MSG_##type] = {                                                \
		.fn = handler, .writes = wr, .roles = (who), .flags = (fl) \
	},

static const struct route routes[SW_MSG__COUNT] = {
#include "messages.def"
};

#undef MSG
#undef ALWAYS
#undef NO_HANDLER

const struct route *dispatch_route(uint16_t type)
{
	return type < SW_MSG__COUNT && routes[type].fn ? &routes[type] : NULL;
}

/* Whether @msg of route @rt would write. */
bool dispatch_writes(const struct route *rt, const ProtobufCMessage *msg)
{
	if (!(rt->flags & SW_MSG_F_WRITES))
		return false;
	return rt->writes ? rt->writes(msg) : true;
}

int dispatch_admit(const struct route *rt, struct session *s,
		   ProtobufCMessage *msg)
{
	if (s->role < 0 || s->role > 7 || !(rt->roles & SW_ROLE_BIT(s->role)))
		return -EPERM;
	if (session_is_peer(s))
		return 0;
	if (session_map_msg(s, msg) < 0)
		return -EINVAL;
	if (!s->rw && dispatch_writes(rt, msg))
		return -EROFS;
	if ((rt->flags & SW_MSG_F_ADMIN) &&
	    !session_admin_root(s, session_msg_cred(msg)))
		return -EPERM;
	if ((rt->flags & SW_MSG_F_WHOLE) && session_confined(s))
		return -EPERM;
	return 0;
}

bool dispatch_done_before(struct req *r, const ProtobufCMessage *msg)
{
	return (r->hdr.flags & SW_FRAME_AGAIN) && op_done_before(r, msg);
}
