/*
 * The wire and the small common helpers: proto/frame.h, proto/entries.h,
 * common/buf.h, common/crc32c.h, common/cfg.h, the targets (lists of
 * masters) of common/net.h with sw_target_walk() of common/client.h, and
 * the parsers of common/util.h.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "cfg.h"
#include "client.h"
#include "crc32c.h"
#include "entries.h"
#include "frame.h"
#include "net.h"
#include "unit.h"
#include "util.h"

/*
 * test_sw_buf_reserve_huge asks for absurd sizes on purpose; under ASan
 * malloc must then return NULL instead of aborting.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

struct fixture {
	struct rng rng;
	struct sw_buf buf;
	char dir[256];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	rng_seed(&f->rng, 7);
	sw_buf_init(&f->buf);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	sw_buf_release(&f->buf);
	if (f->dir[0])
		unit_rm_rf(f->dir);
	free(f);
	return 0;
}

/* ---- crc32c --------------------------------------------------------- */

static void test_sw_crc32c_known_vectors(void **state)
{
	uint8_t b[32];

	(void)state;
	assert_int_equal(sw_crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(sw_crc32c_portable(0, "123456789", 9), 0xe3069283);
	assert_int_equal(sw_crc32c(0, "", 0), 0);
	/* RFC 3720, B.4. */
	memset(b, 0, sizeof(b));
	assert_int_equal(sw_crc32c(0, b, 32), 0x8a9136aa);
	assert_int_equal(sw_crc32c_portable(0, b, 32), 0x8a9136aa);
	memset(b, 0xff, sizeof(b));
	assert_int_equal(sw_crc32c(0, b, 32), 0x62a8ab43);
	assert_int_equal(sw_crc32c_portable(0, b, 32), 0x62a8ab43);
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)i;
	assert_int_equal(sw_crc32c(0, b, 32), 0x46dd794e);
	assert_int_equal(sw_crc32c_portable(0, b, 32), 0x46dd794e);
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)(31 - i);
	assert_int_equal(sw_crc32c(0, b, 32), 0x113fdb5c);
	assert_int_equal(sw_crc32c_portable(0, b, 32), 0x113fdb5c);
}

/* Whatever the CPU path, both give the same value, at every length and
 * alignment, and extending a crc equals computing it at once. */
static void test_sw_crc32c_matches_portable(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[300 + 8];

	for (size_t len = 0; len <= 300; len++) {
		for (size_t align = 0; align < 8; align++) {
			uint8_t *p = buf + align;
			uint32_t whole, part;
			size_t cut;

			rng_fill(&f->rng, p, len);
			whole = sw_crc32c(0, p, len);
			assert_int_equal(whole, sw_crc32c_portable(0, p, len));
			cut = len ? (size_t)rng_below(&f->rng, len + 1) : 0;
			part = sw_crc32c(0, p, cut);
			assert_int_equal(sw_crc32c(part, p + cut, len - cut),
					 whole);
			part = sw_crc32c_portable(0, p, cut);
			assert_int_equal(sw_crc32c_portable(part, p + cut,
							    len - cut),
					 whole);
			/* A flipped bit changes the value. */
			if (len) {
				p[cut % len] ^= 0x10;
				assert_int_not_equal(sw_crc32c(0, p, len),
						     whole);
			}
		}
	}
}

/* ---- frame header --------------------------------------------------- */

/* sw_frame_whole(): 1 only once header and payload are all there; the
 * limit and bad flags are errors at once, before the payload. */
static void test_sw_frame_whole(void **state)
{
	struct sw_frame_hdr in = { .len = 10, .type = SW_MSG_PING, .id = 7 };
	struct sw_frame_hdr out;
	uint8_t b[SW_FRAME_HDR + 10] = { 0 };

	(void)state;
	sw_frame_put_hdr(b, &in);
	for (size_t avail = 0; avail < sizeof(b); avail++)
		assert_int_equal(sw_frame_whole(b, avail, 100, &out), 0);
	assert_int_equal(sw_frame_whole(b, sizeof(b), 100, &out), 1);
	assert_int_equal(out.len, 10);
	assert_int_equal(out.id, 7);
	assert_int_equal(sw_frame_whole(b, SW_FRAME_HDR, 9, &out), -EMSGSIZE);
	in.flags = 0x80;
	sw_frame_put_hdr(b, &in);
	assert_int_equal(sw_frame_whole(b, SW_FRAME_HDR, 100, &out), -EPROTO);
	in = (struct sw_frame_hdr){ .type = SW_MSG_PING };
	sw_frame_put_hdr(b, &in); /* an empty payload is whole at once */
	assert_int_equal(sw_frame_whole(b, SW_FRAME_HDR, 0, &out), 1);
}

static void test_sw_frame_get_hdr_round_trip(void **state)
{
	struct fixture *f = *state;
	static const uint8_t want[SW_FRAME_HDR] = {
		0x00, 0x01, 0x02, 0x03, 0x00, 0x17, 0x00, 0x01,
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
	};
	struct sw_frame_hdr in = { .len = 0x010203,
				   .type = SW_MSG_READDIR,
				   .flags = SW_FRAME_REPLY,
				   .id = 0x0102030405060708ULL };
	struct sw_frame_hdr out;
	uint8_t b[SW_FRAME_HDR + 1];

	/* Big-endian, as documented. */
	sw_frame_put_hdr(b, &in);
	assert_memory_equal(b, want, SW_FRAME_HDR);
	assert_int_equal(
		sw_frame_get_hdr(b, SW_FRAME_HDR, SW_FRAME_MAX_META, &out), 1);
	assert_int_equal(out.len, in.len);
	assert_int_equal(out.type, in.type);
	assert_int_equal(out.flags, in.flags);
	assert_int_equal(out.id, in.id);

	for (int i = 0; i < 1000; i++) {
		in.len = (uint32_t)rng_below(&f->rng, SW_FRAME_MAX_META + 1);
		in.type = (uint16_t)rng_next(&f->rng);
		in.flags = (uint16_t)rng_below(&f->rng, 4);
		in.id = rng_next(&f->rng);
		if (i == 0)
			in.id = UINT64_MAX;
		sw_frame_put_hdr(b, &in);
		b[SW_FRAME_HDR] = 0xee; /* beyond the header: ignored */
		memset(&out, 0, sizeof(out));
		assert_int_equal(sw_frame_get_hdr(b, sizeof(b),
						  SW_FRAME_MAX_META, &out),
				 1);
		assert_memory_equal(&out, &in, sizeof(in));
	}
}

static void test_sw_frame_get_hdr_limits(void **state)
{
	struct sw_frame_hdr in = { .len = 1000, .type = SW_MSG_PING }, out;
	uint8_t b[SW_FRAME_HDR];

	(void)state;
	/* Short input: not an error, just not yet. */
	sw_frame_put_hdr(b, &in);
	for (size_t avail = 0; avail < SW_FRAME_HDR; avail++)
		assert_int_equal(sw_frame_get_hdr(b, avail, 1000, &out), 0);
	/* Exactly the maximum passes; one more does not. */
	assert_int_equal(sw_frame_get_hdr(b, SW_FRAME_HDR, 1000, &out), 1);
	assert_int_equal(sw_frame_get_hdr(b, SW_FRAME_HDR, 999, &out),
			 -EMSGSIZE);
	in.len = UINT32_MAX;
	sw_frame_put_hdr(b, &in);
	assert_int_equal(sw_frame_get_hdr(b, SW_FRAME_HDR, SW_FRAME_MAX_META,
					  &out),
			 -EMSGSIZE);
	/* Every unknown flag bit on its own. */
	in.len = 0;
	for (int bit = 0; bit < 16; bit++) {
		in.flags = (uint16_t)(1u << bit);
		sw_frame_put_hdr(b, &in);
		assert_int_equal(sw_frame_get_hdr(b, SW_FRAME_HDR,
						  SW_FRAME_MAX_META, &out),
				 in.flags & ~(SW_FRAME_REPLY | SW_FRAME_NOTIFY |
					      SW_FRAME_AGAIN) ?
					 -EPROTO :
					 1);
	}
}

static void test_sw_frame_pack_round_trip(void **state)
{
	Sweepfs__PingReply msg = SWEEPFS__PING_REPLY__INIT, *back;
	struct sw_frame_hdr hdr;
	uint8_t b[256];
	size_t n;

	(void)state;
	msg.has_token = 1;
	msg.token = 0xdeadbeefcafeULL;
	msg.has_err = 1;
	msg.err = -5;
	n = sw_frame_size(&msg.base);
	assert_true(n > SW_FRAME_HDR && n < sizeof(b));
	assert_int_equal(sw_frame_pack(b, SW_MSG_PING, SW_FRAME_REPLY, 99,
				       &msg.base),
			 n);
	assert_int_equal(sw_frame_get_hdr(b, n, SW_FRAME_MAX_META, &hdr), 1);
	assert_int_equal(hdr.len, n - SW_FRAME_HDR);
	assert_int_equal(hdr.type, SW_MSG_PING);
	assert_int_equal(hdr.flags, SW_FRAME_REPLY);
	assert_int_equal(hdr.id, 99);
	back = sweepfs__ping_reply__unpack(NULL, hdr.len, b + SW_FRAME_HDR);
	assert_non_null(back);
	assert_int_equal(back->token, msg.token);
	assert_int_equal(back->err, -5);
	sweepfs__ping_reply__free_unpacked(back, NULL);

	/* No message: a bare header. */
	assert_int_equal(sw_frame_size(NULL), SW_FRAME_HDR);
	assert_int_equal(sw_frame_pack(b, SW_MSG_PING, 0, 1, NULL),
			 SW_FRAME_HDR);
	assert_int_equal(sw_frame_get_hdr(b, SW_FRAME_HDR, 0, &hdr), 1);
	assert_int_equal(hdr.len, 0);
}

static void test_sw_msg_info_table(void **state)
{
	(void)state;
	assert_null(sw_msg_info(0));
	assert_null(sw_msg_info(SW_MSG__COUNT));
	assert_null(sw_msg_info(UINT16_MAX));
	for (uint16_t t = 1; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *i = sw_msg_info(t);

		assert_non_null(i);
		assert_non_null(i->name);
		assert_non_null(i->req);
		assert_non_null(i->reply);
		assert_int_equal(i->req->magic,
				 PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
		assert_int_equal(i->reply->magic,
				 PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
	}
	assert_string_equal(sw_msg_info(SW_MSG_LOOKUP)->name, "lookup");
	assert_false(sw_msg_info(SW_MSG_LOOKUP)->mutating);
	assert_false(sw_msg_info(SW_MSG_READDIR)->mutating);
	assert_true(sw_msg_info(SW_MSG_RENAME)->mutating);
	assert_true(sw_msg_info(SW_MSG_SETXATTR)->mutating);
	assert_true(sw_msg_info(SW_MSG_MKDIR)->mutating);
}

/*
 * What a client sends again after a reconnect (frame.c says why). Sent
 * twice, the first list leaves what sending once does; the second is
 * sent again flagged SW_FRAME_AGAIN, for the master to answer from what
 * the first did (master/replies.h); the rest fail.
 */
static void test_sw_msg_info_resend(void **state)
{
	static const uint16_t again[] = {
		SW_MSG_LOOKUP, SW_MSG_GETATTR,	 SW_MSG_READDIR,
		SW_MSG_CHUNK,  SW_MSG_WRITE_END, SW_MSG_OPEN,
		SW_MSG_LOCK,   SW_MSG_BATCH,	 SW_MSG_INO_RANGE,
	};
	static const uint16_t once[] = {
		SW_MSG_SETATTR,	 SW_MSG_MKNOD,	     SW_MSG_MKDIR,
		SW_MSG_CREATE,	 SW_MSG_UNLINK,	     SW_MSG_RMDIR,
		SW_MSG_RENAME,	 SW_MSG_LINK,	     SW_MSG_SYMLINK,
		SW_MSG_SETXATTR, SW_MSG_REMOVEXATTR,
	};
	static const uint16_t never[] = {
		SW_MSG_HELLO,	 SW_MSG_RELEASE, SW_MSG_RMR,
		SW_MSG_SNAPSHOT, SW_MSG_DELEG,	 SW_MSG_GROUP,
	};

	(void)state;
	for (size_t i = 0; i < SW_ARRAY_SIZE(again); i++) {
		assert_true(sw_msg_info(again[i])->resend);
		assert_false(sw_msg_info(again[i])->once);
	}
	for (size_t i = 0; i < SW_ARRAY_SIZE(once); i++) {
		assert_false(sw_msg_info(once[i])->resend);
		assert_true(sw_msg_info(once[i])->once);
		assert_true(sw_msg_info(once[i])->mutating);
	}
	for (size_t i = 0; i < SW_ARRAY_SIZE(never); i++) {
		assert_false(sw_msg_info(never[i])->resend);
		assert_false(sw_msg_info(never[i])->once);
	}
	/* Each type is in one list at most. */
	for (uint16_t t = 0; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *i = sw_msg_info(t);

		if (i)
			assert_false(i->resend && i->once);
	}
}

/*
 * Whether a field's name suggests it names a node: one of its
 * '_'-separated words is one the namespace uses for nodes.
 */
static bool named_like_node(const char *name)
{
	static const char *const words[] = {
		"ino",	  "inode",  "parent", "newparent", "oldparent",
		"dir",	  "src",    "dst",    "node",	   "root",
		"target", "newdir", "olddir",
	};
	char buf[64];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", name);
	for (char *w = strtok_r(buf, "_", &save); w;
	     w = strtok_r(NULL, "_", &save))
		for (size_t i = 0; i < SW_ARRAY_SIZE(words); i++)
			if (strcmp(w, words[i]) == 0)
				return true;
	return false;
}

static bool is_integer(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return true;
	default:
		return false;
	}
}

static bool listed(const uint32_t *specs, uint32_t spec)
{
	for (unsigned i = 0; i < SW_MSG_NODES_MAX && specs[i]; i++)
		if (SW_MSG_SPEC_NODE(specs[i]) == spec)
			return true;
	return false;
}

/*
 * The first integer field of @d named like a node that neither @nodes
 * nor @not_nodes declares, or NULL. @outer: 0 when @d is the request's
 * descriptor, the field number of the request's message field @d
 * describes, or UINT32_MAX deeper down, where nothing is declarable (a
 * node-like field there is reported too).
 */
static const char *undeclared(const ProtobufCMessageDescriptor *d,
			      uint32_t outer, const uint32_t *nodes,
			      const uint32_t *not_nodes)
{
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		uint32_t spec = outer ? SW_MSG_FIELD_IN(outer, f->id) :
					SW_MSG_FIELD(f->id);
		const char *bad;

		if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			bad = undeclared(f->descriptor,
					 outer ? UINT32_MAX : f->id, nodes,
					 not_nodes);
			if (bad)
				return bad;
			continue;
		}
		if (!is_integer(f->type) || !named_like_node(f->name))
			continue;
		if (outer == UINT32_MAX ||
		    (!listed(nodes, spec) && !listed(not_nodes, spec)))
			return f->name;
	}
	return NULL;
}

/*
 * Every request says which of its fields name nodes: an integer field
 * named like a node (a new message's `uint64 dir`) that messages.def
 * neither lists as a node nor as not one fails here, so no message can
 * slip past the delegation recall silently.
 */
static void test_sw_msg_node_fields_declared(void **state)
{
	uint16_t bad_type = 1;

	(void)state;
	for (uint16_t t = 1; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *i = sw_msg_info(t);
		const char *bad = undeclared(i->req, 0, i->nodes, i->not_nodes);

		if (bad)
			fail_msg("%s: field %s is named like a node but "
				 "proto/messages.def does not say whether it "
				 "is one",
				 i->name, bad);
		for (unsigned k = 0; k < SW_MSG_NODES_MAX && i->nodes[k]; k++)
			assert_false(listed(i->not_nodes, i->nodes[k]));
	}
	/* Every declared node field is a single uint64 of its request. */
	assert_int_equal(sw_msg_check(&bad_type), 0);
	assert_int_equal(bad_type, 0);
}

/* The check can fail: a rename that forgot newparent, a batch that
 * forgot its operations' parents, are caught. */
static void test_sw_msg_node_fields_check_fails(void **state)
{
	static const uint32_t rename_half[SW_MSG_NODES_MAX] = {
		SW_MSG_FIELD(2),
	};
	static const uint32_t none[SW_MSG_NODES_MAX] = { 0 };
	const struct sw_msg_info *rn = sw_msg_info(SW_MSG_RENAME);
	const struct sw_msg_info *b = sw_msg_info(SW_MSG_BATCH);
	const char *bad;

	(void)state;
	bad = undeclared(rn->req, 0, rename_half, none);
	assert_non_null(bad);
	assert_string_equal(bad, "newparent");
	bad = undeclared(b->req, 0, none, b->not_nodes);
	assert_non_null(bad);
	assert_string_equal(bad, "parent");
	assert_null(
		undeclared(&sweepfs__cs_done_req__descriptor, 0, none, none));
	assert_true(named_like_node("src_chunk_id"));
	assert_false(named_like_node("session_offset"));
}

/* The walk finds what the fields hold, skips unset optional ones and
 * goes through each element of a batch. */
static void test_sw_msg_nodes_walk(void **state)
{
	Sweepfs__RenameReq rn = SWEEPFS__RENAME_REQ__INIT;
	Sweepfs__TrashReq tr = SWEEPFS__TRASH_REQ__INIT;
	Sweepfs__BatchReq b = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__BatchOp op[3] = { SWEEPFS__BATCH_OP__INIT,
				   SWEEPFS__BATCH_OP__INIT,
				   SWEEPFS__BATCH_OP__INIT };
	Sweepfs__BatchOp *ops[3] = { &op[0], &op[1], &op[2] };
	Sweepfs__InfoReq info = SWEEPFS__INFO_REQ__INIT;
	Sweepfs__NameReq rd = SWEEPFS__NAME_REQ__INIT;
	struct sw_msg_nodes it;
	uint64_t out[4] = { 0 };
	uint64_t ino;

	(void)state;
	rn.parent = 5;
	rn.newparent = 7;
	rn.name.data = (uint8_t *)"a";
	rn.name.len = 1;
	rn.newname.data = (uint8_t *)"bc";
	rn.newname.len = 2;
	/* Each with the entry it changes there. */
	sw_msg_nodes_begin(&it, SW_MSG_RENAME, &rn.base);
	assert_true(sw_msg_nodes_next(&it, &ino));
	assert_int_equal(ino, 5);
	assert_ptr_equal(it.entry, &rn.name);
	assert_true(sw_msg_nodes_next(&it, &ino));
	assert_int_equal(ino, 7);
	assert_ptr_equal(it.entry, &rn.newname);
	assert_false(sw_msg_nodes_next(&it, &ino));
	/* An rmdir's too: the directory removed is recalled; an unlink's
	 * parent alone. */
	rd.parent = 3;
	sw_msg_nodes_begin(&it, SW_MSG_RMDIR, &rd.base);
	assert_true(sw_msg_nodes_next(&it, &ino));
	assert_ptr_equal(it.entry, &rd.name);
	sw_msg_nodes_begin(&it, SW_MSG_UNLINK, &rd.base);
	assert_true(sw_msg_nodes_next(&it, &ino));
	assert_int_equal(ino, 3);
	assert_null(it.entry);
	assert_int_equal(sw_msg_nodes(SW_MSG_RENAME, &rn.base, out, 4), 2);
	assert_int_equal(out[0], 5);
	assert_int_equal(out[1], 7);
	/* Too many for @out: counted, not stored. */
	out[0] = 0;
	assert_int_equal(sw_msg_nodes(SW_MSG_RENAME, &rn.base, out, 0), 2);
	assert_int_equal(out[0], 0);

	tr.parent = 9;
	assert_int_equal(sw_msg_nodes(SW_MSG_TRASH, &tr.base, out, 4), 0);
	tr.has_parent = 1;
	assert_int_equal(sw_msg_nodes(SW_MSG_TRASH, &tr.base, out, 4), 1);
	assert_int_equal(out[0], 9);

	for (int i = 0; i < 3; i++) {
		op[i].parent = 100 + (uint64_t)i;
		op[i].has_ino = 1;
		op[i].ino = 200 + (uint64_t)i; /* not a node field */
	}
	b.n_ops = 3;
	b.ops = ops;
	sw_msg_nodes_begin(&it, SW_MSG_BATCH, &b.base);
	assert_true(sw_msg_nodes_next(&it, &ino));
	assert_null(it.entry); /* parents only (messages.def) */
	assert_int_equal(sw_msg_nodes(SW_MSG_BATCH, &b.base, out, 4), 3);
	assert_int_equal(out[0], 100);
	assert_int_equal(out[1], 101);
	assert_int_equal(out[2], 102);
	b.n_ops = 0;
	assert_int_equal(sw_msg_nodes(SW_MSG_BATCH, &b.base, out, 4), 0);

	assert_int_equal(sw_msg_nodes(SW_MSG_INFO, &info.base, out, 4), 0);
	assert_int_equal(sw_msg_nodes(UINT16_MAX, &info.base, out, 4), 0);
}

/* Every request that names a node can carry its handle (sweepfs.proto,
 * "Node handles"): a new one cannot be added that the master would have
 * to refuse every time. */
static void test_sw_msg_handles_everywhere(void **state)
{
	(void)state;
	for (uint16_t t = 1; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *i = sw_msg_info(t);
		uint64_t h = 1;

		if (!i->nodes[0] || !i->roles)
			continue;
		ProtobufCMessage *m = calloc(1, i->req->sizeof_message);

		assert_non_null(m);
		protobuf_c_message_init(i->req, m);
		if (sw_msg_set_handles(m, &h, 1) < 0)
			fail_msg("%s names nodes and has no field `handles`",
				 i->name);
		free(m);
	}
}

static uint64_t handle_by_table(void *arg, uint64_t ino)
{
	const uint64_t *known = arg; /* ino -> handle, 0: unknown */

	return ino < 8 ? known[ino] : 0;
}

static void seen(void *arg, const Sweepfs__Attr *a)
{
	uint64_t *known = arg;

	if (a->has_handle && a->ino < 8)
		known[a->ino] = a->handle;
}

/* A request carries each known handle once; one it carries already is
 * left alone; a reply's attributes are where handles come from. */
static void test_sw_msg_vouch(void **state)
{
	uint64_t known[8] = { 0, 0, 0, 0x33, 0, 0x55, 0, 0x77 },
		 h[SW_HANDLES_MAX];
	Sweepfs__RenameReq rn = SWEEPFS__RENAME_REQ__INIT;
	Sweepfs__InfoReq info = SWEEPFS__INFO_REQ__INIT;
	Sweepfs__ReaddirReply rr = SWEEPFS__READDIR_REPLY__INIT;
	Sweepfs__EntryReply er = SWEEPFS__ENTRY_REPLY__INIT;
	Sweepfs__Attr a[3] = { SWEEPFS__ATTR__INIT, SWEEPFS__ATTR__INIT,
			       SWEEPFS__ATTR__INIT };
	Sweepfs__Attr *av[2] = { &a[0], &a[1] };
	uint64_t mine = 9;
	size_t n;

	(void)state;
	rn.parent = rn.newparent = 3;
	assert_int_equal(sw_msg_vouch(SW_MSG_RENAME, &rn.base, handle_by_table,
				      known, h),
			 1);
	assert_int_equal(rn.n_handles, 1);
	assert_ptr_equal(rn.handles, h);
	assert_int_equal(h[0], 0x33);
	sw_msg_set_handles(&rn.base, NULL, 0);
	rn.newparent = 4; /* unknown: left out */
	assert_int_equal(sw_msg_vouch(SW_MSG_RENAME, &rn.base, handle_by_table,
				      known, h),
			 1);
	rn.newparent = 5;
	sw_msg_set_handles(&rn.base, NULL, 0);
	assert_int_equal(sw_msg_vouch(SW_MSG_RENAME, &rn.base, handle_by_table,
				      known, h),
			 2);
	assert_int_equal(h[1], 0x55);
	sw_msg_set_handles(&rn.base, &mine, 1);
	assert_int_equal(sw_msg_vouch(SW_MSG_RENAME, &rn.base, handle_by_table,
				      known, h),
			 0);
	assert_ptr_equal(sw_msg_handles(&rn.base, &n), &mine);
	assert_int_equal(n, 1);
	assert_int_equal(sw_msg_vouch(SW_MSG_INFO, &info.base, handle_by_table,
				      known, h),
			 0);
	assert_int_equal(sw_msg_set_handles(&info.base, h, 1), -ENOENT);
	assert_null(sw_msg_handles(&info.base, &n));
	assert_int_equal(n, 0);

	/* Learning: a single Attr and repeated ones. */
	memset(known, 0, sizeof(known));
	for (int i = 0; i < 3; i++) {
		a[i].ino = 1 + (uint64_t)i;
		a[i].has_handle = i != 1;
		a[i].handle = 0x100 + (uint64_t)i;
	}
	rr.n_attrs = 2;
	rr.attrs = av;
	sw_msg_attrs(&rr.base, seen, known);
	er.attr = &a[2];
	sw_msg_attrs(&er.base, seen, known);
	assert_int_equal(known[1], 0x100);
	assert_int_equal(known[2], 0); /* it carried none */
	assert_int_equal(known[3], 0x102);
	er.attr = NULL;
	sw_msg_attrs(&er.base, seen, known);
}

/* The properties the master and the mount used to keep in their own
 * switches, now in the table. */
static void test_sw_msg_info_flags(void **state)
{
	static const uint16_t tree[] = { SW_MSG_RENAME, SW_MSG_SNAPSHOT,
					 SW_MSG_TRASH };
	static const uint16_t goes[] = { SW_MSG_RMR, SW_MSG_RMSNAPSHOT };
	static const uint16_t pass[] = { SW_MSG_BATCH, SW_MSG_DELEG_RETURN,
					 SW_MSG_PING, SW_MSG_INVAL_ACK };
	static const uint16_t no_flush[] = { SW_MSG_BATCH, SW_MSG_DELEG,
					     SW_MSG_DELEG_RETURN,
					     SW_MSG_INVAL_ACK };
	unsigned n_tree = 0, n_pass = 0, n_flush = 0, n_all = 0, n_goes = 0;

	(void)state;
	for (size_t i = 0; i < SW_ARRAY_SIZE(goes); i++) {
		const struct sw_msg_info *info = sw_msg_info(goes[i]);

		assert_true(info->removes);
		assert_false(info->subtree);
		/* One node, an entry. */
		assert_int_equal(SW_MSG_SPEC_NAME(info->nodes[0]), 3);
		assert_int_equal(info->nodes[1], 0);
	}
	for (size_t i = 0; i < SW_ARRAY_SIZE(tree); i++)
		assert_true(sw_msg_info(tree[i])->subtree);
	for (size_t i = 0; i < SW_ARRAY_SIZE(pass); i++)
		assert_true(sw_msg_info(pass[i])->overtakes);
	for (size_t i = 0; i < SW_ARRAY_SIZE(no_flush); i++)
		assert_true(sw_msg_info(no_flush[i])->no_flush);
	for (uint16_t t = 1; t < SW_MSG__COUNT; t++) {
		n_tree += sw_msg_info(t)->subtree;
		n_pass += sw_msg_info(t)->overtakes;
		n_flush += sw_msg_info(t)->no_flush;
		n_all += sw_msg_info(t)->recall_all;
		n_goes += sw_msg_info(t)->removes;
	}
	assert_int_equal(n_goes, SW_ARRAY_SIZE(goes));
	assert_int_equal(n_tree, SW_ARRAY_SIZE(tree));
	assert_int_equal(n_pass, SW_ARRAY_SIZE(pass));
	assert_int_equal(n_flush, SW_ARRAY_SIZE(no_flush));
	assert_int_equal(n_all, 1);
	assert_true(sw_msg_info(SW_MSG_TRASH)->recall_all);
	assert_true(sw_msg_info(SW_MSG_FSCK)->admin);
	assert_true(sw_msg_info(SW_MSG_GROUP)->admin);
	assert_int_equal(sw_msg_info(SW_MSG_BATCH)->roles,
			 SW_ROLE_BIT(SWEEPFS__ROLE__ROLE_MOUNT));
	assert_int_equal(sw_msg_info(SW_MSG_HELLO)->roles, 0);
}

/* ---- directory entries ---------------------------------------------- */

static void test_sw_dirent_get_round_trip(void **state)
{
	struct fixture *f = *state;
	static const uint64_t nums[] = {
		0,	    1,
		127,	    128,
		16383,	    16384,
		UINT32_MAX, (uint64_t)1 << 56,
		INT64_MAX,  UINT64_MAX - 1,
		UINT64_MAX,
	};
	char name[256];
	uint8_t b[4 * SW_DIRENT_MAX];

	for (size_t i = 0; i < sizeof(name); i++)
		name[i] = (char)('a' + i % 26);
	for (size_t c = 0; c < SW_ARRAY_SIZE(nums); c++) {
		for (size_t k = 0; k < SW_ARRAY_SIZE(nums); k++) {
			struct sw_dirent in = {
				.cookie = nums[c],
				.ino = nums[k],
				.type = (uint8_t)rng_next(&f->rng),
				.namelen =
					(uint8_t)(1 + rng_below(&f->rng, 255)),
				.name = name,
			};
			struct sw_dirent out;
			size_t n;

			if (c == 0)
				in.namelen = 255;
			n = sw_dirent_put(b, &in);
			assert_true(n <= SW_DIRENT_MAX);
			assert_int_equal(sw_dirent_get(b, n, &out), (int)n);
			assert_int_equal(out.cookie, in.cookie);
			assert_int_equal(out.ino, in.ino);
			assert_int_equal(out.type, in.type);
			assert_int_equal(out.namelen, in.namelen);
			assert_ptr_equal(out.name,
					 (const char *)b + n - in.namelen);
			assert_memory_equal(out.name, name, in.namelen);
			/* Trailing bytes are the next entry's business. */
			assert_int_equal(sw_dirent_get(b, sizeof(b), &out),
					 (int)n);
		}
	}
}

/* Every truncation of an encoded entry is -EPROTO, never a partial read. */
static void test_sw_dirent_get_truncated(void **state)
{
	struct fixture *f = *state;

	for (int round = 0; round < 200; round++) {
		char name[255];
		uint8_t b[SW_DIRENT_MAX];
		struct sw_dirent in = {
			.cookie = rng_next(&f->rng) >> rng_below(&f->rng, 64),
			.ino = rng_next(&f->rng) >> rng_below(&f->rng, 64),
			.type = 4,
			.namelen = (uint8_t)(1 + rng_below(&f->rng, 255)),
			.name = name,
		};
		struct sw_dirent out;
		size_t n;

		rng_fill(&f->rng, name, sizeof(name));
		n = sw_dirent_put(b, &in);
		for (size_t len = 0; len < n; len++) {
			/* Copy so that ASan sees a read past the end. */
			uint8_t *p = malloc(len ? len : 1);

			assert_non_null(p);
			memcpy(p, b, len);
			assert_int_equal(sw_dirent_get(p, len, &out), -EPROTO);
			free(p);
		}
		assert_int_equal(sw_dirent_get(b, n, &out), (int)n);
	}
}

static void test_sw_dirent_get_malformed(void **state)
{
	struct sw_dirent out;
	uint8_t b[32];

	(void)state;
	/* An empty name. */
	memcpy(b, "\x05\x07\x04\x00", 4);
	assert_int_equal(sw_dirent_get(b, 4, &out), -EPROTO);
	memcpy(b, "\x05\x07\x04\x01x", 5);
	assert_int_equal(sw_dirent_get(b, 5, &out), 5);
	/* A varint longer than ten bytes. */
	memset(b, 0x80, sizeof(b));
	assert_int_equal(sw_dirent_get(b, sizeof(b), &out), -EPROTO);
	b[10] = 0x01;
	assert_int_equal(sw_dirent_get(b, sizeof(b), &out), -EPROTO);
}

/* ---- sw_buf --------------------------------------------------------- */

static void test_sw_buf_add_consume(void **state)
{
	struct fixture *f = *state;
	struct sw_buf *b = &f->buf;
	uint8_t data[5000], out[5000];
	size_t written = 0, read = 0;

	rng_fill(&f->rng, data, sizeof(data));
	assert_int_equal(sw_buf_used(b), 0);
	/* A stream through the buffer in random pieces. */
	for (int i = 0; i < 20000 && read < sizeof(data); i++) {
		/* SW_MIN evaluates its arguments twice: draw first. */
		size_t r = (size_t)rng_below(&f->rng, 300);

		if (written < sizeof(data) && rng_below(&f->rng, 2)) {
			size_t n = SW_MIN(sizeof(data) - written, r);

			assert_int_equal(sw_buf_add(b, data + written, n), 0);
			written += n;
		} else {
			size_t n = SW_MIN(sw_buf_used(b), r);

			memcpy(out + read, sw_buf_head(b), n);
			sw_buf_consume(b, n);
			read += n;
		}
		assert_int_equal(sw_buf_used(b), written - read);
		assert_true(b->off <= b->len && b->len <= b->cap);
	}
	assert_int_equal(read, sizeof(data));
	assert_memory_equal(out, data, sizeof(data));
	/* Drained: compacted. */
	assert_int_equal(b->off, 0);
	assert_int_equal(b->len, 0);
	sw_buf_reset(b);
	assert_int_equal(sw_buf_used(b), 0);
	sw_buf_release(b);
	assert_null(b->data);
	assert_int_equal(b->cap, 0);
	/* Usable again after release. */
	assert_int_equal(sw_buf_add(b, "xy", 2), 0);
	assert_memory_equal(sw_buf_head(b), "xy", 2);
}

static void test_sw_buf_reserve_keeps_bytes(void **state)
{
	struct fixture *f = *state;
	struct sw_buf *b = &f->buf;

	assert_int_equal(sw_buf_add(b, "0123456789", 10), 0);
	sw_buf_consume(b, 6);
	for (size_t extra = 1; extra < 100000; extra = extra * 3 + 1) {
		assert_int_equal(sw_buf_reserve(b, extra), 0);
		assert_true(b->cap - b->len >= extra);
		assert_int_equal(sw_buf_used(b), 4);
		assert_memory_equal(sw_buf_head(b), "6789", 4);
	}
	assert_int_equal(sw_buf_add(b, NULL, 0), 0);
	assert_int_equal(sw_buf_used(b), 4);
}

static int reserve_huge(void *arg)
{
	struct sw_buf b = SW_BUF_INIT;
	int rc = 0;

	if (sw_buf_add(&b, "abc", 3) < 0)
		return 10;
	if (sw_buf_reserve(&b, *(const size_t *)arg) != -ENOMEM)
		rc = 1;
	else if (sw_buf_used(&b) != 3 || memcmp(sw_buf_head(&b), "abc", 3))
		rc = 2;
	sw_buf_release(&b);
	return rc;
}

/*
 * An impossible size fails with -ENOMEM and leaves the buffer as it was.
 * Each size runs in a child: a bug here can mean an endless loop.
 */
static void test_sw_buf_reserve_huge(void **state)
{
	static const size_t sizes[] = {
		(size_t)1 << 62,
		SIZE_MAX / 2 + 2,
		SIZE_MAX - 100,
		SIZE_MAX,
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < SW_ARRAY_SIZE(sizes); i++) {
		size_t size = sizes[i];
		int rc = unit_run_child(reserve_huge, &size, 1000);

		if (rc == 0)
			continue;
		print_error("sw_buf_reserve(%zu): %s\n", size,
			    rc == -ETIMEDOUT ? "does not return" :
			    rc == 1	     ? "does not fail with -ENOMEM" :
					       "changed the buffer");
		bad++;
	}
	assert_int_equal(bad, 0);
}

static void test_sw_buf_add_frame(void **state)
{
	struct fixture *f = *state;
	struct sw_buf *b = &f->buf;
	Sweepfs__PingReq req = SWEEPFS__PING_REQ__INIT;
	struct sw_frame_hdr hdr;

	assert_int_equal(sw_buf_add(b, "junk", 4), 0);
	sw_buf_consume(b, 4);
	for (uint64_t id = 1; id <= 100; id++) {
		req.has_token = 1;
		req.token = id * 1000;
		assert_int_equal(sw_buf_add_frame(b, SW_MSG_PING, 0, id,
						  id % 2 ? &req.base : NULL),
				 0);
	}
	for (uint64_t id = 1; id <= 100; id++) {
		assert_int_equal(sw_frame_get_hdr(sw_buf_head(b),
						  sw_buf_used(b),
						  SW_FRAME_MAX_META, &hdr),
				 1);
		assert_int_equal(hdr.id, id);
		assert_int_equal(hdr.type, SW_MSG_PING);
		if (id % 2) {
			Sweepfs__PingReq *m = sweepfs__ping_req__unpack(
				NULL, hdr.len, sw_buf_head(b) + SW_FRAME_HDR);

			assert_non_null(m);
			assert_int_equal(m->token, id * 1000);
			sweepfs__ping_req__free_unpacked(m, NULL);
		} else {
			assert_int_equal(hdr.len, 0);
		}
		sw_buf_consume(b, SW_FRAME_HDR + hdr.len);
	}
	assert_int_equal(sw_buf_used(b), 0);
}

/* ---- cfg ------------------------------------------------------------ */

static const char *const colours[] = { "red", "green", "blue", NULL };

struct cfg_vals {
	char name[8];
	uint64_t port;
	uint64_t size;
	uint64_t timeout;
	bool flag;
	int colour;
};

#define NOPTS 7

static void make_opts(struct sw_opt *o, struct cfg_vals *v)
{
	o[0] = (struct sw_opt){ .name = "name",
				.type = SW_OPT_STRING,
				.value = v->name,
				.max = sizeof(v->name),
				.help = "a name" };
	o[1] = (struct sw_opt){ .name = "port",
				.type = SW_OPT_UINT,
				.value = &v->port,
				.min = 1,
				.max = 65535,
				.help = "a port" };
	o[2] = (struct sw_opt){ .name = "size",
				.type = SW_OPT_SIZE,
				.value = &v->size,
				.min = 4096,
				.max = (uint64_t)1 << 40 };
	o[3] = (struct sw_opt){ .name = "timeout",
				.type = SW_OPT_DURATION,
				.value = &v->timeout,
				.min = 10,
				.max = 86400000 };
	o[4] = (struct sw_opt){ .name = "flag",
				.type = SW_OPT_BOOL,
				.value = &v->flag };
	o[5] = (struct sw_opt){ .name = "colour",
				.type = SW_OPT_ENUM,
				.value = &v->colour,
				.choices = colours };
	o[6] = (struct sw_opt){ .name = NULL };
}

/* sw_opt_explain(): the key, the value, and what is valid. */
static void test_sw_opt_explain_says_what_is_valid(void **state)
{
	struct cfg_vals v = { .name = "x", .port = 7 };
	struct sw_opt opts[NOPTS];
	char why[256];

	(void)state;
	make_opts(opts, &v);
	sw_opt_explain(opts, "port", "70000", sw_opt_set(opts, "port", "70000"),
		       why, sizeof(why));
	assert_string_equal(why, "port = 70000: must be 1 to 65535");
	sw_opt_explain(opts, "port", "x", sw_opt_set(opts, "port", "x"), why,
		       sizeof(why));
	assert_string_equal(why,
			    "port = x: must be a whole number, 1 to 65535");
	sw_opt_explain(opts, "flag", "maybe", sw_opt_set(opts, "flag", "maybe"),
		       why, sizeof(why));
	assert_string_equal(why, "flag = maybe: must be yes or no");
	sw_opt_explain(opts, "colour", "mauve",
		       sw_opt_set(opts, "colour", "mauve"), why, sizeof(why));
	assert_non_null(strstr(why, "colour = mauve: must be one of "));
	sw_opt_explain(opts, "nope", "1", sw_opt_set(opts, "nope", "1"), why,
		       sizeof(why));
	assert_non_null(strstr(why, "nope: unknown key"));
	sw_opt_explain(opts, "timeout", "1ms",
		       sw_opt_set(opts, "timeout", "1ms"), why, sizeof(why));
	assert_string_equal(why, "timeout = 1ms: must be 10 to 86400000 ms");
	assert_int_equal(v.port, 7); /* nothing was set */
}

static void test_sw_opt_set_types(void **state)
{
	struct cfg_vals v = { .name = "x", .port = 7 };
	struct sw_opt opts[NOPTS];

	(void)state;
	make_opts(opts, &v);
	assert_int_equal(sw_opt_set(opts, "name", "abcdefg"), 0);
	assert_string_equal(v.name, "abcdefg");
	assert_int_equal(sw_opt_set(opts, "name", ""), 0);
	assert_string_equal(v.name, "");
	assert_int_equal(sw_opt_set(opts, "port", "9521"), 0);
	assert_int_equal(v.port, 9521);
	assert_int_equal(sw_opt_set(opts, "size", "64M"), 0);
	assert_int_equal(v.size, 64u << 20);
	assert_int_equal(sw_opt_set(opts, "size", "1GiB"), 0);
	assert_int_equal(v.size, 1u << 30);
	assert_int_equal(sw_opt_set(opts, "size", "8192"), 0);
	assert_int_equal(v.size, 8192);
	assert_int_equal(sw_opt_set(opts, "timeout", "30s"), 0);
	assert_int_equal(v.timeout, 30000);
	assert_int_equal(sw_opt_set(opts, "timeout", "250ms"), 0);
	assert_int_equal(v.timeout, 250);
	assert_int_equal(sw_opt_set(opts, "timeout", "2"), 0);
	assert_int_equal(v.timeout, 2000);
	assert_int_equal(sw_opt_set(opts, "flag", "yes"), 0);
	assert_true(v.flag);
	assert_int_equal(sw_opt_set(opts, "flag", "off"), 0);
	assert_false(v.flag);
	assert_int_equal(sw_opt_set(opts, "colour", "blue"), 0);
	assert_int_equal(v.colour, 2);
	assert_int_equal(sw_opt_set(opts, "colour", "red"), 0);
	assert_int_equal(v.colour, 0);
}

/* Bad values fail and leave the old value alone. */
static void test_sw_opt_set_bad_values(void **state)
{
	struct cfg_vals v = { .name = "keep",
			      .port = 7,
			      .size = 8192,
			      .timeout = 100,
			      .flag = true,
			      .colour = 1 };
	struct sw_opt opts[NOPTS];

	(void)state;
	make_opts(opts, &v);
	assert_int_equal(sw_opt_set(opts, "nosuch", "1"), -ENOENT);
	assert_int_equal(sw_opt_set(opts, "", "1"), -ENOENT);
	/* A string needs room for its NUL. */
	assert_int_equal(sw_opt_set(opts, "name", "abcdefgh"), -ERANGE);
	assert_int_equal(sw_opt_set(opts, "port", "0"), -ERANGE);
	assert_int_equal(sw_opt_set(opts, "port", "65536"), -ERANGE);
	assert_int_equal(sw_opt_set(opts, "port", "1k"), -EINVAL);
	assert_int_equal(sw_opt_set(opts, "port", ""), -EINVAL);
	assert_int_equal(sw_opt_set(opts, "port", "-1"), -EINVAL);
	assert_int_equal(sw_opt_set(opts, "port", "12x"), -EINVAL);
	assert_int_equal(sw_opt_set(opts, "port", "99999999999999999999"),
			 -EINVAL);
	assert_int_equal(sw_opt_set(opts, "size", "4095"), -ERANGE);
	assert_int_equal(sw_opt_set(opts, "size", "2T"), -ERANGE);
	assert_int_equal(sw_opt_set(opts, "size", "5Q"), -EINVAL);
	assert_int_equal(sw_opt_set(opts, "timeout", "9ms"), -ERANGE);
	assert_int_equal(sw_opt_set(opts, "timeout", "2d"), -ERANGE);
	assert_int_equal(sw_opt_set(opts, "timeout", "5 s"), -EINVAL);
	assert_int_equal(sw_opt_set(opts, "flag", "maybe"), -EINVAL);
	assert_int_equal(sw_opt_set(opts, "colour", "purple"), -EINVAL);
	assert_int_equal(sw_opt_set(opts, "colour", "RED"), -EINVAL);
	assert_string_equal(v.name, "keep");
	assert_int_equal(v.port, 7);
	assert_int_equal(v.size, 8192);
	assert_int_equal(v.timeout, 100);
	assert_true(v.flag);
	assert_int_equal(v.colour, 1);
	/* The bounds themselves are inside. */
	assert_int_equal(sw_opt_set(opts, "port", "1"), 0);
	assert_int_equal(sw_opt_set(opts, "port", "65535"), 0);
	assert_int_equal(sw_opt_set(opts, "size", "1T"), 0);
	assert_int_equal(sw_opt_set(opts, "timeout", "1d"), 0);
}

static void test_sw_opt_set_kv_split(void **state)
{
	struct cfg_vals v = { .port = 7 };
	struct sw_opt opts[NOPTS];
	char longname[100];

	(void)state;
	make_opts(opts, &v);
	assert_int_equal(sw_opt_set_kv(opts, "port=80"), 0);
	assert_int_equal(v.port, 80);
	assert_int_equal(sw_opt_set_kv(opts, "name=a=b"), 0);
	assert_string_equal(v.name, "a=b");
	assert_int_equal(sw_opt_set_kv(opts, "port"), -EINVAL);
	assert_int_equal(sw_opt_set_kv(opts, "nosuch=1"), -ENOENT);
	memset(longname, 'p', sizeof(longname));
	memcpy(longname + sizeof(longname) - 3, "=1", 3);
	assert_int_equal(sw_opt_set_kv(opts, longname), -ENOENT);
}

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static void test_sw_cfg_load_lines(void **state)
{
	struct fixture *f = *state;
	struct cfg_vals v = { .port = 7 };
	struct sw_opt opts[NOPTS];
	struct sw_cfg_error where;
	char path[300];

	make_opts(opts, &v);
	assert_int_equal(unit_mkdtemp(f->dir, sizeof(f->dir), "cfg"), 0);
	snprintf(path, sizeof(path), "%s/a.cfg", f->dir);
	write_file(path, "# comment\n"
			 "\n"
			 "   port = 9000   # trailing comment\n"
			 "size=1M\n"
			 "\tflag =yes\n"
			 "colour= green\n"
			 "timeout = 5m\n"
			 "name = n1\n");
	assert_int_equal(sw_cfg_load(path, opts, &where), 0);
	assert_int_equal(where.line, 0);
	assert_int_equal(v.port, 9000);
	assert_int_equal(v.size, 1u << 20);
	assert_true(v.flag);
	assert_int_equal(v.colour, 1);
	assert_int_equal(v.timeout, 300000);
	assert_string_equal(v.name, "n1");

	/* The first bad line is named, with its key. */
	write_file(path, "port = 1\n# x\n\nsize = 8K\ncolour = mauve\n"
			 "port = 2\n");
	assert_int_equal(sw_cfg_load(path, opts, &where), -EINVAL);
	assert_int_equal(where.line, 5);
	assert_string_equal(where.key, "colour");
	assert_int_equal(v.port, 1);

	write_file(path, "port = 3\n\n\nbogus = 1\n");
	assert_int_equal(sw_cfg_load(path, opts, &where), -ENOENT);
	assert_int_equal(where.line, 4);
	assert_string_equal(where.key, "bogus");

	write_file(path, "port = 4\njust words\n");
	assert_int_equal(sw_cfg_load(path, opts, &where), -EINVAL);
	assert_int_equal(where.line, 2);

	write_file(path, "port = 70000\n");
	assert_int_equal(sw_cfg_load(path, opts, &where), -ERANGE);
	assert_int_equal(where.line, 1);
	assert_string_equal(where.key, "port");

	snprintf(path, sizeof(path), "%s/missing.cfg", f->dir);
	assert_int_equal(sw_cfg_load(path, opts, &where), -ENOENT);
	assert_int_equal(where.line, 0);
}

static void test_sw_opt_dump_values(void **state)
{
	struct cfg_vals v = { .name = "nm",
			      .port = 80,
			      .size = 4096,
			      .timeout = 1500,
			      .flag = true,
			      .colour = 2 };
	struct sw_opt opts[NOPTS];
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);

	(void)state;
	make_opts(opts, &v);
	assert_non_null(fp);
	sw_opt_dump(fp, opts);
	assert_int_equal(fclose(fp), 0);
	assert_non_null(strstr(text, "name = nm\t# a name\n"));
	assert_non_null(strstr(text, "port = 80\t# a port\n"));
	assert_non_null(strstr(text, "size = 4096\n"));
	assert_non_null(strstr(text, "timeout = 1500ms\n"));
	assert_non_null(strstr(text, "flag = yes\n"));
	assert_non_null(strstr(text, "colour = blue\n"));
	free(text);
}

/* ---- sw_target_parse ------------------------------------------------ */

static void expect_target(const char *s, const char *host, uint16_t port,
			  const char *subdir)
{
	struct sw_target t;

	memset(&t, 0x55, sizeof(t));
	if (sw_target_parse(s, SW_MASTER_PORT, &t) != 0)
		fail_msg("\"%s\" did not parse", s);
	assert_string_equal(t.host, host);
	assert_int_equal(t.port, port);
	assert_string_equal(t.subdir, subdir);
}

static void test_sw_target_parse_forms(void **state)
{
	char big[300];

	(void)state;
	expect_target("m1", "m1", SW_MASTER_PORT, "/");
	expect_target("m1:9600", "m1", 9600, "/");
	expect_target("m1:/sub/dir", "m1", SW_MASTER_PORT, "/sub/dir");
	expect_target("m1:9600:/x", "m1", 9600, "/x");
	expect_target("m1:/", "m1", SW_MASTER_PORT, "/");
	expect_target("10.0.0.1:1", "10.0.0.1", 1, "/");
	expect_target("m1:65535", "m1", 65535, "/");
	expect_target("[::1]", "::1", SW_MASTER_PORT, "/");
	expect_target("[::1]:9521:/x", "::1", 9521, "/x");
	expect_target("[fe80::1%eth0]:7", "fe80::1%eth0", 7, "/");
	expect_target("[::1]:/a:b", "::1", SW_MASTER_PORT, "/a:b");
	/* 255 bytes of host fit. */
	memset(big, 'h', 255);
	big[255] = '\0';
	expect_target(big, big, SW_MASTER_PORT, "/");
}

static void test_sw_target_parse_bad(void **state)
{
	static const char *const bad[] = {
		"",	    ":9521",	 ":/x",	    "m1:",     "m1:0",
		"m1:65536", "m1:123456", "m1:9x",   "m1:-1",   "m1::/x",
		"m1:12:",   "m1:12:x",	 "m1:x:/y", "[::1",    "[]",
		"[]:1",	    "[::1]x",	 "[::1]:",  "[::1]:0", "::1",
	};
	struct sw_target t;
	char big[300];

	(void)state;
	for (size_t i = 0; i < SW_ARRAY_SIZE(bad); i++) {
		int rc = sw_target_parse(bad[i], SW_MASTER_PORT, &t);

		if (rc != -EINVAL)
			fail_msg("\"%s\" parsed (%d)", bad[i], rc);
	}
	memset(big, 'h', 256);
	big[256] = '\0';
	assert_int_equal(sw_target_parse(big, SW_MASTER_PORT, &t), -EINVAL);
}

/* The subdirectory fills the 4096-byte field at most with its NUL. */
static void test_sw_target_parse_long_subdir(void **state)
{
	char *s = malloc(8200);
	struct sw_target t;

	(void)state;
	assert_non_null(s);
	memcpy(s, "m1:9:/", 6);
	memset(s + 6, 'd', 8000);
	s[5 + 4095] = '\0'; /* the subdir starts at s[5] */
	assert_int_equal(sw_target_parse(s, 1, &t), 0);
	assert_int_equal(strlen(t.subdir), 4095);
	s[5 + 4095] = 'd';
	s[5 + 4096] = '\0';
	assert_int_equal(sw_target_parse(s, 1, &t), -EINVAL);
	s[5 + 4096] = 'd';
	s[8000] = '\0';
	assert_int_equal(sw_target_parse(s, 1, &t), -EINVAL);
	free(s);
}

/* @s parses as a list of @n addresses "host:port" in @want (with
 * brackets for IPv6 as sw_addr_str() puts them), then @subdir. */
static void expect_list(const char *s, unsigned n, const char *const *want,
			const char *subdir)
{
	struct sw_target t;
	char a[SW_ADDR_STRLEN];

	memset(&t, 0x55, sizeof(t));
	if (sw_target_parse(s, SW_MASTER_PORT, &t) != 0)
		fail_msg("\"%s\" did not parse", s);
	assert_int_equal(t.naddrs, n);
	for (unsigned i = 0; i < n; i++)
		assert_string_equal(sw_addr_str(t.addrs[i].host,
						t.addrs[i].port, a, sizeof(a)),
				    want[i]);
	/* The first is the current address. */
	assert_string_equal(t.host, t.addrs[0].host);
	assert_int_equal(t.port, t.addrs[0].port);
	assert_string_equal(t.subdir, subdir);
}

static void test_sw_target_parse_lists(void **state)
{
	static const char *const three[] = { "10.0.0.1:9420", "10.0.0.2:9420",
					     "[::1]:9421" };
	static const char *const dflt[] = { "m1:9521", "m2:7", "m3:9521" };
	static const char *const seven[] = { "a:1", "b:2", "c:3", "d:4",
					     "e:5", "f:6", "g:7" };
	struct sw_target t;

	(void)state;
	expect_list("10.0.0.1:9420,10.0.0.2:9420,[::1]:9421:/sub", 3, three,
		    "/sub");
	expect_list("10.0.0.1:9420,10.0.0.2:9420,[::1]:9421", 3, three, "/");
	expect_list("m1,m2:7,m3", 3, dflt, "/");
	expect_list("m1,m2:7,m3:/", 3, dflt, "/");
	expect_list("a:1,b:2,c:3,d:4,e:5,f:6,g:7:/x", 7, seven, "/x");
	/* A subdir after the last address may hold commas and colons. */
	expect_list("m1,m2:7,m3:/a,b:c", 3, dflt, "/a,b:c");
	expect_list("m1:/a,m2", 1, dflt, "/a,m2");
	expect_list("m1,m2:7,m3:/x,", 3, dflt, "/x,");
	/* A single address is a list of one. */
	assert_int_equal(sw_target_parse("m1:9600:/x", 1, &t), 0);
	assert_int_equal(t.naddrs, 1);
	assert_int_equal(t.addrs[0].port, 9600);
}

static void test_sw_target_parse_bad_lists(void **state)
{
	static const char *const bad[] = {
		",",
		"m1,",
		",m1",
		"m1,,m2",
		"m1,m2,",
		"m1:9521,",
		"m1:9521,:9521",
		"m1,m2:0",
		"m1,m2:65536",
		"m1,m2:x,m3",
		"m1:x,m2",
		"m1,m2:,m3",
		"m1,m2:9:,m3",
		"m1,[::1,m3",
		"m1,[::1]x",
		"m1,[]:1",
		"m1,m2:9:x",
		"a,b,c,d,e,f,g,h",
		"a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8:/x",
	};
	struct sw_target t;

	(void)state;
	for (size_t i = 0; i < SW_ARRAY_SIZE(bad); i++) {
		int rc = sw_target_parse(bad[i], SW_MASTER_PORT, &t);

		if (rc != -EINVAL)
			fail_msg("\"%s\" parsed (%d)", bad[i], rc);
	}
}

static void test_sw_target_next_wraps(void **state)
{
	struct sw_target t;

	(void)state;
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	sw_target_next(&t);
	assert_string_equal(t.host, "m2");
	assert_int_equal(t.port, 2);
	sw_target_next(&t);
	assert_string_equal(t.host, "m3");
	sw_target_next(&t);
	assert_string_equal(t.host, "m1");
	assert_int_equal(t.port, 1);
	/* A list of one stays put. */
	assert_int_equal(sw_target_parse("solo:5", 9, &t), 0);
	sw_target_next(&t);
	assert_string_equal(t.host, "solo");
	assert_int_equal(t.port, 5);
	/* Filled by hand (no list): host and port are all there is. */
	memset(&t, 0, sizeof(t));
	strcpy(t.host, "hand");
	t.port = 4;
	sw_target_next(&t);
	assert_string_equal(t.host, "hand");
	assert_int_equal(t.port, 4);
}

static void test_sw_target_leader_adopt(void **state)
{
	struct sw_target t;

	(void)state;
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	/* In the list: current, and the list goes on after it. */
	assert_int_equal(sw_target_leader(&t, "m3:3"), 0);
	assert_string_equal(t.host, "m3");
	assert_int_equal(t.port, 3);
	sw_target_next(&t);
	assert_string_equal(t.host, "m1");
	/* Not in the list: used anyway; the next is after the last tried. */
	assert_int_equal(sw_target_leader(&t, "[fd00::4]:4"), 0);
	assert_string_equal(t.host, "fd00::4");
	assert_int_equal(t.port, 4);
	sw_target_next(&t);
	assert_string_equal(t.host, "m2");
	/* Without a port: the current one. */
	assert_int_equal(sw_target_leader(&t, "other"), 0);
	assert_string_equal(t.host, "other");
	assert_int_equal(t.port, 2);
	/* Nonsense leaves the target as it was. */
	assert_int_equal(sw_target_leader(&t, ""), -EINVAL);
	assert_int_equal(sw_target_leader(&t, NULL), -EINVAL);
	assert_int_equal(sw_target_leader(&t, "a:1,b:2"), -EINVAL);
	assert_int_equal(sw_target_leader(&t, "a:1:/x"), -EINVAL);
	assert_int_equal(sw_target_leader(&t, "a:0"), -EINVAL);
	assert_int_equal(sw_target_leader(&t, "[::1"), -EINVAL);
	assert_string_equal(t.host, "other");
	assert_int_equal(t.port, 2);
}

static void test_sw_target_failed_rounds(void **state)
{
	char why[SW_TARGET_WHYLEN];
	struct sw_target t;

	(void)state;
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	/* A connection error: the next address, not yet a round. */
	assert_false(
		sw_target_failed(&t, -ECONNREFUSED, NULL, why, sizeof(why)));
	assert_string_equal(t.host, "m2");
	assert_non_null(strstr(why, "master m1:1: "));
	assert_non_null(strstr(why, "; trying m2:2"));
	/* A follower naming the leader: there, and no count. */
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(why, "master m2:2 is a follower; leader is m1:1");
	assert_string_equal(t.host, "m1");
	/* The leader named is dead (an election under way): the list goes
	 * on after the follower that named it, m3 may lead by now. */
	assert_false(
		sw_target_failed(&t, -ECONNREFUSED, NULL, why, sizeof(why)));
	assert_string_equal(t.host, "m3");
	assert_non_null(strstr(why, "master m1:1: "));
	assert_non_null(strstr(why, "; trying m3:3"));
	/* A follower naming no one: the next; the third failure that was
	 * no redirect ends the round. */
	assert_true(sw_target_failed(&t, -EREMOTE, "", why, sizeof(why)));
	assert_string_equal(t.host, "m1");
	assert_non_null(strstr(why, "names no one as leader; trying m1:1"));
	assert_false(sw_target_failed(&t, 0, NULL, why, sizeof(why)));
	assert_string_equal(why, "leaving master m1:1; trying m2:2");
	/* Success starts the count again. */
	sw_target_ok(&t);
	assert_false(sw_target_failed(&t, -EIO, NULL, why, sizeof(why)));
	assert_false(sw_target_failed(&t, -EIO, NULL, why, sizeof(why)));
	assert_true(sw_target_failed(&t, -EIO, NULL, why, sizeof(why)));
}

static void test_sw_target_failed_redirect_cap(void **state)
{
	char why[SW_TARGET_WHYLEN];
	struct sw_target t;
	unsigned follows = 0;

	(void)state;
	/* Two followers that name each other: followed a few times, then
	 * the list goes on. */
	assert_int_equal(sw_target_parse("a:1,b:2,c:3", 9, &t), 0);
	for (int i = 0; i < 20 && strcmp(t.host, "c"); i++) {
		const char *other = !strcmp(t.host, "a") ? "b:2" : "a:1";

		assert_false(sw_target_failed(&t, -EREMOTE, other, why,
					      sizeof(why)));
		if (strstr(why, "; leader is "))
			follows++;
	}
	assert_string_equal(t.host, "c");
	assert_int_equal(follows, SW_TARGET_REDIRECTS);
	/* A follower naming itself is no redirect. */
	assert_int_equal(sw_target_parse("a:1,b:2", 9, &t), 0);
	assert_false(sw_target_failed(&t, -EREMOTE, "a:1", why, sizeof(why)));
	assert_string_equal(t.host, "b");
	/* A single address: every failure is a round, and says nothing... */
	assert_int_equal(sw_target_parse("solo:5", 9, &t), 0);
	assert_true(
		sw_target_failed(&t, -ECONNREFUSED, NULL, why, sizeof(why)));
	assert_string_equal(why, "");
	assert_string_equal(t.host, "solo");
	/* ...but the leader a follower names is followed, then back. */
	assert_false(
		sw_target_failed(&t, -EREMOTE, "boss:6", why, sizeof(why)));
	assert_string_equal(t.host, "boss");
	assert_true(
		sw_target_failed(&t, -ECONNREFUSED, NULL, why, sizeof(why)));
	assert_string_equal(t.host, "solo");
	assert_int_equal(t.port, 5);
}

/* A leader that went silent is not followed back to while the group
 * elects another: its followers go on naming it until its lease ends. */
static void test_sw_target_silent_leader(void **state)
{
	char why[SW_TARGET_WHYLEN];
	struct sw_target t;
	int64_t since;

	(void)state;
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	assert_false(sw_target_electing(&t));
	/* The connection to m1 timed out: m2 next. */
	sw_target_silent(&t);
	assert_string_equal(t.host, "m2");
	assert_true(sw_target_electing(&t));
	/* m2 still names m1: not followed; m3 is asked. */
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(t.host, "m3");
	assert_string_equal(why, "master m2:2 is a follower and names m1:1 as "
				 "leader, which stopped answering; trying "
				 "m3:3");
	/* m3 names it too: the list goes round it, back to m2, which may
	 * know the new leader by now. */
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(t.host, "m2");
	assert_non_null(strstr(why, "stopped answering; trying m2:2"));
	/* So does a follower that names no one. */
	assert_true(sw_target_failed(&t, -EREMOTE, "", why, sizeof(why)));
	assert_string_equal(t.host, "m3");
	/* A new leader named is followed at once. */
	assert_false(sw_target_failed(&t, -EREMOTE, "m2:2", why, sizeof(why)));
	assert_string_equal(t.host, "m2");
	assert_string_equal(why, "master m3:3 is a follower; leader is m2:2");
	/* While followers name it, the window goes on... */
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	sw_target_silent(&t);
	t.silent_until = sw_mono_ns() + 1000000;
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(t.host, "m3");
	assert_true(t.silent_until > sw_mono_ns() + 1000 * 1000000LL);
	/* ... up to SW_GROUP_SILENT_MAX_MS after it went silent. */
	t.silent_since =
		sw_mono_ns() - (SW_GROUP_SILENT_MAX_MS - 100) * 1000000LL;
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(t.host, "m2");
	assert_true(t.silent_until <= sw_mono_ns() + 100 * 1000000LL);
	/* Another timeout of the same one: silent since the first. */
	since = t.silent_since;
	assert_int_equal(sw_target_leader(&t, "m1:1"), 0);
	(void)sw_target_failed(&t, -ETIMEDOUT, NULL, why, sizeof(why));
	assert_true(sw_target_electing(&t));
	assert_true(t.silent_since == since);
	/* Once the window is over, m1 is believed again (it may have come
	 * back, and still lead). */
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	sw_target_silent(&t);
	t.silent_until = sw_mono_ns() - 1;
	assert_false(sw_target_electing(&t));
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(t.host, "m1");
	/* A connect or hello that timed out marks the address the same
	 * way; any other failure does not. */
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	assert_false(sw_target_failed(&t, -ETIMEDOUT, NULL, why, sizeof(why)));
	assert_string_equal(t.host, "m2");
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(t.host, "m3");
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	assert_false(
		sw_target_failed(&t, -ECONNREFUSED, NULL, why, sizeof(why)));
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(t.host, "m1");
	/* The leader a follower named goes silent: not the follower's
	 * neighbour next, if that is the leader itself. */
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	assert_false(sw_target_failed(&t, -EREMOTE, "m2:2", why, sizeof(why)));
	assert_string_equal(t.host, "m2");
	sw_target_ok(&t);
	sw_target_silent(&t);
	assert_string_equal(t.host, "m3");
	/* Connected to a leader: forgotten. */
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	sw_target_silent(&t);
	sw_target_ok(&t);
	assert_false(sw_target_electing(&t));
	assert_false(sw_target_failed(&t, -EREMOTE, "m1:1", why, sizeof(why)));
	assert_string_equal(t.host, "m1");
}

static void test_sw_target_same_lists(void **state)
{
	struct sw_target a, b;

	(void)state;
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &a), 0);
	assert_int_equal(sw_target_parse("m3:3,m1:1", 9, &b), 0);
	assert_true(sw_target_same(&a, &b));
	assert_int_equal(sw_target_parse("m2:2:/sub", 9, &b), 0);
	assert_true(sw_target_same(&a, &b));
	assert_int_equal(sw_target_parse("m2:3,m4:2", 9, &b), 0);
	assert_false(sw_target_same(&a, &b));
	memset(&b, 0, sizeof(b));
	strcpy(b.host, "m1");
	b.port = 1;
	assert_true(sw_target_same(&a, &b));
	assert_true(sw_target_same(&b, &a));
}

static void test_sw_target_list_str_forms(void **state)
{
	struct sw_target t;
	char buf[64], small[12];

	(void)state;
	assert_int_equal(sw_target_parse("m1:1,[::1]:2,m3:/x", 9, &t), 0);
	assert_string_equal(sw_target_list_str(&t, buf, sizeof(buf)),
			    "m1:1,[::1]:2,m3:9");
	/* Truncated, still a string. */
	assert_string_equal(sw_target_list_str(&t, small, sizeof(small)),
			    "m1:1,[::1]:");
}

/* A fake master group for sw_target_walk(): what each address answers. */
struct walk_fake {
	const char *addr[4]; /* "host:port" */
	int rc[4];	     /* its answer: >= 0 accepts */
	const char *leader[4];
	bool refused[4];
	unsigned tries[4];
	unsigned total;
	char notes[8][SW_TARGET_WHYLEN];
	unsigned nnotes;
};

static int walk_try(void *arg, const struct sw_target *t, int connect_ms,
		    char *leader, bool *refused)
{
	struct walk_fake *f = arg;
	char a[SW_ADDR_STRLEN];

	assert_true(connect_ms > 0);
	sw_addr_str(t->host, t->port, a, sizeof(a));
	f->total++;
	for (int i = 0; i < 4; i++) {
		if (!f->addr[i] || strcmp(f->addr[i], a))
			continue;
		f->tries[i]++;
		if (f->leader[i])
			strcpy(leader, f->leader[i]);
		*refused = f->refused[i];
		return f->rc[i];
	}
	return -ECONNREFUSED;
}

static void walk_note(void *arg, const char *why)
{
	struct walk_fake *f = arg;

	if (f->nnotes < 8)
		snprintf(f->notes[f->nnotes++], SW_TARGET_WHYLEN, "%s", why);
}

static void test_sw_target_walk_follows_leader(void **state)
{
	struct walk_fake f = {
		.addr = { "m1:1", "m2:2", "m3:3" },
		.rc = { -ECONNREFUSED, -EREMOTE, 7 },
		.leader = { NULL, "m3:3", NULL },
		.refused = { false, true, false },
	};
	struct sw_target t;

	(void)state;
	assert_int_equal(sw_target_parse("m1:1,m2:2,m3:3", 9, &t), 0);
	sw_target_next(&t); /* start at m2, the follower */
	sw_target_next(&t);
	sw_target_next(&t);
	sw_target_next(&t);
	assert_int_equal(sw_target_walk(&t, 5000, walk_try, &f, walk_note), 7);
	assert_int_equal(f.total, 2);
	assert_string_equal(t.host, "m3");
	assert_int_equal(f.nnotes, 1);
	assert_string_equal(f.notes[0],
			    "master m2:2 is a follower; leader is m3:3");
}

static void test_sw_target_walk_gives_up(void **state)
{
	struct walk_fake f = {
		.addr = { "m1:1", "m2:2" },
		.rc = { -ECONNREFUSED, -EREMOTE },
		.refused = { false, true },
	};
	struct walk_fake g = {
		.addr = { "m1:1", "m2:2" },
		.rc = { -ECONNREFUSED, -EACCES },
		.refused = { false, true },
	};
	struct sw_target t;
	int64_t t0;

	(void)state;
	/* Nobody leads: SW_WALK_ROUNDS rounds with pauses in between
	 * (0.1 + 0.2 + 0.4 + 0.8 s), then the last failure. */
	assert_int_equal(sw_target_parse("m1:1,m2:2", 9, &t), 0);
	t0 = sw_mono_ns();
	assert_int_equal(sw_target_walk(&t, 10000, walk_try, &f, NULL),
			 -EREMOTE);
	assert_int_equal(f.total, 2 * SW_WALK_ROUNDS);
	assert_true(sw_mono_ns() - t0 >= 1400 * 1000000LL);
	/* Within the caller's time. */
	memset(f.tries, 0, sizeof(f.tries));
	f.total = 0;
	t0 = sw_mono_ns();
	assert_int_equal(sw_target_parse("m1:1,m2:2", 9, &t), 0);
	sw_target_walk(&t, 250, walk_try, &f, NULL);
	assert_true(sw_mono_ns() - t0 < 1000 * 1000000LL);
	assert_true(f.total < 2 * SW_WALK_ROUNDS);
	/* A refusal other than EREMOTE is the leader's word: at once. */
	assert_int_equal(sw_target_parse("m2:2,m1:1", 9, &t), 0);
	assert_int_equal(sw_target_walk(&t, 10000, walk_try, &g, NULL),
			 -EACCES);
	assert_int_equal(g.total, 1);
	/* A single address: one try, no pause. */
	g.total = 0;
	assert_int_equal(sw_target_parse("m1:1", 9, &t), 0);
	t0 = sw_mono_ns();
	assert_int_equal(sw_target_walk(&t, 10000, walk_try, &g, NULL),
			 -ECONNREFUSED);
	assert_int_equal(g.total, 1);
	/* Under the first pause (100 ms): a loaded machine may hold a
	 * thread for tens of ms, but a pause is at least that. */
	assert_true(sw_mono_ns() - t0 < 100 * 1000000LL);
}

/* ---- util ----------------------------------------------------------- */

static void test_sw_parse_size_suffixes(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },
		{ "42", 42 },
		{ "1k", 1024 },
		{ "1K", 1024 },
		{ "3KiB", 3072 },
		{ "3kib", 3072 },
		{ "2kB", 2048 },
		{ "64M", 64ull << 20 },
		{ "5G", 5ull << 30 },
		{ "7T", 7ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
		{ "16777215T", 16777215ull << 40 },
	};
	static const char *const bad[] = {
		"",
		"k",
		"-1",
		" 1",
		"1 ",
		"1x",
		"1KB2",
		"1Ki",
		"1.5M",
		"0x10",
		"1P",
		"1KiBs",
		"18446744073709551616",
		"16777216T",
		"17179869184G",
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < SW_ARRAY_SIZE(ok); i++) {
		v = 12345;
		if (sw_parse_size(ok[i].s, &v) != 0)
			fail_msg("\"%s\" refused", ok[i].s);
		assert_int_equal(v, ok[i].v);
	}
	for (size_t i = 0; i < SW_ARRAY_SIZE(bad); i++) {
		v = 12345;
		if (sw_parse_size(bad[i], &v) != -EINVAL)
			fail_msg("\"%s\" accepted", bad[i]);
		assert_int_equal(v, 12345);
	}
}

static void test_sw_parse_duration_ms_units(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },	    { "5", 5000 },    { "5s", 5000 },
		{ "250ms", 250 },   { "2m", 120000 }, { "3h", 10800000 },
		{ "1d", 86400000 }, { "0ms", 0 },
	};
	static const char *const bad[] = {
		"",
		"s",
		"5x",
		"5 s",
		"5sec",
		"-5s",
		"1.5s",
		"5mss",
		"18446744073709551615s",
		"213503982335d",
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < SW_ARRAY_SIZE(ok); i++) {
		v = 12345;
		if (sw_parse_duration_ms(ok[i].s, &v) != 0)
			fail_msg("\"%s\" refused", ok[i].s);
		assert_int_equal(v, ok[i].v);
	}
	for (size_t i = 0; i < SW_ARRAY_SIZE(bad); i++) {
		v = 12345;
		if (sw_parse_duration_ms(bad[i], &v) != -EINVAL)
			fail_msg("\"%s\" accepted", bad[i]);
		assert_int_equal(v, 12345);
	}
	/* The largest that fits. */
	assert_int_equal(sw_parse_duration_ms("18446744073709551ms", &v), 0);
}

static void test_sw_parse_bool_words(void **state)
{
	bool b;

	(void)state;
	for (const char *const *s =
		     (const char *const[]){ "1", "yes", "YES", "true", "True",
					    "on", NULL };
	     *s; s++) {
		b = false;
		assert_int_equal(sw_parse_bool(*s, &b), 0);
		assert_true(b);
	}
	for (const char *const *s =
		     (const char *const[]){ "0", "no", "false", "OFF", NULL };
	     *s; s++) {
		b = true;
		assert_int_equal(sw_parse_bool(*s, &b), 0);
		assert_false(b);
	}
	assert_int_equal(sw_parse_bool("", &b), -EINVAL);
	assert_int_equal(sw_parse_bool("2", &b), -EINVAL);
	assert_int_equal(sw_parse_bool("yes ", &b), -EINVAL);
}

static void test_sw_name_valid_rules(void **state)
{
	char name[257];

	(void)state;
	assert_true(sw_name_valid("a", 1));
	assert_true(sw_name_valid("...", 3));
	assert_true(sw_name_valid(".a", 2));
	assert_true(sw_name_valid("..a", 3));
	assert_true(sw_name_valid("a b\x01\xff", 4));
	assert_false(sw_name_valid("", 0));
	assert_false(sw_name_valid(".", 1));
	assert_false(sw_name_valid("..", 2));
	assert_false(sw_name_valid("a/b", 3));
	assert_false(sw_name_valid("/", 1));
	assert_false(sw_name_valid("ab/", 3));
	assert_false(sw_name_valid("a\0b", 3));
	assert_false(sw_name_valid("ab\0", 3));
	/* Only @len bytes count. */
	assert_true(sw_name_valid("ab/", 2));
	assert_false(sw_name_valid("..x", 1));
	memset(name, 'n', sizeof(name));
	assert_true(sw_name_valid(name, 255));
	assert_false(sw_name_valid(name, 256));
	name[254] = '/';
	assert_false(sw_name_valid(name, 255));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sw_crc32c_known_vectors,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_crc32c_matches_portable,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_sw_frame_get_hdr_round_trip, setup, teardown),
		cmocka_unit_test(test_sw_frame_whole),
		cmocka_unit_test_setup_teardown(test_sw_frame_get_hdr_limits,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_frame_pack_round_trip,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_msg_info_table, setup,
						teardown),
		cmocka_unit_test(test_sw_msg_info_resend),
		cmocka_unit_test(test_sw_msg_node_fields_declared),
		cmocka_unit_test(test_sw_msg_node_fields_check_fails),
		cmocka_unit_test(test_sw_msg_nodes_walk),
		cmocka_unit_test(test_sw_msg_handles_everywhere),
		cmocka_unit_test(test_sw_msg_vouch),
		cmocka_unit_test(test_sw_msg_info_flags),
		cmocka_unit_test_setup_teardown(test_sw_dirent_get_round_trip,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_dirent_get_truncated,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_dirent_get_malformed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_buf_add_consume, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sw_buf_reserve_keeps_bytes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_buf_reserve_huge, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sw_buf_add_frame, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_sw_opt_explain_says_what_is_valid, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_sw_opt_set_types, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sw_opt_set_bad_values,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_opt_set_kv_split, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sw_cfg_load_lines, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sw_opt_dump_values, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_parse_forms,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_parse_bad, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_sw_target_parse_long_subdir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_parse_lists,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_parse_bad_lists,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_next_wraps,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_leader_adopt,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_failed_rounds,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_sw_target_failed_redirect_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_silent_leader,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_same_lists,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_list_str_forms,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_sw_target_walk_follows_leader, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_target_walk_gives_up,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_parse_size_suffixes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_parse_duration_ms_units,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sw_parse_bool_words, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sw_name_valid_rules, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
