/*
 * The chunkserver's registration with its master, packed: the whole
 * inventory as CsRegisterReq payloads of at most REG_MAX_CHUNKS chunks
 * and REG_MAX_BYTES each (master_link.c sends them one after the other,
 * `more` set on all but the last).
 */
#ifndef SWEEPFS_CHUNKSERVER_REGISTER_H
#define SWEEPFS_CHUNKSERVER_REGISTER_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "store.h"

/* A part holds at most this many chunks: 50,000 entries pack into about
 * a megabyte at most, and the master takes each part in one turn of its
 * loop. */
#define REG_MAX_CHUNKS 50000u
/* ... and fits a metadata frame with room to spare. */
#define REG_MAX_BYTES (SW_FRAME_MAX_META - (64u << 10))

/* One registration message, packed. */
struct reg_part {
	uint8_t *data;
	size_t len;
};

/*
 * Snapshot @st's inventory and space (it reads the store: call it off
 * the loop) and pack it for the master, naming @server_id (0: none yet)
 * and @listen, the address clients are told. Returns 0 with *@nparts
 * parts (at least one) in *@parts, which the caller frees with
 * register_parts_free(), and the chunk count in *@nchunks; or -errno
 * with nothing to free.
 */
int register_pack(struct store *st, uint64_t server_id, const char *listen,
		  struct reg_part **parts, size_t *nparts, size_t *nchunks);

/* Free @n parts at @parts and the array (NULL is fine). */
void register_parts_free(struct reg_part *parts, size_t n);

#endif
