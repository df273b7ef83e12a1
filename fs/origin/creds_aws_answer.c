/* creds_aws_answer: asking an AWS credentials endpoint, and reading what
 * STS, the container endpoint, IMDS and credential processes answer
 * (creds_aws_answer.h): what every AWS provider shares, at the bottom of
 * the AWS credential files (creds_aws_i.h). */
#include "config.h"

#include "creds_aws_answer.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "fetch.h"
#include "json.h"
#include "text.h"
#include "xml.h"

int aws_key_set(char *dst, size_t cap, const char *v, size_t n,
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
		rc = aws_key_set(d->k->access_key, AWS_KEY_MAX, x->text,
				 x->tlen, "AccessKeyId", true, d->what, d->err);
		d->got |= 1;
	} else if (!strcmp(el, "SecretAccessKey")) {
		rc =
		    aws_key_set(d->k->secret_key, AWS_KEY_MAX, x->text, x->tlen,
				"SecretAccessKey", false, d->what, d->err);
		d->got |= 2;
	} else if (!strcmp(el, "SessionToken")) {
		rc = aws_key_set(d->k->token, AWS_TOKEN_MAX, x->text, x->tlen,
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
			rc = aws_key_set(k->access_key, AWS_KEY_MAX, val, n,
					 key, true, what, err);
			got |= 1;
		} else if (!strcmp(key, "SecretAccessKey")) {
			rc = aws_key_set(k->secret_key, AWS_KEY_MAX, val, n,
					 key, false, what, err);
			got |= 2;
		} else if (!strcmp(key, process ? "SessionToken" : "Token")) {
			rc = aws_key_set(k->token, AWS_TOKEN_MAX, val, n, key,
					 true, what, err);
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

/* ---- Asking ---- */

int aws_call(struct fetch_engine *fe, const char *what, struct fetch_req *req,
	     char **body, size_t *len, const char *step, char **err)
{
	struct fetch_res res;
	int rc;

	req->grow = true;
	req->cap = ANSWER_MAX;
	rc = fetch_run(fe, req, &res);
	if (rc) {
		err_set(err, "%s: %s: %s", what, step, res.err);
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

void aws_body_free(char *body, size_t len)
{
	if (body)
		OPENSSL_cleanse(body, len);
	free(body);
}
