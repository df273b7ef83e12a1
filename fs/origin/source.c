/* source: what every backend shares (see source.h). */
#include "config.h"

#include "source.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
