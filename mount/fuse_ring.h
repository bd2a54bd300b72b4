/*
 * The kernel's interface for FUSE over io_uring (protocol 7.42, Linux
 * 6.14), for systems whose <linux/fuse.h> predates it: Debian 12's has
 * protocol 7.38 and libfuse 3.14 none of it. These are the kernel's
 * definitions (include/uapi/linux/fuse.h), which are its ABI.
 */
#ifndef SWEEPFS_MOUNT_FUSE_RING_H
#define SWEEPFS_MOUNT_FUSE_RING_H

#include <linux/fuse.h>
#include <stdint.h>

#ifndef FUSE_OVER_IO_URING

/* INIT flags2 bit: the kernel offers the ring, or the daemon takes it. */
#define FUSE_OVER_IO_URING (1ULL << 41)

#define FUSE_URING_IN_OUT_HEADER_SZ 128
#define FUSE_URING_OP_IN_OUT_SZ 128

struct fuse_uring_ent_in_out {
	uint64_t flags;
	/* The id a reply to the entry's request is committed with. */
	uint64_t commit_id;
	/* Bytes of payload: the request's, then the reply's. */
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

/* An entry's header area, the first of its two iovecs. */
struct fuse_uring_req_header {
	/* struct fuse_in_header in, struct fuse_out_header out */
	char in_out[FUSE_URING_IN_OUT_HEADER_SZ];
	/* The opcode's own header (struct fuse_open_in, ...), if any. */
	char op_in[FUSE_URING_OP_IN_OUT_SZ];
	struct fuse_uring_ent_in_out ring_ent_in_out;
};

enum fuse_uring_cmd {
	FUSE_IO_URING_CMD_INVALID = 0,
	/* Give an entry to a queue. */
	FUSE_IO_URING_CMD_REGISTER = 1,
	/* Answer the entry's request, and make it ready for the next. */
	FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

/* The command, in the area of a 128-byte SQE after its first 48. */
struct fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#endif /* FUSE_OVER_IO_URING */

#ifndef FUSE_INIT_EXT
#define FUSE_INIT_EXT (1u << 30)
#endif

#endif
