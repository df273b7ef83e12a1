/* The site cache: which requests go through it, and how (sitecache.h). */
#include "config.h"

#include "sitecache.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define VIA_ORIGIN "X-Wharf-Origin: "

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
bool sitecache_applies(const struct fetch_req *req)
{
	return req->range_len && !req->head && !req->post &&
	       (!strncasecmp(req->url, "http://", 7) ||
		!strncasecmp(req->url, "https://", 8));
}

static bool has_header(const struct curl_slist *h, const char *name)
{
	const size_t n = strlen(name);

	for (; h; h = h->next)
		if (!strncasecmp(h->data, name, n) && h->data[n] == ':')
			return true;
	return false;
}

/* A user in the origin's URL stays in the URL (curl sends it as Basic
 * auth, which the cache passes on). */
int sitecache_route(const char *base, const struct fetch_req *req,
		    struct sitecache_via *v, char *url, size_t cap)
{
	const char *o = req->url, *sep = strstr(o, "://");
	const size_t scheme = (size_t)(sep - o);
	const char *auth = sep + 3;
	const size_t alen = strcspn(auth, "/?#");
	const char *at = memchr(auth, '@', alen);
	const char *host = at ? at + 1 : auth;
	const int hlen = (int)(alen - (size_t)(host - auth));
	const char *cache = strstr(base, "://") + 3;
	const char *path = auth + alen;
	int n;

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
	v->list[0].data = v->origin;
	v->list[0].next = req->headers;
	if (!has_header(req->headers, "Host")) {
		v->list[0].next = &v->list[1];
		v->list[1].data = v->host;
		v->list[1].next = req->headers;
	}
	return 0;
}
