#ifndef WHARF_FS_SOURCE_S3_H
#define WHARF_FS_SOURCE_S3_H
/*
 * source_s3: what the S3 backend shares with its tests: the parser of one
 * ListObjectsV2 page.  The backend itself is reached through source_open (origins.h).
 */
#include <stdbool.h>
#include <stddef.h>

#include "source.h"

struct s3_page {
	bool truncated;	  /* IsTruncated */
	char token[2048]; /* NextContinuationToken, "" if none */
	size_t keys;	  /* Contents and CommonPrefixes seen */
};

/*
 * Parses one ListObjectsV2 page (`xml`, `len` bytes) of the listing of
 * `prefix` ("" or ending in '/'), calling cb for each direct child: a
 * Contents entry is a file, a CommonPrefixes entry a directory; names are
 * relative to prefix.  Keys outside prefix and the prefix's own marker are
 * skipped.  @return 0; -EIO for malformed XML or a page that lacks a
 * field, with *err (malloc'd) saying what and where; -ENOMEM; or what cb
 * returned.
 */
int s3_parse_list_page(const char *xml, size_t len, const char *prefix,
		       source_list_cb cb, void *arg, struct s3_page *page,
		       char **err) WHARF_CHECK;

/* The scheme origins.c picks for this backend. */
extern const struct origin_scheme origin_s3;

#endif
