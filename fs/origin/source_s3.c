/* source_s3: an S3-compatible prefix, signed with SigV4 (see
 * source_s3.h). */
#include "config.h"

#include "source_s3.h"

#include <assert.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "checksum.h"
#include "creds_aws.h"
#include "log.h"
#include "sigv4.h"
#include "text.h"
#include "xml.h"

/*
 * S3-compatible prefix (AWS, MinIO, Ceph, R2, GCS's XML API, s3rver):
 * ListObjectsV2 with delimiter '/' lists one directory, page by page;
 * HEAD stats one object; reads are ranged GETs carrying the ETag seen at
 * listing or stat time as If-Match, so an object replaced while open fails
 * with 412 instead of mixing versions.  Every request is signed with SigV4
 * unless --no-sign.  Signatures are valid for 15 minutes, longer than the
 * fetch engine's retry budget, so retries reuse the first signature.
 */

#define LIST_CAP (64u << 20) /* bytes of one listing page */
#define BUCKET_MAX 255 /* us-east-1 took names this long before 2018 */
#define KEY_MAX 1024   /* bytes of an S3 key */

enum addressing { ADDR_AUTO, ADDR_PATH, ADDR_VHOST };

struct s3_src {
	struct source base;
	char *origin; /* "https://host[:port]" that requests go to */
	char *host;   /* the Host header, signed */
	char *root;   /* "/bucket" (path-style) or "" (virtual-host) */
	char *bucket;
	char *prefix; /* "" or "a/b/" */
	char *region;
	struct aws_chain *creds; /* NULL: unsigned (--no-sign) */
	bool sign;
};

static struct s3_src *s3_of(struct source *src)
{
	return (struct s3_src *)src;
}

/* ---- ListObjectsV2 pages. */

struct lp {
	const char *prefix;
	size_t plen;
	source_list_cb cb;
	void *arg;
	struct s3_page *page;
	/* The Contents entry being read. */
	char key[1100];
	bool has_key, has_size;
	uint64_t size;
	const char *bad; /* why the entry cannot be shown, or NULL */
	int64_t mtime;
	char etag[128];
};

/*
 * The MD5 an ETag stands for: that of a single-part upload is the hex
 * MD5 of the object (32 digits, quoted); a multipart one ends in "-N".
 * An ETag is not a checksum everywhere (AWS's SSE-KMS and SSE-C, some
 * S3-compatible stores), so it is marked md5-etag: bytes the origin
 * itself sends twice against it are served all the same (checksum.h).
 * @return out, "" when the ETag is none.
 */
static const char *etag_digest(const char *etag, char *out)
{
	size_t n = strlen(etag);
	char text[CHECKSUM_TEXT_MAX];
	struct checksum c;

	out[0] = '\0';
	if (n == 34 && etag[0] == '"' && etag[33] == '"') {
		etag++;
		n -= 2;
	}
	if (n != 32)
		return out;
	snprintf(text, sizeof(text), "md5-etag:%.32s", etag);
	if (!checksum_parse(text, &c))
		checksum_format(&c, out);
	return out;
}

/* "2009-10-12T17:50:30.000Z" -> epoch seconds; 0 when unreadable. */
static int64_t iso8601(const char *s)
{
	struct tm tm = {0};
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);

	return end ? (int64_t)timegm(&tm) : 0;
}

/* Emits name (relative to the prefix) as a file or directory. */
static int lp_emit(struct lp *l, const char *key, bool dir, uint64_t size)
{
	char name[1100], digest[CHECKSUM_TEXT_MAX];
	size_t n;
	struct source_object o = {.is_dir = dir,
				  .size = dir ? 0 : size,
				  .mtime = dir ? 0 : l->mtime,
				  .version = dir ? "" : l->etag,
				  .digest =
				      dir ? NULL : etag_digest(l->etag, digest),
				  .bad = dir ? NULL : l->bad};

	if (strncmp(key, l->prefix, l->plen)) {
		log_warn("S3 listing of \"%s\": key \"%s\" is outside it; "
			 "skipped",
			 l->prefix, key);
		return 0;
	}
	snprintf(name, sizeof(name), "%s", key + l->plen);
	n = strlen(name);
	if (dir && n && name[n - 1] == '/')
		name[--n] = '\0';
	/* The prefix's own "folder" marker (a console's "Create folder"
	 * makes "dir/") shows nothing but says the directory exists:
	 * counted, not emitted. */
	if (!n && !dir) {
		l->page->keys++;
		return 0;
	}
	/* A name the tree cannot show ("a//b" gives an empty component)
	 * goes on all the same: the tree names it in its warning. */
	o.name = name;
	l->page->keys++;
	return l->cb(l->arg, &o);
}

static int lp_end(void *arg, struct xml *x)
{
	struct lp *l = arg;
	const char *el = x->names[x->depth - 1];
	const char *parent = x->depth > 1 ? x->names[x->depth - 2] : "";

	if (x->depth == 1) {
		if (strcmp(el, "ListBucketResult"))
			return xml_fail(x, "the root is not "
					   "<ListBucketResult>");
		return 0;
	}
	if (strcmp(x->names[0], "ListBucketResult"))
		return xml_fail(x, "the root is not <ListBucketResult>");
	if (x->depth == 3 && !strcmp(parent, "Contents")) {
		if (!strcmp(el, "Key")) {
			if (x->tlen >= sizeof(l->key))
				return xml_fail(x, "key too long");
			memcpy(l->key, x->text, x->tlen + 1);
			l->has_key = true;
		} else if (!strcmp(el, "Size")) {
			char *end;

			errno = 0;
			l->size = strtoull(x->text, &end, 10);
			if (errno || end == x->text || *end ||
			    x->text[0] == '-' || l->size > (uint64_t)INT64_MAX)
				l->bad = "a <Size> that is not a number from "
					 "0 to 2^63-1";
			l->has_size = true;
		} else if (!strcmp(el, "ETag")) {
			if (x->tlen >= sizeof(l->etag))
				return xml_fail(x, "<ETag> too long");
			memcpy(l->etag, x->text, x->tlen + 1);
		} else if (!strcmp(el, "LastModified")) {
			l->mtime = iso8601(x->text);
		}
		return 0;
	}
	if (x->depth == 3 && !strcmp(parent, "CommonPrefixes") &&
	    !strcmp(el, "Prefix"))
		return lp_emit(l, x->text, true, 0);
	if (x->depth != 2)
		return 0;
	if (!strcmp(el, "Contents")) {
		int rc;

		if (!l->has_key || !l->has_size)
			return xml_fail(x, "<Contents> without <Key> or "
					   "<Size>");
		rc = lp_emit(l, l->key, false, l->size);
		l->has_key = l->has_size = false;
		l->bad = NULL;
		l->mtime = 0;
		l->etag[0] = '\0';
		return rc;
	}
	if (!strcmp(el, "IsTruncated")) {
		if (!strcmp(x->text, "true"))
			l->page->truncated = true;
		else if (strcmp(x->text, "false"))
			return xml_fail(x, "bad <IsTruncated>");
	} else if (!strcmp(el, "NextContinuationToken")) {
		if (x->tlen >= sizeof(l->page->token))
			return xml_fail(x, "continuation token too long");
		memcpy(l->page->token, x->text, x->tlen + 1);
	}
	return 0;
}

int s3_parse_list_page(const char *xml, size_t len, const char *prefix,
		       source_list_cb cb, void *arg, struct s3_page *page,
		       char **err)
{
	struct lp l = {.prefix = prefix,
		       .plen = strlen(prefix),
		       .cb = cb,
		       .arg = arg,
		       .page = page};
	struct xml *x;
	int rc;

	memset(page, 0, sizeof(*page));
	/* ~4.6 KiB of parser state: off the stack of the FUSE threads. */
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	xml_init(x, xml, len, lp_end, &l);
	rc = xml_walk(x);
	if (!rc && page->truncated && !page->token[0])
		rc = xml_fail(x, "<IsTruncated> is true but there is no "
				 "<NextContinuationToken>");
	if (rc && x->err) {
		*err = x->err;
		x->err = NULL;
	}
	free(x->err);
	free(x);
	return rc;
}

/* ---- Requests. */

/* Appends the AWS encoding of s to out[len..cap); -ENAMETOOLONG. */
static int enc(char *out, size_t *len, size_t cap, const char *s,
	       bool keep_slash)
{
	int n = sigv4_uri_encode(s, strlen(s), keep_slash, out, *len, cap);

	if (n < 0)
		return n;
	*len = (size_t)n;
	return 0;
}

static int add(char *out, size_t *len, size_t cap, const char *s)
{
	size_t n = strlen(s);

	if (*len + n + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(out + *len, s, n + 1);
	*len += n;
	return 0;
}

static int header(struct curl_slist **h, const char *name, const char *value)
{
	char line[4200];
	struct curl_slist *n;

	if (snprintf(line, sizeof(line), "%s: %s", name, value) >=
	    (int)sizeof(line))
		return -ENAMETOOLONG;
	n = curl_slist_append(*h, line);
	if (!n)
		return -ENOMEM;
	*h = n;
	return 0;
}

/* What signing one request needs off the stack (~24 KiB): allocated
 * once per request to the origin (a chunk, a page), never per read. */
struct signing {
	struct sigv4_out out;
	struct aws_keys keys;
};

/*
 * Builds url (origin + path + "?" + query) and the headers of one request
 * for `key` (unencoded; NULL for the bucket itself), signed unless
 * --no-sign.  `query` is already in canonical order and encoding.
 * *serial names the credentials signed with (for s3_auth_refused).
 */
static int s3_request(struct s3_src *s, const char *method, const char *key,
		      const char *query, const char *if_match, char *url,
		      size_t cap, struct curl_slist **headers, unsigned *serial)
{
	/* "/bucket/" and the key, every byte of it %XX at worst. */
	char path[1 + BUCKET_MAX + 1 + 3 * KEY_MAX + 1], date[17];
	size_t pl = 0, ul = 0;
	struct sigv4_header h[6];
	size_t nh = 0;
	struct sigv4_in in = {0};
	struct signing *sg = NULL;
	int rc;

	*headers = NULL;
	*serial = 0;
	rc = add(path, &pl, sizeof(path), s->root);
	if (!rc && (key || !*s->root))
		rc = add(path, &pl, sizeof(path), "/");
	if (!rc && key)
		rc = enc(path, &pl, sizeof(path), key, true);
	if (!rc)
		rc = add(url, &ul, cap, s->origin);
	if (!rc)
		rc = add(url, &ul, cap, path);
	if (!rc && query && *query)
		rc = add(url, &ul, cap, "?");
	if (!rc && query && *query)
		rc = add(url, &ul, cap, query);
	if (rc)
		return rc;
	if (if_match && *if_match) {
		rc = header(headers, "If-Match", if_match);
		if (rc)
			goto out;
	}
	if (!s->sign)
		return 0;

	/* A source opened with no_check has no credentials: it never
	 * sends a request. */
	assert(s->creds);
	sg = malloc(sizeof(*sg));
	if (!sg) {
		rc = -ENOMEM;
		goto out;
	}
	aws_chain_get(s->creds, &sg->keys, serial);
	sigv4_amz_date((long long)time(NULL), date);
	h[nh++] = (struct sigv4_header){"Host", s->host};
	h[nh++] =
	    (struct sigv4_header){"x-amz-content-sha256", SIGV4_EMPTY_SHA256};
	h[nh++] = (struct sigv4_header){"x-amz-date", date};
	if (sg->keys.token[0])
		h[nh++] = (struct sigv4_header){"x-amz-security-token",
						sg->keys.token};
	in.method = method;
	in.path = path;
	in.query = query;
	in.headers = h;
	in.nheaders = nh;
	in.payload_hash = SIGV4_EMPTY_SHA256;
	in.amz_date = date;
	in.region = s->region;
	in.service = "s3";
	in.access_key = sg->keys.access_key;
	in.secret_key = sg->keys.secret_key;
	rc = sigv4_sign(&in, &sg->out);
	for (size_t i = 0; !rc && i < nh; i++)
		rc = header(headers, h[i].name, h[i].value);
	if (!rc)
		rc = header(headers, "Authorization", sg->out.authorization);
out:
	if (sg)
		OPENSSL_cleanse(sg, sizeof(*sg));
	free(sg);
	if (rc) {
		curl_slist_free_all(*headers);
		*headers = NULL;
	}
	return rc;
}

/* A sentence for the errors the user can fix. */
static const char *hint(struct s3_src *s, int rc, char *buf, size_t cap)
{
	if (rc == -EACCES && s->sign) {
		struct aws_keys *k = malloc(sizeof(*k));
		unsigned serial;

		if (k)
			aws_chain_get(s->creds, k, &serial);
		snprintf(buf, cap,
			 ": access denied: check the credentials (access key "
			 "%s from %s), the region (%s) and the clock",
			 k ? k->access_key : "?", aws_chain_describe(s->creds),
			 s->region);
		if (k)
			OPENSSL_cleanse(k, sizeof(*k));
		free(k);
	} else if (rc == -EACCES)
		snprintf(buf, cap,
			 ": access denied to an unsigned request (--no-sign): "
			 "the bucket is not public");
	else
		buf[0] = '\0';
	return buf;
}

/* One request (a listing page, a stat's HEAD), signed again for each
 * attempt. */
struct s3_sign {
	struct s3_src *s;
	const char *method, *key, *query;
	char *url;
	size_t cap;
	unsigned serial;
};

static int s3_sign(void *arg, struct fetch_req *req)
{
	struct s3_sign *g = arg;

	curl_slist_free_all(req->headers);
	req->url = g->url;
	return s3_request(g->s, g->method, g->key, g->query, NULL, g->url,
			  g->cap, &req->headers, &g->serial);
}

/* One listing of prefix pfx, a page at a time (source_list_pages). */
struct s3_listing {
	struct s3_src *s;
	const char *pfx;
	unsigned max_keys;
	source_list_cb cb;
	void *arg;
	struct s3_page page;
	char url[8192], query[6144];
};

/* source_page_fn: the page after continuation token sent. */
static int list_page(void *arg, const char *sent, const char **next,
		     bool *more, size_t *names, char **err)
{
	struct s3_listing *l = arg;
	struct s3_src *s = l->s;
	const char *pfx = l->pfx;
	char *query = l->query, h[512];
	struct s3_sign g = {.s = s,
			    .method = "GET",
			    .query = query,
			    .url = l->url,
			    .cap = sizeof(l->url)};
	struct fetch_req req = {.grow = true, .cap = LIST_CAP};
	struct fetch_res res;
	char *perr = NULL;
	size_t ql = 0;
	int rc;

	/* Parameters in canonical (sorted) order. */
	if (sent[0]) {
		rc = add(query, &ql, sizeof(l->query), "continuation-token=");
		if (!rc)
			rc = enc(query, &ql, sizeof(l->query), sent, false);
		if (!rc)
			rc = add(query, &ql, sizeof(l->query), "&");
	} else {
		rc = 0;
		query[0] = '\0';
	}
	if (!rc)
		rc = add(query, &ql, sizeof(l->query),
			 "delimiter=%2F&list-type=2");
	if (!rc && l->max_keys) {
		char mk[32];

		snprintf(mk, sizeof(mk), "&max-keys=%u", l->max_keys);
		rc = add(query, &ql, sizeof(l->query), mk);
	}
	if (!rc)
		rc = add(query, &ql, sizeof(l->query), "&prefix=");
	if (!rc)
		rc = enc(query, &ql, sizeof(l->query), pfx, false);
	if (rc) {
		err_set(err, "listing %s%s: cannot build the request: %s",
			s->base.id, pfx + strlen(s->prefix), strerror(-rc));
		return rc;
	}
	rc = source_fetch_signed(&s->base, &req, &res, s3_sign, &g, &g.serial);
	curl_slist_free_all(req.headers);
	if (rc) {
		err_set(err, "listing %s%s: %s%s", s->base.id,
			pfx + strlen(s->prefix), res.err,
			hint(s, rc, h, sizeof(h)));
		return rc;
	}
	rc = s3_parse_list_page(res.body, res.len, pfx, l->cb, l->arg,
				&l->page, &perr);
	free(res.body);
	*names = l->page.keys;
	if (rc) {
		if (perr || rc == -EIO)
			err_set(err, "listing %s%s: %s: %s", s->base.id,
				pfx + strlen(s->prefix), l->url,
				perr ? perr : "failed");
		free(perr);
		return rc;
	}
	*next = l->page.token;
	*more = l->page.truncated && !l->max_keys;
	return 0;
}

/* Lists prefix `pfx` page by page (max_keys 0: the server's default). */
static int list_prefix(struct source *src, const char *pfx, unsigned max_keys,
		       source_list_cb cb, void *arg, size_t *count, char **err)
{
	struct s3_src *s = s3_of(src);
	struct s3_listing *l = calloc(1, sizeof(*l));
	int rc;

	*count = 0;
	if (!l)
		return -ENOMEM;
	l->s = s;
	l->pfx = pfx;
	l->max_keys = max_keys;
	l->cb = cb;
	l->arg = arg;
	rc = source_list_pages(src, pfx + strlen(s->prefix),
			       "continuation token", sizeof(l->page.token),
			       list_page, l, count, err);
	free(l);
	return rc;
}

static int s3_list_dir(struct source *src, const char *dir, source_list_cb cb,
		       void *arg)
{
	/* A folder marker alone counts: an empty directory. */
	return source_list_under(src, s3_of(src)->prefix, dir, 0, list_prefix,
				 cb, arg);
}

static int s3_stat(struct source *src, const char *path,
		   struct source_object *out)
{
	static __thread char name[1100], ver[128], digest[CHECKSUM_TEXT_MAX];
	struct s3_src *s = s3_of(src);
	struct fetch_req req = {.head = true};
	struct fetch_res res;
	char url[8192];
	struct s3_sign g = {
	    .s = s, .method = "HEAD", .url = url, .cap = sizeof(url)};
	char *key;
	int rc;

	if (source_stat_root(out, path, name, sizeof(name)))
		return 0;
	key = strdupf("%s%s", s->prefix, path);
	if (!key)
		return -ENOMEM;
	g.key = key;
	rc = source_fetch_signed(src, &req, &res, s3_sign, &g, &g.serial);
	curl_slist_free_all(req.headers);
	free(key);
	rc = source_stat_head(src, s->prefix, path, rc, &res, ver, sizeof(ver),
			      list_prefix, out);
	if (!rc && !out->is_dir)
		out->digest = etag_digest(ver, digest);
	return rc;
}

/* The (signed) GET of object path, pinned to version, into rd->url. */
static int read_request(struct s3_src *s, const char *path,
			const char *version, struct source_read *rd,
			struct curl_slist **headers)
{
	char *key = strdupf("%s%s", s->prefix, path);
	int rc;

	if (!key)
		return -ENOMEM;
	rc = s3_request(s, "GET", key, NULL, version, rd->url, sizeof(rd->url),
			headers, &rd->auth_serial);
	free(key);
	return rc;
}

/* req.resign for reads: each retry goes out with a fresh date and
 * signature, so an attempt that stalled past a signature's 15 minutes
 * (a long --timeout) does not make the next one "Request has expired". */
static int s3_resign_read(void *arg, struct fetch_req *req)
{
	struct source_read *rd = arg;
	struct curl_slist *headers = NULL;
	int rc = read_request(s3_of(rd->src), rd->path, rd->version, rd,
			      &headers);

	if (rc)
		return rc;
	curl_slist_free_all(rd->headers);
	rd->headers = rd->req.headers = req->headers = headers;
	return 0;
}

static int s3_prepare_read(struct source *src, const char *path,
			   const char *version, uint64_t off, uint64_t len,
			   struct source_read *rd)
{
	struct s3_src *s = s3_of(src);
	int rc;

	memset(&rd->req, 0, sizeof(rd->req));
	rd->headers = NULL;
	rc = read_request(s, path, version, rd, &rd->headers);
	if (rc)
		return rc;
	rd->req.url = rd->url;
	rd->req.version = version;
	rd->req.headers = rd->headers;
	rd->req.range_off = off;
	rd->req.range_len = len;
	if (s->sign) {
		rd->src = src;
		rd->path = path;
		rd->version = version;
		rd->req.resign = s3_resign_read;
		rd->req.resign_arg = rd;
	}
	return 0;
}

static void s3_destroy(struct source *src)
{
	struct s3_src *s = s3_of(src);

	aws_chain_free(s->creds);
	free(s->origin);
	free(s->host);
	free(s->root);
	free(s->bucket);
	free(s->prefix);
	free(s->region);
	free(src->id);
	free(s);
}

/* A read's credentials were refused as expired: renew them once. */
static bool s3_auth_refused(struct source *src, unsigned serial)
{
	struct s3_src *s = s3_of(src);

	return s->creds && aws_chain_refused(s->creds, serial);
}

/* The answer refused the credentials a request was signed with as
 * expired: a 401, an ExpiredToken; a HEAD's 400 has no body to say why,
 * and is taken as such. */
static bool s3_auth_expired(const struct fetch_req *req,
			    const struct fetch_res *res, int rc)
{
	(void)rc;
	return fetch_auth_expired(res) || (req->head && res->status == 400);
}

static const struct source_ops s3_ops = {
    .scheme = "s3",
    .auth_refused = s3_auth_refused,
    .auth_expired = s3_auth_expired,
    .list_dir = s3_list_dir,
    .stat = s3_stat,
    .prepare_read = s3_prepare_read,
    .destroy = s3_destroy,
};

/* "s3://bucket/a//b/" -> bucket "bucket", prefix "a/b/". */
static int parse_spec(struct s3_src *s, const char *spec, char **err)
{
	const char *b = spec + 5, *slash = strchr(b, '/'), *p;
	size_t bl = slash ? (size_t)(slash - b) : strlen(b), i, pl = 0;
	char *prefix;

	if (bl < 1 || bl > BUCKET_MAX) {
		err_set(err,
			"%s: no bucket name (expected s3://BUCKET[/PREFIX])",
			spec);
		return -EINVAL;
	}
	for (i = 0; i < bl; i++)
		if (!isalnum((unsigned char)b[i]) && !strchr(".-_", b[i])) {
			err_set(err, "%s: '%c' cannot be in a bucket name",
				spec, b[i]);
			return -EINVAL;
		}
	s->bucket = strndup(b, bl);
	prefix = calloc(1, slash ? strlen(slash) + 2 : 1);
	if (!s->bucket || !prefix) {
		free(prefix);
		return -ENOMEM;
	}
	/* Components joined by single slashes, ending in one. */
	for (p = slash; p && *p;) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (!n)
			break;
		if ((n == 1 && p[0] == '.') ||
		    (n == 2 && !strncmp(p, "..", 2))) {
			err_set(err,
				"%s: '.' and '..' are not allowed in the "
				"prefix",
				spec);
			free(prefix);
			return -EINVAL;
		}
		memcpy(prefix + pl, p, n);
		pl += n;
		prefix[pl++] = '/';
		p += n;
	}
	prefix[pl] = '\0';
	s->prefix = prefix;
	return 0;
}

/* A bucket name that works as a DNS label under TLS (no dots). */
static bool vhost_ok(const char *bucket)
{
	size_t i, n = strlen(bucket);

	if (n < 3 || n > 63 || bucket[0] == '-' || bucket[n - 1] == '-')
		return false;
	for (i = 0; i < n; i++)
		if (!islower((unsigned char)bucket[i]) &&
		    !isdigit((unsigned char)bucket[i]) && bucket[i] != '-')
			return false;
	return true;
}

/* Splits "http[s]://host[:port][/]" and sets origin, host and root. */
static int set_endpoint(struct s3_src *s, const char *endpoint, int addressing,
			char **err)
{
	const char *auth, *end;
	char scheme[8], authority[300];
	size_t sl, al, i;
	bool custom = endpoint != NULL;
	char *dflt = NULL;
	int rc = 0;

	if (!endpoint) {
		dflt = strdupf("https://s3.%s.amazonaws.com", s->region);
		endpoint = dflt;
	}
	auth = strstr(endpoint, "://");
	sl = auth ? (size_t)(auth - endpoint) : 0;
	if (!auth || sl >= sizeof(scheme)) {
		err_set(err, "endpoint %s: not an http(s) URL", endpoint);
		rc = -EINVAL;
		goto out;
	}
	for (i = 0; i < sl; i++)
		scheme[i] = (char)tolower((unsigned char)endpoint[i]);
	scheme[sl] = '\0';
	auth += 3;
	end = auth + strcspn(auth, "/?#");
	al = (size_t)(end - auth);
	if ((strcmp(scheme, "http") && strcmp(scheme, "https")) || !al ||
	    al >= sizeof(authority) || memchr(auth, '@', al) ||
	    (*end && strcmp(end, "/"))) {
		err_set(err,
			"endpoint %s: expected http[s]://HOST[:PORT] (no path, "
			"query or credentials)",
			endpoint);
		rc = -EINVAL;
		goto out;
	}
	for (i = 0; i < al; i++)
		authority[i] = (char)tolower((unsigned char)auth[i]);
	authority[al] = '\0';
	/* Drop a default port: the Host header we sign must be the one
	 * curl would send. */
	if ((!strcmp(scheme, "http") && al > 3 &&
	     !strcmp(authority + al - 3, ":80")) ||
	    (!strcmp(scheme, "https") && al > 4 &&
	     !strcmp(authority + al - 4, ":443")))
		*strrchr(authority, ':') = '\0';
	if (addressing == ADDR_AUTO)
		addressing =
		    !custom && vhost_ok(s->bucket) ? ADDR_VHOST : ADDR_PATH;
	if (addressing == ADDR_VHOST) {
		s->host = strdupf("%s.%s", s->bucket, authority);
		s->root = strdup("");
	} else {
		s->host = strdup(authority);
		s->root = strdupf("/%s", s->bucket);
	}
	s->origin = strdupf("%s://%s", scheme, s->host);
	if (!s->root || !s->host) {
		rc = -ENOMEM;
		goto out;
	}
	s->base.id = custom ? strdupf("s3+%s://%s/%s/%s", scheme, authority,
				      s->bucket, s->prefix)
			    : strdupf("s3://%s/%s", s->bucket, s->prefix);
out:
	free(dflt);
	return rc;
}

static int source_s3_open(const char *spec, const struct source_options *opt,
			  struct fetch_engine *fe, struct source **out, char **err)
{
	struct s3_src *s;
	char *lerr = NULL, *cerr = NULL;
	size_t count;
	int rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = &s3_ops;
	s->base.fetch = fe;
	fetch_no_redirect(fe);
	rc = parse_spec(s, spec, err);
	if (rc)
		goto fail;
	s->region = strdup(aws_region(opt->region));
	if (!s->region) {
		rc = -ENOMEM;
		goto fail;
	}
	if (opt->addressing < ADDR_AUTO || opt->addressing > ADDR_VHOST) {
		err_set(err, "%s: unknown addressing style %d", spec,
			opt->addressing);
		rc = -EINVAL;
		goto fail;
	}
	rc = set_endpoint(s, aws_endpoint(opt->endpoint), opt->addressing, err);
	if (rc)
		goto fail;
	s->sign = !opt->no_sign;
	if (s->sign) {
		rc = fetch_credentials(fe, s->origin, spec,
				       "signed headers (and any session token)",
				       err);
		if (rc)
			goto fail;
	}
	if (opt->no_check)
		goto done; /* id only: see source_options */
	if (s->sign) {
		rc = aws_chain_open(opt->profile, s->region, fe, &s->creds,
				    &cerr);
		if (rc) {
			err_set(err,
				"%s: %s (or use --no-sign for a public "
				"bucket)",
				spec, cerr ? cerr : strerror(-rc));
			free(cerr);
			goto fail;
		}
	}
	/* One key of the root: catches a wrong bucket, endpoint or key now,
	 * at mount time, rather than at the first ls. */
	rc = list_prefix(&s->base, s->prefix, 1, source_count_only, NULL,
			 &count, &lerr);
	if (rc) {
		if (rc == -ENOENT)
			err_set(err, "%s: %s (no such bucket?)", spec,
				lerr ? lerr : "not found");
		else
			err_set(err, "%s: %s", spec, lerr ? lerr : "failed");
		free(lerr);
		goto fail;
	}
	log_info("%s: %s, region %s, %s-style, %s", s->base.id, s->origin,
		 s->region, *s->root ? "path" : "virtual-host",
		 s->sign ? "signed" : "unsigned");
done:
	*out = &s->base;
	return 0;
fail:
	s3_destroy(&s->base);
	return rc;
}

const struct origin_scheme origin_s3 = {
    .name = "s3",
    .prefixes = {"s3://", NULL},
    .open = source_s3_open,
};
