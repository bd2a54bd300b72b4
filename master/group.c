/*
 * A group of masters on etcd (group.h): the election, shipping the
 * leader's changelog, and the followers' apply.
 *
 * The thread below is the only one that talks to etcd. It speaks etcd's
 * v3 JSON gateway (POST /v3/..., keys and values in base64) over one
 * libcurl handle with keep-alive, blocking, one request at a time: while
 * a transaction is in flight, what the loop flushes meanwhile piles up and
 * goes in the next one (group commit across loop turns).
 *
 * etcd is the group's trusted base: whoever can write its keys can make
 * itself a member or the leader. Who may is etcd's to say (the README's
 * group section says how to lock it down); a member proves itself with a
 * client certificate over TLS (etcd_cacert, etcd_cert, etcd_key), or as
 * an etcd user (etcd_user, etcd_password_file), or both. See "etcd's TLS
 * and authentication" below.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "buf.h"
#include "catchup.h"
#include "changelog.h"
#include "checkpoint.h"
#include "group.h"
#include "log.h"
#include "master.h"
#include "mutation.h"
#include "net.h"
#include "req.h"
#include "server.h"
#include "util.h"

#define TAG "group"
/* What one transaction ships at most: etcd refuses requests over 1.5 MiB
 * by default (--max-request-bytes). */
#define SHIP_MAX (1u << 20)
/* Log keys fetched per request by a follower. */
#define FETCH_MAX 4
/* A follower's incoming records not applied yet: fetch no more. */
#define IN_MAX (64u << 20)
#define ENDPOINTS_MAX 8
/* After the first endpoint (the member beside us) failed, it is tried
 * again after this long. */
#define HOME_AGAIN_NS (5 * SW_NSEC_PER_SEC)
/* A follower tries the leader's port this often (check_leader()). */
#define PROBE_EVERY_NS (200 * 1000000LL)
/* A leader stopping ships what it has for at most this long. */
#define STOP_SHIP_NS (2 * SW_NSEC_PER_SEC)
/* Revisions of etcd's history kept behind the newest. */
#define COMPACT_KEEP 1000
/* A member catching up: the log after its checkpoint stays this long
 * after its last read (group_pin()). */
#define PIN_NS (60 * SW_NSEC_PER_SEC)
/* Catching up: the longest wait for one answer of the leader. */
#define CATCHUP_TIMEOUT_MS 10000
/* The loop checks its lease and says it is alive this often. */
#define LOOP_WATCH_MS 100
#define LOOP_WATCH_NS (LOOP_WATCH_MS * 1000000LL)
/* Taken off a lease's end: etcd's clock may run a little faster. */
#define LEASE_MARGIN_NS (100 * 1000000LL)
/* The leader prunes this often. */
#define PRUNE_EVERY_NS (10 * SW_NSEC_PER_SEC)

enum role { FOLLOWER, CANDIDATE, LEADER };
static const char *const role_names[] = { "follower", "candidate", "leader" };

struct group {
	struct master *m;
	unsigned id;
	char self[272]; /* this member's client address */
	char prefix[128];
	char endpoints[ENDPOINTS_MAX][256];
	size_t nendpoints, cur; /* cur: the endpoint in use */
	int64_t home_at;	/* mono ns: back to the first endpoint */
	int64_t last_rev;	/* etcd's revision, as last heard */
	int64_t compacted;	/* history compacted up to this revision */
	uint64_t base;		/* the version the group started from */
	int64_t lease_ns;

	/* The thread's own (and group_start()'s, before the thread). */
	CURL *curl;
	char user[128];		 /* etcd_user; empty: no authentication */
	char password[256];	 /* from etcd_password_file */
	struct curl_slist *auth; /* "Authorization: TOKEN"; NULL: none yet */
	bool auth_refused;	 /* etcd said no to the last try: logged */
	CURLcode last_cc;	 /* the last call's error, as logged */
	char curl_err[CURL_ERROR_SIZE]; /* libcurl's words for it */
	/* The chunk of records being shipped: sent again, byte for byte,
	 * until etcd says yes or no; a transaction whose answer was lost
	 * may have landed, and its key must not change. */
	struct sw_buf flight;
	uint64_t flight_first, flight_last;
	struct sw_buf resp;
	int64_t lease_id;
	int64_t leader_lease; /* the leader key's lease, as last read */
	int64_t next_probe;   /* mono ns: try the leader's port then */
	unsigned refused;     /* connects it refused in a row */
	int64_t my_rev;	      /* create_revision of our leader key */
	uint64_t next;	      /* version the next fetched key starts at */
	bool located;	      /* next is a key's first version */
	uint64_t gap_at;      /* fetch found the log starting here */
	int64_t last_ka;      /* mono ns of the last renewed lease */
	int64_t next_ka;      /* mono ns: renew then */
	int64_t next_pub;     /* mono ns: say our status then */
	int64_t next_prune;   /* mono ns: the leader prunes the log then */

	/* Under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct group_member members[GROUP_MAX]; /* as etcd has them */
	size_t nmembers;
	bool stop;
	enum role role;
	bool deposed;
	uint64_t reload;     /* follower: load this checkpoint it read */
	uint64_t promote_at; /* candidate: serve once applied this far */
	struct sw_buf out;   /* leader: records to ship */
	uint64_t committed;  /* leader: etcd has records up to here */
	uint64_t pin;	     /* leader: keep the log after this ... */
	int64_t pin_until;   /* ... until then (mono ns), group_pin() */
	struct sw_buf in;    /* follower: records to apply */
	uint64_t applied;    /* the loop's version, for the thread */
	unsigned transfer;   /* leader: hand over to this id (or any) */
	bool transferring;
	uint64_t transfer_at; /* ... once etcd has this version */
	bool member;	      /* this one is in the membership */
	int64_t members_rev;  /* mod_revision of the membership key */
	/* A membership change an admin asked the leader for: the thread
	 * makes it, the loop answers. */
	struct req *admin;
	char admin_add[300];
	unsigned admin_remove;
	bool admin_done;
	int admin_rc;
	char leader[272];
	unsigned leader_id;
	struct group_status st; /* members as they last said */

	/* Both threads, without the lock. The leader's lease holds until
	 * valid_until (mono ns) for sure: the thread sets it from when it
	 * asked etcd to renew, the loop stops serving past it. The loop says
	 * it is alive in loop_seen; a thread whose loop is stuck lets the
	 * lease go, so that another member takes over. */
	_Atomic int64_t valid_until;
	_Atomic int64_t renewed_at; /* when it asked, for the log */
	_Atomic int64_t loop_seen;
	_Atomic bool leading; /* the loop serves as the leader */

	/* Loop thread only. */
	bool serving;
	bool paused;	   /* requests held back: the lease is in doubt */
	uv_timer_t watch;  /* LOOP_WATCH_MS: loop_seen, valid_until */
	uint64_t released; /* records up to here released to the disk */
	uv_async_t async;
	pthread_t thread;
	bool started;
};

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
static int endpoints_parse(struct group *g, const char *s, const char *dflt)
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

static int b64_put(struct sw_buf *b, const uint8_t *p, size_t n)
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
static int b64_get(struct sw_buf *b, const char *s)
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

static size_t on_body(char *p, size_t size, size_t n, void *arg)
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

static int64_t jint(struct json_object *o, const char *name, int64_t dflt);
static struct json_object *jget(struct json_object *o, const char *name);

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
static int etcd_secure(struct group *g, const struct master_config *c)
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
	struct json_object *e = jget(r, "error");

	if (!e)
		e = jget(r, "message");
	return e ? json_object_get_string(e) : "(no message)";
}

/*
 * A token for g->user from endpoint @i, in g->auth. 0; -EACCES when etcd
 * refused the user or password (logged once until one is taken again);
 * else post_raw()'s error.
 */
static int authenticate(struct group *g, size_t i, long timeout_ms)
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
	token = json_object_get_string(jget(r, "token"));
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
		rc = authenticate(g, i, timeout_ms);
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
	rc = authenticate(g, i, SW_MAX((deadline - sw_mono_ns()) / 1000000, 1));
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
static int etcd_post(struct group *g, const char *path, const char *body,
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
				SW_MAX(g->last_rev, jint(jget(*out, "header"),
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
static int64_t jint(struct json_object *o, const char *name, int64_t dflt)
{
	struct json_object *v;

	if (!o || !json_object_object_get_ex(o, name, &v))
		return dflt;
	if (json_object_is_type(v, json_type_string))
		return strtoll(json_object_get_string(v), NULL, 10);
	return json_object_get_int64(v);
}

static struct json_object *jget(struct json_object *o, const char *name)
{
	struct json_object *v = NULL;

	return o && json_object_object_get_ex(o, name, &v) ? v : NULL;
}

/* A key under the prefix, in base64, onto @b. */
static int key_put(struct group *g, struct sw_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int key_put(struct group *g, struct sw_buf *b, const char *fmt, ...)
{
	char key[256];
	int n = snprintf(key, sizeof(key), "%s", g->prefix);
	va_list ap;

	va_start(ap, fmt);
	n += vsnprintf(key + n, sizeof(key) - (size_t)n, fmt, ap);
	va_end(ap);
	return b64_put(b, (const uint8_t *)key, (size_t)n);
}

static int str(struct sw_buf *b, const char *s)
{
	return sw_buf_add(b, s, strlen(s));
}

static int bprintf(struct sw_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int bprintf(struct sw_buf *b, const char *fmt, ...)
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

/* A JSON body under construction, NUL-terminated by body_end(). */
static const char *body_end(struct sw_buf *b)
{
	return sw_buf_add(b, "", 1) < 0 ? NULL : (const char *)b->data;
}

/* ---- the loop's side ------------------------------------------------ */

static void lease_resume(struct group *g);

static void wake_loop(struct group *g)
{
	uv_async_send(&g->async);
}

void group_ship(void *arg, const uint8_t *recs, size_t len, uint64_t last)
{
	struct group *g = ((struct master *)arg)->group;

	(void)last;
	pthread_mutex_lock(&g->mu);
	if (sw_buf_add(&g->out, recs, len) < 0) {
		sw_crit(TAG, "out of memory shipping records");
		abort();
	}
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->mu);
}

/* A follower applies records from the group's log; the versions it has
 * already are skipped. 0 or -EUCLEAN (a gap or a change that does not
 * apply: this member cannot follow, and says so). */
static int apply_records(struct master *m, const uint8_t *p, size_t n)
{
	size_t off = 0, rec, len;
	const uint8_t *payload;
	uint64_t ver;

	while ((rec = changelog_record(p + off, n - off, &ver, &payload,
				       &len)) > 0) {
		Sweepfs__Meta__Mutation *mut;
		int rc;

		off += rec;
		if (ver <= m->ns.version)
			continue;
		if (ver != m->ns.version + 1) {
			sw_crit(TAG,
				"the group's log has version %" PRIu64
				" where %" PRIu64 " was expected",
				ver, m->ns.version + 1);
			return -EUCLEAN;
		}
		mut = sweepfs__meta__mutation__unpack(NULL, len, payload);
		if (!mut)
			return -EUCLEAN;
		rc = changelog_prepare(m->cl, mut);
		if (rc == 0)
			rc = mutation_apply(&m->ns, mut, ver);
		if (rc == 0)
			changelog_append(m->cl, mut, ver);
		sweepfs__meta__mutation__free_unpacked(mut, NULL);
		if (rc < 0) {
			sw_crit(TAG, "version %" PRIu64 " does not apply: %s",
				ver, strerror(-rc));
			return -EUCLEAN;
		}
	}
	if (off != n) {
		sw_crit(TAG, "a torn record in the group's log after %" PRIu64,
			m->ns.version);
		return -EUCLEAN;
	}
	changelog_flush(m->cl);
	/* Trees the leader detached wait here for this member to lead:
	 * which of their files are open is the leader's sessions' business,
	 * and a follower has none (master_lead() starts the purge). */
	return 0;
}

/* The loop answers an admin's membership change the thread made. */
static void group_admin_answer(struct group *g)
{
	Sweepfs__GroupReply reply = SWEEPFS__GROUP_REPLY__INIT;
	struct req *r = NULL;
	int rc = 0;

	pthread_mutex_lock(&g->mu);
	if (g->admin && g->admin_done) {
		r = g->admin;
		rc = g->admin_rc;
		g->admin = NULL;
		g->admin_done = false;
	}
	pthread_mutex_unlock(&g->mu);
	if (!r)
		return;
	if (rc < 0) {
		reply.has_err = 1;
		reply.err = -rc;
	}
	req_reply(r, &reply.base);
	req_done(r);
}

static void on_async(uv_async_t *h)
{
	struct group *g = h->data;
	struct master *m = g->m;
	struct sw_buf in;
	uint64_t committed, promote_at, reload;
	bool deposed, promote;

	pthread_mutex_lock(&g->mu);
	in = g->in;
	sw_buf_init(&g->in);
	committed = g->committed;
	deposed = g->deposed;
	reload = g->reload;
	promote_at = g->promote_at;
	promote = g->role == LEADER && !g->serving;
	pthread_mutex_unlock(&g->mu);

	group_admin_answer(g);
	lease_resume(g);
	if (deposed) {
		sw_crit(TAG, "no longer the group's leader (lease lost or "
			     "superseded): exiting, so that a restart reloads "
			     "what the group committed");
		/* At once: nothing of this process's state is to be kept or
		 * freed (its memory may be ahead of the group), and the
		 * group's thread may still be in a call to etcd. */
		_exit(75);
	}
	/* (Not while a checkpoint of the old state is being written: it
	 * would be taken for one of the new. The thread asks again.) */
	if (reload && !checkpoint_running(&m->ckpt.writer)) {
		if (master_reload(m) < 0 || m->ns.version < reload) {
			sw_crit(TAG,
				"cannot load the checkpoint %" PRIu64
				" read from the leader",
				reload);
			_exit(70);
		}
		pthread_mutex_lock(&g->mu);
		g->reload = 0;
		pthread_cond_signal(&g->cond);
		pthread_mutex_unlock(&g->mu);
	}
	if (sw_buf_used(&in) &&
	    apply_records(m, sw_buf_head(&in), sw_buf_used(&in)) < 0)
		_exit(70);
	sw_buf_release(&in);
	pthread_mutex_lock(&g->mu);
	g->applied = m->ns.version;
	pthread_mutex_unlock(&g->mu);
	if (promote && m->ns.version >= promote_at) {
		g->serving = true;
		atomic_store(&g->loop_seen, sw_mono_ns());
		atomic_store(&g->leading, true);
		g->released = m->ns.version;
		changelog_gate(m->cl);
		sw_notice(TAG, "leading the group at version %" PRIu64,
			  m->ns.version);
		master_lead(m);
	}
	if (g->serving && committed > g->released) {
		g->released = committed;
		changelog_release(m->cl, committed);
	}
}

bool group_may_answer(struct master *m, int64_t now)
{
	struct group *g = m->group;

	if (!g || !g->serving || now <= atomic_load(&g->valid_until))
		return true;
	/* etcd may have given the leadership to another member by now:
	 * answering even a read could show what that one has changed as
	 * not there. Until the thread knows (renewed: go on; lost: this
	 * master exits), nothing is answered. */
	if (!g->paused)
		sw_warn(TAG,
			"the lease is not renewed in time (last %" PRId64
			" ms ago): answering nothing until etcd renews it",
			(now - atomic_load(&g->renewed_at)) / 1000000);
	g->paused = true;
	return false;
}

/* The lease is renewed: requests held back since it was in doubt go on. */
static void lease_resume(struct group *g)
{
	struct master *m = g->m;

	if (!g->paused || sw_mono_ns() > atomic_load(&g->valid_until))
		return;
	g->paused = false;
	sw_notice(TAG, "the lease is renewed: answering again");
	for (struct conn *c = conn_first(m); c; c = conn_next(c))
		server_resume(c);
}

static void on_watch(uv_timer_t *t)
{
	struct group *g = t->data;

	atomic_store(&g->loop_seen, sw_mono_ns());
	lease_resume(g);
}

/* ---- the thread: following ------------------------------------------ */

static void set_leader(struct group *g, const char *val)
{
	unsigned id = 0;
	const char *sp = strchr(val, ' ');

	if (sp)
		id = (unsigned)strtoul(val, NULL, 10);
	pthread_mutex_lock(&g->mu);
	g->leader_id = id;
	snprintf(g->leader, sizeof(g->leader), "%s", sp ? sp + 1 : "");
	pthread_mutex_unlock(&g->mu);
}

/*
 * The value of key @name (under the prefix), NUL-terminated, into @val;
 * its lease and mod_revision into *@lease and *@rev (either may be NULL).
 * 1, 0 when there is no such key, or -errno.
 */
static int etcd_get(struct group *g, const char *name, struct sw_buf *val,
		    int64_t *lease, int64_t *rev)
{
	struct json_object *r, *kvs, *kv, *v;
	struct sw_buf b;
	const char *body;
	int rc;

	sw_buf_init(&b);
	str(&b, "{\"key\":\"");
	key_put(g, &b, "%s", name);
	str(&b, "\"}");
	body = body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/range", body, 1000, &r) : -ENOMEM;
	sw_buf_release(&b);
	if (rc < 0)
		return rc;
	kvs = jget(r, "kvs");
	kv = kvs && json_object_array_length(kvs) ?
		     json_object_array_get_idx(kvs, 0) :
		     NULL;
	rc = 0;
	sw_buf_reset(val);
	if (kv) {
		v = jget(kv, "value");
		/* An empty value is left out, as proto3 JSON does. */
		rc = (v ? b64_get(val, json_object_get_string(v)) : 0) == 0 &&
				     sw_buf_add(val, "", 1) == 0 ?
			     1 :
			     -EPROTO;
		if (lease)
			*lease = jint(kv, "lease", 0);
		if (rev)
			*rev = jint(kv, "mod_revision", 0);
	}
	json_object_put(r);
	return rc;
}

/* Read the leader key: 1 when there is a leader, 0 when not, -errno. */
static int read_leader(struct group *g)
{
	struct sw_buf val;
	int rc;

	sw_buf_init(&val);
	rc = etcd_get(g, "leader", &val, &g->leader_lease, NULL);
	if (rc >= 0)
		set_leader(g, rc == 1 ? (const char *)val.data : "");
	sw_buf_release(&val);
	return rc;
}

/*
 * The first version of the log key holding @version: the last key at or
 * before it, [log/, log/VERSION\0). 1 with *@first, 0 when there is
 * none, or -errno.
 */
static int log_key_at(struct group *g, uint64_t version, uint64_t *first)
{
	struct json_object *r, *kvs, *k;
	struct sw_buf b, key;
	const char *body;
	char end[200];
	int rc, n;

	n = snprintf(end, sizeof(end), "%slog/%020" PRIu64, g->prefix, version);
	sw_buf_init(&b);
	sw_buf_init(&key);
	str(&b, "{\"key\":\"");
	key_put(g, &b, "log/");
	str(&b, "\",\"range_end\":\"");
	b64_put(&b, (const uint8_t *)end, (size_t)n + 1);
	str(&b, "\",\"sort_order\":\"DESCEND\",\"sort_target\":\"KEY\","
		"\"limit\":1,\"keys_only\":true}");
	body = body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/range", body, 2000, &r) : -ENOMEM;
	sw_buf_release(&b);
	if (rc < 0)
		return rc;
	kvs = jget(r, "kvs");
	k = kvs && json_object_array_length(kvs) == 1 ?
		    jget(json_object_array_get_idx(kvs, 0), "key") :
		    NULL;
	rc = 0;
	if (k && b64_get(&key, json_object_get_string(k)) == 0 &&
	    sw_buf_add(&key, "", 1) == 0) {
		const char *slash = strrchr((char *)key.data, '/');

		*first = strtoull(slash ? slash + 1 : "0", NULL, 10);
		rc = 1;
	}
	json_object_put(r);
	sw_buf_release(&key);
	return rc;
}

/*
 * Fetch log keys from g->next on into g->in. *@more: etcd has more. The
 * first fetch finds the key holding g->next (a restarted member may stop
 * in the middle of one). 0, -ERANGE when the log starts after g->next
 * (at g->gap_at: catch_up()), or -errno.
 */
static int fetch(struct group *g, bool *more)
{
	struct sw_buf b, val;
	struct json_object *r, *kvs;
	const char *body;
	size_t n;
	int rc;

	*more = false;
	sw_buf_init(&b);
	sw_buf_init(&val);
	if (!g->located) {
		uint64_t first;

		rc = log_key_at(g, g->next, &first);
		if (rc < 0)
			goto out;
		if (rc == 1)
			g->next = first;
		g->located = true;
	}
	str(&b, "{\"key\":\"");
	key_put(g, &b, "log/%020" PRIu64, g->next);
	str(&b, "\",\"range_end\":\"");
	key_put(g, &b, "log0");
	bprintf(&b, "\",\"limit\":%d}", FETCH_MAX);
	body = body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/range", body, 2000, &r) : -ENOMEM;
	if (rc < 0)
		goto out;
	kvs = jget(r, "kvs");
	n = kvs ? json_object_array_length(kvs) : 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct json_object *v =
			jget(json_object_array_get_idx(kvs, i), "value");
		const uint8_t *payload;
		size_t off = 0, rec, len;
		uint64_t ver = 0, first = 0;

		sw_buf_reset(&val);
		rc = v ? b64_get(&val, json_object_get_string(v)) : -EPROTO;
		while (rc == 0 &&
		       (rec = changelog_record(val.data + off, val.len - off,
					       &ver, &payload, &len)) > 0) {
			if (off == 0)
				first = ver;
			off += rec;
		}
		if (rc == 0 && (off != val.len || off == 0))
			rc = -EPROTO;
		if (rc < 0) {
			sw_err(TAG,
			       "a log key after %" PRIu64
			       " is not whole records",
			       g->next);
			break;
		}
		if (first > g->next) {
			/* Pruned: what this member lacks is gone from etcd. */
			g->gap_at = first;
			rc = -ERANGE;
			break;
		}
		pthread_mutex_lock(&g->mu);
		rc = sw_buf_add(&g->in, val.data, val.len);
		pthread_mutex_unlock(&g->mu);
		g->next = ver + 1;
	}
	*more = jget(r, "more") && json_object_get_boolean(jget(r, "more"));
	json_object_put(r);
	if (n)
		wake_loop(g);
out:
	sw_buf_release(&b);
	sw_buf_release(&val);
	return rc;
}

/* Whether no transfer key names another member than this one. */
static bool may_campaign(struct group *g)
{
	struct sw_buf val;
	bool ok;
	int rc;

	pthread_mutex_lock(&g->mu);
	ok = g->member;
	pthread_mutex_unlock(&g->mu);
	if (!ok)
		return false;
	sw_buf_init(&val);
	rc = etcd_get(g, "transfer", &val, NULL, NULL);
	if (rc == 1) {
		unsigned to = (unsigned)strtoul((char *)val.data, NULL, 10);

		ok = to == 0 || to == g->id;
	}
	sw_buf_release(&val);
	return rc >= 0 && ok;
}

/* Try to become the leader: 1 when this member is, 0 when another one
 * won, -errno. */
static int campaign(struct group *g)
{
	struct sw_buf b;
	struct json_object *r;
	const char *body;
	char val[300];
	int64_t t0;
	int rc;

	sw_buf_init(&b);
	t0 = sw_mono_ns(); /* the lease runs from no earlier than this */
	bprintf(&b, "{\"TTL\":%" PRId64 "}",
		(int64_t)((g->lease_ns + SW_NSEC_PER_SEC - 1) /
			  SW_NSEC_PER_SEC));
	body = body_end(&b);
	rc = body ? etcd_post(g, "/v3/lease/grant", body, 1000, &r) : -ENOMEM;
	sw_buf_reset(&b);
	if (rc < 0)
		goto out;
	g->lease_id = jint(r, "ID", 0);
	json_object_put(r);
	if (!g->lease_id) {
		rc = -EPROTO;
		goto out;
	}
	g->last_ka = t0;
	snprintf(val, sizeof(val), "%u %s", g->id, g->self);
	str(&b, "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"");
	key_put(g, &b, "leader");
	str(&b, "\",\"create_revision\":\"0\"}],\"success\":[{"
		"\"request_put\":{\"key\":\"");
	key_put(g, &b, "leader");
	str(&b, "\",\"value\":\"");
	b64_put(&b, (const uint8_t *)val, strlen(val));
	bprintf(&b, "\",\"lease\":\"%" PRId64 "\"}}]}", g->lease_id);
	body = body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/txn", body, 1000, &r) : -ENOMEM;
	if (rc < 0)
		goto out;
	if (jget(r, "succeeded") &&
	    json_object_get_boolean(jget(r, "succeeded"))) {
		g->my_rev = jint(jget(r, "header"), "revision", 0);
		rc = 1;
	} else {
		rc = 0;
	}
	json_object_put(r);
out:
	sw_buf_release(&b);
	return rc;
}

/* ---- the thread: leading -------------------------------------------- */

static void deposed(struct group *g, const char *why)
{
	sw_crit(TAG, "no longer leading: %s", why);
	pthread_mutex_lock(&g->mu);
	g->deposed = true;
	pthread_mutex_unlock(&g->mu);
	wake_loop(g);
}

/* Give lease @lease up: its keys go with it. */
static void revoke_lease(struct group *g, int64_t lease)
{
	struct json_object *r;
	char body[64];

	snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", lease);
	if (etcd_post(g, "/v3/lease/revoke", body, 1000, &r) == 0)
		json_object_put(r);
}

/* Renew the lease: 0, -ENOENT when it is gone, -errno. */
static int keepalive(struct group *g)
{
	struct json_object *r;
	char body[64];
	int64_t ttl;
	int rc;

	snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", g->lease_id);
	rc = etcd_post(g, "/v3/lease/keepalive", body, 1000, &r);
	if (rc < 0)
		return rc;
	ttl = jint(jget(r, "result"), "TTL", 0);
	json_object_put(r);
	return ttl > 0 ? 0 : -ENOENT;
}

/*
 * Ship what the loop flushed, up to SHIP_MAX, in one transaction fenced
 * by our leader key: the chunk in flight again if its last try failed,
 * else a new one taken from the loop's records. 1 shipped, 0 nothing to
 * ship, -ESTALE when the key is no longer ours, -errno (the chunk stays
 * in flight).
 */
static int ship(struct group *g)
{
	const uint8_t *payload;
	size_t off = 0, rec, len;
	uint64_t ver;
	struct json_object *r;
	struct sw_buf b;
	const char *body;
	int rc = 0;

	if (!sw_buf_used(&g->flight)) {
		pthread_mutex_lock(&g->mu);
		while (off < sw_buf_used(&g->out) &&
		       (rec = changelog_record(sw_buf_head(&g->out) + off,
					       sw_buf_used(&g->out) - off, &ver,
					       &payload, &len)) > 0 &&
		       (off == 0 || off + rec <= SHIP_MAX)) {
			if (off == 0)
				g->flight_first = ver;
			g->flight_last = ver;
			off += rec;
		}
		if (off) {
			rc = sw_buf_add(&g->flight, sw_buf_head(&g->out), off);
			if (rc == 0)
				sw_buf_consume(&g->out, off);
		}
		pthread_mutex_unlock(&g->mu);
		if (rc < 0 || off == 0)
			return rc;
	}
	sw_buf_init(&b);
	str(&b, "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"");
	key_put(g, &b, "leader");
	bprintf(&b,
		"\",\"create_revision\":\"%" PRId64 "\"}],"
		"\"success\":[{\"request_put\":{\"key\":\"",
		g->my_rev);
	key_put(g, &b, "log/%020" PRIu64, g->flight_first);
	str(&b, "\",\"value\":\"");
	/* The one big piece: a body short of it must not go out. */
	rc = b64_put(&b, sw_buf_head(&g->flight), sw_buf_used(&g->flight));
	str(&b, "\"}}]}");
	body = rc == 0 ? body_end(&b) : NULL;
	rc = body ? etcd_post(g, "/v3/kv/txn", body, 2000, &r) : -ENOMEM;
	sw_buf_release(&b);
	if (rc < 0)
		return rc;
	rc = jget(r, "succeeded") &&
			     json_object_get_boolean(jget(r, "succeeded")) ?
		     1 :
		     -ESTALE;
	json_object_put(r);
	if (rc < 0)
		return rc;
	sw_buf_reset(&g->flight);
	pthread_mutex_lock(&g->mu);
	g->committed = g->flight_last;
	pthread_mutex_unlock(&g->mu);
	wake_loop(g);
	return 1;
}

/*
 * Step down for a transfer, once everything the loop flushed is in etcd:
 * the transfer key (on a lease of its own, so that it goes by itself if
 * the chosen one never campaigns), then our lease revoked, which takes
 * the leader key with it.
 */
static void hand_over(struct group *g, unsigned to)
{
	struct json_object *r;
	struct sw_buf b;
	const char *body;
	char val[16];
	int64_t lease = 0;

	sw_buf_init(&b);
	if (etcd_post(g, "/v3/lease/grant", "{\"TTL\":5}", 1000, &r) == 0) {
		lease = jint(r, "ID", 0);
		json_object_put(r);
	}
	snprintf(val, sizeof(val), "%u", to);
	str(&b, "{\"key\":\"");
	key_put(g, &b, "transfer");
	str(&b, "\",\"value\":\"");
	b64_put(&b, (const uint8_t *)val, strlen(val));
	bprintf(&b, "\",\"lease\":\"%" PRId64 "\"}", lease);
	body = body_end(&b);
	if (lease && body && etcd_post(g, "/v3/kv/put", body, 1000, &r) == 0)
		json_object_put(r);
	revoke_lease(g, g->lease_id);
	sw_buf_release(&b);
	if (to)
		sw_notice(TAG, "handing the leadership to member %u", to);
	else
		sw_notice(TAG, "handing the leadership over");
	deposed(g, "handed over");
}

/*
 * Delete the log keys every member has on its own disk (all but the last
 * group_log_keep versions of what the slowest member that reported lately
 * has), and compact etcd's history, so that etcd stays small however long
 * the group runs. A member away for longer than group_log_away is not
 * waited for: it catches up from the leader's checkpoint (catch_up()).
 */
static void prune(struct group *g)
{
	struct json_object *r;
	struct sw_buf b;
	const char *body;
	uint64_t upto = UINT64_MAX, first;
	int64_t rev;

	/* etcd's history first, whatever the log: every member's status
	 * adds revisions every second, and nothing here reads old ones. */
	rev = g->last_rev - COMPACT_KEEP;
	if (rev > g->compacted) {
		sw_buf_init(&b);
		bprintf(&b, "{\"revision\":\"%" PRId64 "\"}", rev);
		body = body_end(&b);
		if (body &&
		    etcd_post(g, "/v3/kv/compaction", body, 2000, &r) == 0) {
			json_object_put(r);
			g->compacted = rev;
		}
		sw_buf_release(&b);
	}
	pthread_mutex_lock(&g->mu);
	for (size_t i = 0; i < g->st.n; i++) {
		if (g->st.members[i].age_ms < 0 ||
		    g->st.members[i].age_ms >
			    (int64_t)g->m->cfg.group_log_away_ms)
			continue;
		if (g->st.members[i].version < upto)
			upto = g->st.members[i].version;
	}
	if (g->committed < upto)
		upto = g->committed;
	if (g->pin_until > sw_mono_ns() &&
	    g->pin + g->m->cfg.group_log_keep < upto)
		upto = g->pin + g->m->cfg.group_log_keep;
	pthread_mutex_unlock(&g->mu);
	if (upto == UINT64_MAX || upto <= g->m->cfg.group_log_keep)
		return;
	upto -= g->m->cfg.group_log_keep;
	sw_buf_init(&b);
	/* The key holding upto + 1 stays, with everything after it. */
	if (log_key_at(g, upto + 1, &first) != 1)
		goto out;
	str(&b, "{\"key\":\"");
	key_put(g, &b, "log/");
	str(&b, "\",\"range_end\":\"");
	key_put(g, &b, "log/%020" PRIu64, first);
	str(&b, "\"}");
	body = body_end(&b);
	if (!body || etcd_post(g, "/v3/kv/deleterange", body, 2000, &r) < 0)
		goto out;
	if (jint(r, "deleted", 0) > 0)
		sw_info(TAG,
			"%" PRId64 " log keys before version %" PRIu64
			" deleted",
			jint(r, "deleted", 0), upto + 1);
	json_object_put(r);
out:
	sw_buf_release(&b);
}

/* ---- the thread: membership ----------------------------------------- */

/* The members as "ID=HOST:PORT,..." into @out. */
static void members_str(const struct group_member *mem, size_t n, char *out,
			size_t len)
{
	size_t off = 0;

	out[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(out + off, len - off, "%s%u=%s",
					i ? "," : "", mem[i].id, mem[i].addr);
}

/* Under mu: make @mem the membership (status rows kept by id). */
static void set_members(struct group *g, const struct group_member *mem,
			size_t n)
{
	struct group_status old = g->st;

	memcpy(g->members, mem, n * sizeof(*mem));
	g->nmembers = n;
	g->member = false;
	g->st.n = n;
	for (size_t i = 0; i < n; i++) {
		g->member |= mem[i].id == g->id;
		g->st.members[i].id = mem[i].id;
		snprintf(g->st.members[i].addr, sizeof(g->st.members[i].addr),
			 "%s", mem[i].addr);
		g->st.members[i].role[0] = '\0';
		g->st.members[i].version = 0;
		g->st.members[i].age_ms = -1;
		for (size_t j = 0; j < old.n; j++) {
			if (old.members[j].id != mem[i].id)
				continue;
			memcpy(g->st.members[i].role, old.members[j].role,
			       sizeof(old.members[j].role));
			g->st.members[i].version = old.members[j].version;
			g->st.members[i].age_ms = old.members[j].age_ms;
		}
	}
}

/*
 * The membership lives in etcd ("members" under the prefix), where the
 * first member to start puts the group its configuration names; from then
 * on that key is the truth, which `sweepfs group add/remove` change. Read
 * it: 0, or -errno.
 */
static int sync_members(struct group *g)
{
	struct group_member mem[GROUP_MAX];
	char list[GROUP_MAX * 280], v[32];
	struct json_object *r;
	struct sw_buf b, val;
	const char *body;
	int64_t rev = 0;
	size_t n = 0;
	int rc, vl;

	sw_buf_init(&b);
	sw_buf_init(&val);
	rc = etcd_get(g, "members", &val, NULL, &rev);
	if (rc == 0) {
		/* The first start of the group: ours, if nobody was first. */
		pthread_mutex_lock(&g->mu);
		members_str(g->members, g->nmembers, list, sizeof(list));
		vl = snprintf(v, sizeof(v), "%" PRIu64, g->applied);
		pthread_mutex_unlock(&g->mu);
		str(&b, "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"");
		key_put(g, &b, "members");
		str(&b, "\",\"create_revision\":\"0\"}],\"success\":[{"
			"\"request_put\":{\"key\":\"");
		key_put(g, &b, "members");
		str(&b, "\",\"value\":\"");
		b64_put(&b, (const uint8_t *)list, strlen(list));
		/* And where its log starts: a member older than that cannot
		 * follow it (check_base()). */
		str(&b, "\"}},{\"request_put\":{\"key\":\"");
		key_put(g, &b, "base");
		str(&b, "\",\"value\":\"");
		b64_put(&b, (const uint8_t *)v, (size_t)vl);
		str(&b, "\"}}]}");
		body = body_end(&b);
		rc = body ? etcd_post(g, "/v3/kv/txn", body, 1000, &r) :
			    -ENOMEM;
		if (rc == 0)
			json_object_put(r);
	} else if (rc == 1) {
		rc = group_members_parse((const char *)val.data, mem, &n);
	}
	if (rc < 0 || n == 0)
		goto out;
	pthread_mutex_lock(&g->mu);
	g->members_rev = rev;
	if (n != g->nmembers || memcmp(mem, g->members, n * sizeof(*mem))) {
		set_members(g, mem, n);
		sw_notice(TAG, "the group's members: %s%s",
			  (const char *)val.data,
			  g->member ? "" : " (not this one)");
	}
	pthread_mutex_unlock(&g->mu);
out:
	sw_buf_release(&b);
	sw_buf_release(&val);
	return rc < 0 ? rc : 0;
}

/*
 * The change an admin asked for (group_members_change()), on the
 * membership as last read, put only if nobody changed it meanwhile.
 * 0 or -errno for the admin.
 */
static int change_members(struct group *g, const char *add, unsigned remove)
{
	struct group_member mem[GROUP_MAX], one[1];
	char list[GROUP_MAX * 280];
	struct json_object *r;
	struct sw_buf b;
	const char *body;
	int64_t rev;
	size_t n, k = 0;
	int rc;

	rc = sync_members(g);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&g->mu);
	n = g->nmembers;
	memcpy(mem, g->members, sizeof(mem));
	rev = g->members_rev;
	pthread_mutex_unlock(&g->mu);
	if (add[0]) {
		if (group_members_parse(add, one, &k) < 0 || k != 1)
			return -EINVAL;
		for (size_t i = 0; i < n; i++)
			if (mem[i].id == one[0].id)
				return -EEXIST;
		if (n == GROUP_MAX)
			return -ENOSPC;
		mem[n++] = one[0];
	} else {
		for (k = 0; k < n && mem[k].id != remove; k++)
			;
		if (k == n)
			return -ENOENT;
		if (n == 1)
			return -EINVAL; /* a group of none */
		memmove(&mem[k], &mem[k + 1], (n - k - 1) * sizeof(*mem));
		n--;
	}
	members_str(mem, n, list, sizeof(list));
	sw_buf_init(&b);
	str(&b, "{\"compare\":[{\"target\":\"MOD\",\"key\":\"");
	key_put(g, &b, "members");
	bprintf(&b,
		"\",\"mod_revision\":\"%" PRId64 "\"}],"
		"\"success\":[{\"request_put\":{\"key\":\"",
		rev);
	key_put(g, &b, "members");
	str(&b, "\",\"value\":\"");
	b64_put(&b, (const uint8_t *)list, strlen(list));
	str(&b, "\"}}]}");
	body = body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/txn", body, 1000, &r) : -ENOMEM;
	sw_buf_release(&b);
	if (rc < 0)
		return rc;
	rc = jget(r, "succeeded") &&
			     json_object_get_boolean(jget(r, "succeeded")) ?
		     0 :
		     -EAGAIN;
	json_object_put(r);
	if (rc == 0) {
		sw_notice(TAG, "membership changed: %s", list);
		sync_members(g);
	}
	return rc;
}

/* An admin's membership change, if one waits: made, and answered. */
static void admin_step(struct group *g)
{
	char add[300];
	unsigned remove;
	bool leaving;
	int rc;

	pthread_mutex_lock(&g->mu);
	if (!g->admin || g->admin_done) {
		pthread_mutex_unlock(&g->mu);
		return;
	}
	snprintf(add, sizeof(add), "%s", g->admin_add);
	remove = g->admin_remove;
	pthread_mutex_unlock(&g->mu);
	rc = change_members(g, add, remove);
	pthread_mutex_lock(&g->mu);
	g->admin_rc = rc;
	g->admin_done = true;
	/* The leader removed: it hands over to whoever is elected. */
	leaving = rc == 0 && !g->member && g->role == LEADER;
	if (leaving) {
		g->transfer = 0;
		g->transfer_at = g->committed;
		g->transferring = true;
	}
	pthread_mutex_unlock(&g->mu);
	wake_loop(g);
}

/* ---- the thread: status --------------------------------------------- */

static void publish(struct group *g, enum role role)
{
	struct json_object *r;
	struct sw_buf b;
	const char *body;
	char val[128];
	uint64_t applied;

	pthread_mutex_lock(&g->mu);
	applied = g->applied;
	pthread_mutex_unlock(&g->mu);
	snprintf(val, sizeof(val), "%s %" PRIu64 " %" PRId64, role_names[role],
		 applied, sw_now_ns());
	sw_buf_init(&b);
	str(&b, "{\"key\":\"");
	key_put(g, &b, "members/%u", g->id);
	str(&b, "\",\"value\":\"");
	b64_put(&b, (const uint8_t *)val, strlen(val));
	str(&b, "\"}");
	body = body_end(&b);
	if (body && etcd_post(g, "/v3/kv/put", body, 1000, &r) == 0)
		json_object_put(r);
	sw_buf_release(&b);
}

static void read_members(struct group *g)
{
	struct json_object *r, *kvs;
	struct sw_buf b, v;
	const char *body;
	size_t n;

	sw_buf_init(&b);
	sw_buf_init(&v);
	str(&b, "{\"key\":\"");
	key_put(g, &b, "members/");
	str(&b, "\",\"range_end\":\"");
	key_put(g, &b, "members0");
	str(&b, "\"}");
	body = body_end(&b);
	if (!body || etcd_post(g, "/v3/kv/range", body, 1000, &r) < 0)
		goto out;
	kvs = jget(r, "kvs");
	n = kvs ? json_object_array_length(kvs) : 0;
	for (size_t i = 0; i < n; i++) {
		struct json_object *kv = json_object_array_get_idx(kvs, i);
		const char *k, *slash;
		char role[16];
		uint64_t ver;
		int64_t at;
		unsigned id;

		sw_buf_reset(&v);
		if (!jget(kv, "key") ||
		    b64_get(&v, json_object_get_string(jget(kv, "key"))) ||
		    sw_buf_add(&v, "", 1))
			continue;
		k = (const char *)v.data;
		slash = strrchr(k, '/');
		id = (unsigned)strtoul(slash ? slash + 1 : "0", NULL, 10);
		sw_buf_reset(&v);
		if (!jget(kv, "value") ||
		    b64_get(&v, json_object_get_string(jget(kv, "value"))) ||
		    sw_buf_add(&v, "", 1) ||
		    sscanf((const char *)v.data, "%15s %" SCNu64 " %" SCNd64,
			   role, &ver, &at) != 3)
			continue;
		pthread_mutex_lock(&g->mu);
		for (size_t j = 0; j < g->st.n; j++) {
			if (g->st.members[j].id != id)
				continue;
			snprintf(g->st.members[j].role,
				 sizeof(g->st.members[j].role), "%s", role);
			g->st.members[j].version = ver;
			/* Clocks differ a little between machines: a time
			 * ahead of ours is now, not never. */
			g->st.members[j].age_ms =
				SW_MAX(sw_now_ns() - at, 0) / 1000000;
		}
		pthread_mutex_unlock(&g->mu);
	}
	json_object_put(r);
out:
	sw_buf_release(&b);
	sw_buf_release(&v);
}

/* ---- the thread ----------------------------------------------------- */

/* Wait on the condition variable until @until (mono ns) or a wake-up. */
static void wait_until(struct group *g, int64_t until, bool backoff)
{
	struct timespec ts = sw_ns_to_timespec(until);

	pthread_mutex_lock(&g->mu);
	/* Records to ship do not cut a back-off short (after a failed
	 * try): that would spin on an etcd that refuses at once. */
	if (!g->stop &&
	    (backoff || !(g->role == LEADER && sw_buf_used(&g->out))) &&
	    !(g->admin && !g->admin_done))
		pthread_cond_timedwait(&g->cond, &g->mu, &ts);
	pthread_mutex_unlock(&g->mu);
}

/*
 * A leader killed leaves its key until its lease runs out (seconds). When
 * its machine is up but its port refuses connections twice in a row, or
 * the key is this member's own from before a restart, its process is
 * gone: the lease is revoked, and the election starts now. A leader cut
 * off the network refuses nothing (connects time out): that one is
 * waited for. A wrong guess costs a leader its lease, not the log: its
 * next transaction is fenced off and it exits.
 */
static void check_leader(struct group *g)
{
	struct sw_target t;
	char addr[272];
	unsigned id;
	int fd;

	pthread_mutex_lock(&g->mu);
	snprintf(addr, sizeof(addr), "%s", g->leader);
	id = g->leader_id;
	pthread_mutex_unlock(&g->mu);
	if (!g->leader_lease)
		return;
	if (id == g->id) {
		sw_notice(TAG, "the leader key is ours from before a restart: "
			       "revoking it");
		revoke_lease(g, g->leader_lease);
		return;
	}
	if (sw_mono_ns() < g->next_probe || !addr[0] ||
	    sw_target_parse(addr, 0, &t) < 0 || !t.port)
		return;
	g->next_probe = sw_mono_ns() + PROBE_EVERY_NS;
	fd = sw_tcp_connect(t.host, t.port, 200);
	if (fd >= 0)
		close(fd);
	if (fd != -ECONNREFUSED) {
		g->refused = 0;
		return;
	}
	if (++g->refused < 2)
		return;
	g->refused = 0;
	sw_notice(TAG,
		  "leader %u (%s) refuses connections: it is gone; revoking "
		  "its lease",
		  id, addr);
	revoke_lease(g, g->leader_lease);
}

/* Whether this master stops (for catchup_fetch()). */
static bool stopping(void *arg)
{
	struct group *g = arg;
	bool stop;

	pthread_mutex_lock(&g->mu);
	stop = g->stop;
	pthread_mutex_unlock(&g->mu);
	return stop;
}

/*
 * This member cannot follow the group's log from where its data is: read
 * the leader's checkpoint of version @need at least (catchup.h), have the
 * loop load it, and follow the log from there. 0, or -ECANCELED when this
 * master stops first.
 */
static int catch_up(struct group *g, uint64_t need)
{
	char leader[sizeof(g->leader)], name[64];
	uint64_t version = 0, applied;
	unsigned leader_id;
	int rc;

	pthread_mutex_lock(&g->mu);
	applied = g->applied;
	pthread_mutex_unlock(&g->mu);
	sw_notice(TAG,
		  "this member is at version %" PRIu64 ", and the group's "
		  "log starts after %" PRIu64 ": catching up from the "
		  "leader's checkpoint",
		  applied, need);
	snprintf(name, sizeof(name), "member %u", g->id);
	for (;;) {
		pthread_mutex_lock(&g->mu);
		rc = g->stop ? -ECANCELED : 0;
		pthread_mutex_unlock(&g->mu);
		if (rc < 0)
			return rc;
		rc = read_leader(g);
		pthread_mutex_lock(&g->mu);
		snprintf(leader, sizeof(leader), "%s", g->leader);
		leader_id = g->leader_id;
		pthread_mutex_unlock(&g->mu);
		if (rc == 1 && leader[0] && leader_id != g->id) {
			rc = catchup_fetch(leader, g->m->session_key,
					   g->m->cfg.data_dir, need, name,
					   CATCHUP_TIMEOUT_MS, stopping, g,
					   &version);
			if (rc == 0)
				break;
			if (rc == -ECANCELED)
				return rc;
			sw_warn(TAG, "catching up from %s: %s; trying again%s",
				leader, strerror(-rc),
				rc == -EACCES ? " (does this member hold the "
						"group's session.key?)" :
						"");
		}
		wait_until(g, sw_mono_ns() + SW_NSEC_PER_SEC, false);
	}
	/* The loop loads it (on_async()), and says so by clearing it. */
	pthread_mutex_lock(&g->mu);
	g->reload = version;
	pthread_mutex_unlock(&g->mu);
	for (;;) {
		bool done, stop;

		wake_loop(g);
		wait_until(g, sw_mono_ns() + 200 * 1000000, false);
		pthread_mutex_lock(&g->mu);
		done = !g->reload;
		stop = g->stop;
		pthread_mutex_unlock(&g->mu);
		if (done)
			break;
		if (stop)
			return -ECANCELED;
	}
	pthread_mutex_lock(&g->mu);
	g->applied = version;
	pthread_mutex_unlock(&g->mu);
	g->next = version + 1;
	g->located = false;
	sw_notice(TAG, "caught up: at version %" PRIu64 ", following", version);
	return 0;
}

/*
 * A member that starts from less than the version the group started from
 * (an empty data directory beside an existing group) would take the log's
 * records for changes it has: it catches up first. 0, or -errno when etcd
 * did not say, or this master stops.
 */
static int check_base(struct group *g)
{
	struct sw_buf val;
	uint64_t applied;
	int rc;

	sw_buf_init(&val);
	rc = etcd_get(g, "base", &val, NULL, NULL);
	if (rc == 1)
		g->base = strtoull((const char *)val.data, NULL, 10);
	sw_buf_release(&val);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&g->mu);
	applied = g->applied;
	pthread_mutex_unlock(&g->mu);
	if (applied < g->base)
		return catch_up(g, g->base);
	return 0;
}

/* One turn of a follower: who leads, what to apply, whether to run. */
static void follow(struct group *g)
{
	bool more = false, backlog;
	int rc;

	pthread_mutex_lock(&g->mu);
	backlog = sw_buf_used(&g->in) > IN_MAX;
	pthread_mutex_unlock(&g->mu);
	if (!backlog && fetch(g, &more) == -ERANGE) {
		catch_up(g, g->gap_at - 1);
		return;
	}
	if (more || backlog) {
		wait_until(g, sw_mono_ns() + (backlog ? 10 : 0) * 1000000,
			   false);
		return;
	}
	rc = read_leader(g);
	if (rc == 1)
		check_leader(g);
	if (rc == 0 && may_campaign(g) && campaign(g) == 1) {
		/* Nobody else can add to the log now: read the rest of it,
		 * then serve once the loop has applied it. */
		do {
			rc = fetch(g, &more);
		} while (rc == 0 && more);
		if (rc < 0) {
			deposed(g, "cannot read the log after the election");
			return;
		}
		g->next_ka = sw_mono_ns() + g->lease_ns / 4;
		atomic_store(&g->renewed_at, g->last_ka);
		atomic_store(&g->valid_until,
			     g->last_ka + g->lease_ns - LEASE_MARGIN_NS);
		pthread_mutex_lock(&g->mu);
		g->role = LEADER;
		g->promote_at = g->next - 1;
		g->leader_id = g->id;
		snprintf(g->leader, sizeof(g->leader), "%s", g->self);
		pthread_mutex_unlock(&g->mu);
		sw_notice(TAG,
			  "elected (revision %" PRId64
			  "); log ends at %" PRIu64,
			  g->my_rev, g->next - 1);
		wake_loop(g);
		return;
	}
	wait_until(g, sw_mono_ns() + 100 * 1000000, false);
}

/* One turn of the leader: renew the lease when due, ship what there is. */
static void lead(struct group *g)
{
	int64_t now = sw_mono_ns();
	int rc;

	/* (Not while the loop still applies what the election brought: it
	 * has every right to be busy then.) */
	if (now >= g->next_ka && atomic_load(&g->leading) &&
	    now - atomic_load(&g->loop_seen) > g->lease_ns / 2) {
		/* The loop is stuck (a hung disk?): it answers nobody, and
		 * the group needs a leader that does. */
		if (now - g->last_ka <= g->lease_ns / 4 + LOOP_WATCH_NS)
			sw_crit(TAG,
				"the loop has not run for %" PRId64 " ms: "
				"letting the lease go",
				(now - atomic_load(&g->loop_seen)) / 1000000);
		g->next_ka = now + g->lease_ns / 20;
	} else if (now >= g->next_ka) {
		rc = keepalive(g);
		if (rc == 0) {
			g->last_ka = now;
			atomic_store(&g->renewed_at, now);
			atomic_store(&g->valid_until,
				     now + g->lease_ns - LEASE_MARGIN_NS);
			g->next_ka = now + g->lease_ns / 4;
			wake_loop(g); /* held-back requests go on */
		} else if (rc == -ENOENT) {
			deposed(g, "the lease expired");
			return;
		} else {
			g->next_ka = now + g->lease_ns / 20;
		}
	}
	if (sw_mono_ns() - g->last_ka > g->lease_ns) {
		deposed(g, "etcd did not renew the lease in time");
		return;
	}
	/* etcd renews a lease without looking at the token (3.4): a leader
	 * whose user etcd no longer takes (any call of this thread found
	 * out) would hold on and commit nothing. Another member, perhaps
	 * given the new password, may. */
	if (g->auth_refused) {
		deposed(g, "etcd refuses this member's user");
		return;
	}
	rc = ship(g);
	if (rc == -ESTALE) {
		deposed(g, "another member holds the leader key");
		return;
	}
	if (rc >= 0) {
		bool go;
		unsigned to;

		pthread_mutex_lock(&g->mu);
		/* What was answered before the request is in etcd; what
		 * came after is never answered (this master exits). */
		go = g->transferring && g->committed >= g->transfer_at;
		to = g->transfer;
		pthread_mutex_unlock(&g->mu);
		if (go) {
			hand_over(g, to);
			return;
		}
	}
	if (rc == 1)
		return;
	if (rc < 0)
		wait_until(g, sw_mono_ns() + 20 * 1000000, true);
	else
		wait_until(g, g->next_ka, false);
}

/*
 * A leader stopped cleanly: what is queued goes to etcd (for a moment at
 * most), then the lease, so that the next leader is elected at once and
 * not when the lease runs out.
 */
static void step_down(struct group *g)
{
	int64_t until = sw_mono_ns() + STOP_SHIP_NS;

	while (sw_mono_ns() < until) {
		int rc = ship(g);

		if (rc == 0 || rc == -ESTALE)
			break;
		if (rc < 0)
			usleep(20 * 1000);
	}
	revoke_lease(g, g->lease_id);
	sw_notice(TAG, "stepped down");
}

static void *group_main(void *arg)
{
	struct group *g = arg;
	int rc;

	/* Whether this data can follow the group at all, before it
	 * follows or campaigns. */
	sync_members(g);
	while ((rc = check_base(g)) < 0) {
		bool stop;

		pthread_mutex_lock(&g->mu);
		stop = g->stop;
		pthread_mutex_unlock(&g->mu);
		if (stop)
			return NULL;
		usleep(200 * 1000);
		sync_members(g);
	}

	for (;;) {
		enum role role;
		bool stop, dead;
		int64_t now = sw_mono_ns();

		pthread_mutex_lock(&g->mu);
		stop = g->stop;
		role = g->role;
		dead = g->deposed;
		pthread_mutex_unlock(&g->mu);
		if (stop && role == LEADER && !dead)
			step_down(g);
		if (stop || dead)
			break;
		if (now >= g->next_pub) {
			sync_members(g);
			publish(g, role);
			read_members(g);
			g->next_pub = now + SW_NSEC_PER_SEC;
		}
		if (role == LEADER)
			admin_step(g);
		if (role == LEADER && now >= g->next_prune) {
			if (g->next_prune)
				prune(g);
			g->next_prune = now + PRUNE_EVERY_NS;
		}
		if (role == LEADER)
			lead(g);
		else
			follow(g);
	}
	return NULL;
}

/* ---- start and stop ------------------------------------------------- */

/*
 * At the start, a user's password is tried on etcd, each endpoint in turn
 * until one answers: one etcd refuses makes the start fail (-EACCES, the
 * master exits with etcd's reason), rather than a member that runs and
 * never joins. An etcd that does not answer yet is not an error: the
 * thread tries again.
 */
static int etcd_first_auth(struct group *g)
{
	int rc = 0;

	for (size_t i = 0; g->user[0] && i < g->nendpoints; i++) {
		rc = authenticate(g, i, 2000);
		if (rc == -EACCES)
			sw_crit(TAG,
				"etcd refused user '%s' (etcd_user, "
				"etcd_password_file): not starting",
				g->user);
		if (rc != -EIO)
			return rc;
	}
	if (rc == -EIO)
		sw_warn(TAG,
			"etcd did not answer to authenticate '%s' yet: "
			"trying on",
			g->user);
	return rc == -EIO ? 0 : rc;
}

int group_start(struct master *m)
{
	struct group *g;
	struct group_member mem[GROUP_MAX];
	size_t n;
	int rc;

	if (!m->cfg.group_id)
		return 0;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->m = m;
	g->id = (unsigned)m->cfg.group_id;
	rc = group_members_parse(m->cfg.group, mem, &n);
	if (rc < 0) {
		sw_crit(TAG, "group: not ID=HOST:PORT,...: '%s'", m->cfg.group);
		goto out_free;
	}
	g->st.id = g->id;
	set_members(g, mem, n);
	for (size_t i = 0; i < n; i++)
		if (mem[i].id == g->id)
			snprintf(g->self, sizeof(g->self), "%s", mem[i].addr);
	if (!g->member) {
		sw_crit(TAG, "id %u is not in the group '%s'", g->id,
			m->cfg.group);
		rc = -EINVAL;
		goto out_free;
	}
	rc = endpoints_parse(g, m->cfg.etcd,
			     m->cfg.etcd_cacert[0] ? "https://" : "http://");
	if (rc < 0) {
		sw_crit(TAG, "etcd: not a list of HOST:PORT: '%s'",
			m->cfg.etcd);
		goto out_free;
	}
	snprintf(g->prefix, sizeof(g->prefix), "%s", m->cfg.group_prefix);
	g->lease_ns = (int64_t)m->cfg.group_lease_ms * 1000000;
	g->next = m->ns.version + 1;
	g->applied = m->ns.version;
	/* Before the thread: curl_global_init() is not thread-safe. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	g->curl = curl_easy_init();
	if (!g->curl) {
		rc = -ENOMEM;
		goto out_free;
	}
	curl_easy_setopt(g->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(g->curl, CURLOPT_WRITEDATA, &g->resp);
	curl_easy_setopt(g->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(g->curl, CURLOPT_CONNECTTIMEOUT_MS, 500L);
	curl_easy_setopt(g->curl, CURLOPT_ERRORBUFFER, g->curl_err);
	rc = etcd_secure(g, &m->cfg);
	if (rc == 0)
		rc = etcd_first_auth(g);
	if (rc < 0)
		goto out_cleanup;
	pthread_mutex_init(&g->mu, NULL);
	sw_cond_init_mono(&g->cond);
	uv_async_init(m->loop, &g->async, on_async);
	g->async.data = g;
	atomic_store(&g->loop_seen, sw_mono_ns());
	uv_timer_init(m->loop, &g->watch);
	g->watch.data = g;
	uv_timer_start(&g->watch, on_watch, LOOP_WATCH_MS, LOOP_WATCH_MS);
	m->group = g;
	rc = -pthread_create(&g->thread, NULL, group_main, g);
	if (rc < 0) {
		sw_crit(TAG, "cannot start the group's thread: %s",
			strerror(-rc));
		return rc;
	}
	g->started = true;
	sw_notice(TAG, "member %u of %zu (%s), following; etcd at %s%s%s%s%s",
		  g->id, g->nmembers, g->self, g->endpoints[0],
		  g->nendpoints > 1 ? ",..." : "",
		  m->cfg.etcd_cert[0] ? ", with a client certificate" : "",
		  g->user[0] ? ", as user " : "", g->user);
	return 0;

out_cleanup:
	curl_slist_free_all(g->auth);
	curl_easy_cleanup(g->curl);
	curl_global_cleanup();
	sw_buf_release(&g->resp);
out_free:
	sodium_memzero(g->password, sizeof(g->password));
	free(g);
	return rc;
}

void group_stop(struct master *m)
{
	struct group *g = m->group;

	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->stop = true;
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->mu);
	if (g->started)
		pthread_join(g->thread, NULL);
	g->started = false;
	/* A membership change the thread did not get to. */
	pthread_mutex_lock(&g->mu);
	if (g->admin && !g->admin_done) {
		g->admin_rc = -ESHUTDOWN;
		g->admin_done = true;
	}
	pthread_mutex_unlock(&g->mu);
	group_admin_answer(g);
	/* What etcd took while stepping down goes to the disk too. */
	if (g->serving && g->committed > g->released) {
		g->released = g->committed;
		changelog_release(m->cl, g->committed);
	}
	uv_close((uv_handle_t *)&g->async, NULL);
	uv_timer_stop(&g->watch);
	uv_close((uv_handle_t *)&g->watch, NULL);
}

void group_release(struct master *m)
{
	struct group *g = m->group;

	if (!g)
		return;
	curl_easy_cleanup(g->curl);
	curl_global_cleanup();
	curl_slist_free_all(g->auth);
	sodium_memzero(g->password, sizeof(g->password));
	sw_buf_release(&g->resp);
	sw_buf_release(&g->flight);
	sw_buf_release(&g->in);
	sw_buf_release(&g->out);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cond);
	free(g);
	m->group = NULL;
}

/* ---- what others ask ------------------------------------------------ */

int group_transfer(struct master *m, unsigned to)
{
	struct group *g = m->group;
	bool member = to == 0;

	if (!g)
		return -ENOTSUP;
	pthread_mutex_lock(&g->mu);
	for (size_t i = 0; i < g->nmembers; i++)
		member |= g->members[i].id == to;
	pthread_mutex_unlock(&g->mu);
	if (!member || to == g->id || !g->serving)
		return -EINVAL;
	/* Flushed now, so that what was answered before is shipped before
	 * the hand-over. */
	changelog_flush(m->cl);
	pthread_mutex_lock(&g->mu);
	g->transfer = to;
	g->transfer_at = changelog_last(m->cl);
	g->transferring = true;
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

void group_pin(struct master *m, uint64_t version)
{
	struct group *g = m->group;

	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	/* Several members may catch up at once: the oldest one counts. */
	if (g->pin_until <= sw_mono_ns() || version < g->pin)
		g->pin = version;
	g->pin_until = sw_mono_ns() + PIN_NS;
	pthread_mutex_unlock(&g->mu);
}

bool group_serving(const struct master *m)
{
	return !m->group || m->group->serving;
}

int group_members_change(struct master *m, struct req *r, const char *add,
			 unsigned remove)
{
	struct group *g = m->group;
	struct req *d;

	if (!g)
		return -ENOTSUP;
	if (!g->serving)
		return -EINVAL;
	if (strlen(add) >= sizeof(g->admin_add))
		return -EINVAL;
	pthread_mutex_lock(&g->mu);
	if (g->admin) {
		pthread_mutex_unlock(&g->mu);
		return -EBUSY;
	}
	pthread_mutex_unlock(&g->mu);
	d = req_defer(r);
	if (!d)
		return -ENOMEM;
	pthread_mutex_lock(&g->mu);
	g->admin = d;
	g->admin_done = false;
	snprintf(g->admin_add, sizeof(g->admin_add), "%s", add);
	g->admin_remove = remove;
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

const char *group_leader(const struct master *m)
{
	struct group *g = m->group;
	static char addr[272];

	if (!g)
		return "";
	pthread_mutex_lock(&g->mu);
	snprintf(addr, sizeof(addr), "%s", g->leader);
	pthread_mutex_unlock(&g->mu);
	return addr;
}

bool group_status(const struct master *m, struct group_status *st)
{
	struct group *g = m->group;

	if (!g)
		return false;
	pthread_mutex_lock(&g->mu);
	*st = g->st;
	st->role = g->serving	     ? role_names[LEADER] :
		   g->role == LEADER ? role_names[CANDIDATE] :
				       role_names[FOLLOWER];
	snprintf(st->leader, sizeof(st->leader), "%s", g->leader);
	pthread_mutex_unlock(&g->mu);
	return true;
}
