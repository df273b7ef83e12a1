/* Key files (GOOGLE_APPLICATION_CREDENTIALS or gcloud's application
 * default credentials): service_account, authorized_user and
 * external_account JSON, read by
 * gcp_key_file_check as a mount reads them, private key included. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "creds_gcp.h"
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *err = NULL;
	int rc;

	log_set_level(WHARF_LOG_ERROR);
	rc = gcp_key_file_check(fuzz_file(data, size), &err);
	FUZZ_ASSERT(rc <= 0);
	FUZZ_ASSERT(rc == 0 || rc == -ENOMEM || err);
	free(err);
	return 0;
}
