/*
 * Logging for the sweepfs daemons and tools: syslog levels, a subsystem tag
 * per call, printf-checked formats, and a pluggable sink (stderr by
 * default, syslog for daemons, a capture for tests).
 *
 * The level is tested before the arguments are evaluated, so a disabled
 * debug line costs one comparison. Library code in common/ and proto/ does
 * not log; it returns errors for its caller to report once.
 */
#ifndef SWEEPFS_COMMON_LOG_H
#define SWEEPFS_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <syslog.h>

/* Messages above this level (numerically) are dropped. */
extern int sw_log_level;

typedef void (*sw_log_sink_fn)(int level, const char *tag, const char *msg,
			       void *opaque);

/*
 * Send every message to @sink from now on; NULL restores the stderr sink.
 * Not thread-safe against concurrent logging: call it at start-up.
 */
void sw_log_set_sink(sw_log_sink_fn sink, void *opaque);

/* Route messages to syslog(3) under @ident (openlog is called here). */
void sw_log_to_syslog(const char *ident);

/*
 * Also write every message at @level or more urgent to stderr as one
 * "IDENT: MESSAGE" line, whatever the sink (-1: stop). A detaching
 * daemon's start-up does, with stderr a pipe to the process that waits
 * for it (daemon.h), so that a failure is seen where it was started even
 * without a syslog. Safe against concurrent logging.
 */
void sw_log_tee_stderr(int level);

/* Prefix stderr lines with @ident ("sweepfs-master"). */
void sw_log_set_ident(const char *ident);

/* The program's name as sw_log_set_ident() set it ("sweepfs" before). */
const char *sw_log_get_ident(void);

/* Parse "err", "warning", "notice", "info" or "debug"; -EINVAL if none. */
int sw_log_parse_level(const char *s);

__attribute__((format(printf, 3, 4))) void
sw_log_emit(int level, const char *tag, const char *fmt, ...);

#define sw_log(level, tag, ...)                               \
	do {                                                  \
		if ((level) <= sw_log_level)                  \
			sw_log_emit(level, tag, __VA_ARGS__); \
	} while (0)

/* CRIT: the process is about to exit. ERR: failed, carrying on. */
#define sw_crit(tag, ...) sw_log(LOG_CRIT, tag, __VA_ARGS__)
#define sw_err(tag, ...) sw_log(LOG_ERR, tag, __VA_ARGS__)
#define sw_warn(tag, ...) sw_log(LOG_WARNING, tag, __VA_ARGS__)
#define sw_notice(tag, ...) sw_log(LOG_NOTICE, tag, __VA_ARGS__)
#define sw_info(tag, ...) sw_log(LOG_INFO, tag, __VA_ARGS__)
#define sw_debug(tag, ...) sw_log(LOG_DEBUG, tag, __VA_ARGS__)

#endif
