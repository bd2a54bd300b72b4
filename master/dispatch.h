/*
 * The master's one dispatch table: for each message type, the handler
 * (handlers.h); which roles of session may send it, whether it writes
 * (refused through a read-only export) and whether it needs an export's
 * admin rights come with it from proto/messages.def. server.c asks it
 * for every request after the hello.
 */
#ifndef SWEEPFS_MASTER_DISPATCH_H
#define SWEEPFS_MASTER_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "req.h"

struct session;

/*
 * A type's entry of proto/messages.def as the master serves it: the
 * handler, whether it writes when that depends on the message, and the
 * roles and flags of its sw_msg_info() (the same columns, copied at
 * compile time).
 */
struct route {
	req_handler fn;
	/* Set when whether it writes depends on the message (an open for
	 * reading does not); SW_MSG_F_WRITES says whether it can. */
	bool (*writes)(const ProtobufCMessage *msg);
	uint8_t roles;	/* SW_ROLE_BIT()s that may send it */
	uint16_t flags; /* SW_MSG_F_* */
};

/* The route of message type @type, or NULL when the master serves no
 * such request (the hello is server.c's own). */
const struct route *dispatch_route(uint16_t type);

/*
 * Whether session @s may send @msg by route @rt: 0, or -EPERM (not its
 * role's; an admin request (SW_MSG_F_ADMIN) whose credentials, once
 * mapped, are not root's on an admin export (session_admin_root()); or
 * the whole filesystem's and its export confines it to a subtree),
 * -EROFS (it would write through a read-only export). Maps the
 * credentials @msg carries as the export says (maproot, mapall) before
 * the handler sees them, and before the admin check looks at them.
 */
int dispatch_admit(const struct route *rt, struct session *s,
		   ProtobufCMessage *msg);

/*
 * Whether request @r, sent again with SW_FRAME_AGAIN, was made already and
 * is now answered as it was then (replies.h); false: hand it to its
 * handler.
 */
bool dispatch_done_before(struct req *r, const ProtobufCMessage *msg);

/* Whether @msg, sent by route @rt, would change anything. */
bool dispatch_writes(const struct route *rt, const ProtobufCMessage *msg);

#endif
