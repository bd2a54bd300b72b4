/*
 * Data requests: where a file's chunks are, and getting a chunk ready for
 * writing.
 *
 * Reading needs nothing but the copies that hold the chunk's current
 * version. Writing needs a chunk that is this file's alone and whose
 * copies all agree:
 *  - an empty slot gets a new chunk, created on `goal` servers;
 *  - a chunk shared with a snapshot is first duplicated on the servers
 *    that hold it (copy-on-write), and the slot points at the copy;
 *  - otherwise the writer takes a write lease: the version is bumped on
 *    every reachable copy, so a copy on a server that is away misses the
 *    bump and is recognised as stale when it comes back. While the lease
 *    is held the same session writes on without asking again.
 * Each of these journals its change first (an intent, chunks.h), then
 * commands the chunkservers, and when they are done journals that it was
 * done and answers the client (a deferred reply, sent once that record is
 * durable). Requests for a chunk with commands in flight wait for them.
 *
 * So no data is ever written under a change that is not recorded done,
 * and a master killed in between can redo it after restarting: copies
 * one version behind are moved forward instead of being deleted as
 * stale, and a new chunk that reached no server is made afresh. That
 * waits for the chunkservers to register again (the grace period after
 * start-up, cfg.chunkserver_grace), and so do requests for chunks no
 * server has reported yet, instead of failing with EIO.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "dataops.h"
#include "buf.h"
#include "log.h"
#include "handlers.h"
#include "csrv.h"
#include "context.h"
#include "req.h"
#include "sessrec.h"
#include "util.h"

#define TAG "data"
#define LEASE_NS (60 * SW_NSEC_PER_SEC)
/* How often data_tick() drops the leases whose token ended. */
#define DATA_PRUNE_NS (10 * SW_NSEC_PER_SEC)

/* A chunk request, kept while it waits (deferred reply included). */
struct job {
	struct req *req; /* deferred */
	uint64_t ino;
	uint32_t index;
	bool write;
	bool write_only; /* a writer who may not read: its token does not */
	uint64_t only;	 /* a sync's: that chunk at only_version, or none */
	uint32_t only_version;
	uint64_t chunk;
	uint32_t version;	/* the version the commands establish */
	int pending;		/* commands outstanding */
	int nok;		/* commands that succeeded */
	uint64_t src;		/* duplicate: source chunk (kept busy) */
	bool truncate;		/* a setattr's: reply with attributes */
	bool revoke;		/* no request: a lease taken back */
	bool quiet;		/* revoke: a failure gives no snapshot up */
	uint64_t lease_session; /* revoke: the lease, put back on failure */
	int64_t lease_until;
	bool redo; /* no request: a change a crash cut short */
	int nbad;
	uint32_t bad[CHUNK_COPIES_MAX]; /* servers the commands failed on */
	struct job *next;		/* in a chunk's waiters, or held */
	struct req_link *link;		/* its connection's count (a CHUNK's) */
};

struct chunk_wait {
	struct job *first;
};

static void job_run(struct master *m, struct job *j);

/* What @j's token grants: reading, or writing (and reading, unless the
 * writer may not read the file). */
static enum sw_token_mode token_mode(const struct job *j)
{
	if (!j->write)
		return SW_TOKEN_READ;
	return j->write_only ? SW_TOKEN_WRITE_ONLY : SW_TOKEN_WRITE;
}

/*
 * Whether a writer may still write @c in place under the lease it was
 * given: the lease itself ends LEASE_NS after its last grant or renewal
 * (then the master bumps the version for the next writer), but the token
 * of that grant lasts CSRV_TOKEN_TTL_MS, and a mount writes with a
 * token it holds without asking again (mount/data.c). A snapshot must
 * take back every lease whose token may still write.
 */
bool lease_writable(const struct chunk *c, int64_t now)
{
	return c->lease_session &&
	       c->lease_until - LEASE_NS +
			       (int64_t)CSRV_TOKEN_TTL_MS * 1000000 >
		       now;
}

/*
 * m->data->leased: chunks with a write lease, so that a snapshot can take
 * the leases back without looking at every chunk. A chunk is on it at
 * most once (c->leased), however often its lease is granted; an entry
 * whose token can no longer write goes when the list is next full, and
 * at most DATA_PRUNE_NS after (data_tick()). So the list holds the
 * chunks leased in the last CSRV_TOKEN_TTL_MS, each once.
 */
void data_lease(struct master *m, struct chunk *c, uint64_t session)
{
	struct leased *l = &m->data->leased;

	c->lease_session = session;
	c->lease_until = sw_mono_ns() + LEASE_NS;
	if (!session || c->leased)
		return;
	if (l->n == l->cap)
		data_prune_leases(m);
	/* Without room it cannot be revoked: see data_revoke_leases(). */
	if (sw_grow(&l->id, &l->cap, l->n + 1, sizeof(*l->id), 64) < 0) {
		m->data->leased_lost_at = sw_mono_ns();
		return;
	}
	l->id[l->n++] = c->id;
	c->leased = 1;
}

/* Drop the entries of m->data->leased whose token can no longer write. */
void data_prune_leases(struct master *m)
{
	struct leased *l = &m->data->leased;
	int64_t now = sw_mono_ns();
	size_t keep = 0;

	for (size_t i = 0; i < l->n; i++) {
		struct chunk *c = chunk_get(&m->ns, l->id[i]);

		if (!c)
			continue;
		if (lease_writable(c, now))
			l->id[keep++] = l->id[i];
		else
			c->leased = 0;
	}
	l->n = keep;
	m->data->pruned_at = now;
}

/* Empty m->data->leased (its chunks' leases were all taken back). */
static void leased_clear(struct master *m)
{
	struct leased *l = &m->data->leased;

	for (size_t i = 0; i < l->n; i++) {
		struct chunk *c = chunk_get(&m->ns, l->id[i]);

		if (c)
			c->leased = 0;
	}
	l->n = 0;
}

/* @j is run again from its file: what its last commands made of it
 * goes (the servers they failed on were another chunk's, or another
 * change's: their copies are not this one's to delete). */
static void job_again(struct job *j)
{
	j->nok = 0;
	j->nbad = 0;
	j->src = 0;
}

static void job_free(struct job *j)
{
	/* (Before req_done(): the connection's memory is held till then.)
	 * Its reading stopped at the cap goes on at half. */
	if (j->link && j->link->chunk_jobs-- == REQ_CHUNK_JOBS_MAX / 2 + 1)
		req_resume(j->req->m, j->link);
	if (j->req)
		req_done(j->req);
	free(j);
}

/*
 * @j's request, for the journal, if its connection is still there: a
 * deferred request keeps the session it came in (r->s), which is freed
 * when the connection closes, and a once request's record names it
 * (master_commit()). Without a connection nothing waits for the reply.
 */
static struct req *journal_req(const struct job *j)
{
	return j->req && req_session(j->req) ? j->req : NULL;
}

static void reply_loc(struct master *m, struct job *j, const struct node *n,
		      const struct chunk *c)
{
	Sweepfs__ChunkReply reply = SWEEPFS__CHUNK_REPLY__INIT;
	Sweepfs__ChunkLoc loc = SWEEPFS__CHUNK_LOC__INIT;
	uint8_t token[SW_TOKEN_LEN];
	char *servers[CHUNK_COPIES_MAX];
	size_t ns = 0;

	reply.has_file_size = 1;
	reply.file_size = n->size;
	if (c) {
		for (int i = 0; i < c->ncopies; i++) {
			struct csrv *s = csrv_get(m, c->copies[i].srv);

			if (c->copies[i].state == COPY_VALID && csrv_up(s))
				servers[ns++] = s->listen;
		}
		/* Only a damaged copy left: what it has is better than
		 * nothing (its bad blocks fail on their own), for reading. */
		for (int i = 0; !ns && !j->write && i < c->ncopies; i++) {
			struct csrv *s = csrv_get(m, c->copies[i].srv);

			if (c->copies[i].state == COPY_DAMAGED && csrv_up(s))
				servers[ns++] = s->listen;
		}
		if (!ns) {
			req_error(j->req, -EIO);
			return;
		}
		loc.has_chunk_id = loc.has_version = 1;
		loc.chunk_id = c->id;
		loc.version = c->version;
		loc.n_servers = ns;
		loc.servers = servers;
		csrv_token(m, c->id, c->version, token_mode(j), token,
			   &loc.expires);
		loc.has_write_only = j->write_only;
		loc.write_only = j->write_only;
		loc.has_expires = 1;
		loc.has_token = 1;
		loc.token.data = token;
		loc.token.len = SW_TOKEN_LEN;
		reply.loc = &loc;
	}
	req_reply(j->req, &reply.base);
}

static void revoke_idle(struct master *m, struct chunk *c);

/*
 * Commands on @c finished: a revocation that waited goes first (it moves
 * the chunk on, if they did not, while nothing else is in flight), then
 * the requests that waited run.
 */
static void chunk_idle(struct master *m, struct chunk *c)
{
	struct chunk_wait *w;
	struct job *j;

	if (c->busy)
		return;
	if (c->revoke_from)
		revoke_idle(m, c);
	w = c->waiters;
	if (!w)
		return;
	c->waiters = NULL;
	for (j = w->first; j;) {
		struct job *next = j->next;

		job_run(m, j);
		j = next;
	}
	free(w);
}

static int chunk_wait(struct chunk *c, struct job *j)
{
	if (!c->waiters) {
		c->waiters = calloc(1, sizeof(*c->waiters));
		if (!c->waiters)
			return -ENOMEM;
	}
	j->next = c->waiters->first;
	c->waiters->first = j;
	return 0;
}

/* Forget the copies a command failed on. */
static void drop_stale(struct chunk *c)
{
	for (int i = 0; i < c->ncopies;) {
		if (c->copies[i].state == COPY_STALE)
			c->copies[i] = c->copies[--c->ncopies];
		else
			i++;
	}
}

/* @c's change is done: copies left behind it go. */
static void drop_behind(struct master *m, struct chunk *c)
{
	for (int i = 0; i < c->ncopies;) {
		if (c->copies[i].state == COPY_BEHIND) {
			csrv_queue_delete(m, c->copies[i].srv, c->id,
					  c->copies[i].version);
			c->copies[i] = c->copies[--c->ncopies];
		} else {
			i++;
		}
	}
}

/*
 * Journal that @j's change was made; a request's reply waits until that
 * is durable, so nothing is written under a change not recorded done.
 */
static int commit_done(struct master *m, struct req *r, uint64_t chunk,
		       uint32_t version)
{
	Sweepfs__Meta__ChunkVersion cv = SWEEPFS__META__CHUNK_VERSION__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

	cv.chunk_id = chunk;
	cv.version = version;
	cv.has_done = cv.done = 1;
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_CHUNK_VERSION;
	mut.chunk_version = &cv;
	return master_commit(m, r, &mut);
}

/*
 * A revocation could not be done: the lease @session held until @until
 * stays (unless another was granted since), so the next snapshot that
 * takes the chunk tries again; and unless @quiet, the snapshot waiting
 * for it is given up (snapjob.c).
 */
static void revoke_fail(struct master *m, struct chunk *c, uint64_t session,
			int64_t until, int rc, bool quiet)
{
	if (c && !c->lease_session) {
		c->lease_session = session;
		c->lease_until = until;
	}
	if (!quiet)
		m->data->revoke_failed = rc;
}

/* A revocation or a redo (no client waits for it) is over: @done_rc
 * as command_done() had it. Frees @j. */
static void background_done(struct master *m, struct job *j, struct chunk *c,
			    int done_rc)
{
	if (c) {
		drop_stale(c);
		c->busy = 0;
		chunk_idle(m, c);
	}
	if (j->revoke) {
		m->data->revoking--;
		/* Moved on: the lease's tokens are dead (unless the lease is
		 * another's by now). */
		if (c && j->nok && done_rc == 0 &&
		    c->lease_session == j->lease_session &&
		    c->lease_until == j->lease_until)
			c->lease_session = 0;
		/* Moved on nowhere: the old token still writes. */
		if (!j->nok || done_rc < 0) {
			sw_warn(TAG,
				"chunk %016" PRIx64 ": its write lease was not "
				"taken back: %s",
				j->chunk, strerror(j->nok ? -done_rc : EIO));
			revoke_fail(m, c, j->lease_session, j->lease_until,
				    j->nok ? done_rc : -EIO, j->quiet);
		}
	} else if (j->nok && c && done_rc == 0)
		sw_notice(TAG,
			  "chunk %016" PRIx64 ": redone at version %u on "
			  "%d server(s)",
			  j->chunk, j->version, j->nok);
	else
		sw_warn(TAG,
			"chunk %016" PRIx64 ": could not redo the "
			"change to version %u: %s",
			j->chunk, j->version,
			strerror(j->nok ? -done_rc : EIO));
	job_free(j);
}

static void command_done(struct master *m, void *arg, uint32_t srv, int rc)
{
	struct job *j = arg;
	struct chunk *c = chunk_get(&m->ns, j->chunk);
	struct chunk_copy *cp = NULL;
	struct node *n;
	int done_rc = 0;

	if (c) {
		for (int i = 0; i < c->ncopies; i++)
			if (c->copies[i].srv == srv)
				cp = &c->copies[i];
	}
	if (srv == 0) {
		/* send_commands()' own count */
	} else if (rc == 0) {
		j->nok++;
		if (cp) {
			cp->state = COPY_VALID;
			cp->version = j->version;
		}
	} else {
		sw_warn(TAG, "chunk %016" PRIx64 " on server %u: %s", j->chunk,
			srv, strerror(-rc));
		if (cp)
			cp->state = COPY_STALE;
		j->bad[j->nbad++] = srv;
	}
	if (--j->pending)
		return;

	/*
	 * The copies the commands failed on are deleted if the change was
	 * made elsewhere. If it was made nowhere they are all the data
	 * there is, whatever version they are at: they stay on their
	 * servers, and the next registration finds them (and the change's
	 * intent, still open, lets them be brought forward).
	 */
	if (j->nok) {
		for (int i = 0; i < j->nbad; i++)
			csrv_queue_delete(m, j->bad[i], j->chunk, j->version);
		if (c)
			done_rc = commit_done(m, journal_req(j), j->chunk,
					      j->version);
		if (c && done_rc == 0)
			drop_behind(m, c);
	}

	if (j->src) {
		struct chunk *src = chunk_get(&m->ns, j->src);

		if (src && src->busy && !--src->busy)
			chunk_idle(m, src);
	}
	if (j->revoke || j->redo) {
		background_done(m, j, c, done_rc);
		return;
	}
	n = ns_get(&m->ns, j->ino);
	if (!c && n && j->truncate) {
		/* Cut to nothing meanwhile: the setattr stands. */
		req_answer_attr(j->req, 0, n);
	} else if (!c && n) {
		/* Its chunk went meanwhile (the file was truncated), the
		 * file did not: ask again, from what the file holds now. */
		job_again(j);
		job_run(m, j);
		return;
	} else if (!c || !n) {
		/* The file went meanwhile; its chunk may live on (a snapshot
		 * shares it): it is idle now all the same. */
		if (c) {
			drop_stale(c);
			c->busy = 0;
			chunk_idle(m, c);
		}
		req_error(j->req, -ENOENT);
	} else {
		drop_stale(c);
		c->busy = 0;
		if (j->nok && j->write && !j->truncate &&
		    (c->refs > 1 || ns_chunk_frozen(&m->ns, c))) {
			/* A snapshot began meanwhile and may share it, or
			 * one that ended meanwhile does (its copy took the
			 * chunk while the commands ran, and had no lease to
			 * take back): ask again, which duplicates it. */
			job_again(j);
			chunk_idle(m, c);
			job_run(m, j);
			return;
		}
		if (j->nok && done_rc < 0) {
			/* Made, but not recorded as done: no writing under
			 * it (the disk holding the journal is full, say). */
			req_error(j->req, done_rc);
			chunk_idle(m, c);
			job_free(j);
			return;
		}
		if (j->nok && j->write) {
			struct session *s = req_session(j->req);

			data_lease(m, c, s ? s->id : 0);
		}
		if (!j->nok) {
			/* Stopping, the commands failed as the chunkservers'
			 * connections closed: no answer, the client's
			 * connection closes too and it asks the master that
			 * serves next. */
			if (!m->stopping)
				req_error(j->req, -EIO);
		} else if (j->truncate) {
			req_answer_attr(j->req, 0, n);
		} else {
			reply_loc(m, j, n, c);
		}
		chunk_idle(m, c);
	}
	job_free(j);
}

/* The copies of @c on the @n servers @srv are being made at @version. */
static void mark_pending(struct chunk *c, const uint32_t *srv, int n,
			 uint32_t version)
{
	for (int i = 0; i < n; i++) {
		struct chunk_copy *cp = NULL;

		for (int k = 0; k < c->ncopies && !cp; k++)
			if (c->copies[k].srv == srv[i])
				cp = &c->copies[k];
		if (!cp) {
			cp = &c->copies[c->ncopies++];
			cp->srv = srv[i];
		}
		cp->version = version;
		cp->state = COPY_PENDING;
	}
}

/* Send @op for chunk @c to each server in @srv; the job waits for all. */
static void send_commands(struct master *m, struct job *j, struct chunk *c,
			  const Sweepfs__CsCommand *tmpl, const uint32_t *srv,
			  int n)
{
	/* Count first: a command may fail at once and finish the job. */
	j->pending = n + 1;
	c->busy = 1;
	for (int i = 0; i < n; i++) {
		Sweepfs__CsCommand cmd = *tmpl;

		if (csrv_command(m, srv[i], &cmd, command_done, j) < 0)
			command_done(m, j, srv[i], -ENOTCONN);
	}
	command_done(m, j, 0, 0); /* the +1 above */
}

static int commit(struct master *m, struct job *j, Sweepfs__Meta__Mutation *mut)
{
	mut->time = sw_now_ns();
	return master_commit(m, journal_req(j), mut);
}

/* Copies wanted of @n's chunks. */
static unsigned file_goal(const struct master *m, const struct node *n)
{
	return ns_goal(n) ? ns_goal(n) : (unsigned)m->cfg.goal;
}

/*
 * Whether any chunkserver is connected. With none, a new chunk fails with
 * EIO, not ENOSPC: the servers are unreachable (just after a restart of
 * the master, before they register again; or down), which is not a full
 * disk, and an application must not be told that it is.
 */
static bool any_server_up(struct master *m)
{
	for (uint32_t i = 1; i <= m->cs->n; i++)
		if (csrv_up(m->cs->srv[i]))
			return true;
	return false;
}

/* A new chunk in an empty slot (or one whose every copy is gone). */
static int start_create(struct master *m, struct job *j, struct node *n)
{
	Sweepfs__Meta__ChunkSet cs = SWEEPFS__META__CHUNK_SET__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__CsCommand cmd = SWEEPFS__CS_COMMAND__INIT;
	uint32_t srv[CHUNK_COPIES_MAX];
	int goal = (int)SW_MIN(file_goal(m, n), CHUNK_COPIES_MAX);
	int nsrv = csrv_choose(m, srv, goal, NULL, 0);
	struct chunk *c;
	int rc;

	if (nsrv == 0)
		return any_server_up(m) ? -ENOSPC : -EIO;
	cs.ino = n->ino;
	cs.index = j->index;
	cs.chunk_id = m->ns.next_chunk;
	cs.version = 1;
	mut.op_case = SWEEPFS__META__MUTATION__OP_CHUNK_SET;
	mut.chunk_set = &cs;
	rc = commit(m, j, &mut);
	if (rc < 0)
		return rc;
	c = chunk_get(&m->ns, cs.chunk_id);
	mark_pending(c, srv, nsrv, 1);
	j->chunk = c->id;
	j->version = 1;
	cmd.op = SWEEPFS__CS_COMMAND__OP__CREATE;
	cmd.chunk_id = c->id;
	cmd.version = 1;
	send_commands(m, j, c, &cmd, srv, nsrv);
	return 0;
}

/*
 * Copy-on-write of a chunk shared with a snapshot; cut to @length bytes
 * when that is not UINT64_MAX (a truncation of the shared chunk).
 */
static int start_duplicate(struct master *m, struct job *j, struct node *n,
			   struct chunk *src, uint64_t length)
{
	Sweepfs__Meta__ChunkSet cs = SWEEPFS__META__CHUNK_SET__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__CsCommand cmd = SWEEPFS__CS_COMMAND__INIT;
	uint32_t srv[CHUNK_COPIES_MAX];
	uint64_t src_id = src->id;
	uint32_t src_version = src->version;
	int nsrv = 0;
	struct chunk *c;
	int rc;

	/* Duplicate where the data is: no copying across the network.
	 * A shared chunk with only a damaged copy is duplicated from it
	 * (its bad blocks stay bad; the rest of its data is kept); an
	 * unshared one is not (job_run()). */
	for (int pass = 0; pass < 2 && nsrv == 0; pass++)
		for (int i = 0; i < src->ncopies && nsrv < (int)file_goal(m, n);
		     i++)
			if (src->copies[i].state ==
				    (pass ? COPY_DAMAGED : COPY_VALID) &&
			    csrv_up(csrv_get(m, src->copies[i].srv)))
				srv[nsrv++] = src->copies[i].srv;
	if (nsrv == 0)
		return -EIO;
	cs.ino = n->ino;
	cs.index = j->index;
	cs.chunk_id = m->ns.next_chunk;
	cs.version = 1;
	/* What a redo after a crash needs to make it again. */
	cs.has_src_chunk_id = cs.has_src_version = 1;
	cs.src_chunk_id = src_id;
	cs.src_version = src_version;
	if (length != UINT64_MAX) {
		cs.has_length = 1;
		cs.length = length;
	}
	mut.op_case = SWEEPFS__META__MUTATION__OP_CHUNK_SET;
	mut.chunk_set = &cs;
	rc = commit(m, j, &mut);
	if (rc < 0)
		return rc;
	src = chunk_get(&m->ns, src_id); /* still referenced elsewhere */
	src->busy++;
	j->src = src_id;
	c = chunk_get(&m->ns, cs.chunk_id);
	mark_pending(c, srv, nsrv, 1);
	j->chunk = c->id;
	j->version = 1;
	cmd.op = SWEEPFS__CS_COMMAND__OP__DUPLICATE;
	cmd.chunk_id = c->id;
	cmd.version = 1;
	cmd.has_src_chunk_id = cmd.has_src_version = 1;
	cmd.src_chunk_id = src_id;
	cmd.src_version = src_version;
	if (length != UINT64_MAX) {
		cmd.has_length = 1;
		cmd.length = length;
	}
	send_commands(m, j, c, &cmd, srv, nsrv);
	return 0;
}

/* A command moving copies of chunk @id from @old to @version, cut to
 * @length bytes unless it is negative. */
static void version_cmd(Sweepfs__CsCommand *cmd, uint64_t id, uint32_t old,
			uint32_t version, int64_t length)
{
	cmd->op = length < 0 ? SWEEPFS__CS_COMMAND__OP__SET_VERSION :
			       SWEEPFS__CS_COMMAND__OP__TRUNCATE;
	cmd->chunk_id = id;
	cmd->version = version;
	cmd->has_old_version = 1;
	cmd->old_version = old;
	if (length >= 0) {
		cmd->has_length = 1;
		cmd->length = (uint64_t)length;
	}
}

/*
 * Move @c to the next version on every reachable valid copy, optionally
 * truncating it to @length (bytes within the chunk; UINT64_MAX: no).
 */
static int start_bump(struct master *m, struct job *j, struct chunk *c,
		      uint64_t length)
{
	Sweepfs__Meta__ChunkVersion cv = SWEEPFS__META__CHUNK_VERSION__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__CsCommand cmd = SWEEPFS__CS_COMMAND__INIT;
	uint32_t srv[CHUNK_COPIES_MAX], old = c->version;
	int nsrv = 0, rc;

	for (int i = 0; i < c->ncopies; i++) {
		struct chunk_copy *cp = &c->copies[i];

		if (cp->state == COPY_VALID && csrv_up(csrv_get(m, cp->srv)))
			srv[nsrv++] = cp->srv;
		else if (cp->state == COPY_VALID)
			cp->state = COPY_STALE; /* misses the bump */
	}
	if (nsrv == 0)
		return -EIO;
	cv.chunk_id = c->id;
	cv.version = old + 1;
	if (length != UINT64_MAX) {
		cv.has_length = 1;
		cv.length = length;
	}
	mut.op_case = SWEEPFS__META__MUTATION__OP_CHUNK_VERSION;
	mut.chunk_version = &cv;
	rc = commit(m, j, &mut);
	if (rc < 0)
		return rc;
	j->chunk = c->id;
	j->version = old + 1;
	version_cmd(&cmd, c->id, old, old + 1,
		    length == UINT64_MAX ? -1 : (int64_t)length);
	send_commands(m, j, c, &cmd, srv, nsrv);
	return 0;
}

static bool any_copy(const struct chunk *c, int state)
{
	for (int i = 0; i < c->ncopies; i++)
		if (c->copies[i].state == state)
			return true;
	return false;
}

/* Whether a copy of @c that is valid sits on a server that is away. */
static bool copy_away(struct master *m, const struct chunk *c)
{
	for (int i = 0; i < c->ncopies; i++)
		if (c->copies[i].state == COPY_VALID &&
		    !csrv_up(csrv_get(m, c->copies[i].srv)))
			return true;
	return false;
}

/* Whether a copy of @c that can be read from is on a connected server. */
static bool any_copy_up(struct master *m, const struct chunk *c)
{
	for (int i = 0; i < c->ncopies; i++)
		if ((c->copies[i].state == COPY_VALID ||
		     c->copies[i].state == COPY_DAMAGED) &&
		    csrv_up(csrv_get(m, c->copies[i].srv)))
			return true;
	return false;
}

/*
 * Whether @c is a new chunk whose making a crash cut short before it
 * reached any server: it never held data, and a write may replace it.
 * (A chunk with no copy otherwise has its data on servers that are away,
 * and replacing it would throw that data away when they come back.)
 */
static bool unplaced(struct master *m, const struct chunk *c)
{
	const struct chunk_intent *in = ns_intent_get(&m->ns, c->id);

	return c->ncopies == 0 && in && in->kind == INTENT_CREATE;
}

/*
 * Whether chunk request @j on @c (NULL: the slot is empty) waits for the
 * chunkservers, after a restart or a failover:
 *  - a new chunk is made as soon as any server is there; an unplaced
 *    one too (no client was ever given it: it never held data);
 *  - otherwise, until a copy's server has registered again, or the
 *    grace (cfg.chunkserver_grace) is over;
 *  - and a chunk whose change a crash cut short (an intent) and that has
 *    no valid copy waits for the redo (data_tick()), instead of failing.
 */
static bool must_wait(struct master *m, const struct job *j,
		      const struct chunk *c)
{
	bool early = sw_mono_ns() < m->data->settle_at;

	if (!c || (j->write && unplaced(m, c)))
		return early && j->write && !any_server_up(m);
	if (early && !any_copy_up(m, c))
		return true;
	return !m->data->settled && !any_copy(c, COPY_VALID) &&
	       ns_intent_get(&m->ns, c->id);
}

/*
 * A sync's request (ChunkReq.only_chunk): whether it is answered here.
 * The chunk it wrote, at the version it wrote, goes on as a write: its
 * lease renewed, or a bump, which syncs it on its copies (job_run()
 * bumps even a chunk a snapshot shares, for a sync, where a write would
 * copy it: a copy does not sync what is shared). A hole, or a chunk
 * moved on by a bump made on some copy (which synced it), or replaced
 * by a copy that was made (synced too), leaves nothing to sync: no
 * location. A bump or a copy made on no copy (its intent open, or no
 * valid copy) left the data unsynced where it was: EIO.
 */
static bool only_answered(struct master *m, struct job *j, const struct node *n,
			  const struct chunk *c)
{
	if (!j->only ||
	    (c && c->id == j->only && c->version == j->only_version))
		return false;
	if (c && (ns_intent_get(&m->ns, c->id) || !any_copy(c, COPY_VALID)))
		req_error(j->req, -EIO);
	else
		reply_loc(m, j, n, NULL);
	return true;
}

/* Run (or re-run, after waiting) chunk request @j. */
static void job_run(struct master *m, struct job *j)
{
	struct node *n = ns_get(&m->ns, j->ino);
	struct session *s = req_session(j->req);
	struct chunk *c;
	uint64_t id;
	int rc;

	/* Stopping: the lists it could wait on are gone (data_stop()), and
	 * its connection closes next, unanswered. */
	if (m->stopping) {
		job_free(j);
		return;
	}
	if (!n || !S_ISREG(n->mode)) {
		req_error(j->req, n ? -EINVAL : -ENOENT);
		goto out_free;
	}
	id = ns_chunk_at(n, j->index);
	c = id ? chunk_get(&m->ns, id) : NULL;
	if (c && c->busy) {
		if (chunk_wait(c, j) == 0)
			return;
		req_error(j->req, -ENOMEM);
		goto out_free;
	}
	if (must_wait(m, j, c)) {
		j->next = m->data->held;
		m->data->held = j;
		return;
	}
	if (only_answered(m, j, n, c))
		goto out_free;
	if (!j->write) {
		reply_loc(m, j, n, c);
		goto out_free;
	}
	if (!c || unplaced(m, c))
		rc = start_create(m, j, n);
	else if (!any_copy(c, COPY_VALID) && !any_copy(c, COPY_DAMAGED))
		rc = -EIO; /* its data is on servers that are away */
	else if (c->refs > 1 || ns_chunk_frozen(&m->ns, c))
		rc = j->only ? start_bump(m, j, c, UINT64_MAX) /* a sync's */
			       :
			       start_duplicate(m, j, n, c, UINT64_MAX);
	else if (!any_copy(c, COPY_VALID))
		/* Only damaged copies, and only this file's: a duplicate
		 * would free its source as it replaces it, copies and all,
		 * before the copy is made. */
		rc = -EIO;
	else if (s && c->lease_session == s->id &&
		 c->lease_until > sw_mono_ns() && !copy_away(m, c)) {
		/* (A copy gone away under the lease misses the writes from
		 * now on: the bump below leaves it behind as stale, or it
		 * would come back as valid with old data.) */
		data_lease(m, c, s->id);
		reply_loc(m, j, n, c);
		goto out_free;
	} else {
		rc = start_bump(m, j, c, UINT64_MAX);
	}
	if (rc == 0)
		return; /* the commands finish it */
	req_error(j->req, rc);
out_free:
	job_free(j);
}

/*
 * Whether the session of @r may read @n's data: through an open that may
 * (sess_open's access), or because the caller may read the file (a read
 * after a master restart, before the client's reclaim).
 */
static bool may_read(const struct req *r, const struct sw_cred *cred,
		     const struct node *n)
{
	return session_has_access(r->s, n->ino, PERM_R) ||
	       perm_check(cred, n, PERM_R) == 0;
}

void op_chunk(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__ChunkReq *q = (const void *)msg;
	struct job *j;
	struct node *n = req_node(r, q->ino);
	struct sw_cred cred = req_cred(q->cred);
	bool write_only = false;
	int rc = 0;

	if (!n)
		rc = req_node_err(r, q->ino);
	else if (!S_ISREG(n->mode))
		rc = S_ISDIR(n->mode) ? -EISDIR : -EINVAL;
	else if ((uint64_t)q->index * SW_CHUNK_SIZE >= (1ull << 47))
		rc = -EFBIG;
	/*
	 * Opens say what they may do: one for reading does not let a client
	 * write, nor one for writing read (the kernel would not, but the
	 * master cannot take a client's word). A writer who may not read
	 * gets a token that does not either.
	 */
	else if (!q->write)
		rc = may_read(r, &cred, n) ? 0 : -EACCES;
	else if (!session_has_writable(r->s, n->ino))
		rc = perm_check(&cred, n, PERM_W);
	if (rc == 0 && q->write)
		write_only = !may_read(r, &cred, n);
	if (rc < 0) {
		req_error(r, rc);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (j)
		j->req = req_defer(r);
	if (!j || !j->req) {
		free(j);
		req_error(r, -ENOMEM);
		return;
	}
	j->ino = q->ino;
	j->index = q->index;
	j->write = q->write;
	j->write_only = write_only;
	j->only = q->has_only_chunk ? q->only_chunk : 0;
	j->only_version = q->only_version;
	if (r->conn) {
		j->link = req_link_of(r->m, r->conn);
		j->link->chunk_jobs++;
	}
	job_run(r->m, j);
}

/* The file grew, or its data changed: size and mtime. */
void op_write_end(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__WriteEndReq *q = (const void *)msg;
	Sweepfs__Meta__Setattr sa = SWEEPFS__META__SETATTR__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct node *n = req_node(r, q->ino);
	int rc = 0;

	if (!n || !S_ISREG(n->mode)) {
		req_error(r, n ? -EINVAL : req_node_err(r, q->ino));
		return;
	}
	/*
	 * Only a writer ends a write: an open for writing, or write
	 * permission for who wrote (the mount's last commit may come after
	 * the file's release; a master restart forgets how it was opened).
	 */
	if (!session_has_writable(r->s, n->ino)) {
		struct sw_cred cred = req_cred(q->cred);

		rc = perm_check(&cred, n, PERM_W);
		if (rc < 0) {
			req_error(r, rc);
			return;
		}
	}
	if (q->size > (1ull << 47)) {
		req_error(r, -EFBIG);
		return;
	}
	sa.ino = n->ino;
	sa.has_size = sa.has_mtime = 1;
	sa.mtime = sw_now_ns();
	if (q->has_mtime) {
		struct sw_cred cred = req_cred(q->cred);

		sa.mtime = cred_owns(&cred, n) ?
				   q->mtime :
				   req_client_now(q->mtime, sa.mtime);
	}
	sa.valid = NS_SET_MTIME;
	if (q->size > n->size) {
		sa.valid |= NS_SET_SIZE;
		sa.size = q->size;
	}
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_SETATTR;
	mut.setattr = &sa;
	rc = master_commit(r->m, r, &mut);
	req_answer_attr(r, rc, n);
}

/*
 * After a size change committed by setattr: a shrink that ends inside a
 * chunk cuts that chunk on its servers too (under a new version, so a
 * copy that misses the cut is stale), before the reply goes out; bytes
 * past the end must read as zeros if the file grows again.
 */
int data_truncated(struct req *r, struct node *n, uint64_t old_size)
{
	uint64_t size = n->size;
	uint32_t index = (uint32_t)(size / SW_CHUNK_SIZE);
	struct chunk *c;
	struct job *j;
	int rc;

	if (size >= old_size || size % SW_CHUNK_SIZE == 0)
		return 1;
	c = chunk_get(&r->m->ns, ns_chunk_at(n, index));
	if (!c || !any_copy(c, COPY_VALID))
		return 1;
	j = calloc(1, sizeof(*j));
	if (j)
		j->req = req_defer(r);
	if (!j || !j->req) {
		free(j);
		return -ENOMEM;
	}
	j->ino = n->ino;
	j->index = index;
	j->truncate = true;
	/* A chunk with commands in flight: left as it is (the bytes past
	 * the end are the writer's, and reads stop at the size). A shared
	 * one is not cut under the others: this file gets a copy cut to
	 * the size, so that bytes past it are zeros if it grows again. */
	if (c->busy) {
		job_free(j);
		return 1;
	}
	if (c->refs > 1 || ns_chunk_frozen(&r->m->ns, c))
		rc = start_duplicate(r->m, j, n, c, size % SW_CHUNK_SIZE);
	else
		rc = start_bump(r->m, j, c, size % SW_CHUNK_SIZE);
	if (rc < 0) {
		job_free(j);
		return rc;
	}
	return 0; /* the reply waits for the servers */
}

/*
 * A lease ends by moving its chunk to a new version, so that no writer
 * goes on writing in place into a chunk a snapshot now shares (its token
 * names the old version); the writer's next request duplicates it.
 * m->data->revoking counts the revocations not yet done, and a snapshot's
 * reply waits for none to be left (snapjob.c); m->data->revoked counts
 * the bumps started since start. One that cannot be done is noted for
 * the snapshot to give up (m->data->revoke_failed).
 *
 * A chunk busy with commands waits for them to end (chunk_idle()): a
 * bump among them moves it on, and its tokens are dead; otherwise (it is
 * the source of a duplicate, say) it is still at the leased version, and
 * is moved on then. Until that the token may write in place, so the
 * snapshot's reply waits for it too (revoke_idle()).
 */
static void revoke_one(struct master *m, struct chunk *c, bool quiet)
{
	struct job *j;
	int rc;

	if (c->busy) {
		const struct chunk_intent *in = ns_intent_get(&m->ns, c->id);
		uint32_t from = c->version;

		/* Commands moving it to c->version are in flight: tokens
		 * out are of the version before. (None of version 0.) */
		if (in && in->version == from)
			from--;
		if (from && !c->revoke_from) {
			c->revoke_from = from;
			c->revoke_quiet = quiet;
			m->data->revoking++;
		} else if (!quiet) {
			c->revoke_quiet = 0; /* a copy took it since */
		}
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		revoke_fail(m, c, c->lease_session, c->lease_until, -ENOMEM,
			    quiet);
		return;
	}
	/* The lease stays until the bump is done (background_done()):
	 * a copy that takes the chunk meanwhile still sees it, and waits
	 * for the bump as for any busy chunk's commands. */
	j->revoke = true;
	j->quiet = quiet;
	j->lease_session = c->lease_session;
	j->lease_until = c->lease_until;
	m->data->revoking++;
	rc = start_bump(m, j, c, UINT64_MAX);
	if (rc < 0) {
		sw_warn(TAG,
			"chunk %016" PRIx64 ": cannot take its write lease "
			"back: %s",
			c->id, strerror(-rc));
		revoke_fail(m, c, j->lease_session, j->lease_until, rc, quiet);
		m->data->revoking--;
		free(j);
		return;
	}
	m->data->revoked++;
}

/*
 * @c's commands ended with a revocation waiting for them (revoke_one()):
 * they moved it past the leased version, or left it there (it was read
 * from), and then it is moved on now; or their change is still open (no
 * copy took it), and the copies may still be at the leased version.
 */
static void revoke_idle(struct master *m, struct chunk *c)
{
	uint32_t from = c->revoke_from;
	bool quiet = c->revoke_quiet;

	c->revoke_from = 0;
	c->revoke_quiet = 0;
	m->data->revoking--;
	if (ns_intent_get(&m->ns, c->id)) {
		sw_warn(TAG,
			"chunk %016" PRIx64 ": its write lease was not taken "
			"back: the change to version %u is not done",
			c->id, c->version);
		if (!quiet)
			m->data->revoke_failed = -EIO;
	} else if (c->version == from) {
		revoke_one(m, c, quiet);
	}
}

void data_chunk_gone(struct master *m, const struct chunk *c)
{
	struct chunk_wait *w = c->waiters;

	if (c->revoke_from)
		m->data->revoking--;
	if (!w)
		return;
	/* Freed while busy (its file truncated or removed under the
	 * commands): who waited for them would wait for ever. */
	while (w->first) {
		struct job *j = w->first;

		w->first = j->next;
		j->next = m->data->orphans;
		m->data->orphans = j;
	}
	free(w);
}

/* Run the requests on *@list again, and empty it first (a request run
 * may wait again, on another list or on this one). */
static void jobs_run(struct master *m, struct job **list)
{
	struct job *j = *list;

	*list = NULL;
	while (j) {
		struct job *next = j->next;

		j->next = NULL;
		job_run(m, j);
		j = next;
	}
}

/*
 * Take back every lease whose token may still write. @quiet at a big
 * copy's fork, where it is for the copy's instant only: a lease that
 * cannot be taken back then stays, and the part that takes its chunk
 * tries again (data_chunk_shared() looks at the chunk, not the list).
 */
static void revoke_all(struct master *m, bool quiet)
{
	int64_t now = sw_mono_ns();

	/* A lease that could not be noted is not on the list: taking back
	 * all of them cannot be done until its token is dead. */
	if (m->data->leased_lost_at) {
		if (now - m->data->leased_lost_at >=
		    (int64_t)CSRV_TOKEN_TTL_MS * 1000000)
			m->data->leased_lost_at = 0;
		else if (!quiet)
			m->data->revoke_failed = -ENOMEM;
	}
	for (size_t i = 0; i < m->data->leased.n; i++) {
		struct chunk *c = chunk_get(&m->ns, m->data->leased.id[i]);

		if (c && lease_writable(c, now))
			revoke_one(m, c, quiet);
	}
	/* What is being taken back, or could not be, stays listed while
	 * its lease stands; the rest goes. */
	data_prune_leases(m);
	m->data->shared.n = 0;
	m->data->shared_lost = false;
}

void data_revoke_leases(struct master *m)
{
	revoke_all(m, true);
}

/*
 * A copy took @c (ns->chunk_shared, inside the apply of its part: no
 * change may be journaled here): a lease whose token may still write is
 * noted, and data_revoke_shared() ends it once the part is applied. So
 * a snapshot takes back the leases of the files it copies, and only
 * those, at the cost of a look at each chunk it copies anyway.
 */
void data_chunk_shared(void *arg, struct chunk *c)
{
	struct master *m = arg;
	struct leased *l = &m->data->shared;

	if (!c || !lease_writable(c, sw_mono_ns()))
		return;
	if (sw_grow(&l->id, &l->cap, l->n + 1, sizeof(*l->id), 16) < 0) {
		/* No room to say which: data_revoke_shared() ends all. */
		m->data->shared_lost = true;
		return;
	}
	l->id[l->n++] = c->id;
}

void data_revoke_shared(struct master *m)
{
	struct leased *l = &m->data->shared;
	int64_t now = sw_mono_ns();

	if (m->data->shared_lost) {
		revoke_all(m, false);
		return;
	}
	for (size_t i = 0; i < l->n; i++) {
		struct chunk *c = chunk_get(&m->ns, l->id[i]);

		if (c && lease_writable(c, now))
			revoke_one(m, c, false);
	}
	l->n = 0;
}

/* ---- after a restart ----------------------------------------------- */

/* Run the requests held for chunkservers to register. */
void data_registered(struct master *m)
{
	jobs_run(m, &m->data->held);
}

static void jobs_free(struct job *j)
{
	while (j) {
		struct job *next = j->next;

		job_free(j);
		j = next;
	}
}

void data_stop(struct master *m)
{
	/* Unanswered: their connections close next, and clients ask the
	 * master that serves next (a chunk request is sent again). */
	jobs_free(m->data->held);
	jobs_free(m->data->orphans);
	m->data->held = m->data->orphans = NULL;
	leased_clear(m);
	free(m->data->leased.id);
	m->data->leased.id = NULL;
	m->data->leased.n = m->data->leased.cap = 0;
	free(m->data->shared.id);
	m->data->shared.id = NULL;
	m->data->shared.n = m->data->shared.cap = 0;
}

/* Start a redo job for @c: commands @tmpl to the @n servers in @srv. */
static void redo_start(struct master *m, struct chunk *c, uint32_t version,
		       const Sweepfs__CsCommand *tmpl, const uint32_t *srv,
		       int n, uint64_t src)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return;
	j->redo = true;
	j->chunk = c->id;
	j->version = version;
	if (src) {
		chunk_get(&m->ns, src)->busy++;
		j->src = src;
	}
	mark_pending(c, srv, n, version);
	send_commands(m, j, c, tmpl, srv, n);
}

/* Bring the copies of @c one version behind @in forward. */
static void redo_bump(struct master *m, struct chunk *c,
		      const struct chunk_intent *in)
{
	Sweepfs__CsCommand cmd = SWEEPFS__CS_COMMAND__INIT;
	uint32_t srv[CHUNK_COPIES_MAX];
	int n = 0;

	for (int i = 0; i < c->ncopies; i++)
		if (c->copies[i].state == COPY_BEHIND &&
		    csrv_up(csrv_get(m, c->copies[i].srv)))
			srv[n++] = c->copies[i].srv;
	if (!n)
		return; /* when a server with a copy registers */
	version_cmd(&cmd, c->id, in->version - 1, in->version, in->length);
	sw_notice(TAG,
		  "chunk %016" PRIx64 ": moving %d cop%s from version %u to "
		  "%u, a change the master was making when it stopped",
		  c->id, n, n == 1 ? "y" : "ies", in->version - 1, in->version);
	redo_start(m, c, in->version, &cmd, srv, n, 0);
}

/* Make @c, a new chunk that reached no server, again. */
static void redo_make(struct master *m, struct chunk *c,
		      const struct chunk_intent *in)
{
	Sweepfs__CsCommand cmd = SWEEPFS__CS_COMMAND__INIT;
	uint32_t srv[CHUNK_COPIES_MAX];
	int n = 0;

	cmd.chunk_id = c->id;
	cmd.version = in->version;
	if (in->kind == INTENT_CREATE) {
		n = csrv_choose(
			m, srv,
			(int)SW_MIN(chunk_goal(c, (unsigned)m->cfg.goal),
				    CHUNK_COPIES_MAX),
			NULL, 0);
		cmd.op = SWEEPFS__CS_COMMAND__OP__CREATE;
	} else {
		struct chunk *src = chunk_get(&m->ns, in->src);

		/* The source as it was: a copy of anything else would
		 * not be this chunk's data. */
		if (!src || src->busy || src->version != in->src_version)
			return;
		for (int i = 0; i < src->ncopies && n < CHUNK_COPIES_MAX; i++)
			if (src->copies[i].state == COPY_VALID &&
			    csrv_up(csrv_get(m, src->copies[i].srv)))
				srv[n++] = src->copies[i].srv;
		cmd.op = SWEEPFS__CS_COMMAND__OP__DUPLICATE;
		cmd.has_src_chunk_id = cmd.has_src_version = 1;
		cmd.src_chunk_id = in->src;
		cmd.src_version = in->src_version;
		if (in->length >= 0) {
			cmd.has_length = 1;
			cmd.length = (uint64_t)in->length;
		}
	}
	if (!n)
		return;
	sw_notice(TAG,
		  "chunk %016" PRIx64 ": making it again on %d server(s); the "
		  "master stopped before it reached any",
		  c->id, n);
	redo_start(m, c, in->version, &cmd, srv, n,
		   in->kind == INTENT_DUPLICATE ? in->src : 0);
}

void data_redo(struct master *m, struct chunk *c)
{
	const struct chunk_intent *in = ns_intent_get(&m->ns, c->id);

	if (!in || c->busy || !m->data->settled || in->version != c->version)
		return;
	if (any_copy(c, COPY_VALID)) {
		/* Made on some server after all; copies left behind hold
		 * the same data but go, for those that made it. */
		if (commit_done(m, NULL, c->id, c->version) == 0)
			drop_behind(m, c);
	} else if (in->kind == INTENT_BUMP) {
		redo_bump(m, c, in);
	} else if (c->ncopies == 0) {
		redo_make(m, c, in);
	}
}

static int collect_intent(const struct chunk_intent *in, void *arg)
{
	return sw_buf_add(arg, &in->id, sizeof(in->id));
}

void data_tick(struct master *m)
{
	struct sw_buf ids = SW_BUF_INIT;
	const uint64_t *id;
	size_t n;

	/* Those whose chunk went while they waited on it. */
	jobs_run(m, &m->data->orphans);
	if (sw_mono_ns() - m->data->pruned_at >= DATA_PRUNE_NS)
		data_prune_leases(m);
	/* A follower redoes nothing: its leader does, and ships it. */
	if (m->data->settled || sw_mono_ns() < m->data->settle_at ||
	    !req_serving(m))
		return;
	m->data->settled = true;
	ns_intents_foreach(&m->ns, collect_intent, &ids);
	id = (const uint64_t *)ids.data;
	n = sw_buf_used(&ids) / sizeof(*id);
	if (n)
		sw_notice(TAG,
			  "%zu chunk change(s) were in flight when the "
			  "master stopped; redoing them",
			  n);
	for (size_t i = 0; i < n; i++) {
		struct chunk *c = chunk_get(&m->ns, id[i]);

		if (c)
			data_redo(m, c);
	}
	sw_buf_release(&ids);
	data_registered(m);
}

/*
 * GOAL: read or set a node's goal. Who may set it: its owner, or root
 * with admin rights. A chunk short of its new goal is replicated by the
 * chunkservers' scan, one over it trimmed.
 */
void op_goal(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__GoalReq *q = (const void *)msg;
	Sweepfs__GoalReply reply = SWEEPFS__GOAL_REPLY__INIT;
	Sweepfs__Meta__SetGoal sg = SWEEPFS__META__SET_GOAL__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;
	struct sw_cred cred = req_cred(q->cred);
	struct node *n = req_node(r, q->ino);
	int rc = 0;

	if (!n)
		rc = -ENOENT;
	else if (q->has_goal && q->goal > NS_GOAL_MAX)
		rc = -EINVAL;
	else if (q->has_goal && !req_owns(r, &cred, n))
		rc = -EPERM;
	if (rc == 0 && q->has_goal) {
		sg.ino = n->ino;
		sg.goal = q->goal;
		sg.has_recursive = 1;
		sg.recursive = q->recursive;
		sg.has_owner = req_only_own(r, &cred, q->recursive, &sg.owner);
		mut.time = sw_now_ns();
		mut.op_case = SWEEPFS__META__MUTATION__OP_SET_GOAL;
		mut.set_goal = &sg;
		rc = master_commit(r->m, r, &mut);
	}
	if (rc == 0) {
		reply.has_goal = reply.has_effective = 1;
		reply.goal = ns_goal(n);
		reply.effective = file_goal(r->m, n);
	}
	req_answer(r, rc, &reply.base);
}
