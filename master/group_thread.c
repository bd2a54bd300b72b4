/*
 * The group's thread (group_i.h): the only one that talks to etcd.
 * Following (fetch the log, hand it to the loop), leading (campaign,
 * ship the changelog, keep the lease, prune), the membership and the
 * members' status, and the thread's main loop that moves between them.
 */
#include "group_i.h"

#define TAG "group"

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
	etcd_str(&b, "{\"key\":\"");
	etcd_key_put(g, &b, "%s", name);
	etcd_str(&b, "\"}");
	body = etcd_body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/range", body, 1000, &r) : -ENOMEM;
	sw_buf_release(&b);
	if (rc < 0)
		return rc;
	kvs = etcd_jget(r, "kvs");
	kv = kvs && json_object_array_length(kvs) ?
		     json_object_array_get_idx(kvs, 0) :
		     NULL;
	rc = 0;
	sw_buf_reset(val);
	if (kv) {
		v = etcd_jget(kv, "value");
		/* An empty value is left out, as proto3 JSON does. */
		rc = (v ? etcd_b64_get(val, json_object_get_string(v)) :
			  0) == 0 && sw_buf_add(val, "", 1) == 0 ?
			     1 :
			     -EPROTO;
		if (lease)
			*lease = etcd_jint(kv, "lease", 0);
		if (rev)
			*rev = etcd_jint(kv, "mod_revision", 0);
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
	etcd_str(&b, "{\"key\":\"");
	etcd_key_put(g, &b, "log/");
	etcd_str(&b, "\",\"range_end\":\"");
	etcd_b64_put(&b, (const uint8_t *)end, (size_t)n + 1);
	etcd_str(&b, "\",\"sort_order\":\"DESCEND\",\"sort_target\":\"KEY\","
		     "\"limit\":1,\"keys_only\":true}");
	body = etcd_body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/range", body, 2000, &r) : -ENOMEM;
	sw_buf_release(&b);
	if (rc < 0)
		return rc;
	kvs = etcd_jget(r, "kvs");
	k = kvs && json_object_array_length(kvs) == 1 ?
		    etcd_jget(json_object_array_get_idx(kvs, 0), "key") :
		    NULL;
	rc = 0;
	if (k && etcd_b64_get(&key, json_object_get_string(k)) == 0 &&
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
	etcd_str(&b, "{\"key\":\"");
	etcd_key_put(g, &b, "log/%020" PRIu64, g->next);
	etcd_str(&b, "\",\"range_end\":\"");
	etcd_key_put(g, &b, "log0");
	etcd_bprintf(&b, "\",\"limit\":%d}", FETCH_MAX);
	body = etcd_body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/range", body, 2000, &r) : -ENOMEM;
	if (rc < 0)
		goto out;
	kvs = etcd_jget(r, "kvs");
	n = kvs ? json_object_array_length(kvs) : 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct json_object *v =
			etcd_jget(json_object_array_get_idx(kvs, i), "value");
		const uint8_t *payload;
		size_t off = 0, rec, len;
		uint64_t ver = 0, first = 0;

		sw_buf_reset(&val);
		rc = v ? etcd_b64_get(&val, json_object_get_string(v)) :
			 -EPROTO;
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
	*more = etcd_jget(r, "more") &&
		json_object_get_boolean(etcd_jget(r, "more"));
	json_object_put(r);
	if (n)
		gloop_wake(g);
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
	etcd_bprintf(&b, "{\"TTL\":%" PRId64 "}",
		     (int64_t)((g->lease_ns + SW_NSEC_PER_SEC - 1) /
			       SW_NSEC_PER_SEC));
	body = etcd_body_end(&b);
	rc = body ? etcd_post(g, "/v3/lease/grant", body, 1000, &r) : -ENOMEM;
	sw_buf_reset(&b);
	if (rc < 0)
		goto out;
	g->lease_id = etcd_jint(r, "ID", 0);
	json_object_put(r);
	if (!g->lease_id) {
		rc = -EPROTO;
		goto out;
	}
	g->last_ka = t0;
	snprintf(val, sizeof(val), "%u %s", g->id, g->self);
	etcd_str(&b, "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"");
	etcd_key_put(g, &b, "leader");
	etcd_str(&b, "\",\"create_revision\":\"0\"}],\"success\":[{"
		     "\"request_put\":{\"key\":\"");
	etcd_key_put(g, &b, "leader");
	etcd_str(&b, "\",\"value\":\"");
	etcd_b64_put(&b, (const uint8_t *)val, strlen(val));
	etcd_bprintf(&b, "\",\"lease\":\"%" PRId64 "\"}}]}", g->lease_id);
	body = etcd_body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/txn", body, 1000, &r) : -ENOMEM;
	if (rc < 0)
		goto out;
	if (etcd_jget(r, "succeeded") &&
	    json_object_get_boolean(etcd_jget(r, "succeeded"))) {
		g->my_rev = etcd_jint(etcd_jget(r, "header"), "revision", 0);
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
	gloop_wake(g);
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
	ttl = etcd_jint(etcd_jget(r, "result"), "TTL", 0);
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
	etcd_str(&b, "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"");
	etcd_key_put(g, &b, "leader");
	etcd_bprintf(&b,
		     "\",\"create_revision\":\"%" PRId64 "\"}],"
		     "\"success\":[{\"request_put\":{\"key\":\"",
		     g->my_rev);
	etcd_key_put(g, &b, "log/%020" PRIu64, g->flight_first);
	etcd_str(&b, "\",\"value\":\"");
	/* The one big piece: a body short of it must not go out. */
	rc = etcd_b64_put(&b, sw_buf_head(&g->flight), sw_buf_used(&g->flight));
	etcd_str(&b, "\"}}]}");
	body = rc == 0 ? etcd_body_end(&b) : NULL;
	rc = body ? etcd_post(g, "/v3/kv/txn", body, 2000, &r) : -ENOMEM;
	sw_buf_release(&b);
	if (rc < 0)
		return rc;
	rc = etcd_jget(r, "succeeded") && json_object_get_boolean(
						  etcd_jget(r, "succeeded")) ?
		     1 :
		     -ESTALE;
	json_object_put(r);
	if (rc < 0)
		return rc;
	sw_buf_reset(&g->flight);
	pthread_mutex_lock(&g->mu);
	g->committed = g->flight_last;
	pthread_mutex_unlock(&g->mu);
	gloop_wake(g);
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
		lease = etcd_jint(r, "ID", 0);
		json_object_put(r);
	}
	snprintf(val, sizeof(val), "%u", to);
	etcd_str(&b, "{\"key\":\"");
	etcd_key_put(g, &b, "transfer");
	etcd_str(&b, "\",\"value\":\"");
	etcd_b64_put(&b, (const uint8_t *)val, strlen(val));
	etcd_bprintf(&b, "\",\"lease\":\"%" PRId64 "\"}", lease);
	body = etcd_body_end(&b);
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
		etcd_bprintf(&b, "{\"revision\":\"%" PRId64 "\"}", rev);
		body = etcd_body_end(&b);
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
	etcd_str(&b, "{\"key\":\"");
	etcd_key_put(g, &b, "log/");
	etcd_str(&b, "\",\"range_end\":\"");
	etcd_key_put(g, &b, "log/%020" PRIu64, first);
	etcd_str(&b, "\"}");
	body = etcd_body_end(&b);
	if (!body || etcd_post(g, "/v3/kv/deleterange", body, 2000, &r) < 0)
		goto out;
	if (etcd_jint(r, "deleted", 0) > 0)
		sw_info(TAG,
			"%" PRId64 " log keys before version %" PRIu64
			" deleted",
			etcd_jint(r, "deleted", 0), upto + 1);
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
void gthread_set_members(struct group *g, const struct group_member *mem,
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
		etcd_str(&b, "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"");
		etcd_key_put(g, &b, "members");
		etcd_str(&b, "\",\"create_revision\":\"0\"}],\"success\":[{"
			     "\"request_put\":{\"key\":\"");
		etcd_key_put(g, &b, "members");
		etcd_str(&b, "\",\"value\":\"");
		etcd_b64_put(&b, (const uint8_t *)list, strlen(list));
		/* And where its log starts: a member older than that cannot
		 * follow it (check_base()). */
		etcd_str(&b, "\"}},{\"request_put\":{\"key\":\"");
		etcd_key_put(g, &b, "base");
		etcd_str(&b, "\",\"value\":\"");
		etcd_b64_put(&b, (const uint8_t *)v, (size_t)vl);
		etcd_str(&b, "\"}}]}");
		body = etcd_body_end(&b);
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
		gthread_set_members(g, mem, n);
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
	etcd_str(&b, "{\"compare\":[{\"target\":\"MOD\",\"key\":\"");
	etcd_key_put(g, &b, "members");
	etcd_bprintf(&b,
		     "\",\"mod_revision\":\"%" PRId64 "\"}],"
		     "\"success\":[{\"request_put\":{\"key\":\"",
		     rev);
	etcd_key_put(g, &b, "members");
	etcd_str(&b, "\",\"value\":\"");
	etcd_b64_put(&b, (const uint8_t *)list, strlen(list));
	etcd_str(&b, "\"}}]}");
	body = etcd_body_end(&b);
	rc = body ? etcd_post(g, "/v3/kv/txn", body, 1000, &r) : -ENOMEM;
	sw_buf_release(&b);
	if (rc < 0)
		return rc;
	rc = etcd_jget(r, "succeeded") && json_object_get_boolean(
						  etcd_jget(r, "succeeded")) ?
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
	gloop_wake(g);
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
	snprintf(val, sizeof(val), "%s %" PRIu64 " %" PRId64,
		 group_role_names[role], applied, sw_now_ns());
	sw_buf_init(&b);
	etcd_str(&b, "{\"key\":\"");
	etcd_key_put(g, &b, "members/%u", g->id);
	etcd_str(&b, "\",\"value\":\"");
	etcd_b64_put(&b, (const uint8_t *)val, strlen(val));
	etcd_str(&b, "\"}");
	body = etcd_body_end(&b);
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
	etcd_str(&b, "{\"key\":\"");
	etcd_key_put(g, &b, "members/");
	etcd_str(&b, "\",\"range_end\":\"");
	etcd_key_put(g, &b, "members0");
	etcd_str(&b, "\"}");
	body = etcd_body_end(&b);
	if (!body || etcd_post(g, "/v3/kv/range", body, 1000, &r) < 0)
		goto out;
	kvs = etcd_jget(r, "kvs");
	n = kvs ? json_object_array_length(kvs) : 0;
	for (size_t i = 0; i < n; i++) {
		struct json_object *kv = json_object_array_get_idx(kvs, i);
		const char *k, *slash;
		char role[16];
		uint64_t ver;
		int64_t at;
		unsigned id;

		sw_buf_reset(&v);
		if (!etcd_jget(kv, "key") ||
		    etcd_b64_get(
			    &v, json_object_get_string(etcd_jget(kv, "key"))) ||
		    sw_buf_add(&v, "", 1))
			continue;
		k = (const char *)v.data;
		slash = strrchr(k, '/');
		id = (unsigned)strtoul(slash ? slash + 1 : "0", NULL, 10);
		sw_buf_reset(&v);
		if (!etcd_jget(kv, "value") ||
		    etcd_b64_get(&v, json_object_get_string(
					     etcd_jget(kv, "value"))) ||
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

		gloop_wake(g);
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
		gloop_wake(g);
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
	    (now - atomic_load(&g->loop_seen) > g->lease_ns / 2 ||
	     atomic_load(&g->disk_lag) > g->disk_timeout_ns)) {
		/* The loop is stuck, or its changelog's disk (the loop goes
		 * on, but no change is acknowledged): it answers nobody, and
		 * the group needs a leader that does. */
		if (now - g->last_ka <= g->lease_ns / 4 + LOOP_WATCH_NS) {
			if (now - atomic_load(&g->loop_seen) > g->lease_ns / 2)
				sw_crit(TAG,
					"the loop has not run for %" PRId64
					" ms: letting the lease go",
					(now - atomic_load(&g->loop_seen)) /
						1000000);
			else
				sw_crit(TAG,
					"the changelog's disk has not made "
					"progress for %" PRId64
					" ms (group_disk_timeout): letting "
					"the lease go",
					atomic_load(&g->disk_lag) / 1000000);
		}
		g->next_ka = now + g->lease_ns / 20;
	} else if (now >= g->next_ka) {
		rc = keepalive(g);
		if (rc == 0) {
			g->last_ka = now;
			atomic_store(&g->renewed_at, now);
			atomic_store(&g->valid_until,
				     now + g->lease_ns - LEASE_MARGIN_NS);
			g->next_ka = now + g->lease_ns / 4;
			gloop_wake(g); /* held-back requests go on */
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

void *gthread_main(void *arg)
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
