/*
 * origin: a small HTTP/1.1 server over a directory for benchmarks and
 * reliability tests.  It serves files with Range and keep-alive, lists
 * directories as nginx's JSON autoindex does, and injects the conditions of
 * remote storage: a first-byte latency, bandwidth caps per connection and in
 * total, and faults (5xx answers, connection resets, truncated bodies,
 * stalls).  See usage() for the options.
 *
 * Design: N threads, each with its own SO_REUSEPORT listening socket and
 * epoll set, so nothing is shared on the request path but the total
 * bandwidth bucket.  Connections are non-blocking state machines; file
 * bodies go out with sendfile(2), so a byte is never copied in user space.
 * Waits (first-byte latency, bandwidth, stalls) use one timerfd per
 * connection that needs one, created on first use and kept.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define REQ_MAX 8192	     /* bytes of one request head */
#define SEND_STEP (1u << 20) /* most bytes one sendfile call is asked for */
#define MAX_EVENTS 256
#define LISTING_MAX (64u << 20) /* a bigger JSON listing is refused */

struct bucket {
	pthread_mutex_t mu;
	double rate;  /* bytes per second; 0: no cap */
	double burst; /* most tokens held */
	double tokens;
	uint64_t last; /* ns */
};

/* --bad-ranges: what a misbehaving server or cache does to a Range. */
enum bad_ranges {
	BR_NONE,
	BR_FROM_ZERO,	/* 206, the bytes from offset 0, no Content-Range */
	BR_NO_HEADER,	/* 206, the right bytes, no Content-Range */
	BR_WRONG_TOTAL, /* 206, Content-Range names a size one byte larger */
	BR_WHOLE,	/* 200 and the whole file: Range ignored (allowed) */
};
static const char *const bad_ranges_names[] = {
    "", "from-zero", "no-header", "wrong-total", "whole", NULL};

static struct config {
	const char *root;
	const char *addr;
	int port;
	const char *port_file;
	unsigned threads;
	uint64_t ttfb_ns;
	double conn_rate;  /* bytes/s per connection, 0: none */
	double total_rate; /* bytes/s in total, 0: none */
	double p_5xx, p_reset, p_truncate, p_stall, p_slow; /* per file response */
	uint64_t stall_ns;
	unsigned max_inflight; /* 503 to a file request beyond this; 0: none */
	uint64_t fail_first;   /* 503 to the first this many file requests */
	uint64_t seed;
	bool quiet;
	bool html; /* listings as nginx's HTML autoindex, not JSON */
	enum bad_ranges bad_ranges; /* how a ranged GET is answered wrong */
	/* --redirect PATH=URL: a GET or HEAD of PATH answers 302 URL */
	const char *redirect_path[8], *redirect_to[8];
	unsigned n_redirects;
} cfg = {
    .addr = "127.0.0.1",
    .threads = 2,
    .stall_ns = 10000000000ull,
    .seed = 1,
};

static struct bucket total_bucket = {.mu = PTHREAD_MUTEX_INITIALIZER};
static sig_atomic_t stopping; /* atomic: set by the signal handler */

static struct counters {
	uint64_t conns, requests, bytes, e5xx, resets, truncs, stalls, slows;
	uint64_t busy;	   /* 503s for going past --max-inflight */
	uint64_t files;	   /* file requests (--fail-first counts them) */
	uint64_t inflight; /* file requests being answered now */
	uint64_t peak;	   /* the most asked for at once, refused included */
} counters;

#define COUNT(field, n)                                                        \
	__atomic_fetch_add(&counters.field, (n), __ATOMIC_RELAXED)

enum conn_state {
	ST_READ,    /* waiting for (the rest of) a request head */
	ST_TTFB,    /* timer: the injected first-byte latency */
	ST_HEAD,    /* sending the response head */
	ST_BODY,    /* sending the body */
	ST_BW_WAIT, /* timer: out of bandwidth tokens */
	ST_STALL,   /* timer: an injected stall */
};

enum fault { F_NONE, F_5XX, F_RESET, F_TRUNCATE, F_STALL, F_SLOW };

struct conn {
	struct conn *next_dead; /* freed after the current batch of events */
	bool closed;
	int fd;
	int tfd; /* timerfd or -1 */
	enum conn_state st;
	char req[REQ_MAX];
	size_t req_len;
	size_t req_used; /* bytes of req consumed by the current request */
	bool keep_alive;
	bool head_only;
	/* response */
	char head[1024];
	size_t head_len, head_off;
	int file;	    /* body from a file, or -1 */
	char *mem;	    /* body from memory (listings, errors) */
	uint64_t body_off;  /* next byte (file offset, or index into mem) */
	uint64_t body_left; /* bytes still to send */
	uint64_t body_sent;
	enum fault fault;
	uint64_t fault_at; /* body bytes sent when the fault strikes */
	struct bucket bw;  /* this connection's bucket (no lock needed) */
	bool counted;	   /* in counters.inflight */
};

struct worker {
	struct conn *dead; /* closed during this batch of events */
	int lfd, ep;
	uint64_t rng;
	pthread_t th;
};

static uint64_t now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double rnd(struct worker *w)
{
	/* xorshift64*: cheap, per thread, reproducible from --seed */
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return (double)((w->rng * 2685821657736338717ull) >> 11) /
	       9007199254740992.0;
}

static void bucket_init(struct bucket *b, double rate)
{
	b->rate = rate;
	/* 20 ms worth of tokens, at least 16 KiB, so small caps still move */
	b->burst = rate / 50 > 16384 ? rate / 50 : 16384;
	b->tokens = b->burst;
	b->last = now();
}

static void bucket_refill(struct bucket *b, uint64_t t)
{
	b->tokens += (double)(t - b->last) * b->rate / 1e9;
	if (b->tokens > b->burst)
		b->tokens = b->burst;
	b->last = t;
}

/*
 * Takes up to want tokens; returns how many (0: none now).  Less than a
 * 16th of the burst (what bucket_wait waits for) counts as none: when many
 * connections share the total bucket, handing out crumbs of a few bytes
 * would have each send a few bytes per wake-up and spend the origin's CPU
 * on system calls instead of on its caps.
 */
static uint64_t bucket_take(struct bucket *b, uint64_t want, uint64_t t)
{
	const double least = (double)want < b->burst / 16 ? (double)want
							   : b->burst / 16;
	uint64_t got;

	if (b->rate <= 0)
		return want;
	bucket_refill(b, t);
	if (b->tokens < 1 || b->tokens < least)
		return 0;
	got = b->tokens < (double)want ? (uint64_t)b->tokens : want;
	b->tokens -= (double)got;
	return got;
}

static void bucket_give_back(struct bucket *b, uint64_t n)
{
	if (b->rate > 0)
		b->tokens += (double)n;
}

/* Nanoseconds until the bucket holds a useful amount (a 16th of its burst). */
static uint64_t bucket_wait(const struct bucket *b)
{
	double need = b->burst / 16 - b->tokens;

	if (b->rate <= 0 || need <= 0)
		return 1000000;
	return (uint64_t)(need / b->rate * 1e9) + 1;
}

/* The file request c was answering is over (done, failed, or dropped). */
static void inflight_end(struct conn *c)
{
	if (c->counted)
		__atomic_fetch_sub(&counters.inflight, 1, __ATOMIC_RELAXED);
	c->counted = false;
}

/*
 * --max-inflight: counts a file request in; @return false (and counts it
 * out again) when that makes more than the cap, to be answered 503 like a
 * store that sheds load.
 */
static bool inflight_begin(struct conn *c)
{
	uint64_t n, peak;

	if (!cfg.max_inflight)
		return true;
	n = __atomic_add_fetch(&counters.inflight, 1, __ATOMIC_RELAXED);
	peak = __atomic_load_n(&counters.peak, __ATOMIC_RELAXED);
	while (n > peak &&
	       !__atomic_compare_exchange_n(&counters.peak, &peak, n, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	if (n > cfg.max_inflight) {
		__atomic_fetch_sub(&counters.inflight, 1, __ATOMIC_RELAXED);
		return false;
	}
	c->counted = true;
	return true;
}

static void conn_close(struct worker *w, struct conn *c, bool reset)
{
	if (reset) {
		struct linger lg = {.l_onoff = 1, .l_linger = 0};

		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->tfd >= 0) {
		epoll_ctl(w->ep, EPOLL_CTL_DEL, c->tfd, NULL);
		close(c->tfd);
	}
	if (c->file >= 0)
		close(c->file);
	c->file = -1;
	inflight_end(c);
	/* Later events of this batch may still name c: free it after them. */
	c->closed = true;
	c->next_dead = w->dead;
	w->dead = c;
}

/* Arms c's timer for ns from now; its events come back tagged with c. */
static int conn_sleep(struct worker *w, struct conn *c, uint64_t ns,
		      enum conn_state st)
{
	struct itimerspec its = {0};

	if (c->tfd < 0) {
		struct epoll_event ev = {.events = EPOLLIN};

		c->tfd =
		    timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (c->tfd < 0)
			return -errno;
		/* Tag timer events by setting the low bit of the pointer. */
		ev.data.u64 = (uint64_t)(uintptr_t)c | 1;
		if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->tfd, &ev))
			return -errno;
	}
	if (ns == 0)
		ns = 1;
	its.it_value.tv_sec = (time_t)(ns / 1000000000ull);
	its.it_value.tv_nsec = (long)(ns % 1000000000ull);
	if (timerfd_settime(c->tfd, 0, &its, NULL))
		return -errno;
	c->st = st;
	return 0;
}

static void set_out_interest(struct worker *w, struct conn *c, bool out)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP |
					   (out ? EPOLLOUT : 0)};

	ev.data.ptr = c;
	epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static const char *status_text(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 206:
		return "Partial Content";
	case 301:
		return "Moved Permanently";
	case 302:
		return "Found";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 416:
		return "Range Not Satisfiable";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	default:
		return "Unknown";
	}
}

static void http_date(time_t t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* A small answer from memory: errors, redirects. */
static void reply_simple(struct conn *c, int code, const char *extra)
{
	char *body = NULL;
	int n = asprintf(&body, "%d %s\n", code, status_text(code));

	if (n < 0) {
		body = NULL;
		n = 0;
	}
	c->head_len = (size_t)snprintf(
	    c->head, sizeof(c->head),
	    "HTTP/1.1 %d %s\r\nServer: wharf-origin\r\nContent-Type: "
	    "text/plain\r\nContent-Length: %d\r\n%s%s\r\n",
	    code, status_text(code), n, extra ? extra : "",
	    c->keep_alive ? "" : "Connection: close\r\n");
	c->mem = body;
	c->body_off = 0;
	c->body_left = c->head_only ? 0 : (uint64_t)n;
}

/* Appends to a growing buffer; 0 or -ENOMEM/-EFBIG. */
struct buf {
	char *p;
	size_t len, cap;
};

static int buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL,
			      b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -EINVAL;
		if (b->p && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return 0;
		}
		size_t cap = b->cap ? b->cap * 2 : 4096;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		if (cap > LISTING_MAX)
			return -EFBIG;
		char *p = realloc(b->p, cap);

		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
}

/* JSON string body: escapes quotes, backslashes and control bytes. */
static int buf_json_str(struct buf *b, const char *s)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			rc = buf_printf(b, "\\%c", ch);
		else if (ch < 0x20)
			rc = buf_printf(b, "\\u%04x", ch);
		else
			rc = buf_printf(b, "%c", ch);
	}
	return rc;
}

/* An href: percent-encodes all but unreserved characters and '/'. */
static int buf_href(struct buf *b, const char *s)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		unsigned char ch = (unsigned char)*s;

		if (isalnum(ch) || strchr("-._~/", ch))
			rc = buf_printf(b, "%c", ch);
		else
			rc = buf_printf(b, "%%%02X", ch);
	}
	return rc;
}

static int buf_html(struct buf *b, const char *s)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		switch (*s) {
		case '&':
			rc = buf_printf(b, "&amp;");
			break;
		case '<':
			rc = buf_printf(b, "&lt;");
			break;
		case '>':
			rc = buf_printf(b, "&gt;");
			break;
		case '"':
			rc = buf_printf(b, "&quot;");
			break;
		default:
			rc = buf_printf(b, "%c", *s);
			break;
		}
	}
	return rc;
}

/* One entry as nginx's HTML autoindex with exact sizes writes it. */
static int list_entry_html(struct buf *b, const char *name,
			   const struct stat *sb)
{
	const bool dir = S_ISDIR(sb->st_mode);
	char date[32];
	struct tm tm;
	int rc;

	gmtime_r(&sb->st_mtime, &tm);
	strftime(date, sizeof(date), "%d-%b-%Y %H:%M", &tm);
	rc = buf_printf(b, "<a href=\"");
	if (!rc)
		rc = buf_href(b, name);
	if (!rc)
		rc = buf_printf(b, "%s\">", dir ? "/" : "");
	if (!rc)
		rc = buf_html(b, name);
	if (!rc && dir)
		rc = buf_printf(b, "/</a> %s %20s\n", date, "-");
	else if (!rc)
		rc = buf_printf(b, "</a> %s %20lld\n", date,
				(long long)sb->st_size);
	return rc;
}

/* nginx's `autoindex_format json` (or its HTML page with --listing html):
 * one entry per file or directory, dot files hidden. */
static int list_dir(const char *dir, const char *url_path, struct buf *b)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool first = true;
	int rc;

	if (!d)
		return -errno;
	if (cfg.html) {
		rc = buf_printf(b, "<html>\n<head><title>Index of ");
		if (!rc)
			rc = buf_html(b, url_path);
		if (!rc)
			rc = buf_printf(b, "</title></head>\n<body>\n"
					   "<h1>Index of ");
		if (!rc)
			rc = buf_html(b, url_path);
		if (!rc)
			rc = buf_printf(b, "</h1><hr><pre><a href=\"../\">"
					   "../</a>\n");
	} else {
		rc = buf_printf(b, "[");
	}
	while (!rc && (de = readdir(d))) {
		struct stat sb;
		char date[64];

		if (de->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(d), de->d_name, &sb, 0))
			continue;
		if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
			continue;
		if (cfg.html) {
			rc = list_entry_html(b, de->d_name, &sb);
			continue;
		}
		http_date(sb.st_mtime, date, sizeof(date));
		rc = buf_printf(b, "%s\n{ \"name\":\"", first ? "" : ",");
		if (!rc)
			rc = buf_json_str(b, de->d_name);
		if (!rc && S_ISDIR(sb.st_mode))
			rc = buf_printf(b,
					"\", \"type\":\"directory\", "
					"\"mtime\":\"%s\" }",
					date);
		else if (!rc)
			rc = buf_printf(
			    b,
			    "\", \"type\":\"file\", \"mtime\":\"%s\", "
			    "\"size\":%lld }",
			    date, (long long)sb.st_size);
		first = false;
	}
	if (!rc)
		rc = buf_printf(b, cfg.html ? "</pre><hr></body>\n</html>\n"
					    : "\n]\n");
	closedir(d);
	return rc;
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = tolower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* Percent-decodes the request target into a path under the root; refuses
 * "..", NUL and anything that is not absolute.  Drops a query string. */
static int target_path(const char *t, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	if (n == 0 || t[0] != '/')
		return -EINVAL;
	for (size_t i = 0; i < n && t[i] != '?'; i++) {
		int ch = (unsigned char)t[i];

		if (ch == '%') {
			int hi = i + 2 < n ? hexval(t[i + 1]) : -1;
			int lo = i + 2 < n ? hexval(t[i + 2]) : -1;

			if (hi < 0 || lo < 0)
				return -EINVAL;
			ch = hi * 16 + lo;
			i += 2;
		}
		if (ch == 0 || o + 1 >= cap)
			return -EINVAL;
		out[o++] = (char)ch;
	}
	out[o] = 0;
	if (strstr(out, "/../") || (o >= 3 && !strcmp(out + o - 3, "/..")))
		return -EACCES;
	return 0;
}

/* "bytes=a-b", "bytes=a-", "bytes=-n" -> [*start, *end] inclusive.
 * @return 1 (a range), 0 (ignore the header), -1 (unsatisfiable). */
static int parse_range(const char *v, uint64_t size, uint64_t *start,
		       uint64_t *end)
{
	char *e;
	unsigned long long a, b;

	while (*v == ' ')
		v++;
	if (strncmp(v, "bytes=", 6))
		return 0;
	v += 6;
	if (strchr(v, ','))
		return 0; /* multipart ranges: send the whole object */
	if (*v == '-') {
		b = strtoull(v + 1, &e, 10);
		if (e == v + 1)
			return 0;
		if (b == 0 || size == 0)
			return -1;
		*start = b >= size ? 0 : size - b;
		*end = size - 1;
		return 1;
	}
	a = strtoull(v, &e, 10);
	if (e == v || *e != '-')
		return 0;
	v = e + 1;
	if (*v == 0 || *v == '\r' || *v == ' ') {
		b = size ? size - 1 : 0;
	} else {
		b = strtoull(v, &e, 10);
		if (e == v)
			return 0;
	}
	if (a >= size || a > b)
		return -1;
	*start = a;
	*end = b >= size ? size - 1 : b;
	return 1;
}

/* A header's value, or NULL: case-insensitive name match in the head. */
static const char *header(const char *head, const char *name, char *val,
			  size_t cap)
{
	size_t nl = strlen(name);
	const char *p = strstr(head, "\r\n");

	while (p && p[2] != '\r') {
		const char *line = p + 2;
		const char *eol = strstr(line, "\r\n");

		if (!eol)
			return NULL;
		if ((size_t)(eol - line) > nl && line[nl] == ':' &&
		    !strncasecmp(line, name, nl)) {
			const char *v = line + nl + 1;
			size_t n;

			while (*v == ' ' || *v == '\t')
				v++;
			n = (size_t)(eol - v);
			if (n >= cap)
				n = cap - 1;
			memcpy(val, v, n);
			val[n] = 0;
			return val;
		}
		p = eol;
	}
	return NULL;
}

static enum fault pick_fault(struct worker *w)
{
	double r = rnd(w);

	if ((r -= cfg.p_5xx) < 0)
		return F_5XX;
	if ((r -= cfg.p_reset) < 0)
		return F_RESET;
	if ((r -= cfg.p_truncate) < 0)
		return F_TRUNCATE;
	if ((r -= cfg.p_stall) < 0)
		return F_STALL;
	if ((r -= cfg.p_slow) < 0)
		return F_SLOW;
	return F_NONE;
}

/* Builds the response for the request head in c->req[0, head_len). */
static void prepare_response(struct worker *w, struct conn *c, size_t head_len)
{
	char *head = c->req, val[256], path[PATH_MAX], full[PATH_MAX + 8];
	char date[64], extra[PATH_MAX + 64];
	const char *sp1, *sp2;
	uint64_t start = 0, end = 0, size;
	struct stat sb;
	int fd, r = 0;

	head[head_len - 2] = 0; /* keep the final CRLF of the last header */
	COUNT(requests, 1);
	c->fault = F_NONE;
	c->body_sent = 0;
	sp1 = memchr(head, ' ', head_len);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(head + head_len - sp1 - 1))
		  : NULL;
	c->keep_alive = sp2 && !strncmp(sp2 + 1, "HTTP/1.1", 8);
	if (header(head, "Connection", val, sizeof(val))) {
		if (!strcasecmp(val, "close"))
			c->keep_alive = false;
		else if (!strcasecmp(val, "keep-alive"))
			c->keep_alive = true;
	}
	c->head_only = sp1 && !strncmp(head, "HEAD ", 5);
	if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7)) {
		c->keep_alive = false;
		reply_simple(c, 400, NULL);
		return;
	}
	if (strncmp(head, "GET ", 4) && !c->head_only) {
		reply_simple(c, 405, "Allow: GET, HEAD\r\n");
		return;
	}
	if (target_path(sp1 + 1, (size_t)(sp2 - sp1 - 1), path, sizeof(path))) {
		reply_simple(c, 400, NULL);
		return;
	}
	snprintf(full, sizeof(full), "%s%s", cfg.root, path);
	if (stat(full, &sb)) {
		reply_simple(c, errno == EACCES ? 403 : 404, NULL);
		return;
	}
	if (S_ISDIR(sb.st_mode)) {
		struct buf b = {0};
		size_t pl = strlen(path);

		if (path[pl - 1] != '/') {
			snprintf(extra, sizeof(extra), "Location: %.*s/\r\n",
				 (int)(sp2 - sp1 - 1), sp1 + 1);
			reply_simple(c, 301, extra);
			return;
		}
		r = list_dir(full, path, &b);
		if (r) {
			free(b.p);
			reply_simple(c, r == -EACCES ? 403 : 500, NULL);
			return;
		}
		c->head_len = (size_t)snprintf(
		    c->head, sizeof(c->head),
		    "HTTP/1.1 200 OK\r\nServer: wharf-origin\r\nContent-Type: "
		    "%s\r\nContent-Length: %zu\r\n%s\r\n",
		    cfg.html ? "text/html" : "application/json", b.len,
		    c->keep_alive ? "" : "Connection: close\r\n");
		c->mem = b.p;
		c->body_off = 0;
		c->body_left = c->head_only ? 0 : b.len;
		return;
	}
	if (!S_ISREG(sb.st_mode)) {
		reply_simple(c, 403, NULL);
		return;
	}
	for (unsigned i = 0; i < cfg.n_redirects; i++)
		if (!strcmp(path, cfg.redirect_path[i])) {
			snprintf(extra, sizeof(extra), "Location: %s\r\n",
				 cfg.redirect_to[i]);
			reply_simple(c, 302, extra);
			return;
		}
	c->fault = pick_fault(w);
	if (COUNT(files, 1) < cfg.fail_first)
		c->fault = F_5XX;
	if (c->fault == F_5XX) {
		COUNT(e5xx, 1);
		reply_simple(c, 503, "Retry-After: 0\r\n");
		c->fault = F_NONE;
		return;
	}
	if (!inflight_begin(c)) {
		COUNT(busy, 1);
		reply_simple(c, 503, "Retry-After: 0\r\n");
		c->fault = F_NONE;
		return;
	}
	size = (uint64_t)sb.st_size;
	if (header(head, "Range", val, sizeof(val)))
		r = parse_range(val, size, &start, &end);
	if (r < 0) {
		snprintf(extra, sizeof(extra),
			 "Content-Range: bytes */%" PRIu64 "\r\n", size);
		reply_simple(c, 416, extra);
		c->fault = F_NONE;
		return;
	}
	fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		reply_simple(c, 403, NULL);
		c->fault = F_NONE;
		return;
	}
	if (r == 1 && cfg.bad_ranges == BR_WHOLE)
		r = 0;
	if (r == 0) {
		start = 0;
		end = size ? size - 1 : 0;
	}
	http_date(sb.st_mtime, date, sizeof(date));
	if (r == 1 && cfg.bad_ranges != BR_FROM_ZERO &&
	    cfg.bad_ranges != BR_NO_HEADER)
		snprintf(extra, sizeof(extra),
			 "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64
			 "\r\n",
			 start, end, size + (cfg.bad_ranges == BR_WRONG_TOTAL));
	else
		extra[0] = 0;
	if (r == 1 && cfg.bad_ranges == BR_FROM_ZERO) {
		end -= start;
		start = 0;
	}
	c->head_len = (size_t)snprintf(
	    c->head, sizeof(c->head),
	    "HTTP/1.1 %d %s\r\nServer: wharf-origin\r\nContent-Type: "
	    "application/octet-stream\r\nContent-Length: %" PRIu64
	    "\r\nLast-Modified: %s\r\nETag: \"%llx-%llx\"\r\nAccept-Ranges: "
	    "bytes\r\n%s%s\r\n",
	    r == 1 ? 206 : 200, r == 1 ? "Partial Content" : "OK",
	    size ? end - start + 1 : 0, date, (unsigned long long)sb.st_mtime,
	    (unsigned long long)sb.st_size, extra,
	    c->keep_alive ? "" : "Connection: close\r\n");
	c->file = fd;
	c->body_off = start;
	c->body_left = c->head_only || !size ? 0 : end - start + 1;
	if (c->fault != F_NONE && c->fault != F_SLOW && c->body_left < 2)
		c->fault = F_NONE; /* nothing to cut in half */
	c->fault_at = c->body_left / 2;
}

static void end_response(struct conn *c)
{
	inflight_end(c);
	if (c->file >= 0)
		close(c->file);
	c->file = -1;
	free(c->mem);
	c->mem = NULL;
	/* Pipelined requests stay in the buffer. */
	memmove(c->req, c->req + c->req_used, c->req_len - c->req_used);
	c->req_len -= c->req_used;
	c->req_used = 0;
	c->st = ST_READ;
}

/* Sends what it can; returns false when c was closed. */
static bool pump(struct worker *w, struct conn *c);

/* Looks for a full head in the buffer; reads more if there is none. */
static bool on_readable(struct worker *w, struct conn *c)
{
	for (;;) {
		char *eoh;

		c->req[c->req_len] = 0;
		eoh = c->req_len ? strstr(c->req, "\r\n\r\n") : NULL;
		if (eoh) {
			size_t hl = (size_t)(eoh - c->req) + 4;

			c->req_used = hl;
			prepare_response(w, c, hl);
			c->head_off = 0;
			uint64_t wait = cfg.ttfb_ns;

			if (c->fault == F_SLOW) {
				/* A slow first byte, then a normal body. */
				COUNT(slows, 1);
				c->fault = F_NONE;
				wait += cfg.stall_ns;
			}
			if (wait) {
				if (conn_sleep(w, c, wait, ST_TTFB)) {
					conn_close(w, c, false);
					return false;
				}
				return true;
			}
			c->st = ST_HEAD;
			return pump(w, c);
		}
		if (c->req_len >= REQ_MAX - 1) {
			c->keep_alive = false;
			c->req_used = c->req_len;
			reply_simple(c, 431, NULL);
			c->st = ST_HEAD;
			c->head_off = 0;
			return pump(w, c);
		}
		ssize_t n = recv(c->fd, c->req + c->req_len,
				 REQ_MAX - 1 - c->req_len, 0);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			conn_close(w, c, false);
			return false;
		}
		if (n < 0)
			return true;
		c->req_len += (size_t)n;
	}
}

static bool pump(struct worker *w, struct conn *c)
{
	while (c->st == ST_HEAD) {
		ssize_t n = send(c->fd, c->head + c->head_off,
				 c->head_len - c->head_off,
				 MSG_NOSIGNAL | (c->body_left ? MSG_MORE : 0));

		if (n < 0 && errno == EAGAIN) {
			set_out_interest(w, c, true);
			return true;
		}
		if (n < 0) {
			conn_close(w, c, false);
			return false;
		}
		c->head_off += (size_t)n;
		if (c->head_off == c->head_len)
			c->st = ST_BODY;
	}
	while (c->st == ST_BODY && c->body_left) {
		uint64_t t = now(), want, got;
		ssize_t n;

		want = c->body_left < SEND_STEP ? c->body_left : SEND_STEP;
		if (c->fault != F_NONE && c->body_sent < c->fault_at &&
		    want > c->fault_at - c->body_sent)
			want = c->fault_at - c->body_sent;
		if (c->fault != F_NONE && c->body_sent == c->fault_at) {
			switch (c->fault) {
			case F_RESET:
				COUNT(resets, 1);
				conn_close(w, c, true);
				return false;
			case F_TRUNCATE:
				COUNT(truncs, 1);
				conn_close(w, c, false);
				return false;
			case F_STALL:
				COUNT(stalls, 1);
				c->fault = F_NONE;
				if (conn_sleep(w, c, cfg.stall_ns, ST_STALL)) {
					conn_close(w, c, false);
					return false;
				}
				return true;
			default:
				assert(0);
			}
		}
		got = bucket_take(&c->bw, want, t);
		if (got && total_bucket.rate > 0) {
			uint64_t g;

			pthread_mutex_lock(&total_bucket.mu);
			g = bucket_take(&total_bucket, got, t);
			pthread_mutex_unlock(&total_bucket.mu);
			bucket_give_back(&c->bw, got - g);
			got = g;
		}
		if (!got) {
			uint64_t a = c->bw.rate > 0 ? bucket_wait(&c->bw) : 0;
			uint64_t b = 0;

			if (total_bucket.rate > 0) {
				pthread_mutex_lock(&total_bucket.mu);
				b = bucket_wait(&total_bucket);
				pthread_mutex_unlock(&total_bucket.mu);
			}

			set_out_interest(w, c, false);
			if (conn_sleep(w, c, a > b ? a : b, ST_BW_WAIT)) {
				conn_close(w, c, false);
				return false;
			}
			return true;
		}
		if (c->file >= 0) {
			off_t off = (off_t)c->body_off;

			n = sendfile(c->fd, c->file, &off, got);
		} else {
			n = send(c->fd, c->mem + c->body_off, got,
				 MSG_NOSIGNAL);
		}
		if (n < 0 && errno != EAGAIN) {
			conn_close(w, c, false);
			return false;
		}
		if (n == 0) {
			/* The file shrank under us: cut the connection. */
			conn_close(w, c, false);
			return false;
		}
		if (n < 0)
			n = 0;
		if ((uint64_t)n < got) {
			bucket_give_back(&c->bw, got - (uint64_t)n);
			if (total_bucket.rate > 0) {
				pthread_mutex_lock(&total_bucket.mu);
				bucket_give_back(&total_bucket,
						 got - (uint64_t)n);
				pthread_mutex_unlock(&total_bucket.mu);
			}
		}
		c->body_off += (uint64_t)n;
		c->body_left -= (uint64_t)n;
		c->body_sent += (uint64_t)n;
		COUNT(bytes, (uint64_t)n);
		if ((uint64_t)n < got) {
			set_out_interest(w, c, true);
			return true;
		}
	}
	if (c->st == ST_BODY) {
		if (!c->keep_alive) {
			conn_close(w, c, false);
			return false;
		}
		end_response(c);
		set_out_interest(w, c, false);
		return on_readable(w, c);
	}
	return true;
}

static void on_timer(struct worker *w, struct conn *c)
{
	uint64_t exp;

	if (read(c->tfd, &exp, sizeof(exp)) < 0 && errno == EAGAIN)
		return;
	switch (c->st) {
	case ST_TTFB:
		c->st = ST_HEAD;
		break;
	case ST_BW_WAIT:
	case ST_STALL:
		c->st = ST_BODY;
		break;
	default:
		return;
	}
	pump(w, c);
}

static void on_accept(struct worker *w)
{
	for (;;) {
		int fd =
		    accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
		struct conn *c;
		int one = 1;

		if (fd < 0)
			return;
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		c->tfd = -1;
		c->file = -1;
		c->st = ST_READ;
		bucket_init(&c->bw, cfg.conn_rate);
		ev.data.ptr = c;
		if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			free(c);
			continue;
		}
		COUNT(conns, 1);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event ev[MAX_EVENTS];

	while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		int n = epoll_wait(w->ep, ev, MAX_EVENTS, 200);

		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64;
			struct conn *c;

			if (tag == 0) {
				on_accept(w);
				continue;
			}
			if (tag & 1) {
				c = (struct conn *)(uintptr_t)(tag & ~1ull);
				if (!c->closed)
					on_timer(w, c);
				continue;
			}
			c = ev[i].data.ptr;
			if (c->closed)
				continue;
			if (c->st == ST_READ &&
			    (ev[i].events &
			     (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
				on_readable(w, c);
			else if ((c->st == ST_HEAD || c->st == ST_BODY) &&
				 (ev[i].events & EPOLLOUT))
				pump(w, c);
			else if (ev[i].events & (EPOLLHUP | EPOLLERR))
				conn_close(w, c, false);
		}
		while (w->dead) {
			struct conn *c = w->dead;

			w->dead = c->next_dead;
			free(c->mem);
			free(c);
		}
	}
	return NULL;
}

static int listen_on(const char *addr, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	int fd, one = 1;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "origin: --listen: %s is not an IPv4 address\n",
			addr);
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1024)) {
		fprintf(stderr, "origin: cannot listen on %s:%d: %s\n", addr,
			port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: origin [OPTIONS] ROOT\n"
	    "\n"
	    "An HTTP/1.1 server over the directory ROOT for wharf's benchmarks "
	    "and\n"
	    "reliability tests.  It answers GET and HEAD with keep-alive and "
	    "pipelining,\n"
	    "single byte ranges (Range: bytes=A-B, A-, -N; 206 or 416), an "
	    "ETag and\n"
	    "Last-Modified, and lists a directory (a URL ending in '/') the "
	    "way nginx's\n"
	    "`autoindex_format json` does; a directory without the '/' answers "
	    "301.\n"
	    "Names starting with '.' are not listed.  Bodies go out with "
	    "sendfile(2)\n"
	    "from epoll loops, one per thread, so unthrottled it is not the "
	    "bottleneck\n"
	    "of a loopback benchmark.\n"
	    "\n"
	    "Options:\n"
	    "  -l, --listen ADDR[:PORT]  address and port (default "
	    "127.0.0.1:0, any free\n"
	    "                            port; see --port-file)\n"
	    "  -p, --port PORT           the port alone\n"
	    "      --port-file FILE      write the port there once listening\n"
	    "  -t, --threads N           event loops (default 2)\n"
	    "      --ttfb-ms MS          wait MS before answering each "
	    "request: the\n"
	    "                            first-byte latency of remote storage\n"
	    "      --conn-rate BYTES     bandwidth cap per connection, bytes/s "
	    "(\"50M\")\n"
	    "      --total-rate BYTES    bandwidth cap over all connections, "
	    "bytes/s\n"
	    "      --fail-5xx P          answer a file request 503 with "
	    "probability P\n"
	    "      --max-inflight N      answer a file request 503 when more "
	    "than N\n"
	    "                            file requests would be in flight "
	    "(a store\n"
	    "                            shedding load)\n"
	    "      --fail-first N        answer the first N file requests 503 "
	    "(work\n"
	    "                            that fails before a reader comes)\n"
	    "      --reset P             reset the connection (RST) halfway "
	    "through a\n"
	    "                            file body with probability P\n"
	    "      --truncate P          close the connection halfway through "
	    "a file\n"
	    "                            body (short body) with probability P\n"
	    "      --stall P             stop sending halfway through a file "
	    "body for\n"
	    "                            --stall-ms with probability P\n"
	    "      --slow P              answer a file request --stall-ms "
	    "late (after\n"
	    "                            --ttfb-ms) with probability P: a slow "
	    "first byte\n"
	    "      --stall-ms MS         length of a stall (default 10000)\n"
	    "      --seed N              seed of the fault draws (default 1)\n"
	    "      --listing json|html   directory listings as nginx's JSON "
	    "(default)\n"
	    "                            or HTML autoindex with exact sizes "
	    "(for\n"
	    "                            clients that parse only HTML index "
	    "pages)\n"
	    "      --bad-ranges MODE     answer every ranged GET wrong, as a "
	    "broken server\n"
	    "                            or cache would: from-zero (206, "
	    "bytes from\n"
	    "                            offset 0, no Content-Range), "
	    "no-header (206\n"
	    "                            without Content-Range), wrong-total "
	    "(a size\n"
	    "                            one byte larger), whole (200, the "
	    "whole file)\n"
	    "      --redirect PATH=URL   answer a request of PATH with 302 "
	    "to URL (up\n"
	    "                            to 8 times)\n"
	    "  -q, --quiet               no start and exit lines\n"
	    "  -h, --help                this text\n"
	    "\n"
	    "Conditional headers (If-Match, If-Unmodified-Since) are "
	    "ignored, as many\n"
	    "simple servers and some CDNs do: a file replaced under ROOT "
	    "while a client\n"
	    "reads it is an object that changed mid-read.\n"
	    "Faults strike file responses only, never listings.  Sizes take "
	    "the\n"
	    "suffixes k, M, G (binary multiples).  SIGINT or SIGTERM stops it; "
	    "it then\n"
	    "prints its counters (connections, requests, bytes, faults) on "
	    "stderr.\n");
}

static int parse_rate(const char *s, double *out)
{
	char *e;
	double v = strtod(s, &e);

	switch (*e) {
	case 'k':
	case 'K':
		v *= 1024;
		e++;
		break;
	case 'm':
	case 'M':
		v *= 1024 * 1024;
		e++;
		break;
	case 'g':
	case 'G':
		v *= 1024.0 * 1024 * 1024;
		e++;
		break;
	default:
		break;
	}
	if (e == s || *e || v < 0)
		return -1;
	*out = v;
	return 0;
}

static int parse_prob(const char *s, double *out)
{
	char *e;
	double v = strtod(s, &e);

	if (e == s || *e || v < 0 || v > 1)
		return -1;
	*out = v;
	return 0;
}

static void on_signal(int sig)
{
	(void)sig;
	/* atomic: the workers read it (a plain store is a data race) */
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
}

int main(int argc, char **argv)
{
	enum {
		OPT_PORTFILE = 256,
		OPT_TTFB,
		OPT_CRATE,
		OPT_TRATE,
		OPT_5XX,
		OPT_INFLIGHT,
		OPT_FAIL_FIRST,
		OPT_RESET,
		OPT_TRUNC,
		OPT_STALL,
		OPT_STALLMS,
		OPT_SLOW,
		OPT_SEED,
		OPT_LISTING,
		OPT_BAD_RANGES,
		OPT_REDIRECT
	};
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"port", required_argument, NULL, 'p'},
	    {"port-file", required_argument, NULL, OPT_PORTFILE},
	    {"threads", required_argument, NULL, 't'},
	    {"ttfb-ms", required_argument, NULL, OPT_TTFB},
	    {"conn-rate", required_argument, NULL, OPT_CRATE},
	    {"total-rate", required_argument, NULL, OPT_TRATE},
	    {"fail-5xx", required_argument, NULL, OPT_5XX},
	    {"max-inflight", required_argument, NULL, OPT_INFLIGHT},
	    {"fail-first", required_argument, NULL, OPT_FAIL_FIRST},
	    {"reset", required_argument, NULL, OPT_RESET},
	    {"truncate", required_argument, NULL, OPT_TRUNC},
	    {"stall", required_argument, NULL, OPT_STALL},
	    {"stall-ms", required_argument, NULL, OPT_STALLMS},
	    {"slow", required_argument, NULL, OPT_SLOW},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"listing", required_argument, NULL, OPT_LISTING},
	    {"bad-ranges", required_argument, NULL, OPT_BAD_RANGES},
	    {"redirect", required_argument, NULL, OPT_REDIRECT},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	static char addr[64];
	struct worker *w;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	struct sigaction act = {.sa_handler = on_signal};
	int opt, bad = 0;
	char *e;

	while ((opt = getopt_long(argc, argv, "l:p:t:qh", opts, NULL)) != -1) {
		switch (opt) {
		case 'l': {
			const char *colon = strrchr(optarg, ':');

			snprintf(addr, sizeof(addr), "%.*s",
				 colon ? (int)(colon - optarg)
				       : (int)strlen(optarg),
				 optarg);
			cfg.addr = addr;
			if (colon)
				cfg.port = atoi(colon + 1);
			break;
		}
		case 'p':
			cfg.port = atoi(optarg);
			break;
		case OPT_PORTFILE:
			cfg.port_file = optarg;
			break;
		case 't':
			cfg.threads = (unsigned)strtoul(optarg, &e, 10);
			bad |= *e || cfg.threads < 1 || cfg.threads > 64;
			break;
		case OPT_TTFB:
			cfg.ttfb_ns = strtoull(optarg, &e, 10) * 1000000ull;
			bad |= *e != 0;
			break;
		case OPT_CRATE:
			bad |= parse_rate(optarg, &cfg.conn_rate);
			break;
		case OPT_TRATE:
			bad |= parse_rate(optarg, &cfg.total_rate);
			break;
		case OPT_5XX:
			bad |= parse_prob(optarg, &cfg.p_5xx);
			break;
		case OPT_INFLIGHT:
			cfg.max_inflight = (unsigned)strtoul(optarg, &e, 10);
			bad |= *e || !cfg.max_inflight;
			break;
		case OPT_FAIL_FIRST:
			cfg.fail_first = strtoull(optarg, &e, 10);
			bad |= *e || !cfg.fail_first;
			break;
		case OPT_RESET:
			bad |= parse_prob(optarg, &cfg.p_reset);
			break;
		case OPT_TRUNC:
			bad |= parse_prob(optarg, &cfg.p_truncate);
			break;
		case OPT_STALL:
			bad |= parse_prob(optarg, &cfg.p_stall);
			break;
		case OPT_SLOW:
			bad |= parse_prob(optarg, &cfg.p_slow);
			break;
		case OPT_STALLMS:
			cfg.stall_ns = strtoull(optarg, &e, 10) * 1000000ull;
			bad |= *e != 0;
			break;
		case OPT_SEED:
			cfg.seed = strtoull(optarg, &e, 10);
			bad |= *e != 0;
			break;
		case OPT_LISTING:
			cfg.html = !strcmp(optarg, "html");
			bad |= !cfg.html && strcmp(optarg, "json");
			break;
		case OPT_BAD_RANGES:
			cfg.bad_ranges = BR_NONE;
			for (int i = 1; bad_ranges_names[i]; i++)
				if (!strcmp(optarg, bad_ranges_names[i]))
					cfg.bad_ranges = (enum bad_ranges)i;
			bad |= cfg.bad_ranges == BR_NONE;
			break;
		case OPT_REDIRECT: {
			char *eq = strchr(optarg, '=');

			bad |= !eq || optarg[0] != '/' || cfg.n_redirects == 8;
			if (!bad) {
				*eq = '\0';
				cfg.redirect_path[cfg.n_redirects] = optarg;
				cfg.redirect_to[cfg.n_redirects++] = eq + 1;
			}
			break;
		}
		case 'q':
			cfg.quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "origin: bad value for an option: %s\n",
				optarg);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	cfg.root = argv[optind];
	if (cfg.p_5xx + cfg.p_reset + cfg.p_truncate + cfg.p_stall +
		cfg.p_slow >
	    1) {
		fprintf(stderr, "origin: fault probabilities add up to more "
				"than 1\n");
		return 2;
	}
	{
		struct stat sb;

		if (stat(cfg.root, &sb) || !S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "origin: %s is not a directory\n",
				cfg.root);
			return 2;
		}
	}
	bucket_init(&total_bucket, cfg.total_rate);
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	signal(SIGPIPE, SIG_IGN);

	w = calloc(cfg.threads, sizeof(*w));
	if (!w)
		return 1;
	for (unsigned i = 0; i < cfg.threads; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};

		w[i].lfd = listen_on(cfg.addr, cfg.port);
		if (w[i].lfd < 0)
			return 1;
		if (i == 0) {
			/* Port 0: the others join the port the first got. */
			getsockname(w[0].lfd, (struct sockaddr *)&sa, &sl);
			cfg.port = ntohs(sa.sin_port);
		}
		w[i].ep = epoll_create1(EPOLL_CLOEXEC);
		if (w[i].ep < 0 ||
		    epoll_ctl(w[i].ep, EPOLL_CTL_ADD, w[i].lfd, &ev))
			return 1;
		w[i].rng = cfg.seed * 0x9e3779b97f4a7c15ull + i + 1;
	}
	if (cfg.port_file) {
		FILE *f = fopen(cfg.port_file, "w");

		if (!f || fprintf(f, "%d\n", cfg.port) < 0 || fclose(f)) {
			fprintf(stderr, "origin: cannot write %s\n",
				cfg.port_file);
			return 1;
		}
	}
	if (!cfg.quiet)
		fprintf(stderr, "origin: serving %s on http://%s:%d/\n",
			cfg.root, cfg.addr, cfg.port);
	for (unsigned i = 0; i < cfg.threads; i++)
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]))
			return 1;
	for (unsigned i = 0; i < cfg.threads; i++)
		pthread_join(w[i].th, NULL);
	if (!cfg.quiet)
		fprintf(stderr,
			"origin: %" PRIu64 " connections, %" PRIu64
			" requests, %" PRIu64 " body bytes; faults: %" PRIu64
			" 5xx, %" PRIu64 " resets, %" PRIu64
			" truncated, %" PRIu64 " stalls, %" PRIu64 " slow\n",
			counters.conns, counters.requests, counters.bytes,
			counters.e5xx, counters.resets, counters.truncs,
			counters.stalls, counters.slows);
	if (!cfg.quiet && cfg.max_inflight)
		fprintf(stderr,
			"origin: busy %" PRIu64 " (503 past --max-inflight "
			"%u), at most %" PRIu64 " asked for at once\n",
			counters.busy, cfg.max_inflight, counters.peak);
	/* Connections still open are dropped with the process. */
	for (unsigned i = 0; i < cfg.threads; i++) {
		close(w[i].lfd);
		close(w[i].ep);
	}
	free(w);
	return 0;
}
