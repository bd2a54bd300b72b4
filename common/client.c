/*
 * The blocking master connection of tools, tests and benchmarks
 * (client.h): connect, hello, one call at a time. Framing, ids and the
 * matching of the reply are the pipelined client core's (pclient.h):
 * a call is one sw_pclient_call() on the socket.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "client.h"
#include "fsio.h"
#include "util.h"

int sw_reply_err(const ProtobufCMessage *reply)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field(reply->descriptor, 1);
	const char *base = (const char *)reply;
	protobuf_c_boolean has;
	int32_t err;

	if (!f || f->type != PROTOBUF_C_TYPE_INT32)
		return 0;
	memcpy(&has, base + f->quantifier_offset, sizeof(has));
	memcpy(&err, base + f->offset, sizeof(err));
	if (!has || err == 0)
		return 0;
	return err > 0 ? -err : -EPROTO;
}

static void remember(void *arg, const Sweepfs__Attr *a)
{
	struct sw_handles *hs = arg;

	if (!a->has_handle || !hs->cap)
		return;
	/* Known: the master's last word (a new key, a new handle). */
	for (unsigned i = 0; i < hs->cap; i++)
		if (hs->v[i].handle && hs->v[i].ino == a->ino) {
			hs->v[i].handle = a->handle;
			return;
		}
	hs->v[hs->next] = (struct sw_handle_slot){ a->ino, a->handle };
	hs->next = (hs->next + 1) % hs->cap;
}

void sw_handles_remember(struct sw_handles *hs, const ProtobufCMessage *reply)
{
	sw_msg_attrs(reply, remember, hs);
}

uint64_t sw_handles_find(void *arg, uint64_t ino)
{
	const struct sw_handles *hs = arg;

	for (unsigned i = 0; i < hs->cap; i++)
		if (hs->v[i].handle && hs->v[i].ino == ino)
			return hs->v[i].handle;
	return 0;
}

/* Ready @c's pipelined core for a call: 0, or -ENOTCONN once broken. */
static int client_ready(struct sw_client *c)
{
	if (c->broken)
		return -ENOTCONN; /* see client.h: nothing more is read */
	/* Ids start at 1: a table at 0 was never readied (made by hand). */
	if (!c->pc.calls.next_id)
		sw_pclient_init(&c->pc, c->max_payload, NULL, NULL);
	c->pc.max_payload = c->max_payload;
	return 0;
}

/* After a call or a wait that began at disconnection count @gen. */
static void client_check(struct sw_client *c, uint64_t gen)
{
	if (c->pc.gen != gen) {
		/* The call ended the connection (a timeout, a failure, a
		 * frame that makes no sense) and dropped its input: a late
		 * reply could only be misread. Told to the master now. */
		c->broken = true;
		shutdown(c->fd, SHUT_RDWR);
	}
}

int sw_client_call(struct sw_client *c, uint16_t type,
		   const ProtobufCMessage *req, ProtobufCMessage **reply)
{
	/* The request is the caller's own, and is put back as it was. */
	ProtobufCMessage *q = (ProtobufCMessage *)req;
	uint64_t h[SW_HANDLES_MAX];
	struct sw_handles hs;
	size_t vouched;
	uint64_t gen;
	int rc;

	*reply = NULL;
	rc = client_ready(c);
	if (rc < 0)
		return rc;
	gen = c->pc.gen;
	hs = (struct sw_handles){ .v = c->handles,
				  .cap = SW_CLIENT_HANDLES,
				  .next = c->handles_next % SW_CLIENT_HANDLES };
	vouched = sw_msg_vouch(type, q, sw_handles_find, &hs, h);
	rc = sw_pclient_call(&c->pc, c->fd, type, req, c->timeout_ms, reply);
	if (vouched)
		sw_msg_set_handles(q, NULL, 0);
	if (rc == 0 && *reply) {
		sw_handles_remember(&hs, *reply);
		c->handles_next = hs.next;
	}
	client_check(c, gen);
	return rc;
}

int sw_client_send(struct sw_client *c, uint16_t type,
		   const ProtobufCMessage *req, struct sw_pclient_waiter *w)
{
	uint64_t gen;
	int rc = client_ready(c);

	if (rc < 0) {
		*w = (struct sw_pclient_waiter){ true, rc, NULL };
		return rc;
	}
	gen = c->pc.gen;
	rc = sw_pclient_send(&c->pc, c->fd, type, req, w);
	if (rc < 0 && !w->done)
		sw_pclient_fail_all(&c->pc, rc);
	client_check(c, gen);
	return rc;
}

int sw_client_wait(struct sw_client *c, struct sw_pclient_waiter *w)
{
	uint64_t gen = c->pc.gen;

	/* Done already, or failed when the connection broke. */
	if (w->done)
		return w->rc;
	sw_pclient_wait(&c->pc, c->fd, w, c->timeout_ms);
	client_check(c, gen);
	return w->rc;
}

void sw_client_attach(struct sw_client *c, int fd, uint32_t max_payload,
		      int timeout_ms)
{
	*c = (struct sw_client){ .fd = fd,
				 .timeout_ms = timeout_ms,
				 .max_payload = max_payload };
	sw_pclient_init(&c->pc, max_payload, NULL, NULL);
}

int sw_target_password(struct sw_target *t, const char *password)
{
	int rc = sw_auth_key(password, t->key);

	t->has_key = rc == 0;
	return rc;
}

int sw_hello_answer(const struct sw_target *t, const Sweepfs__HelloReply *hr,
		    Sweepfs__Hello *hello, uint8_t tag[SW_AUTH_TAG])
{
	if (!hr->has_challenge || hr->challenge.len != SW_AUTH_NONCE ||
	    !t->has_key)
		return -EACCES;
	sw_auth_response(t->key, hr->challenge.data, t->subdir, tag);
	hello->has_auth = 1;
	hello->auth.data = tag;
	hello->auth.len = SW_AUTH_TAG;
	return 0;
}

int sw_hello_refusal(const struct sw_target *t, const Sweepfs__HelloReply *hr,
		     Sweepfs__Hello *hello, uint8_t tag[SW_AUTH_TAG], int tries)
{
	bool challenged = hr->has_challenge &&
			  hr->challenge.len == SW_AUTH_NONCE;

	if (tries > 0)
		return -EKEYREJECTED; /* refused after our answer */
	if (!challenged)
		return -EACCES;
	if (!t->has_key)
		return -ENOKEY;
	return sw_hello_answer(t, hr, hello, tag);
}

void sw_hello_leader(const Sweepfs__HelloReply *hr, char *buf)
{
	*buf = '\0';
	if (!hr->has_leader || hr->leader.len == 0 ||
	    hr->leader.len >= SW_ADDR_STRLEN ||
	    memchr(hr->leader.data, '\0', hr->leader.len))
		return;
	memcpy(buf, hr->leader.data, hr->leader.len);
	buf[hr->leader.len] = '\0';
}

int sw_target_walk(struct sw_target *t, int timeout_ms, sw_walk_fn try,
		   void *arg, void (*note)(void *arg, const char *why))
{
	int total = timeout_ms > 0 ? timeout_ms : 30000;
	int64_t deadline = sw_mono_ns() + (int64_t)total * 1000000;
	int pause_ms = 100, rounds = 0, rc = -ETIMEDOUT;
	char leader[SW_ADDR_STRLEN], why[SW_TARGET_WHYLEN];
	bool list = t->naddrs > 1;

	for (;;) {
		int64_t left = (deadline - sw_mono_ns()) / 1000000;
		bool refused = false;

		if (list && left <= 0)
			return rc; /* the last failure */
		leader[0] = '\0';
		rc = try(arg, t,
			 list ? (int)SW_MIN(left, SW_WALK_CONNECT_MS) : total,
			 leader, &refused);
		if (rc >= 0) {
			sw_target_ok(t);
			return rc;
		}
		if (refused && rc != -EREMOTE)
			return rc;
		if (!sw_target_failed(t, rc, leader, why, sizeof(why))) {
			if (note && *why)
				note(arg, why);
			continue;
		}
		if (!list || ++rounds >= SW_WALK_ROUNDS ||
		    sw_mono_ns() + (int64_t)pause_ms * 1000000 >= deadline)
			return rc;
		if (note && *why)
			note(arg, why);
		sw_sleep_ms(pause_ms);
		pause_ms = SW_MIN(pause_ms * 2, 1000);
	}
}

struct open_args {
	int role;
	const char *name;
	int timeout_ms;
	struct sw_client *c;
};

/* One address of sw_client_open(): connect and hello. */
static int open_one(void *arg, const struct sw_target *t, int connect_ms,
		    char *leader, bool *refused)
{
	struct open_args *a = arg;
	Sweepfs__Hello hello = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *hr;
	ProtobufCMessage *reply;
	uint8_t tag[SW_AUTH_TAG];
	struct sw_client *c;
	int rc, tries = 0;

	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	sw_client_attach(c, -1, SW_FRAME_MAX_META, 0);
	/* A member of a group that does not answer its hello within the
	 * peer timeout is frozen or stuck (its kernel still accepts
	 * connections): the next one may lead. */
	c->timeout_ms = a->timeout_ms > 0 ?
				(int)sw_target_peer_timeout(
					t, (unsigned)a->timeout_ms) :
				(t->naddrs > 1 ? SW_GROUP_PEER_TIMEOUT_MS : 0);
	c->fd = sw_tcp_connect(t->host, t->port, connect_ms);
	if (c->fd < 0) {
		rc = c->fd;
		goto out_free;
	}
	/* A chunkserver's to another speaks the data plane's version. */
	hello.version = sw_proto_hello_version(a->role, true);
	hello.role = a->role;
	hello.subdir.data = (uint8_t *)t->subdir;
	hello.subdir.len = strlen(t->subdir);
	hello.has_subdir = 1;
	if (a->name) {
		hello.client_name.data = (uint8_t *)a->name;
		hello.client_name.len = strlen(a->name);
		hello.has_client_name = 1;
	}
again:
	rc = sw_client_call(c, SW_MSG_HELLO, &hello.base, &reply);
	if (rc < 0)
		goto out_close;
	hr = (Sweepfs__HelloReply *)reply;
	rc = sw_reply_err(reply);
	if (rc == -EACCES) {
		rc = sw_hello_refusal(t, hr, &hello, tag, tries++);
		if (rc == 0) {
			protobuf_c_message_free_unpacked(reply, NULL);
			goto again;
		}
	}
	*refused = rc < 0;
	if (rc == -EREMOTE)
		sw_hello_leader(hr, leader);
	if (rc == 0 && (!hr->has_session_id || !hr->has_root_ino))
		rc = -EPROTO;
	if (rc == 0) {
		c->session_id = hr->session_id;
		c->root_ino = hr->root_ino;
		c->peer_role = hr->has_role ? (int)hr->role : 0;
		c->has_cluster_id = hr->has_cluster_id &&
				    hr->cluster_id.len == SW_CLUSTER_ID_LEN;
		if (c->has_cluster_id)
			memcpy(c->cluster_id, hr->cluster_id.data,
			       SW_CLUSTER_ID_LEN);
	}
	protobuf_c_message_free_unpacked(reply, NULL);
	if (rc < 0)
		goto out_close;
	sw_addr_str(t->host, t->port, c->master, sizeof(c->master));
	c->timeout_ms = a->timeout_ms;
	a->c = c;
	return 0;

out_close:
	close(c->fd);
out_free:
	sw_pclient_release(&c->pc);
	free(c);
	return rc;
}

int sw_client_open(const struct sw_target *t, int role, const char *name,
		   int timeout_ms, struct sw_client **out)
{
	struct open_args a = { .role = role,
			       .name = name,
			       .timeout_ms = timeout_ms };
	struct sw_target *walk = malloc(sizeof(*walk));
	int rc;

	if (!walk)
		return -ENOMEM;
	*walk = *t; /* the walk moves through the list; the caller's stays */
	rc = sw_target_walk(walk, timeout_ms, open_one, &a, NULL);
	free(walk);
	if (rc < 0)
		return rc;
	*out = a.c;
	return 0;
}

void sw_client_close(struct sw_client *c)
{
	if (!c)
		return;
	close(c->fd);
	sw_pclient_release(&c->pc);
	free(c);
}
