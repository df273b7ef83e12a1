/* Placeholder until the gcs backend lands. */
#include "config.h"

#include <errno.h>

#include "source.h"

int source_gcs_open(const char *spec, const struct source_options *opt,
		     struct fetch_engine *fe, struct source **out, char **err)
{
	err_set(err, "%s: this source type is not built yet", spec);
	return -ENOTSUP;
}
