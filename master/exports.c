/*
 * Exports (exports.h): parsing the exports file, and matching a client's
 * address and subdirectory against its rules.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "auth.h"
#include "exports.h"
#include "util.h"

int exports_norm_path(const char *in, char *out, size_t outlen)
{
	size_t o = 0;
	const char *p = in;

	if (outlen < 2)
		return -ENAMETOOLONG;
	while (*p) {
		const char *s;
		size_t n;

		while (*p == '/')
			p++;
		s = p;
		while (*p && *p != '/')
			p++;
		n = (size_t)(p - s);
		if (n == 0 || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return -EINVAL;
		if (o + 1 + n + 1 > outlen)
			return -ENAMETOOLONG;
		out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

static int parse_v4(const char *s, uint32_t *out)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	*out = ntohl(a.s_addr);
	return 0;
}

/* "*", A.B.C.D, A.B.C.D/BITS, A.B.C.D/MASK, A.B.C.D-E.F.G.H */
static int parse_addr(char *s, struct export_addr *r)
{
	char *sep;
	uint32_t a, b;

	if (!strcmp(s, "*")) {
		r->any = true;
		return 0;
	}
	if ((sep = strchr(s, '-'))) {
		*sep = '\0';
		if (parse_v4(s, &a) < 0 || parse_v4(sep + 1, &b) < 0 || a > b)
			return -EINVAL;
		r->lo = a;
		r->hi = b;
		return 0;
	}
	if ((sep = strchr(s, '/'))) {
		uint32_t mask;

		*sep = '\0';
		if (parse_v4(s, &a) < 0)
			return -EINVAL;
		if (strchr(sep + 1, '.')) {
			if (parse_v4(sep + 1, &mask) < 0)
				return -EINVAL;
		} else {
			char *end;
			unsigned long bits = strtoul(sep + 1, &end, 10);

			if (*end || end == sep + 1 || bits > 32)
				return -EINVAL;
			mask = bits ? ~0u << (32 - bits) : 0;
		}
		r->lo = a & mask;
		r->hi = (a & mask) | ~mask;
		return 0;
	}
	if (parse_v4(s, &a) < 0)
		return -EINVAL;
	r->lo = r->hi = a;
	return 0;
}

int exports_addrs_parse(const char *list, struct export_addr *out, size_t cap,
			size_t *n)
{
	char buf[4096], *save, *tok;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		return -EINVAL;
	*n = 0;
	for (tok = strtok_r(buf, ", \t", &save); tok;
	     tok = strtok_r(NULL, ", \t", &save)) {
		struct export_addr a = { 0 };

		if (*n == cap || parse_addr(tok, &a) < 0)
			return -EINVAL;
		out[(*n)++] = a;
	}
	return 0;
}

/* USER[:GROUP], names or numbers; a user's group defaults to its own. */
static int parse_ids(const char *s, uint32_t *uid, uint32_t *gid)
{
	char user[256], *colon, *end;
	struct passwd *pw = NULL;

	snprintf(user, sizeof(user), "%s", s);
	colon = strchr(user, ':');
	if (colon)
		*colon = '\0';
	if (!*user)
		return -EINVAL;
	*uid = (uint32_t)strtoul(user, &end, 10);
	if (*end) {
		pw = getpwnam(user);
		if (!pw)
			return -ENOENT;
		*uid = pw->pw_uid;
		*gid = pw->pw_gid;
	} else {
		pw = getpwuid(*uid);
		*gid = pw ? pw->pw_gid : *uid;
	}
	if (colon) {
		*gid = (uint32_t)strtoul(colon + 1, &end, 10);
		if (*end || end == colon + 1) {
			struct group *gr = getgrnam(colon + 1);

			if (!gr)
				return -ENOENT;
			*gid = gr->gr_gid;
		}
	}
	return 0;
}

static int parse_opts(char *s, struct export_rule *r, const char **bad)
{
	char *save, *opt;
	int rc;

	snprintf(r->text, sizeof(r->text), "%s", s);
	/* Do not show a password in status: cut it out of the text. */
	{
		char *pw = strstr(r->text, "password=");

		if (pw) {
			char *end = strchr(pw, ',');

			if (end)
				memmove(pw + 9, end, strlen(end) + 1);
			else
				pw[9] = '\0';
		}
	}
	for (opt = strtok_r(s, ",", &save); opt;
	     opt = strtok_r(NULL, ",", &save)) {
		*bad = opt;
		if (!strcmp(opt, "ro") || !strcmp(opt, "readonly")) {
			r->rw = false;
		} else if (!strcmp(opt, "rw") || !strcmp(opt, "readwrite")) {
			r->rw = true;
		} else if (!strcmp(opt, "alldirs")) {
			r->alldirs = true;
		} else if (!strcmp(opt, "admin")) {
			r->admin = true;
		} else if (!strncmp(opt, "maproot=", 8)) {
			if (parse_ids(opt + 8, &r->maproot_uid,
				      &r->maproot_gid) < 0)
				return -EINVAL;
			if (r->maproot_uid == 0)
				r->maproot_uid = r->maproot_gid = EXPORT_NO_MAP;
		} else if (!strncmp(opt, "mapall=", 7)) {
			if (parse_ids(opt + 7, &r->mapall_uid, &r->mapall_gid) <
			    0)
				return -EINVAL;
		} else if (!strncmp(opt, "password=", 9)) {
			if (!opt[9])
				return -EINVAL;
			rc = sw_auth_key(opt + 9, r->key);
			if (rc < 0)
				return rc;
			r->has_password = true;
		} else {
			return -EINVAL;
		}
	}
	return 0;
}

static void rule_defaults(struct export_rule *r)
{
	memset(r, 0, sizeof(*r));
	/* Secure unless told: read-only, root squashed to nobody. */
	r->maproot_uid = r->maproot_gid = 65534;
	r->mapall_uid = r->mapall_gid = EXPORT_NO_MAP;
}

int exports_load(const char *path, struct exports *out, char *err,
		 size_t errlen)
{
	struct exports ex = { 0 };
	size_t cap = 0;
	char line[8192];
	int lineno = 0, rc = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *fields[4], *p = line, *save;
		struct export_rule r;
		const char *bad = "";
		int nf = 0;

		lineno++;
		if ((p = strchr(line, '#')))
			*p = '\0';
		for (p = strtok_r(line, " \t\r\n", &save); p && nf < 4;
		     p = strtok_r(NULL, " \t\r\n", &save))
			fields[nf++] = p;
		if (nf == 0)
			continue;
		rule_defaults(&r);
		r.line = lineno;
		if (nf < 2 || nf > 3) {
			snprintf(err, errlen,
				 "%s:%d: want ADDRESS DIRECTORY "
				 "[OPTIONS]",
				 path, lineno);
			rc = -EINVAL;
			break;
		}
		if (parse_addr(fields[0], &r.addr) < 0) {
			snprintf(err, errlen, "%s:%d: bad address '%s'", path,
				 lineno, fields[0]);
			rc = -EINVAL;
			break;
		}
		if (fields[1][0] != '/' ||
		    exports_norm_path(fields[1], r.path, sizeof(r.path)) < 0) {
			snprintf(err, errlen,
				 "%s:%d: bad directory '%s' "
				 "(absolute, no '..')",
				 path, lineno, fields[1]);
			rc = -EINVAL;
			break;
		}
		if (nf == 3 && parse_opts(fields[2], &r, &bad) < 0) {
			snprintf(err, errlen, "%s:%d: bad option '%s'", path,
				 lineno, bad);
			rc = -EINVAL;
			break;
		}
		if (nf == 2)
			snprintf(r.text, sizeof(r.text), "ro");
		if (sw_grow(&ex.rules, &cap, ex.n + 1, sizeof(*ex.rules), 16) <
		    0) {
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			break;
		}
		ex.rules[ex.n++] = r;
	}
	fclose(f);
	if (rc < 0) {
		free(ex.rules);
		return rc;
	}
	exports_free(out);
	*out = ex;
	return 0;
}

void exports_open(struct exports *out)
{
	exports_free(out);
	out->open = true;
}

void exports_free(struct exports *ex)
{
	free(ex->rules);
	memset(ex, 0, sizeof(*ex));
}

bool exports_addr_fits(const struct export_addr *r, const struct sockaddr *sa)
{
	uint32_t a;

	if (r->any)
		return true;
	if (sa->sa_family == AF_INET) {
		a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *v6 =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (!IN6_IS_ADDR_V4MAPPED(v6))
			return false;
		a = (uint32_t)v6->s6_addr[12] << 24 |
		    (uint32_t)v6->s6_addr[13] << 16 |
		    (uint32_t)v6->s6_addr[14] << 8 | v6->s6_addr[15];
	} else {
		return false;
	}
	return a >= r->lo && a <= r->hi;
}

/* @want is @path, or (alldirs) below it. Both normalized. */
static bool path_fits(const struct export_rule *r, const char *want)
{
	size_t n = strlen(r->path);

	if (!strcmp(r->path, want))
		return true;
	if (!r->alldirs)
		return false;
	if (n == 1)
		return true; /* "/" with alldirs: anything */
	return !strncmp(r->path, want, n) && want[n] == '/';
}

const struct export_rule *exports_match(const struct exports *ex,
					const struct sockaddr *peer,
					const char *subdir, int *why)
{
	static const struct export_rule open_rule = {
		.addr.any = true,
		.path = "/",
		.alldirs = true,
		.rw = true,
		.admin = true,
		.maproot_uid = EXPORT_NO_MAP,
		.maproot_gid = EXPORT_NO_MAP,
		.mapall_uid = EXPORT_NO_MAP,
		.mapall_gid = EXPORT_NO_MAP,
		.text = "rw,alldirs,admin,maproot=0 (no exports file)",
	};
	char want[4096];
	bool addr_known = false;

	if (ex->open)
		return &open_rule;
	if (exports_norm_path(subdir && *subdir ? subdir : "/", want,
			      sizeof(want)) < 0) {
		*why = -EINVAL;
		return NULL;
	}
	for (size_t i = 0; i < ex->n; i++) {
		const struct export_rule *r = &ex->rules[i];

		if (!exports_addr_fits(&r->addr, peer))
			continue;
		addr_known = true;
		if (path_fits(r, want))
			return r;
	}
	*why = addr_known ? -EPERM : -EACCES;
	return NULL;
}
