/* One S3 ListObjectsV2 page (s3_parse_list_page): the XML of an origin
 * that may be any S3-compatible server, or none.  The first byte picks the
 * listed prefix. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log.h"
#include "source_s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct s3_page page;
	char *err = NULL;
	size_t count = 0;
	int rc;

	log_set_level(WHARF_LOG_ERROR);
	if (size < 1)
		return 0;
	memset(&page, 0, sizeof(page));
	rc = s3_parse_list_page((const char *)data + 1, size - 1,
				fuzz_list_prefix(data[0]), fuzz_check_object,
				&count, &page, &err);
	FUZZ_ASSERT(rc == 0 || rc == -EIO || rc == -ENOMEM);
	FUZZ_ASSERT(rc != -EIO || err);
	FUZZ_ASSERT(strlen(page.token) < sizeof(page.token));
	free(err);
	return 0;
}
