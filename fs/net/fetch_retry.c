/* Retries: what a finished attempt's outcome means (done, failed for good,
 * worth another try, or no answer at all: an outage), and when the next
 * try goes. */
#include "config.h"

#include "fetch_i.h"
#include "units.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 5000

/* The TLS peer could not be verified: a setup error (its fix is a CA
 * certificate, --ca-file), not an origin out of reach. */
static bool tls_unverified(CURLcode cc)
{
	switch (cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		return true;
	default:
		return false;
	}
}

/* Failures that another try would meet again. */
static bool retryable_cc(CURLcode cc)
{
	switch (cc) {
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_TOO_MANY_REDIRECTS:
	case CURLE_FAILED_INIT:
	case CURLE_OUT_OF_MEMORY:
	case CURLE_NOT_BUILT_IN:
		return false;
	default:
		return !tls_unverified(cc);
	}
}

/* Uniform below n (0 for 0), from a seed of the calling thread's. */
static uint64_t rand_below(uint64_t n)
{
	static __thread unsigned seed;

	if (!seed)
		seed = (unsigned)now_ns() ^ (unsigned)(uintptr_t)&seed;
	return n ? (uint64_t)rand_r(&seed) * n / ((uint64_t)RAND_MAX + 1) : 0;
}

/* An error answer's <Code>X</Code> (S3, STS) into res->code, and said
 * after the status in `what`: "HTTP 400 Bad Request (ExpiredToken)". */
static void error_code(struct xfer *x, char *what, size_t wcap)
{
	const char *p = strstr(x->errbody, "<Code>"), *e;
	size_t n, wl = strlen(what);

	if (!p)
		return;
	p += 6;
	e = strstr(p, "</Code>");
	n = e ? (size_t)(e - p) : 0;
	if (!n || n >= sizeof(x->res->code) || memchr(p, '<', n))
		return;
	memcpy(x->res->code, p, n);
	x->res->code[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] >= 0x7f)
			x->res->code[i] = '?';
	snprintf(what + wl, wcap - wl, " (%s)", x->res->code);
}

bool fetch_auth_expired(const struct fetch_res *res)
{
	return res->status == 401 ||
	       ((res->status == 400 || res->status == 403) &&
		(!strcmp(res->code, "ExpiredToken") ||
		 !strcmp(res->code, "TokenRefreshRequired")));
}

enum fetch_verdict fetch_judge(struct xfer *x, int *rc, char *what, size_t wcap)
{
	const struct fetch_req *req = x->req;
	struct fetch_res *res = x->res;
	long st = res->status;

	if (x->overflow) {
		snprintf(what, wcap, "body larger than %zu bytes", req->cap);
		*rc = -EFBIG;
		return V_FAIL;
	}
	if (x->nomem || x->cc == CURLE_OUT_OF_MEMORY) {
		snprintf(what, wcap, "out of memory");
		*rc = -ENOMEM;
		return V_FAIL;
	}
	if (x->head.encoding[0] && st >= 200 && st <= 299) {
		snprintf(what, wcap,
			 "the body came with Content-Encoding: %s, not the "
			 "bytes as stored",
			 x->head.encoding);
		*rc = -EIO;
		return V_FAIL;
	}
	/* A 200 to a range is the whole object; when it ended before the
	 * range did, its size is what was skipped plus what was kept. */
	if (st == 200 && req->range_len && !req->head && !x->enough &&
	    x->cc == CURLE_OK)
		res->total_size = req->range_off - x->skip + res->len;
	/* Another version than the one pinned (an origin that ignored the
	 * validator sent with the request): final, as a 412 is. */
	if (fetch_version_mismatch(req, st, res, &x->head, what, wcap)) {
		*rc = -ESTALE;
		return V_FAIL;
	}
	/* Other bytes than asked would land in the range: retried, since a
	 * cache or proxy on the way may answer right the next time. */
	if (fetch_range_mismatch(req, st, res, &x->head, what, wcap)) {
		*rc = -EIO;
		return V_RETRY;
	}
	if (x->cc != CURLE_OK && !(x->enough && x->cc == CURLE_WRITE_ERROR)) {
		snprintf(what, wcap, "%.150s",
			 x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->cc));
		*rc = tls_unverified(x->cc) ? -EKEYREJECTED : -EIO;
		return retryable_cc(x->cc) ? V_OUTAGE : V_FAIL;
	}
	snprintf(what, wcap, "HTTP %ld%s%s", st, x->head.reason[0] ? " " : "",
		 x->head.reason);
	if (st >= 200 && st <= 299) {
		uint64_t want;

		if (req->head || !req->range_len) {
			if (!req->head && res->content_length >= 0 &&
			    res->len < (uint64_t)res->content_length) {
				snprintf(what, wcap,
					 "short body: %zu of %" PRId64 " bytes",
					 res->len, res->content_length);
				*rc = -EIO;
				return V_OUTAGE;
			}
			return V_OK;
		}
		want = req->range_len;
		if (res->total_size && req->range_off + want > res->total_size)
			want = req->range_off < res->total_size
				   ? res->total_size - req->range_off
				   : 0;
		if (res->len < want) {
			snprintf(what, wcap,
				 "short body: %zu of %" PRIu64 " bytes",
				 res->len, want);
			*rc = -EIO;
			return V_OUTAGE;
		}
		return V_OK;
	}
	if (st == 416 && req->range_len) {
		/* The range starts at or past the end: nothing to read. */
		res->len = 0;
		return V_OK;
	}
	error_code(x, what, wcap);
	if (st >= 300 && st <= 399)
		snprintf(what, wcap,
			 "HTTP %ld%s%s: a redirect not followed (a signed "
			 "request never is: give the bucket's own endpoint)",
			 st, x->head.reason[0] ? " " : "", x->head.reason);
	if (st == 404 || st == 410)
		*rc = -ENOENT;
	else if (st == 401 || st == 403)
		*rc = -EACCES;
	else if (st == 412)
		*rc = -ESTALE;
	else
		*rc = -EIO;
	/* A 429 is the origin answering (slow down); a 5xx is it, or the
	 * proxy before it, failing to. */
	if (st == 429)
		return V_RETRY;
	if (st >= 500)
		return V_OUTAGE;
	return V_FAIL;
}

/*
 * The next attempt goes after a backoff with full jitter (a uniform wait
 * below the exponential bound).  The budget runs from the end of the first
 * failed attempt, so one that stalled for the whole stall timeout (as long
 * as the budget by default) is still retried.  A request a reader waits
 * for, in an outage on an armed engine, has no count, only its time: the
 * last try goes when that is up, so that it waits about --outage-wait,
 * not a backoff less.  Background work gives up as before: a reader that
 * needs its chunk asks again, and waits.
 */
bool fetch_retry_when(const struct fetch_engine *fe, struct call *c,
		      enum fetch_verdict v, uint64_t *wait_ms)
{
	const bool outage =
	    v == V_OUTAGE && !c->r.background && fetch_outage_armed(fe);
	const uint64_t budget_ns =
	    (uint64_t)(outage ? fe->cfg.outage_wait_ms
			      : fe->cfg.retry_budget_ms) *
	    1000000ULL;
	uint64_t wait, now, spent;

	if (!outage && c->n >= fe->cfg.retries)
		return false;
	wait = BACKOFF_BASE_MS << (c->n < 16 ? c->n : 16);
	if (wait > BACKOFF_CAP_MS)
		wait = BACKOFF_CAP_MS;
	wait = rand_below(wait + 1);
	now = now_ns();
	if (!c->first_fail)
		c->first_fail = now;
	spent = now - c->first_fail;
	if (outage && spent < budget_ns &&
	    spent + wait * 1000000ULL > budget_ns) {
		wait = (budget_ns - spent + 999999) / 1000000;
	} else if (spent + wait * 1000000ULL > budget_ns) {
		c->outage_over = outage;
		return false;
	}
	*wait_ms = wait;
	c->due_ns = now + wait * 1000000ULL;
	return true;
}
