/*
 * sweepfs rm [-fv] [-j N] [--one-file-system] [--stats] [--stats-json]
 * PATH...: remove trees from the client side with the fewest system calls
 * (the engine is tools/rmtree.h), on any filesystem. Always recursive and
 * never prompts; -r/-R are accepted for rm's sake. Unlike GNU rm, a
 * directory its owner made read-only (0555, 0000) is made writable and
 * removed, as Bazel's deleteTree() does.
 *
 * Requested output (-v, --stats, --stats-json) goes to stdout, errors to
 * stderr. Exit status: 0 if every PATH is gone, 1 if anything remains,
 * 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "rmtree.h"
#include "tool.h"

static void rm_usage(FILE *f)
{
	fprintf(f,
		"usage: sweepfs rm [-fv] [-j N] [--one-file-system] [--stats] "
		"[--stats-json] PATH...\n\n"
		"Remove each PATH and everything below it, with as few system "
		"calls as\npossible (openat, getdents64, unlinkat; no stat "
		"unless d_type is unknown).\n\n"
		"  -f, --force          a missing PATH is not an error\n"
		"  -v, --verbose        print each removed path\n"
		"  -j, --jobs N         N worker threads over independent "
		"subtrees\n"
		"                       (default 1; 0: one per CPU)\n"
		"      --one-file-system  skip directories on another device\n"
		"      --max-fds N      open directories per worker (default "
		"%d)\n"
		"      --stats          print counters: removed, system calls "
		"by type\n"
		"      --stats-json     the same as one JSON object\n"
		"  -r, -R, --recursive  accepted; removal is always recursive\n",
		RMTREE_MAX_FDS);
}

/*
 * The progress line on a terminal (progress.h): the engine's unlinkat
 * goes through a wrapper that counts what it removed, and a thread draws
 * the count and the rate (the total is not known before the end).
 */
static atomic_uint_least64_t rm_count;
static struct rmtree_sys rm_sys;
static struct progress rm_line;

static int counting_unlinkat(int dirfd, const char *name, int flags)
{
	int rc = rmtree_sys_default.unlinkat(dirfd, name, flags);

	if (rc == 0)
		atomic_fetch_add_explicit(&rm_count, 1, memory_order_relaxed);
	return rc;
}

struct rm_watch {
	pthread_t thread;
	bool started;
	atomic_bool stop;
};

static void *rm_watch_main(void *arg)
{
	struct rm_watch *w = arg;

	while (!atomic_load(&w->stop)) {
		progress_update(&rm_line, atomic_load(&rm_count));
		usleep(50 * 1000);
	}
	return NULL;
}

static void rm_watch_start(struct rm_watch *w, struct rmtree_opts *o)
{
	memset(w, 0, sizeof(*w));
	progress_start(&rm_line, "sweepfs rm", "removed", 0);
	/* -v prints every path: that is the progress then. */
	if (!rm_line.on || o->removed)
		return;
	rm_sys = rmtree_sys_default;
	rm_sys.unlinkat = counting_unlinkat;
	o->sys = &rm_sys;
	atomic_init(&w->stop, false);
	w->started = pthread_create(&w->thread, NULL, rm_watch_main, w) == 0;
}

static void rm_watch_stop(struct rm_watch *w)
{
	if (!w->started)
		return;
	atomic_store(&w->stop, true);
	pthread_join(w->thread, NULL);
	progress_end(&rm_line, atomic_load(&rm_count));
}

static void rm_removed(void *arg, const char *path, bool dir)
{
	(void)arg;
	printf(dir ? "removed directory '%s'\n" : "removed '%s'\n", path);
}

static void rm_error(void *arg, const char *path, int err)
{
	(void)arg;
	if (rm_line.drawn) /* the message replaces the progress line */
		fputs("\r\033[K", stderr);
	if (err == -EXDEV)
		fprintf(stderr,
			"sweepfs rm: skipping '%s', since it's on a different "
			"device\n",
			path);
	else if (err == -ESTALE)
		fprintf(stderr,
			"sweepfs rm: cannot remove '%s': directory replaced "
			"during removal\n",
			path);
	else
		fprintf(stderr, "sweepfs rm: cannot remove '%s': %s\n", path,
			strerror(-err));
}

/* Refuse "/" itself, by identity as GNU rm's --preserve-root does. */
static bool is_root_dir(const char *path)
{
	struct stat st, root;

	return lstat(path, &st) == 0 && stat("/", &root) == 0 &&
	       st.st_dev == root.st_dev && st.st_ino == root.st_ino;
}

static void print_stats(const struct rmtree_stats *st, unsigned jobs,
			double secs)
{
	uint64_t entries = st->files + st->dirs;
	uint64_t calls = rmtree_stats_syscalls(st);

	printf("removed %" PRIu64 " files and %" PRIu64
	       " directories in %.3f s with %u worker%s\n",
	       st->files, st->dirs, secs, jobs, jobs == 1 ? "" : "s");
	printf("system calls: %" PRIu64 " (%.4f per entry removed)\n", calls,
	       entries ? (double)calls / (double)entries : 0.0);
	printf("  openat %" PRIu64 ", getdents64 %" PRIu64 ", unlinkat %" PRIu64
	       ", unlinkat(AT_REMOVEDIR) %" PRIu64 ",\n  fstatat %" PRIu64
	       ", fstat %" PRIu64 ", fchmod %" PRIu64 ", close %" PRIu64
	       ", lseek %" PRIu64 "\n",
	       st->sys_openat, st->sys_getdents64, st->sys_unlinkat,
	       st->sys_rmdir, st->sys_fstatat, st->sys_fstat, st->sys_fchmod,
	       st->sys_close, st->sys_lseek);
	printf("directory fds: at most %" PRIu64 " open, %" PRIu64
	       " evictions, %" PRIu64 " reopens; %" PRIu64 " errors\n",
	       st->max_open_fds, st->evictions, st->reopens, st->errors);
}

static void print_stats_json(const struct rmtree_stats *st, unsigned jobs,
			     double secs)
{
	uint64_t entries = st->files + st->dirs;
	uint64_t calls = rmtree_stats_syscalls(st);
	struct json j;

	json_init(&j, stdout);
	json_obj_begin(&j, NULL);
	json_str(&j, "method", "sweepfs-rm");
	json_u64(&j, "jobs", jobs);
	json_dbl(&j, "elapsed_s", secs);
	json_u64(&j, "files", st->files);
	json_u64(&j, "dirs", st->dirs);
	json_u64(&j, "errors", st->errors);
	json_obj_begin(&j, "syscalls");
	json_u64(&j, "total", calls);
	json_dbl(&j, "per_entry",
		 entries ? (double)calls / (double)entries : 0.0);
	json_u64(&j, "openat", st->sys_openat);
	json_u64(&j, "getdents64", st->sys_getdents64);
	json_u64(&j, "unlinkat", st->sys_unlinkat + st->sys_rmdir);
	json_u64(&j, "unlinkat_file", st->sys_unlinkat);
	json_u64(&j, "unlinkat_dir", st->sys_rmdir);
	json_u64(&j, "fstatat", st->sys_fstatat);
	json_u64(&j, "fstat", st->sys_fstat);
	json_u64(&j, "fchmod", st->sys_fchmod);
	json_u64(&j, "close", st->sys_close);
	json_u64(&j, "lseek", st->sys_lseek);
	json_obj_end(&j);
	json_obj_begin(&j, "fds");
	json_u64(&j, "max_open", st->max_open_fds);
	json_u64(&j, "evictions", st->evictions);
	json_u64(&j, "reopens", st->reopens);
	json_obj_end(&j);
	json_obj_end(&j);
}

static int parse_uint(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > 65536 || s[0] == '-')
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* Remove the @n trees of @argv; 0 if all are gone, else 1. */
static int rm_paths(char **argv, int n, struct rmtree_opts *o,
		    struct rmtree_stats *st)
{
	struct rm_watch w;
	int status = 0;

	rm_watch_start(&w, o);
	for (int i = 0; i < n; i++) {
		int rc;

		if (!argv[i][0]) {
			rm_error(NULL, argv[i], -ENOENT);
			status = 1;
			continue;
		}
		if (is_root_dir(argv[i])) {
			fprintf(stderr,
				"sweepfs rm: it is dangerous to operate "
				"recursively on '%s'\n",
				argv[i]);
			status = 1;
			continue;
		}
		rc = rmtree_remove(AT_FDCWD, argv[i], o, st);
		if (rc == -EINVAL) {
			fprintf(stderr,
				"sweepfs rm: refusing to remove '.' or '..' "
				"directory: skipping '%s'\n",
				argv[i]);
		}
		if (rc < 0)
			status = 1;
	}
	rm_watch_stop(&w);
	return status;
}

int cmd_rm(int argc, char **argv)
{
	enum { OPT_ONE_FS = 256, OPT_STATS, OPT_JSON, OPT_MAX_FDS };
	static const struct option longopts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "recursive", no_argument, NULL, 'r' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "one-file-system", no_argument, NULL, OPT_ONE_FS },
		{ "max-fds", required_argument, NULL, OPT_MAX_FDS },
		{ "stats", no_argument, NULL, OPT_STATS },
		{ "stats-json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct rmtree_opts o = { .jobs = 1, .error = rm_error };
	struct rmtree_stats st = { 0 };
	bool stats = false, json = false;
	struct timespec t0, t1;
	int opt, status = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "fvrRj:h", longopts, NULL)) !=
	       -1) {
		switch (opt) {
		case 'f':
			o.force = true;
			break;
		case 'v':
			o.removed = rm_removed;
			break;
		case 'r':
		case 'R':
			break;
		case 'j':
			if (parse_uint(optarg, &o.jobs) < 0) {
				fprintf(stderr, "sweepfs rm: bad -j '%s'\n",
					optarg);
				return 2;
			}
			if (o.jobs == 0) {
				long n = sysconf(_SC_NPROCESSORS_ONLN);

				o.jobs = n > 0 ? (unsigned)n : 1;
			}
			break;
		case OPT_ONE_FS:
			o.one_file_system = true;
			break;
		case OPT_MAX_FDS:
			if (parse_uint(optarg, &o.max_fds) < 0) {
				fprintf(stderr,
					"sweepfs rm: bad --max-fds '%s'\n",
					optarg);
				return 2;
			}
			break;
		case OPT_STATS:
			stats = true;
			break;
		case OPT_JSON:
			json = true;
			break;
		case 'h':
			rm_usage(stdout);
			return 0;
		default:
			rm_usage(stderr);
			return 2;
		}
	}
	if (optind == argc) {
		if (o.force)
			return 0;
		fprintf(stderr, "sweepfs rm: missing operand\n");
		rm_usage(stderr);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	status = rm_paths(argv + optind, argc - optind, &o, &st);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fflush(stdout);
	if (stats)
		print_stats(&st, o.jobs,
			    (double)(t1.tv_sec - t0.tv_sec) +
				    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (json)
		print_stats_json(&st, o.jobs,
				 (double)(t1.tv_sec - t0.tv_sec) +
					 (double)(t1.tv_nsec - t0.tv_nsec) /
						 1e9);
	return status;
}
