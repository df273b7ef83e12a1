/* Response header lines as the origin sent them: fetch_header_line
 * (fetch.h), the engine's parser and a fuzz target's. */
#include "config.h"

#include "fetch.h"

#include <curl/curl.h>
#include <errno.h>
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

void fetch_header_line(const char *line, size_t n, uint64_t range_off,
		       struct fetch_res *res, struct fetch_head *h)
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
		h->bad_range = false;
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
	} else if (hdr_is(line, n, "content-range", &v, &vlen)) {
		/* "bytes A-B/N", or "bytes *" then "/N" for a 416 */
		const char *slash;

		copy_field(tmp, sizeof(tmp), v, vlen);
		slash = strrchr(tmp, '/');
		if (slash && slash[1] != '*')
			res->total_size = strtoull(slash + 1, NULL, 10);
		if (!strncasecmp(tmp, "bytes ", 6) && tmp[6] != '*' &&
		    strtoull(tmp + 6, NULL, 10) != range_off)
			h->bad_range = true;
	}
}
