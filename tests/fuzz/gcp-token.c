/* Token answers (oauth_token_parse with GCP's rules,
 * gcp_token_bare): what a token endpoint,
 * the metadata server or a --token-command prints.  A token handed back
 * must fit a header. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "creds_gcp.h"
#include "fuzz.h"
#include "log.h"

static void check_token(const char *tok)
{
	size_t n = strlen(tok);

	FUZZ_ASSERT(n > 0 && n < GCP_TOKEN_MAX);
	for (; *tok; tok++)
		FUZZ_ASSERT((unsigned char)*tok > 0x20 &&
			    (unsigned char)*tok < 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_str(data, size), *err = NULL;
	char tok[GCP_TOKEN_MAX];
	uint64_t expires = 7;

	log_set_level(WHARF_LOG_ERROR);
	if (!oauth_token_parse(text, size, tok, GCP_TOKEN_MAX, GCP_TOKEN_RULES,
			       &expires, "fuzz", &err))
		check_token(tok);
	free(err);
	err = NULL;
	if (!gcp_token_bare(text, tok, "fuzz", &err))
		check_token(tok);
	free(err);
	free(text);
	return 0;
}
