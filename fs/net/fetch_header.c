/* Response header lines as the origin sent them: fetch_header_line
 * (fetch.h), the engine's parser and a fuzz target's. */
#include "config.h"

#include "fetch.h"
#include "units.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Whether line is the header `name`; its value, trimmed, in *val. */
static bool hdr_is(const char *line, size_t n, const char *name,
		   const char **val, size_t *vlen)
{
	size_t k = strlen(name);

	if (n <= k || strncasecmp(line, name, k) || line[k] != ':')
		return false;
	line += k + 1;
	n -= k + 1;
	while (n && (*line == ' ' || *line == '\t')) {
		line++;
		n--;
	}
	while (n && (line[n - 1] == '\r' || line[n - 1] == '\n' ||
		     line[n - 1] == ' '))
		n--;
	*val = line;
	*vlen = n;
	return true;
}

static void copy_field(char *dst, size_t cap, const char *src, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* The decimal number at *p, moving *p past it; false when there is none
 * or it does not fit 64 bits (no sign, no space: strtoull takes both). */
static bool number(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return false;
	for (; isdigit((unsigned char)*s); s++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*out = v;
	return true;
}

/*
 * h->range into h->range_first, h->range_last and res->total_size:
 * "bytes A-B/N", or a star for N (total 0); range_ok only when it is one
 * of these and agrees with itself.  A 416's unsatisfied range (a star for
 * A-B) gives the total alone.
 */
static void content_range(struct fetch_res *res, struct fetch_head *h)
{
	const char *p = h->range;
	uint64_t total = 0;
	bool ok = false;

	if (strncasecmp(p, "bytes ", 6))
		return;
	p += 6;
	if (*p == '*')
		p++;
	else if (number(&p, &h->range_first) && *p++ == '-' &&
		 number(&p, &h->range_last))
		ok = h->range_first <= h->range_last;
	else
		return;
	if (*p++ != '/')
		return;
	if (*p == '*')
		p++;
	else if (!number(&p, &total) || (ok && total <= h->range_last))
		return;
	if (*p)
		return;
	h->range_ok = ok;
	res->total_size = total;
}

void fetch_header_line(const char *line, size_t n, struct fetch_res *res,
		       struct fetch_head *h)
{
	size_t vlen;
	const char *v;
	char tmp[128];

	if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
		/* A new response (redirect, 100 Continue): forget the last. */
		const char *sp = memchr(line, ' ', n), *sp2 = NULL;

		res->etag[0] = res->content_type[0] = '\0';
		res->mtime = 0;
		res->content_length = -1;
		res->total_size = 0;
		h->reason[0] = '\0';
		h->encoding[0] = '\0';
		h->range[0] = '\0';
		h->range_ok = false;
		h->generation[0] = '\0';
		if (sp)
			sp2 = memchr(sp + 1, ' ', n - (size_t)(sp + 1 - line));
		if (sp2) {
			size_t k = n - (size_t)(sp2 + 1 - line);

			while (k && (sp2[k] == '\r' || sp2[k] == '\n'))
				k--;
			copy_field(h->reason, sizeof(h->reason), sp2 + 1, k);
		}
		return;
	}
	if (hdr_is(line, n, "etag", &v, &vlen)) {
		copy_field(res->etag, sizeof(res->etag), v, vlen);
	} else if (hdr_is(line, n, "content-type", &v, &vlen)) {
		copy_field(res->content_type, sizeof(res->content_type), v,
			   vlen);
	} else if (hdr_is(line, n, "last-modified", &v, &vlen)) {
		time_t t;

		copy_field(tmp, sizeof(tmp), v, vlen);
		t = curl_getdate(tmp, NULL);
		res->mtime = t > 0 ? (int64_t)t : 0;
	} else if (hdr_is(line, n, "content-length", &v, &vlen)) {
		char *end;
		long long cl;

		copy_field(tmp, sizeof(tmp), v, vlen);
		errno = 0;
		cl = strtoll(tmp, &end, 10);
		if (!errno && end != tmp && cl >= 0)
			res->content_length = cl;
	} else if (hdr_is(line, n, "content-encoding", &v, &vlen)) {
		copy_field(tmp, sizeof(tmp), v, vlen);
		if (strcasecmp(tmp, "identity"))
			copy_field(h->encoding, sizeof(h->encoding), v, vlen);
	} else if (hdr_is(line, n, "x-goog-generation", &v, &vlen)) {
		copy_field(h->generation, sizeof(h->generation), v, vlen);
	} else if (hdr_is(line, n, "content-range", &v, &vlen)) {
		copy_field(h->range, sizeof(h->range), v, vlen);
		h->range_ok = false;
		res->total_size = 0;
		content_range(res, h);
	}
}

const char *fetch_range_mismatch(const struct fetch_req *req, long status,
				 const struct fetch_res *res,
				 const struct fetch_head *h, char *buf,
				 size_t cap)
{
	const uint64_t size = req->size ? req->size : res->total_size;
	uint64_t end = req->range_off + req->range_len;
	char total[24] = "*";

	if (!req->range_len || req->head)
		return NULL;
	if (status == 200) {
		/* its length as it says it, else as its end showed it */
		const uint64_t len = res->content_length >= 0
					 ? (uint64_t)res->content_length
					 : res->total_size;

		if (!req->size || !len || len == req->size)
			return NULL;
		snprintf(buf, cap,
			 "HTTP 200 (the range ignored) with a body of %" PRIu64
			 " bytes, not the object's %" PRIu64,
			 len, req->size);
		return buf;
	}
	if (status != 206)
		return NULL;
	if (size && end > size)
		end = size;
	if (size)
		snprintf(total, sizeof(total), "%" PRIu64, size);
	if (!h->range[0]) {
		snprintf(buf, cap, "HTTP 206 without a Content-Range");
		return buf;
	}
	if (end <= req->range_off) {
		snprintf(buf, cap,
			 "HTTP 206 with Content-Range: %s for a range past the "
			 "object's end (%s bytes)",
			 h->range, total);
		return buf;
	}
	if (!h->range_ok || h->range_first != req->range_off ||
	    h->range_last + 1 != end || (req->size && res->total_size != size))
		snprintf(buf, cap,
			 "HTTP 206 with Content-Range: %s, not bytes %" PRIu64
			 "-%" PRIu64 "/%s",
			 h->range, req->range_off, end - 1, total);
	else if (res->content_length >= 0 &&
		 (uint64_t)res->content_length != end - req->range_off)
		snprintf(buf, cap,
			 "HTTP 206 of %" PRId64 " bytes with Content-Range: %s",
			 res->content_length, h->range);
	else
		return NULL;
	return buf;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

struct fetch_version fetch_version_of(const char *v)
{
	struct fetch_version fv = {.kind = FV_NONE, .text = v};
	char *end;
	long long t;

	if (!v || !*v || strpbrk(v, "\r\n"))
		return fv;
	if (v[0] == '"' || !strncmp(v, "W/\"", 3)) {
		fv.kind = FV_ETAG;
	} else if (all_digits(v)) {
		fv.kind = FV_GENERATION;
	} else if (v[0] == 't') {
		errno = 0;
		t = strtoll(v + 1, &end, 10);
		if (!errno && t > 0 && !strncmp(end, "-s", 2)) {
			fv.kind = FV_MTIME;
			fv.mtime = t;
		}
	}
	return fv;
}

static void http_date_or_number(int64_t t, char *buf, size_t cap)
{
	if (!format_http_date(t, buf, cap))
		snprintf(buf, cap, "%" PRId64, t);
}

/* An ETag without its weakness mark: what weak comparison compares. */
static const char *opaque_tag(const char *etag)
{
	return strncmp(etag, "W/", 2) ? etag : etag + 2;
}

const char *fetch_version_mismatch(const struct fetch_req *req, long status,
				   const struct fetch_res *res,
				   const struct fetch_head *h, char *buf,
				   size_t cap)
{
	const struct fetch_version fv = fetch_version_of(req->version);
	const char *name, *got = NULL, *want = fv.text;
	char got_date[32], want_date[32];

	if (req->head || status < 200 || status > 299)
		return NULL;
	switch (fv.kind) {
	case FV_ETAG:
		name = "ETag";
		if (res->etag[0] &&
		    strcmp(opaque_tag(res->etag), opaque_tag(fv.text)))
			got = res->etag;
		break;
	case FV_GENERATION:
		name = "generation";
		if (h->generation[0] && strcmp(h->generation, fv.text))
			got = h->generation;
		break;
	case FV_MTIME:
		/* a pinned time on the minute holds the whole minute */
		name = "Last-Modified";
		if (res->mtime && res->mtime != fv.mtime &&
		    (fv.mtime % 60 || res->mtime < fv.mtime ||
		     res->mtime >= fv.mtime + 60)) {
			http_date_or_number(res->mtime, got_date,
					    sizeof(got_date));
			http_date_or_number(fv.mtime, want_date,
					    sizeof(want_date));
			got = got_date;
			want = want_date;
		}
		break;
	default:
		return NULL;
	}
	if (!got)
		return NULL;
	snprintf(buf, cap, "the object changed: %s %.120s, pinned %.120s", name,
		 got, want);
	return buf;
}
