/*
 * fetch_trust: where credentials may go (fetch.h, fetch_credential_url and
 * fetch_credentials).  A URL is judged by the host libcurl will connect
 * to, as curl_url parses it, never by how its text begins: a prefix test
 * reads "http://127.0.0.1@evil/" as this machine.
 */
#include "config.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compiler.h"
#include "fetch_i.h"
#include "text.h"

/* The metadata services' documented addresses: AWS IMDS, Azure IMDS and
 * GCP's metadata server (169.254.169.254, fd00:ec2::254), the ECS
 * container endpoint (169.254.170.2) and EKS Pod Identity's
 * (169.254.170.23, fd00:ec2::23). */
static const char *const link_local[] = {
    "169.254.169.254", "169.254.170.2", "169.254.170.23",
    "fd00:ec2::254",   "fd00:ec2::23",
};

/* libcurl answers "localhost" and "*.localhost" with the loopback
 * addresses itself, without asking the resolver (or /etc/hosts), from
 * 7.85.0 on. */
static bool curl_resolves_localhost(void)
{
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);

	return v && v->version_num >= 0x075500;
}

/* Whether address a of family is the one text names. */
static bool addr_is(int family, const unsigned char *a, const char *text)
{
	unsigned char b[16];

	return inet_pton(family, text, b) == 1 &&
	       !memcmp(a, b, family == AF_INET ? 4 : 16);
}

/* Whether host (curl_url's form: an IPv6 literal in brackets, an IPv4
 * one normalized to four numbers) is this machine, or with link_ok one of
 * the metadata addresses.  Addresses are compared as addresses. */
static bool host_trusted(const char *host, bool link_ok)
{
	unsigned char a[16];
	char v6[64];
	size_t n = strlen(host);
	int family = AF_INET6;

	if (!strcasecmp(host, "localhost") ||
	    (n > 10 && !strcasecmp(host + n - 10, ".localhost")))
		return curl_resolves_localhost();
	if (inet_pton(AF_INET, host, a) == 1) {
		family = AF_INET;
	} else {
		if (n < 3 || n - 2 >= sizeof(v6) || host[0] != '[' ||
		    host[n - 1] != ']')
			return false;
		memcpy(v6, host + 1, n - 2);
		v6[n - 2] = '\0';
		if (inet_pton(AF_INET6, v6, a) != 1)
			return false;
	}
	if (family == AF_INET ? a[0] == 127 : addr_is(family, a, "::1"))
		return true;
	for (size_t i = 0; link_ok && i < ARRAY_SIZE(link_local); i++)
		if (addr_is(family, a, link_local[i]))
			return true;
	return false;
}

/* Whether part of u is present (a user name, a zone id). */
static bool has_part(CURLU *u, CURLUPart part)
{
	char *s = NULL;
	CURLUcode rc = curl_url_get(u, part, &s, 0);

	curl_free(s);
	return rc == CURLUE_OK;
}

/*
 * Parses url: its scheme ("http" or "https") into scheme, its host into
 * host (both lower case as curl_url gives them, or "").  @return 0, or
 * -EINVAL with *err: not an http(s) URL, or one with a user name or
 * password (they hide where it goes, and would be sent as Basic
 * credentials).
 */
static int parse(const char *url, const char *what, char *scheme, char *host,
		 size_t cap, char **err)
{
	CURLU *u = curl_url();
	char *s = NULL, *h = NULL;
	int rc = -EINVAL;

	*scheme = *host = '\0';
	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &s, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK ||
	    (strcmp(s, "http") && strcmp(s, "https")) || strlen(h) >= cap) {
		err_set(err,
			"%s: not an http(s) URL with a host "
			"(give https://HOST[:PORT]/PATH)",
			what);
	} else if (has_part(u, CURLUPART_USER) ||
		   has_part(u, CURLUPART_PASSWORD) ||
		   has_part(u, CURLUPART_OPTIONS)) {
		err_set(
		    err,
		    "%s: the URL has a user name or password before '@' "
		    "(host %s): credentials go to the host after the "
		    "'@', so this is refused; give https://HOST[:PORT]/PATH "
		    "with no '@' before the host",
		    what, h);
	} else {
		snprintf(scheme, 8, "%s", s);
		snprintf(host, cap, "%s", h);
		/* "[fe80::1%eth0]": no address we trust */
		if (has_part(u, CURLUPART_ZONEID))
			*host = '\0';
		rc = 0;
	}
	curl_free(s);
	curl_free(h);
	curl_url_cleanup(u);
	return rc;
}

int fetch_credential_url(const char *url, enum fetch_cred_url where,
			 const char *what, char **err)
{
	char scheme[8], host[256];
	const bool link_ok = where == FETCH_CRED_METADATA;
	int rc = parse(url, what, scheme, host, sizeof(host), err);

	if (rc || !strcmp(scheme, "https") || host_trusted(host, link_ok))
		return rc;
	err_set(err,
		"%s: plain http to %s would carry credentials across the "
		"network in clear: use https (plain http is only for this "
		"machine's 127.0.0.0/8, ::1 or localhost%s)",
		what, *host ? host : "a zoned address",
		link_ok ? ", and the metadata addresses 169.254.169.254, "
			  "169.254.170.2, 169.254.170.23, fd00:ec2::254 and "
			  "fd00:ec2::23"
			: "");
	return -EINVAL;
}

char *fetch_trust_no_proxy(void)
{
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	const char *env = getenv("no_proxy");
	/* 127.0.0.0/8 as a CIDR from 7.86.0 on; 127.0.0.1 before. */
	const char *loopback =
	    v && v->version_num >= 0x075600 ? "127.0.0.0/8" : "127.0.0.1";

	if (!env || !*env)
		env = getenv("NO_PROXY");
	if (env && !strcmp(env, "*"))
		return strdup("*");
	return strdupf("%s%s%s,localhost,::1,%s,%s,%s,%s,%s", env ? env : "",
		       env && *env ? "," : "", loopback, link_local[0],
		       link_local[1], link_local[2], link_local[3],
		       link_local[4]);
}

int fetch_trust_origin(const char *origin, bool insecure_ok, const char *who,
		       const char *what, char **err)
{
	char scheme[8], host[256];
	int rc;

	if (!origin || insecure_ok)
		return 0;
	rc = parse(origin, who, scheme, host, sizeof(host), err);
	if (rc || !strcmp(scheme, "https") || host_trusted(host, false))
		return rc;
	err_set(err,
		"%s: its requests carry %s, which would go in clear to %s "
		"over plain http: give the endpoint as https://, or add "
		"--insecure-credentials (-o insecure_credentials) if the "
		"network to it is trusted",
		who, what, host);
	return -EPERM;
}
