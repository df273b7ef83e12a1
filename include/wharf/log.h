#ifndef WHARF_INCLUDE_WHARF_LOG_H
#define WHARF_INCLUDE_WHARF_LOG_H
/*
 * Where libwharf's messages go.  The library never writes to a terminal by
 * itself: each message (a worker that died, a refused pinned registration)
 * goes to the log function, which by default writes "wharf: LEVEL: MESSAGE"
 * to stderr.  A program with its own logging installs a function once,
 * before it opens a loader.
 */
#ifdef __cplusplus
extern "C" {
#endif

/* Prefixed, so that <syslog.h>'s LOG_* macros never collide with them. */
enum wharf_log_level {
	WHARF_LOG_ERROR,
	WHARF_LOG_WARN,
	WHARF_LOG_INFO,
	WHARF_LOG_DEBUG,
};

/* Called with one whole message, without a trailing newline, from whichever
 * thread logs: it must be thread-safe and must not call back into libwharf.
 */
typedef void (*wharf_log_func)(enum wharf_log_level level, const char *msg,
			       void *arg);

/*
 * Sends every later message to fn (with arg), or back to stderr when fn is
 * NULL.  Not thread-safe against concurrent logging: call it before the
 * library runs.
 */
void wharf_log_set_func(wharf_log_func fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif
