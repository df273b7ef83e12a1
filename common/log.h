#ifndef WHARF_COMMON_LOG_H
#define WHARF_COMMON_LOG_H
/*
 * log: every message of the mount, the loader and the CLI goes through
 * wlog().  It goes to stderr, to syslog once log_to_syslog() is called (a
 * daemonized mount), or to a function the program installs (the loader's
 * wharf_log_set_func).  Messages name the object: URL, range, chunk, sample,
 * what the origin said.
 */
#include "wharf/log.h"

#define WHARF_PRINTF(a, b) __attribute__((format(printf, a, b)))

void log_set_level(enum wharf_log_level level);
void log_to_syslog(const char *ident);
/* fn NULL: back to stderr. */
void log_set_func(wharf_log_func fn, void *arg);
void wlog(enum wharf_log_level level, const char *fmt, ...) WHARF_PRINTF(2, 3);
#define log_error(...) wlog(WHARF_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) wlog(WHARF_LOG_WARN, __VA_ARGS__)
#define log_info(...) wlog(WHARF_LOG_INFO, __VA_ARGS__)
#define log_debug(...) wlog(WHARF_LOG_DEBUG, __VA_ARGS__)

#endif
