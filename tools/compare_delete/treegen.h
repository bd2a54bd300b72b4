/*
 * treegen: build test trees of empty files in a few typical shapes, the
 * same for a given shape and size every time (names included), so that
 * copies built on different filesystems are identical. Used by `sweepfs
 * compare-delete` to have something to delete.
 *
 * Shapes:
 *  - flat: N files in two directories, d0 and d1 (the MooseFS test);
 *  - deep: a source tree: directories with a fan-out of 10, about
 *    TREEGEN_DEEP_FILES_PER_DIR files in each, N files in all, filled
 *    breadth first (depth 5 below the root for N = 1,000,000);
 *  - node_modules: packages of 12 files in 4 directories under
 *    node_modules/, every 8th in a scope (@scopeK/), every 10th with a
 *    nested node_modules/ of two small packages; the last one cut short
 *    so that there are exactly N files.
 */
#ifndef SWEEPFS_TOOLS_TREEGEN_H
#define SWEEPFS_TOOLS_TREEGEN_H

#include <stdint.h>

enum treegen_shape {
	TREEGEN_FLAT,
	TREEGEN_DEEP,
	TREEGEN_NODE_MODULES,
};

#define TREEGEN_DEEP_FILES_PER_DIR 16

/* "flat", "deep", "node_modules" into *@out; -EINVAL for anything else. */
int treegen_parse_shape(const char *s, enum treegen_shape *out);

const char *treegen_shape_name(enum treegen_shape shape);

/* What a tree holds; the root directory itself is not counted. */
struct treegen_count {
	uint64_t files;
	uint64_t dirs;
};

/* The files and directories treegen_build() makes for @shape and @n,
 * without making them. */
void treegen_count(enum treegen_shape shape, uint64_t n,
		   struct treegen_count *out);

/*
 * Called every 1024 files and at the end with the files made so far and
 * in all; a nonzero return stops the build with -ECANCELED.
 */
typedef int (*treegen_progress_fn)(void *arg, uint64_t done, uint64_t total);

/*
 * Make directory @name in @dirfd (it must not exist) and the tree of
 * @shape with @n files in it: empty regular files, mode 0644; directories
 * 0755. @progress may be NULL. Returns 0, or -errno from the first
 * failing call (-ENOSPC, -EDQUOT, ...) with what was made so far left in
 * place for the caller to remove.
 */
int treegen_build(int dirfd, const char *name, enum treegen_shape shape,
		  uint64_t n, treegen_progress_fn progress, void *arg);

#endif
