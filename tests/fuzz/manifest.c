/* Manifests ("path size [etag [digest]]" lines, manifest_parse), then the
 * lookups a mount makes on what was parsed: each entry is found again by
 * its path, its digest parses, and its directory lists. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "fuzz.h"
#include "listing.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct manifest *m = NULL;
	char *err = NULL;
	size_t count = 0;
	int rc;

	log_set_level(WHARF_LOG_ERROR);
	rc = manifest_parse((const char *)data, size, &m, &err);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	free(err);
	if (rc)
		return 0;
	FUZZ_ASSERT(manifest_list(m, "", fuzz_check_entry, &count) == 0);
	for (size_t i = 0; i < m->n && i < 64; i++) {
		const char *p = m->v[i].path;
		const char *slash = strrchr(p, '/');

		FUZZ_ASSERT(strlen(p) <= LISTING_PATH_MAX);
		FUZZ_ASSERT(manifest_find(m, p) != NULL);
		if (*m->v[i].digest) {
			struct checksum c;

			FUZZ_ASSERT(checksum_parse(m->v[i].digest, &c) == 0);
		}
		if (slash) {
			char dir[LISTING_PATH_MAX + 1];

			memcpy(dir, p, (size_t)(slash - p));
			dir[slash - p] = '\0';
			FUZZ_ASSERT(manifest_list(m, dir, fuzz_check_entry,
						  &count) == 0);
		}
	}
	manifest_free(m);
	return 0;
}
