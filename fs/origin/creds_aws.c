/* creds_aws: AWS credentials, region and endpoint (see creds_aws.h). */
#include "config.h"

#include "creds_aws.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Reads [profile] of an INI file: "[name]" or "[profile name]" sections,
 * "key = value" lines, '#' and ';' comments. */
static int from_file(const char *path, const char *profile, struct aws_creds *c,
		     char **err)
{
	FILE *f = fopen(path, "r");
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
			char *end = strchr(s, ']'), *name;

			if (!end) {
				err_set(err, "%s:%u: a section without ']'",
					path, lineno);
				rc = -EINVAL;
				break;
			}
			*end = '\0';
			name = trim(s + 1);
			if (!strncmp(name, "profile ", 8))
				name = trim(name + 8);
			in = !strcmp(name, profile);
			seen |= in;
			continue;
		}
		if (!in)
			continue;
		eq = strchr(s, '=');
		if (!eq)
			continue;
		*eq = '\0';
		s = trim(s);
		if (!strcmp(s, "aws_access_key_id"))
			rc = set(&c->access_key, trim(eq + 1));
		else if (!strcmp(s, "aws_secret_access_key"))
			rc = set(&c->secret_key, trim(eq + 1));
		else if (!strcmp(s, "aws_session_token"))
			rc = set(&c->session_token, trim(eq + 1));
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	if (rc)
		return rc;
	if (!seen) {
		err_set(err, "no AWS credentials: no profile [%s] in %s",
			profile, path);
		return -ENOENT;
	}
	if (!c->access_key || !c->secret_key || !*c->access_key ||
	    !*c->secret_key) {
		err_set(err,
			"%s: profile [%s] lacks aws_access_key_id or "
			"aws_secret_access_key",
			path, profile);
		return -EINVAL;
	}
	c->origin = strdupf("%s [%s]", path, profile);
	return 0;
}

int aws_creds_load(const char *profile, struct aws_creds *out, char **err)
{
	const char *file = env("AWS_SHARED_CREDENTIALS_FILE");
	char *home_file = NULL;
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
	if (!file) {
		const char *home = env("HOME");

		if (!home) {
			err_set(err, "no AWS credentials: neither "
				     "AWS_ACCESS_KEY_ID nor HOME is set");
			return -ENOENT;
		}
		home_file = strdupf("%s/.aws/credentials", home);
		file = home_file;
	}
	rc = from_file(file, profile, out, err);
	if (rc)
		aws_creds_clear(out);
	free(home_file);
	return rc;
}
