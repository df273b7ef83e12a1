/* source_azure: an Azure Blob Storage prefix (see source_azure.h). */
#include "config.h"

#include "source_azure.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

#include "checksum.h"
#include "creds_azure.h"
#include "log.h"
#include "text.h"
#include "units.h"
#include "url.h"
#include "xml.h"

/*
 * Azure Blob Storage, through its REST API: List Blobs with delimiter '/'
 * lists one directory, a page at a time (NextMarker); Get Blob Properties
 * (HEAD) stats one blob; reads are ranged GETs (Range) carrying the ETag
 * seen at listing or stat time as If-Match, so a blob replaced while open
 * fails with 412 instead of mixing versions.  Every request names the API
 * version (x-ms-version) and carries the credentials creds_azure picked: a
 * SAS in the query, a Shared Key signature, or a bearer token.  A Shared
 * Key signature covers x-ms-date and lasts 15 minutes: each retry of a
 * read is signed again.
 */

#define API_VERSION "2021-08-06"
#define DEFAULT_SUFFIX "blob.core.windows.net"
#define LIST_CAP (64u << 20) /* bytes of one listing page */
#define NAME_MAX_AZ 1024     /* bytes of a blob name */
#define URL_MAX 8192
#define AUTH_MAX (AZURE_TOKEN_MAX + 32)

struct az_src {
	struct source base;
	char *origin; /* "https://host[:port]" that requests go to */
	char *root;   /* the endpoint's path: "" or "/devstoreaccount1" */
	char *account;
	char *container;
	char *prefix; /* "" or "a/b/" */
	struct azure_creds *creds;
};

static struct az_src *az_of(struct source *src)
{
	return (struct az_src *)src;
}

/* ---- List Blobs pages ---- */

struct lp {
	const char *prefix;
	size_t plen;
	source_list_cb cb;
	void *arg;
	struct azure_page *page;
	/* The Blob being read. */
	char name[NAME_MAX_AZ + 1];
	bool has_name, has_size;
	uint64_t size;
	const char *bad; /* why the entry cannot be shown, or NULL */
	int64_t mtime;
	char etag[130];
	char digest[CHECKSUM_TEXT_MAX];
};

/* Content-MD5: base64 of 16 bytes, as "md5:HEX"; anything else, none. */
static void md5_digest(const char *b64, char *out)
{
	unsigned char raw[18];
	char text[CHECKSUM_TEXT_MAX];
	struct checksum c;
	int n;

	out[0] = '\0';
	if (strlen(b64) != 24 || strcmp(b64 + 22, "=="))
		return;
	n = snprintf(text, sizeof(text), "md5:");
	if (EVP_DecodeBlock(raw, (const unsigned char *)b64, 24) != 18)
		return;
	for (int i = 0; i < 16; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%02x",
			      raw[i]);
	if (!checksum_parse(text, &c))
		checksum_format(&c, out);
}

/* An Etag as the listing gives it (0x8D...) in the quoted form of the
 * ETag header, which If-Match and the answers' validators compare. */
static int etag_quoted(struct xml *x, char *out, size_t cap)
{
	const bool quoted = x->text[0] == '"' || !strncmp(x->text, "W/", 2);

	if (x->tlen + 3 > cap)
		return xml_fail(x, "<Etag> too long");
	snprintf(out, cap, quoted ? "%s" : "\"%s\"", x->text);
	return 0;
}

static int lp_emit(struct lp *l, const char *full, bool dir)
{
	char name[NAME_MAX_AZ + 1];
	size_t n;
	struct source_object o = {.is_dir = dir,
				  .size = dir ? 0 : l->size,
				  .mtime = dir ? 0 : l->mtime,
				  .version = dir ? "" : l->etag,
				  .digest =
				      dir || !l->digest[0] ? NULL : l->digest,
				  .bad = dir ? NULL : l->bad};

	if (strncmp(full, l->prefix, l->plen)) {
		log_warn("Azure listing of \"%s\": blob \"%s\" is outside it; "
			 "skipped",
			 l->prefix, full);
		return 0;
	}
	snprintf(name, sizeof(name), "%s", full + l->plen);
	n = strlen(name);
	if (dir && n && name[n - 1] == '/')
		name[--n] = '\0';
	l->page->names++;
	/* The prefix's own marker blob ("dir/", as tools make for empty
	 * directories): the directory exists, nothing to show. */
	if (!n && !dir)
		return 0;
	/* A name the tree cannot show goes on all the same: the tree names
	 * it in its warning. */
	o.name = name;
	return l->cb(l->arg, &o);
}

/* An element of a <Blob>'s <Properties>. */
static int lp_property(struct lp *l, struct xml *x, const char *el)
{
	if (!strcmp(el, "Content-Length")) {
		char *end;

		errno = 0;
		l->size = strtoull(x->text, &end, 10);
		if (errno || end == x->text || *end ||
		    !isdigit((unsigned char)x->text[0]) ||
		    l->size > (uint64_t)INT64_MAX)
			l->bad = "a <Content-Length> that is not a number "
				 "from 0 to 2^63-1";
		l->has_size = true;
	} else if (!strcmp(el, "Etag")) {
		return etag_quoted(x, l->etag, sizeof(l->etag));
	} else if (!strcmp(el, "Last-Modified")) {
		const time_t t = curl_getdate(x->text, NULL);

		l->mtime = t < 0 ? 0 : (int64_t)t;
	} else if (!strcmp(el, "Content-MD5")) {
		md5_digest(x->text, l->digest);
	}
	return 0;
}

static int lp_end(void *arg, struct xml *x)
{
	struct lp *l = arg;
	const char *el = x->names[x->depth - 1];
	const char *parent = x->depth > 1 ? x->names[x->depth - 2] : "";

	if (strcmp(x->names[0], "EnumerationResults"))
		return xml_fail(x, "the root is not <EnumerationResults>");
	if (x->depth == 5 && !strcmp(parent, "Properties") &&
	    !strcmp(x->names[2], "Blob"))
		return lp_property(l, x, el);
	if (x->depth == 4 && !strcmp(el, "Name") &&
	    !strcmp(parent, "BlobPrefix")) {
		if (x->tlen > NAME_MAX_AZ)
			return xml_fail(x, "blob prefix too long");
		return lp_emit(l, x->text, true);
	}
	if (x->depth == 4 && !strcmp(el, "Name") && !strcmp(parent, "Blob")) {
		if (x->tlen > NAME_MAX_AZ)
			return xml_fail(x, "blob name too long");
		memcpy(l->name, x->text, x->tlen + 1);
		l->has_name = true;
		return 0;
	}
	if (x->depth == 3 && !strcmp(el, "Blob") && !strcmp(parent, "Blobs")) {
		int rc;

		if (!l->has_name || !l->has_size)
			return xml_fail(x, "<Blob> without <Name> or "
					   "<Content-Length>");
		rc = lp_emit(l, l->name, false);
		l->has_name = l->has_size = false;
		l->bad = NULL;
		l->mtime = 0;
		l->etag[0] = l->digest[0] = '\0';
		return rc;
	}
	if (x->depth == 2 && !strcmp(el, "NextMarker")) {
		if (x->tlen >= sizeof(l->page->marker))
			return xml_fail(x, "<NextMarker> too long");
		memcpy(l->page->marker, x->text, x->tlen + 1);
	}
	return 0;
}

int azure_parse_list_page(const char *xml, size_t len, const char *prefix,
			  source_list_cb cb, void *arg, struct azure_page *page,
			  char **err)
{
	struct lp *l;
	struct xml *x;
	int rc;

	memset(page, 0, sizeof(*page));
	/* ~7 KiB of parser state: off the stack of the FUSE threads. */
	l = calloc(1, sizeof(*l));
	x = calloc(1, sizeof(*x));
	if (!l || !x) {
		free(l);
		free(x);
		return -ENOMEM;
	}
	l->prefix = prefix;
	l->plen = strlen(prefix);
	l->cb = cb;
	l->arg = arg;
	l->page = page;
	xml_init(x, xml, len, lp_end, l);
	rc = xml_walk(x);
	if (rc && x->err) {
		*err = x->err;
		x->err = NULL;
	}
	free(x->err);
	free(x);
	free(l);
	return rc;
}

/* ---- requests ---- */

/* One query parameter, its value unencoded; a request's are in order. */
struct param {
	const char *name, *value;
};

static int add(char *out, size_t *len, size_t cap, const char *s)
{
	size_t n = strlen(s);

	if (*len + n + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(out + *len, s, n + 1);
	*len += n;
	return 0;
}

static int add_enc(char *out, size_t *len, size_t cap, const char *s,
		   bool keep_slash)
{
	int n = url_encode(s, keep_slash, out + *len, cap - *len);

	if (n < 0)
		return n;
	*len += (size_t)n;
	return 0;
}

/* Appends "NAME: VALUE" (value in one or two parts) to *h. */
static int header(struct curl_slist **h, const char *name, const char *a,
		  const char *b)
{
	char line[AUTH_MAX];
	struct curl_slist *n;

	if (snprintf(line, sizeof(line), "%s: %s%s", name, a, b) >=
	    (int)sizeof(line))
		return -ENAMETOOLONG;
	n = curl_slist_append(*h, line);
	if (!n)
		return -ENOMEM;
	*h = n;
	return 0;
}

/*
 * The Shared Key string to sign (version 2015-02-21 and later): the verb,
 * eleven standard headers of which a GET or HEAD of ours sends only
 * If-Match and Range, the x-ms- headers in order, then the canonical
 * resource: "/ACCOUNT" + the URL's path as sent + "\nname:value" per
 * query parameter, unencoded, by name.
 */
static int shared_key(struct az_src *a, const char *method, const char *path,
		      const struct param *q, size_t nq, const char *if_match,
		      const char *range, const char *date,
		      struct curl_slist **h)
{
	const size_t cap = URL_MAX + 1024;
	char *sts = malloc(cap), sig[128], cred[192];
	size_t n = 0;
	int rc, k;

	if (!sts)
		return -ENOMEM;
	k = snprintf(sts, cap,
		     "%s\n\n\n\n\n\n\n\n%s\n\n\n%s\nx-ms-date:%s\n"
		     "x-ms-version:" API_VERSION "\n/%s%s",
		     method, if_match ? if_match : "", range ? range : "", date,
		     a->account, path);
	rc = k < 0 || (size_t)k >= cap ? -ENAMETOOLONG : 0;
	n = rc ? 0 : (size_t)k;
	for (size_t i = 0; !rc && i < nq; i++) {
		rc = add(sts, &n, cap, "\n");
		if (!rc)
			rc = add(sts, &n, cap, q[i].name);
		if (!rc)
			rc = add(sts, &n, cap, ":");
		if (!rc)
			rc = add(sts, &n, cap, q[i].value);
	}
	if (!rc)
		rc = azure_creds_sign(a->creds, sts, sig, sizeof(sig));
	free(sts);
	if (!rc && (size_t)snprintf(cred, sizeof(cred), "%s:%s", a->account,
				    sig) >= sizeof(cred))
		rc = -ENAMETOOLONG;
	if (!rc)
		rc = header(h, "x-ms-date", date, "");
	if (!rc)
		rc = header(h, "Authorization", "SharedKey ", cred);
	return rc;
}

/*
 * Builds url and the headers of one request: `blob` is the full blob name
 * (NULL for the container), q its query (names in order).  range ("bytes=
 * A-B", as the fetch engine sends it) is signed by Shared Key, and
 * if_match is sent.  *serial names the bearer token used.
 */
static int az_request(struct az_src *a, const char *method, const char *blob,
		      const struct param *q, size_t nq, const char *if_match,
		      const char *range, char *url, size_t cap,
		      struct curl_slist **headers, unsigned *serial)
{
	char path[URL_MAX], date[40], auth[AUTH_MAX];
	const enum azure_auth kind = azure_creds_kind(a->creds);
	size_t pl = 0, ul = 0;
	int rc;

	*headers = NULL;
	*serial = 0;
	if (if_match && !*if_match)
		if_match = NULL;
	rc = add(path, &pl, sizeof(path), a->root);
	if (!rc)
		rc = add(path, &pl, sizeof(path), "/");
	if (!rc)
		rc = add(path, &pl, sizeof(path), a->container);
	if (!rc && blob)
		rc = add(path, &pl, sizeof(path), "/");
	if (!rc && blob)
		rc = add_enc(path, &pl, sizeof(path), blob, true);
	if (!rc)
		rc = add(url, &ul, cap, a->origin);
	if (!rc)
		rc = add(url, &ul, cap, path);
	for (size_t i = 0; !rc && i < nq; i++) {
		rc = add(url, &ul, cap, i ? "&" : "?");
		if (!rc)
			rc = add(url, &ul, cap, q[i].name);
		if (!rc)
			rc = add(url, &ul, cap, "=");
		if (!rc)
			rc = add_enc(url, &ul, cap, q[i].value, false);
	}
	if (!rc && kind == AZ_SAS) {
		rc = add(url, &ul, cap, nq ? "&" : "?");
		if (!rc)
			rc = add(url, &ul, cap, azure_creds_sas(a->creds));
	}
	if (!rc)
		rc = header(headers, "x-ms-version", API_VERSION, "");
	if (!rc && if_match)
		rc = header(headers, "If-Match", if_match, "");
	if (!rc && kind == AZ_SHARED_KEY) {
		if (!format_http_date((int64_t)time(NULL), date, sizeof(date)))
			rc = -EINVAL;
		else
			rc = shared_key(a, method, path, q, nq, if_match, range,
					date, headers);
	} else if (!rc && kind == AZ_BEARER) {
		rc = azure_creds_bearer(a->creds, auth, sizeof(auth), serial);
		if (!rc) {
			struct curl_slist *n =
			    curl_slist_append(*headers, auth);

			if (n)
				*headers = n;
			else
				rc = -ENOMEM;
		}
		memset(auth, 0, sizeof(auth));
	}
	if (rc) {
		curl_slist_free_all(*headers);
		*headers = NULL;
	}
	return rc;
}

/* A sentence for the errors the user can fix. */
static const char *hint(struct az_src *a, int rc, char *buf, size_t cap)
{
	if (rc == -EACCES && azure_creds_kind(a->creds) == AZ_ANON)
		snprintf(buf, cap,
			 ": access denied to an anonymous request "
			 "(--anonymous): the container is not public");
	else if (rc == -EACCES)
		snprintf(buf, cap,
			 ": access denied: check the credentials (%s), their "
			 "permissions on the container (read and list) and "
			 "the clock",
			 azure_creds_describe(a->creds));
	else
		buf[0] = '\0';
	return buf;
}

/* One request (a listing page, a stat's HEAD), signed again for each
 * attempt. */
struct az_sign {
	struct az_src *a;
	const char *method, *blob;
	const struct param *q;
	size_t nq;
	char *url;
	size_t cap;
	unsigned serial;
};

static int az_sign(void *arg, struct fetch_req *req)
{
	struct az_sign *l = arg;

	curl_slist_free_all(req->headers);
	req->url = l->url;
	return az_request(l->a, l->method, l->blob, l->q, l->nq, NULL, NULL,
			  l->url, l->cap, &req->headers, &l->serial);
}

/*
 * GETs one listing page into *res (the caller frees res->body).  A bearer
 * token the service refuses is renewed and the page asked for once more.
 */
static int list_get(struct az_src *a, const struct param *q, size_t nq,
		    char *url, size_t cap, struct fetch_res *res)
{
	struct az_sign l = {
	    .a = a, .method = "GET", .q = q, .nq = nq, .url = url, .cap = cap};
	struct fetch_req req = {.grow = true, .cap = LIST_CAP};
	int rc =
	    source_fetch_signed(&a->base, &req, res, az_sign, &l, &l.serial);

	curl_slist_free_all(req.headers);
	return rc;
}

/* One listing of prefix pfx, a page at a time (source_list_pages). */
struct az_listing {
	struct az_src *a;
	const char *pfx;
	unsigned max;
	source_list_cb cb;
	void *arg;
	struct azure_page page;
	char url[URL_MAX];
};

/* source_page_fn: the page after marker sent. */
static int list_page(void *arg, const char *sent, const char **next, bool *more,
		     size_t *names, char **err)
{
	struct az_listing *l = arg;
	struct az_src *a = l->a;
	const char *pfx = l->pfx;
	/* In the order Shared Key signs them: by name. */
	struct param q[6];
	struct fetch_res res;
	char *perr = NULL, maxs[16], h[512];
	size_t nq = 0;
	int rc;

	snprintf(maxs, sizeof(maxs), "%u", l->max);
	q[nq++] = (struct param){"comp", "list"};
	q[nq++] = (struct param){"delimiter", "/"};
	if (sent[0])
		q[nq++] = (struct param){"marker", sent};
	if (l->max)
		q[nq++] = (struct param){"maxresults", maxs};
	q[nq++] = (struct param){"prefix", pfx};
	q[nq++] = (struct param){"restype", "container"};
	rc = list_get(a, q, nq, l->url, URL_MAX, &res);
	if (rc) {
		err_set(err, "listing %s%s: %s%s", a->base.id,
			pfx + strlen(a->prefix), res.err,
			hint(a, rc, h, sizeof(h)));
		return rc;
	}
	rc = azure_parse_list_page(res.body, res.len, pfx, l->cb, l->arg,
				   &l->page, &perr);
	free(res.body);
	*names = l->page.names;
	if (rc) {
		if (perr || rc == -EIO)
			err_set(err, "listing %s%s: %s", a->base.id,
				pfx + strlen(a->prefix),
				perr ? perr : "failed");
		free(perr);
		return rc;
	}
	*next = l->page.marker;
	*more = l->page.marker[0] && !l->max;
	return 0;
}

/* Lists prefix `pfx` page by page (max 0: the server's page size, else
 * one page of at most max names). */
static int list_prefix(struct source *src, const char *pfx, unsigned max,
		       source_list_cb cb, void *arg, size_t *count, char **err)
{
	struct az_src *a = az_of(src);
	struct az_listing *l = calloc(1, sizeof(*l));
	int rc;

	*count = 0;
	if (!l)
		return -ENOMEM;
	l->a = a;
	l->pfx = pfx;
	l->max = max;
	l->cb = cb;
	l->arg = arg;
	rc =
	    source_list_pages(src, pfx + strlen(a->prefix), "marker",
			      sizeof(l->page.marker), list_page, l, count, err);
	free(l);
	return rc;
}

static int az_list_dir(struct source *src, const char *dir, source_list_cb cb,
		       void *arg)
{
	/* Blob storage has no directories (without a hierarchical
	 * namespace). */
	return source_list_under(src, az_of(src)->prefix, dir, 0, list_prefix,
				 cb, arg);
}

static int az_stat(struct source *src, const char *path,
		   struct source_object *out)
{
	static __thread char name[NAME_MAX_AZ + 1], ver[130];
	struct az_src *a = az_of(src);
	struct fetch_req req = {.head = true};
	struct fetch_res res;
	struct az_sign l = {.a = a, .method = "HEAD", .cap = URL_MAX};
	char *blob;
	int rc;

	if (source_stat_root(out, path, name, sizeof(name)))
		return 0;
	l.url = malloc(URL_MAX);
	blob = strdupf("%s%s", a->prefix, path);
	l.blob = blob;
	/* A bearer token the service refuses is renewed and the HEAD sent
	 * once more, as for a listing page. */
	rc = l.url && blob
		 ? source_fetch_signed(src, &req, &res, az_sign, &l, &l.serial)
		 : -ENOMEM;
	curl_slist_free_all(req.headers);
	free(blob);
	free(l.url);
	return source_stat_head(src, a->prefix, path, rc, &res, ver,
				sizeof(ver), list_prefix, out);
}

/* The GET of [off, off+len) of blob path, pinned to version, into rd. */
static int read_request(struct az_src *a, struct source_read *rd,
			struct curl_slist **headers)
{
	char *blob = strdupf("%s%s", a->prefix, rd->path), range[64];
	int rc;

	if (!blob)
		return -ENOMEM;
	/* As the fetch engine writes its Range header (Shared Key signs
	 * it). */
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64,
		 rd->req.range_off, rd->req.range_off + rd->req.range_len - 1);
	rc = az_request(a, "GET", blob, NULL, 0, rd->version, range, rd->url,
			sizeof(rd->url), headers, &rd->auth_serial);
	free(blob);
	return rc;
}

/* req.resign: each retry goes out with a fresh date and signature, or the
 * token current then. */
static int az_resign_read(void *arg, struct fetch_req *req)
{
	struct source_read *rd = arg;
	struct curl_slist *headers = NULL;
	int rc = read_request(az_of(rd->src), rd, &headers);

	if (rc)
		return rc;
	curl_slist_free_all(rd->headers);
	rd->headers = rd->req.headers = req->headers = headers;
	return 0;
}

static int az_prepare_read(struct source *src, const char *path,
			   const char *version, uint64_t off, uint64_t len,
			   struct source_read *rd)
{
	int rc;

	memset(&rd->req, 0, sizeof(rd->req));
	rd->headers = NULL;
	rd->src = src;
	rd->path = path;
	rd->version = version;
	rd->req.range_off = off;
	rd->req.range_len = len;
	rc = read_request(az_of(src), rd, &rd->headers);
	if (rc)
		return rc;
	rd->req.url = rd->url;
	rd->req.version = version;
	rd->req.headers = rd->headers;
	if (azure_creds_kind(az_of(src)->creds) != AZ_SAS &&
	    azure_creds_kind(az_of(src)->creds) != AZ_ANON) {
		rd->req.resign = az_resign_read;
		rd->req.resign_arg = rd;
	}
	return 0;
}

static bool az_auth_refused(struct source *src, unsigned serial)
{
	return azure_creds_refused(az_of(src)->creds, serial);
}

/* Any refusal (401, 403) is worth one renewal of a bearer token: the
 * answer does not always say that it expired.  Credentials that do not
 * expire are never renewed (azure_creds_refused). */
static bool az_auth_expired(const struct fetch_req *req,
			    const struct fetch_res *res, int rc)
{
	(void)req;
	(void)res;
	return rc == -EACCES;
}

static void az_destroy(struct source *src)
{
	struct az_src *a = az_of(src);

	azure_creds_free(a->creds);
	free(a->origin);
	free(a->root);
	free(a->account);
	free(a->container);
	free(a->prefix);
	free(src->id);
	free(a);
}

static const struct source_ops az_ops = {
    .scheme = "az",
    .list_dir = az_list_dir,
    .stat = az_stat,
    .prepare_read = az_prepare_read,
    .auth_refused = az_auth_refused,
    .auth_expired = az_auth_expired,
    .destroy = az_destroy,
};

/* ---- the source's URL ---- */

/* Accounts: 3 to 24 lowercase letters and digits.  Containers: 3 to 63 of
 * those and '-', starting with a letter or digit ("$root" and "$web" are
 * the service's own). */
static bool name_ok(const char *s, size_t n, size_t max, bool dash)
{
	if (n == 5 && dash && !strncmp(s, "$root", 5))
		return true;
	if (n == 4 && dash && !strncmp(s, "$web", 4))
		return true;
	if (n < 3 || n > max || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) &&
		    !isdigit((unsigned char)s[i]) && !(dash && s[i] == '-'))
			return false;
	return true;
}

/* "https://ACCOUNT.blob.core.windows.net/..." (or a sovereign cloud's
 * blob.core. suffix): the length of ACCOUNT, else 0. */
static size_t blob_host_account(const char *spec)
{
	const char *host, *dot;

	if (strncasecmp(spec, "https://", 8))
		return 0;
	host = spec + 8;
	dot = strchr(host, '.');
	if (!dot || dot > host + strcspn(host, "/?#") ||
	    strncasecmp(dot, ".blob.core.", 11))
		return 0;
	return (size_t)(dot - host);
}

static bool azure_claims(const char *spec)
{
	return blob_host_account(spec) != 0;
}

/* Components joined by single slashes, ending in one ("" for none). */
static char *clean_prefix(const char *p, size_t n, const char *spec, char **err)
{
	char *out = calloc(1, n + 2);
	size_t ol = 0;
	const char *end = p + n;

	if (!out)
		return NULL;
	while (p < end) {
		size_t k;

		while (p < end && *p == '/')
			p++;
		k = 0;
		while (p + k < end && p[k] != '/')
			k++;
		if (!k)
			break;
		if ((k == 1 && p[0] == '.') ||
		    (k == 2 && !strncmp(p, "..", 2))) {
			err_set(err,
				"%s: '.' and '..' are not allowed in the "
				"prefix",
				spec);
			free(out);
			return NULL;
		}
		memcpy(out + ol, p, k);
		ol += k;
		out[ol++] = '/';
		p += k;
	}
	return out;
}

/*
 * az://ACCOUNT/CONTAINER/PREFIX or https://ACCOUNT.blob.core.SUFFIX/
 * CONTAINER/PREFIX, either with a SAS as its query: fills account,
 * container, prefix, the endpoint (--endpoint, else the URL's host) and
 * *sas (a pointer into spec, or NULL).
 */
static int parse_spec(struct az_src *a, const char *spec, const char *endpoint,
		      const char **sas, char **err)
{
	const bool https = strncasecmp(spec, "az://", 5) != 0;
	const char *acct = spec + (https ? 8 : 5);
	const size_t al =
	    https ? blob_host_account(spec) : strcspn(acct, "/?#");
	const char *host_end = acct + strcspn(acct, "/?#");
	const char *c = *host_end == '/' ? host_end + 1 : host_end;
	const size_t cl = strcspn(c, "/?#");
	const char *p = c + cl + strspn(c + cl, "/");
	const size_t plen = strcspn(p, "?#");
	char shown[512], suffix[256];

	url_redact(spec, shown, sizeof(shown));
	*sas = p[plen] == '?' ? p + plen + 1 : NULL;
	if (p[plen] == '#' || (*sas && strchr(*sas, '#'))) {
		err_set(err, "%s: a fragment is not part of a source URL",
			shown);
		return -EINVAL;
	}
	if (!name_ok(acct, al, 24, false)) {
		err_set(err,
			"%s: bad storage account name (3 to 24 of a-z, 0-9; "
			"expected az://ACCOUNT/CONTAINER[/PREFIX])",
			shown);
		return -EINVAL;
	}
	if (!name_ok(c, cl, 63, true)) {
		err_set(err,
			"%s: bad container name (3 to 63 of a-z, 0-9, '-'; "
			"expected az://ACCOUNT/CONTAINER[/PREFIX])",
			shown);
		return -EINVAL;
	}
	a->account = strndup(acct, al);
	a->container = strndup(c, cl);
	a->prefix = clean_prefix(p, plen, shown, err);
	if (!a->account || !a->container || !a->prefix)
		return a->prefix || !*err ? -ENOMEM : -EINVAL;
	if (strlen(a->prefix) > NAME_MAX_AZ) {
		err_set(err, "%s: prefix longer than %d bytes", shown,
			NAME_MAX_AZ);
		return -ENAMETOOLONG;
	}
	snprintf(suffix, sizeof(suffix), "%.*s", (int)(host_end - acct - al),
		 acct + al);
	if (endpoint)
		return 0;
	/* The account's own host: ACCOUNT.blob.core.windows.net, or the
	 * sovereign cloud's that the URL named. */
	a->origin = https ? strdupf("https://%s%s", a->account, suffix)
			  : strdupf("https://%s." DEFAULT_SUFFIX, a->account);
	a->root = strdup("");
	for (char *q = a->origin; q && *q; q++)
		*q = (char)tolower((unsigned char)*q);
	return a->origin && a->root ? 0 : -ENOMEM;
}

/* --endpoint: "http[s]://HOST[:PORT][/PATH]", requests going to
 * ENDPOINT/CONTAINER/BLOB (Azurite: http://127.0.0.1:10000/ACCOUNT). */
static int set_endpoint(struct az_src *a, const char *endpoint, char **err)
{
	const char *auth = strstr(endpoint, "://");
	size_t al, pl;

	if (!auth || (strncasecmp(endpoint, "http://", 7) &&
		      strncasecmp(endpoint, "https://", 8))) {
		err_set(err, "--endpoint %s: not an http(s) URL", endpoint);
		return -EINVAL;
	}
	auth += 3;
	al = strcspn(auth, "/?#@");
	if (!al || auth[al] == '?' || auth[al] == '#' || auth[al] == '@' ||
	    strpbrk(auth + al, "?#")) {
		err_set(err,
			"--endpoint: expected http[s]://HOST[:PORT][/PATH] (no "
			"query or credentials)");
		return -EINVAL;
	}
	pl = strlen(auth + al);
	while (pl && auth[al + pl - 1] == '/')
		pl--;
	a->origin = strndup(endpoint, (size_t)(auth - endpoint) + al);
	a->root = strndup(auth + al, pl);
	if (!a->origin || !a->root)
		return -ENOMEM;
	for (char *q = a->origin; *q; q++)
		*q = (char)tolower((unsigned char)*q);
	return 0;
}

static int source_azure_open(const char *spec, const struct source_options *opt,
			     struct fetch_engine *fe, struct source **out,
			     char **err)
{
	struct azure_creds_options co = {0};
	struct az_src *a;
	const char *sas;
	char *lerr = NULL, shown[512];
	size_t count;
	int rc;

	*out = NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->base.ops = &az_ops;
	a->base.fetch = fe;
	fetch_no_redirect(fe);
	url_redact(spec, shown, sizeof(shown));
	rc = parse_spec(a, spec, opt->endpoint, &sas, err);
	if (!rc && opt->endpoint)
		rc = set_endpoint(a, opt->endpoint, err);
	if (rc)
		goto fail;
	/* The id names the data, never the credentials: the default host
	 * as az://, another endpoint by its URL. */
	a->base.id =
	    !opt->endpoint && strstr(a->origin, "." DEFAULT_SUFFIX)
		? strdupf("az://%s/%s/%s", a->account, a->container, a->prefix)
		: strdupf("az+%s%s/%s/%s", a->origin, a->root, a->container,
			  a->prefix);
	if (!a->base.id) {
		rc = -ENOMEM;
		goto fail;
	}
	if (!opt->anonymous) {
		rc = fetch_credentials(fe, a->origin, shown,
				       "a SAS, a Shared Key signature or a "
				       "bearer token (none with --anonymous)",
				       err);
		if (rc)
			goto fail;
	}
	if (opt->no_check)
		goto done; /* id only: see source_options */
	co.account = a->account;
	co.url_sas = sas;
	co.anonymous = opt->anonymous;
	rc = azure_creds_new(&co, fe, &a->creds, err);
	if (rc)
		goto fail;
	/* Shared Key signs each read's Range; the site cache asks the
	 * origin for whole slices, so a blob's last chunk (shorter) would
	 * go with a signature of another range and fail at read time. */
	if (azure_creds_kind(a->creds) == AZ_SHARED_KEY &&
	    fetch_site_cached(fe)) {
		err_set(err,
			"%s: Shared Key (AZURE_STORAGE_KEY) signs each read's "
			"byte range, which --site-cache changes for a blob's "
			"last chunk, so those reads would fail: through a site "
			"cache give a SAS (in the URL or "
			"AZURE_STORAGE_SAS_TOKEN) or use workload or managed "
			"identity",
			shown);
		rc = -EPERM;
		goto fail;
	}
	/* One name of the root: a wrong account, container, endpoint or
	 * credential shows now, at mount time. */
	rc = list_prefix(&a->base, a->prefix, 1, source_count_only, NULL,
			 &count, &lerr);
	if (rc) {
		err_set(err, "%s: %s%s", shown, lerr ? lerr : strerror(-rc),
			rc == -ENOENT ? " (no such container?)" : "");
		free(lerr);
		goto fail;
	}
	if (*a->prefix && !count)
		log_warn("%s: nothing under this prefix (yet)", a->base.id);
	log_info("%s: Azure Blob at %s%s, %s", a->base.id, a->origin, a->root,
		 azure_creds_describe(a->creds));
done:
	*out = &a->base;
	return 0;
fail:
	az_destroy(&a->base);
	return rc;
}

const struct origin_scheme origin_azure = {
    .name = "az",
    .prefixes = {"az://", NULL},
    .claims = azure_claims,
    .open = source_azure_open,
};
