#ifndef WHARF_FS_ORIGIN_CREDS_AWS_I_H
#define WHARF_FS_ORIGIN_CREDS_AWS_I_H
/*
 * creds_aws_i.h: what the AWS credential files share among themselves,
 * and no one else includes.  The chain (creds_aws.c) finds a provider and
 * fetches through it; STS (creds_aws_sts.c), the container endpoint and
 * IMDS (creds_aws_imds.c) are providers; creds_aws_answer.c (.h) asks an
 * endpoint and reads what it answers, knowing no provider.  Each includes
 * only those below it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "creds_aws_answer.h"
#include "fetch.h"

#define WEB_TOKEN_MAX (16u << 10) /* bytes of a web identity token */
#define IMDS_DEFAULT "http://169.254.169.254"
#define CONTAINER_HOST "http://169.254.170.2"
#define STS_VERSION "2011-06-15"

enum kind { P_STATIC, P_WEB, P_ROLE, P_PROCESS, P_CONTAINER, P_IMDS };

struct prov {
	enum kind kind;
	char desc[600];
	struct fetch_engine *fe;
	struct aws_keys keys; /* P_STATIC */
	/* P_WEB, P_ROLE: the role, and STS */
	char *role_arn, *session, *external_id, *token_file;
	unsigned duration_s;
	char *sts_url, *sts_host, *sts_path, *region;
	struct prov *src;	     /* P_ROLE: whose keys sign AssumeRole */
	char *command, *command_dir; /* P_PROCESS, and where it runs */
	/* P_CONTAINER: its URL and authorization; P_IMDS: its base URL */
	char *url, *auth, *auth_file;
};

/* An environment variable, NULL when unset or empty. */
static inline const char *aws_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* ---- creds_aws_sts.c ---- */

/* STS's URL, Host and path for p (AWS_ENDPOINT_URL_STS, else the
 * region's), and the role's session name.  @return 0 or -errno (*err). */
int aws_sts_setup(struct prov *p, const char *region, const char *session,
		  char **err);
/* p as web identity: role, token file (made absolute), STS. */
int aws_web_identity(struct prov *p, const char *role, const char *file,
		     const char *session, const char *region, char **err);
/* Keys from STS AssumeRoleWithWebIdentity, with the token file read
 * again each time. */
int aws_from_web_identity(struct prov *p, struct aws_keys *k, int64_t *expires,
			  char **err);
/* Keys from STS AssumeRole, signed with src (the source profile's). */
int aws_assume_role(struct prov *p, const struct aws_keys *src,
		    struct aws_keys *k, int64_t *expires, char **err);

/* ---- creds_aws_imds.c ---- */

/* p as the container endpoint (AWS_CONTAINER_CREDENTIALS_*).  @return 0
 * or -errno (*err): -ENOENT when neither URI is set. */
int aws_container_setup(struct prov *p, char **err);
/* p as IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT, else the default).
 * @return 0 or -errno (*err): -EINVAL for a URL fetch_credential_url
 * refuses. */
int aws_imds_setup(struct prov *p, char **err);
/* Whether the firmware says this is an EC2 machine. */
bool aws_on_ec2(void);
/* Keys from the container endpoint, and from IMDSv2. */
int aws_from_container(struct prov *p, struct aws_keys *k, int64_t *expires,
		       char **err);
int aws_from_imds(struct prov *p, struct aws_keys *k, int64_t *expires,
		  char **err);

#endif
