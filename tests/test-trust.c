/*
 * Where credentials go (fs/net/fetch_trust.c): a URL that a token, key or
 * assertion goes to is judged as libcurl parses it, never by its prefix,
 * and a source's credentials go to a plain http:// origin only on this
 * machine, or when the configuration opts in (--insecure-credentials).
 * Every refusal is checked against a tap (fixture-creds.h) where the URL
 * leads: nothing reaches it.  test-creds checks the same through a mount.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "creds_aws.h"
#include "creds_azure.h"
#include "creds_gcp.h"
#include "fetch.h"
#include "fixture-ck.h"
#include "fixture-creds.h"
#include "fixture.h"
#include "origins.h"
#include "source.h"

static char *work;
static struct fetch_engine *fe;

/* work/NAME in buf. */
static const char *at(const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", work, name);
	return buf;
}

static void setup(void)
{
	struct fetch_config cfg;

	work = fx_tmpdir("trust");
	fxc_clean_env(work);
	fetch_config_default(&cfg);
	cfg.retries = 0;
	cfg.connect_timeout_ms = 2000;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
}

static void teardown(void)
{
	fetch_engine_free(fe);
	fe = NULL;
	fx_rmtree(work);
	free(work);
	work = NULL;
}

/* The rules themselves: parsed as curl parses, addresses compared. */
START_TEST(credential_url_rules)
{
	static const struct {
		const char *url;
		int token, metadata; /* 1: accepted as a token endpoint,
				      * as a metadata service */
	} cases[] = {
	    {"https://sts.example.com/", 1, 1},
	    {"HTTPS://login.example/tenant/oauth2/v2.0/token", 1, 1},
	    {"http://127.0.0.1:8080/creds", 1, 1},
	    {"http://127.3.4.5/creds", 1, 1},
	    {"http://2130706433/creds", 1, 1}, /* 127.0.0.1, as a number */
	    {"http://[::1]:9/creds", 1, 1},
	    {"http://localhost:9/creds", 1, 1},
	    {"http://LocalHost/creds", 1, 1},
	    {"http://s3.localhost:9/", 1, 1},
	    {"http://169.254.169.254/latest", 0, 1},
	    {"http://169.254.170.2/v2/credentials", 0, 1},
	    {"http://169.254.170.23/v1/credentials", 0, 1},
	    {"http://[fd00:ec2::254]/latest", 0, 1},
	    {"http://[FD00:EC2:0::23]/v1/credentials", 0, 1},
	    {"http://169.254.170.3/creds", 0, 0},
	    {"http://169.254.170.230/creds", 0, 0},
	    {"http://[fd00:ec2::2]/creds", 0, 0},
	    {"http://[::ffff:127.0.0.1]/creds", 0, 0},
	    {"http://10.1.2.3/creds", 0, 0},
	    {"http://127.evil.example/creds", 0, 0},
	    {"http://127.0.0.1.evil.example/creds", 0, 0},
	    {"http://localhost.evil.example/creds", 0, 0},
	    {"http://localhOst.evil/", 0, 0},
	    {"http://evil.example/localhost", 0, 0},
	    {"http://127.0.0.1@evil.example:80/creds", 0, 0},
	    {"http://169.254.170.2@evil.example/creds", 0, 0},
	    {"http://localhost:x@evil.example/creds", 0, 0},
	    {"https://user:pw@sts.example.com/", 0, 0},
	    {"http://@127.0.0.1/creds", 0, 0},
	    {"ftp://127.0.0.1/creds", 0, 0},
	    {"127.0.0.1/creds", 0, 0},
	    {"", 0, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (int m = 0; m < 2; m++) {
			const int want = m ? cases[i].metadata : cases[i].token;
			char *err = NULL;
			int rc = fetch_credential_url(cases[i].url,
						      m ? FETCH_CRED_METADATA
							: FETCH_CRED_TOKEN,
						      "X", &err);

			ck_assert_msg(want ? rc == 0 : rc == -EINVAL,
				      "%s as a %s URL: %d (%s)", cases[i].url,
				      m ? "metadata" : "token", rc,
				      err ? err : "accepted");
			ck_assert(!err == !rc);
			/* Refusals name the fix. */
			ck_assert_msg(!err || strstr(err, "https"), "%s", err);
			free(err);
		}
	}
}
END_TEST

/* Each URL that once passed the container endpoint's prefix test is
 * refused before anything is sent: the tap, where the URL's host
 * leads, takes no connection, so the token never leaves. */
START_TEST(container_url_bypass)
{
	const char *host = tap_other_address();
	char u[256], *err = NULL;
	struct aws_chain *c = NULL;
	struct tap t;
	bool marked;
	int rc;

	if (!host) {
		fx_skip("%s", TAP_NO_OTHER_ADDRESS);
		return;
	}
	tap_start(&t, 0, "bypass-secret");
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "bypass-secret", 1);
	/* The tap hears the token when the URL is one that may have it. */
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/creds", t.port);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", u, 1);
	ck_assert_int_ne(aws_chain_open(NULL, "us-east-1", fe, &c, &err), 0);
	free(err);
	err = NULL;
	ck_assert_int_ge(tap_took(&t, &marked), 1);
	ck_assert(marked);
	/* What came before the host, once taken for the host. */
	static const char *const bypass[] = {
	    "127.0.0.1@",   "169.254.170.2@", "169.254.170.23@",
	    "localhost:x@", "[::1]@",	      "",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bypass); i++) {
		snprintf(u, sizeof(u), "http://%s%s:%d/creds", bypass[i], host,
			 t.port);
		setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", u, 1);
		rc = aws_chain_open(NULL, "us-east-1", fe, &c, &err);
		ck_assert_msg(tap_took(&t, &marked) == 0,
			      "%s: the token went to %s (%s)", u, host,
			      marked ? "the tap read it" : "connected");
		ck_assert_msg(rc == -EINVAL, "%s: %d %s", u, rc,
			      err ? err : "accepted");
		ck_assert_msg(strstr(err, "https://") ||
				  strstr(err, "use https"),
			      "%s", err);
		ck_assert_ptr_null(strstr(err, "bypass-secret"));
		free(err);
		err = NULL;
	}
	/* A name that begins like a loopback address is a name. */
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI",
	       "http://127.evil.example/creds", 1);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err, "plain http to 127.evil.example"), "%s", err);
	free(err);
	err = NULL;
	/* IMDS the same. */
	unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	snprintf(u, sizeof(u), "http://169.254.169.254@%s:%d", host, t.port);
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", u, 1);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err, "user name or password"), "%s", err);
	free(err);
	ck_assert_int_eq(tap_took(&t, &marked), 0);
	tap_stop(&t);
}
END_TEST

/* Azure's authority gets the federated assertion, IMDS's answer opens
 * every account: neither over plain http to another host; and GCP's
 * token_url and AWS STS the same. */
START_TEST(token_endpoints_http_refused)
{
	const char *host = tap_other_address();
	struct azure_creds_options ao = {.account = "acct"};
	struct azure_creds *az = NULL;
	struct gcp_creds_options go = {0};
	struct gcp_creds *gc = NULL;
	struct aws_chain *ac = NULL;
	char u[256], p[PATH_MAX], sp[PATH_MAX], text[PATH_MAX + 512];
	char *err = NULL;
	struct tap t;
	bool marked;
	int rc;

	if (!host) {
		fx_skip("%s", TAP_NO_OTHER_ADDRESS);
		return;
	}
	tap_start(&t, 0, "federated-assertion");
	fxc_write_text(at("azure-assertion", p, sizeof(p)),
		       "federated-assertion\n");
	setenv("AZURE_FEDERATED_TOKEN_FILE", p, 1);
	setenv("AZURE_CLIENT_ID", "client", 1);
	setenv("AZURE_TENANT_ID", "tenant", 1);
	static const char *const authority[] = {"", "127.0.0.1@"};
	for (size_t i = 0; i < ARRAY_SIZE(authority); i++) {
		snprintf(u, sizeof(u), "http://%s%s:%d/", authority[i], host,
			 t.port);
		setenv("AZURE_AUTHORITY_HOST", u, 1);
		rc = azure_creds_new(&ao, fe, &az, &err);
		ck_assert_msg(tap_took(&t, &marked) == 0,
			      "AZURE_AUTHORITY_HOST=%s: the assertion went to "
			      "%s (%s)",
			      u, host,
			      marked ? "the tap read it" : "connected");
		ck_assert_msg(rc == -EINVAL, "%s: %d %s", u, rc,
			      err ? err : "accepted");
		ck_assert_msg(strstr(err, "AZURE_AUTHORITY_HOST") &&
				  strstr(err, "https"),
			      "%s", err);
		free(err);
		err = NULL;
	}
	unsetenv("AZURE_AUTHORITY_HOST");
	unsetenv("AZURE_FEDERATED_TOKEN_FILE");
	snprintf(u, sizeof(u), "http://%s:%d", host, t.port);
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", u, 1);
	ck_assert_int_eq(azure_creds_new(&ao, fe, &az, &err), -EINVAL);
	ck_assert_msg(strstr(err, "AZURE_POD_IDENTITY_AUTHORITY_HOST"), "%s",
		      err);
	free(err);
	err = NULL;
	ck_assert_int_eq(tap_took(&t, &marked), 0);
	/* GCP: the subject token to an STS behind a loopback prefix. */
	t.marker = "gcp-subject";
	fxc_write_text(at("gcp-subject", sp, sizeof(sp)), "gcp-subject\n");
	snprintf(text, sizeof(text),
		 "{\"type\": \"external_account\", \"audience\": \"aud\", "
		 "\"subject_token_type\": \"jwt\", "
		 "\"token_url\": \"http://127.0.0.1@%s:%d/v1/token\", "
		 "\"credential_source\": {\"file\": \"%s\"}}",
		 host, t.port, sp);
	fxc_write_text(at("external.json", p, sizeof(p)), text);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", p, 1);
	rc = gcp_creds_new(&go, fe, &gc, &err);
	ck_assert_msg(tap_took(&t, &marked) == 0,
		      "token_url: the subject token went to %s (%s)", host,
		      marked ? "the tap read it" : "connected");
	ck_assert_msg(rc == -EINVAL, "%d %s", rc, err ? err : "accepted");
	ck_assert_msg(strstr(err, "token_url"), "%s", err);
	free(err);
	err = NULL;
	/* STS: curl reads "http:/HOST" too, which has no "://" to sign. */
	fxc_write_text(at("web-token", p, sizeof(p)), "web-token\n");
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", p, 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/web", 1);
	setenv("AWS_ENDPOINT_URL_STS", "http:/127.0.0.1:1/", 1);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &ac, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err, "expected http[s]://HOST"), "%s", err);
	free(err);
	tap_stop(&t);
}
END_TEST

/* A source's credentials to an http:// origin that is not this machine:
 * refused at open with the fix named, nothing sent; sent when the
 * configuration opts in; an anonymous source goes as before. */
static void origin_case(struct tap *t, const char *spec,
			struct source_options *opt, const char *marker,
			bool refused)
{
	struct source *src = NULL;
	char *err = NULL;
	bool marked;
	int rc = source_open(spec, opt, fe, &src, &err);
	int took;

	if (!rc)
		source_close(src);
	took = tap_took(t, &marked);
	if (refused) {
		ck_assert_msg(took == 0, "%s: credentials went to %s (%s)",
			      spec, opt->endpoint,
			      marked ? "the tap read them" : "connected");
		ck_assert_msg(rc == -EPERM, "%s: %d %s", spec, rc,
			      err ? err : "opened");
		ck_assert_msg(strstr(err, "https://") &&
				  strstr(err, "--insecure-credentials"),
			      "%s", err);
	} else {
		ck_assert_msg(took >= 1, "%s: nothing reached %s (%s)", spec,
			      opt->endpoint, err ? err : "");
		ck_assert_msg(!marker == !marked, "%s: %s", spec,
			      marker ? "no credentials sent" : "credentials");
	}
	free(err);
}

START_TEST(origin_http_credentials)
{
	const char *host = tap_other_address();
	struct source_options opt = {0};
	struct fetch_config cfg;
	char u[256];
	struct tap t;

	if (!host) {
		fx_skip("%s", TAP_NO_OTHER_ADDRESS);
		return;
	}
	tap_start(&t, 0, NULL);
	snprintf(u, sizeof(u), "http://%s:%d", host, t.port);
	opt.endpoint = u;
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "gcs-bearer", 1);
	setenv("AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=azsig", 1);
	t.marker = "AWS4-HMAC-SHA256";
	origin_case(&t, "s3://bucket/", &opt, NULL, true);
	t.marker = "gcs-bearer";
	origin_case(&t, "gs://bucket/", &opt, NULL, true);
	t.marker = "sig=azsig";
	origin_case(&t, "az://acct/container/", &opt, NULL, true);
	opt.no_sign = opt.anonymous = true;
	t.marker = "Authorization";
	origin_case(&t, "s3://bucket/", &opt, NULL, false);
	origin_case(&t, "gs://bucket/", &opt, NULL, false);
	opt.no_sign = opt.anonymous = false;
	fetch_engine_free(fe);
	fetch_config_default(&cfg);
	cfg.retries = 0;
	cfg.insecure_credentials = true;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
	t.marker = "AWS4-HMAC-SHA256";
	origin_case(&t, "s3://bucket/", &opt, t.marker, false);
	t.marker = "gcs-bearer";
	origin_case(&t, "gs://bucket/", &opt, t.marker, false);
	t.marker = "sig=azsig";
	origin_case(&t, "az://acct/container/", &opt, t.marker, false);
	tap_stop(&t);
}
END_TEST

/* A forward proxy from the environment carries requests elsewhere, but
 * never one to this machine or a metadata address: it would read the
 * container token in clear. */
START_TEST(proxy_skips_local)
{
	const char *host = tap_other_address();
	struct fetch_config cfg;
	struct fetch_engine *own;
	struct fetch_req req = {0};
	struct fetch_res res;
	struct aws_chain *c = NULL;
	struct tap proxy, endpoint;
	char u[256], body[64], *err = NULL;
	bool marked;

	if (!host) {
		fx_skip("%s", TAP_NO_OTHER_ADDRESS);
		return;
	}
	tap_start(&proxy, 0, "proxied-secret");
	tap_start(&endpoint, 0, "proxied-secret");
	snprintf(u, sizeof(u), "http://%s:%d", host, proxy.port);
	setenv("http_proxy", u, 1);
	setenv("no_proxy", "example.invalid", 1);
	fetch_config_default(&cfg);
	cfg.retries = 0;
	ck_assert_int_eq(fetch_engine_new(&cfg, &own), 0);
	/* Elsewhere: through the proxy. */
	snprintf(u, sizeof(u), "http://%s:%d/x", host, endpoint.port);
	req.url = u;
	req.buf = body;
	req.cap = sizeof(body);
	ck_assert_int_ne(fetch_run(own, &req, &res), 0);
	ck_assert_int_eq(tap_took(&proxy, &marked), 1);
	ck_assert_int_eq(tap_took(&endpoint, &marked), 0);
	/* This machine: straight there, the token too. */
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "proxied-secret", 1);
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/creds", endpoint.port);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", u, 1);
	ck_assert_int_ne(aws_chain_open(NULL, "us-east-1", own, &c, &err), 0);
	free(err);
	ck_assert_msg(tap_took(&proxy, &marked) == 0,
		      "the proxy took a request to 127.0.0.1 (%s)",
		      marked ? "with the token" : "no token");
	ck_assert_int_ge(tap_took(&endpoint, &marked), 1);
	ck_assert(marked);
	fetch_engine_free(own);
	unsetenv("http_proxy");
	unsetenv("no_proxy");
	tap_stop(&proxy);
	tap_stop(&endpoint);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("trust");
	TCase *tc = tcase_create("trust");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, credential_url_rules);
	tcase_add_test(tc, container_url_bypass);
	tcase_add_test(tc, token_endpoints_http_refused);
	tcase_add_test(tc, origin_http_credentials);
	tcase_add_test(tc, proxy_skips_local);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
