/*
 * cdel_report: what compare-delete shows and keeps. A table per tree size
 * with the ratios that matter (removeall and go-removeall against rm -rf,
 * for wall time and wire bytes: the MooseFS post's comparison); a JSON
 * file with every number and the run's context, rewritten after each
 * size so that an interrupted run keeps what it measured; and a gnuplot
 * script, run if gnuplot is there, plotting files/s by size.
 *
 * For rmr and snapshot, "files/s" in the table is by the time the request
 * took (the namespace is free then), and the plot uses the time until the
 * purge finished (the resources are free then): both are in the JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cdel.h"
#include "cdel_build.h"
#include "util.h"

#ifndef CDEL_BUILDTYPE
#define CDEL_BUILDTYPE "unknown"
#endif
#ifndef CDEL_SANITIZE
#define CDEL_SANITIZE "unknown"
#endif

const struct cdel_result *cdel_find_result(const struct cdel_run *r,
					   uint64_t size, int fs,
					   enum cdel_method_id m)
{
	for (size_t i = 0; i < r->nres; i++) {
		const struct cdel_result *x = &r->res[i];

		if (x->size == size && x->fs == fs && x->method == m)
			return x;
	}
	return NULL;
}

uint64_t cdel_wire_bytes(const struct cdel_result *res)
{
	return res->wire.bytes_in + res->wire.bytes_out;
}

double cdel_files_per_s(const struct cdel_result *res, bool purged)
{
	double t = purged && res->purge_s >= 0 ? res->purge_s : res->wall_s;

	return t > 0 ? (double)res->files / t : 0;
}

static bool usable(const struct cdel_result *x)
{
	return x && x->status == CDEL_OK;
}

/* @a / @b of wall time (or wire bytes), or 0 when either is missing. */
static double ratio(const struct cdel_result *a, const struct cdel_result *b,
		    bool wire)
{
	if (!usable(a) || !usable(b))
		return 0;
	if (wire)
		return a->has_wire && b->has_wire && cdel_wire_bytes(b) ?
			       (double)cdel_wire_bytes(a) /
				       (double)cdel_wire_bytes(b) :
			       0;
	return b->wall_s > 0 ? a->wall_s / b->wall_s : 0;
}

/* ---- the table ------------------------------------------------------- */

static const char *fmt_num(double v, char *buf, size_t len)
{
	if (v >= 1e7)
		snprintf(buf, len, "%.2e", v);
	else if (v >= 100)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.2f", v);
	return buf;
}

static void table_row(const struct cdel_run *r, const struct cdel_result *x)
{
	char a[32], b[32], c[32], d[32], e[32], f[32], g[64];

	printf("%-13s %-10s ", cdel_methods[x->method].name,
	       r->fs[x->fs].label);
	if (x->status == CDEL_NA) {
		printf("n/a: %s\n", x->note);
		return;
	}
	snprintf(a, sizeof(a), "%.3f", x->wall_s);
	if (x->purge_s >= 0)
		snprintf(b, sizeof(b), "%.3f", x->purge_s);
	else
		strcpy(b, "-");
	fmt_num(cdel_files_per_s(x, false), c, sizeof(c));
	if (x->cpu_s >= 0)
		snprintf(d, sizeof(d), "%.2f", x->cpu_s);
	else
		strcpy(d, "-");
	if (x->has_wire && x->files)
		snprintf(e, sizeof(e), "%.1f",
			 (double)cdel_wire_bytes(x) / (double)x->files);
	else
		strcpy(e, "-");
	if (x->sys.valid && x->files)
		snprintf(f, sizeof(f), "%.3f",
			 (double)x->sys.total / (double)x->files);
	else
		strcpy(f, "-");
	if (x->has_probe && x->probe.samples)
		snprintf(g, sizeof(g), "%.2f/%.2f/%.1f", x->probe.p50_ms,
			 x->probe.p99_ms, x->probe.max_ms);
	else
		strcpy(g, "-");
	printf("%9s %9s %10s %7s %11s %9s  %s", a, b, c, d, e, f, g);
	if (x->status == CDEL_FAILED)
		printf("  FAILED: %s", x->note);
	printf("\n");
}

static void ratio_line(const struct cdel_run *r, uint64_t size,
		       enum cdel_method_id m)
{
	bool any = false;

	for (int fs = 0; fs < r->nfs; fs++) {
		const struct cdel_result *a = cdel_find_result(r, size, fs, m);
		const struct cdel_result *b =
			cdel_find_result(r, size, fs, CDEL_RM_RF);
		double w = ratio(a, b, false), n = ratio(a, b, true);

		if (w <= 0)
			continue;
		printf("%s%s: wall %.2f", any ? "; " : "", r->fs[fs].label, w);
		if (n > 0)
			printf(", wire bytes %.2f", n);
		any = true;
	}
	if (any)
		printf("  (%s / rm-rf)\n", cdel_methods[m].name);
}

void cdel_report_table(const struct cdel_run *r, uint64_t size)
{
	const struct cdel_result *any = NULL;

	for (size_t i = 0; i < r->nres && !any; i++)
		if (r->res[i].size == size)
			any = &r->res[i];
	if (!any)
		return;
	printf("\n%s tree, %" PRIu64 " files in %" PRIu64 " directories\n",
	       treegen_shape_name(r->shape), any->files, any->dirs);
	printf("%-13s %-10s %9s %9s %10s %7s %11s %9s  %s\n", "method", "fs",
	       "wall s", "purged s", "files/s", "mCPU s", "wire B/file",
	       "sys/file", "stat p50/p99/max ms");
	for (int fs = 0; fs < r->nfs; fs++)
		for (int m = 0; m < CDEL_NMETHODS; m++) {
			const struct cdel_result *x =
				cdel_find_result(r, size, fs, m);

			if (x)
				table_row(r, x);
		}
	ratio_line(r, size, CDEL_REMOVEALL);
	ratio_line(r, size, CDEL_GO_REMOVEALL);
	fflush(stdout);
}

/* ---- the context ------------------------------------------------------- */

static void cpu_model(char *buf, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "re");

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) || !colon)
			continue;
		colon++;
		while (*colon == ' ' || *colon == '\t')
			colon++;
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(buf, len, "%s", colon);
		break;
	}
	fclose(f);
}

static void json_machine(struct json *j, const struct cdel_run *r)
{
	struct utsname u;
	struct sysinfo si;
	char host[256] = "", cpu[256];

	gethostname(host, sizeof(host));
	cpu_model(cpu, sizeof(cpu));
	json_obj_begin(j, "machine");
	json_str(j, "hostname", host);
	if (uname(&u) == 0) {
		char k[600];

		snprintf(k, sizeof(k), "%s %s %s %s", u.sysname, u.release,
			 u.version, u.machine);
		json_str(j, "kernel", k);
	}
	json_str(j, "cpu_model", cpu);
	json_i64(j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	if (sysinfo(&si) == 0)
		json_u64(j, "mem_bytes", (uint64_t)si.totalram * si.mem_unit);
	json_str(j, "loadavg_at_start", r->loadavg);
	json_obj_end(j);
}

static void json_build(struct json *j, const struct cdel_run *r)
{
	json_obj_begin(j, "tool");
	json_str(j, "name", "sweepfs compare-delete");
	json_str(j, "version", SWEEPFS_VERSION);
	json_str(j, "commit", CDEL_COMMIT);
	json_str(j, "buildtype", CDEL_BUILDTYPE);
	json_str(j, "sanitize", CDEL_SANITIZE);
	json_arr_begin(j, "argv");
	for (int i = 0; i < r->argc; i++)
		json_str(j, NULL, r->argv[i]);
	json_arr_end(j);
	json_obj_end(j);
	json_obj_begin(j, "programs");
	json_str(j, "rm", r->rm_version);
	json_str(j, "strace", r->strace[0] ? r->strace_version : NULL);
	json_str(j, "go", r->go_bin[0] ? r->go_version : NULL);
	if (!r->go_bin[0])
		json_str(j, "go_note", r->go_note);
	json_str(j, "sweepfs_mount", r->mount_bin);
	json_obj_end(j);
}

static void json_options(struct json *j, const struct cdel_run *r)
{
	json_obj_begin(j, "run");
	json_str(j, "shape", treegen_shape_name(r->shape));
	json_arr_begin(j, "sizes");
	for (int i = 0; i < r->nsizes; i++)
		json_u64(j, NULL, r->sizes[i]);
	json_arr_end(j);
	json_arr_begin(j, "methods");
	for (int m = 0; m < CDEL_NMETHODS; m++)
		if (r->methods[m])
			json_str(j, NULL, cdel_methods[m].name);
	json_arr_end(j);
	json_u64(j, "sweepfs_rm_jobs", r->jobs);
	json_str(j, "strace",
		 r->strace_mode == CDEL_STRACE_SEPARATE ? "separate" :
		 r->strace_mode == CDEL_STRACE_SAME	? "same" :
							  "off");
	json_u64(j, "probe_pause_us", r->probe_pause_us);
	json_dbl(j, "timeout_s", r->timeout_s);
	json_flag(j, "caches_dropped", r->caches_dropped);
	json_obj_end(j);
}

static void json_fs(struct json *j, const struct cdel_fs *fs)
{
	json_obj_begin(j, NULL);
	json_str(j, "label", fs->label);
	json_str(j, "path", fs->root);
	json_str(j, "fstype", fs->fstype);
	json_str(j, "mount_point", fs->mnt);
	json_str(j, "mount_source", fs->mnt_source);
	json_str(j, "mount_options", fs->mnt_opts);
	json_flag(j, "sweepfs", fs->sweepfs);
	json_str(j, "probe", fs->probe_ok ? fs->probe_dir : NULL);
	if (!fs->probe_ok)
		json_str(j, "probe_note", fs->probe_note);
	if (fs->sweepfs) {
		const Sweepfs__InfoReply *s = fs->info0;
		/* host:port/subdir, each part as long as sw_target allows */
		char master[sizeof(fs->target.host) + 8 +
			    sizeof(fs->target.subdir)];

		snprintf(master, sizeof(master), "%s:%u%s", fs->target.host,
			 fs->target.port, fs->target.subdir);
		json_str(j, "master", master);
		json_str(j, "mount_command", fs->mount_cmdline);
		json_str(j, "session_name", fs->session_name);
		json_flag(j, "session_found", fs->mount_session != 0);
		json_str(j, "probe_mount", fs->probe_mnt);
		json_str(j, "probe_mount_options", fs->probe_opts);
		json_u64(j, "trashtime_before", fs->trashtime0);
		if (s) {
			json_obj_begin(j, "master_status");
			json_str(j, "server_version", s->server_version);
			json_str(j, "changelog_sync", s->changelog_sync);
			json_u64(j, "uptime_ms", s->uptime_ms);
			json_u64(j, "nodes", s->nodes);
			json_u64(j, "dirs", s->dirs);
			json_u64(j, "rss_bytes", s->rss_bytes);
			json_u64(j, "meta_version", s->meta_version);
			json_u64(j, "chunks", s->chunks);
			json_u64(j, "chunkservers", s->n_servers);
			json_u64(j, "connections", s->connections);
			json_u64(j, "purge_roots", s->purge_roots);
			json_obj_end(j);
		}
	}
	json_obj_end(j);
}

static void json_wire(struct json *j, const char *key,
		      const struct cdel_wire *w, uint64_t files)
{
	json_obj_begin(j, key);
	json_u64(j, "bytes_in", w->bytes_in);
	json_u64(j, "bytes_out", w->bytes_out);
	json_dbl(j, "bytes_per_file",
		 files ? (double)(w->bytes_in + w->bytes_out) / (double)files :
			 0);
	json_u64(j, "readdir_entries", w->readdir_entries);
	json_u64(j, "batch_ops", w->batch_ops);
	json_u64(j, "errors", w->errors);
	json_obj_begin(j, "requests");
	for (unsigned t = 0; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *info = sw_msg_info((uint16_t)t);

		if (info && w->requests[t])
			json_u64(j, info->name, w->requests[t]);
	}
	json_obj_end(j);
	json_obj_end(j);
}

/*
 * System calls a program's runtime makes whatever it deletes: Go's
 * scheduler, memory and signal set-up, process start-up. Left out of
 * "filesystem_calls", so that a Go program and a C one can be compared on
 * what they ask of the filesystem.
 */
static bool runtime_call(const char *name)
{
	static const char *const names[] = {
		"futex",	   "nanosleep",
		"sched_yield",	   "mmap",
		"munmap",	   "madvise",
		"mprotect",	   "brk",
		"rt_sigaction",	   "rt_sigprocmask",
		"rt_sigreturn",	   "sigaltstack",
		"clone",	   "clone3",
		"gettid",	   "getpid",
		"tgkill",	   "sched_getaffinity",
		"arch_prctl",	   "set_tid_address",
		"set_robust_list", "rseq",
		"prlimit64",	   "getrandom",
		"execve",	   "epoll_create1",
		"epoll_ctl",	   "epoll_pwait",
		"epoll_pwait2",	   "eventfd2",
		"pipe2",	   "read",
		"pread64",	   "write",
		"uname",	   "access",
		"sysinfo",	   "ioctl",
	};

	for (size_t i = 0; i < SW_ARRAY_SIZE(names); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

static const char *status_name(enum cdel_status s)
{
	return s == CDEL_OK ? "ok" : s == CDEL_NA ? "n/a" : "failed";
}

static void json_result(struct json *j, const struct cdel_run *r,
			const struct cdel_result *x)
{
	uint64_t fs_calls;

	json_obj_begin(j, NULL);
	json_u64(j, "size", x->size);
	json_str(j, "fs", r->fs[x->fs].label);
	json_str(j, "method", cdel_methods[x->method].name);
	json_str(j, "status", status_name(x->status));
	json_str(j, "note", x->note);
	json_u64(j, "files", x->files);
	json_u64(j, "dirs", x->dirs);
	if (x->status == CDEL_NA)
		goto out;
	json_dbl(j, "wall_s", x->wall_s);
	json_dbl(j, "files_per_s", cdel_files_per_s(x, false));
	if (x->method == CDEL_SNAPSHOT)
		json_dbl(j, "flag_s", x->flag_s);
	if (x->purge_s >= 0) {
		json_dbl(j, "purged_s", x->purge_s);
		json_dbl(j, "files_per_s_purged", cdel_files_per_s(x, true));
		json_u64(j, "nodes_detached", x->nodes);
	}
	if (x->cpu_s >= 0)
		json_dbl(j, "master_cpu_s", x->cpu_s);
	if (x->has_wire) {
		json_str(j, "wire_source", x->wire_source);
		json_wire(j, "wire", &x->wire, x->files);
		json_wire(j, "master_total", &x->total, x->files);
	}
	if (x->sys.valid) {
		json_obj_begin(j, "syscalls");
		json_str(j, "source", x->sys.source);
		json_u64(j, "total", x->sys.total);
		json_dbl(j, "per_file",
			 x->files ? (double)x->sys.total / (double)x->files :
				    0);
		json_obj_begin(j, "by_type");
		for (int i = 0; i < x->sys.n; i++)
			json_u64(j, x->sys.v[i].name, x->sys.v[i].calls);
		json_obj_end(j);
		json_obj_begin(j, "errors_by_type");
		for (int i = 0; i < x->sys.n; i++)
			if (x->sys.v[i].errors)
				json_u64(j, x->sys.v[i].name,
					 x->sys.v[i].errors);
		json_obj_end(j);
		fs_calls = 0;
		for (int i = 0; i < x->sys.n; i++)
			if (!runtime_call(x->sys.v[i].name))
				fs_calls += x->sys.v[i].calls;
		json_u64(j, "filesystem_calls", fs_calls);
		json_dbl(j, "filesystem_calls_per_file",
			 x->files ? (double)fs_calls / (double)x->files : 0);
		json_obj_end(j);
	}
	if (x->strace_wall_s >= 0)
		json_dbl(j, "strace_run_wall_s", x->strace_wall_s);
	if (x->method == CDEL_REMOVEALL) {
		json_u64(j, "directory_passes", x->passes);
		json_u64(j, "names_listed", x->names_listed);
	}
	if (x->exit_status >= 0)
		json_i64(j, "exit_status", x->exit_status);
	if (x->has_probe) {
		json_obj_begin(j, "stat_probe");
		json_u64(j, "samples", x->probe.samples);
		json_u64(j, "errors", x->probe.errors);
		if (x->probe.errors)
			json_str(j, "first_error",
				 strerror(x->probe.first_error));
		json_dbl(j, "p50_ms", x->probe.p50_ms);
		json_dbl(j, "p99_ms", x->probe.p99_ms);
		json_dbl(j, "max_ms", x->probe.max_ms);
		json_obj_end(j);
	}
out:
	json_obj_end(j);
}

static void json_ratios(struct json *j, const struct cdel_run *r)
{
	static const enum cdel_method_id against[] = { CDEL_REMOVEALL,
						       CDEL_GO_REMOVEALL,
						       CDEL_SWEEPFS_RM };

	json_arr_begin(j, "ratios");
	for (int i = 0; i < r->nsizes; i++) {
		for (int fs = 0; fs < r->nfs; fs++) {
			const struct cdel_result *b = cdel_find_result(
				r, r->sizes[i], fs, CDEL_RM_RF);

			for (size_t k = 0; k < SW_ARRAY_SIZE(against); k++) {
				const struct cdel_result *a = cdel_find_result(
					r, r->sizes[i], fs, against[k]);
				double w = ratio(a, b, false);
				double n = ratio(a, b, true);
				char what[64];

				if (w <= 0)
					continue;
				snprintf(what, sizeof(what), "%s/rm-rf",
					 cdel_methods[against[k]].name);
				json_obj_begin(j, NULL);
				json_u64(j, "size", r->sizes[i]);
				json_str(j, "fs", r->fs[fs].label);
				json_str(j, "ratio", what);
				json_dbl(j, "wall", w);
				if (n > 0)
					json_dbl(j, "wire_bytes", n);
				json_obj_end(j);
			}
		}
	}
	json_arr_end(j);
}

int cdel_report_json(const struct cdel_run *r)
{
	char tmp[PATH_MAX + 8], when[64];
	time_t t = (time_t)(r->started / SW_NSEC_PER_SEC);
	struct tm tm;
	struct json j;
	FILE *f;
	int rc = 0;

	/* Written aside and renamed: a reader never sees half a file. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", r->json_path);
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S%z", &tm);
	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_str(&j, "started", when);
	json_build(&j, r);
	json_machine(&j, r);
	json_options(&j, r);
	json_arr_begin(&j, "filesystems");
	for (int i = 0; i < r->nfs; i++)
		json_fs(&j, &r->fs[i]);
	json_arr_end(&j);
	json_arr_begin(&j, "results");
	for (size_t i = 0; i < r->nres; i++)
		json_result(&j, r, &r->res[i]);
	json_arr_end(&j);
	json_ratios(&j, r);
	json_obj_end(&j);
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, r->json_path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* ---- the plot -------------------------------------------------------- */

/* @path with its extension (if any) replaced by @ext. */
static void with_ext(const char *path, const char *ext, char *out, size_t len)
{
	const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
	size_t n = dot && (!slash || dot > slash) ? (size_t)(dot - path) :
						    strlen(path);

	snprintf(out, len, "%.*s%s", (int)n, path, ext);
}

/* Write the script; returns the number of series plotted. */
static int write_plot(const struct cdel_run *r, FILE *f)
{
	int series = 0;

	fprintf(f,
		"# sweepfs compare-delete: files removed per second by "
		"tree size.\n# Made from %s; run it with gnuplot.\n",
		r->json_path);
	fprintf(f, "set terminal svg size 960,600 dynamic enhanced "
		   "font 'sans,11' background rgb 'white'\n");
	fprintf(f, "set output '%s'\n", r->plot_path);
	fprintf(f,
		"set title \"%s tree: files removed per second "
		"(rmr, snapshot: until purged)\"\n",
		treegen_shape_name(r->shape));
	fprintf(f, "set logscale xy\nset grid\nset key outside right\n");
	fprintf(f, "set xlabel 'files in the tree'\n"
		   "set ylabel 'files per second'\n");
	for (int fs = 0; fs < r->nfs; fs++) {
		for (int m = 0; m < CDEL_NMETHODS; m++) {
			int points = 0;

			for (int i = 0; i < r->nsizes; i++) {
				const struct cdel_result *x =
					cdel_find_result(r, r->sizes[i], fs, m);

				if (!usable(x))
					continue;
				if (!points++)
					fprintf(f, "$d%d_%d << EOD\n", fs, m);
				fprintf(f, "%" PRIu64 " %.6g\n", x->files,
					cdel_files_per_s(x, true));
			}
			if (points) {
				fprintf(f, "EOD\n");
				series++;
			}
		}
	}
	if (!series)
		return 0;
	fprintf(f, "plot \\\n");
	for (int fs = 0, k = 0; fs < r->nfs; fs++) {
		for (int m = 0; m < CDEL_NMETHODS; m++) {
			bool has = false;

			for (int i = 0; i < r->nsizes && !has; i++)
				has = usable(cdel_find_result(r, r->sizes[i],
							      fs, m));
			if (!has)
				continue;
			fprintf(f,
				"  $d%d_%d using 1:2 with linespoints "
				"dashtype %d title '%s (%s)'%s\n",
				fs, m, fs + 1, cdel_methods[m].name,
				r->fs[fs].label, ++k < series ? ", \\" : "");
		}
	}
	return series;
}

int cdel_report_plot(const struct cdel_run *r)
{
	char script[PATH_MAX + 8], gnuplot[PATH_MAX], log[PATH_MAX];
	char *argv[3];
	FILE *f;
	int rc, series;

	with_ext(r->plot_path, ".gp", script, sizeof(script));
	f = fopen(script, "we");
	if (!f) {
		rc = -errno;
		fprintf(stderr, "sweepfs compare-delete: %s: %s\n", script,
			strerror(-rc));
		return rc;
	}
	series = write_plot(r, f);
	if (fclose(f) != 0 || series == 0) {
		unlink(script);
		if (series == 0)
			printf("plot: nothing to plot\n");
		return series == 0 ? 0 : -EIO;
	}
	if (!cdel_which("gnuplot", gnuplot, sizeof(gnuplot))) {
		printf("plot: gnuplot is not installed; the script is %s\n",
		       script);
		return 0;
	}
	snprintf(log, sizeof(log), "%s/gnuplot.txt", r->tmp);
	argv[0] = gnuplot;
	argv[1] = script;
	argv[2] = NULL;
	rc = cdel_run_prog(argv, NULL, log, NULL);
	if (rc != 0) {
		char line[256] = "";

		f = fopen(log, "re");
		if (f) {
			if (!fgets(line, sizeof(line), f))
				line[0] = '\0';
			fclose(f);
		}
		fprintf(stderr,
			"sweepfs compare-delete: gnuplot %s failed: "
			"%s\n",
			script, line);
		return -EIO;
	}
	printf("plot: %s (gnuplot script %s)\n", r->plot_path, script);
	return 0;
}
