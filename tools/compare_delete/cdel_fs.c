/*
 * cdel_fs: the filesystems compare-delete works on.
 *
 * Everything happens in a directory of our own, PATH/compare-delete.XXXXXX
 * (the "work" directory), removed at the end: the template of each size,
 * the copies the methods delete, and "probe", the file the stat probe
 * looks at. On sweepfs the probe looks through a second mount of the same
 * master with attribute and entry caching off, so that each stat() is a
 * request the master has to answer while it is busy with the deletion;
 * elsewhere it looks at the file directly.
 *
 * Copies: a snapshot on sweepfs (metadata only, instant), so every method
 * starts from the same tree at no cost; elsewhere the tree is built again
 * with the same generator, which makes the same names in the same order.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdel.h"
#include "progress.h"
#include "rmtree.h"
#include "util.h"

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] &&
		    s[3]) {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* The mount holding @real (resolved): longest mount point prefix. */
static int find_mount(const char *real, struct cdel_fs *fs)
{
	char line[8192];
	size_t best = 0;
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char mnt[4096], mopts[512], type[64], src[4096], sopts[500];
		char *sep = strstr(line, " - ");
		size_t n;

		/* id parent maj:min root mountpoint opts ... - type src sopts */
		if (!sep ||
		    sscanf(line, "%*s %*s %*s %*s %4095s %511s", mnt, mopts) !=
			    2 ||
		    sscanf(sep + 3, "%63s %4095s %499s", type, src, sopts) != 3)
			continue;
		unescape(mnt);
		n = strlen(mnt);
		if (strncmp(real, mnt, n) ||
		    (n > 1 && real[n] != '/' && real[n] != '\0') || n < best)
			continue;
		best = n;
		found = true;
		snprintf(fs->mnt, sizeof(fs->mnt), "%s", mnt);
		snprintf(fs->fstype, sizeof(fs->fstype), "%s", type);
		snprintf(fs->mnt_source, sizeof(fs->mnt_source), "%s", src);
		snprintf(fs->mnt_opts, sizeof(fs->mnt_opts), "%s %s", mopts,
			 sopts);
	}
	fclose(f);
	return found ? 0 : -ENOENT;
}

/* Whether @mnt is itself a sweepfs mount point. */
static bool is_sweepfs_mount(const char *mnt)
{
	struct cdel_fs probe = { 0 };

	return find_mount(mnt, &probe) == 0 && !strcmp(probe.mnt, mnt) &&
	       !strcmp(probe.fstype, "fuse.sweepfs");
}

/* The command line of the sweepfs-mount serving @mnt, for the record. */
static void mount_cmdline(const char *mnt, char *out, size_t len)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	out[0] = '\0';
	if (!d)
		return;
	while ((e = readdir(d)) && !out[0]) {
		char path[300], buf[4096];
		bool ours = false, has_mnt = false;
		ssize_t n;
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
			const char *base = strrchr(a, '/');

			if (a == buf)
				ours = !strcmp(base ? base + 1 : a,
					       "sweepfs-mount");
			else if (!strcmp(a, mnt))
				has_mnt = true;
		}
		if (!ours || !has_mnt)
			continue;
		for (char *a = buf; a < buf + n - 1; a++)
			if (!*a)
				*a = ' ';
		snprintf(out, len, "%s", buf);
	}
	closedir(d);
}

/* "sweepfs" or the type, made unique among the filesystems so far. */
static void make_label(struct cdel_run *r, struct cdel_fs *fs)
{
	const char *base = fs->sweepfs ? "sweepfs" : fs->fstype;
	int n = 1;

	if (!strncmp(base, "fuse.", 5))
		base += 5;
	snprintf(fs->label, sizeof(fs->label), "%.31s", base);
	for (int i = 0; i < r->nfs; i++) {
		if (&r->fs[i] == fs || strcmp(r->fs[i].label, fs->label))
			continue;
		snprintf(fs->label, sizeof(fs->label), "%.20s-%d", base, ++n);
		i = -1; /* check the new one against all again */
	}
}

/* Path below the export's root of @path (which is below fs->work). */
static void rel_of(const struct cdel_fs *fs, const char *path, char *rel,
		   size_t len)
{
	const char *tail = path + strlen(fs->work);

	snprintf(rel, len, "%s%s", fs->work_rel, tail);
	if (rel[0] == '/')
		memmove(rel, rel + 1, strlen(rel));
}

/* ---- the probe's mount ----------------------------------------------- */

static int spawn_probe_mount(struct cdel_run *r, struct cdel_fs *fs, int idx)
{
	char log[PATH_MAX + 32], spec[PATH_MAX];
	char *argv[8];
	int rc;

	if (!r->mount_bin[0])
		return -ENOENT;
	snprintf(fs->probe_mnt, sizeof(fs->probe_mnt), "%s/probe-mnt-%d",
		 r->tmp, idx);
	if (mkdir(fs->probe_mnt, 0755) < 0)
		return -errno;
	snprintf(log, sizeof(log), "%s/probe-mount-%d.log", r->tmp, idx);
	snprintf(spec, sizeof(spec), "%s", fs->mnt_source + 8);
	snprintf(fs->probe_opts, sizeof(fs->probe_opts),
		 "attr_timeout=0,entry_timeout=0");
	argv[0] = r->mount_bin;
	argv[1] = spec;
	argv[2] = fs->probe_mnt;
	argv[3] = "-f";
	argv[4] = "-o";
	argv[5] = fs->probe_opts;
	argv[6] = NULL;
	rc = cdel_spawn(argv, NULL, log, NULL, &fs->probe_pid);
	if (rc < 0) {
		fs->probe_pid = 0;
		return rc;
	}
	for (int i = 0; i < 300; i++) {
		int st;

		if (is_sweepfs_mount(fs->probe_mnt))
			return 0;
		if (waitpid(fs->probe_pid, &st, WNOHANG) == fs->probe_pid) {
			fs->probe_pid = 0;
			return -EIO;
		}
		usleep(50 * 1000);
	}
	return -ETIMEDOUT;
}

static void unmount_probe(struct cdel_run *r, struct cdel_fs *fs)
{
	char fusermount[PATH_MAX];
	char *argv[5];

	if (!fs->probe_pid)
		return;
	if (cdel_which("fusermount3", fusermount, sizeof(fusermount)) ||
	    cdel_which("fusermount", fusermount, sizeof(fusermount))) {
		argv[0] = fusermount;
		argv[1] = "-u";
		argv[2] = fs->probe_mnt;
		argv[3] = NULL;
		if (is_sweepfs_mount(fs->probe_mnt) &&
		    cdel_run_prog(argv, "/", NULL, NULL) != 0) {
			/* Busy: detach it now, it goes when unused. */
			argv[1] = "-uz";
			cdel_run_prog(argv, "/", NULL, NULL);
		}
	}
	/* It exits once unmounted; after 10 s it is stopped. */
	cdel_wait(fs->probe_pid, sw_mono_ns() + 10 * SW_NSEC_PER_SEC);
	fs->probe_pid = 0;
	if (!is_sweepfs_mount(fs->probe_mnt))
		rmdir(fs->probe_mnt);
	(void)r;
}

/*
 * Where the work directory is seen through the probe's mount @mnt, a
 * mount of export @sub (its subdir). @full is work's path in the master's
 * namespace.
 */
static int probe_path(const char *mnt, const char *sub, const char *full,
		      char *out, size_t len)
{
	size_t n = strlen(sub);

	if (!strcmp(sub, "/"))
		n = 0;
	if (strncmp(full, sub, n) || (full[n] != '/' && full[n] != '\0'))
		return -ENOENT;
	snprintf(out, len, "%s%s", mnt, full + n);
	return 0;
}

static void setup_probe(struct cdel_run *r, struct cdel_fs *fs, int idx)
{
	char full[PATH_MAX * 2], path[PATH_MAX * 2];
	struct sw_target t;
	struct stat st;
	int rc;

	/* Work's path in the master's namespace. */
	snprintf(full, sizeof(full), "%s/%s",
		 strcmp(fs->target.subdir, "/") ? fs->target.subdir : "",
		 fs->work_rel);
	if (r->probe_mount) {
		char real[PATH_MAX], rel[PATH_MAX];

		if (!realpath(r->probe_mount, real) ||
		    tool_locate(real, &t, rel, sizeof(rel)) < 0 || rel[0]) {
			snprintf(fs->probe_note, sizeof(fs->probe_note),
				 "--probe-mount %.150s is not a sweepfs mount "
				 "point",
				 r->probe_mount);
			return;
		}
		if (!sw_target_same(&t, &fs->target)) {
			snprintf(fs->probe_note, sizeof(fs->probe_note),
				 "--probe-mount %.150s is another master's",
				 r->probe_mount);
			return;
		}
		snprintf(fs->probe_mnt, sizeof(fs->probe_mnt), "%s", real);
		snprintf(fs->probe_opts, sizeof(fs->probe_opts), "(given)");
		rc = probe_path(real, t.subdir, full, path, sizeof(path));
	} else {
		rc = spawn_probe_mount(r, fs, idx);
		if (rc < 0) {
			snprintf(fs->probe_note, sizeof(fs->probe_note),
				 "cannot mount a second client (%.100s): %s",
				 r->mount_bin[0] ? r->mount_bin :
						   "no sweepfs-mount found",
				 strerror(-rc));
			unmount_probe(r, fs);
			return;
		}
		rc = probe_path(fs->probe_mnt, fs->target.subdir, full, path,
				sizeof(path));
	}
	if (rc == 0 && strlen(path) < sizeof(fs->probe_dir))
		memcpy(fs->probe_dir, path, strlen(path) + 1);
	else
		rc = -ENAMETOOLONG;
	if (rc == 0) {
		char file[PATH_MAX * 2 + 8];

		snprintf(file, sizeof(file), "%s/probe", path);
		if (lstat(file, &st) < 0)
			rc = -errno;
	}
	if (rc < 0) {
		snprintf(fs->probe_note, sizeof(fs->probe_note),
			 "the work directory is not visible through %.100s: "
			 "%s",
			 fs->probe_mnt, strerror(-rc));
		return;
	}
	fs->probe_ok = true;
}

/* ---- set-up and clean-up ---------------------------------------------- */

static int setup_sweepfs(struct cdel_run *r, struct cdel_fs *fs, int idx)
{
	char host[256];
	uint32_t tt = 0;
	int rc;

	rc = tool_locate(fs->work, &fs->target, fs->work_rel,
			 sizeof(fs->work_rel));
	if (rc < 0) {
		fprintf(stderr, "sweepfs compare-delete: %s: %s\n", fs->work,
			strerror(-rc));
		return rc;
	}
	if ((rc = tool_connect_target(&fs->target, &fs->ctl)) < 0 ||
	    (rc = tool_connect_target(&fs->target, &fs->mon)) < 0)
		return rc;
	rc = cdel_info(fs->ctl, false, &fs->info0);
	if (rc < 0) {
		fprintf(stderr,
			"sweepfs compare-delete: the master's status: "
			"%s\n",
			strerror(-rc));
		return rc;
	}
	/* sweepfs-mount says hello as "HOST:MOUNTPOINT". */
	if (gethostname(host, sizeof(host)) < 0)
		strcpy(host, "?");
	snprintf(fs->session_name, sizeof(fs->session_name), "%s:%s", host,
		 fs->mnt);
	fs->mount_session = cdel_find_session(fs->ctl, fs->session_name);
	if (!fs->mount_session)
		fprintf(stderr,
			"sweepfs compare-delete: warning: no session "
			"'%s' on the master: traffic through the mount "
			"will be the master's total\n",
			fs->session_name);
	mount_cmdline(fs->mnt, fs->mount_cmdline, sizeof(fs->mount_cmdline));
	/* Removed files must go, not into the trash. New directories
	 * inherit the trash time: zero it on ours if it is not. */
	rc = cdel_trashtime(fs->ctl, fs->work_rel, &tt, false);
	fs->trashtime0 = tt;
	if (rc == 0 && tt)
		rc = cdel_trashtime(fs->ctl, fs->work_rel, &tt, true);
	if (rc < 0) {
		fprintf(stderr, "sweepfs compare-delete: %s: trash time: %s\n",
			fs->work, strerror(-rc));
		return rc;
	}
	setup_probe(r, fs, idx);
	return 0;
}

int cdel_fs_setup(struct cdel_run *r, struct cdel_fs *fs, bool sweepfs_required)
{
	char probe[PATH_MAX + 8], real[PATH_MAX];
	struct stat st;
	int rc, idx = (int)(fs - r->fs);

	if (!realpath(fs->arg, real) || stat(real, &st) < 0 ||
	    (strlen(real) >= sizeof(fs->root) && (errno = ENAMETOOLONG))) {
		rc = -errno;
		fprintf(stderr, "sweepfs compare-delete: %s: %s\n", fs->arg,
			strerror(-rc));
		return rc;
	}
	memcpy(fs->root, real, strlen(real) + 1);
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "sweepfs compare-delete: %s: not a directory\n",
			fs->arg);
		return -ENOTDIR;
	}
	rc = find_mount(fs->root, fs);
	if (rc < 0) {
		fprintf(stderr,
			"sweepfs compare-delete: %s: no mount found: "
			"%s\n",
			fs->arg, strerror(-rc));
		return rc;
	}
	fs->sweepfs = !strcmp(fs->fstype, "fuse.sweepfs") &&
		      !strncmp(fs->mnt_source, "sweepfs:", 8);
	if (sweepfs_required && !fs->sweepfs) {
		fprintf(stderr,
			"sweepfs compare-delete: %s is not on a sweepfs "
			"mount (it is on %s, %s); give that with --also\n",
			fs->arg, fs->fstype, fs->mnt);
		tool_record(TOOL_NOT_SWEEPFS);
		return -EINVAL;
	}
	make_label(r, fs);
	snprintf(fs->work, sizeof(fs->work), "%s/compare-delete.XXXXXX",
		 strcmp(fs->root, "/") ? fs->root : "");
	if (!mkdtemp(fs->work)) {
		rc = -errno;
		fprintf(stderr,
			"sweepfs compare-delete: cannot make a "
			"directory in %s: %s\n",
			fs->root, strerror(-rc));
		fs->work[0] = '\0';
		return rc;
	}
	chmod(fs->work, 0755);
	snprintf(probe, sizeof(probe), "%s/probe", fs->work);
	if (mknod(probe, S_IFREG | 0644, 0) < 0) {
		rc = -errno;
		fprintf(stderr, "sweepfs compare-delete: %s: %s\n", probe,
			strerror(-rc));
		return rc;
	}
	if (fs->sweepfs)
		return setup_sweepfs(r, fs, idx);
	snprintf(fs->probe_dir, sizeof(fs->probe_dir), "%s", fs->work);
	fs->probe_ok = true;
	return 0;
}

void cdel_fs_cleanup(struct cdel_run *r, struct cdel_fs *fs)
{
	if (fs->work[0]) {
		fprintf(stderr, "removing %s\n", fs->work);
		if (cdel_fs_remove(r, fs, fs->work) < 0)
			fprintf(stderr,
				"sweepfs compare-delete: could not "
				"remove all of %s\n",
				fs->work);
		fs->work[0] = '\0';
	}
	unmount_probe(r, fs);
	if (fs->ctl)
		sw_client_close(fs->ctl);
	if (fs->mon)
		sw_client_close(fs->mon);
	fs->ctl = fs->mon = NULL;
	if (fs->info0)
		protobuf_c_message_free_unpacked(&fs->info0->base, NULL);
	fs->info0 = NULL;
}

/* ---- trees ----------------------------------------------------------- */

static int build_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *p = arg;

	progress_set_total(p, total);
	progress_update(p, done);
	return cdel_cancelled();
}

int cdel_fs_build(struct cdel_run *r, struct cdel_fs *fs, const char *path,
		  uint64_t n, const char *label)
{
	struct progress p;
	int rc;

	progress_start(&p, label, "entries", 0);
	rc = treegen_build(AT_FDCWD, path, r->shape, n, build_progress, &p);
	progress_end(&p, rc < 0 ? p.rate_done : p.total);
	(void)fs;
	return rc;
}

int cdel_fs_copy(struct cdel_run *r, struct cdel_fs *fs, const char *tmpl,
		 const char *dst, uint64_t n)
{
	char srel[PATH_MAX], label[64];
	const char *name = strrchr(dst, '/') + 1;

	if (!fs->sweepfs) {
		snprintf(label, sizeof(label), "copying on %s", fs->label);
		return cdel_fs_build(r, fs, dst, n, label);
	}
	rel_of(fs, tmpl, srel, sizeof(srel));
	return cdel_snapshot(fs->ctl, srel, fs->work_rel, name, r->timeout_s);
}

int cdel_fs_remove(struct cdel_run *r, struct cdel_fs *fs, const char *path)
{
	struct rmtree_opts o = { .jobs = 2, .force = true };
	struct stat st;
	char rel[PATH_MAX];

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fs->sweepfs && fs->ctl) {
		rel_of(fs, path, rel, sizeof(rel));
		if (cdel_rmr_path(fs->ctl, rel, r->timeout_s) == 0)
			return 0;
	}
	return rmtree_remove(AT_FDCWD, path, &o, NULL);
}

void cdel_fs_settle(struct cdel_run *r, struct cdel_fs *fs)
{
	int fd;

	/* Purges of earlier methods (or of anyone) would run meanwhile. */
	if (fs->sweepfs && cdel_wait_purge(fs->ctl, 0, 600) == -ETIMEDOUT)
		fprintf(stderr, "sweepfs compare-delete: the master is still "
				"purging after 10 minutes; going on\n");
	if (!r->drop_caches || geteuid() != 0)
		return;
	/* Dirty inodes stay in the cache: write them first. */
	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		/* 2: dentries and inodes, what a deletion walks through. */
		r->caches_dropped = write(fd, "2", 1) == 1;
		close(fd);
	}
}
