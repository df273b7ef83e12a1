#ifndef WHARF_FS_LISTING_H
#define WHARF_FS_LISTING_H
/*
 * listing: the pure parsers behind HTTP directory listings (no network).
 * nginx JSON autoindex, HTML index pages (nginx, Apache, python
 * http.server), and manifests ("path size [etag [digest]]" lines).  Every input
 * is untrusted: sizes are bounded, malformed input is a clear error.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"


#define LISTING_NAME_MAX 1024 /* bytes in one name (decoded) */
#define LISTING_PATH_MAX 4096 /* bytes in one manifest path */

struct listing_entry {
	const char *name; /* one component, decoded, no '/' */
	bool is_dir;
	bool has_size; /* false: the listing gave no exact size */
	uint64_t size;
	int64_t mtime;	  /* epoch seconds, 0 when unknown */
	const char *etag; /* manifest only: the line's etag or ""; else NULL */
	const char *digest; /* manifest only: "ALGO:HEX" or ""; else NULL */
	/* Why the entry cannot be shown (a name with '/', a size that is
	 * negative or past 2^63-1), or NULL.  Such an entry is handed on
	 * rather than failing the listing, so that its reader can name it
	 * and skip it: one odd key must not keep a whole bucket out. */
	const char *bad;
};

/* Called per entry; name valid during the call only.  Non-zero stops the
 * parse and is returned. */
typedef int (*listing_cb)(void *arg, const struct listing_entry *e);

enum listing_format { LISTING_UNKNOWN, LISTING_JSON, LISTING_HTML };

/* From the Content-Type, else from the body's first character. */
enum listing_format listing_detect(const char *content_type, const char *body,
				   size_t len);

/* nginx `autoindex_format json`.  @return 0, the callback's value, or
 * -EINVAL with *err saying where and what (caller frees). */
int listing_parse_json(const char *body, size_t len, listing_cb cb, void *arg,
		       char **err) WHARF_CHECK;
/* <a href> index pages; skips parent, query, fragment and absolute links. */
int listing_parse_html(const char *body, size_t len, listing_cb cb, void *arg,
		       char **err) WHARF_CHECK;

/* %XX-decodes n bytes of in into out (cap bytes, NUL-terminated).
 * @return the decoded length, or -EINVAL (bad escape, NUL, too long). */
int listing_url_decode(const char *in, size_t n, char *out, size_t cap);
/* Percent-encodes a path (keeps '/' and unreserved characters).
 * @return the length, or -ENAMETOOLONG when out is too small. */
int listing_url_encode_path(const char *path, char *out, size_t cap);

/*
 * Notes an entry left out of a listing because the mount cannot show it:
 * one warning naming it, where it was listed (a URL, a manifest line) and
 * why, and one more in the count of listing_skipped(), which .wharf/stats
 * shows.  Thread-safe.
 */
void listing_skip(const char *where, const char *name, const char *why);
/* Entries left out so far by this process. */
uint64_t listing_skipped(void);

/* A manifest: a sorted table of objects, built once.  Lines that name
 * something no filesystem can show are left out (listing_skip). */
struct manifest_entry {
	const char *path; /* "dir/sub/file" */
	uint64_t size;
	const char *etag; /* "" when the line gave none */
	const char *digest; /* "ALGO:HEX" (checksum.h), "" when none */
};
struct manifest {
	struct manifest_entry *v;
	size_t n;
	char *blob; /* the strings */
};
/* Parses "path size [etag [digest]]" lines, '#' comments and blank lines
 * allowed.  The digest is the object's checksum, crc32c:HEX (8 digits),
 * md5:HEX (32), sha256:HEX (64) or md5-etag:HEX (an S3 ETag, which may
 * not be an MD5); an etag of "-" before it means none.
 * Paths are percent-decoded ("a%20b" for a name with a space, %25 for '%').
 * A line whose path or size cannot be shown is skipped with a warning.
 * @return 0, or -EINVAL (with the line number in *err), -ENOMEM. */
int manifest_parse(const char *text, size_t len, struct manifest **out,
		   char **err) WHARF_CHECK;
void manifest_free(struct manifest *m);
/* The entry for path, or NULL. */
const struct manifest_entry *manifest_find(const struct manifest *m,
					   const char *path);
/* Direct children of dir ("" is the root): files and subdirectories, each
 * once, in order.  @return 0, the callback's value, or -ENOENT when dir is
 * neither the root nor a directory of the manifest. */
int manifest_list(const struct manifest *m, const char *dir, listing_cb cb,
		  void *arg);

#endif
