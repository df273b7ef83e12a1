#ifndef WHARF_FS_CREDS_AZURE_H
#define WHARF_FS_CREDS_AZURE_H
/*
 * creds_azure: how an Azure Blob request is authorized, the first of these
 * that is configured:
 *   1. a SAS token in the source URL's query,
 *   2. AZURE_STORAGE_SAS_TOKEN,
 *   3. Shared Key: AZURE_STORAGE_KEY (the account's base64 key; with
 *      AZURE_STORAGE_ACCOUNT, which must then name the URL's account),
 *   4. Entra workload identity: AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID
 *      and AZURE_TENANT_ID; the file's token is a client assertion, traded
 *      at AZURE_AUTHORITY_HOST (login.microsoftonline.com) for a bearer
 *      token, the file read again at each trade (Kubernetes rotates it),
 *   5. managed identity: the instance metadata service (IMDS,
 *      169.254.169.254, or AZURE_POD_IDENTITY_AUTHORITY_HOST) where the
 *      machine says it is an Azure VM or that variable is set; a
 *      user-assigned identity is picked with AZURE_CLIENT_ID,
 *   6. none: anonymous when asked (--anonymous, a public container), an
 *      error otherwise.
 * A bearer token is renewed ahead of expiry by creds_renew, on its thread
 * (see creds_renew.h for when and how failures are retried): the old
 * token serves while a renewal runs, and no read waits for a token
 * endpoint.
 * Secrets (SAS, key, tokens, the assertion) never reach a log: messages
 * name where the credentials came from.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"
#include "creds_renew.h"

struct fetch_engine;
struct azure_creds;

#define AZURE_TOKEN_MAX 8192 /* bytes of one bearer token, NUL included */
/* Entra and IMDS answers (oauth_token_parse) state both. */
#define AZURE_TOKEN_RULES (OAUTH_NEED_EXPIRY | OAUTH_NEED_BEARER)
#define AZURE_SAS_MAX 4096   /* bytes of one SAS token, NUL included */
#define AZURE_KEY_MAX 128    /* bytes of a decoded account key */

enum azure_auth { AZ_ANON, AZ_SAS, AZ_SHARED_KEY, AZ_BEARER };

struct azure_creds_options {
	const char *account; /* the URL's storage account */
	const char *url_sas; /* the SAS in the source URL, or NULL */
	bool anonymous;	     /* --anonymous */
};

/*
 * Picks the credentials as above; a bearer token is fetched once now, so
 * that a bad identity shows at mount time, and its renewal thread started.
 * @return 0, or -errno with *err naming the provider and what to fix.
 */
int azure_creds_new(const struct azure_creds_options *o,
		    struct fetch_engine *fe, struct azure_creds **out,
		    char **err) WHARF_CHECK;
/* Stops the renewal thread and wipes the secrets (NULL: nothing). */
void azure_creds_free(struct azure_creds *c);

enum azure_auth azure_creds_kind(const struct azure_creds *c);
/* Where the credentials come from, for messages: "Shared Key of account
 * x (AZURE_STORAGE_KEY)", "managed identity (IMDS)"...; never a secret. */
const char *azure_creds_describe(const struct azure_creds *c);
/* AZ_SAS: the token, without '?', to append to each URL's query. */
const char *azure_creds_sas(const struct azure_creds *c);
/* AZ_SHARED_KEY: the base64 HMAC-SHA256 of sts with the account key into
 * out (at least 64 bytes).  @return 0 or -errno. */
int azure_creds_sign(const struct azure_creds *c, const char *sts, char *out,
		     size_t cap) WHARF_CHECK;
/*
 * AZ_BEARER: "Authorization: Bearer TOKEN" into out (cap bytes), the token
 * current now; *serial names it for azure_creds_refused.  Never waits for
 * a renewal: a token whose renewals failed is sent after its expiry, and
 * the service's refusal renews it once.  @return 0 or -ENAMETOOLONG.
 */
int azure_creds_bearer(struct azure_creds *c, char *out, size_t cap,
		       unsigned *serial) WHARF_CHECK;
/* The service refused token `serial` (401/403): renews it now, on this
 * thread, once however many requests report it.  @return true when a
 * retry will carry another token. */
bool azure_creds_refused(struct azure_creds *c, unsigned serial);

/*
 * The parsers of what the providers hand over, declared for their fuzz
 * targets (tests/fuzz); `what` names the provider in *err.
 */
/* A SAS token as given ("?sv=...&sig=..." or without '?'): a query of
 * printable characters that holds a sig=, copied into out (AZURE_SAS_MAX
 * bytes) without the '?'.  @return 0 or -EINVAL. */
int azure_sas_parse(const char *text, char *out, const char *what,
		    char **err) WHARF_CHECK;
/* An account key: base64 of 1 to AZURE_KEY_MAX bytes, white space around
 * it ignored, decoded into key.  @return 0 or -EINVAL. */
int azure_key_parse(const char *text, unsigned char *key, size_t *len,
		    const char *what, char **err) WHARF_CHECK;

#endif
