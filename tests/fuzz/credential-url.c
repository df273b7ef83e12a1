/* Credential URLs (fs/net/fetch_trust.c: fetch_credential_url): byte 0
 * bit 0 picks a metadata service's rules over a token endpoint's, the
 * rest is the URL.  What it promises of a URL it accepts is checked
 * against libcurl's own reading of it: no user information, and plain
 * http only to a loopback address, localhost, or (metadata) one of the
 * documented link-local addresses. */
#include "config.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fetch.h"
#include "fuzz.h"

/* The host's canonical address text ("127.0.0.1", "fd00:ec2::23"), or
 * "" for a name. */
static void canonical(const char *host, char *out, size_t cap)
{
	unsigned char a[16];
	char v6[64];
	size_t n = strlen(host);

	*out = '\0';
	if (inet_pton(AF_INET, host, a) == 1) {
		inet_ntop(AF_INET, a, out, (socklen_t)cap);
	} else if (n > 2 && n - 2 < sizeof(v6) && host[0] == '[') {
		memcpy(v6, host + 1, n - 2);
		v6[n - 2] = '\0';
		if (inet_pton(AF_INET6, v6, a) == 1)
			inet_ntop(AF_INET6, a, out, (socklen_t)cap);
	}
}

static bool plain_http_ok(const char *host, bool metadata)
{
	static const char *const link_local[] = {
	    "169.254.169.254", "169.254.170.2", "169.254.170.23",
	    "fd00:ec2::254", "fd00:ec2::23"};
	size_t n = strlen(host);
	char addr[64];

	if (!strcasecmp(host, "localhost") ||
	    (n > 10 && !strcasecmp(host + n - 10, ".localhost")))
		return true;
	canonical(host, addr, sizeof(addr));
	if (!strncmp(addr, "127.", 4) || !strcmp(addr, "::1"))
		return true;
	for (size_t i = 0; metadata && i < 5; i++)
		if (!strcmp(addr, link_local[i]))
			return true;
	return false;
}

/* A part curl finds in u, or NULL; curl_free it. */
static char *part(CURLU *u, CURLUPart p)
{
	char *s = NULL;

	if (curl_url_get(u, p, &s, 0) == CURLUE_OK)
		return s;
	curl_free(s);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *url, *err = NULL, *scheme, *host, *user, *pw, *zone;
	bool metadata;
	CURLU *u;
	int rc, token_rc;

	if (size < 1)
		return 0;
	metadata = data[0] & 1;
	url = fuzz_str(data + 1, size - 1);
	rc = fetch_credential_url(
	    url, metadata ? FETCH_CRED_METADATA : FETCH_CRED_TOKEN, "fuzz",
	    &err);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	FUZZ_ASSERT(!rc == !err);
	free(err);
	err = NULL;
	/* A token endpoint's rules are the stricter. */
	token_rc = fetch_credential_url(url, FETCH_CRED_TOKEN, "fuzz", &err);
	FUZZ_ASSERT(!metadata || token_rc || !rc);
	free(err);
	if (rc) {
		free(url);
		return 0;
	}
	u = curl_url();
	FUZZ_ASSERT(u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK);
	scheme = part(u, CURLUPART_SCHEME);
	host = part(u, CURLUPART_HOST);
	user = part(u, CURLUPART_USER);
	pw = part(u, CURLUPART_PASSWORD);
	zone = part(u, CURLUPART_ZONEID);
	FUZZ_ASSERT(scheme && host && *host);
	FUZZ_ASSERT(!user && !pw);
	FUZZ_ASSERT(!strcmp(scheme, "https") || !strcmp(scheme, "http"));
	FUZZ_ASSERT(!strcmp(scheme, "https") ||
		    (!zone && plain_http_ok(host, metadata)));
	curl_free(scheme);
	curl_free(host);
	curl_free(user);
	curl_free(pw);
	curl_free(zone);
	curl_url_cleanup(u);
	free(url);
	return 0;
}
