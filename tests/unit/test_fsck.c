/*
 * fsck.c: the consistency check finds each kind of damage, and calls a
 * healthy namespace (trash, open-unlinked files, trees being purged and
 * snapshot copies included) consistent.
 *
 * The check runs in-process here (fsck_check()); the master runs the same
 * function in a forked child. Also here, on the same fixture: req_node(),
 * which keeps a session inside the subtree its export gives it.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "csrv.h"
#include "fsck.h"
#include "master.h"
#include "req.h"
#include "server.h"
#include "session.h"
#include "namespace_i.h"
#include "trash.h"
#include "unit.h"
#include "unit_master.h"
#include "unit_ns.h"

struct fixture {
	struct master m;    /* first: unit_master_teardown() */
	struct csrv srv[2]; /* id 1 */
	int64_t now;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || unit_master_init(&f->m, f->srv, 1) < 0) {
		free(f);
		return -1;
	}
	f->now = 1000;
	/* It has reported since its last command: counts compare. */
	f->srv[1].reported_at = 2;
	f->srv[1].changed_at = 1;
	*state = f;
	return 0;
}

static struct node *mk(struct fixture *f, struct node *dir, const char *name,
		       uint32_t mode)
{
	return unit_mk(&f->m.ns, dir, name, mode, ++f->now);
}

/* A chunk for slot @index of @n, with a valid copy on the server. */
static struct chunk *give_chunk(struct fixture *f, struct node *n,
				uint32_t index)
{
	uint64_t id = f->m.ns.next_chunk;
	struct chunk *c;

	assert_int_equal(ns_chunk_set(&f->m.ns, n, index, id, 1), 0);
	c = chunk_get(&f->m.ns, id);
	c->copies[0].srv = 1;
	c->copies[0].version = 1;
	c->copies[0].state = COPY_VALID;
	c->ncopies = 1;
	f->srv[1].reported_chunks++;
	return c;
}

static Sweepfs__FsckReply *check(struct fixture *f)
{
	Sweepfs__FsckReply *r = fsck_check(&f->m, 100);

	assert_non_null(r);
	return r;
}

static uint64_t problems(const Sweepfs__FsckReply *r)
{
	return r->leaked_nodes + r->bad_links + r->bad_dirs +
	       r->missing_chunks + r->bad_refs + r->unreferenced_chunks +
	       r->lost_chunks + r->inventory_mismatches;
}

/* A namespace with one of every legitimate unusual state. */
static struct node *healthy(struct fixture *f)
{
	struct ns *ns = &f->m.ns;
	struct node *a = mk(f, ns->root, "a", S_IFDIR | 0755);
	struct node *file = mk(f, a, "file", S_IFREG | 0644);
	struct node *gone = mk(f, a, "gone", S_IFDIR | 0755);
	struct node *t = mk(f, ns->root, "t", S_IFDIR | 0755);
	struct node *open = mk(f, a, "open", S_IFREG | 0644);

	give_chunk(f, file, 0);
	give_chunk(f, file, 2);
	assert_int_equal(ns_link(ns, file, ns->root, "hard", 4, ns->next_edge,
				 ++f->now),
			 0);
	mk(f, gone, "x", S_IFREG | 0644);
	/* A tree being purged, a file in the trash, an open orphan. */
	assert_int_equal(ns_detach(ns, a, "gone", 4, 77, ++f->now), 0);
	mk(f, t, "trashed", S_IFREG | 0644);
	f->now++;
	assert_int_equal(ns_trash_unlink(ns, t, "trashed", 7, 78, f->now + 1000,
					 f->now),
			 0);
	give_chunk(f, open, 0);
	assert_int_equal(ns_unlink(ns, a, "open", 4, true, ++f->now), 0);
	(void)gone;
	return a;
}

static void test_fsck_healthy(void **state)
{
	struct fixture *f = *state;
	Sweepfs__FsckReply *r;

	healthy(f);
	r = check(f);
	for (size_t i = 0; i < r->n_problems; i++)
		print_message("%s\n", r->problems[i]);
	assert_int_equal(problems(r), 0);
	assert_int_equal(r->nodes, f->m.ns.nnodes);
	assert_int_equal(r->chunks, 3);
	assert_int_equal(r->n_servers, 1);
	assert_int_equal(r->servers[0]->known, 3);
	assert_int_equal(r->servers[0]->reported, 3);
	fsck_free(r);
}

static void test_fsck_finds_each_kind(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = healthy(f), *file, *lost;
	struct node tmpl = { 0 };
	struct chunk *c;
	Sweepfs__FsckReply *r;

	file = ns_lookup(ns, a, "file", 4)->child;

	/* Each damage alone, then undone. */
	file->nlink++;
	r = check(f);
	assert_int_equal(r->bad_links, 1);
	assert_int_equal(problems(r), 1);
	assert_true(r->n_problems == 1 && strstr(r->problems[0], "link"));
	fsck_free(r);
	file->nlink--;

	a->u.dir->nentries++;
	r = check(f);
	assert_int_equal(r->bad_dirs, 1);
	assert_int_equal(problems(r), 1);
	fsck_free(r);
	a->u.dir->nentries--;

	c = chunk_get(ns, ns_chunk_at(file, 0));
	c->refs++;
	r = check(f);
	assert_int_equal(r->bad_refs, 1);
	assert_int_equal(problems(r), 1);
	fsck_free(r);
	c->refs--;

	c->copies[0].state = COPY_STALE;
	r = check(f);
	assert_int_equal(r->lost_chunks, 1);
	fsck_free(r);
	c->copies[0].state = COPY_VALID;

	f->srv[1].reported_chunks += 5; /* chunk files nobody knows of */
	r = check(f);
	assert_int_equal(r->inventory_mismatches, 1);
	assert_int_equal(problems(r), 1);
	fsck_free(r);
	f->srv[1].reported_chunks -= 5;

	/* A report older than the server's last command is not compared. */
	f->srv[1].reported_chunks += 5;
	f->srv[1].changed_at = 3;
	r = check(f);
	assert_int_equal(r->inventory_mismatches, 0);
	assert_true(r->servers[0]->in_motion);
	fsck_free(r);
	f->srv[1].reported_chunks -= 5;
	f->srv[1].changed_at = 1;

	/* A node nothing names. */
	tmpl.ino = ns->next_ino;
	tmpl.mode = S_IFREG | 0644;
	tmpl.nlink = 1;
	assert_int_equal(ns_load_node(ns, &tmpl, NULL, &lost), 0);
	r = check(f);
	assert_int_equal(r->leaked_nodes, 1);
	assert_int_equal(r->bad_links, 1); /* and named 0 times, not 1 */
	fsck_free(r);
	nsi_node_free(ns, lost);

	/* A chunk nothing references, and a slot naming no chunk. */
	assert_int_equal(ns_load_chunk(ns, ns->next_chunk, 1), 0);
	r = check(f);
	assert_int_equal(r->unreferenced_chunks, 1);
	fsck_free(r);

	file->u.chunks->id[1] = 0xdead;
	r = check(f);
	assert_int_equal(r->missing_chunks, 1);
	fsck_free(r);
	file->u.chunks->id[1] = 0;
}

/* The entry of @r for @path, or NULL. */
static const Sweepfs__FsckBadFile *bad_file(const Sweepfs__FsckReply *r,
					    const char *path)
{
	for (size_t i = 0; i < r->n_bad_files; i++) {
		const Sweepfs__FsckBadFile *b = r->bad_files[i];

		if (b->path.len == strlen(path) &&
		    memcmp(b->path.data, path, b->path.len) == 0)
			return b;
	}
	return NULL;
}

/*
 * A chunk with no copy, or short of its goal, names its files by every
 * path they have; a goal above the servers there are says so; the list
 * stops at the maximum and says it was cut.
 */
static void test_fsck_names_bad_files(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = healthy(f), *file;
	const Sweepfs__FsckBadFile *b;
	Sweepfs__FsckReply *r;
	struct chunk *c;

	file = ns_lookup(ns, a, "file", 4)->child;
	r = check(f);
	assert_int_equal(r->n_bad_files, 0);
	assert_int_equal(r->bad_files_total, 0);
	fsck_free(r);

	/* Slot 2's chunk lost: the file by both its names. */
	c = chunk_get(ns, ns_chunk_at(file, 2));
	c->copies[0].state = COPY_DAMAGED;
	r = check(f);
	assert_int_equal(r->lost_chunks, 1);
	assert_int_equal(r->bad_files_total, 2);
	assert_false(r->bad_files_cut);
	b = bad_file(r, "/a/file");
	assert_non_null(b);
	assert_non_null(bad_file(r, "/hard"));
	assert_int_equal(b->ino, file->ino);
	assert_int_equal(b->lost, 1);
	assert_int_equal(b->undergoal, 0);
	assert_int_equal(b->n_chunks, 1);
	assert_int_equal(b->chunks[0]->index, 2);
	assert_int_equal(b->chunks[0]->chunk_id, c->id);
	assert_int_equal(b->chunks[0]->copies, 0);
	fsck_free(r);
	c->copies[0].state = COPY_VALID;

	/* Goal 2 on one server: short, endangered, and beyond reach. */
	c->goal = 2;
	r = check(f);
	assert_int_equal(r->lost_chunks, 0);
	assert_int_equal(r->undergoal_chunks, 1);
	assert_int_equal(r->endangered_chunks, 1);
	assert_int_equal(r->goal_unreachable_chunks, 1);
	assert_int_equal(r->servers_up, 1);
	b = bad_file(r, "/a/file");
	assert_non_null(b);
	assert_int_equal(b->undergoal, 1);
	assert_int_equal(b->chunks[0]->copies, 1);
	assert_int_equal(b->chunks[0]->goal, 2);
	fsck_free(r);

	/* A file in the trash, by the path it had. */
	{
		struct node *t = ns_lookup(ns, ns->root, "t", 1)->child;
		struct node *g = mk(f, t, "g", S_IFREG | 0644);
		struct chunk *gc = give_chunk(f, g, 0);

		gc->copies[0].state = COPY_DAMAGED;
		f->now++;
		assert_int_equal(ns_trash_unlink(ns, t, "g", 1, 79,
						 f->now + 1000, f->now),
				 0);
		r = check(f);
		b = bad_file(r, "trash:/t/g");
		assert_non_null(b);
		assert_int_equal(b->lost, 1);
		assert_int_equal(r->bad_files_total, 3);
		fsck_free(r);
		gc->copies[0].state = COPY_VALID;
	}

	/* More files than asked for: the list is cut, the count is not. */
	r = fsck_check(&f->m, 1);
	assert_non_null(r);
	assert_int_equal(r->n_bad_files, 1);
	assert_int_equal(r->bad_files_total, 2);
	assert_true(r->bad_files_cut);
	fsck_free(r);
	c->goal = 1;
}

/* Problems listed stop at the maximum; the counts do not. */
static void test_fsck_max_problems(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	Sweepfs__FsckReply *r;

	for (int i = 0; i < 20; i++) {
		char name[8];
		struct node *n;

		snprintf(name, sizeof(name), "f%d", i);
		n = mk(f, ns->root, name, S_IFREG | 0644);
		n->nlink = 5;
	}
	r = fsck_check(&f->m, 3);
	assert_non_null(r);
	assert_int_equal(r->bad_links, 20);
	assert_int_equal(r->n_problems, 3);
	fsck_free(r);
}

/* A 255-byte name, distinct by @i. */
static void long_name(char *name, int i)
{
	memset(name, 'n', 255);
	snprintf(name, 16, "%08d", i);
	name[8] = 'n';
	name[255] = '\0';
}

/*
 * What clients made fills the report, but not past a frame: a file with
 * a lost chunk, thousands of hard links to it by 255-byte names, and one
 * name deeper than a path may be. Each path is cut at SW_PATH_MAX and
 * says so; the list stops well under SW_FRAME_MAX_META, and says so, and
 * the total still counts every name.
 */
static void test_fsck_bad_files_bounded(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *dir = ns->root, *file;
	Sweepfs__FsckReply *r;
	const int depth = 20, links = 3000;
	char name[256];
	size_t packed, longest = 0;
	bool marked = false;

	for (int i = 0; i < depth; i++) {
		long_name(name, i);
		dir = mk(f, dir, name, S_IFDIR | 0755);
	}
	long_name(name, depth);
	file = mk(f, dir, name, S_IFREG | 0644);
	give_chunk(f, file, 0)->copies[0].state = COPY_DAMAGED;
	for (int i = 0; i < links; i++) {
		long_name(name, depth + 1 + i);
		assert_int_equal(ns_link(ns, file, ns->root, name, 255,
					 ns->next_edge, ++f->now),
				 0);
	}

	r = fsck_check(&f->m, 10000);
	assert_non_null(r);
	assert_int_equal(r->lost_chunks, 1);
	assert_int_equal(r->bad_files_total, links + 1);
	assert_true(r->bad_files_cut);
	assert_true(r->n_bad_files > 0);
	assert_true(r->n_bad_files < (size_t)links);
	for (size_t i = 0; i < r->n_bad_files; i++) {
		const ProtobufCBinaryData *p = &r->bad_files[i]->path;

		if (p->len > longest)
			longest = p->len;
		if (p->len == SW_PATH_MAX &&
		    memcmp(p->data + p->len - 9, "/...(cut)", 9) == 0)
			marked = true;
	}
	assert_true(longest <= SW_PATH_MAX);
	assert_true(marked); /* the deep name, walked first */
	packed = sweepfs__fsck_reply__get_packed_size(r);
	assert_true(packed < SW_FRAME_MAX_META);
	assert_true(packed > (256u << 10)); /* the list was not cut early */
	print_message("report of %zu bytes: %zu of %" PRIu64 " files listed\n",
		      packed, r->n_bad_files, r->bad_files_total);
	fsck_free(r);
}

/*
 * A session exported a subtree sees no directory outside it, and of the
 * files only those the master named to it (session_grant()).
 */
static void test_req_node_confined(void **state)
{
	struct fixture *f = *state;
	struct ns *ns = &f->m.ns;
	struct node *a = mk(f, ns->root, "a", S_IFDIR | 0755);
	struct node *ab = mk(f, a, "b", S_IFDIR | 0755);
	struct node *c = mk(f, ns->root, "c", S_IFDIR | 0755);
	struct node *file = mk(f, c, "f", S_IFREG | 0644);
	struct node *mine = mk(f, ab, "g", S_IFREG | 0644);
	struct session s = { .root_ino = a->ino };
	struct req r = { .m = &f->m, .s = &s };

	session_grants_reset(&s);
	assert_ptr_equal(req_node(&r, a->ino), a);
	assert_ptr_equal(req_node(&r, ab->ino), ab);
	assert_null(req_node(&r, NS_ROOT_INO));
	assert_null(req_node(&r, c->ino));
	assert_null(req_node(&r, 999999));
	assert_int_equal(req_node_err(&r, 999999), -ENOENT);
	/* Files: only once named to the session. */
	assert_null(req_node(&r, file->ino));
	assert_int_equal(req_node_err(&r, file->ino), -ESTALE);
	assert_null(req_node(&r, mine->ino));
	session_grant(&s, mine);
	assert_ptr_equal(req_node(&r, mine->ino), mine);
	assert_null(req_node(&r, file->ino));
	/* The whole namespace for a session exported "/", files too. */
	s.root_ino = NS_ROOT_INO;
	assert_ptr_equal(req_node(&r, c->ino), c);
	assert_ptr_equal(req_node(&r, file->ino), file);
	session_grant(&s, file); /* nothing to remember */
	assert_int_equal(htab_count(&s.granted), 1);
	/* A removed directory is nobody's. */
	s.root_ino = a->ino;
	assert_int_equal(ns_detach(ns, a, "b", 1, 5, ++f->now), 0);
	assert_null(req_node(&r, ab->ino));
	session_grants_reset(&s);
	assert_null(req_node(&r, mine->ino));
	htab_release(&s.granted);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fsck_healthy, setup,
						unit_master_teardown),
		cmocka_unit_test_setup_teardown(test_fsck_finds_each_kind,
						setup, unit_master_teardown),
		cmocka_unit_test_setup_teardown(test_fsck_names_bad_files,
						setup, unit_master_teardown),
		cmocka_unit_test_setup_teardown(test_fsck_bad_files_bounded,
						setup, unit_master_teardown),
		cmocka_unit_test_setup_teardown(test_fsck_max_problems, setup,
						unit_master_teardown),
		cmocka_unit_test_setup_teardown(test_req_node_confined, setup,
						unit_master_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
