/*
 * The blocking master connection of tools, tests and benchmarks
 * (client.h): connect, hello, one call at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "client.h"
#include "frameio.h"
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

int sw_client_send(struct sw_client *c, uint16_t type,
		   const ProtobufCMessage *req, uint64_t *id)
{
	size_t size = sw_frame_size(req);
	uint8_t stackbuf[4096], *p = stackbuf;
	int rc;

	if (size > SW_FRAME_HDR + SW_FRAME_MAX_META)
		return -EMSGSIZE;
	if (size > sizeof(stackbuf)) {
		p = malloc(size);
		if (!p)
			return -ENOMEM;
	}
	*id = c->next_id++;
	sw_frame_pack(p, type, 0, *id, req);
	rc = sw_write_all(c->fd, p, size);
	if (p != stackbuf)
		free(p);
	return rc;
}

int sw_client_recv(struct sw_client *c, struct sw_frame_hdr *hdr,
		   ProtobufCMessage **reply)
{
	for (;;) {
		const struct sw_msg_info *info;
		int rc = sw_frame_next(c->fd, &c->in, 64 << 10, c->timeout_ms,
				       c->max_payload, hdr);

		if (rc < 0)
			return rc;
		info = sw_msg_info(hdr->type);
		if (!(hdr->flags & SW_FRAME_REPLY) || !info) {
			/* A notification, or a type we do not know: skip. */
			sw_buf_consume(&c->in, SW_FRAME_HDR + hdr->len);
			continue;
		}
		*reply = protobuf_c_message_unpack(info->reply, NULL, hdr->len,
						   sw_buf_head(&c->in) +
							   SW_FRAME_HDR);
		sw_buf_consume(&c->in, SW_FRAME_HDR + hdr->len);
		return *reply ? 0 : -EPROTO;
	}
}

int sw_client_call(struct sw_client *c, uint16_t type,
		   const ProtobufCMessage *req, ProtobufCMessage **reply)
{
	struct sw_frame_hdr hdr;
	uint64_t id;
	int rc = sw_client_send(c, type, req, &id);

	if (rc < 0)
		return rc;
	for (;;) {
		rc = sw_client_recv(c, &hdr, reply);
		if (rc < 0)
			return rc;
		if (hdr.id == id && hdr.type == type)
			return 0;
		/* A reply to an earlier pipelined request nobody waits for. */
		protobuf_c_message_free_unpacked(*reply, NULL);
	}
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

int sw_client_open(const struct sw_target *t, int role, const char *name,
		   int timeout_ms, struct sw_client **out)
{
	Sweepfs__Hello hello = SWEEPFS__HELLO__INIT;
	Sweepfs__HelloReply *hr;
	ProtobufCMessage *reply;
	uint8_t tag[SW_AUTH_TAG];
	struct sw_client *c;
	int rc, tries = 0;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->next_id = 1;
	c->timeout_ms = timeout_ms;
	c->max_payload = SW_FRAME_MAX_META;
	c->fd = sw_tcp_connect(t->host, t->port,
			       timeout_ms > 0 ? timeout_ms : 30000);
	if (c->fd < 0) {
		rc = c->fd;
		goto out_free;
	}
	hello.version = SW_PROTO_VERSION;
	hello.role = role;
	hello.subdir.data = (uint8_t *)t->subdir;
	hello.subdir.len = strlen(t->subdir);
	hello.has_subdir = 1;
	if (name) {
		hello.client_name.data = (uint8_t *)name;
		hello.client_name.len = strlen(name);
		hello.has_client_name = 1;
	}
again:
	rc = sw_client_call(c, SW_MSG_HELLO, &hello.base, &reply);
	if (rc < 0)
		goto out_close;
	hr = (Sweepfs__HelloReply *)reply;
	rc = sw_reply_err(reply);
	if (rc == -EACCES && tries++ == 0 &&
	    sw_hello_answer(t, hr, &hello, tag) == 0) {
		protobuf_c_message_free_unpacked(reply, NULL);
		goto again;
	}
	if (rc == 0 && (!hr->has_session_id || !hr->has_root_ino))
		rc = -EPROTO;
	if (rc == 0) {
		c->session_id = hr->session_id;
		c->root_ino = hr->root_ino;
	}
	protobuf_c_message_free_unpacked(reply, NULL);
	if (rc < 0)
		goto out_close;
	*out = c;
	return 0;

out_close:
	close(c->fd);
out_free:
	sw_buf_release(&c->in);
	free(c);
	return rc;
}

void sw_client_close(struct sw_client *c)
{
	if (!c)
		return;
	close(c->fd);
	sw_buf_release(&c->in);
	free(c);
}
