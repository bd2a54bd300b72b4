/*
 * What the master knows of files and trees, as MooseFS's mfsfileinfo and
 * mfsdirinfo show it:
 *
 *   sweepfs info [--json] PATH...   each file's chunks: index, id,
 *                                   version, copies (server, version,
 *                                   state) against the goal
 *   sweepfs du [--json] PATH...     files, directories, bytes and chunks
 *                                   of each tree, counted on the master
 *
 * Exit status 1 if any PATH failed (said on stderr), else 0.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "tool.h"
#include "util.h"

/* --json and PATH... of @argv; -1 (usage said) or the first PATH's
 * index. */
static int parse(int argc, char **argv, const char *usage, bool *json)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		if (opt == 'j') {
			*json = true;
			continue;
		}
		fprintf(opt == 'h' ? stdout : stderr, "usage: %s\n", usage);
		exit(opt == 'h' ? 0 : 2);
	}
	if (optind == argc) {
		fprintf(stderr, "usage: %s\n", usage);
		exit(2);
	}
	return optind;
}

/* ---- info -------------------------------------------------------------- */

/* Valid copies on connected servers of @k. */
static uint32_t good_copies(const Sweepfs__FileinfoChunk *k)
{
	uint32_t n = 0;

	for (size_t i = 0; i < k->n_copies; i++)
		n += k->copies[i]->connected &&
		     !strcmp(k->copies[i]->state, "valid");
	return n;
}

static void chunk_text(const Sweepfs__FileinfoChunk *k)
{
	if (!k->chunk_id) {
		printf("  chunk %u: a hole\n", k->index);
		return;
	}
	printf("  chunk %u: %016" PRIx64 " version %u, %u of %u copies%s%s\n",
	       k->index, k->chunk_id, k->version, good_copies(k), k->goal,
	       good_copies(k) == 0 ? " - LOST" : "",
	       k->refs > 1 ? " (shared with a snapshot)" : "");
	for (size_t i = 0; i < k->n_copies; i++) {
		const Sweepfs__FileinfoCopy *c = k->copies[i];

		printf("    copy on %s: version %u, %s%s\n", c->server,
		       c->version, c->state,
		       c->connected ? "" : " (server down)");
	}
}

static void chunk_json(struct json *j, const Sweepfs__FileinfoChunk *k)
{
	char id[20];

	snprintf(id, sizeof(id), "%016" PRIx64, k->chunk_id);
	json_obj_begin(j, NULL);
	json_u64(j, "index", k->index);
	json_str(j, "chunk", k->chunk_id ? id : "");
	json_u64(j, "version", k->version);
	json_u64(j, "refs", k->refs);
	json_u64(j, "goal", k->goal);
	json_u64(j, "valid_copies", good_copies(k));
	json_arr_begin(j, "copies");
	for (size_t i = 0; i < k->n_copies; i++) {
		const Sweepfs__FileinfoCopy *c = k->copies[i];

		json_obj_begin(j, NULL);
		json_str(j, "server", c->server);
		json_u64(j, "version", c->version);
		json_str(j, "state", c->state);
		json_flag(j, "connected", c->connected);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}

/* Every page of @ino's chunks, printed as they come. */
static int info_one(const char *path, struct json *j)
{
	Sweepfs__FileinfoReq q = SWEEPFS__FILEINFO_REQ__INIT;
	uint32_t mode;
	struct sw_client *c;
	struct tool_caller who;
	uint64_t ino;
	bool first = true;
	int rc = tool_open_ino(path, &c, &ino, &mode);

	if (rc < 0)
		return rc;
	q.cred = tool_caller(&who);
	q.ino = ino;
	q.has_first = 1;
	do {
		ProtobufCMessage *reply;
		const Sweepfs__FileinfoReply *r;

		rc = tool_call(c, SW_MSG_FILEINFO, &q.base, &reply);
		if (rc < 0)
			break;
		r = (const void *)reply;
		if (first && j) {
			json_obj_begin(j, NULL);
			json_str(j, "path", path);
			json_u64(j, "ino", ino);
			json_u64(j, "size", r->size);
			json_u64(j, "goal", r->goal);
			json_u64(j, "slots", r->slots);
			json_arr_begin(j, "chunks");
		} else if (first) {
			printf("%s: %" PRIu64 " bytes, %u chunks, goal %u\n",
			       path, r->size, r->slots, r->goal);
		}
		first = false;
		for (size_t i = 0; i < r->n_chunks; i++) {
			if (j)
				chunk_json(j, r->chunks[i]);
			else
				chunk_text(r->chunks[i]);
		}
		/* A next that does not move on is not followed. */
		q.has_first = r->has_next && r->next > q.first;
		q.first = r->next;
		protobuf_c_message_free_unpacked(reply, NULL);
	} while (q.has_first);
	if (!first && j) {
		json_arr_end(j);
		json_obj_end(j);
	}
	if (rc < 0)
		fprintf(stderr, "sweepfs info: %s: %s\n", path,
			rc == -EISDIR ? "a directory (sweepfs du sums "
					"up trees)" :
					strerror(-rc));
	sw_client_close(c);
	return rc;
}

/* @one on each of the @n @paths, into one JSON array with @json: 0, or 1
 * when any failed (it said why). */
static int each_path(char **paths, int n, bool json,
		     int (*one)(const char *path, struct json *j))
{
	struct json j;
	int status = 0;

	if (json) {
		json_init(&j, stdout);
		json_arr_begin(&j, NULL);
	}
	for (int k = 0; k < n; k++)
		if (one(paths[k], json ? &j : NULL) < 0)
			status = 1;
	if (json)
		json_arr_end(&j);
	return status;
}

int cmd_info(int argc, char **argv)
{
	bool json = false;
	int i = parse(argc, argv, "sweepfs info [--json] PATH...", &json);

	return each_path(argv + i, argc - i, json, info_one);
}

/* ---- du -------------------------------------------------------------- */

static int du_one(const char *path, struct json *j)
{
	Sweepfs__DirinfoReq q = SWEEPFS__DIRINFO_REQ__INIT;
	const Sweepfs__DirinfoReply *r;
	uint32_t mode;
	ProtobufCMessage *reply;
	struct sw_client *c;
	struct tool_caller who;
	uint64_t ino;
	char b[32];
	int rc = tool_open_ino(path, &c, &ino, &mode);

	if (rc < 0)
		return rc;
	q.cred = tool_caller(&who);
	q.ino = ino;
	rc = tool_call(c, SW_MSG_DIRINFO, &q.base, &reply);
	sw_client_close(c);
	if (rc < 0) {
		fprintf(stderr, "sweepfs du: %s: %s\n", path,
			rc == -E2BIG ? "too big a tree for this session to "
				       "sum up (over 20000 names, or names and "
				       "chunks over 200000: an admin "
				       "session's root may)" :
				       strerror(-rc));
		return rc;
	}
	r = (const void *)reply;
	if (j) {
		json_obj_begin(j, NULL);
		json_str(j, "path", path);
		json_u64(j, "files", r->files);
		json_u64(j, "dirs", r->dirs);
		json_u64(j, "others", r->others);
		json_u64(j, "bytes", r->bytes);
		json_u64(j, "chunks", r->chunks);
		json_u64(j, "elapsed_us", r->elapsed_us);
		json_obj_end(j);
	} else {
		printf("%s: %" PRIu64 " files, %" PRIu64
		       " directories, %" PRIu64 " others, %" PRIu64
		       " bytes (%s), %" PRIu64 " chunks\n",
		       path, r->files, r->dirs, r->others, r->bytes,
		       fmt_bytes(r->bytes, b, sizeof(b)), r->chunks);
	}
	protobuf_c_message_free_unpacked(reply, NULL);
	return 0;
}

int cmd_du(int argc, char **argv)
{
	bool json = false;
	int i = parse(argc, argv, "sweepfs du [--json] PATH...", &json);

	return each_path(argv + i, argc - i, json, du_one);
}
