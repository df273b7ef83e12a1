#ifndef WHARF_FS_SIGV4_H
#define WHARF_FS_SIGV4_H
/*
 * sigv4: AWS Signature Version 4 (HMAC-SHA256) for request headers.
 *
 * The caller names every header it wants signed (host and x-amz-date at
 * least; S3 also wants x-amz-content-sha256) and gets back the canonical
 * request, the string to sign, the signature and the Authorization value.
 * Nothing is allocated: the results live in struct sigv4_out, and an input
 * that does not fit gives -ENAMETOOLONG.  No secret is ever logged.
 */
#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"


struct sigv4_header {
	const char *name;  /* any case; lowercased for signing */
	const char *value; /* trimmed, inner runs of spaces folded */
};

struct sigv4_in {
	const char *method; /* "GET", "HEAD", "PUT" */
	const char *path;   /* as sent, percent-encoded ("/b/k%20x") */
	const char *query;  /* as sent, without '?'; NULL or "" for none */
	const struct sigv4_header *headers;
	size_t nheaders;
	const char *payload_hash; /* hex SHA-256 of the body or
				     "UNSIGNED-PAYLOAD" */
	const char *amz_date;	  /* "20150830T123600Z" */
	const char *region;	  /* "us-east-1" */
	const char *service;	  /* "s3" */
	const char *access_key;
	const char *secret_key;
};

#define SIGV4_CREQ_MAX 16384

struct sigv4_out {
	char creq[SIGV4_CREQ_MAX]; /* canonical request */
	char string_to_sign[256];
	char signature[65];	   /* lowercase hex */
	char signed_headers[1024]; /* "host;x-amz-date" */
	char authorization[1536];  /* the Authorization header's value */
};

/*
 * Signs `in`.  Header names are matched case-insensitively; repeated names
 * are joined with ',' in the order given (the suite's rule).
 * @return 0, -EINVAL (missing field, more than 32 headers) or
 * -ENAMETOOLONG (an input does not fit the fixed buffers).
 */
int sigv4_sign(const struct sigv4_in *in, struct sigv4_out *out) WHARF_CHECK;

/* "YYYYMMDDTHHMMSSZ" for epoch seconds t (UTC) into buf[17]. */
void sigv4_amz_date(long long t, char buf[17]);

/* Lowercase hex SHA-256 of data into hex[65]. */
void sigv4_sha256_hex(const void *data, size_t len, char hex[65]);

/* The hash of an empty payload, what GET and HEAD sign. */
#define SIGV4_EMPTY_SHA256                                                     \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/*
 * Appends s to out (cap bytes, NUL-terminated) percent-encoded the AWS way:
 * A-Z a-z 0-9 - _ . ~ stay, and '/' too when keep_slash; every other byte is
 * %XX in uppercase hex.  @return the new length, or -ENAMETOOLONG.
 */
int sigv4_uri_encode(const char *s, size_t slen, bool keep_slash, char *out,
		     size_t len, size_t cap) WHARF_CHECK;

#endif
