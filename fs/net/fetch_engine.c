/*
 * The fetch engine (fetch.h): its threads, the curl multi handle, and a
 * request's way through them; fetch_i.h names the files beside it.
 *
 * The engine thread owns the multi handle and every easy handle.  A request
 * is a struct call: fetch_run keeps it on the caller's stack and sleeps
 * until its callback wakes it; fetch_submit allocates it and returns.  The
 * engine runs each attempt as a struct xfer, judges it, and either ends the
 * call (its callback runs) or sets a timer for the next attempt after the
 * backoff, so no thread is held by a request in flight or by a retry
 * waiting.  A retry whose request must be signed again (req.resign) is
 * signed on the engine's signer thread: signing may fetch a token, which
 * needs the engine thread free.
 *
 * Each origin host (scheme://authority) has a controller (conc.h) that
 * sets how many of its transfers run at once.  A background request
 * (prefetch) waits in its host's list while the host is at its limit; a
 * request a reader waits for starts at once, bounded only by the ceiling
 * (max_connections, which curl enforces).
 */
#include "config.h"

#include "fetch_i.h"
#include "log.h"
#include "units.h"
#include "url.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CANCELLED "cancelled: the mount is stopping"
#define RETRY_WARNS 20 /* retry warnings logged a second, at most */

/* ---- configuration ---- */

void fetch_no_redirect(struct fetch_engine *fe)
{
	if (fe) /* a source opened without one, to check its spec */
		fe->no_redirect = true;
}

int fetch_credentials(const struct fetch_engine *fe, const char *origin,
		      const char *who, const char *what, char **err)
{
	int rc;

	if (!fe)
		return 0;
	rc = fetch_trust_origin(origin, fe->cfg.insecure_credentials, who, what,
				err);
	return rc ? rc
		  : sitecache_credentials(
			fe->site_cache, fe->cfg.site_cache_insecure_credentials,
			who, what, err);
}

bool fetch_site_cached(const struct fetch_engine *fe)
{
	return fe && fe->site_cache;
}

void fetch_config_default(struct fetch_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_connections = 256;
	cfg->retries = 5;
	cfg->retry_budget_ms = 30000;
	cfg->connect_timeout_ms = 10000;
	cfg->stall_timeout_ms = 30000;
	cfg->outage_wait_ms = 600000;
	cfg->hedge = true;
}

/* ---- a request's attempts ---- */

/* Whether the engine is cancelled: every request then ends as such. */
static bool is_cancelled(struct fetch_engine *fe)
{
	return __atomic_load_n(&fe->cancelled, __ATOMIC_ACQUIRE);
}

/* The URL as logs show it: no query string (it may carry a signature). */
static const char *method_of(const struct fetch_req *req)
{
	return req->head   ? "HEAD"
	       : req->post ? (req->put ? "PUT" : "POST")
			   : "GET";
}

/* The request as log lines name it: method, URL without its secrets, range,
 * and the site cache it went through. */
struct call_name {
	char url[256], range[48];
	bool via;
};

static void call_name(const struct fetch_engine *fe, const struct call *c,
		      struct call_name *n)
{
	const struct fetch_req *req = &c->r;

	url_redact(req->url, n->url, sizeof(n->url));
	n->range[0] = '\0';
	if (req->range_len)
		snprintf(n->range, sizeof(n->range),
			 " bytes=%" PRIu64 "-%" PRIu64, req->range_off,
			 req->range_off + req->range_len - 1);
	n->via = sitecache_routes(fe->site_cache, req);
}

/* Readies c's next attempt: an empty result (each attempt starts from an
 * empty body and fresh headers) and a fresh xfer.  The thread that holds
 * c. */
static void attempt_reset(struct fetch_engine *fe, struct call *c)
{
	struct fetch_res *res = c->res;

	memset(&c->x, 0, sizeof(c->x));
	c->x.req = &c->r;
	c->x.res = res;
	res->len = 0;
	res->status = 0;
	res->etag[0] = res->content_type[0] = res->code[0] = '\0';
	res->mtime = 0;
	res->content_length = -1;
	res->total_size = 0;
	res->ttfb_ns = 0;
	if (c->r.grow) {
		free(res->body);
		res->body = NULL;
	} else {
		res->body = c->r.buf;
	}
	STAT_ADD(fe->st.requests, 1);
}

/* Hands an attempt to the engine thread. */
static void queue_attempt(struct fetch_engine *fe, struct call *c)
{
	pthread_mutex_lock(&fe->lock);
	if (fe->queue_tail)
		fe->queue_tail->next = &c->x;
	else
		fe->queue = &c->x;
	fe->queue_tail = &c->x;
	pthread_mutex_unlock(&fe->lock);
	curl_multi_wakeup(fe->multi);
}

/*
 * The call's result is final: counts it, says what failed, and runs its
 * callback.  c is freed (or, on fetch_run's stack, given back) before the
 * callback runs, so nothing touches it after.  Any engine thread.
 */
static void call_end(struct fetch_engine *fe, struct call *c, int rc,
		     const char *what)
{
	struct fetch_res *res = c->res;
	fetch_done_fn *const done = c->done;
	void *const arg = c->arg;
	struct call_name n;

	fetch_outage_call_end(fe, c);
	if (!rc) {
		fetch_stats_ttfb(fe, res->ttfb_ns);
	} else {
		call_name(fe, c, &n);
		snprintf(res->err, sizeof(res->err),
			 "%s %s%s%s%s: %s (after %u attempt%s%s)",
			 method_of(&c->r), n.url, n.range,
			 n.via ? " through the site cache " : "",
			 n.via ? fe->site_cache : "", what, res->attempts,
			 res->attempts == 1 ? "" : "s",
			 c->outage_over ? " over --outage-wait" : "");
		/* Background work that gave up is no reader's error: its
		 * caller says what becomes of it (prefetch: a reader that
		 * needs the chunk asks again). */
		if (rc == -ENOENT || rc == -ECANCELED || c->r.background)
			log_debug("%s", res->err);
		else
			log_error_limited("%s", res->err);
		if (c->r.background)
			STAT_ADD(fe->st.gave_up, 1);
		else
			STAT_ADD(fe->st.errors, 1);
		if (c->r.grow) {
			free(res->body);
			res->body = NULL;
		}
		res->len = 0;
	}
	if (c->owned)
		free(c);
	done(arg, rc);
}

/* Says that c is retried: at most RETRY_WARNS lines a second (a refusing
 * origin under hundreds of loads must not have the engine thread spend
 * itself on logging); the rest are counted and said with the next. */
static void retry_warn(struct fetch_engine *fe, const struct call *c,
		       const char *what, uint64_t wait_ms)
{
	static struct log_limit limit = LOG_LIMIT_INIT(RETRY_WARNS, 1);
	struct call_name n;

	call_name(fe, c, &n);
	log_limited(&limit, WHARF_LOG_WARN,
		    "%s %s%s: %s (attempt %u, retrying in %" PRIu64 " ms)",
		    method_of(&c->r), n.url, n.range, what, c->n + 1, wait_ms);
}

/* Puts c in the timer list, soonest first (retries are few: a walk). */
static void timer_add(struct fetch_engine *fe, struct call *c)
{
	struct call **p = &fe->timers;

	while (*p && (*p)->due_ns <= c->due_ns)
		p = &(*p)->later;
	c->later = *p;
	*p = c;
}

/* Host h answered after an outage: its retries waiting out a backoff go
 * now, so that its readers wait no longer than it was away. */
static void timers_wake_host(struct fetch_engine *fe, const struct host *h)
{
	struct call **p = &fe->timers, *woken = NULL, *c;
	const uint64_t now = now_ns();

	while ((c = *p)) {
		if (c->x.host != h) {
			p = &c->later;
			continue;
		}
		*p = c->later;
		c->later = woken;
		woken = c;
	}
	while ((c = woken)) {
		woken = c->later;
		c->due_ns = now;
		timer_add(fe, c);
	}
}

/*
 * An attempt of c ended (engine thread): the call ends, or its next
 * attempt waits in the timer list for the backoff that fetch_retry_when
 * gives it, within the retry count and budget.
 */
static void call_attempt_done(struct fetch_engine *fe, struct call *c)
{
	struct fetch_res *res = c->res;
	char what[160];
	uint64_t wait_ms;
	enum fetch_verdict v;
	int rc = 0;

	res->attempts = c->n + 1;
	STAT_ADD(fe->st.bytes, res->len);
	if (is_cancelled(fe)) {
		call_end(fe, c, -ECANCELED, CANCELLED);
		return;
	}
	v = fetch_judge(&c->x, &rc, what, sizeof(what));
	if (fetch_outage_note(fe, c, v, what))
		timers_wake_host(fe, c->x.host);
	if (v == V_OK) {
		call_end(fe, c, 0, NULL);
		return;
	}
	if (!rc)
		rc = -EIO;
	if (v == V_FAIL || !fetch_retry_when(fe, c, v, &wait_ms)) {
		call_end(fe, c, rc, what);
		return;
	}
	if (fetch_outage_retrying(fe, c, v))
		retry_warn(fe, c, what, wait_ms);
	STAT_ADD(fe->st.retries, 1);
	c->n++;
	timer_add(fe, c);
}

/* The call an attempt belongs to. */
static struct call *call_of(struct xfer *x)
{
	return (struct call *)((char *)x - offsetof(struct call, x));
}

/* An attempt ended with cc: its call goes on or ends. */
static void xfer_finish(struct fetch_engine *fe, struct xfer *x, CURLcode cc)
{
	x->cc = cc;
	call_attempt_done(fe, call_of(x));
}

/* ---- the signer thread ---- */

/* A retry to sign again goes to the signer thread (engine thread). */
static void signer_add(struct fetch_engine *fe, struct call *c)
{
	pthread_mutex_lock(&fe->lock);
	c->later = NULL;
	if (fe->sign_tail)
		fe->sign_tail->later = c;
	else
		fe->sign_head = c;
	fe->sign_tail = c;
	fe->signing++;
	pthread_cond_signal(&fe->sign_cond);
	pthread_mutex_unlock(&fe->lock);
}

/* The signer thread: signs retries again (resign may fetch a token
 * through this engine, so it cannot run on the engine thread). */
static void *signer_main(void *arg)
{
	struct fetch_engine *fe = arg;
	struct call *c;
	char what[160];
	int rc;

	for (;;) {
		pthread_mutex_lock(&fe->lock);
		while (!fe->sign_head && !fe->sign_stop)
			pthread_cond_wait(&fe->sign_cond, &fe->lock);
		c = fe->sign_head;
		if (c) {
			fe->sign_head = c->later;
			if (!fe->sign_head)
				fe->sign_tail = NULL;
		}
		pthread_mutex_unlock(&fe->lock);
		if (!c)
			return NULL;
		rc = is_cancelled(fe) ? -ECANCELED
				      : c->r.resign(c->r.resign_arg, &c->r);
		/* A token fetch cut short by the cancel fails as it may
		 * (-EACCES): the call ends as cancelled all the same. */
		if (rc && is_cancelled(fe))
			rc = -ECANCELED;
		if (!rc) {
			attempt_reset(fe, c);
			/* queued before `signing` drops: the engine's stop
			 * test sees one or the other */
			queue_attempt(fe, c);
		} else if (rc == -ECANCELED) {
			call_end(fe, c, rc, CANCELLED);
		} else {
			snprintf(what, sizeof(what),
				 "signing the retry failed: %s", strerror(-rc));
			call_end(fe, c, rc, what);
		}
		pthread_mutex_lock(&fe->lock);
		fe->signing--;
		pthread_mutex_unlock(&fe->lock);
		curl_multi_wakeup(fe->multi);
	}
}

/* Ends the signer thread (once the engine has nothing left for it). */
static void signer_stop(struct fetch_engine *fe)
{
	pthread_mutex_lock(&fe->lock);
	fe->sign_stop = true;
	pthread_cond_signal(&fe->sign_cond);
	pthread_mutex_unlock(&fe->lock);
	pthread_join(fe->signer, NULL);
}

/* ---- legs: transfers on the multi handle ---- */

static void run_link(struct fetch_engine *fe, struct xfer *x)
{
	x->run_prev = NULL;
	x->run_next = fe->run_head;
	if (fe->run_head)
		fe->run_head->run_prev = x;
	fe->run_head = x;
}

static void run_unlink(struct fetch_engine *fe, struct xfer *x)
{
	if (x->run_prev)
		x->run_prev->run_next = x->run_next;
	else
		fe->run_head = x->run_next;
	if (x->run_next)
		x->run_next->run_prev = x->run_prev;
}

/* Puts a leg on the multi handle; false when it could not. */
static bool leg_start(struct fetch_engine *fe, struct leg *l)
{
	l->easy = fetch_easy_get(fe);
	if (!l->easy)
		return false;
	if (fetch_easy_setup(fe, l) ||
	    curl_multi_add_handle(fe->multi, l->easy) != CURLM_OK) {
		fetch_easy_put(fe, l->easy, false);
		l->easy = NULL;
		return false;
	}
	l->added_ns = now_ns();
	fe->running++;
	l->x->host->running++;
	return true;
}

/* Takes a leg off the multi handle; its handle is kept for reuse when
 * its transfer ended well. */
static void leg_stop(struct fetch_engine *fe, struct leg *l, bool reuse)
{
	long nc = 0;

	if (curl_easy_getinfo(l->easy, CURLINFO_NUM_CONNECTS, &nc) ==
		CURLE_OK &&
	    nc > 0)
		STAT_ADD(fe->st.connects, (uint64_t)nc);
	curl_multi_remove_handle(fe->multi, l->easy);
	fetch_easy_put(fe, l->easy, reuse);
	l->easy = NULL;
	fe->running--;
	l->x->host->running--;
}

/* Server latency of a leg: first response byte after the request went
 * out, so time spent waiting for a connection does not count. */
static bool leg_latency(const struct leg *l, uint64_t *ns)
{
	curl_off_t pre = 0, first = 0;

	if (curl_easy_getinfo(l->easy, CURLINFO_PRETRANSFER_TIME_T, &pre) !=
		CURLE_OK ||
	    curl_easy_getinfo(l->easy, CURLINFO_STARTTRANSFER_TIME_T, &first) !=
		CURLE_OK ||
	    first <= 0 || first < pre)
		return false;
	*ns = (uint64_t)(first - pre) * 1000;
	return true;
}

/* Starts an attempt on its first leg; each one earns hedge budget. */
static void xfer_start(struct fetch_engine *fe, struct xfer *x)
{
	if (!leg_start(fe, &x->leg[0])) {
		xfer_finish(fe, x, CURLE_FAILED_INIT);
		return;
	}
	run_link(fe, x);
	fetch_hedge_earn(fe);
}

/* Sends a second leg for each request that fetch_hedge.c finds late.
 * @return how long the engine may sleep before it looks again. */
static long hedge_late(struct fetch_engine *fe)
{
	struct hedge_scan s;
	struct xfer *x;

	fetch_hedge_scan_begin(fe, &s);
	while ((x = fetch_hedge_next(fe, &s)))
		if (leg_start(fe, &x->leg[1]))
			fetch_hedge_started(fe);
	return fetch_hedge_wait_ms(&s);
}

/* ---- hosts: their limits, and who waits for room ---- */

/* The host of a URL, "scheme://authority", found or added. */
static struct host *host_of(struct fetch_engine *fe, const char *url)
{
	const char *sep = strstr(url, "://");
	size_t n = sep ? (size_t)(sep + 3 - url) : 0;
	struct host *h;
	unsigned i;

	n += strcspn(url + n, "/?#");
	if (n >= FETCH_HOST_MAX)
		n = FETCH_HOST_MAX - 1;
	for (i = 0; i < fe->nhosts; i++) {
		h = &fe->hosts[i];
		if (!strncmp(h->name, url, n) && !h->name[n])
			return h;
	}
	if (fe->nhosts == HOSTS_MAX)
		return &fe->hosts[HOSTS_MAX - 1];
	h = &fe->hosts[fe->nhosts];
	memcpy(h->name, url, n);
	h->name[n] = '\0';
	conc_init(&h->conc, fe->cfg.max_connections, now_ns());
	memcpy(h->pub.host, h->name, sizeof(h->pub.host));
	pthread_mutex_lock(&fe->lock);
	fe->nhosts++;
	pthread_mutex_unlock(&fe->lock);
	fetch_host_publish(fe, h);
	return h;
}

/* Connection failures that say the origin (or the path to it) is
 * overloaded, as opposed to our own aborts or a bad request. */
static bool cc_congestion(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
		return true;
	default:
		return false;
	}
}

/*
 * Whether x's answer was cut mid-body: the origin took the request and
 * began to send (a 2xx, body bytes came), then the connection broke.
 * That is a proxy's or load balancer's idle cut, a drained connection, a
 * flaky link: not the origin saying it has too much to do.  With 30% of
 * bodies cut, halving on each held the limit at 1 (bench/fs-faults; the
 * figures in bench/RESULTS.md); an overloaded origin refuses, times out
 * or stops taking connections, and those still back off.
 */
static bool cut_mid_body(const struct xfer *x, CURLcode cc)
{
	return x->body_checked && !x->discard &&
	       (cc == CURLE_PARTIAL_FILE || cc == CURLE_RECV_ERROR);
}

/* A request failed: a refusal (429, 503) or a broken connection (but for
 * a body cut short) tells the host's controller to back off. */
static void host_judge_failure(struct fetch_engine *fe, struct xfer *x,
			       CURLcode cc)
{
	struct host *h = x->host;
	char what[64];

	if (cc == CURLE_OK && (x->res->status == 429 || x->res->status == 503))
		snprintf(what, sizeof(what), "HTTP %ld", x->res->status);
	else if (cc != CURLE_OK && cc_congestion(cc) && !cut_mid_body(x, cc))
		snprintf(what, sizeof(what), "%s", curl_easy_strerror(cc));
	else
		return;
	/* h->running still counts this leg: it was in flight when refused */
	if (conc_congested(&h->conc, h->running, what, now_ns()))
		fetch_host_publish(fe, h);
}

/* Starts the waiting requests of h that its limit has room for. */
static void host_admit(struct fetch_engine *fe, struct host *h)
{
	struct xfer *x;

	while (h->wait_head && h->running < h->conc.limit) {
		x = h->wait_head;
		h->wait_head = x->next;
		if (!h->wait_head)
			h->wait_tail = NULL;
		h->waiting--;
		fe->waiting--;
		xfer_start(fe, x);
	}
}

/* Starts an attempt, or puts it in its host's waiting list. */
static void xfer_begin(struct fetch_engine *fe, struct xfer *x)
{
	struct host *h;

	if (is_cancelled(fe)) {
		xfer_finish(fe, x, CURLE_ABORTED_BY_CALLBACK);
		return;
	}
	x->leg[0].x = x->leg[1].x = x;
	x->kind =
	    x->req->head || x->req->post || x->req->grow ? K_META : K_DATA;
	h = x->host = host_of(fe, x->req->url);
	if (!x->req->background ||
	    (!h->wait_head && h->running < h->conc.limit)) {
		xfer_start(fe, x);
		return;
	}
	/* Background work beyond the limit waits its turn, and tells the
	 * controller that the limit is what holds it back. */
	conc_waited(&h->conc);
	if (h->wait_tail)
		h->wait_tail->next = x;
	else
		h->wait_head = x;
	h->wait_tail = x;
	h->waiting++;
	fe->waiting++;
}

/* Each turn of the loop: lets each controller decide, then starts what
 * the limits now allow.  The figures are published when the controller
 * changes its mind or an epoch ends, not at every turn (the stats'
 * in-flight counts are those of the last epoch). */
static void hosts_turn(struct fetch_engine *fe)
{
	const uint64_t now = now_ns();

	for (unsigned i = 0; i < fe->nhosts; i++) {
		struct host *h = &fe->hosts[i];
		const uint64_t epoch = h->conc.epoch_ns;

		if (conc_tick(&h->conc, h->running || h->waiting, now) ||
		    (h->conc.epoch_ns != epoch &&
		     (h->running || h->waiting || h->pub.running ||
		      h->pub.waiting)))
			fetch_host_publish(fe, h);
		host_admit(fe, h);
	}
}

/* ---- the engine thread ---- */

/* A redirect to a scheme other than http(s) was refused: the error names
 * the answer and where it pointed (url_redact: it may be signed). */
static void redirect_refused(struct xfer *x, const struct leg *l)
{
	const long st = x->res->status;
	char *to = NULL, where[160];

	if (st < 300 || st > 399 ||
	    curl_easy_getinfo(l->easy, CURLINFO_EFFECTIVE_URL, &to) !=
		CURLE_OK ||
	    !to)
		return;
	url_redact(to, where, sizeof(where));
	snprintf(x->errbuf, sizeof(x->errbuf),
		 "HTTP %ld redirects to %s: only http:// and https:// "
		 "redirects are followed",
		 st, where);
}

/* A leg ended with cc.  The request ends with its winner, or with the last
 * leg when none got an answer; a loser just goes. */
static void leg_done(struct fetch_engine *fe, struct leg *l, CURLcode cc)
{
	struct xfer *x = l->x;
	struct leg *other = &x->leg[l == &x->leg[0]];
	curl_off_t ttfb_us = 0;
	uint64_t lat;

	if (x->winner && x->winner != l) {
		leg_stop(fe, l, cc == CURLE_OK);
		return;
	}
	if (!x->winner && other->easy) {
		/* No byte came on this leg; the other may still answer. */
		leg_stop(fe, l, cc == CURLE_OK);
		return;
	}
	curl_easy_getinfo(l->easy, CURLINFO_RESPONSE_CODE, &x->res->status);
	/* time to the first response byte, headers included */
	if (curl_easy_getinfo(l->easy, CURLINFO_STARTTRANSFER_TIME_T,
			      &ttfb_us) == CURLE_OK &&
	    ttfb_us > 0)
		x->res->ttfb_ns = (uint64_t)ttfb_us * 1000;
	if (cc == CURLE_OK && x->res->status >= 200 && x->res->status < 300) {
		if (!leg_latency(l, &lat))
			lat = 0;
		else
			fetch_hedge_sample(fe, x->kind, lat);
		conc_done(&x->host->conc, lat, now_ns() - l->added_ns,
			  x->res->len);
	} else {
		host_judge_failure(fe, x, cc);
	}
	if (x->hedged && l == &x->leg[1] && cc == CURLE_OK)
		STAT_ADD(fe->st.hedge_wins, 1);
	memcpy(x->errbuf, l->errbuf, sizeof(x->errbuf));
	if (cc == CURLE_UNSUPPORTED_PROTOCOL)
		redirect_refused(x, l);
	leg_stop(fe, l, cc == CURLE_OK);
	if (other->easy)
		leg_stop(fe, other, false); /* cut off mid-transfer */
	run_unlink(fe, x);
	xfer_finish(fe, x, cc);
}

/*
 * The engine was told to cancel: every request in flight or waiting for
 * room ends now (its caller sees -ECANCELED), and so does every later
 * one.  Engine thread only.
 */
static void engine_cancel(struct fetch_engine *fe)
{
	struct xfer *x;
	char drain[64];

	while (read(fe->cancel_pipe[0], drain, sizeof(drain)) > 0)
		;
	__atomic_store_n(&fe->cancelled, true, __ATOMIC_RELEASE);
	while ((x = fe->run_head)) {
		for (int i = 0; i < 2; i++)
			if (x->leg[i].easy)
				leg_stop(fe, &x->leg[i], false);
		run_unlink(fe, x);
		xfer_finish(fe, x, CURLE_ABORTED_BY_CALLBACK);
	}
	for (unsigned i = 0; i < fe->nhosts; i++) {
		struct host *h = &fe->hosts[i];

		while ((x = h->wait_head)) {
			h->wait_head = x->next;
			h->waiting--;
			fe->waiting--;
			xfer_finish(fe, x, CURLE_ABORTED_BY_CALLBACK);
		}
		h->wait_tail = NULL;
	}
	/* Retries waiting out their backoff end too (the signer ends its
	 * own: it sees `cancelled`). */
	while (fe->timers) {
		struct call *c = fe->timers;

		fe->timers = c->later;
		call_end(fe, c, -ECANCELED, CANCELLED);
	}
}

static void engine_start_queued(struct fetch_engine *fe)
{
	struct xfer *q, *x;

	pthread_mutex_lock(&fe->lock);
	q = fe->queue;
	fe->queue = fe->queue_tail = NULL;
	pthread_mutex_unlock(&fe->lock);

	while ((x = q)) {
		q = x->next;
		x->next = NULL;
		xfer_begin(fe, x);
	}
}

/* Starts the retries whose backoff is over. */
static void timers_run(struct fetch_engine *fe)
{
	const uint64_t now = now_ns();
	struct call *c;

	while ((c = fe->timers) && c->due_ns <= now) {
		fe->timers = c->later;
		c->later = NULL;
		if (c->r.resign) {
			signer_add(fe, c);
			continue;
		}
		attempt_reset(fe, c);
		xfer_begin(fe, &c->x);
	}
}

/* How long the engine may sleep before a retry is due (at most 1 s). */
static long timers_wait_ms(const struct fetch_engine *fe)
{
	const uint64_t now = now_ns();

	if (!fe->timers)
		return 1000;
	if (fe->timers->due_ns <= now)
		return 0;
	if (fe->timers->due_ns - now >= 1000000000ull)
		return 1000;
	return (long)((fe->timers->due_ns - now) / 1000000) + 1;
}

static void *engine_main(void *arg)
{
	struct fetch_engine *fe = arg;
	struct curl_waitfd cancel = {.fd = fe->cancel_pipe[0],
				     .events = CURL_WAIT_POLLIN};

	for (;;) {
		CURLMsg *m;
		int still, left;
		long wait_ms, timer_ms;
		bool stop;

		engine_start_queued(fe);
		timers_run(fe);
		curl_multi_perform(fe->multi, &still);
		while ((m = curl_multi_info_read(fe->multi, &left))) {
			struct leg *l = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  (char **)&l);
			leg_done(fe, l, m->data.result);
		}
		hosts_turn(fe);
		pthread_mutex_lock(&fe->lock);
		stop = fe->stop && !fe->queue && !fe->running && !fe->waiting &&
		       !fe->timers && !fe->signing;
		pthread_mutex_unlock(&fe->lock);
		if (stop)
			break;
		wait_ms = hedge_late(fe);
		timer_ms = timers_wait_ms(fe);
		if (timer_ms < wait_ms)
			wait_ms = timer_ms;
		/* curl_multi_wakeup() ends this wait when work is queued, a
		 * byte in the cancel pipe when the engine is cancelled. */
		cancel.revents = 0;
		curl_multi_poll(fe->multi, &cancel, 1,
				(int)(wait_ms < 1000 ? wait_ms : 1000), NULL);
		if (cancel.revents)
			engine_cancel(fe);
	}
	return NULL;
}

/* ---- public: the engine's life ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int fetch_engine_new(const struct fetch_config *cfg, struct fetch_engine **out)
{
	struct fetch_engine *fe;
	long maxc;
	int rc;

	*out = NULL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return -ENOMEM;
	fe = calloc(1, sizeof(*fe));
	if (!fe)
		return -ENOMEM;
	if (cfg)
		fe->cfg = *cfg;
	else
		fetch_config_default(&fe->cfg);
	if (!fe->cfg.max_connections)
		fe->cfg.max_connections = 256;
	fe->user_agent = fe->cfg.user_agent ? strdup(fe->cfg.user_agent)
					    : strdup("wharf/" PACKAGE_VERSION);
	fe->ca_file = fe->cfg.ca_file ? strdup(fe->cfg.ca_file) : NULL;
	fe->no_proxy = fetch_trust_no_proxy();
	rc = sitecache_base(fe->cfg.site_cache, &fe->site_cache);
	if (rc)
		goto fail;
	fe->cfg.user_agent = fe->user_agent;
	fe->cfg.ca_file = fe->ca_file;
	fe->cfg.site_cache = fe->site_cache;
	fe->multi = curl_multi_init();
	if (!fe->user_agent || (cfg && cfg->ca_file && !fe->ca_file) ||
	    !fe->no_proxy || !fe->multi) {
		rc = -ENOMEM;
		goto fail;
	}
	maxc = (long)fe->cfg.max_connections;
	if (curl_multi_setopt(fe->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
			      maxc) != CURLM_OK ||
	    curl_multi_setopt(fe->multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxc) !=
		CURLM_OK ||
	    curl_multi_setopt(fe->multi, CURLMOPT_MAXCONNECTS, maxc * 2) !=
		CURLM_OK ||
	    curl_multi_setopt(fe->multi, CURLMOPT_PIPELINING,
			      (long)CURLPIPE_MULTIPLEX) != CURLM_OK) {
		rc = -EINVAL;
		goto fail;
	}
	if (pipe2(fe->cancel_pipe, O_CLOEXEC | O_NONBLOCK)) {
		rc = -errno;
		goto fail;
	}
	pthread_mutex_init(&fe->lock, NULL);
	pthread_cond_init(&fe->sign_cond, NULL);
	rc = -pthread_create(&fe->signer, NULL, signer_main, fe);
	if (rc)
		goto fail_sync;
	rc = -pthread_create(&fe->thread, NULL, engine_main, fe);
	if (rc) {
		signer_stop(fe);
		goto fail_sync;
	}
	*out = fe;
	return 0;
fail_sync:
	pthread_mutex_destroy(&fe->lock);
	pthread_cond_destroy(&fe->sign_cond);
fail:
	if (fe->cancel_pipe[1] > 0) {
		close(fe->cancel_pipe[0]);
		close(fe->cancel_pipe[1]);
	}
	if (fe->multi)
		curl_multi_cleanup(fe->multi);
	free(fe->user_agent);
	free(fe->ca_file);
	free(fe->no_proxy);
	free(fe->site_cache);
	free(fe);
	return rc;
}

void fetch_engine_free(struct fetch_engine *fe)
{
	unsigned i;

	if (!fe)
		return;
	pthread_mutex_lock(&fe->lock);
	fe->stop = true;
	pthread_mutex_unlock(&fe->lock);
	curl_multi_wakeup(fe->multi);
	pthread_join(fe->thread, NULL);
	signer_stop(fe);
	for (i = 0; i < fe->npool; i++)
		curl_easy_cleanup(fe->pool[i]);
	curl_multi_cleanup(fe->multi);
	pthread_mutex_destroy(&fe->lock);
	pthread_cond_destroy(&fe->sign_cond);
	close(fe->cancel_pipe[0]);
	close(fe->cancel_pipe[1]);
	free(fe->user_agent);
	free(fe->ca_file);
	free(fe->no_proxy);
	free(fe->site_cache);
	free(fe);
}

void fetch_engine_cancel(struct fetch_engine *fe)
{
	/* A full pipe holds a cancel already. */
	(void)!write(fe->cancel_pipe[1], "", 1);
}

int fetch_engine_cancel_fd(const struct fetch_engine *fe)
{
	return fe->cancel_pipe[1];
}

/* ---- public: requests ---- */

/* Sets c up for req; -EINVAL (res->err says why) for a request that
 * cannot be made. */
static int call_init(struct call *c, const struct fetch_req *req,
		     struct fetch_res *res, fetch_done_fn *done, void *arg)
{
	memset(res, 0, sizeof(*res));
	res->content_length = -1;
	if (!req->url || (!req->grow && req->cap && !req->buf)) {
		snprintf(res->err, sizeof(res->err), "fetch: bad request");
		return -EINVAL;
	}
	memset(c, 0, offsetof(struct call, x));
	c->r = *req;
	c->res = res;
	c->done = done;
	c->arg = arg;
	return 0;
}

int fetch_submit(struct fetch_engine *fe, const struct fetch_req *req,
		 struct fetch_res *res, fetch_done_fn *done, void *arg)
{
	/* One allocation a request, beside the easy handle's own: the call
	 * outlives the caller's frame. */
	struct call *c = malloc(sizeof(*c));
	int rc;

	if (!c) {
		memset(res, 0, sizeof(*res));
		snprintf(res->err, sizeof(res->err), "fetch: out of memory");
		return -ENOMEM;
	}
	rc = call_init(c, req, res, done, arg);
	if (rc) {
		free(c);
		return rc;
	}
	c->owned = true;
	attempt_reset(fe, c);
	queue_attempt(fe, c);
	return 0;
}

/* fetch_run's wait for its call. */
struct run_wait {
	struct fetch_engine *fe;
	pthread_cond_t cond;
	bool done;
	int rc;
};

static void run_woken(void *arg, int rc)
{
	struct run_wait *w = arg;
	struct fetch_engine *fe = w->fe;

	pthread_mutex_lock(&fe->lock);
	w->rc = rc;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&fe->lock);
}

int fetch_run(struct fetch_engine *fe, const struct fetch_req *req,
	      struct fetch_res *res)
{
	struct run_wait w = {.fe = fe};
	struct call c;
	int rc = call_init(&c, req, res, run_woken, &w);

	if (rc)
		return rc;
	/* Made by a resign: a retry of it would wait for the signer, which
	 * waits for it. */
	if (req->resign && pthread_equal(pthread_self(), fe->signer)) {
		snprintf(res->err, sizeof(res->err),
			 "fetch: a request made while signing a retry may not "
			 "be signed again itself");
		return -EDEADLK;
	}
	pthread_cond_init(&w.cond, NULL);
	attempt_reset(fe, &c);
	queue_attempt(fe, &c);
	pthread_mutex_lock(&fe->lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &fe->lock);
	pthread_mutex_unlock(&fe->lock);
	pthread_cond_destroy(&w.cond);
	return w.rc;
}
