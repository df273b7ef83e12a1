/* One page of a GCS objects.list answer (gcs_parse_list_page).  The first
 * byte picks the listed prefix. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "source_gcs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const prefixes[] = {"", "data/", "a/b/"};
	char *err = NULL;
	size_t count = 0;
	int rc;

	if (size < 1)
		return 0;
	log_set_level(LOG_ERROR);
	rc = gcs_parse_list_page((const char *)data + 1, size - 1,
				 prefixes[data[0] % 3], fuzz_check_object, &count,
				 &err);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	free(err);
	return 0;
}
