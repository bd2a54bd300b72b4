/*
 * sweepfs fsck [--json] [-n MAX] [PATH]: have the master check its state
 * (namespace, chunk references, chunkserver inventories) as of one
 * instant, and name the files (paths from the filesystem's root) whose
 * chunks are lost or under their goal, as mfsfileinfo would show them.
 * Exit status 0: consistent; 1: problems found (listed), or
 * the check failed (said on stderr); 2: usage; 3 to 6 as for every
 * command (tool.h) when the master cannot be asked.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

struct count {
	const char *key;
	const char *what;
	uint64_t v;
};

#define NCOUNTS 8

/* The counts of problems of @r, into @c (NCOUNTS); their sum. */
static uint64_t fsck_counts(const Sweepfs__FsckReply *r, struct count *c)
{
	const struct count t[NCOUNTS] = {
		{ "leaked_nodes", "nodes reachable from nothing",
		  r->leaked_nodes },
		{ "bad_links", "link counts that are wrong", r->bad_links },
		{ "bad_dirs", "directories with wrong counts", r->bad_dirs },
		{ "missing_chunks", "slots naming no chunk",
		  r->missing_chunks },
		{ "bad_refs", "chunk reference counts that are wrong",
		  r->bad_refs },
		{ "unreferenced_chunks", "chunks nothing references",
		  r->unreferenced_chunks },
		{ "lost_chunks", "chunks with no valid copy", r->lost_chunks },
		{ "inventory_mismatches", "chunkservers off the master's count",
		  r->inventory_mismatches },
	};
	uint64_t total = 0;

	for (size_t i = 0; i < NCOUNTS; i++) {
		c[i] = t[i];
		total += c[i].v;
	}
	return total;
}

/* @b's path as a C string (a path from the master has no NUL); NULL:
 * no memory. The caller frees it. */
static char *bad_path(const Sweepfs__FsckBadFile *b)
{
	char *p = malloc(b->path.len + 1);

	if (p) {
		memcpy(p, b->path.data, b->path.len);
		p[b->path.len] = '\0';
	}
	return p;
}

static void bad_files_json(struct json *j, const Sweepfs__FsckReply *r)
{
	json_u64(j, "bad_files_total", r->bad_files_total);
	json_flag(j, "bad_files_cut", r->bad_files_cut);
	json_arr_begin(j, "bad_files");
	for (size_t i = 0; i < r->n_bad_files; i++) {
		const Sweepfs__FsckBadFile *b = r->bad_files[i];
		char *path = bad_path(b);

		json_obj_begin(j, NULL);
		json_str(j, "path", path ? path : "");
		json_u64(j, "ino", b->ino);
		json_u64(j, "lost", b->lost);
		json_u64(j, "undergoal", b->undergoal);
		json_arr_begin(j, "chunks");
		for (size_t k = 0; k < b->n_chunks; k++) {
			const Sweepfs__FsckBadChunk *c = b->chunks[k];
			char id[20];

			snprintf(id, sizeof(id), "%016" PRIx64, c->chunk_id);
			json_obj_begin(j, NULL);
			json_u64(j, "index", c->index);
			json_str(j, "chunk", id);
			json_u64(j, "copies", c->copies);
			json_u64(j, "goal", c->goal);
			json_obj_end(j);
		}
		json_arr_end(j);
		json_obj_end(j);
		free(path);
	}
	json_arr_end(j);
}

static void bad_files_text(const Sweepfs__FsckReply *r)
{
	for (size_t i = 0; i < r->n_bad_files; i++) {
		const Sweepfs__FsckBadFile *b = r->bad_files[i];
		char *path = bad_path(b);

		printf("  %s: ", path ? path : "?");
		if (b->lost)
			printf("%" PRIu64 " chunks LOST%s", b->lost,
			       b->undergoal ? ", " : "");
		if (b->undergoal)
			printf("%" PRIu64 " under goal", b->undergoal);
		printf(" (inode %" PRIu64 ")\n", b->ino);
		for (size_t k = 0; k < b->n_chunks; k++) {
			const Sweepfs__FsckBadChunk *c = b->chunks[k];

			printf("    chunk %u (%016" PRIx64
			       "): %u of %u copies\n",
			       c->index, c->chunk_id, c->copies, c->goal);
		}
		if (b->n_chunks < b->lost + b->undergoal)
			printf("    ... and %" PRIu64 " more chunks\n",
			       b->lost + b->undergoal - b->n_chunks);
		free(path);
	}
	if (r->bad_files_cut)
		printf("  ... the list stops here: %" PRIu64 " files in all "
		       "(-n to see more)\n",
		       r->bad_files_total);
}

static void fsck_json(const Sweepfs__FsckReply *r, const struct count *counts,
		      uint64_t total)
{
	struct json j;

	json_init(&j, stdout);
	json_obj_begin(&j, NULL);
	json_flag(&j, "ok", total == 0);
	json_u64(&j, "nodes", r->nodes);
	json_u64(&j, "dirs", r->dirs);
	json_u64(&j, "chunks", r->chunks);
	for (size_t i = 0; i < NCOUNTS; i++)
		json_u64(&j, counts[i].key, counts[i].v);
	json_u64(&j, "undergoal_chunks", r->undergoal_chunks);
	json_u64(&j, "endangered_chunks", r->endangered_chunks);
	json_u64(&j, "overgoal_chunks", r->overgoal_chunks);
	json_u64(&j, "goal_unreachable_chunks", r->goal_unreachable_chunks);
	json_u64(&j, "servers_up", r->servers_up);
	json_u64(&j, "elapsed_us", r->elapsed_us);
	json_arr_begin(&j, "servers");
	for (size_t i = 0; i < r->n_servers; i++) {
		const Sweepfs__FsckServer *s = r->servers[i];

		json_obj_begin(&j, NULL);
		json_str(&j, "listen", s->listen);
		json_flag(&j, "connected", s->connected);
		json_u64(&j, "known", s->known);
		json_u64(&j, "deletes_pending", s->deletes_pending);
		json_u64(&j, "reported", s->reported);
		json_flag(&j, "in_motion", s->in_motion);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	bad_files_json(&j, r);
	json_arr_begin(&j, "problems");
	for (size_t i = 0; i < r->n_problems; i++)
		json_str(&j, NULL, r->problems[i]);
	json_arr_end(&j);
	json_obj_end(&j);
}

static void fsck_text(const Sweepfs__FsckReply *r, const struct count *counts,
		      uint64_t total)
{
	printf("checked %" PRIu64 " nodes (%" PRIu64
	       " directories) and %" PRIu64 " chunks in %.3f s\n",
	       r->nodes, r->dirs, r->chunks, (double)r->elapsed_us / 1e6);
	for (size_t i = 0; i < r->n_servers; i++) {
		const Sweepfs__FsckServer *s = r->servers[i];

		printf("  chunkserver %-22s %-9s %" PRIu64
		       " chunk files, %" PRIu64 " copies known, %" PRIu64
		       " deletions queued%s\n",
		       s->listen, s->connected ? "connected" : "down",
		       s->reported, s->known, s->deletes_pending,
		       s->in_motion ? " (busy: counts not compared)" : "");
	}
	for (size_t i = 0; i < NCOUNTS; i++)
		if (counts[i].v)
			printf("%" PRIu64 " %s\n", counts[i].v, counts[i].what);
	if (r->undergoal_chunks)
		printf("%" PRIu64 " chunks with fewer copies than the goal "
		       "(%" PRIu64 " with one copy left)\n",
		       r->undergoal_chunks, r->endangered_chunks);
	if (r->goal_unreachable_chunks)
		printf("%" PRIu64 " chunks with a goal above the %u "
		       "chunkservers connected: they cannot be replicated to "
		       "it until more servers join or the goal is lowered\n",
		       r->goal_unreachable_chunks, r->servers_up);
	else if (r->undergoal_chunks)
		printf("  (being replicated)\n");
	if (r->overgoal_chunks)
		printf("%" PRIu64 " chunks with more copies than the goal "
		       "(being trimmed)\n",
		       r->overgoal_chunks);
	for (size_t i = 0; i < r->n_problems; i++)
		printf("  %s\n", r->problems[i]);
	if (r->n_problems < total)
		printf("  ... and %" PRIu64 " more\n", total - r->n_problems);
	if (r->n_bad_files)
		printf("files with chunks lost or under their goal:\n");
	bad_files_text(r);
	printf("%s\n", total ? "PROBLEMS FOUND" : "consistent");
}

int cmd_fsck(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "max-problems", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	Sweepfs__FsckReq q = SWEEPFS__FSCK_REQ__INIT;
	struct tool_caller who;
	struct count counts[NCOUNTS];
	Sweepfs__FsckReply *r;
	ProtobufCMessage *reply;
	struct sw_client *c;
	bool json = false;
	uint64_t total;
	int opt, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "jn:h", longopts, NULL)) != -1) {
		if (opt == 'j') {
			json = true;
		} else if (opt == 'n') {
			q.has_max_problems = 1;
			q.max_problems = (uint32_t)strtoul(optarg, NULL, 10);
		} else {
			fprintf(opt == 'h' ? stdout : stderr,
				"usage: sweepfs fsck [--json] [-n MAX] [PATH]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	/* Failures to ask are 1 and refined (tool_exit_status()); problems
	 * found are 1 too. */
	if (tool_connect(optind < argc ? argv[optind] : NULL, &c) < 0)
		return 1;
	q.cred = tool_caller(&who);
	rc = tool_call(c, SW_MSG_FSCK, &q.base, &reply);
	sw_client_close(c);
	if (rc < 0) {
		fprintf(stderr, "sweepfs fsck: %s\n",
			rc == -EPERM ? tool_admin_refusal() : strerror(-rc));
		return 1;
	}
	r = (Sweepfs__FsckReply *)reply;
	total = fsck_counts(r, counts);
	if (json)
		fsck_json(r, counts, total);
	else
		fsck_text(r, counts, total);
	protobuf_c_message_free_unpacked(reply, NULL);
	return total ? 1 : 0;
}
