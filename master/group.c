/*
 * A group of masters on etcd (group.h): the election, shipping the
 * leader's changelog, and the followers' apply. This file is the loop's
 * side, start and stop, and what others ask; group_i.h maps the rest.
 *
 * The thread (group_thread.c) is the only one that talks to etcd
 * (group_etcd.c). It speaks etcd's v3 JSON gateway (POST /v3/..., keys
 * and values in base64) over one libcurl handle with keep-alive,
 * blocking, one request at a time: while a transaction is in flight,
 * what the loop flushes meanwhile piles up and goes in the next one
 * (group commit across loop turns).
 *
 * etcd is the group's trusted base: whoever can write its keys can make
 * itself a member or the leader. Who may is etcd's to say (the README's
 * group section says how to lock it down); a member proves itself with a
 * client certificate over TLS (etcd_cacert, etcd_cert, etcd_key), or as
 * an etcd user (etcd_user, etcd_password_file), or both. See "etcd's TLS
 * and authentication" in group_etcd.c.
 */
#include "group_i.h"

#define TAG "group"

const char *const group_role_names[3] = { "follower", "candidate", "leader" };

/* ---- the loop's side ------------------------------------------------ */

void gloop_wake(struct group *g)
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

struct follow_one {
	struct master *m;
	uint64_t version;
	const uint8_t *rec; /* the change's record, as the leader made it */
	size_t n;	    /* its bytes */
};

/*
 * Apply and journal one change of the group's log (mutation_unpacked()).
 * The record goes to this member's changelog as it came: encoding the
 * change again cost as much as unpacking it.
 */
static int follow_apply(void *arg, const Sweepfs__Meta__Mutation *mut)
{
	struct follow_one *f = arg;
	int rc = changelog_reserve(f->m->cl, f->n);

	if (rc == 0)
		rc = mutation_apply(&f->m->ns, mut, f->version);
	if (rc == 0)
		changelog_append_record(f->m->cl, f->rec, f->n, f->version);
	return rc;
}

static void follow_hint(void *arg, unsigned stage, const uint8_t *payload,
			size_t len)
{
	mutation_prefetch(arg, stage, payload, len);
}

/* A follower applies records from the group's log; the versions it has
 * already are skipped. 0 or -EUCLEAN (a gap or a change that does not
 * apply: this member cannot follow, and says so). As replay does, it
 * starts reading what a record touches a few records early. */
static int apply_records(struct master *m, const uint8_t *p, size_t n)
{
	struct changelog_ahead ahead;
	size_t off = 0, rec, len;
	const uint8_t *payload;
	uint64_t ver;

	changelog_ahead_init(&ahead, p, n, 0, follow_hint, &m->ns);
	while ((rec = changelog_ahead_record(&ahead, off, &ver, &payload,
					     &len)) > 0) {
		struct follow_one f = { m, 0, p + off, rec };
		int rc;

		changelog_ahead_step(&ahead);
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
		/* Unpacked on the stack, as replay does at start-up. */
		f.version = ver;
		rc = mutation_unpacked(payload, len, follow_apply, &f);
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
	gloop_lease_resume(g);
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

bool group_held_back(struct master *m)
{
	struct group *g = m->group;
	bool held = g && (g->paused || g->resumed);

	if (g)
		g->resumed = false;
	return held;
}

void gloop_lease_resume(struct group *g)
{
	struct master *m = g->m;

	if (!g->paused || sw_mono_ns() > atomic_load(&g->valid_until))
		return;
	g->paused = false;
	g->resumed = true;
	sw_notice(TAG, "the lease is renewed: answering again");
	for (struct conn *c = conn_first(m); c; c = conn_next(c))
		server_resume(c);
}

void group_durable(struct master *m, uint64_t version)
{
	struct group *g = m->group;

	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	if (version > g->applied)
		g->applied = version;
	pthread_mutex_unlock(&g->mu);
}

/*
 * The loop turns: it is seen. And how long its changelog's disk has kept
 * records waiting without progress: a hung disk no longer stops the loop
 * (a thread writes), so the thread must hear of it to let the lease go.
 */
static void on_watch(uv_timer_t *t)
{
	struct group *g = t->data;
	struct master *m = g->m;
	int64_t now = sw_mono_ns();

	atomic_store(&g->loop_seen, now);
	atomic_store(&g->disk_lag, m->cl ? changelog_lag_ns(m->cl, now) : 0);
	gloop_lease_resume(g);
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
		rc = etcd_authenticate(g, i, 2000);
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
	gthread_set_members(g, mem, n);
	for (size_t i = 0; i < n; i++)
		if (mem[i].id == g->id)
			snprintf(g->self, sizeof(g->self), "%s", mem[i].addr);
	if (!g->member) {
		sw_crit(TAG, "id %u is not in the group '%s'", g->id,
			m->cfg.group);
		rc = -EINVAL;
		goto out_free;
	}
	rc = etcd_endpoints_parse(
		g, m->cfg.etcd, m->cfg.etcd_cacert[0] ? "https://" : "http://");
	if (rc < 0) {
		sw_crit(TAG, "etcd: not a list of HOST:PORT: '%s'",
			m->cfg.etcd);
		goto out_free;
	}
	snprintf(g->prefix, sizeof(g->prefix), "%s", m->cfg.group_prefix);
	g->lease_ns = (int64_t)m->cfg.group_lease_ms * 1000000;
	g->disk_timeout_ns = (int64_t)m->cfg.group_disk_timeout_ms * 1000000;
	g->next = m->ns.version + 1;
	g->applied = m->ns.version;
	/* Before the thread: curl_global_init() is not thread-safe. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	g->curl = curl_easy_init();
	if (!g->curl) {
		rc = -ENOMEM;
		goto out_free;
	}
	curl_easy_setopt(g->curl, CURLOPT_WRITEFUNCTION, etcd_on_body);
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
	rc = -pthread_create(&g->thread, NULL, gthread_main, g);
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
	st->role = g->serving	     ? group_role_names[LEADER] :
		   g->role == LEADER ? group_role_names[CANDIDATE] :
				       group_role_names[FOLLOWER];
	snprintf(st->leader, sizeof(st->leader), "%s", g->leader);
	pthread_mutex_unlock(&g->mu);
	return true;
}
