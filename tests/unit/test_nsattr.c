/*
 * nsattr.c: the snapshot flag set recursively in O(1) by a mark.
 *
 * The O(1) claim is held by counts, not by time: the names the flag's
 * walks visit (ns->snap_walked) and the marks written out
 * (ns->snap_settled) stay 0 for `seteattr -f snapshot -r` followed by
 * rmsnapshot's "is every name flagged", at 10,000 names as at 100,000;
 * the same set read from an older changelog record (no edge id) walks
 * them all, which is what shows the count can fail. The rest checks that
 * a mark means what the walk meant: every name then flagged, names made
 * later not, a clear, a directory renamed across the mark's edge, a
 * snapshot copy, the trash, a checkpoint (which keeps them) and the
 * changelog's replay.
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
#include "checkpoint.h"
#include "crc32c.h"
#include "hash.h"
#include "mutation.h"
#include "namespace.h"
#include "namespace_i.h"
#include "trash.h"
#include "unit.h"
#include "unit_ns.h"

struct fixture {
	struct ns ns;
	int64_t now;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || ns_init(&f->ns, 1000) < 0) {
		free(f);
		return -1;
	}
	f->now = 1000;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ns_release(&f->ns);
	free(f);
	return 0;
}

/*
 * The seed's shape, small: @top/d0 and @top/d1 with @files names between
 * them, and a few levels of directories in d1 with a file in each.
 */
static struct node *mk_tree(struct fixture *f, const char *name, unsigned files)
{
	struct node *top =
		unit_mk(&f->ns, f->ns.root, name, S_IFDIR | 0755, ++f->now);
	struct node *d[2], *deep;
	char buf[32];

	d[0] = unit_mk(&f->ns, top, "d0", S_IFDIR | 0755, ++f->now);
	d[1] = unit_mk(&f->ns, top, "d1", S_IFDIR | 0755, ++f->now);
	for (unsigned i = 0; i < files; i++) {
		snprintf(buf, sizeof(buf), "f%09u", i);
		unit_mk(&f->ns, d[i % 2], buf, S_IFREG | 0644, f->now);
	}
	deep = d[1];
	for (unsigned i = 0; i < 4; i++) {
		deep = unit_mk(&f->ns, deep, "sub", S_IFDIR | 0755, ++f->now);
		unit_mk(&f->ns, deep, "leaf", S_IFREG | 0644, f->now);
	}
	return top;
}

/* Names below @dir the flag's own reading (marks and bits) says are
 * flagged, and how many there are. */
struct flagcount {
	struct ns *ns;
	uint64_t names, flagged;
};

static int count_edge(struct node *dir, struct edge *e, void *arg)
{
	struct flagcount *c = arg;

	c->names++;
	c->flagged += ns_edge_snapshot(c->ns, dir, e);
	return 0;
}

static struct flagcount count_flags(struct ns *ns, struct node *dir)
{
	struct flagcount c = { ns, 0, 0 };

	assert_int_equal(nsi_walk(dir, NULL, count_edge, &c), 0);
	return c;
}

static bool flagged(struct ns *ns, struct node *dir, const char *name)
{
	struct edge *e = ns_lookup(ns, dir, name, strlen(name));

	assert_non_null(e);
	return ns_edge_snapshot(ns, dir, e);
}

/* seteattr -f snapshot -r @name as the leader journals it. */
static int64_t set_r(struct ns *ns, struct node *dir, const char *name)
{
	return ns_set_eattr(ns, dir, name, strlen(name), true, true,
			    NS_ANY_OWNER, ns->next_edge);
}

struct costs {
	uint64_t walked, settled;
};

static struct costs costs_of(const struct ns *ns)
{
	struct costs c;
	unsigned marks;

	ns_snap_counts(ns, &marks, &c.settled, &c.walked);
	return c;
}

/*
 * The flag then "is all of it flagged" on a tree of @files names, or with
 * @clear the flag and then its clear (deleattr -f snapshot -r, for all
 * owners): what the second part visited and wrote out.
 */
static struct costs flag_and_ask(unsigned files, bool clear)
{
	void *state = NULL;
	struct fixture *f;
	struct node *top;
	struct costs before, after;

	assert_int_equal(setup(&state), 0);
	f = state;
	top = mk_tree(f, "tree", files);
	if (clear)
		assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	before = costs_of(&f->ns);
	if (clear)
		assert_true(ns_set_eattr(&f->ns, f->ns.root, "tree", 4, false,
					 true, NS_ANY_OWNER, 0) >= 0);
	else
		assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	assert_true(flagged(&f->ns, f->ns.root, "tree") == !clear);
	assert_true(ns_tree_flagged(&f->ns, top) == !clear);
	after = costs_of(&f->ns);
	/* What the mark says is what the walk would have written. */
	assert_int_equal(count_flags(&f->ns, top).flagged,
			 clear ? 0 : files + 2 + 8);
	/* Neither touched a name's own bit. */
	assert_int_equal(ns_tree_plain(top), files + 2 + 8);
	teardown(&state);
	return (struct costs){ after.walked - before.walked,
			       after.settled - before.settled };
}

/* At 10,000 names as at 100,000, the flag visits none and writes no
 * mark out, nor does its clear (which wrote the mark out and then
 * cleared each name: 0.3-1 s with the loop held at 17 M). */
static void visits_nothing(bool clear)
{
	struct costs small = flag_and_ask(10000, clear);
	struct costs big = flag_and_ask(100000, clear);

	assert_int_equal(small.walked, 0);
	assert_int_equal(big.walked, 0);
	assert_int_equal(small.settled, 0);
	assert_int_equal(big.settled, 0);
}

static void test_set_eattr_recursive_visits_nothing(void **state)
{
	(void)state;
	visits_nothing(false);
}

static void test_clear_recursive_of_mark_visits_nothing(void **state)
{
	(void)state;
	visits_nothing(true);
}

/* A recursive clear still walks where a name has a bit of its own, and
 * still writes out a mark over the tree's parent, which flags names
 * outside the tree too: those stay flagged. */
static void test_clear_recursive_bits_and_marks_above(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 100);
	struct node *d0 = ns_lookup(&f->ns, top, "d0", 2)->child;
	struct node *d1 = ns_lookup(&f->ns, top, "d1", 2)->child;
	struct costs before;

	/* A bit in d0 beside a mark on d0. */
	unit_mk(&f->ns, d0, "late", S_IFREG | 0644, ++f->now);
	assert_int_equal(ns_set_eattr(&f->ns, d0, "late", 4, true, false,
				      NS_ANY_OWNER, 0),
			 1);
	assert_true(set_r(&f->ns, top, "d0") >= 0);
	before = costs_of(&f->ns);
	assert_true(ns_set_eattr(&f->ns, top, "d0", 2, false, true,
				 NS_ANY_OWNER, 0) >= 0);
	assert_int_equal(costs_of(&f->ns).walked - before.walked, 51);
	assert_int_equal(costs_of(&f->ns).settled, before.settled);
	assert_int_equal(count_flags(&f->ns, d0).flagged, 0);
	assert_false(flagged(&f->ns, top, "d0"));

	/* A mark on the top, a clear of d1 below it. */
	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	before = costs_of(&f->ns);
	assert_true(ns_set_eattr(&f->ns, top, "d1", 2, false, true,
				 NS_ANY_OWNER, 0) >= 0);
	assert_int_equal(costs_of(&f->ns).settled - before.settled, 1);
	assert_int_equal(count_flags(&f->ns, d1).flagged, 0);
	assert_false(flagged(&f->ns, top, "d1"));
	assert_true(flagged(&f->ns, top, "d0"));
	assert_int_equal(count_flags(&f->ns, d0).flagged, 51);
	assert_true(flagged(&f->ns, f->ns.root, "tree"));
}

/* A record without the edge id (an older changelog) walks: the count
 * above is one that can fail. */
static void test_set_eattr_without_edge_id_walks(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 1000);
	struct costs before = costs_of(&f->ns), after;

	assert_int_equal(ns_set_eattr(&f->ns, f->ns.root, "tree", 4, true, true,
				      NS_ANY_OWNER, 0),
			 1 + 1000 + 2 + 8);
	after = costs_of(&f->ns);
	assert_int_equal(after.walked - before.walked, 1 + 1000 + 2 + 8);
	assert_int_equal(ns_tree_plain(top), 0);
}

/* Names made after the mark are not flagged, so the tree is not all
 * flagged any more; the old names still are. */
static void test_mark_spares_new_names(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 100);
	struct node *d0 = ns_lookup(&f->ns, top, "d0", 2)->child;

	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	unit_mk(&f->ns, d0, "late", S_IFREG | 0644, ++f->now);
	assert_false(flagged(&f->ns, d0, "late"));
	assert_true(flagged(&f->ns, d0, "f000000000"));
	assert_false(ns_tree_flagged(&f->ns, top));
	/* Flag the late one too and the tree is all flagged again. */
	assert_int_equal(ns_set_eattr(&f->ns, d0, "late", 4, true, false,
				      NS_ANY_OWNER, 0),
			 1);
	assert_true(ns_tree_flagged(&f->ns, top));
}

/* A scratch file made and removed under a mark leaves the tree all
 * flagged, without writing the mark out. */
static void test_mark_forgets_removed_names(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 100);
	struct node *d1 = ns_lookup(&f->ns, top, "d1", 2)->child;
	struct costs before;

	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	before = costs_of(&f->ns);
	unit_mk(&f->ns, d1, "scratch", S_IFREG | 0644, ++f->now);
	assert_int_equal(ns_unlink(&f->ns, d1, "scratch", 7, false, ++f->now),
			 0);
	assert_true(ns_tree_flagged(&f->ns, top));
	assert_int_equal(costs_of(&f->ns).settled, before.settled);
	assert_int_equal(costs_of(&f->ns).walked, before.walked);
}

/* A clear under a mark writes the mark out first: the one name is
 * clear, the others stay flagged. */
static void test_clear_under_mark(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 100);
	struct node *d1 = ns_lookup(&f->ns, top, "d1", 2)->child;
	struct costs before;

	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	before = costs_of(&f->ns);
	assert_true(ns_set_eattr(&f->ns, d1, "f000000001", 10, false, false,
				 NS_ANY_OWNER, 0) >= 0);
	assert_int_equal(costs_of(&f->ns).settled - before.settled, 1);
	assert_false(flagged(&f->ns, d1, "f000000001"));
	assert_true(flagged(&f->ns, d1, "f000000003"));
	assert_int_equal(count_flags(&f->ns, top).flagged, 100 + 2 + 8 - 1);
	assert_int_equal(ns_tree_plain(top), 1);
	/* And a recursive clear over it all. */
	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	assert_true(ns_set_eattr(&f->ns, f->ns.root, "tree", 4, false, true,
				 NS_ANY_OWNER, 0) >= 0);
	assert_int_equal(count_flags(&f->ns, top).flagged, 0);
	assert_false(flagged(&f->ns, f->ns.root, "tree"));
}

/* A directory renamed out of a marked tree keeps its flags; one renamed
 * in does not take the mark's. */
static void test_rename_across_mark(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 100);
	struct node *other = mk_tree(f, "other", 100);
	struct node *d1 = ns_lookup(&f->ns, top, "d1", 2)->child;
	struct node *out;

	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	assert_int_equal(ns_rename(&f->ns, top, "d1", 2, f->ns.root, "out", 3,
				   0, f->ns.next_edge, false, ++f->now),
			 0);
	out = ns_lookup(&f->ns, f->ns.root, "out", 3)->child;
	assert_ptr_equal(out, d1);
	assert_true(flagged(&f->ns, f->ns.root, "out"));
	assert_int_equal(count_flags(&f->ns, out).flagged, 50 + 8);
	/* In: other/d0's names were never flagged. */
	assert_int_equal(ns_rename(&f->ns, other, "d0", 2, top, "in", 2, 0,
				   f->ns.next_edge, false, ++f->now),
			 0);
	assert_false(flagged(&f->ns, top, "in"));
	assert_int_equal(count_flags(&f->ns,
				     ns_lookup(&f->ns, top, "in", 2)->child)
				 .flagged,
			 0);
	assert_true(flagged(&f->ns, top, "d0"));
	assert_false(ns_tree_flagged(&f->ns, top));
}

/* @path's bytes, read whole; *@len their number. */
static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *p;
	long n;

	assert_non_null(fp);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	n = ftell(fp);
	assert_true(n > 0);
	rewind(fp);
	p = malloc((size_t)n);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	*len = (size_t)n;
	return p;
}

/* Write @p back to @path with its crc (the last 4 bytes) made right. */
static void spill(const char *path, uint8_t *p, size_t len)
{
	uint32_t crc = sw_crc32c(0, p, len - 4);
	FILE *fp = fopen(path, "wb");

	for (int i = 0; i < 4; i++)
		p[len - 4 + i] = (uint8_t)(crc >> (8 * i));
	assert_non_null(fp);
	assert_int_equal(fwrite(p, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

/* Where 'M' u64 @ino u64 @below sits in @p, or 0. */
static size_t find_mark(const uint8_t *p, size_t len, uint64_t ino,
			uint64_t below)
{
	uint8_t want[17] = { 'M' };

	for (int i = 0; i < 8; i++) {
		want[1 + i] = (uint8_t)(ino >> (8 * i));
		want[9 + i] = (uint8_t)(below >> (8 * i));
	}
	for (size_t i = 0; i + sizeof(want) <= len; i++)
		if (memcmp(p + i, want, sizeof(want)) == 0)
			return i;
	return 0;
}

/*
 * A checkpoint keeps the marks as marks (format 8) and each name its own
 * bit: loaded, the same names are flagged, the name made after the flag
 * still keeps rmsnapshot off the tree, and a recursive clear visits
 * nothing, as before the restart (the checkpoint wrote the marks out on
 * 17 M names, and the first clear after a restart walked them all with
 * the loop held). A mark on a directory in the trash comes back too.
 */
static void test_checkpoint_keeps_marks(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 1000), *other, *again;
	const struct ns_snapmark *mark = NULL;
	struct costs before;
	struct ns b;
	uint64_t version, below;
	char dir[256], path[512];
	uint8_t *data;
	size_t len, at;

	below = f->ns.next_edge;
	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	unit_mk(&f->ns, top, "late", S_IFREG | 0644, ++f->now);
	other = mk_tree(f, "other", 10);
	assert_true(set_r(&f->ns, other, "d1") >= 0);
	assert_int_equal(ns_trash_detach(&f->ns, other, "d1", 2, 1,
					 f->now + 100, f->now),
			 0);
	assert_int_equal(f->ns.nsnapmarks, 2);
	assert_int_equal(unit_mkdtemp(dir, sizeof(dir), "nsattr"), 0);
	assert_int_equal(checkpoint_write(&f->ns, dir, 7), 0);
	assert_int_equal(ns_init(&b, 0), 0);
	assert_int_equal(checkpoint_load(&b, dir, &version), 0);
	assert_int_equal(version, 7);
	assert_int_equal(b.nsnapmarks, 2);
	again = ns_lookup(&b, b.root, "tree", 4)->child;
	assert_int_equal(count_flags(&b, again).flagged, 1000 + 2 + 8);
	assert_int_equal(ns_tree_plain(again), 1000 + 2 + 8 + 1);
	assert_false(flagged(&b, again, "late"));
	/* The mark as it was: rmsnapshot still counts "late" against it. */
	for (unsigned i = 0; i < b.nsnapmarks; i++)
		if (b.snapmarks[i].dir == again)
			mark = &b.snapmarks[i];
	assert_non_null(mark);
	assert_int_equal(mark->below, below);
	assert_int_equal(mark->fresh, 1);
	assert_int_equal(count_flags(&b, ns_trash_find(&b, 1)->node).flagged,
			 5 + 8);
	before = costs_of(&b);
	assert_true(ns_set_eattr(&b, b.root, "tree", 4, false, true,
				 NS_ANY_OWNER, 0) >= 0);
	assert_int_equal(costs_of(&b).walked, before.walked);
	assert_int_equal(costs_of(&b).settled, before.settled);
	assert_int_equal(count_flags(&b, again).flagged, 0);
	ns_release(&b);

	/* The file: format 8; a mark naming a file is corruption. */
	snprintf(path, sizeof(path), "%s/checkpoint.%020d", dir, 7);
	data = slurp(path, &len);
	assert_int_equal(data[4], 8);
	at = find_mark(data, len, top->ino, below);
	assert_true(at > 0);
	data[at + 1] = (uint8_t)ns_lookup(&f->ns, top, "late", 4)->child->ino;
	assert_int_equal(data[at + 2], 0); /* the inode fits a byte */
	spill(path, data, len);
	assert_int_equal(ns_init(&b, 0), 0);
	assert_int_equal(checkpoint_load(&b, dir, &version), -EUCLEAN);
	ns_release(&b);
	free(data);
	unit_rm_rf(dir);
}

/* Replay applies the leader's record: the same mark, the same flags. */
static void test_replay_sets_the_same_mark(void **state)
{
	struct fixture *f = *state;
	Sweepfs__Meta__SetEattr se = SWEEPFS__META__SET_EATTR__INIT;
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	struct node *top = mk_tree(f, "tree", 1000);
	struct costs before = costs_of(&f->ns);

	se.parent = NS_ROOT_INO;
	se.name.data = (uint8_t *)"tree";
	se.name.len = 4;
	se.snapshot = true;
	se.has_recursive = se.recursive = true;
	se.has_below = 1;
	se.below = f->ns.next_edge;
	m.time = ++f->now;
	m.op_case = SWEEPFS__META__MUTATION__OP_SET_EATTR;
	m.set_eattr = &se;
	assert_int_equal(mutation_apply(&f->ns, &m, f->ns.version + 1), 0);
	assert_int_equal(costs_of(&f->ns).walked, before.walked);
	assert_int_equal(f->ns.nsnapmarks, 1);
	assert_int_equal(count_flags(&f->ns, top).flagged, 1000 + 2 + 8);
	assert_true(ns_tree_flagged(&f->ns, top));
}

/* A snapshot of a marked tree copies what the mark says, as bits; a
 * copy named inside a marked tree is not flagged by it. */
static void test_snapshot_copies_marks(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 100), *copy;
	struct sw_buf img = SW_BUF_INIT;
	uint64_t id = f->ns.version + 1, ino = 0;

	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	assert_int_equal(ns_copy_image(&f->ns, top, &img), 0);
	assert_int_equal(ns_copy_begin(&f->ns, id, top->ino, "snap", 4,
				       f->ns.next_chunk),
			 0);
	assert_int_equal(ns_copy_part(&f->ns, id, sw_buf_head(&img),
				      sw_buf_used(&img), f->ns.next_ino,
				      f->ns.next_edge),
			 0);
	assert_true(ns_copy_end(&f->ns, id, f->ns.next_edge, 0, ++f->now,
				&ino) > 0);
	sw_buf_release(&img);
	copy = ns_lookup(&f->ns, top, "snap", 4)->child;
	assert_int_equal(copy->ino, ino);
	/* Its names are new: flagged by their copied bits, not the mark. */
	assert_int_equal(f->ns.nsnapmarks, 0); /* written out: copy is in */
	assert_int_equal(count_flags(&f->ns, copy).flagged, 100 + 2 + 8);
	assert_false(flagged(&f->ns, top, "snap"));
}

/* A tree in the trash keeps the flags a mark over it gave; restored
 * into a marked tree, its names do not take that mark's. */
static void test_trash_round_trip(void **state)
{
	struct fixture *f = *state;
	struct node *top = mk_tree(f, "tree", 100);
	struct node *other = mk_tree(f, "other", 100);
	struct node *d0 = ns_lookup(&f->ns, top, "d0", 2)->child;
	struct node *o0 = ns_lookup(&f->ns, other, "d0", 2)->child;

	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	f->now++;
	assert_int_equal(ns_trash_detach(&f->ns, top, "d0", 2, 1, f->now + 100,
					 f->now),
			 0);
	assert_int_equal(count_flags(&f->ns, d0).flagged, 50);
	assert_int_equal(ns_trash_restore(&f->ns, 1, f->ns.root, "back", 4,
					  f->ns.next_edge, ++f->now),
			 0);
	assert_int_equal(count_flags(&f->ns, d0).flagged, 50);
	f->now++;
	assert_int_equal(ns_trash_detach(&f->ns, other, "d0", 2, 2,
					 f->now + 100, f->now),
			 0);
	assert_int_equal(ns_trash_restore(&f->ns, 2, top, "in", 2,
					  f->ns.next_edge, ++f->now),
			 0);
	assert_int_equal(count_flags(&f->ns, o0).flagged, 0);
	assert_true(flagged(&f->ns, top, "d1"));
	assert_true(flagged(&f->ns, ns_lookup(&f->ns, top, "d1", 2)->child,
			    "f000000001"));
}

/* The tree detached for the purge takes its mark with it. */
static void test_detach_drops_mark(void **state)
{
	struct fixture *f = *state;

	mk_tree(f, "tree", 100);
	assert_true(set_r(&f->ns, f->ns.root, "tree") >= 0);
	assert_int_equal(f->ns.nsnapmarks, 1);
	assert_int_equal(ns_detach(&f->ns, f->ns.root, "tree", 4, 1, ++f->now),
			 0);
	assert_int_equal(f->ns.nsnapmarks, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_eattr_recursive_visits_nothing),
		cmocka_unit_test_setup_teardown(
			test_set_eattr_without_edge_id_walks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mark_spares_new_names,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_mark_forgets_removed_names,
						setup, teardown),
		cmocka_unit_test(test_clear_recursive_of_mark_visits_nothing),
		cmocka_unit_test_setup_teardown(
			test_clear_recursive_bits_and_marks_above, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_clear_under_mark, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rename_across_mark, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_keeps_marks,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_replay_sets_the_same_mark,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_copies_marks,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_trash_round_trip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_detach_drops_mark, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
