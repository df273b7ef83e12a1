#ifndef WHARF_FS_CREDS_GCP_H
#define WHARF_FS_CREDS_GCP_H
/*
 * creds_gcp: the OAuth access token a GCS request carries, found in the
 * order Google's own tools use:
 *   1. --token-file FILE (re-read every minute and after a 401),
 *   2. GOOGLE_OAUTH_ACCESS_TOKEN (fixed for the life of the mount),
 *   3. --token-command CMD: the program prints a bare token (it lasts
 *      token_lifetime seconds) or a JSON object with "access_token" and
 *      "expires_in",
 *   4. a key file: GOOGLE_APPLICATION_CREDENTIALS, else gcloud's
 *      application_default_credentials.json; a service account key signs an
 *      RS256 JWT exchanged at its token_uri, an authorized_user file trades
 *      its refresh token, an external_account file (workload identity
 *      federation) trades a subject token (read from its file or URL, as
 *      text or a JSON member) at its token_url (STS token exchange), then,
 *      when it names one, for a service account's token at its
 *      service_account_impersonation_url,
 *   5. the GCE metadata server (GCE_METADATA_HOST, or its address
 *      169.254.169.254 when the machine says it is a Google Compute Engine
 *      VM),
 *   6. none: anonymous when asked (--anonymous) or when talking to an
 *      emulator (STORAGE_EMULATOR_HOST), an error otherwise.
 * Tokens are renewed ahead of expiry by creds_renew, on its thread: no
 * request waits for a token source while the current token is valid.  A
 * token file, which states no expiry, is read again each minute.  Tokens
 * never reach a log.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"
#include "creds_renew.h"

struct fetch_engine;
struct gcp_creds;

#define GCP_TOKEN_MAX 4096 /* bytes of one access token, NUL included */
/* A token command may leave the expiry out (oauth_token_parse). */
#define GCP_TOKEN_RULES 0

struct gcp_creds_options {
	const char *token_file;
	const char *token_command;
	const char *token_command_dir; /* where it runs; NULL: here */
	unsigned token_lifetime; /* seconds a bare command token lasts; 0: 300 */
	unsigned token_timeout;	 /* seconds the command may take; 0: 30 */
	bool anonymous;
	bool emulator; /* no credentials found is fine: go anonymous */
};

/*
 * Picks the first source that is configured and fetches a first token, so
 * that a bad key or an unreachable token endpoint shows at mount time.
 * @return 0, or -errno with *err saying which source failed and why.
 */
int gcp_creds_new(const struct gcp_creds_options *o, struct fetch_engine *fe,
		  struct gcp_creds **out, char **err) WHARF_CHECK;
void gcp_creds_free(struct gcp_creds *c);

/*
 * Writes "Authorization: Bearer TOKEN" into out (cap bytes), the token
 * current now, never waiting for a renewal; "" when anonymous.  *serial
 * names the token for gcp_creds_refused.  Safe from any thread.  A token
 * whose renewals failed is sent after its expiry: the origin's 401 then
 * renews it once (gcp_creds_refused).  @return 0, or -ENAMETOOLONG.
 */
int gcp_creds_header(struct gcp_creds *c, char *out, size_t cap,
		     unsigned *serial) WHARF_CHECK;

/* The origin refused token `serial` (401): renews it now, on this thread,
 * once however many requests report it.  @return true when a retry may
 * carry another token (false for fixed and anonymous credentials, or a
 * renewal that failed). */
bool gcp_creds_refused(struct gcp_creds *c, unsigned serial);

/* Where the token comes from, for logs: "token file /x", "service account
 * a@b", "anonymous"...; never the token. */
const char *gcp_creds_describe(const struct gcp_creds *c);
/* Whether requests go without credentials (an emulator with none
 * configured, or --anonymous). */
bool gcp_creds_anonymous(const struct gcp_creds *c);

/*
 * The parsers of what the sources above hand back, declared for their fuzz
 * targets (tests/fuzz).  tok has GCP_TOKEN_MAX bytes; `what` names the
 * source in *err.  @return 0, or -EINVAL with *err saying why.
 */
/* The first line of text, without surrounding white space, as the token
 * (a JSON answer goes to oauth_token_parse, creds_renew.h). */
int gcp_token_bare(const char *text, char *tok, const char *what,
		   char **err) WHARF_CHECK;
/* {"accessToken": "...", "expireTime": "RFC 3339"} as service account
 * impersonation answers; *life_s gets the seconds left. */
int gcp_impersonation_json(const char *text, size_t len, char *tok,
			   uint64_t *life_s, const char *what,
			   char **err) WHARF_CHECK;
/* Reads key file `path` (service_account, authorized_user or
 * external_account) as a mount would, and frees what it read.
 * @return 0 or -errno, as gcp_creds_new. */
int gcp_key_file_check(const char *path, char **err) WHARF_CHECK;

#endif
