/*
 * fetch_easy: one leg's curl easy handle (fetch_i.h): the pool of idle
 * handles, a handle's setup for one attempt of a request (its URL, or the
 * site cache's, its headers, range and limits), and the callbacks that take
 * the answer's header lines and body.  Its own file because it is all a
 * request's setup on curl, apart from the engine that runs the handles.
 */
#include "config.h"

#include "fetch_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOW_SPEED 1024L			 /* bytes/s: slower is a stall */
#define ATTEMPT_MAX_MS (30L * 60 * 1000) /* one attempt, at most */
/* A body of BIG_BODY bytes or more is received BIG_BODY_BUF at a time. */
#define BIG_BODY (1u << 20)
#define BIG_BODY_BUF (256u << 10)

/* ---- curl callbacks (engine thread) ---- */

/* The first leg to get a response byte wins the request; a loser's
 * callbacks return 0, which aborts its transfer. */
static bool leg_claims(struct leg *l)
{
	if (!l->x->winner)
		l->x->winner = l;
	return l->x->winner == l;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *arg)
{
	struct leg *l = arg;
	struct xfer *x = l->x;
	size_t n = size * nmemb;

	if (!leg_claims(l))
		return 0;
	fetch_header_line(line, n, x->res, &x->head);
	return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct leg *l = arg;
	struct xfer *x = l->x;
	const struct fetch_req *req = x->req;
	struct fetch_res *res = x->res;
	size_t n = size * nmemb;

	if (!leg_claims(l))
		return 0;
	if (!x->body_checked) {
		long code = 0;

		x->body_checked = true;
		curl_easy_getinfo(l->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code < 200 || code > 299) {
			x->discard = true;
		} else {
			char why[160];

			/* Other bytes than asked, or of another version:
			 * none is taken (the judge says why). */
			if (fetch_range_mismatch(req, code, res, &x->head, why,
						 sizeof(why)) ||
			    fetch_version_mismatch(req, code, res, &x->head,
						   why, sizeof(why)))
				return 0;
			/* The origin ignored Range: drop what precedes it. */
			if (code == 200 && req->range_len)
				x->skip = req->range_off;
		}
	}
	if (x->discard) {
		size_t k = sizeof(x->errbody) - 1 - x->errlen;

		k = k < n ? k : n;
		memcpy(x->errbody + x->errlen, data, k);
		x->errlen += k;
		return n;
	}
	if (x->skip) {
		size_t k = x->skip < n ? (size_t)x->skip : n;

		x->skip -= k;
		data += k;
		n -= k;
		if (!n)
			return size * nmemb;
	}
	if (req->range_len && res->len + n > req->range_len) {
		/* A 200 answer goes on past the range: stop at its end. */
		n = (size_t)(req->range_len - res->len);
		x->enough = true;
	}
	if (n > req->cap - res->len) {
		x->overflow = true;
		return 0;
	}
	if (req->grow && res->len + n > x->grow_cap) {
		size_t nc = x->grow_cap ? x->grow_cap : 65536;
		void *nb;

		while (nc < res->len + n)
			nc = nc > SIZE_MAX / 2 ? SIZE_MAX : nc * 2;
		if (nc > req->cap)
			nc = req->cap;
		nb = realloc(res->body, nc);
		if (!nb) {
			x->nomem = 1;
			return 0;
		}
		res->body = nb;
		x->grow_cap = nc;
	}
	if (n) {
		memcpy((char *)res->body + res->len, data, n);
		res->len += n;
		conc_bytes(&x->host->conc, n);
	}
	if (x->enough)
		return 0;
	return size * nmemb;
}

/* ---- easy handles ---- */

CURL *fetch_easy_get(struct fetch_engine *fe)
{
	CURL *e;

	if (fe->npool) {
		e = fe->pool[--fe->npool];
		/* Forget the last request's options; connections, DNS and
		 * TLS sessions stay with the multi handle. */
		curl_easy_reset(e);
		return e;
	}
	return curl_easy_init();
}

/* A handle goes back to the pool only after a transfer that ended well:
 * one that failed its setup or a transfer (a refused redirect leaves it
 * failing every later setup) is freed, so no request picks it up. */
void fetch_easy_put(struct fetch_engine *fe, CURL *e, bool reuse)
{
	if (reuse && fe->npool < POOL_MAX)
		fe->pool[fe->npool++] = e;
	else
		curl_easy_cleanup(e);
}

int fetch_easy_setup(struct fetch_engine *fe, struct leg *l)
{
	struct xfer *x = l->x;
	const struct fetch_req *req = x->req;
	CURL *e = l->easy;
	long stall_s = (fe->cfg.stall_timeout_ms + 999) / 1000;
	CURLcode c = CURLE_OK;
	char via_url[SITECACHE_URL_MAX]; /* curl copies the URL */
	const char *url = req->url;
	struct curl_slist *headers = req->headers;

	switch (sitecache_route(fe->site_cache, req, &x->via, via_url,
				sizeof(via_url))) {
	case 0:
		break;
	case 1:
		url = via_url;
		headers = x->via.list;
		break;
	default:
		return -EINVAL;
	}
#define SET(opt, val)                                                          \
	do {                                                                   \
		if (c == CURLE_OK)                                             \
			c = curl_easy_setopt(e, opt, val);                     \
	} while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PRIVATE, l);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_ERRORBUFFER, l->errbuf);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, l);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, l);
	SET(CURLOPT_HTTPHEADER, headers);
	/* Signed requests are never redirected: their tokens and headers
	 * would go to whatever host the answer names.  Others go to http
	 * and https only (curl's default would take ftp too). */
	SET(CURLOPT_FOLLOWLOCATION, fe->no_redirect ? 0L : 1L);
	SET(CURLOPT_MAXREDIRS, 5L);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the _STR forms */
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
	SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
	SET(CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	/* The object's bytes as stored: an encoded body is refused. */
	SET(CURLOPT_ACCEPT_ENCODING, "identity");
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	SET(CURLOPT_PIPEWAIT, 1L);
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)fe->cfg.connect_timeout_ms);
	/* Slower than LOW_SPEED bytes/s over the stall timeout is a stall
	 * (a trickle of a few bytes a second would hold a read for hours),
	 * and no attempt lasts longer than ATTEMPT_MAX_MS whatever comes. */
	SET(CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED);
	SET(CURLOPT_LOW_SPEED_TIME, stall_s > 0 ? stall_s : 1L);
	SET(CURLOPT_TIMEOUT_MS, ATTEMPT_MAX_MS);
	SET(CURLOPT_SSL_VERIFYPEER, fe->cfg.insecure ? 0L : 1L);
	SET(CURLOPT_SSL_VERIFYHOST, fe->cfg.insecure ? 0L : 2L);
	SET(CURLOPT_USERAGENT, fe->user_agent);
	SET(CURLOPT_NOPROXY, fe->no_proxy);
	if (fe->ca_file)
		SET(CURLOPT_CAINFO, fe->ca_file);
	if (req->head)
		SET(CURLOPT_NOBODY, 1L);
	if (req->post) {
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->post_len);
		SET(CURLOPT_POSTFIELDS, req->post);
		if (req->put)
			SET(CURLOPT_CUSTOMREQUEST, "PUT");
	}
	/* Large bodies in larger pieces: fewer receive calls and callbacks
	 * per byte.  (curl allocates the buffer per transfer, so small
	 * requests keep the default.) */
	if (!req->head && req->range_len >= BIG_BODY)
		SET(CURLOPT_BUFFERSIZE, (long)BIG_BODY_BUF);
	else
		SET(CURLOPT_BUFFERSIZE, (long)CURL_MAX_WRITE_SIZE);
	if (req->range_len && !req->head) {
		snprintf(x->range, sizeof(x->range), "%" PRIu64 "-%" PRIu64,
			 req->range_off, req->range_off + req->range_len - 1);
		SET(CURLOPT_RANGE, x->range);
	}
#undef SET
	return c == CURLE_OK ? 0 : -EINVAL;
}
