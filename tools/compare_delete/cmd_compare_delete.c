/*
 * sweepfs compare-delete [options] PATH: delete identical trees with each
 * deletion method, one after another, and compare what each cost: wall
 * time, the master's CPU, bytes on the wire, system calls, and the stat()
 * latency another client saw meanwhile. PATH is a directory on a sweepfs
 * mount; --also runs the same methods on other filesystems in the same
 * run, for a side by side table.
 *
 * The run: for each size, for each filesystem, build a template tree,
 * then for each method make a copy, let the master finish purging, drop
 * the caches, and delete the copy with the method (cdel_method.c). A
 * table per size, a JSON file after each size, a plot at the end of a
 * sweep (cdel_report.c). The why of each step is in cdel.h's files.
 *
 * Stopping: SIGINT, SIGTERM and SIGHUP are taken by a thread (sigwait)
 * that sets cdel_stop; children are stopped, in-process deleters give up
 * through their system call tables, and the clean-up runs as at a normal
 * end: work directories removed, the probe's mounts unmounted, the
 * temporary directory removed. Exit status: 0 if every method that
 * applied succeeded, 1 if one failed, 2 on a usage error, 128 + the
 * signal when stopped.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsio.h"
#include "cdel.h"
#include "cdel_go.h"
#include "rmtree.h"
#include "util.h"

/* Where an installed tree keeps the Go program (meson sets both). */
#ifndef CDEL_GO_REL
#define CDEL_GO_REL ""
#endif
#ifndef CDEL_GO_DIR
#define CDEL_GO_DIR ""
#endif

#define DEFAULT_SIZE 100000
#define DEFAULT_PROBE_PAUSE_US 1000
/* A method slower than this is stopped: Go's pattern on a filesystem
 * that re-sends listings can take days (the MooseFS post: ~20 days). */
#define DEFAULT_TIMEOUT_S 3600

atomic_int cdel_stop;
static _Atomic int64_t deadline_ns;

bool cdel_cancelled(void)
{
	int64_t d = atomic_load_explicit(&deadline_ns, memory_order_relaxed);

	return atomic_load_explicit(&cdel_stop, memory_order_relaxed) ||
	       (d && sw_mono_ns() > d);
}

void cdel_deadline_set(int64_t mono_ns)
{
	atomic_store(&deadline_ns, mono_ns);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sweepfs compare-delete [options] PATH\n\n"
		"Build a tree on the sweepfs mount PATH is on, delete "
		"identical copies of it with\neach method, and compare: wall "
		"time, files/s, the master's CPU, bytes on the\nwire, system "
		"calls, stat() latency of a second client meanwhile.\n\n"
		"  -n N                 files in the tree (default %d; k, M: "
		"thousands, millions)\n"
		"      --sizes N,N,...  a sweep over tree sizes (and a plot)\n"
		"      --shape S        flat (default: N files in 2 "
		"directories), deep, node_modules\n"
		"      --methods M,...  default: all of\n",
		DEFAULT_SIZE);
	for (int m = 0; m < CDEL_NMETHODS; m++)
		fprintf(f, "                         %-13s %s\n",
			cdel_methods[m].name, cdel_methods[m].what);
	fprintf(f,
		"      --also PATH2     run the same methods in PATH2 on "
		"another filesystem\n"
		"                       (repeatable)\n"
		"  -j, --jobs N         sweepfs-rm's worker threads "
		"(default 1)\n"
		"      --strace MODE    separate (default): count rm's and "
		"Go's system calls in a\n"
		"                       second run under strace; same: in the "
		"timed run; off\n"
		"      --probe-mount P  a second sweepfs mount for the stat "
		"probe (default: one is\n"
		"                       mounted in a temporary directory)\n"
		"      --probe-pause-us N  between the probe's stat() calls "
		"(default %d)\n"
		"      --timeout SEC    stop a method after this long "
		"(default %d)\n"
		"      --json FILE      default: "
		"compare-delete-DATE-TIME.json here\n"
		"      --plot FILE.svg  files/s by size (default with "
		"--sizes: the JSON's name)\n"
		"      --go-bin PROG    go-removeall: this built program\n"
		"      --go-src DIR     go-removeall: build DIR/main.go (default:"
		" $SWEEPFS_GO_REMOVEALL,\n"
		"                       a program or a directory; else the copy"
		" installed with\n"
		"                       sweepfs)\n"
		"      --no-drop-caches  do not drop the kernel's caches "
		"before each deletion\n",
		DEFAULT_PROBE_PAUSE_US, DEFAULT_TIMEOUT_S);
}

/* "100000", "10k", "1M": decimal, since these count files. */
static int parse_count(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		v *= 1000, end++;
	else if (*end == 'm' || *end == 'M')
		v *= 1000000, end++;
	if (*end || v == 0 || v > 1000000000ULL)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_sizes(struct cdel_run *r, const char *arg)
{
	char *copy = strdup(arg), *save = NULL, *t;
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	r->nsizes = 0;
	for (t = strtok_r(copy, ",", &save); t && rc == 0;
	     t = strtok_r(NULL, ",", &save)) {
		if (r->nsizes == CDEL_MAX_SIZES)
			rc = -E2BIG;
		else
			rc = parse_count(t, &r->sizes[r->nsizes++]);
	}
	free(copy);
	return rc == 0 && r->nsizes == 0 ? -EINVAL : rc;
}

static int parse_methods(struct cdel_run *r, const char *arg)
{
	char *copy = strdup(arg), *save = NULL, *t;
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	memset(r->methods, 0, sizeof(r->methods));
	for (t = strtok_r(copy, ",", &save); t && rc == 0;
	     t = strtok_r(NULL, ",", &save)) {
		int m = cdel_method_find(t);

		if (m < 0) {
			fprintf(stderr,
				"sweepfs compare-delete: unknown "
				"method '%s'\n",
				t);
			rc = -EINVAL;
		} else {
			r->methods[m] = true;
		}
	}
	free(copy);
	return rc;
}

enum {
	O_SIZES = 256,
	O_SHAPE,
	O_METHODS,
	O_ALSO,
	O_STRACE,
	O_PROBE_MOUNT,
	O_PROBE_PAUSE,
	O_TIMEOUT,
	O_JSON,
	O_PLOT,
	O_GO_SRC,
	O_GO_BIN,
	O_NO_DROP
};

/* --strace MODE. */
static int parse_strace(struct cdel_run *r, const char *arg)
{
	if (!strcmp(arg, "separate"))
		r->strace_mode = CDEL_STRACE_SEPARATE;
	else if (!strcmp(arg, "same"))
		r->strace_mode = CDEL_STRACE_SAME;
	else if (!strcmp(arg, "off"))
		r->strace_mode = CDEL_STRACE_OFF;
	else
		return -EINVAL;
	return 0;
}

/* The options that take a number. */
static int parse_number(struct cdel_run *r, int opt, const char *arg)
{
	uint64_t v;
	char *end;

	switch (opt) {
	case 'n':
		r->nsizes = 1;
		return parse_count(arg, &r->sizes[0]);
	case 'j':
		if (parse_count(arg, &v) < 0 || v > 256)
			return -EINVAL;
		r->jobs = (unsigned)v;
		return 0;
	case O_PROBE_PAUSE:
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno || *end || arg[0] == '-' || v > 10000000)
			return -EINVAL;
		r->probe_pause_us = (unsigned)v;
		return 0;
	default: /* O_TIMEOUT */
		r->timeout_s = strtod(arg, &end);
		return *end || r->timeout_s <= 0 ? -EINVAL : 0;
	}
}

/* One option: 0, -EINVAL for a bad value, or 2 (usage; said). */
static int parse_opt(struct cdel_run *r, int opt, char *arg)
{
	switch (opt) {
	case 'n':
	case 'j':
	case O_PROBE_PAUSE:
	case O_TIMEOUT:
		return parse_number(r, opt, arg);
	case O_SIZES:
		r->sweep = true;
		return parse_sizes(r, arg);
	case O_SHAPE:
		return treegen_parse_shape(arg, &r->shape);
	case O_METHODS:
		return parse_methods(r, arg) < 0 ? 2 : 0;
	case O_ALSO:
		/* One place is PATH's. */
		if (r->nfs == CDEL_MAX_FS - 1) {
			fprintf(stderr,
				"sweepfs compare-delete: at most %d --also\n",
				CDEL_MAX_FS - 1);
			return 2;
		}
		r->fs[r->nfs++].arg = arg;
		return 0;
	case O_STRACE:
		return parse_strace(r, arg);
	case O_PROBE_MOUNT:
		r->probe_mount = arg;
		return 0;
	case O_JSON:
		snprintf(r->json_path, sizeof(r->json_path), "%s", arg);
		return 0;
	case O_PLOT:
		snprintf(r->plot_path, sizeof(r->plot_path), "%s", arg);
		return 0;
	case O_GO_SRC:
		r->go_src = arg;
		return 0;
	case O_GO_BIN:
		r->go_bin_opt = arg;
		return 0;
	case O_NO_DROP:
		r->drop_caches = false;
		return 0;
	default:
		usage(stderr);
		return 2;
	}
}

static int parse_args(struct cdel_run *r, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "sizes", required_argument, NULL, O_SIZES },
		{ "shape", required_argument, NULL, O_SHAPE },
		{ "methods", required_argument, NULL, O_METHODS },
		{ "also", required_argument, NULL, O_ALSO },
		{ "jobs", required_argument, NULL, 'j' },
		{ "strace", required_argument, NULL, O_STRACE },
		{ "probe-mount", required_argument, NULL, O_PROBE_MOUNT },
		{ "probe-pause-us", required_argument, NULL, O_PROBE_PAUSE },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "json", required_argument, NULL, O_JSON },
		{ "plot", required_argument, NULL, O_PLOT },
		{ "go-src", required_argument, NULL, O_GO_SRC },
		{ "go-bin", required_argument, NULL, O_GO_BIN },
		{ "no-drop-caches", no_argument, NULL, O_NO_DROP },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int opt, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "n:j:h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			return 1;
		}
		rc = parse_opt(r, opt, optarg);
		if (rc == 2)
			return 2;
		if (rc < 0) {
			/* "--opt VALUE" or "--opt=VALUE" / "-nVALUE". */
			const char *o = argv[optind - 1] == optarg ?
						argv[optind - 2] :
						argv[optind - 1];

			fprintf(stderr,
				"sweepfs compare-delete: bad value '%s' for "
				"%s\n",
				optarg, o);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	/* PATH goes first: the sweepfs one. */
	memmove(&r->fs[1], &r->fs[0], sizeof(r->fs[0]) * (size_t)r->nfs);
	memset(&r->fs[0], 0, sizeof(r->fs[0]));
	r->fs[0].arg = argv[optind];
	r->nfs++;
	return 0;
}

/* ---- signals ----------------------------------------------------------- */

static void *signal_main(void *arg)
{
	const sigset_t *set = arg;
	static const char msg[] = "\nsweepfs compare-delete: stopping; "
				  "cleaning up (interrupt again to cut "
				  "the clean-up short)\n";

	for (;;) {
		int sig;

		if (sigwait(set, &sig) != 0)
			continue;
		if (sig == SIGUSR1)
			return NULL; /* the end */
		if (!atomic_exchange(&cdel_stop, sig))
			if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
				continue;
	}
}

/* ---- set-up ------------------------------------------------------------ */

/* Where sweepfs-mount is: next to us (installed, or the build tree's
 * mount/ next to tools/), else on $PATH. */
static void find_mount_bin(struct cdel_run *r)
{
	static const char *const rel[] = { "/sweepfs-mount",
					   "/../mount/sweepfs-mount" };
	char self[PATH_MAX], cand[PATH_MAX + 32], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		for (size_t i = 0; i < SW_ARRAY_SIZE(rel); i++) {
			snprintf(cand, sizeof(cand), "%s%s", self, rel[i]);
			if (access(cand, X_OK) == 0 &&
			    realpath(cand, r->mount_bin))
				return;
		}
	}
	cdel_which("sweepfs-mount", r->mount_bin, sizeof(r->mount_bin));
}

/* Where the go-removeall program is (cdel_go.h), into @loc; the reason
 * into r->go_note if it is nowhere. */
static int locate_go(struct cdel_run *r, struct cdel_go_loc *loc)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct cdel_go_hints h = {
		.bin = r->go_bin_opt,
		.src = r->go_src,
		.env = getenv("SWEEPFS_GO_REMOVEALL"),
		.exe = n > 0 ? self : NULL,
		.rel = CDEL_GO_REL,
		.dir = CDEL_GO_DIR,
	};

	self[n > 0 ? n : 0] = '\0';
	return cdel_go_find(&h, loc, r->go_note, sizeof(r->go_note));
}

/* Build the Go program with the installed Go, into our temp dir; or take
 * the one already built. */
static void build_go(struct cdel_run *r)
{
	char go[PATH_MAX], out[PATH_MAX], log[PATH_MAX], cache[PATH_MAX + 16];
	char gopath[PATH_MAX + 16], line[200];
	char *argv[6], *env[5];
	struct cdel_go_loc loc;
	int e = 0, rc;
	FILE *f;

	if (locate_go(r, &loc) < 0)
		return;
	if (loc.prebuilt) {
		snprintf(r->go_bin, sizeof(r->go_bin), "%s", loc.path);
		snprintf(r->go_version, sizeof(r->go_version), "prebuilt");
		return;
	}
	if (!cdel_which("go", go, sizeof(go)) &&
	    !cdel_which("/usr/local/go/bin/go", go, sizeof(go))) {
		snprintf(r->go_note, sizeof(r->go_note), "Go is not installed");
		return;
	}
	argv[0] = go;
	argv[1] = "version";
	argv[2] = NULL;
	cdel_prog_line(argv, r->tmp, r->go_version, sizeof(r->go_version));
	snprintf(out, sizeof(out), "%s/removeall", r->tmp);
	snprintf(log, sizeof(log), "%s/go-build.txt", r->tmp);
	/* No network, no toolchain download; a cache even without $HOME. */
	env[e++] = "GOTOOLCHAIN=local";
	env[e++] = "GOPROXY=off";
	if (!getenv("HOME") && !getenv("GOCACHE")) {
		snprintf(cache, sizeof(cache), "GOCACHE=%s/gocache", r->tmp);
		snprintf(gopath, sizeof(gopath), "GOPATH=%s/gopath", r->tmp);
		env[e++] = cache;
		env[e++] = gopath;
	}
	env[e] = NULL;
	argv[0] = go;
	argv[1] = "build";
	argv[2] = "-o";
	argv[3] = out;
	argv[4] = ".";
	argv[5] = NULL;
	fprintf(stderr, "building %s (found in %s) with %s\n", loc.path,
		loc.how, go);
	rc = cdel_run_prog(argv, loc.path, log, env);
	if (rc == 0 && access(out, X_OK) == 0) {
		snprintf(r->go_bin, sizeof(r->go_bin), "%s", out);
		return;
	}
	line[0] = '\0';
	f = fopen(log, "re");
	if (f) {
		if (fgets(line, sizeof(line), f))
			line[strcspn(line, "\n")] = '\0';
		fclose(f);
	}
	snprintf(r->go_note, sizeof(r->go_note), "go build failed: %s",
		 rc < 0 ? strerror(-rc) : line);
}

/* rm, strace, Go: after the set-up, which needs none of them. */
static void find_programs(struct cdel_run *r)
{
	char *argv[3] = { NULL, "--version", NULL };

	if (cdel_which("rm", r->rm, sizeof(r->rm))) {
		argv[0] = r->rm;
		cdel_prog_line(argv, r->tmp, r->rm_version,
			       sizeof(r->rm_version));
	}
	if (r->strace_mode != CDEL_STRACE_OFF &&
	    cdel_which("strace", r->strace, sizeof(r->strace))) {
		argv[0] = r->strace;
		argv[1] = "-V";
		cdel_prog_line(argv, r->tmp, r->strace_version,
			       sizeof(r->strace_version));
	} else if (r->strace_mode != CDEL_STRACE_OFF) {
		fprintf(stderr, "sweepfs compare-delete: strace is not "
				"installed (apt-get install strace): system "
				"calls of rm and Go are not counted\n");
	}
	if (r->methods[CDEL_GO_REMOVEALL])
		build_go(r);
}

static int make_tmp(struct cdel_run *r)
{
	const char *t = getenv("TMPDIR");

	if (snprintf(r->tmp, sizeof(r->tmp), "%s/sweepfs-compare-delete.XXXXXX",
		     t && *t ? t : "/tmp") >= (int)sizeof(r->tmp))
		errno = ENAMETOOLONG;
	else if (mkdtemp(r->tmp))
		return 0;
	{
		int rc = -errno;

		fprintf(stderr, "sweepfs compare-delete: %s: %s\n", r->tmp,
			strerror(-rc));
		r->tmp[0] = '\0';
		return rc;
	}
}

static void default_paths(struct cdel_run *r)
{
	time_t t = (time_t)(r->started / SW_NSEC_PER_SEC);
	char stamp[64];
	struct tm tm;
	FILE *f;

	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	if (!r->json_path[0])
		snprintf(r->json_path, sizeof(r->json_path),
			 "compare-delete-%s.json", stamp);
	if (!r->plot_path[0] && r->sweep) {
		size_t n = strlen(r->json_path);

		if (n > 5 && !strcmp(r->json_path + n - 5, ".json"))
			n -= 5;
		snprintf(r->plot_path, sizeof(r->plot_path), "%.*s.svg", (int)n,
			 r->json_path);
	}
	f = fopen("/proc/loadavg", "re");
	if (f) {
		if (fgets(r->loadavg, sizeof(r->loadavg), f))
			r->loadavg[strcspn(r->loadavg, "\n")] = '\0';
		fclose(f);
	}
}

/* ---- the run ----------------------------------------------------------- */

static struct cdel_result *new_result(struct cdel_run *r, uint64_t size, int fs,
				      enum cdel_method_id m,
				      const struct treegen_count *count)
{
	struct cdel_result *x;

	if (sw_grow(&r->res, &r->cap, r->nres + 1, sizeof(*r->res), 32) < 0)
		return NULL;
	x = &r->res[r->nres++];
	memset(x, 0, sizeof(*x));
	x->size = size;
	x->fs = fs;
	x->method = m;
	x->files = count->files;
	x->dirs = count->dirs;
	x->purge_s = -1;
	x->cpu_s = -1;
	x->strace_wall_s = -1;
	x->exit_status = -1;
	return x;
}

/* Why method @m does not apply on @fs, or NULL. */
static const char *not_applicable(const struct cdel_run *r,
				  const struct cdel_fs *fs,
				  enum cdel_method_id m)
{
	if (cdel_methods[m].sweepfs_only && !fs->sweepfs)
		return "needs sweepfs";
	if (m == CDEL_GO_REMOVEALL && !r->go_bin[0])
		return r->go_note;
	if (m == CDEL_RM_RF && !r->rm[0])
		return "no rm on $PATH";
	return NULL;
}

static void append_note(struct cdel_result *x, const char *what)
{
	size_t len = strlen(x->note);

	snprintf(x->note + len, sizeof(x->note) - len, "%s%s", len ? "; " : "",
		 what);
}

/* A copy of @tmpl as @copy, settled: ready to be deleted. */
static int prepare(struct cdel_run *r, struct cdel_fs *fs, const char *tmpl,
		   const char *copy, struct cdel_result *x)
{
	int rc = cdel_fs_copy(r, fs, tmpl, copy, x->size);

	if (rc < 0) {
		x->status = CDEL_FAILED;
		snprintf(x->note, sizeof(x->note), "cannot copy the tree: %s",
			 strerror(-rc));
		cdel_fs_remove(r, fs, copy);
		return rc;
	}
	cdel_fs_settle(r, fs);
	return 0;
}

/* A second deletion under strace, for the system calls of a program. */
static void strace_pass(struct cdel_run *r, struct cdel_fs *fs,
			const char *tmpl, const char *copy,
			struct cdel_result *x)
{
	struct cdel_result s = *x;

	s.note[0] = '\0';
	s.status = CDEL_OK;
	if (prepare(r, fs, tmpl, copy, &s) == 0 &&
	    cdel_measure(r, fs, copy, CDEL_PASS_STRACE, &s) < 0)
		cdel_fs_remove(r, fs, copy);
	x->sys = s.sys;
	x->strace_wall_s = s.strace_wall_s;
	if (s.status == CDEL_FAILED)
		append_note(x, s.note);
}

static void run_method(struct cdel_run *r, int fi, const char *tmpl,
		       struct cdel_result *x)
{
	struct cdel_fs *fs = &r->fs[fi];
	char copy[PATH_MAX + 64];

	snprintf(copy, sizeof(copy), "%s/c%" PRIu64 "-%s", fs->work, x->size,
		 cdel_methods[x->method].name);
	if (prepare(r, fs, tmpl, copy, x) < 0)
		return;
	if (cdel_measure(r, fs, copy, CDEL_PASS_TIMED, x) < 0)
		cdel_fs_remove(r, fs, copy);
	if (!cdel_methods[x->method].external || x->status != CDEL_OK ||
	    cdel_cancelled())
		return;
	if (!r->strace[0])
		append_note(x, "strace is not installed: no system call "
			       "counts");
	else if (r->strace_mode == CDEL_STRACE_SEPARATE)
		strace_pass(r, fs, tmpl, copy, x);
}

static int run_size(struct cdel_run *r, uint64_t n)
{
	struct treegen_count count;

	treegen_count(r->shape, n, &count);
	for (int fi = 0; fi < r->nfs && !cdel_cancelled(); fi++) {
		struct cdel_fs *fs = &r->fs[fi];
		char tmpl[PATH_MAX + 32], label[64], why[300] = "";
		int rc;

		snprintf(tmpl, sizeof(tmpl), "%s/tmpl%" PRIu64, fs->work, n);
		snprintf(label, sizeof(label), "building on %s", fs->label);
		rc = cdel_fs_build(r, fs, tmpl, n, label);
		if (rc < 0) {
			snprintf(why, sizeof(why), "cannot build the tree: %s",
				 strerror(-rc));
			fprintf(stderr, "sweepfs compare-delete: %s: %s\n",
				tmpl, why);
		}
		for (int m = 0; m < CDEL_NMETHODS && !cdel_cancelled(); m++) {
			struct cdel_result *x;
			const char *na;

			if (!r->methods[m])
				continue;
			x = new_result(r, n, fi, m, &count);
			if (!x)
				return -ENOMEM;
			if ((na = not_applicable(r, fs, m))) {
				x->status = CDEL_NA;
				snprintf(x->note, sizeof(x->note), "%s", na);
			} else if (why[0]) {
				x->status = CDEL_FAILED;
				snprintf(x->note, sizeof(x->note), "%s", why);
			} else {
				run_method(r, fi, tmpl, x);
			}
		}
		cdel_fs_remove(r, fs, tmpl);
	}
	return 0;
}

static bool any_failed(const struct cdel_run *r)
{
	for (size_t i = 0; i < r->nres; i++)
		if (r->res[i].status == CDEL_FAILED)
			return true;
	return false;
}

int cmd_compare_delete(int argc, char **argv)
{
	struct cdel_run *r = calloc(1, sizeof(*r));
	sigset_t set, old;
	pthread_t sigthread;
	int rc, status = 1, sig;
	bool unsaved = false;

	if (!r) {
		fprintf(stderr, "sweepfs compare-delete: out of memory\n");
		return 1;
	}
	r->shape = TREEGEN_FLAT;
	r->nsizes = 1;
	r->sizes[0] = DEFAULT_SIZE;
	r->jobs = 1;
	r->probe_pause_us = DEFAULT_PROBE_PAUSE_US;
	r->timeout_s = DEFAULT_TIMEOUT_S;
	r->drop_caches = true;
	r->argc = argc;
	r->argv = argv;
	for (int m = 0; m < CDEL_NMETHODS; m++)
		r->methods[m] = true;
	rc = parse_args(r, argc, argv);
	if (rc) {
		free(r);
		return rc == 1 ? 0 : rc;
	}
	r->started = sw_now_ns();
	default_paths(r);

	/* Signals go to one thread, started before any other. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&sigthread, NULL, signal_main, &set) != 0) {
		fprintf(stderr, "sweepfs compare-delete: no thread\n");
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		free(r);
		return 1;
	}

	if (make_tmp(r) < 0)
		goto out;
	find_mount_bin(r);
	for (int i = 0; i < r->nfs && !cdel_cancelled(); i++)
		if (cdel_fs_setup(r, &r->fs[i], i == 0) < 0)
			goto out;
	find_programs(r);
	if (r->drop_caches && geteuid() != 0)
		fprintf(stderr, "sweepfs compare-delete: not root: the caches "
				"are not dropped between methods\n");
	for (int i = 0; i < r->nfs; i++)
		if (!r->fs[i].probe_ok)
			fprintf(stderr,
				"sweepfs compare-delete: %s: no stat "
				"probe: %s\n",
				r->fs[i].label, r->fs[i].probe_note);
	for (int i = 0; i < r->nsizes && !cdel_cancelled(); i++) {
		if (run_size(r, r->sizes[i]) < 0)
			break;
		cdel_report_table(r, r->sizes[i]);
		rc = cdel_report_json(r);
		if (rc < 0) {
			fprintf(stderr,
				"sweepfs compare-delete: cannot write the "
				"results to %s: %s\n",
				r->json_path, strerror(-rc));
			unsaved = true;
		}
	}
	if (r->nres && !unsaved) {
		printf("\nresults: %s\n", r->json_path);
		if (r->plot_path[0] && !cdel_cancelled())
			cdel_report_plot(r);
	}
	/* A result that was not written (a full disk, a closed pipe) is
	 * a failed run: a script must not take it for a measured one. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr,
			"sweepfs compare-delete: cannot write the results "
			"table: %s\n",
			strerror(errno));
		unsaved = true;
	}
	status = any_failed(r) || unsaved ? 1 : 0;
out:
	/* Clean up even when stopped: the waits must work again. */
	sig = atomic_exchange(&cdel_stop, 0);
	for (int i = 0; i < r->nfs; i++)
		cdel_fs_cleanup(r, &r->fs[i]);
	if (r->tmp[0]) {
		/* Never into a probe mount that would not go away. */
		struct rmtree_opts o = { .force = true,
					 .one_file_system = true };

		rmtree_remove(AT_FDCWD, r->tmp, &o, NULL);
	}
	pthread_kill(sigthread, SIGUSR1);
	pthread_join(sigthread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (sig || atomic_load(&cdel_stop))
		status = 128 + (sig ? sig : atomic_load(&cdel_stop));
	free(r->res);
	free(r);
	return status;
}
