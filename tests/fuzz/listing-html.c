/* HTML index pages (listing_parse_html): nginx, Apache, python's
 * http.server, or anything an origin calls one. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "fuzz.h"
#include "listing.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *err = NULL;
	size_t count = 0;
	int rc;

	log_set_level(WHARF_LOG_ERROR);
	rc = listing_parse_html((const char *)data, size, fuzz_check_entry,
				&count, &err);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	FUZZ_ASSERT(rc != -EINVAL || err);
	free(err);
	return 0;
}
