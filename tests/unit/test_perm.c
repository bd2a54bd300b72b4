/*
 * perm.h and the rule under it, common/access.h: Linux's
 * generic_permission() and check_sticky(), which the master and the
 * mount's delegation code both apply.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <fcntl.h>

#include <cmocka.h>

#include "frame.h"
#include "perm.h"

struct fixture {
	struct node file; /* owner 100, group 200 */
	struct node dir;  /* owner 100, group 200 */
	uint32_t groups[3];
	struct sw_cred owner;  /* uid 100, gid 999 */
	struct sw_cred member; /* uid 101, primary gid 200 */
	struct sw_cred suppl;  /* uid 102, 200 among its supplementary groups */
	struct sw_cred other;  /* uid 103, unrelated groups */
	struct sw_cred root;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->file.ino = 2;
	f->file.mode = S_IFREG;
	f->file.uid = 100;
	f->file.gid = 200;
	f->dir.ino = 3;
	f->dir.mode = S_IFDIR;
	f->dir.uid = 100;
	f->dir.gid = 200;
	f->groups[0] = 5;
	f->groups[1] = 200;
	f->groups[2] = 7;
	f->owner = (struct sw_cred){ .uid = 100, .gid = 999 };
	f->member = (struct sw_cred){ .uid = 101, .gid = 200 };
	f->suppl = (struct sw_cred){
		.uid = 102, .gid = 300, .ngroups = 3, .groups = f->groups
	};
	f->other = (struct sw_cred){
		.uid = 103, .gid = 300, .ngroups = 1, .groups = f->groups
	};
	f->root = (struct sw_cred){ .uid = 0, .gid = 0 };
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

/* Every mask 0..7 against the granted bits @g: allowed iff mask within g. */
static void check_class(const struct sw_cred *c, struct node *n, unsigned shift)
{
	for (unsigned g = 0; g < 8; g++) {
		n->mode = (n->mode & S_IFMT) | (g << shift);
		for (int mask = 0; mask < 8; mask++) {
			int want = ((unsigned)mask & ~g) ? -EACCES : 0;

			assert_int_equal(perm_check(c, n, mask), want);
		}
	}
}

static void test_perm_check_owner_bits(void **state)
{
	struct fixture *f = *state;

	check_class(&f->owner, &f->file, 6);
	/* Only the owner class counts for the owner, even when the group or
	 * other class would grant more (Linux: no fallthrough). */
	f->file.mode = S_IFREG | 0077;
	assert_int_equal(perm_check(&f->owner, &f->file, PERM_R), -EACCES);
	f->owner.gid = 200; /* owner and member of the group */
	assert_int_equal(perm_check(&f->owner, &f->file, PERM_W), -EACCES);
	f->file.mode = S_IFREG | 0700;
	assert_int_equal(
		perm_check(&f->owner, &f->file, PERM_R | PERM_W | PERM_X), 0);
}

static void test_perm_check_group_bits(void **state)
{
	struct fixture *f = *state;

	check_class(&f->member, &f->file, 3);
	/* The group class applies even when other grants more. */
	f->file.mode = S_IFREG | 0707;
	assert_int_equal(perm_check(&f->member, &f->file, PERM_R), -EACCES);
}

static void test_perm_check_supplementary_groups(void **state)
{
	struct fixture *f = *state;

	assert_true(cred_in_group(&f->suppl, 200));
	assert_true(cred_in_group(&f->suppl, 5));
	assert_true(cred_in_group(&f->suppl, 300));
	assert_false(cred_in_group(&f->suppl, 6));
	/* Only the first group is in @other's list. */
	assert_false(cred_in_group(&f->other, 200));
	check_class(&f->suppl, &f->file, 3);
	f->file.mode = S_IFREG | 0040;
	assert_int_equal(perm_check(&f->suppl, &f->file, PERM_R), 0);
	assert_int_equal(perm_check(&f->other, &f->file, PERM_R), -EACCES);
}

static void test_perm_check_other_bits(void **state)
{
	struct fixture *f = *state;

	check_class(&f->other, &f->file, 0);
	check_class(&f->other, &f->dir, 0);
	f->file.mode = S_IFREG | 0770;
	assert_int_equal(perm_check(&f->other, &f->file, PERM_R), -EACCES);
}

static void test_perm_check_root(void **state)
{
	struct fixture *f = *state;

	/* Read and write anything. */
	f->file.mode = S_IFREG | 0000;
	assert_int_equal(perm_check(&f->root, &f->file, PERM_R | PERM_W), 0);
	/* Execute a file only if some x bit is set. */
	assert_int_equal(perm_check(&f->root, &f->file, PERM_X), -EACCES);
	assert_int_equal(perm_check(&f->root, &f->file, PERM_R | PERM_X),
			 -EACCES);
	f->file.mode = S_IFREG | 0644;
	assert_int_equal(perm_check(&f->root, &f->file, PERM_X), -EACCES);
	for (unsigned x = 0100; x; x >>= 3) {
		f->file.mode = S_IFREG | x;
		assert_int_equal(perm_check(&f->root, &f->file,
					    PERM_R | PERM_W | PERM_X),
				 0);
	}
	/* A directory is always searchable by root. */
	f->dir.mode = S_IFDIR | 0000;
	assert_int_equal(
		perm_check(&f->root, &f->dir, PERM_R | PERM_W | PERM_X), 0);
	assert_true(cred_is_root(&f->root));
	assert_true(cred_owns(&f->root, &f->file));
	assert_false(cred_is_root(&f->owner));
}

static void test_cred_owns_owner(void **state)
{
	struct fixture *f = *state;

	assert_true(cred_owns(&f->owner, &f->file));
	assert_false(cred_owns(&f->member, &f->file));
	assert_false(cred_owns(&f->other, &f->file));
}

static void test_perm_sticky_rules(void **state)
{
	struct fixture *f = *state;
	struct node victim = {
		.ino = 9, .mode = S_IFREG | 0666, .uid = 101, .gid = 200
	};

	/* Without the sticky bit anyone may (write permission is separate). */
	f->dir.mode = S_IFDIR | 0777;
	assert_int_equal(perm_sticky(&f->other, &f->dir, &victim), 0);
	f->dir.mode = S_IFDIR | 01777;
	/* Neither the directory's nor the victim's owner: refused. */
	assert_int_equal(perm_sticky(&f->other, &f->dir, &victim), -EPERM);
	assert_int_equal(perm_sticky(&f->suppl, &f->dir, &victim), -EPERM);
	/* The victim's owner, the directory's owner and root may. */
	assert_int_equal(perm_sticky(&f->member, &f->dir, &victim), 0);
	assert_int_equal(perm_sticky(&f->owner, &f->dir, &victim), 0);
	assert_int_equal(perm_sticky(&f->root, &f->dir, &victim), 0);
	/* Group ownership does not count. */
	victim.uid = 555;
	assert_int_equal(perm_sticky(&f->member, &f->dir, &victim), -EPERM);
}

/*
 * The rule mount/deleg.c had as a copy of its own until the two shared
 * access.h: may @c add or remove a name in a directory of @mode? Kept
 * here as the reference the shared rule must still agree with.
 */
static int old_mount_may_modify(const struct sw_cred *c, unsigned mode,
				uint32_t uid, uint32_t gid)
{
	unsigned granted;

	if (c->uid == 0)
		return 0;
	if (c->uid == uid)
		granted = (mode >> 6) & 7;
	else if (sw_cred_in_group(c, gid))
		granted = (mode >> 3) & 7;
	else
		granted = mode & 7;
	return (granted & 3) == 3 ? 0 : -EACCES;
}

/* The mount's delegated create/unlink check and the master's
 * may_modify_dir() decide alike for every directory mode and caller. */
static void test_access_dir_modify_every_mode(void **state)
{
	struct fixture *f = *state;
	const struct sw_cred *who[] = { &f->owner, &f->member, &f->suppl,
					&f->other, &f->root };

	for (size_t i = 0; i < sizeof(who) / sizeof(who[0]); i++) {
		for (unsigned bits = 0; bits <= 07777; bits++) {
			f->dir.mode = S_IFDIR | bits;
			assert_int_equal(
				sw_access_check(who[i], f->dir.mode, f->dir.uid,
						f->dir.gid,
						SW_MAY_WRITE | SW_MAY_EXEC),
				old_mount_may_modify(who[i], f->dir.mode,
						     f->dir.uid, f->dir.gid));
			assert_int_equal(
				perm_check(who[i], &f->dir, PERM_W | PERM_X),
				sw_access_check(who[i], f->dir.mode, f->dir.uid,
						f->dir.gid,
						SW_MAY_WRITE | SW_MAY_EXEC));
		}
	}
}

/* sw_access_sticky_any() (what the mount can tell without the victim's
 * owner) never allows what sw_access_sticky() (the master's) refuses,
 * and refuses only where some victim would be refused. */
static void test_access_sticky_any_agrees(void **state)
{
	struct fixture *f = *state;
	const struct sw_cred *who[] = { &f->owner, &f->member, &f->suppl,
					&f->other, &f->root };
	const uint32_t owners[] = { 0, 100, 101, 102, 103, 555 };
	const unsigned modes[] = { S_IFDIR | 0777, S_IFDIR | 01777,
				   S_IFDIR | 01000, S_IFDIR | 0 };

	for (size_t i = 0; i < sizeof(who) / sizeof(who[0]); i++)
		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
			for (size_t d = 0; d < 6; d++) {
				bool any = sw_access_sticky_any(
					who[i], modes[m], owners[d]);
				bool some_refused = false;

				for (size_t v = 0; v < 6; v++) {
					int rc = sw_access_sticky(who[i],
								  modes[m],
								  owners[d],
								  owners[v]);

					if (any)
						assert_int_equal(rc, 0);
					if (rc < 0) {
						assert_int_equal(rc, -EPERM);
						some_refused = true;
					}
				}
				assert_true(any != some_refused);
			}
}

static void test_access_open_mask_flags(void **state)
{
	(void)state;
	assert_int_equal(sw_access_open_mask(O_RDONLY), SW_MAY_READ);
	assert_int_equal(sw_access_open_mask(O_WRONLY), SW_MAY_WRITE);
	assert_int_equal(sw_access_open_mask(O_RDWR),
			 SW_MAY_READ | SW_MAY_WRITE);
	assert_int_equal(sw_access_open_mask(O_RDONLY | O_TRUNC),
			 SW_MAY_READ | SW_MAY_WRITE);
	assert_int_equal(sw_access_open_mask(O_RDONLY | SW_O_EXEC),
			 SW_MAY_READ | SW_MAY_EXEC);
	assert_int_equal(perm_open_mask(O_RDWR | O_CREAT), PERM_R | PERM_W);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_perm_check_owner_bits,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_perm_check_group_bits,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_perm_check_supplementary_groups, setup, teardown),
		cmocka_unit_test_setup_teardown(test_perm_check_other_bits,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_perm_check_root, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cred_owns_owner, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_perm_sticky_rules, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_access_dir_modify_every_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_access_sticky_any_agrees,
						setup, teardown),
		cmocka_unit_test(test_access_open_mask_flags),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
