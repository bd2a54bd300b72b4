/*
 * The server id the master assigned, on disk (split out of
 * master_link.c): <data dir>/.server_id in every data directory, so that
 * it survives restarts and the loss of some of the directories. Written
 * on libuv's pool (a temporary file, fdatasync, rename), so a crash
 * leaves the old id or the new one; a failure is only logged. Read once
 * at start-up, before the loop runs: the first directory with an id
 * wins.
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

struct id_work {
	uv_work_t work;
	struct cs *cs;
	uint64_t id;
};

/* Thread pool: write the id into every data directory. */
static void id_save(uv_work_t *w)
{
	struct id_work *iw = w->data;
	char path[4200], tmp[4300];

	for (size_t i = 0; i < iw->cs->ndirs; i++) {
		FILE *f;
		int bad;

		snprintf(path, sizeof(path), "%s/" ID_FILE, iw->cs->dirs[i]);
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		f = fopen(tmp, "we");
		if (!f) {
			bad = 1;
		} else {
			bad = fprintf(f, "%016" PRIx64 "\n", iw->id) < 0 ||
			      fflush(f) || fdatasync(fileno(f));
			bad |= fclose(f) != 0;
		}
		if (bad || rename(tmp, path) < 0)
			sw_err(TAG, "cannot save the server id in %s: %s", path,
			       strerror(errno));
	}
}

static void id_saved(uv_work_t *w, int status)
{
	free(w->data);
}

void cs_server_id_save(struct cs *cs, uint64_t id)
{
	struct id_work *iw = calloc(1, sizeof(*iw));

	if (!iw)
		return;
	iw->cs = cs;
	iw->id = id;
	iw->work.data = iw;
	if (uv_queue_work(cs->loop, &iw->work, id_save, id_saved) < 0)
		free(iw);
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
