/*
 * dispatch.c: the one table that routes requests. Every request a client
 * or chunkserver sends has a route; a role reaches only its own; a
 * read-only export writes nothing through any route; credentials are
 * mapped before a handler sees them.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dispatch.h"
#include "master.h"
#include "req.h"
#include "session.h"
#include "util.h"

/* Types a master receives no request of: notifications it sends, and
 * the chunkservers' own data requests. */
static bool not_a_master_request(uint16_t type)
{
	switch (type) {
	case SW_MSG_HELLO: /* server.c's own */
	case SW_MSG_CS_READ:
	case SW_MSG_CS_WRITE:
	case SW_MSG_CS_SYNC:
	case SW_MSG_CS_COMMAND:
	case SW_MSG_INVAL:
	case SW_MSG_DELEG_RECALL:
		return true;
	default:
		return false;
	}
}

static void session_as(struct session *s, int role, bool rw, bool admin)
{
	memset(s, 0, sizeof(*s));
	s->role = role;
	s->rw = rw;
	s->admin = admin;
	s->root_ino = NS_ROOT_INO; /* the whole filesystem */
	s->maproot_uid = s->maproot_gid = EXPORT_NO_MAP;
	s->mapall_uid = s->mapall_gid = EXPORT_NO_MAP;
}

static void test_every_request_routed(void **state)
{
	(void)state;
	for (uint16_t t = 0; t < SW_MSG__COUNT + 2; t++) {
		const struct sw_msg_info *info = sw_msg_info(t);
		const struct route *rt = dispatch_route(t);

		if (!info || not_a_master_request(t)) {
			assert_null(rt);
			continue;
		}
		assert_non_null(rt);
		assert_non_null(rt->fn);
		assert_true(info->roles != 0);
		/* The route's copy of the table's columns is the table's. */
		assert_int_equal(rt->roles, info->roles);
		assert_int_equal(!!(rt->flags & SW_MSG_F_WRITES), info->writes);
		assert_int_equal(!!(rt->flags & SW_MSG_F_ADMIN), info->admin);
		assert_int_equal(!!(rt->flags & SW_MSG_F_WHOLE), info->whole);
		/* What the protocol calls a change, the table does; the
		 * ones that depend on the message say so (open). */
		if (!rt->writes)
			assert_int_equal(info->writes, info->mutating);
		else
			assert_true(info->writes);
	}
}

static void test_roles(void **state)
{
	Sweepfs__LookupReq lookup = SWEEPFS__LOOKUP_REQ__INIT;
	Sweepfs__CsHeartbeatReq hb = SWEEPFS__CS_HEARTBEAT_REQ__INIT;
	Sweepfs__BatchReq batch = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__PingReq ping = SWEEPFS__PING_REQ__INIT;
	Sweepfs__MetaReadReq mr = SWEEPFS__META_READ_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	struct session cs, mount, tool, member;

	(void)state;
	lookup.cred = &cred;
	session_as(&cs, SWEEPFS__ROLE__ROLE_CHUNKSERVER, true, true);
	session_as(&mount, SWEEPFS__ROLE__ROLE_MOUNT, true, false);
	session_as(&tool, SWEEPFS__ROLE__ROLE_TOOL, true, false);
	session_as(&member, SWEEPFS__ROLE__ROLE_MEMBER, true, false);

	/* A chunkserver has no export: no namespace requests through it. */
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_LOOKUP), &cs,
					&lookup.base),
			 -EPERM);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_CS_HEARTBEAT),
					&cs, &hb.base),
			 0);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_PING), &cs,
					&ping.base),
			 0);
	/* ... and no one else claims to be one. */
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_CS_HEARTBEAT),
					&mount, &hb.base),
			 -EPERM);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_LOOKUP), &mount,
					&lookup.base),
			 0);
	/* Batches are a mount's. */
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_BATCH), &tool,
					&batch.base),
			 -EPERM);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_BATCH), &mount,
					&batch.base),
			 0);
	/* The leader's checkpoint is a member's to read, and a member
	 * reads nothing else. */
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_META_READ),
					&member, &mr.base),
			 0);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_META_READ),
					&mount, &mr.base),
			 -EPERM);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_META_READ), &tool,
					&mr.base),
			 -EPERM);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_META_READ), &cs,
					&mr.base),
			 -EPERM);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_LOOKUP), &member,
					&lookup.base),
			 -EPERM);
	/* A role the hello never gives is refused everything. */
	mount.role = 9;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_PING), &mount,
					&ping.base),
			 -EPERM);
}

static void test_read_only_and_admin(void **state)
{
	Sweepfs__NameReq unlink = SWEEPFS__NAME_REQ__INIT;
	Sweepfs__OpenReq open = SWEEPFS__OPEN_REQ__INIT;
	Sweepfs__TrashReq trash = SWEEPFS__TRASH_REQ__INIT;
	Sweepfs__FsckReq fsck = SWEEPFS__FSCK_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	struct session ro, admin;

	(void)state;
	unlink.cred = open.cred = trash.cred = fsck.cred = &cred;
	session_as(&ro, SWEEPFS__ROLE__ROLE_MOUNT, false, false);
	session_as(&admin, SWEEPFS__ROLE__ROLE_TOOL, true, true);

	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_UNLINK), &ro,
					&unlink.base),
			 -EROFS);
	open.flags = O_RDONLY;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_OPEN), &ro,
					&open.base),
			 0);
	open.flags = O_RDONLY | O_TRUNC;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_OPEN), &ro,
					&open.base),
			 -EROFS);
	open.flags = O_WRONLY;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_OPEN), &ro,
					&open.base),
			 -EROFS);
	trash.op = 1; /* list */
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_TRASH), &ro,
					&trash.base),
			 0);
	trash.op = 2;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_TRASH), &ro,
					&trash.base),
			 -EROFS);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_FSCK), &ro,
					&fsck.base),
			 -EPERM);
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_FSCK), &admin,
					&fsck.base),
			 0);
}

/* dispatch_admit() of @msg of @type from @s. */
static int admit(uint16_t type, struct session *s, ProtobufCMessage *msg)
{
	return dispatch_admit(dispatch_route(type), s, msg);
}

/*
 * What concerns the whole filesystem or the cluster: fsck's report names
 * files anywhere, a group request changes the leader or the members. An
 * admin export confined to a subtree, or read-only, reaches neither
 * (fsck reads, so a read-only admin export may run it).
 */
static void test_whole_filesystem_requests(void **state)
{
	Sweepfs__FsckReq fsck = SWEEPFS__FSCK_REQ__INIT;
	Sweepfs__GroupReq group = SWEEPFS__GROUP_REQ__INIT;
	Sweepfs__Cred root = SWEEPFS__CRED__INIT;
	struct session admin, ro_admin, confined;

	(void)state;
	fsck.cred = group.cred = &root;
	session_as(&admin, SWEEPFS__ROLE__ROLE_TOOL, true, true);
	session_as(&ro_admin, SWEEPFS__ROLE__ROLE_TOOL, false, true);
	session_as(&confined, SWEEPFS__ROLE__ROLE_TOOL, true, true);
	confined.root_ino = NS_ROOT_INO + 41;

	assert_int_equal(admit(SW_MSG_FSCK, &admin, &fsck.base), 0);
	assert_int_equal(admit(SW_MSG_FSCK, &ro_admin, &fsck.base), 0);
	assert_int_equal(admit(SW_MSG_FSCK, &confined, &fsck.base), -EPERM);
	group.has_transfer_to = 1;
	group.transfer_to = 2;
	assert_int_equal(admit(SW_MSG_GROUP, &admin, &group.base), 0);
	assert_int_equal(admit(SW_MSG_GROUP, &ro_admin, &group.base), -EROFS);
	assert_int_equal(admit(SW_MSG_GROUP, &confined, &group.base), -EPERM);
	group.has_transfer_to = 0;
	group.add = "3=127.0.0.1:9421";
	assert_int_equal(admit(SW_MSG_GROUP, &ro_admin, &group.base), -EROFS);
	assert_int_equal(admit(SW_MSG_GROUP, &confined, &group.base), -EPERM);
}

/* Every admin request carries its caller (a field `cred`, mapped by the
 * export like any other): one that did not would be refused to all. */
static void test_admin_requests_name_their_caller(void **state)
{
	size_t n = 0;

	(void)state;
	for (uint16_t t = 0; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *info = sw_msg_info(t);
		const ProtobufCFieldDescriptor *f;

		if (!info || !info->admin)
			continue;
		f = protobuf_c_message_descriptor_get_field_by_name(info->req,
								    "cred");
		assert_non_null(f);
		assert_ptr_equal(f->descriptor, &sweepfs__cred__descriptor);
		n++;
	}
	assert_int_equal(n, 2); /* FSCK, GROUP */
}

/* Admit @msg of @type from @s with credentials @uid (-1: none sent). */
static int admit_as(uint16_t type, struct session *s, ProtobufCMessage *msg,
		    Sweepfs__Cred **slot, int64_t uid)
{
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	int rc;

	cred.uid = cred.gid = (uint32_t)uid;
	*slot = uid < 0 ? NULL : &cred;
	rc = admit(type, s, msg);
	*slot = NULL;
	return rc;
}

/*
 * Admin is root on an admin export, as the master believes the caller
 * once the export mapped it: the export's flag alone is any of its
 * users'. A non-root user, a request that names nobody, root squashed
 * by maproot, and root on an export without the flag are refused; a
 * user mapped to root (mapall=0) is root.
 */
static void test_admin_needs_root(void **state)
{
	Sweepfs__FsckReq fsck = SWEEPFS__FSCK_REQ__INIT;
	Sweepfs__GroupReq transfer = SWEEPFS__GROUP_REQ__INIT;
	Sweepfs__GroupReq add = SWEEPFS__GROUP_REQ__INIT;
	Sweepfs__GroupReq del = SWEEPFS__GROUP_REQ__INIT;
	struct {
		uint16_t type;
		ProtobufCMessage *msg;
		Sweepfs__Cred **cred;
	} reqs[] = {
		{ SW_MSG_FSCK, &fsck.base, &fsck.cred },
		{ SW_MSG_GROUP, &transfer.base, &transfer.cred },
		{ SW_MSG_GROUP, &add.base, &add.cred },
		{ SW_MSG_GROUP, &del.base, &del.cred },
	};
	struct session admin, squashed, plain, mapall;

	(void)state;
	transfer.has_transfer_to = 1;
	add.add = "3=127.0.0.1:9421";
	del.has_remove = 1;
	del.remove = 2;
	session_as(&admin, SWEEPFS__ROLE__ROLE_TOOL, true, true);
	session_as(&squashed, SWEEPFS__ROLE__ROLE_TOOL, true, true);
	squashed.maproot_uid = squashed.maproot_gid = 65534;
	session_as(&plain, SWEEPFS__ROLE__ROLE_MOUNT, true, false);
	session_as(&mapall, SWEEPFS__ROLE__ROLE_TOOL, true, true);
	mapall.mapall_uid = mapall.mapall_gid = 0;

	for (size_t i = 0; i < SW_ARRAY_SIZE(reqs); i++) {
		uint16_t t = reqs[i].type;
		ProtobufCMessage *m = reqs[i].msg;
		Sweepfs__Cred **c = reqs[i].cred;

		assert_int_equal(admit_as(t, &admin, m, c, 0), 0);
		assert_int_equal(admit_as(t, &admin, m, c, 1000), -EPERM);
		assert_int_equal(admit_as(t, &admin, m, c, -1), -EPERM);
		assert_int_equal(admit_as(t, &squashed, m, c, 0), -EPERM);
		assert_int_equal(admit_as(t, &squashed, m, c, 1000), -EPERM);
		assert_int_equal(admit_as(t, &plain, m, c, 0), -EPERM);
		assert_int_equal(admit_as(t, &mapall, m, c, 1000), 0);
	}
}

/*
 * A full INFO (session_admin_whole()) is admin root's on an export of the
 * whole filesystem: root on an admin export confined to a subtree gets
 * the limited reply, as FSCK and GROUP refuse it (SW_MSG_F_WHOLE).
 */
static void test_full_info_needs_whole(void **state)
{
	Sweepfs__Cred root = SWEEPFS__CRED__INIT, user = SWEEPFS__CRED__INIT;
	struct session admin, confined, plain;

	(void)state;
	user.uid = user.gid = 1000;
	session_as(&admin, SWEEPFS__ROLE__ROLE_TOOL, true, true);
	session_as(&confined, SWEEPFS__ROLE__ROLE_TOOL, true, true);
	confined.root_ino = NS_ROOT_INO + 1;
	session_as(&plain, SWEEPFS__ROLE__ROLE_TOOL, true, false);

	assert_true(session_admin_whole(&admin, &root));
	assert_false(session_admin_whole(&admin, &user));
	assert_false(session_admin_whole(&admin, NULL));
	assert_true(session_admin_root(&confined, &root));
	assert_false(session_admin_whole(&confined, &root));
	assert_false(session_admin_whole(&plain, &root));
}

static void test_creds_mapped(void **state)
{
	Sweepfs__NameReq unlink = SWEEPFS__NAME_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	uint32_t groups[2] = { 0, 7 };
	struct session s;

	(void)state;
	session_as(&s, SWEEPFS__ROLE__ROLE_MOUNT, true, false);
	s.maproot_uid = s.maproot_gid = 65534;
	cred.uid = cred.gid = 0;
	cred.n_groups = 2;
	cred.groups = groups;
	unlink.cred = &cred;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_UNLINK), &s,
					&unlink.base),
			 0);
	assert_int_equal(cred.uid, 65534);
	assert_int_equal(cred.gid, 65534);
	assert_int_equal(cred.n_groups, 0);
	/* Not root: kept. */
	cred.uid = cred.gid = 1000;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_UNLINK), &s,
					&unlink.base),
			 0);
	assert_int_equal(cred.uid, 1000);
	assert_int_equal(cred.gid, 1000);
	/* Group 0 is root's too (knfsd's root_squash): squashed as the
	 * primary group and among the supplementary ones, others kept. */
	cred.uid = 1000;
	cred.gid = 0;
	cred.n_groups = 2;
	groups[0] = 0;
	groups[1] = 7;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_UNLINK), &s,
					&unlink.base),
			 0);
	assert_int_equal(cred.uid, 1000);
	assert_int_equal(cred.gid, 65534);
	assert_int_equal(cred.n_groups, 2);
	assert_int_equal(groups[0], 65534);
	assert_int_equal(groups[1], 7);
	/* Without maproot nothing is squashed. */
	s.maproot_uid = s.maproot_gid = EXPORT_NO_MAP;
	cred.gid = 0;
	groups[0] = 0;
	assert_int_equal(dispatch_admit(dispatch_route(SW_MSG_UNLINK), &s,
					&unlink.base),
			 0);
	assert_int_equal(cred.gid, 0);
	assert_int_equal(groups[0], 0);
}

/*
 * A request's digest (req.h) tells a request sent again from another one
 * sent under the same id: it follows the type, every byte of the
 * arguments and the key, and is the same for the same frame.
 */
static void test_request_digest(void **state)
{
	uint8_t key[REPLIES_DIGEST], other[REPLIES_DIGEST];
	uint8_t sk[SW_AUTH_KEY] = { 1, 2, 3 };
	uint8_t payload[64];
	struct req a = { .m = NULL }, b = { .m = NULL };

	(void)state;
	memset(payload, 0x5a, sizeof(payload));
	req_once_key(sk, key);
	req_once_key(sk, other);
	assert_memory_equal(key, other, sizeof(key));
	sk[0] ^= 1;
	req_once_key(sk, other);
	assert_memory_not_equal(key, other, sizeof(key));

	req_digest(&a, key, SW_MSG_CREATE, payload, sizeof(payload));
	req_digest(&b, key, SW_MSG_CREATE, payload, sizeof(payload));
	assert_memory_equal(a.digest, b.digest, sizeof(a.digest));
	/* Another type with the same bytes (a LINK's id reused). */
	req_digest(&b, key, SW_MSG_LINK, payload, sizeof(payload));
	assert_memory_not_equal(a.digest, b.digest, sizeof(a.digest));
	/* One bit of the arguments. */
	payload[63] ^= 1;
	req_digest(&b, key, SW_MSG_CREATE, payload, sizeof(payload));
	assert_memory_not_equal(a.digest, b.digest, sizeof(a.digest));
	payload[63] ^= 1;
	/* One byte fewer. */
	req_digest(&b, key, SW_MSG_CREATE, payload, sizeof(payload) - 1);
	assert_memory_not_equal(a.digest, b.digest, sizeof(a.digest));
	/* Another key: a client that knows the digest function cannot
	 * make two requests alike without the master's key. */
	req_digest(&b, other, SW_MSG_CREATE, payload, sizeof(payload));
	assert_memory_not_equal(a.digest, b.digest, sizeof(a.digest));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_request_routed),
		cmocka_unit_test(test_roles),
		cmocka_unit_test(test_read_only_and_admin),
		cmocka_unit_test(test_whole_filesystem_requests),
		cmocka_unit_test(test_admin_requests_name_their_caller),
		cmocka_unit_test(test_admin_needs_root),
		cmocka_unit_test(test_full_info_needs_whole),
		cmocka_unit_test(test_creds_mapped),
		cmocka_unit_test(test_request_digest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
