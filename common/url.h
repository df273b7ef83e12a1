#ifndef WHARF_URL_H
#define WHARF_URL_H
/* url: percent-encoding, and what of a URL is secret (user information,
 * query, fragment) for log lines, messages and argv. */
#include <stdbool.h>
#include <stddef.h>

/* Percent-encodes s, keeping unreserved characters (and '/' when asked).
 * @return the length, or -ENAMETOOLONG when out (cap bytes) is too small. */
int url_encode(const char *s, bool keep_slash, char *out, size_t cap);

/*
 * A URL as log lines and messages show it: without its user information
 * ("user:password@") and without its query and fragment, where signed URLs
 * carry their signature and tokens.  Written into out (cut to cap bytes);
 * returns out.  The one place that decides what of a URL is secret, with
 * url_scrub.
 */
const char *url_redact(const char *url, char *out, size_t cap);
/* Overwrites the same secrets of the URL in url[0, len) with '*' in place
 * ("https://host/m.txt?*****"): for argv, which `ps` shows. */
void url_scrub(char *url, size_t len);

#endif
