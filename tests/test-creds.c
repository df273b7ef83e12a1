/*
 * Credentials as the clouds hand them out (fs/origin/creds_aws.c,
 * creds_renew.c, creds_gcp.c's external_account), against
 * tests/aws-standin.py: IMDSv2, STS, a container endpoint, GCS's STS and
 * impersonation, and an S3 that checks every signature and refuses
 * expired credentials with 400 ExpiredToken.  Its credentials expire
 * LIFETIME_S seconds after they are handed out.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "creds_aws.h"
#include "creds_gcp.h"
#include "creds_renew.h"
#include "fetch.h"
#include "fixture-ck.h"
#include "fixture-creds.h"
#include "fixture.h"
#include "origins.h"
#include "source.h"
#include "text.h"
#include "units.h"

#define LIFETIME_S 10
#define FILES 120 /* objects the mount reads, one every half second */
#define FILE_SIZE (64 << 10)
#define MOUNT_READ_S 60

static char *work, *data;
static pid_t standin = -1, v1only = -1;
static int port, v1_port;
static char url[64], v1_url[64];
static struct fetch_engine *fe;

/* work/NAME, in a static buffer of its own per call site's use. */
static const char *at(const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", work, name);
	return buf;
}

static pid_t start_standin(int *p, char *u, size_t ucap, const char *mode)
{
	char script[PATH_MAX], ps[16], life[16], logp[PATH_MAX];
	char *argv[] = {"/usr/bin/python3", script, ps, data, life,
			(char *)mode,	    NULL};
	pid_t pid;

	snprintf(script, sizeof(script), "%s/tests/aws-standin.py",
		 getenv("WHARF_SRCDIR") ? getenv("WHARF_SRCDIR") : "..");
	*p = fx_free_port();
	snprintf(ps, sizeof(ps), "%d", *p);
	snprintf(life, sizeof(life), "%d", LIFETIME_S);
	snprintf(logp, sizeof(logp), "%s/standin-%d.log", work, *p);
	pid = fx_spawn(argv, logp);
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(fx_wait_port(*p, 15000) == 0,
		      "aws-standin.py did not come up; see %s", logp);
	snprintf(u, ucap, "http://127.0.0.1:%d", *p);
	return pid;
}

/* One counter of a stand-in's /_standin/stats (or a control GET). */
static long standin_get(const char *base, const char *path, const char *key)
{
	char u[256], buf[4096];
	struct fetch_req req = {0};
	struct fetch_res res;

	snprintf(u, sizeof(u), "%s%s", base, path);
	req.url = u;
	req.buf = buf;
	req.cap = sizeof(buf) - 1;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	buf[res.len] = '\0';
	return key ? (long)fx_json_num(buf, key) : 0;
}

static long stat_of(const char *key)
{
	return standin_get(url, "/_standin/stats", key);
}

static void setup(void)
{
	struct fetch_config cfg;

	fxc_clean_env(work);
	fetch_config_default(&cfg);
	cfg.retries = 1;
	cfg.connect_timeout_ms = 2000;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
}

static void teardown(void)
{
	fetch_engine_free(fe);
	fe = NULL;
	fxc_clean_env(work);
}

/* The providers, in the chain's order. */
enum step { ENV, WEB, PROFILE, CONTAINER, IMDS };

/* Every provider from `first` on configured at once, those before it
 * not. */
static void providers_from(enum step first)
{
	char p[PATH_MAX], text[2048];

	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	fxc_write_text(at("web-token", p, sizeof(p)), "web-identity-token\n");
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", p, 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/web", 1);
	snprintf(text, sizeof(text), "%s/sts/", url);
	setenv("AWS_ENDPOINT_URL_STS", text, 1);
	fxc_write_text(at("credentials", p, sizeof(p)),
		       "[src]\naws_access_key_id = AKIDSOURCE\n"
		       "aws_secret_access_key = sourcesecret\n");
	setenv("AWS_SHARED_CREDENTIALS_FILE", p, 1);
	snprintf(text, sizeof(text),
		 "[default]\nregion = us-east-1\nrole_arn = "
		 "arn:aws:iam::1:role/r\nsource_profile = src\n"
		 "[profile proc]\ncredential_process = printf "
		 "'{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", "
		 "\"SecretAccessKey\": \"procsecret\", \"SessionToken\": "
		 "\"proctoken\", \"Expiration\": \"2999-01-01T00:00:00Z\"}'\n");
	fxc_write_text(at("config", p, sizeof(p)), text);
	setenv("AWS_CONFIG_FILE", p, 1);
	snprintf(text, sizeof(text), "%s/container/creds", url);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", text, 1);
	fxc_write_text(at("container-token", p, sizeof(p)), "container-auth\n");
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", p, 1);
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url, 1);
	if (first > ENV) {
		unsetenv("AWS_ACCESS_KEY_ID");
		unsetenv("AWS_SECRET_ACCESS_KEY");
	}
	if (first > WEB) {
		unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
		unsetenv("AWS_ROLE_ARN");
	}
	if (first > PROFILE) {
		unsetenv("AWS_SHARED_CREDENTIALS_FILE");
		unsetenv("AWS_CONFIG_FILE");
	}
	if (first > CONTAINER)
		unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
}

/* Opens the chain and checks where its keys came from. */
static void expect(const char *desc_has, const char *key_prefix,
		   const char *counter)
{
	struct aws_chain *c = NULL;
	struct aws_keys *k = calloc(1, sizeof(*k));
	char *err = NULL;
	long before = counter ? stat_of(counter) : 0;
	unsigned serial;
	int rc;

	ck_assert_ptr_nonnull(k);
	rc = aws_chain_open(NULL, "us-east-1", fe, &c, &err);
	ck_assert_msg(rc == 0, "%s: %s", desc_has, err ? err : "?");
	ck_assert_msg(strstr(aws_chain_describe(c), desc_has),
		      "wanted %s, got %s", desc_has, aws_chain_describe(c));
	aws_chain_get(c, k, &serial);
	ck_assert_msg(!strncmp(k->access_key, key_prefix, strlen(key_prefix)),
		      "%s: key %s", desc_has, k->access_key);
	/* The description never carries a secret. */
	ck_assert_ptr_null(strstr(aws_chain_describe(c), "secret"));
	if (counter)
		ck_assert_int_eq(stat_of(counter), before + 1);
	aws_chain_free(c);
	free(k);
}

/* Every provider configured, each taken away in turn: the chain takes
 * the first in the AWS tools' order. */
START_TEST(chain_order)
{
	struct aws_chain *c = NULL;
	char *err = NULL;

	providers_from(ENV);
	expect("the environment", "AKIDENV", NULL);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	expect("web identity (role arn:aws:iam::1:role/web", "ASIASTANDIN",
	       "web_identity");
	unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	unsetenv("AWS_ROLE_ARN");
	/* role_arn + source_profile: AssumeRole signed with [src]'s keys
	 * (the stand-in checks the signature). */
	expect("role arn:aws:iam::1:role/r", "ASIASTANDIN", "assume_role");
	setenv("AWS_PROFILE", "proc", 1);
	expect("credential_process", "AKIDPROC", NULL);
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	unsetenv("AWS_CONFIG_FILE");
	expect("container credentials endpoint", "ASIASTANDIN", "container");
	unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	expect("IMDSv2 at", "ASIASTANDIN", "imds_token");
	ck_assert_int_eq(stat_of("imds_v1_gets"), 0);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "no AWS credentials found"));
	free(err);
}
END_TEST

/* A configured provider that fails is an error naming it, not a silent
 * step to the next. */
START_TEST(chain_errors)
{
	struct aws_chain *c = NULL;
	char p[PATH_MAX], *err = NULL;

	providers_from(WEB);
	fxc_write_text(at("web-token", p, sizeof(p)), "a-wrong-token\n");
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -EACCES);
	ck_assert_ptr_nonnull(strstr(err, "web identity"));
	ck_assert_ptr_null(strstr(err, "a-wrong-token"));
	free(err);
	err = NULL;
	unsetenv("AWS_ROLE_ARN");
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "AWS_ROLE_ARN"));
	free(err);
	err = NULL;
	unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	setenv("AWS_PROFILE", "nosuch", 1);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "[nosuch]"));
	free(err);
	err = NULL;
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_CONFIG_FILE");
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	fxc_write_text(at("container-token", p, sizeof(p)), "wrong\n");
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -EACCES);
	ck_assert_ptr_nonnull(strstr(err, "container credentials endpoint"));
	free(err);
	err = NULL;
	/* Plain http to another machine would send the token in clear. */
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.2.3/creds",
	       1);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "use https"));
	free(err);
}
END_TEST

/* role_arn with credential_source: AssumeRole signed with the
 * container's (expiring, token-carrying) keys; a source_profile loop is
 * an error, not a hang. */
START_TEST(role_sources)
{
	struct aws_chain *c = NULL;
	char p[PATH_MAX], *err = NULL;
	long assumed;

	providers_from(PROFILE);
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	fxc_write_text(at("config", p, sizeof(p)),
		       "[profile ecs]\nrole_arn = arn:aws:iam::1:role/e\n"
		       "credential_source = EcsContainer\n"
		       "[profile a]\nrole_arn = arn:aws:iam::1:role/a\n"
		       "source_profile = b\n"
		       "[profile b]\nrole_arn = arn:aws:iam::1:role/b\n"
		       "source_profile = a\n");
	setenv("AWS_PROFILE", "ecs", 1);
	assumed = stat_of("assume_role");
	ck_assert_msg(aws_chain_open(NULL, "us-east-1", fe, &c, &err) == 0,
		      "%s", err ? err : "?");
	ck_assert_int_eq(stat_of("assume_role"), assumed + 1);
	aws_chain_free(c);
	ck_assert_int_eq(aws_chain_open("a", "us-east-1", fe, &c, &err),
			 -ELOOP);
	ck_assert_ptr_nonnull(strstr(err, "loop"));
	free(err);
}
END_TEST

/* Relative token files are read from where the chain was opened, also
 * after the daemon moved to "/". */
START_TEST(relative_token_file)
{
	struct aws_chain *c = NULL;
	struct aws_keys *k = calloc(1, sizeof(*k));
	char *err = NULL, *cwd = getcwd(NULL, 0);
	unsigned serial;

	ck_assert_ptr_nonnull(k);
	ck_assert_ptr_nonnull(cwd);
	providers_from(WEB);
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "web-token", 1);
	ck_assert_int_eq(chdir(work), 0);
	ck_assert_msg(aws_chain_open(NULL, "us-east-1", fe, &c, &err) == 0,
		      "%s", err ? err : "?");
	ck_assert_int_eq(chdir("/"), 0);
	aws_chain_get(c, k, &serial);
	ck_assert(aws_chain_refused(c, serial));
	ck_assert_int_eq(chdir(cwd), 0);
	aws_chain_free(c);
	free(cwd);
	free(k);
}
END_TEST

/* A metadata server that refuses the IMDSv2 token: an error that says so,
 * and no IMDSv1 request. */
START_TEST(imds_v1_refused)
{
	struct aws_chain *c = NULL;
	char *err = NULL;

	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", v1_url, 1);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err),
			 -EACCES);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err, "IMDSv1") && strstr(err, "IMDSv2"), "%s",
		      err);
	ck_assert_int_eq(standin_get(v1_url, "/_standin/stats", "imds_v1_gets"),
			 0);
	free(err);
}
END_TEST

/* Renewed on its own thread before expiry; a refusal renews once. */
START_TEST(renewal)
{
	struct aws_chain *c = NULL;
	struct aws_keys *k = calloc(1, sizeof(*k));
	char *err = NULL, first[AWS_KEY_MAX];
	unsigned s0, s1, s2;
	uint64_t r0, r1, f0, f1, t0, seen_ms;
	long issued;
	int waited = 0;

	ck_assert_ptr_nonnull(k);
	providers_from(WEB);
	creds_renew_counts(&r0, &f0);
	/* Before the keys are issued: a renewal seen less than half their
	 * life (less a second, the expiry's granularity) after this came too
	 * early, however slow this machine is (slowness only adds). */
	t0 = now_ns();
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err), 0);
	aws_chain_get(c, k, &s0);
	snprintf(first, sizeof(first), "%s", k->access_key);
	/* At half of the 10 s life, nobody asking (60 s only stop a
	 * hang). */
	do {
		usleep(100000);
		aws_chain_get(c, k, &s1);
	} while (s1 == s0 && ++waited < 600);
	seen_ms = (now_ns() - t0) / 1000000;
	ck_assert_msg(s1 != s0, "not renewed in 60 s");
	ck_assert_str_ne(k->access_key, first);
	ck_assert_msg(seen_ms >= (LIFETIME_S / 2 - 1) * 1000,
		      "renewed %llu ms after the keys were issued, before "
		      "half their life",
		      (unsigned long long)seen_ms);
	creds_renew_counts(&r1, &f1);
	ck_assert_uint_ge(r1, r0 + 1);
	ck_assert_uint_eq(f1, f0);

	/* Refused: renewed at once, and only once for many refusals. */
	issued = stat_of("issued");
	ck_assert(aws_chain_refused(c, s1));
	ck_assert(aws_chain_refused(c, s1));
	aws_chain_get(c, k, &s2);
	ck_assert_uint_ne(s2, s1);
	ck_assert_int_eq(stat_of("issued"), issued + 1);
	aws_chain_free(c);

	/* Static keys are never renewed: a refusal is final. */
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err), 0);
	aws_chain_get(c, k, &s0);
	ck_assert(!aws_chain_refused(c, s0));
	aws_chain_free(c);
	free(k);
}
END_TEST

/* A creds_renew_fn handing out credentials that last to the end of the
 * next second (issued just after a second begins: they live about 1 s),
 * noting each renewal that began once the previous ones had expired. */
struct one_second {
	int calls, late;
	int64_t expires; /* of the last handed out */
};

static int one_second_fn(void *arg, void *blob, int64_t *expires,
			 char **err)
{
	struct one_second *o = arg;
	struct timespec ts;

	(void)err;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (o->expires && ts.tv_sec >= o->expires)
		o->late++;
	usleep((useconds_t)((1000000000L - ts.tv_nsec) / 1000 + 20000));
	clock_gettime(CLOCK_REALTIME, &ts); /* time() may lag by a tick */
	*expires = (int64_t)ts.tv_sec + 1;
	memcpy(blob, expires, sizeof(*expires));
	__atomic_store_n(&o->expires, *expires, __ATOMIC_RELEASE);
	__atomic_add_fetch(&o->calls, 1, __ATOMIC_RELEASE);
	return 0;
}

/* Credentials of a second are renewed at half their life, before they
 * expire (not when their whole seconds run out). */
START_TEST(renewal_subsecond)
{
	struct one_second o = {0};
	struct creds_renew *r = NULL;
	char *err = NULL;
	int64_t got;
	unsigned serial;
	int waited = 0;

	ck_assert_int_eq(creds_renew_new(sizeof(got), one_second_fn, &o,
					 "test credentials", 0, &r, &err),
			 0);
	while (__atomic_load_n(&o.calls, __ATOMIC_ACQUIRE) < 4 &&
	       ++waited < 300)
		usleep(50000);
	creds_renew_get(r, &got, &serial);
	creds_renew_free(r);
	ck_assert_msg(o.calls >= 4, "%d renewals in 15 s", o.calls - 1);
	ck_assert_int_gt(got, 0); /* what fn wrote, published */
	ck_assert_msg(o.late == 0, "%d of %d renewals began after expiry",
		      o.late, o.calls - 1);
}
END_TEST

/* A renewal that fails is retried after a backoff while the current keys
 * stay in use, and counted. */
START_TEST(renewal_fails_then_recovers)
{
	struct aws_chain *c = NULL;
	struct aws_keys *k = calloc(1, sizeof(*k));
	char *err = NULL, first[AWS_KEY_MAX];
	unsigned s0, s1;
	uint64_t r0, r1, f0, f1;
	int waited = 0;

	ck_assert_ptr_nonnull(k);
	providers_from(CONTAINER);
	ck_assert_int_eq(aws_chain_open(NULL, "us-east-1", fe, &c, &err), 0);
	ck_assert_ptr_nonnull(strstr(aws_chain_describe(c), "container"));
	aws_chain_get(c, k, &s0);
	snprintf(first, sizeof(first), "%s", k->access_key);
	creds_renew_counts(&r0, &f0);
	/* The first renewal's request and its one retry fail. */
	standin_get(url, "/_standin/fail?count=2", NULL);
	do {
		usleep(100000);
		aws_chain_get(c, k, &s1);
		creds_renew_counts(&r1, &f1);
		/* Until a renewal works, the current keys stay. */
		if (s1 == s0)
			ck_assert_str_eq(k->access_key, first);
	} while (s1 == s0 && ++waited < 150);
	ck_assert_msg(s1 != s0, "not renewed in 15 s");
	ck_assert_uint_ge(f1, f0 + 1);
	ck_assert_uint_ge(r1, r0 + 1);
	aws_chain_free(c);
	free(k);
}
END_TEST

/* The S3 source through the chain: signed with the stand-in's expiring
 * keys; revoked keys (400 ExpiredToken) are renewed once and the request
 * made again. */
START_TEST(s3_expired_renews)
{
	struct source_options opt = {.endpoint = url};
	struct source *src = NULL;
	struct source_object o;
	char *err = NULL;
	long refused;

	providers_from(WEB);
	ck_assert_msg(source_open("s3://bucket", &opt, fe, &src, &err) == 0,
		      "%s", err ? err : "?");
	standin_get(url, "/_standin/revoke", NULL);
	refused = stat_of("expired_refused");
	ck_assert_int_eq(src->ops->stat(src, "f000", &o), 0);
	ck_assert_uint_eq(o.size, FILE_SIZE);
	ck_assert_int_eq(stat_of("expired_refused"), refused + 1);
	source_close(src);
}
END_TEST

/* Reads through a mount for a minute while its credentials expire every
 * 10 s: not one failed read, and the renewals counted. */
START_TEST(mount_outlives_credentials)
{
	const char *const opts[] = {"--endpoint", url, "--retries", "1", NULL};
	struct fx_mount m;
	char *stats, name[16], path[FX_MOUNT_PATH + 16];
	uint64_t t0, got = 0;
	struct stat st;
	long refused;
	int i = 0;

	if (fx_fuse_missing()) {
		fx_skip("%s", fx_fuse_missing());
		return;
	}
	providers_from(CONTAINER);
	/* The container endpoint: what ECS and EKS Pod Identity give. */
	fx_mount_init(&m, work, "creds");
	if (fx_mount_start(&m, "s3://bucket", opts, NULL)) {
		fx_sh("cat '%s' >&2", m.log);
		ck_abort_msg("the mount did not come up");
	}
	t0 = now_ns();
	while (now_ns() - t0 < MOUNT_READ_S * 1000000000ull) {
		long long bad;

		snprintf(name, sizeof(name), "f%03d", i % (FILES - 1));
		bad = fx_read_seed(m.dir, name, (uint32_t)(i % (FILES - 1)),
				   &got);
		ck_assert_msg(bad == 0 && got == FILE_SIZE,
			      "%s after %.1f s: %lld bytes differ, %llu read "
			      "(errno %d); see %s",
			      name, (double)(now_ns() - t0) / 1e9, bad,
			      (unsigned long long)got, errno, m.log);
		i++;
		usleep(500000);
	}
	stats = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(stats);
	ck_assert_msg(fx_stats_num(stats, "credentials", "renewals") >=
			  MOUNT_READ_S / LIFETIME_S,
		      "%s", stats);
	free(stats);
	/* Revoked early: the chunk's GET gets 400 ExpiredToken, renews once
	 * and is asked again; the reader sees nothing of it.  (Listed
	 * first, so that the listing does not renew them.) */
	snprintf(path, sizeof(path), "%s/late/last", m.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	standin_get(url, "/_standin/revoke", NULL);
	refused = stat_of("expired_refused");
	ck_assert_int_eq(fx_read_seed(m.dir, "late/last", FILES - 1, &got), 0);
	ck_assert_uint_eq(got, FILE_SIZE);
	ck_assert_int_ge(stat_of("expired_refused"), refused + 1);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(
	    fx_sh("grep -q 'renewing credentials.*failed' '%s'", m.log), 1);
}
END_TEST

/* The same through `wharf mount`: refused with the fix named; with -o
 * insecure_credentials it mounts, and reads what the origin holds. */
START_TEST(mount_insecure_credentials)
{
	const char *host = tap_other_address();
	const char *const opts[] = {"--endpoint", NULL, "--retries", "1", NULL};
	const char *const optin[] = {"-o", "insecure_credentials", NULL};
	struct fx_mount m;
	char u[256];
	uint64_t got = 0;
	struct tap t;
	bool marked;

	if (fx_fuse_missing()) {
		fx_skip("%s", fx_fuse_missing());
		return;
	}
	if (!host) {
		fx_skip("%s", TAP_NO_OTHER_ADDRESS);
		return;
	}
	tap_start(&t, port, "AWS4-HMAC-SHA256");
	snprintf(u, sizeof(u), "http://%s:%d", host, t.port);
	((const char **)opts)[1] = u;
	providers_from(CONTAINER);
	fx_mount_init(&m, work, "insecure");
	ck_assert_int_ne(fx_mount_start(&m, "s3://bucket", opts, NULL), 0);
	ck_assert_msg(fx_log_has(m.log, "--insecure-credentials"),
		      "no fix named; see %s", m.log);
	ck_assert_int_eq(tap_took(&t, &marked), 0);
	fx_mount_ok(fx_mount_start(&m, "s3://bucket", opts, optin), &m);
	ck_assert_int_eq(fx_read_seed(m.dir, "f000", 0, &got), 0);
	ck_assert_uint_eq(got, FILE_SIZE);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_ge(tap_took(&t, &marked), 1);
	tap_stop(&t);
}
END_TEST

/* ---- GCS workload identity federation ---- */

static void gcs_header(const char *file_json, const char *want)
{
	struct gcp_creds_options o = {0};
	struct gcp_creds *c = NULL;
	char p[PATH_MAX], h[GCP_TOKEN_MAX + 64], *err = NULL;
	unsigned serial;

	fxc_write_text(at("external.json", p, sizeof(p)), file_json);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", p, 1);
	ck_assert_msg(gcp_creds_new(&o, fe, &c, &err) == 0, "%s",
		      err ? err : "?");
	ck_assert_ptr_nonnull(
	    strstr(gcp_creds_describe(c), "workload identity federation"));
	ck_assert_int_eq(gcp_creds_header(c, h, sizeof(h), &serial), 0);
	ck_assert_msg(!strncmp(h, want, strlen(want)), "%s", h);
	/* A refused token is exchanged again. */
	ck_assert(gcp_creds_refused(c, serial));
	ck_assert_int_eq(gcp_creds_header(c, h, sizeof(h), &serial), 0);
	ck_assert_msg(!strncmp(h, want, strlen(want)), "%s", h);
	gcp_creds_free(c);
}

START_TEST(gcs_external_account)
{
	char p[PATH_MAX], text[PATH_MAX + 2048], *err = NULL;
	long sts = stat_of("gcs_sts"), imp = stat_of("gcs_impersonate");

	fxc_write_text(at("subject", p, sizeof(p)), "gcs-subject\n");
	/* A file's subject token, exchanged, then a service account's. */
	snprintf(text, sizeof(text),
		 "{\"type\": \"external_account\", \"audience\": "
		 "\"//iam.googleapis.com/projects/1/locations/global/"
		 "workloadIdentityPools/p/providers/x\", "
		 "\"subject_token_type\": "
		 "\"urn:ietf:params:oauth:token-type:jwt\", "
		 "\"token_url\": \"%s/gcs/token\", "
		 "\"service_account_impersonation_url\": "
		 "\"%s/gcs/impersonate\", "
		 "\"credential_source\": {\"file\": \"%s\"}}",
		 url, url, p);
	gcs_header(text, "Authorization: Bearer gcs-sa-");
	ck_assert_int_eq(stat_of("gcs_sts"), sts + 2);
	ck_assert_int_eq(stat_of("gcs_impersonate"), imp + 2);
	/* A URL's subject token, a member of its JSON, with headers. */
	snprintf(text, sizeof(text),
		 "{\"type\": \"external_account\", \"audience\": \"aud\", "
		 "\"subject_token_type\": "
		 "\"urn:ietf:params:oauth:token-type:jwt\", "
		 "\"token_url\": \"%s/gcs/token\", "
		 "\"credential_source\": {\"url\": \"%s/gcs/subject\", "
		 "\"headers\": {\"Metadata\": \"yes\"}, \"format\": "
		 "{\"type\": \"json\", \"subject_token_field_name\": "
		 "\"id_token\"}}}",
		 url, url);
	gcs_header(text, "Authorization: Bearer gcs-sts-");
	/* Tokens go to https only, or to this machine. */
	snprintf(text, sizeof(text),
		 "{\"type\": \"external_account\", \"audience\": \"aud\", "
		 "\"subject_token_type\": \"jwt\", "
		 "\"token_url\": \"http://sts.example.com/v1/token\", "
		 "\"credential_source\": {\"file\": \"%s\"}}",
		 p);
	fxc_write_text(at("external.json", p, sizeof(p)), text);
	ck_assert_int_eq(gcp_key_file_check(p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "use https"));
	free(err);
}
END_TEST

/* ---- The parsers (their fuzz targets are tests/fuzz/aws-*.c). */

START_TEST(parsers)
{
	static const char sts[] =
	    "<AssumeRoleResponse><AssumeRoleResult><Credentials>"
	    "<AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>s/k+"
	    "</SecretAccessKey><SessionToken>t&amp;1</SessionToken>"
	    "<Expiration>2030-01-02T03:04:05.123Z</Expiration>"
	    "</Credentials></AssumeRoleResult></AssumeRoleResponse>";
	static const char imds[] =
	    "{\"Code\": \"Success\", \"AccessKeyId\": \"ASIA2\", "
	    "\"SecretAccessKey\": \"s2\", \"Token\": \"t2\", "
	    "\"Expiration\": \"2030-01-02T03:04:05+01:00\"}";
	static const char forged[] =
	    "{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"s\", "
	    "\"Token\": \"a\\r\\nX: y\"}";
	static const char imp[] = "{\"accessToken\": \"ya29\", "
				  "\"expireTime\": \"2999-01-01T00:00:00Z\"}";
	struct aws_keys *k = calloc(1, sizeof(*k));
	int64_t exp;
	char *err = NULL, tok[GCP_TOKEN_MAX];
	uint64_t life;

	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(aws_sts_parse(sts, strlen(sts), k, &exp, "t", &err),
			 0);
	ck_assert_str_eq(k->access_key, "ASIA1");
	ck_assert_str_eq(k->secret_key, "s/k+");
	ck_assert_str_eq(k->token, "t&1");
	ck_assert_int_eq(exp, 1893553445);
	ck_assert_int_eq(
	    aws_sts_parse("<ErrorResponse/>", 16, k, &exp, "t", &err), -EINVAL);
	free(err);
	err = NULL;
	ck_assert_int_eq(
	    aws_json_parse(imds, strlen(imds), false, k, &exp, "t", &err), 0);
	ck_assert_str_eq(k->token, "t2");
	ck_assert_int_eq(exp, 1893553445 - 3600);
	/* credential_process wants Version 1. */
	ck_assert_int_eq(
	    aws_json_parse(imds, strlen(imds), true, k, &exp, "t", &err),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "Version"));
	free(err);
	err = NULL;
	/* A token with a line break could forge a header. */
	ck_assert_int_eq(
	    aws_json_parse(forged, strlen(forged), false, k, &exp, "t", &err),
	    -EINVAL);
	ck_assert_ptr_null(strstr(err, "X: y"));
	free(err);
	err = NULL;
	ck_assert_int_eq(
	    gcp_impersonation_json(imp, strlen(imp), tok, &life, "t", &err), 0);
	ck_assert_str_eq(tok, "ya29");
	ck_assert_uint_gt(life, 3600);
	free(k);
}
END_TEST

/* The objects and the stand-ins, once for every test. */
static void start_all(void)
{
	char p[PATH_MAX];

	work = fx_tmpdir("creds");
	data = strdupf("%s/data", work);
	snprintf(p, sizeof(p), "%s/late", data);
	ck_assert_int_eq(fx_mkdirs(p), 0);
	/* f000... at the root; the last in late/, out of the walk's reach
	 * (read-ahead goes on into a directory's next files). */
	for (int i = 0; i < FILES; i++) {
		if (i < FILES - 1)
			snprintf(p, sizeof(p), "%s/f%03d", data, i);
		else
			snprintf(p, sizeof(p), "%s/late/last", data);
		ck_assert_int_eq(fx_write_file(p, FILE_SIZE, (uint32_t)i), 0);
	}
	standin = start_standin(&port, url, sizeof(url), "");
	v1only =
	    start_standin(&v1_port, v1_url, sizeof(v1_url), "imds-v1-only");
}

static void stop_all(void)
{
	if (standin > 0)
		fx_stop(standin, 3000);
	if (v1only > 0)
		fx_stop(v1only, 3000);
	if (work) {
		fx_unmount_leftovers(work);
		fx_rmtree(work);
	}
	free(data);
	free(work);
}

static Suite *suite(void)
{
	Suite *s = suite_create("creds");
	TCase *tc = tcase_create("standin");

	tcase_add_unchecked_fixture(tc, start_all, stop_all);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, parsers);
	tcase_add_test(tc, chain_order);
	tcase_add_test(tc, chain_errors);
	tcase_add_test(tc, imds_v1_refused);
	tcase_add_test(tc, role_sources);
	tcase_add_test(tc, relative_token_file);
	tcase_add_test(tc, renewal);
	tcase_add_test(tc, renewal_fails_then_recovers);
	tcase_add_test(tc, renewal_subsecond);
	tcase_add_test(tc, s3_expired_renews);
	tcase_add_test(tc, gcs_external_account);
	tcase_add_test(tc, mount_outlives_credentials);
	tcase_add_test(tc, mount_insecure_credentials);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	fx_need(access("/usr/bin/python3", X_OK)
		    ? "/usr/bin/python3 (for tests/aws-standin.py) is absent"
		    : NULL);
	sr = srunner_create(suite());
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
