/*
 * Log sinks. A line is formatted once into a stack buffer and handed to the
 * sink whole, so lines from different threads do not interleave.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

int sw_log_level = LOG_NOTICE;

static sw_log_sink_fn log_sink;
static void *log_opaque;
static const char *log_ident = "sweepfs";
/* sw_log_tee_stderr()'s level; -1: none. Atomic: set while other threads
 * may log. */
static int tee_level = -1;

static const char *const level_names[] = {
	[LOG_EMERG] = "emerg",	   [LOG_ALERT] = "alert",
	[LOG_CRIT] = "crit",	   [LOG_ERR] = "err",
	[LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info",	   [LOG_DEBUG] = "debug",
};

static void stderr_sink(int level, const char *tag, const char *msg,
			void *opaque)
{
	struct timespec ts;
	struct tm tm;
	char when[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ld %s[%s] %s: %s\n", when, ts.tv_nsec / 1000000,
		log_ident, tag, level_names[level & 7], msg);
}

static void syslog_sink(int level, const char *tag, const char *msg,
			void *opaque)
{
	syslog(level, "[%s] %s", tag, msg);
}

void sw_log_set_sink(sw_log_sink_fn sink, void *opaque)
{
	log_sink = sink;
	log_opaque = opaque;
}

void sw_log_tee_stderr(int level)
{
	__atomic_store_n(&tee_level, level, __ATOMIC_RELEASE);
}

/* One write(2), so that lines from different threads stay whole. */
static void tee_write(const char *msg)
{
	char line[1200];
	int n = snprintf(line, sizeof(line), "%s: %s\n", log_ident, msg);

	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nobody waits any more: nothing to do. */
	}
}

void sw_log_set_ident(const char *ident)
{
	log_ident = ident;
}

const char *sw_log_get_ident(void)
{
	return log_ident;
}

void sw_log_to_syslog(const char *ident)
{
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	sw_log_set_sink(syslog_sink, NULL);
}

int sw_log_parse_level(const char *s)
{
	for (int i = LOG_CRIT; i <= LOG_DEBUG; i++)
		if (!strcmp(s, level_names[i]))
			return i;
	return -EINVAL;
}

void sw_log_emit(int level, const char *tag, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_sink)
		log_sink(level, tag, msg, log_opaque);
	else
		stderr_sink(level, tag, msg, NULL);
	if (log_sink && level <= __atomic_load_n(&tee_level, __ATOMIC_ACQUIRE))
		tee_write(msg);
	errno = saved;
}
