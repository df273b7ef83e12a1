#ifndef WHARF_FS_ORIGIN_SOURCE_AZURE_H
#define WHARF_FS_ORIGIN_SOURCE_AZURE_H
/*
 * source_azure: what the Azure Blob backend shares with its fuzz target:
 * the parser of one List Blobs page.  The backend itself is reached
 * through source_open (origins.h).
 */
#include <stdbool.h>
#include <stddef.h>

#include "source.h"

struct azure_page {
	char marker[1024]; /* NextMarker, "" when this was the last page */
	size_t names;	   /* Blob and BlobPrefix entries seen */
};

/*
 * Parses one List Blobs page (`xml`, `len` bytes) of the listing of
 * `prefix` ("" or ending in '/') with delimiter '/', calling cb for each
 * direct child: a Blob is a file (its Etag, quoted, is its version; its
 * Content-MD5 its digest), a BlobPrefix a directory; names are relative to
 * prefix.  Names outside prefix and the prefix's own marker blob are
 * skipped.  @return 0; -EIO for malformed XML or a Blob without Name or
 * Content-Length, with *err (malloc'd) saying what and where; -ENOMEM; or
 * what cb returned.
 */
int azure_parse_list_page(const char *xml, size_t len, const char *prefix,
			  source_list_cb cb, void *arg, struct azure_page *page,
			  char **err) WHARF_CHECK;

/* The scheme origins.c picks for this backend. */
extern const struct origin_scheme origin_azure;

#endif
