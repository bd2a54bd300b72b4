/*
 * Supplementary groups of the calling process. fuse_req_getgroups() reads
 * /proc/PID/task/TID/status, about as costly as the request itself, so the
 * answer is kept per process for a second in a small direct-mapped table
 * (keyed by pid, checked against uid and gid).
 */
#include <pthread.h>
#include <string.h>

#include "mount_i.h"
#include "util.h"

#define CACHE_SLOTS 256
#define CACHE_GROUPS 32
#define CACHE_TTL_NS SW_NSEC_PER_SEC

struct groups_entry {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int64_t expires;
	unsigned n;
	uint32_t groups[CACHE_GROUPS];
};

static struct groups_entry cache[CACHE_SLOTS];
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

void cred_fill(fuse_req_t req, Sweepfs__Cred *c, uint32_t *groups, size_t cap)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct groups_entry *e = &cache[(unsigned)ctx->pid % CACHE_SLOTS];
	int64_t now = sw_mono_ns();
	gid_t list[CRED_GROUPS_MAX];
	int n;

	sweepfs__cred__init(c);
	c->uid = ctx->uid;
	c->gid = ctx->gid;
	c->groups = groups;
	c->n_groups = 0;

	/* Requests the kernel makes on its own (release, forget) have no
	 * process: no groups to look up. */
	if (ctx->pid == 0)
		return;
	pthread_mutex_lock(&cache_mu);
	if (e->pid == ctx->pid && e->uid == ctx->uid && e->gid == ctx->gid &&
	    e->expires > now) {
		c->n_groups = SW_MIN(e->n, cap);
		memcpy(groups, e->groups, c->n_groups * sizeof(*groups));
		pthread_mutex_unlock(&cache_mu);
		return;
	}
	pthread_mutex_unlock(&cache_mu);

	n = fuse_req_getgroups(req, CRED_GROUPS_MAX, list);
	if (n < 0)
		return; /* no /proc? the primary group still counts */
	n = SW_MIN(n, (int)SW_MIN(cap, CRED_GROUPS_MAX));
	for (int i = 0; i < n; i++)
		groups[i] = list[i];
	c->n_groups = (size_t)n;
	if (n > CACHE_GROUPS)
		return;
	pthread_mutex_lock(&cache_mu);
	e->pid = ctx->pid;
	e->uid = ctx->uid;
	e->gid = ctx->gid;
	e->expires = now + CACHE_TTL_NS;
	e->n = (unsigned)n;
	memcpy(e->groups, groups, (size_t)n * sizeof(*groups));
	pthread_mutex_unlock(&cache_mu);
}
