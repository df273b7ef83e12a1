/* util: small helpers shared by the mount, the loader and the CLI (see
 * util.h). */
#include "config.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v, frac = 0, scale = 1;
	unsigned shift = 0;

	/* A digit first: strtoull would skip white space and take " -1" as
	 * 2^64 - 1. */
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	/* A decimal fraction (1.5G): up to 9 digits, kept exact as
	 * frac / scale until the unit is known. */
	if (*end == '.') {
		end++;
		if (*end < '0' || *end > '9')
			return -EINVAL;
		for (; *end >= '0' && *end <= '9'; end++) {
			if (scale >= 1000000000ull)
				return -EINVAL;
			frac = frac * 10 + (unsigned)(*end - '0');
			scale *= 10;
		}
	}
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	/* K, KB and KiB are all 1024: one rule for every SIZE option. */
	if (shift) {
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
	}
	if (*end)
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -EINVAL;
	/* A fraction of a byte is no size: 1.5 and 1.0001K are refused.
	 * frac < 10^9 < 2^30 and shift <= 40: 128 bits hold the product. */
	unsigned __int128 scaled = (unsigned __int128)frac << shift;
	if (scale > 1 && (!shift || scaled % scale))
		return -EINVAL;
	uint64_t bytes = (uint64_t)v << shift;
	uint64_t part = (uint64_t)(scaled / scale);
	if (bytes > UINT64_MAX - part)
		return -EINVAL;
	*out = bytes + part;
	return 0;
}

const char *format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	unsigned i = 0;

	while (v >= 1024 && i + 1 < ARRAY_SIZE(unit)) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, unit[i]);
	return buf;
}

const char *format_age(int64_t s, char *buf, size_t len)
{
	if (s < 0)
		s = 0;
	if (s >= 86400)
		snprintf(buf, len, "%lldd%lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(buf, len, "%lldh%lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
	else if (s >= 60)
		snprintf(buf, len, "%lldm%llds", (long long)(s / 60),
			 (long long)(s % 60));
	else
		snprintf(buf, len, "%llds", (long long)s);
	return buf;
}

const char *format_http_date(int64_t t, char *buf, size_t len)
{
	static const char *const wday[] = {"Sun", "Mon", "Tue", "Wed",
					   "Thu", "Fri", "Sat"};
	static const char *const month[] = {"Jan", "Feb", "Mar", "Apr",
					    "May", "Jun", "Jul", "Aug",
					    "Sep", "Oct", "Nov", "Dec"};
	const time_t tt = (time_t)t;
	struct tm tm;
	int n;

	if (!gmtime_r(&tt, &tm))
		return NULL;
	n = snprintf(buf, len, "%s, %02d %s %d %02d:%02d:%02d GMT",
		     wday[tm.tm_wday], tm.tm_mday, month[tm.tm_mon],
		     tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
	return n > 0 && (size_t)n < len ? buf : NULL;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char *vstrdupf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));

static char *vstrdupf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0) {
		fputs("wharf: out of memory formatting an error message\n",
		      stderr);
		abort();
	}
	return s;
}

char *strdupf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vstrdupf(fmt, ap);
	va_end(ap);
	return s;
}

void err_set(char **err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	*err = vstrdupf(fmt, ap);
	va_end(ap);
}

int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int url_encode(const char *s, bool keep_slash, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t k = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~' || (c == '/' && keep_slash)) {
			if (k + 1 >= cap)
				return -ENAMETOOLONG;
			out[k++] = (char)c;
		} else {
			if (k + 3 >= cap)
				return -ENAMETOOLONG;
			out[k++] = '%';
			out[k++] = hex[c >> 4];
			out[k++] = hex[c & 15];
		}
	}
	if (k >= cap)
		return -ENAMETOOLONG;
	out[k] = '\0';
	return (int)k;
}

char *path_absolute(const char *path)
{
	char *cwd, *abs;

	if (path[0] == '/')
		return strdup(path);
	cwd = getcwd(NULL, 0);
	if (!cwd)
		return NULL;
	abs = malloc(strlen(cwd) + 1 + strlen(path) + 1);
	if (abs)
		sprintf(abs, "%s%s%s", cwd, cwd[1] ? "/" : "", path);
	free(cwd);
	return abs;
}

int read_file_capped(const char *path, size_t cap, char **text, size_t *len,
		     char **err)
{
	/* Read to the end, never trusting st_size: a pipe (`<(cmd)`), a
	 * FIFO or a /proc file says 0 and still has bytes. */
	FILE *f = fopen(path, "re");
	size_t n = 0, size = 0;
	char *buf = NULL;
	int rc = 0;

	*text = NULL;
	*len = 0;
	if (!f) {
		rc = -errno;
		err_set(err, "%s: %s", path, strerror(-rc));
		return rc;
	}
	for (;;) {
		if (n == size) {
			const size_t want = size ? size * 2 : 64 * 1024;
			char *p;

			if (size > cap) {
				err_set(err, "%s: larger than %zu bytes", path,
					cap);
				rc = -EFBIG;
				goto out;
			}
			p = realloc(buf, (want > cap ? cap : want) + 2);
			if (!p) {
				rc = -ENOMEM;
				goto out;
			}
			buf = p;
			size = (want > cap ? cap : want) + 1;
		}
		n += fread(buf + n, 1, size - n, f);
		if (ferror(f)) {
			err_set(err, "%s: read error", path);
			rc = -EIO;
			goto out;
		}
		if (feof(f))
			break;
	}
	if (n > cap) {
		err_set(err, "%s: larger than %zu bytes", path, cap);
		rc = -EFBIG;
		goto out;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	fclose(f);
	return rc;
}

/* The long option that argv element arg ("--name" or "--name=value") names
 * with value val (an abbreviation counts), or NULL. */
static const struct option *long_option(const char *arg, int val,
					const struct option *lo)
{
	const size_t n = strcspn(arg + 2, "=");

	for (; lo && lo->name; lo++)
		if (lo->val == val && !strncmp(lo->name, arg + 2, n))
			return lo;
	return NULL;
}

const char *getopt_problem(int c, char *const *argv,
			   const struct option *longopts, char *buf,
			   size_t len)
{
	/* The element of a bad long option, and of a short one missing its
	 * value, is consumed: argv[optind - 1].  An unknown short option may
	 * sit inside an element ('x' in "-xf"), so optopt names it.  A long
	 * option is unknown (optopt 0), lacks a value, or has "=value" that it
	 * does not take. */
	const char *arg = optind > 0 ? argv[optind - 1] : "";
	const bool is_long =
	    !strncmp(arg, "--", 2) && arg[2] &&
	    (c == ':' || optopt == 0 ||
	     (strchr(arg, '=') && long_option(arg, optopt, longopts)));
	const int n = is_long ? (int)strcspn(arg, "=") : 0;

	if (c == ':' && is_long)
		snprintf(buf, len, "option %.*s needs a value", n, arg);
	else if (c == ':')
		snprintf(buf, len, "option -%c needs a value", optopt);
	else if (is_long && optopt)
		snprintf(buf, len, "option %.*s takes no value", n, arg);
	else if (is_long)
		snprintf(buf, len, "unknown option '%.*s'", n, arg);
	else
		snprintf(buf, len, "unknown option '-%c'", optopt);
	return buf;
}

/* Waits for pid.  With `grace_ms`, its group gets SIGTERM, that long to
 * go, then SIGKILL, so that nothing it started (which may ignore SIGTERM)
 * outlives it. */
static void reap(pid_t pid, int grace_ms, int *status)
{
	bool gone = false;

	if (grace_ms) {
		kill(-pid, SIGTERM);
		for (int i = 0; i < grace_ms / 10 && !gone; i++) {
			gone = waitpid(pid, status, WNOHANG) == pid;
			if (!gone)
				usleep(10000);
		}
		kill(-pid, SIGKILL);
	}
	while (!gone && waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

/*
 * run_capture_stop: stopped is set, then the pipe's write end written;
 * run_capture makes the pipe, then looks at stopped (both sequentially
 * consistent): one of the two sees the other.  The pipe is never drained,
 * so its read end stays readable for every command from then on.
 */
static int stopped;
static int stop_rfd = -1, stop_wfd = -1;
static pthread_once_t stop_once = PTHREAD_ONCE_INIT;

static void stop_pipe_make(void)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK))
		return; /* a stop then waits for the command's end */
	stop_rfd = p[0];
	__atomic_store_n(&stop_wfd, p[1], __ATOMIC_SEQ_CST);
}

void run_capture_stop(void)
{
	int fd;

	__atomic_store_n(&stopped, 1, __ATOMIC_SEQ_CST);
	fd = __atomic_load_n(&stop_wfd, __ATOMIC_SEQ_CST);
	if (fd >= 0)
		(void)!write(fd, "", 1);
}

/* A command's grace between SIGTERM and SIGKILL: at a timeout, and at a
 * stop (whose whole must fit in 2 s). */
#define GRACE_TIMEOUT_MS 1000
#define GRACE_STOP_MS 200

int run_capture(const char *command, const char *dir, unsigned timeout_ms,
		char *out, size_t cap, size_t *len, int *status)
{
	const uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
	char drop[4096];
	size_t n = 0;
	int pfd[2], rc = 0;
	pid_t pid;

	*len = 0;
	*status = 0;
	if (cap == 0)
		return -EINVAL;
	out[0] = '\0';
	pthread_once(&stop_once, stop_pipe_make);
	if (__atomic_load_n(&stopped, __ATOMIC_SEQ_CST))
		return -ECANCELED;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return rc;
	}
	if (pid == 0) {
		/* Only async-signal-safe calls: the parent has threads. */
		int nul = open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(pfd[1], 1) < 0 ||
		    (dir && chdir(dir)))
			_exit(127);
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		_exit(127);
	}
	/* Also here: the group must exist before a kill can name it. */
	setpgid(pid, pid);
	close(pfd[1]);
	for (;;) {
		struct pollfd p[2] = {{.fd = pfd[0], .events = POLLIN},
				      {.fd = stop_rfd, .events = POLLIN}};
		uint64_t t = now_ns();
		char *dst = n + 1 < cap ? out + n : drop;
		size_t room = n + 1 < cap ? cap - 1 - n : sizeof(drop);
		ssize_t k;
		int r;

		if (t >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		r = poll(p, 2, (int)((deadline - t) / 1000000) + 1);
		if (r < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		if (p[1].revents) {
			rc = -ECANCELED;
			break;
		}
		if (r <= 0)
			continue;
		k = read(pfd[0], dst, room);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break; /* the end of its output */
		if (dst != drop)
			n += (size_t)k;
	}
	close(pfd[0]);
	reap(pid,
	     !rc ? 0 : rc == -ECANCELED ? GRACE_STOP_MS : GRACE_TIMEOUT_MS,
	     status);
	out[n] = '\0';
	*len = n;
	return rc;
}

/* ---- secrets in URLs, text for a terminal, opening without links ---- */

/* Where the secrets of url[0, len) are: its user information in
 * [*user, *user_end) (empty when none) and its query and fragment from
 * *query on (len when none). */
static void url_secrets(const char *url, size_t len, size_t *user,
			size_t *user_end, size_t *query)
{
	const char *sep = memmem(url, len, "://", 3);
	size_t auth = sep ? (size_t)(sep - url) + 3 : 0, end = auth;

	/* "://" after a '/', '?' or '#' is in the path or query. */
	if (sep && strcspn(url, "/?#") < (size_t)(sep - url))
		auth = end = 0;
	*user = *user_end = auth;
	while (sep && end < len && !strchr("/?#", url[end]))
		end++;
	for (size_t i = auth; i < end; i++)
		if (url[i] == '@')
			*user_end = i + 1;
	*query = end;
	while (*query < len && url[*query] != '?' && url[*query] != '#')
		(*query)++;
}

const char *url_redact(const char *url, char *out, size_t cap)
{
	size_t user, user_end, query;

	url_secrets(url, strlen(url), &user, &user_end, &query);
	snprintf(out, cap, "%.*s%.*s", (int)user, url,
		 (int)(query - user_end), url + user_end);
	return out;
}

void url_scrub(char *url, size_t len)
{
	size_t user, user_end, query;

	url_secrets(url, len, &user, &user_end, &query);
	if (user_end > user)
		memset(url + user, '*', user_end - 1 - user);
	if (query < len)
		memset(url + query + 1, '*', len - query - 1);
}

/* The length of the UTF-8 sequence at s, or 0 when it is not valid (an
 * overlong form, a surrogate, past U+10FFFF, cut short). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

char *str_escape(const char *s, const char *keep, bool json)
{
	const unsigned char *p = (const unsigned char *)s;
	/* At most 6 bytes out for each byte in ("\\x9b" in JSON is 5). */
	char *out = malloc(strlen(s) * 6 + 1), *w = out;

	if (!out)
		return NULL;
	while (*p) {
		const size_t n = utf8_len(p);
		/* A C1 control is U+0080..U+009F: 0xc2 0x80..0x9f. */
		const unsigned cp = n == 2 && p[0] == 0xc2 ? p[1] : p[0];
		const bool control = (n == 1 && (*p < 0x20 || *p == 0x7f) &&
				      !strchr(keep, *p)) ||
				     (n == 2 && p[0] == 0xc2 && p[1] < 0xa0);

		if (n && !control) {
			if (!json && *p == '\\')
				*w++ = '\\';
			memcpy(w, p, n);
			w += n;
			p += n;
		} else if (n && json) {
			w += sprintf(w, "\\u%04x", cp);
			p += n;
		} else {
			/* Byte by byte: a C1 control as \xc2\x9b. */
			for (size_t i = 0; i < (n ? n : 1); i++, p++)
				w += sprintf(w, json ? "\\\\x%02x" : "\\x%02x",
					     *p);
		}
	}
	*w = '\0';
	return out;
}

int open_nofollow(const char *path, int flags)
{
	const bool want_dir = flags & O_DIRECTORY;
	char *copy = strdup(path), *name, *save = NULL, *next;
	int dfd, fd = -1, rc = 0;
	struct stat st;

	if (!copy)
		return -ENOMEM;
	dfd = open(path[0] == '/' ? "/" : ".",
		   O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		goto out;
	}
	name = strtok_r(copy, "/", &save);
	/* "/" itself is a directory and no link. */
	if (!name) {
		fd = dfd;
		dfd = -1;
		if (!want_dir)
			rc = -EINVAL;
		goto out;
	}
	for (; name; name = next) {
		const bool last = !(next = strtok_r(NULL, "/", &save));
		const int f = last ? flags | O_NOFOLLOW | O_NONBLOCK |
					 O_NOCTTY | O_CLOEXEC
				   : O_PATH | O_DIRECTORY | O_NOFOLLOW |
					 O_CLOEXEC;

		fd = openat(dfd, name, f);
		if (fd < 0) {
			rc = -errno;
			/* O_NOFOLLOW on a link: ELOOP, or ENOTDIR with
			 * O_DIRECTORY.  Say which it was. */
			if ((rc == -ENOTDIR || rc == -ELOOP) &&
			    !fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
				rc = S_ISLNK(st.st_mode) ? -ELOOP : rc;
			goto out;
		}
		close(dfd);
		dfd = -1;
		if (!last) {
			dfd = fd;
			fd = -1;
		}
	}
	if (fstat(fd, &st))
		rc = -errno;
	else if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		rc = -EINVAL;
	else if (!want_dir && (flags & O_NONBLOCK) == 0 &&
		 fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK))
		rc = -errno;
out:
	if (rc && fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(copy);
	return rc ? rc : fd;
}
