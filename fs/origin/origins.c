/* origins: the scheme table and source_open, which picks a backend. */
#include "config.h"

#include "origins.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "source_azure.h"
#include "source_gcs.h"
#include "source_http.h"
#include "source_s3.h"
#include "text.h"

/* Adding an origin: a source_NAME.c that implements struct source_ops and
 * defines its origin_NAME, declared in source_NAME.h, and a line here. */
static const struct origin_scheme *const schemes[] = {
    &origin_http,
    &origin_s3,
    &origin_gcs,
    &origin_azure,
};

static const struct origin_scheme *scheme_of(const char *spec)
{
	for (size_t i = 0; i < ARRAY_SIZE(schemes); i++)
		if (schemes[i]->claims && schemes[i]->claims(spec))
			return schemes[i];
	for (size_t i = 0; i < ARRAY_SIZE(schemes); i++)
		for (const char *const *p = schemes[i]->prefixes; *p; p++)
			if (!strncasecmp(spec, *p, strlen(*p)))
				return schemes[i];
	return NULL;
}

/* "http://, https://, s3://, gs:// or az://", from the table. */
static void expected_prefixes(char *buf, size_t len)
{
	const char *all[8];
	size_t n = 0, used = 0;

	for (size_t i = 0; i < ARRAY_SIZE(schemes); i++)
		for (const char *const *p = schemes[i]->prefixes;
		     *p && n < ARRAY_SIZE(all); p++)
			all[n++] = *p;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
					 !i ? "" : i + 1 == n ? " or " : ", ",
					 all[i]);
}

int source_open(const char *spec, const struct source_options *opt,
		struct fetch_engine *fe, struct source **out, char **err)
{
	static const struct source_options none;
	const struct origin_scheme *scheme = scheme_of(spec);
	char expected[128];

	*out = NULL;
	if (!opt)
		opt = &none;
	if (scheme)
		return scheme->open(spec, opt, fe, out, err);
	expected_prefixes(expected, sizeof(expected));
	err_set(err, "%s: unknown source type (expected %s)", spec, expected);
	return -EINVAL;
}
