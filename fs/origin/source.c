#include "config.h"

#include "source.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int source_open(const char *spec, const struct source_options *opt,
		struct fetch_engine *fe, struct source **out, char **err)
{
	static const struct source_options none;

	*out = NULL;
	if (!opt)
		opt = &none;
	if (!strncasecmp(spec, "http://", 7) ||
	    !strncasecmp(spec, "https://", 8))
		return source_http_open(spec, opt, fe, out, err);
	if (!strncasecmp(spec, "s3://", 5))
		return source_s3_open(spec, opt, fe, out, err);
	if (!strncasecmp(spec, "gs://", 5))
		return source_gcs_open(spec, opt, fe, out, err);
	err_set(err,
		"%s: unknown source type (expected http://, https://, s3:// "
		"or gs://)",
		spec);
	return -EINVAL;
}

void source_close(struct source *src)
{
	if (src)
		src->ops->destroy(src);
}

void source_read_done(struct source_read *rd)
{
	curl_slist_free_all(rd->headers);
	rd->headers = NULL;
	rd->req.headers = NULL;
}

const char *source_page_stuck(const char *token_name, const char *sent,
			      const char *next, unsigned pages, char *buf,
			      size_t len)
{
	if (!strcmp(next, sent))
		snprintf(buf, len,
			 "the server answered %s \"%.64s\" with the same token",
			 token_name, sent);
	else if (pages >= SOURCE_LIST_PAGES_MAX)
		snprintf(buf, len, "more than %u pages",
			 SOURCE_LIST_PAGES_MAX);
	else
		return NULL;
	return buf;
}
