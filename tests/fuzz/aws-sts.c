/* STS answers (aws_sts_parse): AssumeRole and AssumeRoleWithWebIdentity
 * XML.  Keys handed back must fit a header and a signature. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "creds_aws.h"
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aws_keys *k = calloc(1, sizeof(*k));
	char *err = NULL;
	int64_t expires = 7;
	int rc;

	log_set_level(WHARF_LOG_ERROR);
	if (!k)
		return 0;
	rc = aws_sts_parse((const char *)data, size, k, &expires, "fuzz", &err);
	fuzz_check_keys(rc, k, expires, err);
	FUZZ_ASSERT(rc || expires > 0);
	free(err);
	free(k);
	return 0;
}
