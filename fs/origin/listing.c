/* listing: parsers of HTTP directory listings and manifests (see
 * listing.h). */
#define _GNU_SOURCE /* strptime, timegm, memmem, strncasecmp */
#include "config.h"

#include "listing.h"
#include "checksum.h"
#include "json.h"
#include "url.h"
#include "text.h"
#include "log.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum listing_format listing_detect(const char *content_type, const char *body,
				   size_t len)
{
	size_t i = 0;

	if (content_type && strcasestr(content_type, "json"))
		return LISTING_JSON;
	if (content_type && strcasestr(content_type, "html"))
		return LISTING_HTML;
	while (i < len && isspace((unsigned char)body[i]))
		i++;
	if (i < len && body[i] == '[')
		return LISTING_JSON;
	if (i < len && body[i] == '<')
		return LISTING_HTML;
	return LISTING_UNKNOWN;
}

/* A name must be one path component a filesystem can show. */
static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || (n == 1 && s[0] == '.') ||
	    (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	return !memchr(s, '/', n) && !memchr(s, '\0', n);
}

/* "Thu, 01 Jan 2026 00:00:00 GMT" -> epoch seconds, 0 if unparsable. */
static int64_t parse_http_date(const char *s)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%a, %d %b %Y %H:%M:%S", &tm);
	if (!end)
		return 0;
	return (int64_t)timegm(&tm);
}

/*
 * The decimal size at s (before end): digits only, at most INT64_MAX, since
 * st_size and Content-Length are signed.  @return the first byte after the
 * digits, or NULL when there are none or the value is too large.
 */
static const char *parse_size_digits(const char *s, const char *end,
				     uint64_t *out)
{
	const char *p = s;
	uint64_t v = 0;

	for (; p < end && isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > ((uint64_t)INT64_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	if (p == s)
		return NULL;
	*out = v;
	return p;
}

/* Why a size token cannot be an object's size, in buf. */
static const char *size_why(char *buf, size_t cap, const char *tok, size_t n)
{
	snprintf(buf, cap, "size %.*s%s is not a number from 0 to 2^63-1",
		 (int)(n > 32 ? 32 : n), tok, n > 32 ? "..." : "");
	return buf;
}

/* ---- JSON (nginx autoindex) ---- */

int listing_parse_json(const char *body, size_t len, listing_cb cb, void *arg,
		       char **err)
{
	struct json s;
	char key[32], name[LISTING_NAME_MAX + 1], val[128], why[96];
	int rc;

	json_init(&s, body, len, "JSON listing", err);
	json_ws(&s);
	if (s.p >= s.end || *s.p != '[')
		return json_fail(&s, "expected '['");
	s.p++;
	json_ws(&s);
	if (s.p < s.end && *s.p == ']')
		goto tail;
	for (;;) {
		struct listing_entry e = {.name = name};
		bool have_name = false, have_type = false;

		json_ws(&s);
		if (s.p >= s.end || *s.p != '{')
			return json_fail(&s, "expected '{'");
		s.p++;
		json_ws(&s);
		if (s.p < s.end && *s.p == '}') {
			s.p++;
		} else {
			for (;;) {
				size_t kl, vl;

				json_ws(&s);
				if (json_string(&s, key, sizeof(key), &kl))
					return -EINVAL;
				json_ws(&s);
				if (s.p >= s.end || *s.p != ':')
					return json_fail(&s, "expected ':'");
				s.p++;
				json_ws(&s);
				if (s.p < s.end && *s.p == '"') {
					if (!strcmp(key, "name")) {
						if (json_string(&s, name,
								sizeof(name),
								&vl))
							return -EINVAL;
						if (!name_ok(name, vl))
							e.bad = "a name no "
								"filesystem "
								"can show";
						have_name = true;
					} else {
						if (json_string(&s, val,
								sizeof(val),
								&vl))
							return -EINVAL;
						if (!strcmp(key, "type")) {
							have_type = true;
							e.is_dir = !strcmp(
							    val, "directory");
						} else if (!strcmp(key,
								   "mtime")) {
							e.mtime =
							    parse_http_date(
								val);
						}
					}
				} else {
					const char *t;

					if (json_scalar(&s, &t, &vl))
						return -EINVAL;
					if (!strcmp(key, "size")) {
						if (parse_size_digits(
							t, t + vl, &e.size) !=
						    t + vl)
							e.bad = size_why(
							    why, sizeof(why),
							    t, vl);
						e.has_size = true;
					}
				}
				json_ws(&s);
				if (s.p < s.end && *s.p == ',') {
					s.p++;
					continue;
				}
				if (s.p < s.end && *s.p == '}') {
					s.p++;
					break;
				}
				return json_fail(&s, "expected ',' or '}'");
			}
		}
		if (!have_name || !have_type)
			return json_fail(&s, "entry without name or type");
		if (e.is_dir) {
			e.size = 0;
			e.has_size = true;
		}
		rc = cb(arg, &e);
		if (rc)
			return rc;
		json_ws(&s);
		if (s.p < s.end && *s.p == ',') {
			s.p++;
			continue;
		}
		if (s.p < s.end && *s.p == ']')
			break;
		return json_fail(&s, "expected ',' or ']'");
	}
tail:
	s.p++;
	json_ws(&s);
	if (s.p != s.end)
		return json_fail(&s, "junk after the array");
	return 0;
}

/* ---- HTML index pages ---- */

int listing_url_decode(const char *in, size_t n, char *out, size_t cap)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		int c = (unsigned char)in[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= n)
				return -EINVAL;
			h = hex_value((unsigned char)in[i + 1]);
			l = hex_value((unsigned char)in[i + 2]);
			if (h < 0 || l < 0)
				return -EINVAL;
			c = h << 4 | l;
			i += 2;
		}
		if (c == 0 || k + 1 >= cap)
			return -EINVAL;
		out[k++] = (char)c;
	}
	out[k] = '\0';
	return (int)k;
}

int listing_url_encode_path(const char *path, char *out, size_t cap)
{
	return url_encode(path, true, out, cap);
}

/* Decodes the few HTML entities index pages put in hrefs. */
static size_t html_unescape(const char *in, size_t n, char *out, size_t cap)
{
	static const struct {
		const char *ent;
		char c;
	} ents[] = {{"&amp;", '&'},  {"&lt;", '<'},   {"&gt;", '>'},
		    {"&quot;", '"'}, {"&#39;", '\''}, {"&#x27;", '\''}};
	size_t i = 0, k = 0, j;

	while (i < n && k + 1 < cap) {
		char c = in[i];
		size_t adv = 1;

		if (c == '&')
			for (j = 0; j < ARRAY_SIZE(ents); j++) {
				size_t el = strlen(ents[j].ent);

				if (n - i >= el &&
				    !memcmp(in + i, ents[j].ent, el)) {
					c = ents[j].c;
					adv = el;
					break;
				}
			}
		out[k++] = c;
		i += adv;
	}
	out[k] = '\0';
	return i < n ? (size_t)-1 : k;
}

/*
 * nginx's HTML autoindex follows the link with "  01-Jan-2026 00:00   1234"
 * (or "-" for a directory): exact sizes, so no HEAD is needed.  A line not
 * of that form leaves the size unknown.  @return 0, or -EINVAL for a size
 * too large to be one.
 */
static int nginx_tail(const char *p, const char *end, struct listing_entry *e)
{
	char line[96], *q;
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	const char *ne;
	size_t n = 0;
	struct tm tm;
	uint64_t v;

	if (!nl)
		nl = end;
	p = memmem(p, (size_t)(nl - p), "</a>", 4);
	if (!p)
		return 0;
	p += 4;
	while (p < nl && n + 1 < sizeof(line))
		line[n++] = *p++;
	line[n] = '\0';
	q = line;
	while (*q == ' ')
		q++;
	memset(&tm, 0, sizeof(tm));
	q = strptime(q, "%d-%b-%Y %H:%M", &tm);
	if (!q || *q != ' ')
		return 0;
	while (*q == ' ')
		q++;
	e->mtime = (int64_t)timegm(&tm);
	if (e->is_dir || !isdigit((unsigned char)*q))
		return 0;
	ne = parse_size_digits(q, line + n, &v);
	if (!ne)
		return -EINVAL;
	if (*ne && *ne != '\r' && *ne != ' ')
		return 0;
	e->size = v;
	e->has_size = true;
	return 0;
}

/* Case-insensitive search for needle in the n bytes at hay (not a string:
 * a fetched body has no NUL after it). */
static const char *mem_casestr(const char *hay, size_t n, const char *needle)
{
	size_t k = strlen(needle), i;

	for (i = 0; i + k <= n; i++)
		if (!strncasecmp(hay + i, needle, k))
			return hay + i;
	return NULL;
}

static int html_fail(char **err, const char *body, const char *p,
		     const char *what)
{
	err_set(err, "HTML listing, byte %zu: %s", (size_t)(p - body), what);
	return -EINVAL;
}

int listing_parse_html(const char *body, size_t len, listing_cb cb, void *arg,
		       char **err)
{
	const char *p = body, *end = body + len;
	char raw[LISTING_NAME_MAX * 3 + 2], name[LISTING_NAME_MAX + 2];
	bool saw_html = false;
	int rc;

	while (p < end) {
		const char *tag = memchr(p, '<', (size_t)(end - p));
		const char *close, *h, *v, *ve;
		struct listing_entry e = {.name = name};
		size_t rl;
		const char *colon, *slash;
		bool absolute;
		int nl;

		if (!tag)
			break;
		close = memchr(tag, '>', (size_t)(end - tag));
		if (!close)
			return html_fail(err, body, tag,
					 "the page ends inside a tag "
					 "(truncated?)");
		p = close + 1;
		if ((size_t)(close - tag) >= 5 && !strncasecmp(tag, "<html", 5))
			saw_html = true;
		if ((size_t)(close - tag) < 3 || strncasecmp(tag, "<a", 2) ||
		    !isspace((unsigned char)tag[2]))
			continue;
		/* the href attribute, quoted or not */
		h = NULL;
		for (v = tag + 2; v + 5 <= close; v++)
			if (!strncasecmp(v, "href", 4) &&
			    isspace((unsigned char)v[-1])) {
				h = v + 4;
				break;
			}
		if (!h)
			continue;
		while (h < close && isspace((unsigned char)*h))
			h++;
		if (h >= close || *h != '=')
			continue;
		h++;
		while (h < close && isspace((unsigned char)*h))
			h++;
		if (h < close && (*h == '"' || *h == '\'')) {
			char q = *h++;

			ve = memchr(h, q, (size_t)(end - h));
			if (!ve)
				return html_fail(err, body, h,
						 "unterminated href");
			if (ve > close) {
				/* '>' inside the quoted value */
				close = memchr(ve, '>', (size_t)(end - ve));
				if (!close)
					return html_fail(err, body, tag,
							 "the page ends inside "
							 "a tag (truncated?)");
				p = close + 1;
			}
		} else {
			ve = h;
			while (ve < close && !isspace((unsigned char)*ve))
				ve++;
		}
		v = h;
		if (ve - v > (ptrdiff_t)(sizeof(raw) - 1))
			return html_fail(err, body, v, "link too long");
		rl = html_unescape(v, (size_t)(ve - v), raw, sizeof(raw));
		if (rl == (size_t)-1)
			return html_fail(err, body, v, "link too long");
		/* A ':' before any '/' is a scheme ("https://...") unless the
		 * href starts with "./", which nginx and Apache write for a
		 * name with a colon so that it is not read as one. */
		colon = memchr(raw, ':', rl);
		slash = memchr(raw, '/', rl);
		absolute = colon && (!slash || colon < slash);
		if (rl >= 2 && raw[0] == '.' && raw[1] == '/') {
			memmove(raw, raw + 2, rl - 1);
			rl -= 2;
		}
		/* parent, sort links (?C=N;O=D), anchors, absolute links */
		if (!rl || raw[0] == '?' || raw[0] == '#' || raw[0] == '/' ||
		    absolute || strchr(raw, '?') || strchr(raw, '#'))
			continue;
		if (raw[rl - 1] == '/') {
			e.is_dir = true;
			e.has_size = true;
			raw[--rl] = '\0';
		}
		if (memchr(raw, '/', rl))
			continue; /* deeper than one level: not an entry */
		nl = listing_url_decode(raw, rl, name, sizeof(name));
		if (nl < 0)
			return html_fail(
			    err, body, v,
			    "bad or too long percent-encoded name");
		if (nl > LISTING_NAME_MAX)
			return html_fail(err, body, v, "name too long");
		/* "..", "." are the parent and self links every page has. */
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		if (!name_ok(name, (size_t)nl))
			e.bad = "a name no filesystem can show";
		if (nginx_tail(p, end, &e))
			e.bad = "a size past 2^63-1";
		rc = cb(arg, &e);
		if (rc)
			return rc;
	}
	if (saw_html && !mem_casestr(body, len, "</html>"))
		return html_fail(err, body, end,
				 "the page ends before </html> (truncated?)");
	return 0;
}

/* ---- manifest ---- */

static int mcmp(const void *a, const void *b)
{
	return strcmp(((const struct manifest_entry *)a)->path,
		      ((const struct manifest_entry *)b)->path);
}

void manifest_free(struct manifest *m)
{
	if (!m)
		return;
	free(m->v);
	free(m->blob);
	free(m);
}

/* Why a decoded manifest path (dl bytes, or < 0: a bad escape) cannot be
 * shown, or NULL when every component is a name a filesystem can show. */
static const char *manifest_path_why(const char *dp, int dl)
{
	if (dl <= 0)
		return "a bad or empty percent-encoded path";
	if (dl > LISTING_PATH_MAX)
		return "a path longer than 4096 bytes";
	for (size_t i = 0; i <= (size_t)dl;) {
		size_t j = i;

		while (j < (size_t)dl && dp[j] != '/')
			j++;
		if (!name_ok(dp + i, j - i))
			return "an empty, \".\" or \"..\" path component";
		if (j - i > LISTING_NAME_MAX)
			return "a path component longer than 1024 bytes";
		i = j + 1;
	}
	return NULL;
}

static uint64_t skipped; /* listing_skipped(), atomic */

void listing_skip(const char *where, const char *name, const char *why)
{
	__atomic_add_fetch(&skipped, 1, __ATOMIC_RELAXED);
	log_warn("%s: \"%s\" left out: %s", where, name, why);
}

uint64_t listing_skipped(void)
{
	return __atomic_load_n(&skipped, __ATOMIC_RELAXED);
}

int manifest_parse(const char *text, size_t len, struct manifest **out,
		   char **err)
{
	struct manifest *m;
	const char *p = text, *end = text + len;
	size_t cap = 0, line = 0, bk = 0, i;
	int rc = 0;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	/* strings are never longer than the text itself */
	if (!m || !(m->blob = malloc(len + 1))) {
		rc = -ENOMEM;
		goto out;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *f[5];
		size_t fl[5], nf = 0;
		const char *q = p;
		uint64_t sz;
		struct checksum sum;
		const char *dp, *why;
		char where[48], raw[260], whybuf[96];
		int dl;

		line++;
		p = nl ? nl + 1 : end;
		if (le > q && le[-1] == '\r')
			le--;
		while (q < le && nf < 5) {
			while (q < le && (*q == ' ' || *q == '\t'))
				q++;
			if (q >= le || (nf == 0 && *q == '#'))
				break;
			f[nf] = q;
			while (q < le && *q != ' ' && *q != '\t')
				q++;
			fl[nf] = (size_t)(q - f[nf]);
			nf++;
		}
		if (nf == 0)
			continue;
		while (q < le && (*q == ' ' || *q == '\t'))
			q++;
		if (nf < 2 || q < le || nf == 5) {
			err_set(err,
				"manifest line %zu: expected \"path size "
				"[etag [digest]]\"",
				line);
			rc = -EINVAL;
			goto out;
		}
		/* percent-decoded in place: "a%20b" is "a b"; never longer.
		 * A path or size no filesystem can show leaves the line out,
		 * not the manifest: the bytes at bk are then written over. */
		dl = listing_url_decode(f[0], fl[0], m->blob + bk, fl[0] + 1);
		dp = m->blob + bk;
		why = manifest_path_why(dp, dl);
		if (!why &&
		    parse_size_digits(f[1], f[1] + fl[1], &sz) != f[1] + fl[1])
			why = size_why(whybuf, sizeof(whybuf), f[1], fl[1]);
		if (why) {
			snprintf(where, sizeof(where), "manifest line %zu",
				 line);
			snprintf(raw, sizeof(raw), "%.*s",
				 (int)(fl[0] > 256 ? 256 : fl[0]), f[0]);
			listing_skip(where, raw, why);
			continue;
		}
		if (nf >= 3 && fl[2] > 127) {
			err_set(err, "manifest line %zu: etag too long", line);
			rc = -EINVAL;
			goto out;
		}
		if (nf == 4) {
			char dtext[CHECKSUM_TEXT_MAX];

			snprintf(dtext, sizeof(dtext), "%.*s",
				 (int)(fl[3] < CHECKSUM_TEXT_MAX ? fl[3] : 0),
				 f[3]);
			if (checksum_parse(dtext, &sum)) {
				err_set(err,
					"manifest line %zu: digest \"%.*s\" is "
					"not crc32c:HEX, md5:HEX or sha256:HEX",
					line, (int)(fl[3] > 80 ? 80 : fl[3]),
					f[3]);
				rc = -EINVAL;
				goto out;
			}
		}
		if (m->n == cap) {
			size_t nc = cap ? cap * 2 : 1024;
			struct manifest_entry *nv =
			    realloc(m->v, nc * sizeof(*nv));

			if (!nv) {
				rc = -ENOMEM;
				goto out;
			}
			m->v = nv;
			cap = nc;
		}
		/* offsets for now; the blob is final only at the end */
		m->v[m->n].path = (const char *)(uintptr_t)bk;
		bk += (size_t)dl + 1;
		m->v[m->n].size = sz;
		m->v[m->n].etag = NULL;
		m->v[m->n].digest = NULL;
		/* "-": no etag, on a line that goes on to a digest */
		if (nf >= 3 && !(nf == 4 && fl[2] == 1 && f[2][0] == '-')) {
			m->v[m->n].etag = (const char *)(uintptr_t)bk;
			memcpy(m->blob + bk, f[2], fl[2]);
			bk += fl[2];
			m->blob[bk++] = '\0';
		}
		if (nf == 4) {
			/* its canonical form is as long as the field */
			m->v[m->n].digest = (const char *)(uintptr_t)bk;
			checksum_format(&sum, m->blob + bk);
			bk += fl[3] + 1;
		}
		m->n++;
	}
	/* each field's NUL is paid for by the separator or newline after it */
	assert(bk <= len + 1);
	for (i = 0; i < m->n; i++) {
		m->v[i].path = m->blob + (uintptr_t)m->v[i].path;
		m->v[i].etag =
		    m->v[i].etag ? m->blob + (uintptr_t)m->v[i].etag : "";
		m->v[i].digest =
		    m->v[i].digest ? m->blob + (uintptr_t)m->v[i].digest : "";
	}
	if (m->n)
		qsort(m->v, m->n, sizeof(*m->v), mcmp);
	for (i = 1; i < m->n; i++)
		if (!strcmp(m->v[i - 1].path, m->v[i].path)) {
			err_set(err, "manifest: \"%s\" is listed twice",
				m->v[i].path);
			rc = -EINVAL;
			goto out;
		}
	/* No directory of a path may be a file.  Neighbours in sorted order
	 * do not show it: "a.txt" sorts between "a" and "a/b". */
	for (i = 0; i < m->n; i++) {
		char dir[LISTING_PATH_MAX + 1];
		const char *path = m->v[i].path, *s;

		for (s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
			memcpy(dir, path, (size_t)(s - path));
			dir[s - path] = '\0';
			if (manifest_find(m, dir)) {
				err_set(err,
					"manifest: \"%s\" is both a file and "
					"a directory (of \"%s\")",
					dir, path);
				rc = -EINVAL;
				goto out;
			}
		}
	}
	*out = m;
	m = NULL;
out:
	manifest_free(m);
	return rc;
}

const struct manifest_entry *manifest_find(const struct manifest *m,
					   const char *path)
{
	struct manifest_entry key = {.path = path};

	if (!m->n)
		return NULL;
	return bsearch(&key, m->v, m->n, sizeof(*m->v), mcmp);
}

int manifest_list(const struct manifest *m, const char *dir, listing_cb cb,
		  void *arg)
{
	char pre[LISTING_PATH_MAX + 2], last[LISTING_NAME_MAX + 1] = "";
	char name[LISTING_NAME_MAX + 1];
	size_t pl, lo = 0, hi = m->n, i;
	bool any = false;
	int rc;

	pl = (size_t)snprintf(pre, sizeof(pre), "%s%s", dir, *dir ? "/" : "");
	if (pl >= sizeof(pre))
		return -ENAMETOOLONG;
	/* first entry >= prefix: the prefix's entries follow, contiguous */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(m->v[mid].path, pre) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; i < m->n && !strncmp(m->v[i].path, pre, pl); i++) {
		const char *rest = m->v[i].path + pl;
		const char *slash = strchr(rest, '/');
		struct listing_entry e = {.name = name, .has_size = true};
		size_t nl = slash ? (size_t)(slash - rest) : strlen(rest);

		any = true;
		memcpy(name, rest, nl);
		name[nl] = '\0';
		if (slash) {
			/* a subdirectory: its entries are contiguous too */
			if (!strcmp(last, name))
				continue;
			memcpy(last, name, nl + 1);
			e.is_dir = true;
		} else {
			e.size = m->v[i].size;
			e.etag = m->v[i].etag;
			e.digest = m->v[i].digest;
		}
		rc = cb(arg, &e);
		if (rc)
			return rc;
	}
	return any || !*dir ? 0 : -ENOENT;
}
