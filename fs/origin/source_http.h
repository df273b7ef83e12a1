#ifndef WHARF_FS_ORIGIN_SOURCE_HTTP_H
#define WHARF_FS_ORIGIN_SOURCE_HTTP_H
/*
 * source_http: an HTTP(S) prefix whose directories list (nginx autoindex,
 * Apache and python index pages, JSON) or a manifest names the objects.
 * Reached through source_open (origins.h).
 */
#include <stdbool.h>

#include "source.h"

extern const struct origin_scheme origin_http;

/* Whether s (a --manifest) names a URL rather than a local file. */
bool source_http_is_url(const char *s);

#endif
