/* log: the one sink of every message (see log.h). */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "units.h"

static enum wharf_log_level log_level = WHARF_LOG_INFO;
/* Atomic: the thread that sees the mount up detaches, while the others
 * log. */
static bool use_syslog;
static wharf_log_func log_func;
static void *log_func_arg;
static int log_fd = -1; /* a log file, once log_to_fd() is called */

/* The limits that held lines back, for log_limits_flush; their counts are
 * under the same lock.  Limits are static: none goes away. */
static pthread_mutex_t limits_mu = PTHREAD_MUTEX_INITIALIZER;
static struct log_limit *limits;

void log_set_level(enum wharf_log_level level)
{
	log_level = level;
}

int log_level_parse(const char *s, enum wharf_log_level *out)
{
	static const struct {
		const char *name;
		enum wharf_log_level level;
	} names[] = {{"error", WHARF_LOG_ERROR}, {"warn", WHARF_LOG_WARN},
		     {"warning", WHARF_LOG_WARN}, {"info", WHARF_LOG_INFO},
		     {"debug", WHARF_LOG_DEBUG}};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name)) {
			*out = names[i].level;
			return 0;
		}
	return -EINVAL;
}

void log_to_syslog(const char *ident)
{
	openlog(ident, LOG_PID, LOG_DAEMON);
	__atomic_store_n(&use_syslog, true, __ATOMIC_RELEASE);
}

int log_file_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
		      0640);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

void log_to_fd(int fd)
{
	__atomic_store_n(&log_fd, fd, __ATOMIC_RELEASE);
}

bool log_syslog_present(void)
{
	struct stat st;
	return !stat("/dev/log", &st) && S_ISSOCK(st.st_mode);
}

/* One line, one write(2): lines of threads and of mounts that share the
 * file do not interleave (O_APPEND). */
static void file_line(int fd, const char *tag, const char *msg)
{
	char line[2200];
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line),
			 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ wharf[%d]: %s: "
			 "%s\n",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec,
			 ts.tv_nsec / 1000000, (int)getpid(), tag, msg);
	if (n >= (int)sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (write(fd, line, (size_t)n) < 0) {
		/* Nowhere left to say it. */
	}
}

void log_set_func(wharf_log_func fn, void *arg)
{
	log_func_arg = arg;
	__atomic_store_n(&log_func, fn, __ATOMIC_RELEASE);
}

static void vlog(enum wharf_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void vlog(enum wharf_log_level level, const char *fmt, va_list ap)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_DEBUG};
	static const char *const tag[] = {"error", "warning", "info", "debug"};
	const wharf_log_func fn = __atomic_load_n(&log_func, __ATOMIC_ACQUIRE);
	char msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	const int fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
	if (fn)
		fn(level, msg, log_func_arg);
	else if (fd >= 0)
		file_line(fd, tag[level], msg);
	else if (__atomic_load_n(&use_syslog, __ATOMIC_ACQUIRE))
		syslog(prio[level], "%s", msg);
	else
		fprintf(stderr, "wharf: %s: %s\n", tag[level], msg);
}

void wlog(enum wharf_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

/* Under limits_mu: the summary of what l held back, in buf ("" when
 * nothing), and its count back to 0. */
static void limit_summary(struct log_limit *l, char *buf, size_t cap)
{
	buf[0] = '\0';
	if (!l->dropped)
		return;
	snprintf(buf, cap,
		 "%lu more line%s like this %s not logged (at most %u in %u "
		 "s); the last: %s",
		 l->dropped, l->dropped == 1 ? "" : "s",
		 l->dropped == 1 ? "was" : "were", l->lines, l->seconds,
		 l->last);
	l->dropped = 0;
}

void log_limited(struct log_limit *l, enum wharf_log_level level,
		 const char *fmt, ...)
{
	char summary[sizeof(l->last) + 128];
	uint64_t now;
	bool pass;
	va_list ap;

	if (level > log_level)
		return;
	now = log_level == WHARF_LOG_DEBUG ? 0 : now_ns();
	pthread_mutex_lock(&limits_mu);
	summary[0] = '\0';
	if (!l->used || now - l->window_ns >= l->seconds * 1000000000ull) {
		limit_summary(l, summary, sizeof(summary));
		l->window_ns = now;
		l->used = 0;
	}
	/* Debugging: every line (now is 0, so the window never ends). */
	pass = !now || l->used < l->lines;
	if (pass) {
		l->used++;
	} else {
		l->dropped++;
		l->level = level;
		va_start(ap, fmt);
		vsnprintf(l->last, sizeof(l->last), fmt, ap);
		va_end(ap);
		if (!l->listed) {
			l->listed = true;
			l->next = limits;
			limits = l;
		}
	}
	pthread_mutex_unlock(&limits_mu);
	if (summary[0])
		wlog(level, "%s", summary);
	if (pass) {
		va_start(ap, fmt);
		vlog(level, fmt, ap);
		va_end(ap);
	}
}

void log_limits_flush(void)
{
	char summary[sizeof(limits->last) + 128];

	pthread_mutex_lock(&limits_mu);
	for (struct log_limit *l = limits; l; l = l->next) {
		limit_summary(l, summary, sizeof(summary));
		if (summary[0])
			wlog(l->level, "%s", summary);
	}
	pthread_mutex_unlock(&limits_mu);
}
