/*
 * The mount's metrics (mmetrics.h).
 *
 * Counts are kept under a mutex the connection's receiver thread takes
 * once per answered request (a few increments: nothing to contend with,
 * one receiver); a scrape renders them on the metrics thread's loop
 * under the same mutex. Names follow the master's: sweepfs_mount_
 * prefix, seconds, _total for counters.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "frame.h"
#include "hist.h"
#include "log.h"
#include "metrics.h"
#include "mmetrics.h"
#include "util.h"

#define TAG "metrics"

struct mmetrics {
	uv_loop_t loop;
	uv_async_t stop; /* from mmetrics_stop(): end the loop */
	pthread_t thread;
	struct sw_metrics *mx;
	char master[300];
	int64_t started; /* mono ns */
	pthread_mutex_t mu;
	/* protected by mu: */
	uint64_t requests[SW_MSG__COUNT];
	struct sw_hist latency[SW_MSG__COUNT];
};

void mmetrics_note(struct mmetrics *mm, uint16_t type, int64_t ns)
{
	if (!mm || type >= SW_MSG__COUNT)
		return;
	pthread_mutex_lock(&mm->mu);
	mm->requests[type]++;
	sw_hist_add(&mm->latency[type], ns);
	pthread_mutex_unlock(&mm->mu);
}

static void render(void *arg, struct sw_buf *b)
{
	static const char cnt[] = "sweepfs_mount_master_requests_total";
	static const char lat[] =
		"sweepfs_mount_master_request_duration_seconds";
	struct mmetrics *mm = arg;
	uint64_t n[SW_MSG__COUNT];
	struct sw_hist *h = malloc(sizeof(mm->latency));

	sw_prom_head(b, "sweepfs_mount_info", "gauge",
		     "The mount's version and master (the value is 1).");
	sw_prom_sample(b, "sweepfs_mount_info",
		       (const char *[]){ "version", SWEEPFS_VERSION, "master",
					 mm->master, NULL },
		       1);
	sw_prom_one(b, "sweepfs_mount_uptime_seconds", "gauge",
		    "Seconds since the mount started serving.",
		    (double)(sw_mono_ns() - mm->started) / 1e9);
	if (!h)
		return;
	pthread_mutex_lock(&mm->mu);
	memcpy(n, mm->requests, sizeof(n));
	memcpy(h, mm->latency, sizeof(mm->latency));
	pthread_mutex_unlock(&mm->mu);
	sw_prom_head(b, cnt, "counter",
		     "Requests to the master answered, by type.");
	for (uint16_t t = 0; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *info = sw_msg_info(t);
		const char *labels[] = { "type", info ? info->name : "", NULL };

		if (info && n[t])
			sw_prom_sample(b, cnt, labels, (double)n[t]);
	}
	sw_prom_head(b, lat, "histogram",
		     "Time from a request's (last) sending to the master's "
		     "answer, by type: what the mount waited on the master.");
	for (uint16_t t = 0; t < SW_MSG__COUNT; t++) {
		const struct sw_msg_info *info = sw_msg_info(t);
		const char *labels[] = { "type", info ? info->name : "", NULL };

		if (info && n[t])
			sw_prom_hist(b, lat, labels, &h[t]);
	}
	free(h);
}

static void *run(void *arg)
{
	struct mmetrics *mm = arg;

	uv_run(&mm->loop, UV_RUN_DEFAULT);
	return NULL;
}

static void on_stop(uv_async_t *a)
{
	struct mmetrics *mm = a->data;

	sw_metrics_stop(mm->mx);
	mm->mx = NULL;
	uv_close((uv_handle_t *)a, NULL);
}

int mmetrics_start(const char *listen, const char *master,
		   struct mmetrics **out)
{
	struct mmetrics *mm = calloc(1, sizeof(*mm));
	int rc;

	if (!mm)
		return -ENOMEM;
	snprintf(mm->master, sizeof(mm->master), "%s", master);
	mm->started = sw_mono_ns();
	pthread_mutex_init(&mm->mu, NULL);
	rc = uv_loop_init(&mm->loop);
	if (rc < 0)
		goto out_free;
	rc = uv_async_init(&mm->loop, &mm->stop, on_stop);
	if (rc < 0)
		goto out_loop;
	mm->stop.data = mm;
	rc = sw_metrics_start(&mm->loop, listen, TAG, render, mm, &mm->mx);
	if (rc < 0)
		goto out_async;
	rc = -pthread_create(&mm->thread, NULL, run, mm);
	if (rc < 0)
		goto out_metrics;
	*out = mm;
	return 0;

out_metrics:
	sw_metrics_stop(mm->mx);
out_async:
	uv_close((uv_handle_t *)&mm->stop, NULL);
	uv_run(&mm->loop, UV_RUN_DEFAULT); /* the closes */
out_loop:
	uv_loop_close(&mm->loop);
out_free:
	pthread_mutex_destroy(&mm->mu);
	free(mm);
	return rc;
}

void mmetrics_stop(struct mmetrics *mm)
{
	if (!mm)
		return;
	uv_async_send(&mm->stop);
	pthread_join(mm->thread, NULL);
	uv_loop_close(&mm->loop);
	pthread_mutex_destroy(&mm->mu);
	free(mm);
}
