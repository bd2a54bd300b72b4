/*
 * Frame header codec and the message type table.
 *
 * The table is the one place that binds a type number to its payloads and
 * its properties; it is built from proto/messages.def, which the master's
 * dispatcher reads too, so a type cannot be decoded with the wrong
 * descriptor nor handled with properties said twice.
 *
 * Node fields are declared by number. The first walk resolves each to
 * the offsets protobuf-c put it at (pthread_once: the mount asks from
 * many threads); a walk is then a few loads per field, with no look-up by
 * name and no loop over the fields a message does not name nodes by.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "frame.h"

#define FL(f, bit) (((f) & (bit)) != 0)
#define NODES(...)          \
	{                   \
		__VA_ARGS__ \
	}
#define NODES_NONE \
	{          \
		0  \
	}
#define NOT_NODES(...)      \
	{                   \
		__VA_ARGS__ \
	}
#define NOT_NODES_NONE \
	{              \
		0      \
	}
#define MSG(type, nm, rq, rp, fl, who, handler, wr, nodes_, not_nodes_) \
	[SW_MSG_##type] = { .name = nm,                                 \
			    .req = &sweepfs__##rq##__descriptor,        \
			    .reply = &sweepfs__##rp##__descriptor,      \
			    .mutating = FL(fl, SW_MSG_F_JOURNAL),       \
			    .resend = FL(fl, SW_MSG_F_RESEND),          \
			    .once = FL(fl, SW_MSG_F_ONCE),              \
			    .writes = FL(fl, SW_MSG_F_WRITES),          \
			    .admin = FL(fl, SW_MSG_F_ADMIN),            \
			    .subtree = FL(fl, SW_MSG_F_SUBTREE),        \
			    .recall_all = FL(fl, SW_MSG_F_RECALL_ALL),  \
			    .overtakes = FL(fl, SW_MSG_F_OVERTAKES),    \
			    .no_flush = FL(fl, SW_MSG_F_NO_FLUSH),      \
			    .removes = FL(fl, SW_MSG_F_REMOVES),        \
			    .whole = FL(fl, SW_MSG_F_WHOLE),            \
			    .roles = (who),                             \
			    .nodes = nodes_,                            \
			    .not_nodes = not_nodes_ },

static const struct sw_msg_info msg_table[SW_MSG__COUNT] = {
#include "messages.def"
};

#undef MSG
#undef NODES
#undef NODES_NONE
#undef NOT_NODES
#undef NOT_NODES_NONE
#undef FL

const struct sw_msg_info *sw_msg_info(uint16_t type)
{
	if (type >= SW_MSG__COUNT || !msg_table[type].name)
		return NULL;
	return &msg_table[type];
}

/* A node field, resolved: where its uint64 is. */
struct node_ref {
	uint32_t offset; /* the value, in the message or in each element */
	uint32_t has;	 /* its has_ flag's offset when optional, else 0 */
	uint32_t count;	 /* for an element field: n_<outer>'s offset */
	uint32_t array;	 /* ... and the element pointers' offset; else 0 */
	uint32_t name;	 /* an entry's name, beside the value; else 0 */
};

static struct node_ref node_refs[SW_MSG__COUNT][SW_MSG_NODES_MAX];
static uint16_t node_bad_type; /* first type that did not resolve, or 0 */
static pthread_once_t node_once = PTHREAD_ONCE_INIT;

static const ProtobufCFieldDescriptor *
scalar_u64(const ProtobufCMessageDescriptor *d, uint32_t number)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field(d, number);

	if (!f || f->type != PROTOBUF_C_TYPE_UINT64 ||
	    f->label == PROTOBUF_C_LABEL_REPEATED)
		return NULL;
	return f;
}

static int resolve_one(const ProtobufCMessageDescriptor *d, uint32_t spec,
		       struct node_ref *ref)
{
	const ProtobufCFieldDescriptor *outer = NULL, *f;
	uint32_t node = SW_MSG_SPEC_NODE(spec);

	if (node >> 16) {
		outer = protobuf_c_message_descriptor_get_field(d, node >> 16);
		if (!outer || outer->type != PROTOBUF_C_TYPE_MESSAGE ||
		    outer->label != PROTOBUF_C_LABEL_REPEATED)
			return -EINVAL;
		d = outer->descriptor;
		node &= 0xffff;
	}
	f = scalar_u64(d, node);
	if (!f)
		return -EINVAL;
	ref->offset = f->offset;
	ref->has = f->label == PROTOBUF_C_LABEL_OPTIONAL ?
			   f->quantifier_offset :
			   0;
	ref->count = outer ? outer->quantifier_offset : 0;
	ref->array = outer ? outer->offset : 0;
	ref->name = 0;
	if (SW_MSG_SPEC_NAME(spec)) {
		f = protobuf_c_message_descriptor_get_field(
			d, SW_MSG_SPEC_NAME(spec));
		if (!f || f->type != PROTOBUF_C_TYPE_BYTES ||
		    f->label != PROTOBUF_C_LABEL_REQUIRED)
			return -EINVAL;
		ref->name = f->offset;
	}
	return 0;
}

static void resolve_nodes(void)
{
	for (uint16_t t = 0; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *info = &msg_table[t];

		/* A removal removes one entry, a tree it names by name. */
		if (info->name && info->removes &&
		    (!SW_MSG_SPEC_NAME(info->nodes[0]) || info->nodes[1]) &&
		    !node_bad_type)
			node_bad_type = t;

		for (unsigned i = 0;
		     info->name && i < SW_MSG_NODES_MAX && info->nodes[i];
		     i++) {
			if (resolve_one(info->req, info->nodes[i],
					&node_refs[t][i]) < 0 &&
			    !node_bad_type)
				node_bad_type = t;
		}
	}
}

const Sweepfs__Cred *sw_msg_cred(const ProtobufCMessage *msg)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(msg->descriptor,
								"cred");

	if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE ||
	    f->descriptor != &sweepfs__cred__descriptor ||
	    f->label == PROTOBUF_C_LABEL_REPEATED)
		return NULL;
	return *(const Sweepfs__Cred *const *)((const char *)msg + f->offset);
}

static const ProtobufCFieldDescriptor *
handles_field(const ProtobufCMessageDescriptor *d)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(d, "handles");

	if (!f || f->type != PROTOBUF_C_TYPE_FIXED64 ||
	    f->label != PROTOBUF_C_LABEL_REPEATED)
		return NULL;
	return f;
}

const uint64_t *sw_msg_handles(const ProtobufCMessage *msg, size_t *n)
{
	const ProtobufCFieldDescriptor *f = handles_field(msg->descriptor);

	*n = 0;
	if (!f)
		return NULL;
	*n = *(const size_t *)((const char *)msg + f->quantifier_offset);
	return *(uint64_t *const *)((const char *)msg + f->offset);
}

int sw_msg_set_handles(ProtobufCMessage *msg, uint64_t *h, size_t n)
{
	const ProtobufCFieldDescriptor *f = handles_field(msg->descriptor);

	if (!f)
		return -ENOENT;
	*(size_t *)((char *)msg + f->quantifier_offset) = n;
	*(uint64_t **)((char *)msg + f->offset) = h;
	return 0;
}

void sw_msg_attrs(const ProtobufCMessage *msg,
		  void (*fn)(void *arg, const Sweepfs__Attr *a), void *arg)
{
	const ProtobufCMessageDescriptor *d = msg->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *p = (const char *)msg + f->offset;
		Sweepfs__Attr *const *v;
		size_t n;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE ||
		    f->descriptor != &sweepfs__attr__descriptor)
			continue;
		if (f->label != PROTOBUF_C_LABEL_REPEATED) {
			if (*(Sweepfs__Attr *const *)p)
				fn(arg, *(Sweepfs__Attr *const *)p);
			continue;
		}
		n = *(const size_t *)((const char *)msg + f->quantifier_offset);
		v = *(Sweepfs__Attr *const *const *)p;
		for (size_t k = 0; k < n; k++)
			fn(arg, v[k]);
	}
}

size_t sw_msg_vouch(uint16_t type, ProtobufCMessage *msg,
		    uint64_t (*handle_of)(void *arg, uint64_t ino), void *arg,
		    uint64_t h[SW_HANDLES_MAX])
{
	struct sw_msg_nodes it;
	size_t have, k = 0;
	uint64_t ino;

	/* (A test's hostile frame may carry another type's message.) */
	if (!sw_msg_info(type) || sw_msg_info(type)->req != msg->descriptor ||
	    !handles_field(msg->descriptor))
		return 0;
	(void)sw_msg_handles(msg, &have);
	if (have)
		return 0;
	sw_msg_nodes_begin(&it, type, msg);
	while (k < SW_HANDLES_MAX && sw_msg_nodes_next(&it, &ino)) {
		uint64_t x = handle_of(arg, ino);
		size_t i;

		for (i = 0; i < k && h[i] != x; i++)
			;
		if (x && i == k)
			h[k++] = x;
	}
	if (k)
		sw_msg_set_handles(msg, h, k);
	return k;
}

int sw_msg_check(uint16_t *type_out)
{
	pthread_once(&node_once, resolve_nodes);
	if (type_out)
		*type_out = node_bad_type;
	return node_bad_type ? -EINVAL : 0;
}

void sw_msg_nodes_begin(struct sw_msg_nodes *it, uint16_t type,
			const ProtobufCMessage *msg)
{
	pthread_once(&node_once, resolve_nodes);
	it->msg = msg;
	it->type = type < SW_MSG__COUNT ? type : 0;
	it->spec = 0;
	it->elem = 0;
	it->entry = NULL;
}

bool sw_msg_nodes_next(struct sw_msg_nodes *it, uint64_t *ino)
{
	const char *base = (const char *)it->msg;

	while (it->spec < SW_MSG_NODES_MAX &&
	       msg_table[it->type].nodes[it->spec]) {
		const struct node_ref *r = &node_refs[it->type][it->spec];
		const char *at = base;

		if (!r->offset) { /* did not resolve: sw_msg_check() says */
			it->spec++;
			continue;
		}
		if (r->array) {
			size_t n = *(const size_t *)(base + r->count);

			if (it->elem >= n) {
				it->spec++;
				it->elem = 0;
				continue;
			}
			at = (*(const char *const *const
					*)(base + r->array))[it->elem++];
		} else {
			it->spec++;
		}
		if (r->has && !*(const protobuf_c_boolean *)(at + r->has))
			continue;
		*ino = *(const uint64_t *)(at + r->offset);
		it->entry =
			r->name ? (const ProtobufCBinaryData *)(at + r->name) :
				  NULL;
		return true;
	}
	return false;
}

size_t sw_msg_nodes(uint16_t type, const ProtobufCMessage *msg, uint64_t *out,
		    size_t max)
{
	struct sw_msg_nodes it;
	uint64_t ino;
	size_t n = 0;

	sw_msg_nodes_begin(&it, type, msg);
	while (sw_msg_nodes_next(&it, &ino)) {
		if (n < max)
			out[n] = ino;
		n++;
	}
	return n;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

void sw_frame_put_hdr(uint8_t *out, const struct sw_frame_hdr *hdr)
{
	put_be32(out, hdr->len);
	out[4] = hdr->type >> 8;
	out[5] = hdr->type;
	out[6] = hdr->flags >> 8;
	out[7] = hdr->flags;
	put_be32(out + 8, hdr->id >> 32);
	put_be32(out + 12, (uint32_t)hdr->id);
}

int sw_frame_get_hdr(const uint8_t *in, size_t avail, uint32_t max_payload,
		     struct sw_frame_hdr *hdr)
{
	if (avail < SW_FRAME_HDR)
		return 0;
	hdr->len = get_be32(in);
	hdr->type = (uint16_t)(in[4] << 8 | in[5]);
	hdr->flags = (uint16_t)(in[6] << 8 | in[7]);
	hdr->id = (uint64_t)get_be32(in + 8) << 32 | get_be32(in + 12);
	if (hdr->len > max_payload)
		return -EMSGSIZE;
	if (hdr->flags & ~(SW_FRAME_REPLY | SW_FRAME_NOTIFY | SW_FRAME_AGAIN))
		return -EPROTO;
	return 1;
}

int sw_frame_whole(const uint8_t *in, size_t avail, uint32_t max_payload,
		   struct sw_frame_hdr *hdr)
{
	int rc = sw_frame_get_hdr(in, avail, max_payload, hdr);

	if (rc <= 0)
		return rc;
	return avail - SW_FRAME_HDR >= hdr->len ? 1 : 0;
}

size_t sw_frame_size(const ProtobufCMessage *msg)
{
	return SW_FRAME_HDR +
	       (msg ? protobuf_c_message_get_packed_size(msg) : 0);
}

size_t sw_frame_pack(uint8_t *out, uint16_t type, uint16_t flags, uint64_t id,
		     const ProtobufCMessage *msg)
{
	struct sw_frame_hdr hdr = { .type = type, .flags = flags, .id = id };

	hdr.len = msg ? (uint32_t)protobuf_c_message_pack(msg,
							  out + SW_FRAME_HDR) :
			0;
	sw_frame_put_hdr(out, &hdr);
	return SW_FRAME_HDR + hdr.len;
}
