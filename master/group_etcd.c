/*
 * The group's etcd client (group_i.h): its configuration (members,
 * endpoints), base64 as etcd's JSON carries keys and values, one POST
 * to the v3 JSON gateway over libcurl, and etcd's TLS and
 * authentication. Called by the group's thread only (and by
 * group_start() before the thread is there).
 */
#include "group_i.h"

#define TAG "group"

/* ---- configuration -------------------------------------------------- */

int group_members_parse(const char *s, struct group_member *out, size_t *n)
{
	const char *p = s;

	*n = 0;
	while (*p) {
		const char *comma = strchr(p, ','), *eq;
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char *end;
		unsigned long id;

		eq = memchr(p, '=', len);
		if (!eq || eq == p || *n == GROUP_MAX)
			return -EINVAL;
		id = strtoul(p, &end, 10);
		if (end != eq || id == 0 || id > 255)
			return -EINVAL;
		for (size_t i = 0; i < *n; i++)
			if (out[i].id == id)
				return -EINVAL;
		len -= (size_t)(eq + 1 - p);
		if (len == 0 || len >= sizeof(out->addr))
			return -EINVAL;
		out[*n].id = (unsigned)id;
		memcpy(out[*n].addr, eq + 1, len);
		out[*n].addr[len] = '\0';
		(*n)++;
		if (!comma)
			break;
		p = comma + 1;
		if (!*p)
			return -EINVAL;
	}
	return *n ? 0 : -EINVAL;
}

/* @s, HOST:PORT,... with or without a scheme; without one, @dflt
 * ("http://" or "https://"). */
int etcd_endpoints_parse(struct group *g, const char *s, const char *dflt)
{
	const char *p = s;

	while (*p && g->nendpoints < ENDPOINTS_MAX) {
		size_t len = strcspn(p, ",");
		bool scheme = !strncmp(p, "http://", 7) ||
			      !strncmp(p, "https://", 8);

		if (len == 0 || len + (scheme ? 0 : strlen(dflt)) >=
					sizeof(g->endpoints[0]))
			return -EINVAL;
		snprintf(g->endpoints[g->nendpoints++], sizeof(g->endpoints[0]),
			 "%s%.*s", scheme ? "" : dflt, (int)len, p);
		p += len;
		if (*p == ',')
			p++;
	}
	return g->nendpoints && !*p ? 0 : -EINVAL;
}

/* ---- base64 (etcd's JSON carries keys and values so) ----------------- */

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int etcd_b64_put(struct sw_buf *b, const uint8_t *p, size_t n)
{
	char *o;

	if (sw_buf_reserve(b, (n + 2) / 3 * 4) < 0)
		return -ENOMEM;
	o = (char *)b->data + b->len;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? b64[v & 63] : '=';
	}
	b->len += (n + 2) / 3 * 4;
	return 0;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

/* Append the decoding of @s to @b: 0, or -EPROTO for what is not base64. */
int etcd_b64_get(struct sw_buf *b, const char *s)
{
	size_t n = strlen(s);
	uint8_t *o;

	if (n % 4 || sw_buf_reserve(b, n / 4 * 3) < 0)
		return n % 4 ? -EPROTO : -ENOMEM;
	o = b->data + b->len;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];

		for (int k = 0; k < 4; k++)
			v[k] = s[i + k] == '=' && i + 4 == n && k >= 2 ?
				       0 :
				       b64_val(s[i + k]);
		if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0)
			return -EPROTO;
		*o++ = (uint8_t)(v[0] << 2 | v[1] >> 4);
		if (s[i + 2] != '=')
			*o++ = (uint8_t)(v[1] << 4 | v[2] >> 2);
		if (s[i + 3] != '=')
			*o++ = (uint8_t)(v[2] << 6 | v[3]);
	}
	b->len = (size_t)(o - b->data);
	return 0;
}

/* ---- etcd ----------------------------------------------------------- */

size_t etcd_on_body(char *p, size_t size, size_t n, void *arg)
{
	return sw_buf_add(arg, p, size * n) < 0 ? 0 : size * n;
}

/* One POST to endpoint @i, with the token when @token: 0 with *@out,
 * -EIO when etcd did not answer, -EPROTO for an answer that is not JSON,
 * -EREMOTEIO for etcd's own error (*@status its HTTP status). */
static int post_raw(struct group *g, size_t i, const char *path,
		    const char *body, long timeout_ms, bool token,
		    struct json_object **out, long *status)
{
	char url[512];
	CURLcode cc;

	snprintf(url, sizeof(url), "%s%s", g->endpoints[i], path);
	sw_buf_reset(&g->resp);
	g->curl_err[0] = '\0';
	curl_easy_setopt(g->curl, CURLOPT_URL, url);
	curl_easy_setopt(g->curl, CURLOPT_HTTPHEADER, token ? g->auth : NULL);
	curl_easy_setopt(g->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(g->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	*status = 0;
	cc = curl_easy_perform(g->curl);
	if (cc != CURLE_OK) {
		/* A TLS setting that is wrong fails every call alike: said
		 * once, as the reason the member stays out. */
		const char *why = g->curl_err[0] ? g->curl_err :
						   curl_easy_strerror(cc);

		if (cc != g->last_cc && cc != CURLE_COULDNT_CONNECT &&
		    cc != CURLE_OPERATION_TIMEDOUT)
			sw_err(TAG, "%s: %s", url, why);
		else
			sw_debug(TAG, "%s: %s", url, why);
		g->last_cc = cc;
		return -EIO;
	}
	g->last_cc = CURLE_OK;
	curl_easy_getinfo(g->curl, CURLINFO_RESPONSE_CODE, status);
	if (sw_buf_add(&g->resp, "", 1) < 0)
		return -ENOMEM;
	*out = json_tokener_parse((const char *)sw_buf_head(&g->resp));
	if (!*out)
		return -EPROTO;
	if (*status != 200) {
		sw_info(TAG, "%s: HTTP %ld: %s", url, *status,
			(const char *)sw_buf_head(&g->resp));
		json_object_put(*out);
		return -EREMOTEIO;
	}
	return 0;
}

int64_t etcd_jint(struct json_object *o, const char *name, int64_t dflt);
struct json_object *etcd_jget(struct json_object *o, const char *name);

/* ---- etcd's TLS and authentication ---------------------------------- *
 *
 * TLS: with etcd_cacert the endpoints are https (unless they say http://)
 * and etcd's certificate must chain to that CA and name the host; with
 * etcd_cert and etcd_key the member shows etcd its certificate (etcd's
 * --client-cert-auth; with etcd's auth enabled too, etcd takes the
 * certificate's common name as the user).
 *
 * A user: its password is read once, at the start, from
 * etcd_password_file; the token etcd gives for it (POST
 * /v3/auth/authenticate) goes in every request's Authorization header.
 * When etcd says the token is not valid (HTTP 401: a simple token
 * expires after etcd's --auth-token-ttl unused, and all go with an etcd
 * restart) the member authenticates again, at most once per request. A
 * wrong user or password is refused at the start (group_start() fails,
 * the master exits), and later (the password changed in etcd) it is
 * logged once and the member stays out: no lease, no leadership.
 *
 * Secrets stay out of master.cfg, which is often world-readable: a key
 * file or password file that others may read is refused, as ssh refuses
 * such a private key.
 */

/* 0 when the secret file @fd (@what @path) is not open to others; else
 * -EPERM, logged. */
static int secret_mode_ok(int fd, const char *what, const char *path)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		sw_crit(TAG, "%s %s: %s", what, path, strerror(errno));
		return -errno;
	}
	if (st.st_mode & S_IRWXO) {
		sw_crit(TAG,
			"%s %s is open to others (mode %04o): it holds a "
			"secret; chmod o-rwx it",
			what, path, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* g->password from @path's first line. 0, or -errno (logged). */
static int password_read(struct group *g, const char *path)
{
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		sw_crit(TAG, "etcd_password_file %s: %s", path, strerror(-rc));
		return rc;
	}
	rc = secret_mode_ok(fd, "etcd_password_file", path);
	if (rc < 0)
		goto out_close;
	n = read(fd, g->password, sizeof(g->password) - 1);
	if (n < 0) {
		rc = -errno;
		sw_crit(TAG, "etcd_password_file %s: %s", path, strerror(-rc));
		goto out_close;
	}
	g->password[n] = '\0';
	g->password[strcspn(g->password, "\r\n")] = '\0';
	if (!g->password[0]) {
		sw_crit(TAG, "etcd_password_file %s holds no password", path);
		rc = -EINVAL;
	}
out_close:
	close(fd);
	return rc;
}

/* Set up libcurl for etcd_cacert, etcd_cert and etcd_key, and read the
 * password of etcd_user. 0, or -errno (logged). */
int etcd_secure(struct group *g, const struct master_config *c)
{
	int fd, rc;

	if (c->etcd_cacert[0])
		curl_easy_setopt(g->curl, CURLOPT_CAINFO, c->etcd_cacert);
	if (!c->etcd_cert[0] != !c->etcd_key[0]) {
		sw_crit(TAG, "etcd_cert and etcd_key go together");
		return -EINVAL;
	}
	if (c->etcd_key[0]) {
		fd = open(c->etcd_key, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			sw_crit(TAG, "etcd_key %s: %s", c->etcd_key,
				strerror(-rc));
			return rc;
		}
		rc = secret_mode_ok(fd, "etcd_key", c->etcd_key);
		close(fd);
		if (rc < 0)
			return rc;
		curl_easy_setopt(g->curl, CURLOPT_SSLCERT, c->etcd_cert);
		curl_easy_setopt(g->curl, CURLOPT_SSLKEY, c->etcd_key);
	}
	if (!c->etcd_user[0] != !c->etcd_password_file[0]) {
		sw_crit(TAG, "etcd_user and etcd_password_file go together");
		return -EINVAL;
	}
	if (!c->etcd_user[0])
		return 0;
	snprintf(g->user, sizeof(g->user), "%s", c->etcd_user);
	for (size_t i = 0; i < g->nendpoints; i++)
		if (!strncmp(g->endpoints[i], "http://", 7) &&
		    strncmp(g->endpoints[i] + 7, "127.", 4) &&
		    strncmp(g->endpoints[i] + 7, "localhost", 9) &&
		    strncmp(g->endpoints[i] + 7, "[::1]", 5))
			sw_warn(TAG,
				"%s: etcd_user's password and token travel "
				"in clear (etcd_cacert: https)",
				g->endpoints[i]);
	return password_read(g, c->etcd_password_file);
}

/* etcd's message in its error reply @r. */
static const char *etcd_error(struct json_object *r)
{
	struct json_object *e = etcd_jget(r, "error");

	if (!e)
		e = etcd_jget(r, "message");
	return e ? json_object_get_string(e) : "(no message)";
}

/*
 * A token for g->user from endpoint @i, in g->auth. 0; -EACCES when etcd
 * refused the user or password (logged once until one is taken again);
 * else post_raw()'s error.
 */
int etcd_authenticate(struct group *g, size_t i, long timeout_ms)
{
	struct json_object *req = json_object_new_object(), *r = NULL;
	struct curl_slist *h;
	const char *token;
	char *line = NULL;
	long status;
	int rc = -ENOMEM;

	if (!req ||
	    json_object_object_add(req, "name",
				   json_object_new_string(g->user)) ||
	    json_object_object_add(req, "password",
				   json_object_new_string(g->password)))
		goto out;
	rc = post_raw(g, i, "/v3/auth/authenticate",
		      json_object_to_json_string(req), timeout_ms, false, &r,
		      &status);
	if (rc == -EREMOTEIO && status < 500) {
		/* post_raw() put the reply; its text is still in resp. */
		r = json_tokener_parse((const char *)sw_buf_head(&g->resp));
		if (!g->auth_refused)
			sw_err(TAG, "etcd refused user '%s': %s", g->user,
			       etcd_error(r));
		g->auth_refused = true;
		/* The next call authenticates first, not with a token
		 * etcd has already refused. */
		curl_slist_free_all(g->auth);
		g->auth = NULL;
		rc = -EACCES;
		goto out_put;
	}
	if (rc < 0)
		goto out;
	token = json_object_get_string(etcd_jget(r, "token"));
	rc = -EPROTO;
	if (!token || !*token || strpbrk(token, "\r\n"))
		goto out_put;
	rc = -ENOMEM;
	if (asprintf(&line, "Authorization: %s", token) < 0) {
		line = NULL;
		goto out_put;
	}
	h = curl_slist_append(NULL, line);
	if (!h)
		goto out_put;
	curl_slist_free_all(g->auth);
	g->auth = h;
	if (g->auth_refused)
		sw_notice(TAG, "etcd took user '%s' again", g->user);
	g->auth_refused = false;
	rc = 0;
out_put:
	json_object_put(r);
out:
	/* The JSON held the password. */
	if (req) {
		const char *txt = json_object_to_json_string(req);

		sodium_memzero((void *)txt, strlen(txt));
		json_object_put(req);
	}
	free(line);
	return rc;
}

/* One POST to endpoint @i, as post_raw() with the token, authenticating
 * first when there is none, and again when etcd says it is not valid
 * (HTTP 401); -EACCES when etcd refuses the user. */
static int post_one(struct group *g, size_t i, const char *path,
		    const char *body, long timeout_ms, struct json_object **out,
		    long *status)
{
	int64_t deadline = sw_mono_ns() + (int64_t)timeout_ms * 1000000;
	int rc;

	if (g->user[0] && !g->auth) {
		rc = etcd_authenticate(g, i, timeout_ms);
		if (rc < 0)
			return rc;
	}
	rc = post_raw(g, i, path, body,
		      SW_MAX((deadline - sw_mono_ns()) / 1000000, 1), true, out,
		      status);
	if (rc != -EREMOTEIO || *status != 401 || !g->user[0])
		return rc;
	sw_info(TAG,
		"etcd's token for '%s' is no longer valid: "
		"authenticating again",
		g->user);
	rc = etcd_authenticate(g, i,
			       SW_MAX((deadline - sw_mono_ns()) / 1000000, 1));
	if (rc < 0)
		return rc;
	return post_raw(g, i, path, body,
			SW_MAX((deadline - sw_mono_ns()) / 1000000, 1), true,
			out, status);
}

/*
 * POST @body (NUL-terminated JSON) to @path: to the endpoint in use, and
 * when it does not answer or cannot serve (no majority behind it: HTTP
 * 5xx), to the next ones in turn, all within @timeout_ms. The member
 * beside us (the first endpoint) is tried again every few seconds. The
 * reply's JSON in *@out (the caller puts it), or post_one()'s error from
 * the last.
 */
int etcd_post(struct group *g, const char *path, const char *body,
	      long timeout_ms, struct json_object **out)
{
	int64_t now = sw_mono_ns();
	int64_t deadline = now + (int64_t)timeout_ms * 1000000;
	long status;
	int rc = -EIO;

	if (g->cur && now >= g->home_at)
		g->cur = 0;
	/* Within @timeout_ms in all: a leader's lease is renewed between
	 * calls, and a stop waits for the one under way. */
	for (size_t n = 0; n < g->nendpoints; n++) {
		long left = (long)((deadline - sw_mono_ns()) / 1000000);

		if (left < 50)
			break;
		rc = post_one(g, g->cur, path, body, left, out, &status);
		if (rc == 0)
			g->last_rev =
				SW_MAX(g->last_rev,
				       etcd_jint(etcd_jget(*out, "header"),
						 "revision", 0));
		if (rc == 0 || rc == -ENOMEM || rc == -EACCES ||
		    (rc == -EREMOTEIO && status < 500))
			return rc;
		if (g->cur == 0)
			g->home_at = now + HOME_AGAIN_NS;
		g->cur = (g->cur + 1) % g->nendpoints;
	}
	return rc;
}

/* @o's member @name as an integer (etcd sends 64-bit ones as strings);
 * @dflt when absent, as proto3 JSON leaves out zeros. */
int64_t etcd_jint(struct json_object *o, const char *name, int64_t dflt)
{
	struct json_object *v;

	if (!o || !json_object_object_get_ex(o, name, &v))
		return dflt;
	if (json_object_is_type(v, json_type_string))
		return strtoll(json_object_get_string(v), NULL, 10);
	return json_object_get_int64(v);
}

struct json_object *etcd_jget(struct json_object *o, const char *name)
{
	struct json_object *v = NULL;

	return o && json_object_object_get_ex(o, name, &v) ? v : NULL;
}

/* A key under the prefix, in base64, onto @b. */
int etcd_key_put(struct group *g, struct sw_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

int etcd_key_put(struct group *g, struct sw_buf *b, const char *fmt, ...)
{
	char key[256];
	int n = snprintf(key, sizeof(key), "%s", g->prefix);
	va_list ap;

	va_start(ap, fmt);
	n += vsnprintf(key + n, sizeof(key) - (size_t)n, fmt, ap);
	va_end(ap);
	return etcd_b64_put(b, (const uint8_t *)key, (size_t)n);
}

int etcd_str(struct sw_buf *b, const char *s)
{
	return sw_buf_add(b, s, strlen(s));
}

int etcd_bprintf(struct sw_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int etcd_bprintf(struct sw_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	return sw_buf_add(
		b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A JSON body under construction, NUL-terminated by etcd_body_end(). */
const char *etcd_body_end(struct sw_buf *b)
{
	return sw_buf_add(b, "", 1) < 0 ? NULL : (const char *)b->data;
}
