/*
 * The chunkserver's Prometheus metrics (chunkserver_i.h): its requests
 * (server.c), each data directory's space and chunks, and whether the
 * master has it registered. Rendered on the loop thread at each scrape.
 */
#include "chunkserver_i.h"
#include "metrics.h"
#include "util.h"

#define TAG "metrics"

static void dirs(struct cs *cs, struct sw_buf *b)
{
	static const char *const names[] = {
		"sweepfs_chunkserver_dir_size_bytes",
		"sweepfs_chunkserver_dir_avail_bytes",
		"sweepfs_chunkserver_dir_chunks",
		"sweepfs_chunkserver_dir_chunk_bytes",
	};
	static const char *const help[] = {
		"Size of the file system under each data directory.",
		"Bytes free for chunks there (reserve taken off).",
		"Chunks in each data directory.",
		"Logical bytes of the chunks in each data directory.",
	};

	for (size_t k = 0; k < SW_ARRAY_SIZE(names); k++) {
		sw_prom_head(b, names[k], "gauge", help[k]);
		for (size_t i = 0; i < cs->ndirs; i++) {
			struct store_dir_info d;
			const uint64_t *v[] = { &d.total, &d.avail, &d.chunks,
						&d.bytes };

			store_dir_info(cs->store, i, &d);
			sw_prom_sample(b, names[k],
				       (const char *[]){ "dir", d.path, NULL },
				       (double)*v[k]);
		}
	}
}

static void render(void *arg, struct sw_buf *b)
{
	struct cs *cs = arg;

	sw_prom_head(b, "sweepfs_chunkserver_info", "gauge",
		     "The chunkserver's version and advertised address (the "
		     "value is 1).");
	sw_prom_sample(b, "sweepfs_chunkserver_info",
		       (const char *[]){ "version", SWEEPFS_VERSION, "address",
					 cs->advertise, NULL },
		       1);
	sw_prom_one(b, "sweepfs_chunkserver_uptime_seconds", "gauge",
		    "Seconds since the chunkserver started.",
		    (double)(sw_mono_ns() - cs->started_mono) / 1e9);
	sw_prom_one(b, "sweepfs_chunkserver_master_registered", "gauge",
		    "1 while the master has this chunkserver registered.",
		    mlink_ready(cs));
	sw_prom_one(b, "sweepfs_chunkserver_chunks", "gauge",
		    "Chunks stored, in all.", (double)store_count(cs->store));
	sw_prom_one(b, "sweepfs_chunkserver_open_files", "gauge",
		    "Chunk files open now.",
		    (double)store_open_files(cs->store));
	sw_prom_head(b, "sweepfs_chunkserver_batch_deletions_total", "counter",
		     "Chunks of the master's DELETE_BATCH commands: unlinked, "
		     "or absent (not here, or at a newer version).");
	sw_prom_sample(b, "sweepfs_chunkserver_batch_deletions_total",
		       (const char *[]){ "outcome", "unlinked", NULL },
		       (double)__atomic_load_n(&cs->batch_deleted,
					       __ATOMIC_RELAXED));
	sw_prom_sample(b, "sweepfs_chunkserver_batch_deletions_total",
		       (const char *[]){ "outcome", "absent", NULL },
		       (double)__atomic_load_n(&cs->batch_absent,
					       __ATOMIC_RELAXED));
	sw_prom_one(b, "sweepfs_chunkserver_delete_share", "gauge",
		    "Share of their time the chunk deletion threads may use "
		    "(1: all; less while deletions slow clients down).",
		    (double)delpace_share(&cs->del_pace) / DELPACE_FULL);
	dirs(cs, b);
	server_metrics(cs, b);
}

int cs_metrics_start(struct cs *cs)
{
	cs->started_mono = sw_mono_ns();
	if (!cs->cfg.metrics_listen[0])
		return 0;
	return sw_metrics_start(cs->loop, cs->cfg.metrics_listen, TAG, render,
				cs, &cs->metrics);
}

void cs_metrics_stop(struct cs *cs)
{
	sw_metrics_stop(cs->metrics);
	cs->metrics = NULL;
}
