/* source_http: an HTTP(S) prefix, listed or given by a manifest (see
 * source_http.h). */
#include "config.h"

#include "source_http.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "listing.h"
#include "log.h"
#include "text.h"
#include "units.h"
#include "url.h"

/*
 * HTTP(S) prefix: directories are listed from the server's index pages
 * (nginx JSON autoindex, or HTML <a href> pages), or from a manifest read
 * once at open.  Versions: the ETag where one is known, else mtime+size.
 * Reads carry the version seen at listing time as a validator, so that an
 * object replaced while a mount reads it fails (412: -ESTALE, EIO to the
 * reader) instead of mixing bytes of two versions: a strong ETag as
 * If-Match, else the modification time as If-Unmodified-Since (listings
 * give it in GMT).  A server that honours neither (nginx honours both)
 * cannot be pinned.
 */

#define LISTING_CAP (256u << 20) /* bytes of one listing or manifest */
#define HEAD_THREADS 16		 /* parallel HEADs for sizes pages omit */

struct hlist;

struct http_src {
	struct source base;
	char *prefix; /* request URL of the root, ending in '/' */
	struct manifest *man;
	/* The root as open listed it, for the first list_dir(""); taken
	 * with an atomic exchange so it is used once. */
	struct hlist *root;
};

/* One entry collected from a page, before the HEADs fill the gaps. */
struct hent {
	size_t name; /* offset in the names blob */
	bool is_dir, has_size;
	bool gone; /* its HEAD said 404/410/401/403: left out */
	uint64_t size;
	int64_t mtime;
	char etag[128];
};

struct hlist {
	struct hent *v;
	size_t n, cap;
	char *names;
	size_t nlen, ncap;
	const char *url; /* the page being parsed, for listing_skip */
};

static struct http_src *hs_of(struct source *src)
{
	return (struct http_src *)src;
}

static int url_of(struct http_src *hs, const char *path, bool dir, char *out,
		  size_t cap)
{
	size_t pl = strlen(hs->prefix);
	int n;

	if (pl >= cap)
		return -ENAMETOOLONG;
	memcpy(out, hs->prefix, pl);
	n = listing_url_encode_path(path, out + pl, cap - pl);
	if (n < 0)
		return n;
	if (dir && n > 0) {
		if (pl + (size_t)n + 2 > cap)
			return -ENAMETOOLONG;
		out[pl + (size_t)n] = '/';
		out[pl + (size_t)n + 1] = '\0';
	}
	return 0;
}

static void version_of(char *out, size_t cap, const char *etag, int64_t mtime,
		       uint64_t size)
{
	if (etag && *etag)
		snprintf(out, cap, "%s", etag);
	else
		snprintf(out, cap, "t%" PRId64 "-s%" PRIu64, mtime, size);
}

static int collect(void *arg, const struct listing_entry *e)
{
	struct hlist *l = arg;
	size_t nl = strlen(e->name) + 1;
	struct hent *h;

	if (e->bad) {
		listing_skip(l->url, e->name, e->bad);
		return 0;
	}
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 256;
		struct hent *nv = realloc(l->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = nc;
	}
	if (l->nlen + nl > l->ncap) {
		size_t nc = l->ncap ? l->ncap * 2 : 16384;
		char *nb;

		while (nc < l->nlen + nl)
			nc *= 2;
		nb = realloc(l->names, nc);
		if (!nb)
			return -ENOMEM;
		l->names = nb;
		l->ncap = nc;
	}
	h = &l->v[l->n++];
	memset(h, 0, sizeof(*h));
	h->name = l->nlen;
	memcpy(l->names + l->nlen, e->name, nl);
	l->nlen += nl;
	h->is_dir = e->is_dir;
	h->has_size = e->has_size;
	h->size = e->size;
	h->mtime = e->mtime;
	return 0;
}

/* HEADs for the entries whose page gave no size, HEAD_THREADS at a time. */
struct heads {
	struct http_src *hs;
	struct hlist *l;
	const char *dir;
	size_t next; /* atomic */
	int rc;	     /* first error, atomic */
};

static void *heads_main(void *arg)
{
	struct heads *h = arg;
	char url[4096], path[LISTING_PATH_MAX + LISTING_NAME_MAX + 2];

	for (;;) {
		size_t i = __atomic_fetch_add(&h->next, 1, __ATOMIC_RELAXED);
		struct hent *e;
		struct fetch_req req = {0};
		struct fetch_res res;
		int rc;

		if (i >= h->l->n)
			break;
		e = &h->l->v[i];
		if (e->has_size)
			continue;
		if (__atomic_load_n(&h->rc, __ATOMIC_RELAXED))
			break;
		snprintf(path, sizeof(path), "%s%s%s", h->dir,
			 *h->dir ? "/" : "", h->l->names + e->name);
		rc = url_of(h->hs, path, false, url, sizeof(url));
		if (!rc) {
			req.url = url;
			req.head = true;
			rc = fetch_run(h->hs->base.fetch, &req, &res);
		}
		if (!rc && res.content_length < 0) {
			log_error("HEAD %s: no Content-Length", url);
			rc = -EIO;
		}
		if (rc == -ENOENT || rc == -EACCES) {
			/* One entry gone or forbidden since the page was made
			 * (a dangling symlink): the others are still there. */
			log_warn("\"%s\" left out of its directory listing: %s",
				 path, res.err);
			e->gone = true;
			continue;
		}
		if (rc) {
			int zero = 0;

			__atomic_compare_exchange_n(&h->rc, &zero, rc, false,
						    __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
			break;
		}
		e->size = (uint64_t)res.content_length;
		e->has_size = true;
		if (res.mtime)
			e->mtime = res.mtime;
		snprintf(e->etag, sizeof(e->etag), "%s", res.etag);
	}
	return NULL;
}

static int fill_sizes(struct http_src *hs, const char *dir, struct hlist *l)
{
	struct heads h = {.hs = hs, .l = l, .dir = dir};
	pthread_t th[HEAD_THREADS];
	size_t i, missing = 0, nt;

	for (i = 0; i < l->n; i++)
		missing += !l->v[i].has_size;
	if (!missing)
		return 0;
	nt = missing < HEAD_THREADS ? missing : HEAD_THREADS;
	for (i = 0; i < nt; i++)
		if (pthread_create(&th[i], NULL, heads_main, &h))
			break;
	if (i == 0)
		heads_main(&h);
	nt = i;
	for (i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	return h.rc;
}

/* GETs and parses the listing of dir into l.  *err on failure. */
static int fetch_listing(struct http_src *hs, const char *dir, struct hlist *l,
			 char **err)
{
	char url[4096];
	struct fetch_req req = {0};
	struct fetch_res res;
	char *perr = NULL;
	int rc;

	rc = url_of(hs, dir, true, url, sizeof(url));
	if (rc) {
		err_set(err, "%s%s: path too long", hs->prefix, dir);
		return rc;
	}
	req.url = url;
	req.grow = true;
	req.cap = LISTING_CAP;
	rc = fetch_run(hs->base.fetch, &req, &res);
	if (rc) {
		err_set(err, "listing %s", res.err);
		return rc;
	}
	l->url = url;
	switch (listing_detect(res.content_type, res.body, res.len)) {
	case LISTING_JSON:
		rc = listing_parse_json(res.body, res.len, collect, l, &perr);
		break;
	case LISTING_HTML:
		rc = listing_parse_html(res.body, res.len, collect, l, &perr);
		break;
	default:
		perr = strdupf("neither a JSON nor an HTML index (Content-Type "
			       "\"%s\")",
			       res.content_type);
		rc = -EINVAL;
	}
	l->url = NULL;
	free(res.body);
	if (rc == -ENOMEM && !perr)
		perr = strdupf("out of memory");
	if (rc) {
		err_set(err, "listing %s: %s", url, perr ? perr : "failed");
		free(perr);
		return rc == -ENOMEM ? rc : -EIO;
	}
	return 0;
}

/* A manifest line without an etag pins its digest, else its size: a
 * changed digest is new content, with new chunk keys. */
static void man_version(char *out, size_t cap, const char *etag,
			const char *digest, uint64_t size)
{
	if (etag && *etag)
		snprintf(out, cap, "%s", etag);
	else if (digest && *digest)
		snprintf(out, cap, "%s", digest);
	else
		snprintf(out, cap, "s%" PRIu64, size);
}

struct man_adapt {
	source_list_cb cb;
	void *arg;
};

static int man_entry(void *arg, const struct listing_entry *e)
{
	struct man_adapt *a = arg;
	struct source_object o = {.name = e->name,
				  .is_dir = e->is_dir,
				  .size = e->size,
				  .version = ""};
	char ver[160];

	if (!e->is_dir) {
		man_version(ver, sizeof(ver), e->etag, e->digest, e->size);
		o.version = ver;
		o.digest = e->digest;
	}
	return a->cb(a->arg, &o);
}

static int http_list_dir(struct source *src, const char *dir, source_list_cb cb,
			 void *arg)
{
	struct http_src *hs = hs_of(src);
	struct hlist l = {0};
	char *err = NULL, ver[160];
	size_t i;
	int rc;

	if (hs->man) {
		struct man_adapt a = {cb, arg};

		return manifest_list(hs->man, dir, man_entry, &a);
	}
	if (!*dir) {
		struct hlist *root =
		    __atomic_exchange_n(&hs->root, NULL, __ATOMIC_ACQ_REL);

		if (root) {
			l = *root;
			free(root);
			goto listed;
		}
	}
	rc = fetch_listing(hs, dir, &l, &err);
	if (rc) {
		if (rc != -ENOENT)
			log_error("%s", err);
		goto out;
	}
listed:
	rc = fill_sizes(hs, dir, &l);
	if (rc)
		goto out;
	for (i = 0; i < l.n && !rc; i++) {
		struct hent *e = &l.v[i];
		struct source_object o = {.name = l.names + e->name,
					  .is_dir = e->is_dir,
					  .size = e->is_dir ? 0 : e->size,
					  .mtime = e->mtime,
					  .version = ""};

		if (e->gone)
			continue;
		if (!e->is_dir) {
			version_of(ver, sizeof(ver), e->etag, e->mtime,
				   e->size);
			o.version = ver;
		}
		rc = cb(arg, &o);
	}
out:
	free(err);
	free(l.v);
	free(l.names);
	return rc;
}

static int first_entry(void *arg, const struct listing_entry *e)
{
	(void)arg;
	(void)e;
	return 1;
}

static int http_stat(struct source *src, const char *path,
		     struct source_object *out)
{
	static __thread char name[LISTING_PATH_MAX + 1], ver[160];
	struct http_src *hs = hs_of(src);
	char url[4096];
	struct fetch_req req = {0};
	struct fetch_res res;
	int rc;

	if (source_stat_root(out, path, name, sizeof(name)))
		return 0;
	if (hs->man) {
		const struct manifest_entry *m = manifest_find(hs->man, path);

		if (m) {
			out->size = m->size;
			man_version(ver, sizeof(ver), m->etag, m->digest,
				    m->size);
			out->version = ver;
			out->digest = m->digest;
			return 0;
		}
		rc = manifest_list(hs->man, path, first_entry, NULL);
		if (rc == 1) {
			out->is_dir = true;
			return 0;
		}
		return -ENOENT;
	}
	rc = url_of(hs, path, false, url, sizeof(url));
	if (rc)
		return rc;
	req.url = url;
	req.head = true;
	rc = fetch_run(src->fetch, &req, &res);
	if (rc)
		return rc;
	if (listing_detect(res.content_type, "", 0) != LISTING_UNKNOWN) {
		/* Maybe a directory the server redirected to "path/": an
		 * index page answers there, a file does not. */
		struct fetch_res dres;
		char durl[4096];

		if (!url_of(hs, path, true, durl, sizeof(durl))) {
			req.url = durl;
			rc = fetch_run(src->fetch, &req, &dres);
			if (!rc) {
				out->is_dir = true;
				return 0;
			}
			if (rc != -ENOENT)
				return rc;
		}
	}
	if (res.content_length < 0) {
		log_error("HEAD %s: no Content-Length", url);
		return -EIO;
	}
	out->size = (uint64_t)res.content_length;
	out->mtime = res.mtime;
	version_of(ver, sizeof(ver), res.etag, res.mtime, out->size);
	out->version = ver;
	return 0;
}

/* The header that pins version (version_of's or man_version's) on a
 * read, into out; false when it cannot be pinned: a weak ETag (If-Match
 * compares strongly), a size alone, no modification time. */
static bool validator_of(const char *version, char *out, size_t cap)
{
	char date[32];
	char *end;
	long long t;
	int n;

	if (version[0] == '"') {
		n = snprintf(out, cap, "If-Match: %s", version);
		return n > 0 && (size_t)n < cap;
	}
	if (version[0] != 't')
		return false;
	errno = 0;
	t = strtoll(version + 1, &end, 10);
	if (errno || *end != '-' || t <= 0)
		return false;
	/* A time on the minute may come from a listing that shows no
	 * seconds (nginx's HTML index): allow the rest of that minute. */
	if (!format_http_date(t % 60 ? t : t + 59, date, sizeof(date)))
		return false;
	n = snprintf(out, cap, "If-Unmodified-Since: %s", date);
	return n > 0 && (size_t)n < cap;
}

static int http_prepare_read(struct source *src, const char *path,
			     const char *version, uint64_t off, uint64_t len,
			     struct source_read *rd)
{
	char validator[192];
	int rc;

	memset(&rd->req, 0, sizeof(rd->req));
	rd->headers = NULL;
	rc = url_of(hs_of(src), path, false, rd->url, sizeof(rd->url));
	if (rc)
		return rc;
	if (validator_of(version, validator, sizeof(validator))) {
		rd->headers = curl_slist_append(NULL, validator);
		if (!rd->headers)
			return -ENOMEM;
	}
	rd->req.headers = rd->headers;
	rd->req.url = rd->url;
	rd->req.version = version;
	rd->req.range_off = off;
	rd->req.range_len = len;
	return 0;
}

static void http_destroy(struct source *src)
{
	struct http_src *hs = hs_of(src);

	manifest_free(hs->man);
	if (hs->root) {
		free(hs->root->v);
		free(hs->root->names);
		free(hs->root);
	}
	free(hs->prefix);
	free(src->id);
	free(hs);
}

static const struct source_ops http_ops = {
    .scheme = "http",
    .list_dir = http_list_dir,
    .stat = http_stat,
    .prepare_read = http_prepare_read,
    .destroy = http_destroy,
};

/* "HTTPS://Host:443/a/b" -> "https://host/a/b/"; refuses what it cannot
 * keep apart or would leak (credentials, queries). */
static int canonical(const char *spec, char **out, char **err)
{
	const char *p = strstr(spec, "://"), *auth, *path;
	char scheme[8], host[256];
	size_t sl, hl, i;
	const char *port = NULL;
	size_t portl = 0;

	*out = NULL;
	if (!p || (size_t)(p - spec) >= sizeof(scheme)) {
		err_set(err, "%s: not an http(s) URL", spec);
		return -EINVAL;
	}
	sl = (size_t)(p - spec);
	for (i = 0; i < sl; i++)
		scheme[i] = (char)tolower((unsigned char)spec[i]);
	scheme[sl] = '\0';
	auth = p + 3;
	path = auth + strcspn(auth, "/");
	if (strpbrk(spec, "?#")) {
		err_set(err,
			"%s: query strings and fragments are not "
			"supported in a source URL",
			spec);
		return -EINVAL;
	}
	if (memchr(auth, '@', (size_t)(path - auth))) {
		err_set(err, "%s: credentials in the URL are not supported",
			spec);
		return -EINVAL;
	}
	hl = (size_t)(path - auth);
	if (auth[0] != '[') {
		const char *c = memchr(auth, ':', hl);

		if (c) {
			port = c + 1;
			portl = (size_t)(path - port);
			hl = (size_t)(c - auth);
		}
	} else {
		const char *rb = memchr(auth, ']', hl);

		if (rb && rb + 1 < path && rb[1] == ':') {
			port = rb + 2;
			portl = (size_t)(path - port);
			hl = (size_t)(rb + 1 - auth);
		}
	}
	if (hl == 0 || hl >= sizeof(host)) {
		err_set(err, "%s: bad host", spec);
		return -EINVAL;
	}
	for (i = 0; i < hl; i++)
		host[i] = (char)tolower((unsigned char)auth[i]);
	host[hl] = '\0';
	for (i = 0; i < portl; i++)
		if (!isdigit((unsigned char)port[i])) {
			err_set(err, "%s: bad port", spec);
			return -EINVAL;
		}
	if (portl && ((!strcmp(scheme, "http") && portl == 2 &&
		       !strncmp(port, "80", 2)) ||
		      (!strcmp(scheme, "https") && portl == 3 &&
		       !strncmp(port, "443", 3))))
		portl = 0;
	*out = strdupf("%s://%s%s%.*s%s%s", scheme, host, portl ? ":" : "",
		       (int)portl, portl ? port : "", *path ? path : "/",
		       *path && path[strlen(path) - 1] == '/' ? "" : "/");
	return 0;
}

bool source_http_is_url(const char *s)
{
	return !strncasecmp(s, "http://", 7) || !strncasecmp(s, "https://", 8);
}

static int read_manifest(struct http_src *hs, const char *where, char **text,
			 size_t *len, char **err)
{
	char *ferr = NULL;
	int rc;

	*text = NULL;
	*len = 0;
	if (source_http_is_url(where)) {
		struct fetch_req req = {0};
		struct fetch_res res;

		req.url = where;
		req.grow = true;
		req.cap = LISTING_CAP;
		rc = fetch_run(hs->base.fetch, &req, &res);
		if (rc) {
			err_set(err, "manifest %s", res.err);
			return rc;
		}
		*text = res.body;
		*len = res.len;
		return 0;
	}
	rc = read_file_capped(where, LISTING_CAP, text, len, &ferr);
	if (rc) {
		err_set(err, "manifest %s", ferr ? ferr : strerror(-rc));
		free(ferr);
	}
	return rc;
}

static int source_http_open(const char *spec, const struct source_options *opt,
			    struct fetch_engine *fe, struct source **out, char **err)
{
	struct http_src *hs;
	char *text = NULL, *perr = NULL;
	size_t len;
	int rc;

	*out = NULL;
	hs = calloc(1, sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	hs->base.ops = &http_ops;
	hs->base.fetch = fe;
	rc = canonical(spec, &hs->base.id, err);
	if (rc)
		goto fail;
	hs->prefix = strdup(hs->base.id);
	if (!hs->prefix) {
		rc = -ENOMEM;
		goto fail;
	}
	if (opt && opt->no_check) {
		/* id only: see source_options */
	} else if (opt && opt->manifest) {
		rc = read_manifest(hs, opt->manifest, &text, &len, err);
		if (rc)
			goto fail;
		rc = manifest_parse(text, len, &hs->man, &perr);
		free(text);
		if (rc) {
			char shown[512];

			err_set(err, "manifest %s: %s",
				url_redact(opt->manifest, shown, sizeof(shown)),
				perr ? perr : strerror(-rc));
			free(perr);
			goto fail;
		}
	} else {
		/* The root must list: catches a wrong URL at mount time. */
		hs->root = calloc(1, sizeof(*hs->root));
		if (!hs->root) {
			rc = -ENOMEM;
			goto fail;
		}
		rc = fetch_listing(hs, "", hs->root, err);
		if (rc)
			goto fail;
	}
	*out = &hs->base;
	return 0;
fail:
	http_destroy(&hs->base);
	return rc;
}

const struct origin_scheme origin_http = {
    .name = "http",
    .prefixes = {"http://", "https://", NULL},
    .open = source_http_open,
};
