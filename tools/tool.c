/*
 * The sweepfs command's shared parts: finding the master (-m,
 * $SWEEPFS_MASTER, the mount a path is on), connecting with reasons a
 * person can act on, walking paths on the master, the exit statuses
 * (tool.h), a progress line, JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <json-c/json.h>

#include "auth.h"
#include "progress.h"
#include "tool.h"
#include "util.h"

struct tool_opts tool_opts;

/* The run's first precise failure (tool_record()), or TOOL_OK. */
static enum tool_exit recorded;

void tool_record(enum tool_exit st)
{
	if (recorded == TOOL_OK)
		recorded = st;
}

int tool_record_errno(int rc)
{
	switch (-rc) {
	case ECONNREFUSED:
	case ECONNRESET:
	case EPIPE:
	case ETIMEDOUT:
	case ENOTCONN:
	case EHOSTUNREACH:
	case ENETUNREACH:
		tool_record(TOOL_MASTER_DOWN);
		break;
	case EACCES:
	case EPERM:
	case ENOKEY:
	case EKEYREJECTED:
		tool_record(TOOL_DENIED);
		break;
	}
	return rc;
}

int tool_exit_status(int rc)
{
	if (rc == TOOL_FAILED && recorded != TOOL_OK)
		return recorded;
	return rc;
}

/*
 * The sweepfs mount holding @path: the longest mount point in
 * /proc/self/mountinfo that prefixes the resolved path, if its type is
 * fuse.sweepfs (its source is "sweepfs:HOST[:PORT][:/sub]", or a list,
 * "sweepfs:H1:P1,H2:P2[:/sub]": commas are plain in mountinfo, which
 * escapes only blanks and backslashes as octal). Fills the
 * master's address and, in @rel (may be NULL), the path below the mount
 * point ("" for the mount point itself).
 */
static int find_mount(const char *path, struct sw_target *t, char *rel,
		      size_t rellen, char *mntpt, size_t mntlen)
{
	char real[PATH_MAX], line[8192], best_src[4096] = "";
	char best_mnt[4096] = "";
	size_t best_len = 0;
	FILE *f;
	int rc;

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
		snprintf(best_mnt, sizeof(best_mnt), "%s", mnt);
		if (!strcmp(fstype, "fuse.sweepfs") &&
		    !strncmp(src, "sweepfs:", 8))
			snprintf(best_src, sizeof(best_src), "%s", src + 8);
		else
			best_src[0] = '\0';
	}
	fclose(f);
	if (!best_src[0])
		return -EXDEV;
	rc = sw_target_parse(best_src, SW_MASTER_PORT, t);
	if (rc == 0 && rel) {
		const char *r = real + (best_len > 1 ? best_len : 0);

		while (*r == '/')
			r++;
		snprintf(rel, rellen, "%s", r);
	}
	if (rc == 0 && mntpt)
		snprintf(mntpt, mntlen, "%s", best_mnt);
	return rc;
}

static int target_from_mounts(const char *path, struct sw_target *t)
{
	return find_mount(path, t, NULL, 0, NULL, 0);
}

/* The explicit master (-m, else $SWEEPFS_MASTER) as the user wrote it,
 * and which of the two it came from; NULL if none. */
static const char *explicit_master(const char **from)
{
	const char *env = getenv("SWEEPFS_MASTER");

	if (tool_opts.master) {
		*from = "-m";
		return tool_opts.master;
	}
	*from = "$SWEEPFS_MASTER";
	return env && *env ? env : NULL;
}

/* @id as 32 hex digits into @hex. */
static void cluster_hex(const uint8_t id[SW_CLUSTER_ID_LEN],
			char hex[2 * SW_CLUSTER_ID_LEN + 1])
{
	for (size_t i = 0; i < SW_CLUSTER_ID_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

/*
 * The identity of the cluster the mount on @mnt talks to: its root's
 * virtual xattr (mount/ops.c). 0, or -errno (-ENODATA, -ENOTSUP: the
 * mount or its master is too old to say).
 */
static int mount_cluster_id(const char *mnt, uint8_t id[SW_CLUSTER_ID_LEN])
{
	char hex[2 * SW_CLUSTER_ID_LEN + 1];
	ssize_t n = getxattr(mnt, "sweepfs.cluster_id", hex, sizeof(hex) - 1);

	if (n < 0)
		return -errno;
	if (n != 2 * SW_CLUSTER_ID_LEN)
		return -EPROTO;
	for (size_t i = 0; i < SW_CLUSTER_ID_LEN; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -EPROTO;
		id[i] = (uint8_t)v;
	}
	return 0;
}

/*
 * The identity of the cluster whose master @t names, from its hello:
 * 0, -ENODATA (a master too old to say), or -errno from connecting (said
 * and recorded).
 */
static int master_cluster_id(const struct sw_target *t,
			     uint8_t id[SW_CLUSTER_ID_LEN])
{
	struct sw_client *c;
	int rc = tool_connect_target(t, &c);

	if (rc < 0)
		return rc;
	rc = c->has_cluster_id ? 0 : -ENODATA;
	if (rc == 0)
		memcpy(id, c->cluster_id, SW_CLUSTER_ID_LEN);
	sw_client_close(c);
	return rc;
}

/*
 * Whether @path, on the mount at @mnt whose master is @mt, and the
 * explicit master @et (written @addr, given by @from) name one cluster.
 * 0 if they do; else one line said why and -EREMCHG, recorded.
 */
static int same_cluster(const char *path, const char *mnt,
			const struct sw_target *mt, const struct sw_target *et,
			const char *addr, const char *from)
{
	uint8_t pid[SW_CLUSTER_ID_LEN], eid[SW_CLUSTER_ID_LEN];
	char ph[2 * SW_CLUSTER_ID_LEN + 1], eh[2 * SW_CLUSTER_ID_LEN + 1];
	int rc = mount_cluster_id(mnt, pid);

	/* A mount from before identities: ask its master. */
	if (rc < 0 && rc != -ENODATA && rc != -ENOTSUP && rc != -EPROTO)
		fprintf(stderr, "sweepfs: %s: cannot read its cluster: %s\n",
			mnt, strerror(-rc));
	else if (rc < 0)
		rc = master_cluster_id(mt, pid);
	if (rc == 0)
		rc = master_cluster_id(et, eid);
	if (rc == -ENODATA) {
		fprintf(stderr,
			"sweepfs: %s: cannot tell whether %s %s serves the "
			"same cluster as the mount (a master too old to "
			"say); refusing: drop %s to act on the path's "
			"cluster\n",
			path, from, addr, from);
		tool_record(TOOL_OTHER_CLUSTER);
	}
	if (rc < 0)
		return -EREMCHG; /* said, and recorded */
	if (memcmp(pid, eid, sizeof(pid)) == 0)
		return 0;
	cluster_hex(pid, ph);
	cluster_hex(eid, eh);
	fprintf(stderr,
		"sweepfs: %s is on cluster %s (mount %s) but %s %s is "
		"cluster %s: refusing; drop %s to act on the path's "
		"cluster\n",
		path, ph, mnt, from, addr, eh, from);
	tool_record(TOOL_OTHER_CLUSTER);
	return -EREMCHG;
}

/* --fs-path: @path below the export's root on the explicit master. */
static int locate_fs_path(const char *path, struct sw_target *t, char *rel,
			  size_t rellen)
{
	const char *from, *addr = explicit_master(&from);
	int rc;

	if (!addr) {
		fprintf(stderr, "sweepfs: --fs-path needs the master: -m or "
				"$SWEEPFS_MASTER\n");
		tool_record(TOOL_USAGE);
		return -EDESTADDRREQ;
	}
	rc = tool_target(NULL, t);
	if (rc < 0)
		return -EDESTADDRREQ; /* tool_target() said why */
	while (*path == '/')
		path++;
	if (strlen(path) >= rellen)
		return -ENAMETOOLONG;
	/* No mount resolves it: "." and ".." would be names to the master. */
	for (const char *p = path; *p; p += strcspn(p, "/"), p += *p == '/') {
		size_t n = strcspn(p, "/");

		if ((n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.')) {
			fprintf(stderr,
				"sweepfs: --fs-path %s: '.' and '..' are not "
				"taken in a path inside the filesystem\n",
				path);
			tool_record(TOOL_USAGE);
			return -EDESTADDRREQ;
		}
	}
	snprintf(rel, rellen, "%s", path);
	return 0;
}

int tool_locate(const char *path, struct sw_target *t, char *rel, size_t rellen)
{
	char mnt[4096];
	const char *from, *addr;
	struct sw_target et;
	int rc;

	if (tool_opts.fs_path)
		return locate_fs_path(path, t, rel, rellen);
	rc = find_mount(path, t, rel, rellen, mnt, sizeof(mnt));
	if (rc == -EXDEV)
		tool_record(TOOL_NOT_SWEEPFS);
	addr = explicit_master(&from);
	if (rc < 0 || !addr)
		return rc;
	rc = tool_target(path, &et);
	if (rc < 0)
		return -EREMCHG; /* tool_target() said why */
	rc = same_cluster(path, mnt, t, &et, addr, from);
	if (rc < 0)
		return rc;
	/* The same cluster, through the address asked for (a list of a
	 * group's masters, say), with the mount's export path. */
	snprintf(et.subdir, sizeof(et.subdir), "%s", t->subdir);
	*t = et;
	return 0;
}

bool tool_is_dot_path(const char *path)
{
	size_t n = strlen(path), b;

	while (n > 1 && path[n - 1] == '/')
		n--;
	for (b = n; b > 0 && path[b - 1] != '/'; b--)
		;
	return (n - b == 1 && path[b] == '.') ||
	       (n - b == 2 && path[b] == '.' && path[b + 1] == '.');
}

void tool_cred(Sweepfs__Cred *c, uint32_t *groups, size_t cap)
{
	gid_t list[256];
	int n = getgroups((int)SW_MIN(cap, SW_ARRAY_SIZE(list)), list);

	sweepfs__cred__init(c);
	c->uid = (uint32_t)geteuid();
	c->gid = (uint32_t)getegid();
	c->groups = groups;
	for (int i = 0; i < n; i++)
		groups[i] = (uint32_t)list[i];
	c->n_groups = n > 0 ? (size_t)n : 0;
}

Sweepfs__Cred *tool_caller(struct tool_caller *tc)
{
	tool_cred(&tc->cred, tc->groups, SW_ARRAY_SIZE(tc->groups));
	return &tc->cred;
}

const char *tool_admin_refusal(void)
{
	static char why[200];
	uid_t uid = geteuid();

	if (uid != 0)
		snprintf(why, sizeof(why),
			 "only root may do this, on a client whose export "
			 "has the admin option; this process runs as uid %u",
			 (unsigned)uid);
	else
		snprintf(why, sizeof(why),
			 "this client's export gives root no admin rights "
			 "over the whole filesystem (that needs the admin "
			 "option, maproot=0 and the export of /)");
	return why;
}

ProtobufCBinaryData tool_name(const char *name)
{
	return (ProtobufCBinaryData){ .len = strlen(name),
				      .data = (uint8_t *)name };
}

int tool_walk(struct sw_client *c, const char *rel, uint64_t *parent,
	      char *name, size_t namelen)
{
	char copy[PATH_MAX], *save, *tok, *next;
	uint64_t dir = c->root_ino;
	struct tool_caller who;

	tool_caller(&who);
	snprintf(copy, sizeof(copy), "%s", rel);
	tok = strtok_r(copy, "/", &save);
	if (!tok)
		return -EINVAL; /* the export's root itself */
	for (;;) {
		Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
		ProtobufCMessage *reply;
		int rc;

		next = strtok_r(NULL, "/", &save);
		if (!next) {
			*parent = dir;
			snprintf(name, namelen, "%s", tok);
			return strlen(tok) < namelen ? 0 : -ENAMETOOLONG;
		}
		q.cred = &who.cred;
		q.parent = dir;
		q.name = tool_name(tok);
		rc = sw_client_call(c, SW_MSG_LOOKUP, &q.base, &reply);
		if (rc < 0)
			return tool_record_errno(rc);
		rc = sw_reply_err(reply);
		if (rc == 0)
			dir = ((Sweepfs__EntryReply *)reply)->attr->ino;
		protobuf_c_message_free_unpacked(reply, NULL);
		if (rc < 0)
			return tool_record_errno(rc);
		tok = next;
	}
}

/* One line for an address that does not parse; TOOL_BAD_MASTER. */
static void tool_bad_address(const char *from, const char *addr)
{
	fprintf(stderr,
		"sweepfs: bad master address '%s' (%s): expected "
		"HOST[:PORT], or a list HOST[:PORT],HOST[:PORT],... of at "
		"most %d\n",
		addr, from, SW_TARGET_MAX);
	tool_record(TOOL_BAD_MASTER);
}

int tool_target(const char *path, struct sw_target *t)
{
	const char *env = getenv("SWEEPFS_MASTER");

	int rc;

	if (tool_opts.master) {
		rc = sw_target_parse(tool_opts.master, SW_MASTER_PORT, t);
		if (rc < 0)
			tool_bad_address("-m", tool_opts.master);
		return rc;
	}
	if (env && *env) {
		rc = sw_target_parse(env, SW_MASTER_PORT, t);
		if (rc < 0)
			tool_bad_address("$SWEEPFS_MASTER", env);
		return rc;
	}
	if (target_from_mounts(path ? path : ".", t) == 0)
		return 0;
	return sw_target_parse("127.0.0.1", SW_MASTER_PORT, t);
}

int tool_connect(const char *path, struct sw_client **out)
{
	struct sw_target t;
	int rc = tool_target(path, &t);

	if (rc < 0)
		return rc; /* tool_target() said why */
	return tool_connect_target(&t, out);
}

/*
 * Whether the master's host name resolves: sw_client_open() reports an
 * unknown host as -EHOSTUNREACH, like a host that does not answer, and
 * the two call for different fixes. -ENXIO (said and recorded) if not.
 */
static int tool_resolve_host(const struct sw_target *t)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	unsigned n = SW_MAX(t->naddrs, 1u);
	int rc = 0;

	/* A list is fine while one of its names resolves: a group member
	 * may be gone with its name. */
	for (unsigned i = 0; i < n; i++) {
		rc = getaddrinfo(t->naddrs ? t->addrs[i].host : t->host, NULL,
				 &hints, &res);
		if (rc == 0) {
			freeaddrinfo(res);
			return 0;
		}
		if (rc == EAI_AGAIN || rc == EAI_SYSTEM || rc == EAI_MEMORY)
			return 0; /* not the address's fault: let connect say */
	}
	fprintf(stderr, "sweepfs: bad master address '%s': %s\n", t->host,
		gai_strerror(rc));
	tool_record(TOOL_BAD_MASTER);
	return -ENXIO;
}

/* One line saying why connecting to @t failed with @rc, recorded. */
static void tool_connect_failed(const struct sw_target *t, int rc)
{
	const char *hint = "";
	char where[SW_TARGET_MAX * (SW_ADDR_STRLEN + 1)];

	sw_target_list_str(t, where, sizeof(where));
	if (rc == -EREMOTE) {
		fprintf(stderr,
			"sweepfs: no master of %s leads (an election under "
			"way, or no majority up?)\n",
			where);
		tool_record(TOOL_MASTER_DOWN);
		return;
	}

	switch (-rc) {
	case EPROTOTYPE:
		fprintf(stderr,
			"sweepfs: %s is a sweepfs chunkserver, not a master: "
			"a wrong port? (the master's is %d by default)\n",
			where, SW_MASTER_PORT);
		tool_record(TOOL_BAD_MASTER);
		return;
	case ECONNREFUSED:
		hint = " (is sweepfs-master running there, on that port?)";
		tool_record(TOOL_MASTER_DOWN);
		break;
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ECONNRESET:
	case EPIPE:
		hint = " (is the master up, and the network between?)";
		tool_record(TOOL_MASTER_DOWN);
		break;
	case EACCES:
	case EPERM:
		fprintf(stderr,
			"sweepfs: the master at %s refuses this client: "
			"no exports rule allows this address%s\n",
			where,
			t->subdir[0] && strcmp(t->subdir, "/") ?
				" for this directory" :
				"");
		tool_record(TOOL_DENIED);
		return;
	case ENOKEY:
	case EKEYREJECTED:
		fprintf(stderr,
			"sweepfs: the master at %s refuses this client: the "
			"export wants a password, and %s\n",
			where,
			rc == -ENOKEY ?
				"none was given ($SWEEPFS_PASSWORD_FILE)" :
				"the one given is wrong");
		tool_record(TOOL_DENIED);
		return;
	default:
		/* A frame we cannot read, a hello we do not understand. */
		fprintf(stderr,
			"sweepfs: %s does not answer as a sweepfs master "
			"(%s): a wrong address or port?\n",
			where, strerror(-rc));
		tool_record(TOOL_BAD_MASTER);
		return;
	}
	fprintf(stderr, "sweepfs: cannot reach the master at %s: %s%s\n", where,
		strerror(-rc), hint);
}

int tool_connect_target(const struct sw_target *tp, struct sw_client **out)
{
	struct sw_target t = *tp;
	char name[300], host[256], pw[256];
	int rc;

	sw_net_bind = getenv("SWEEPFS_BIND");
	/* For exports with a password: $SWEEPFS_PASSWORD_FILE, else
	 * $SWEEPFS_PASSWORD. */
	rc = sw_auth_password(getenv("SWEEPFS_PASSWORD_FILE"), pw, sizeof(pw));
	if (rc < 0) {
		fprintf(stderr, "sweepfs: $SWEEPFS_PASSWORD_FILE: %s\n",
			strerror(-rc));
		return rc;
	}
	if (rc > 0)
		sw_target_password(&t, pw);
	explicit_bzero(pw, sizeof(pw));
	if (gethostname(host, sizeof(host)) < 0)
		strcpy(host, "?");
	snprintf(name, sizeof(name), "%s:sweepfs[%d]", host, (int)getpid());
	rc = tool_resolve_host(&t);
	if (rc == 0)
		rc = sw_client_open(&t, SWEEPFS__ROLE__ROLE_TOOL, name, 30000,
				    out);
	/* A chunkserver answers a hello too (it serves tools' and mounts'
	 * data): one that says it is not a master is not used as one. */
	if (rc == 0 && (*out)->peer_role &&
	    (*out)->peer_role != SWEEPFS__ROLE__ROLE_MASTER) {
		sw_client_close(*out);
		*out = NULL;
		rc = -EPROTOTYPE;
	}
	if (rc < 0 && rc != -ENXIO)
		tool_connect_failed(&t, rc);
	return rc;
}

/* ---- JSON ----------------------------------------------------------- */

/*
 * The document is built as a json-c tree and printed whole when its
 * outermost object or array ends. json-c writes strings byte for byte,
 * and a file name is any bytes, so a byte that is not part of
 * well-formed UTF-8 must be escaped before: as the lone surrogate \udcXX,
 * as Python's surrogateescape does (json.loads() reads it; .encode(
 * "utf-8", "surrogateescape") has the bytes back). json-c cannot write
 * that escape, so such a byte goes into the tree as the marker U+0001
 * and two hex digits, a real U+0001 as the marker and "01", and
 * json_print() rewrites the marker's escape (json-c writes U+0001 as
 * \u0001, always) into the one meant.
 */
#define JSON_MARK 0x01

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
}

/*
 * The length of the UTF-8 sequence at @s (1 to 4), or 0 if it is not a
 * well-formed one (overlong forms, surrogates and values past U+10FFFF
 * included), per RFC 3629.
 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned c = s[0], n, min, v;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, min = 0x80, v = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, min = 0x800, v = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, min = 0x10000, v = c & 0x07;
	else
		return 0;
	for (unsigned i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	return n;
}

/* @str with its bytes outside UTF-8 (and JSON_MARK) marked, as above;
 * the caller frees it. NULL: no memory. */
static char *json_marked(const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	char *out = malloc(3 * strlen((const char *)s) + 1), *o = out;

	if (!out)
		return NULL;
	while (*s) {
		size_t n = utf8_len(s);

		if (n == 0 || *s == JSON_MARK) {
			o += sprintf(o, "%c%02x", JSON_MARK, *s);
			s++;
		} else {
			memcpy(o, s, n);
			o += n;
			s += n;
		}
	}
	*o = '\0';
	return out;
}

/* Print @text (json-c's) with each marked byte's escape rewritten. */
static void json_print(FILE *f, const char *text)
{
	static const char mark[] = "\\u0001";

	while (*text) {
		const char *e = strchr(text, '\\');

		if (!e) {
			fputs(text, f);
			return;
		}
		fwrite(text, 1, (size_t)(e - text), f);
		if (!strncmp(e, mark, 6) && e[6] && e[7]) {
			if (!strncmp(e + 6, "01", 2))
				fputs(mark, f);
			else
				fprintf(f, "\\udc%.2s", e + 6);
			text = e + 8;
		} else if (e[1] == 'u') {
			fwrite(e, 1, 6, f);
			text = e + 6;
		} else {
			fwrite(e, 1, 2, f); /* \" \\ \n ... */
			text = e + 2;
		}
	}
}

/* Put @v (NULL: null) into the open container under @key. */
static void json_put(struct json *j, const char *key, struct json_object *v)
{
	struct json_object *top = j->depth ? j->stack[j->depth - 1] : NULL;
	char *k;

	if (!top) {
		json_object_put(v); /* nothing open: a bug, not output */
		return;
	}
	if (json_object_is_type(top, json_type_array)) {
		json_object_array_add(top, v);
		return;
	}
	k = json_marked(key);
	if (!k || json_object_object_add(top, k, v) < 0)
		json_object_put(v);
	free(k);
}

static void json_open(struct json *j, const char *key, struct json_object *c)
{
	if (!c)
		return; /* no memory: the output is short, not wrong */
	if (j->depth)
		json_put(j, key, json_object_get(c));
	if (j->depth == (int)SW_ARRAY_SIZE(j->stack)) {
		json_object_put(c);
		return;
	}
	j->stack[j->depth++] = c;
}

/* Close the innermost container; the outermost is printed, a line. */
static void json_close(struct json *j)
{
	struct json_object *c;

	if (!j->depth)
		return;
	c = j->stack[--j->depth];
	if (!j->depth) {
		json_print(j->f,
			   json_object_to_json_string_ext(
				   c, JSON_C_TO_STRING_PLAIN |
					      JSON_C_TO_STRING_NOSLASHESCAPE));
		fputc('\n', j->f);
	}
	json_object_put(c);
}

void json_obj_begin(struct json *j, const char *key)
{
	json_open(j, key, json_object_new_object());
}

void json_obj_end(struct json *j)
{
	json_close(j);
}

void json_arr_begin(struct json *j, const char *key)
{
	json_open(j, key, json_object_new_array());
}

void json_arr_end(struct json *j)
{
	json_close(j);
}

void json_discard(struct json *j)
{
	/* Each inner container is held by its parent too: the outermost
	 * goes last and frees the tree. */
	while (j->depth)
		json_object_put(j->stack[--j->depth]);
}

void json_str(struct json *j, const char *key, const char *v)
{
	char *m = json_marked(v);

	json_put(j, key, m ? json_object_new_string(m) : NULL);
	free(m);
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	json_put(j, key, json_object_new_uint64(v));
}

void json_i64(struct json *j, const char *key, int64_t v)
{
	json_put(j, key, json_object_new_int64(v));
}

void json_dbl(struct json *j, const char *key, double v)
{
	char buf[40];

	if (!isfinite(v)) {
		json_put(j, key, NULL); /* JSON has no NaN or infinity */
		return;
	}
	/* The shortest form that reads back as the same double: never
	 * "1.79588e+09" for a time. json-c writes this text as it is. */
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	json_put(j, key, json_object_new_double_s(v, buf));
}

void json_time_ns(struct json *j, const char *key, int64_t ns)
{
	uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	char frac[16], buf[48];
	int n;

	n = snprintf(frac, sizeof(frac), "%09" PRIu64, a % 1000000000u);
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	snprintf(buf, sizeof(buf), "%s%" PRIu64 "%s%s", ns < 0 ? "-" : "",
		 a / 1000000000u, n ? "." : "", frac);
	/* The decimal is what is written; the double only for json-c. */
	json_put(j, key, json_object_new_double_s((double)ns / 1e9, buf));
}

void json_flag(struct json *j, const char *key, bool v)
{
	json_put(j, key, json_object_new_boolean(v));
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

int tool_wait_purge(struct sw_client *c, const char *what, uint64_t id,
		    uint64_t nodes)
{
	struct progress p;
	char label[64];
	uint64_t done = 0;

	snprintf(label, sizeof(label), "purging %s", what);
	progress_start(&p, label, "nodes", nodes);
	for (;;) {
		Sweepfs__InfoReq q = SWEEPFS__INFO_REQ__INIT;
		Sweepfs__InfoReply *s;
		ProtobufCMessage *reply;
		bool finished;
		int rc = tool_call(c, SW_MSG_INFO, &q.base, &reply);

		if (rc < 0) {
			progress_end(&p, done);
			return rc;
		}
		s = (Sweepfs__InfoReply *)reply;
		if (id) {
			finished = s->purge_roots == 0 || s->purge_oldest > id;
			/* Ours is the oldest or behind others: what is left
			 * of everything up to it. */
			done = nodes - SW_MIN(s->purge_left, nodes);
		} else {
			finished = s->purge_roots == 0;
			if (!nodes) {
				nodes = s->purge_left;
				progress_set_total(&p, nodes);
			}
			done = nodes - SW_MIN(s->purge_left, nodes);
		}
		protobuf_c_message_free_unpacked(reply, NULL);
		if (finished) {
			progress_end(&p, nodes);
			return 0;
		}
		progress_update(&p, done);
		usleep(100 * 1000);
	}
}

void tool_path_error(const char *cmd, const char *path, int rc)
{
	const char *why = strerror(-rc);

	if (rc == -EREMCHG || rc == -EDESTADDRREQ) {
		return; /* tool_locate() said why */
	} else if (rc == -EXDEV) {
		why = "not on a sweepfs mount (--fs-path takes it as a path "
		      "inside the filesystem of -m)";
	} else if (rc == -EINVAL) {
		why = "the root of a sweepfs mount (name what is below it)";
		tool_record(TOOL_MOUNT_ROOT);
	} else {
		tool_record_errno(rc);
	}
	fprintf(stderr, "sweepfs%s%s: %s: %s\n", cmd ? " " : "", cmd ? cmd : "",
		path, why);
}

/*
 * Locate @path (tool_locate(), saying why on stderr where it fails) and
 * connect to its master: 0 with *@c open and @rel its path below the
 * export's root, or -errno.
 */
static int open_master(const char *path, struct sw_client **c, char *rel,
		       size_t rellen)
{
	struct sw_target t;
	int rc = tool_locate(path, &t, rel, rellen);

	if (rc < 0) {
		tool_path_error(NULL, path, rc);
		return rc;
	}
	return tool_connect_target(&t, c);
}

int tool_open_path(const char *path, struct sw_client **c, uint64_t *parent,
		   char *name, size_t namelen)
{
	char rel[PATH_MAX];
	int rc = open_master(path, c, rel, sizeof(rel));

	if (rc < 0)
		return rc;
	rc = tool_walk(*c, rel, parent, name, namelen);
	if (rc < 0) {
		tool_path_error(NULL, path, rc);
		sw_client_close(*c);
		*c = NULL;
	}
	return rc;
}

int tool_lookup(struct sw_client *c, uint64_t parent, const char *name,
		Sweepfs__Attr *out)
{
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
	ProtobufCMessage *reply;
	struct tool_caller who;
	int rc;

	q.cred = tool_caller(&who);
	q.parent = parent;
	q.name = tool_name(name);
	rc = tool_call(c, SW_MSG_LOOKUP, &q.base, &reply);
	if (rc == 0) {
		*out = *((Sweepfs__EntryReply *)reply)->attr;
		protobuf_c_message_free_unpacked(reply, NULL);
	}
	return rc;
}

int tool_eattr(struct sw_client *c, uint64_t parent, const char *name, bool set,
	       bool clear, bool recursive, ProtobufCMessage **reply)
{
	Sweepfs__EattrReq q = SWEEPFS__EATTR_REQ__INIT;
	struct tool_caller who;

	q.cred = tool_caller(&who);
	q.parent = parent;
	q.name = tool_name(name);
	q.has_set = q.has_clear = q.has_recursive = 1;
	q.set = set;
	q.clear = clear;
	q.recursive = recursive;
	return tool_call(c, SW_MSG_EATTR, &q.base, reply);
}

int tool_call(struct sw_client *c, uint16_t type, const ProtobufCMessage *req,
	      ProtobufCMessage **reply)
{
	int rc = sw_client_call(c, type, req, reply);

	if (rc == 0) {
		rc = sw_reply_err(*reply);
		if (rc < 0) {
			protobuf_c_message_free_unpacked(*reply, NULL);
			*reply = NULL;
		}
	}
	return tool_record_errno(rc);
}

/* tool_call_paced(); with @rm (the request is answered by an
 * RmrReply), tool_remove_paced(). */
static int call_paced(struct sw_client *c, uint16_t type,
		      const ProtobufCMessage *req, ProtobufCMessage **reply,
		      const char *label, struct tool_removal *rm)
{
	int64_t until = sw_mono_ns() + TOOL_RETRY_FOR_MS * 1000000ll;
	unsigned wait_ms = TOOL_RETRY_FIRST_MS;
	bool told = false;
	int rc;

	for (;;) {
		uint64_t part = 0;

		rc = sw_client_call(c, type, req, reply);
		if (rc == 0 && rm) {
			const Sweepfs__RmrReply *r = (const void *)*reply;

			part = r->nodes;
			rm->nodes += part;
			rm->purge_id = SW_MAX(rm->purge_id, r->purge_id);
			rm->requests++;
		}
		if (rc == 0) {
			rc = sw_reply_err(*reply);
			if (rc < 0) {
				protobuf_c_message_free_unpacked(*reply, NULL);
				*reply = NULL;
			}
		}
		rc = tool_record_errno(rc);
		if (rc != -EAGAIN)
			return rc;
		if (part) { /* stopped part-way: the rest at once */
			until = sw_mono_ns() + TOOL_RETRY_FOR_MS * 1000000ll;
			wait_ms = TOOL_RETRY_FIRST_MS;
			continue;
		}
		if (sw_mono_ns() + wait_ms * 1000000ll >= until)
			return rc;
		/* Once: 30 s of silence looks like a hang. */
		if (!told)
			fprintf(stderr, "sweepfs %s; retrying for up to %d s\n",
				label, TOOL_RETRY_FOR_MS / 1000);
		told = true;
		usleep(wait_ms * 1000u);
		wait_ms = SW_MIN(2 * wait_ms, TOOL_RETRY_MAX_MS);
	}
}

int tool_call_paced(struct sw_client *c, uint16_t type,
		    const ProtobufCMessage *req, ProtobufCMessage **reply,
		    const char *label)
{
	return call_paced(c, type, req, reply, label, NULL);
}

int tool_remove_paced(struct sw_client *c, uint16_t type,
		      const ProtobufCMessage *req, struct tool_removal *rm)
{
	ProtobufCMessage *reply;
	int rc;

	*rm = (struct tool_removal){ 0 };
	rc = call_paced(c, type, req, &reply,
			type == SW_MSG_RMR ? TOOL_PACED_RMR :
					     TOOL_PACED_RMSNAPSHOT,
			rm);
	if (rc == 0)
		protobuf_c_message_free_unpacked(reply, NULL);
	return rc;
}

const char *tool_remove_why(int rc)
{
	if (rc == -EAGAIN)
		return "the master's budget for checking users' trees "
		       "stayed spent for 30 s (other removals, or a tree "
		       "too big to check at the rate it refills); try "
		       "again later, or ask root";
	if (rc == -E2BIG)
		return "too many entries for the master to check for a "
		       "user at once (directories of many files with a "
		       "subdirectory after them, or sticky directories "
		       "another user owns); remove the subdirectories first, "
		       "or ask root";
	return strerror(-rc);
}

int tool_resolve(struct sw_client *c, const char *rel, uint64_t *ino,
		 uint32_t *mode)
{
	char name[256];
	Sweepfs__Attr a;
	uint64_t parent;
	int rc = tool_walk(c, rel, &parent, name, sizeof(name));

	if (rc == -EINVAL) {
		*ino = c->root_ino;
		*mode = S_IFDIR;
		return 0;
	}
	if (rc == 0)
		rc = tool_lookup(c, parent, name, &a);
	if (rc == 0) {
		*ino = a.ino;
		*mode = a.mode;
	}
	return rc;
}

int tool_open_ino(const char *path, struct sw_client **c, uint64_t *ino,
		  uint32_t *mode)
{
	char rel[PATH_MAX];
	int rc = open_master(path, c, rel, sizeof(rel));

	if (rc < 0)
		return rc;
	rc = tool_resolve(*c, rel, ino, mode);
	if (rc < 0) {
		tool_path_error(NULL, path, tool_record_errno(rc));
		sw_client_close(*c);
		*c = NULL;
	}
	return rc;
}
