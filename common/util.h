#ifndef WHARF_UTIL_H
#define WHARF_UTIL_H
/* util: small helpers shared by the mount, the loader and the CLI: sizes,
 * times, formatted strings, files, child processes, URL and option text. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "log.h"

#define WHARF_CHECK __attribute__((warn_unused_result))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* "4M", "512k", "10G", "123" (bytes; binary multiples) -> bytes.
 * @return 0, or -EINVAL for anything else (negative, overflow, junk). */
int parse_size(const char *s, uint64_t *out) WHARF_CHECK;

/* Formats bytes as "1.5 GiB" into buf; returns buf. */
const char *format_size(uint64_t bytes, char *buf, size_t len);
/* Formats an age in seconds as "3d4h", "2h10m", "5m12s" or "40s" (a
 * negative one, from a clock set back, as "0s"); returns buf. */
const char *format_age(int64_t seconds, char *buf, size_t len);
/* Formats epoch seconds as an HTTP date (RFC 9110, "Sun, 06 Nov 1994
 * 08:49:37 GMT", English whatever the locale) into buf (30 bytes do).
 * @return buf, or NULL when t is out of range or len too small. */
const char *format_http_date(int64_t t, char *buf, size_t len);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);

/* Formatted message into a malloc'd string (for `char **err` out-parameters).
 * The caller frees it.  Never returns NULL (aborts when memory is gone). */
char *strdupf(const char *fmt, ...) WHARF_PRINTF(1, 2);
void err_set(char **err, const char *fmt, ...) WHARF_PRINTF(2, 3);

/* path made absolute against the current directory (not resolved: links
 * and ".." stay), malloc'd.  @return NULL with errno set on failure. */
char *path_absolute(const char *path);

/* Reads a whole file of at most cap bytes into a malloc'd, NUL-terminated
 * buffer (the caller frees it).  @return 0, or -errno with *err saying
 * "PATH: what" (-EFBIG when it is larger than cap). */
int read_file_capped(const char *path, size_t cap, char **text, size_t *len,
		     char **err) WHARF_CHECK;

/*
 * Runs `command` with /bin/sh -c in directory dir (NULL: this process's),
 * stdin from /dev/null, and captures at most
 * cap - 1 bytes of its standard output into out (NUL-terminated; the rest is
 * read and dropped).  A command still running after timeout_ms is killed
 * (SIGTERM to its process group, then SIGKILL).  *status gets its wait
 * status.  @return 0 when it ran to its end (whatever its status),
 * -ETIMEDOUT when it was killed, -ECANCELED when run_capture_stop killed
 * it (or came first), or -errno when it could not run.
 */
int run_capture(const char *command, const char *dir, unsigned timeout_ms,
		char *out, size_t cap, size_t *len, int *status) WHARF_CHECK;

/* Ends the commands run_capture runs, on every thread, within a fraction
 * of a second (their process groups killed), and refuses new ones: the
 * process is stopping.  Async-signal-safe, for a stop signal's handler. */
void run_capture_stop(void);

/* The value of one hex digit, or -1. */
int hex_value(int c);
/* Percent-encodes s, keeping unreserved characters (and '/' when asked).
 * @return the length, or -ENAMETOOLONG when out (cap bytes) is too small. */
int url_encode(const char *s, bool keep_slash, char *out, size_t cap);

/*
 * A URL as log lines and messages show it: without its user information
 * ("user:password@") and without its query and fragment, where signed URLs
 * carry their signature and tokens.  Written into out (cut to cap bytes);
 * returns out.  The one place that decides what of a URL is secret, with
 * url_scrub.
 */
const char *url_redact(const char *url, char *out, size_t cap);
/* Overwrites the same secrets of the URL in url[0, len) with '*' in place
 * ("https://host/m.txt?*****"): for argv, which `ps` shows. */
void url_scrub(char *url, size_t len);

/*
 * s made safe for a terminal, malloc'd (NULL without memory): every C0
 * control character but those in keep ("\n\t", or ""), DEL, every C1
 * control character and every byte of invalid UTF-8 is escaped.  Text
 * (json false): as \xHH per byte, and a backslash as \\.  JSON (json
 * true, s a JSON document such as a mount's stats): controls as \u00XX
 * and a byte of invalid UTF-8 as the text \\xHH, backslashes and quotes
 * as they were, so that valid JSON stays valid and means the same.
 */
char *str_escape(const char *s, const char *keep, bool json);

/*
 * Opens path without following a symbolic link in any of its components
 * and without blocking: each directory is opened O_NOFOLLOW, the last one
 * with flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, and it must
 * be a regular file (a directory when flags has O_DIRECTORY).  For a path
 * that another user may have laid out: a link to a file of theirs, a FIFO
 * that never answers.  @return the fd (blocking again, for a regular
 * file); -ELOOP when a component is a link; -EINVAL when the last is not a
 * regular file (-ENOTDIR: not a directory, for O_DIRECTORY); else -errno.
 */
int open_nofollow(const char *path, int flags) WHARF_CHECK;

struct option;
/*
 * Describes what getopt_long found wrong, for a parser run with opterr = 0
 * and an optstring that starts with ':' (or "+:"): c is what it returned
 * ('?' or ':'), argv and longopts what it was given.  Writes "unknown
 * option '-x'", "option --name needs a value" or "option --name takes no
 * value" into buf and returns buf.
 */
const char *getopt_problem(int c, char *const *argv,
			   const struct option *longopts, char *buf,
			   size_t len);

#endif
