/*
 * Frame header codec and the message type table.
 *
 * The table is the one place that binds a type number to its payloads; the
 * master's dispatcher, the clients and the fuzz targets all go through it,
 * so a type cannot be decoded with the wrong descriptor.
 */
#include <errno.h>
#include <string.h>

#include "frame.h"

/*
 * mut: changes the namespace; rs: 1 when safe to resend as it is, ONCE
 * when resent with SW_FRAME_AGAIN (see frame.h).
 */
#define ONCE 2
#define MSG(type, nm, rq, rp, mut, rs)                             \
	[SW_MSG_##type] = { .name = nm,                            \
			    .req = &sweepfs__##rq##__descriptor,   \
			    .reply = &sweepfs__##rp##__descriptor, \
			    .mutating = mut,                       \
			    .resend = (rs)&1,                      \
			    .once = ((rs)&ONCE) != 0 }

static const struct sw_msg_info msg_table[SW_MSG__COUNT] = {
	MSG(HELLO, "hello", hello, hello_reply, 0, 0),
	MSG(PING, "ping", ping_req, ping_reply, 0, 1),
	MSG(LOOKUP, "lookup", lookup_req, entry_reply, 0, 1),
	MSG(GETATTR, "getattr", getattr_req, attr_reply, 0, 1),
	MSG(SETATTR, "setattr", setattr_req, attr_reply, 1, ONCE),
	MSG(MKNOD, "mknod", mknod_req, entry_reply, 1, ONCE),
	MSG(MKDIR, "mkdir", mknod_req, entry_reply, 1, ONCE),
	/* Sent again with SW_FRAME_AGAIN: one that made the file opens it
	 * (its maker may, whatever the mode); one that failed is made. */
	MSG(CREATE, "create", create_req, entry_reply, 1, ONCE),
	MSG(UNLINK, "unlink", name_req, status_reply, 1, ONCE),
	MSG(RMDIR, "rmdir", name_req, status_reply, 1, ONCE),
	MSG(RENAME, "rename", rename_req, status_reply, 1, ONCE),
	MSG(LINK, "link", link_req, entry_reply, 1, ONCE),
	MSG(SYMLINK, "symlink", symlink_req, entry_reply, 1, ONCE),
	MSG(READLINK, "readlink", ino_req, readlink_reply, 0, 1),
	MSG(STATFS, "statfs", ino_req, statfs_reply, 0, 1),
	/* Resent: the open files a reconnect reclaims are those the mount
	 * had answered, so an open lost with its reply counts once. */
	MSG(OPEN, "open", open_req, open_reply, 0, 1),
	MSG(RELEASE, "release", ino_req, status_reply, 0, 0),
	MSG(ACCESS, "access", access_req, status_reply, 0, 1),
	MSG(SETXATTR, "setxattr", setxattr_req, status_reply, 1, ONCE),
	MSG(GETXATTR, "getxattr", getxattr_req, xattr_reply, 0, 1),
	MSG(LISTXATTR, "listxattr", getxattr_req, xattr_reply, 0, 1),
	MSG(REMOVEXATTR, "removexattr", removexattr_req, status_reply, 1, ONCE),
	MSG(READDIR, "readdir", readdir_req, readdir_reply, 0, 1),
	MSG(INFO, "info", info_req, info_reply, 0, 1),
	/* Resent: it asks for a location to write to, and a second one for
	 * the same slot is the first one's lease (master/dataops.c). */
	MSG(CHUNK, "chunk", chunk_req, chunk_reply, 1, 1),
	/* Resent: it sets a size (never smaller) and an mtime it names. */
	MSG(WRITE_END, "write_end", write_end_req, attr_reply, 1, 1),
	MSG(CS_READ, "cs_read", cs_read_req, cs_read_reply, 0, 1),
	MSG(CS_WRITE, "cs_write", cs_write_req, status_reply, 0, 0),
	MSG(CS_SYNC, "cs_sync", cs_sync_req, status_reply, 0, 1),
	MSG(CS_REGISTER, "cs_register", cs_register_req, cs_register_reply, 0,
	    0),
	MSG(CS_HEARTBEAT, "cs_heartbeat", cs_heartbeat_req, status_reply, 0, 0),
	MSG(CS_COMMAND, "cs_command", cs_command, status_reply, 0, 0),
	MSG(CS_DONE, "cs_done", cs_done_req, status_reply, 0, 0),
	MSG(CS_DAMAGED, "cs_damaged", cs_damaged_req, status_reply, 0, 0),
	/* A notification: "req" is its payload; nobody replies. */
	MSG(INVAL, "inval", inval_notify, status_reply, 0, 0),
	MSG(RMR, "rmr", rmr_req, rmr_reply, 1, 0),
	MSG(EATTR, "eattr", eattr_req, eattr_reply, 1, 0),
	MSG(SNAPSHOT, "snapshot", snapshot_req, snapshot_reply, 1, 0),
	MSG(RMSNAPSHOT, "rmsnapshot", rmsnapshot_req, rmr_reply, 1, 0),
	MSG(TRASHTIME, "trashtime", trashtime_req, trashtime_reply, 1, 0),
	MSG(TRASH, "trash", trash_req, trash_reply, 1, 0),
	MSG(FSCK, "fsck", fsck_req, fsck_reply, 0, 1),
	MSG(GOAL, "goal", goal_req, goal_reply, 1, 0),
	/* Resent after a reconnect: every lock op is idempotent for its
	 * owner (sweepfs.proto). */
	MSG(LOCK, "lock", lock_req, lock_reply, 0, 1),
	/* A delegation asked for again after a reconnect would be one the
	 * mount has already forgotten: neither is resent. */
	MSG(DELEG, "deleg", deleg_req, deleg_reply, 0, 0),
	MSG(DELEG_RECALL, "deleg_recall", deleg_recall, status_reply, 0, 0),
	MSG(DELEG_RETURN, "deleg_return", deleg_return_req, status_reply, 0, 0),
	/* Resent: what it had done already fails with ENOENT, which the
	 * mount expects of a resent batch (mount/deleg.c). */
	MSG(BATCH, "batch", batch_req, batch_reply, 1, 1),
	/* An ack lost with a connection is owed no more (server.c). */
	MSG(INVAL_ACK, "inval_ack", inval_ack_req, status_reply, 0, 0),
	/* Resent, a range is only wasted: numbers are plentiful. */
	MSG(INO_RANGE, "ino_range", ino_range_req, ino_range_reply, 1, 1),
	/* A leader that got it is gone, or going. */
	MSG(GROUP, "group", group_req, group_reply, 0, 0),
	MSG(META_READ, "meta_read", meta_read_req, meta_read_reply, 0, 1),
	MSG(FILEINFO, "fileinfo", fileinfo_req, fileinfo_reply, 0, 1),
	MSG(DIRINFO, "dirinfo", dirinfo_req, dirinfo_reply, 0, 1),
};

const struct sw_msg_info *sw_msg_info(uint16_t type)
{
	if (type >= SW_MSG__COUNT || !msg_table[type].name)
		return NULL;
	return &msg_table[type];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

void sw_frame_put_hdr(uint8_t *out, const struct sw_frame_hdr *hdr)
{
	put_be32(out, hdr->len);
	out[4] = hdr->type >> 8;
	out[5] = hdr->type;
	out[6] = hdr->flags >> 8;
	out[7] = hdr->flags;
	put_be32(out + 8, hdr->id >> 32);
	put_be32(out + 12, (uint32_t)hdr->id);
}

int sw_frame_get_hdr(const uint8_t *in, size_t avail, uint32_t max_payload,
		     struct sw_frame_hdr *hdr)
{
	if (avail < SW_FRAME_HDR)
		return 0;
	hdr->len = get_be32(in);
	hdr->type = (uint16_t)(in[4] << 8 | in[5]);
	hdr->flags = (uint16_t)(in[6] << 8 | in[7]);
	hdr->id = (uint64_t)get_be32(in + 8) << 32 | get_be32(in + 12);
	if (hdr->len > max_payload)
		return -EMSGSIZE;
	if (hdr->flags & ~(SW_FRAME_REPLY | SW_FRAME_NOTIFY | SW_FRAME_AGAIN))
		return -EPROTO;
	return 1;
}

int sw_frame_whole(const uint8_t *in, size_t avail, uint32_t max_payload,
		   struct sw_frame_hdr *hdr)
{
	int rc = sw_frame_get_hdr(in, avail, max_payload, hdr);

	if (rc <= 0)
		return rc;
	return avail - SW_FRAME_HDR >= hdr->len ? 1 : 0;
}

size_t sw_frame_size(const ProtobufCMessage *msg)
{
	return SW_FRAME_HDR +
	       (msg ? protobuf_c_message_get_packed_size(msg) : 0);
}

size_t sw_frame_pack(uint8_t *out, uint16_t type, uint16_t flags, uint64_t id,
		     const ProtobufCMessage *msg)
{
	struct sw_frame_hdr hdr = { .type = type, .flags = flags, .id = id };

	hdr.len = msg ? (uint32_t)protobuf_c_message_pack(msg,
							  out + SW_FRAME_HDR) :
			0;
	sw_frame_put_hdr(out, &hdr);
	return SW_FRAME_HDR + hdr.len;
}
