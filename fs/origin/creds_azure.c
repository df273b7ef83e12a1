/* creds_azure: how Azure Blob requests are authorized, and the renewal of
 * bearer tokens (see creds_azure.h). */
#include "config.h"

#include "creds_azure.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "creds_renew.h"
#include "fetch.h"
#include "fileio.h"
#include "json.h"
#include "log.h"
#include "text.h"
#include "url.h"

#define TEXT_MAX (64u << 10) /* token answers, the assertion file */
#define STORAGE_RESOURCE "https://storage.azure.com/"
#define IMDS_DEFAULT "http://169.254.169.254"
#define IMDS_PATH                                                              \
	"/metadata/identity/oauth2/token?api-version=2018-02-01&resource="
#define AUTHORITY_DEFAULT "https://login.microsoftonline.com/"
#define ASSERTION_TYPE "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
/* What an Azure VM's firmware says in its chassis asset tag. */
#define AZURE_ASSET_TAG "7783-7084-3265-9085-8269-3286-77"

enum bearer_from { FROM_NONE, FROM_IMDS, FROM_WORKLOAD };

struct azure_creds {
	enum azure_auth kind;
	enum bearer_from from;
	struct fetch_engine *fe;
	char desc[512];
	char sas[AZURE_SAS_MAX];
	unsigned char key[AZURE_KEY_MAX];
	size_t key_len;
	char *token_url;  /* IMDS's URL, or the tenant's token endpoint */
	char *client_id;  /* workload identity */
	char *token_file; /* workload identity: the assertion */

	struct creds_renew *r; /* AZ_BEARER: the current token */
};

/* ---- the documents ---- */

/* A token or SAS goes into a header or a query: printable ASCII only. */
static bool printable(const char *s, const char *also_not)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f ||
		    strchr(also_not, *s))
			return false;
	return true;
}

int azure_sas_parse(const char *text, char *out, const char *what, char **err)
{
	size_t n;

	text += strspn(text, " \t\r\n");
	if (*text == '?')
		text++;
	n = strcspn(text, " \t\r\n");
	if (text[n + strspn(text + n, " \t\r\n")]) {
		err_set(err, "%s: the SAS token has white space inside", what);
		return -EINVAL;
	}
	if (n == 0 || n >= AZURE_SAS_MAX) {
		err_set(err, "%s: %s", what,
			n ? "SAS token too long" : "empty SAS token");
		return -EINVAL;
	}
	memcpy(out, text, n);
	out[n] = '\0';
	if (!printable(out, "#") ||
	    (strncmp(out, "sig=", 4) && !strstr(out, "&sig="))) {
		OPENSSL_cleanse(out, n);
		out[0] = '\0';
		err_set(err,
			"%s: not a SAS token (a query of printable "
			"characters with a sig= signature)",
			what);
		return -EINVAL;
	}
	return 0;
}

int azure_key_parse(const char *text, unsigned char *key, size_t *len,
		    const char *what, char **err)
{
	unsigned char raw[AZURE_KEY_MAX + 3];
	size_t n, pad = 0;
	int got;

	text += strspn(text, " \t\r\n");
	n = strcspn(text, " \t\r\n");
	if (text[n + strspn(text + n, " \t\r\n")] || n == 0 || n % 4 ||
	    n / 4 * 3 > sizeof(raw)) {
		err_set(err,
			"%s: not an account key (base64 of at most %d "
			"bytes)",
			what, AZURE_KEY_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)text[i]) && !strchr("+/=", text[i]))
			goto bad;
	if (text[n - 1] == '=')
		pad++;
	if (n > 1 && text[n - 2] == '=')
		pad++;
	if (memchr(text, '=', n - pad))
		goto bad;
	got = EVP_DecodeBlock(raw, (const unsigned char *)text, (int)n);
	if (got < 0 || (size_t)got < pad || (size_t)got - pad == 0 ||
	    (size_t)got - pad > AZURE_KEY_MAX)
		goto bad;
	*len = (size_t)got - pad;
	memcpy(key, raw, *len);
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
bad:
	err_set(err, "%s: not an account key (base64 of at most %d bytes)",
		what, AZURE_KEY_MAX);
	return -EINVAL;
}

/* ---- bearer tokens ---- */

/* The workload identity's POST body, the assertion read from its file. */
static int workload_body(struct azure_creds *c, char **body, char **err)
{
	char *text = NULL;
	size_t len, n;
	const char *t;
	int rc;

	*body = NULL;
	rc = read_file_capped(c->token_file, TEXT_MAX, &text, &len, err);
	if (rc)
		return rc;
	t = text + strspn(text, " \t\r\n");
	n = strcspn(t, " \t\r\n");
	((char *)t)[n] = '\0';
	if (!n || !printable(t, "")) {
		err_set(err, "%s: AZURE_FEDERATED_TOKEN_FILE %s holds no token",
			c->desc, c->token_file);
		rc = -EINVAL;
	}
	if (!rc)
		rc = creds_form_add(body, "grant_type", "client_credentials");
	if (!rc)
		rc = creds_form_add(body, "client_id", c->client_id);
	if (!rc)
		rc = creds_form_add(body, "scope", STORAGE_RESOURCE ".default");
	if (!rc)
		rc = creds_form_add(body, "client_assertion_type",
				    ASSERTION_TYPE);
	if (!rc)
		rc = creds_form_add(body, "client_assertion", t);
	OPENSSL_cleanse(text, len);
	free(text);
	return rc;
}

/* Asks the provider for a token. */
static int fetch_token(struct azure_creds *c, char *tok, uint64_t *life_s,
		       char **err)
{
	struct curl_slist *h = NULL;
	char *body = NULL;
	int rc;

	if (c->from == FROM_IMDS) {
		h = curl_slist_append(NULL, "Metadata: true");
		if (!h)
			return -ENOMEM;
	} else {
		rc = workload_body(c, &body, err);
		if (rc)
			return rc;
	}
	rc = oauth_token_fetch(c->fe, c->token_url, h, body, tok,
			       AZURE_TOKEN_MAX, AZURE_TOKEN_RULES, life_s,
			       c->desc, err);
	curl_slist_free_all(h);
	if (body) {
		OPENSSL_cleanse(body, strlen(body));
		free(body);
	}
	return rc;
}

/* The block creds_renew keeps: the bearer token, NUL-terminated. */
struct token_blob {
	char token[AZURE_TOKEN_MAX];
};

/* creds_renew_fn: a new token from the provider, on the renewal thread (or
 * the thread of a refused request). */
static int renew_token(void *arg, void *blob, int64_t *expires, char **err)
{
	struct token_blob *b = blob;
	uint64_t life_s = 0;
	int rc = fetch_token(arg, b->token, &life_s, err);

	if (rc)
		return rc;
	*expires = creds_renew_expiry(life_s);
	return 0;
}

int azure_creds_bearer(struct azure_creds *c, char *out, size_t cap,
		       unsigned *serial)
{
	struct token_blob b;

	return creds_renew_bearer(c->r, &b, out, cap, serial);
}

bool azure_creds_refused(struct azure_creds *c, unsigned serial)
{
	return c->r && creds_renew_refused(c->r, serial);
}

/* ---- the others ---- */

enum azure_auth azure_creds_kind(const struct azure_creds *c)
{
	return c->kind;
}

const char *azure_creds_describe(const struct azure_creds *c)
{
	return c->desc;
}

const char *azure_creds_sas(const struct azure_creds *c)
{
	return c->sas;
}

int azure_creds_sign(const struct azure_creds *c, const char *sts, char *out,
		     size_t cap)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned mlen = 0;

	if (cap < 4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1)
		return -ENAMETOOLONG;
	if (!HMAC(EVP_sha256(), c->key, (int)c->key_len,
		  (const unsigned char *)sts, strlen(sts), mac, &mlen))
		return -EIO;
	EVP_EncodeBlock((unsigned char *)out, mac, (int)mlen);
	return 0;
}

/* ---- picking ---- */

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* The machine's firmware says it is an Azure VM. */
static bool on_azure(void)
{
	char *tag = NULL;
	size_t len;
	bool yes;

	if (read_file_capped("/sys/class/dmi/id/chassis_asset_tag", 256, &tag,
			     &len, NULL))
		return false;
	yes = !strncmp(tag, AZURE_ASSET_TAG, strlen(AZURE_ASSET_TAG));
	free(tag);
	return yes;
}

/* "https://host/" as given, with one trailing '/'. */
static char *with_slash(const char *url)
{
	return strdupf("%s%s", url, url[strlen(url) - 1] == '/' ? "" : "/");
}

/*
 * The federated assertion goes to the authority, and the token that comes
 * back (from it or from IMDS) opens every account the identity reaches:
 * the authority over https only, IMDS also at its link-local address;
 * plain http to this machine stays for stand-ins (fetch_credential_url).
 */
static int check_token_url(const struct azure_creds *c,
			   const struct azure_creds_options *o,
			   const char *imds, char **err)
{
	char what[200];

	snprintf(what, sizeof(what), "az://%.64s: %s", o->account,
		 c->from == FROM_IMDS
		     ? (imds ? "AZURE_POD_IDENTITY_AUTHORITY_HOST" : "IMDS")
		 : env("AZURE_AUTHORITY_HOST") ? "AZURE_AUTHORITY_HOST"
					       : "the token endpoint");
	return fetch_credential_url(c->token_url,
				    c->from == FROM_IMDS ? FETCH_CRED_METADATA
							 : FETCH_CRED_TOKEN,
				    what, err);
}

static int pick_bearer(struct azure_creds *c,
		       const struct azure_creds_options *o, char **err)
{
	const char *file = env("AZURE_FEDERATED_TOKEN_FILE");
	const char *id = env("AZURE_CLIENT_ID");
	const char *tenant = env("AZURE_TENANT_ID");
	const char *imds = env("AZURE_POD_IDENTITY_AUTHORITY_HOST");

	if (file) {
		char *auth;

		if (!id || !tenant) {
			err_set(err,
				"az://%s: AZURE_FEDERATED_TOKEN_FILE is set "
				"but %s is not: workload identity needs "
				"AZURE_CLIENT_ID and AZURE_TENANT_ID too",
				o->account,
				!id ? "AZURE_CLIENT_ID" : "AZURE_TENANT_ID");
			return -EINVAL;
		}
		for (const char *p = tenant; *p; p++)
			if (!isalnum((unsigned char)*p) && !strchr("-.", *p)) {
				err_set(err,
					"az://%s: AZURE_TENANT_ID is not a "
					"tenant ID or domain",
					o->account);
				return -EINVAL;
			}
		auth = with_slash(env("AZURE_AUTHORITY_HOST")
				      ? env("AZURE_AUTHORITY_HOST")
				      : AUTHORITY_DEFAULT);
		c->token_url =
		    auth ? strdupf("%s%s/oauth2/v2.0/token", auth, tenant)
			 : NULL;
		free(auth);
		c->client_id = strdup(id);
		c->token_file = strdup(file);
		c->from = FROM_WORKLOAD;
		snprintf(c->desc, sizeof(c->desc),
			 "workload identity (client %.64s, tenant %.64s, "
			 "token file %.80s)",
			 id, tenant, file);
	} else if (imds || on_azure()) {
		char *base = with_slash(imds ? imds : IMDS_DEFAULT);
		char res[64], cid[200] = "";

		url_encode(STORAGE_RESOURCE, false, res, sizeof(res));
		if (id) {
			int k = snprintf(cid, sizeof(cid), "&client_id=");

			if (url_encode(id, false, cid + k, sizeof(cid) - k) <
			    0) {
				free(base);
				err_set(err,
					"az://%s: AZURE_CLIENT_ID is too "
					"long",
					o->account);
				return -EINVAL;
			}
		}
		/* IMDS_PATH begins with '/': the base's own is dropped. */
		if (base)
			base[strlen(base) - 1] = '\0';
		c->token_url =
		    base ? strdupf("%s%s%s%s", base, IMDS_PATH, res, cid)
			 : NULL;
		free(base);
		c->from = FROM_IMDS;
		snprintf(c->desc, sizeof(c->desc),
			 "managed identity (IMDS%s%.64s)",
			 id ? ", client " : "", id ? id : "");
	} else {
		err_set(err,
			"az://%s: no Azure credentials: set "
			"AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_KEY, or "
			"AZURE_FEDERATED_TOKEN_FILE with AZURE_CLIENT_ID and "
			"AZURE_TENANT_ID; put a SAS in the URL; run on an "
			"Azure VM with a managed identity; or mount a public "
			"container with --anonymous",
			o->account);
		return -EACCES;
	}
	if (!c->token_url ||
	    (c->from == FROM_WORKLOAD && (!c->client_id || !c->token_file)))
		return -ENOMEM;
	c->kind = AZ_BEARER;
	return check_token_url(c, o, imds, err);
}

static int pick(struct azure_creds *c, const struct azure_creds_options *o,
		char **err)
{
	const char *sas = env("AZURE_STORAGE_SAS_TOKEN");
	const char *key = env("AZURE_STORAGE_KEY");
	const char *acct = env("AZURE_STORAGE_ACCOUNT");

	if (o->anonymous) {
		snprintf(c->desc, sizeof(c->desc), "anonymous (--anonymous)");
		c->kind = AZ_ANON;
		return 0;
	}
	if (o->url_sas || sas) {
		snprintf(c->desc, sizeof(c->desc), "SAS token (%s)",
			 o->url_sas ? "in the URL" : "AZURE_STORAGE_SAS_TOKEN");
		c->kind = AZ_SAS;
		return azure_sas_parse(o->url_sas ? o->url_sas : sas, c->sas,
				       c->desc, err);
	}
	if (key) {
		if (acct && strcmp(acct, o->account)) {
			err_set(err,
				"az://%s: AZURE_STORAGE_KEY is the key of "
				"account %.64s (AZURE_STORAGE_ACCOUNT), not "
				"of %s: set both for this account",
				o->account, acct, o->account);
			return -EINVAL;
		}
		snprintf(c->desc, sizeof(c->desc),
			 "Shared Key of account %.64s (AZURE_STORAGE_KEY)",
			 o->account);
		c->kind = AZ_SHARED_KEY;
		return azure_key_parse(key, c->key, &c->key_len,
				       "AZURE_STORAGE_KEY", err);
	}
	return pick_bearer(c, o, err);
}

int azure_creds_new(const struct azure_creds_options *o,
		    struct fetch_engine *fe, struct azure_creds **out,
		    char **err)
{
	struct azure_creds *c = calloc(1, sizeof(*c));
	char *why = NULL;
	int rc;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->fe = fe;
	rc = pick(c, o, err);
	if (rc)
		goto fail;
	if (c->kind == AZ_BEARER) {
		char what[600];

		snprintf(what, sizeof(what), "Azure credentials: %s", c->desc);
		rc = creds_renew_new(sizeof(struct token_blob), renew_token, c,
				     what, 0, &c->r, &why);
		if (rc) {
			err_set(err, "az://%s: %s", o->account,
				why ? why : strerror(-rc));
			free(why);
			goto fail;
		}
	}
	log_info("Azure credentials: %s", c->desc);
	*out = c;
	return 0;
fail:
	azure_creds_free(c);
	return rc;
}

void azure_creds_free(struct azure_creds *c)
{
	if (!c)
		return;
	creds_renew_free(c->r); /* first: its thread uses the rest */
	OPENSSL_cleanse(c->sas, sizeof(c->sas));
	OPENSSL_cleanse(c->key, sizeof(c->key));
	free(c->token_url);
	free(c->client_id);
	free(c->token_file);
	free(c);
}
