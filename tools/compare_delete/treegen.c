/*
 * treegen: test trees of empty files.
 *
 * One generator per shape walks the tree in creation order (a directory
 * before what it holds) and hands each entry, as a path relative to the
 * tree's root, to an emit() callback. Building and counting are two
 * callbacks on the same walk, so treegen_count() cannot disagree with
 * treegen_build(). The builder keeps the descriptor of the directory it
 * created into last: the generators emit a directory's files together, so
 * a flat directory of 500,000 files costs one open, and a file costs one
 * mknodat() of a single name whatever its depth.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "treegen.h"

/* Longest relative path a generator makes (node_modules: 5 levels). */
#define TG_PATH_MAX 256

typedef int (*emit_fn)(void *ctx, bool dir, const char *path);

int treegen_parse_shape(const char *s, enum treegen_shape *out)
{
	if (!strcmp(s, "flat"))
		*out = TREEGEN_FLAT;
	else if (!strcmp(s, "deep"))
		*out = TREEGEN_DEEP;
	else if (!strcmp(s, "node_modules"))
		*out = TREEGEN_NODE_MODULES;
	else
		return -EINVAL;
	return 0;
}

const char *treegen_shape_name(enum treegen_shape shape)
{
	switch (shape) {
	case TREEGEN_FLAT:
		return "flat";
	case TREEGEN_DEEP:
		return "deep";
	case TREEGEN_NODE_MODULES:
		return "node_modules";
	}
	return "?";
}

/* ---- generators ------------------------------------------------------ */

static int gen_flat(uint64_t n, emit_fn emit, void *ctx)
{
	char path[TG_PATH_MAX];
	int rc;

	for (int d = 0; d < 2; d++) {
		uint64_t from = d ? n - n / 2 : 0, to = d ? n : n - n / 2;

		snprintf(path, sizeof(path), "d%d", d);
		if ((rc = emit(ctx, true, path)) < 0)
			return rc;
		for (uint64_t i = from; i < to; i++) {
			snprintf(path, sizeof(path), "d%d/f%08" PRIu64, d, i);
			if ((rc = emit(ctx, false, path)) < 0)
				return rc;
		}
	}
	return 0;
}

/* Path of directory @i of the deep shape ("" for the root, 0): the
 * children of k are 10k+1 .. 10k+10, named d0 .. d9. */
static void deep_path(uint64_t i, char *buf, size_t len)
{
	unsigned digits[32];
	int n = 0;
	size_t off = 0;

	for (; i > 0 && n < 32; i = (i - 1) / 10)
		digits[n++] = (unsigned)((i - 1) % 10);
	buf[0] = '\0';
	while (n-- > 0 && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%sd%u",
					off ? "/" : "", digits[n]);
}

static int gen_deep(uint64_t n, emit_fn emit, void *ctx)
{
	uint64_t ndirs = (n + TREEGEN_DEEP_FILES_PER_DIR - 1) /
			 TREEGEN_DEEP_FILES_PER_DIR;
	char dir[TG_PATH_MAX], path[TG_PATH_MAX + 32];
	int rc;

	if (ndirs == 0)
		ndirs = 1;
	for (uint64_t i = 0; i < ndirs; i++) {
		uint64_t files = n / ndirs + (i < n % ndirs);

		deep_path(i, dir, sizeof(dir));
		if (i > 0 && (rc = emit(ctx, true, dir)) < 0)
			return rc;
		for (uint64_t f = 0; f < files; f++) {
			snprintf(path, sizeof(path), "%s%sf%" PRIu64 ".c", dir,
				 i ? "/" : "", f);
			if ((rc = emit(ctx, false, path)) < 0)
				return rc;
		}
	}
	return 0;
}

/* A package's layout: directories first, then files, relative to it. */
static const char *const pkg_dirs[] = { "lib", "lib/internal", "dist" };
static const char *const pkg_files[] = {
	"package.json",	  "README.md",		"LICENSE",
	"index.js",	  "lib/index.js",	"lib/util.js",
	"lib/core.js",	  "lib/internal/a.js",	"lib/internal/b.js",
	"dist/bundle.js", "dist/bundle.min.js", "dist/bundle.min.js.map",
};
static const char *const sub_files[] = { "package.json", "index.js",
					 "lib/x.js" };

struct nm_gen {
	uint64_t n;    /* files wanted */
	uint64_t made; /* files emitted */
	emit_fn emit;
	void *ctx;
};

/* Emit directory @base/@rel (@rel may be ""), or file; stop at n files. */
static int nm_emit(struct nm_gen *g, bool dir, const char *base,
		   const char *rel)
{
	char path[TG_PATH_MAX];

	if (!dir && g->made == g->n)
		return 0;
	snprintf(path, sizeof(path), "%s%s%s", base, *rel ? "/" : "", rel);
	if (!dir)
		g->made++;
	return g->emit(g->ctx, dir, path);
}

/* Package @p: node_modules/pkgP or node_modules/@scopeK/pkgP. */
static int nm_package(struct nm_gen *g, uint64_t p)
{
	char base[TG_PATH_MAX], sub[TG_PATH_MAX + 32];
	int rc;

	if (p % 8 == 7) {
		snprintf(base, sizeof(base), "node_modules/@scope%" PRIu64,
			 p / 64);
		/* The scope's first package makes its directory. */
		if (p % 64 == 7 && (rc = nm_emit(g, true, base, "")) < 0)
			return rc;
		snprintf(base, sizeof(base),
			 "node_modules/@scope%" PRIu64 "/pkg%" PRIu64, p / 64,
			 p);
	} else {
		snprintf(base, sizeof(base), "node_modules/pkg%" PRIu64, p);
	}
	if ((rc = nm_emit(g, true, base, "")) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(pkg_dirs) / sizeof(pkg_dirs[0]); i++)
		if ((rc = nm_emit(g, true, base, pkg_dirs[i])) < 0)
			return rc;
	for (size_t i = 0; i < sizeof(pkg_files) / sizeof(pkg_files[0]); i++)
		if ((rc = nm_emit(g, false, base, pkg_files[i])) < 0)
			return rc;
	if (p % 10 != 9 || g->made == g->n)
		return 0;
	/* A nested node_modules with two small packages. */
	snprintf(sub, sizeof(sub), "%s/node_modules", base);
	if ((rc = nm_emit(g, true, sub, "")) < 0)
		return rc;
	for (int q = 0; q < 2 && g->made < g->n; q++) {
		snprintf(sub, sizeof(sub), "%s/node_modules/dep%d", base, q);
		if ((rc = nm_emit(g, true, sub, "")) < 0 ||
		    (rc = nm_emit(g, true, sub, "lib")) < 0)
			return rc;
		for (size_t i = 0; i < sizeof(sub_files) / sizeof(sub_files[0]);
		     i++)
			if ((rc = nm_emit(g, false, sub, sub_files[i])) < 0)
				return rc;
	}
	return 0;
}

static int gen_node_modules(uint64_t n, emit_fn emit, void *ctx)
{
	struct nm_gen g = { .n = n, .emit = emit, .ctx = ctx };
	int rc = emit(ctx, true, "node_modules");

	for (uint64_t p = 0; rc == 0 && g.made < n; p++)
		rc = nm_package(&g, p);
	return rc;
}

static int generate(enum treegen_shape shape, uint64_t n, emit_fn emit,
		    void *ctx)
{
	switch (shape) {
	case TREEGEN_FLAT:
		return gen_flat(n, emit, ctx);
	case TREEGEN_DEEP:
		return gen_deep(n, emit, ctx);
	case TREEGEN_NODE_MODULES:
		return gen_node_modules(n, emit, ctx);
	}
	return -EINVAL;
}

/* ---- counting -------------------------------------------------------- */

static int count_emit(void *ctx, bool dir, const char *path)
{
	struct treegen_count *c = ctx;

	(void)path;
	if (dir)
		c->dirs++;
	else
		c->files++;
	return 0;
}

void treegen_count(enum treegen_shape shape, uint64_t n,
		   struct treegen_count *out)
{
	memset(out, 0, sizeof(*out));
	generate(shape, n, count_emit, out);
}

/* ---- building -------------------------------------------------------- */

struct builder {
	int root;	       /* the tree's root */
	int fd;		       /* the directory created into last, or -1 */
	char dir[TG_PATH_MAX]; /* its path below the root */
	uint64_t files;
	uint64_t total;
	treegen_progress_fn progress;
	void *arg;
};

/* The descriptor of the directory @path (of @len bytes) below the root. */
static int builder_dir(struct builder *b, const char *path, size_t len)
{
	int fd;

	if (b->fd >= 0 && strlen(b->dir) == len && !memcmp(b->dir, path, len))
		return b->fd;
	if (len == 0) {
		fd = b->root;
	} else {
		char p[TG_PATH_MAX];

		memcpy(p, path, len);
		p[len] = '\0';
		fd = openat(b->root, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
	}
	if (b->fd >= 0 && b->fd != b->root)
		close(b->fd);
	b->fd = fd;
	memcpy(b->dir, path, len);
	b->dir[len] = '\0';
	return fd;
}

static int build_emit(void *ctx, bool dir, const char *path)
{
	struct builder *b = ctx;
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	int fd = builder_dir(b, path, slash ? (size_t)(slash - path) : 0);

	if (fd < 0)
		return fd;
	if (dir)
		return mkdirat(fd, name, 0755) < 0 ? -errno : 0;
	if (mknodat(fd, name, S_IFREG | 0644, 0) < 0)
		return -errno;
	if (++b->files % 1024 == 0 && b->progress &&
	    b->progress(b->arg, b->files, b->total))
		return -ECANCELED;
	return 0;
}

int treegen_build(int dirfd, const char *name, enum treegen_shape shape,
		  uint64_t n, treegen_progress_fn progress, void *arg)
{
	struct treegen_count count;
	struct builder b = {
		.fd = -1,
		.progress = progress,
		.arg = arg,
	};
	int rc;

	treegen_count(shape, n, &count);
	b.total = count.files;
	if (mkdirat(dirfd, name, 0755) < 0)
		return -errno;
	b.root = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (b.root < 0)
		return -errno;
	rc = generate(shape, n, build_emit, &b);
	if (b.fd >= 0 && b.fd != b.root)
		close(b.fd);
	close(b.root);
	if (rc == 0 && progress && progress(arg, b.files, b.total))
		rc = -ECANCELED;
	return rc;
}
