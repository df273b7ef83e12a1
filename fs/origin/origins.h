#ifndef WHARF_FS_ORIGIN_ORIGINS_H
#define WHARF_FS_ORIGIN_ORIGINS_H
/*
 * origins: the table of schemes a mount can show (one struct origin_scheme
 * per backend) and the one entry point that picks a backend by the spec.
 */
#include "source.h"

/*
 * Opens the source for spec ("http://…", "https://…", "s3://bucket/prefix",
 * "gs://bucket/prefix"), checking that the prefix can be listed or the
 * manifest read.  @return 0, or -errno with *err a malloc'd message
 * (the caller frees it) that names the URL and what went wrong.
 */
int source_open(const char *spec, const struct source_options *opt,
		struct fetch_engine *fe, struct source **out,
		char **err) WHARF_CHECK;

#endif
