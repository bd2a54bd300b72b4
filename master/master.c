/*
 * The master's life cycle, for main.c and for programs that run a master
 * in-process (the fuzz targets): configuration defaults, start-up
 * (checkpoint + replay, changelog, exports, listening, timers),
 * housekeeping, checkpoints and shutdown. What belongs to the process
 * (options, daemonizing, the data directory's lock, signals) stays in
 * main.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lockops.h"
#include "master.h"
#include "auth.h"
#include "checkpoint.h"
#include "log.h"
#include "admin.h"
#include "csrv.h"
#include "dataops.h"
#include "deleg.h"
#include "group.h"
#include "health.h"
#include "purge.h"
#include "server.h"
#include "session.h"
#include "snapjob.h"
#include "trashops.h"
#include "watch.h"
#include "mutation.h"
#include "net.h"
#include "util.h"
#include "prefault.h"
#include "slab.h"
#include "child.h"
#include "htab.h"

#define TAG "master"

void master_config_defaults(struct master_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->listen_host, "0.0.0.0");
	c->listen_port = SW_MASTER_PORT;
	strcpy(c->data_dir, "/var/lib/sweepfs/master");
	strcpy(c->exports_file, "/etc/sweepfs/exports.cfg");
	c->changelog_sync = CL_SYNC_INTERVAL;
	c->sync_interval_ms = 100;
	c->checkpoint_interval_ms = 3600 * 1000;
	/* A restart is ready in < 20 s at 34 M files (issue 29): the load
	 * takes 9-13 s there on the 2-core VM and the dearest work to
	 * replay about 1 us a unit (an unlink; a purged node 0.42 us), so
	 * 5 M units leave 5 s of replay and a few for what comes in while
	 * the next checkpoint is written (bench/nsbench.c at 34 M). */
	c->checkpoint_changes = 5 * 1000 * 1000;
	c->keep_checkpoints = 2;
	c->session_timeout_ms = 120 * 1000;
	c->frame_timeout_ms = 30 * 1000;
	c->peer_timeout_ms = 30 * 1000;
	c->max_connections = 10000;
	strcpy(c->log_level, "notice");
	c->goal = 1;
	c->delete_rate = 1000000;
	c->chunkserver_grace_ms = 5000;
	c->stray_grace_ms = 5 * 60 * 1000;
	c->purge_slice_us = 200;
	c->purge_duty = 50;
	c->purge_duty_busy = 10;
	c->snapshot_sync_max = 20000;
	strcpy(c->chunkserver_allow, "*");
	c->max_sessions = 100000;
	c->max_sessions_per_address = 4096;
	c->session_idle_timeout_ms = 5000;
	c->output_max = 16u << 20;
	c->grants_max = 4u << 20;
	c->locks_per_session = 100000;
	c->deleg_max = 256;
	c->deleg_timeout_ms = 10000;
	c->inval_timeout_ms = 300;
	c->locks_per_file = 100000;
	c->lock_waiters_per_session = 10000;
	c->lock_waiters_per_file = 10000;
	c->hello_timeout_ms = 5000;
	c->pre_hello_max = 4096;
	c->pre_hello_per_address = 1024;
	c->output_total_max = 256u << 20;
	c->locks_total = 1000000;
	c->lock_waiters_total = 100000;
	c->locks_per_ro_session = 1024;
	c->lock_waiters_per_ro_session = 64;
	strcpy(c->etcd, "127.0.0.1:2379");
	strcpy(c->group_prefix, "/sweepfs/");
	c->group_lease_ms = 2000;
	c->group_disk_timeout_ms = 10000;
	c->group_log_keep = 10000;
	c->group_log_away_ms = 10 * 60 * 1000;
}

/* ---- replay --------------------------------------------------------- */

static int replay_one(void *arg, uint64_t version, const uint8_t *payload,
		      size_t len)
{
	return mutation_replay(arg, version, payload, len);
}

static void replay_hint(void *arg, unsigned stage, const uint8_t *payload,
			size_t len)
{
	mutation_prefetch(arg, stage, payload, len);
}

static int load_metadata(struct master *m)
{
	uint64_t cp_version, last, cp_nodes, bytes;
	int64_t t0 = sw_mono_ns(), t1;
	int rc;

	rc = ns_init(&m->ns, sw_now_ns());
	if (rc < 0)
		return rc;
	rc = checkpoint_load(&m->ns, m->cfg.data_dir, &cp_version);
	if (rc < 0) {
		sw_crit(TAG, "no usable checkpoint in %s: %s", m->cfg.data_dir,
			strerror(-rc));
		return rc;
	}
	m->ckpt.version = cp_version;
	m->ckpt.work = ns_replay_work(&m->ns);
	t1 = sw_mono_ns();
	cp_nodes = m->ns.nnodes;
	if (changelog_bytes_after(m->cfg.data_dir, cp_version, &bytes) == 0)
		ns_replay_ahead(&m->ns, bytes);
	rc = changelog_replay_ahead(m->cfg.data_dir, cp_version, replay_one,
				    replay_hint, &m->ns, &last);
	ns_load_end(&m->ns);
	if (rc < 0) {
		sw_crit(TAG, "changelog replay failed: %s", strerror(-rc));
		return rc;
	}
	m->ns.version = last;
	m->loaded_mono = sw_mono_ns();
	sw_notice(TAG,
		  "metadata at version %" PRIu64 " (checkpoint %" PRIu64
		  ", %" PRIu64 " changes replayed): %" PRIu64
		  " nodes in %.3f s (%" PRIu64 " nodes loaded in %.3f s, "
		  "changes replayed in %.3f s)",
		  last, cp_version, last - cp_version, m->ns.nnodes,
		  (double)(sw_mono_ns() - t0) / 1e9, cp_nodes,
		  (double)(t1 - t0) / 1e9, (double)(m->loaded_mono - t1) / 1e9);
	if (htab_count(&m->ns.orphans)) {
		m->orphan_deadline =
			sw_mono_ns() +
			(int64_t)m->cfg.session_timeout_ms * 1000000;
		sw_notice(TAG,
			  "%zu open-but-unlinked files wait for their "
			  "clients to reclaim them",
			  htab_count(&m->ns.orphans));
	}
	return 0;
}

/* ---- checkpoints ---------------------------------------------------- */

/*
 * Old checkpoints and the changelog files only they needed are removed in
 * libuv's thread pool, not on the loop: at 34 M files a checkpoint is 3
 * GB, most of it in the page cache just after it was written, and
 * unlink() frees those pages in the caller, for hundreds of milliseconds
 * (what another client's stat waited for at worst in bench/seed.py's
 * restart phase). The names come from the directory as the pool finds
 * it; no checkpoint starts meanwhile (master_checkpoint()), since the
 * prune takes every .tmp for a stale one.
 */
struct prune {
	uv_work_t req;
	const char *dir; /* m->cfg.data_dir, which never changes */
	unsigned keep;
	int64_t oldest; /* checkpoint_prune()'s */
	struct master *m;
};

static void prune_files(const char *dir, unsigned keep, int64_t *oldest)
{
	*oldest = checkpoint_prune(dir, keep);
	if (*oldest > 0)
		changelog_prune(dir, (uint64_t)*oldest);
}

static void prune_work(uv_work_t *req)
{
	struct prune *p = req->data;

	prune_files(p->dir, p->keep, &p->oldest);
}

static void prune_done(uv_work_t *req, int status)
{
	struct prune *p = req->data;

	(void)status; /* never cancelled */
	if (p->oldest < 0)
		sw_err(TAG, "removing old checkpoints: %s",
		       strerror((int)-p->oldest));
	p->m->ckpt.pruning = false;
	free(p);
}

static void prune_start(struct master *m)
{
	struct prune *p = malloc(sizeof(*p));
	int64_t oldest;

	if (p) {
		*p = (struct prune){ .dir = m->cfg.data_dir,
				     .keep = (unsigned)m->cfg.keep_checkpoints,
				     .m = m };
		p->req.data = p;
		if (uv_queue_work(m->loop, &p->req, prune_work, prune_done) ==
		    0) {
			m->ckpt.pruning = true;
			return;
		}
		free(p);
	}
	/* No memory for it: on the loop, as a last resort. */
	prune_files(m->cfg.data_dir, (unsigned)m->cfg.keep_checkpoints,
		    &oldest);
}

/* Checkpoint @version, taken at ns_replay_work() @work, is on disk:
 * older ones and their changelogs go, in the pool while the loop runs
 * (@loop_runs), else at once. */
static void checkpoint_written(struct master *m, uint64_t version,
			       uint64_t work, bool loop_runs)
{
	int64_t oldest;

	m->ckpt.version = version;
	m->ckpt.work = work;
	if (loop_runs)
		prune_start(m);
	else
		prune_files(m->cfg.data_dir, (unsigned)m->cfg.keep_checkpoints,
			    &oldest);
	if (loop_runs)
		sw_info(TAG,
			"checkpoint %" PRIu64 " written in %.3f s (%" PRIu64
			" nodes; the fork held the loop %.1f ms, the "
			"changelog's rotation %.1f ms)",
			version, (double)(sw_mono_ns() - m->ckpt.last) / 1e9,
			m->ns.nnodes, (double)m->ckpt.fork_ns / 1e6,
			(double)m->ckpt.rotate_ns / 1e6);
	else
		sw_info(TAG, "checkpoint %" PRIu64 " written", version);
}

/* A held checkpoint (a leader's) becomes one once the group has every
 * change in it; not before, or a deposed leader would restart from
 * changes the group never committed. */
static void checkpoint_release(struct master *m)
{
	uint64_t v = m->ckpt.held;
	int rc;

	if (!v || !m->cl || changelog_durable(m->cl) < v)
		return;
	m->ckpt.held = 0;
	rc = checkpoint_publish(m->cfg.data_dir, v);
	if (rc < 0)
		sw_err(TAG, "checkpoint %" PRIu64 " not kept: %s", v,
		       strerror(-rc));
	else
		checkpoint_written(m, v, m->ckpt.target_work, true);
}

/* How long a due checkpoint waits for a running collapse. */
#define COLLAPSE_WAIT_MS 2000LL

/*
 * While a child (a checkpoint's writer, fsck, a tree summary, a snapshot
 * copy) lived, every huge page of the slabs and of the big hash tables'
 * arrays that the loop wrote to was split (slab.h, slab_collapse()), and
 * the next fork would copy small pages' entries again: at 34 M files a
 * fork in the middle of a purge held the loop 43 ms instead of 3. Once no
 * child lives, those pages are made huge again in the pool, where the
 * copy of 2 MiB each holds no request. It stops at the next fork (a
 * page made huge while a child shares it would be copied whole), and the
 * next checkpoint waits for it (master_checkpoint_waits()).
 */
struct collapse {
	uv_work_t req;
	struct master *m;
	void **bases;	  /* huge pages in use when it started */
	size_t n;	  /* how many */
	size_t nslab;	  /* of them the slabs', first; then the tables' */
	uint64_t gen;	  /* htab_huge_gen() when listed */
	size_t done;	  /* huge pages now */
	int64_t ns;	  /* how long it took, in the pool */
	atomic_bool stop; /* a fork is coming */
};

static void collapse_start(void *arg);

static void collapse_work(uv_work_t *req)
{
	struct collapse *c = req->data;
	int64_t t0 = sw_mono_ns();

	for (size_t i = 0; i < c->n && !atomic_load(&c->stop); i++) {
		/* A table's array freed since it was listed may be mapped
		 * again by something sparse, which a collapse would fill in
		 * (no byte changes, but memory grows): leave the rest. */
		if (i >= c->nslab && htab_huge_gen() != c->gen)
			break;
		c->done += slab_collapse(&c->bases[i], 1);
	}
	c->ns = sw_mono_ns() - t0;
}

static void collapse_done(uv_work_t *req, int status)
{
	struct collapse *c = req->data;
	struct master *m = c->m;
	bool stopped = atomic_load(&c->stop);

	(void)status; /* never cancelled */
	sw_info(TAG,
		"after the fork, %zu of %zu huge pages are whole again "
		"(%.1f ms in the pool)",
		c->done, c->n, (double)c->ns / 1e6);
	m->ckpt.collapse = NULL;
	free(c->bases);
	free(c);
	/* Stopped for a fork that did not come, or for a child already
	 * gone: none will ask again. */
	if (stopped && sw_child_alive() == 0)
		collapse_start(m);
}

/* A fork or the shutdown is coming: a running collapse ends after the
 * huge page it is at. */
static void collapse_stop(void *arg)
{
	struct master *m = arg;

	if (m->ckpt.collapse)
		atomic_store(&m->ckpt.collapse->stop, true);
}

/* No child lives (sw_child_hooks()). */
static void collapse_start(void *arg)
{
	struct master *m = arg;
	struct collapse *c;

	if (m->ckpt.collapse || m->stopping)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	if (slab_collapse_list(&c->bases, &c->n) < 0) {
		free(c);
		return;
	}
	c->nslab = c->n;
	c->gen = htab_huge_gen();
	if (htab_huge_list(&c->bases, &c->n) < 0) {
		free(c->bases);
		free(c);
		return;
	}
	c->m = m;
	c->req.data = c;
	atomic_init(&c->stop, false);
	if (c->n == 0 ||
	    uv_queue_work(m->loop, &c->req, collapse_work, collapse_done) < 0) {
		free(c->bases);
		free(c);
		return;
	}
	m->ckpt.collapse = c;
}

static void on_checkpoint_done(void *arg, int rc)
{
	struct master *m = arg;

	if (m->cl)
		changelog_defer(m->cl, false);
	if (rc < 0) {
		sw_err(TAG, "checkpoint %" PRIu64 " failed: %s", m->ckpt.target,
		       strerror(-rc));
		return;
	}
	if (m->ckpt.writer.hold) {
		m->ckpt.held = m->ckpt.target;
		checkpoint_release(m);
		return;
	}
	checkpoint_written(m, m->ckpt.target, m->ckpt.target_work, true);
}

void master_checkpoint(struct master *m)
{
	int rc;

	/* Half a snapshot copy is not something to checkpoint: the
	 * changelog holds it until it is done (snapjob.c). */
	m->ckpt.due_at = 0;
	if (checkpoint_running(&m->ckpt.writer) || m->ckpt.held ||
	    m->ckpt.pruning || m->stopping || ns_copy_active(&m->ns, NULL))
		return;
	m->ckpt.last = sw_mono_ns();
	if (m->ns.version == m->ckpt.version)
		return;
	/* Before the rotation's syncs, so that the collapse is off the
	 * memory map lock by the fork (sw_child_hooks() stops it too). */
	collapse_stop(m);
	rc = changelog_rotate(m->cl);
	/* What the rotation held the loop for (it syncs both files). */
	m->ckpt.rotate_ns = sw_mono_ns() - m->ckpt.last;
	if (rc < 0) {
		sw_err(TAG, "cannot start a new changelog file: %s",
		       strerror(-rc));
		return;
	}
	m->ckpt.target = m->ns.version;
	m->ckpt.target_work = ns_replay_work(&m->ns);
	/* A group's leader has changes etcd may not have committed yet. */
	m->ckpt.writer.hold = m->group && group_serving(m);
	rc = checkpoint_start(&m->ckpt.writer, m->loop, &m->ns, m->cfg.data_dir,
			      m->ckpt.target, on_checkpoint_done, m);
	/* What the fork held the loop for: the page tables of the whole
	 * namespace are copied before it returns. */
	m->ckpt.fork_ns = sw_mono_ns() - m->ckpt.last - m->ckpt.rotate_ns;
	if (rc < 0)
		sw_err(TAG, "cannot start a checkpoint: %s", strerror(-rc));
	else /* its gigabytes keep the disk busy: the loop writes nothing */
		changelog_defer(m->cl, true);
}

/* ---- exports --------------------------------------------------------- */

/*
 * (Re)load the exports file. A missing file means the open policy; a
 * broken one keeps what was in force (at start-up: refuses to start).
 */
int master_load_exports(struct master *m)
{
	char err[512] = "";
	int rc = exports_load(m->cfg.exports_file, &m->exports, err,
			      sizeof(err));

	if (rc == -ENOENT) {
		if (!m->exports.open)
			sw_notice(TAG,
				  "%s does not exist: every client may "
				  "mount everything, read-write, as admin",
				  m->cfg.exports_file);
		exports_open(&m->exports);
		return 0;
	}
	if (rc < 0) {
		sw_err(TAG, "exports not (re)loaded: %s",
		       err[0] ? err : strerror(-rc));
		return rc;
	}
	sw_notice(TAG, "%s: %zu exports", m->cfg.exports_file, m->exports.n);
	/* Admin is root's once mapped (session_admin_uid()): with root
	 * squashed, the option gives no one anything. */
	for (size_t i = 0; i < m->exports.n; i++) {
		const struct export_rule *r = &m->exports.rules[i];

		if (r->admin && r->mapall_uid != 0 &&
		    (r->mapall_uid != EXPORT_NO_MAP ||
		     r->maproot_uid != EXPORT_NO_MAP))
			sw_notice(TAG,
				  "%s:%d: admin gives root nothing while "
				  "root is squashed (add maproot=0)",
				  m->cfg.exports_file, r->line);
	}
	return 0;
}

/* ---- loop callbacks ------------------------------------------------- */

static void on_durable(void *arg, uint64_t version)
{
	struct master *m = arg;

	server_durable(m, version);
	group_durable(m, version);
	if (m->ckpt.held && version >= m->ckpt.held)
		checkpoint_release(m);
}

/*
 * The key in @path into @key: read it, or (@make) make it at first start
 * (hex, mode 0600, written atomically: auth.h). 0 or -errno (logged).
 */
static int data_key(const char *path, uint8_t key[SW_AUTH_KEY], bool make)
{
	int rc = sw_auth_key_load(path, key);

	if (rc == -ENOENT && make) {
		rc = sw_auth_key_create(path, key);
		if (rc == 0)
			sw_notice(TAG, "made a new key, %s", path);
		else if (rc == -EEXIST)
			rc = sw_auth_key_load(path, key);
	}
	if (rc < 0)
		sw_crit(TAG, "cannot use the key %s: %s", path,
			rc == -EPERM  ? "others may read it (chmod 600)" :
			rc == -EINVAL ? "not a key (64 hex digits)" :
					strerror(-rc));
	return rc;
}

/*
 * The master's keys: token.key makes the keys that sign chunk access
 * tokens, a new one each time this master leads (csrv_token_epoch()), so
 * that a chunkserver it leads takes no token granted before; session.key
 * makes sessions' secrets (so that a mount resumes its session after a
 * restart), and the chunkserver key, which chunkservers must hold. Also
 * who may register as a chunkserver.
 */
static int load_keys(struct master *m)
{
	uint8_t token[SW_AUTH_KEY];
	char path[4200];
	int rc;

	snprintf(path, sizeof(path), "%s/token.key", m->cfg.data_dir);
	rc = data_key(path, token, true);
	if (rc < 0)
		return rc;
	memcpy(m->cs->token_base, token, sizeof(m->cs->token_base));
	snprintf(path, sizeof(path), "%s/session.key", m->cfg.data_dir);
	rc = data_key(path, m->session_key, true);
	if (rc < 0)
		return rc;
	req_once_key(m->session_key, m->once_key);
	sw_handle_key(m->session_key, m->handle_key);
	if (m->cfg.chunkserver_key_file[0])
		rc = data_key(m->cfg.chunkserver_key_file, m->cs->key, false);
	else {
		snprintf(path, sizeof(path), "%s/chunkserver.key",
			 m->cfg.data_dir);
		rc = data_key(path, m->cs->key, true);
	}
	if (rc < 0)
		return rc;
	rc = exports_addrs_parse(m->cfg.chunkserver_allow, m->cs->allow,
				 SW_ARRAY_SIZE(m->cs->allow), &m->cs->nallow);
	if (rc < 0)
		sw_crit(TAG, "chunkserver_allow: not a list of addresses: %s",
			m->cfg.chunkserver_allow);
	return rc;
}

static void on_cs_tick(uv_timer_t *t)
{
	csrvs_tick(t->data);
	health_tick(t->data);
}

static void on_resize_timer(uv_timer_t *t);

/*
 * Move hash tables that are growing along (master/htab.h), for at most a
 * millisecond; again in 10 ms while any is not done, so that the old
 * arrays go within a fraction of a second of the burst that made the
 * tables grow, at a few percent of the loop.
 */
static void resize_step(struct master *m)
{
	int64_t t0 = sw_mono_ns();
	bool more;

	while ((more = ns_housekeep(&m->ns)) && sw_mono_ns() - t0 < 1000000)
		;
	if (more && !m->stopping)
		uv_timer_start(&m->resize_timer, on_resize_timer, 10, 0);
}

static void on_resize_timer(uv_timer_t *t)
{
	resize_step(t->data);
}

static void on_wait_tick(uv_timer_t *t)
{
	struct master *m = t->data;
	int64_t seen = server_answers_seen(m);

	/* A group's leader whose lease is in doubt takes no ack, as no
	 * frame (server.c): none is late meanwhile. (Not for long: etcd
	 * renews it, or this master exits.) */
	if (!group_may_answer(m, sw_mono_ns()))
		return;
	deleg_tick(m, seen);
	server_inval_tick(m, seen);
	/* Nothing waits: no tick till something does (master_wait_arm()). */
	if (!deleg_recalling(m) && !m->owing)
		uv_timer_stop(t);
}

/*
 * A restart replays what came after the newest checkpoint, so a new one
 * is due once that replay would cost checkpoint_changes changes, counted
 * as ns_replay_work() counts them rather than as records: the purge
 * journals up to a slice's worth of freed nodes in one record and a
 * snapshot copy a whole tree's, so a crash after removing millions of
 * files replayed 3.5 M records that freed 30 M nodes, while the version
 * alone said a third of the bound (bench/seed.py at 34 M files). The
 * same as databases that checkpoint on the volume of their log, not on
 * its number of transactions. Or once checkpoint_interval has passed.
 */
bool master_checkpoint_due(const struct master *m, int64_t now)
{
	return ns_replay_work(&m->ns) - m->ckpt.work >=
		       m->cfg.checkpoint_changes ||
	       now - m->ckpt.last >=
		       (int64_t)m->cfg.checkpoint_interval_ms * 1000000;
}

/*
 * While the collapse after the last child runs (0.3 ms a huge page: 0.7 s
 * at 34 M files), a due checkpoint waits for it, at most COLLAPSE_WAIT_MS
 * from when it became due: a fork in its middle copies small pages'
 * entries for every page it has not reached (26-54 ms at 34 M files in
 * the middle of a purge, against 1-3.5). A purge adds replay work fast (a
 * million nodes freed a second, each a unit): a crash may then replay up
 * to that much more than checkpoint_changes.
 */
bool master_checkpoint_waits(struct master *m, int64_t now)
{
	if (!m->ckpt.collapse)
		return false;
	if (!m->ckpt.due_at)
		m->ckpt.due_at = now;
	return now - m->ckpt.due_at < COLLAPSE_WAIT_MS * 1000000;
}

static void on_tick(uv_timer_t *t)
{
	struct master *m = t->data;
	int64_t now = sw_mono_ns();

	admin_sample(m);
	if (group_serving(m)) {
		sessions_expire(m);
		orphans_expire(m);
		trash_expire(m);
	}
	server_reap_stalled(m);
	if (master_checkpoint_due(m, now) && !master_checkpoint_waits(m, now))
		master_checkpoint(m);
	if (!uv_is_active((uv_handle_t *)&m->resize_timer))
		resize_step(m);
}

/* ---- start and stop ------------------------------------------------- */

/* A directory leaves the namespace: whoever cached or held it is told. */
static void dir_gone(void *arg, struct node *dir)
{
	watch_dir_gone(arg, dir);
	deleg_dir_gone(arg, dir);
}

/*
 * The namespace core tells the layers above it what leaves it through
 * these hooks, the only arrows upwards; they are wired here and nowhere
 * else. Only once the changelog is replayed (replay frees nodes and
 * chunks that nobody has locked, cached or stored yet: their copies are
 * found orphaned when chunkservers register) and what they reach is
 * built; unwired before it goes.
 */
static void hooks_wire(struct master *m, bool on)
{
	m->ns.hook_arg = on ? m : NULL;
	m->ns.chunk_gone = on ? csrv_chunk_gone : NULL;
	m->ns.dir_gone = on ? dir_gone : NULL;
	m->ns.node_gone = on ? lockops_node_gone : NULL;
	m->ns.chunk_shared = on ? data_chunk_shared : NULL;
}

/* A new changelog file after the namespace's version. 0 or -errno. */
static int open_changelog(struct master *m)
{
	struct changelog_opts clo = {
		.dir = m->cfg.data_dir,
		.sync = (enum cl_sync)m->cfg.changelog_sync,
		.interval_ms = m->cfg.sync_interval_ms,
		.prealloc = m->cfg.changelog_prealloc,
		.thread_only = m->cfg.changelog_writer == 1,
		.on_durable = on_durable,
		.ship = group_ship,
		.arg = m,
	};
	int rc = changelog_open(m->loop, &clo, m->ns.version, &m->cl);

	if (rc < 0)
		sw_crit(TAG, "cannot open the changelog in %s: %s",
			m->cfg.data_dir, strerror(-rc));
	return rc;
}

int master_reload(struct master *m)
{
	int rc;

	changelog_close(m->cl); /* frees itself once closed */
	m->cl = NULL;
	ns_release(&m->ns);
	rc = load_metadata(m);
	if (rc == 0)
		rc = open_changelog(m);
	if (rc < 0)
		return rc;
	/* What this member had before is older than the checkpoint. */
	changelog_prune(m->cfg.data_dir, m->ckpt.version);
	return 0;
}

/*
 * The request layer's arrows upwards (req.h): the server answers and
 * owns connections (and sends notices, closes, resumes, counts
 * invalidations for the handlers), the group says whether this master
 * serves and answers an admin's group requests, a full disk recalls
 * every delegation. Wired here, with the core's, and nowhere else: the
 * handlers below name none of these.
 */
static const struct req_hooks req_hooks = {
	.send = server_req_send,
	.hold = server_req_hold,
	.session = server_req_session,
	.serving = group_serving,
	.disk_full = deleg_recall_all,
	.notify = conn_notify,
	.close = conn_close,
	.link = server_req_link,
	.resume = server_req_resume,
	.inval_sent = server_inval_sent,
	.inval_acked = server_inval_acked,
	.inval_give_up = server_inval_give_up,
	.silent_since = server_silent_since,
	.group_status = group_status,
	.group_change = group_members_change,
	.group_transfer = group_transfer,
};

void master_wire_requests(struct master *m)
{
	req_wire(m, &req_hooks);
}

/* The handlers' state struct master points to, in one block. */
struct master_parts {
	struct purge purge;
	struct background bg;
	struct csrv_table cs;
	struct data_state data;
	struct health health;
	struct op_counters total;
	struct latency latency;
};

int master_parts_new(struct master *m)
{
	struct master_parts *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	m->purge = &p->purge;
	m->bg = &p->bg;
	m->cs = &p->cs;
	m->data = &p->data;
	m->health = &p->health;
	m->total = &p->total;
	m->latency = &p->latency;
	return 0;
}

void master_parts_free(struct master *m)
{
	if (m->purge)
		free((char *)m->purge - offsetof(struct master_parts, purge));
	m->purge = NULL;
	m->bg = NULL;
	m->cs = NULL;
	m->data = NULL;
	m->health = NULL;
	m->total = NULL;
	m->latency = NULL;
}

int master_start(struct master *m, uv_loop_t *loop)
{
	int rc;

	rc = master_parts_new(m);
	if (rc < 0)
		return rc;
	master_wire_requests(m);
	m->loop = loop;
	m->started_at = sw_now_ns();
	m->started_mono = m->ckpt.last = sw_mono_ns();
	sw_child_hooks(collapse_stop, collapse_start, m);
	m->data->settle_at = m->started_mono +
			     (int64_t)m->cfg.chunkserver_grace_ms * 1000000;
	rc = load_keys(m);
	if (rc < 0)
		return rc;
	rc = load_metadata(m);
	if (rc < 0)
		return rc;
	m->prefault = sw_prefault_start();
	slab_prefault_next(m->prefault);
	csrvs_init(m);
	rc = delegs_new(m);
	if (rc < 0)
		return rc;
	rc = open_changelog(m);
	if (rc < 0)
		return rc;
	sessions_init(m);
	rc = master_load_exports(m);
	if (rc < 0)
		return rc;
	rc = server_start(m);
	if (rc == 0)
		rc = metrics_start(m);
	if (rc < 0)
		return rc;
	uv_timer_init(m->loop, &m->tick);
	m->tick.data = m;
	uv_timer_start(&m->tick, on_tick, 1000, 1000);
	uv_timer_init(m->loop, &m->resize_timer);
	m->resize_timer.data = m;
	uv_timer_init(m->loop, &m->cs_tick);
	m->cs_tick.data = m;
	uv_timer_start(&m->cs_tick, on_cs_tick, 100, 100);
	uv_timer_init(m->loop, &m->wait_tick);
	m->wait_tick.data = m;
	uv_timer_start(&m->wait_tick, on_wait_tick, WAIT_TICK_MS, WAIT_TICK_MS);
	purge_init(m);
	rc = snapjob_init(m);
	if (rc < 0)
		return rc;
	if (m->cfg.group_id)
		return group_start(m); /* it calls master_lead() when elected */
	master_lead(m);
	return 0;
}

/*
 * The first master to lead metadata without an identity gives it one,
 * journaled like any change, so that replay, a checkpoint and every
 * member of a group have the same (HelloReply.cluster_id). A commit that
 * fails (the metadata disk full) leaves it for the next start: no hello
 * carries an identity until then, and tools then do not compare.
 */
static void cluster_id_make(struct master *m)
{
	Sweepfs__Meta__ClusterId ci = SWEEPFS__META__CLUSTER_ID__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	uint8_t id[NS_CLUSTER_ID_LEN];
	int rc;

	if (ns_has_cluster_id(&m->ns))
		return;
	/* (All zero, one chance in 2^128, would read as none: made
	 * again at the next start.) */
	sw_auth_random(id, sizeof(id));
	ci.id.data = id;
	ci.id.len = sizeof(id);
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_CLUSTER_ID;
	mut.cluster_id = &ci;
	rc = master_commit(m, NULL, &mut);
	if (rc < 0)
		sw_err(TAG, "cannot journal the cluster's identity: %s",
		       strerror(-rc));
}

void master_lead(struct master *m)
{
	int64_t now = sw_mono_ns();

	hooks_wire(m, true);
	csrv_token_epoch(m);
	cluster_id_make(m);
	if (m->group) {
		/* As after a restart: mounts resume their sessions, reclaim
		 * their open files and send again what they had not had
		 * answered; chunkservers register again. */
		m->loaded_mono = now;
		m->data->settle_at =
			now + (int64_t)m->cfg.chunkserver_grace_ms * 1000000;
		m->data->settled = false;
		if (htab_count(&m->ns.orphans))
			m->orphan_deadline =
				now +
				(int64_t)m->cfg.session_timeout_ms * 1000000;
	}
	if (snapjob_take_over(m) < 0) {
		sw_crit(TAG, "cannot give up an interrupted snapshot");
		exit(70);
	}
	purge_kick(m); /* a purge interrupted by a restart goes on */
}

void master_stop(struct master *m)
{
	if (m->stopping)
		return;
	m->stopping = true;
	sw_notice(TAG, "shutting down");
	/* The loop runs until the pool's work is done: a collapse of a big
	 * namespace's regions would hold the shutdown for seconds, and the
	 * final checkpoint forks. */
	collapse_stop(m);
	/* A leader ships what it has before it steps down. */
	changelog_flush(m->cl);
	group_stop(m);
	metrics_stop(m); /* it reads what is closed below */
	snapjob_stop(m);
	data_stop(m);
	/* Flushed and synced first, so that held replies go out below. */
	changelog_close(m->cl);
	/* Replies the connections closing below still send (a chunk
	 * command failing) go by what was durable as it closed. */
	m->closed_durable = changelog_durable(m->cl);
	m->cl = NULL;
	server_stop(m);
	uv_timer_stop(&m->tick);
	uv_close((uv_handle_t *)&m->tick, NULL);
	uv_timer_stop(&m->resize_timer);
	uv_close((uv_handle_t *)&m->resize_timer, NULL);
	uv_timer_stop(&m->cs_tick);
	uv_close((uv_handle_t *)&m->cs_tick, NULL);
	uv_timer_stop(&m->wait_tick);
	uv_close((uv_handle_t *)&m->wait_tick, NULL);
	purge_stop(m);
}

/* Stopped: make the state on disk complete and quick to load (not with
 * half a snapshot copy: the next start gives that up from the
 * changelog). */
static void final_checkpoint(struct master *m)
{
	int rc;

	if (!m->stopping || m->ns.version == m->ckpt.version ||
	    ns_copy_active(&m->ns, NULL))
		return;
	/* A group's leader dropped what etcd had not committed when the
	 * changelog closed; its memory may be ahead of its disk. */
	if (m->group && group_serving(m))
		return;
	rc = checkpoint_write(&m->ns, m->cfg.data_dir, m->ns.version);
	if (rc < 0)
		sw_err(TAG, "final checkpoint failed: %s", strerror(-rc));
	else
		checkpoint_written(m, m->ns.version, ns_replay_work(&m->ns),
				   false);
}

void master_release(struct master *m)
{
	final_checkpoint(m);
	sw_child_unhook(m);
	hooks_wire(m, false);
	snapjob_release(m);
	exports_free(&m->exports);
	sessions_release(m);
	csrvs_release(m);
	delegs_free(m);
	group_release(m);
	slab_prefault_next(NULL);
	sw_prefault_stop(m->prefault);
	m->prefault = NULL;
	ns_release(&m->ns);
	sw_arena_release(&m->arena);
	master_parts_free(m);
}
