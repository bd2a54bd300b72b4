/*
 * cdel_go: finding the go-removeall program (see cdel_go.h). Only
 * access(2) and stat(2): the caller builds or runs what was found.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdel_go.h"

static bool set(const char *s)
{
	return s && *s;
}

static bool is_program(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, X_OK) == 0;
}

static bool is_source(const char *dir)
{
	char main_go[PATH_MAX];
	struct stat st;

	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	if (snprintf(main_go, sizeof(main_go), "%s/main.go", dir) >=
	    (int)sizeof(main_go))
		return false;
	return access(main_go, R_OK) == 0;
}

static int found(struct cdel_go_loc *out, const char *path, bool prebuilt,
		 const char *how)
{
	if (snprintf(out->path, sizeof(out->path), "%s", path) >=
	    (int)sizeof(out->path))
		return -ENAMETOOLONG;
	out->prebuilt = prebuilt;
	out->how = how;
	return 0;
}

/* Rules 4 to 6: the places a build or an install puts it. */
static int find_default(const struct cdel_go_hints *h, struct cdel_go_loc *out)
{
	char dir[PATH_MAX], cand[2 * PATH_MAX];
	const char *slash;

	if (set(h->exe) && (slash = strrchr(h->exe, '/'))) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - h->exe),
			 h->exe);
		snprintf(cand, sizeof(cand), "%s/compare_delete/go-removeall",
			 dir);
		if (is_source(cand))
			return found(out, cand, false, "the build tree");
		if (set(h->rel)) {
			snprintf(cand, sizeof(cand), "%s/%s", dir, h->rel);
			if (is_source(cand))
				return found(out, cand, false,
					     "the installed tree");
		}
	}
	if (set(h->dir) && is_source(h->dir))
		return found(out, h->dir, false, "the install prefix");
	return -ENOENT;
}

int cdel_go_find(const struct cdel_go_hints *h, struct cdel_go_loc *out,
		 char *why, size_t whylen)
{
	int rc;

	why[0] = '\0';
	if (set(h->bin)) {
		if (is_program(h->bin))
			return found(out, h->bin, true, "--go-bin");
		snprintf(why, whylen, "--go-bin %.200s: not an executable file",
			 h->bin);
		return -ENOENT;
	}
	if (set(h->src)) {
		if (is_source(h->src))
			return found(out, h->src, false, "--go-src");
		snprintf(why, whylen, "--go-src %.200s: no main.go there",
			 h->src);
		return -ENOENT;
	}
	if (set(h->env)) {
		if (is_program(h->env))
			return found(out, h->env, true,
				     "$SWEEPFS_GO_REMOVEALL");
		if (is_source(h->env))
			return found(out, h->env, false,
				     "$SWEEPFS_GO_REMOVEALL");
		snprintf(why, whylen,
			 "$SWEEPFS_GO_REMOVEALL=%.200s: neither a program nor "
			 "a directory with main.go",
			 h->env);
		return -ENOENT;
	}
	rc = find_default(h, out);
	if (rc < 0)
		snprintf(why, whylen,
			 "no go-removeall program (--go-bin, --go-src or "
			 "$SWEEPFS_GO_REMOVEALL)");
	return rc;
}
