/* AWS shared credentials files (aws_creds_load, through
 * AWS_SHARED_CREDENTIALS_FILE): INI sections and key = value lines.  The
 * first byte picks the profile asked for. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "creds_aws.h"
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const profiles[] = {NULL, "default", "dev",
					       "profile dev"};
	struct aws_creds c;
	char *err = NULL;
	int rc;

	if (size < 1)
		return 0;
	log_set_level(WHARF_LOG_ERROR);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_PROFILE");
	setenv("AWS_SHARED_CREDENTIALS_FILE", fuzz_file(data + 1, size - 1), 1);
	rc = aws_creds_load(profiles[data[0] % 4], &c, &err);
	if (rc == 0) {
		FUZZ_ASSERT(c.access_key && c.secret_key && c.origin);
		aws_creds_clear(&c);
	} else {
		FUZZ_ASSERT(err != NULL);
	}
	free(err);
	return 0;
}
