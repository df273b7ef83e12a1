/*
 * fs/source_s3 against a real s3rver (npm), through tests/s3-gate.py.
 *
 * What we found about s3rver 3.7: it accepts any SigV4 request whose access
 * key id it knows (S3RVER by default) without checking the signature ("V4
 * signatures have incomplete support"), answers an unknown key id with 403
 * InvalidAccessKeyId, ignores If-Match on GET, and caps max-keys at 1000.
 * So the gate in front of it checks signatures with its own (Python)
 * implementation and answers a stale If-Match with 412, as S3 does; the
 * rest (buckets, objects, listings, ranges) is s3rver's.
 *
 * s3rver is found via $WHARF_S3RVER, else $WHARF_SRCDIR/build/node/
 * node_modules/.bin/s3rver (the quickstart installs it there); the test
 * skips when it is absent.
 */
#include "config.h"

#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fetch.h"
#include "fixture-ck.h"
#include "fixture.h"
#include "log.h"
#include "sigv4.h"
#include "origins.h"
#include "source_s3.h"

#define BUCKET "wharf-test"
#define KEY_ID "S3RVER"
#define SECRET "S3RVER"
#define MANY 1100

static char *work; /* s3rver's data, logs, mountpoints */
static pid_t s3rver_pid = -1, gate_pid = -1;
static int s3rver_port, gate_port;
static char gate_url[64], s3rver_url[64];

static const struct {
	const char *key;
	uint64_t size;
	uint32_t seed;
} objects[] = {
    {"sizes/empty", 0, 1},
    {"sizes/one", 1, 2},
    {"sizes/odd", 3 * 4097 + 1, 3},
    {"sizes/mid", (5u << 20) + 7, 4},
    {"sizes/big", 50u << 20, 5},
    {"nest/top.bin", 100, 6},
    {"nest/space name+plus&amp.bin", 33, 7},
    {"nest/a/x.bin", 200, 8},
    {"nest/a/b/c/deep.bin", 300, 9},
    /* s3rver only finds common prefixes one level down: without this
     * key its listing of nest/a/ would miss b/ (S3 itself would not). */
    {"nest/a/b/mid.bin", 50, 10},
};

/* ---- Talking to the store directly (signed requests of our own). */

struct body {
	char *p;
	size_t len, cap;
};

static size_t keep(char *d, size_t s, size_t n, void *arg)
{
	struct body *b = arg;
	size_t k = s * n;

	if (b->len + k + 1 > b->cap) {
		size_t nc = (b->len + k + 1) * 2;
		char *np = realloc(b->p, nc);

		if (!np)
			return 0;
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, d, k);
	b->len += k;
	b->p[b->len] = '\0';
	return k;
}

/*
 * One signed request to `base` (gate or s3rver): method on "/BUCKET[/key]"
 * with `query`, sending data.  @return the HTTP status; the body in *out
 * when out is not NULL.
 */
static long s3_call(const char *base, const char *method, const char *key,
		    const char *query, const void *data, size_t len,
		    const char *secret, struct body *out)
{
	char path[4096] = "/" BUCKET, url[8192], date[17], host[64];
	char line[2048];
	struct sigv4_header h[3];
	struct sigv4_out *so = malloc(sizeof(*so));
	struct curl_slist *hl = NULL;
	struct body sink = {0};
	CURL *c = curl_easy_init();
	long status = 0;
	size_t pl = strlen(path);
	int n;

	ck_assert_ptr_nonnull(so);
	ck_assert_ptr_nonnull(c);
	if (key) {
		path[pl++] = '/';
		n = sigv4_uri_encode(key, strlen(key), true, path, pl,
				     sizeof(path));
		ck_assert_int_gt(n, 0);
	}
	snprintf(host, sizeof(host), "%s", base + strlen("http://"));
	snprintf(url, sizeof(url), "%s%s%s%s", base, path, query ? "?" : "",
		 query ? query : "");
	sigv4_amz_date((long long)time(NULL), date);
	h[0] = (struct sigv4_header){"Host", host};
	h[1] =
	    (struct sigv4_header){"x-amz-content-sha256", "UNSIGNED-PAYLOAD"};
	h[2] = (struct sigv4_header){"x-amz-date", date};
	{
		struct sigv4_in in = {.method = method,
				      .path = path,
				      .query = query,
				      .headers = h,
				      .nheaders = 3,
				      .payload_hash = "UNSIGNED-PAYLOAD",
				      .amz_date = date,
				      .region = "us-east-1",
				      .service = "s3",
				      .access_key = KEY_ID,
				      .secret_key = secret};

		ck_assert_int_eq(sigv4_sign(&in, so), 0);
	}
	for (int i = 0; i < 3; i++) {
		snprintf(line, sizeof(line), "%s: %s", h[i].name, h[i].value);
		hl = curl_slist_append(hl, line);
	}
	snprintf(line, sizeof(line), "Authorization: %s", so->authorization);
	hl = curl_slist_append(hl, line);
	hl = curl_slist_append(hl, "Expect:");
	hl = curl_slist_append(hl, "Content-Type: application/octet-stream");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (!strcmp(method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, data ? data : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)len);
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out ? out : &sink);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	free(sink.p);
	free(so);
	return status;
}

static void *pattern(uint64_t size, uint32_t seed)
{
	unsigned char *p = malloc(size ? size : 1);

	ck_assert_ptr_nonnull(p);
	for (uint64_t i = 0; i < size; i++)
		p[i] = fx_byte(seed, i);
	return p;
}

static void put_object(const char *key, uint64_t size, uint32_t seed)
{
	void *p = pattern(size, seed);

	ck_assert_int_eq(
	    s3_call(gate_url, "PUT", key, NULL, p, size, SECRET, NULL), 200);
	free(p);
}

/* Makes the gate answer the next count listings with IsTruncated true
 * and the same NextContinuationToken, "stuck". */
static void gate_stuck(int count)
{
	char url[128];
	CURL *c = curl_easy_init();
	long status = 0;

	ck_assert_ptr_nonnull(c);
	snprintf(url, sizeof(url), "%s/_gate/stuck-token?count=%d", gate_url,
		 count);
	curl_easy_setopt(c, CURLOPT_URL, url);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	ck_assert_int_eq(status, 200);
}

/* ---- The servers. */

static void stop_servers(void)
{
	if (gate_pid > 0)
		fx_stop(gate_pid, 3000);
	if (s3rver_pid > 0)
		fx_stop(s3rver_pid, 3000);
	gate_pid = s3rver_pid = -1;
}

static void servers_start(void)
{
	char data[PATH_MAX], log[PATH_MAX], port[16], uport[16];
	char gate[PATH_MAX];
	const char *src = getenv("WHARF_SRCDIR");
	const char *bin = fx_node_bin("WHARF_S3RVER", "s3rver");

	work = fx_tmpdir("s3");
	ck_assert_ptr_nonnull(work);
	snprintf(data, sizeof(data), "%s/data", work);
	ck_assert_int_eq(fx_mkdirs(data), 0);

	s3rver_port = fx_free_port();
	snprintf(port, sizeof(port), "%d", s3rver_port);
	snprintf(log, sizeof(log), "%s/s3rver.log", work);
	{
		char *argv[] = {(char *)bin, "-d",	  data,
				"-a",	     "127.0.0.1", "-p",
				port,	     "--silent",  "--service-endpoint",
				"localhost", NULL};

		/* s3rver makes its continuation tokens with DES, which
		 * OpenSSL 3 keeps in its legacy provider. */
		setenv("NODE_OPTIONS", "--openssl-legacy-provider", 1);
		s3rver_pid = fx_spawn_server(argv, log, s3rver_port, 30000);
		unsetenv("NODE_OPTIONS");
	}
	ck_assert_msg(s3rver_pid > 0, "s3rver did not start");

	gate_port = fx_free_port();
	snprintf(uport, sizeof(uport), "%d", gate_port);
	snprintf(gate, sizeof(gate), "%s/tests/s3-gate.py", src ? src : ".");
	snprintf(log, sizeof(log), "%s/gate.log", work);
	{
		char *argv[] = {"/usr/bin/python3",
				gate,
				uport,
				port,
				KEY_ID,
				SECRET,
				NULL};

		gate_pid = fx_spawn_server(argv, log, gate_port, 10000);
	}
	if (gate_pid < 0) {
		stop_servers();
		ck_abort_msg("the signature gate did not start");
	}
	snprintf(gate_url, sizeof(gate_url), "http://127.0.0.1:%d", gate_port);
	snprintf(s3rver_url, sizeof(s3rver_url), "http://127.0.0.1:%d",
		 s3rver_port);

	ck_assert_int_eq(
	    s3_call(gate_url, "PUT", NULL, NULL, NULL, 0, SECRET, NULL), 200);
	for (size_t i = 0; i < ARRAY_SIZE(objects); i++)
		put_object(objects[i].key, objects[i].size, objects[i].seed);
	for (int i = 0; i < MANY; i++) {
		char key[32];

		snprintf(key, sizeof(key), "many/k%05d", i);
		put_object(key, 10, (uint32_t)i);
	}
}

static void servers_stop(void)
{
	stop_servers();
	fx_work_free(&work);
}

/* ---- Opening the source the way `wharf mount` does. */

static struct fetch_engine *fe;
static struct fx_nginx site; /* a site cache a test started */

static void env_creds(const char *secret)
{
	setenv("AWS_ACCESS_KEY_ID", KEY_ID, 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_PROFILE");
}

static void engine_setup(void)
{
	struct fetch_config cfg;

	fetch_config_default(&cfg);
	cfg.retries = 1;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
	env_creds(SECRET);
	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");
}

static pid_t bad_pid = -1; /* tests/bad-cache a test started */

static void engine_teardown(void)
{
	fetch_engine_free(fe);
	fe = NULL;
	if (site.dir)
		fx_nginx_stop(&site);
	if (bad_pid > 0)
		fx_stop(bad_pid, 5000);
	bad_pid = -1;
}

/* Opens spec with opt (NULL: the gate as endpoint), or fails the test. */
static struct source *open_with(const char *spec,
				const struct source_options *opt)
{
	struct source_options dflt = {.endpoint = gate_url};
	struct source *src = NULL;
	char *err = NULL;
	int rc = source_open(spec, opt ? opt : &dflt, fe, &src, &err);

	ck_assert_msg(rc == 0, "source_open %s: %s", spec, err ? err : "?");
	return src;
}

static struct source *open_src(const char *spec)
{
	return open_with(spec, NULL);
}

struct names {
	char **v;
	bool *dir;
	uint64_t *size;
	size_t n, cap;
};

static int collect(void *arg, const struct source_object *o)
{
	struct names *l = arg;

	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		l->dir = realloc(l->dir, l->cap * sizeof(*l->dir));
		l->size = realloc(l->size, l->cap * sizeof(*l->size));
		ck_assert(l->v && l->dir && l->size);
	}
	l->v[l->n] = strdup(o->name);
	l->dir[l->n] = o->is_dir;
	l->size[l->n] = o->size;
	if (!o->is_dir)
		ck_assert_msg(o->version && o->version[0],
			      "%s: no version (ETag) in the listing", o->name);
	l->n++;
	return 0;
}

static void names_free(struct names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->dir);
	free(l->size);
	memset(l, 0, sizeof(*l));
}

static ssize_t find(const struct names *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], name))
			return (ssize_t)i;
	return -1;
}

/* Lists dir of src, which must succeed with n entries. */
static void expect_entries(struct source *src, const char *dir, size_t n)
{
	struct names l = {0};

	ck_assert_int_eq(src->ops->list_dir(src, dir, collect, &l), 0);
	ck_assert_uint_eq(l.n, n);
	names_free(&l);
}

/* Reads [off, off+len) of path at version through prepare_read. */
static int read_range(struct source *src, const char *path, const char *ver,
		      uint64_t off, uint64_t len, void *buf, size_t *got)
{
	struct source_read rd;
	struct fetch_res res;
	int rc;

	memset(&rd, 0, sizeof(rd));
	ck_assert_int_eq(src->ops->prepare_read(src, path, ver, off, len, &rd),
			 0);
	rd.req.buf = buf;
	rd.req.cap = len;
	rc = fetch_run(src->fetch, &rd.req, &res);
	source_read_done(&rd);
	*got = res.len;
	return rc;
}

/* ---- Tests that need no server: the ListObjectsV2 parser. */

static int count_cb(void *arg, const struct source_object *o)
{
	return collect(arg, o);
}

START_TEST(test_page_parse)
{
	static const char page[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/"
	    "2006-03-01/\"><Name>b</Name><Prefix>p/</Prefix>"
	    "<KeyCount>4</KeyCount><MaxKeys>3</MaxKeys>"
	    "<IsTruncated>true</IsTruncated>"
	    "<NextContinuationToken>a+b/c==</NextContinuationToken>"
	    "<!-- a comment -->"
	    "<Contents><Key>p/</Key><Size>0</Size></Contents>"
	    "<Contents><Key>p/a&amp;b &lt;1&gt; &#233;&#x4e2d;.jpg</Key>"
	    "<LastModified>2009-10-12T17:50:30.000Z</LastModified>"
	    "<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>"
	    "<Size>434234</Size><StorageClass>STANDARD</StorageClass>"
	    "</Contents>"
	    "<Contents><Key><![CDATA[p/cdata<x>]]></Key><Size>7</Size>"
	    "<ETag>\"x\"</ETag>"
	    "<Owner><ID>x</ID><DisplayName/></Owner></Contents>"
	    "<CommonPrefixes><Prefix>p/sub/</Prefix></CommonPrefixes>"
	    "</ListBucketResult>\n";
	struct s3_page pg;
	struct names l = {0};
	char *err = NULL;

	ck_assert_int_eq(s3_parse_list_page(page, strlen(page), "p/", count_cb,
					    &l, &pg, &err),
			 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.v[0], "a&b <1> \xc3\xa9\xe4\xb8\xad.jpg");
	ck_assert(!l.dir[0]);
	ck_assert_uint_eq(l.size[0], 434234);
	ck_assert_str_eq(l.v[1], "cdata<x>");
	ck_assert_str_eq(l.v[2], "sub");
	ck_assert(l.dir[2]);
	ck_assert(pg.truncated);
	ck_assert_str_eq(pg.token, "a+b/c==");
	names_free(&l);
}
END_TEST

/* Each entry's name, and '!' before the name of one marked bad. */
static int bad_cb(void *arg, const struct source_object *o)
{
	char *out = arg;
	size_t l = strlen(out);

	snprintf(out + l, 256 - l, "%s%s ", o->bad ? "!" : "", o->name);
	return 0;
}

/* A size that is not one marks its entry bad for the tree to leave out;
 * the rest of the page is read. */
START_TEST(test_page_bad_sizes)
{
	static const char page[] =
	    "<ListBucketResult>"
	    "<Contents><Key>p/a</Key><Size>12x</Size></Contents>"
	    "<Contents><Key>p/b</Key><Size>-5</Size></Contents>"
	    "<Contents><Key>p/c</Key><Size>9223372036854775808</Size>"
	    "</Contents>"
	    "<Contents><Key>p/d</Key><Size>3</Size><ETag>\"e\"</ETag>"
	    "</Contents>"
	    "<Contents><Key>p/e</Key><Size>9223372036854775807</Size>"
	    "</Contents></ListBucketResult>";
	struct s3_page pg;
	char out[256] = "", *err = NULL;

	ck_assert_int_eq(s3_parse_list_page(page, strlen(page), "p/", bad_cb,
					    out, &pg, &err),
			 0);
	ck_assert_ptr_null(err);
	ck_assert_str_eq(out, "!a !b !c d e ");
}
END_TEST

START_TEST(test_page_malformed)
{
	static const struct {
		const char *xml, *says;
	} bad[] = {
	    {"", "no root"},
	    {"<ListBucketResult><Contents><Key>p/a</Key>", "truncated"},
	    {"<ListBucketResult></Contents></ListBucketResult>",
	     "does not match"},
	    {"<ListBucketResult><Contents><Size>1</Size></Contents>"
	     "</ListBucketResult>",
	     "without <Key>"},
	    {"<ListBucketResult><IsTruncated>true</IsTruncated>"
	     "</ListBucketResult>",
	     "NextContinuationToken"},
	    {"<ListBucketResult><Name>a &bogus; b</Name></ListBucketResult>",
	     "entity"},
	    {"<ListBucketResult><Name>&#xZZ;</Name></ListBucketResult>",
	     "character reference"},
	    {"<!DOCTYPE x [<!ENTITY a \"b\">]><ListBucketResult/>", "DOCTYPE"},
	    {"<Error><Code>AccessDenied</Code></Error>", "ListBucketResult"},
	    {"<ListBucketResult/><ListBucketResult/>", "second root"},
	    {"junk<ListBucketResult/>", "outside the root"},
	    {"<ListBucketResult attr=\"x></ListBucketResult>", "start tag"},
	    {"<ListBucketResult><Name>x</Name", "end tag"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct s3_page pg;
		struct names l = {0};
		char *err = NULL;
		int rc = s3_parse_list_page(bad[i].xml, strlen(bad[i].xml),
					    "p/", count_cb, &l, &pg, &err);

		ck_assert_msg(rc == -EIO, "case %zu: rc %d", i, rc);
		ck_assert_msg(err && strstr(err, bad[i].says),
			      "case %zu: \"%s\" does not say \"%s\"", i,
			      err ? err : "(null)", bad[i].says);
		free(err);
		names_free(&l);
	}
}
END_TEST

/* What source_list_under's lister was asked, and what it answers. */
static struct {
	char pfx[64];
	unsigned max;
	size_t count;
	int rc;
	const char *err;
} lister;

static int fake_lister(struct source *src, const char *pfx, unsigned max,
		       source_list_cb cb, void *arg, size_t *count, char **err)
{
	(void)src;
	ck_assert_int_eq(cb(arg, NULL), 0);
	snprintf(lister.pfx, sizeof(lister.pfx), "%s", pfx);
	lister.max = max;
	*count = lister.count;
	*err = lister.err ? strdup(lister.err) : NULL;
	return lister.rc;
}

/* What every object store's listing shares (source.h): a directory is a
 * prefix, and one with nothing under it is absent, but for the root. */
START_TEST(test_dir_rules)
{
	ck_assert_int_eq(source_list_under(NULL, "ds/", "", 0, fake_lister,
					   source_count_only, NULL),
			 0);
	ck_assert_str_eq(lister.pfx, "ds/");
	ck_assert_int_eq(source_list_under(NULL, "ds/", "a/b", 1, fake_lister,
					   source_count_only, NULL),
			 -ENOENT);
	ck_assert_str_eq(lister.pfx, "ds/a/b/");
	ck_assert_uint_eq(lister.max, 1);
	lister.count = 1; /* a folder marker alone */
	ck_assert_int_eq(source_list_under(NULL, "", "a", 0, fake_lister,
					   source_count_only, NULL),
			 0);
	ck_assert_str_eq(lister.pfx, "a/");
	/* an error stands, its message logged and freed (ASan) */
	lister.rc = -EIO;
	lister.err = "listing failed";
	ck_assert_int_eq(source_list_under(NULL, "ds/", "a", 0, fake_lister,
					   source_count_only, NULL),
			 -EIO);
}
END_TEST

/* The last error logged while taken (test_stat_rules). */
static char logged_error[256];

static void take_error(enum wharf_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level == WHARF_LOG_ERROR)
		snprintf(logged_error, sizeof(logged_error), "%s", msg);
}

/* What every store's stat shares (source.h): the root is a directory; a
 * HEAD answer is the object; none, a directory if names lie under it.  A
 * HEAD answer without Content-Length fails with EIO, and an error names
 * the object (source id and path) and what is missing. */
START_TEST(test_stat_rules)
{
	struct source src = {.id = (char *)"s3://b/"};
	struct source_object o;
	struct fetch_res res = {.content_length = 5, .mtime = 7};
	char name[8], ver[4];

	ck_assert(source_stat_root(&o, "", name, sizeof(name)));
	ck_assert(o.is_dir);
	ck_assert(!source_stat_root(&o, "a/b", name, sizeof(name)));
	ck_assert_str_eq(o.name, "a/b");
	ck_assert_str_eq(o.version, "");
	snprintf(res.etag, sizeof(res.etag), "\"e1\"");
	ck_assert_int_eq(source_stat_head(&src, "ds/", "a/b", 0, &res, ver,
					  sizeof(ver), fake_lister, &o),
			 0);
	ck_assert(!o.is_dir);
	ck_assert_uint_eq(o.size, 5);
	ck_assert_int_eq(o.mtime, 7);
	ck_assert_str_eq(o.version, "\"e1"); /* held to ver's size */
	res.content_length = -1;
	logged_error[0] = '\0';
	log_set_func(take_error, NULL);
	ck_assert_int_eq(source_stat_head(&src, "ds/", "a/b", 0, &res, ver,
					  sizeof(ver), fake_lister, &o),
			 -EIO);
	log_set_func(NULL, NULL);
	ck_assert_str_eq(logged_error, "s3://b/a/b: no Content-Length");
	lister.rc = 0;
	lister.err = NULL;
	lister.count = 1;
	ck_assert(!source_stat_root(&o, "a", name, sizeof(name)));
	ck_assert_int_eq(source_stat_head(&src, "ds/", "a", -ENOENT, &res, ver,
					  sizeof(ver), fake_lister, &o),
			 0);
	ck_assert(o.is_dir);
	ck_assert_str_eq(lister.pfx, "ds/a/");
	ck_assert_uint_eq(lister.max, 1);
	lister.count = 0;
	ck_assert(!source_stat_root(&o, "a", name, sizeof(name)));
	ck_assert_int_eq(source_stat_head(&src, "ds/", "a", -ENOENT, &res, ver,
					  sizeof(ver), fake_lister, &o),
			 -ENOENT);
	ck_assert(!o.is_dir);
	ck_assert_int_eq(source_stat_head(&src, "ds/", "a", -EACCES, &res, ver,
					  sizeof(ver), fake_lister, &o),
			 -EACCES);
}
END_TEST

START_TEST(test_open_errors)
{
	struct source_options opt = {.endpoint = "http://127.0.0.1:9"};
	struct source *src = NULL;
	char *err = NULL;

	ck_assert_int_eq(source_open("s3://", &opt, NULL, &src, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no bucket"));
	free(err);
	ck_assert_int_eq(source_open("s3://a*b/x", &opt, NULL, &src, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "bucket name"));
	free(err);
	ck_assert_int_eq(source_open("s3://b/x/../y", &opt, NULL, &src, &err),
			 -EINVAL);
	free(err);
	opt.endpoint = "ftp://host";
	ck_assert_int_eq(source_open("s3://b/x", &opt, NULL, &src, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "ftp://host"));
	free(err);
	opt.endpoint = "http://host/path";
	ck_assert_int_eq(source_open("s3://b/x", &opt, NULL, &src, &err),
			 -EINVAL);
	free(err);
	/* No credentials anywhere: say where we looked, suggest --no-sign. */
	opt.endpoint = "http://127.0.0.1:9";
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_PROFILE");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	ck_assert_int_eq(source_open("s3://b/x", &opt, NULL, &src, &err),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/credentials"));
	ck_assert_ptr_nonnull(strstr(err, "--no-sign"));
	free(err);
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	ck_assert_ptr_null(src);
}
END_TEST

/* ---- Against s3rver. */

START_TEST(test_list_pagination)
{
	struct source *src = open_src("s3://" BUCKET "/many");
	struct names l = {0};
	struct fetch_stats st0, st1;
	struct body b = {0};
	struct s3_page pg;
	struct names raw = {0};
	char *err = NULL;

	fetch_get_stats(fe, &st0);
	ck_assert_int_eq(src->ops->list_dir(src, "", collect, &l), 0);
	fetch_get_stats(fe, &st1);
	ck_assert_uint_eq(l.n, MANY);
	for (int i = 0; i < MANY; i++) {
		char name[16];
		ssize_t k;

		snprintf(name, sizeof(name), "k%05d", i);
		k = find(&l, name);
		ck_assert_msg(k >= 0, "%s missing from the listing", name);
		ck_assert_uint_eq(l.size[k], 10);
	}
	/* 1,100 keys at most 1,000 a page: at least two pages. */
	ck_assert_uint_ge(st1.requests - st0.requests, 2);
	names_free(&l);
	source_close(src);

	/* s3rver caps max-keys at 1000 as S3 does, and says it truncated. */
	ck_assert_int_eq(s3_call(gate_url, "GET", NULL,
				 "list-type=2&max-keys=5000&prefix=many%2F",
				 NULL, 0, SECRET, &b),
			 200);
	ck_assert_int_eq(
	    s3_parse_list_page(b.p, b.len, "many/", collect, &raw, &pg, &err),
	    0);
	ck_assert_uint_eq(raw.n, 1000);
	ck_assert(pg.truncated);
	names_free(&raw);
	free(b.p);
}
END_TEST

START_TEST(test_nested)
{
	struct source *src = open_src("s3://" BUCKET "/nest");
	struct source *sub = open_src("s3://" BUCKET "//nest/a/");
	struct names l = {0};
	struct source_object o;
	ssize_t k;

	ck_assert_int_eq(src->ops->list_dir(src, "", collect, &l), 0);
	ck_assert_uint_eq(l.n, 3);
	k = find(&l, "a");
	ck_assert(k >= 0 && l.dir[k]);
	k = find(&l, "top.bin");
	ck_assert(k >= 0 && !l.dir[k] && l.size[k] == 100);
	k = find(&l, "space name+plus&amp.bin");
	ck_assert(k >= 0 && l.size[k] == 33);
	names_free(&l);

	ck_assert_int_eq(src->ops->list_dir(src, "a", collect, &l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert(l.dir[find(&l, "b")]);
	ck_assert(!l.dir[find(&l, "x.bin")]);
	names_free(&l);
	ck_assert_int_eq(src->ops->list_dir(src, "a/b", collect, &l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert(l.dir[find(&l, "c")]);
	ck_assert_uint_eq(l.size[find(&l, "mid.bin")], 50);
	names_free(&l);
	ck_assert_int_eq(src->ops->list_dir(src, "a/b/c", collect, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0], "deep.bin");
	names_free(&l);
	ck_assert_int_eq(src->ops->list_dir(src, "nope", collect, &l), -ENOENT);

	ck_assert_int_eq(src->ops->stat(src, "a/b", &o), 0);
	ck_assert(o.is_dir);
	ck_assert_int_eq(src->ops->stat(src, "a/b/c/deep.bin", &o), 0);
	ck_assert(!o.is_dir);
	ck_assert_uint_eq(o.size, 300);
	ck_assert(o.version[0] == '"');
	ck_assert_int_gt(o.mtime, 1000000000);
	ck_assert_int_eq(src->ops->stat(src, "space name+plus&amp.bin", &o), 0);
	ck_assert_uint_eq(o.size, 33);
	ck_assert_int_eq(src->ops->stat(src, "nope", &o), -ENOENT);

	/* The same objects through a source rooted deeper. */
	ck_assert_int_eq(sub->ops->list_dir(sub, "", collect, &l), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_int_ge(find(&l, "x.bin"), 0);
	names_free(&l);
	ck_assert_int_eq(sub->ops->stat(sub, "b/c/deep.bin", &o), 0);
	ck_assert_uint_eq(o.size, 300);
	/* Sources of different prefixes never share cache keys. */
	ck_assert_str_ne(src->id, sub->id);
	source_close(sub);
	source_close(src);
}
END_TEST

START_TEST(test_sizes)
{
	/* The endpoint from the environment this time. */
	struct source_options opt = {0};
	struct source *src = NULL;
	const size_t piece = (3u << 20) + 5; /* ranges that straddle MiBs */
	unsigned char *buf = malloc(piece);

	ck_assert_ptr_nonnull(buf);
	setenv("AWS_ENDPOINT_URL_S3", gate_url, 1);
	src = open_with("s3://" BUCKET "/sizes", &opt);
	unsetenv("AWS_ENDPOINT_URL_S3");
	for (size_t i = 0; i < ARRAY_SIZE(objects); i++) {
		const char *name = objects[i].key + strlen("sizes/");
		struct source_object o;
		char ver[128];
		uint64_t off = 0, bad = 0;

		if (strncmp(objects[i].key, "sizes/", 6))
			continue;
		ck_assert_int_eq(src->ops->stat(src, name, &o), 0);
		ck_assert_uint_eq(o.size, objects[i].size);
		snprintf(ver, sizeof(ver), "%s", o.version);
		while (off < o.size) {
			uint64_t want =
			    o.size - off < piece ? o.size - off : piece;
			size_t got = 0;

			ck_assert_int_eq(
			    read_range(src, name, ver, off, want, buf, &got),
			    0);
			ck_assert_uint_eq(got, want);
			for (size_t j = 0; j < got; j++)
				bad +=
				    buf[j] != fx_byte(objects[i].seed, off + j);
			off += got;
		}
		ck_assert_msg(bad == 0, "%s: %llu bytes differ", name,
			      (unsigned long long)bad);
	}
	free(buf);
	source_close(src);
}
END_TEST

START_TEST(test_wrong_secret)
{
	struct source_options opt = {.endpoint = gate_url};
	struct source *src = NULL;
	char *err = NULL;

	env_creds("not-the-secret");
	ck_assert_int_eq(
	    source_open("s3://" BUCKET "/nest", &opt, fe, &src, &err), -EACCES);
	ck_assert_ptr_null(src);
	ck_assert_msg(strstr(err, "HTTP 403") && strstr(err, "access denied") &&
			  strstr(err, "access key " KEY_ID) &&
			  strstr(err, "the environment"),
		      "unclear: %s", err);
	ck_assert_ptr_null(strstr(err, "not-the-secret"));
	free(err);

	/* An access key id the store does not know: s3rver's own 403. */
	setenv("AWS_ACCESS_KEY_ID", "NOSUCHKEY", 1);
	opt.endpoint = s3rver_url;
	ck_assert_int_eq(
	    source_open("s3://" BUCKET "/nest", &opt, fe, &src, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err, "NOSUCHKEY"));
	free(err);

	/* A bucket that is not there. */
	env_creds(SECRET);
	opt.endpoint = gate_url;
	ck_assert_int_eq(
	    source_open("s3://no-such-bucket", &opt, fe, &src, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "no such bucket"));
	free(err);
}
END_TEST

START_TEST(test_no_sign)
{
	/* s3rver serves anonymous requests (no bucket policies), so an
	 * unsigned source lists and reads like a signed one. */
	struct source_options opt = {.endpoint = gate_url, .no_sign = true};
	struct source *src = NULL;

	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	src = open_with("s3://" BUCKET "/nest", &opt);
	expect_entries(src, "a", 2);
	source_close(src);
}
END_TEST

START_TEST(test_virtual_host)
{
	/* s3rver takes BUCKET.s3.localhost as a virtual-host bucket (its
	 * --service-endpoint), and curl resolves *.localhost to loopback. */
	struct source_options opt = {.addressing = 2};
	struct source *src = NULL;
	struct source_object o;
	char endpoint[64];
	unsigned char buf[100];
	size_t got = 0;

	snprintf(endpoint, sizeof(endpoint), "http://s3.localhost:%d",
		 gate_port);
	opt.endpoint = endpoint;
	src = open_with("s3://" BUCKET "/nest", &opt);
	expect_entries(src, "a", 2);
	ck_assert_int_eq(src->ops->stat(src, "top.bin", &o), 0);
	ck_assert_uint_eq(o.size, 100);
	ck_assert_int_eq(
	    read_range(src, "top.bin", o.version, 0, 100, buf, &got), 0);
	ck_assert_uint_eq(got, 100);
	for (size_t i = 0; i < got; i++)
		ck_assert_uint_eq(buf[i], fx_byte(6, i));
	source_close(src);
}
END_TEST

START_TEST(test_pinned_read)
{
	struct source *src;
	struct source_object o;
	char v1[128];
	const size_t len = 1u << 20;
	unsigned char *buf = malloc(len);
	size_t got = 1;

	ck_assert_ptr_nonnull(buf);
	put_object("pin/obj", len, 11);
	src = open_src("s3://" BUCKET "/pin");
	ck_assert_int_eq(src->ops->stat(src, "obj", &o), 0);
	snprintf(v1, sizeof(v1), "%s", o.version);
	ck_assert_int_eq(read_range(src, "obj", v1, 0, 4096, buf, &got), 0);
	ck_assert_uint_eq(buf[100], fx_byte(11, 100));

	/* Replaced while open: the pinned read fails, no bytes of either. */
	put_object("pin/obj", len, 12);
	memset(buf, 0, len);
	ck_assert_int_eq(read_range(src, "obj", v1, 4096, 65536, buf, &got),
			 -ESTALE);
	ck_assert_uint_eq(got, 0);
	for (size_t i = 0; i < 65536; i++)
		ck_assert_uint_eq(buf[i], 0);

	/* Opened again, the new version reads whole. */
	ck_assert_int_eq(src->ops->stat(src, "obj", &o), 0);
	ck_assert_str_ne(o.version, v1);
	ck_assert_int_eq(read_range(src, "obj", o.version, 0, len, buf, &got),
			 0);
	ck_assert_uint_eq(got, len);
	for (size_t i = 0; i < len; i += 4093)
		ck_assert_uint_eq(buf[i], fx_byte(12, i));
	free(buf);
	source_close(src);
}
END_TEST

START_TEST(test_stuck_token)
{
	struct source *src = open_src("s3://" BUCKET "/nest");
	struct names l = {0};
	struct fetch_stats st0, st1;

	/* Many more than the fix needs: without it the listing would run
	 * through all of them, then succeed.  Promptly: on the second page,
	 * which repeats the first's token. */
	gate_stuck(50);
	fetch_get_stats(fe, &st0);
	ck_assert_int_eq(src->ops->list_dir(src, "", collect, &l), -EIO);
	fetch_get_stats(fe, &st1);
	ck_assert_uint_eq(st1.requests - st0.requests, 2);
	names_free(&l);
	gate_stuck(0);
	expect_entries(src, "", 3);
	source_close(src);
}
END_TEST

START_TEST(test_folder_marker)
{
	struct source *src = open_src("s3://" BUCKET "/marks");
	struct names l = {0};
	struct source_object o;
	ssize_t k;

	/* What a console's "Create folder" makes: "dir/", zero bytes. */
	put_object("marks/empty/", 0, 0);
	put_object("marks/full/", 0, 0);
	put_object("marks/full/x.bin", 10, 31);
	ck_assert_int_eq(src->ops->list_dir(src, "", collect, &l), 0);
	ck_assert_uint_eq(l.n, 2);
	k = find(&l, "empty");
	ck_assert(k >= 0 && l.dir[k]);
	names_free(&l);
	/* Listed as a directory, so it lists: empty, not absent. */
	expect_entries(src, "empty", 0);
	ck_assert_int_eq(src->ops->stat(src, "empty", &o), 0);
	ck_assert(o.is_dir);
	/* The marker sorts first, so a one-key probe of full/ sees only it. */
	ck_assert_int_eq(src->ops->stat(src, "full", &o), 0);
	ck_assert(o.is_dir);
	ck_assert_int_eq(src->ops->list_dir(src, "full", collect, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0], "x.bin");
	names_free(&l);
	ck_assert_int_eq(src->ops->list_dir(src, "nope", collect, &l), -ENOENT);
	source_close(src);
}
END_TEST

START_TEST(test_long_key)
{
	/* S3's longest key, 1,024 bytes, of which 1,020 are "é" (3,060
	 * bytes once %XX-encoded) and 4 are slashes, which keep each name
	 * under s3rver's file system's 255 bytes. */
	static char key[1025], dir[1025];
	struct source *src = open_src("s3://" BUCKET);
	struct source_object o;
	struct names l = {0};
	unsigned char buf[64];
	size_t n = 0, got = 0;

	for (int seg = 0; seg < 5; seg++) {
		int chars = seg < 4 ? 127 : 2;

		if (seg == 4)
			memcpy(dir, key, n);
		for (int i = 0; i < chars; i++) {
			key[n++] = '\xc3';
			key[n++] = '\xa9';
		}
		if (seg < 4)
			key[n++] = '/';
	}
	ck_assert_uint_eq(n, 1024);
	dir[strlen(dir) - 1] = '\0';
	put_object(key, sizeof(buf), 41);
	ck_assert_int_eq(src->ops->stat(src, key, &o), 0);
	ck_assert_uint_eq(o.size, sizeof(buf));
	ck_assert_int_eq(
	    read_range(src, key, o.version, 0, sizeof(buf), buf, &got), 0);
	ck_assert_uint_eq(got, sizeof(buf));
	for (size_t i = 0; i < got; i++)
		ck_assert_uint_eq(buf[i], fx_byte(41, i));
	ck_assert_int_eq(src->ops->list_dir(src, dir, collect, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0], key + strlen(dir) + 1);
	names_free(&l);
	source_close(src);
}
END_TEST

/* The value of header name in list h, or NULL. */
static const char *header_of(const struct curl_slist *h, const char *name)
{
	const size_t n = strlen(name);

	for (; h; h = h->next)
		if (!strncasecmp(h->data, name, n) && h->data[n] == ':')
			return h->data + n + 1;
	return NULL;
}

START_TEST(test_resigned_read)
{
	struct source *src;
	struct source_object o;
	struct source_read rd;
	struct fetch_res res;
	char auth[512], date[32];
	unsigned char buf[8192];

	put_object("resign/obj", sizeof(buf), 21);
	src = open_src("s3://" BUCKET "/resign");
	ck_assert_int_eq(src->ops->stat(src, "obj", &o), 0);
	memset(&rd, 0, sizeof(rd));
	ck_assert_int_eq(
	    src->ops->prepare_read(src, "obj", o.version, 0, sizeof(buf), &rd),
	    0);
	ck_assert_ptr_nonnull(rd.req.resign);
	ck_assert_ptr_nonnull(header_of(rd.headers, "Authorization"));
	ck_assert_ptr_nonnull(header_of(rd.headers, "x-amz-date"));
	snprintf(auth, sizeof(auth), "%s",
		 header_of(rd.headers, "Authorization"));
	snprintf(date, sizeof(date), "%s", header_of(rd.headers, "x-amz-date"));
	/* A retry seconds later carries a new date and signature, keeps the
	 * version pin, and the server takes it. */
	sleep(2); /* time() may lag a tick behind: two seconds, not one */
	ck_assert_int_eq(rd.req.resign(rd.req.resign_arg, &rd.req), 0);
	ck_assert_ptr_eq(rd.req.headers, rd.headers);
	ck_assert_str_ne(header_of(rd.headers, "x-amz-date"), date);
	ck_assert_str_ne(header_of(rd.headers, "Authorization"), auth);
	ck_assert_ptr_nonnull(header_of(rd.headers, "If-Match"));
	rd.req.buf = buf;
	rd.req.cap = sizeof(buf);
	ck_assert_int_eq(fetch_run(src->fetch, &rd.req, &res), 0);
	ck_assert_uint_eq(res.len, sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], fx_byte(21, i));
	source_read_done(&rd);
	source_close(src);
}
END_TEST

/* ---- Through a real `wharf mount s3://...`. */

/* `wharf mount -f` of url through the gate (and site_cache, unless NULL)
 * on a fresh mountpoint and cache; see fx_mount_start. */
static int mount_start(struct fx_mount *m, const char *tag, const char *url,
		       const char *site_cache)
{
	const char *const opts[] = {"--retries", "1", "--endpoint", gate_url,
				    NULL};
	/* plain http to the cache: the signatures go in clear, on purpose */
	const char *const sc[] = {"--site-cache", site_cache,
				  "--site-cache-insecure-credentials", NULL};

	fx_mount_init(m, work, tag);
	return fx_mount_start(m, url, opts, site_cache ? sc : NULL);
}

/* Bytes of root/key that differ from what seed made; -1 if unreadable. */
static long long differ(const char *root, const char *key, uint64_t size,
			uint32_t seed)
{
	char path[PATH_MAX + 64];
	size_t len = 0;
	unsigned char *buf;
	long long bad = 0;

	snprintf(path, sizeof(path), "%s/%s", root, key);
	buf = fx_read_file(path, &len);
	if (!buf)
		return -1;
	if (len != size)
		bad = 1 + (long long)(len > size ? len - size : size - len);
	for (size_t i = 0; i < len && i < size; i++)
		bad += buf[i] != fx_byte(seed, i);
	free(buf);
	return bad;
}

START_TEST(test_mount)
{
	struct fx_mount m;
	char path[PATH_MAX + 64];
	unsigned char buf[4096];
	int fd, status;
	ssize_t got;

	put_object("pin2/obj", 2u << 20, 21);
	fx_mount_ok(mount_start(&m, "all", "s3://" BUCKET, NULL), &m);
	for (size_t i = 0; i < ARRAY_SIZE(objects); i++) {
		long long bad = differ(m.dir, objects[i].key, objects[i].size,
				       objects[i].seed);

		ck_assert_msg(bad == 0,
			      "%s: %lld bytes differ through the mount",
			      objects[i].key, bad);
	}
	/* Checked against their MD5 ETags, in whatever order the chunks
	 * came, and all good. */
	ck_assert_int_gt(fx_mount_stat(m.dir, "origin_checksums", "checked"),
			 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin_checksums", "mismatches"),
			 0);
	snprintf(path, sizeof(path), "%s/many", m.dir);
	ck_assert_int_eq(fx_count_names(path, "k"), MANY);

	/* Listed (so pinned) at v1, replaced, then read: EIO, no bytes. */
	snprintf(path, sizeof(path), "%s/pin2/obj", m.dir);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	put_object("pin2/obj", 2u << 20, 22);
	got = pread(fd, buf, sizeof(buf), 0);
	ck_assert_msg(got == -1 && errno == EIO,
		      "a replaced object read %zd bytes (errno %d)", got,
		      errno);
	close(fd);
	ck_assert_msg(fx_log_has(m.log, "changed while open"),
		      "no clear log line for the replaced object");

	status = fx_mount_stop(&m);
	ck_assert_msg(status == 0, "the mount exited with status %d", status);
}
END_TEST

/* Through a mount: the listing fails with EIO, promptly (without running
 * through the 50 pages of the stuck token), and says why. */
START_TEST(test_mount_stuck_token)
{
	struct fx_mount m;
	char path[PATH_MAX + 64];
	long long requests;
	bool failed;
	DIR *d;

	fx_mount_ok(mount_start(&m, "stuck", "s3://" BUCKET "/nest", NULL), &m);
	gate_stuck(50);
	requests = fx_mount_stat(m.dir, NULL, "requests");
	snprintf(path, sizeof(path), "%s/a", m.dir);
	/* The listing may come at opendir or at the first readdir. */
	d = opendir(path);
	if (d) {
		errno = 0;
		failed = !readdir(d) && errno == EIO;
		closedir(d);
	} else {
		failed = errno == EIO;
	}
	ck_assert_msg(failed, "listing %s: errno %d, not EIO", path, errno);
	requests = fx_mount_stat(m.dir, NULL, "requests") - requests;
	ck_assert_msg(requests < 50, "%lld requests for the listing", requests);
	gate_stuck(0);
	fx_mount_stop(&m);
	if (!fx_log_has(m.log, "listing s3.*/" BUCKET "/nest/: .*continuation "
			       "token \"stuck\" with the same token")) {
		fx_sh("cat '%s' >&2", m.log);
		ck_abort_msg("no clear message in %s", m.log);
	}
}
END_TEST

START_TEST(test_mount_wrong_secret)
{
	struct fx_mount m;

	env_creds("not-the-secret");
	ck_assert_int_ne(mount_start(&m, "badkey", "s3://" BUCKET "/nest",
				     NULL), 0);
	fx_mount_stop(&m);
	ck_assert_msg(fx_log_has(m.log, "access denied") &&
			  fx_log_has(m.log, "HTTP 403"),
		      "no clear message in %s", m.log);
	ck_assert_msg(!fx_log_has(m.log, "not-the-secret"),
		      "the secret was logged");
}
END_TEST

/* Reads the mounted object whole, drops the kernel's pages of it, and
 * counts the bytes that differ on a second read: the first read of an
 * object of many chunks may have had bad bytes (it is checked when its
 * last chunk arrives). */
static long long differ_after_drop(const char *root, const char *key,
				   uint64_t size, uint32_t seed)
{
	char path[PATH_MAX + 64];
	int fd;

	ck_assert_int_ge(differ(root, key, size, seed), 0);
	snprintf(path, sizeof(path), "%s/%s", root, key);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	return differ(root, key, size, seed);
}

/* Through a site cache that zeroes every body: each object is found out
 * against the MD5 its ETag gives (s3rver's are those of single-part
 * uploads), fetched again from the origin itself, and served right. */
START_TEST(test_mount_checksums_bad_site_cache)
{
	struct fx_mount m;
	char bad[64];
	long long mism;
	int status;

	put_object("sums/small", 1000, 31);
	put_object("sums/two", (1u << 20) + 5, 32);
	bad_pid = fx_bad_cache_start(work, bad, sizeof(bad));
	ck_assert_int_gt(bad_pid, 0);
	fx_mount_ok(mount_start(&m, "sums", "s3://" BUCKET "/sums", bad), &m);
	/* One chunk: checked before a byte is served. */
	ck_assert_int_eq(differ(m.dir, "small", 1000, 31), 0);
	ck_assert_int_eq(differ_after_drop(m.dir, "two", (1u << 20) + 5, 32),
			 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin_checksums", "checked"),
			 2);
	mism = fx_mount_stat(m.dir, "origin_checksums", "mismatches");
	ck_assert_int_ge(mism, 2);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin_checksums", "repaired"),
			 mism);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin_checksums", "failed"), 0);
	status = fx_mount_stop(&m);
	ck_assert_msg(status == 0, "the mount exited with status %d", status);
	ck_assert_msg(fx_log_has(m.log,
				 "sums/small: its bytes do not match the "
				 "origin.s checksum: expected "
				 "md5-etag:[0-9a-f]\\{32\\}"),
		      "no clear log line in %s", m.log);
}
END_TEST

/* ---- Through a site cache: nginx with the shipped config. */

/* The site cache in front of the gate (strict: with the origin asked
 * about every read); stopped by engine_teardown. */
static void site_start(bool strict)
{
	const char *origins[] = {gate_url, NULL};
	const char *const on[] = {"#auth_request", "auth_request", NULL};

	ck_assert_int_eq(
	    fx_site_cache_start(&site, origins, "1m", strict ? on : NULL), 0);
}

/* One of the gate's counters (s3-gate.py, /_gate/stats). */
static long long gate_count(const char *name)
{
	char path[PATH_MAX];
	size_t len;
	char *json;
	long long n;

	snprintf(path, sizeof(path), "%s/gate-stats.json", work);
	ck_assert_int_eq(
	    fx_sh("curl -sf '%s/_gate/stats' >'%s'", gate_url, path), 0);
	json = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(json);
	n = fx_json_num(json, name);
	free(json);
	ck_assert_msg(n >= 0, "the gate's stats have no %s", name);
	return n;
}

#define SC_MOUNTS 3
static const struct {
	const char *key;
	uint64_t size;
} sc_objects[] = {
    {"a.bin", (3u << 20) + 5}, {"b.bin", 1u << 20}, {"c.bin", 200000}};

START_TEST(test_site_cache_mounts)
{
	struct fx_mount m[SC_MOUNTS];
	char key[64], tag[16];
	long long before, fetched;
	uint64_t total = 0;

	for (size_t i = 0; i < ARRAY_SIZE(sc_objects); i++) {
		snprintf(key, sizeof(key), "sc/%s", sc_objects[i].key);
		put_object(key, sc_objects[i].size, 60 + (uint32_t)i);
		total += sc_objects[i].size;
	}
	site_start(false);
	before = gate_count("get_bytes");
	for (int k = 0; k < SC_MOUNTS; k++) {
		snprintf(tag, sizeof(tag), "sc%d", k);
		fx_mount_ok(
		    mount_start(&m[k], tag, "s3://" BUCKET "/sc", site.base),
		    &m[k]);
	}
	/* Signed reads, each mount with a cache of its own, every byte. */
	for (int k = 0; k < SC_MOUNTS; k++)
		for (size_t i = 0; i < ARRAY_SIZE(sc_objects); i++)
			ck_assert_int_eq(differ(m[k].dir, sc_objects[i].key,
						sc_objects[i].size,
						60 + (uint32_t)i),
					 0);
	for (int k = 0; k < SC_MOUNTS; k++)
		ck_assert_int_eq(fx_mount_stop(&m[k]), 0);
	/* The store served each byte about once (listings are small and
	 * not through the cache). */
	fetched = gate_count("get_bytes") - before;
	fprintf(stderr, "s3 through the site cache: %lld bytes for %llu\n",
		fetched, (unsigned long long)total);
	ck_assert_int_ge(fetched, (long long)total);
	ck_assert_msg((double)fetched <= 1.15 * (double)total,
		      "the store served %lld bytes for %llu", fetched,
		      (unsigned long long)total);
}
END_TEST

/* Replaced in the store after a mount read its first chunk through the
 * cache (reads pinned with If-Match): a fresh mount reads all of the new
 * version, the mount that pinned the old one old bytes or EIO, never a
 * mix; likewise an object of one chunk. */
START_TEST(test_site_cache_replaced)
{
	static const uint64_t big = (3u << 20) + 7, one = 200000;
	struct fx_mount old, fresh;
	unsigned char buf[4096];
	char path[PATH_MAX + 64];
	long long bad;
	uint64_t got;
	int fd;

	put_object("sr/big.bin", big, 80);
	put_object("sr/one.bin", one, 81);
	site_start(false);
	ck_assert_int_eq(
	    mount_start(&old, "sr-old", "s3://" BUCKET "/sr", site.base), 0);
	snprintf(path, sizeof(path), "%s/big.bin", old.dir);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), sizeof(buf));
	close(fd);
	ck_assert_uint_eq(buf[100], fx_byte(80, 100));
	ck_assert_int_eq(differ(old.dir, "one.bin", one, 81), 0);

	put_object("sr/big.bin", big, 82);
	put_object("sr/one.bin", one, 83);
	ck_assert_int_eq(
	    mount_start(&fresh, "sr-new", "s3://" BUCKET "/sr", site.base),
	    0);
	ck_assert_msg(differ(fresh.dir, "big.bin", big, 82) == 0,
		      "a fresh mount did not read the new version whole");
	ck_assert_msg(differ(fresh.dir, "one.bin", one, 83) == 0,
		      "a fresh mount did not read the new one-chunk object");
	bad = fx_read_seed(old.dir, "big.bin", 80, &got);
	ck_assert_msg(bad == 0,
		      "the old mount read %lld bytes not of its version", bad);
	ck_assert_int_eq(fx_mount_stop(&old), 0);
	ck_assert_int_eq(fx_mount_stop(&fresh), 0);
}
END_TEST

/* A read of path [0, len) through the site cache with its signature
 * spoiled (one hex digit changed, no resigning). */
static int spoiled_read(struct source *src, const char *path,
			const char *version, void *buf, size_t len,
			struct fetch_res *res)
{
	struct source_read rd;
	int rc;

	memset(&rd, 0, sizeof(rd));
	ck_assert_int_eq(
	    src->ops->prepare_read(src, path, version, 0, len, &rd), 0);
	for (struct curl_slist *h = rd.headers; h; h = h->next)
		if (!strncmp(h->data, "Authorization:", 14)) {
			char *end = h->data + strlen(h->data) - 1;

			*end = *end == '0' ? '1' : '0';
		}
	rd.req.resign = NULL;
	rd.req.buf = buf;
	rd.req.cap = len;
	rc = fetch_run(src->fetch, &rd.req, res);
	source_read_done(&rd);
	return rc;
}

/* Wrong signatures through the cache: refused on a miss, and a refusal
 * is not kept; on a hit the default config serves what it holds (the
 * trust model wharf(1) states), strict mode refuses that too. */
static void check_spoiled(bool strict)
{
	struct fetch_config cfg;
	struct fetch_engine *via;
	struct source_options opt = {.endpoint = gate_url};
	struct source *src = NULL;
	struct source_object o;
	struct fetch_res res;
	const size_t len = 1u << 20;
	unsigned char *buf = malloc(len);
	char *err = NULL, key[32], version[128];
	size_t got;

	ck_assert_ptr_nonnull(buf);
	snprintf(key, sizeof(key), "sc-%s/x.bin", strict ? "strict" : "open");
	put_object(key, len, 70);
	site_start(strict);
	fetch_config_default(&cfg);
	cfg.retries = 0;
	cfg.site_cache = site.base;
	cfg.site_cache_insecure_credentials = true;
	ck_assert_int_eq(fetch_engine_new(&cfg, &via), 0);
	ck_assert_int_eq(source_open(strict ? "s3://" BUCKET "/sc-strict"
					    : "s3://" BUCKET "/sc-open",
				     &opt, via, &src, &err),
			 0);
	ck_assert_int_eq(src->ops->stat(src, "x.bin", &o), 0);
	snprintf(version, sizeof(version), "%s", o.version);

	/* A miss: the store refuses it, the cache passes the refusal on. */
	ck_assert_int_eq(spoiled_read(src, "x.bin", version, buf, len, &res),
			 -EACCES);
	ck_assert_msg(strstr(res.err, "HTTP 403") &&
			  strstr(res.err, "through the site cache"),
		      "unclear: %s", res.err);
	/* The refusal was not cached: a good read gets the bytes. */
	ck_assert_int_eq(read_range(src, "x.bin", version, 0, len, buf, &got),
			 0);
	ck_assert_uint_eq(got, len);
	for (size_t i = 0; i < len; i += 997)
		ck_assert_uint_eq(buf[i], fx_byte(70, i));
	/* A hit. */
	memset(buf, 0, len);
	if (strict) {
		ck_assert_int_eq(
		    spoiled_read(src, "x.bin", version, buf, len, &res),
		    -EACCES);
		ck_assert_uint_eq(buf[0], 0);
	} else {
		ck_assert_int_eq(
		    spoiled_read(src, "x.bin", version, buf, len, &res), 0);
		ck_assert_uint_eq(buf[len - 1], fx_byte(70, len - 1));
	}
	source_close(src);
	fetch_engine_free(via);
	free(buf);
}

START_TEST(test_site_cache_wrong_signature)
{
	check_spoiled(false);
}
END_TEST

START_TEST(test_site_cache_strict)
{
	long long before = gate_count("get_bytes");

	check_spoiled(true);
	/* Strict mode asks the store two bytes per read, not the chunk:
	 * 1 MiB fetched once, the listing (under 1 KiB) and two bytes per
	 * question. */
	ck_assert_int_le(gate_count("get_bytes") - before, (1 << 20) + 2048);
}
END_TEST

/* What the s3rver cases need, or why they cannot run. */
static const char *missing(void)
{
	const char *why = fx_node_missing("WHARF_S3RVER", "s3rver");

	if (why)
		return why;
	if (access("/usr/bin/python3", X_OK))
		return "/usr/bin/python3 (for the signature gate) is absent";
	return NULL;
}

int main(void)
{
	Suite *s = suite_create("s3");
	TCase *unit = tcase_create("parse");
	TCase *tc = tcase_create("s3rver");
	TCase *left = tcase_create("left out");
	const char *why = missing();
	const char *why_mount = why ? why : fx_fuse_missing();
	const char *why_site = why_mount ? why_mount : fx_nginx_missing();

	tcase_add_test(unit, test_page_parse);
	tcase_add_test(unit, test_page_malformed);
	tcase_add_test(unit, test_page_bad_sizes);
	tcase_add_test(unit, test_open_errors);
	tcase_add_test(unit, test_dir_rules);
	tcase_add_test(unit, test_stat_rules);
	suite_add_tcase(s, unit);

	tcase_add_unchecked_fixture(tc, servers_start, servers_stop);
	tcase_add_checked_fixture(tc, engine_setup, engine_teardown);
	tcase_set_timeout(tc, 300);
	/* What cannot run here is named, one SKIP line each, from a case
	 * of its own (without the servers). */
#define ADD(t, why) fx_tcase_add((why) ? left : tc, t, why)
	ADD(test_list_pagination, why);
	ADD(test_nested, why);
	ADD(test_sizes, why);
	ADD(test_wrong_secret, why);
	ADD(test_no_sign, why);
	ADD(test_virtual_host, why);
	ADD(test_pinned_read, why);
	ADD(test_resigned_read, why);
	ADD(test_stuck_token, why);
	ADD(test_folder_marker, why);
	ADD(test_long_key, why);
	ADD(test_mount, why_mount);
	ADD(test_mount_stuck_token, why_mount);
	ADD(test_mount_wrong_secret, why_mount);
	ADD(test_mount_checksums_bad_site_cache, why_mount);
	ADD(test_site_cache_mounts, why_site);
	ADD(test_site_cache_replaced, why_site);
	ADD(test_site_cache_wrong_signature, why_site);
	ADD(test_site_cache_strict, why_site);
#undef ADD
	if (!why)
		suite_add_tcase(s, tc);
	suite_add_tcase(s, left);

	return fx_suite_run(s);
}
