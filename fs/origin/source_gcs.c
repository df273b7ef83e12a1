/* source_gcs: a Google Cloud Storage prefix through the JSON API (see
 * source_gcs.h). */
#define _GNU_SOURCE /* timegm */
#include "config.h"

#include "source_gcs.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

#include "checksum.h"
#include "creds_gcp.h"
#include "json.h"
#include "log.h"
#include "text.h"
#include "url.h"

/*
 * Google Cloud Storage through its JSON API.  A directory is the set of
 * object names under "prefix/" up to the next '/', listed a page at a time
 * with delimiter=/; an object's generation is its version: reads ask for
 * alt=media&generation=G, so a replaced object answers 404 instead of
 * mixing bytes, and the generation goes into the cache key.  Each object's
 * crc32c is asked for: the mount checks the object's bytes against it once
 * they are all in (combined from its chunks' CRCs).  md5Hash is not: a
 * composite object has none, and CRCs combine where MD5s do not.
 */

#define DEFAULT_ENDPOINT "https://storage.googleapis.com"
#define BEARER_WHAT "bearer tokens (none with --anonymous)"
#define PAGE_CAP (32u << 20) /* bytes of one listing page or metadata */
#define PAGE_TOKEN_MAX 4096
#define NAME_MAX_GCS 1024 /* GCS object names are at most 1024 bytes */
#define URL_MAX 4096
#define AUTH_MAX 4200 /* "Authorization: Bearer " + a token */
#define LIST_FIELDS                                                            \
	"items(name,size,generation,updated,crc32c),prefixes,nextPageToken"
#define STAT_FIELDS "name,size,generation,updated,crc32c"

struct gcs_src {
	struct source base;
	char *objects; /* ENDPOINT/storage/v1/b/BUCKET/o */
	char *prefix;  /* object name prefix: "" or "a/b/" */
	struct gcp_creds *creds;
};

static struct gcs_src *gs_of(struct source *src)
{
	return (struct gcs_src *)src;
}

/* "2024-05-01T12:34:56.789Z" (RFC 3339, as GCS writes it) -> epoch
 * seconds; 0 when it does not parse. */
static int64_t parse_rfc3339(const char *s)
{
	struct tm tm;
	const char *end;
	int64_t t;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return 0;
	t = (int64_t)timegm(&tm);
	if (*end == '.')
		while (isdigit((unsigned char)*++end))
			;
	if (*end == '+' || *end == '-') {
		int h = 0, m = 0;

		if (sscanf(end + 1, "%2d:%2d", &h, &m) != 2)
			return 0;
		t -= (*end == '+' ? 1 : -1) * (int64_t)(h * 3600 + m * 60);
	} else if (*end != 'Z' && *end != 'z') {
		return 0;
	}
	return t;
}

/* ---- requests ---- */

/*
 * Sets *headers to a list holding the Authorization header with the token
 * current now (creds_renew keeps it renewed ahead; no list when
 * anonymous), freeing the list it had.  One small list per origin request,
 * not per read served: curl keeps a pointer to it until the transfer ends.
 */
static int bearer_renew(struct gcs_src *gs, struct curl_slist **headers,
			unsigned *serial)
{
	struct curl_slist *h = NULL;
	char auth[AUTH_MAX];
	int rc;

	rc = gcp_creds_header(gs->creds, auth, sizeof(auth), serial);
	if (rc)
		return rc;
	if (*auth) {
		h = curl_slist_append(NULL, auth);
		if (!h)
			return -ENOMEM;
	}
	curl_slist_free_all(*headers);
	*headers = h;
	return 0;
}

/* An API GET's credentials, renewed for each attempt. */
struct api_auth {
	struct gcs_src *gs;
	struct curl_slist *headers;
	unsigned serial;
};

/* req.resign: a retry carries the token current then, not the one of the
 * first attempt, which may have expired while it failed (a long
 * --timeout). */
static int api_reauth(void *arg, struct fetch_req *req)
{
	struct api_auth *a = arg;
	int rc = bearer_renew(a->gs, &a->headers, &a->serial);

	req->headers = a->headers;
	return rc;
}

/*
 * GETs url (a listing page or object metadata) with the token.  One 401 is
 * answered by renewing the token and asking again.  @return as fetch_run;
 * res->body is the caller's to free on success.
 */
static int api_get(struct gcs_src *gs, const char *url, struct fetch_res *res)
{
	struct api_auth a = {.gs = gs};
	struct fetch_req req = {.url = url,
				.grow = true,
				.cap = PAGE_CAP,
				.resign = api_reauth,
				.resign_arg = &a};
	int rc = source_fetch_signed(&gs->base, &req, res, api_reauth, &a,
				     &a.serial);

	curl_slist_free_all(a.headers);
	return rc;
}

/* One listed entry, collected from an "items" member. */
struct item {
	char name[NAME_MAX_GCS + 1];
	char generation[32];
	char digest[CHECKSUM_TEXT_MAX]; /* "crc32c:HEX", or "" */
	struct checksum sum;
	uint64_t size;
	int64_t mtime;
	bool has_name, has_size, has_gen;
	const char *bad; /* why it cannot be shown, or NULL */
};

/* The "size" member, quoted or not.  A size that is not one (negative,
 * past 2^63-1) marks the item bad instead of failing the page. */
static int item_size(struct json *s, struct item *it)
{
	char num[64], *end;

	if (json_num_text(s, num, sizeof(num)))
		return -EINVAL;
	errno = 0;
	it->size = strtoull(num, &end, 10);
	if (errno || *end || end == num || !isdigit((unsigned char)num[0]) ||
	    it->size > (uint64_t)INT64_MAX)
		it->bad = "a size that is not a number from 0 to 2^63-1";
	it->has_size = true;
	return 0;
}

/* "crc32c": the base64 of the CRC's 4 bytes, big-endian.  One that does
 * not decode is an error of the page: it is the object's integrity. */
static int item_crc32c(struct json *s, struct item *it)
{
	unsigned char raw[8];
	char b64[16];
	size_t n;

	if (json_string(s, b64, sizeof(b64), &n))
		return -EINVAL;
	/* 4 bytes: 8 characters with their "==" padding, 3 decoded ones */
	if (n != 8 || EVP_DecodeBlock(raw, (const unsigned char *)b64, 8) != 6)
		return json_fail(s, "a crc32c that is not 4 bytes of base64");
	checksum_from_crc32c((uint32_t)raw[0] << 24 | (uint32_t)raw[1] << 16 |
				 (uint32_t)raw[2] << 8 | raw[3],
			     &it->sum);
	checksum_format(&it->sum, it->digest);
	return 0;
}

/* An object resource: {"name": ..., "size": "N", "generation": "G",
 * "updated": "..."}; other members are skipped. */
static int parse_item(struct json *s, struct item *it)
{
	char key[32], upd[64];
	bool first = true;
	size_t n;
	int rc;

	memset(it, 0, sizeof(*it));
	if (json_expect(s, '{'))
		return -EINVAL;
	while ((rc = json_next(s, '}', &first)) == 1) {
		if (json_key(s, key, sizeof(key)))
			return -EINVAL;
		if (!strcmp(key, "name")) {
			if (json_string(s, it->name, sizeof(it->name), &n))
				return -EINVAL;
			if (strlen(it->name) != n)
				return json_fail(s, "NUL in a name");
			it->has_name = true;
		} else if (!strcmp(key, "size")) {
			if (item_size(s, it))
				return -EINVAL;
		} else if (!strcmp(key, "generation")) {
			uint64_t g;

			if (json_u64(s, &g))
				return -EINVAL;
			snprintf(it->generation, sizeof(it->generation),
				 "%" PRIu64, g);
			it->has_gen = true;
		} else if (!strcmp(key, "updated")) {
			if (json_string(s, upd, sizeof(upd), &n))
				return -EINVAL;
			it->mtime = parse_rfc3339(upd);
		} else if (!strcmp(key, "crc32c")) {
			if (item_crc32c(s, it))
				return -EINVAL;
		} else if (json_skip(s)) {
			return -EINVAL;
		}
	}
	if (rc < 0)
		return rc;
	if (!it->has_name || !it->has_size || !it->has_gen)
		return json_fail(s, "an object without name, size or "
				    "generation");
	return 0;
}

struct page {
	const char *prefix; /* the listed prefix, "" or ending in '/' */
	size_t plen;
	source_list_cb cb;
	void *arg;
	size_t entries;	  /* children handed to cb */
	bool placeholder; /* an object named exactly prefix: the dir exists */
	char next[PAGE_TOKEN_MAX];
};

/* The part of a listed name below the listed prefix. */
static const char *child_of(struct json *s, struct page *pg, const char *name)
{
	if (strncmp(name, pg->prefix, pg->plen)) {
		json_fail(s, "a name outside the listed prefix");
		return NULL;
	}
	return name + pg->plen;
}

static int page_item(struct json *s, struct page *pg)
{
	struct item it;
	const char *rest;
	int rc;

	if (parse_item(s, &it))
		return -EINVAL;
	rest = child_of(s, pg, it.name);
	if (!rest)
		return -EINVAL;
	if (!*rest) {
		pg->placeholder = true; /* "dir/" made by a console */
		return 0;
	}
	/* A name below the delimiter goes on all the same: the tree names
	 * it in its warning and leaves it out. */
	{
		struct source_object o = {.name = rest,
					  .size = it.size,
					  .mtime = it.mtime,
					  .version = it.generation,
					  .digest = it.digest,
					  .bad = it.bad};

		rc = pg->cb(pg->arg, &o);
	}
	pg->entries++;
	return rc;
}

static int page_prefix(struct json *s, struct page *pg)
{
	char name[NAME_MAX_GCS + 1];
	const char *rest;
	size_t n;
	struct source_object o = {.is_dir = true, .version = ""};

	if (json_string(s, name, sizeof(name), &n))
		return -EINVAL;
	rest = child_of(s, pg, name);
	if (!rest)
		return -EINVAL;
	n = strlen(rest);
	if (n == 0 || rest[n - 1] != '/')
		return json_fail(s, "a prefix not ending in '/'");
	/* "a//b" gives an empty name, which the tree names and leaves out. */
	name[pg->plen + n - 1] = '\0';
	o.name = rest;
	pg->entries++;
	return pg->cb(pg->arg, &o);
}

/* Parses one page of objects.list, handing each child to pg->cb. */
static int parse_page(const char *body, size_t len, struct page *pg, char **err)
{
	struct json s;
	char key[32];
	bool first = true;
	size_t n;
	int rc;

	pg->next[0] = '\0';
	json_init(&s, body, len, "GCS listing", err);
	if (json_expect(&s, '{'))
		return -EINVAL;
	while ((rc = json_next(&s, '}', &first)) == 1) {
		bool f2 = true;
		int r2;

		if (json_key(&s, key, sizeof(key)))
			return -EINVAL;
		if (!strcmp(key, "items") || !strcmp(key, "prefixes")) {
			bool items = key[0] == 'i';

			if (json_expect(&s, '['))
				return -EINVAL;
			while ((r2 = json_next(&s, ']', &f2)) == 1) {
				r2 = items ? page_item(&s, pg)
					   : page_prefix(&s, pg);
				if (r2)
					return r2;
			}
			if (r2 < 0)
				return r2;
		} else if (!strcmp(key, "nextPageToken")) {
			if (json_string(&s, pg->next, sizeof(pg->next), &n))
				return -EINVAL;
		} else if (json_skip(&s)) {
			return -EINVAL;
		}
	}
	if (rc < 0 || json_end(&s))
		return -EINVAL;
	return 0;
}

int gcs_parse_list_page(const char *body, size_t len, const char *prefix,
			source_list_cb cb, void *arg, char **err)
{
	struct page pg = {
	    .prefix = prefix, .plen = strlen(prefix), .cb = cb, .arg = arg};

	return parse_page(body, len, &pg, err);
}

/* Appends "&NAME=ENCODED(value)" to url (cap bytes). */
static int add_param(char *url, size_t cap, const char *name, const char *value)
{
	size_t n = strlen(url);
	int k;

	k = snprintf(url + n, cap - n, "%s%s=", strchr(url, '?') ? "&" : "?",
		     name);
	if (k < 0 || (size_t)k >= cap - n)
		return -ENAMETOOLONG;
	n += (size_t)k;
	k = url_encode(value, false, url + n, cap - n);
	return k < 0 ? k : 0;
}

/* ENDPOINT/storage/v1/b/BUCKET/o/ENCODED(prefix + path) */
static int object_url(struct gcs_src *gs, const char *path, char *url,
		      size_t cap)
{
	char name[NAME_MAX_GCS * 2];
	int k;

	k = snprintf(name, sizeof(name), "%s%s", gs->prefix, path);
	if (k < 0 || (size_t)k >= sizeof(name))
		return -ENAMETOOLONG;
	k = snprintf(url, cap, "%s/", gs->objects);
	if (k < 0 || (size_t)k >= cap)
		return -ENAMETOOLONG;
	k = url_encode(name, false, url + k, cap - (size_t)k);
	return k < 0 ? k : 0;
}

/* One listing of dir, a page at a time (source_list_pages). */
struct gcs_listing {
	struct gcs_src *gs;
	const char *dir, *prefix;
	unsigned max, pages;
	bool stop_early;
	struct page *pg;
	char url[URL_MAX];
};

/* source_page_fn: the page after page token sent. */
static int list_page(void *arg, const char *sent, const char **next,
		     bool *more, size_t *names, char **err)
{
	struct gcs_listing *l = arg;
	struct gcs_src *gs = l->gs;
	struct page *pg = l->pg;
	const char *dir = l->dir;
	char *url = l->url, maxs[16];
	struct fetch_res res;
	char *perr = NULL;
	int rc;

	snprintf(url, sizeof(l->url), "%s", gs->objects);
	snprintf(maxs, sizeof(maxs), "%u", l->max);
	rc = add_param(url, sizeof(l->url), "prefix", l->prefix);
	if (!rc)
		rc = add_param(url, sizeof(l->url), "delimiter", "/");
	if (!rc)
		rc = add_param(url, sizeof(l->url), "fields", LIST_FIELDS);
	if (!rc && l->max)
		rc = add_param(url, sizeof(l->url), "maxResults", maxs);
	if (!rc && sent[0])
		rc = add_param(url, sizeof(l->url), "pageToken", sent);
	if (rc) {
		err_set(err, "%s%s: listing URL too long", gs->base.id, dir);
		return rc;
	}
	rc = api_get(gs, url, &res);
	if (rc) {
		err_set(err, "listing %s%s%s", res.err,
			rc == -EACCES ? "; credentials: " : "",
			rc == -EACCES ? gcp_creds_describe(gs->creds) : "");
		return rc;
	}
	rc = parse_page(res.body, res.len, pg, &perr);
	free(res.body);
	if (rc) {
		if (rc == -EINVAL || perr)
			err_set(err, "listing %s%s%s: %s", gs->base.id, dir,
				*dir ? "/" : "", perr ? perr : "bad page");
		free(perr);
		return rc == -EINVAL ? -EIO : rc;
	}
	l->pages++;
	*names = 0; /* counted in pg->entries */
	*next = pg->next;
	*more = pg->next[0] &&
		!(l->stop_early && (pg->entries || pg->placeholder));
	return 0;
}

/*
 * Lists the children of dir page by page.  max_results limits a page (0:
 * the server's choice); with stop_early the first page that shows anything
 * ends it (an existence check).
 */
static int list_prefix(struct gcs_src *gs, const char *dir, unsigned max,
		       bool stop_early, struct page *pg, char **err)
{
	char prefix[NAME_MAX_GCS * 2];
	struct gcs_listing *l;
	size_t count;
	int rc, k;

	k = snprintf(prefix, sizeof(prefix), "%s%s%s", gs->prefix, dir,
		     *dir ? "/" : "");
	if (k < 0 || (size_t)k >= sizeof(prefix)) {
		err_set(err, "%s%s: path too long", gs->base.id, dir);
		return -ENAMETOOLONG;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pg->prefix = prefix;
	pg->plen = (size_t)k;
	pg->next[0] = '\0';
	l->gs = gs;
	l->dir = dir;
	l->prefix = prefix;
	l->max = max;
	l->stop_early = stop_early;
	l->pg = pg;
	rc = source_list_pages(&gs->base, prefix + strlen(gs->prefix),
			       "page token", sizeof(pg->next), list_page, l,
			       &count, err);
	if (!rc)
		log_debug("listed %s%s: %zu entries in %u pages", gs->base.id,
			  dir, pg->entries, l->pages);
	free(l);
	return rc;
}

static int gcs_list_dir(struct source *src, const char *dir, source_list_cb cb,
			void *arg)
{
	struct gcs_src *gs = gs_of(src);
	struct page *pg = calloc(1, sizeof(*pg));
	char *err = NULL;
	int rc;

	if (!pg)
		return -ENOMEM;
	pg->cb = cb;
	pg->arg = arg;
	rc = list_prefix(gs, dir, 0, false, pg, &err);
	if (rc && err && rc != -ENOENT)
		log_error("%s", err);
	/* GCS has no directories: an empty prefix other than the root is
	 * absent unless a placeholder object names it. */
	if (!rc && *dir && !pg->entries && !pg->placeholder)
		rc = -ENOENT;
	free(err);
	free(pg);
	return rc;
}

static int gcs_stat(struct source *src, const char *path,
		    struct source_object *out)
{
	static __thread char name[NAME_MAX_GCS + 1], gen[32],
	    digest[CHECKSUM_TEXT_MAX];
	struct gcs_src *gs = gs_of(src);
	char url[URL_MAX], *perr = NULL;
	struct fetch_res res;
	struct item it;
	struct json s;
	int rc;

	if (source_stat_root(out, path, name, sizeof(name)))
		return 0;
	rc = object_url(gs, path, url, sizeof(url));
	if (!rc)
		rc = add_param(url, sizeof(url), "fields", STAT_FIELDS);
	if (rc)
		return rc;
	rc = api_get(gs, url, &res);
	if (rc == -ENOENT) {
		/* Not an object: a directory if anything lies below it. */
		struct page *pg = calloc(1, sizeof(*pg));
		char *err = NULL;

		if (!pg)
			return -ENOMEM;
		pg->cb = source_count_only;
		rc = list_prefix(gs, path, 1, true, pg, &err);
		if (!rc)
			rc = pg->entries || pg->placeholder ? 0 : -ENOENT;
		else if (err)
			log_error("%s", err);
		out->is_dir = rc == 0;
		free(err);
		free(pg);
		return rc;
	}
	if (rc)
		return rc;
	json_init(&s, res.body, res.len, "GCS object metadata", &perr);
	rc = parse_item(&s, &it);
	if (!rc)
		rc = json_end(&s);
	free(res.body);
	if (rc) {
		log_error("%s%s: %s", gs->base.id, path,
			  perr ? perr : "bad metadata");
		free(perr);
		return -EIO;
	}
	snprintf(gen, sizeof(gen), "%s", it.generation);
	snprintf(digest, sizeof(digest), "%s", it.digest);
	out->digest = digest;
	out->size = it.size;
	out->mtime = it.mtime;
	out->version = gen;
	return 0;
}

/* req.resign for reads: as api_reauth. */
static int read_reauth(void *arg, struct fetch_req *req)
{
	struct source_read *rd = arg;
	int rc = bearer_renew(gs_of(rd->src), &rd->headers, &rd->auth_serial);

	req->headers = rd->headers;
	return rc;
}

static int gcs_prepare_read(struct source *src, const char *path,
			    const char *version, uint64_t off, uint64_t len,
			    struct source_read *rd)
{
	struct gcs_src *gs = gs_of(src);
	int rc;

	memset(&rd->req, 0, sizeof(rd->req));
	rd->headers = NULL;
	rc = object_url(gs, path, rd->url, sizeof(rd->url));
	if (!rc)
		rc = add_param(rd->url, sizeof(rd->url), "alt", "media");
	if (!rc && version && *version)
		rc = add_param(rd->url, sizeof(rd->url), "generation", version);
	if (rc)
		return rc;
	rd->src = src;
	rc = read_reauth(rd, &rd->req);
	if (rc)
		return rc;
	rd->req.url = rd->url;
	rd->req.version = version;
	rd->req.range_off = off;
	rd->req.range_len = len;
	rd->req.resign = read_reauth;
	rd->req.resign_arg = rd;
	return 0;
}

/* A read's token was refused: renew it before the next request. */
static bool gcs_auth_refused(struct source *src, unsigned serial)
{
	return gcp_creds_refused(gs_of(src)->creds, serial);
}

/* The JSON API refuses an expired token with 401. */
static bool gcs_auth_expired(const struct fetch_req *req,
			     const struct fetch_res *res, int rc)
{
	(void)req;
	return rc == -EACCES && res->status == 401;
}

static void gcs_destroy(struct source *src)
{
	struct gcs_src *gs = gs_of(src);

	gcp_creds_free(gs->creds);
	free(gs->objects);
	free(gs->prefix);
	free(src->id);
	free(gs);
}

static const struct source_ops gcs_ops = {
    .scheme = "gs",
    .list_dir = gcs_list_dir,
    .stat = gcs_stat,
    .prepare_read = gcs_prepare_read,
    .auth_refused = gcs_auth_refused,
    .auth_expired = gcs_auth_expired,
    .destroy = gcs_destroy,
};

/* Bucket names: 3 to 222 of [a-z0-9._-], starting and ending alphanumeric. */
static bool bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 222 || !isalnum((unsigned char)b[0]) ||
	    !isalnum((unsigned char)b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)b[i]) &&
		    !isdigit((unsigned char)b[i]) && !strchr("._-", b[i]))
			return false;
	return true;
}

/* --endpoint, else STORAGE_EMULATOR_HOST ("host:port" or a URL), else
 * Google's; without a trailing '/'. */
static char *endpoint_of(const struct source_options *opt, bool *emulator)
{
	const char *e = opt->endpoint, *env = getenv("STORAGE_EMULATOR_HOST");
	char *out;
	size_t n;

	*emulator = false;
	if (!e && env && *env) {
		e = env;
		*emulator = true;
	}
	if (!e)
		return strdup(DEFAULT_ENDPOINT);
	out = strstr(e, "://") ? strdup(e) : strdupf("http://%s", e);
	n = strlen(out);
	while (n && out[n - 1] == '/')
		out[--n] = '\0';
	return out;
}

static int source_gcs_open(const char *spec, const struct source_options *opt,
			   struct fetch_engine *fe, struct source **out, char **err)
{
	struct gcp_creds_options co = {0};
	const char *b = spec + 5, *slash; /* after "gs://" */
	struct gcs_src *gs;
	struct page *pg = NULL;
	char *endpoint = NULL, *p;
	size_t bl;
	int rc;

	*out = NULL;
	fetch_no_redirect(fe);
	slash = strchr(b, '/');
	bl = slash ? (size_t)(slash - b) : strlen(b);
	if (!bucket_ok(b, bl)) {
		err_set(err,
			"%s: bad bucket name (3 to 222 of a-z, 0-9, '.', "
			"'_', '-')",
			spec);
		return -EINVAL;
	}
	if (strpbrk(spec, "?#")) {
		err_set(err,
			"%s: query strings and fragments are not "
			"supported in a source URL",
			spec);
		return -EINVAL;
	}
	gs = calloc(1, sizeof(*gs));
	if (!gs)
		return -ENOMEM;
	gs->base.ops = &gcs_ops;
	gs->base.fetch = fe;
	/* The prefix: no leading '/', one trailing '/' unless empty. */
	p = slash ? (char *)slash + strspn(slash, "/") : "";
	gs->prefix =
	    strdupf("%s%s", p, *p && p[strlen(p) - 1] != '/' ? "/" : "");
	gs->base.id = strdupf("gs://%.*s/%s", (int)bl, b, gs->prefix);
	endpoint = endpoint_of(opt, &co.emulator);
	if (!endpoint) {
		rc = -ENOMEM;
		goto fail;
	}
	gs->objects = strdupf("%s/storage/v1/b/%.*s/o", endpoint, (int)bl, b);
	if (strlen(gs->prefix) > NAME_MAX_GCS) {
		err_set(err, "%s: prefix longer than %d bytes", spec,
			NAME_MAX_GCS);
		rc = -ENAMETOOLONG;
		goto fail;
	}
	/* An emulator's origin is judged once it is known whether it gets
	 * credentials: without any configured, it gets none. */
	if (!opt->anonymous) {
		rc = fetch_credentials(fe, co.emulator ? NULL : endpoint, spec,
				       BEARER_WHAT, err);
		if (rc)
			goto fail;
	}
	if (opt->no_check)
		goto done; /* id only: see source_options */
	co.token_file = opt->token_file;
	co.token_command = opt->token_command;
	co.token_command_dir = opt->token_command_dir;
	co.token_lifetime = opt->token_lifetime;
	co.token_timeout = opt->token_timeout;
	co.anonymous = opt->anonymous;
	rc = gcp_creds_new(&co, fe, &gs->creds, err);
	if (!rc && co.emulator && !gcp_creds_anonymous(gs->creds))
		rc = fetch_credentials(fe, endpoint, spec, BEARER_WHAT, err);
	if (rc)
		goto fail;
	/* The prefix must list: a wrong bucket, endpoint or credential
	 * shows at mount time. */
	pg = calloc(1, sizeof(*pg));
	if (!pg) {
		rc = -ENOMEM;
		goto fail;
	}
	pg->cb = source_count_only;
	rc = list_prefix(gs, "", 1, true, pg, err);
	if (rc)
		goto fail;
	if (*gs->prefix && !pg->entries && !pg->placeholder)
		log_warn("%s: nothing under this prefix (yet)", gs->base.id);
	{
		char shown[512];

		log_info("%s: GCS at %s", gs->base.id,
			 url_redact(endpoint, shown, sizeof(shown)));
	}
done:
	free(pg);
	free(endpoint);
	*out = &gs->base;
	return 0;
fail:
	free(pg);
	free(endpoint);
	gcs_destroy(&gs->base);
	return rc;
}

const struct origin_scheme origin_gcs = {
    .name = "gs",
    .prefixes = {"gs://", NULL},
    .open = source_gcs_open,
};
