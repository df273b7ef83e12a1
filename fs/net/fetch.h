#ifndef WHARF_FETCH_H
#define WHARF_FETCH_H
/*
 * fetch: the one libcurl multi engine a mount shares.  One thread drives a
 * curl multi handle; any thread may call fetch_run(), which queues the
 * request and sleeps until it completes, or fetch_submit(), which queues
 * it and returns (a callback gives the result), so that one thread may
 * keep many requests in flight.  Connections are kept alive and
 * reused, their number bounded by fetch_config.max_connections; HTTP/2 is
 * used where TLS offers it; TLS peers are verified unless told otherwise.
 *
 * Bodies are asked for and taken as stored (Accept-Encoding: identity):
 * one sent with another Content-Encoding is an error (-EIO).  A body
 * slower than 1 KiB/s over the stall timeout is a stall; no attempt lasts
 * longer than 30 minutes.
 *
 * Concurrency: each origin host has a controller (conc.h) that measures
 * throughput and first-byte latency and sets how many transfers the host
 * gets, growing while throughput grows and halving on 429, 503 or broken
 * connections (not on a body cut short after it began: fetch_engine.c
 * cut_mid_body).  Background requests (fetch_req.background: prefetch) wait
 * for room under that limit; the others start at once.
 *
 * Retries: 5xx, 429, timeouts, resets and short bodies are retried with
 * exponential backoff and full jitter, bounded by `retries` and
 * `retry_budget_ms` (counted from the first failure, so the first retry
 * goes out unless the budget is under the first backoff, 100 ms at most).
 * 4xx other than 429 are final.
 *
 * Outages: once fetch_outage_arm is called (a mount that is up), an
 * origin that does not answer (refused, reset, DNS failure, a timeout, a
 * 5xx, a body cut short) is waited for instead: a request that is not
 * background is retried past `retries`, with backoff up to 5 s between
 * tries, for up to `outage_wait_ms` from its first failure (background
 * ones give up as before; their reader asks again, and waits).  A host
 * whose retry fails too, with no answer to any request since, is in an
 * outage (one warning logged) until any request to it gets an answer (one
 * line: how long, how many requests waited); the retries then waiting for
 * their backoff go at once.  A 403, a 404, a 429 or an answer that does
 * not fit is an answer, not an outage: it fails as before.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"


struct curl_slist;
struct fetch_engine;

struct fetch_config {
	unsigned max_connections;    /* ceiling on parallel transfers and on
				      * each host's limit, default 256 */
	unsigned retries;            /* extra attempts, default 5 */
	unsigned retry_budget_ms;    /* no retry starts later than this after
				      * the first failure, 30000 */
	unsigned connect_timeout_ms; /* default 10000 */
	unsigned stall_timeout_ms;   /* no byte for this long -> retry, 30000 */
	unsigned outage_wait_ms;     /* armed: how long a request waits out an
				      * origin that does not answer, 600000
				      * (10 min); 0: as any failure */
	bool insecure;               /* do not verify TLS peers (--insecure) */
	/* Hedging, default on: a GET or HEAD whose first byte is later than
	 * the recent p99 of its kind (data or metadata) is sent again on
	 * another transfer, at most one request in 20; the first answer
	 * wins and the other transfer is dropped. */
	bool hedge;
	const char *ca_file;         /* extra CA bundle, or NULL */
	const char *user_agent;      /* NULL: "wharf/VERSION" */
	/*
	 * A site cache ("http://cache:8080", --site-cache), or NULL.  Each
	 * ranged GET goes to it instead of the origin, and stays the
	 * origin's: same path and query, the origin's Host header (kept as
	 * the request has it: SigV4 signs it), every header the source set
	 * (Authorization, x-amz-*, If-Match), plus
	 *     X-Wharf-Origin: https://origin-host[:port]
	 *     X-Wharf-Version: etag "..." (or generation G, last-modified D)
	 * which the cache uses to pick its upstream and to key its entries
	 * (sitecache.h says which versions are sent).
	 * The hop to the cache is what this URL says (plain HTTP inside a
	 * site); the cache speaks TLS to an https origin.  Listings, HEADs
	 * and POSTs (token exchanges, metadata servers) go to the origin
	 * directly: they are per node, small, and must not be cached.
	 * Plain forward proxies are libcurl's own: http_proxy, https_proxy
	 * and no_proxy in the environment apply to every request, except
	 * those to this machine and the metadata services' link-local
	 * addresses (fetch_credential_url's plain http ones), which never
	 * go through a proxy: it would read their tokens in clear.
	 */
	const char *site_cache;
	/* Let credentials go to a plain-http:// site cache all the same
	 * (--site-cache-insecure-credentials): see fetch_credentials. */
	bool site_cache_insecure_credentials;
	/* Let credentials go to a plain-http:// origin that is not this
	 * machine all the same (--insecure-credentials): see
	 * fetch_credentials. */
	bool insecure_credentials;
};

/* Checks a --site-cache URL: http:// or https://, a host, no query.
 * @return NULL when good, else why not (a static string). */
const char *fetch_site_cache_check(const char *url);

/* Fills cfg with the defaults above. */
void fetch_config_default(struct fetch_config *cfg);

/* The engine's requests carry credentials (signed S3 requests, GCS
 * tokens): a redirect is never followed, so that they go to no other
 * host; a 3xx answer is final (-EIO).  Call before the first request. */
void fetch_no_redirect(struct fetch_engine *fe);

/*
 * A source whose requests will carry credentials (what: "GCS bearer
 * tokens") says so when it opens, before its first request, with the
 * origin they go to ("http[s]://HOST[:PORT]").  Over plain http they would
 * cross the network in clear, and anyone on the way (or a cache's log)
 * could use them: an http:// origin other than this machine (127.0.0.0/8,
 * ::1, localhost) is refused unless the configuration opts in
 * (insecure_credentials), and so is a plain http:// site cache
 * (site_cache_insecure_credentials).  who names the source in the
 * message.  A NULL engine (a spec checked alone) passes.
 * @return 0, or -EPERM (-EINVAL for an origin with a user name) with *err
 * saying why and how to fix it.
 */
int fetch_credentials(const struct fetch_engine *fe, const char *origin,
		      const char *who, const char *what,
		      char **err) WHARF_CHECK;

/* Where fetch_credential_url lets plain http go. */
enum fetch_cred_url {
	FETCH_CRED_TOKEN,    /* token endpoints (STS, OAuth, Entra): only
			      * this machine (stand-ins, a local proxy) */
	FETCH_CRED_METADATA, /* metadata services: also their documented
			      * link-local addresses */
};

/*
 * Checks a URL that a credential, token or assertion goes to, or that
 * credentials come from (what: the variable or field that gave it, for the
 * message), as libcurl will read it (curl_url), never by its prefix: an
 * http:// or https:// URL with a host and no user name or password; plain
 * http only to an IP literal of this machine (127.0.0.0/8, ::1), to
 * "localhost" and "*.localhost" where libcurl resolves them to loopback
 * itself (7.85.0 on),
 * and with FETCH_CRED_METADATA to 169.254.169.254, 169.254.170.2,
 * 169.254.170.23, fd00:ec2::254 or fd00:ec2::23 (addresses compared as
 * addresses).  @return 0, or -EINVAL with *err naming the fix.
 */
int fetch_credential_url(const char *url, enum fetch_cred_url where,
			 const char *what, char **err) WHARF_CHECK;
/* Whether reads go through a site cache (--site-cache). */
bool fetch_site_cached(const struct fetch_engine *fe);

struct fetch_req {
	const char *url;	    /* caller-owned until the request ends */
	struct curl_slist *headers; /* extra headers, caller-owned, may be NULL */
	bool head;                  /* HEAD instead of GET */
	/* POST this body instead of GET (token exchanges); caller-owned. */
	const char *post;
	size_t post_len;
	/* With post: PUT it instead (IMDSv2's session token). */
	bool put;
	/* Range: bytes=off-(off+len-1).  len == 0: no Range header. */
	uint64_t range_off, range_len;
	/* The object's size as the reader pinned it, 0 when not known.  A
	 * 206 must name it as its Content-Range total; a 200 to a range (the
	 * whole object) must be as long. */
	uint64_t size;
	/* The object's version as the source pinned it (source_object's
	 * version, set by prepare_read), or NULL: every answer's validators
	 * must agree with it (fetch_version_mismatch), and a site cache
	 * keys its entry by it (sitecache.h). */
	const char *version;
	/*
	 * Body destination.  With grow == false the body goes into buf (cap
	 * bytes, caller-owned; a longer body is an error, a shorter one for a
	 * range is a short body and is retried).  With grow == true the engine
	 * mallocs and grows a buffer up to cap bytes (listings), hands it back
	 * in fetch_res.body, and the caller frees it.
	 */
	void *buf;
	size_t cap;
	bool grow;
	/* Optional: fills `headers` again before each retry (fresh signatures
	 * or tokens), on the engine's signer thread: it may block (a token
	 * fetch) and call fetch_run, with a request that has no resign of
	 * its own (its retries would wait for the same thread: fetch_run
	 * refuses one, -EDEADLK).  One thread
	 * signs for the whole engine: a slow one delays the others' retries,
	 * and an unmount waits for it.  Returns 0 or -errno. */
	int (*resign)(void *arg, struct fetch_req *req);
	void *resign_arg;
	/* Nobody waits for it yet (read-ahead, hints): it waits for room
	 * under its host's limit.  false: it starts at once. */
	bool background;
	/* Straight to the origin, never through the site cache: a read
	 * again of bytes that failed the origin's checksum. */
	bool origin_only;
};

struct fetch_res {
	long status;           /* last HTTP status, 0 when none came */
	void *body;            /* req.buf, or the grown buffer (caller frees) */
	size_t len;            /* body bytes */
	char etag[128];        /* ETag header, "" if none */
	char content_type[64]; /* Content-Type header, "" if none */
	int64_t mtime;         /* Last-Modified as epoch seconds, 0 if none */
	int64_t content_length; /* -1 if none */
	uint64_t total_size;   /* from Content-Range ".../N", 0 if none */
	unsigned attempts;     /* 1 + retries made */
	uint64_t ttfb_ns;      /* first byte latency of the successful attempt */
	char err[512];         /* on failure: URL, range, what the origin said */
	/* An error answer's <Code> (S3, STS: "ExpiredToken"), "" when none:
	 * what tells an expired credential from a denied one. */
	char code[48];
};

/* The answer refused the request's credentials as expired or revoked:
 * a 401, or a 400 or 403 whose code says so (S3's ExpiredToken,
 * TokenRefreshRequired).  Worth one retry with renewed credentials. */
bool fetch_auth_expired(const struct fetch_res *res);

/* What a response's headers say beyond struct fetch_res. */
struct fetch_head {
	char reason[64];   /* status line text after the code */
	char encoding[24]; /* a Content-Encoding other than identity */
	char range[80];	   /* Content-Range as sent, "" when none came */
	/* It read "bytes FIRST-LAST/TOTAL" (TOTAL in fetch_res.total_size,
	 * 0 for "*"); false when none came or it says anything else (a
	 * 416's unsatisfied range). */
	bool range_ok;
	uint64_t range_first, range_last;
	char generation[24]; /* x-goog-generation (GCS), "" when none came */
};

/*
 * Takes in one header line as the origin sent it (n bytes, CRLF included,
 * not NUL-terminated): a status line resets res's header fields and *h;
 * ETag, Content-Type, Last-Modified, Content-Length, Content-Encoding and
 * Content-Range fill them.  The engine's own parser, declared for its fuzz
 * target (tests/fuzz).
 */
void fetch_header_line(const char *line, size_t n, struct fetch_res *res,
		       struct fetch_head *h);

/*
 * Whether the answer whose status and headers are in res and h fits req,
 * a ranged GET: a 206 must carry a Content-Range of exactly the bytes
 * asked (cut at the object's end), with req->size as its total when that
 * is pinned, and as many body bytes as it names; a 200 (the whole object:
 * the origin ignored Range) must be req->size bytes long when it says its
 * length.  Anything else would put other bytes in the range.
 * @return NULL when it fits (or req has no range, or the status is
 * another), else buf, saying what came and what was asked.
 */
const char *fetch_range_mismatch(const struct fetch_req *req, long status,
				 const struct fetch_res *res,
				 const struct fetch_head *h, char *buf,
				 size_t cap);

/*
 * A pinned version (fetch_req.version) as what an answer carries, in the
 * forms the sources give: an ETag as the origin sent it, quoted, weak or
 * strong; a GCS generation, digits; an HTTP origin's "t<mtime>-s<size>"
 * (its listing gave no ETag).  FV_NONE for anything else: a size alone,
 * an unquoted ETag of a manifest, no version.
 */
enum fetch_version_kind { FV_NONE, FV_ETAG, FV_GENERATION, FV_MTIME };
struct fetch_version {
	enum fetch_version_kind kind;
	const char *text; /* the version as pinned (FV_ETAG, FV_GENERATION) */
	int64_t mtime;	  /* FV_MTIME: seconds since the epoch */
};
struct fetch_version fetch_version_of(const char *version);

/*
 * Whether the 2xx answer whose headers are in res and h is of another
 * version than req pinned (req->version): its ETag (compared weakly: a W/
 * prefix on either side is not a change), its x-goog-generation, or its
 * Last-Modified (a pinned time on the minute, from a listing that shows
 * no seconds, stands for that whole minute).  A validator the answer does
 * not carry is not compared; the size is fetch_range_mismatch's.
 * @return NULL when it is the pinned version (or nothing to compare),
 * else buf, saying what was pinned and what came.
 */
const char *fetch_version_mismatch(const struct fetch_req *req, long status,
				   const struct fetch_res *res,
				   const struct fetch_head *h, char *buf,
				   size_t cap);

/* @return 0, or -errno (-ENOMEM, -EINVAL) with nothing allocated. */
int fetch_engine_new(const struct fetch_config *cfg,
		     struct fetch_engine **out) WHARF_CHECK;
/* Waits for requests in flight to finish, then frees everything. */
void fetch_engine_free(struct fetch_engine *fe);

/*
 * Ends every request in flight, waiting for room or sleeping before a
 * retry, and every later one: fetch_run returns -ECANCELED.  For a mount
 * that stops while an origin is slow to answer.  Any thread.
 */
void fetch_engine_cancel(struct fetch_engine *fe);
/* A byte written to this fd cancels the engine as fetch_engine_cancel
 * does: for a signal handler, where write(2) is safe and locks are not. */
int fetch_engine_cancel_fd(const struct fetch_engine *fe);

/*
 * Performs req with retries, blocking only the calling thread.
 * @return 0 on 2xx with the whole body (and for a range, exactly range_len
 * bytes unless the object ends earlier, which total_size then shows);
 * -ENOENT for 404/410, -EACCES for 401/403, -ESTALE for 412 or an answer
 * of another version than req->version, -EKEYREJECTED when the TLS peer
 * could not be verified (not retried), -EIO after retries ran out, -EFBIG
 * when the body exceeds cap, -ENOMEM, -ECANCELED once the engine is
 * cancelled, -EDEADLK for a request with a resign made inside a resign.  On
 * any error res->err says what happened.
 */
int fetch_run(struct fetch_engine *fe, const struct fetch_req *req,
	      struct fetch_res *res) WHARF_CHECK;

/* A submitted request's end: rc as fetch_run would return it. */
typedef void fetch_done_fn(void *arg, int rc);

/*
 * fetch_run without the wait: the engine makes the attempts, their
 * backoffs on its own timers, and then calls done(arg, rc) once, on one of
 * its threads; done must not block (it hands the result on).  req is
 * copied, but what it points to (url, headers, buf, post, resign_arg) and
 * res stay the caller's, untouched by the caller, until done runs.
 * @return 0 (done will run), or -EINVAL/-ENOMEM with res->err set and
 * done never run.
 */
int fetch_submit(struct fetch_engine *fe, const struct fetch_req *req,
		 struct fetch_res *res, fetch_done_fn *done,
		 void *arg) WHARF_CHECK;

/* Upper bounds of the first-byte buckets that metrics show, in ns. */
#define FETCH_TTFB_BUCKETS 14
extern const uint64_t fetch_ttfb_le_ns[FETCH_TTFB_BUCKETS];

struct fetch_stats {
	uint64_t requests;    /* attempts sent to the origin */
	uint64_t retries;
	uint64_t errors;      /* requests that failed, but for ... */
	uint64_t gave_up;     /* ... background ones (read-ahead, hints):
			       * no reader had asked for them yet */
	uint64_t bytes;       /* body bytes received */
	uint64_t ttfb_p50_ns, ttfb_p90_ns, ttfb_p99_ns;
	uint64_t connects;    /* new connections opened (reuse shows here) */
	uint64_t hedges;      /* second transfers sent for late requests */
	uint64_t hedge_wins;  /* ... that answered first */
	/* First-byte latency as metrics show it: successful requests in
	 * each bucket of fetch_ttfb_le_ns and below (cumulative; the count
	 * is the last bucket, +Inf), and their sum. */
	uint64_t ttfb_le[FETCH_TTFB_BUCKETS + 1];
	uint64_t ttfb_sum_ns;
};
/* A consistent snapshot; cheap (no lock on the request path). */
void fetch_get_stats(struct fetch_engine *fe, struct fetch_stats *out);

/*
 * From now on, requests wait out an outage of their origin (outage_wait_ms,
 * see the top): for a mount that is up.  Before that (a mount starting,
 * whose origin must answer within --origin-wait or is taken as offline),
 * and with outage_wait_ms 0, a request that meets one fails as any
 * failure does.  Any thread.
 */
void fetch_outage_arm(struct fetch_engine *fe);

/* The engine's outages as they stand (atomic loads, no lock). */
struct fetch_outage {
	unsigned hosts;	     /* hosts in an outage now (0: none) */
	uint64_t since_ns;   /* now_ns() when the oldest of them began */
	int64_t since_unix;  /* the same as seconds since the epoch */
	unsigned waiting;    /* requests a reader waits for, retrying now */
	uint64_t outages;    /* outages begun since the engine started */
	uint64_t waited;     /* requests a reader waited for in one */
	uint64_t wait_ms;    /* outage_wait_ms when armed, else 0 */
};
void fetch_get_outage(struct fetch_engine *fe, struct fetch_outage *out);

#define FETCH_HOST_MAX 128
/* One origin host's controller, as it last published itself. */
struct fetch_host_stats {
	char host[FETCH_HOST_MAX]; /* "https://bucket.s3.amazonaws.com" */
	unsigned limit;		   /* requests it may have in flight */
	unsigned ceiling;	   /* max_connections */
	unsigned running, waiting; /* transfers now, background waiting */
	uint64_t latency_ns;	   /* first byte after sending, average */
	uint64_t throughput;	   /* bytes/s over the last epoch */
	uint64_t backoffs, changes;
	uint64_t changed_ns; /* now_ns() of the last change */
	char why[160];	     /* "32 -> 64: throughput rose to ..." */
};
/* Copies up to max hosts' figures into out.  @return how many. */
unsigned fetch_get_hosts(struct fetch_engine *fe, struct fetch_host_stats *out,
			 unsigned max);
/* The largest limit any host has now (an atomic load): what the prefetch
 * pool sizes itself by. */
unsigned fetch_concurrency(struct fetch_engine *fe);

#endif
