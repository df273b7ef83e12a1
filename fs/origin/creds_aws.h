#ifndef WHARF_FS_CREDS_AWS_H
#define WHARF_FS_CREDS_AWS_H
/*
 * creds_aws: the AWS credentials, region and endpoint a user already has,
 * found where the AWS tools look.  Secrets stay in struct aws_creds and are
 * wiped by aws_creds_clear; messages name only where they came from and the
 * access key id.
 */
#include "util.h"

struct aws_creds {
	char *access_key;
	char *secret_key;
	char *session_token; /* NULL when none */
	char *origin; /* for messages: "the environment", "FILE [profile]" */
};

/*
 * Loads credentials.  With `profile` given (--profile), that profile of the
 * shared credentials file; otherwise AWS_ACCESS_KEY_ID and
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

#endif
