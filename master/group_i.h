/*
 * The group module's own (group.h is its interface): the state a group
 * shares between its files, and what they call across.
 *
 *   group.c         the loop's side (serving, the lease watch, applying
 *                   what the thread fetched), start and stop, what
 *                   others ask (group_*() of group.h)
 *   group_etcd.c    the etcd client: configuration, base64, JSON over
 *                   libcurl, TLS and authentication
 *   group_thread.c  the thread: following, leading, membership, status
 *
 * Locking is struct group's: the fields under "Under mu" are taken with
 * g->mu, the atomics by both threads without it, the rest by one thread.
 */
#ifndef SWEEPFS_MASTER_GROUP_I_H
#define SWEEPFS_MASTER_GROUP_I_H

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
extern const char *const group_role_names[3]; /* by enum role */

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
	int64_t disk_timeout_ns; /* group_disk_timeout */

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
	/* How long the changelog's disk has kept records waiting without
	 * progress, as the loop last saw (changelog_lag_ns()); past
	 * disk_timeout_ns the thread lets the lease go too. */
	_Atomic int64_t disk_lag;
	_Atomic bool leading; /* the loop serves as the leader */

	/* Loop thread only. */
	bool serving;
	bool paused;	   /* requests held back: the lease is in doubt */
	bool resumed;	   /* let go since group_held_back() last asked */
	uv_timer_t watch;  /* LOOP_WATCH_MS: loop_seen, valid_until */
	uint64_t released; /* records up to here released to the disk */
	uv_async_t async;
	pthread_t thread;
	bool started;
};

/* ---- the etcd client (group_etcd.c) ---- */

/* g->endpoints from @s, HOST:PORT,... with or without a scheme; without
 * one, @dflt ("http://" or "https://"). 0 or -EINVAL. */
int etcd_endpoints_parse(struct group *g, const char *s, const char *dflt);

/* Set up libcurl for etcd_cacert, etcd_cert and etcd_key, and read the
 * password of etcd_user. 0, or -errno (logged). */
int etcd_secure(struct group *g, const struct master_config *c);

/* A token for g->user from endpoint @i, in g->auth: 0; -EACCES when etcd
 * refused the user or password (logged once); else the POST's error. */
int etcd_authenticate(struct group *g, size_t i, long timeout_ms);

/* libcurl's write callback: the body into the struct sw_buf @arg. */
size_t etcd_on_body(char *p, size_t size, size_t n, void *arg);

/*
 * POST @body to @path on the endpoint in use, then, when it does not
 * answer or cannot serve, on the next ones in turn, all within
 * @timeout_ms. 0 with the reply's JSON in *@out (the caller puts it),
 * or -errno from the last endpoint tried.
 */
int etcd_post(struct group *g, const char *path, const char *body,
	      long timeout_ms, struct json_object **out);

/* Member @name of JSON object @o (NULL: none), and as an integer
 * (etcd sends 64-bit numbers as strings), @dflt when absent. */
struct json_object *etcd_jget(struct json_object *o, const char *name);
int64_t etcd_jint(struct json_object *o, const char *name, int64_t dflt);

/* Base64 of the @n bytes at @p onto @b; the decoding of @s onto @b
 * (-EPROTO for what is not base64). 0 or -ENOMEM. */
int etcd_b64_put(struct sw_buf *b, const uint8_t *p, size_t n);
int etcd_b64_get(struct sw_buf *b, const char *s);

/* A JSON body under construction: a string, a printf, a key under the
 * prefix in base64 onto @b (0 or -ENOMEM); NUL-terminated at the end
 * (NULL: out of memory). */
int etcd_str(struct sw_buf *b, const char *s);
int etcd_bprintf(struct sw_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int etcd_key_put(struct group *g, struct sw_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *etcd_body_end(struct sw_buf *b);

/* ---- the loop's side (group.c) ---- */

/* Wake the loop: the thread has something for it (on_async()). */
void gloop_wake(struct group *g);

/* The loop sees the lease renewed (from on_async() and the watch):
 * requests held back since it was in doubt go on. */
void gloop_lease_resume(struct group *g);

/* ---- the thread (group_thread.c) ---- */

/* The thread's body (pthread_create()). */
void *gthread_main(void *arg);

/* Take @mem (@n members) as the membership. */
void gthread_set_members(struct group *g, const struct group_member *mem,
			 size_t n);

#endif
