#ifndef WHARF_FS_SOURCE_GCS_H
#define WHARF_FS_SOURCE_GCS_H
/*
 * source_gcs: what the GCS backend shares with its fuzz target: the parser
 * of one objects.list page.  The backend itself is reached through
 * source_open (origins.h).
 */
#include <stddef.h>

#include "source.h"

/*
 * Parses one page (`body`, `len` bytes) of the JSON listing of `prefix`
 * ("" or ending in '/'), calling cb for each direct child: an "items"
 * entry is a file, a "prefixes" entry a directory; names are relative to
 * prefix.  @return 0; -EINVAL for malformed JSON, with *err (malloc'd)
 * saying what and where; -ENOMEM; or what cb returned.
 */
int gcs_parse_list_page(const char *body, size_t len, const char *prefix,
			source_list_cb cb, void *arg, char **err) WHARF_CHECK;

/* The scheme origins.c picks for this backend. */
extern const struct origin_scheme origin_gcs;

#endif
