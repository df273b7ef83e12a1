/* The site cache: which requests go through it, and how (sitecache.h). */
#include "config.h"

#include "sitecache.h"
#include "text.h"
#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define VIA_ORIGIN "X-Wharf-Origin: "
#define VIA_VERSION "X-Wharf-Version: "

const char *fetch_site_cache_check(const char *url)
{
	const char *auth;
	size_t n;

	if (!strncasecmp(url, "http://", 7))
		auth = url + 7;
	else if (!strncasecmp(url, "https://", 8))
		auth = url + 8;
	else
		return "expected an http:// or https:// URL";
	n = strcspn(auth, "/?#");
	if (n == 0)
		return "no host in the URL";
	if (n >= FETCH_HOST_MAX)
		return "the host is too long";
	if (strpbrk(auth, "?#@ "))
		return "the URL may have no query, fragment, user or spaces";
	return NULL;
}

int sitecache_base(const char *url, char **out)
{
	size_t n;

	*out = NULL;
	if (!url)
		return 0;
	if (fetch_site_cache_check(url))
		return -EINVAL;
	*out = strdup(url);
	if (!*out)
		return -ENOMEM;
	/* "http://c:8080/" as "http://c:8080" */
	n = strlen(*out);
	while ((*out)[n - 1] == '/')
		(*out)[--n] = '\0';
	return 0;
}

/* Only object bytes are shared: ranged GETs.  Listings and HEADs are per
 * node and change; POSTs and metadata servers carry secrets of this node. */
bool sitecache_routes(const char *base, const struct fetch_req *req)
{
	return base && req->range_len && !req->head && !req->post &&
	       !req->origin_only &&
	       (!strncasecmp(req->url, "http://", 7) ||
		!strncasecmp(req->url, "https://", 8));
}

int sitecache_credentials(const char *base, bool insecure_ok, const char *who,
			  const char *what, char **err)
{
	if (!base || strncasecmp(base, "http://", 7) || insecure_ok)
		return 0;
	err_set(err,
		"%s: its reads carry %s, which would go in clear to the site "
		"cache %s: give --site-cache as https:// (with --ca-file for "
		"a private CA), or add --site-cache-insecure-credentials if "
		"the network to the cache is trusted",
		who, what, base);
	return -EPERM;
}

static bool has_header(const struct curl_slist *h, const char *name)
{
	const size_t n = strlen(name);

	for (; h; h = h->next)
		if (!strncasecmp(h->data, name, n) && h->data[n] == ':')
			return true;
	return false;
}

/*
 * X-Wharf-Version for version v into out (sitecache.h), from the forms
 * fetch_version_of knows: an ETag as the origin sent it (weak ones too:
 * the cache compares them as strings), a GCS generation, an HTTP origin's
 * modification time.  false: none of these, or it does not fit.
 */
static bool version_header(const char *v, char *out, size_t cap)
{
	const struct fetch_version fv = fetch_version_of(v);
	char date[32];
	int n;

	switch (fv.kind) {
	case FV_ETAG:
		n = snprintf(out, cap, "%setag %s", VIA_VERSION, v);
		break;
	case FV_GENERATION:
		n = snprintf(out, cap, "%sgeneration %s", VIA_VERSION, v);
		break;
	case FV_MTIME:
		if (!format_http_date(fv.mtime, date, sizeof(date)))
			return false;
		n = snprintf(out, cap, "%slast-modified %s", VIA_VERSION, date);
		break;
	default:
		return false;
	}
	return n > 0 && (size_t)n < cap;
}

/* A user in the origin's URL stays in the URL (curl sends it as Basic
 * auth, which the cache passes on). */
int sitecache_route(const char *base, const struct fetch_req *req,
		    struct sitecache_via *v, char *url, size_t cap)
{
	const char *o = req->url, *sep, *auth, *at, *host, *cache, *path;
	size_t scheme, alen;
	int hlen, n;

	if (!sitecache_routes(base, req))
		return 0;
	sep = strstr(o, "://");
	scheme = (size_t)(sep - o);
	auth = sep + 3;
	alen = strcspn(auth, "/?#");
	at = memchr(auth, '@', alen);
	host = at ? at + 1 : auth;
	hlen = (int)(alen - (size_t)(host - auth));
	cache = strstr(base, "://") + 3;
	path = auth + alen;
	n = snprintf(url, cap, "%.*s%.*s%s%s%s", (int)(cache - base), base,
		     at ? (int)(at + 1 - auth) : 0, auth, cache,
		     *path == '/' ? "" : "/", path);
	if (n < 0 || (size_t)n >= cap)
		return -EINVAL;
	n = snprintf(v->origin, sizeof(v->origin), "%s%.*s%.*s", VIA_ORIGIN,
		     (int)scheme + 3, o, hlen, host);
	if (n < 0 || (size_t)n >= sizeof(v->origin))
		return -EINVAL;
	/* The scheme in lower case: one cache key for "HTTPS://" too. */
	for (char *p = v->origin + strlen(VIA_ORIGIN); *p != ':'; p++)
		*p = (char)tolower((unsigned char)*p);
	snprintf(v->host, sizeof(v->host), "Host: %.*s", hlen, host);
	/* Origin, then version and Host where there are, then req's. */
	n = 0;
	v->list[n++].data = v->origin;
	if (version_header(req->version, v->version, sizeof(v->version)))
		v->list[n++].data = v->version;
	if (!has_header(req->headers, "Host"))
		v->list[n++].data = v->host;
	for (int i = 0; i < n - 1; i++)
		v->list[i].next = &v->list[i + 1];
	v->list[n - 1].next = req->headers;
	return 1;
}
