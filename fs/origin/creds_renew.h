#ifndef WHARF_FS_CREDS_RENEW_H
#define WHARF_FS_CREDS_RENEW_H
/*
 * creds_renew: credentials that expire, renewed ahead of their expiry on a
 * thread of their own, so that no read waits for a renewal: AWS keys, GCS
 * tokens and Azure bearer tokens alike (one scheme, one set of counts).
 *
 * The credentials are a fixed-size block of bytes (the caller's struct).
 * Readers copy the current block under a seqlock: a counter that is odd
 * while the renewal thread writes; a reader copies the block word by word
 * with atomic loads and copies again when the counter moved.  Readers
 * take no lock and never block the writer; a copy costs a few thousand
 * bytes, once per origin request (a chunk, a listing page), never per
 * read served from cache.
 *
 * When: a credential that lives L seconds is renewed when min(5 minutes,
 * L/2) of it is left (counted in nanoseconds: a token of a second is
 * renewed at half a second).  Five minutes is what AWS's own tools keep in hand,
 * and covers a request signed just before the renewal, its retries (30 s
 * by default) and some clock skew; short-lived ones (tests, 15-minute
 * roles) are renewed at half their life, so that a renewal that fails has
 * as long again to be retried.  A failed renewal is logged with its cause
 * and retried after 1 s, doubling to 1 minute, but at half the current
 * credentials' remaining life when that is sooner, while they are kept
 * (they work until they expire).
 *
 * Renewals and failures are counted for .wharf/stats (creds_renew_counts).
 *
 * Also here, as GCP's, Azure's and AWS's renewals share them: the bearer
 * header (creds_renew_bearer), a form body (creds_form_add), asking an
 * OAuth 2.0 token endpoint and reading its answer (oauth_token_fetch,
 * _parse).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"


struct creds_renew;

/*
 * Fetches new credentials into blob (blob_size bytes, zeroed) and their
 * expiry in epoch seconds into *expires (0: they do not expire).
 * @return 0, or -errno with *err (malloc'd) saying which source failed and
 * why, never the secret.  Runs on the renewal thread, or on a thread whose
 * request was refused (creds_renew_refused); never two at once.
 */
typedef int (*creds_renew_fn)(void *arg, void *blob, int64_t *expires,
			      char **err);

/*
 * Fetches the first credentials (so that a bad setup shows at mount time)
 * and, when they expire, starts the renewal thread; ones that state no
 * expiry are fetched again every refresh_s seconds (0: never; a token
 * file, say, that something else rewrites).  blob_size is a multiple of 8.  `what` names the source in logs ("AWS credentials: web
 * identity ..."); it is copied.
 * @return 0, or -errno with *err from fn.
 */
int creds_renew_new(size_t blob_size, creds_renew_fn fn, void *arg,
		    const char *what, unsigned refresh_s,
		    struct creds_renew **out, char **err) WHARF_CHECK;
/* Stops the thread, wipes the credentials, frees (NULL: nothing). */
void creds_renew_free(struct creds_renew *r);

/* Copies the current credentials into blob; *serial names them for
 * creds_renew_refused.  Lock-free; safe from any thread. */
void creds_renew_get(struct creds_renew *r, void *blob, unsigned *serial);

/*
 * The origin refused credentials `serial` as expired: renews them now,
 * on this thread, once however many requests report the same serial.
 * @return true when the next creds_renew_get gives other credentials
 * (a retry is worth it); false for credentials that do not expire or a
 * renewal that failed (logged).
 */
bool creds_renew_refused(struct creds_renew *r, unsigned serial);

/*
 * "Authorization: Bearer TOKEN" into out (cap bytes), TOKEN the current
 * credentials of r: a NUL-terminated token at the start of the block,
 * copied through blob (the caller's, of r's blob_size, wiped after).  No
 * wait: an expired token (its renewals failing) is sent, and the origin's
 * refusal renews it once (creds_renew_refused).  *serial names it.
 * @return 0, or -ENAMETOOLONG.
 */
int creds_renew_bearer(struct creds_renew *r, void *blob, char *out,
		       size_t cap, unsigned *serial);

/* The expiry (epoch seconds) of credentials said to last life_s seconds
 * from now, held to between 1 s and a week: a silly expires_in neither
 * overflows nor has them renewed per use. */
int64_t creds_renew_expiry(uint64_t life_s);

/* Where the credentials come from (the `what` given to _new). */
const char *creds_renew_describe(const struct creds_renew *r);

/* Renewals made and renewals failed since the process started, by all
 * credentials, for .wharf/stats. */
void creds_renew_counts(uint64_t *renewals, uint64_t *failures);

/* Appends "&name=value" (value form-encoded, the first without '&') to
 * *form, a new string; the old one is wiped and freed.  @return 0, or
 * -ENOMEM, -ENAMETOOLONG, *form then NULL or as it was: the caller's to
 * free either way. */
int creds_form_add(char **form, const char *name, const char *value);

/* What an OAuth 2.0 token answer must hold besides its access_token. */
enum oauth_rule {
	OAUTH_NEED_EXPIRY = 1, /* an expires_in, above 0 */
	OAUTH_NEED_BEARER = 2, /* a token_type, when given, of Bearer */
};

/*
 * A token endpoint's answer, as GCP's and Azure's (Entra, IMDS) send it:
 * {"access_token": "...", "expires_in": N or "N", "token_type": "...",
 * ...}, other members skipped.  The token (printable ASCII, shorter than
 * tok_max) goes into tok; *expires_s gets expires_in, and stays as it was
 * when there is none.  rules: enum oauth_rule bits.  `what` names the
 * source in *err.  @return 0, or -EINVAL with *err saying why (tok wiped).
 */
int oauth_token_parse(const char *text, size_t len, char *tok, size_t tok_max,
		      unsigned rules, uint64_t *expires_s, const char *what,
		      char **err) WHARF_CHECK;

struct curl_slist;
struct fetch_engine;
/*
 * Asks a token endpoint: POSTs post (a GET when NULL) to url with headers,
 * and reads the answer with oauth_token_parse (rules, tok of tok_max
 * bytes).  A 4xx refusal of the identity (invalid_grant, invalid_client)
 * is -EACCES.  The answer is wiped once read.  @return 0 or -errno, with
 * *err naming `what`.
 */
int oauth_token_fetch(struct fetch_engine *fe, const char *url,
		      struct curl_slist *headers, const char *post, char *tok,
		      size_t tok_max, unsigned rules, uint64_t *expires_s,
		      const char *what, char **err) WHARF_CHECK;

#endif
