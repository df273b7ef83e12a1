/* sigv4: AWS Signature Version 4 request signing (see sigv4.h). */
#include "config.h"

#include "sigv4.h"
#include "text.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_HEADERS 32
#define MAX_PARAMS 64

/* A bounded string builder: overflow is remembered, not written. */
struct sb {
	char *p;
	size_t len, cap;
	bool full;
};

static void sb_add(struct sb *b, const char *s, size_t n)
{
	if (b->full || b->len + n + 1 > b->cap) {
		b->full = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_str(struct sb *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void hex_of(const unsigned char *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

void sigv4_sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
	hex_of(md, 32, hex);
}

static void hmac(const void *key, size_t klen, const char *msg,
		 unsigned char out[32])
{
	unsigned int n = 32;

	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
	     strlen(msg), out, &n);
}

void sigv4_amz_date(long long t, char buf[17])
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, 17, "%Y%m%dT%H%M%SZ", &tm);
}

int sigv4_uri_encode(const char *s, size_t slen, bool keep_slash, char *out,
		     size_t len, size_t cap)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < slen; i++) {
		unsigned char c = (unsigned char)s[i];
		bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			     (c >= '0' && c <= '9') || c == '-' || c == '_' ||
			     c == '.' || c == '~' || (keep_slash && c == '/');

		if (len + (plain ? 1 : 3) + 1 > cap)
			return -ENAMETOOLONG;
		if (plain) {
			out[len++] = (char)c;
		} else {
			out[len++] = '%';
			out[len++] = digits[c >> 4];
			out[len++] = digits[c & 15];
		}
	}
	out[len] = '\0';
	return (int)len;
}

/* Percent-decodes s[0..n) into out (at most n+1 bytes); returns length. */
static size_t uri_decode(const char *s, size_t n, char *out)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		int hi, lo;

		if (s[i] == '%' && i + 2 < n &&
		    (hi = hex_value(s[i + 1])) >= 0 &&
		    (lo = hex_value(s[i + 2])) >= 0) {
			out[k++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			out[k++] = s[i];
		}
	}
	out[k] = '\0';
	return k;
}

/* Decodes then encodes s[0..n) the AWS way onto b. */
static void sb_canon(struct sb *b, const char *s, size_t n, bool keep_slash)
{
	char dec[SIGV4_CREQ_MAX];
	size_t dl;
	int rc;

	if (n >= sizeof(dec)) {
		b->full = true;
		return;
	}
	dl = uri_decode(s, n, dec);
	if (b->full)
		return;
	rc = sigv4_uri_encode(dec, dl, keep_slash, b->p, b->len, b->cap);
	if (rc < 0)
		b->full = true;
	else
		b->len = (size_t)rc;
}

struct param {
	const char *k, *v; /* canonical forms, in the params buffer */
};

static int param_cmp(const void *a, const void *b)
{
	const struct param *x = a, *y = b;
	int c = strcmp(x->k, y->k);

	return c ? c : strcmp(x->v, y->v);
}

/* The canonical query string: each name and value encoded once, sorted. */
static int canon_query(const char *q, struct sb *out)
{
	struct param pv[MAX_PARAMS];
	char buf[SIGV4_CREQ_MAX];
	struct sb pb = {.p = buf, .cap = sizeof(buf)};
	size_t np = 0, i;
	const char *s = q;

	while (s && *s) {
		size_t n = strcspn(s, "&");
		const char *eq = memchr(s, '=', n);
		size_t kl = eq ? (size_t)(eq - s) : n;
		size_t k0, v0;

		if (n == 0) {
			s++;
			continue;
		}
		if (np == MAX_PARAMS)
			return -EINVAL;
		k0 = pb.len;
		sb_canon(&pb, s, kl, false);
		sb_add(&pb, "", 1);
		v0 = pb.len;
		if (eq)
			sb_canon(&pb, eq + 1, n - kl - 1, false);
		sb_add(&pb, "", 1);
		if (pb.full)
			return -ENAMETOOLONG;
		pv[np].k = buf + k0;
		pv[np].v = buf + v0;
		np++;
		s += n;
		if (*s == '&')
			s++;
	}
	if (np > 1)
		qsort(pv, np, sizeof(pv[0]), param_cmp);
	for (i = 0; i < np; i++) {
		if (i)
			sb_str(out, "&");
		sb_str(out, pv[i].k);
		sb_str(out, "=");
		sb_str(out, pv[i].v);
	}
	return 0;
}

/* Appends a header value trimmed, with runs of spaces and tabs folded. */
static void sb_value(struct sb *b, const char *v)
{
	bool space = false;

	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			space = true;
			continue;
		}
		if (space)
			sb_add(b, " ", 1);
		space = false;
		sb_add(b, v, 1);
	}
}

static void sb_lower(struct sb *b, const char *s)
{
	for (; *s; s++) {
		char c = *s;

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		sb_add(b, &c, 1);
	}
}

int sigv4_sign(const struct sigv4_in *in, struct sigv4_out *out)
{
	size_t order[MAX_HEADERS], n = in->nheaders, i, j;
	struct sb cr = {.p = out->creq, .cap = sizeof(out->creq)};
	struct sb sh = {.p = out->signed_headers,
			.cap = sizeof(out->signed_headers)};
	struct sb sts = {.p = out->string_to_sign,
			 .cap = sizeof(out->string_to_sign)};
	unsigned char k1[32], k2[32], md[32];
	char date8[9], hash[65], keyed[256];
	int rc, len;

	if (!in->method || !in->path || !in->payload_hash || !in->amz_date ||
	    strlen(in->amz_date) != 16 || !in->region || !in->service ||
	    !in->access_key || !in->secret_key || n > MAX_HEADERS ||
	    (n && !in->headers))
		return -EINVAL;
	out->creq[0] = out->signed_headers[0] = '\0';

	sb_str(&cr, in->method);
	sb_str(&cr, "\n");
	if (*in->path)
		sb_canon(&cr, in->path, strlen(in->path), true);
	else
		sb_str(&cr, "/");
	sb_str(&cr, "\n");
	rc = canon_query(in->query, &cr);
	if (rc)
		return rc;
	sb_str(&cr, "\n");

	/* Headers sorted by name (stable: repeats keep their order). */
	for (i = 0; i < n; i++) {
		size_t k = i;

		while (k > 0 && strcasecmp(in->headers[order[k - 1]].name,
					   in->headers[i].name) > 0) {
			order[k] = order[k - 1];
			k--;
		}
		order[k] = i;
	}
	for (i = 0; i < n; i = j) {
		const struct sigv4_header *h = &in->headers[order[i]];

		sb_lower(&cr, h->name);
		sb_str(&cr, ":");
		sb_value(&cr, h->value);
		for (j = i + 1;
		     j < n && !strcasecmp(in->headers[order[j]].name, h->name);
		     j++) {
			sb_str(&cr, ",");
			sb_value(&cr, in->headers[order[j]].value);
		}
		sb_str(&cr, "\n");
		if (i)
			sb_str(&sh, ";");
		sb_lower(&sh, h->name);
	}
	sb_str(&cr, "\n");
	sb_str(&cr, out->signed_headers);
	sb_str(&cr, "\n");
	sb_str(&cr, in->payload_hash);
	if (cr.full || sh.full)
		return -ENAMETOOLONG;

	memcpy(date8, in->amz_date, 8);
	date8[8] = '\0';
	sigv4_sha256_hex(out->creq, cr.len, hash);
	sb_str(&sts, "AWS4-HMAC-SHA256\n");
	sb_str(&sts, in->amz_date);
	sb_str(&sts, "\n");
	sb_str(&sts, date8);
	sb_str(&sts, "/");
	sb_str(&sts, in->region);
	sb_str(&sts, "/");
	sb_str(&sts, in->service);
	sb_str(&sts, "/aws4_request\n");
	sb_str(&sts, hash);
	if (sts.full)
		return -ENAMETOOLONG;

	/* The signing key: the secret, keyed down by date, region, service. */
	len = snprintf(keyed, sizeof(keyed), "AWS4%s", in->secret_key);
	if (len < 0 || (size_t)len >= sizeof(keyed))
		return -ENAMETOOLONG;
	hmac(keyed, (size_t)len, date8, k1);
	hmac(k1, 32, in->region, k2);
	hmac(k2, 32, in->service, k1);
	hmac(k1, 32, "aws4_request", k2);
	hmac(k2, 32, out->string_to_sign, md);
	hex_of(md, 32, out->signature);
	/* The secret and the keys derived from it do not outlive the call. */
	explicit_bzero(keyed, sizeof(keyed));
	explicit_bzero(k1, sizeof(k1));
	explicit_bzero(k2, sizeof(k2));

	len = snprintf(out->authorization, sizeof(out->authorization),
		       "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
		       "SignedHeaders=%s, Signature=%s",
		       in->access_key, date8, in->region, in->service,
		       out->signed_headers, out->signature);
	if (len < 0 || (size_t)len >= sizeof(out->authorization))
		return -ENAMETOOLONG;
	return 0;
}
