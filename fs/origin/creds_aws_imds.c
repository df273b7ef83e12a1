/* creds_aws_imds: the AWS providers of the machine the mount runs on,
 * the container credentials endpoint (ECS, EKS Pod Identity) and the
 * instance metadata service (IMDSv2): where they are, and asking them. */
#include "config.h"

#include "creds_aws_i.h"
#include "fileio.h"
#include "text.h"
#include "url.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

int aws_container_setup(struct prov *p, char **err)
{
	const char *rel = aws_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = aws_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	int rc;

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
	/* The authorization token goes there: plain http only to this
	 * machine or the link-local addresses ECS and EKS use. */
	rc = fetch_credential_url(p->url, FETCH_CRED_METADATA, p->desc, err);
	if (rc)
		return rc;
	if (aws_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))
		p->auth_file = path_absolute(
		    aws_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
	else if (aws_env("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
		p->auth = strdup(aws_env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
	if (!p->auth_file && !p->auth &&
	    (aws_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") ||
	     aws_env("AWS_CONTAINER_AUTHORIZATION_TOKEN")))
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

int aws_imds_setup(struct prov *p, char **err)
{
	const char *e = aws_env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	size_t n;

	p->url = strdup(e ? e : IMDS_DEFAULT);
	if (!p->url)
		return -ENOMEM;
	n = strlen(p->url);
	while (n && p->url[n - 1] == '/')
		p->url[--n] = '\0';
	snprintf(p->desc, sizeof(p->desc), "IMDSv2 at %s", p->url);
	url_scrub(p->desc, strlen(p->desc));
	/* The keys it answers sign every request: plain http only to this
	 * machine or IMDS's link-local addresses. */
	return fetch_credential_url(p->url, FETCH_CRED_METADATA, p->desc, err);
}

/* Off EC2 the metadata address answers nothing and each try waits for
 * the connect timeout: it is only asked when told, or when the firmware
 * says this is an EC2 machine (as the SDKs' "is this EC2" checks). */
bool aws_on_ec2(void)
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

int aws_from_container(struct prov *p, struct aws_keys *k, int64_t *expires,
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
		rc = aws_call(p->fe, p->desc, &req, &body, &len,
			      "the credentials", err);
	if (!rc)
		rc = aws_json_parse(body, len, false, k, expires, p->desc, err);
	aws_body_free(tok, tl);
	aws_body_free(line, line ? strlen(line) : 0);
	curl_slist_free_all(h);
	aws_body_free(body, len);
	return rc;
}

int aws_from_imds(struct prov *p, struct aws_keys *k, int64_t *expires,
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
	rc = aws_call(p->fe, p->desc, &req, &body, &len,
		      "PUT /latest/api/token", err);
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
		aws_body_free(body, len);
		return -EIO;
	}
	aws_body_free(body, len);
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
	rc =
	    aws_call(p->fe, p->desc, &req, &body, &len, "the role's name", err);
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
		aws_body_free(body, len);
		body = NULL;
	}
	if (!rc) {
		snprintf(url, sizeof(url),
			 "%s/latest/meta-data/iam/security-credentials/%s",
			 p->url, role);
		rc = aws_call(p->fe, p->desc, &req, &body, &len,
			      "the role's credentials", err);
	}
	if (!rc)
		rc = aws_json_parse(body, len, false, k, expires, p->desc, err);
	aws_body_free(body, len);
	curl_slist_free_all(h);
	return rc;
}
