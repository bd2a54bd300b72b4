/*
 * The request layer (req.h), all of it: answering (reply, error, defer),
 * the caller's view of the namespace (a confined session sees its
 * subtree and what it was told of), the commit of a change, the
 * attributes replies carry, the name rules.
 *
 * It sits below the handlers and the server and names neither: the
 * frames, the connections they go out on, whether this master serves
 * (group.c) and what a full disk recalls (deleg.c) are reached through
 * struct req_hooks, which master.c wires once at start-up, as it wires
 * the namespace core's hooks. The handlers' own ways up (notices, a
 * connection closed or resumed, the invalidations' sequence, the
 * group's admin requests) are wrappers of the same hooks, here, so that
 * a handler calls only this layer by name. The session table a handler
 * uses is sesstab.c's, in this layer too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "changelog.h"
#include "context.h"
#include "log.h"
#include "mutation.h"
#include "req.h"
#include "sessrec.h"
#include "util.h"

#define TAG "master"

void req_wire(struct master *m, const struct req_hooks *hooks)
{
	m->req_hooks = hooks;
}

void req_reply(struct req *r, const ProtobufCMessage *reply)
{
	r->m->req_hooks->send(r, reply, false);
}

void req_error(struct req *r, int rc)
{
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;

	reply.has_err = 1;
	reply.err = -rc;
	r->m->req_hooks->send(r, &reply.base, true);
}

void req_answer(struct req *r, int rc, const ProtobufCMessage *reply)
{
	if (rc < 0)
		req_error(r, rc);
	else
		req_reply(r, reply);
}

void req_answer_attr(struct req *r, int rc, const struct node *n)
{
	Sweepfs__AttrReply reply = SWEEPFS__ATTR_REPLY__INIT;
	Sweepfs__Attr attr;

	if (rc < 0) {
		req_error(r, rc);
		return;
	}
	attr_fill(r->m, &attr, n);
	reply.attr = &attr;
	req_reply(r, &reply.base);
}

struct req *req_defer(const struct req *r)
{
	struct req *d = malloc(sizeof(*d));

	if (!d)
		return NULL;
	*d = *r;
	r->m->req_hooks->hold(d->conn, true);
	return d;
}

void req_done(struct req *d)
{
	d->m->req_hooks->hold(d->conn, false);
	free(d);
}

struct session *req_session(const struct req *r)
{
	return r->conn ? r->m->req_hooks->session(r->conn) : NULL;
}

struct node *req_node(const struct req *r, uint64_t ino)
{
	struct node *n = ns_get(&r->m->ns, ino), *root;

	if (!n || !session_confined(r->s))
		return n;
	if (!S_ISDIR(n->mode))
		return session_granted(r->s, ino) ? n : NULL;
	root = ns_get(&r->m->ns, r->s->root_ino);
	return root && ns_is_ancestor(root, n) ? n : NULL;
}

bool req_admin(const struct req *r, const struct sw_cred *c)
{
	return session_admin_uid(r->s, c->uid);
}

int req_node_err(const struct req *r, uint64_t ino)
{
	return session_confined(r->s) && ns_get(&r->m->ns, ino) ? -ESTALE :
								  -ENOENT;
}

void req_once_key(const uint8_t session_key[SW_AUTH_KEY],
		  uint8_t key[REPLIES_DIGEST])
{
	static const char what[] = "request digest";
	uint8_t tag[SW_AUTH_TAG];

	sw_auth_tag(session_key, SW_AUTH_ONCE, what, sizeof(what) - 1, NULL, 0,
		    tag);
	memcpy(key, tag, REPLIES_DIGEST);
	sodium_memzero(tag, sizeof(tag));
}

/*
 * SipHash-2-4 with a 128-bit result (libsodium's siphashx24): a keyed
 * PRF, collision-resistant to whoever lacks the key, and a few tens of
 * nanoseconds on a request's hundred bytes. The type goes in the key.
 */
void req_digest(struct req *r, const uint8_t key[REPLIES_DIGEST], uint16_t type,
		const uint8_t *payload, size_t len)
{
	uint8_t k[crypto_shorthash_siphashx24_KEYBYTES];

	_Static_assert(REPLIES_DIGEST == crypto_shorthash_siphashx24_BYTES &&
			       REPLIES_DIGEST ==
				       crypto_shorthash_siphashx24_KEYBYTES,
		       "a digest is one siphashx24 output and key");
	memcpy(k, key, sizeof(k));
	k[0] ^= (uint8_t)type;
	k[1] ^= (uint8_t)(type >> 8);
	crypto_shorthash_siphashx24(r->digest, payload, len, k);
}

int req_check_name(const ProtobufCBinaryData *name)
{
	if (name->len > SW_NAME_MAX)
		return -ENAMETOOLONG;
	return sw_name_valid(name->data, name->len) ? 0 : -EINVAL;
}

void attr_fill(const struct master *m, Sweepfs__Attr *a, const struct node *n)
{
	sweepfs__attr__init(a);
	a->ino = n->ino;
	a->mode = n->mode;
	a->nlink = ns_nlink(n);
	a->uid = n->uid;
	a->gid = n->gid;
	if (S_ISCHR(n->mode) || S_ISBLK(n->mode)) {
		a->has_rdev = 1;
		a->rdev = n->u.rdev;
	}
	if (S_ISDIR(n->mode))
		a->size = 4096;
	else
		a->size = n->size;
	a->atime = n->atime;
	a->mtime = n->mtime;
	a->ctime = n->ctime;
	a->has_xattrs = 1;
	a->xattrs = (n->flags & NODE_XATTR) != 0;
	a->has_handle = 1;
	a->handle = sw_node_handle(m->handle_key, n->ino);
}

bool req_serving(const struct master *m)
{
	return m->req_hooks->serving(m);
}

void req_notify(struct master *m, struct conn *c, uint16_t type,
		const ProtobufCMessage *msg)
{
	m->req_hooks->notify(c, type, msg);
}

void req_close(struct master *m, struct conn *c)
{
	m->req_hooks->close(c);
}

struct req_link *req_link_of(struct master *m, struct conn *c)
{
	return m->req_hooks->link(c);
}

void req_resume(struct master *m, struct req_link *l)
{
	m->req_hooks->resume(l);
}

uint64_t req_inval_sent(struct master *m, struct session *s)
{
	return m->req_hooks->inval_sent(m, s);
}

void req_inval_acked(struct master *m, struct session *s, uint64_t seq)
{
	m->req_hooks->inval_acked(m, s, seq);
}

void req_inval_give_up(struct master *m, struct session *s)
{
	m->req_hooks->inval_give_up(m, s);
}

int64_t req_silent_since(struct master *m, struct conn *c, int64_t now)
{
	return c ? m->req_hooks->silent_since(c, now) : now;
}

bool req_group_status(const struct master *m, struct group_status *st)
{
	return m->req_hooks->group_status(m, st);
}

int req_group_change(struct master *m, struct req *r, const char *add,
		     unsigned remove)
{
	return m->req_hooks->group_change(m, r, add, remove);
}

int req_group_transfer(struct master *m, unsigned to)
{
	return m->req_hooks->group_transfer(m, to);
}

int master_may_change(struct master *m)
{
	int rc;

	/* Stopping, the changelog closed: what the connections closing
	 * now finish (a chunk command failing) changes nothing. */
	if (!m->cl)
		return -ESHUTDOWN;
	/* A follower changes nothing but what its leader ships (group.c);
	 * a job that forgot to ask whether it serves fails here. */
	if (!m->req_hooks->serving(m))
		return -EROFS;
	rc = changelog_admit(m->cl);
	if (rc < 0) {
		/* The disk is full: what holders answer themselves could not
		 * be journaled either. The recalls go out now, before the
		 * caller's error reply on the same connection. */
		m->req_hooks->disk_full(m);
	}
	return rc;
}

void master_journal(struct master *m, const Sweepfs__Meta__Mutation *mut)
{
	if (changelog_prepare(m->cl, mut) < 0) {
		/* Memory is ahead of the changelog: only a restart, which
		 * replays what is journaled, makes them agree again. */
		sw_crit(TAG, "out of memory journaling a change; exiting");
		exit(70);
	}
	m->ns.version++;
	changelog_append(m->cl, mut, m->ns.version);
}

int master_commit(struct master *m, struct req *r,
		  const Sweepfs__Meta__Mutation *mut)
{
	const struct sw_msg_info *info = r ? sw_msg_info(r->hdr.type) : NULL;
	uint64_t version = m->ns.version + 1;
	Sweepfs__Meta__Mutation once;
	int rc;

	if (r && r->s && info && info->once) {
		/* Which request it answers, for one sent again (replies.h). */
		once = *mut;
		once.has_once_session = once.has_once_req = 1;
		once.once_session = r->s->id;
		once.once_req = r->hdr.id;
		once.has_once_digest = 1;
		once.once_digest.data = r->digest;
		once.once_digest.len = sizeof(r->digest);
		mut = &once;
	}
	rc = master_may_change(m);
	if (rc < 0)
		return rc;
	rc = changelog_prepare(m->cl, mut);
	if (rc < 0)
		return rc;
	rc = mutation_apply(&m->ns, mut, version);
	if (rc < 0)
		return rc;
	changelog_append(m->cl, mut, version);
	if (r)
		r->version = version;
	return 0;
}
