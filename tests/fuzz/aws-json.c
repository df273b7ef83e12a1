/* Credential JSON (aws_json_parse): what a container endpoint and IMDS
 * answer, and, with the first byte odd, a credential_process's output
 * (Version 1).  Keys handed back must fit a header and a signature. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "creds_aws.h"
#include "fuzz.h"
#include "log.h"

void fuzz_check_keys(int rc, const struct aws_keys *k, int64_t expires,
		     const char *err);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aws_keys *k;
	char *err = NULL;
	int64_t expires = 7;
	int rc;

	if (size < 1)
		return 0;
	log_set_level(WHARF_LOG_ERROR);
	k = calloc(1, sizeof(*k));
	if (!k)
		return 0;
	rc = aws_json_parse((const char *)data + 1, size - 1, data[0] & 1, k,
			    &expires, "fuzz", &err);
	fuzz_check_keys(rc, k, expires, err);
	free(err);
	free(k);
	return 0;
}
