/* One page of a GCS objects.list answer (gcs_parse_list_page).  The first
 * byte picks the listed prefix. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log.h"
#include "source_gcs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *err = NULL;
	size_t count = 0;
	int rc;

	log_set_level(WHARF_LOG_ERROR);
	if (size < 1)
		return 0;
	rc = gcs_parse_list_page((const char *)data + 1, size - 1,
				 fuzz_list_prefix(data[0]), fuzz_check_object,
				 &count, &err);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	free(err);
	return 0;
}
