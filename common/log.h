#ifndef WHARF_COMMON_LOG_H
#define WHARF_COMMON_LOG_H
/*
 * log: every message of the mount, the loader and the CLI goes through
 * wlog().  It goes to stderr, to a file once log_to_fd() is called, to syslog
 * once log_to_syslog() is called (a daemonized mount), or to a function the
 * program installs (the loader's wharf_log_set_func).  Messages name the object: URL, range, chunk, sample,
 * what the origin said.
 */
#include "wharf/log.h"

#define WHARF_PRINTF(a, b) __attribute__((format(printf, a, b)))

#include <stdbool.h>

void log_set_level(enum wharf_log_level level);
void log_to_syslog(const char *ident);
/* A log file opened for appending (0640, created if need be): its fd, or
 * -errno (-EINVAL: not a regular file).  Nothing goes there until
 * log_to_fd(). */
int log_file_open(const char *path);
/* From now on every message is a line in fd, with time and pid. */
void log_to_fd(int fd);
/* Whether a syslog daemon listens on /dev/log (most containers: no). */
bool log_syslog_present(void);
/* "error", "warn", "info", "debug" (also "warning"): 0 and *out, or
 * -EINVAL. */
int log_level_parse(const char *s, enum wharf_log_level *out);
/* fn NULL: back to stderr. */
void log_set_func(wharf_log_func fn, void *arg);
void wlog(enum wharf_log_level level, const char *fmt, ...) WHARF_PRINTF(2, 3);
#define log_error(...) wlog(WHARF_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) wlog(WHARF_LOG_WARN, __VA_ARGS__)
#define log_info(...) wlog(WHARF_LOG_INFO, __VA_ARGS__)
#define log_debug(...) wlog(WHARF_LOG_DEBUG, __VA_ARGS__)

#endif
