#ifndef WHARF_COMMON_LOG_H
#define WHARF_COMMON_LOG_H
/*
 * log: every message of the mount, the loader and the CLI goes through
 * wlog().  It goes to stderr, to a file once log_to_fd() is called (and
 * stderr too while log_echo_stderr is on), to syslog once log_to_syslog()
 * is called (a daemonized mount), or to a function the program installs
 * (the loader's wharf_log_set_func).  Messages name the object: URL,
 * range, chunk, sample, what the origin said.
 */
#include <stdbool.h>
#include <stdint.h>

#include "wharf/log.h"

#include "compiler.h"

#include <stdbool.h>

void log_set_level(enum wharf_log_level level);
void log_to_syslog(const char *ident);
/*
 * A log file opened for appending (0640, created if need be), as root
 * may open it in a directory others write: a link is not followed, and
 * the file must be a regular file of this process's user with one link
 * (a hard link planted there would make it another file).  @return its
 * fd, or -errno with *err saying why and what to do (caller frees).
 * Nothing goes there until log_to_fd().
 */
int log_file_open(const char *path, char **err) WHARF_CHECK;
/* From now on every message is a line in fd, with time and pid, after
 * the lines log_keep_early kept. */
void log_to_fd(int fd);
/* path opened again as log_file_open does and put in place of the log
 * file's fd, under the same number (logrotate has renamed the old file).
 * @return 0, or -errno with *err set; the old file stays in use. */
int log_reopen(const char *path, char **err) WHARF_CHECK;
/* While on, the lines that go to the log file go to stderr too (a
 * terminal still watches start-up). */
void log_echo_stderr(bool on);
/* Until log_to_fd(), warnings and errors (the first few) are kept as
 * well as said, and written to the file when it opens: start-up says
 * some before the file's place is known. */
void log_keep_early(void);
/* A line in the log file alone, or kept for it (log_keep_early): for a
 * message the caller has put on stderr its own way. */
void log_file_only(enum wharf_log_level level, const char *fmt, ...)
    WHARF_PRINTF(2, 3);
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

/*
 * Rate limiting, for lines that other users or a failing origin can
 * repeat at will (a read of a failing file, say): at most `lines` lines
 * in each `seconds`; the rest are counted, and the next line let through
 * is preceded by one summary, "N more lines like this were not logged in
 * the last S s; the last: ...".  log_limits_flush() writes the summaries
 * still pending (at exit).  At the debug level nothing is held back.
 */
struct log_limit {
	unsigned lines, seconds;
	/* The rest is log.c's, under its lock. */
	uint64_t window_ns; /* when the current window began */
	unsigned used;
	unsigned long dropped;
	char last[256];		    /* the last line dropped */
	enum wharf_log_level level; /* ... and its level */
	bool listed;		    /* in the list log_limits_flush walks */
	struct log_limit *next;
};
#define LOG_LIMIT_INIT(lines, seconds)                                         \
	{                                                                      \
		(lines), (seconds), 0, 0, 0, "", 0, 0, 0                       \
	}
/* Each call site its own limit: 10 lines a minute. */
#define LOG_LIMIT_LINES 10
#define LOG_LIMIT_SECONDS 60

void log_limited(struct log_limit *l, enum wharf_log_level level,
		 const char *fmt, ...) WHARF_PRINTF(3, 4);
void log_limits_flush(void);
#define log_limited_at(level, ...)                                             \
	do {                                                                   \
		static struct log_limit log_site_ =                            \
		    LOG_LIMIT_INIT(LOG_LIMIT_LINES, LOG_LIMIT_SECONDS);        \
		log_limited(&log_site_, level, __VA_ARGS__);                   \
	} while (0)
#define log_error_limited(...) log_limited_at(WHARF_LOG_ERROR, __VA_ARGS__)
#define log_warn_limited(...) log_limited_at(WHARF_LOG_WARN, __VA_ARGS__)

#endif
