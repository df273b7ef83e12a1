/* creds_renew: expiring credentials, renewed ahead of time (see
 * creds_renew.h). */
#include "config.h"

#include "creds_renew.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "fetch.h"
#include "json.h"
#include "log.h"
#include "text.h"
#include "units.h"
#include "url.h"

#define MARGIN_MAX_S 300 /* renew at most this long before expiry */
#define BACKOFF_MIN_S 1	 /* first wait after a failed renewal */
#define BACKOFF_MAX_S 60 /* longest wait between failed renewals */
#define LIFE_MAX_S (7 * 86400ull) /* longest life believed */
#define NS 1000000000ull
#define OAUTH_ANSWER_MAX (64u << 10) /* a token endpoint's answer */

static uint64_t renewals, failures; /* every creds_renew's, atomic */

struct creds_renew {
	creds_renew_fn fn;
	void *arg;
	char *what;
	size_t words;	 /* the block's size in uint64_t */
	uint64_t *cur;	 /* the block readers copy (under seq) */
	uint64_t *next;	 /* the renewal's scratch block */
	unsigned seq;	 /* odd while cur is written */
	unsigned serial; /* counts the blocks published */

	/* Serializes renewals (thread and refusals); never taken by a
	 * reader of the credentials. */
	pthread_mutex_t renew_lock;
	int64_t expires; /* epoch seconds of cur, 0: never */

	/* The thread's schedule. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t due_ns; /* monotonic: renew then */
	unsigned backoff_s;
	unsigned refresh_s; /* fetch ones that do not expire this often */
	bool stop, started;
	pthread_t thread;
};

void creds_renew_counts(uint64_t *r, uint64_t *f)
{
	*r = __atomic_load_n(&renewals, __ATOMIC_RELAXED);
	*f = __atomic_load_n(&failures, __ATOMIC_RELAXED);
}

int64_t creds_renew_expiry(uint64_t life_s)
{
	if (life_s < 1)
		life_s = 1;
	if (life_s > LIFE_MAX_S)
		life_s = LIFE_MAX_S;
	return (int64_t)time(NULL) + (int64_t)life_s;
}

int creds_renew_bearer(struct creds_renew *r, void *blob, char *out,
		       size_t cap, unsigned *serial)
{
	int rc = 0;

	creds_renew_get(r, blob, serial);
	if ((size_t)snprintf(out, cap, "Authorization: Bearer %s",
			     (const char *)blob) >= cap)
		rc = -ENAMETOOLONG;
	OPENSSL_cleanse(blob, r->words * 8);
	return rc;
}

int creds_form_add(char **form, const char *name, const char *value)
{
	size_t cap = strlen(value) * 3 + 1;
	char *enc = malloc(cap), *next;

	if (!enc)
		return -ENOMEM;
	if (url_encode(value, false, enc, cap) < 0) {
		free(enc);
		return -ENAMETOOLONG;
	}
	next = strdupf("%s%s%s=%s", *form ? *form : "", *form ? "&" : "", name,
		       enc);
	OPENSSL_cleanse(enc, strlen(enc));
	free(enc);
	if (*form)
		OPENSSL_cleanse(*form, strlen(*form));
	free(*form);
	*form = next;
	return next ? 0 : -ENOMEM;
}

const char *creds_renew_describe(const struct creds_renew *r)
{
	return r->what;
}

void creds_renew_get(struct creds_renew *r, void *blob, unsigned *serial)
{
	char *out = blob; /* the caller's struct: any alignment */
	unsigned s1, s2;

	do {
		s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
		while (s1 & 1) {
			sched_yield();
			s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
		}
		for (size_t i = 0; i < r->words; i++) {
			uint64_t w = __atomic_load_n(&r->cur[i],
						     __ATOMIC_RELAXED);

			memcpy(out + i * 8, &w, 8);
		}
		*serial = __atomic_load_n(&r->serial, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
	} while (s1 != s2);
}

/* Makes r->next the current block (renew_lock held: one writer). */
static void publish(struct creds_renew *r)
{
	__atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (size_t i = 0; i < r->words; i++)
		__atomic_store_n(&r->cur[i], r->next[i], __ATOMIC_RELAXED);
	__atomic_store_n(&r->serial, r->serial + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELEASE);
	OPENSSL_cleanse(r->next, r->words * 8);
}

/* Nanoseconds from now until `expires` (epoch seconds); <= 0: past.  An
 * expiry more than a year away counts as a year: a credential file may
 * say year 2999, and its nanoseconds would not fit. */
static int64_t left_ns(int64_t expires)
{
	const int64_t year_s = 365 * 86400;
	struct timespec ts;
	int64_t s;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (expires < (int64_t)ts.tv_sec)
		return -1;
	s = expires - (int64_t)ts.tv_sec;
	if (s > year_s)
		s = year_s;
	return s * (int64_t)NS - ts.tv_nsec;
}

/* When to renew credentials that expire at `expires` (epoch seconds), in
 * nanoseconds so that a token of a second is renewed at half its life,
 * not at its end.  Ones handed out expired (clock skew, a broken source)
 * are asked for again a second later, not in a loop. */
static uint64_t due_for(int64_t expires)
{
	const int64_t margin_max = MARGIN_MAX_S * (int64_t)NS;
	int64_t life = left_ns(expires), margin;

	if (life <= 0)
		return now_ns() + BACKOFF_MIN_S * NS;
	margin = life / 2 < margin_max ? life / 2 : margin_max;
	return now_ns() + (uint64_t)(life - margin);
}

/* One renewal (renew_lock held).  @return 0 or fn's error, logged. */
static int renew(struct creds_renew *r, const char *why)
{
	int64_t expires = 0, left;
	char *err = NULL;
	int rc;

	memset(r->next, 0, r->words * 8);
	rc = r->fn(r->arg, r->next, &expires, &err);
	if (rc) {
		OPENSSL_cleanse(r->next, r->words * 8);
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
		left = r->expires - (int64_t)time(NULL);
		/* err names the source already (see creds_renew_fn). */
		if (!r->expires)
			log_warn("renewing credentials (%s) failed, keeping "
				 "the current ones: %s",
				 why, err ? err : r->what);
		else if (left > 0)
			log_warn("renewing credentials (%s) failed, the "
				 "current ones stay valid for %" PRId64
				 " s: %s",
				 why, left, err ? err : r->what);
		else
			log_error("renewing credentials (%s) failed and the "
				  "current ones have expired: %s",
				  why, err ? err : r->what);
		free(err);
		return rc;
	}
	publish(r);
	r->expires = expires;
	__atomic_add_fetch(&renewals, 1, __ATOMIC_RELAXED);
	log_debug("%s: renewed (%s), valid for %" PRId64 " s", r->what, why,
		  expires - (int64_t)time(NULL));
	return 0;
}

/* After a renewal that gave rc and credentials that expire at `expires`
 * (r->lock held): when the next one is due.  After a failure, the backoff,
 * but never later than half the current credentials' remaining life (at
 * least BACKOFF_MIN_S): short-lived ones get their retries before they
 * expire. */
static void schedule(struct creds_renew *r, int rc, int64_t expires)
{
	uint64_t wait;
	int64_t left;

	if (!rc) {
		r->backoff_s = 0;
		r->due_ns = expires ? due_for(expires)
				    : now_ns() + r->refresh_s * NS;
		return;
	}
	r->backoff_s = r->backoff_s ? r->backoff_s * 2 : BACKOFF_MIN_S;
	if (r->backoff_s > BACKOFF_MAX_S)
		r->backoff_s = BACKOFF_MAX_S;
	wait = r->backoff_s * NS;
	left = expires ? left_ns(expires) : 0;
	if (left > 0 && (uint64_t)left / 2 < wait)
		wait = (uint64_t)left / 2 > BACKOFF_MIN_S * NS
			   ? (uint64_t)left / 2
			   : BACKOFF_MIN_S * NS;
	r->due_ns = now_ns() + wait;
}

static void *renew_thread(void *arg)
{
	struct creds_renew *r = arg;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		uint64_t now = now_ns();
		struct timespec ts;
		int64_t expires;
		int rc;

		if (now < r->due_ns) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)((r->due_ns - now) / NS);
			ts.tv_nsec += (long)((r->due_ns - now) % NS);
			if (ts.tv_nsec >= (long)NS) {
				ts.tv_sec++;
				ts.tv_nsec -= (long)NS;
			}
			pthread_cond_timedwait(&r->cond, &r->lock, &ts);
			continue;
		}
		pthread_mutex_unlock(&r->lock);
		pthread_mutex_lock(&r->renew_lock);
		rc = renew(r, r->backoff_s ? "retry" : "ahead of expiry");
		expires = r->expires;
		pthread_mutex_unlock(&r->renew_lock);
		pthread_mutex_lock(&r->lock);
		schedule(r, rc, expires);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

bool creds_renew_refused(struct creds_renew *r, unsigned serial)
{
	int64_t expires;
	bool other;
	int rc;

	if (!r->started)
		return false;
	pthread_mutex_lock(&r->renew_lock);
	other = __atomic_load_n(&r->serial, __ATOMIC_RELAXED) != serial;
	rc = other ? 0 : renew(r, "the origin refused them as expired");
	expires = r->expires;
	pthread_mutex_unlock(&r->renew_lock);
	if (!other) {
		pthread_mutex_lock(&r->lock);
		schedule(r, rc, expires);
		pthread_cond_signal(&r->cond);
		pthread_mutex_unlock(&r->lock);
	}
	return rc == 0;
}

int creds_renew_new(size_t blob_size, creds_renew_fn fn, void *arg,
		    const char *what, unsigned refresh_s,
		    struct creds_renew **out, char **err)
{
	struct creds_renew *r = calloc(1, sizeof(*r));
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	assert(blob_size % 8 == 0);
	if (!r)
		return -ENOMEM;
	r->fn = fn;
	r->arg = arg;
	r->words = blob_size / 8;
	r->refresh_s = refresh_s;
	r->what = strdup(what);
	r->cur = calloc(r->words, 8);
	r->next = calloc(r->words, 8);
	pthread_mutex_init(&r->renew_lock, NULL);
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!r->what || !r->cur || !r->next) {
		creds_renew_free(r);
		return -ENOMEM;
	}
	rc = fn(arg, r->next, &r->expires, err);
	if (rc) {
		creds_renew_free(r);
		return rc;
	}
	publish(r);
	if (r->expires || refresh_s) {
		schedule(r, 0, r->expires);
		rc = pthread_create(&r->thread, NULL, renew_thread, r);
		if (rc) {
			err_set(err, "%s: cannot start the renewal thread: %s",
				what, strerror(rc));
			creds_renew_free(r);
			return -rc;
		}
		r->started = true;
		if (r->expires)
			log_info("%s: valid for %" PRId64 " s, renewed ahead "
				 "of expiry",
				 what, r->expires - (int64_t)time(NULL));
		else
			log_info("%s: fetched again every %u s", what,
				 refresh_s);
	}
	*out = r;
	return 0;
}

void creds_renew_free(struct creds_renew *r)
{
	if (!r)
		return;
	if (r->started) {
		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_cond_signal(&r->cond);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->thread, NULL);
	}
	if (r->cur)
		OPENSSL_cleanse(r->cur, r->words * 8);
	free(r->cur);
	free(r->next);
	free(r->what);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->renew_lock);
	free(r);
}

/* ---- OAuth 2.0 token answers ---- */

int oauth_token_parse(const char *text, size_t len, char *tok, size_t tok_max,
		      unsigned rules, uint64_t *expires_s, const char *what,
		      char **err)
{
	struct json s;
	char key[64], type[32] = "Bearer";
	bool first = true, got_tok = false, got_exp = false, ok;
	size_t n;
	int rc;

	tok[0] = '\0';
	json_init(&s, text, len, what, err);
	if (json_expect(&s, '{'))
		return -EINVAL;
	while ((rc = json_next(&s, '}', &first)) == 1) {
		if (json_key(&s, key, sizeof(key)))
			break;
		if (!strcmp(key, "access_token")) {
			if (json_string(&s, tok, tok_max, &n))
				break;
			got_tok = true;
		} else if (!strcmp(key, "expires_in")) {
			/* IMDS sends it as a string, the others as a number */
			if (json_u64(&s, expires_s))
				break;
			got_exp = true;
		} else if (!strcmp(key, "token_type")) {
			if (json_string(&s, type, sizeof(type), &n))
				break;
		} else if (json_skip(&s)) {
			break;
		}
	}
	if (rc != 0 || json_end(&s)) {
		OPENSSL_cleanse(tok, tok_max);
		return -EINVAL;
	}
	ok = got_tok && *tok;
	for (const char *c = tok; ok && *c; c++)
		ok = (unsigned char)*c > 0x20 && (unsigned char)*c < 0x7f;
	/* A token that expires as it comes is of no use. */
	if (rules & OAUTH_NEED_EXPIRY)
		ok = ok && got_exp && *expires_s > 0;
	if (rules & OAUTH_NEED_BEARER)
		ok = ok && !strcasecmp(type, "Bearer");
	if (!ok) {
		OPENSSL_cleanse(tok, tok_max);
		err_set(err, "%s: the answer has no %saccess_token%s", what,
			rules & OAUTH_NEED_BEARER ? "Bearer " : "usable ",
			rules & OAUTH_NEED_EXPIRY ? " with its expires_in"
						  : "");
		return -EINVAL;
	}
	return 0;
}

int oauth_token_fetch(struct fetch_engine *fe, const char *url,
		      struct curl_slist *headers, const char *post, char *tok,
		      size_t tok_max, unsigned rules, uint64_t *expires_s,
		      const char *what, char **err)
{
	struct fetch_req req = {.url = url,
				.headers = headers,
				.post = post,
				.post_len = post ? strlen(post) : 0,
				.grow = true,
				.cap = OAUTH_ANSWER_MAX};
	struct fetch_res res;
	int rc = fetch_run(fe, &req, &res);

	if (rc) {
		err_set(err, "%s: %s", what, res.err);
		if (rc == -EIO && res.status >= 400 && res.status < 500)
			rc = -EACCES;
		return rc;
	}
	rc = oauth_token_parse(res.body, res.len, tok, tok_max, rules,
			       expires_s, what, err);
	OPENSSL_cleanse(res.body, res.len);
	free(res.body);
	return rc;
}
