/* creds_aws: AWS credentials, region and endpoint (see creds_aws.h): the
 * shared files, the chain that finds a provider, static keys and
 * credential processes; STS and the machine's endpoints are providers of
 * their own (creds_aws_i.h). */
#include "config.h"

#include "creds_aws.h"
#include "creds_aws_i.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "child.h"
#include "creds_renew.h"
#include "log.h"
#include "text.h"

const char *aws_region(const char *opt)
{
	if (opt && *opt)
		return opt;
	if (aws_env("AWS_REGION"))
		return aws_env("AWS_REGION");
	if (aws_env("AWS_DEFAULT_REGION"))
		return aws_env("AWS_DEFAULT_REGION");
	return "us-east-1";
}

const char *aws_endpoint(const char *opt)
{
	if (opt && *opt)
		return opt;
	if (aws_env("AWS_ENDPOINT_URL_S3"))
		return aws_env("AWS_ENDPOINT_URL_S3");
	return aws_env("AWS_ENDPOINT_URL");
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
	if (aws_env("AWS_SHARED_CREDENTIALS_FILE"))
		return strdup(aws_env("AWS_SHARED_CREDENTIALS_FILE"));
	return aws_env("HOME") ? strdupf("%s/.aws/credentials", aws_env("HOME"))
			       : NULL;
}

static char *config_path(void)
{
	if (aws_env("AWS_CONFIG_FILE"))
		return strdup(aws_env("AWS_CONFIG_FILE"));
	return aws_env("HOME") ? strdupf("%s/.aws/config", aws_env("HOME"))
			       : NULL;
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
		const char *id = aws_env("AWS_ACCESS_KEY_ID");
		const char *secret = aws_env("AWS_SECRET_ACCESS_KEY");

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
			if (!rc && aws_env("AWS_SESSION_TOKEN"))
				rc = set(&out->session_token,
					 aws_env("AWS_SESSION_TOKEN"));
			if (!rc)
				rc = set(&out->origin, "the environment");
			if (rc)
				aws_creds_clear(out);
			return rc;
		}
		profile = aws_env("AWS_PROFILE");
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

/* ---- The providers ---- */

#define PROCESS_TIMEOUT_MS 60000
#define PROFILE_DEPTH_MAX 4 /* source_profile hops */

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

static int prov_fetch(struct prov *p, struct aws_keys *k, int64_t *expires,
		      char **err);

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

static int from_role(struct prov *p, struct aws_keys *k, int64_t *expires,
		     char **err)
{
	struct aws_keys *src = calloc(1, sizeof(*src));
	int64_t src_exp;
	int rc;

	if (!src)
		return -ENOMEM;
	rc = prov_fetch(p->src, src, &src_exp, err);
	if (!rc)
		rc = aws_assume_role(p, src, k, expires, err);
	OPENSSL_cleanse(src, sizeof(*src));
	free(src);
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
		return aws_from_web_identity(p, k, expires, err);
	case P_ROLE:
		return from_role(p, k, expires, err);
	case P_PROCESS:
		return from_process(p, k, expires, err);
	case P_CONTAINER:
		return aws_from_container(p, k, expires, err);
	case P_IMDS:
		return aws_from_imds(p, k, expires, err);
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
	int rc = aws_key_set(p->keys.access_key, AWS_KEY_MAX, id, strlen(id),
			     "the access key id", true, p->desc, err);

	if (!rc)
		rc = aws_key_set(p->keys.secret_key, AWS_KEY_MAX, secret,
				 strlen(secret), "the secret key", false,
				 p->desc, err);
	if (!rc && token && *token)
		rc = aws_key_set(p->keys.token, AWS_TOKEN_MAX, token,
				 strlen(token), "the session token", true,
				 p->desc, err);
	return rc;
}

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
		return aws_web_identity(p, pr->v[K_ROLE_ARN],
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
	rc = aws_sts_setup(p, region, pr->v[K_SESSION_NAME], err);
	if (rc)
		return rc;
	if (pr->v[K_SOURCE_PROFILE])
		return profile_prov(pr->v[K_SOURCE_PROFILE], region, p->fe,
				    depth + 1, true, &p->src, err);
	if (cs && !strcmp(cs, "Environment") && aws_env("AWS_ACCESS_KEY_ID") &&
	    aws_env("AWS_SECRET_ACCESS_KEY")) {
		p->src = prov_new(P_STATIC, p->fe);
		if (!p->src)
			return -ENOMEM;
		snprintf(p->src->desc, sizeof(p->src->desc),
			 "the environment (AWS_ACCESS_KEY_ID)");
		return static_keys(p->src, aws_env("AWS_ACCESS_KEY_ID"),
				   aws_env("AWS_SECRET_ACCESS_KEY"),
				   aws_env("AWS_SESSION_TOKEN"), err);
	}
	if (cs && (!strcmp(cs, "EcsContainer") ||
		   !strcmp(cs, "Ec2InstanceMetadata"))) {
		bool ecs = !strcmp(cs, "EcsContainer");

		p->src = prov_new(ecs ? P_CONTAINER : P_IMDS, p->fe);
		if (!p->src)
			return -ENOMEM;
		return ecs ? aws_container_setup(p->src, err)
			   : aws_imds_setup(p->src, err);
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
	const char *role = aws_env("AWS_ROLE_ARN");
	const char *web = aws_env("AWS_WEB_IDENTITY_TOKEN_FILE");
	const char *imds_off = aws_env("AWS_EC2_METADATA_DISABLED");
	bool named = profile && *profile;
	struct prov *p = NULL;
	int rc;

	*out = NULL;
	if (!named && (aws_env("AWS_ACCESS_KEY_ID") ||
		       aws_env("AWS_SECRET_ACCESS_KEY"))) {
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
			rc = aws_web_identity(p, role, web,
					      aws_env("AWS_ROLE_SESSION_NAME"),
					      region, err);
		}
		goto out;
	}
	if (!named && aws_env("AWS_PROFILE")) {
		profile = aws_env("AWS_PROFILE");
		named = true;
	}
	rc = profile_prov(named ? profile : "default", region, fe, 0, named,
			  out, err);
	if (rc || *out || named)
		return rc;
	if (aws_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") ||
	    aws_env("AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
		p = prov_new(P_CONTAINER, fe);
		rc = p ? aws_container_setup(p, err) : -ENOMEM;
		goto out;
	}
	if ((!imds_off || strcasecmp(imds_off, "true")) &&
	    (aws_env("AWS_EC2_METADATA_SERVICE_ENDPOINT") || aws_on_ec2())) {
		p = prov_new(P_IMDS, fe);
		rc = p ? aws_imds_setup(p, err) : -ENOMEM;
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
