/*
 * The trash: removed files and trees kept for a directory's trash time.
 *
 *   sweepfs settrashtime [-r] TIME PATH...   TIME: seconds, or 30m, 12h, 7d
 *   sweepfs gettrashtime PATH...
 *   sweepfs trash ls [--json] [PATH]
 *   sweepfs trash restore ID [DEST]          back where it was, or to DEST
 *   sweepfs trash purge [--wait] ID...       free it now (--wait: until
 *                                            the master's purge is done)
 *
 * rmr --skip-trash and rmsnapshot never use the trash.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pathattr.h"
#include "progress.h"
#include "tool.h"
#include "util.h"

/* "90", "30m", "12h", "7d" into seconds; -1 when malformed. */
static int64_t parse_duration(const char *s)
{
	char *end;
	unsigned long long v;
	int64_t mul = 1;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case '\0':
	case 's':
		break;
	case 'm':
		mul = 60;
		break;
	case 'h':
		mul = 3600;
		break;
	case 'd':
		mul = 86400;
		break;
	case 'w':
		mul = 7 * 86400;
		break;
	default:
		return -1;
	}
	if (*end && end[1])
		return -1;
	if (v > UINT32_MAX / (unsigned long long)mul)
		return -1;
	return (int64_t)v * mul;
}

static int trashtime_one(const char *path, int64_t seconds, bool recursive)
{
	Sweepfs__TrashtimeReq q = SWEEPFS__TRASHTIME_REQ__INIT;
	struct pathattr_node pn;
	ProtobufCMessage *reply;
	int rc = pathattr_open(path, &pn);

	if (rc < 0)
		return rc;
	if (!S_ISDIR(pn.mode)) {
		fprintf(stderr,
			"sweepfs: %s: %s (trash time belongs to "
			"directories)\n",
			path, strerror(ENOTDIR));
		sw_client_close(pn.c);
		return -ENOTDIR;
	}
	q.cred = &pn.cred;
	q.ino = pn.ino;
	if (seconds >= 0) {
		q.has_seconds = q.has_recursive = 1;
		q.seconds = (uint32_t)seconds;
		q.recursive = recursive;
	}
	rc = tool_call(pn.c, SW_MSG_TRASHTIME, &q.base, &reply);
	if (rc == 0) {
		const Sweepfs__TrashtimeReply *r = (const void *)reply;

		if (seconds < 0)
			printf("%s: %u\n", path, r->seconds);
		else if (recursive)
			printf("%s: %" PRIu64 " directories set to %" PRId64
			       "\n",
			       path, r->changed, seconds);
		protobuf_c_message_free_unpacked(reply, NULL);
	} else {
		fprintf(stderr, "sweepfs: %s: %s\n", path, strerror(-rc));
	}
	sw_client_close(pn.c);
	return rc;
}

/* A trash time (parse_duration()), or -1 after saying what is wrong. */
static int64_t parse_trashtime(const char *arg)
{
	int64_t seconds = parse_duration(arg);

	if (seconds < 0)
		fprintf(stderr,
			"sweepfs settrashtime: bad time '%s' "
			"(seconds, or a number with s, m, h, d or w)\n",
			arg);
	return seconds;
}

static const struct pathattr trashtime_cmd = {
	.set_name = "settrashtime",
	.get_name = "gettrashtime",
	.value = "TIME",
	.parse = parse_trashtime,
	.one = trashtime_one,
};

int cmd_settrashtime(int argc, char **argv)
{
	return pathattr_set(&trashtime_cmd, argc, argv);
}

int cmd_gettrashtime(int argc, char **argv)
{
	return pathattr_get(&trashtime_cmd, argc, argv);
}

/* ---- sweepfs trash ---------------------------------------------------- */

static int trash_call(struct sw_client *c, uint32_t op, uint64_t id,
		      const uint64_t *parent, const char *name,
		      Sweepfs__TrashReply **out)
{
	Sweepfs__TrashReq q = SWEEPFS__TRASH_REQ__INIT;
	ProtobufCMessage *reply;
	struct tool_caller who;
	int rc;

	*out = NULL;
	q.cred = tool_caller(&who);
	q.op = op;
	if (op == 1) {
		/* A page of the listing: @id is the cursor. */
		q.has_after = 1;
		q.after = id;
	} else if (id) {
		q.has_id = 1;
		q.id = id;
	}
	if (parent) {
		q.has_parent = q.has_name = 1;
		q.parent = *parent;
		q.name = tool_name(name);
	}
	rc = tool_call(c, SW_MSG_TRASH, &q.base, &reply);
	if (rc == 0)
		*out = (Sweepfs__TrashReply *)reply;
	return rc;
}

static void fmt_time(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static void ls_item(struct json *j, const Sweepfs__TrashItem *it, bool *header)
{
	char del[32], exp[32];

	if (j) {
		json_obj_begin(j, NULL);
		json_u64(j, "id", it->id);
		json_str(j, "path", it->path);
		json_flag(j, "dir", it->dir);
		json_u64(j, "nodes", it->nodes);
		json_u64(j, "uid", it->uid);
		json_time_ns(j, "deleted_at", it->deleted_at);
		json_time_ns(j, "expires_at", it->expires_at);
		json_obj_end(j);
		return;
	}
	if (!*header)
		printf("%-8s %-19s %-19s %10s  %s\n", "ID", "DELETED",
		       "EXPIRES", "OBJECTS", "PATH");
	*header = true;
	fmt_time(it->deleted_at, del, sizeof(del));
	fmt_time(it->expires_at, exp, sizeof(exp));
	printf("%-8" PRIu64 " %-19s %-19s %10" PRIu64 "  %s%s\n", it->id, del,
	       exp, it->nodes, it->path, it->dir ? "/" : "");
}

/*
 * Every item the caller may list, a page at a time (the master answers
 * a page of at most 10,000 and says whether there is more, and from where
 * to go on). A master from before pages answers one page and no `more`:
 * what it sent is all there is to show. With @json nothing is printed
 * until the last page is in: a listing that fails half way prints no
 * document at all, never a valid one that lacks items; the table is
 * printed as it comes, and a failure says how far it got.
 */
static int trash_ls(struct sw_client *c, bool json)
{
	struct json j;
	uint64_t after = 0, listed = 0;
	const char *why = NULL; /* the failure, when no errno says it */
	bool header = false, more;
	int rc;

	if (json) {
		json_init(&j, stdout);
		json_obj_begin(&j, NULL);
		json_arr_begin(&j, "items");
	}
	do {
		Sweepfs__TrashReply *r;

		rc = trash_call(c, 1, after, NULL, NULL, &r);
		if (rc < 0)
			break;
		for (size_t i = 0; i < r->n_items; i++)
			ls_item(json ? &j : NULL, r->items[i], &header);
		listed += r->n_items;
		more = r->has_more && r->more;
		/* A cursor that does not move on would ask forever. */
		if (more && (!r->has_next || r->next <= after)) {
			why = "the master's listing does not move on";
			rc = -EPROTO;
			more = false;
		}
		after = r->next;
		protobuf_c_message_free_unpacked(&r->base, NULL);
	} while (more);
	if (rc < 0) {
		fprintf(stderr,
			"sweepfs trash ls: the listing failed after %" PRIu64
			" items: %s%s\n",
			listed, why ? why : strerror(-rc),
			json ? "; no JSON printed" :
			       "; the list above is short");
		if (json)
			json_discard(&j);
		return rc;
	}
	if (json) {
		json_arr_end(&j);
		json_obj_end(&j);
	}
	return 0;
}

static int parse_id(const char *s, uint64_t *id)
{
	char *end;

	errno = 0;
	*id = strtoull(s, &end, 10);
	if (errno || *end || !*s || !*id) {
		fprintf(stderr, "sweepfs trash: bad id '%s'\n", s);
		return -EINVAL;
	}
	return 0;
}

static int trash_restore(struct sw_client *c, const char *idstr,
			 const char *dest)
{
	Sweepfs__TrashReply *r;
	char rel[PATH_MAX], name[256];
	uint64_t id, parent;
	struct sw_target t;
	int rc = parse_id(idstr, &id);

	if (rc < 0)
		return rc;
	if (dest) {
		/* DEST names the new entry; its directory must exist. */
		char tmp[PATH_MAX];

		snprintf(tmp, sizeof(tmp), "%s", dest);
		rc = tool_locate(dirname(tmp), &t, rel, sizeof(rel));
		if (rc == 0) {
			uint32_t mode;

			snprintf(tmp, sizeof(tmp), "%s", dest);
			snprintf(name, sizeof(name), "%s", basename(tmp));
			rc = tool_resolve(c, rel, &parent, &mode);
			if (rc == 0 && !S_ISDIR(mode))
				rc = -ENOTDIR;
		}
		if (rc < 0) {
			fprintf(stderr, "sweepfs trash restore: %s: %s\n", dest,
				rc == -ENOENT ? "no such directory on sweepfs" :
				rc == -EXDEV  ? "not on a sweepfs mount" :
						strerror(-rc));
			return rc;
		}
	}
	rc = trash_call(c, 2, id, dest ? &parent : NULL, name, &r);
	if (rc < 0) {
		fprintf(stderr, "sweepfs trash restore: %s: %s%s\n", idstr,
			strerror(-rc),
			rc == -EEXIST ?
				" (give a new name: restore ID DEST)" :
			rc == -ENOENT && !dest ?
				" (no such item)" :
			rc == -ENOTDIR && !dest ?
				" (a name on its path is no directory now: "
				"restore ID DEST)" :
				"");
		return rc;
	}
	if (r->made_dirs)
		fprintf(stderr,
			"sweepfs trash restore: %s: its directory was gone: "
			"made %u directories again\n",
			idstr, r->made_dirs);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return 0;
}

/* trash purge [-w|--wait] ID...: with a progress line over the items, and
 * with --wait another over the master's purge that frees them. */
static int trash_purge(int argc, char **argv)
{
	struct progress p;
	struct sw_client *c;
	int rc, n = 0, status = 0;
	bool wait = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-w") || !strcmp(argv[i], "--wait"))
			wait = true;
		else
			argv[++n] = argv[i];
	}
	if (n == 0) {
		fprintf(stderr, "usage: sweepfs trash purge [--wait] ID...\n");
		return 2;
	}
	if (tool_connect(NULL, &c) < 0)
		return 1;
	progress_start(&p, "trash purge", "items", (uint64_t)n);
	for (int i = 1; i <= n; i++) {
		Sweepfs__TrashReply *r;
		uint64_t id;

		progress_update(&p, (uint64_t)i - 1);
		if (parse_id(argv[i], &id) < 0) {
			status = 1;
			continue;
		}
		rc = trash_call(c, 3, id, NULL, NULL, &r);
		if (rc < 0) {
			fprintf(stderr, "sweepfs trash purge: %s: %s\n",
				argv[i], strerror(-rc));
			status = 1;
			continue;
		}
		protobuf_c_message_free_unpacked(&r->base, NULL);
	}
	progress_end(&p, (uint64_t)n);
	if (wait && status == 0 && tool_wait_purge(c, "the trash", 0, 0) < 0)
		status = 1;
	sw_client_close(c);
	return status;
}

int cmd_trash(int argc, char **argv)
{
	const char *path = NULL;
	struct sw_client *c;
	bool json = false;
	int rc;

	if (argc < 2)
		goto usage;
	if (!strcmp(argv[1], "ls") || !strcmp(argv[1], "list")) {
		for (int i = 2; i < argc; i++) {
			if (!strcmp(argv[i], "--json"))
				json = true;
			else if (argv[i][0] != '-' && !path)
				path = argv[i];
			else
				goto usage;
		}
		if ((rc = tool_connect(path, &c)) < 0)
			return 1;
		rc = trash_ls(c, json);
		sw_client_close(c);
		return rc < 0;
	}
	if (!strcmp(argv[1], "restore")) {
		if (argc != 3 && argc != 4)
			goto usage;
		char dir[PATH_MAX];

		/* The master of DEST's mount when given, else the cwd's. */
		snprintf(dir, sizeof(dir), "%s", argc == 4 ? argv[3] : ".");
		if ((rc = tool_connect(argc == 4 ? dirname(dir) : NULL, &c)) <
		    0)
			return 1;
		rc = trash_restore(c, argv[2], argc == 4 ? argv[3] : NULL);
		sw_client_close(c);
		return rc < 0;
	}
	if (!strcmp(argv[1], "purge"))
		return trash_purge(argc - 1, argv + 1);
usage:
	fprintf(stderr, "usage: sweepfs trash ls [--json] [PATH]\n"
			"       sweepfs trash restore ID [DEST]\n"
			"       sweepfs trash purge [--wait] ID...\n");
	return 2;
}
