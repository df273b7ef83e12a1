/* What Azure's credential providers hand over: a token answer of IMDS or
 * Entra (oauth_token_parse, Azure's rules), a SAS token (azure_sas_parse) and
 * an account key (azure_key_parse).  What comes back must fit a header or a
 * query. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "creds_azure.h"
#include "fuzz.h"
#include "log.h"

static void check_printable(const char *s, size_t max)
{
	size_t n = strlen(s);

	FUZZ_ASSERT(n > 0 && n < max);
	for (; *s; s++)
		FUZZ_ASSERT((unsigned char)*s > 0x20 &&
			    (unsigned char)*s < 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_str(data, size), *err = NULL;
	char *tok = malloc(AZURE_TOKEN_MAX), sas[AZURE_SAS_MAX];
	unsigned char key[AZURE_KEY_MAX];
	uint64_t expires = 7;
	size_t klen = 0;

	log_set_level(WHARF_LOG_ERROR);
	FUZZ_ASSERT(tok);
	if (!oauth_token_parse(text, size, tok, AZURE_TOKEN_MAX,
			       AZURE_TOKEN_RULES, &expires, "fuzz", &err))
		check_printable(tok, AZURE_TOKEN_MAX);
	free(err);
	err = NULL;
	if (!azure_sas_parse(text, sas, "fuzz", &err)) {
		check_printable(sas, AZURE_SAS_MAX);
		FUZZ_ASSERT(!strncmp(sas, "sig=", 4) || strstr(sas, "&sig="));
	}
	free(err);
	err = NULL;
	if (!azure_key_parse(text, key, &klen, "fuzz", &err))
		FUZZ_ASSERT(klen > 0 && klen <= AZURE_KEY_MAX);
	free(err);
	free(tok);
	free(text);
	return 0;
}
