/* url: percent-encoding and the one place that decides which parts of a
 * URL are secret (see url.h). */
#include "config.h"

#include "url.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int url_encode(const char *s, bool keep_slash, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t k = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~' || (c == '/' && keep_slash)) {
			if (k + 1 >= cap)
				return -ENAMETOOLONG;
			out[k++] = (char)c;
		} else {
			if (k + 3 >= cap)
				return -ENAMETOOLONG;
			out[k++] = '%';
			out[k++] = hex[c >> 4];
			out[k++] = hex[c & 15];
		}
	}
	if (k >= cap)
		return -ENAMETOOLONG;
	out[k] = '\0';
	return (int)k;
}

/* Where the secrets of url[0, len) are: its user information in
 * [*user, *user_end) (empty when none) and its query and fragment from
 * *query on (len when none). */
static void url_secrets(const char *url, size_t len, size_t *user,
			size_t *user_end, size_t *query)
{
	const char *sep = memmem(url, len, "://", 3);
	size_t auth = sep ? (size_t)(sep - url) + 3 : 0, end = auth;

	/* "://" after a '/', '?' or '#' is in the path or query. */
	if (sep && strcspn(url, "/?#") < (size_t)(sep - url))
		auth = end = 0;
	*user = *user_end = auth;
	while (sep && end < len && !strchr("/?#", url[end]))
		end++;
	for (size_t i = auth; i < end; i++)
		if (url[i] == '@')
			*user_end = i + 1;
	*query = end;
	while (*query < len && url[*query] != '?' && url[*query] != '#')
		(*query)++;
}

const char *url_redact(const char *url, char *out, size_t cap)
{
	size_t user, user_end, query;

	url_secrets(url, strlen(url), &user, &user_end, &query);
	snprintf(out, cap, "%.*s%.*s", (int)user, url,
		 (int)(query - user_end), url + user_end);
	return out;
}

void url_scrub(char *url, size_t len)
{
	size_t user, user_end, query;

	url_secrets(url, len, &user, &user_end, &query);
	if (user_end > user)
		memset(url + user, '*', user_end - 1 - user);
	if (query < len)
		memset(url + query + 1, '*', len - query - 1);
}
