/*
 * sdnotify without libsystemd: nothing to tell (see sdnotify.h). The
 * units of Type=notify need a build with libsystemd-dev.
 */
#include "sdnotify.h"

int sw_sdnotify_ready(uv_loop_t *loop, const char *status)
{
	(void)loop;
	(void)status;
	return 0;
}

void sw_sdnotify_stalled(int64_t (*stalled)(void *arg), void *arg)
{
	(void)stalled;
	(void)arg;
}

void sw_sdnotify_stopping(void)
{
}
