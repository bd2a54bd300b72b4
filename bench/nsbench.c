/*
 * nsbench: how fast the master's namespace comes back from disk, without
 * a daemon or a mount in the way.
 *
 *   sweepfs-nsbench make DIR FILES CHANGES [DIRS [KIND]]
 *	builds, in memory, DIRS directories (2) under the root holding
 *	FILES empty files between them, through mutation_apply() as a
 *	master does, and writes them as a checkpoint in DIR; then CHANGES
 *	more changes go to DIR's changelog, after the checkpoint. KIND
 *	"create" (the default): CHANGES more creates. KIND "rm": what a
 *	removal writes, CHANGES records in all: half of them unlinks of
 *	the first directory's files in the order rm -rf takes them
 *	(readdir's), then a detach of the last directory (rmr) and
 *	PurgeSteps of NSBENCH_PURGE_BATCH steps each (the purge's slice)
 *	for the other half. KIND "unlink": only the unlinks, CHANGES of
 *	them (as far as the first directory goes); KIND "purge": only the
 *	detach and the purge, CHANGES records.
 *
 *   sweepfs-nsbench load DIR [write]
 *	loads DIR's newest checkpoint and replays its changelog with the
 *	master's own functions (checkpoint_load(), changelog_replay_ahead()
 *	with mutation_prefetch() as its hint, mutation_apply()), and
 *	prints one line of JSON: the time of each,
 *	nodes/s and changes/s, the namespace's bytes per node
 *	(ns_memory(), what `status` reports) and the process's RSS growth
 *	per node; the replay's work (ns_replay_work(): a change each, and a
 *	node each that a purge freed or a copy made, what the master's
 *	checkpoint_changes bounds) and its rate; how long fork() holds the
 *	caller, the RSS and the part of it in transparent huge pages
 *	(what keeps that fork short); with "write", how long writing the
 *	result as a checkpoint takes (in a directory of its own under
 *	DIR, removed afterwards).
 *
 * Creating millions of files through FUSE takes many minutes on a small
 * machine; this makes a checkpoint of the same shape (names "f%09u", the
 * mount's default mode and owner) in seconds, so that a change to the
 * loader can be measured side by side with the one before it: build
 * this file against both trees and run `load` on the same DIR.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "changelog.h"
#include "checkpoint.h"
#include "log.h"
#include "mutation.h"
#include "namespace.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* CPU time: on a machine shared with others, wall time says more about
 * them than about the loader. */
static double cpu_s(void)
{
	return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

/* The calling thread's: the loop's core, without the helper beside it
 * (the prefault thread). */
static double thread_cpu_s(void)
{
	return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

/* Resident set size in bytes, from /proc/self/statm. */
static uint64_t rss_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (uint64_t)res * 4096;
}

/*
 * Anonymous memory in transparent huge pages, in bytes, from
 * /proc/self/smaps_rollup: what keeps fork() fast (master/slab.c); 0
 * where the kernel does not say.
 */
static uint64_t anon_huge_bytes(void)
{
	unsigned long long kb = 0;
	char line[256];
	FILE *f = fopen("/proc/self/smaps_rollup", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}

/* Steps in one PurgeSteps record of `make ... rm`: what one 200 us
 * slice of the purge (purge_slice's default) frees on this VM, about. */
#define NSBENCH_PURGE_BATCH 256u

struct gen {
	struct ns ns;
	uint64_t version;
	uint64_t ino;
	uint64_t edge;
	struct changelog *cl; /* NULL: in memory only */
};

/* Journal @m, applied already, as the next version; @prepared: by
 * changelog_prepare() before it was applied. */
static int gen_journal(struct gen *g, Sweepfs__Meta__Mutation *m, bool prepared)
{
	int rc;

	g->version++;
	g->ns.version = g->version;
	if (!g->cl)
		return 0;
	if (!prepared) {
		rc = changelog_prepare(g->cl, m);
		if (rc < 0)
			return rc;
	}
	changelog_append(g->cl, m, g->version);
	if (g->version % 4096 == 0)
		changelog_flush(g->cl);
	return 0;
}

/* Apply @m as the master would, then journal it. */
static int gen_apply(struct gen *g, Sweepfs__Meta__Mutation *m)
{
	int rc;

	m->time = 1700000000000000000LL + (int64_t)g->version;
	if (g->cl) {
		/* Packed before: an unlink frees the name it points to. */
		rc = changelog_prepare(g->cl, m);
		if (rc < 0)
			return rc;
	}
	rc = mutation_apply(&g->ns, m, g->version + 1);
	if (rc < 0)
		return rc;
	return gen_journal(g, m, true);
}

/* Create @name in @parent as the master would journal it. */
static int gen_create(struct gen *g, uint64_t parent, const char *name,
		      uint32_t mode)
{
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Create c = SWEEPFS__META__CREATE__INIT;

	m.op_case = SWEEPFS__META__MUTATION__OP_CREATE;
	m.create = &c;
	c.parent = parent;
	c.name.data = (uint8_t *)name;
	c.name.len = strlen(name);
	c.ino = ++g->ino;
	c.edge = ++g->edge;
	c.mode = mode;
	return gen_apply(g, &m);
}

/* File number @i: "f%09u" in directory @dir0 + @i % @ndirs. */
static int gen_file(struct gen *g, uint64_t dir0, uint64_t i, unsigned ndirs)
{
	char name[32];

	snprintf(name, sizeof(name), "f%09" PRIu64, i);
	return gen_create(g, dir0 + i % ndirs, name, S_IFREG | 0644);
}

/* Unlink (op UNLINK) or detach (op DETACH) @name in @parent. */
static int gen_remove(struct gen *g, uint64_t parent, const char *name,
		      bool detach)
{
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__Unlink u = SWEEPFS__META__UNLINK__INIT;
	Sweepfs__Meta__Detach d = SWEEPFS__META__DETACH__INIT;

	if (detach) {
		m.op_case = SWEEPFS__META__MUTATION__OP_DETACH;
		m.detach = &d;
		d.parent = parent;
		d.name.data = (uint8_t *)name;
		d.name.len = strlen(name);
	} else {
		m.op_case = SWEEPFS__META__MUTATION__OP_UNLINK;
		m.unlink = &u;
		u.parent = parent;
		u.name.data = (uint8_t *)name;
		u.name.len = strlen(name);
	}
	return gen_apply(g, &m);
}

/* Up to @count steps of the purge, journaled as purge.c does. */
static int gen_purge(struct gen *g, uint64_t count)
{
	Sweepfs__Meta__Mutation m = SWEEPFS__META__MUTATION__INIT;
	Sweepfs__Meta__PurgeSteps p = SWEEPFS__META__PURGE_STEPS__INIT;
	struct ns_purge_step s = { 0 };
	struct ns_purge_ahead a = { 0 };
	int64_t now = 1700000000000000000LL + (int64_t)g->version;
	uint64_t n = 0;

	while (n < count && ns_purge_next(&g->ns, &s)) {
		ns_purge_ahead(&g->ns, &a, &s);
		ns_purge_take(&g->ns, &s, now);
		n++;
	}
	if (!n)
		return -ENOENT;
	m.time = now;
	m.op_case = SWEEPFS__META__MUTATION__OP_PURGE_STEPS;
	m.purge_steps = &p;
	p.count = n;
	p.last = s.ino;
	return gen_journal(g, &m, false);
}

/* What `make` writes after the checkpoint (KIND). */
enum gen_kind {
	GEN_CREATE, /* more files */
	GEN_RM,	    /* unlinks, then a detach and its purge */
	GEN_UNLINK, /* unlinks only */
	GEN_PURGE,  /* a detach and its purge only */
};

/*
 * The changes of a removal: @changes records at most, @unlinks of them
 * unlinks of d0's files (f%09u, i % @ndirs == 0, in creation order, which
 * is readdir's), then, if @purge, the last directory detached and purged
 * with the records left.
 */
static int gen_removal(struct gen *g, uint64_t dir0, uint64_t files,
		       uint64_t changes, uint64_t unlinks, bool purge,
		       unsigned ndirs)
{
	uint64_t records = 0, nodes;
	char name[32];
	double c0;
	int rc = 0;

	for (uint64_t i = 0; i < files && records < unlinks && rc == 0;
	     i += ndirs) {
		snprintf(name, sizeof(name), "f%09" PRIu64, i);
		rc = gen_remove(g, dir0, name, false);
		records++;
	}
	if (rc < 0 || !purge || records >= changes)
		return rc;
	snprintf(name, sizeof(name), "d%u", ndirs - 1);
	rc = gen_remove(g, NS_ROOT_INO, name, true);
	records++;
	/* The purge's own speed (purge.c's walk, read-ahead included):
	 * what a master's purge_duty share of a core frees. */
	nodes = g->ns.nnodes;
	c0 = cpu_s();
	while (rc == 0 && records < changes) {
		rc = gen_purge(g, NSBENCH_PURGE_BATCH);
		records++;
	}
	fprintf(stderr, "purge: %" PRIu64 " nodes in %.3f cpu s\n",
		nodes - g->ns.nnodes, cpu_s() - c0);
	return rc == -ENOENT ? 0 : rc;
}

static void on_durable(void *arg, uint64_t version)
{
	(void)arg;
	(void)version;
}

static int cmd_make(const char *dir, uint64_t files, uint64_t changes,
		    unsigned ndirs, enum gen_kind kind)
{
	struct changelog_opts o = {
		.dir = dir,
		.sync = CL_SYNC_NEVER,
		.prealloc = 64u << 20,
		.on_durable = on_durable,
	};
	struct gen g = { .version = 0 };
	uv_loop_t loop;
	uint64_t dir0, first;
	char name[32];
	int rc;

	rc = ns_init(&g.ns, 1700000000000000000LL);
	if (rc < 0)
		return rc;
	g.ino = g.ns.next_ino - 1;
	g.edge = g.ns.next_edge - 1;
	dir0 = g.ino + 1;
	for (unsigned d = 0; d < ndirs && rc == 0; d++) {
		snprintf(name, sizeof(name), "d%u", d);
		rc = gen_create(&g, NS_ROOT_INO, name, S_IFDIR | 0755);
	}
	for (uint64_t i = 0; i < files && rc == 0; i++)
		rc = gen_file(&g, dir0, i, ndirs);
	if (rc == 0)
		rc = checkpoint_write(&g.ns, dir, g.version);
	if (rc < 0)
		goto out;
	fprintf(stderr, "checkpoint %" PRIu64 ": %" PRIu64 " nodes\n",
		g.version, g.ns.nnodes);
	if (changes == 0)
		goto out;
	first = g.version;
	rc = uv_loop_init(&loop);
	if (rc < 0)
		goto out;
	rc = changelog_open(&loop, &o, g.version, &g.cl);
	if (rc < 0)
		goto out_loop;
	if (kind == GEN_RM)
		rc = gen_removal(&g, dir0, files, changes, changes / 2, true,
				 ndirs);
	else if (kind == GEN_UNLINK)
		rc = gen_removal(&g, dir0, files, changes, changes, false,
				 ndirs);
	else if (kind == GEN_PURGE)
		rc = gen_removal(&g, dir0, files, changes, 0, true, ndirs);
	for (uint64_t i = files;
	     kind == GEN_CREATE && i < files + changes && rc == 0; i++)
		rc = gen_file(&g, dir0, i, ndirs);
	changelog_flush(g.cl);
	changelog_close(g.cl);
	uv_run(&loop, UV_RUN_DEFAULT);
	fprintf(stderr, "changelog: %" PRIu64 " changes, %" PRIu64 " nodes\n",
		g.version - first, g.ns.nnodes);
out_loop:
	uv_loop_close(&loop);
out:
	ns_release(&g.ns);
	return rc;
}

static int replay_one(void *arg, uint64_t version, const uint8_t *payload,
		      size_t len)
{
	return mutation_replay(arg, version, payload, len);
}

static void replay_hint(void *arg, unsigned stage, const uint8_t *payload,
			size_t len)
{
	mutation_prefetch(arg, stage, payload, len);
}

/*
 * How long fork() holds the caller: the master writes its checkpoints
 * from a forked child (checkpoint_start()), and the loop stands still
 * while the kernel copies its page tables. Seconds, or -1.
 */
static double fork_s(double *cpu)
{
	double t0 = now_s(), c0 = cpu_s(), t;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(0);
	t = now_s() - t0;
	/* The page tables are copied in the parent's time: on a busy
	 * machine its CPU time says more than the wall clock. */
	*cpu = cpu_s() - c0;
	waitpid(pid, NULL, 0);
	return t;
}

/*
 * How long writing @ns as a checkpoint takes (what the master's forked
 * writer does, checkpoint_start()), into a directory of its own under
 * @dir removed afterwards: wall seconds, its CPU seconds in @cpu; -1 on
 * failure.
 */
static double write_s(const struct ns *ns, const char *dir, double *cpu)
{
	char sub[4096], path[4200];
	double t0, c0, t;
	int rc;

	snprintf(sub, sizeof(sub), "%s/nsbench-write", dir);
	if (mkdir(sub, 0700) < 0 && errno != EEXIST)
		return -1;
	t0 = now_s();
	c0 = cpu_s();
	rc = checkpoint_write(ns, sub, ns->version);
	t = now_s() - t0;
	*cpu = cpu_s() - c0;
	checkpoint_name(path, sizeof(path), sub, ns->version);
	unlink(path);
	rmdir(sub);
	return rc < 0 ? -1 : t;
}

static int cmd_load(const char *dir, bool write)
{
	uint64_t rss0 = rss_bytes(), cp_version, last, nodes, work, bytes;
	double t0, t1, t2, c0, c1, c2, fork_wall, fork_cpu = 0;
	double write_wall = 0, write_cpu = 0, m1, m2;
	struct ns ns;
	int rc;

	rc = ns_init(&ns, 1700000000000000000LL);
	if (rc < 0)
		return rc;
	t0 = now_s();
	c0 = cpu_s();
	rc = checkpoint_load(&ns, dir, &cp_version);
	if (rc < 0)
		goto out;
	t1 = now_s();
	c1 = cpu_s();
	m1 = thread_cpu_s();
	nodes = ns.nnodes;
	work = ns_replay_work(&ns);
	/* As the master does it (master.c, load_metadata()). */
	if (changelog_bytes_after(dir, cp_version, &bytes) == 0)
		ns_replay_ahead(&ns, bytes);
	rc = changelog_replay_ahead(dir, cp_version, replay_one, replay_hint,
				    &ns, &last);
	ns_load_end(&ns);
	if (rc < 0)
		goto out;
	t2 = now_s();
	c2 = cpu_s();
	m2 = thread_cpu_s();
	work = ns_replay_work(&ns) - work;
	fork_wall = fork_s(&fork_cpu);
	if (write)
		write_wall = write_s(&ns, dir, &write_cpu);
	printf("{\"nodes\": %" PRIu64 ", \"load_s\": %.3f, \"load_cpu_s\": "
	       "%.3f, \"nodes_per_cpu_s\": %.0f, \"changes\": %" PRIu64
	       ", \"replay_s\": %.3f, \"replay_cpu_s\": %.3f, "
	       "\"replay_main_cpu_s\": %.3f, \"changes_per_s\": %.0f, "
	       "\"changes_per_cpu_s\": %.0f, \"replay_work\": %" PRIu64
	       ", \"work_per_cpu_s\": %.0f, \"total_nodes\": %" PRIu64
	       ", \"ns_bytes_per_node\": %.1f, \"rss_bytes_per_node\": "
	       "%.1f, \"fork_ms\": %.1f, \"fork_cpu_ms\": %.1f, "
	       "\"write_s\": %.3f, \"write_cpu_s\": %.3f, \"rss_mib\": "
	       "%.1f, \"anon_huge_mib\": %.1f, \"digest\": \"%016" PRIx64
	       "\"}\n",
	       nodes, t1 - t0, c1 - c0, (double)nodes / (c1 - c0),
	       last - cp_version, t2 - t1, c2 - c1, m2 - m1,
	       (double)(last - cp_version) / (t2 - t1),
	       (double)(last - cp_version) / (c2 - c1), work,
	       (double)work / (c2 - c1), ns.nnodes,
	       (double)ns_memory(&ns) / (double)ns.nnodes,
	       (double)(rss_bytes() - rss0) / (double)ns.nnodes,
	       fork_wall * 1e3, fork_cpu * 1e3, write_wall, write_cpu,
	       (double)rss_bytes() / 1048576.0,
	       (double)anon_huge_bytes() / 1048576.0, ns_digest(&ns));
out:
	ns_release(&ns);
	return rc;
}

int main(int argc, char **argv)
{
	int rc;

	if (argc >= 5 && strcmp(argv[1], "make") == 0) {
		unsigned ndirs = argc > 5 ? (unsigned)atoi(argv[5]) : 2;
		static const char *const kinds[] = { "create", "rm", "unlink",
						     "purge" };
		enum gen_kind kind = GEN_CREATE;

		if (ndirs < 1)
			ndirs = 1;
		for (unsigned k = 0; argc > 6 && k < 4; k++)
			if (strcmp(argv[6], kinds[k]) == 0)
				kind = (enum gen_kind)k;
		if (argc > 6 && strcmp(argv[6], kinds[kind])) {
			fprintf(stderr,
				"make: KIND is create, rm, unlink or purge\n");
			return 2;
		}
		rc = cmd_make(argv[2], strtoull(argv[3], NULL, 10),
			      strtoull(argv[4], NULL, 10), ndirs, kind);
	} else if ((argc == 3 || (argc == 4 && !strcmp(argv[3], "write"))) &&
		   strcmp(argv[1], "load") == 0) {
		rc = cmd_load(argv[2], argc == 4);
	} else {
		fprintf(stderr,
			"usage: %s make DIR FILES CHANGES [DIRS [create|rm|unlink|purge]]\n"
			"       %s load DIR [write]\n",
			argv[0], argv[0]);
		return 2;
	}
	if (rc < 0)
		fprintf(stderr, "%s: %s\n", argv[1], strerror(-rc));
	return rc < 0 ? 1 : 0;
}
