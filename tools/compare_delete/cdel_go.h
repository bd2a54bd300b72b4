/*
 * cdel_go: where compare-delete's go-removeall method finds Go's
 * os.RemoveAll program (go-removeall/main.go, or a program built from it).
 * Nothing about the source tree is compiled in: the program is looked for
 * by option, environment, and relative to the running binary, so that an
 * installed or relocated `sweepfs` finds its own copy.
 */
#ifndef SWEEPFS_TOOLS_CDEL_GO_H
#define SWEEPFS_TOOLS_CDEL_GO_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* What the search may use; any field may be NULL or "". */
struct cdel_go_hints {
	const char *bin; /* --go-bin: a built program */
	const char *src; /* --go-src: a directory holding main.go */
	const char *env; /* $SWEEPFS_GO_REMOVEALL: either of the two */
	const char *exe; /* the running binary's path (/proc/self/exe) */
	const char *rel; /* install layout, from the binary's directory */
	const char *dir; /* install layout, absolute (configured prefix) */
};

/* Where the program is. */
struct cdel_go_loc {
	char path[PATH_MAX]; /* a program, or a directory with main.go */
	bool prebuilt;	     /* path is a program: no go build needed */
	const char *how;     /* which rule found it (static text) */
};

/*
 * Find the program, first match wins:
 *   1. h->bin, if set: it must be an executable file;
 *   2. h->src, if set: it must be a directory holding main.go;
 *   3. h->env, if set: an executable file or such a directory;
 *   4. DIR(h->exe)/compare_delete/go-removeall (the build tree, where
 *      meson copies it next to build/tools/sweepfs);
 *   5. DIR(h->exe)/h->rel (an installed tree, however moved);
 *   6. h->dir (the configured install path).
 * An explicit choice (1 to 3) that does not hold is an error, not a reason
 * to look elsewhere. Returns 0 with *@out filled; -ENOENT (nothing found)
 * or -errno of the explicit choice that failed, with a sentence for a
 * person in @why (@whylen bytes).
 */
int cdel_go_find(const struct cdel_go_hints *h, struct cdel_go_loc *out,
		 char *why, size_t whylen);

#endif
