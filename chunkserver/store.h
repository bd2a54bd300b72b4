/*
 * store: the chunks a chunkserver holds, as files under its data
 * directories: <dir>/<xx>/chunk_<016 hex id>_<08 hex version>.swc, with xx
 * the low byte of the chunk id in hex. The format of one file is
 * chunkfile.h's.
 *
 * The store keeps the inventory in memory (one entry per chunk: id,
 * version, length, directory), a bounded cache of open chunk files, and
 * the space of each directory. Every function here may block on the disk:
 * call them from worker threads, never from the event loop (store_open()
 * and store_close() run before and after it). They are thread-safe: any
 * number of operations may run at once; operations on one chunk are
 * serialised as needed (reads share it, everything else has it alone).
 *
 * Errors, besides -errno of the system calls: -ENOENT no such chunk,
 * -ESTALE the chunk is there at another version, -EEXIST it is there
 * already, -EINVAL an offset or length outside the chunk, -EBADMSG a block
 * failed its checksum (the chunk is then marked damaged), -ENOSPC no data
 * directory has room.
 */
#ifndef SWEEPFS_CHUNKSERVER_STORE_H
#define SWEEPFS_CHUNKSERVER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

struct store_opts {
	const char *const *dirs; /* data directories; they must exist */
	size_t ndirs;
	unsigned max_open; /* chunk files kept open when idle */
	uint64_t reserve;  /* free bytes to leave in each directory */
};

/* One chunk, as the inventory has it. */
struct store_chunk_info {
	uint64_t chunk_id;
	uint32_t version;
	uint32_t length;
	bool damaged; /* a checksum failed since start-up */
};

/*
 * Open the store over @o->dirs (copied) and scan them: chunk files with a
 * bad header are moved to <dir>/damaged/, leftovers of interrupted
 * operations (*.tmp) are removed, of two versions of one chunk the older
 * is deleted, other files are left alone. Returns 0 and the store in
 * *@out, to be freed with store_close(), or -errno.
 */
int store_open(const struct store_opts *o, struct store **out);

/*
 * Flush everything to disk (syncfs of each directory), close all files
 * and free @s. No operation may be running. NULL is fine.
 */
void store_close(struct store *s);

/* Create chunk @id at @version, empty. -EEXIST if it exists. */
int store_create(struct store *s, uint64_t id, uint32_t version);

/*
 * Read up to @size bytes at @off of chunk @id at @version into @buf.
 * Returns the bytes read (fewer past the chunk's length), or -errno.
 */
int store_read(struct store *s, uint64_t id, uint32_t version, uint32_t off,
	       uint32_t size, uint8_t *buf);

/* Write @size bytes of @data at @off. Returns 0 or -errno. */
int store_write(struct store *s, uint64_t id, uint32_t version, uint32_t off,
		const uint8_t *data, uint32_t size);

/* fdatasync the chunk's file. Returns 0 or -errno. */
int store_sync(struct store *s, uint64_t id, uint32_t version);

/* Set the chunk's length (grow with zeros or shrink). 0 or -errno. */
int store_truncate(struct store *s, uint64_t id, uint32_t version,
		   uint32_t length);

/*
 * Move chunk @id from @old_version to @version, truncating it to @length
 * first when @length >= 0. The header is rewritten, then the file renamed
 * (the rename is the commit: the scan trusts the name). Durable on return.
 * Returns 0 or -errno.
 */
int store_set_version(struct store *s, uint64_t id, uint32_t old_version,
		      uint32_t version, int64_t length);

/*
 * Copy chunk @src_id at @src_version into a new chunk @id at @version
 * (reflink when the file system can, else copy_file_range, else read and
 * write; holes stay holes). Durable on return. 0 or -errno.
 */
int store_duplicate(struct store *s, uint64_t src_id, uint32_t src_version,
		    uint64_t id, uint32_t version);

/*
 * Delete chunk @id if its version is @version or older (-ESTALE if it is
 * newer). Returns 0 or -errno.
 */
int store_delete(struct store *s, uint64_t id, uint32_t version);

/*
 * Fetch @size bytes at @off of the chunk being imported into @buf.
 * Returns the bytes fetched (fewer than @size only at the chunk's end) or
 * -errno.
 */
typedef int (*store_fetch_fn)(void *arg, uint32_t off, uint8_t *buf,
			      uint32_t size);

/*
 * Build chunk @id at @version from what @fetch returns, SW_IO_MAX bytes at
 * a time from offset 0 until a short answer; all-zero blocks stay holes.
 * The chunk appears only when complete and durable; an older version is
 * replaced then. -EEXIST if @version or newer is here already.
 */
int store_import(struct store *s, uint64_t id, uint32_t version,
		 store_fetch_fn fetch, void *arg);

/*
 * A snapshot of the inventory: *@out (free(3) it) gets *@n entries.
 * Returns 0 or -ENOMEM.
 */
int store_inventory(struct store *s, struct store_chunk_info **out, size_t *n);

/* The inventory entry of chunk @id, or -ENOENT. */
int store_stat(struct store *s, uint64_t id, struct store_chunk_info *out);

/* Chunks in the inventory. */
size_t store_count(struct store *s);

/* Chunk files open now (the cache's bound plus those in use). */
unsigned store_open_files(struct store *s);

/* Ask the file systems for their space again (statvfs). */
void store_refresh_space(struct store *s);

/*
 * Space of the file systems under the data directories, each counted
 * once, as of the last refresh: @total bytes net of the reserve (so
 * @total - @used is what chunks may still take; 0 or less: none) and
 * @used bytes; @chunk_bytes, the logical bytes of all chunks. Any
 * pointer may be NULL.
 */
void store_space(struct store *s, uint64_t *total, uint64_t *used,
		 uint64_t *chunk_bytes);

/* One data directory's space and chunks, as of the last refresh. */
struct store_dir_info {
	const char *path;
	uint64_t total, avail;	/* bytes of its file system */
	uint64_t chunks, bytes; /* chunks in it, their logical bytes */
};

/* Data directory @i (< the number opened) into *@out. */
void store_dir_info(struct store *s, size_t i, struct store_dir_info *out);

/*
 * The path of chunk @id at @version relative to its data directory,
 * "xx/chunk_<id>_<version>.swc", into @buf (at least 40 bytes).
 */
void store_relpath(char *buf, size_t len, uint64_t id, uint32_t version);

#endif
