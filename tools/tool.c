#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

struct tool_opts tool_opts;

/*
 * Find the sweepfs mount containing @path in /proc/self/mountinfo: the
 * longest mount point that prefixes the resolved path, if its type is
 * fuse.sweepfs. Its source is "sweepfs:HOST[:PORT][:/sub]".
 */
static int target_from_mounts(const char *path, struct sw_target *t)
{
	char real[PATH_MAX], line[8192], best_src[4096] = "";
	size_t best_len = 0;
	FILE *f;

	if (!realpath(path, real))
		return -errno;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char mnt[4096], fstype[256], src[4096];
		char *sep = strstr(line, " - ");
		size_t n;

		/* id parent maj:min root mountpoint opts ... - type src opts */
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%255s %4095s", fstype, src) != 2)
			continue;
		n = strlen(mnt);
		if (strncmp(real, mnt, n) ||
		    (real[n] != '/' && real[n] != '\0' && n > 1))
			continue;
		if (n < best_len)
			continue;
		best_len = n;
		if (!strcmp(fstype, "fuse.sweepfs") &&
		    !strncmp(src, "sweepfs:", 8))
			snprintf(best_src, sizeof(best_src), "%s", src + 8);
		else
			best_src[0] = '\0';
	}
	fclose(f);
	if (!best_src[0])
		return -ENOENT;
	return sw_target_parse(best_src, SW_MASTER_PORT, t);
}

int tool_target(const char *path, struct sw_target *t)
{
	const char *env = getenv("SWEEPFS_MASTER");

	if (tool_opts.master)
		return sw_target_parse(tool_opts.master, SW_MASTER_PORT, t);
	if (env && *env)
		return sw_target_parse(env, SW_MASTER_PORT, t);
	if (target_from_mounts(path ? path : ".", t) == 0)
		return 0;
	return sw_target_parse("127.0.0.1", SW_MASTER_PORT, t);
}

int tool_connect(const char *path, struct sw_client **out)
{
	struct sw_target t;
	char name[300], host[256];
	int rc = tool_target(path, &t);

	if (rc < 0) {
		fprintf(stderr, "sweepfs: bad master address\n");
		return rc;
	}
	if (gethostname(host, sizeof(host)) < 0)
		strcpy(host, "?");
	snprintf(name, sizeof(name), "%s:sweepfs[%d]", host, (int)getpid());
	rc = sw_client_open(&t, SWEEPFS__ROLE__ROLE_TOOL, name, 30000, out);
	if (rc < 0)
		fprintf(stderr, "sweepfs: cannot reach the master at %s:%u: %s\n",
			t.host, t.port, strerror(-rc));
	return rc;
}

/* ---- JSON ----------------------------------------------------------- */

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->first[0] = true;
}

static void json_escaped(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_key(struct json *j, const char *key)
{
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
	if (key) {
		json_escaped(j->f, key);
		fputc(':', j->f);
	}
}

void json_obj_begin(struct json *j, const char *key)
{
	json_key(j, key);
	fputc('{', j->f);
	j->first[++j->depth] = true;
}

void json_obj_end(struct json *j)
{
	fputc('}', j->f);
	j->depth--;
	if (j->depth == 0)
		fputc('\n', j->f);
}

void json_arr_begin(struct json *j, const char *key)
{
	json_key(j, key);
	fputc('[', j->f);
	j->first[++j->depth] = true;
}

void json_arr_end(struct json *j)
{
	fputc(']', j->f);
	j->depth--;
}

void json_str(struct json *j, const char *key, const char *v)
{
	json_key(j, key);
	json_escaped(j->f, v ? v : "");
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void json_i64(struct json *j, const char *key, int64_t v)
{
	json_key(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void json_dbl(struct json *j, const char *key, double v)
{
	json_key(j, key);
	fprintf(j->f, "%.6g", v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	json_key(j, key);
	fputs(v ? "true" : "false", j->f);
}

const char *fmt_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", d, units[u]);
	return buf;
}
