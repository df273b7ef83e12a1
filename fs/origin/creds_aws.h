#ifndef WHARF_FS_CREDS_AWS_H
#define WHARF_FS_CREDS_AWS_H
/*
 * creds_aws: the AWS credentials, region and endpoint a user already has,
 * found where the AWS tools look, and renewed before they expire.
 *
 * The chain (aws_chain_open), in the AWS tools' order; the first source
 * that is configured is used, and a source that is configured but fails
 * is an error (no silent fall-through to the next):
 *   1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
 *   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+
 *      AWS_ROLE_SESSION_NAME), STS AssumeRoleWithWebIdentity (EKS IRSA);
 *   3. the profile (--profile, else AWS_PROFILE, else "default") of the
 *      shared credentials file (AWS_SHARED_CREDENTIALS_FILE or
 *      ~/.aws/credentials) and config file (AWS_CONFIG_FILE or
 *      ~/.aws/config): role_arn with source_profile or credential_source
 *      (STS AssumeRole, signed with the source's keys) or with
 *      web_identity_token_file; credential_process (JSON, Version 1);
 *      aws_access_key_id + aws_secret_access_key;
 *   4. container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI or
 *      _RELATIVE_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or
 *      _TOKEN (ECS, EKS Pod Identity);
 *   5. IMDSv2 (EC2): PUT a session token, then the role's name, then its
 *      credentials.  Never IMDSv1.  Asked when AWS_EC2_METADATA_SERVICE_
 *      ENDPOINT is set or the firmware says this is an EC2 machine, unless
 *      AWS_EC2_METADATA_DISABLED=true.
 * With --profile only step 3 is used; with AWS_PROFILE, steps 1 to 3 (a
 * profile named and not found is an error).  STS is AWS_ENDPOINT_URL_STS
 * (else AWS_ENDPOINT_URL, else https://sts.REGION.amazonaws.com).
 *
 * Credentials with an expiry are renewed by creds_renew (see there: when,
 * and how readers take them without a lock).  Secrets are wiped when
 * dropped; messages name the provider (and file, profile, URL), never a
 * secret.
 */
#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"
#include "creds_aws_answer.h" /* struct aws_keys, the answers' parsers */

struct fetch_engine;
struct aws_chain;

struct aws_creds {
	char *access_key;
	char *secret_key;
	char *session_token; /* NULL when none */
	char *origin; /* for messages: "the environment", "FILE [profile]" */
};

/*
 * Loads static credentials.  With `profile` given (--profile), that
 * profile of the shared credentials file; otherwise AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), else the profile
 * AWS_PROFILE names (or "default") in AWS_SHARED_CREDENTIALS_FILE or
 * ~/.aws/credentials.
 * @return 0; -ENOENT when nothing was found; -EINVAL for half a key pair or
 * a profile without keys; -ENOMEM.  On error *err says where it looked.
 */
int aws_creds_load(const char *profile, struct aws_creds *out,
		   char **err) WHARF_CHECK;
/* Wipes the secrets and frees; c may be zeroed or already cleared. */
void aws_creds_clear(struct aws_creds *c);

/* The region: opt (--region), AWS_REGION, AWS_DEFAULT_REGION, "us-east-1". */
const char *aws_region(const char *opt);
/* The endpoint override: opt (--endpoint), AWS_ENDPOINT_URL_S3,
 * AWS_ENDPOINT_URL, or NULL for AWS itself. */
const char *aws_endpoint(const char *opt);

/*
 * Finds the credentials along the chain above and fetches them once, so
 * that a bad setup shows at mount time.  fe carries the requests to STS,
 * the container endpoint and IMDS.
 * @return 0; -ENOENT when no source is configured; -EACCES, -EIO, -EINVAL
 * when the one configured failed; *err names it and says why.
 */
int aws_chain_open(const char *profile, const char *region,
		   struct fetch_engine *fe, struct aws_chain **out,
		   char **err) WHARF_CHECK;
void aws_chain_free(struct aws_chain *c);
/* The current keys into *k (lock-free), and their serial. */
void aws_chain_get(struct aws_chain *c, struct aws_keys *k, unsigned *serial);
/* The origin refused keys `serial` as expired: renew once (on this
 * thread).  @return true when other keys are there now. */
bool aws_chain_refused(struct aws_chain *c, unsigned serial);
/* Where the keys come from, for messages ("web identity (role R, token
 * file F)"); never a secret. */
const char *aws_chain_describe(const struct aws_chain *c);

#endif
