/* creds_aws_sts: the AWS providers that ask STS, web identity
 * (AssumeRoleWithWebIdentity) and a role (AssumeRole), and where STS is:
 * the chain (creds_aws.c) picks them, this file asks. */
#include "config.h"

#include "creds_aws_i.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "creds_renew.h"
#include "fileio.h"
#include "sigv4.h"
#include "text.h"

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
	rc = aws_call(p->fe, p->desc, &req, &body, &len, "STS", err);
	if (!rc)
		rc = aws_sts_parse(body, len, k, expires, p->desc, err);
out:
	OPENSSL_cleanse(line, sizeof(line));
	free(so);
	curl_slist_free_all(h);
	aws_body_free(body, len);
	return rc;
}

static int role_form(struct prov *p, const char *action, char **form)
{
	char dur[16];
	int rc;

	snprintf(dur, sizeof(dur), "%u", p->duration_s);
	rc = creds_form_add(form, "Action", action);
	if (!rc && p->duration_s)
		rc = creds_form_add(form, "DurationSeconds", dur);
	if (!rc && p->external_id)
		rc = creds_form_add(form, "ExternalId", p->external_id);
	if (!rc)
		rc = creds_form_add(form, "RoleArn", p->role_arn);
	if (!rc)
		rc = creds_form_add(form, "RoleSessionName", p->session);
	if (!rc)
		rc = creds_form_add(form, "Version", STS_VERSION);
	return rc;
}

int aws_from_web_identity(struct prov *p, struct aws_keys *k, int64_t *expires,
			  char **err)
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
		rc = creds_form_add(&form, "WebIdentityToken", tok);
	if (!rc)
		rc = sts_call(p, form, NULL, k, expires, err);
	aws_body_free(tok, len);
	if (form)
		OPENSSL_cleanse(form, strlen(form));
	free(form);
	return rc;
}

int aws_assume_role(struct prov *p, const struct aws_keys *src,
		    struct aws_keys *k, int64_t *expires, char **err)
{
	char *form = NULL;
	int rc = role_form(p, "AssumeRole", &form);

	if (!rc)
		rc = sts_call(p, form, src, k, expires, err);
	free(form);
	return rc;
}

/* STS's URL, Host and path for p, and the role's session name. */
int aws_sts_setup(struct prov *p, const char *region, const char *session,
		  char **err)
{
	const char *url = aws_env("AWS_ENDPOINT_URL_STS");
	const char *auth, *path;
	char what[600];
	int rc;

	if (!url)
		url = aws_env("AWS_ENDPOINT_URL");
	p->sts_url = url ? strdup(url)
			 : strdupf("https://sts.%s.amazonaws.com/", region);
	p->region = strdup(region);
	p->session = session && *session
			 ? strdup(session)
			 : strdupf("wharf-%lld", (long long)time(NULL));
	if (!p->sts_url || !p->region || !p->session)
		return -ENOMEM;
	/* A web identity token, or a request signed with the source's
	 * keys, goes there. */
	snprintf(what, sizeof(what), "%.500s: STS endpoint%s", p->desc,
		 !url				   ? ""
		 : aws_env("AWS_ENDPOINT_URL_STS") ? " (AWS_ENDPOINT_URL_STS)"
						   : " (AWS_ENDPOINT_URL)");
	rc = fetch_credential_url(p->sts_url, FETCH_CRED_TOKEN, what, err);
	if (rc)
		return rc;
	/* curl also reads "http:/host"; the Host we sign needs "://". */
	auth = strstr(p->sts_url, "://");
	auth = auth ? auth + 3 : p->sts_url;
	path = auth + strcspn(auth, "/?#");
	if (auth == p->sts_url || (*path && *path != '/')) {
		err_set(err, "%s: STS endpoint %s: expected http[s]://HOST[/]",
			p->desc, p->sts_url);
		return -EINVAL;
	}
	p->sts_host = strndup(auth, (size_t)(path - auth));
	p->sts_path = strdup(*path ? path : "/");
	return p->sts_host && p->sts_path ? 0 : -ENOMEM;
}

int aws_web_identity(struct prov *p, const char *role, const char *file,
		     const char *session, const char *region, char **err)
{
	/* Absolute now: the daemon renews from "/" after it detaches. */
	p->role_arn = strdup(role);
	p->token_file = path_absolute(file);
	if (!p->role_arn || !p->token_file)
		return -ENOMEM;
	return aws_sts_setup(p, region, session, err);
}
