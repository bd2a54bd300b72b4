/*
 * Node handles (sweepfs.proto, "Node handles"; sesstab.c): a session may
 * name a node by number only with the handle a reply gave it, unless the
 * node is its root or one it numbers itself, or its caller is root. The
 * handle is a keyed hash: another key, another handle.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "auth.h"
#include "context.h"
#include "master.h"
#include "req.h"
#include "sesstab.h"
#include "session.h"

static void session_as(struct session *s, int role, uint64_t root)
{
	memset(s, 0, sizeof(*s));
	s->role = role;
	s->root_ino = root;
}

static void test_handle_is_keyed(void **state)
{
	uint8_t sk[SW_AUTH_KEY] = { 1 }, k1[SW_HANDLE_KEY], k2[SW_HANDLE_KEY];
	uint8_t again[SW_HANDLE_KEY];

	(void)state;
	sw_handle_key(sk, k1);
	sw_handle_key(sk, again);
	assert_memory_equal(k1, again, SW_HANDLE_KEY); /* restarts agree */
	sk[0] = 2;
	sw_handle_key(sk, k2);
	assert_memory_not_equal(k1, k2, SW_HANDLE_KEY);
	assert_int_not_equal(sw_node_handle(k1, 5), sw_node_handle(k2, 5));
	assert_int_not_equal(sw_node_handle(k1, 5), sw_node_handle(k1, 6));
	assert_int_equal(sw_node_handle(k1, 5), sw_node_handle(k1, 5));
	for (uint64_t i = 0; i < 100000; i++)
		assert_int_not_equal(sw_node_handle(k1, i), 0);
}

static void test_vouched(void **state)
{
	static struct master m;
	Sweepfs__GetattrReq ga = SWEEPFS__GETATTR_REQ__INIT;
	Sweepfs__OpenReq op = SWEEPFS__OPEN_REQ__INIT;
	Sweepfs__BatchReq b = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__BatchOp o[2] = { SWEEPFS__BATCH_OP__INIT,
				  SWEEPFS__BATCH_OP__INIT };
	Sweepfs__BatchOp *ov[2] = { &o[0], &o[1] };
	Sweepfs__Cred user = SWEEPFS__CRED__INIT, root = SWEEPFS__CRED__INIT;
	uint64_t h[SW_HANDLES_MAX + 1] = { 0 };
	struct session s, cs, jail;

	(void)state;
	m.handle_key[0] = 7;
	session_as(&s, SWEEPFS__ROLE__ROLE_MOUNT, NS_ROOT_INO);
	session_as(&jail, SWEEPFS__ROLE__ROLE_MOUNT, 40);
	session_as(&cs, SWEEPFS__ROLE__ROLE_CHUNKSERVER, NS_ROOT_INO);
	user.uid = user.gid = 1000;

	/* Without its handle, or with another's: ESTALE. */
	ga.ino = 42;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_GETATTR, &ga.base),
			 -ESTALE);
	h[0] = sw_node_handle(m.handle_key, 43);
	ga.n_handles = 1;
	ga.handles = h;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_GETATTR, &ga.base),
			 -ESTALE);
	/* With it, among others. */
	h[1] = sw_node_handle(m.handle_key, 42);
	ga.n_handles = 2;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_GETATTR, &ga.base),
			 0);
	/* Too many is refused whatever they are. */
	ga.n_handles = SW_HANDLES_MAX + 1;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_GETATTR, &ga.base),
			 -EINVAL);
	/* Its root needs none: the whole filesystem's, or its subtree's. */
	ga.n_handles = 0;
	ga.ino = NS_ROOT_INO;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_GETATTR, &ga.base),
			 0);
	ga.ino = 40;
	assert_int_equal(
		session_vouched_msg(&m, &jail, SW_MSG_GETATTR, &ga.base), 0);
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_GETATTR, &ga.base),
			 -ESTALE);
	/* Nor does root, who may search every directory. */
	op.ino = 42;
	op.cred = &user;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_OPEN, &op.base),
			 -ESTALE);
	op.cred = &root;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_OPEN, &op.base), 0);
	/* Nor a number of its own ranges; every batch parent else does. */
	session_ino_add(&s, 1000, 2000);
	o[0].cred = o[1].cred = &user;
	o[0].parent = 1500;
	o[1].parent = 42;
	b.n_ops = 2;
	b.ops = ov;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_BATCH, &b.base),
			 -ESTALE);
	b.n_handles = 2;
	b.handles = h;
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_BATCH, &b.base), 0);
	o[0].parent = 2000; /* past the range */
	assert_int_equal(session_vouched_msg(&m, &s, SW_MSG_BATCH, &b.base),
			 -ESTALE);
	/* A chunkserver names chunks, not nodes: nothing to check. */
	ga.ino = 42;
	assert_int_equal(session_vouched_msg(&m, &cs, SW_MSG_GETATTR, &ga.base),
			 0);
}

/* What a reply says is the handle the check wants. */
static void test_attr_carries_handle(void **state)
{
	static struct master m;
	struct node n = { .ino = 77, .mode = S_IFREG | 0644 };
	Sweepfs__Attr a;

	(void)state;
	m.handle_key[3] = 9;
	attr_fill(&m, &a, &n);
	assert_true(a.has_handle);
	assert_int_equal(a.handle, sw_node_handle(m.handle_key, 77));
}

/* Handles changed what mounts and tools say to a master, nothing else:
 * chunkservers and members of the version before are served. */
static void test_versions(void **state)
{
	(void)state;
	assert_true(sw_proto_accepts(SW_PROTO_VERSION,
				     SWEEPFS__ROLE__ROLE_MOUNT, true));
	assert_false(sw_proto_accepts(SW_PROTO_DATA_MIN,
				      SWEEPFS__ROLE__ROLE_MOUNT, true));
	assert_false(sw_proto_accepts(SW_PROTO_DATA_MIN,
				      SWEEPFS__ROLE__ROLE_TOOL, true));
	assert_true(sw_proto_accepts(SW_PROTO_DATA_MIN,
				     SWEEPFS__ROLE__ROLE_CHUNKSERVER, true));
	assert_true(sw_proto_accepts(SW_PROTO_DATA_MIN,
				     SWEEPFS__ROLE__ROLE_MEMBER, true));
	assert_true(sw_proto_accepts(SW_PROTO_DATA_MIN,
				     SWEEPFS__ROLE__ROLE_MOUNT, false));
	assert_false(sw_proto_accepts(SW_PROTO_DATA_MIN - 1,
				      SWEEPFS__ROLE__ROLE_CHUNKSERVER, true));
	assert_false(sw_proto_accepts(SW_PROTO_VERSION + 1,
				      SWEEPFS__ROLE__ROLE_CHUNKSERVER, false));
	/* What hellos say: only mounts' and tools' to a master are new,
	 * so a build before 4 serves every other. */
	assert_int_equal(sw_proto_hello_version(SWEEPFS__ROLE__ROLE_MOUNT,
						true),
			 SW_PROTO_VERSION);
	assert_int_equal(sw_proto_hello_version(SWEEPFS__ROLE__ROLE_TOOL, true),
			 SW_PROTO_VERSION);
	assert_int_equal(sw_proto_hello_version(SWEEPFS__ROLE__ROLE_MOUNT,
						false),
			 SW_PROTO_DATA_MIN);
	assert_int_equal(sw_proto_hello_version(SWEEPFS__ROLE__ROLE_CHUNKSERVER,
						true),
			 SW_PROTO_DATA_MIN);
	assert_int_equal(sw_proto_hello_version(SWEEPFS__ROLE__ROLE_MEMBER,
						true),
			 SW_PROTO_DATA_MIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handle_is_keyed),
		cmocka_unit_test(test_vouched),
		cmocka_unit_test(test_attr_carries_handle),
		cmocka_unit_test(test_versions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
