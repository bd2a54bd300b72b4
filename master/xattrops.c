/*
 * Extended attribute requests: set, get, list, remove.
 *
 * The rules are Linux's xattr_permission() for the namespaces sweepfs
 * stores: user.* on regular files and directories under the file's mode
 * bits (a sticky directory's only for its owner), trusted.* for root
 * alone (not even listed to others), security.* readable by all and
 * writable by root (an owner who set file capabilities would hand them to
 * whoever runs the file on any client); system.* (ACLs) is not supported.
 * Values are bounded by SW_XATTR_SIZE_MAX, names by SW_XATTR_NAME_MAX, a
 * node's list of names by SW_XATTR_LIST_MAX (a new name past it is
 * ENOSPC, as a full ext4 inode says): a listing fits any reply.
 *
 * Every request names its node and, but for list, one attribute:
 * xattr_node() resolves and checks both, the same way for all four.
 * Changes go through the changelog as Setxattr mutations (a removal is
 * one with remove set). Every handler replies once or errs once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "context.h"
#include "handlers.h"
#include "perm.h"
#include "req.h"
#include "sessrec.h"
#include "util.h"

static bool has_prefix(const ProtobufCBinaryData *name, const char *prefix)
{
	size_t n = strlen(prefix);

	return name->len > n && !memcmp(name->data, prefix, n);
}

/* Linux's xattr_permission(), for the namespaces sweepfs stores. */
static int xattr_check(const struct sw_cred *c, const struct node *n,
		       const ProtobufCBinaryData *name, bool write)
{
	if (name->len == 0 || memchr(name->data, '\0', name->len))
		return -EINVAL;
	if (name->len > SW_XATTR_NAME_MAX)
		return -ERANGE;
	if (has_prefix(name, "user.")) {
		if (!S_ISREG(n->mode) && !S_ISDIR(n->mode))
			return write ? -EPERM : -ENODATA;
		if (write && S_ISDIR(n->mode) && (n->mode & S_ISVTX) &&
		    !cred_owns(c, n))
			return -EPERM;
		return perm_check(c, n, write ? PERM_W : PERM_R);
	}
	if (has_prefix(name, "trusted.")) {
		if (!cred_is_root(c))
			return write ? -EPERM : -ENODATA;
		return 0;
	}
	if (has_prefix(name, "security.")) {
		/* Linux's cap_inode_setxattr(): CAP_SYS_ADMIN (and
		 * CAP_SETFCAP for security.capability), not ownership: an
		 * owner that set file capabilities would give them to
		 * whoever runs the file on any client. */
		if (write && !cred_is_root(c))
			return -EPERM;
		return 0;
	}
	/* system.* (ACLs) and anything unknown. */
	return -EOPNOTSUPP;
}

/*
 * The node @ino a request names, in *@out, and whether its caller @pc may
 * read or (@write) change its attribute @name (NULL: no name, as for a
 * list): 0 or -errno. A request without a name has an empty one, which
 * is -EINVAL.
 */
static int xattr_node(struct req *r, const Sweepfs__Cred *pc, uint64_t ino,
		      const ProtobufCBinaryData *name, bool write,
		      struct node **out)
{
	struct sw_cred cred = req_cred(pc);

	*out = req_node(r, ino);
	if (!*out)
		return req_node_err(r, ino);
	return name ? xattr_check(&cred, *out, name, write) : 0;
}

/* The empty status reply of a change done. */
static void reply_done(struct req *r)
{
	Sweepfs__StatusReply reply = SWEEPFS__STATUS_REPLY__INIT;

	req_reply(r, &reply.base);
}

static int commit_xattr(struct req *r, struct node *n,
			const ProtobufCBinaryData *name,
			const ProtobufCBinaryData *value)
{
	Sweepfs__Meta__Setxattr x = SWEEPFS__META__SETXATTR__INIT;
	Sweepfs__Meta__Mutation mut = SWEEPFS__META__MUTATION__INIT;

	x.ino = n->ino;
	x.name = *name;
	if (value) {
		x.has_value = 1;
		x.value = *value;
	} else {
		x.has_remove = 1;
		x.remove = 1;
	}
	mut.time = sw_now_ns();
	mut.op_case = SWEEPFS__META__MUTATION__OP_SETXATTR;
	mut.setxattr = &x;
	return master_commit(r->m, r, &mut);
}

/* Whether @n's list of names has room for one more of @len bytes. */
static bool list_has_room(const struct ns *ns, const struct node *n, size_t len)
{
	return (size_t)ns_xattr_list(ns, n, NULL, 0) + len + 1 <=
	       SW_XATTR_LIST_MAX;
}

void op_setxattr(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__SetxattrReq *q = (const Sweepfs__SetxattrReq *)msg;
	struct node *n;
	const void *old;
	size_t oldlen;
	bool exists;
	int rc;

	rc = xattr_node(r, q->cred, q->ino, &q->name, true, &n);
	if (rc == 0 && q->value.len > SW_XATTR_SIZE_MAX)
		rc = -E2BIG;
	if (rc == 0 && (q->flags & ~(uint32_t)(XATTR_CREATE | XATTR_REPLACE)))
		rc = -EINVAL;
	if (rc < 0)
		goto out_err;
	exists = ns_xattr_get(&r->m->ns, n, q->name.data, q->name.len, &old,
			      &oldlen) == 0;
	if ((q->flags & XATTR_CREATE) && exists)
		rc = -EEXIST;
	else if ((q->flags & XATTR_REPLACE) && !exists)
		rc = -ENODATA;
	else if (!exists && !list_has_room(&r->m->ns, n, q->name.len))
		rc = -ENOSPC;
	else
		rc = commit_xattr(r, n, &q->name, &q->value);
	if (rc < 0)
		goto out_err;
	reply_done(r);
	return;

out_err:
	req_error(r, rc);
}

static void reply_xattr_bytes(struct req *r, const void *data, size_t len,
			      uint32_t size)
{
	Sweepfs__XattrReply reply = SWEEPFS__XATTR_REPLY__INIT;

	reply.has_size = 1;
	reply.size = (uint32_t)len;
	if (size == 0) {
		req_reply(r, &reply.base);
		return;
	}
	if (len > size) {
		req_error(r, -ERANGE);
		return;
	}
	reply.has_value = 1;
	reply.value.data = (uint8_t *)data;
	reply.value.len = len;
	req_reply(r, &reply.base);
}

void op_getxattr(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__GetxattrReq *q = (const Sweepfs__GetxattrReq *)msg;
	const void *value;
	struct node *n;
	size_t vlen;
	int rc;

	rc = xattr_node(r, q->cred, q->ino, &q->name, false, &n);
	if (rc == 0)
		rc = ns_xattr_get(&r->m->ns, n, q->name.data, q->name.len,
				  &value, &vlen);
	if (rc == -ENODATA && !(n->flags & NODE_XATTR)) {
		/* None at all: the client may answer the next ones. */
		Sweepfs__XattrReply reply = SWEEPFS__XATTR_REPLY__INIT;

		reply.has_err = reply.has_none = 1;
		reply.err = ENODATA;
		reply.none = 1;
		if (req_session(r))
			req_session(r)->ctr.errors++;
		r->m->total->errors++;
		req_reply(r, &reply.base);
		return;
	}
	if (rc < 0) {
		req_error(r, rc);
		return;
	}
	reply_xattr_bytes(r, value, vlen, q->size);
}

void op_listxattr(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__GetxattrReq *q = (const Sweepfs__GetxattrReq *)msg;
	struct sw_cred cred;
	struct node *n;
	char *buf, *p, *out;
	long len;
	int rc;

	cred = req_cred(q->cred);
	rc = xattr_node(r, q->cred, q->ino, NULL, false, &n);
	if (rc < 0) {
		req_error(r, rc);
		return;
	}
	len = ns_xattr_list(&r->m->ns, n, NULL, 0);
	/* More than setxattr lets a node have (made by an older build):
	 * what listxattr(2) says past XATTR_LIST_MAX. */
	if ((size_t)len > SW_XATTR_LIST_MAX) {
		req_error(r, -E2BIG);
		return;
	}
	buf = malloc(len ? (size_t)len : 1);
	if (!buf) {
		req_error(r, -ENOMEM);
		return;
	}
	ns_xattr_list(&r->m->ns, n, buf, (size_t)len);
	/* Only root sees trusted.* names, as on a local filesystem. */
	for (p = out = buf; p < buf + len;) {
		size_t l = strlen(p) + 1;

		if (cred_is_root(&cred) || strncmp(p, "trusted.", 8)) {
			memmove(out, p, l);
			out += l;
		}
		p += l;
	}
	reply_xattr_bytes(r, buf, (size_t)(out - buf), q->size);
	free(buf);
}

void op_removexattr(struct req *r, const ProtobufCMessage *msg)
{
	const Sweepfs__RemovexattrReq *q = (const Sweepfs__RemovexattrReq *)msg;
	const void *v;
	struct node *n;
	size_t vlen;
	int rc;

	rc = xattr_node(r, q->cred, q->ino, &q->name, true, &n);
	if (rc == 0)
		rc = ns_xattr_get(&r->m->ns, n, q->name.data, q->name.len, &v,
				  &vlen);
	if (rc == 0)
		rc = commit_xattr(r, n, &q->name, NULL);
	if (rc < 0)
		req_error(r, rc);
	else
		reply_done(r);
}
