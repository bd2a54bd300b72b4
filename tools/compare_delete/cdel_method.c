/*
 * cdel_method: the deletion methods compare-delete runs, and measuring
 * one run of one of them.
 *
 * Around every timed deletion: the master's counters before and after
 * (sweepfs), a stat() probe on a second client, a progress thread, and a
 * deadline. What is timed is only the deletion itself: the copy was made
 * and the caches dropped by the caller, the path's lookups for the
 * master's own methods are done before the clock starts, and the
 * counters are read outside the interval.
 *
 * Whose traffic: on sweepfs the master counts per session. A deletion
 * through the mount is the traffic of the mount's session; rmr and the
 * snapshot removal get a connection of their own, opened for the method,
 * whose session is theirs alone. The probe, the progress thread and our
 * control connection are other sessions, so none of them is counted as
 * the deletion's traffic (they are in the master's total, kept too).
 *
 * System calls: the in-process methods count their own through their
 * system call tables (removeall.h, rmtree.h), which also make them give
 * up (ECANCELED) when the run is stopped or the deadline passes. The
 * programs (rm, the Go program) are counted by strace -c, in the timed
 * run or in a second one (enum cdel_strace), because strace slows a
 * deleter down several times over on a local disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cdel.h"
#include "progress.h"
#include "removeall.h"
#include "rmtree.h"
#include "util.h"

const struct cdel_method cdel_methods[CDEL_NMETHODS] = {
	[CDEL_RM_RF] = { "rm-rf", "coreutils rm -rf, as a child process", false,
			 true },
	[CDEL_REMOVEALL] = { "removeall",
			     "Go's os.RemoveAll algorithm, in C, in-process",
			     false, false },
	[CDEL_GO_REMOVEALL] = { "go-removeall",
				"the real os.RemoveAll (go-removeall/main.go)",
				false, true },
	[CDEL_SWEEPFS_RM] = { "sweepfs-rm",
			      "sweepfs rm's engine (rmtree.h), in-process",
			      false, false },
	[CDEL_RMR] = { "rmr", "sweepfs rmr: one request, then the purge", true,
		       false },
	[CDEL_SNAPSHOT] = { "snapshot",
			    "seteattr -f snapshot -r, rmsnapshot, the purge",
			    true, false },
};

int cdel_method_find(const char *name)
{
	for (int m = 0; m < CDEL_NMETHODS; m++)
		if (!strcmp(cdel_methods[m].name, name))
			return m;
	return -1;
}

static double secs(int64_t from, int64_t to)
{
	return (double)(to - from) / 1e9;
}

static void note(struct cdel_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Append to res->note ("; " between parts). */
static void note(struct cdel_result *res, const char *fmt, ...)
{
	size_t len = strlen(res->note);
	va_list ap;

	if (len && len + 2 < sizeof(res->note)) {
		strcpy(res->note + len, "; ");
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(res->note + len, sizeof(res->note) - len, fmt, ap);
	va_end(ap);
}

static void failed(struct cdel_result *res, const char *what, int rc)
{
	res->status = CDEL_FAILED;
	if (rc == -ETIMEDOUT)
		note(res, "%s: timed out", what);
	else if (rc == -EINTR || (rc == -ECANCELED && atomic_load(&cdel_stop)))
		note(res, "%s: interrupted", what);
	else if (rc == -ECANCELED)
		note(res, "%s: timed out", what);
	else
		note(res, "%s: %s", what, strerror(-rc));
}

static void sys_add(struct cdel_syscalls *s, const char *name, uint64_t n)
{
	if (n == 0)
		return;
	s->total += n;
	for (int i = 0; i < s->n; i++) {
		if (!strcmp(s->v[i].name, name)) {
			s->v[i].calls += n;
			return;
		}
	}
	if (s->n == CDEL_MAX_SYSCALLS)
		return;
	snprintf(s->v[s->n].name, sizeof(s->v[s->n].name), "%s", name);
	s->v[s->n].calls = n;
	s->n++;
}

/* ---- strace -c ------------------------------------------------------- */

/*
 * The summary strace -c -o FILE writes:
 *
 *   % time     seconds  usecs/call     calls    errors syscall
 *   ------ ----------- ----------- --------- --------- ----------------
 *    99.61    0.161512          53      3002           unlinkat
 *   ...
 *   100.00    0.162141          52      3065         6 total
 *
 * The errors column is empty for calls that never failed.
 */
static int parse_strace(const char *file, struct cdel_syscalls *s)
{
	char line[512];
	FILE *f = fopen(file, "re");

	memset(s, 0, sizeof(*s));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *tok[8], *save = NULL, *t;
		int n = 0;

		for (t = strtok_r(line, " \t\n", &save); t && n < 8;
		     t = strtok_r(NULL, " \t\n", &save))
			tok[n++] = t;
		if ((n != 5 && n != 6) || !strchr(tok[0], '.'))
			continue;
		if (!strcmp(tok[n - 1], "total")) {
			s->valid = true;
			continue;
		}
		sys_add(s, tok[n - 1], strtoull(tok[3], NULL, 10));
		if (n == 6 && s->n > 0 &&
		    !strcmp(s->v[s->n - 1].name, tok[n - 1]))
			s->v[s->n - 1].errors = strtoull(tok[4], NULL, 10);
	}
	fclose(f);
	s->source = "strace";
	return s->valid ? 0 : -EPROTO;
}

/* ---- system call tables that count and can be cancelled -------------- */

/* sweepfs-rm's calls, by type; its workers are threads: atomics. */
enum {
	RT_OPENAT,
	RT_GETDENTS,
	RT_UNLINKAT,
	RT_FSTATAT,
	RT_FSTAT,
	RT_FCHMOD,
	RT_FCHMODAT,
	RT_CLOSE,
	RT_LSEEK,
	RT_NCALLS
};

static _Atomic uint64_t rt_calls[RT_NCALLS];

static bool cancel_call(void)
{
	if (!cdel_cancelled())
		return false;
	errno = ECANCELED;
	return true;
}

static void rt_count(int call)
{
	atomic_fetch_add_explicit(&rt_calls[call], 1, memory_order_relaxed);
}

static int rt_openat(int dirfd, const char *name, int flags)
{
	if (cancel_call())
		return -1;
	rt_count(RT_OPENAT);
	return rmtree_sys_default.openat(dirfd, name, flags);
}

static ssize_t rt_getdents64(int fd, void *buf, size_t len)
{
	if (cancel_call())
		return -1;
	rt_count(RT_GETDENTS);
	return rmtree_sys_default.getdents64(fd, buf, len);
}

static int rt_unlinkat(int dirfd, const char *name, int flags)
{
	if (cancel_call())
		return -1;
	rt_count(RT_UNLINKAT);
	return rmtree_sys_default.unlinkat(dirfd, name, flags);
}

static int rt_fstatat(int dirfd, const char *name, struct stat *st, int flags)
{
	rt_count(RT_FSTATAT);
	return rmtree_sys_default.fstatat(dirfd, name, st, flags);
}

static int rt_fstat(int fd, struct stat *st)
{
	rt_count(RT_FSTAT);
	return rmtree_sys_default.fstat(fd, st);
}

static int rt_fchmod(int fd, mode_t mode)
{
	rt_count(RT_FCHMOD);
	return rmtree_sys_default.fchmod(fd, mode);
}

static int rt_fchmodat(int dirfd, const char *name, mode_t mode, int flags)
{
	rt_count(RT_FCHMODAT);
	return rmtree_sys_default.fchmodat(dirfd, name, mode, flags);
}

static int rt_close(int fd)
{
	rt_count(RT_CLOSE);
	return rmtree_sys_default.close(fd);
}

static off_t rt_lseek(int fd, off_t off, int whence)
{
	rt_count(RT_LSEEK);
	return rmtree_sys_default.lseek(fd, off, whence);
}

static const struct rmtree_sys rt_sys = {
	.openat = rt_openat,
	.getdents64 = rt_getdents64,
	.unlinkat = rt_unlinkat,
	.fstatat = rt_fstatat,
	.fstat = rt_fstat,
	.fchmod = rt_fchmod,
	.fchmodat = rt_fchmodat,
	.close = rt_close,
	.lseek = rt_lseek,
};

static int ra_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return cancel_call() ?
		       -1 :
		       removeall_sys_default.openat(dirfd, path, flags, mode);
}

static ssize_t ra_getdents64(int fd, void *buf, size_t len)
{
	return cancel_call() ? -1 :
			       removeall_sys_default.getdents64(fd, buf, len);
}

static int ra_unlinkat(int dirfd, const char *path, int flags)
{
	return cancel_call() ?
		       -1 :
		       removeall_sys_default.unlinkat(dirfd, path, flags);
}

static ssize_t ra_readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	return removeall_sys_default.readlinkat(dirfd, path, buf, len);
}

static int ra_fcntl(int fd, int cmd, int arg)
{
	return removeall_sys_default.fcntl(fd, cmd, arg);
}

static int ra_close(int fd)
{
	return removeall_sys_default.close(fd);
}

static const struct removeall_sys ra_sys = {
	.openat = ra_openat,
	.getdents64 = ra_getdents64,
	.unlinkat = ra_unlinkat,
	.readlinkat = ra_readlinkat,
	.fcntl = ra_fcntl,
	.close = ra_close,
};

/* ---- progress -------------------------------------------------------- */

/*
 * A thread that shows how far the deletion got, from the outside: the
 * master's node count on sweepfs (on a connection of its own), the used
 * inodes of the filesystem elsewhere. Other activity on the filesystem
 * shows up too; it is a progress bar, not a measurement.
 */
struct monitor {
	pthread_t thread;
	atomic_bool stop;
	bool started;
	struct cdel_fs *fs;
	struct progress line; /* drawn by the monitor's thread only */
	uint64_t total;	      /* entries in the tree */
	uint64_t base;	      /* nodes or used inodes at the start */
	uint64_t gone;	      /* as last sampled */
};

static int monitor_sample(struct monitor *m, uint64_t *used)
{
	struct cdel_counters c;
	struct statvfs sv;

	if (m->fs->sweepfs) {
		int rc = cdel_counters(m->fs->mon, 0, &c);

		*used = c.nodes;
		return rc;
	}
	if (statvfs(m->fs->work, &sv) < 0)
		return -errno;
	*used = (uint64_t)(sv.f_files - sv.f_ffree);
	return 0;
}

static void *monitor_main(void *arg)
{
	struct monitor *m = arg;

	while (!atomic_load(&m->stop)) {
		uint64_t used;

		if (monitor_sample(m, &used) == 0) {
			uint64_t gone = m->base > used ? m->base - used : 0;

			/* Never 100% here: that is the end's. */
			m->gone = SW_MIN(gone, m->total - 1);
			progress_update(&m->line, m->gone);
		}
		for (int i = 0; i < 10 && !atomic_load(&m->stop); i++)
			usleep(20 * 1000);
	}
	return NULL;
}

static void monitor_start(struct monitor *m, struct cdel_fs *fs,
			  const char *label, uint64_t total)
{
	memset(m, 0, sizeof(*m));
	m->fs = fs;
	m->total = total;
	progress_start(&m->line, label, "entries", total);
	if (total < 2 || monitor_sample(m, &m->base) < 0)
		return;
	atomic_init(&m->stop, false);
	m->started = pthread_create(&m->thread, NULL, monitor_main, m) == 0;
}

static void monitor_stop(struct monitor *m, bool done)
{
	if (m->started) {
		atomic_store(&m->stop, true);
		pthread_join(m->thread, NULL);
	}
	progress_end(&m->line, done ? m->total : m->gone);
}

/* ---- the methods ----------------------------------------------------- */

/* What a method needs besides the tree. */
struct job {
	struct cdel_run *r;
	struct cdel_fs *fs;
	const char *tree;
	enum cdel_pass pass;
	struct cdel_result *res;
	int64_t deadline;
	/* rmr, snapshot: their connection and the tree's entry */
	struct sw_client *del;
	uint64_t parent;
	char name[256];
};

/* The first line of @file into @buf (for a child's complaint). */
static void first_line(const char *file, char *buf, size_t len)
{
	FILE *f = fopen(file, "re");

	buf[0] = '\0';
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

static void run_program(struct job *j)
{
	struct cdel_result *res = j->res;
	bool traced = j->r->strace[0] &&
		      (j->pass == CDEL_PASS_STRACE ||
		       j->r->strace_mode == CDEL_STRACE_SAME);
	char trace[PATH_MAX], out[PATH_MAX], msg[200];
	char *argv[12];
	int64_t t0, t1;
	pid_t pid;
	int n = 0, rc;

	snprintf(trace, sizeof(trace), "%s/strace.txt", j->r->tmp);
	snprintf(out, sizeof(out), "%s/child.txt", j->r->tmp);
	if (traced) {
		argv[n++] = j->r->strace;
		argv[n++] = "-f";
		argv[n++] = "-c";
		argv[n++] = "-o";
		argv[n++] = trace;
		argv[n++] = "--";
	}
	if (res->method == CDEL_RM_RF) {
		argv[n++] = j->r->rm;
		argv[n++] = "-rf";
		argv[n++] = "--";
	} else {
		argv[n++] = j->r->go_bin;
	}
	argv[n++] = (char *)j->tree;
	argv[n] = NULL;

	t0 = sw_mono_ns();
	rc = cdel_spawn(argv, NULL, out, NULL, &pid);
	if (rc == 0)
		rc = cdel_wait(pid, j->deadline);
	t1 = sw_mono_ns();
	if (j->pass == CDEL_PASS_STRACE)
		res->strace_wall_s = secs(t0, t1);
	else
		res->wall_s = secs(t0, t1);
	res->exit_status = rc;
	if (rc < 0) {
		failed(res, cdel_methods[res->method].name, rc);
	} else if (rc > 0) {
		first_line(out, msg, sizeof(msg));
		res->status = CDEL_FAILED;
		note(res, "%s exited with status %d%s%s",
		     cdel_methods[res->method].name, rc, msg[0] ? ": " : "",
		     msg);
	}
	if (traced) {
		rc = parse_strace(trace, &res->sys);
		if (rc < 0)
			note(res, "strace summary unreadable: %s",
			     strerror(-rc));
		unlink(trace);
	}
}

static void run_removeall(struct job *j)
{
	struct removeall_stats st = { 0 };
	struct removeall_error e = { 0 };
	struct cdel_syscalls *s = &j->res->sys;
	int64_t t0 = sw_mono_ns();
	int rc = removeall(j->tree, &ra_sys, &st, &e);

	j->res->wall_s = secs(t0, sw_mono_ns());
	if (rc < 0 && e.err == ECANCELED) {
		failed(j->res, "removeall", -ECANCELED);
	} else if (rc < 0) {
		j->res->status = CDEL_FAILED;
		note(j->res, "removeall: %s %s: %s", e.op ? e.op : "",
		     e.path ? e.path : j->tree, strerror(-rc));
	}
	removeall_error_clear(&e);
	memset(s, 0, sizeof(*s));
	s->valid = true;
	s->source = "counted";
	sys_add(s, "unlinkat", st.sys_unlinkat + st.sys_rmdir);
	sys_add(s, "getdents64", st.sys_getdents64);
	sys_add(s, "openat", st.sys_openat);
	sys_add(s, "close", st.sys_close);
	sys_add(s, "fcntl", st.sys_fcntl);
	sys_add(s, "readlinkat", st.sys_readlinkat);
	j->res->passes = st.passes;
	j->res->names_listed = st.names_read;
}

/* rmtree's error callback: the first failure goes into the note. */
static void rt_error(void *arg, const char *path, int err)
{
	struct cdel_result *res = arg;

	if (res->status == CDEL_FAILED)
		return;
	if (err == -ECANCELED)
		failed(res, "sweepfs-rm", -ECANCELED);
	else
		failed(res, path, err);
}

static void run_rmtree(struct job *j)
{
	struct rmtree_opts o = {
		.jobs = j->r->jobs,
		.error = rt_error,
		.arg = j->res,
		.sys = &rt_sys,
	};
	static const char *const names[] = {
		[RT_OPENAT] = "openat",	    [RT_GETDENTS] = "getdents64",
		[RT_UNLINKAT] = "unlinkat", [RT_FSTATAT] = "newfstatat",
		[RT_FSTAT] = "newfstatat",  [RT_FCHMOD] = "fchmod",
		[RT_FCHMODAT] = "fchmodat", [RT_CLOSE] = "close",
		[RT_LSEEK] = "lseek",
	};
	struct rmtree_stats st = { 0 };
	struct cdel_syscalls *s = &j->res->sys;
	int64_t t0;
	int rc;

	for (size_t i = 0; i < SW_ARRAY_SIZE(rt_calls); i++)
		atomic_store(&rt_calls[i], 0);
	t0 = sw_mono_ns();
	rc = rmtree_remove(AT_FDCWD, j->tree, &o, &st);
	j->res->wall_s = secs(t0, sw_mono_ns());
	if (rc < 0 && j->res->status != CDEL_FAILED)
		failed(j->res, "sweepfs-rm", rc);
	memset(s, 0, sizeof(*s));
	s->valid = true;
	s->source = "counted";
	for (size_t i = 0; i < SW_ARRAY_SIZE(rt_calls); i++)
		sys_add(s, names[i], atomic_load(&rt_calls[i]));
	/* Our table saw what the engine counted, or one of them is off. */
	if (s->total != rmtree_stats_syscalls(&st))
		note(j->res,
		     "rmtree counted %" PRIu64 " system calls, the "
		     "table %" PRIu64,
		     rmtree_stats_syscalls(&st), s->total);
}

static void run_master(struct job *j)
{
	struct cdel_result *res = j->res;
	uint64_t purge_id = 0, nodes = 0, changed = 0;
	int64_t t0 = sw_mono_ns(), t1;
	int rc = 0;

	if (res->method == CDEL_SNAPSHOT) {
		rc = cdel_set_snapshot_flag(j->del, j->parent, j->name,
					    &changed);
		res->flag_s = secs(t0, sw_mono_ns());
		if (rc == 0)
			rc = cdel_rmsnapshot(j->del, j->parent, j->name,
					     &purge_id, &nodes);
	} else {
		rc = cdel_rmr(j->del, j->parent, j->name, &purge_id, &nodes);
	}
	t1 = sw_mono_ns();
	res->wall_s = secs(t0, t1);
	if (rc < 0) {
		failed(res, res->method == CDEL_RMR ? "rmr" : "snapshot", rc);
		return;
	}
	rc = purge_id ? cdel_wait_purge(j->fs->ctl, purge_id,
					(double)(j->deadline - t1) / 1e9) :
			0;
	res->purge_s = secs(t0, sw_mono_ns());
	if (rc < 0)
		failed(res, "waiting for the purge", rc);
	res->nodes = nodes;
}

/* ---- measuring ------------------------------------------------------- */

/* rmr and snapshot: their own connection, and the tree's entry. */
static int open_deleter(struct job *j)
{
	char rel[PATH_MAX];
	size_t wl = strlen(j->fs->work);
	int rc;

	if (strncmp(j->tree, j->fs->work, wl) || j->tree[wl] != '/')
		return -EINVAL;
	if (snprintf(rel, sizeof(rel), "%s%s%s", j->fs->work_rel,
		     j->fs->work_rel[0] ? "/" : "",
		     j->tree + wl + 1) >= (int)sizeof(rel))
		return -ENAMETOOLONG;
	rc = tool_connect_target(&j->fs->target, &j->del);
	if (rc < 0)
		return rc;
	rc = tool_walk(j->del, rel, &j->parent, j->name, sizeof(j->name));
	if (rc < 0) {
		sw_client_close(j->del);
		j->del = NULL;
	}
	return rc;
}

static void run_method(struct job *j)
{
	switch (j->res->method) {
	case CDEL_RM_RF:
	case CDEL_GO_REMOVEALL:
		run_program(j);
		break;
	case CDEL_REMOVEALL:
		run_removeall(j);
		break;
	case CDEL_SWEEPFS_RM:
		run_rmtree(j);
		break;
	case CDEL_RMR:
	case CDEL_SNAPSHOT:
		run_master(j);
		break;
	case CDEL_NMETHODS:
		break;
	}
}

/* The master's side of the deletion: CPU and traffic deltas. */
static void master_deltas(struct job *j, const struct cdel_counters *c0,
			  const struct cdel_counters *c1)
{
	struct cdel_result *res = j->res;

	res->cpu_s = (double)(c1->cpu_ms - c0->cpu_ms) / 1000;
	cdel_wire_delta(&c0->total, &c1->total, &res->total);
	res->has_wire = true;
	if (c0->has_session && c1->has_session) {
		cdel_wire_delta(&c0->session, &c1->session, &res->wire);
		res->wire_source = "session";
	} else {
		res->wire = res->total;
		res->wire_source = "total";
		note(res, "the deleting client's session was not found: "
			  "traffic is the master's total");
	}
}

int cdel_measure(struct cdel_run *r, struct cdel_fs *fs, const char *tree,
		 enum cdel_pass pass, struct cdel_result *res)
{
	struct job j = {
		.r = r, .fs = fs, .tree = tree, .pass = pass, .res = res
	};
	struct cdel_counters c0 = { 0 }, c1 = { 0 };
	struct statprobe *probe = NULL;
	struct monitor mon = { 0 };
	bool timed = pass == CDEL_PASS_TIMED, counted = false;
	uint64_t session = fs->mount_session;
	struct stat st;
	char label[96];
	int rc;

	if (cdel_methods[res->method].sweepfs_only) {
		rc = open_deleter(&j);
		if (rc < 0) {
			failed(res, "connecting to the master", rc);
			return rc;
		}
		session = j.del->session_id;
	}
	if (timed && fs->sweepfs)
		counted = cdel_counters(fs->ctl, session, &c0) == 0;
	if (timed && fs->probe_ok) {
		rc = statprobe_start(fs->probe_dir, "probe", r->probe_pause_us,
				     &probe);
		if (rc < 0)
			note(res, "stat probe: %s", strerror(-rc));
	}
	snprintf(label, sizeof(label), "%s %s%s",
		 cdel_methods[res->method].name, fs->label,
		 pass == CDEL_PASS_STRACE ? " strace" : "");
	monitor_start(&mon, fs, label, res->files + res->dirs + 1);

	j.deadline = sw_mono_ns() + (int64_t)(r->timeout_s * 1e9);
	cdel_deadline_set(j.deadline);
	run_method(&j);
	cdel_deadline_set(0);

	if (probe) {
		statprobe_stop(probe, &res->probe);
		res->has_probe = true;
	}
	if (counted && cdel_counters(fs->ctl, session, &c1) == 0)
		master_deltas(&j, &c0, &c1);
	/* After the counters: this lookup is ours, not the method's. */
	rc = lstat(tree, &st) == 0 ? -ENOTEMPTY : 0;
	monitor_stop(&mon, rc == 0);
	if (j.del)
		sw_client_close(j.del);
	if (rc < 0 && res->status != CDEL_FAILED) {
		res->status = CDEL_FAILED;
		note(res, "%s is still there", tree);
	}
	return rc;
}
