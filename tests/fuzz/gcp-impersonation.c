/* Service account impersonation answers (gcp_impersonation_json), the
 * last step of workload identity federation: {"accessToken",
 * "expireTime"}.  A token handed back fits a header.  (external_account
 * files themselves are read by gcp_key_file_check: fuzz/gcp-key.c.) */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "creds_gcp.h"
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_str(data, size), *err = NULL;
	char tok[GCP_TOKEN_MAX];
	uint64_t life = 0;

	log_set_level(WHARF_LOG_ERROR);
	if (!gcp_impersonation_json(text, size, tok, &life, "fuzz", &err)) {
		size_t n = strlen(tok);

		FUZZ_ASSERT(n > 0 && n < GCP_TOKEN_MAX && life > 0);
		for (size_t i = 0; i < n; i++)
			FUZZ_ASSERT((unsigned char)tok[i] > 0x20 &&
				    (unsigned char)tok[i] < 0x7f);
	} else {
		FUZZ_ASSERT(err != NULL);
	}
	free(err);
	free(text);
	return 0;
}
