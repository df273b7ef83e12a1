#ifndef WHARF_FETCH_I_H
#define WHARF_FETCH_I_H
/*
 * fetch_i.h: what the fetch engine's files share among themselves, and no
 * one else includes.  fetch.h is the contract for other modules.
 *
 *   fetch_engine.c the engine: its threads, the curl multi handle, legs,
 *                  hosts' admission, a request's attempts, the public calls
 *   fetch_easy.c   a leg's easy handle: the pool, its setup for a request,
 *                  the header and body callbacks
 *   fetch_retry.c  what an attempt's outcome means; when a retry goes
 *   fetch_hedge.c  recent latencies, and when a late request is sent twice
 *   fetch_stats.c  counters, the first-byte histogram, hosts' figures
 *   fetch_outage.c an origin that stopped answering: its state, its lines
 *   fetch_header.c the response header parser (fetch_header_line)
 *   sitecache.c    routing shareable requests through a site cache
 *   fetch_trust.c  where credentials may go: credential URLs, origins
 *
 * The engine thread owns everything below that says "engine thread only";
 * the other files' functions run on it unless they say otherwise.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "conc.h"
#include "fetch.h"
#include "sitecache.h"

/* Whether a source's credentials may go to origin (fetch_credentials,
 * fetch.h, says when).  @return 0, or -EPERM (-EINVAL) with *err. */
int fetch_trust_origin(const char *origin, bool insecure_ok, const char *who,
		       const char *what, char **err) WHARF_CHECK;

/*
 * What no request goes through a forward proxy for (CURLOPT_NOPROXY): the
 * environment's no_proxy (or NO_PROXY), and this machine and the metadata
 * addresses, which fetch_credential_url lets plain http reach: a proxy
 * would read their tokens in clear (and could not reach this machine's
 * loopback anyway).  @return a malloc'd list, or NULL when out of memory.
 */
char *fetch_trust_no_proxy(void);

#define POOL_MAX 64 /* idle easy handles kept for reuse */
/* Hosts with a controller of their own; any further ones share the last
 * slot (a mount talks to one data host and a token endpoint or two). */
#define HOSTS_MAX 8
/* The recent first-byte latencies kept per kind of request (hedging). */
#define HEDGE_WINDOW 128
#define HIST_SUB 4 /* sub-buckets per power of two */
#define HIST_BUCKETS (64 * HIST_SUB)

#define STAT_ADD(f, n) __atomic_fetch_add(&(f), (n), __ATOMIC_RELAXED)
#define STAT_GET(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

/* Kinds of request, each with its own latency window for hedging. */
enum req_kind { K_DATA, K_META, K_NKINDS };

/*
 * One transfer of a request on the multi handle.  A request has one leg,
 * and a second when it is hedged: whichever leg sees the first response
 * byte wins, the other aborts at its own first byte or is removed when the
 * winner ends.  Only the winner touches the request's result.
 */
struct leg {
	struct xfer *x;
	CURL *easy;	   /* NULL when not running */
	uint64_t added_ns; /* when it joined the multi handle */
	char errbuf[CURL_ERROR_SIZE];
};

/* Server latencies (first byte after the request went out) of the last
 * successful requests of one kind, and their p99 (0 until enough). */
struct lat_window {
	uint64_t ns[HEDGE_WINDOW];
	unsigned n, at, since;
	uint64_t p99;
};

/* One origin host: its controller and the background requests waiting
 * for room under its limit.  Engine thread only, but for pub. */
struct host {
	char name[FETCH_HOST_MAX];
	struct conc conc;
	unsigned running; /* legs in flight */
	unsigned waiting;
	struct xfer *wait_head, *wait_tail;
	struct fetch_host_stats pub; /* under the engine's lock */
	/* Its outage (fetch_outage.c): when it began (0: it answers), its
	 * last answer, the first failure's words, and the requests that
	 * waited in it. */
	uint64_t outage_ns;
	uint64_t answered_ns; /* its last answer of any kind */
	int64_t outage_unix;
	uint64_t outage_waited;
	char outage_why[96];
};

struct xfer {
	const struct fetch_req *req;
	struct fetch_res *res;
	struct xfer *next; /* in the engine's queue, then in its
			    * host's waiting list */
	struct host *host;
	struct xfer *run_prev, *run_next; /* in the engine's running list */
	struct leg leg[2];
	struct leg *winner; /* the leg whose answer counts */
	bool hedged;
	enum req_kind kind;
	CURLcode cc;
	char errbuf[CURL_ERROR_SIZE];
	char range[48];
	struct fetch_head head; /* what the headers said beyond res */
	uint64_t skip;		/* bytes to drop: a 200 answer to a range */
	bool body_checked;	/* first body byte seen, status examined */
	bool discard;		/* not a 2xx: drop the body */
	char errbody[256];	/* its start, for its <Code> (fetch_res.code) */
	size_t errlen;
	bool overflow;		/* body longer than cap */
	bool enough; /* got the whole range from a 200; stopped early */
	int nomem;
	size_t grow_cap;	  /* allocated size of res->body when growing */
	struct sitecache_via via; /* through the site cache: its headers */
};

/*
 * One request through all its attempts: a copy of the caller's request
 * (resign changes its headers), the attempt in flight (x), and the time
 * its next attempt is due.  fetch_run keeps it on its stack, fetch_submit
 * allocates it; nothing touches it after its callback has run.
 */
struct call {
	struct fetch_req r;
	struct fetch_res *res;
	fetch_done_fn *done;
	void *arg;
	bool owned;	     /* allocated: freed before the callback */
	unsigned n;	     /* attempts made before this one */
	uint64_t first_fail; /* end of the first failed attempt, or 0 */
	bool waiting;	     /* counted in the engine's outage.waiting */
	bool outage_over;    /* it waited out --outage-wait in vain */
	uint64_t due_ns;     /* in the timer list: when the next goes */
	struct call *later;  /* in the timer list or the signer's */
	struct xfer x;
};

struct fetch_engine {
	struct fetch_config cfg;
	char *ca_file, *user_agent;
	char *no_proxy;	  /* fetch_trust_no_proxy */
	char *site_cache; /* "http://cache:8080[/prefix]", no trailing '/' */
	CURLM *multi;
	pthread_t thread;
	pthread_mutex_t lock;
	struct xfer *queue, *queue_tail; /* under lock */
	bool stop;			 /* under lock */
	/* Cancelled (fetch_engine_cancel): a byte in cancel_pipe, seen by
	 * the engine thread; then `cancelled` (atomic) ends every request
	 * and retry wait, and fails new ones. */
	int cancel_pipe[2];
	bool cancelled;
	/* Calls waiting out a backoff, soonest first; engine thread only. */
	struct call *timers;
	/* The signer thread and the retries it is to sign (under lock;
	 * `signing` counts them until they are queued again or ended). */
	pthread_t signer;
	pthread_cond_t sign_cond;
	struct call *sign_head, *sign_tail;
	unsigned signing;
	bool sign_stop;
	bool no_redirect;      /* set before any request */
	unsigned running;      /* legs in multi; engine thread only */
	struct xfer *run_head; /* engine thread only */
	/* Hedging, engine thread only (fetch_hedge.c): recent latencies per
	 * kind, and the budget: each request adds a token, a hedge takes
	 * HEDGE_EVERY. */
	struct lat_window lat[K_NKINDS];
	unsigned hedge_tokens;
	struct host hosts[HOSTS_MAX]; /* engine thread only, but pub */
	unsigned nhosts;	      /* written under lock */
	unsigned waiting;	      /* in hosts' lists; engine only */
	unsigned conc_max;	      /* atomic: the largest host limit */
	CURL *pool[POOL_MAX];	      /* engine thread only */
	unsigned npool;
	struct {
		uint64_t requests, retries, errors, bytes, connects;
		uint64_t gave_up; /* background calls that failed */
		uint64_t hedges, hedge_wins;
		uint64_t hist[HIST_BUCKETS];
		/* Metrics' buckets (not cumulative; the last is +Inf). */
		uint64_t ttfb_le[FETCH_TTFB_BUCKETS + 1];
		uint64_t ttfb_sum_ns;
	} st;
	/* fetch_outage.c; atomic (stats read them), written by the engine
	 * thread but for `waiting`, which call_end drops on any thread. */
	struct {
		bool armed;
		unsigned hosts, waiting;
		uint64_t since_ns;
		int64_t since_unix;
		uint64_t outages, waited;
	} outage;
};

/* ---- fetch_easy.c ---- */

/* An easy handle for a leg: an idle one of the pool (reset), or a new one
 * (NULL when curl cannot make one). */
CURL *fetch_easy_get(struct fetch_engine *fe);
/* Back to the pool when `reuse` (a transfer that ended well) and there is
 * room, else freed. */
void fetch_easy_put(struct fetch_engine *fe, CURL *e, bool reuse);
/* Sets l->easy up for one attempt of l->x's request: its URL and headers,
 * or the site cache's (sitecache_route), range, limits, callbacks.
 * @return 0, or -EINVAL when curl refuses an option or the URL through the
 * cache does not fit. */
int fetch_easy_setup(struct fetch_engine *fe, struct leg *l);

/* ---- fetch_retry.c ---- */

/* V_OUTAGE: worth another try, and no answer came (a connection that
 * failed or broke, a timeout, a 5xx, a body cut short); V_RETRY: another
 * try, after an answer that did not do (429, bytes that do not fit). */
enum fetch_verdict { V_OK, V_RETRY, V_OUTAGE, V_FAIL };

/*
 * Judges one finished attempt: V_OK, V_FAIL with *rc set, or V_RETRY or
 * V_OUTAGE.  `what` gets the origin's answer in words.
 */
enum fetch_verdict fetch_judge(struct xfer *x, int *rc, char *what,
			       size_t wcap);

/*
 * c's attempt failed with verdict v (V_RETRY or V_OUTAGE) and may be
 * retried: whether it is, within the retry count and budget, or for an
 * outage on an armed engine within outage_wait_ms.  If so, *wait_ms is
 * its backoff and c->due_ns when its next attempt goes.  Engine thread.
 */
bool fetch_retry_when(const struct fetch_engine *fe, struct call *c,
		      enum fetch_verdict v, uint64_t *wait_ms);

/* ---- fetch_outage.c ---- */

/* Whether fetch_outage_arm was called and outage_wait_ms is not 0. */
bool fetch_outage_armed(const struct fetch_engine *fe);
/*
 * An attempt of c ended with verdict v (not cancelled; `what` says how):
 * a V_OUTAGE of a retry begins its host's outage, anything else is an
 * answer and ends it.  @return true when it ended one: the host's retries
 * waiting out their backoff may go now.  Engine thread.
 */
bool fetch_outage_note(struct fetch_engine *fe, struct call *c,
		       enum fetch_verdict v, const char *what);
/* c is to be retried after verdict v: a reader's request counts as
 * waiting while its host is in an outage.  @return whether its retry is
 * worth a log line: not in an outage (which said so once), nor, armed, a
 * failure to answer (which a retry mends, or which begins an outage).
 * Engine thread. */
bool fetch_outage_retrying(struct fetch_engine *fe, struct call *c,
			   enum fetch_verdict v);
/* c ends: it no longer waits.  Any thread. */
void fetch_outage_call_end(struct fetch_engine *fe, struct call *c);

/* ---- fetch_hedge.c ---- */

/* Adds a successful request's server latency to its kind's window. */
void fetch_hedge_sample(struct fetch_engine *fe, enum req_kind k, uint64_t ns);
/* An attempt started: the hedge budget grows by one request's share. */
void fetch_hedge_earn(struct fetch_engine *fe);
/*
 * A pass over the running requests for those whose answer is later than
 * the recent p99 of their kind.  fetch_engine.c starts a second leg for each one
 * fetch_hedge_next hands back (and tells fetch_hedge_started when it went
 * out), so the policy here never calls back into the engine.
 */
struct hedge_scan {
	uint64_t now, soonest; /* soonest: when the next one is due */
	struct xfer *at;       /* the next request to look at */
	bool idle;	       /* no budget or no room: nothing to hedge */
};
void fetch_hedge_scan_begin(struct fetch_engine *fe, struct hedge_scan *s);
/* The next late request (marked hedged), or NULL when the pass is done. */
struct xfer *fetch_hedge_next(struct fetch_engine *fe, struct hedge_scan *s);
/* A second leg went out: it takes its share of the budget. */
void fetch_hedge_started(struct fetch_engine *fe);
/* How long the engine may sleep before it looks again. */
long fetch_hedge_wait_ms(const struct hedge_scan *s);

/* ---- fetch_stats.c ---- */

/* A request succeeded after ttfb_ns to its first byte. */
void fetch_stats_ttfb(struct fetch_engine *fe, uint64_t ttfb_ns);
/* Publishes a host's figures for fetch_get_hosts and its limit for
 * fetch_concurrency (takes the lock).  Engine thread. */
void fetch_host_publish(struct fetch_engine *fe, struct host *h);

#endif
