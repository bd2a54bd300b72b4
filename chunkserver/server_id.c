/*
 * What this chunkserver's data directories say about whose they are (split
 * out of master_link.c), in every data directory so that it survives
 * restarts and the loss of some of the directories:
 *
 *   <data dir>/.server_id    the server id the master assigned
 *   <data dir>/.cluster_id   the cluster whose chunks the directories hold
 *                            (HelloReply.cluster_id at the first hello)
 *
 * Written on libuv's pool (a temporary file, fdatasync, rename), so a
 * crash leaves the old value or the new one; a failure is only logged.
 * Read once at start-up, before the loop runs: the first directory that
 * has one wins.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chunkserver_i.h"
#include "log.h"

#define TAG "master"

#define ID_FILE ".server_id"
#define CLUSTER_FILE ".cluster_id"

struct id_work {
	uv_work_t work;
	struct cs *cs;
	const char *file;
	char text[2 * SW_CLUSTER_ID_LEN + 2];
};

/* Thread pool: write the text into every data directory. */
static void id_save(uv_work_t *w)
{
	struct id_work *iw = w->data;
	char path[4200], tmp[4300];

	for (size_t i = 0; i < iw->cs->ndirs; i++) {
		FILE *f;
		int bad;

		snprintf(path, sizeof(path), "%s/%s", iw->cs->dirs[i],
			 iw->file);
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		f = fopen(tmp, "we");
		if (!f) {
			bad = 1;
		} else {
			bad = fprintf(f, "%s\n", iw->text) < 0 || fflush(f) ||
			      fdatasync(fileno(f));
			bad |= fclose(f) != 0;
		}
		if (bad || rename(tmp, path) < 0)
			sw_err(TAG, "cannot save %s: %s", path,
			       strerror(errno));
	}
}

static void id_saved(uv_work_t *w, int status)
{
	(void)status;
	free(w->data);
}

static void save_text(struct cs *cs, const char *file, const char *text)
{
	struct id_work *iw = calloc(1, sizeof(*iw));

	if (!iw)
		return;
	iw->cs = cs;
	iw->file = file;
	snprintf(iw->text, sizeof(iw->text), "%s", text);
	iw->work.data = iw;
	if (uv_queue_work(cs->loop, &iw->work, id_save, id_saved) < 0)
		free(iw);
}

void cs_server_id_save(struct cs *cs, uint64_t id)
{
	char text[17];

	snprintf(text, sizeof(text), "%016" PRIx64, id);
	save_text(cs, ID_FILE, text);
}

void cs_cluster_id_str(const uint8_t id[SW_CLUSTER_ID_LEN],
		       char out[2 * SW_CLUSTER_ID_LEN + 1])
{
	for (size_t i = 0; i < SW_CLUSTER_ID_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

void cs_cluster_id_save(struct cs *cs)
{
	char text[2 * SW_CLUSTER_ID_LEN + 1];

	cs_cluster_id_str(cs->cluster_id, text);
	save_text(cs, CLUSTER_FILE, text);
}

int cs_cluster_id_load(struct cs *cs)
{
	size_t first = 0;

	for (size_t i = 0; i < cs->ndirs; i++) {
		char path[4200], text[2 * SW_CLUSTER_ID_LEN + 2];
		uint8_t id[SW_CLUSTER_ID_LEN];
		bool ok = true;
		FILE *f;

		snprintf(path, sizeof(path), "%s/" CLUSTER_FILE, cs->dirs[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		ok = fgets(text, sizeof(text), f) != NULL;
		fclose(f);
		for (size_t k = 0; ok && k < SW_CLUSTER_ID_LEN; k++) {
			unsigned b;

			ok = sscanf(text + 2 * k, "%2x", &b) == 1;
			id[k] = (uint8_t)b;
		}
		if (!ok) {
			sw_warn(TAG, "%s does not hold a cluster id; ignored",
				path);
			continue;
		}
		if (!cs->has_cluster_id) {
			memcpy(cs->cluster_id, id, sizeof(id));
			cs->has_cluster_id = true;
			first = i;
		} else if (memcmp(cs->cluster_id, id, sizeof(id))) {
			/* A disk moved in from another cluster's chunkserver:
			 * its chunks would be reported as ours. */
			char a[2 * SW_CLUSTER_ID_LEN + 1];
			char b[2 * SW_CLUSTER_ID_LEN + 1];

			cs_cluster_id_str(cs->cluster_id, a);
			cs_cluster_id_str(id, b);
			sw_crit(TAG,
				"data directories of two clusters: %s holds "
				"chunks of cluster %s, %s of cluster %s; "
				"serve each with a chunkserver of its own",
				cs->dirs[first], a, cs->dirs[i], b);
			return -EINVAL;
		}
	}
	return 0;
}

uint64_t cs_server_id_load(const struct cs *cs)
{
	for (size_t i = 0; i < cs->ndirs; i++) {
		char path[4200];
		unsigned long long id;
		FILE *f;
		int n;

		snprintf(path, sizeof(path), "%s/" ID_FILE, cs->dirs[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		n = fscanf(f, "%llx", &id);
		fclose(f);
		if (n == 1 && id)
			return id;
	}
	return 0;
}
