/* creds_aws: AWS credentials, region and endpoint (see creds_aws.h). */
#include "config.h"

#include "creds_aws.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "creds_renew.h"
#include "fetch.h"
#include "json.h"
#include "sigv4.h"
#include "xml.h"

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

const char *aws_region(const char *opt)
{
	if (opt && *opt)
		return opt;
	if (env("AWS_REGION"))
		return env("AWS_REGION");
	if (env("AWS_DEFAULT_REGION"))
		return env("AWS_DEFAULT_REGION");
	return "us-east-1";
}

const char *aws_endpoint(const char *opt)
{
	if (opt && *opt)
		return opt;
	if (env("AWS_ENDPOINT_URL_S3"))
		return env("AWS_ENDPOINT_URL_S3");
	return env("AWS_ENDPOINT_URL");
}

void aws_creds_clear(struct aws_creds *c)
{
	if (c->secret_key)
		explicit_bzero(c->secret_key, strlen(c->secret_key));
	if (c->session_token)
		explicit_bzero(c->session_token, strlen(c->session_token));
	free(c->access_key);
	free(c->secret_key);
	free(c->session_token);
	free(c->origin);
	memset(c, 0, sizeof(*c));
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int set(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -ENOMEM;
}

/* ---- Shared config and credentials files ---- */

/* The keys of a profile that the chain reads. */
enum pkey {
	K_ACCESS,
	K_SECRET,
	K_TOKEN,
	K_ROLE_ARN,
	K_SOURCE_PROFILE,
	K_CREDENTIAL_SOURCE,
	K_PROCESS,
	K_SESSION_NAME,
	K_EXTERNAL_ID,
	K_DURATION,
	K_WEB_TOKEN_FILE,
	K_COUNT
};

static const char *const pkey_names[K_COUNT] = {
    "aws_access_key_id",  "aws_secret_access_key",   "aws_session_token",
    "role_arn",		  "source_profile",	     "credential_source",
    "credential_process", "role_session_name",	     "external_id",
    "duration_seconds",	  "web_identity_token_file",
};

struct profile {
	char *v[K_COUNT]; /* NULL when not set */
	char *where;	  /* "FILE [name]" of the first file that has it */
};

static void profile_clear(struct profile *p)
{
	for (int i = 0; i < K_COUNT; i++)
		if (p->v[i]) {
			explicit_bzero(p->v[i], strlen(p->v[i]));
			free(p->v[i]);
		}
	free(p->where);
	memset(p, 0, sizeof(*p));
}

/*
 * Reads [name] (or [profile name]) of INI file `path` into p: "key =
 * value" lines, '#' and ';' comments; keys p already has stay (the
 * credentials file, read first, wins over the config file).
 * @return 0 (p->where set when the section is there); -ENOENT when the
 * file is missing (*err says so); -EINVAL for a broken section line.
 */
static int ini_read(const char *path, const char *name, struct profile *p,
		    char **err)
{
	FILE *f = fopen(path, "re");
	char line[8192];
	bool in = false, seen = false;
	unsigned lineno = 0;
	int rc = 0;

	if (!f) {
		int e = errno;

		err_set(err, "no AWS credentials: %s: %s", path, strerror(e));
		return e == ENOENT ? -ENOENT : -e;
	}
	while (!rc && fgets(line, sizeof(line), f)) {
		char *s = trim(line), *eq;

		lineno++;
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *end = strchr(s, ']'), *sec;

			if (!end) {
				err_set(err, "%s:%u: a section without ']'",
					path, lineno);
				rc = -EINVAL;
				break;
			}
			*end = '\0';
			sec = trim(s + 1);
			if (!strncmp(sec, "profile ", 8))
				sec = trim(sec + 8);
			in = !strcmp(sec, name);
			seen |= in;
			continue;
		}
		eq = in ? strchr(s, '=') : NULL;
		if (!eq)
			continue;
		*eq = '\0';
		s = trim(s);
		for (int k = 0; k < K_COUNT; k++)
			if (!strcmp(s, pkey_names[k]) && !p->v[k])
				rc = set(&p->v[k], trim(eq + 1));
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	if (!rc && seen && !p->where) {
		p->where = strdupf("%s [%s]", path, name);
		if (!p->where)
			rc = -ENOMEM;
	}
	return rc;
}

/* The shared credentials file's path (malloc'd), or NULL without HOME. */
static char *credentials_path(void)
{
	if (env("AWS_SHARED_CREDENTIALS_FILE"))
		return strdup(env("AWS_SHARED_CREDENTIALS_FILE"));
	return env("HOME") ? strdupf("%s/.aws/credentials", env("HOME")) : NULL;
}

static char *config_path(void)
{
	if (env("AWS_CONFIG_FILE"))
		return strdup(env("AWS_CONFIG_FILE"));
	return env("HOME") ? strdupf("%s/.aws/config", env("HOME")) : NULL;
}

/* Static keys of the credentials file alone (aws_creds_load). */
static int from_file(const char *path, const char *profile, struct aws_creds *c,
		     char **err)
{
	struct profile p = {0};
	int rc = ini_read(path, profile, &p, err);

	if (!rc && !p.where) {
		err_set(err, "no AWS credentials: no profile [%s] in %s",
			profile, path);
		rc = -ENOENT;
	} else if (!rc && (!p.v[K_ACCESS] || !p.v[K_SECRET] ||
			   !*p.v[K_ACCESS] || !*p.v[K_SECRET])) {
		err_set(err,
			"%s: profile [%s] lacks aws_access_key_id or "
			"aws_secret_access_key",
			path, profile);
		rc = -EINVAL;
	}
	if (!rc) {
		c->access_key = p.v[K_ACCESS];
		c->secret_key = p.v[K_SECRET];
		c->session_token = p.v[K_TOKEN];
		c->origin = p.where;
		p.v[K_ACCESS] = p.v[K_SECRET] = p.v[K_TOKEN] = NULL;
		p.where = NULL;
	}
	profile_clear(&p);
	return rc;
}

int aws_creds_load(const char *profile, struct aws_creds *out, char **err)
{
	char *file;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!profile || !*profile) {
		const char *id = env("AWS_ACCESS_KEY_ID");
		const char *secret = env("AWS_SECRET_ACCESS_KEY");

		if (id || secret) {
			if (!id || !secret) {
				err_set(err, "%s is set but %s is not",
					id ? "AWS_ACCESS_KEY_ID"
					   : "AWS_SECRET_ACCESS_KEY",
					id ? "AWS_SECRET_ACCESS_KEY"
					   : "AWS_ACCESS_KEY_ID");
				return -EINVAL;
			}
			rc = set(&out->access_key, id);
			if (!rc)
				rc = set(&out->secret_key, secret);
			if (!rc && env("AWS_SESSION_TOKEN"))
				rc = set(&out->session_token,
					 env("AWS_SESSION_TOKEN"));
			if (!rc)
				rc = set(&out->origin, "the environment");
			if (rc)
				aws_creds_clear(out);
			return rc;
		}
		profile = env("AWS_PROFILE");
		if (!profile)
			profile = "default";
	}
	file = credentials_path();
	if (!file) {
		err_set(err, "no AWS credentials: neither "
			     "AWS_ACCESS_KEY_ID nor HOME is set");
		return -ENOENT;
	}
	rc = from_file(file, profile, out, err);
	if (rc)
		aws_creds_clear(out);
	free(file);
	return rc;
}

/* ---- What STS, the container endpoint, IMDS and processes answer ---- */

/* Copies one field into a fixed-size key buffer, refusing what a header
 * or a signature could not carry.  `header`: it is sent as is. */
static int key_set(char *dst, size_t cap, const char *v, size_t n,
		   const char *field, bool header, const char *what, char **err)
{
	if (n == 0 || n >= cap) {
		err_set(err, "%s: %s is %s", what, field,
			n ? "too long" : "empty");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)v[i];

		if (ch < 0x20 || ch >= 0x7f || (header && ch == ' ')) {
			err_set(err, "%s: %s has a character it cannot have",
				what, field);
			return -EINVAL;
		}
	}
	memcpy(dst, v, n);
	dst[n] = '\0';
	return 0;
}

/* "2026-11-27T10:00:00Z", with optional fractions of a second and a
 * "+HH:MM" offset, as epoch seconds; -1 when it is none of that. */
static int64_t iso8601(const char *s)
{
	struct tm tm = {0};
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	int64_t t, off = 0;

	if (!p)
		return -1;
	t = (int64_t)timegm(&tm);
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == '+' || *p == '-') {
		int hh, mm;
		char c;

		if (sscanf(p + 1, "%2d:%2d%c", &hh, &mm, &c) != 2 || hh > 23 ||
		    mm > 59 || strlen(p) != 6)
			return -1;
		off = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
		p += 6;
	} else if (*p == 'Z') {
		p++;
	}
	return *p || t <= 0 ? -1 : t - off;
}

struct sts_doc {
	struct aws_keys *k;
	int64_t *expires;
	const char *what;
	char **err;
	unsigned got; /* bit per field */
};

static int sts_end(void *arg, struct xml *x)
{
	struct sts_doc *d = arg;
	const char *el = x->names[x->depth - 1];
	size_t rl = strlen(x->names[0]);
	int rc = 0;

	if (rl < 8 || strcmp(x->names[0] + rl - 8, "Response"))
		return xml_fail(x, "the root is not an STS <...Response>");
	if (x->depth != 4 || strcmp(x->names[2], "Credentials"))
		return 0;
	if (!strcmp(el, "AccessKeyId")) {
		rc = key_set(d->k->access_key, AWS_KEY_MAX, x->text, x->tlen,
			     "AccessKeyId", true, d->what, d->err);
		d->got |= 1;
	} else if (!strcmp(el, "SecretAccessKey")) {
		rc = key_set(d->k->secret_key, AWS_KEY_MAX, x->text, x->tlen,
			     "SecretAccessKey", false, d->what, d->err);
		d->got |= 2;
	} else if (!strcmp(el, "SessionToken")) {
		rc = key_set(d->k->token, AWS_TOKEN_MAX, x->text, x->tlen,
			     "SessionToken", true, d->what, d->err);
		d->got |= 4;
	} else if (!strcmp(el, "Expiration")) {
		*d->expires = iso8601(x->text);
		d->got |= 8;
		if (*d->expires < 0)
			return xml_fail(x, "<Expiration> is not a UTC time");
	}
	return rc ? -EINVAL : 0;
}

int aws_sts_parse(const char *text, size_t len, struct aws_keys *k,
		  int64_t *expires, const char *what, char **err)
{
	struct sts_doc d = {k, expires, what, err, 0};
	struct xml *x = malloc(sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	*expires = 0;
	xml_init(x, text, len, sts_end, &d);
	rc = xml_walk(x);
	if (rc && x->err && !(err && *err))
		err_set(err, "%s: %s", what, x->err);
	else if (!rc && d.got != 15) {
		err_set(err,
			"%s: no <Credentials> with AccessKeyId, "
			"SecretAccessKey, SessionToken and Expiration",
			what);
		rc = -EINVAL;
	}
	free(x->err);
	OPENSSL_cleanse(x, sizeof(*x));
	free(x);
	if (rc)
		OPENSSL_cleanse(k, sizeof(*k));
	return rc ? -EINVAL : 0;
}

int aws_json_parse(const char *text, size_t len, bool process,
		   struct aws_keys *k, int64_t *expires, const char *what,
		   char **err)
{
	/* Big enough for any field; wiped after. */
	char key[64], *val = malloc(AWS_TOKEN_MAX + 1);
	struct json s;
	bool first = true;
	unsigned got = 0;
	uint64_t version = 0;
	size_t n;
	int rc;

	if (!val)
		return -ENOMEM;
	*expires = 0;
	json_init(&s, text, len, what, err);
	rc = json_expect(&s, '{');
	while (!rc && (rc = json_next(&s, '}', &first)) == 1) {
		rc = json_key(&s, key, sizeof(key));
		if (rc)
			break;
		if (!strcmp(key, "Version")) {
			rc = json_u64(&s, &version);
			continue;
		}
		if (strcmp(key, "AccessKeyId") &&
		    strcmp(key, "SecretAccessKey") && strcmp(key, "Token") &&
		    strcmp(key, "SessionToken") && strcmp(key, "Expiration") &&
		    strcmp(key, "Code")) {
			rc = json_skip(&s);
			continue;
		}
		rc = json_string(&s, val, AWS_TOKEN_MAX + 1, &n);
		if (rc)
			break;
		if (!strcmp(key, "AccessKeyId")) {
			rc = key_set(k->access_key, AWS_KEY_MAX, val, n, key,
				     true, what, err);
			got |= 1;
		} else if (!strcmp(key, "SecretAccessKey")) {
			rc = key_set(k->secret_key, AWS_KEY_MAX, val, n, key,
				     false, what, err);
			got |= 2;
		} else if (!strcmp(key, process ? "SessionToken" : "Token")) {
			rc = key_set(k->token, AWS_TOKEN_MAX, val, n, key, true,
				     what, err);
		} else if (!strcmp(key, "Expiration")) {
			*expires = iso8601(val);
			if (*expires < 0) {
				err_set(err,
					"%s: Expiration \"%.40s\" is not "
					"a UTC time",
					what, val);
				rc = -EINVAL;
			}
		} else if (!strcmp(key, "Code") && strcmp(val, "Success")) {
			err_set(err, "%s: Code is \"%.60s\", not Success", what,
				val);
			rc = -EINVAL;
		}
	}
	OPENSSL_cleanse(val, AWS_TOKEN_MAX + 1);
	free(val);
	if (!rc)
		rc = json_end(&s);
	if (!rc && got != 3) {
		err_set(err, "%s: no AccessKeyId and SecretAccessKey", what);
		rc = -EINVAL;
	}
	if (!rc && process && version != 1) {
		err_set(err, "%s: Version is %" PRIu64 ", not 1", what,
			version);
		rc = -EINVAL;
	}
	if (rc)
		OPENSSL_cleanse(k, sizeof(*k));
	return rc ? -EINVAL : 0;
}

/* ---- The providers ---- */

#define ANSWER_MAX (64u << 10)	  /* bytes of an STS, IMDS, process answer */
#define WEB_TOKEN_MAX (16u << 10) /* bytes of a web identity token */
#define PROCESS_TIMEOUT_MS 60000
#define PROFILE_DEPTH_MAX 4 /* source_profile hops */
#define IMDS_DEFAULT "http://169.254.169.254"
#define CONTAINER_HOST "http://169.254.170.2"
#define STS_VERSION "2011-06-15"

enum kind { P_STATIC, P_WEB, P_ROLE, P_PROCESS, P_CONTAINER, P_IMDS };

struct prov {
	enum kind kind;
	char desc[600];
	struct fetch_engine *fe;
	struct aws_keys keys; /* P_STATIC */
	/* P_WEB, P_ROLE: the role, and STS */
	char *role_arn, *session, *external_id, *token_file;
	unsigned duration_s;
	char *sts_url, *sts_host, *sts_path, *region;
	struct prov *src; /* P_ROLE: whose keys sign AssumeRole */
	char *command, *command_dir; /* P_PROCESS, and where it runs */
	/* P_CONTAINER: its URL and authorization; P_IMDS: its base URL */
	char *url, *auth, *auth_file;
};

struct aws_chain {
	struct prov *p;
	struct creds_renew *r;
};

static void prov_free(struct prov *p)
{
	if (!p)
		return;
	OPENSSL_cleanse(&p->keys, sizeof(p->keys));
	prov_free(p->src);
	free(p->role_arn);
	free(p->session);
	free(p->external_id);
	free(p->token_file);
	free(p->sts_url);
	free(p->sts_host);
	free(p->sts_path);
	free(p->region);
	free(p->command);
	free(p->command_dir);
	free(p->url);
	if (p->auth)
		OPENSSL_cleanse(p->auth, strlen(p->auth));
	free(p->auth);
	free(p->auth_file);
	free(p);
}

/* One request to an endpoint; the body (grown, NUL-terminated) in *body. */
static int call(struct prov *p, struct fetch_req *req, char **body, size_t *len,
		const char *step, char **err)
{
	struct fetch_res res;
	int rc;

	req->grow = true;
	req->cap = ANSWER_MAX;
	rc = fetch_run(p->fe, req, &res);
	if (rc) {
		err_set(err, "%s: %s: %s", p->desc, step, res.err);
		if (rc == -EIO && res.status >= 400 && res.status < 500)
			rc = -EACCES;
		return rc;
	}
	*body = realloc(res.body, res.len + 1);
	if (!*body) {
		free(res.body);
		return -ENOMEM;
	}
	(*body)[res.len] = '\0';
	*len = res.len;
	return 0;
}

static void body_free(char *body, size_t len)
{
	if (body)
		OPENSSL_cleanse(body, len);
	free(body);
}

/* Appends "&name=value" (value form-encoded) to *form. */
static int form_add(char **form, const char *name, const char *value)
{
	size_t cap = strlen(value) * 3 + 1;
	char *enc = malloc(cap), *next;

	if (!enc)
		return -ENOMEM;
	if (url_encode(value, false, enc, cap) < 0) {
		free(enc);
		return -ENAMETOOLONG;
	}
	next = strdupf("%s%s%s=%s", *form ? *form : "", *form ? "&" : "", name,
		       enc);
	OPENSSL_cleanse(enc, strlen(enc));
	free(enc);
	if (*form)
		OPENSSL_cleanse(*form, strlen(*form));
	free(*form);
	*form = next;
	return next ? 0 : -ENOMEM;
}

/* POSTs form to STS, signed with *sign unless NULL; parses the answer. */
static int sts_call(struct prov *p, const char *form,
		    const struct aws_keys *sign, struct aws_keys *k,
		    int64_t *expires, char **err)
{
	struct fetch_req req = {0};
	struct curl_slist *h = NULL;
	struct sigv4_out *so = NULL;
	char *body = NULL, date[17], hash[65], line[AWS_TOKEN_MAX + 64];
	size_t len = 0;
	int rc = -ENOMEM;

	h = curl_slist_append(
	    h, "Content-Type: application/x-www-form-urlencoded");
	if (!h)
		goto out;
	if (sign) {
		struct sigv4_header sh[4] = {
		    {"Host", p->sts_host},
		    {"Content-Type", "application/x-www-form-urlencoded"},
		    {"X-Amz-Date", date},
		    {"X-Amz-Security-Token", sign->token}};
		struct sigv4_in in = {.method = "POST",
				      .path = p->sts_path,
				      .headers = sh,
				      .nheaders = sign->token[0] ? 4 : 3,
				      .payload_hash = hash,
				      .amz_date = date,
				      .region = p->region,
				      .service = "sts",
				      .access_key = sign->access_key,
				      .secret_key = sign->secret_key};

		sigv4_amz_date((long long)time(NULL), date);
		sigv4_sha256_hex(form, strlen(form), hash);
		so = malloc(sizeof(*so));
		if (!so)
			goto out;
		rc = sigv4_sign(&in, so);
		if (rc) {
			err_set(err, "%s: cannot sign the STS request: %s",
				p->desc, strerror(-rc));
			goto out;
		}
		rc = -ENOMEM;
		for (size_t i = 2; i < in.nheaders; i++) {
			snprintf(line, sizeof(line), "%s: %s", sh[i].name,
				 sh[i].value);
			if (!(h = curl_slist_append(h, line)))
				goto out;
		}
		snprintf(line, sizeof(line), "Authorization: %s",
			 so->authorization);
		if (!(h = curl_slist_append(h, line)))
			goto out;
	}
	req.url = p->sts_url;
	req.headers = h;
	req.post = form;
	req.post_len = strlen(form);
	rc = call(p, &req, &body, &len, "STS", err);
	if (!rc)
		rc = aws_sts_parse(body, len, k, expires, p->desc, err);
out:
	OPENSSL_cleanse(line, sizeof(line));
	free(so);
	curl_slist_free_all(h);
	body_free(body, len);
	return rc;
}

static int prov_fetch(struct prov *p, struct aws_keys *k, int64_t *expires,
		      char **err);

static int role_form(struct prov *p, const char *action, char **form)
{
	char dur[16];
	int rc;

	snprintf(dur, sizeof(dur), "%u", p->duration_s);
	rc = form_add(form, "Action", action);
	if (!rc && p->duration_s)
		rc = form_add(form, "DurationSeconds", dur);
	if (!rc && p->external_id)
		rc = form_add(form, "ExternalId", p->external_id);
	if (!rc)
		rc = form_add(form, "RoleArn", p->role_arn);
	if (!rc)
		rc = form_add(form, "RoleSessionName", p->session);
	if (!rc)
		rc = form_add(form, "Version", STS_VERSION);
	return rc;
}

static int from_web_identity(struct prov *p, struct aws_keys *k,
			     int64_t *expires, char **err)
{
	char *form = NULL, *tok = NULL, *why = NULL;
	size_t len = 0;
	int rc;

	/* Read again each time: the kubelet rotates it. */
	rc = read_file_capped(p->token_file, WEB_TOKEN_MAX, &tok, &len, &why);
	if (rc) {
		err_set(err, "%s: %s", p->desc, why);
		free(why);
		return rc;
	}
	tok[strcspn(tok, "\r\n")] = '\0';
	if (!*tok) {
		err_set(err, "%s: the token file is empty", p->desc);
		rc = -EINVAL;
	}
	if (!rc)
		rc = role_form(p, "AssumeRoleWithWebIdentity", &form);
	if (!rc)
		rc = form_add(&form, "WebIdentityToken", tok);
	if (!rc)
		rc = sts_call(p, form, NULL, k, expires, err);
	body_free(tok, len);
	if (form)
		OPENSSL_cleanse(form, strlen(form));
	free(form);
	return rc;
}

static int from_role(struct prov *p, struct aws_keys *k, int64_t *expires,
		     char **err)
{
	struct aws_keys *src = calloc(1, sizeof(*src));
	char *form = NULL;
	int64_t src_exp;
	int rc;

	if (!src)
		return -ENOMEM;
	rc = prov_fetch(p->src, src, &src_exp, err);
	if (!rc)
		rc = role_form(p, "AssumeRole", &form);
	if (!rc)
		rc = sts_call(p, form, src, k, expires, err);
	OPENSSL_cleanse(src, sizeof(*src));
	free(src);
	free(form);
	return rc;
}

static int from_process(struct prov *p, struct aws_keys *k, int64_t *expires,
			char **err)
{
	char *out = malloc(ANSWER_MAX + 1);
	size_t n = 0;
	int status, rc;

	if (!out)
		return -ENOMEM;
	rc = run_capture(p->command, p->command_dir, PROCESS_TIMEOUT_MS, out,
			 ANSWER_MAX + 1, &n, &status);
	if (rc == -ETIMEDOUT)
		err_set(err, "%s: no answer after %d s; killed it", p->desc,
			PROCESS_TIMEOUT_MS / 1000);
	else if (rc)
		err_set(err, "%s: cannot run it: %s", p->desc, strerror(-rc));
	else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		err_set(err, "%s: exited with %s %d", p->desc,
			WIFEXITED(status) ? "status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status)
					  : WTERMSIG(status));
		rc = -EACCES;
	} else {
		rc = aws_json_parse(out, n, true, k, expires, p->desc, err);
	}
	if (rc == -ETIMEDOUT)
		rc = -EIO;
	OPENSSL_cleanse(out, n);
	free(out);
	return rc;
}

static int from_container(struct prov *p, struct aws_keys *k, int64_t *expires,
			  char **err)
{
	struct fetch_req req = {.url = p->url};
	struct curl_slist *h = NULL;
	char *tok = NULL, *body = NULL, *why = NULL, *line = NULL;
	size_t tl = 0, len = 0;
	int rc = 0;

	if (p->auth_file) {
		/* Read again each time: EKS Pod Identity rotates it. */
		rc = read_file_capped(p->auth_file, WEB_TOKEN_MAX, &tok, &tl,
				      &why);
		if (rc) {
			err_set(err, "%s: %s", p->desc, why);
			free(why);
			return rc;
		}
		tok[strcspn(tok, "\r\n")] = '\0';
	}
	if (tok || p->auth) {
		line = strdupf("Authorization: %s", tok ? tok : p->auth);
		h = line ? curl_slist_append(NULL, line) : NULL;
		if (!h)
			rc = -ENOMEM;
	}
	req.headers = h;
	if (!rc)
		rc = call(p, &req, &body, &len, "the credentials", err);
	if (!rc)
		rc = aws_json_parse(body, len, false, k, expires, p->desc, err);
	body_free(tok, tl);
	body_free(line, line ? strlen(line) : 0);
	curl_slist_free_all(h);
	body_free(body, len);
	return rc;
}

static int from_imds(struct prov *p, struct aws_keys *k, int64_t *expires,
		     char **err)
{
	struct fetch_req req = {0};
	struct curl_slist *h = NULL;
	char url[1024], line[256], role[256], *body = NULL;
	size_t len = 0, n;
	int rc;

	/* IMDSv2: a session token first.  IMDSv1 (a bare GET) is never
	 * tried: it is what SSRF attacks on EC2 read. */
	h = curl_slist_append(NULL, "X-aws-ec2-metadata-token-ttl-seconds: "
				    "21600");
	if (!h)
		return -ENOMEM;
	snprintf(url, sizeof(url), "%s/latest/api/token", p->url);
	req.url = url;
	req.headers = h;
	req.post = "";
	req.put = true;
	rc = call(p, &req, &body, &len, "PUT /latest/api/token", err);
	curl_slist_free_all(h);
	h = NULL;
	if (rc) {
		char *why = err ? *err : NULL;

		if (err)
			*err = NULL;
		err_set(err,
			"%s: %s; the metadata server did not give an IMDSv2 "
			"session token, and wharf does not fall back to "
			"IMDSv1: enable IMDSv2 on the instance (http-tokens "
			"optional or required, hop limit 2 in containers)",
			p->desc, why ? why : strerror(-rc));
		free(why);
		return rc == -EACCES ? -EACCES : rc;
	}
	n = strcspn(body, "\r\n");
	if (!n || n > 200 ||
	    snprintf(line, sizeof(line), "X-aws-ec2-metadata-token: %.*s",
		     (int)n, body) >= (int)sizeof(line)) {
		err_set(err, "%s: the IMDSv2 session token is not usable",
			p->desc);
		body_free(body, len);
		return -EIO;
	}
	body_free(body, len);
	body = NULL;
	h = curl_slist_append(NULL, line);
	OPENSSL_cleanse(line, sizeof(line));
	if (!h)
		return -ENOMEM;
	snprintf(url, sizeof(url),
		 "%s/latest/meta-data/iam/security-credentials/", p->url);
	memset(&req, 0, sizeof(req));
	req.url = url;
	req.headers = h;
	rc = call(p, &req, &body, &len, "the role's name", err);
	if (!rc) {
		n = strcspn(body, "\r\n");
		if (!n || n >= sizeof(role) || strchr(body, '/')) {
			err_set(err,
				"%s: no usable role name (is an instance "
				"profile attached?)",
				p->desc);
			rc = -EIO;
		} else {
			memcpy(role, body, n);
			role[n] = '\0';
		}
		body_free(body, len);
		body = NULL;
	}
	if (!rc) {
		snprintf(url, sizeof(url),
			 "%s/latest/meta-data/iam/security-credentials/%s",
			 p->url, role);
		rc = call(p, &req, &body, &len, "the role's credentials", err);
	}
	if (!rc)
		rc = aws_json_parse(body, len, false, k, expires, p->desc, err);
	body_free(body, len);
	curl_slist_free_all(h);
	return rc;
}

static int prov_fetch(struct prov *p, struct aws_keys *k, int64_t *expires,
		      char **err)
{
	*expires = 0;
	switch (p->kind) {
	case P_STATIC:
		memcpy(k, &p->keys, sizeof(*k));
		return 0;
	case P_WEB:
		return from_web_identity(p, k, expires, err);
	case P_ROLE:
		return from_role(p, k, expires, err);
	case P_PROCESS:
		return from_process(p, k, expires, err);
	case P_CONTAINER:
		return from_container(p, k, expires, err);
	case P_IMDS:
		return from_imds(p, k, expires, err);
	}
	return -EINVAL;
}

static int chain_fetch(void *arg, void *blob, int64_t *expires, char **err)
{
	return prov_fetch(arg, blob, expires, err);
}

/* ---- Finding the provider ---- */

static struct prov *prov_new(enum kind kind, struct fetch_engine *fe)
{
	struct prov *p = calloc(1, sizeof(*p));

	if (p) {
		p->kind = kind;
		p->fe = fe;
	}
	return p;
}

static int static_keys(struct prov *p, const char *id, const char *secret,
		       const char *token, char **err)
{
	int rc = key_set(p->keys.access_key, AWS_KEY_MAX, id, strlen(id),
			 "the access key id", true, p->desc, err);

	if (!rc)
		rc = key_set(p->keys.secret_key, AWS_KEY_MAX, secret,
			     strlen(secret), "the secret key", false, p->desc,
			     err);
	if (!rc && token && *token)
		rc = key_set(p->keys.token, AWS_TOKEN_MAX, token, strlen(token),
			     "the session token", true, p->desc, err);
	return rc;
}

/* STS's URL, Host and path for p, and the role's session name. */
static int sts_setup(struct prov *p, const char *region, const char *session,
		     char **err)
{
	const char *url = env("AWS_ENDPOINT_URL_STS");
	const char *auth, *path;

	if (!url)
		url = env("AWS_ENDPOINT_URL");
	p->sts_url = url ? strdup(url)
			 : strdupf("https://sts.%s.amazonaws.com/", region);
	p->region = strdup(region);
	p->session = session && *session
			 ? strdup(session)
			 : strdupf("wharf-%lld", (long long)time(NULL));
	if (!p->sts_url || !p->region || !p->session)
		return -ENOMEM;
	auth = strstr(p->sts_url, "://");
	if (!auth || (strncasecmp(p->sts_url, "http://", 7) &&
		      strncasecmp(p->sts_url, "https://", 8))) {
		err_set(err, "%s: STS endpoint %s is not an http(s) URL",
			p->desc, p->sts_url);
		return -EINVAL;
	}
	auth += 3;
	path = auth + strcspn(auth, "/?#");
	if (*path && *path != '/') {
		err_set(err, "%s: STS endpoint %s: expected http[s]://HOST[/]",
			p->desc, p->sts_url);
		return -EINVAL;
	}
	p->sts_host = strndup(auth, (size_t)(path - auth));
	p->sts_path = strdup(*path ? path : "/");
	return p->sts_host && p->sts_path ? 0 : -ENOMEM;
}

static int web_identity(struct prov *p, const char *role, const char *file,
			const char *session, const char *region, char **err)
{
	/* Absolute now: the daemon renews from "/" after it detaches. */
	p->role_arn = strdup(role);
	p->token_file = path_absolute(file);
	if (!p->role_arn || !p->token_file)
		return -ENOMEM;
	return sts_setup(p, region, session, err);
}

static int container_setup(struct prov *p, char **err);
static int imds_setup(struct prov *p);

static int profile_prov(const char *name, const char *region,
			struct fetch_engine *fe, int depth, bool must,
			struct prov **out, char **err);

/* A role profile: role_arn with source_profile, credential_source or
 * web_identity_token_file. */
static int role_prov(struct prov *p, struct profile *pr, const char *region,
		     int depth, char **err)
{
	const char *cs = pr->v[K_CREDENTIAL_SOURCE];
	int rc;

	if (pr->v[K_WEB_TOKEN_FILE]) {
		p->kind = P_WEB;
		return web_identity(p, pr->v[K_ROLE_ARN],
				    pr->v[K_WEB_TOKEN_FILE],
				    pr->v[K_SESSION_NAME], region, err);
	}
	p->role_arn = strdup(pr->v[K_ROLE_ARN]);
	if (!p->role_arn)
		return -ENOMEM;
	if (pr->v[K_EXTERNAL_ID] &&
	    !(p->external_id = strdup(pr->v[K_EXTERNAL_ID])))
		return -ENOMEM;
	if (pr->v[K_DURATION])
		p->duration_s = (unsigned)strtoul(pr->v[K_DURATION], NULL, 10);
	rc = sts_setup(p, region, pr->v[K_SESSION_NAME], err);
	if (rc)
		return rc;
	if (pr->v[K_SOURCE_PROFILE])
		return profile_prov(pr->v[K_SOURCE_PROFILE], region, p->fe,
				    depth + 1, true, &p->src, err);
	if (cs && !strcmp(cs, "Environment") && env("AWS_ACCESS_KEY_ID") &&
	    env("AWS_SECRET_ACCESS_KEY")) {
		p->src = prov_new(P_STATIC, p->fe);
		if (!p->src)
			return -ENOMEM;
		snprintf(p->src->desc, sizeof(p->src->desc),
			 "the environment (AWS_ACCESS_KEY_ID)");
		return static_keys(p->src, env("AWS_ACCESS_KEY_ID"),
				   env("AWS_SECRET_ACCESS_KEY"),
				   env("AWS_SESSION_TOKEN"), err);
	}
	if (cs && (!strcmp(cs, "EcsContainer") ||
		   !strcmp(cs, "Ec2InstanceMetadata"))) {
		bool ecs = !strcmp(cs, "EcsContainer");

		p->src = prov_new(ecs ? P_CONTAINER : P_IMDS, p->fe);
		if (!p->src)
			return -ENOMEM;
		return ecs ? container_setup(p->src, err) : imds_setup(p->src);
	}
	err_set(err,
		"%s: role_arn needs source_profile, web_identity_token_file "
		"or credential_source (Environment, EcsContainer, "
		"Ec2InstanceMetadata)%s%s",
		pr->where, cs ? "; credential_source is " : "", cs ? cs : "");
	return -EINVAL;
}

/*
 * The provider profile `name` stands for.  @return 0 with *out, or with
 * *out NULL when the profile is not there (or has no credentials) and
 * need not be (!must); -errno with *err.
 */
static int profile_prov(const char *name, const char *region,
			struct fetch_engine *fe, int depth, bool must,
			struct prov **out, char **err)
{
	char *cred = credentials_path(), *conf = config_path();
	struct profile pr = {0};
	struct prov *p = NULL;
	int rc = 0;

	*out = NULL;
	if (depth > PROFILE_DEPTH_MAX) {
		err_set(err,
			"profile [%s]: source_profile goes %d deep (a "
			"loop?)",
			name, depth);
		rc = -ELOOP;
		goto out;
	}
	if (cred)
		rc = ini_read(cred, name, &pr, NULL);
	if ((!rc || rc == -ENOENT) && conf)
		rc = ini_read(conf, name, &pr, NULL);
	if (rc == -ENOENT)
		rc = 0;
	if (rc) {
		err_set(err, "reading profile [%s] of %s and %s: %s", name,
			cred ? cred : "(no HOME)", conf ? conf : "(no HOME)",
			strerror(-rc));
		goto out;
	}
	if (!pr.where || (!pr.v[K_ROLE_ARN] && !pr.v[K_PROCESS] &&
			  !pr.v[K_ACCESS] && !pr.v[K_SECRET])) {
		if (must)
			err_set(err,
				"no AWS credentials in profile [%s]: %s in "
				"%s or %s",
				name,
				pr.where ? "neither aws_access_key_id, "
					   "role_arn nor credential_process"
					 : "no such profile",
				cred ? cred : "(no HOME)",
				conf ? conf : "(no HOME)");
		rc = must ? -ENOENT : 0;
		goto out;
	}
	rc = -ENOMEM;
	p = prov_new(P_STATIC, fe);
	if (!p)
		goto out;
	if (pr.v[K_ROLE_ARN]) {
		p->kind = P_ROLE;
		snprintf(p->desc, sizeof(p->desc), "profile %s: role %s",
			 pr.where, pr.v[K_ROLE_ARN]);
		rc = role_prov(p, &pr, region, depth, err);
	} else if (pr.v[K_PROCESS]) {
		p->kind = P_PROCESS;
		/* Not the command: it may carry a secret. */
		snprintf(p->desc, sizeof(p->desc),
			 "profile %s: credential_process", pr.where);
		/* It runs where the mount started, also after the daemon
		 * detached to "/". */
		p->command = strdup(pr.v[K_PROCESS]);
		p->command_dir = getcwd(NULL, 0);
		rc = p->command && p->command_dir ? 0 : -ENOMEM;
	} else {
		snprintf(p->desc, sizeof(p->desc), "profile %s", pr.where);
		if (!pr.v[K_ACCESS] || !pr.v[K_SECRET]) {
			err_set(err,
				"%s: lacks aws_access_key_id or "
				"aws_secret_access_key",
				p->desc);
			rc = -EINVAL;
		} else {
			rc = static_keys(p, pr.v[K_ACCESS], pr.v[K_SECRET],
					 pr.v[K_TOKEN], err);
		}
	}
	if (!rc) {
		*out = p;
		p = NULL;
	}
out:
	prov_free(p);
	profile_clear(&pr);
	free(cred);
	free(conf);
	return rc;
}

/* Plain http only to the link-local addresses ECS and EKS use, or this
 * machine: the token would cross a network in clear otherwise. */
static bool container_host_ok(const char *url)
{
	static const char *const ok[] = {
	    "http://127.",	     "http://localhost:",
	    "http://localhost/",     "http://169.254.170.2",
	    "http://169.254.170.23", "http://[::1]",
	    "http://[fd00:ec2::23]"};

	if (!strncasecmp(url, "https://", 8))
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		if (!strncasecmp(url, ok[i], strlen(ok[i])))
			return true;
	return false;
}

static int container_setup(struct prov *p, char **err)
{
	const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");

	if (!rel && !full) {
		err_set(err, "credential_source EcsContainer: neither "
			     "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI nor "
			     "_FULL_URI is set");
		return -ENOENT;
	}
	p->url =
	    rel ? strdupf("%s%s%s", CONTAINER_HOST, *rel == '/' ? "" : "/", rel)
		: strdup(full);
	if (!p->url)
		return -ENOMEM;
	snprintf(p->desc, sizeof(p->desc), "container credentials endpoint %s",
		 p->url);
	url_scrub(p->desc, strlen(p->desc));
	if (!container_host_ok(p->url)) {
		err_set(err,
			"%s: plain http is only for 127.0.0.1, localhost, "
			"169.254.170.2 and 169.254.170.23 (the token would "
			"cross the network in clear); use https",
			p->desc);
		return -EINVAL;
	}
	if (env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))
		p->auth_file = path_absolute(
		    env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
	else if (env("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
		p->auth = strdup(env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
	if (!p->auth_file && !p->auth &&
	    (env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") ||
	     env("AWS_CONTAINER_AUTHORIZATION_TOKEN")))
		return -ENOMEM;
	if (p->auth && strpbrk(p->auth, "\r\n")) {
		err_set(err,
			"%s: AWS_CONTAINER_AUTHORIZATION_TOKEN has a line "
			"break",
			p->desc);
		return -EINVAL;
	}
	return 0;
}

static int imds_setup(struct prov *p)
{
	const char *e = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	size_t n;

	p->url = strdup(e ? e : IMDS_DEFAULT);
	if (!p->url)
		return -ENOMEM;
	n = strlen(p->url);
	while (n && p->url[n - 1] == '/')
		p->url[--n] = '\0';
	snprintf(p->desc, sizeof(p->desc), "IMDSv2 at %s", p->url);
	return 0;
}

/* Off EC2 the metadata address answers nothing and each try waits for
 * the connect timeout: it is only asked when told, or when the firmware
 * says this is an EC2 machine (as the SDKs' "is this EC2" checks). */
static bool on_ec2(void)
{
	static const char *const files[] = {"/sys/class/dmi/id/board_vendor",
					    "/sys/class/dmi/id/sys_vendor",
					    "/sys/hypervisor/uuid"};

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char line[64] = "";
		FILE *f = fopen(files[i], "re");

		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
		if (!strncmp(line, "Amazon EC2", 10) ||
		    !strncasecmp(line, "ec2", 3))
			return true;
	}
	return false;
}

/* Says where the chain looked. */
static void nothing_found(char **err)
{
	char *cred = credentials_path(), *conf = config_path();

	err_set(err,
		"no AWS credentials found: tried AWS_ACCESS_KEY_ID, "
		"AWS_WEB_IDENTITY_TOKEN_FILE, profile [default] of %s and %s, "
		"AWS_CONTAINER_CREDENTIALS_*_URI and IMDS (not an EC2 "
		"machine, or AWS_EC2_METADATA_DISABLED)",
		cred ? cred : "~/.aws/credentials (no HOME)",
		conf ? conf : "~/.aws/config");
	free(cred);
	free(conf);
}

/* The first provider of the chain that is configured. */
static int find(const char *profile, const char *region,
		struct fetch_engine *fe, struct prov **out, char **err)
{
	const char *role = env("AWS_ROLE_ARN");
	const char *web = env("AWS_WEB_IDENTITY_TOKEN_FILE");
	const char *imds_off = env("AWS_EC2_METADATA_DISABLED");
	bool named = profile && *profile;
	struct prov *p = NULL;
	int rc;

	*out = NULL;
	if (!named &&
	    (env("AWS_ACCESS_KEY_ID") || env("AWS_SECRET_ACCESS_KEY"))) {
		struct aws_creds c;

		/* aws_creds_load says which half is missing. */
		rc = aws_creds_load(NULL, &c, err);
		if (rc)
			return rc;
		p = prov_new(P_STATIC, fe);
		if (p) {
			snprintf(p->desc, sizeof(p->desc),
				 "the environment (AWS_ACCESS_KEY_ID)");
			rc = static_keys(p, c.access_key, c.secret_key,
					 c.session_token, err);
		}
		aws_creds_clear(&c);
		goto out;
	}
	if (!named && (role || web)) {
		if (!role || !web) {
			err_set(err, "%s is set but %s is not",
				role ? "AWS_ROLE_ARN"
				     : "AWS_WEB_IDENTITY_TOKEN_FILE",
				role ? "AWS_WEB_IDENTITY_TOKEN_FILE"
				     : "AWS_ROLE_ARN");
			return -EINVAL;
		}
		p = prov_new(P_WEB, fe);
		if (p) {
			snprintf(p->desc, sizeof(p->desc),
				 "web identity (role %s, token file %s)", role,
				 web);
			rc = web_identity(p, role, web,
					  env("AWS_ROLE_SESSION_NAME"), region,
					  err);
		}
		goto out;
	}
	if (!named && env("AWS_PROFILE")) {
		profile = env("AWS_PROFILE");
		named = true;
	}
	rc = profile_prov(named ? profile : "default", region, fe, 0, named,
			  out, err);
	if (rc || *out || named)
		return rc;
	if (env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") ||
	    env("AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
		p = prov_new(P_CONTAINER, fe);
		rc = p ? container_setup(p, err) : -ENOMEM;
		goto out;
	}
	if ((!imds_off || strcasecmp(imds_off, "true")) &&
	    (env("AWS_EC2_METADATA_SERVICE_ENDPOINT") || on_ec2())) {
		p = prov_new(P_IMDS, fe);
		rc = p ? imds_setup(p) : -ENOMEM;
		goto out;
	}
	nothing_found(err);
	return -ENOENT;
out:
	if (!p)
		return -ENOMEM;
	if (rc) {
		prov_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

int aws_chain_open(const char *profile, const char *region,
		   struct fetch_engine *fe, struct aws_chain **out, char **err)
{
	struct aws_chain *c = calloc(1, sizeof(*c));
	char what[700];
	int rc;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	rc = find(profile, region, fe, &c->p, err);
	if (!rc) {
		snprintf(what, sizeof(what), "AWS credentials: %s", c->p->desc);
		rc = creds_renew_new(sizeof(struct aws_keys), chain_fetch, c->p,
				     what, 0, &c->r, err);
	}
	if (rc) {
		aws_chain_free(c);
		return rc;
	}
	log_info("%s", what);
	*out = c;
	return 0;
}

void aws_chain_free(struct aws_chain *c)
{
	if (!c)
		return;
	creds_renew_free(c->r);
	prov_free(c->p);
	free(c);
}

void aws_chain_get(struct aws_chain *c, struct aws_keys *k, unsigned *serial)
{
	creds_renew_get(c->r, k, serial);
}

bool aws_chain_refused(struct aws_chain *c, unsigned serial)
{
	return creds_renew_refused(c->r, serial);
}

const char *aws_chain_describe(const struct aws_chain *c)
{
	return c->p->desc;
}
