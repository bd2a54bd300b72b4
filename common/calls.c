/*
 * The in-flight table of a pipelined client connection (calls.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "client.h" /* sw_reply_err() */

struct sw_call *sw_call_new(uint16_t type, const ProtobufCMessage *req,
			    sw_call_cb cb, void *arg)
{
	struct sw_call *c = malloc(sizeof(*c) + sw_frame_size(req));

	if (!c) {
		ProtobufCMessage *none = NULL;

		if (cb)
			cb(arg, -ENOMEM, &none);
		return NULL;
	}
	*c = (struct sw_call){ .type = type, .refs = 2, .cb = cb, .arg = arg };
	c->len = sw_frame_pack(c->frame, type, 0, 0, req);
	return c;
}

struct sw_call *sw_call_new_packed(uint16_t type, const uint8_t *payload,
				   size_t len, sw_call_cb cb, void *arg)
{
	struct sw_frame_hdr hdr = { .len = (uint32_t)len, .type = type };
	struct sw_call *c = len <= UINT32_MAX ?
				    malloc(sizeof(*c) + SW_FRAME_HDR + len) :
				    NULL;

	if (!c) {
		ProtobufCMessage *none = NULL;

		if (cb)
			cb(arg, -ENOMEM, &none);
		return NULL;
	}
	*c = (struct sw_call){ .type = type, .refs = 2, .cb = cb, .arg = arg };
	sw_frame_put_hdr(c->frame, &hdr);
	if (len) /* NULL + 0 is undefined */
		memcpy(c->frame + SW_FRAME_HDR, payload, len);
	c->len = SW_FRAME_HDR + len;
	return c;
}

void sw_call_put(struct sw_call *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(c);
}

void sw_call_complete(struct sw_call *c, int rc, ProtobufCMessage *reply)
{
	if (c->cb)
		c->cb(c->arg, rc, &reply);
	if (reply)
		protobuf_c_message_free_unpacked(reply, NULL);
	sw_call_put(c);
}

void sw_call_answer(struct sw_call *c, const struct sw_frame_hdr *hdr,
		    const uint8_t *payload)
{
	const struct sw_msg_info *info = sw_msg_info(hdr->type);
	ProtobufCMessage *reply = NULL;

	if (info && hdr->type == c->type)
		reply = protobuf_c_message_unpack(info->reply, NULL, hdr->len,
						  payload);
	sw_call_complete(c, reply ? sw_reply_err(reply) : -EIO, reply);
}

void sw_call_fail_list(struct sw_call *head, int rc)
{
	while (head) {
		struct sw_call *c = head;

		head = c->next;
		sw_call_complete(c, rc, NULL);
	}
}

void sw_calls_init(struct sw_calls *t)
{
	memset(t, 0, sizeof(*t));
	t->next_id = 1;
}

void sw_calls_assign(struct sw_calls *t, struct sw_call *c)
{
	struct sw_frame_hdr hdr = {
		.len = (uint32_t)(c->len - SW_FRAME_HDR),
		.type = c->type,
		/* A once call sent again keeps the id the master may know
		 * it by; the table's ids only grow, so no other call has it. */
		.flags = c->once && c->id ? SW_FRAME_AGAIN : 0,
		.id = c->once && c->id ? c->id : t->next_id++,
	};
	struct sw_call **b = &t->slot[hdr.id % SW_CALLS_SLOTS];

	c->id = hdr.id;
	sw_frame_put_hdr(c->frame, &hdr);
	c->next = *b;
	*b = c;
}

struct sw_call *sw_calls_take(struct sw_calls *t, uint64_t id)
{
	for (struct sw_call **pp = &t->slot[id % SW_CALLS_SLOTS]; *pp;
	     pp = &(*pp)->next) {
		struct sw_call *c = *pp;

		if (c->id == id) {
			*pp = c->next;
			return c;
		}
	}
	return NULL;
}

/* Merge two lists sorted by id. */
static struct sw_call *merge(struct sw_call *a, struct sw_call *b)
{
	struct sw_call *head = NULL, **tail = &head;

	while (a && b) {
		struct sw_call **min = a->id < b->id ? &a : &b;

		*tail = *min;
		tail = &(*min)->next;
		*min = (*min)->next;
	}
	*tail = a ? a : b;
	return head;
}

struct sw_call *sw_calls_take_all(struct sw_calls *t)
{
	struct sw_call *head;

	/* Each bucket is newest first (calls are added at its head):
	 * reversed, it is sorted. Then buckets merge pairwise, as a
	 * bottom-up merge sort does (SW_CALLS_SLOTS is a power of two). */
	for (unsigned s = 0; s < SW_CALLS_SLOTS; s++) {
		struct sw_call *rev = NULL, *c = t->slot[s], *next;

		for (; c; c = next) {
			next = c->next;
			c->next = rev;
			rev = c;
		}
		t->slot[s] = rev;
	}
	for (unsigned w = 1; w < SW_CALLS_SLOTS; w *= 2)
		for (unsigned s = 0; s < SW_CALLS_SLOTS; s += 2 * w) {
			t->slot[s] = merge(t->slot[s], t->slot[s + w]);
			t->slot[s + w] = NULL;
		}
	head = t->slot[0];
	t->slot[0] = NULL;
	return head;
}
