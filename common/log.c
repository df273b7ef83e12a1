/* log: the one sink of every message (see log.h). */
#include "config.h"

#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <syslog.h>

static enum wharf_log_level log_level = WHARF_LOG_INFO;
/* Atomic: the thread that sees the mount up detaches, while the others
 * log. */
static bool use_syslog;
static wharf_log_func log_func;
static void *log_func_arg;

void log_set_level(enum wharf_log_level level)
{
	log_level = level;
}

void log_to_syslog(const char *ident)
{
	openlog(ident, LOG_PID, LOG_DAEMON);
	__atomic_store_n(&use_syslog, true, __ATOMIC_RELEASE);
}

void log_set_func(wharf_log_func fn, void *arg)
{
	log_func_arg = arg;
	__atomic_store_n(&log_func, fn, __ATOMIC_RELEASE);
}

void wlog(enum wharf_log_level level, const char *fmt, ...)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_DEBUG};
	static const char *const tag[] = {"error", "warning", "info", "debug"};
	const wharf_log_func fn = __atomic_load_n(&log_func, __ATOMIC_ACQUIRE);
	char msg[2048];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fn)
		fn(level, msg, log_func_arg);
	else if (__atomic_load_n(&use_syslog, __ATOMIC_ACQUIRE))
		syslog(prio[level], "%s", msg);
	else
		fprintf(stderr, "wharf: %s: %s\n", tag[level], msg);
}
