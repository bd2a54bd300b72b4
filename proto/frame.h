/*
 * Framing of the sweepfs wire protocol: a fixed 16-byte header in front of
 * every protobuf-c payload, and the table of message types.
 *
 * Header, all big-endian:
 *
 *   0       4       6       8                      16
 *   +-------+-------+-------+-----------------------+
 *   |  len  | type  | flags |      request id       |  payload (len bytes)
 *   +-------+-------+-------+-----------------------+
 *
 * A reply carries the type and id of its request and SW_FRAME_REPLY in
 * flags; requests are pipelined and replies may come in any order. A frame
 * with SW_FRAME_NOTIFY is sent unasked (master to mount) and has id 0.
 *
 * Nothing here allocates or prints; decoding returns negative errno.
 */
#ifndef SWEEPFS_PROTO_FRAME_H
#define SWEEPFS_PROTO_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* RENAME_* (glibc 2.28+) */

#include <protobuf-c/protobuf-c.h>

#include "sweepfs.pb-c.h"

/* Bumped on any incompatible change; the hello refuses other versions.
 * 3: BatchReply.errs are positive errno, as every other error.
 * 4: a node named by number needs its handle (sweepfs.proto, "Node
 *    handles"). */
#define SW_PROTO_VERSION 4

/* The oldest version a chunkserver or a group member may speak to a
 * master, and a mount or a chunkserver to a chunkserver: what 4 changed
 * is only between mounts and tools and the master. Those hellos also say
 * this version (sw_proto_hello_version()), so that builds before 4 take
 * them: chunkservers may be upgraded before or after the master and the
 * mounts. */
#define SW_PROTO_DATA_MIN 3

/* The version a hello of @role (SWEEPFS__ROLE__*) says: a mount's or a
 * tool's to a master, SW_PROTO_VERSION; everything else, the data
 * plane's and a group member's, SW_PROTO_DATA_MIN. */
static inline uint32_t sw_proto_hello_version(int role, bool to_master)
{
	return to_master && (role == SWEEPFS__ROLE__ROLE_MOUNT ||
			     role == SWEEPFS__ROLE__ROLE_TOOL) ?
		       SW_PROTO_VERSION :
		       SW_PROTO_DATA_MIN;
}

/* Whether a hello of @version from a peer of @role (SWEEPFS__ROLE__*)
 * may be served by a master (@to_master) or by a chunkserver. */
static inline bool sw_proto_accepts(uint32_t version, int role, bool to_master)
{
	bool data = !to_master || role == SWEEPFS__ROLE__ROLE_CHUNKSERVER ||
		    role == SWEEPFS__ROLE__ROLE_MEMBER;

	return version == SW_PROTO_VERSION ||
	       (data && version >= SW_PROTO_DATA_MIN &&
		version < SW_PROTO_VERSION);
}

/* Handles one request may carry (sweepfs.proto, "Node handles"): more is
 * EINVAL. A batch names each directory it changes once. */
#define SW_HANDLES_MAX 64

#define SW_FRAME_HDR 16u

/* Bytes of a cluster's identity (HelloReply.cluster_id). */
#define SW_CLUSTER_ID_LEN 16

/*
 * Largest payload a metadata connection accepts. The largest legitimate
 * metadata frames are readdir pages (bounded by the request's max_bytes,
 * which the master caps at SW_READDIR_MAX_BYTES) and xattr values (64 KiB
 * at most, as Linux allows); 1 MiB leaves room for both with margin and
 * bounds what a hostile peer can make us buffer.
 */
#define SW_FRAME_MAX_META (1u << 20)

#define SW_FRAME_REPLY 0x1
#define SW_FRAME_NOTIFY 0x2
/*
 * A request of a type with `once` (below) sent again after a reconnect,
 * with the id it had the first time: its ids are unique in its session.
 * The changes such a request makes are journaled with the session and id
 * (master/replies.h); a master (or the one that took over) that finds it
 * made them already answers as the first sending would have, instead of
 * making them twice.
 */
#define SW_FRAME_AGAIN 0x4

/*
 * Largest payload a chunkserver connection accepts: a 1 MiB data block
 * with its request around it. Reads and writes are at most
 * SW_IO_MAX bytes.
 */
#define SW_FRAME_MAX_DATA ((1u << 20) + 4096)
#define SW_IO_MAX (1u << 20)

/* Chunks: 64 MiB of file data each, checksummed in 64 KiB blocks. */
#define SW_CHUNK_SIZE (64u << 20)
#define SW_BLOCK_SIZE (64u << 10)
#define SW_CHUNK_BLOCKS (SW_CHUNK_SIZE / SW_BLOCK_SIZE)

/*
 * Chunk ids in one DELETE_BATCH command: 4096 ids and versions pack into
 * at most 60 KiB, far below any frame limit, and are a few tenths of a
 * second of unlinks for the chunkserver, so an acknowledgement is never
 * long in coming and the master's pending count stays close to the disk.
 */
#define SW_DELETE_BATCH_MAX 4096u

/* Largest listing payload the master sends in one readdir reply. */
#define SW_READDIR_MAX_BYTES (256u << 10)
#define SW_READDIR_MAX_ENTRIES 8192u

/* POSIX limits the protocol enforces. */
#define SW_NAME_MAX 255u

/* RenameReq.flags are renameat2(2)'s; for a libc without their names: */
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* In OpenReq.flags beside open(2)'s: the file is opened to be executed
 * (the bit Linux hands FUSE for execve(), its __FMODE_EXEC). */
#define SW_O_EXEC 040u

/* Copies of a file's chunks a goal may ask for (GoalReq; 0: default). */
#define SW_GOAL_MAX 8u

/* Operations in one BatchReq, at most; a sender also keeps a batch under
 * SW_BATCH_BYTES_MAX (long names and many groups make big operations). */
#define SW_BATCH_OPS_MAX 1024u
#define SW_BATCH_BYTES_MAX (SW_FRAME_MAX_META / 2)
/* How long a mount's kernel may keep a name it was given in a held
 * directory (mount/knames.h), after which it asks again: what the master
 * keeps a holder told its tree goes (DelegRecall.removed) watching the
 * directory for (master/deleg.c). */
#define SW_DELEG_NAME_TTL_MS 60000u
#define SW_PATH_MAX 4096u
#define SW_XATTR_NAME_MAX 255u
#define SW_XATTR_SIZE_MAX 65536u
/* A node's attribute names, each with its NUL, in all: Linux's
 * XATTR_LIST_MAX, the most a listxattr(2) returns. */
#define SW_XATTR_LIST_MAX 65536u
#define SW_GROUPS_MAX 65536u

enum sw_msg_type {
	SW_MSG_HELLO = 1,
	SW_MSG_PING = 2,
	SW_MSG_LOOKUP = 3,
	SW_MSG_GETATTR = 4,
	SW_MSG_SETATTR = 5,
	SW_MSG_MKNOD = 6,
	SW_MSG_MKDIR = 7,
	SW_MSG_CREATE = 8,
	SW_MSG_UNLINK = 9,
	SW_MSG_RMDIR = 10,
	SW_MSG_RENAME = 11,
	SW_MSG_LINK = 12,
	SW_MSG_SYMLINK = 13,
	SW_MSG_READLINK = 14,
	SW_MSG_STATFS = 15,
	SW_MSG_OPEN = 16,
	SW_MSG_RELEASE = 17,
	SW_MSG_ACCESS = 18,
	SW_MSG_SETXATTR = 19,
	SW_MSG_GETXATTR = 20,
	SW_MSG_LISTXATTR = 21,
	SW_MSG_REMOVEXATTR = 22,
	SW_MSG_READDIR = 23,
	SW_MSG_INFO = 24,
	/* data: client <-> master */
	SW_MSG_CHUNK = 25,
	SW_MSG_WRITE_END = 26,
	/* data: client <-> chunkserver */
	SW_MSG_CS_READ = 27,
	SW_MSG_CS_WRITE = 28,
	SW_MSG_CS_SYNC = 29,
	/* chunkserver <-> master */
	SW_MSG_CS_REGISTER = 30,
	SW_MSG_CS_HEARTBEAT = 31,
	SW_MSG_CS_COMMAND = 32, /* notification, master -> chunkserver */
	SW_MSG_CS_DONE = 33,
	SW_MSG_CS_DAMAGED = 34,
	/* cache coherence, master -> mount notifications */
	SW_MSG_INVAL = 35,
	/* removal */
	SW_MSG_RMR = 36,
	SW_MSG_EATTR = 37,
	SW_MSG_SNAPSHOT = 38,
	SW_MSG_RMSNAPSHOT = 39,
	SW_MSG_TRASHTIME = 40,
	SW_MSG_TRASH = 41,
	SW_MSG_FSCK = 42,
	SW_MSG_GOAL = 43,
	/* file locks (LockReq) */
	SW_MSG_LOCK = 44,
	/* directory delegations and the batches sent under them */
	SW_MSG_DELEG = 45,
	SW_MSG_DELEG_RECALL = 46, /* notification, master -> mount */
	SW_MSG_DELEG_RETURN = 47,
	SW_MSG_BATCH = 48,
	SW_MSG_INVAL_ACK = 49,
	SW_MSG_INO_RANGE = 50,
	SW_MSG_GROUP = 51,
	SW_MSG_META_READ = 52, /* a group's member catching up */
	SW_MSG_FILEINFO = 53,  /* sweepfs info: a file's chunks */
	SW_MSG_DIRINFO = 54,   /* sweepfs du: a tree's summary */
	SW_MSG__COUNT
};

struct sw_frame_hdr {
	uint32_t len;	/* payload bytes after the header */
	uint16_t type;	/* enum sw_msg_type */
	uint16_t flags; /* SW_FRAME_* */
	uint64_t id;	/* request id, echoed in the reply */
};

/* A role (SWEEPFS__ROLE__ROLE_*) as a bit of sw_msg_info.roles. */
#define SW_ROLE_BIT(role) (1u << (role))

/*
 * A field of a request, by protobuf field number: @n of the request
 * itself, or field @inner of each element of its repeated message field
 * @outer (@inner below 65536, @outer below 256, as all of ours are).
 */
#define SW_MSG_FIELD(n) ((uint32_t)(n))
#define SW_MSG_FIELD_IN(outer, inner) ((uint32_t)(outer) << 16 | (inner))

/*
 * A node field @dir (as SW_MSG_FIELD_IN() or SW_MSG_FIELD() says) whose
 * entry the request changes: the one its sibling bytes field @name (below
 * 256) names. The delegations a change of that entry recalls are the
 * directory's and the entry's node's, not those of its siblings.
 */
#define SW_MSG_ENTRY(dir, name) ((uint32_t)(name) << 24 | (dir))
#define SW_MSG_SPEC_NODE(spec) ((spec)&0xffffffu)
#define SW_MSG_SPEC_NAME(spec) ((spec) >> 24)

/* Node fields (and declared non-node fields) a type may have, at most. */
#define SW_MSG_NODES_MAX 3

/* sw_msg_info flags, as proto/messages.def writes them. */
enum {
	SW_MSG_F_JOURNAL = 1 << 0,
	SW_MSG_F_RESEND = 1 << 1,
	SW_MSG_F_ONCE = 1 << 2,
	SW_MSG_F_WRITES = 1 << 3,
	SW_MSG_F_ADMIN = 1 << 4,
	SW_MSG_F_SUBTREE = 1 << 5,
	SW_MSG_F_RECALL_ALL = 1 << 6,
	SW_MSG_F_OVERTAKES = 1 << 7,
	SW_MSG_F_NO_FLUSH = 1 << 8,
	SW_MSG_F_REMOVES = 1 << 9,
	SW_MSG_F_WHOLE = 1 << 10,
};

/*
 * What a message type is, from its one declaration in proto/messages.def
 * (the master's handler is the only column kept elsewhere, in
 * master/dispatch.c, built from the same list).
 */
struct sw_msg_info {
	const char *name;			 /* "lookup", for logs */
	const ProtobufCMessageDescriptor *req;	 /* request payload */
	const ProtobufCMessageDescriptor *reply; /* reply payload */
	unsigned mutating : 1;			 /* changes the namespace */
	/* Safe to send again when a connection broke before its reply
	 * came: it changes nothing, or sending it twice leaves what sending
	 * it once does (messages.def says why, type by type). */
	unsigned resend : 1;
	/* Sent again flagged SW_FRAME_AGAIN, the master answers it from
	 * what the first sending did: for changes that are not safe to
	 * repeat (an exclusive create, an unlink, a rename...). */
	unsigned once : 1;
	/* Can change something: refused through a read-only export (the
	 * master's table may say it depends on the message, as an open's
	 * does). */
	unsigned writes : 1;
	unsigned admin : 1; /* only root on an admin export (its cred) */
	/* Changes the subtree each of its nodes heads (for a node field
	 * with an entry, SW_MSG_ENTRY(), the entry's node): delegations
	 * below them are recalled too (master/deleg.c). */
	unsigned subtree : 1;
	/* Recalls every delegation but the sender's, whatever it names. */
	unsigned recall_all : 1;
	/* Handled even behind a request of the same connection that waits
	 * for a delegation (master/server.c). */
	unsigned overtakes : 1;
	/* Part of the delegation protocol: the mount sends it without
	 * first flushing the operations it queued under its delegations. */
	unsigned no_flush : 1;
	/* Removes the entry its one node field, an SW_MSG_ENTRY(), names,
	 * with the tree that entry heads: the delegations of that tree are
	 * recalled too, told it goes. */
	unsigned removes : 1;
	/* Concerns the whole filesystem or the cluster, not a subtree (a
	 * report of every file, the group's membership): refused to a
	 * session its export confines to one. */
	unsigned whole : 1;
	uint8_t roles; /* SW_ROLE_BIT()s that may send it to the master */
	/* The fields (SW_MSG_FIELD()s or SW_MSG_ENTRY()s, 0-terminated)
	 * that name a node, and those named like one that do not. */
	uint32_t nodes[SW_MSG_NODES_MAX];
	uint32_t not_nodes[SW_MSG_NODES_MAX];
};

/*
 * The description of message type @type, or NULL if the type is unknown.
 */
const struct sw_msg_info *sw_msg_info(uint16_t type);

/*
 * Walks the node numbers a request names (its sw_msg_info.nodes, in
 * order, each element of a repeated one in turn); fields an optional
 * field leaves unset are skipped. The field numbers are resolved to
 * offsets once, on first use, thread-safely.
 *
 *	struct sw_msg_nodes it;
 *	uint64_t ino;
 *
 *	sw_msg_nodes_begin(&it, type, msg);
 *	while (sw_msg_nodes_next(&it, &ino))
 *		...
 *
 * @msg must be a request of @type (unpacked with sw_msg_info(@type)->req)
 * and outlive the walk.
 */
struct sw_msg_nodes {
	const ProtobufCMessage *msg;
	uint16_t type;
	unsigned spec; /* index into the type's node fields */
	size_t elem;   /* next element of a repeated one */
	/* After sw_msg_nodes_next(): the name of the entry the request
	 * changes in the node it returned (an SW_MSG_ENTRY()), or NULL. */
	const ProtobufCBinaryData *entry;
};

void sw_msg_nodes_begin(struct sw_msg_nodes *it, uint16_t type,
			const ProtobufCMessage *msg);
bool sw_msg_nodes_next(struct sw_msg_nodes *it, uint64_t *ino);

/*
 * The node numbers request @msg of @type names, as the walk above: the
 * first @max into @out; returns how many there are (more than @max when
 * they did not fit).
 */
size_t sw_msg_nodes(uint16_t type, const ProtobufCMessage *msg, uint64_t *out,
		    size_t max);

/* Request @msg's credentials (its field `cred`), or NULL if it has none. */
const Sweepfs__Cred *sw_msg_cred(const ProtobufCMessage *msg);

/*
 * Request @msg's node handles (its field `handles`, sweepfs.proto's "Node
 * handles"): their count into *@n and the array, or NULL with *@n 0 for a
 * message without the field.
 */
const uint64_t *sw_msg_handles(const ProtobufCMessage *msg, size_t *n);

/*
 * Make request @msg carry the @n handles at @h (not copied: @h must
 * outlive @msg's use). -ENOENT for a message without the field.
 */
int sw_msg_set_handles(ProtobufCMessage *msg, uint64_t *h, size_t n);

/* Call @fn(@arg, attr) for each Attr reply @msg carries (its fields of
 * that type, single or repeated): where clients learn node handles. */
void sw_msg_attrs(const ProtobufCMessage *msg,
		  void (*fn)(void *arg, const Sweepfs__Attr *a), void *arg);

/*
 * Make request @msg of @type, if it names nodes and carries no handles
 * yet, carry in @h the handles @handle_of(@arg, ino) gives for them (0:
 * unknown, left out), each once. Returns how many it carries now; a
 * caller that got more than 0 puts the field back with
 * sw_msg_set_handles(@msg, NULL, 0) before @h goes. Nodes past
 * SW_HANDLES_MAX are left out (the master refuses such a request).
 */
size_t sw_msg_vouch(uint16_t type, ProtobufCMessage *msg,
		    uint64_t (*handle_of)(void *arg, uint64_t ino), void *arg,
		    uint64_t h[SW_HANDLES_MAX]);

/*
 * 0 when every node field the table declares resolves to a single
 * uint64 field of its request (through a repeated message field for
 * SW_MSG_FIELD_IN()), the name of every SW_MSG_ENTRY() to a required
 * bytes field beside it, and every type that `removes` has one node
 * field, an entry; else -EINVAL with @type_out set to the first type
 * whose declaration does not. For the tests and for start-up.
 */
int sw_msg_check(uint16_t *type_out);

/* Write @hdr into the 16 bytes at @out. */
void sw_frame_put_hdr(uint8_t *out, const struct sw_frame_hdr *hdr);

/*
 * Read a header from the @avail bytes at @in.
 *
 * Returns 0 when fewer than SW_FRAME_HDR bytes are available, 1 when @hdr
 * was filled, -EMSGSIZE when the payload would exceed @max_payload and
 * -EPROTO when flags has unknown bits.
 */
int sw_frame_get_hdr(const uint8_t *in, size_t avail, uint32_t max_payload,
		     struct sw_frame_hdr *hdr);

/*
 * The frame at the head of the @avail bytes at @in, as every reader of a
 * byte stream cuts them: 1 when it is whole (@hdr filled, its payload at
 * @in + SW_FRAME_HDR), 0 while header or payload is still incomplete,
 * -EMSGSIZE / -EPROTO as sw_frame_get_hdr() (close the connection).
 */
int sw_frame_whole(const uint8_t *in, size_t avail, uint32_t max_payload,
		   struct sw_frame_hdr *hdr);

/*
 * Size of the frame that sw_frame_pack() writes for @msg: header plus
 * packed payload. @msg may be NULL for an empty payload.
 */
size_t sw_frame_size(const ProtobufCMessage *msg);

/*
 * Write a complete frame for @msg into @out, which must hold
 * sw_frame_size(@msg) bytes; returns the bytes written.
 */
size_t sw_frame_pack(uint8_t *out, uint16_t type, uint16_t flags, uint64_t id,
		     const ProtobufCMessage *msg);

#endif
