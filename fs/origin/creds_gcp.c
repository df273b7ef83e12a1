/* creds_gcp: the OAuth token of GCS requests, found and renewed (see
 * creds_gcp.h). */
#include "config.h"

#include "creds_gcp.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "child.h"
#include "creds_renew.h"
#include "fetch.h"
#include "fileio.h"
#include "json.h"
#include "log.h"
#include "text.h"
#include "units.h"
#include "url.h"

#define TOKEN_MAX GCP_TOKEN_MAX
#define TEXT_MAX (64u << 10)   /* key files, command output, responses */
#define FILE_RENEW_S 60	       /* a token file is re-read this often */
#define JWT_LIFETIME_S 3600
#define DEFAULT_COMMAND_LIFETIME_S 300
#define DEFAULT_COMMAND_TIMEOUT_S 30
#define DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"
#define DEFAULT_STS_URL "https://sts.googleapis.com/v1/token"
#define METADATA_ADDRESS "169.254.169.254"
#define METADATA_PATH                                                          \
	"/computeMetadata/v1/instance/service-accounts/default/token"
#define SCOPE "https://www.googleapis.com/auth/devstorage.read_only"
#define STS_SCOPE "https://www.googleapis.com/auth/cloud-platform"
#define SUBJECT_MAX 16384 /* bytes of a subject token */

enum kind {
	K_ANON,
	K_FILE,
	K_ENV,
	K_COMMAND,
	K_SERVICE,
	K_USER,
	K_METADATA,
	K_EXTERNAL
};

struct gcp_creds {
	enum kind kind;
	struct fetch_engine *fe;
	char desc[512];
	char *path;	   /* token file or key file */
	char *command;	   /* token command */
	char *command_dir; /* where it runs, or NULL */
	unsigned lifetime; /* seconds a bare command token lasts */
	unsigned timeout_s; /* seconds the command may take */
	char *email, *key_id, *token_uri; /* service account */
	EVP_PKEY *pkey;
	char *client_id, *client_secret, *refresh_token; /* authorized user */
	char *metadata_url;
	struct gcp_external *ext; /* external_account */

	struct creds_renew *r; /* the current token; NULL when anonymous */
};

/* ---- small helpers ---- */

static void wipe_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

/* A token goes into a header: refuse anything that could break one. */
static int token_ok(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n >= TOKEN_MAX)
		return 0;
	for (; *t; t++)
		if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f)
			return 0;
	return 1;
}

/* Strings that go into the JWT unescaped must not need escaping. */
static int plain_ok(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\\')
			return 0;
	return 1;
}

static int read_text(const char *path, char **out, size_t *len, char **err)
{
	return read_file_capped(path, TEXT_MAX, out, len, err);
}

int gcp_token_bare(const char *text, char *tok, const char *what, char **err)
{
	size_t n;

	text += strspn(text, " \t\r\n");
	n = strcspn(text, "\r\n");
	while (n && (text[n - 1] == ' ' || text[n - 1] == '\t'))
		n--;
	if (n == 0 || n >= TOKEN_MAX) {
		err_set(err, "%s: %s", what,
			n ? "token too long" : "no token in it");
		return -EINVAL;
	}
	memcpy(tok, text, n);
	tok[n] = '\0';
	if (!token_ok(tok)) {
		err_set(err,
			"%s: the token has characters a header cannot "
			"carry",
			what);
		OPENSSL_cleanse(tok, n);
		return -EINVAL;
	}
	return 0;
}

/* ---- the sources ---- */

static int from_file(struct gcp_creds *c, char *tok, uint64_t *life_s,
		     char **err)
{
	char *text;
	size_t len;
	int rc;

	rc = read_text(c->path, &text, &len, err);
	if (rc)
		return rc;
	rc = gcp_token_bare(text, tok, c->desc, err);
	OPENSSL_cleanse(text, len);
	free(text);
	*life_s = 0;
	return rc;
}

static int from_command(struct gcp_creds *c, char *tok, uint64_t *life_s,
			char **err)
{
	const uint64_t t0 = now_ns();
	char *out = malloc(TEXT_MAX + 1);
	size_t n = 0;
	int status, rc;
	double secs;

	if (!out)
		return -ENOMEM;
	/* A hung command must not hang every read that needs a token. */
	rc = run_capture(c->command, c->command_dir, c->timeout_s * 1000, out,
			 TEXT_MAX + 1, &n, &status);
	secs = (double)(now_ns() - t0) / 1e9;
	if (rc == -ETIMEDOUT) {
		err_set(err, "%s: no answer after %u s; killed it", c->desc,
			c->timeout_s);
		rc = -EIO;
		goto out;
	}
	if (rc) {
		err_set(err, "%s: cannot run it: %s", c->desc, strerror(-rc));
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		err_set(err, "%s: exited with %s %d after %.1f s", c->desc,
			WIFEXITED(status) ? "status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status)
					  : WTERMSIG(status),
			secs);
		rc = -EIO;
		goto out;
	}
	log_debug("GCS credentials: %s answered in %.1f s", c->desc, secs);
	*life_s = c->lifetime;
	if (out[strspn(out, " \t\r\n")] == '{')
		rc = oauth_token_parse(out, n, tok, TOKEN_MAX, GCP_TOKEN_RULES,
				       life_s, c->desc, err);
	else
		rc = gcp_token_bare(out, tok, c->desc, err);
out:
	OPENSSL_cleanse(out, n);
	free(out);
	return rc;
}

/* POST or GET url; the answer is a token response, which an endpoint
 * (unlike a token command) gives with its expiry. */
static int token_request(struct gcp_creds *c, const char *url,
			 struct curl_slist *headers, const char *post,
			 char *tok, uint64_t *life_s, char **err)
{
	*life_s = 0;
	return oauth_token_fetch(c->fe, url, headers, post, tok, TOKEN_MAX,
				 GCP_TOKEN_RULES | OAUTH_NEED_EXPIRY, life_s,
				 c->desc, err);
}

/* base64url without padding (RFC 7515) of n bytes; out holds 4*(n+2)/3+1. */
static void b64url(const unsigned char *in, size_t n, char *out)
{
	int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);

	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = '\0';
	for (char *p = out; *p; p++) {
		if (*p == '+')
			*p = '-';
		else if (*p == '/')
			*p = '_';
	}
}

/* "HEADER.CLAIMS.SIGNATURE", RS256 over the first two, in a malloc'd
 * string. */
static int make_jwt(struct gcp_creds *c, char **out, char **err)
{
	char header[512], claims[4096], *jwt = NULL;
	unsigned char sig[1024];
	size_t hl, cl, siglen = sizeof(sig), cap;
	EVP_MD_CTX *md = NULL;
	int64_t now = (int64_t)time(NULL);
	int rc = -EIO;

	*out = NULL;
	snprintf(
	    header, sizeof(header), "{\"alg\":\"RS256\",\"typ\":\"JWT\"%s%s%s}",
	    *c->key_id ? ",\"kid\":\"" : "", c->key_id, *c->key_id ? "\"" : "");
	snprintf(claims, sizeof(claims),
		 "{\"iss\":\"%s\",\"scope\":\"%s\",\"aud\":\"%s\","
		 "\"iat\":%" PRId64 ",\"exp\":%" PRId64 "}",
		 c->email, SCOPE, c->token_uri, now, now + JWT_LIFETIME_S);
	hl = strlen(header);
	cl = strlen(claims);
	cap = (hl + cl + sizeof(sig)) * 4 / 3 + 16;
	jwt = malloc(cap);
	if (!jwt)
		return -ENOMEM;
	b64url((unsigned char *)header, hl, jwt);
	hl = strlen(jwt);
	jwt[hl] = '.';
	b64url((unsigned char *)claims, cl, jwt + hl + 1);
	cl = strlen(jwt);
	md = EVP_MD_CTX_new();
	if (!md ||
	    EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, c->pkey) != 1 ||
	    EVP_DigestSign(md, sig, &siglen, (unsigned char *)jwt, cl) != 1) {
		err_set(err, "%s: signing the JWT failed", c->desc);
		goto out;
	}
	jwt[cl] = '.';
	b64url(sig, siglen, jwt + cl + 1);
	*out = jwt;
	jwt = NULL;
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	free(jwt);
	return rc;
}

static int from_service_account(struct gcp_creds *c, char *tok,
				uint64_t *life_s, char **err)
{
	static const char grant[] =
	    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
	    "&assertion=";
	char *jwt, *body;
	int rc;

	rc = make_jwt(c, &jwt, err);
	if (rc)
		return rc;
	/* base64url needs no form encoding */
	body = strdupf("%s%s", grant, jwt);
	free(jwt);
	rc = token_request(c, c->token_uri, NULL, body, tok, life_s, err);
	free(body);
	return rc;
}

static int from_authorized_user(struct gcp_creds *c, char *tok,
				uint64_t *life_s, char **err)
{
	const char *vals[3] = {c->client_id, c->client_secret,
			       c->refresh_token};
	char enc[3][2048], *body;
	int rc;

	for (int i = 0; i < 3; i++)
		if (url_encode(vals[i], false, enc[i], sizeof(enc[i])) < 0) {
			err_set(err, "%s: a field is too long", c->desc);
			return -EINVAL;
		}
	body = strdupf("grant_type=refresh_token&client_id=%s&client_secret=%s"
		       "&refresh_token=%s",
		       enc[0], enc[1], enc[2]);
	rc = token_request(c, c->token_uri, NULL, body, tok, life_s, err);
	wipe_free(body);
	OPENSSL_cleanse(enc, sizeof(enc));
	return rc;
}

static int from_metadata(struct gcp_creds *c, char *tok, uint64_t *life_s,
			 char **err)
{
	struct curl_slist *h =
	    curl_slist_append(NULL, "Metadata-Flavor: Google");
	int rc;

	if (!h)
		return -ENOMEM;
	rc = token_request(c, c->metadata_url, h, NULL, tok, life_s, err);
	curl_slist_free_all(h);
	return rc;
}

/* ---- workload identity federation (external_account) ---- */

/* What an external_account file says. */
struct gcp_external {
	char *audience, *subject_type, *token_url, *impersonation_url;
	char *file, *url;	    /* where the subject token is */
	struct curl_slist *headers; /* for url */
	char field[128];	    /* json format: the token's member */
	bool json;
};

static void external_free(struct gcp_external *e)
{
	if (!e)
		return;
	free(e->audience);
	free(e->subject_type);
	free(e->token_url);
	free(e->impersonation_url);
	free(e->file);
	free(e->url);
	curl_slist_free_all(e->headers);
	free(e);
}

/* The subject token (from its file or URL, as text or a JSON member)
 * into tok (SUBJECT_MAX bytes). */
static int subject_token(struct gcp_creds *c, char *tok, char **err)
{
	struct gcp_external *e = c->ext;
	char *text = NULL;
	size_t len = 0, n;
	int rc;

	if (e->file) {
		rc = read_file_capped(e->file, SUBJECT_MAX, &text, &len, err);
	} else {
		struct fetch_req req = {.url = e->url,
					.headers = e->headers,
					.grow = true,
					.cap = SUBJECT_MAX};
		struct fetch_res res;

		rc = fetch_run(c->fe, &req, &res);
		if (rc)
			err_set(err, "%s: the subject token: %s", c->desc,
				res.err);
		text = res.body;
		len = res.len;
	}
	if (rc)
		return rc;
	if (e->json) {
		struct json s;
		bool first = true;
		char key[128];

		json_init(&s, text, len, c->desc, err);
		rc = json_expect(&s, '{');
		while (!rc && (rc = json_next(&s, '}', &first)) == 1) {
			rc = json_key(&s, key, sizeof(key));
			if (!rc && !strcmp(key, e->field))
				rc = json_string(&s, tok, SUBJECT_MAX, &n);
			else if (!rc)
				rc = json_skip(&s);
		}
		if (!rc && !tok[0]) {
			err_set(err, "%s: the subject token has no \"%s\"",
				c->desc, e->field);
			rc = -EINVAL;
		}
	} else {
		n = len < SUBJECT_MAX ? len : SUBJECT_MAX - 1;
		memcpy(tok, text, n);
		tok[n] = '\0';
		tok[strcspn(tok, "\r\n")] = '\0';
		if (!tok[0]) {
			err_set(err, "%s: the subject token is empty", c->desc);
			rc = -EINVAL;
		}
	}
	if (text)
		OPENSSL_cleanse(text, len);
	free(text);
	return rc ? -EINVAL : 0;
}

/* "2026-11-27T10:00:00Z" (fractions allowed) as seconds from now. */
static int64_t rfc3339_from_now(const char *t)
{
	struct tm tm = {0};
	const char *end = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);

	if (!end)
		return -1;
	return (int64_t)timegm(&tm) - (int64_t)time(NULL);
}

int gcp_impersonation_json(const char *text, size_t len, char *tok,
			   uint64_t *life_s, const char *what, char **err)
{
	struct json s;
	char key[64], when[64] = "";
	bool first = true, got = false;
	int64_t left;
	size_t n;
	int rc;

	json_init(&s, text, len, what, err);
	rc = json_expect(&s, '{');
	while (!rc && (rc = json_next(&s, '}', &first)) == 1) {
		rc = json_key(&s, key, sizeof(key));
		if (!rc && !strcmp(key, "accessToken")) {
			rc = json_string(&s, tok, TOKEN_MAX, &n);
			got = !rc;
		} else if (!rc && !strcmp(key, "expireTime")) {
			rc = json_string(&s, when, sizeof(when), &n);
		} else if (!rc) {
			rc = json_skip(&s);
		}
	}
	if (!rc)
		rc = json_end(&s);
	if (rc)
		return -EINVAL;
	left = rfc3339_from_now(when);
	if (!got || !token_ok(tok) || left < 0) {
		err_set(err,
			"%s: no usable accessToken and expireTime in the "
			"answer",
			what);
		return -EINVAL;
	}
	*life_s = (uint64_t)(left ? left : 1);
	return 0;
}

static int from_external(struct gcp_creds *c, char *tok, uint64_t *life_s,
			 char **err)
{
	static const char grant[] =
	    "urn:ietf:params:oauth:grant-type:token-exchange";
	static const char want[] =
	    "urn:ietf:params:oauth:token-type:access_token";
	struct gcp_external *e = c->ext;
	const char *vals[6] = {grant, e->audience,     STS_SCOPE,
			       want,  e->subject_type, NULL};
	char *subject = calloc(1, SUBJECT_MAX), *body = NULL, *enc = NULL;
	size_t cap = 3 * SUBJECT_MAX + 1024, used = 0;
	int rc;

	enc = malloc(cap);
	if (!subject || !enc) {
		rc = -ENOMEM;
		goto out;
	}
	rc = subject_token(c, subject, err);
	if (rc)
		goto out;
	vals[5] = subject;
	body = malloc(cap * 2);
	if (!body) {
		rc = -ENOMEM;
		goto out;
	}
	body[0] = '\0';
	for (int i = 0; i < 6; i++) {
		static const char *const names[6] = {"grant_type",
						     "audience",
						     "scope",
						     "requested_token_type",
						     "subject_token_type",
						     "subject_token"};
		int n = url_encode(vals[i], false, enc, cap);

		if (n < 0) {
			err_set(err, "%s: a field is too long", c->desc);
			rc = -EINVAL;
			goto out;
		}
		used += (size_t)snprintf(body + used, cap * 2 - used, "%s%s=%s",
					 i ? "&" : "", names[i], enc);
	}
	rc = token_request(c, e->token_url, NULL, body, tok, life_s, err);
	if (!rc && e->impersonation_url) {
		struct curl_slist *h = NULL;
		char *auth = strdupf("Authorization: Bearer %s", tok);
		struct fetch_req req = {0};
		struct fetch_res res;
		static const char ask[] =
		    "{\"scope\": [\"" SCOPE "\"], \"lifetime\": \"3600s\"}";

		h = auth ? curl_slist_append(NULL, auth) : NULL;
		if (h)
			h = curl_slist_append(h,
					      "Content-Type: application/json");
		if (auth)
			OPENSSL_cleanse(auth, strlen(auth));
		free(auth);
		OPENSSL_cleanse(tok, TOKEN_MAX);
		if (!h) {
			rc = -ENOMEM;
			goto out;
		}
		req.url = e->impersonation_url;
		req.headers = h;
		req.post = ask;
		req.post_len = strlen(ask);
		req.grow = true;
		req.cap = TEXT_MAX;
		rc = fetch_run(c->fe, &req, &res);
		curl_slist_free_all(h);
		if (rc) {
			err_set(err, "%s: service account impersonation: %s",
				c->desc, res.err);
			if (rc == -EIO && res.status >= 400 && res.status < 500)
				rc = -EACCES;
			goto out;
		}
		rc = gcp_impersonation_json(res.body, res.len, tok, life_s,
					    c->desc, err);
		OPENSSL_cleanse(res.body, res.len);
		free(res.body);
	}
out:
	if (subject)
		OPENSSL_cleanse(subject, SUBJECT_MAX);
	free(subject);
	if (body)
		OPENSSL_cleanse(body, strlen(body));
	free(body);
	if (enc)
		OPENSSL_cleanse(enc, cap);
	free(enc);
	return rc;
}

/* The block creds_renew keeps: the token, NUL-terminated. */
struct token_blob {
	char token[TOKEN_MAX];
};

/* creds_renew_fn: a new token from c's source, on the renewal thread (or
 * the thread of a refused request); never two at once. */
static int fetch_token(void *arg, void *blob, int64_t *expires, char **err)
{
	struct gcp_creds *c = arg;
	struct token_blob *b = blob;
	uint64_t life_s = 0;
	int rc;

	switch (c->kind) {
	case K_FILE: /* no stated expiry: re-read each FILE_RENEW_S */
		*expires = 0;
		return from_file(c, b->token, &life_s, err);
	case K_ENV: /* fixed for the life of the mount */
		*expires = 0;
		return gcp_token_bare(getenv("GOOGLE_OAUTH_ACCESS_TOKEN"),
				      b->token, c->desc, err);
	case K_COMMAND:
		rc = from_command(c, b->token, &life_s, err);
		break;
	case K_SERVICE:
		rc = from_service_account(c, b->token, &life_s, err);
		break;
	case K_USER:
		rc = from_authorized_user(c, b->token, &life_s, err);
		break;
	case K_METADATA:
		rc = from_metadata(c, b->token, &life_s, err);
		break;
	case K_EXTERNAL:
		rc = from_external(c, b->token, &life_s, err);
		break;
	default:
		return -EINVAL;
	}
	if (rc)
		return rc;
	*expires = creds_renew_expiry(life_s);
	return 0;
}

int gcp_creds_header(struct gcp_creds *c, char *out, size_t cap,
		     unsigned *serial)
{
	struct token_blob b;

	*serial = 0;
	if (!c->r) {
		if (cap)
			out[0] = '\0';
		return 0;
	}
	return creds_renew_bearer(c->r, &b, out, cap, serial);
}

bool gcp_creds_refused(struct gcp_creds *c, unsigned serial)
{
	return c->r && creds_renew_refused(c->r, serial);
}

const char *gcp_creds_describe(const struct gcp_creds *c)
{
	return c->desc;
}

bool gcp_creds_anonymous(const struct gcp_creds *c)
{
	return c->kind == K_ANON;
}

/* ---- finding the credentials ---- */

static int dup_field(struct json *s, char **dst, size_t cap)
{
	char *buf = malloc(cap);
	size_t n;

	if (!buf)
		return -ENOMEM;
	if (json_string(s, buf, cap, &n)) {
		free(buf);
		return -EINVAL;
	}
	wipe_free(*dst);
	*dst = buf;
	return 0;
}

/* fetch_credential_url for the field `field` of key file path. */
static int url_check(const char *url, enum fetch_cred_url where,
		     const char *path, const char *field, char **err)
{
	char what[600];

	snprintf(what, sizeof(what), "%.500s: %s", path, field);
	return fetch_credential_url(url, where, what, err);
}

/* credential_source's "headers": {"Name": "value", ...}. */
static int external_headers(struct json *s, struct gcp_external *e)
{
	char name[128], value[1024], line[1200];
	bool first = true;
	size_t n;
	int rc = json_expect(s, '{');

	while (!rc && (rc = json_next(s, '}', &first)) == 1) {
		struct curl_slist *h;

		rc = json_key(s, name, sizeof(name));
		if (!rc)
			rc = json_string(s, value, sizeof(value), &n);
		if (rc)
			break;
		if (strpbrk(name, ": \r\n") || strpbrk(value, "\r\n"))
			return json_fail(s, "a header that cannot be sent");
		snprintf(line, sizeof(line), "%s: %s", name, value);
		h = curl_slist_append(e->headers, line);
		if (!h)
			return -ENOMEM;
		e->headers = h;
	}
	return rc;
}

/* credential_source: {"file" | "url", "headers", "format": {"type":
 * "text" | "json", "subject_token_field_name"}}. */
static int external_source(struct json *s, struct gcp_external *e)
{
	char key[64], type[16] = "text";
	bool first = true, ffirst;
	size_t n;
	int rc = json_expect(s, '{');

	while (!rc && (rc = json_next(s, '}', &first)) == 1) {
		rc = json_key(s, key, sizeof(key));
		if (rc)
			break;
		if (!strcmp(key, "file"))
			rc = dup_field(s, &e->file, 4096);
		else if (!strcmp(key, "url"))
			rc = dup_field(s, &e->url, 4096);
		else if (!strcmp(key, "headers"))
			rc = external_headers(s, e);
		else if (!strcmp(key, "format")) {
			ffirst = true;
			rc = json_expect(s, '{');
			while (!rc && (rc = json_next(s, '}', &ffirst)) == 1) {
				rc = json_key(s, key, sizeof(key));
				if (!rc && !strcmp(key, "type"))
					rc = json_string(s, type, sizeof(type),
							 &n);
				else if (!rc &&
					 !strcmp(key,
						 "subject_token_field_name"))
					rc = json_string(s, e->field,
							 sizeof(e->field), &n);
				else if (!rc)
					rc = json_skip(s);
			}
		} else {
			rc = json_skip(s);
		}
	}
	if (rc)
		return rc;
	if (!strcmp(type, "json"))
		e->json = true;
	else if (strcmp(type, "text"))
		return json_fail(s, "credential_source.format.type is "
				    "neither text nor json");
	if (e->json && !e->field[0])
		return json_fail(s, "a json format needs "
				    "subject_token_field_name");
	return 0;
}

/* An external_account file (workload identity federation) into c. */
static int load_external(struct gcp_creds *c, const char *text, size_t len,
			 const char *path, char **err)
{
	struct gcp_external *e = calloc(1, sizeof(*e));
	struct json s;
	char key[64];
	bool first = true;
	int rc;

	if (!e)
		return -ENOMEM;
	c->ext = e;
	c->kind = K_EXTERNAL;
	json_init(&s, text, len, path, err);
	rc = json_expect(&s, '{');
	while (!rc && (rc = json_next(&s, '}', &first)) == 1) {
		rc = json_key(&s, key, sizeof(key));
		if (rc)
			break;
		if (!strcmp(key, "audience"))
			rc = dup_field(&s, &e->audience, 1024);
		else if (!strcmp(key, "subject_token_type"))
			rc = dup_field(&s, &e->subject_type, 256);
		else if (!strcmp(key, "token_url"))
			rc = dup_field(&s, &e->token_url, 1024);
		else if (!strcmp(key, "service_account_impersonation_url"))
			rc = dup_field(&s, &e->impersonation_url, 1024);
		else if (!strcmp(key, "credential_source"))
			rc = external_source(&s, e);
		else
			rc = json_skip(&s);
	}
	if (rc)
		return rc == -ENOMEM ? rc : -EINVAL;
	if (!e->audience || !e->subject_type || (!e->file == !e->url)) {
		err_set(err,
			"%s: an external_account file needs audience, "
			"subject_token_type and a credential_source with "
			"either file or url",
			path);
		return -EINVAL;
	}
	if (!e->token_url && !(e->token_url = strdup(DEFAULT_STS_URL)))
		return -ENOMEM;
	/* Absolute now: the daemon renews from "/" after it detaches. */
	if (e->file && e->file[0] != '/') {
		char *abs = path_absolute(e->file);

		if (!abs)
			return -ENOMEM;
		free(e->file);
		e->file = abs;
	}
	/* Tokens go to each: the subject token's URL is a metadata
	 * service's (Azure's IMDS, say), the others token endpoints. */
	rc = url_check(e->token_url, FETCH_CRED_TOKEN, path, "token_url", err);
	if (!rc && e->url)
		rc = url_check(e->url, FETCH_CRED_METADATA, path,
			       "credential_source.url", err);
	if (!rc && e->impersonation_url)
		rc = url_check(e->impersonation_url, FETCH_CRED_TOKEN, path,
			       "service_account_impersonation_url", err);
	if (rc)
		return rc;
	snprintf(c->desc, sizeof(c->desc),
		 "workload identity federation (subject token %s %.200s%s, "
		 "key file %.200s)",
		 e->file ? "file" : "URL", e->file ? e->file : e->url,
		 e->impersonation_url ? ", impersonating a service account"
				      : "",
		 path);
	return 0;
}

/* Reads a service_account, authorized_user or external_account key file
 * into c. */
static int load_key_file(struct gcp_creds *c, const char *path, char **err)
{
	static const struct {
		const char *key;
		size_t off, cap;
	} fields[] = {
	    {"client_email", offsetof(struct gcp_creds, email), 1024},
	    {"private_key_id", offsetof(struct gcp_creds, key_id), 256},
	    {"token_uri", offsetof(struct gcp_creds, token_uri), 1024},
	    {"client_id", offsetof(struct gcp_creds, client_id), 1024},
	    {"client_secret", offsetof(struct gcp_creds, client_secret), 1024},
	    {"refresh_token", offsetof(struct gcp_creds, refresh_token), 2048},
	};
	char *text = NULL, *pem = NULL, type[64] = "", key[64];
	struct json s;
	size_t len, n;
	bool first = true;
	BIO *bio = NULL;
	int rc;

	rc = read_text(path, &text, &len, err);
	if (rc)
		return rc;
	json_init(&s, text, len, path, err);
	rc = -EINVAL;
	if (json_expect(&s, '{'))
		goto out;
	while ((rc = json_next(&s, '}', &first)) == 1) {
		size_t i;

		rc = -EINVAL;
		if (json_key(&s, key, sizeof(key)))
			goto out;
		for (i = 0; i < ARRAY_SIZE(fields); i++)
			if (!strcmp(key, fields[i].key))
				break;
		if (i < ARRAY_SIZE(fields)) {
			rc = dup_field(&s, (char **)((char *)c + fields[i].off),
				       fields[i].cap);
		} else if (!strcmp(key, "type")) {
			rc = json_string(&s, type, sizeof(type), &n);
		} else if (!strcmp(key, "private_key")) {
			rc = dup_field(&s, &pem, 16384);
		} else {
			rc = json_skip(&s);
		}
		if (rc)
			goto out;
	}
	if (rc < 0 || json_end(&s)) {
		rc = -EINVAL;
		goto out;
	}
	if (!c->token_uri)
		c->token_uri = strdup(DEFAULT_TOKEN_URI);
	if (!c->token_uri) {
		rc = -ENOMEM;
		goto out;
	}
	/* A signed assertion or a refresh token goes to token_uri. */
	if (strcmp(type, "external_account")) {
		rc = url_check(c->token_uri, FETCH_CRED_TOKEN, path,
			       "token_uri", err);
		if (rc)
			goto out;
	}
	rc = -EINVAL;
	if (!strcmp(type, "service_account")) {
		c->kind = K_SERVICE;
		if (!c->email || !pem) {
			err_set(err,
				"%s: a service account key needs "
				"client_email and private_key",
				path);
			goto out;
		}
		if (!c->key_id)
			c->key_id = strdup("");
		if (!c->key_id) {
			rc = -ENOMEM;
			goto out;
		}
		if (!plain_ok(c->email) || !plain_ok(c->key_id) ||
		    !plain_ok(c->token_uri)) {
			err_set(err,
				"%s: client_email, private_key_id or "
				"token_uri has characters a JWT claim "
				"would need to escape",
				path);
			goto out;
		}
		bio = BIO_new_mem_buf(pem, -1);
		c->pkey =
		    bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
		if (!c->pkey || EVP_PKEY_get_base_id(c->pkey) != EVP_PKEY_RSA) {
			err_set(err, "%s: private_key is not a PEM RSA key",
				path);
			goto out;
		}
		snprintf(c->desc, sizeof(c->desc),
			 "service account %.200s (key file %.250s)", c->email,
			 path);
	} else if (!strcmp(type, "authorized_user")) {
		c->kind = K_USER;
		if (!c->client_id || !c->client_secret || !c->refresh_token) {
			err_set(err,
				"%s: an authorized_user file needs "
				"client_id, client_secret and "
				"refresh_token",
				path);
			goto out;
		}
		snprintf(c->desc, sizeof(c->desc),
			 "authorized user (key file %.400s)", path);
	} else if (!strcmp(type, "external_account")) {
		rc = load_external(c, text, len, path, err);
		goto out;
	} else {
		err_set(err,
			"%s: credentials of type \"%s\" are not "
			"supported (service_account, authorized_user, "
			"external_account)",
			path, type);
		goto out;
	}
	rc = 0;
out:
	BIO_free(bio);
	wipe_free(pem);
	if (text)
		OPENSSL_cleanse(text, len);
	free(text);
	return rc;
}

/* gcloud's application default credentials, when present. */
static char *well_known_file(void)
{
	const char *dir = getenv("CLOUDSDK_CONFIG"), *home = getenv("HOME");
	char *path;

	if (dir && *dir)
		path = strdupf("%s/application_default_credentials.json", dir);
	else if (home && *home)
		path = strdupf("%s/.config/gcloud/"
			       "application_default_credentials.json",
			       home);
	else
		return NULL;
	if (access(path, R_OK) == 0)
		return path;
	free(path);
	return NULL;
}

/* Off Google Cloud, DNS for metadata.google.internal fails slowly and is
 * retried, so the server is only asked when told (GCE_METADATA_HOST) or
 * when the firmware says this is a Google VM, as Google's libraries do. */
static bool on_gce(void)
{
	char name[64] = "";
	FILE *f = fopen("/sys/class/dmi/id/product_name", "re");

	if (!f)
		return false;
	if (!fgets(name, sizeof(name), f))
		name[0] = '\0';
	fclose(f);
	return !strncmp(name, "Google", 6);
}

static int pick(struct gcp_creds *c, const struct gcp_creds_options *o,
		char **err)
{
	const char *env = getenv("GOOGLE_OAUTH_ACCESS_TOKEN");
	const char *adc = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	const char *mhost = getenv("GCE_METADATA_HOST");
	char *wk;

	if (o->anonymous) {
		snprintf(c->desc, sizeof(c->desc), "anonymous (--anonymous)");
		c->kind = K_ANON;
		return 0;
	}
	if (o->token_file) {
		c->kind = K_FILE;
		c->path = strdup(o->token_file);
		snprintf(c->desc, sizeof(c->desc), "token file %.450s",
			 o->token_file);
		return c->path ? 0 : -ENOMEM;
	}
	if (env && *env) {
		c->kind = K_ENV;
		snprintf(c->desc, sizeof(c->desc), "GOOGLE_OAUTH_ACCESS_TOKEN");
		return 0;
	}
	if (o->token_command) {
		c->kind = K_COMMAND;
		c->command = strdup(o->token_command);
		c->command_dir = o->token_command_dir
				     ? strdup(o->token_command_dir)
				     : NULL;
		if (o->token_command_dir && !c->command_dir) {
			free(c->command);
			c->command = NULL;
		}
		c->lifetime = o->token_lifetime ? o->token_lifetime
						: DEFAULT_COMMAND_LIFETIME_S;
		c->timeout_s = o->token_timeout ? o->token_timeout
						: DEFAULT_COMMAND_TIMEOUT_S;
		/* Never the command itself: it may carry a secret (a key,
		 * a password), and messages reach logs. */
		snprintf(c->desc, sizeof(c->desc), "the token command");
		return c->command ? 0 : -ENOMEM;
	}
	if (adc && *adc) {
		c->path = strdup(adc);
		return c->path ? load_key_file(c, adc, err) : -ENOMEM;
	}
	wk = well_known_file();
	if (wk) {
		c->path = wk;
		return load_key_file(c, wk, err);
	}
	if ((mhost && *mhost) || on_gce()) {
		/* The server's address, not metadata.google.internal: plain
		 * http goes only to an address known to be the metadata
		 * server's (fetch_credential_url), and no DNS answer can
		 * send it elsewhere (as Google's Go library does). */
		const char *h = mhost && *mhost ? mhost : METADATA_ADDRESS;

		c->kind = K_METADATA;
		c->metadata_url = strdupf("http://%s" METADATA_PATH, h);
		snprintf(c->desc, sizeof(c->desc), "metadata server %.400s", h);
		return c->metadata_url
			   ? fetch_credential_url(
				 c->metadata_url, FETCH_CRED_METADATA,
				 mhost && *mhost ? "GCE_METADATA_HOST"
						 : c->desc,
				 err)
			   : -ENOMEM;
	}
	if (o->emulator) {
		snprintf(c->desc, sizeof(c->desc),
			 "anonymous (emulator, no credentials configured)");
		c->kind = K_ANON;
		return 0;
	}
	err_set(err, "no Google credentials found: tried --token-file, "
		     "GOOGLE_OAUTH_ACCESS_TOKEN, --token-command, "
		     "GOOGLE_APPLICATION_CREDENTIALS, gcloud's application "
		     "default credentials and the GCE metadata server; use "
		     "--anonymous for a public bucket");
	return -EACCES;
}

int gcp_creds_new(const struct gcp_creds_options *o, struct fetch_engine *fe,
		  struct gcp_creds **out, char **err)
{
	struct gcp_creds *c = calloc(1, sizeof(*c));
	char *why = NULL;
	int rc;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->fe = fe;
	rc = pick(c, o, err);
	if (rc)
		goto fail;
	if (c->kind != K_ANON) {
		char what[600];

		snprintf(what, sizeof(what), "GCS credentials: %s", c->desc);
		rc = creds_renew_new(sizeof(struct token_blob), fetch_token, c,
				     what, c->kind == K_FILE ? FILE_RENEW_S : 0,
				     &c->r, &why);
		if (rc) {
			err_set(err, "GCS credentials: %s",
				why ? why : strerror(-rc));
			free(why);
			goto fail;
		}
	}
	log_info("GCS credentials: %s", c->desc);
	*out = c;
	return 0;
fail:
	gcp_creds_free(c);
	return rc;
}

int gcp_key_file_check(const char *path, char **err)
{
	struct gcp_creds *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	rc = load_key_file(c, path, err);
	gcp_creds_free(c);
	return rc;
}

void gcp_creds_free(struct gcp_creds *c)
{
	if (!c)
		return;
	creds_renew_free(c->r); /* first: its thread uses the rest */
	free(c->path);
	free(c->command);
	free(c->command_dir);
	free(c->email);
	free(c->key_id);
	free(c->token_uri);
	EVP_PKEY_free(c->pkey);
	free(c->client_id);
	wipe_free(c->client_secret);
	wipe_free(c->refresh_token);
	free(c->metadata_url);
	external_free(c->ext);
	free(c);
}
