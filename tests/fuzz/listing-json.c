/* nginx's JSON autoindex (listing_parse_json), as an origin sends it. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "fuzz.h"
#include "listing.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	char *err = NULL;
	size_t count = 0;
	int rc;

	log_set_level(WHARF_LOG_ERROR);
	rc = listing_parse_json(body, size, fuzz_check_entry, &count, &err);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	FUZZ_ASSERT(rc != -EINVAL || err);
	free(err);
	(void)listing_detect(size ? "application/json" : NULL, body, size);
	(void)listing_detect(NULL, body, size);
	return 0;
}
