#ifndef WHARF_FS_ORIGIN_SOURCE_H
#define WHARF_FS_ORIGIN_SOURCE_H
/*
 * source: the one interface over the origins a mount can show (HTTP(S)
 * prefix, S3-compatible prefix, Google Cloud Storage prefix, Azure Blob
 * prefix), and the
 * helpers every backend shares.  origins.h opens one by its scheme.  A source lists one
 * directory at a time, stats one object, and prepares ranged reads; the
 * transfers themselves go through the shared fetch engine.
 *
 * Paths are relative to the source's prefix, without a leading '/',
 * components separated by '/' ("" is the root, "train/n01/x.jpg" a file).
 */
#include <stdbool.h>
#include <stdint.h>

#include "fetch.h"

struct source;

/* One prepared ranged read: the URL and headers live here. */
struct source_read {
	struct fetch_req req;       /* req.url points into url[] */
	char url[4096];
	struct curl_slist *headers; /* == req.headers; freed by _done */
	unsigned auth_serial;       /* the credentials used, for auth_refused */
	/* What prepare_read was asked for, kept for req.resign (a source
	 * that signs every attempt again); valid while the read runs. */
	struct source *src;
	const char *path, *version;
};
/* Frees what prepare_read attached to rd. */
void source_read_done(struct source_read *rd);

/*
 * Paged listings: each page is asked for with the token the last one gave.
 * A server that answers a token with itself, or cycles through tokens,
 * would keep the listing going forever, holding the tree's listing lock.
 * @return NULL when the next page may be asked for (`pages` pages came so
 * far; the last was asked with `sent` and gave `next`), else why not, in
 * buf ("the server answered page token "x" with the same token").
 */
#define SOURCE_LIST_PAGES_MAX 100000 /* 100 million names at 1,000 a page */
const char *source_page_stuck(const char *token_name, const char *sent,
			      const char *next, unsigned pages, char *buf,
			      size_t len);

/*
 * A backend's step of a paged listing: asks for the page after token
 * `sent` ("" for the first) and hands its names to the listing's callback;
 * says whether another page follows (*more) after token *next (valid until
 * the next step) and how many names this one held (*names, counted even
 * when it fails).  @return 0, or -errno with *err (malloc'd) saying why.
 */
typedef int (*source_page_fn)(void *arg, const char *sent, const char **next,
			      bool *more, size_t *names, char **err);
/*
 * The one loop of a paged listing: step after step until a page is the
 * last, or the server's tokens (token_name, shorter than token_max bytes)
 * go round or on past SOURCE_LIST_PAGES_MAX (source_page_stuck: -EIO,
 * "listing ID REL: ...: giving up", rel naming the listing under the
 * source's id).  *count gets the names of all pages.
 * @return 0, or the step's error, -EIO, -ENOMEM.
 */
int source_list_pages(struct source *src, const char *rel,
		      const char *token_name, size_t token_max,
		      source_page_fn step, void *arg, size_t *count,
		      char **err);

/*
 * One origin request that carries expiring credentials, and the one loop
 * that renews them: sign (re)builds req's url and headers and sets *serial
 * to the credentials it used; fetch_run sends it.  When it fails and the
 * backend's auth_expired says the origin refused those credentials as
 * expired, and its auth_refused renews them, it is signed and sent once
 * more.  Every backend's listing pages, stats and metadata requests go
 * through here, so each renews alike.  The caller frees the headers sign
 * made.  @return as fetch_run, or sign's error (res->err says so).
 */
typedef int (*source_sign_fn)(void *arg, struct fetch_req *req);
int source_fetch_signed(struct source *src, struct fetch_req *req,
			struct fetch_res *res, source_sign_fn sign, void *arg,
			const unsigned *serial);

struct source_object {
	const char *name;    /* last path component (list) or full path (stat) */
	bool is_dir;
	uint64_t size;       /* bytes; 0 for directories */
	int64_t mtime;       /* epoch seconds, 0 when unknown */
	const char *version; /* ETag / generation / "" : pins the content */
	/* The origin's checksum of the whole object, "ALGO:HEX" as
	 * checksum.h writes it, or NULL: what its bytes are verified
	 * against once they are all in. */
	const char *digest;
	/* Why the entry cannot be shown (a size the origin gave as negative
	 * or past 2^63-1), or NULL: the tree leaves it out with a warning
	 * naming it, and lists the rest. */
	const char *bad;
};

/* Called once per entry of a directory; strings are valid only during the
 * call.  Return 0 to go on, or -errno to stop the listing with that error. */
typedef int (*source_list_cb)(void *arg, const struct source_object *obj);
/* A source_list_cb for listings that only count what they find. */
int source_count_only(void *arg, const struct source_object *obj);

/* A store's listing of the names under pfx: at most max (0: all, page by
 * page) handed to cb, *count the names found (folder markers included);
 * *err (malloc'd) says why when it fails. */
typedef int (*source_prefix_fn)(struct source *src, const char *pfx,
				unsigned max, source_list_cb cb, void *arg,
				size_t *count, char **err);
/*
 * Object stores (S3, GCS, Azure Blob) have no directories: directory dir
 * ("" the root, "a/b") of a store whose names start with prefix is the
 * names under prefix + dir + "/", listed through list.  One with nothing
 * under it is absent (-ENOENT), but for the root.  A failure's err is
 * logged.  @return as list, or -ENOENT, -ENOMEM.
 */
int source_list_under(struct source *src, const char *prefix, const char *dir,
		      unsigned max, source_prefix_fn list, source_list_cb cb,
		      void *arg);

/*
 * The start of every stat: out names path (copied into name, cap bytes),
 * with no version yet.  @return true for the root, a directory, which is
 * all there is to say of it.
 */
bool source_stat_root(struct source_object *out, const char *path, char *name,
		      size_t cap);
/*
 * An object store's stat from its HEAD of prefix + path, which ended with
 * rc and res: the object (size, mtime, and its ETag, copied into ver of
 * vcap bytes, as version); or when there is none (-ENOENT), a directory if
 * names lie under path + "/" (source_list_under through list).
 * @return 0, or -errno (-ENOENT: neither).
 */
int source_stat_head(struct source *src, const char *prefix, const char *path,
		     int rc, const struct fetch_res *res, char *ver,
		     size_t vcap, source_prefix_fn list,
		     struct source_object *out);

struct source_ops {
	const char *scheme; /* "http", "s3", "gs", "az" */
	/* Lists the direct children of directory `dir`.  -ENOENT if absent. */
	int (*list_dir)(struct source *src, const char *dir, source_list_cb cb,
			void *arg);
	/* Size, mtime and version of one object (HEAD or the API's metadata).
	 * String fields of *out stay valid until the next stat on this thread. */
	int (*stat)(struct source *src, const char *path,
		    struct source_object *out);
	/*
	 * Fills rd->req (url, headers, range) to read [off, off+len) of the
	 * object at `path` whose version is `version` (sent as If-Match,
	 * generation=, or ignored, as the backend allows).  The caller then sets
	 * rd->req.buf/cap, calls fetch_run, and source_read_done(rd).  This runs
	 * once per chunk fetched from the origin, never per read served.
	 * -ENOLINK: the origin cannot be reached (an offline mount) and the
	 * source has logged it already; the reader gets EIO.
	 */
	int (*prepare_read)(struct source *src, const char *path,
			    const char *version, uint64_t off, uint64_t len,
			    struct source_read *rd);
	void (*destroy)(struct source *src);
	/* Optional: a read prepared with credentials rd->auth_serial was
	 * refused as expired (fetch_auth_expired: 401, S3's ExpiredToken).
	 * Returns true when a new prepare_read will carry other credentials
	 * (a renewed token), so that one retry is worth it. */
	bool (*auth_refused)(struct source *src, unsigned auth_serial);
	/* Optional, with auth_refused: whether request req, which failed
	 * with rc and res, was refused for credentials that expired (so that
	 * renewed ones may pass), as this origin says so (a 401; S3's
	 * ExpiredToken, or a HEAD's bare 400).  NULL: never. */
	bool (*auth_expired)(const struct fetch_req *req,
			     const struct fetch_res *res, int rc);
};


struct source {
	const struct source_ops *ops;
	struct fetch_engine *fetch;
	/* Canonical origin identity ("https://host/prefix/", "s3://b/p/",
	 * "gs://b/p/", "az://a/c/p/") used in cache keys, so two sources never share chunks. */
	char *id;
};

struct source_options {
	const char *manifest;     /* http: "path size [etag]" lines, URL or file */
	const char *endpoint;     /* s3/gs: endpoint URL override */
	const char *region;       /* s3 */
	bool no_sign;             /* s3: anonymous requests */
	int addressing;           /* s3: 0 auto, 1 path-style, 2 virtual-host */
	const char *profile;      /* s3: shared credentials file profile */
	const char *token_file;   /* gs */
	const char *token_command;/* gs */
	const char *token_command_dir; /* gs: where it runs; NULL: here */
	unsigned token_lifetime;  /* gs: seconds a bare command token lasts */
	unsigned token_timeout;   /* gs: seconds the command may take; 0: 30 */
	bool anonymous;           /* gs */
	/* Build the source without contacting anything (no listing, no
	 * manifest, no credentials): only its id may be used, to find the
	 * listing snapshot of an origin that cannot be reached.  Such a
	 * source must not list, stat or read. */
	bool no_check;
};

/* Frees a source (NULL: nothing). */
void source_close(struct source *src);

/*
 * One kind of origin: the spec prefixes it answers to and its constructor.
 * Each backend defines one (origin_http, origin_s3, origin_gcs,
 * origin_azure in its header); origins.c holds the table and source_open.
 */
struct origin_scheme {
	const char *name;	    /* "http", "s3", "gs", "az" */
	const char *prefixes[3]; /* "s3://" ...; NULL-terminated, any case */
	/* Optional: claims a spec that another scheme's prefix would take
	 * (https://ACCOUNT.blob.core.windows.net/ is Azure's, not HTTP's). */
	bool (*claims)(const char *spec);
	/* Opens a source for spec: see source_open. */
	int (*open)(const char *spec, const struct source_options *opt,
		    struct fetch_engine *fe, struct source **out, char **err);
};

#endif
