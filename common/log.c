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

#include "text.h"
#include "units.h"

static enum wharf_log_level log_level = WHARF_LOG_INFO;
static const char *const level_tag[] = {"error", "warning", "info", "debug"};
/* Atomic: the thread that sees the mount up detaches, while the others
 * log. */
static bool use_syslog;
static wharf_log_func log_func;
static void *log_func_arg;
static int log_fd = -1; /* a log file, once log_to_fd() is called */
static bool echo_stderr; /* and stderr too, while a terminal watches */

/* Warnings and errors said before the log file was open, for it
 * (log_keep_early); under early_mu. */
#define EARLY_LINES 16
static pthread_mutex_t early_mu = PTHREAD_MUTEX_INITIALIZER;
static bool keep_early;
static char early[EARLY_LINES][512];
static unsigned n_early;

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

int log_file_open(const char *path, char **err)
{
	/* O_NONBLOCK: a FIFO planted there would block the open. */
	const int fd = open(path,
			    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW |
				O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
			    0640);
	struct stat st;
	int rc = 0;

	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP)
			err_set(err,
				"log file %s is a symbolic link: wharf does "
				"not write through one (it could point at any "
				"file); give the file's own path",
				path);
		else if (rc == -ENXIO)
			err_set(err,
				"log file %s is not a regular file: give a "
				"file's path",
				path);
		else
			err_set(err, "log file %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st)) {
		rc = -errno;
		err_set(err, "log file %s: %s", path, strerror(-rc));
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		err_set(err,
			"log file %s is not a regular file: give a file's "
			"path",
			path);
	} else if (st.st_uid != geteuid()) {
		rc = -EPERM;
		err_set(err,
			"log file %s belongs to user %u, not to this process's "
			"%u: wharf appends only to a file of its own; remove "
			"it (wharf creates it) or chown it",
			path, (unsigned)st.st_uid, (unsigned)geteuid());
	} else if (st.st_nlink > 1) {
		rc = -EPERM;
		err_set(err,
			"log file %s has %lu hard links: another name of it "
			"could be any file; remove it (wharf creates it)",
			path, (unsigned long)st.st_nlink);
	} else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		rc = -errno;
		err_set(err, "log file %s: %s", path, strerror(-rc));
	}
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int log_reopen(const char *path, char **err)
{
	const int cur = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
	int fd, rc = 0;

	if (cur < 0) {
		err_set(err, "no log file is open");
		return -EBADF;
	}
	fd = log_file_open(path, err);
	if (fd < 0)
		return fd;
	/* Over the old number: a line being written goes to the old file
	 * or the new one, whole, and no thread sees a closed fd. */
	if (dup3(fd, cur, O_CLOEXEC) < 0) {
		rc = -errno;
		err_set(err, "log file %s: %s", path, strerror(-rc));
	}
	close(fd);
	return rc;
}

void log_echo_stderr(bool on)
{
	__atomic_store_n(&echo_stderr, on, __ATOMIC_RELEASE);
}

void log_keep_early(void)
{
	pthread_mutex_lock(&early_mu);
	keep_early = true;
	pthread_mutex_unlock(&early_mu);
}

static void file_line(int fd, const char *tag, const char *msg);

void log_to_fd(int fd)
{
	pthread_mutex_lock(&early_mu);
	for (unsigned i = 0; i < n_early; i++)
		if (write(fd, early[i], strlen(early[i])) < 0) {
			/* Nowhere left to say it. */
		}
	n_early = 0;
	keep_early = false;
	__atomic_store_n(&log_fd, fd, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&early_mu);
}

bool log_syslog_present(void)
{
	struct stat st;
	return !stat("/dev/log", &st) && S_ISSOCK(st.st_mode);
}

/* A line of the log file, with time and pid, in line (cap bytes).
 * @return its length. */
static int format_line(char *line, size_t cap, const char *tag, const char *msg)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, cap,
			 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ wharf[%d]: %s: "
			 "%s\n",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			 (int)getpid(), tag, msg);
	if (n >= (int)cap) {
		n = (int)cap - 1;
		line[n - 1] = '\n';
	}
	return n;
}

/* One line, one write(2): lines of threads and of mounts that share the
 * file do not interleave (O_APPEND). */
static void file_line(int fd, const char *tag, const char *msg)
{
	char line[2200];
	const int n = format_line(line, sizeof(line), tag, msg);

	if (write(fd, line, (size_t)n) < 0) {
		/* Nowhere left to say it. */
	}
}

/* Kept for the log file when it opens, if log_keep_early asked for it. */
static void early_line(const char *tag, const char *msg)
{
	pthread_mutex_lock(&early_mu);
	if (keep_early && n_early < EARLY_LINES)
		format_line(early[n_early++], sizeof(early[0]), tag, msg);
	pthread_mutex_unlock(&early_mu);
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
	const char *const *const tag = level_tag;
	const wharf_log_func fn = __atomic_load_n(&log_func, __ATOMIC_ACQUIRE);
	char msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	const int fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
	if (fn) {
		fn(level, msg, log_func_arg);
		return;
	}
	if (fd >= 0)
		file_line(fd, tag[level], msg);
	else if (__atomic_load_n(&use_syslog, __ATOMIC_ACQUIRE))
		syslog(prio[level], "%s", msg);
	else if (level <= WHARF_LOG_WARN)
		early_line(tag[level], msg);
	if (fd < 0 ? !__atomic_load_n(&use_syslog, __ATOMIC_ACQUIRE)
		   : __atomic_load_n(&echo_stderr, __ATOMIC_ACQUIRE))
		fprintf(stderr, "wharf: %s: %s\n", tag[level], msg);
}

void log_file_only(enum wharf_log_level level, const char *fmt, ...)
{
	const char *const *const tag = level_tag;
	const int fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
	char msg[2048];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fd >= 0)
		file_line(fd, tag[level], msg);
	else if (level <= WHARF_LOG_WARN)
		early_line(tag[level], msg);
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
