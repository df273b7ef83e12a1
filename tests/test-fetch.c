/* fetch engine and HTTP source against a real nginx on 127.0.0.1. */
#include "config.h"

#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "conc.h"
#include "fetch.h"
#include "fixture.h"
#include "origins.h"

#define SEED 7
#define BIG_SIZE (3 * 1024 * 1024 + 17)

static struct fx_nginx ng;
static char *root;
static struct fetch_engine *fe;
/* A server a test started: stopped by teardown even when the test fails. */
static pid_t extra_pid;

static void setup(void)
{
	struct fetch_config cfg;

	fetch_config_default(&cfg);
	cfg.retries = 2;
	cfg.retry_budget_ms = 3000;
	cfg.connect_timeout_ms = 2000;
	cfg.max_connections = 4;
	/* The connection counts below assume one transfer per request;
	 * hedging has its own test. */
	cfg.hedge = false;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
}

static void teardown(void)
{
	fetch_engine_free(fe);
	fe = NULL;
	if (extra_pid > 0)
		fx_stop(extra_pid, 5000);
	extra_pid = 0;
}

static int get(const char *path, uint64_t off, uint64_t len, void *buf,
	       size_t cap, struct fetch_res *res)
{
	char url[512];
	struct fetch_req req = {0};

	snprintf(url, sizeof(url), "%s%s", ng.base, path);
	req.url = url;
	req.range_off = off;
	req.range_len = len;
	req.buf = buf;
	req.cap = cap;
	return fetch_run(fe, &req, res);
}

static void check_bytes(const uint8_t *p, uint64_t off, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != fx_byte(SEED, off + i))
			ck_abort_msg("byte %zu of range at %llu differs", i,
				     (unsigned long long)off);
}

START_TEST(whole_get)
{
	struct fetch_res res;
	uint8_t *buf = malloc(BIG_SIZE);

	ck_assert_int_eq(get("/plain/big.bin", 0, 0, buf, BIG_SIZE, &res), 0);
	ck_assert_int_eq(res.status, 200);
	ck_assert_uint_eq(res.len, BIG_SIZE);
	ck_assert_int_eq(res.content_length, BIG_SIZE);
	ck_assert(res.etag[0] != '\0');
	ck_assert(res.mtime > 1000000000);
	ck_assert_uint_eq(res.attempts, 1);
	check_bytes(buf, 0, res.len);
	free(buf);
}
END_TEST

START_TEST(ranges_at_edges)
{
	struct fetch_res res;
	uint8_t buf[8192];

	/* first byte */
	ck_assert_int_eq(get("/plain/big.bin", 0, 1, buf, 1, &res), 0);
	ck_assert_int_eq(res.status, 206);
	ck_assert_uint_eq(res.len, 1);
	ck_assert_uint_eq(res.total_size, BIG_SIZE);
	check_bytes(buf, 0, 1);
	/* last byte */
	ck_assert_int_eq(get("/plain/big.bin", BIG_SIZE - 1, 1, buf, 1, &res),
			 0);
	ck_assert_uint_eq(res.len, 1);
	check_bytes(buf, BIG_SIZE - 1, 1);
	/* a range in the middle */
	ck_assert_int_eq(get("/plain/big.bin", 123457, 5000, buf, 5000, &res),
			 0);
	ck_assert_uint_eq(res.len, 5000);
	check_bytes(buf, 123457, 5000);
	/* a range running past the end: the tail, total_size tells why */
	ck_assert_int_eq(
	    get("/plain/big.bin", BIG_SIZE - 10, 8192, buf, 8192, &res), 0);
	ck_assert_uint_eq(res.len, 10);
	ck_assert_uint_eq(res.total_size, BIG_SIZE);
	check_bytes(buf, BIG_SIZE - 10, 10);
	/* a range starting past the end: nothing */
	ck_assert_int_eq(
	    get("/plain/big.bin", BIG_SIZE + 5, 100, buf, 100, &res), 0);
	ck_assert_uint_eq(res.len, 0);
	ck_assert_uint_eq(res.total_size, BIG_SIZE);
}
END_TEST

START_TEST(head_request)
{
	char url[512];
	struct fetch_req req = {0};
	struct fetch_res res;

	snprintf(url, sizeof(url), "%s/plain/big.bin", ng.base);
	req.url = url;
	req.head = true;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_int_eq(res.content_length, BIG_SIZE);
	ck_assert_uint_eq(res.len, 0);
	ck_assert(res.etag[0] == '"');
}
END_TEST

START_TEST(grow_buffer)
{
	char url[512];
	struct fetch_req req = {0};
	struct fetch_res res;

	snprintf(url, sizeof(url), "%s/plain/big.bin", ng.base);
	req.url = url;
	req.grow = true;
	req.cap = BIG_SIZE;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_uint_eq(res.len, BIG_SIZE);
	check_bytes(res.body, 0, res.len);
	free(res.body);
	/* one byte too few allowed */
	req.cap = BIG_SIZE - 1;
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EFBIG);
	ck_assert_ptr_null(res.body);
	ck_assert_ptr_nonnull(strstr(res.err, "big.bin"));
}
END_TEST

START_TEST(cap_overflow)
{
	struct fetch_res res;
	uint8_t buf[4096];

	ck_assert_int_eq(get("/plain/big.bin", 0, 0, buf, sizeof(buf), &res),
			 -EFBIG);
	ck_assert_ptr_nonnull(strstr(res.err, "/plain/big.bin"));
	ck_assert_uint_eq(res.attempts, 1);
}
END_TEST

START_TEST(status_mapping)
{
	struct fetch_res res;
	uint8_t buf[4096];
	struct fetch_stats st;

	ck_assert_int_eq(get("/status/404", 0, 0, buf, sizeof(buf), &res),
			 -ENOENT);
	ck_assert_uint_eq(res.attempts, 1);
	ck_assert_int_eq(get("/status/410", 0, 0, buf, sizeof(buf), &res),
			 -ENOENT);
	ck_assert_int_eq(get("/status/403", 0, 0, buf, sizeof(buf), &res),
			 -EACCES);
	ck_assert_int_eq(get("/status/401", 0, 0, buf, sizeof(buf), &res),
			 -EACCES);
	ck_assert_int_eq(get("/plain/nothere", 0, 0, buf, sizeof(buf), &res),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(res.err, "/plain/nothere"));
	ck_assert_ptr_nonnull(strstr(res.err, "HTTP 404"));

	ck_assert_int_eq(get("/status/500", 10, 20, buf, sizeof(buf), &res),
			 -EIO);
	ck_assert_uint_eq(res.attempts, 3); /* 1 + retries */
	ck_assert_int_eq(res.status, 500);
	ck_assert_ptr_nonnull(strstr(res.err, "/status/500"));
	ck_assert_ptr_nonnull(strstr(res.err, "bytes=10-29"));
	ck_assert_ptr_nonnull(strstr(res.err, "HTTP 500"));
	ck_assert_ptr_nonnull(strstr(res.err, "after 3 attempts"));
	fetch_get_stats(fe, &st);
	ck_assert_uint_ge(st.retries, 2);
	ck_assert_uint_ge(st.errors, 6);
}
END_TEST

START_TEST(unreachable)
{
	char url[128];
	struct fetch_req req = {0};
	struct fetch_res res;
	uint8_t buf[16];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", fx_free_port());
	req.url = url;
	req.buf = buf;
	req.cap = sizeof(buf);
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EIO);
	ck_assert_uint_ge(res.attempts, 1);
	ck_assert_ptr_nonnull(strstr(res.err, url));
	/* It ends: within the retry count (2) and the budget. */
	ck_assert_uint_le(res.attempts, 3);
}
END_TEST

START_TEST(keep_alive)
{
	struct fetch_res res;
	struct fetch_stats st0, st1;
	uint8_t buf[1024];
	int i;

	fetch_get_stats(fe, &st0);
	for (i = 0; i < 50; i++) {
		ck_assert_int_eq(get("/plain/big.bin", (uint64_t)i * 1000, 1000,
				     buf, sizeof(buf), &res),
				 0);
		check_bytes(buf, (uint64_t)i * 1000, 1000);
	}
	fetch_get_stats(fe, &st1);
	ck_assert_uint_eq(st1.requests - st0.requests, 50);
	/* one sequential caller: the first connection serves them all */
	ck_assert_uint_le(st1.connects - st0.connects, 1);
}
END_TEST

/* One of several threads reading 64 KiB ranges of big.bin. */
struct par {
	int id;
	int fails;
	int count;		/* ranges to read; 0: 20 */
	struct fetch_engine *e; /* NULL: the shared engine */
	const char *url;	/* NULL: big.bin on nginx */
	bool background;	/* requests wait for the host's limit */
};

static void *par_main(void *arg)
{
	struct par *p = arg;
	uint8_t buf[65536];
	struct fetch_res res;
	char url[512];
	struct fetch_req req = {0};
	int i;

	snprintf(url, sizeof(url), "%s", p->url ? p->url : "");
	if (!p->url)
		snprintf(url, sizeof(url), "%s/plain/big.bin", ng.base);
	req.url = url;
	req.buf = buf;
	req.cap = sizeof(buf);
	req.range_len = sizeof(buf);
	req.background = p->background;
	for (i = 0; i < (p->count ? p->count : 20); i++) {
		uint64_t off = ((uint64_t)p->id * 7919 + (uint64_t)i * 104729) %
			       (BIG_SIZE - sizeof(buf));
		size_t j;

		req.range_off = off;
		if (fetch_run(p->e ? p->e : fe, &req, &res) ||
		    res.len != sizeof(buf)) {
			p->fails++;
			continue;
		}
		for (j = 0; j < sizeof(buf); j++)
			if (buf[j] != fx_byte(SEED, off + j)) {
				p->fails++;
				break;
			}
	}
	return NULL;
}

/* Runs n readers like p[0] (ids 0..n-1) at once; each must read every
 * range right. */
static void par_all(struct par *p, int n)
{
	pthread_t *th = calloc((size_t)n, sizeof(*th));

	ck_assert_ptr_nonnull(th);
	for (int i = 0; i < n; i++) {
		p[i] = p[0];
		p[i].id = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, par_main, &p[i]),
				 0);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(p[i].fails, 0);
	}
	free(th);
}

START_TEST(concurrency)
{
	struct par p[8];
	struct fetch_stats st0, st;

	fetch_get_stats(fe, &st0);

	p[0] = (struct par){0};
	par_all(p, 8);
	fetch_get_stats(fe, &st);
	ck_assert_uint_ge(st.requests, 160);
	ck_assert_uint_ge(st.bytes, 160 * 65536);
	ck_assert_uint_gt(st.ttfb_p50_ns, 0);
	ck_assert_uint_ge(st.ttfb_p99_ns, st.ttfb_p50_ns);
	/* 8 threads share at most max_connections (4) connections */
	fprintf(stderr, "concurrency: %llu new connections\n",
		(unsigned long long)(st.connects - st0.connects));
	ck_assert_uint_le(st.connects - st0.connects, 4);
}
END_TEST

/* Runs 8 readers of `each` ranges against url with hedging on or off;
 * every byte is checked.  @return the engine's stats. */
static struct fetch_stats hedge_run(const char *url, bool hedge, int each)
{
	struct fetch_config cfg;
	struct fetch_engine *e;
	struct fetch_stats st;
	struct par p[8];

	fetch_config_default(&cfg);
	cfg.max_connections = 16;
	cfg.hedge = hedge;
	ck_assert_int_eq(fetch_engine_new(&cfg, &e), 0);
	p[0] = (struct par){.count = each, .e = e, .url = url};
	par_all(p, 8);
	fetch_get_stats(e, &st);
	fetch_engine_free(e);
	return st;
}

static long origin_slow_count(const char *log)
{
	return fx_origin_logged(log, " stalls, ");
}

START_TEST(hedging)
{
	/* 2% of answers come 1.5 s late: a hedge after the p99 (a few ms
	 * here) gets them from another connection first. */
	static const char *const opts[] = {
	    "--slow", "0.02", "--stall-ms", "1500", "--ttfb-ms", "1", NULL};
	char url[256], log[PATH_MAX], *work = fx_tmpdir("hedge");
	struct fetch_stats on, off;
	pid_t pid;

	pid = fx_origin_start(root, opts, work, "hedge", url, sizeof(url));
	ck_assert_int_gt(pid, 0);
	strncat(url, "big.bin", sizeof(url) - strlen(url) - 1);
	on = hedge_run(url, true, 80);
	off = hedge_run(url, false, 20);
	fx_stop(pid, 5000);
	snprintf(log, sizeof(log), "%s/hedge.log", work);
	fprintf(stderr,
		"hedging: on: %llu requests, %llu hedges, %llu won, p99 %.1f "
		"ms; off: %llu requests, p99 %.1f ms; origin: %ld slow\n",
		(unsigned long long)on.requests, (unsigned long long)on.hedges,
		(unsigned long long)on.hedge_wins, on.ttfb_p99_ns / 1e6,
		(unsigned long long)off.requests, off.ttfb_p99_ns / 1e6,
		origin_slow_count(log));
	ck_assert_int_gt(origin_slow_count(log), 0);
	ck_assert_uint_eq(on.requests, 640);
	ck_assert_uint_gt(on.hedges, 0);
	ck_assert_uint_gt(on.hedge_wins, 0);
	ck_assert_uint_le(on.hedge_wins, on.hedges);
	/* the budget: one hedge in 20 requests, after a burst of 8 */
	ck_assert_uint_le(on.hedges, on.requests / 20 + 8);
	ck_assert_uint_eq(off.hedges, 0);
	ck_assert_uint_eq(off.hedge_wins, 0);
	fx_rmtree(work);
	free(work);
}
END_TEST

/* ---- the concurrency controller, driven with made-up figures ---- */

#define MS_NS 1000000ull

/* One epoch of `ms` in which each request in flight brought `per_req`
 * bytes (so throughput follows the limit until `cap` bytes), requests
 * waited for the limit, and no refusal came.  @return conc_tick's answer. */
static bool epoch_of(struct conc *c, uint64_t *t, uint64_t ms, uint64_t per_req,
		     uint64_t cap)
{
	uint64_t bytes = per_req * c->limit;

	for (unsigned i = 0; i < c->limit; i++)
		conc_done(c, 30 * MS_NS, 45 * MS_NS, per_req);
	conc_waited(c);
	conc_bytes(c, bytes < cap ? bytes : cap);
	*t += ms * MS_NS;
	return conc_tick(c, true, *t);
}

START_TEST(conc_grows_with_throughput)
{
	struct conc c;
	uint64_t t = 1;

	conc_init(&c, 256, t);
	ck_assert_uint_eq(c.limit, CONC_START);
	/* Throughput follows the limit: doubling each epoch, to the
	 * ceiling and no further. */
	for (unsigned want = CONC_START * 2; want <= 256; want *= 2) {
		ck_assert(epoch_of(&c, &t, 100, 100000, UINT64_MAX));
		ck_assert_uint_eq(c.limit, want);
		ck_assert_ptr_nonnull(strstr(c.why, "throughput rose"));
	}
	/* At the ceiling a rise changes nothing. */
	ck_assert(!epoch_of(&c, &t, 100, 100000, UINT64_MAX));
	ck_assert_uint_eq(c.limit, 256);
	ck_assert_uint_eq(c.backoffs, 0);
}
END_TEST

START_TEST(conc_holds_when_flat)
{
	struct conc c;
	uint64_t t = 1;
	unsigned held;

	/* The origin gives 2 MB an epoch whatever the limit: after one rise
	 * the limit stops growing, and a probe that gains nothing goes
	 * back. */
	conc_init(&c, 256, t);
	epoch_of(&c, &t, 100, 1000000, 2000000);
	held = c.limit;
	ck_assert_uint_le(held, CONC_START * 2);
	for (int i = 0; i < 30; i++)
		epoch_of(&c, &t, 100, 1000000, 2000000);
	ck_assert_uint_le(c.limit, held + held / 8 + 1);
	/* An epoch without waiting requests says nothing of the limit. */
	held = c.limit;
	conc_bytes(&c, 50000000);
	t += 100 * MS_NS;
	ck_assert(!conc_tick(&c, true, t));
	ck_assert_uint_eq(c.limit, held);
}
END_TEST

START_TEST(conc_backs_off)
{
	struct conc c;
	uint64_t t = 1;

	conc_init(&c, 256, t);
	for (int i = 0; i < 2; i++)
		epoch_of(&c, &t, 100, 100000, UINT64_MAX);
	ck_assert_uint_eq(c.limit, 128);
	/* 40 in flight when the 503 came: half of them. */
	t += MS_NS;
	ck_assert(conc_congested(&c, 40, "HTTP 503", t));
	ck_assert_uint_eq(c.limit, 20);
	ck_assert_uint_eq(c.backoffs, 1);
	ck_assert_ptr_nonnull(strstr(c.why, "HTTP 503 from the origin"));
	/* No hedges to it for a while. */
	ck_assert(conc_refused_lately(&c, t + 4000 * MS_NS));
	ck_assert(!conc_refused_lately(&c, t + 6000 * MS_NS));
	/* The rest of the same burst is the same signal. */
	ck_assert(!conc_congested(&c, 20, "HTTP 503", t + MS_NS));
	ck_assert_uint_eq(c.limit, 20);
	/* A later one halves again, down to one request and no lower. */
	for (int i = 0; i < 10; i++) {
		t += 100 * MS_NS;
		conc_congested(&c, c.limit, "connection reset", t);
	}
	ck_assert_uint_eq(c.limit, 1);
	ck_assert_uint_ge(c.backoffs, 5);
	/* The epoch of the refusals does not grow; the next adds one (it
	 * recovers towards 128), the next sees throughput rise and grows by
	 * a quarter, not double. */
	t += 1;
	ck_assert(!epoch_of(&c, &t, 100, 100000, UINT64_MAX));
	ck_assert(epoch_of(&c, &t, 100, 100000, UINT64_MAX));
	ck_assert_uint_eq(c.limit, 2);
	ck_assert(epoch_of(&c, &t, 100, 100000, UINT64_MAX));
	ck_assert_uint_eq(c.limit, 3);
}
END_TEST

START_TEST(conc_covers_bdp)
{
	struct conc c;
	uint64_t t = 1;

	/* 100 KB requests, 150 ms to the first byte, 200 MB/s coming in:
	 * 300 requests' worth in flight, capped by the ceiling (128). */
	conc_init(&c, 128, t);
	c.slow_start = false;
	c.best = 1e12; /* no rise to be seen */
	for (int i = 0; i < 8; i++)
		conc_done(&c, 150 * MS_NS, 160 * MS_NS, 100000);
	conc_waited(&c);
	conc_bytes(&c, 80000000);
	t += 400 * MS_NS; /* an epoch: twice the 160 ms requests */
	ck_assert(conc_tick(&c, true, t));
	ck_assert_uint_eq(c.limit, 128);
	ck_assert_ptr_nonnull(strstr(c.why, "first byte needs"));
}
END_TEST

/* An origin that answers 503 past 4 requests in flight, read by 24
 * threads of background requests: the host's controller comes down to
 * what the origin takes, the load drops, and every byte is right. */
START_TEST(backs_off_from_busy_origin)
{
	static const char *const opts[] = {"--max-inflight", "4", "--ttfb-ms",
					   "20", NULL};
	char url[256], log[PATH_MAX], *work = fx_tmpdir("busy");
	struct fetch_config cfg;
	struct fetch_host_stats hs;
	struct fetch_stats st;
	struct fetch_engine *e;
	struct par p[24];
	long busy, requests;
	pid_t pid;

	pid = fx_origin_start(root, opts, work, "busy", url, sizeof(url));
	ck_assert_int_gt(pid, 0);
	strncat(url, "big.bin", sizeof(url) - strlen(url) - 1);
	fetch_config_default(&cfg);
	cfg.retries = 20;
	cfg.retry_budget_ms = 60000;
	cfg.hedge = false;
	ck_assert_int_eq(fetch_engine_new(&cfg, &e), 0);
	p[0] =
	    (struct par){.count = 12, .e = e, .url = url, .background = true};
	par_all(p, 24);
	fetch_get_stats(e, &st);
	ck_assert_uint_eq(fetch_get_hosts(e, &hs, 1), 1);
	fetch_engine_free(e);
	fx_stop(pid, 5000);
	snprintf(log, sizeof(log), "%s/busy.log", work);
	busy = fx_origin_logged(log, "busy ");
	requests = fx_origin_logged(log, "connections, ");
	fprintf(stderr,
		"busy origin: %ld requests, %ld refused; limit %u after %llu "
		"backoffs (%s); %llu retries\n",
		requests, busy, hs.limit, (unsigned long long)hs.backoffs,
		hs.why, (unsigned long long)st.retries);
	/* The origin did refuse, and the controller heard it. */
	ck_assert_int_gt(busy, 0);
	ck_assert_uint_ge(hs.backoffs, 1);
	ck_assert_uint_eq(hs.ceiling, 256);
	/* It ended near what the origin takes, far below where it starts
	 * (32) and the 24 the threads asked for at once. */
	ck_assert_uint_le(hs.limit, 8);
	/* Most requests were answered the first time: the load dropped
	 * instead of being retried against a full origin. */
	ck_assert_int_eq(requests, 24 * 12 + busy);
	ck_assert_int_lt(busy, 24 * 12);
	fx_rmtree(work);
	free(work);
}
END_TEST

/* ---- a scripted origin: one canned answer per connection ---- */

struct script {
	int fd;
	/* NULL-terminated; one that starts "HOLD " is sent without that
	 * prefix and its connection left open, silent, until script_stop. */
	const char *const *answers;
	int served;
	int held[8], nheld;
	char last[4096]; /* the head of the last request */
};

static void *script_main(void *arg)
{
	struct script *sc = arg;
	const char *const *a;

	for (a = sc->answers; *a; a++) {
		char req[4096];
		int c = accept(sc->fd, NULL, NULL);
		ssize_t n, got = 0;

		if (c < 0)
			break;
		/* read up to the end of the request head */
		while (got < (ssize_t)sizeof(req) - 1 &&
		       (n = read(c, req + got, sizeof(req) - 1 - (size_t)got)) >
			   0) {
			got += n;
			req[got] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		memcpy(sc->last, req, sizeof(sc->last));
		const bool marked = !strncmp(*a, "HOLD ", 5);
		const bool hold = marked && sc->nheld < 8;
		const char *text = marked ? *a + 5 : *a;

		/* Counted before the answer goes: the client may look at the
		 * count as soon as it has the answer. */
		__atomic_add_fetch(&sc->served, 1, __ATOMIC_SEQ_CST);
		if (write(c, text, strlen(text)) < 0)
			perror("write");
		if (hold)
			sc->held[sc->nheld++] = c;
		else
			close(c);
	}
	return NULL;
}

/* A socket listening on 127.0.0.1 at a free port, into *fd.
 * @return the port. */
static int listen_loopback(int *fd)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);

	*fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(*fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(*fd, 8), 0);
	ck_assert_int_eq(getsockname(*fd, (struct sockaddr *)&sa, &sl), 0);
	return ntohs(sa.sin_port);
}

static int script_start(struct script *sc, pthread_t *th,
			const char *const *answers)
{
	int port;

	sc->answers = answers;
	sc->served = 0;
	sc->nheld = 0;
	port = listen_loopback(&sc->fd);
	ck_assert_int_eq(pthread_create(th, NULL, script_main, sc), 0);
	return port;
}

static void script_stop(struct script *sc, pthread_t th)
{
	shutdown(sc->fd, SHUT_RDWR);
	close(sc->fd);
	pthread_join(th, NULL);
	for (int i = 0; i < sc->nheld; i++)
		close(sc->held[i]);
}

/* A scripted origin and a request of its /obj into buf (cap bytes). */
struct scripted {
	struct script sc;
	pthread_t th;
	char url[64];
};

static void scripted_start(struct scripted *o, const char *const *answers,
			   struct fetch_req *req, void *buf, size_t cap)
{
	int port = script_start(&o->sc, &o->th, answers);

	snprintf(o->url, sizeof(o->url), "http://127.0.0.1:%d/obj", port);
	req->url = o->url;
	req->buf = buf;
	req->cap = cap;
}

static int resigned;

static int resign(void *arg, struct fetch_req *req)
{
	(void)arg;
	(void)req;
	resigned++;
	return 0;
}

/* scripted_start for bytes 2-9 of the object, signed again by fn before
 * each retry. */
static void scripted_resigned(struct scripted *o, const char *const *answers,
			      struct fetch_req *req, void *buf, size_t cap,
			      int (*fn)(void *arg, struct fetch_req *req))
{
	scripted_start(o, answers, req, buf, cap);
	req->range_off = 2;
	req->range_len = 8;
	req->resign = fn;
}

START_TEST(short_body_retried)
{
	/* a 206 that stops early although the object is longer, then the
	 * right answer: the retry must deliver exactly the range */
	static const char *const answers[] = {
	    "HTTP/1.1 206 Partial Content\r\nContent-Length: 4\r\n"
	    "Content-Range: bytes 2-5/100\r\nConnection: close\r\n\r\n"
	    "cdef",
	    "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n"
	    "Connection: close\r\n\r\n",
	    "HTTP/1.1 206 Partial Content\r\nContent-Length: 8\r\n"
	    "Content-Range: bytes 2-9/100\r\nETag: \"v1\"\r\n"
	    "Connection: close\r\n\r\ncdefghij",
	    NULL};
	struct scripted o;
	char buf[8];
	struct fetch_req req = {0};
	struct fetch_res res;

	scripted_resigned(&o, answers, &req, buf, sizeof(buf), resign);
	resigned = 0;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_uint_eq(res.attempts, 3);
	ck_assert_int_eq(resigned, 2);
	ck_assert_uint_eq(res.len, 8);
	ck_assert_int_eq(memcmp(buf, "cdefghij", 8), 0);
	ck_assert_str_eq(res.etag, "\"v1\"");
	ck_assert_uint_eq(res.total_size, 100);
	script_stop(&o.sc, o.th);
}
END_TEST

START_TEST(stall_retried)
{
	/* The first answer stops mid-body and the connection goes silent:
	 * after the stall timeout (here as long as the retry budget, as by
	 * default) the request is sent again and the second answer serves. */
	static const char *const answers[] = {
	    "HOLD HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nab",
	    "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n"
	    "\r\nabcdefgh",
	    NULL};
	struct fetch_config cfg;
	struct fetch_engine *own;
	struct scripted o;
	char buf[8];
	struct fetch_req req = {0};
	struct fetch_res res;

	scripted_start(&o, answers, &req, buf, sizeof(buf));
	fetch_config_default(&cfg);
	cfg.stall_timeout_ms = 1000;
	cfg.retry_budget_ms = 1000;
	cfg.hedge = false;
	ck_assert_int_eq(fetch_engine_new(&cfg, &own), 0);
	ck_assert_int_eq(fetch_run(own, &req, &res), 0);
	ck_assert_uint_eq(res.attempts, 2);
	ck_assert_uint_eq(res.len, 8);
	ck_assert_int_eq(memcmp(buf, "abcdefgh", 8), 0);
	fetch_engine_free(own);
	script_stop(&o.sc, o.th);
}
END_TEST

/* Bodies are asked for as stored, and one that comes encoded anyway is
 * refused: its bytes are not the object's. */
START_TEST(encoded_body_refused)
{
	static const char *const answers[] = {
	    "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 8\r\n"
	    "Connection: close\r\n\r\nabcdefgh",
	    NULL};
	struct scripted o;
	char buf[8];
	struct fetch_req req = {0};
	struct fetch_res res;

	scripted_start(&o, answers, &req, buf, sizeof(buf));
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EIO);
	ck_assert_ptr_nonnull(strstr(res.err, "Content-Encoding: gzip"));
	ck_assert_uint_eq(res.attempts, 1);
	script_stop(&o.sc, o.th);
	ck_assert_ptr_nonnull(
	    strcasestr(o.sc.last, "Accept-Encoding: identity"));
}
END_TEST

/* An engine that signs its requests follows no redirect: the token and
 * headers would go to the host the answer names.  Others still do. */
START_TEST(signed_not_redirected)
{
	static const char *const target[] = {
	    "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\n"
	    "abcdefgh",
	    NULL};
	char redirect[256];
	const char *const answers[] = {redirect, NULL};
	struct fetch_config cfg;
	struct fetch_engine *own;
	struct scripted o, t;
	char buf[8];
	struct fetch_req req = {0}, dummy = {0};
	struct curl_slist *h =
	    curl_slist_append(NULL, "x-amz-security-token: S");
	struct fetch_res res;

	scripted_start(&t, target, &dummy, buf, sizeof(buf));
	snprintf(redirect, sizeof(redirect),
		 "HTTP/1.1 307 Temporary Redirect\r\nLocation: %s\r\n"
		 "Content-Length: 0\r\nConnection: close\r\n\r\n",
		 t.url);
	scripted_start(&o, answers, &req, buf, sizeof(buf));
	req.headers = h;
	fetch_config_default(&cfg);
	cfg.hedge = false;
	ck_assert_int_eq(fetch_engine_new(&cfg, &own), 0);
	fetch_no_redirect(own);
	ck_assert_int_eq(fetch_run(own, &req, &res), -EIO);
	ck_assert_int_eq(res.status, 307);
	ck_assert_ptr_nonnull(strstr(res.err, "redirect not followed"));
	fetch_engine_free(own);
	script_stop(&o.sc, o.th);
	ck_assert_int_eq(t.sc.served, 0);

	/* Unsigned: followed. */
	scripted_start(&o, answers, &req, buf, sizeof(buf));
	req.headers = NULL;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_int_eq(memcmp(buf, "abcdefgh", 8), 0);
	script_stop(&o.sc, o.th);
	script_stop(&t.sc, t.th);
	ck_assert_int_eq(t.sc.served, 1);
	curl_slist_free_all(h);
}
END_TEST

/* A redirect goes to http or https only: gopher:// and ftp:// fail the
 * request, at once and saying so, and the handle that met them is not
 * handed to the next request (a refused redirect leaves it failing every
 * later setup).  Nothing reaches the ftp port. */
START_TEST(redirect_schemes)
{
	static const char *const never[] = {"HTTP/1.1 500 No\r\n\r\n", NULL};
	char gopher[256], ftp[256], url[512];
	const char *const answers[] = {gopher, ftp, NULL};
	struct scripted o, f;
	char buf[64];
	struct fetch_req req = {0}, dummy = {0}, list = {0};
	struct fetch_res res;
	int port;

	scripted_start(&f, never, &dummy, buf, sizeof(buf));
	port = atoi(strrchr(f.url, ':') + 1);
	snprintf(
	    gopher, sizeof(gopher),
	    "HTTP/1.1 302 Found\r\nLocation: gopher://127.0.0.1:%d/1x?sig=s"
	    "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	    port);
	snprintf(ftp, sizeof(ftp),
		 "HTTP/1.1 302 Found\r\nLocation: ftp://127.0.0.1:%d/x\r\n"
		 "Content-Length: 0\r\nConnection: close\r\n\r\n",
		 port);
	scripted_start(&o, answers, &req, buf, sizeof(buf));
	req.range_len = 8;
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EIO);
	ck_assert_uint_eq(res.attempts, 1);
	ck_assert_msg(
	    strstr(res.err, "HTTP 302 redirects to gopher://127.0.0.1:") &&
		strstr(res.err, "/1x: only http:// and https:// "
				"redirects are followed"),
	    "%s", res.err);
	ck_assert_ptr_null(strstr(res.err, "sig=s"));
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EIO);
	ck_assert_uint_eq(res.attempts, 1);
	ck_assert_msg(strstr(res.err, "HTTP 302 redirects to ftp://"), "%s",
		      res.err);
	script_stop(&o.sc, o.th);
	script_stop(&f.sc, f.th);
	ck_assert_int_eq(f.sc.served, 0);
	/* The same engine reads and lists on as before. */
	ck_assert_int_eq(get("/plain/big.bin", 100, 64, buf, 64, &res), 0);
	check_bytes((const uint8_t *)buf, 100, 64);
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	list.url = url;
	list.grow = true;
	list.cap = 1 << 20;
	ck_assert_int_eq(fetch_run(fe, &list, &res), 0);
	ck_assert_ptr_nonnull(strstr(res.body, "big.bin"));
	free(res.body);
}
END_TEST

/* Credentials through a plain-http site cache are refused by name, unless
 * the configuration opts in; https, or no cache, is fine. */
START_TEST(credentials_not_in_clear)
{
	static const char *const caches[] = {NULL, "http://cache.example:3128/",
					     "https://cache.example/",
					     "HTTP://cache.example"};
	struct fetch_config cfg;
	struct fetch_engine *own;
	char *err = NULL;

	ck_assert_int_eq(
	    fetch_credentials(NULL, "https://o", "gs://b/", "tokens", &err), 0);
	for (unsigned i = 0; i < ARRAY_SIZE(caches); i++) {
		for (int optin = 0; optin < 2; optin++) {
			const bool refused =
			    caches[i] && caches[i][4] != 's' && !optin;

			fetch_config_default(&cfg);
			cfg.site_cache = caches[i];
			cfg.site_cache_insecure_credentials = optin;
			ck_assert_int_eq(fetch_engine_new(&cfg, &own), 0);
			ck_assert_int_eq(fetch_credentials(own, "https://o",
							   "gs://b/", "tokens",
							   &err),
					 refused ? -EPERM : 0);
			fetch_engine_free(own);
			ck_assert(!err == !refused);
			if (!err)
				continue;
			ck_assert_msg(
			    strstr(err, "gs://b/: its reads carry tokens, "
					"which would go in clear to the site "
					"cache ") &&
				strstr(err, "cache.example") &&
				strstr(err, "https://") &&
				strstr(err,
				       "--site-cache-insecure-credentials"),
			    "%s", err);
			free(err);
			err = NULL;
		}
	}
}
END_TEST

/* Through a site cache a ranged GET goes to the cache and stays the
 * origin's: path and query as they were, the origin's Host (the one the
 * request carries when it has one: it is signed), X-Wharf-Origin, the
 * user of the URL as Basic auth.  Other requests go to the origin. */
START_TEST(site_cache_request_stays_the_origins)
{
	static const char *const part[] = {
	    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\n"
	    "Content-Length: 4\r\nConnection: close\r\n\r\nabcd",
	    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\n"
	    "Content-Length: 4\r\nConnection: close\r\n\r\nabcd",
	    NULL};
	static const char *const whole[] = {
	    "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n"
	    "\r\nlist",
	    NULL};
	struct fetch_config cfg;
	struct fetch_engine *own;
	struct scripted cache, origin;
	struct fetch_req req = {0}, list = {0};
	struct fetch_res res;
	char buf[8], base[64];
	struct curl_slist *h = curl_slist_append(NULL, "Host: signed.example");

	ck_assert_ptr_nonnull(fetch_site_cache_check("ftp://c"));
	ck_assert_ptr_nonnull(fetch_site_cache_check("http://"));
	ck_assert_ptr_nonnull(fetch_site_cache_check("http://c:8080/?x=1"));
	ck_assert_ptr_null(fetch_site_cache_check("http://c:8080/"));
	scripted_start(&cache, part, &req, buf, sizeof(buf));
	snprintf(base, sizeof(base), "%.*s/", (int)strlen(cache.url) - 4,
		 cache.url);
	fetch_config_default(&cfg);
	cfg.hedge = false;
	cfg.retries = 0;
	cfg.site_cache = base;
	ck_assert_int_eq(fetch_engine_new(&cfg, &own), 0);

	req.url = "HTTPS://Bucket.example:8443/a%20b/k?x=1&y=2";
	req.headers = h;
	req.range_len = 4;
	ck_assert_int_eq(fetch_run(own, &req, &res), 0);
	ck_assert_int_eq(memcmp(buf, "abcd", 4), 0);
	ck_assert_msg(
	    strstr(cache.sc.last, "GET /a%20b/k?x=1&y=2 HTTP/1.1\r\n") ==
		cache.sc.last,
	    "%s", cache.sc.last);
	ck_assert_ptr_nonnull(strstr(cache.sc.last,
				     "\r\nX-Wharf-Origin: "
				     "https://Bucket.example:8443\r\n"));
	ck_assert_ptr_nonnull(
	    strstr(cache.sc.last, "\r\nHost: signed.example\r\n"));
	ck_assert_ptr_null(strstr(strstr(cache.sc.last, "Host:") + 1, "Host:"));
	ck_assert_ptr_nonnull(strstr(cache.sc.last, "\r\nRange: bytes=0-3"));

	req.url = "http://user:pw@origin.example/p";
	req.headers = NULL;
	ck_assert_int_eq(fetch_run(own, &req, &res), 0);
	ck_assert_msg(strstr(cache.sc.last, "GET /p HTTP/1.1\r\n") ==
			  cache.sc.last,
		      "%s", cache.sc.last);
	ck_assert_ptr_nonnull(
	    strstr(cache.sc.last, "\r\nHost: origin.example\r\n"));
	ck_assert_ptr_nonnull(strstr(
	    cache.sc.last, "\r\nX-Wharf-Origin: http://origin.example\r\n"));
	ck_assert_ptr_nonnull(strstr(cache.sc.last, "\r\nAuthorization: Basic "
						    "dXNlcjpwdw==\r\n"));

	/* A listing (no range) goes to the origin itself. */
	scripted_start(&origin, whole, &list, buf, sizeof(buf));
	ck_assert_int_eq(fetch_run(own, &list, &res), 0);
	ck_assert_int_eq(origin.sc.served, 1);
	ck_assert_ptr_null(strstr(origin.sc.last, "X-Wharf-Origin"));
	ck_assert_int_eq(cache.sc.served, 2);
	fetch_engine_free(own);
	script_stop(&cache.sc, cache.th);
	script_stop(&origin.sc, origin.th);
	curl_slist_free_all(h);
}
END_TEST

/* An origin that sends a byte every 250 ms until told to stop. */
struct trickler {
	int fd;
	int limit; /* bytes of the body sent before it closes (0: 48) */
	bool stop; /* atomic */
	int accepted;
	int cut; /* atomic: 1 when the client closed before the end */
	pthread_t th;
};

static void *trickle_main(void *arg)
{
	static const char head[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n"
	    "Connection: close\r\n\r\n";
	struct trickler *tr = arg;
	const int limit = tr->limit ? tr->limit : 48;
	int c, sent = 0;

	/* limit / 4 s at most (12 s by default): a client that never gives
	 * up must not hang the test (it runs without a fork, so without
	 * Check's timeout). */
	while (!__atomic_load_n(&tr->stop, __ATOMIC_ACQUIRE) &&
	       (c = accept(tr->fd, NULL, NULL)) >= 0) {
		char req[4096];

		__atomic_fetch_add(&tr->accepted, 1, __ATOMIC_RELAXED);
		(void)!read(c, req, sizeof(req));
		(void)!write(c, head, sizeof(head) - 1);
		while (!__atomic_load_n(&tr->stop, __ATOMIC_ACQUIRE) &&
		       sent < limit && send(c, "x", 1, MSG_NOSIGNAL) == 1) {
			sent++;
			usleep(250 * 1000);
		}
		if (sent < limit &&
		    !__atomic_load_n(&tr->stop, __ATOMIC_ACQUIRE))
			__atomic_store_n(&tr->cut, 1, __ATOMIC_RELEASE);
		close(c);
		if (sent >= limit)
			shutdown(tr->fd, SHUT_RDWR);
	}
	return NULL;
}

/* Starts a trickler and points req (a 64 KiB body into a static
 * buffer) at it; url holds 64 bytes. */
static void trickler_start(struct trickler *tr, struct fetch_req *req,
			   char *url)
{
	static uint8_t buf[65536];
	const int port = listen_loopback(&tr->fd);

	ck_assert_int_eq(pthread_create(&tr->th, NULL, trickle_main, tr), 0);
	snprintf(url, 64, "http://127.0.0.1:%d/obj", port);
	req->url = url;
	req->buf = buf;
	req->cap = sizeof(buf);
}

static void trickler_stop(struct trickler *tr)
{
	__atomic_store_n(&tr->stop, true, __ATOMIC_RELEASE);
	shutdown(tr->fd, SHUT_RDWR);
	close(tr->fd);
	pthread_join(tr->th, NULL);
}

/* An origin that trickles a few bytes a second is a stall, not a read
 * that lasts for hours: the request fails within its retry budget. */
START_TEST(trickle_is_a_stall)
{
	struct trickler tr = {0};
	struct fetch_config cfg;
	struct fetch_engine *own;
	struct fetch_req req = {0};
	struct fetch_res res;
	char url[64];

	trickler_start(&tr, &req, url);
	fetch_config_default(&cfg);
	cfg.stall_timeout_ms = 2000;
	cfg.retry_budget_ms = 500;
	cfg.hedge = false;
	ck_assert_int_eq(fetch_engine_new(&cfg, &own), 0);
	ck_assert_int_eq(fetch_run(own, &req, &res), -EIO);
	ck_assert_msg(strstr(res.err, "too slow"), "%s", res.err);
	fetch_engine_free(own);
	trickler_stop(&tr);
}
END_TEST

struct canceller {
	struct fetch_engine *fe;
	unsigned after_ms;
	/* When not NULL: first waits (up to 60 s) until *count reaches
	 * at_least, an origin's count of the requests it took. */
	const int *count;
	int at_least;
};

static void *cancel_later(void *arg)
{
	struct canceller *c = arg;

	for (int i = 0;
	     c->count && i < 60000 &&
	     __atomic_load_n(c->count, __ATOMIC_ACQUIRE) < c->at_least;
	     i++)
		usleep(1000);
	usleep(c->after_ms * 1000);
	fetch_engine_cancel(c->fe);
	return NULL;
}

/* Waits up to 60 s (a bound that only stops a hang) for *flag. */
static bool flag_comes(const int *flag)
{
	for (int i = 0; i < 6000 && !__atomic_load_n(flag, __ATOMIC_ACQUIRE);
	     i++)
		usleep(10000);
	return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
}

/* A cancel ends a request that trickles (for 60 s, were it let) in the
 * middle of its transfer: the client closes the connection before the
 * trickle's end, the retries it has left included, and every later
 * request fails without going out. */
START_TEST(cancel_ends_requests)
{
	struct trickler tr = {.limit = 240};
	struct canceller c = {
	    .after_ms = 300, .count = &tr.accepted, .at_least = 1};
	struct fetch_config cfg;
	struct fetch_req req = {0};
	struct fetch_res res;
	char url[64];
	pthread_t th;

	trickler_start(&tr, &req, url);
	fetch_config_default(&cfg);
	cfg.hedge = false;
	ck_assert_int_eq(fetch_engine_new(&cfg, &c.fe), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, cancel_later, &c), 0);
	ck_assert_int_eq(fetch_run(c.fe, &req, &res), -ECANCELED);
	ck_assert_msg(flag_comes(&tr.cut),
		      "the transfer ran on to the trickle's end");
	ck_assert_msg(strstr(res.err, "cancelled"), "%s", res.err);
	pthread_join(th, NULL);
	ck_assert_int_eq(fetch_run(c.fe, &req, &res), -ECANCELED);
	ck_assert_int_eq(res.attempts, 1);
	/* Neither a retry of the first nor the second went out. */
	ck_assert_int_eq(tr.accepted, 1);
	fetch_engine_free(c.fe);
	trickler_stop(&tr);
}
END_TEST

/* A cancel ends a call between its retries: an origin that answers 503
 * with 50 retries and a long budget ahead; the call ends cancelled, with
 * no request after the cancel. */
START_TEST(cancel_ends_backoff)
{
#define BUSY "HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n"
	static const char *const answers[] = {BUSY, BUSY, BUSY, BUSY, BUSY,
					      BUSY, BUSY, BUSY, NULL};
#undef BUSY
	struct scripted o;
	/* After the third 503 has gone: its retry waits out a backoff
	 * (up to 0.4 s), or has just gone out. */
	struct canceller c = {
	    .after_ms = 0, .count = &o.sc.served, .at_least = 3};
	struct fetch_config cfg;
	char buf[16];
	struct fetch_req req = {0};
	struct fetch_res res;
	pthread_t th;
	int served;

	scripted_start(&o, answers, &req, buf, sizeof(buf));
	fetch_config_default(&cfg);
	cfg.hedge = false;
	cfg.retries = 50;
	cfg.retry_budget_ms = 600000;
	ck_assert_int_eq(fetch_engine_new(&cfg, &c.fe), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, cancel_later, &c), 0);
	ck_assert_int_eq(fetch_run(c.fe, &req, &res), -ECANCELED);
	pthread_join(th, NULL);
	ck_assert_uint_gt(res.attempts, 2);
	/* No retry went out after the cancel: the origin took no more
	 * requests than the call made. */
	served = __atomic_load_n(&o.sc.served, __ATOMIC_ACQUIRE);
	ck_assert_int_le(served, (int)res.attempts);
	fetch_engine_free(c.fe);
	script_stop(&o.sc, o.th);
}
END_TEST

/* ---- fetch_submit: requests that hold no thread ---- */

#define LANDING_MAX 64

/* Where submitted requests end: each slot's callback count and result. */
struct landing {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int done;
	struct landing_slot {
		struct landing *l;
		int calls, rc;
		pthread_t thread; /* the thread its callback ran on */
		struct fetch_req req;
		struct fetch_res res;
		uint8_t buf[65536];
	} slot[LANDING_MAX];
};

static void landed(void *arg, int rc)
{
	struct landing_slot *s = arg;
	struct landing *l = s->l;

	pthread_mutex_lock(&l->mu);
	s->calls++;
	s->rc = rc;
	s->thread = pthread_self();
	l->done++;
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->mu);
}

static struct landing *landing_new(void)
{
	struct landing *l = calloc(1, sizeof(*l));

	ck_assert_ptr_nonnull(l);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cond, NULL);
	for (int i = 0; i < LANDING_MAX; i++)
		l->slot[i].l = l;
	return l;
}

/* Waits until n callbacks have run. */
static void landing_wait(struct landing *l, int n)
{
	pthread_mutex_lock(&l->mu);
	while (l->done < n)
		pthread_cond_wait(&l->cond, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

static void landing_free(struct landing *l)
{
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* One thread submits 24 ranged GETs at once to an origin that answers
 * 100 ms late and refuses (503) a ninth request in flight: it refuses
 * some, which only requests in flight together can make it do, and
 * every range still arrives right, its callback run once, on an engine
 * thread. */
START_TEST(submit_keeps_many_in_flight)
{
	static const char *const opts[] = {"--max-inflight", "8", "--ttfb-ms",
					   "100", NULL};
	char url[256], log[PATH_MAX], *work = fx_tmpdir("submit");
	struct landing *l = landing_new();
	struct fetch_config cfg;
	struct fetch_engine *e;
	const int n = 24;
	pid_t pid;

	pid = fx_origin_start(root, opts, work, "submit", url, sizeof(url));
	ck_assert_int_gt(pid, 0);
	strncat(url, "big.bin", sizeof(url) - strlen(url) - 1);
	fetch_config_default(&cfg);
	cfg.hedge = false;
	cfg.retries = 20;
	cfg.retry_budget_ms = 60000;
	ck_assert_int_eq(fetch_engine_new(&cfg, &e), 0);
	for (int i = 0; i < n; i++) {
		struct landing_slot *s = &l->slot[i];

		s->req.url = url;
		s->req.buf = s->buf;
		s->req.cap = sizeof(s->buf);
		s->req.range_off = (uint64_t)i * 100003;
		s->req.range_len = sizeof(s->buf);
		ck_assert_int_eq(fetch_submit(e, &s->req, &s->res, landed, s),
				 0);
	}
	landing_wait(l, n);
	for (int i = 0; i < n; i++) {
		struct landing_slot *s = &l->slot[i];

		ck_assert_int_eq(s->calls, 1);
		ck_assert_msg(s->rc == 0, "request %d: %s", i, s->res.err);
		ck_assert_uint_eq(s->res.len, sizeof(s->buf));
		check_bytes(s->buf, s->req.range_off, sizeof(s->buf));
		ck_assert(!pthread_equal(s->thread, pthread_self()));
	}
	fetch_engine_free(e);
	fx_stop(pid, 5000);
	snprintf(log, sizeof(log), "%s/submit.log", work);
	fprintf(stderr, "submit: %ld refused as a ninth in flight\n",
		fx_origin_logged(log, "busy "));
	ck_assert_int_gt(fx_origin_logged(log, "busy "), 0);
	fx_rmtree(work);
	free(work);
	landing_free(l);
}
END_TEST

/* A submitted request is retried by the engine, signed again before each
 * retry (on a thread of its own, not the caller's), and ends once. */
START_TEST(submit_retried)
{
#define BUSY "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"
	static const char *const answers[] = {
	    BUSY, BUSY,
	    "HTTP/1.1 206 Partial Content\r\nContent-Length: 8\r\n"
	    "Content-Range: bytes 2-9/100\r\nConnection: close\r\n\r\n"
	    "cdefghij",
	    NULL};
#undef BUSY
	struct landing *l = landing_new();
	struct landing_slot *s = &l->slot[0];
	struct scripted o;

	scripted_resigned(&o, answers, &s->req, s->buf, sizeof(s->buf), resign);
	resigned = 0;
	ck_assert_int_eq(fetch_submit(fe, &s->req, &s->res, landed, s), 0);
	landing_wait(l, 1);
	ck_assert_int_eq(s->calls, 1);
	ck_assert_msg(s->rc == 0, "%s", s->res.err);
	ck_assert_uint_eq(s->res.attempts, 3);
	ck_assert_int_eq(resigned, 2);
	ck_assert_uint_eq(s->res.len, 8);
	ck_assert_int_eq(memcmp(s->buf, "cdefghij", 8), 0);
	script_stop(&o.sc, o.th);
	landing_free(l);
}
END_TEST

/* A bad request is refused at once, its callback never run. */
START_TEST(submit_bad_request)
{
	struct landing *l = landing_new();
	struct landing_slot *s = &l->slot[0];

	s->req.cap = 16; /* no URL, no buffer */
	ck_assert_int_eq(fetch_submit(fe, &s->req, &s->res, landed, s),
			 -EINVAL);
	ck_assert_msg(strstr(s->res.err, "bad request"), "%s", s->res.err);
	usleep(100000);
	ck_assert_int_eq(s->calls, 0);
	landing_free(l);
}
END_TEST

/* A cancel ends submitted requests waiting out a backoff: each callback
 * runs once, with -ECANCELED. */
START_TEST(cancel_ends_submitted)
{
#define BUSY "HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n"
	static const char *const answers[] = {
	    BUSY, BUSY, BUSY, BUSY, BUSY, BUSY, BUSY, BUSY, BUSY, BUSY, NULL};
#undef BUSY
	struct landing *l = landing_new();
	struct canceller c = {.after_ms = 1000};
	struct fetch_config cfg;
	struct scripted o;
	pthread_t th;

	fetch_config_default(&cfg);
	cfg.hedge = false;
	cfg.retries = 50;
	cfg.retry_budget_ms = 600000;
	ck_assert_int_eq(fetch_engine_new(&cfg, &c.fe), 0);
	scripted_start(&o, answers, &l->slot[0].req, l->slot[0].buf, 16);
	l->slot[1].req = l->slot[0].req;
	l->slot[1].req.buf = l->slot[1].buf;
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(fetch_submit(c.fe, &l->slot[i].req,
					      &l->slot[i].res, landed,
					      &l->slot[i]),
				 0);
	ck_assert_int_eq(pthread_create(&th, NULL, cancel_later, &c), 0);
	landing_wait(l, 2);
	pthread_join(th, NULL);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(l->slot[i].calls, 1);
		ck_assert_int_eq(l->slot[i].rc, -ECANCELED);
		ck_assert_msg(strstr(l->slot[i].res.err, "cancelled"), "%s",
			      l->slot[i].res.err);
	}
	fetch_engine_free(c.fe);
	script_stop(&o.sc, o.th);
	landing_free(l);
}
END_TEST

/* Sends stderr (the engine's log lines) to the file path until
 * stderr_back; @return what stderr_back takes. */
static int stderr_to(const char *path)
{
	int saved, fd;

	fflush(stderr);
	saved = dup(2);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(dup2(fd, 2), 0);
	close(fd);
	return saved;
}

static void stderr_back(int saved)
{
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
}

/* How many times s occurs in text. */
static int count_of(const char *text, const char *s)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, s)); p++)
		n++;
	return n;
}

/*
 * An armed engine waits out an origin that answers 503 for outage_wait_ms,
 * past the retry count, then fails; the host is in an outage from its
 * first failed retry (one line), and the first answer from it ends that
 * (one line).  A 404 is an answer, and an engine not armed, or armed with
 * outage_wait_ms 0, keeps the retry count (3 attempts here).
 */
START_TEST(outage_waited_for_then_over)
{
	struct fetch_engine *plain = fe, *zero;
	struct fetch_outage out;
	struct fetch_config cfg;
	struct fetch_res res;
	char log[PATH_MAX], *work = fx_tmpdir("outage"), *text;
	uint8_t buf[64];
	size_t len;
	int saved;

	ck_assert_int_eq(get("/status/503", 0, 16, buf, sizeof(buf), &res),
			 -EIO);
	ck_assert_uint_eq(res.attempts, 3);
	fetch_config_default(&cfg);
	cfg.retries = 2;
	cfg.hedge = false;
	cfg.outage_wait_ms = 0;
	ck_assert_int_eq(fetch_engine_new(&cfg, &zero), 0);
	fetch_outage_arm(zero);
	fe = zero;
	ck_assert_int_eq(get("/status/503", 0, 16, buf, sizeof(buf), &res),
			 -EIO);
	ck_assert_uint_eq(res.attempts, 3);
	fetch_engine_free(zero);

	cfg.outage_wait_ms = 1500;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
	snprintf(log, sizeof(log), "%s/stderr", work);
	saved = stderr_to(log);
	/* Not armed yet (a mount starting): the count holds. */
	ck_assert_int_eq(get("/status/503", 0, 16, buf, sizeof(buf), &res),
			 -EIO);
	ck_assert_uint_eq(res.attempts, 3);
	fetch_outage_arm(fe);
	ck_assert_int_eq(get("/status/404", 0, 16, buf, sizeof(buf), &res),
			 -ENOENT);
	ck_assert_uint_eq(res.attempts, 1);
	ck_assert_int_eq(get("/status/503", 0, 16, buf, sizeof(buf), &res),
			 -EIO);
	/* 1.5 s of backoffs under 100, 200, 400, 800 ms...: 5 tries at
	 * least, where the count allows 3. */
	ck_assert_uint_ge(res.attempts, 5);
	fetch_get_outage(fe, &out);
	ck_assert_uint_eq(out.hosts, 1);
	ck_assert_uint_gt(out.since_ns, 0);
	ck_assert_uint_eq(out.outages, 1);
	ck_assert_uint_eq(out.waited, 1);
	ck_assert_uint_eq(out.waiting, 0);
	ck_assert_uint_eq(out.wait_ms, 1500);
	/* An answer ends it. */
	ck_assert_int_eq(get("/plain/big.bin", 0, 16, buf, sizeof(buf), &res),
			 0);
	check_bytes(buf, 0, 16);
	fetch_get_outage(fe, &out);
	ck_assert_uint_eq(out.hosts, 0);
	ck_assert_uint_eq(out.since_ns, 0);
	stderr_back(saved);
	fetch_engine_free(fe);
	fe = plain;
	text = fx_read_file(log, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(count_of(text, "stopped answering") == 1 &&
			  count_of(text, "answers again after") == 1,
		      "%s", text);
	ck_assert_msg(strstr(text, "wait up to 2s (--outage-wait)") &&
			  strstr(text, "1 read waited"),
		      "%s", text);
	/* Armed, its retries are not logged one by one: the two lines are
	 * the unarmed request's. */
	ck_assert_msg(count_of(text, "retrying in") == 2, "%s", text);
	free(text);
	fx_rmtree(work);
	free(work);
}
END_TEST

/* Retry warnings are held to 20 a second: 60 requests retried at once
 * against an origin that refuses everything log at most 20 lines in each
 * second they span, and the ones left out are counted in the next line
 * logged.  The requests all end, each with its error. */
START_TEST(retry_warnings_limited)
{
	static const char *const opts[] = {"--fail-5xx", "1", NULL};
	char url[256], log[PATH_MAX], *work = fx_tmpdir("warns");
	struct landing *l = landing_new();
	struct fetch_config cfg;
	struct fetch_engine *e;
	const int n = 60;
	int saved;
	char *text;
	size_t len;
	pid_t pid;

	pid = fx_origin_start(root, opts, work, "warns", url, sizeof(url));
	ck_assert_int_gt(pid, 0);
	strncat(url, "big.bin", sizeof(url) - strlen(url) - 1);
	fetch_config_default(&cfg);
	cfg.hedge = false;
	cfg.retries = 1;
	ck_assert_int_eq(fetch_engine_new(&cfg, &e), 0);
	snprintf(log, sizeof(log), "%s/stderr", work);
	saved = stderr_to(log);
	for (int i = 0; i < n + 1; i++) {
		struct landing_slot *s = &l->slot[i];

		/* The last one after the others, in a later second. */
		if (i == n) {
			landing_wait(l, n);
			usleep(1100 * 1000);
		}
		s->req.url = url;
		s->req.buf = s->buf;
		s->req.cap = 16;
		s->req.range_off = (uint64_t)i * 16;
		s->req.range_len = 16;
		ck_assert_int_eq(fetch_submit(e, &s->req, &s->res, landed, s),
				 0);
	}
	landing_wait(l, n + 1);
	stderr_back(saved);
	fetch_engine_free(e);
	fx_stop(pid, 5000);
	for (int i = 0; i < n + 1; i++) {
		ck_assert_int_eq(l->slot[i].calls, 1);
		ck_assert_int_eq(l->slot[i].rc, -EIO);
		ck_assert_uint_eq(l->slot[i].res.attempts, 2);
	}
	text = fx_read_file(log, &len);
	ck_assert_ptr_nonnull(text);
	{
		int lines = 0, told = 0;

		for (char *p = text; (p = strstr(p, "retrying in")); p++)
			lines++;
		for (char *p = text;
		     (p = strstr(p, "more lines like this were not logged"));
		     p++)
			told++;
		fprintf(stderr,
			"retry warnings: %d logged of %d, %d saying "
			"how many were left out\n",
			lines, n + 1, told);
		/* The first 60 retries come within a fraction of a second
		 * (their backoffs are under 100 ms), so within two seconds at
		 * most: 40 lines at most, and the last one's. */
		ck_assert_int_le(lines, 41);
		ck_assert_int_ge(lines, 2);
		ck_assert_int_ge(told, 1);
	}
	free(text);
	fx_rmtree(work);
	free(work);
	landing_free(l);
}
END_TEST

/* A resign that makes a request of its own, itself with a resign: that
 * request is refused (-EDEADLK) instead of hanging the signer, and the
 * retry it was signing goes on. */
static int inner_rc = 1;

static int resign_nested(void *arg, struct fetch_req *req)
{
	struct fetch_req inner = {.url = "http://127.0.0.1:9/unused",
				  .resign = resign};
	struct fetch_res res;

	(void)arg;
	(void)req;
	inner_rc = fetch_run(fe, &inner, &res);
	return 0;
}

START_TEST(resign_may_not_nest)
{
	static const char *const answers[] = {
	    "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n",
	    "HTTP/1.1 206 Partial Content\r\nContent-Length: 8\r\n"
	    "Content-Range: bytes 2-9/100\r\nConnection: close\r\n\r\n"
	    "cdefghij",
	    NULL};
	struct scripted o;
	char buf[8];
	struct fetch_req req = {0};
	struct fetch_res res;

	scripted_resigned(&o, answers, &req, buf, sizeof(buf), resign_nested);
	inner_rc = 1;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_int_eq(inner_rc, -EDEADLK);
	ck_assert_uint_eq(res.attempts, 2);
	ck_assert_int_eq(memcmp(buf, "cdefghij", 8), 0);
	script_stop(&o.sc, o.th);
}
END_TEST

/* scripted_start for bytes 3-6 of an object of 10 bytes, as pinned. */
static void scripted_range(struct scripted *o, const char *const *answers,
			   struct fetch_req *req, void *buf, size_t cap)
{
	scripted_start(o, answers, req, buf, cap);
	req->range_off = 3;
	req->range_len = 4;
	req->size = 10;
}

START_TEST(range_ignored)
{
	/* a 200 with the whole object: the engine skips to the range */
	static const char *const answers[] = {
	    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"
	    "Connection: close\r\n\r\n0123456789",
	    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"
	    "Connection: close\r\n\r\n0123456789",
	    "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n"
	    "Connection: close\r\n\r\n0123456789x",
	    "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n"
	    "Connection: close\r\n\r\n0123456789x",
	    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n012345678",
	    NULL};
	struct scripted o;
	char buf[16];
	struct fetch_req req = {0};
	struct fetch_res res;

	scripted_range(&o, answers, &req, buf, sizeof(buf));
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_uint_eq(res.len, 4);
	ck_assert_int_eq(memcmp(buf, "3456", 4), 0);
	/* running past the end of a 200: the tail and the object's size */
	req.range_off = 8;
	req.range_len = 5;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_uint_eq(res.len, 2);
	ck_assert_int_eq(memcmp(buf, "89", 2), 0);
	ck_assert_uint_eq(res.total_size, 10);
	/* a whole object of another size than the one pinned is another
	 * object: as its length says, or as its end shows */
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EIO);
	ck_assert_ptr_nonnull(strstr(res.err, "HTTP 200 (the range ignored) "
					      "with a body of 9 bytes, not "
					      "the object's 10"));
	ck_assert_uint_eq(res.attempts, 3);
	script_stop(&o.sc, o.th);
}
END_TEST

#define PART(range, len, body)                                                 \
	"HTTP/1.1 206 Partial Content\r\nContent-Length: " len "\r\n" range    \
	"Connection: close\r\n\r\n" body
#define CR(v) "Content-Range: " v "\r\n"

/* A 206 carries the Content-Range of exactly the bytes asked, of the
 * object's pinned size; anything else is retried, then fails naming what
 * came, and no byte of it lands in the buffer. */
START_TEST(range_checked)
{
	static const char *const answers[] = {
	    /* bytes from offset 0, no Content-Range: three tries */
	    PART("", "4", "0123"), PART("", "4", "0123"), PART("", "4", "0123"),
	    /* honest about the wrong bytes */
	    PART(CR("bytes 0-3/10"), "4", "0123"),
	    PART(CR("bytes 0-3/10"), "4", "0123"),
	    PART(CR("bytes 0-3/10"), "4", "0123"),
	    /* another size, then right */
	    PART(CR("bytes 3-6/11"), "4", "3456"),
	    PART(CR("bytes 3-6/10"), "4", "3456"),
	    /* ends early; a body longer than its range; garbage; then right */
	    PART(CR("bytes 3-5/10"), "3", "345"),
	    PART(CR("bytes 3-6/10"), "5", "34567"),
	    PART(CR("bytes 3-6/1x"), "4", "3456"),
	    PART(CR("bytes 3-6/10"), "4", "3456"),
	    /* no size pinned: any total that agrees with the range */
	    PART(CR("bytes 3-6/11"), "4", "3456"),
	    /* the tail of the object, cut at its end */
	    PART(CR("bytes 8-9/10"), "2", "89"), NULL};
	struct scripted o;
	char buf[16];
	struct fetch_req req = {0};
	struct fetch_res res;

	scripted_range(&o, answers, &req, buf, sizeof(buf));
	memset(buf, '-', sizeof(buf));
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EIO);
	ck_assert_uint_eq(res.attempts, 3);
	ck_assert_msg(strstr(res.err, "/obj bytes=3-6: HTTP 206 without a "
				      "Content-Range"),
		      "%s", res.err);
	ck_assert_int_eq(memcmp(buf, "----", 4), 0);
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EIO);
	ck_assert_ptr_nonnull(strstr(res.err, "HTTP 206 with Content-Range: "
					      "bytes 0-3/10, not bytes "
					      "3-6/10"));
	ck_assert_int_eq(memcmp(buf, "----", 4), 0);
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_uint_eq(res.attempts, 2);
	ck_assert_int_eq(memcmp(buf, "3456", 4), 0);
	memset(buf, '-', sizeof(buf));
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EIO);
	ck_assert_ptr_nonnull(strstr(res.err, "Content-Range: bytes 3-6/1x"));
	ck_assert_int_eq(memcmp(buf, "----", 4), 0);
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_int_eq(memcmp(buf, "3456", 4), 0);
	req.size = 0;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_uint_eq(res.total_size, 11);
	req.size = 10;
	req.range_off = 8;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	ck_assert_uint_eq(res.len, 2);
	ck_assert_int_eq(memcmp(buf, "89", 2), 0);
	script_stop(&o.sc, o.th);
}
END_TEST

/* The answer's version against the pinned one (fetch_version_mismatch),
 * from header lines as an origin sends them. */
static const char *version_said(const char *pinned, const char *const lines[])
{
	static char why[256];
	struct fetch_req req = {.version = pinned, .range_len = 4};
	struct fetch_res res;
	struct fetch_head h;

	memset(&res, 0, sizeof(res));
	memset(&h, 0, sizeof(h));
	for (size_t i = 0; lines[i]; i++)
		fetch_header_line(lines[i], strlen(lines[i]), &res, &h);
	return fetch_version_mismatch(&req, 206, &res, &h, why, sizeof(why));
}

START_TEST(version_checked)
{
	static const char *const etag[] = {"HTTP/1.1 206 Partial\r\n",
					   "ETag: \"abc\"\r\n", NULL};
	static const char *const weak[] = {"HTTP/1.1 206 Partial\r\n",
					   "ETag: W/\"abc\"\r\n", NULL};
	static const char *const other[] = {"HTTP/1.1 206 Partial\r\n",
					    "ETag: \"abd\"\r\n", NULL};
	static const char *const gen[] = {"HTTP/1.1 206 Partial\r\n",
					  "x-goog-generation: 17\r\n", NULL};
	/* 1700000040 is Tue, 14 Nov 2023 22:14:00 GMT, on the minute */
	static const char *const lm[] = {
	    "HTTP/1.1 206 Partial\r\n",
	    "Last-Modified: Tue, 14 Nov 2023 22:14:33 GMT\r\n", NULL};
	static const char *const none[] = {"HTTP/1.1 206 Partial\r\n", NULL};
	const char *why;

	ck_assert_ptr_null(version_said("\"abc\"", etag));
	ck_assert_ptr_null(version_said("\"abc\"", weak));
	ck_assert_ptr_null(version_said("W/\"abc\"", etag));
	why = version_said("\"abc\"", other);
	ck_assert_msg(why && strstr(why, "ETag \"abd\", pinned \"abc\""), "%s",
		      why);
	ck_assert_ptr_null(version_said("17", gen));
	why = version_said("16", gen);
	ck_assert_msg(why && strstr(why, "generation 17, pinned 16"), "%s", why);
	/* a listing without seconds: the minute holds it */
	ck_assert_ptr_null(version_said("t1700000040-s4", lm));
	ck_assert_ptr_null(version_said("t1700000073-s4", lm));
	why = version_said("t1700000074-s4", lm);
	ck_assert_msg(why && strstr(why, "Last-Modified Tue, 14 Nov 2023 "
					 "22:14:33 GMT, pinned Tue, 14 Nov "
					 "2023 22:14:34 GMT"),
		      "%s", why);
	why = version_said("t1699999980-s4", lm);
	ck_assert_ptr_nonnull(why);
	/* nothing to compare: no validator came, or none was pinned */
	ck_assert_ptr_null(version_said("\"abc\"", none));
	ck_assert_ptr_null(version_said("s4", other));
	ck_assert_ptr_null(version_said(NULL, other));
}
END_TEST

/* A background request (read-ahead, hints) that fails is counted apart
 * from the errors readers meet, and logs no error line: a reader that
 * needs its bytes asks again. */
START_TEST(background_gave_up)
{
	char url[512], log[PATH_MAX], *work = fx_tmpdir("gaveup"), *text;
	struct fetch_req req = {0};
	struct fetch_stats before, after;
	struct fetch_res res;
	uint8_t buf[64];
	int saved;
	size_t len;

	snprintf(url, sizeof(url), "%s/status/403", ng.base);
	req.url = url;
	req.range_len = sizeof(buf);
	req.buf = buf;
	req.cap = sizeof(buf);
	fetch_get_stats(fe, &before);
	snprintf(log, sizeof(log), "%s/stderr", work);
	saved = stderr_to(log);
	req.background = true;
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EACCES);
	stderr_back(saved);
	fetch_get_stats(fe, &after);
	ck_assert_uint_eq(after.gave_up, before.gave_up + 1);
	ck_assert_uint_eq(after.errors, before.errors);
	text = fx_read_file(log, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(!strstr(text, "error"), "%s", text);
	free(text);
	/* the same request for a reader is an error */
	req.background = false;
	ck_assert_int_eq(fetch_run(fe, &req, &res), -EACCES);
	fetch_get_stats(fe, &after);
	ck_assert_uint_eq(after.gave_up, before.gave_up + 1);
	ck_assert_uint_eq(after.errors, before.errors + 1);
	fx_rmtree(work);
	free(work);
}
END_TEST

START_TEST(throttled)
{
	struct fetch_res res;
	uint8_t buf[64];

	ck_assert_int_eq(get("/status/429", 0, 0, buf, sizeof(buf), &res),
			 -EIO);
	ck_assert_uint_eq(res.attempts, 3);
	ck_assert_ptr_nonnull(strstr(res.err, "HTTP 429"));
	ck_assert_int_eq(get("/status/503", 0, 0, buf, sizeof(buf), &res),
			 -EIO);
	ck_assert_uint_eq(res.attempts, 3);
}
END_TEST

/* ---- TLS and HTTP/2: nginx with a self-signed certificate ---- */

static int tls_get(const struct fetch_config *cfg, const char *url,
		   struct fetch_res *res, uint8_t *buf, size_t cap)
{
	struct fetch_engine *e;
	struct fetch_req req = {0};
	int rc;

	ck_assert_int_eq(fetch_engine_new(cfg, &e), 0);
	req.url = url;
	req.buf = buf;
	req.cap = cap;
	req.range_off = 777;
	req.range_len = cap;
	rc = fetch_run(e, &req, res);
	fetch_engine_free(e);
	return rc;
}

START_TEST(tls_http2)
{
	char *dir = fx_tmpdir("tls"), conf[4096], path[512], url[128];
	char logp[512], cert[512];
	int port = fx_free_port();
	struct fetch_config cfg;
	struct fetch_res res;
	uint8_t buf[4096];
	pid_t pid;
	FILE *f;

	if (fx_sh("openssl version >/dev/null 2>&1")) {
		fx_rmtree(dir);
		free(dir);
		fx_skip("no openssl command (for the server's certificate)");
	}
	ck_assert_int_eq(fx_sh("openssl req -x509 -newkey rsa:2048 -nodes "
			       "-keyout %s/key.pem -out %s/cert.pem -days 2 "
			       "-subj /CN=127.0.0.1 -addext "
			       "subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
			       dir, dir),
			 0);
	snprintf(conf, sizeof(conf),
		 "daemon off;\nmaster_process off;\npid %1$s/nginx.pid;\n"
		 "error_log %1$s/error.log warn;\nevents {}\nhttp {\n"
		 " log_format proto '$server_protocol';\n"
		 " access_log %1$s/access.log proto;\n"
		 " client_body_temp_path %1$s/body;\n"
		 " proxy_temp_path %1$s/proxy;\n"
		 " fastcgi_temp_path %1$s/fastcgi;\n"
		 " uwsgi_temp_path %1$s/uwsgi;\n scgi_temp_path %1$s/scgi;\n"
		 " server {\n  listen 127.0.0.1:%2$d ssl http2;\n"
		 "  ssl_certificate %1$s/cert.pem;\n"
		 "  ssl_certificate_key %1$s/key.pem;\n"
		 "  location / { alias %3$s/; }\n }\n}\n",
		 dir, port, root);
	snprintf(path, sizeof(path), "%s/nginx.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(conf, f);
	ck_assert_int_eq(fclose(f), 0);
	{
		char *argv[] = {access("/usr/sbin/nginx", X_OK) == 0
				    ? "/usr/sbin/nginx"
				    : "/usr/bin/nginx",
				"-c",
				path,
				"-p",
				dir,
				NULL};

		snprintf(logp, sizeof(logp), "%s/stderr.log", dir);
		pid = extra_pid = fx_spawn(argv, logp);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(fx_wait_port(port, 10000), 0);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/big.bin", port);
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);

	/* an unknown issuer: refused at once, not retried, and told apart
	 * from an origin out of reach (a setup error: --ca-file) */
	fetch_config_default(&cfg);
	ck_assert_int_eq(tls_get(&cfg, url, &res, buf, sizeof(buf)),
			 -EKEYREJECTED);
	ck_assert_uint_eq(res.attempts, 1);
	ck_assert_ptr_nonnull(strstr(res.err, url));
	/* trusted through --ca-file, and with verification off */
	cfg.ca_file = cert;
	ck_assert_int_eq(tls_get(&cfg, url, &res, buf, sizeof(buf)), 0);
	check_bytes(buf, 777, sizeof(buf));
	cfg.ca_file = NULL;
	cfg.insecure = true;
	ck_assert_int_eq(tls_get(&cfg, url, &res, buf, sizeof(buf)), 0);
	check_bytes(buf, 777, sizeof(buf));
	fx_stop(pid, 5000);
	extra_pid = 0;
	/* both good requests went over HTTP/2 */
	ck_assert_int_eq(
	    fx_sh("test $(grep -c HTTP/2.0 %s/access.log) -eq 2", dir), 0);
	fx_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- HTTP source end to end ---- */

struct names {
	char s[4096];
	int n, files;
	uint64_t bytes;
};

static int put_name(void *arg, const struct source_object *o)
{
	struct names *nm = arg;
	size_t l = strlen(nm->s);

	snprintf(nm->s + l, sizeof(nm->s) - l, "%s%s,", o->name,
		 o->is_dir ? "/" : "");
	nm->n++;
	if (!o->is_dir) {
		nm->files++;
		nm->bytes += o->size;
		if (!o->version[0])
			ck_abort_msg("%s: no version", o->name);
	}
	return 0;
}

/* Reads [off, off+len) of path through the source and checks the bytes. */
static void read_check(struct source *src, const char *path, uint32_t seed,
		       uint64_t off, uint64_t len, uint64_t expect)
{
	struct source_read rd;
	struct fetch_res res;
	uint8_t *buf = malloc(len);
	size_t i;

	ck_assert_int_eq(src->ops->prepare_read(src, path, "", off, len, &rd),
			 0);
	rd.req.buf = buf;
	rd.req.cap = len;
	ck_assert_int_eq(fetch_run(src->fetch, &rd.req, &res), 0);
	source_read_done(&rd);
	ck_assert_uint_eq(res.len, expect);
	for (i = 0; i < res.len; i++)
		if (buf[i] != fx_byte(seed, off + i))
			ck_abort_msg("%s: byte %llu differs", path,
				     (unsigned long long)(off + i));
	free(buf);
}

static void source_common(const char *spec, const char *manifest)
{
	struct source_options opt = {.manifest = manifest};
	struct source *src;
	struct source_object o;
	struct names nm = {0};
	char *err = NULL;

	ck_assert_int_eq(source_open(spec, &opt, fe, &src, &err), 0);
	ck_assert_ptr_null(err);
	ck_assert_int_eq(src->ops->list_dir(src, "", put_name, &nm), 0);
	/* both orders the servers may use */
	ck_assert_ptr_nonnull(strstr(nm.s, "big.bin,"));
	ck_assert_ptr_nonnull(strstr(nm.s, "sub dir/,"));
	ck_assert_int_eq(nm.n, 2);
	memset(&nm, 0, sizeof(nm));
	ck_assert_int_eq(src->ops->list_dir(src, "sub dir", put_name, &nm), 0);
	ck_assert_int_eq(nm.files, 3);
	ck_assert_uint_eq(nm.bytes, 1000 + 1 + 0);
	ck_assert_ptr_nonnull(strstr(nm.s, "a&b #1.bin,"));
	ck_assert_ptr_nonnull(strstr(nm.s, "\xc3\xa9t\xc3\xa9.bin,"));
	ck_assert_ptr_nonnull(strstr(nm.s, "empty,"));
	ck_assert_int_eq(src->ops->list_dir(src, "nothere", put_name, &nm),
			 -ENOENT);

	ck_assert_int_eq(src->ops->stat(src, "sub dir/a&b #1.bin", &o), 0);
	ck_assert(!o.is_dir);
	ck_assert_uint_eq(o.size, 1000);
	ck_assert(o.version[0] != '\0');
	ck_assert_int_eq(src->ops->stat(src, "", &o), 0);
	ck_assert(o.is_dir);
	ck_assert_int_eq(src->ops->stat(src, "sub dir/missing", &o), -ENOENT);
	ck_assert_int_eq(src->ops->stat(src, "sub dir", &o), 0);
	ck_assert(o.is_dir);

	read_check(src, "big.bin", SEED, 0, BIG_SIZE, BIG_SIZE);
	read_check(src, "big.bin", SEED, 1048576, 65536, 65536);
	read_check(src, "big.bin", SEED, BIG_SIZE - 100, 4096, 100);
	read_check(src, "sub dir/a&b #1.bin", 11, 999, 1, 1);
	read_check(src, "sub dir/\xc3\xa9t\xc3\xa9.bin", 12, 0, 1, 1);
	source_close(src);
}

START_TEST(source_json)
{
	char spec[256];

	snprintf(spec, sizeof(spec), "%s/json", ng.base);
	source_common(spec, NULL);
}
END_TEST

START_TEST(source_html)
{
	char spec[256];

	snprintf(spec, sizeof(spec), "%s/html/", ng.base);
	source_common(spec, NULL);
}
END_TEST

START_TEST(source_manifest)
{
	char spec[256], path[512], url[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/manifest.txt", root);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"# test\nbig.bin %d\nsub%%20dir/a&b%%20#1.bin 1000 \"x\"\n"
		"sub%%20dir/\xc3\xa9t\xc3\xa9.bin 1\nsub%%20dir/empty 0\n",
		BIG_SIZE);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(spec, sizeof(spec), "%s/plain/", ng.base);
	source_common(spec, path);
	/* the same manifest from a URL */
	snprintf(url, sizeof(url), "%s/plain/manifest.txt", ng.base);
	source_common(spec, url);
	ck_assert_int_eq(unlink(path), 0);
}
END_TEST

START_TEST(source_python_server)
{
	/* python's http.server: HTML without sizes (HEADs fill them in) and
	 * no Range support (a 200 answer to a ranged GET). */
	char port[16], spec[256];
	int p = fx_free_port();
	pid_t pid;
	char *argv[] = {
	    "/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1",
	    "--directory",	root, port,	     NULL};

	if (fx_sh("/usr/bin/python3 -c 'import http.server' 2>/dev/null"))
		fx_skip("no /usr/bin/python3 with http.server");
	snprintf(port, sizeof(port), "%d", p);
	pid = extra_pid = fx_spawn(argv, "/dev/null");
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(fx_wait_port(p, 10000), 0);
	snprintf(spec, sizeof(spec), "http://127.0.0.1:%d/", p);
	source_common(spec, NULL);
	fx_stop(pid, 5000);
	extra_pid = 0;
}
END_TEST

START_TEST(source_bad)
{
	struct source *src;
	char *err = NULL, spec[256];
	struct source_options opt = {0};

	ck_assert_int_eq(source_open("ftp://x/y", &opt, fe, &src, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "ftp://x/y"));
	/* The schemes named, from the table, in order. */
	ck_assert_msg(strstr(err, "(expected http://, https://, s3://, "
				  "gs:// or az://)"),
		      "message: %s", err);
	free(err);
	err = NULL;
	ck_assert_int_eq(source_open("http://u:p@h/x", &opt, fe, &src, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "credentials"));
	free(err);
	err = NULL;
	snprintf(spec, sizeof(spec), "%s/json/nothere/", ng.base);
	ck_assert_int_eq(source_open(spec, &opt, fe, &src, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "nothere"));
	ck_assert_ptr_nonnull(strstr(err, "404"));
	free(err);
	err = NULL;
	/* /plain/ has no index pages: open fails, naming the URL */
	snprintf(spec, sizeof(spec), "%s/plain/", ng.base);
	ck_assert_int_ne(source_open(spec, &opt, fe, &src, &err), 0);
	ck_assert_ptr_nonnull(strstr(err, "/plain/"));
	free(err);
	err = NULL;
	opt.manifest = "/nonexistent/manifest";
	ck_assert_int_eq(source_open(spec, &opt, fe, &src, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/manifest"));
	free(err);
	err = NULL;
	/* canonical id: scheme and host lowercased, default port dropped */
	opt.manifest = "/dev/null";
	ck_assert_int_eq(
	    source_open("HTTP://Example.COM:80/a/b", &opt, fe, &src, &err), 0);
	ck_assert_str_eq(src->id, "http://example.com/a/b/");
	source_close(src);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fetch");
	TCase *tc = tcase_create("nginx");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, whole_get);
	tcase_add_test(tc, ranges_at_edges);
	tcase_add_test(tc, head_request);
	tcase_add_test(tc, grow_buffer);
	tcase_add_test(tc, cap_overflow);
	tcase_add_test(tc, status_mapping);
	tcase_add_test(tc, unreachable);
	tcase_add_test(tc, keep_alive);
	tcase_add_test(tc, concurrency);
	tcase_add_test(tc, short_body_retried);
	tcase_add_test(tc, stall_retried);
	tcase_add_test(tc, range_ignored);
	tcase_add_test(tc, range_checked);
	tcase_add_test(tc, version_checked);
	tcase_add_test(tc, background_gave_up);
	tcase_add_test(tc, redirect_schemes);
	tcase_add_test(tc, credentials_not_in_clear);
	tcase_add_test(tc, throttled);
	tcase_add_test(tc, hedging);
	tcase_add_test(tc, conc_grows_with_throughput);
	tcase_add_test(tc, conc_holds_when_flat);
	tcase_add_test(tc, conc_backs_off);
	tcase_add_test(tc, conc_covers_bdp);
	tcase_add_test(tc, backs_off_from_busy_origin);
	tcase_add_test(tc, tls_http2);
	tcase_add_test(tc, source_json);
	tcase_add_test(tc, source_html);
	tcase_add_test(tc, source_manifest);
	tcase_add_test(tc, source_python_server);
	tcase_add_test(tc, source_bad);
	tcase_add_test(tc, encoded_body_refused);
	tcase_add_test(tc, signed_not_redirected);
	tcase_add_test(tc, site_cache_request_stays_the_origins);
	tcase_add_test(tc, trickle_is_a_stall);
	tcase_add_test(tc, cancel_ends_requests);
	tcase_add_test(tc, cancel_ends_backoff);
	tcase_add_test(tc, submit_keeps_many_in_flight);
	tcase_add_test(tc, submit_retried);
	tcase_add_test(tc, submit_bad_request);
	tcase_add_test(tc, cancel_ends_submitted);
	tcase_add_test(tc, retry_warnings_limited);
	tcase_add_test(tc, outage_waited_for_then_over);
	tcase_add_test(tc, resign_may_not_nest);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;
	char path[1024], sub[512];

	/* Every test asks the one nginx: without it, none can run. */
	fx_need(fx_nginx_missing());
	root = fx_tmpdir("fetch");
	snprintf(sub, sizeof(sub), "%s/sub dir", root);
	if (fx_mkdirs(sub) ||
	    fx_write_file(strcat(strcpy(path, sub), "/a&b #1.bin"), 1000, 11) ||
	    fx_write_file(strcat(strcpy(path, sub), "/\xc3\xa9t\xc3\xa9.bin"),
			  1, 12) ||
	    fx_write_file(strcat(strcpy(path, sub), "/empty"), 0, 13) ||
	    fx_write_file(strcat(strcpy(path, root), "/big.bin"), BIG_SIZE,
			  SEED)) {
		fprintf(stderr, "cannot write %s\n", path);
		return 1;
	}
	if (fx_nginx_start(&ng, root)) {
		fx_rmtree(root);
		return 1;
	}
	sr = srunner_create(suite());
	/* Shared nginx across tests: no fork per test needed. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	fx_nginx_stop(&ng);
	fx_rmtree(root);
	free(root);
	return failed ? 1 : 0;
}
