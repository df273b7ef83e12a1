#ifndef WHARF_SITECACHE_H
#define WHARF_SITECACHE_H
/*
 * sitecache: routing the fetch engine's requests through a site's shared
 * HTTP cache (fetch_config.site_cache): which requests are shareable, and
 * the URL and headers that send one through the cache while it stays the
 * origin's request.  fetch_site_cache_check (fetch.h) checks the URL a user
 * gives.  Only the fetch engine includes this.
 */
#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "fetch.h"

#define SITECACHE_URL_MAX 8192 /* a request's URL through the cache */
#define SITECACHE_VERSION_MAX 320 /* X-Wharf-Version: a version of 256 */

/*
 * A request's way through the cache: X-Wharf-Origin, X-Wharf-Version when
 * the read has a version the cache can check, and, unless the request has
 * one, Host, chained in front of its own headers (no allocation; curl
 * reads the list while the transfer runs).
 *
 * X-Wharf-Version names the version the source pinned (fetch_req.version)
 * in the terms the origin's answer carries it, so that the cache can key
 * its entry by it and keep only answers of that version:
 *     etag "..."          an ETag (S3, an HTTP origin that gives one)
 *     generation G        a GCS generation
 *     last-modified D     an HTTP origin's modification time (no ETag)
 * A read with no such version (a manifest that gives sizes alone) goes
 * without: the shipped configurations pass it to the origin uncached.
 */
struct sitecache_via {
	struct curl_slist list[3];
	char origin[FETCH_HOST_MAX + 24];
	char version[SITECACHE_VERSION_MAX];
	char host[FETCH_HOST_MAX + 8];
};

/*
 * The cache's base URL from a configured one (NULL: no cache): checked,
 * copied without its trailing '/'s.  @return 0 with *out NULL or the copy
 * (caller frees), -EINVAL for a URL fetch_site_cache_check refuses, or
 * -ENOMEM.
 */
int sitecache_base(const char *url, char **out) WHARF_CHECK;

/*
 * The one decision whether req goes through the site cache at base (NULL:
 * none): ranged GETs of http(s) URLs that are not origin_only.
 */
bool sitecache_routes(const char *base, const struct fetch_req *req);

/*
 * How req goes: when sitecache_routes, the cache's URL for req (base,
 * then the origin's path and query as they are) into url (cap bytes), and
 * v's headers in front of req->headers: send v->list.  v must outlive the
 * transfer.  @return 1 so routed, 0 for a request that goes straight to
 * the origin (url and v untouched), or -EINVAL when it does not fit.
 */
int sitecache_route(const char *base, const struct fetch_req *req,
		    struct sitecache_via *v, char *url, size_t cap) WHARF_CHECK;

/*
 * Whether a source whose reads carry credentials (what) may use the cache
 * at base (NULL: none): not a plain http:// one unless insecure_ok
 * (fetch_credentials, fetch.h, says why).  @return 0, or -EPERM with *err
 * naming who and how to fix it.
 */
int sitecache_credentials(const char *base, bool insecure_ok, const char *who,
			  const char *what, char **err) WHARF_CHECK;

#endif
