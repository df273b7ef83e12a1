/*
 * fs/sigv4 against AWS's published Signature Version 4 examples, and
 * fs/creds_aws (environment, shared credentials file, region, endpoint).
 *
 * The test vectors are data from AWS's SigV4 test suite (credentials
 * AKIDEXAMPLE, 2015-08-30, us-east-1, service "service") and from the S3
 * API reference's signing examples (AKIAIOSFODNN7EXAMPLE, 2013-05-24).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "creds_aws.h"
#include "fixture.h"
#include "sigv4.h"

#define SUITE_KEY "AKIDEXAMPLE"
#define SUITE_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SUITE_DATE "20150830T123600Z"
#define SUITE_HOST "example.amazonaws.com"

static struct sigv4_out out;

/* Signs a request of the suite with host, x-amz-date and `extra`. */
static void suite_sign(const char *method, const char *path, const char *query,
		       const struct sigv4_header *extra, size_t nextra,
		       const char *payload_hash)
{
	struct sigv4_header h[8] = {{"Host", SUITE_HOST},
				    {"X-Amz-Date", SUITE_DATE}};
	struct sigv4_in in = {
	    .method = method,
	    .path = path,
	    .query = query,
	    .headers = h,
	    .nheaders = 2 + nextra,
	    .payload_hash = payload_hash ? payload_hash : SIGV4_EMPTY_SHA256,
	    .amz_date = SUITE_DATE,
	    .region = "us-east-1",
	    .service = "service",
	    .access_key = SUITE_KEY,
	    .secret_key = SUITE_SECRET,
	};

	ck_assert_uint_le(nextra, 6);
	if (nextra)
		memcpy(h + 2, extra, nextra * sizeof(*extra));
	ck_assert_int_eq(sigv4_sign(&in, &out), 0);
}

START_TEST(test_get_vanilla)
{
	suite_sign("GET", "/", NULL, NULL, 0, NULL);
	ck_assert_str_eq(out.creq, "GET\n/\n\n"
				   "host:example.amazonaws.com\n"
				   "x-amz-date:20150830T123600Z\n\n"
				   "host;x-amz-date\n" SIGV4_EMPTY_SHA256);
	ck_assert_str_eq(out.string_to_sign,
			 "AWS4-HMAC-SHA256\n20150830T123600Z\n"
			 "20150830/us-east-1/service/aws4_request\n"
			 "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1"
			 "c25292927e63");
	ck_assert_str_eq(out.signature, "5fa00fa31553b73ebf1942676e86291e8372"
					"ff2a2260956d9b8aae1d763fbf31");
	ck_assert_str_eq(
	    out.authorization,
	    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/"
	    "service/aws4_request, SignedHeaders=host;x-amz-date, "
	    "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1"
	    "d763fbf31");
}
END_TEST

START_TEST(test_query_order)
{
	suite_sign("GET", "/", "Param2=value2&Param1=value1", NULL, 0, NULL);
	ck_assert_ptr_nonnull(strstr(out.creq, "\n/\nParam1=value1&Param2="
					       "value2\nhost:"));
	ck_assert_str_eq(out.signature, "b97d918cfa904a5beff61c982a1b6f458b79"
					"9221646efd99d3219ec94cdf2500");

	/* Same name twice: ordered by value. */
	suite_sign("GET", "/", "Param1=value2&Param1=value1", NULL, 0, NULL);
	ck_assert_ptr_nonnull(strstr(out.creq, "\nParam1=value1&Param1=value2"
					       "\n"));
	ck_assert_str_eq(out.signature, "5772eed61e12b33fae39ee5e7012498b51d5"
					"6abc0abb7c60486157bd471c4694");

	/* A raw UTF-8 name is encoded byte by byte. */
	suite_sign("GET", "/", "\xe1\x88\xb4=bar", NULL, 0, NULL);
	ck_assert_ptr_nonnull(strstr(out.creq, "\n%E1%88%B4=bar\n"));
	ck_assert_str_eq(out.signature, "2cdec8eed098649ff3a119c94853b13c643b"
					"cf08f8b0a1d91e12c9027818dd04");
}
END_TEST

START_TEST(test_headers)
{
	const struct sigv4_header trim[] = {{"My-Header1", " value1"},
					    {"My-Header2", "\"a   b   c\""}};
	const struct sigv4_header dup[] = {{"My-Header1", "value2"},
					   {"My-Header1", "value2"},
					   {"My-Header1", "value1"}};
	const struct sigv4_header order[] = {{"My-Header1", "value4"},
					     {"My-Header1", "value1"},
					     {"My-Header1", "value3"},
					     {"My-Header1", "value2"}};

	suite_sign("GET", "/", NULL, trim, 2, NULL);
	ck_assert_ptr_nonnull(strstr(out.creq, "\nmy-header1:value1\n"
					       "my-header2:\"a b c\"\n"));
	ck_assert_str_eq(out.signed_headers,
			 "host;my-header1;my-header2;x-amz-date");
	ck_assert_str_eq(out.signature, "acc3ed3afb60bb290fc8d2dd0098b9911fca"
					"a05412b367055dee359757a9c736");

	suite_sign("GET", "/", NULL, dup, 3, NULL);
	ck_assert_ptr_nonnull(
	    strstr(out.creq, "\nmy-header1:value2,value2,value1\n"));
	ck_assert_str_eq(out.signature, "c9d5ea9f3f72853aea855b47ea873832890d"
					"bdd183b4468f858259531a5138ea");

	suite_sign("GET", "/", NULL, order, 4, NULL);
	ck_assert_str_eq(out.signature, "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5"
					"e634ec47601a50643f830c755c01");
}
END_TEST

START_TEST(test_unreserved_path_and_post)
{
	const struct sigv4_header form[] = {
	    {"Content-Type", "application/x-www-form-urlencoded"}};
	char hash[65];

	suite_sign("GET",
		   "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
		   "qrstuvwxyz",
		   NULL, NULL, 0, NULL);
	ck_assert_str_eq(out.signature, "07ef7494c76fa4850883e2b006601f940f8a"
					"34d404d0cfa977f52a65bbf5f24f");

	sigv4_sha256_hex("Param1=value1", 13, hash);
	ck_assert_str_eq(hash, "9095672bbd1f56dfc5b65f3e153adc8731a4a65419232"
			       "9106275f4c7b24d0b6e");
	suite_sign("POST", "/", NULL, form, 1, hash);
	ck_assert_str_eq(out.signed_headers, "content-type;host;x-amz-date");
	ck_assert_str_eq(out.signature, "ff11897932ad3f4e8b18135d722051e5ac45"
					"fc38421b1da7b9d196a0fe09473a");
}
END_TEST

START_TEST(test_session_token)
{
	const struct sigv4_header tok[] = {
	    {"X-Amz-Security-Token", "6e86291e8372ff2a2260956d9b8aae1d763fbf31"
				     "5fa00fa31553b73ebf194267"}};

	suite_sign("GET", "/", NULL, tok, 1, NULL);
	ck_assert_str_eq(out.signed_headers,
			 "host;x-amz-date;x-amz-security-token");
	ck_assert_str_eq(out.signature, "07ec1639c89043aa0e3e2de82b96708f198c"
					"ceab042d4a97044c66dd9f74e7f8");
}
END_TEST

/* The S3 reference's examples: a ranged GET and a bucket listing. */
static void s3_sign(const char *path, const char *query,
		    const struct sigv4_header *h, size_t n)
{
	struct sigv4_in in = {
	    .method = "GET",
	    .path = path,
	    .query = query,
	    .headers = h,
	    .nheaders = n,
	    .payload_hash = SIGV4_EMPTY_SHA256,
	    .amz_date = "20130524T000000Z",
	    .region = "us-east-1",
	    .service = "s3",
	    .access_key = "AKIAIOSFODNN7EXAMPLE",
	    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	};

	ck_assert_int_eq(sigv4_sign(&in, &out), 0);
}

START_TEST(test_s3_examples)
{
	const struct sigv4_header get[] = {
	    {"Host", "examplebucket.s3.amazonaws.com"},
	    {"Range", "bytes=0-9"},
	    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
	    {"x-amz-date", "20130524T000000Z"}};

	s3_sign("/test.txt", NULL, get, 4);
	ck_assert_str_eq(
	    out.creq,
	    "GET\n/test.txt\n\n"
	    "host:examplebucket.s3.amazonaws.com\n"
	    "range:bytes=0-9\n"
	    "x-amz-content-sha256:" SIGV4_EMPTY_SHA256 "\n"
	    "x-amz-date:20130524T000000Z\n\n"
	    "host;range;x-amz-content-sha256;x-amz-date\n" SIGV4_EMPTY_SHA256);
	ck_assert_str_eq(out.string_to_sign,
			 "AWS4-HMAC-SHA256\n20130524T000000Z\n"
			 "20130524/us-east-1/s3/aws4_request\n"
			 "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc"
			 "43964946972");
	ck_assert_str_eq(out.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd4"
					"4f0170aba48dd91039c6036bdb41");

	/* ListObjects: the query sorts, a bare name gets "=". */
	s3_sign("/", "max-keys=2&prefix=J", get + 0, 1);
	{
		const struct sigv4_header list[] = {
		    {"Host", "examplebucket.s3.amazonaws.com"},
		    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
		    {"x-amz-date", "20130524T000000Z"}};

		s3_sign("/", "prefix=J&max-keys=2", list, 3);
		ck_assert_ptr_nonnull(
		    strstr(out.creq, "\n/\nmax-keys=2&prefix=J\n"));
		ck_assert_str_eq(out.signature,
				 "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59d"
				 "b6670ed5711ef69dc6f7");
		s3_sign("/", "lifecycle", list, 3);
		ck_assert_ptr_nonnull(strstr(out.creq, "\n/\nlifecycle=\n"));
		ck_assert_str_eq(out.signature,
				 "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f"
				 "91ac7a200a0136783543");
	}
}
END_TEST

START_TEST(test_wrong_secret_and_errors)
{
	struct sigv4_header h[] = {{"Host", SUITE_HOST},
				   {"X-Amz-Date", SUITE_DATE}};
	struct sigv4_in in = {
	    .method = "GET",
	    .path = "/",
	    .headers = h,
	    .nheaders = 2,
	    .payload_hash = SIGV4_EMPTY_SHA256,
	    .amz_date = SUITE_DATE,
	    .region = "us-east-1",
	    .service = "service",
	    .access_key = SUITE_KEY,
	    .secret_key = "not-the-secret",
	};
	char long_path[SIGV4_CREQ_MAX + 8];

	ck_assert_int_eq(sigv4_sign(&in, &out), 0);
	ck_assert_str_ne(out.signature, "5fa00fa31553b73ebf1942676e86291e8372"
					"ff2a2260956d9b8aae1d763fbf31");
	/* Another region changes the scope and the signature. */
	in.secret_key = SUITE_SECRET;
	in.region = "eu-west-1";
	ck_assert_int_eq(sigv4_sign(&in, &out), 0);
	ck_assert_ptr_nonnull(strstr(out.authorization, "/eu-west-1/"));
	ck_assert_str_ne(out.signature, "5fa00fa31553b73ebf1942676e86291e8372"
					"ff2a2260956d9b8aae1d763fbf31");

	in.amz_date = "2015";
	ck_assert_int_eq(sigv4_sign(&in, &out), -EINVAL);
	in.amz_date = SUITE_DATE;
	in.secret_key = NULL;
	ck_assert_int_eq(sigv4_sign(&in, &out), -EINVAL);
	in.secret_key = SUITE_SECRET;
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	in.path = long_path;
	ck_assert_int_eq(sigv4_sign(&in, &out), -ENAMETOOLONG);
}
END_TEST

START_TEST(test_encode_and_date)
{
	char buf[64], d[17];

	ck_assert_int_eq(
	    sigv4_uri_encode("a b/c~d+é", 10, true, buf, 0, sizeof(buf)),
	    (int)strlen("a%20b/c~d%2B%C3%A9"));
	ck_assert_str_eq(buf, "a%20b/c~d%2B%C3%A9");
	ck_assert_int_eq(sigv4_uri_encode("x/y", 3, false, buf, 0, sizeof(buf)),
			 5);
	ck_assert_str_eq(buf, "x%2Fy");
	ck_assert_int_eq(sigv4_uri_encode("////", 4, false, buf, 0, 8),
			 -ENAMETOOLONG);
	sigv4_amz_date(1440938160, d);
	ck_assert_str_eq(d, SUITE_DATE);
	/* An already encoded path is signed as sent, not encoded twice. */
	suite_sign("GET", "/a%20b", NULL, NULL, 0, NULL);
	ck_assert_ptr_nonnull(strstr(out.creq, "GET\n/a%20b\n"));
}
END_TEST

/* creds_aws: where credentials, region and endpoint come from. */

static char *tmp;

static void clear_env(void)
{
	static const char *const vars[] = {"AWS_ACCESS_KEY_ID",
					   "AWS_SECRET_ACCESS_KEY",
					   "AWS_SESSION_TOKEN",
					   "AWS_PROFILE",
					   "AWS_SHARED_CREDENTIALS_FILE",
					   "AWS_REGION",
					   "AWS_DEFAULT_REGION",
					   "AWS_ENDPOINT_URL_S3",
					   "AWS_ENDPOINT_URL"};
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void creds_setup(void)
{
	clear_env();
	tmp = fx_tmpdir("sigv4");
	ck_assert_ptr_nonnull(tmp);
	setenv("HOME", tmp, 1);
}

static void creds_teardown(void)
{
	clear_env();
	fx_rmtree(tmp);
	free(tmp);
	tmp = NULL;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_creds_env)
{
	struct aws_creds c;
	char *err = NULL;

	ck_assert_int_eq(aws_creds_load(NULL, &c, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, ".aws/credentials"));
	free(err);
	err = NULL;

	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	ck_assert_int_eq(aws_creds_load(NULL, &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "AWS_SECRET_ACCESS_KEY"));
	free(err);
	err = NULL;

	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	ck_assert_int_eq(aws_creds_load(NULL, &c, &err), 0);
	ck_assert_str_eq(c.access_key, "AKIDENV");
	ck_assert_str_eq(c.secret_key, "envsecret");
	ck_assert_str_eq(c.session_token, "envtoken");
	ck_assert_str_eq(c.origin, "the environment");
	aws_creds_clear(&c);
	ck_assert_ptr_null(c.secret_key);
}
END_TEST

START_TEST(test_creds_file)
{
	struct aws_creds c;
	char path[512], *err = NULL;

	snprintf(path, sizeof(path), "%s/.aws", tmp);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/.aws/credentials", tmp);
	write_text(path, "# comment\n[default]\naws_access_key_id = AKIDDEF\n"
			 "aws_secret_access_key=defsecret\n\n"
			 "[profile work]\n ; note\naws_access_key_id=AKIDWORK\n"
			 "aws_secret_access_key = work secret \n"
			 "aws_session_token = worktoken\n"
			 "[broken]\naws_access_key_id=AKIDBROKEN\n");

	ck_assert_int_eq(aws_creds_load(NULL, &c, &err), 0);
	ck_assert_str_eq(c.access_key, "AKIDDEF");
	ck_assert_str_eq(c.secret_key, "defsecret");
	ck_assert_ptr_null(c.session_token);
	ck_assert_ptr_nonnull(strstr(c.origin, "[default]"));
	aws_creds_clear(&c);

	setenv("AWS_PROFILE", "work", 1);
	ck_assert_int_eq(aws_creds_load(NULL, &c, &err), 0);
	ck_assert_str_eq(c.access_key, "AKIDWORK");
	ck_assert_str_eq(c.secret_key, "work secret");
	ck_assert_str_eq(c.session_token, "worktoken");
	aws_creds_clear(&c);

	/* The environment's keys win over AWS_PROFILE ... */
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	ck_assert_int_eq(aws_creds_load(NULL, &c, &err), 0);
	ck_assert_str_eq(c.access_key, "AKIDENV");
	aws_creds_clear(&c);
	/* ... and an explicit --profile wins over the environment. */
	ck_assert_int_eq(aws_creds_load("default", &c, &err), 0);
	ck_assert_str_eq(c.access_key, "AKIDDEF");
	aws_creds_clear(&c);

	ck_assert_int_eq(aws_creds_load("broken", &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "[broken]"));
	ck_assert_ptr_null(strstr(err, "defsecret"));
	free(err);
	err = NULL;
	ck_assert_int_eq(aws_creds_load("nosuch", &c, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "[nosuch]"));
	free(err);
	err = NULL;

	/* AWS_SHARED_CREDENTIALS_FILE replaces ~/.aws/credentials. */
	snprintf(path, sizeof(path), "%s/other", tmp);
	write_text(path, "[default]\naws_access_key_id=AKIDOTHER\n"
			 "aws_secret_access_key=othersecret\n");
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	ck_assert_int_eq(aws_creds_load("default", &c, &err), 0);
	ck_assert_str_eq(c.access_key, "AKIDOTHER");
	aws_creds_clear(&c);
}
END_TEST

START_TEST(test_region_endpoint)
{
	ck_assert_str_eq(aws_region(NULL), "us-east-1");
	setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
	ck_assert_str_eq(aws_region(NULL), "eu-west-1");
	setenv("AWS_REGION", "eu-central-1", 1);
	ck_assert_str_eq(aws_region(NULL), "eu-central-1");
	ck_assert_str_eq(aws_region("ap-south-1"), "ap-south-1");

	ck_assert_ptr_null(aws_endpoint(NULL));
	setenv("AWS_ENDPOINT_URL", "http://generic:1", 1);
	ck_assert_str_eq(aws_endpoint(NULL), "http://generic:1");
	setenv("AWS_ENDPOINT_URL_S3", "http://s3only:2", 1);
	ck_assert_str_eq(aws_endpoint(NULL), "http://s3only:2");
	ck_assert_str_eq(aws_endpoint("http://flag:3"), "http://flag:3");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sigv4");
	TCase *tc = tcase_create("sign");
	TCase *tcc = tcase_create("creds");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_get_vanilla);
	tcase_add_test(tc, test_query_order);
	tcase_add_test(tc, test_headers);
	tcase_add_test(tc, test_unreserved_path_and_post);
	tcase_add_test(tc, test_session_token);
	tcase_add_test(tc, test_s3_examples);
	tcase_add_test(tc, test_wrong_secret_and_errors);
	tcase_add_test(tc, test_encode_and_date);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tcc, creds_setup, creds_teardown);
	tcase_add_test(tcc, test_creds_env);
	tcase_add_test(tcc, test_creds_file);
	tcase_add_test(tcc, test_region_endpoint);
	suite_add_tcase(s, tcc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
