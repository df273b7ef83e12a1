/* What every AWS credential parser promises (fuzz/aws-sts.c,
 * fuzz/aws-json.c): keys a header and a signature can carry, an expiry
 * that is a time, and on failure a reason and no half-filled keys. */
#include "config.h"

#include <string.h>

#include "creds_aws.h"
#include "fuzz.h"

static void printable(const char *s, size_t cap, bool space_ok)
{
	size_t n = strnlen(s, cap);

	FUZZ_ASSERT(n < cap);
	for (size_t i = 0; i < n; i++)
		FUZZ_ASSERT((unsigned char)s[i] > 0x20 - space_ok &&
			    (unsigned char)s[i] < 0x7f);
}

void fuzz_check_keys(int rc, const struct aws_keys *k, int64_t expires,
		     const char *err)
{
	if (rc) {
		FUZZ_ASSERT(err != NULL);
		FUZZ_ASSERT(!k->access_key[0] && !k->token[0]);
		return;
	}
	FUZZ_ASSERT(expires >= 0);
	FUZZ_ASSERT(k->access_key[0] && k->secret_key[0]);
	printable(k->access_key, sizeof(k->access_key), false);
	printable(k->secret_key, sizeof(k->secret_key), true);
	printable(k->token, sizeof(k->token), false);
}
