/* source: what every backend shares (see source.h). */
#include "config.h"

#include "log.h"
#include "source.h"
#include "text.h"

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

int source_list_pages(struct source *src, const char *rel,
		      const char *token_name, size_t token_max,
		      source_page_fn step, void *arg, size_t *count,
		      char **err)
{
	char *sent = calloc(1, token_max), why[160];
	const char *next, *stuck;
	unsigned pages = 0;
	int rc;

	*count = 0;
	if (!sent)
		return -ENOMEM;
	for (;;) {
		size_t names = 0;
		bool more = false;

		rc = step(arg, sent, &next, &more, &names, err);
		*count += names;
		if (rc || !more)
			break;
		stuck = source_page_stuck(token_name, sent, next, ++pages, why,
					  sizeof(why));
		if (stuck) {
			err_set(err, "listing %s%s: %s: giving up", src->id,
				rel, stuck);
			rc = -EIO;
			break;
		}
		snprintf(sent, token_max, "%s", next);
	}
	free(sent);
	return rc;
}

int source_list_under(struct source *src, const char *prefix, const char *dir,
		      unsigned max, source_prefix_fn list, source_list_cb cb,
		      void *arg)
{
	char *pfx =
	    *dir ? strdupf("%s%s/", prefix, dir) : strdupf("%s", prefix);
	char *err = NULL;
	size_t count = 0;
	int rc = pfx ? list(src, pfx, max, cb, arg, &count, &err) : -ENOMEM;

	free(pfx);
	/* The root of an empty prefix is an empty directory. */
	if (!rc && !count && *dir)
		rc = -ENOENT;
	if (rc && err)
		log_error("%s", err);
	free(err);
	return rc;
}

bool source_stat_root(struct source_object *out, const char *path, char *name,
		      size_t cap)
{
	memset(out, 0, sizeof(*out));
	snprintf(name, cap, "%s", path);
	out->name = name;
	out->version = "";
	out->is_dir = !*path;
	return out->is_dir;
}

int source_stat_head(struct source *src, const char *prefix, const char *path,
		     int rc, const struct fetch_res *res, char *ver,
		     size_t vcap, source_prefix_fn list,
		     struct source_object *out)
{
	if (!rc) {
		if (res->content_length < 0) {
			log_error("%s%s: no Content-Length", src->id, path);
			return -EIO;
		}
		out->size = (uint64_t)res->content_length;
		out->mtime = res->mtime;
		snprintf(ver, vcap, "%s", res->etag);
		out->version = ver;
		return 0;
	}
	if (rc != -ENOENT)
		return rc;
	/* No such object: a directory if anything lies under "path/". */
	rc = source_list_under(src, prefix, path, 1, list, source_count_only,
			       NULL);
	out->is_dir = !rc;
	return rc;
}

int source_count_only(void *arg, const struct source_object *obj)
{
	(void)arg;
	(void)obj;
	return 0;
}

int source_fetch_signed(struct source *src, struct fetch_req *req,
			struct fetch_res *res, source_sign_fn sign, void *arg,
			const unsigned *serial)
{
	const struct source_ops *ops = src->ops;
	int rc;

	for (int attempt = 0;; attempt++) {
		rc = sign(arg, req);
		if (rc) {
			snprintf(res->err, sizeof(res->err),
				 "cannot build the request: %s", strerror(-rc));
			return rc;
		}
		rc = fetch_run(src->fetch, req, res);
		if (!rc || attempt > 0 || !ops->auth_expired ||
		    !ops->auth_refused || !ops->auth_expired(req, res, rc) ||
		    !ops->auth_refused(src, *serial))
			return rc;
	}
}
