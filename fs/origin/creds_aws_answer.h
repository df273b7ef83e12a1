#ifndef WHARF_FS_ORIGIN_CREDS_AWS_ANSWER_H
#define WHARF_FS_ORIGIN_CREDS_AWS_ANSWER_H
/*
 * creds_aws_answer: AWS keys as a request signs with them, and the parsers
 * of what the providers answer (STS, the container endpoint, IMDS, a
 * credential process), and asking a provider: the bottom of the AWS
 * credential files (creds_aws_i.h).  creds_aws.h includes this.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"


/* One set of keys as a request signs with them (fixed size: copied by
 * readers, see creds_renew). */
#define AWS_KEY_MAX 128
#define AWS_TOKEN_MAX 4096
struct aws_keys {
	char access_key[AWS_KEY_MAX];
	char secret_key[AWS_KEY_MAX];
	char token[AWS_TOKEN_MAX]; /* "" when none */
};

/*
 * The parsers of what the providers answer, declared for their fuzz
 * targets (tests/fuzz).  `what` names the answer in *err.  *expires gets
 * the Expiration in epoch seconds (0 when none is given).
 * @return 0, or -EINVAL with *err saying why (never with a secret in it).
 */
/* An STS AssumeRole or AssumeRoleWithWebIdentity answer (XML). */
int aws_sts_parse(const char *text, size_t len, struct aws_keys *k,
		  int64_t *expires, const char *what, char **err) WHARF_CHECK;
/* A container endpoint's or IMDS's answer (JSON: AccessKeyId,
 * SecretAccessKey, Token, Expiration), or with `process` a
 * credential_process's output (Version 1, SessionToken). */
int aws_json_parse(const char *text, size_t len, bool process,
		   struct aws_keys *k, int64_t *expires, const char *what,
		   char **err) WHARF_CHECK;

/* ---- For the AWS credential files (creds_aws_i.h) ---- */

#define ANSWER_MAX (64u << 10) /* bytes of an STS, IMDS, process answer */

struct fetch_engine;
struct fetch_req;

/* Copies one field (n bytes of v) into a fixed-size key buffer dst of cap
 * bytes, refusing what a header or a signature could not carry.
 * `header`: it is sent as is.  @return 0, or -EINVAL with *err naming
 * `what` and `field`. */
int aws_key_set(char *dst, size_t cap, const char *v, size_t n,
		const char *field, bool header, const char *what, char **err);
/* One request through fe to a provider (`what`, for messages); the body
 * (grown, NUL-terminated, at most ANSWER_MAX bytes) in *body, *len bytes,
 * freed with aws_body_free.  @return 0, or -errno with *err naming `what`
 * and `step` (a 4xx answer is -EACCES). */
int aws_call(struct fetch_engine *fe, const char *what, struct fetch_req *req,
	     char **body, size_t *len, const char *step, char **err);
/* Wipes and frees an answer (NULL: nothing). */
void aws_body_free(char *body, size_t len);

#endif
