/*
 * The dispatch table (dispatch.h). Roles: a chunkserver's session has no
 * export (no subtree, no squashing), so it reaches only its own messages
 * and a ping, and no one else reaches those; so does a group member's,
 * which reads the leader's checkpoint; delegations and batches are
 * a mount's; everything else is any client's (mounts and tools).
 */
#include <errno.h>
#include <fcntl.h>

#include "dispatch.h"
#include "handlers.h"
#include "master.h"
#include "session.h"

#define MOUNT ROUTE_ROLE(SWEEPFS__ROLE__ROLE_MOUNT)
#define TOOL ROUTE_ROLE(SWEEPFS__ROLE__ROLE_TOOL)
#define CS ROUTE_ROLE(SWEEPFS__ROLE__ROLE_CHUNKSERVER)
#define MEMBER ROUTE_ROLE(SWEEPFS__ROLE__ROLE_MEMBER)
#define CLIENT (MOUNT | TOOL)
#define W ROUTE_WRITES

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

static const struct route routes[SW_MSG__COUNT] = {
	[SW_MSG_PING] = { op_ping, CLIENT | CS, 0, NULL },
	[SW_MSG_LOOKUP] = { op_lookup, CLIENT, 0, NULL },
	[SW_MSG_GETATTR] = { op_getattr, CLIENT, 0, NULL },
	[SW_MSG_SETATTR] = { op_setattr, CLIENT, W, NULL },
	[SW_MSG_MKNOD] = { op_mknod, CLIENT, W, NULL },
	[SW_MSG_MKDIR] = { op_mkdir, CLIENT, W, NULL },
	[SW_MSG_CREATE] = { op_create, CLIENT, W, NULL },
	[SW_MSG_UNLINK] = { op_unlink, CLIENT, W, NULL },
	[SW_MSG_RMDIR] = { op_rmdir, CLIENT, W, NULL },
	[SW_MSG_RENAME] = { op_rename, CLIENT, W, NULL },
	[SW_MSG_LINK] = { op_link, CLIENT, W, NULL },
	[SW_MSG_SYMLINK] = { op_symlink, CLIENT, W, NULL },
	[SW_MSG_READLINK] = { op_readlink, CLIENT, 0, NULL },
	[SW_MSG_STATFS] = { op_statfs, CLIENT, 0, NULL },
	[SW_MSG_OPEN] = { op_open, CLIENT, W, open_writes },
	[SW_MSG_RELEASE] = { op_release, CLIENT, 0, NULL },
	[SW_MSG_ACCESS] = { op_access, CLIENT, 0, NULL },
	[SW_MSG_SETXATTR] = { op_setxattr, CLIENT, W, NULL },
	[SW_MSG_GETXATTR] = { op_getxattr, CLIENT, 0, NULL },
	[SW_MSG_LISTXATTR] = { op_listxattr, CLIENT, 0, NULL },
	[SW_MSG_REMOVEXATTR] = { op_removexattr, CLIENT, W, NULL },
	[SW_MSG_READDIR] = { op_readdir, CLIENT, 0, NULL },
	[SW_MSG_INFO] = { op_info, CLIENT, 0, NULL },
	[SW_MSG_CHUNK] = { op_chunk, CLIENT, W, chunk_writes },
	[SW_MSG_WRITE_END] = { op_write_end, CLIENT, W, NULL },
	[SW_MSG_CS_REGISTER] = { csrv_op_register, CS, 0, NULL },
	[SW_MSG_CS_HEARTBEAT] = { csrv_op_heartbeat, CS, 0, NULL },
	[SW_MSG_CS_DONE] = { csrv_op_done, CS, 0, NULL },
	[SW_MSG_CS_DAMAGED] = { csrv_op_damaged, CS, 0, NULL },
	[SW_MSG_RMR] = { op_rmr, CLIENT, W, NULL },
	[SW_MSG_EATTR] = { op_eattr, CLIENT, W, eattr_writes },
	[SW_MSG_SNAPSHOT] = { op_snapshot, CLIENT, W, NULL },
	[SW_MSG_RMSNAPSHOT] = { op_rmsnapshot, CLIENT, W, NULL },
	[SW_MSG_TRASHTIME] = { op_trashtime, CLIENT, W, trashtime_writes },
	[SW_MSG_TRASH] = { op_trash, CLIENT, W, trash_writes },
	[SW_MSG_FSCK] = { op_fsck, CLIENT, ROUTE_ADMIN, NULL },
	[SW_MSG_GOAL] = { op_goal, CLIENT, W, NULL },
	[SW_MSG_LOCK] = { op_lock, CLIENT, 0, NULL },
	[SW_MSG_DELEG] = { op_deleg, MOUNT, 0, NULL },
	[SW_MSG_DELEG_RETURN] = { op_deleg_return, MOUNT, 0, NULL },
	[SW_MSG_BATCH] = { op_batch, MOUNT, W, NULL },
	[SW_MSG_INO_RANGE] = { op_ino_range, MOUNT, W, NULL },
	[SW_MSG_INVAL_ACK] = { op_inval_ack, CLIENT, 0, NULL },
	[SW_MSG_GROUP] = { op_group, CLIENT, ROUTE_ADMIN, NULL },
	[SW_MSG_META_READ] = { op_meta_read, MEMBER, 0, NULL },
	[SW_MSG_FILEINFO] = { op_fileinfo, CLIENT, 0, NULL },
	[SW_MSG_DIRINFO] = { op_dirinfo, CLIENT, 0, NULL },
};

const struct route *dispatch_route(uint16_t type)
{
	return type < SW_MSG__COUNT && routes[type].fn ? &routes[type] : NULL;
}

bool dispatch_writes(const struct route *rt, const ProtobufCMessage *msg)
{
	if (!(rt->flags & ROUTE_WRITES))
		return false;
	return rt->writes ? rt->writes(msg) : true;
}

int dispatch_admit(const struct route *rt, struct session *s,
		   ProtobufCMessage *msg)
{
	if (s->role < 0 || s->role > 7 || !(rt->roles & ROUTE_ROLE(s->role)))
		return -EPERM;
	if (session_is_peer(s))
		return 0;
	session_map_msg(s, msg);
	if (!s->rw && dispatch_writes(rt, msg))
		return -EROFS;
	if ((rt->flags & ROUTE_ADMIN) && !s->admin)
		return -EPERM;
	return 0;
}

bool dispatch_done_before(struct req *r, const ProtobufCMessage *msg)
{
	return (r->hdr.flags & SW_FRAME_AGAIN) && op_done_before(r, msg);
}
