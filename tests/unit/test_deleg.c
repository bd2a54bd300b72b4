/*
 * deleg.c and the batch path: the master's side of directory delegations,
 * driven through its request handlers on a real namespace and changelog,
 * with two mount sessions whose connections are never on a socket (what
 * the master sends them is read back from their output buffers).
 *
 * Grant and refusal, recall on another session's request (by directory,
 * by an entry's inode, and by a subtree operation above), the waiting
 * connection resumed by the return, a timeout, the holder's loss of its
 * connection, and batches applied in order with one error each.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dispatch.h"
#include "exports.h"
#include "frame.h"
#include "log.h"
#include "deleg.h"
#include "master.h"
#include "req.h"
#include "server.h"
#include "session.h"
#include "watch.h"
#include "unit.h"
#include "unit_ns.h"

struct fixture {
	char dir[256];
	uv_loop_t loop;
	struct master m;
	struct session sa, sb;
	struct conn ca, cb;
	int64_t now;
	uint64_t id;
	struct node *d, *f, *sub;
};

static void quiet_sink(int level, const char *tag, const char *msg,
		       void *opaque)
{
	(void)opaque;
	(void)level;
	(void)tag;
	(void)msg;
}

static void on_durable(void *arg, uint64_t version)
{
	server_durable(arg, version);
}

static void mk_session(struct fixture *f, struct session *s, struct conn *c,
		       uint64_t id)
{
	s->id = id;
	s->role = SWEEPFS__ROLE__ROLE_MOUNT;
	s->rw = true;
	s->root_ino = NS_ROOT_INO;
	s->cache_ms = 1000;
	s->maproot_uid = s->maproot_gid = EXPORT_NO_MAP;
	s->mapall_uid = s->mapall_gid = EXPORT_NO_MAP;
	snprintf(s->peer, sizeof(s->peer), "client%" PRIu64, id);
	s->conn = c;
	c->m = &f->m;
	c->s = s;
	c->sc.refs = 1;
	c->sc.srv = &f->m.server;
	c->sc.started = true;
	c->sc.next = f->m.server.conns;
	f->m.server.conns = &c->sc;
}

static struct node *mk(struct fixture *f, struct node *dir, const char *name,
		       uint32_t mode)
{
	return unit_mk(&f->m.ns, dir, name, mode, ++f->now);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct changelog_opts o = { 0 };

	if (!f || unit_mkdtemp(f->dir, sizeof(f->dir), "deleg") < 0 ||
	    uv_loop_init(&f->loop) < 0 || ns_init(&f->m.ns, 1000) < 0)
		return -1;
	sw_log_set_sink(quiet_sink, NULL);
	f->m.loop = &f->loop;
	uv_idle_init(&f->loop, &f->m.consume_idle);
	f->m.consume_idle.data = &f->m;
	f->m.cfg.deleg_max = 256;
	f->m.cfg.deleg_timeout_ms = 10000;
	f->m.cfg.inval_timeout_ms = 1000;
	o.dir = f->dir;
	o.sync = CL_SYNC_NEVER;
	o.prealloc = 64 << 10;
	o.on_durable = on_durable;
	o.arg = &f->m;
	if (changelog_open(&f->loop, &o, 0, &f->m.cl) < 0 ||
	    delegs_new(&f->m) < 0)
		return -1;
	mk_session(f, &f->sa, &f->ca, 1);
	mk_session(f, &f->sb, &f->cb, 2);
	f->d = mk(f, f->m.ns.root, "d", S_IFDIR | 0755);
	f->f = mk(f, f->d, "f", S_IFREG | 0644);
	f->sub = mk(f, f->d, "sub", S_IFDIR | 0755);
	mk(f, f->sub, "g", S_IFREG | 0644);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	deleg_drop_session(&f->m, &f->sa);
	deleg_drop_session(&f->m, &f->sb);
	watch_drop_session(&f->m, &f->sa);
	watch_drop_session(&f->m, &f->sb);
	delegs_free(&f->m);
	changelog_close(f->m.cl);
	uv_close((uv_handle_t *)&f->m.consume_idle, NULL);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	uv_loop_close(&f->loop);
	for (struct conn *c = conn_first(&f->m); c; c = conn_next(c)) {
		sw_buf_release(&c->in);
		sw_buf_release(&c->wq.out);
		sw_buf_release(&c->held);
		free(c->marks);
	}
	ns_release(&f->m.ns);
	sw_log_set_sink(NULL, NULL);
	unit_rm_rf(f->dir);
	free(f);
	return 0;
}

/* Handle request @type (@msg) from @c as the server would. */
static void call(struct fixture *f, struct conn *c, uint16_t type,
		 const ProtobufCMessage *msg)
{
	struct req r = { .m = &f->m,
			 .conn = c,
			 .s = c->s,
			 .hdr = { .type = type, .id = ++f->id },
			 .inval0 = f->m.inval_seq };
	const struct route *rt = dispatch_route(type);

	assert_non_null(rt);
	rt->fn(&r, msg);
}

/*
 * The last frame of @type in @c's output (replies and notifications),
 * unpacked (free it with protobuf_c_message_free_unpacked), or NULL; the
 * output is emptied.
 */
static ProtobufCMessage *take(struct conn *c, uint16_t type)
{
	const struct sw_msg_info *info = sw_msg_info(type);
	ProtobufCMessage *last = NULL;
	struct sw_frame_hdr h;

	while (sw_frame_get_hdr(sw_buf_head(&c->wq.out),
				sw_buf_used(&c->wq.out), SW_FRAME_MAX_META,
				&h) > 0) {
		const uint8_t *p = sw_buf_head(&c->wq.out) + SW_FRAME_HDR;

		if (h.type == type) {
			const ProtobufCMessageDescriptor *d =
				(h.flags & SW_FRAME_NOTIFY) ? info->req :
							      info->reply;

			if (last)
				protobuf_c_message_free_unpacked(last, NULL);
			last = protobuf_c_message_unpack(d, NULL, h.len, p);
		}
		sw_buf_consume(&c->wq.out, SW_FRAME_HDR + h.len);
	}
	return last;
}

static bool ask(struct fixture *f, struct conn *c, struct node *dir)
{
	Sweepfs__DelegReq q = SWEEPFS__DELEG_REQ__INIT;
	Sweepfs__DelegReply *r;
	bool granted;

	q.dir = dir->ino;
	call(f, c, SW_MSG_DELEG, &q.base);
	r = (Sweepfs__DelegReply *)take(c, SW_MSG_DELEG);
	assert_non_null(r);
	assert_non_null(r->attr);
	assert_int_equal(r->attr->ino, dir->ino);
	granted = r->granted;
	sweepfs__deleg_reply__free_unpacked(r, NULL);
	return granted;
}

static void give_back(struct fixture *f, struct conn *c, struct node *dir)
{
	Sweepfs__DelegReturnReq q = SWEEPFS__DELEG_RETURN_REQ__INIT;

	q.dir = dir->ino;
	call(f, c, SW_MSG_DELEG_RETURN, &q.base);
}

/* Whether @c was told to give @dir back (and forget the notice). */
static bool recalled(struct conn *c, struct node *dir)
{
	Sweepfs__DelegRecall *n =
		(Sweepfs__DelegRecall *)take(c, SW_MSG_DELEG_RECALL);
	bool yes = n && n->dir == dir->ino;

	if (n)
		sweepfs__deleg_recall__free_unpacked(n, NULL);
	return yes;
}

static bool lookup_waits(struct conn *c, struct node *dir, const char *name)
{
	Sweepfs__LookupReq q = SWEEPFS__LOOKUP_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;

	q.cred = &cred;
	q.parent = dir->ino;
	q.name.data = (uint8_t *)name;
	q.name.len = strlen(name);
	return deleg_wait(c, SW_MSG_LOOKUP, &q.base);
}

static uint64_t held(struct fixture *f)
{
	struct deleg_stats st;

	deleg_stats(&f->m, &st);
	return st.held;
}

static void test_grant_marks_and_return_unmarks(void **state)
{
	struct fixture *f = *state;

	assert_true(ask(f, &f->ca, f->d));
	assert_int_equal(held(f), 1);
	assert_int_equal(f->sa.ndelegs, 1);
	assert_true(f->d->flags & NODE_DELEG);
	assert_true(f->f->flags & NODE_DELEG_IN);
	assert_true(f->sub->flags & NODE_DELEG_IN);
	/* Asking again: still ours. */
	assert_true(ask(f, &f->ca, f->d));
	assert_int_equal(held(f), 1);
	/* The holder's own requests never wait. */
	assert_false(lookup_waits(&f->ca, f->d, "f"));
	give_back(f, &f->ca, f->d);
	assert_int_equal(held(f), 0);
	assert_int_equal(f->sa.ndelegs, 0);
	assert_false(f->d->flags & (NODE_DELEG | NODE_DELEG_IN));
	assert_false(f->f->flags & NODE_DELEG_IN);
}

static void test_refused_while_another_watches(void **state)
{
	struct fixture *f = *state;

	watch_add(&f->m, &f->sb, f->d);
	assert_false(ask(f, &f->ca, f->d));
	assert_int_equal(held(f), 0);
	/* Its watch idle long enough: dropped, B told, A granted once B
	 * has acknowledged. */
	f->d->u.dir->watchers->used -= 1000000000LL + WATCH_IDLE_MARGIN_NS + 1;
	{
		Sweepfs__DelegReq q = SWEEPFS__DELEG_REQ__INIT;
		Sweepfs__DelegReply *r;

		q.dir = f->d->ino;
		call(f, &f->ca, SW_MSG_DELEG, &q.base);
		assert_null(take(&f->ca, SW_MSG_DELEG));
		assert_true(f->sb.owing);
		server_inval_acked(&f->m, &f->sb, f->sb.inval_sent);
		assert_false(f->sb.owing);
		r = (Sweepfs__DelegReply *)take(&f->ca, SW_MSG_DELEG);
		assert_non_null(r);
		assert_true(r->granted);
		sweepfs__deleg_reply__free_unpacked(r, NULL);
	}
	assert_null(f->d->u.dir->watchers->dnext); /* A's own only */
	assert_true(f->d->u.dir->watchers->s == &f->sa);
	{
		Sweepfs__InvalNotify *n =
			(Sweepfs__InvalNotify *)take(&f->cb, SW_MSG_INVAL);

		assert_non_null(n);
		assert_int_equal(n->items[0]->dir, f->d->ino);
		assert_false(n->items[0]->has_name);
		sweepfs__inval_notify__free_unpacked(n, NULL);
	}
}

static void test_refused_for_mapped_or_hard_linked(void **state)
{
	struct fixture *f = *state;

	f->sa.maproot_uid = 65534;
	assert_false(ask(f, &f->ca, f->d));
	f->sa.maproot_uid = EXPORT_NO_MAP;
	f->f->nlink = 2; /* another name elsewhere */
	assert_false(ask(f, &f->ca, f->d));
	f->f->nlink = 1;
	f->m.cfg.deleg_max = 0;
	assert_false(ask(f, &f->ca, f->d));
	f->m.cfg.deleg_max = 256;
	assert_true(ask(f, &f->ca, f->d));
}

static void test_other_session_waits_for_the_return(void **state)
{
	struct fixture *f = *state;

	assert_true(ask(f, &f->ca, f->d));
	assert_true(lookup_waits(&f->cb, f->d, "f"));
	assert_non_null(f->cb.parked);
	assert_true(recalled(&f->ca, f->d));
	/* A second request of the same connection: no second recall. */
	assert_true(lookup_waits(&f->cb, f->d, "f"));
	assert_false(recalled(&f->ca, f->d));
	give_back(f, &f->ca, f->d);
	assert_null(f->cb.parked);
	assert_true(f->cb.in_consume_list); /* resumed in the next turn */
	assert_false(lookup_waits(&f->cb, f->d, "f"));
	/* The recall was answered: it counts. */
	{
		struct deleg_stats st;

		deleg_stats(&f->m, &st);
		assert_int_equal(st.recalls, 1);
		assert_int_equal(st.timeouts, 0);
	}
}

static void test_entry_and_subtree_requests_recall(void **state)
{
	struct fixture *f = *state;
	Sweepfs__GetattrReq g = SWEEPFS__GETATTR_REQ__INIT;
	Sweepfs__RmrReq rm = SWEEPFS__RMR_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;

	assert_true(ask(f, &f->ca, f->sub));
	/* By inode: an entry the directory had. */
	g.ino = f->sub->u.dir->head->child->ino;
	assert_true(deleg_wait(&f->cb, SW_MSG_GETATTR, &g.base));
	assert_true(recalled(&f->ca, f->sub));
	deleg_unpark(&f->cb);
	give_back(f, &f->ca, f->sub);

	/* rmr of a tree above it, named by its parent. */
	assert_true(ask(f, &f->ca, f->sub));
	rm.cred = &cred;
	rm.parent = f->m.ns.root->ino;
	rm.name.data = (uint8_t *)"d";
	rm.name.len = 1;
	assert_true(deleg_wait(&f->cb, SW_MSG_RMR, &rm.base));
	assert_true(recalled(&f->ca, f->sub));
	deleg_unpark(&f->cb);
	/* Unrelated: the root's own lookup is not a subtree operation. */
	assert_false(lookup_waits(&f->cb, f->m.ns.root, "other"));
}

static void test_recall_times_out(void **state)
{
	struct fixture *f = *state;
	struct deleg_stats st;

	f->m.cfg.deleg_timeout_ms = 200;
	assert_true(ask(f, &f->ca, f->d));
	assert_true(lookup_waits(&f->cb, f->d, "f"));
	deleg_tick(&f->m); /* not yet */
	assert_int_equal(held(f), 1);
	usleep(300000);
	deleg_tick(&f->m);
	assert_int_equal(held(f), 0);
	assert_null(f->cb.parked);
	deleg_stats(&f->m, &st);
	assert_int_equal(st.timeouts, 1);
}

static void test_holder_gone_ends_it(void **state)
{
	struct fixture *f = *state;

	assert_true(ask(f, &f->ca, f->d));
	assert_true(ask(f, &f->ca, f->sub));
	assert_true(lookup_waits(&f->cb, f->sub, "g"));
	/* As session_detach() does. */
	deleg_drop_session(&f->m, &f->sa);
	watch_drop_session(&f->m, &f->sa);
	assert_int_equal(held(f), 0);
	assert_null(f->cb.parked);
	assert_false(f->sub->flags & (NODE_DELEG | NODE_DELEG_IN));
	/* And a directory that goes ends its delegation. */
	assert_true(ask(f, &f->cb, f->sub));
	deleg_dir_gone(&f->m, f->sub);
	assert_int_equal(held(f), 0);
}

static Sweepfs__BatchOp *op(Sweepfs__BatchOp *o, Sweepfs__Cred *cred,
			    uint64_t parent, const char *name, bool rmdir)
{
	sweepfs__batch_op__init(o);
	o->type = rmdir ? SWEEPFS__BATCH_TYPE__BATCH_RMDIR :
			  SWEEPFS__BATCH_TYPE__BATCH_UNLINK;
	o->cred = cred;
	o->parent = parent;
	o->name.data = (uint8_t *)name;
	o->name.len = strlen(name);
	return o;
}

static void test_batch_applies_in_order(void **state)
{
	struct fixture *f = *state;
	Sweepfs__BatchReq q = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	Sweepfs__Cred nobody = SWEEPFS__CRED__INIT;
	Sweepfs__BatchOp o[6], *ops[6];
	Sweepfs__BatchReply *r;
	uint64_t v0 = f->m.ns.version;

	nobody.uid = nobody.gid = 65534;
	ops[0] = op(&o[0], &cred, f->sub->ino, "g", false); /* done */
	ops[1] = op(&o[1], &cred, f->sub->ino, "g", false); /* gone */
	ops[2] = op(&o[2], &cred, f->d->ino, "sub", false); /* a dir */
	ops[3] = op(&o[3], &nobody, f->d->ino, "f", false); /* mode */
	ops[4] = op(&o[4], &cred, f->d->ino, "sub", true);  /* empty now */
	ops[5] = op(&o[5], &cred, f->d->ino, "f", true);    /* a file */
	q.n_ops = 6;
	q.ops = ops;
	call(f, &f->ca, SW_MSG_BATCH, &q.base);
	/* Answered once durable: not before. */
	assert_null(take(&f->ca, SW_MSG_BATCH));
	changelog_flush(f->m.cl);
	while (changelog_durable(f->m.cl) < f->m.ns.version)
		uv_run(&f->loop, UV_RUN_ONCE);
	r = (Sweepfs__BatchReply *)take(&f->ca, SW_MSG_BATCH);
	assert_non_null(r);
	assert_int_equal(r->n_errs, 6);
	assert_int_equal(r->errs[0], 0);
	assert_int_equal(r->errs[1], -ENOENT);
	assert_int_equal(r->errs[2], -EISDIR);
	assert_int_equal(r->errs[3], -EACCES);
	assert_int_equal(r->errs[4], 0);
	assert_int_equal(r->errs[5], -ENOTDIR);
	sweepfs__batch_reply__free_unpacked(r, NULL);
	assert_int_equal(f->m.ns.version, v0 + 2); /* two journaled */
	assert_int_equal(f->d->u.dir->nentries, 1);
	assert_int_equal(f->m.total.batch_ops, 6);
}

/* A batch sent again after a reconnect (its reply lost): what it did is
 * not done twice, and each op says ENOENT, which the mount expects. */
static void test_batch_sent_again(void **state)
{
	struct fixture *f = *state;
	Sweepfs__BatchReq q = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	Sweepfs__BatchOp o[2], *ops[2];
	Sweepfs__BatchReply *r;
	uint64_t v;

	ops[0] = op(&o[0], &cred, f->sub->ino, "g", false);
	ops[1] = op(&o[1], &cred, f->d->ino, "sub", true);
	q.n_ops = 2;
	q.ops = ops;
	for (int round = 0; round < 2; round++) {
		v = f->m.ns.version;
		call(f, &f->ca, SW_MSG_BATCH, &q.base);
		changelog_flush(f->m.cl);
		while (changelog_durable(f->m.cl) < f->m.ns.version)
			uv_run(&f->loop, UV_RUN_ONCE);
		r = (Sweepfs__BatchReply *)take(&f->ca, SW_MSG_BATCH);
		assert_non_null(r);
		assert_int_equal(r->n_errs, 2);
		assert_int_equal(r->errs[0], round ? -ENOENT : 0);
		assert_int_equal(r->errs[1], round ? -ENOENT : 0);
		sweepfs__batch_reply__free_unpacked(r, NULL);
		assert_int_equal(f->m.ns.version, v + (round ? 0 : 2));
	}
	assert_int_equal(f->d->u.dir->nentries, 1); /* f */
}

static void test_batch_of_another_session_waits(void **state)
{
	struct fixture *f = *state;
	Sweepfs__BatchReq q = SWEEPFS__BATCH_REQ__INIT;
	Sweepfs__Cred cred = SWEEPFS__CRED__INIT;
	Sweepfs__BatchOp o, *ops[1];

	assert_true(ask(f, &f->ca, f->d));
	ops[0] = op(&o, &cred, f->d->ino, "f", false);
	q.n_ops = 1;
	q.ops = ops;
	assert_true(deleg_wait(&f->cb, SW_MSG_BATCH, &q.base));
	assert_true(recalled(&f->ca, f->d));
	assert_false(deleg_wait(&f->ca, SW_MSG_BATCH, &q.base));
	deleg_unpark(&f->cb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_grant_marks_and_return_unmarks, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_refused_while_another_watches, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_refused_for_mapped_or_hard_linked, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_other_session_waits_for_the_return, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_entry_and_subtree_requests_recall, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_recall_times_out, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_holder_gone_ends_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_batch_applies_in_order,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_sent_again, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_batch_of_another_session_waits, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
