/*
 * The GCS source against tests/fake-gcs, a fake of the JSON API that checks
 * what the real one checks (page tokens, generations, ranges, bearer
 * tokens, the JWT's signature), and every way of getting a token.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "creds_azure.h"
#include "creds_gcp.h"
#include "fetch.h"
#include "fixture-ck.h"
#include "fixture.h"
#include "log.h"
#include "origins.h"
#include "url.h"

#define BUCKET "wharf-test"
#define SPEC "gs://" BUCKET "/ds"
#define CHUNK (1u << 20)
#define N_MANY 150
#define GOOD "good-secret-token-5f1d"
#define SA_EMAIL "loader@wharf-test.iam.gserviceaccount.com"

static const struct {
	const char *name;
	uint64_t size;
} files[] = {
    {"empty", 0},
    {"one", 1},
    {"chunk-1", CHUNK - 1},
    {"big", 3 * CHUNK + 17},
    {"sub/deeper/leaf", 100000},
    {"odd name+%\xc3\xa9", 1000},
    {"gen/obj", 4096},
    {"sizes/chunk", CHUNK},
    {"sizes/chunk+1", CHUNK + 1},
    {"sizes/50M", 50ull << 20},
};

static char *root; /* ROOT/BUCKET/... the fake serves */
static char *work; /* keys, scripts, logs */
static pid_t fake_pid;
static int fake_port;
static char fake_url[64];
static struct fetch_engine *fe;
static struct source *src;
static char *err;

static uint32_t seed_of(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h;
}

static uint64_t many_size(int i)
{
	return 1 + (uint64_t)(i * 7919) % 5000;
}

static void write_object(const char *name, uint64_t size, uint32_t seed)
{
	char path[PATH_MAX], dir[PATH_MAX], *slash;

	snprintf(path, sizeof(path), "%s/%s/%s", root, BUCKET, name);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	*slash = '\0';
	if (fx_mkdirs(dir) || fx_write_file(path, size, seed)) {
		fprintf(stderr, "cannot write %s\n", path);
		abort();
	}
}

static void make_dataset(void)
{
	char name[64];

	root = fx_tmpdir("gcs-root");
	work = fx_tmpdir("gcs-work");
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(name, sizeof(name), "ds/%s", files[i].name);
		write_object(name, files[i].size, seed_of(files[i].name));
	}
	for (int i = 0; i < N_MANY; i++) {
		char obj[80];

		snprintf(name, sizeof(name), "many/f%04d", i);
		snprintf(obj, sizeof(obj), "ds/%s", name);
		write_object(obj, many_size(i), seed_of(name));
	}
	/* Outside the prefix, and a sibling that shares its first letters. */
	write_object("other/x", 10, 1);
	write_object("ds-sibling/y", 10, 2);
}

/* Google's variables and gcloud's files must not leak in from the host. */
static void clean_env(void)
{
	static const char *const vars[] = {
	    "GOOGLE_OAUTH_ACCESS_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS",
	    "GCE_METADATA_HOST", "STORAGE_EMULATOR_HOST"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	setenv("CLOUDSDK_CONFIG", work, 1);
}

static void setup(void)
{
	struct fetch_config cfg;

	clean_env();
	fetch_config_default(&cfg);
	cfg.retries = 4;
	cfg.retry_budget_ms = 10000;
	cfg.connect_timeout_ms = 2000;
	cfg.max_connections = 4;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
}

static void teardown(void)
{
	source_close(src);
	src = NULL;
	free(err);
	err = NULL;
	fetch_engine_free(fe);
	fe = NULL;
	if (fake_pid > 0)
		fx_stop(fake_pid, 5000);
	fake_pid = 0;
	clean_env();
}

/* Starts the fake with extra arguments (NULL-terminated). */
static void start_fake(const char *const extra[])
{
	char script[PATH_MAX], port[16], logp[PATH_MAX];
	char *argv[32];
	int n = 0;

	snprintf(script, sizeof(script), "%s/tests/fake-gcs",
		 getenv("WHARF_SRCDIR") ? getenv("WHARF_SRCDIR") : "..");
	fake_port = fx_free_port();
	snprintf(port, sizeof(port), "%d", fake_port);
	snprintf(fake_url, sizeof(fake_url), "http://127.0.0.1:%d", fake_port);
	snprintf(logp, sizeof(logp), "%s/fake-%d.log", work, fake_port);
	argv[n++] = "/usr/bin/python3";
	argv[n++] = script;
	argv[n++] = "--root";
	argv[n++] = root;
	argv[n++] = "--port";
	argv[n++] = port;
	for (int i = 0; extra && extra[i]; i++)
		argv[n++] = (char *)extra[i];
	argv[n] = NULL;
	fake_pid = fx_spawn(argv, logp);
	ck_assert_int_gt(fake_pid, 0);
	ck_assert_msg(fx_wait_port(fake_port, 15000) == 0,
		      "fake-gcs did not come up; see %s", logp);
}

/* GET on the fake's control API into buf. */
static void fake_get(const char *path, char *buf, size_t cap)
{
	char url[256];
	struct fetch_req req = {0};
	struct fetch_res res;

	snprintf(url, sizeof(url), "%s%s", fake_url, path);
	req.url = url;
	req.buf = buf;
	req.cap = cap - 1;
	ck_assert_int_eq(fetch_run(fe, &req, &res), 0);
	buf[res.len] = '\0';
}

/* One counter from /_fake/stats. */
static long fake_stat(const char *key)
{
	static char buf[1 << 16];
	char pat[64], *p;

	fake_get("/_fake/stats", buf, sizeof(buf));
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(buf, pat);
	ck_assert_msg(p != NULL, "no %s in the fake's stats", key);
	return strtol(p + strlen(pat), NULL, 10);
}

static void inject(int status, int count, const char *kind)
{
	char path[128], buf[64];

	snprintf(path, sizeof(path), "/_fake/inject?status=%d&count=%d&kind=%s",
		 status, count, kind);
	fake_get(path, buf, sizeof(buf));
}

static int open_gs(const char *spec, struct source_options *o)
{
	source_close(src);
	src = NULL;
	free(err);
	err = NULL;
	if (!o->endpoint && !getenv("STORAGE_EMULATOR_HOST"))
		o->endpoint = fake_url;
	return source_open(spec, o, fe, &src, &err);
}

static void open_ok(struct source_options *o)
{
	int rc = open_gs(SPEC, o);

	ck_assert_msg(rc == 0, "open: %d %s", rc, err ? err : "");
}

/* Reads [off, off+len) of path at version into buf through the source. */
static int read_range(const char *path, const char *version, uint64_t off,
		      uint64_t len, uint8_t *buf, size_t *got)
{
	struct source_read rd;
	struct fetch_res res;
	int rc;

	rc = src->ops->prepare_read(src, path, version, off, len, &rd);
	if (rc)
		return rc;
	rd.req.buf = buf;
	rd.req.cap = len;
	rc = fetch_run(src->fetch, &rd.req, &res);
	source_read_done(&rd);
	*got = res.len;
	return rc;
}

/* Stats path and reads it whole, chunk by chunk, comparing every byte. */
static void check_object(const char *path, uint64_t size, uint32_t seed)
{
	struct source_object o;
	uint8_t *buf = malloc(CHUNK);
	char version[64];

	ck_assert_int_eq(src->ops->stat(src, path, &o), 0);
	ck_assert(!o.is_dir);
	ck_assert_uint_eq(o.size, size);
	ck_assert(o.version[0]);
	snprintf(version, sizeof(version), "%s", o.version);
	for (uint64_t off = 0; off < size; off += CHUNK) {
		uint64_t want = size - off < CHUNK ? size - off : CHUNK;
		size_t got;

		ck_assert_int_eq(
		    read_range(path, version, off, CHUNK, buf, &got), 0);
		ck_assert_uint_eq(got, want);
		for (size_t i = 0; i < got; i++)
			if (buf[i] != fx_byte(seed, off + i))
				ck_abort_msg("%s: byte %llu differs", path,
					     (unsigned long long)(off + i));
	}
	free(buf);
}

/* A directory listing collected as "name/" for directories, "name=size". */
struct names {
	char v[N_MANY + 16][128];
	int n;
	bool versions_ok;
};

static int collect(void *arg, const struct source_object *o)
{
	struct names *l = arg;

	ck_assert_int_lt(l->n, N_MANY + 16);
	if (o->is_dir)
		snprintf(l->v[l->n++], sizeof(l->v[0]), "%s/", o->name);
	else
		snprintf(l->v[l->n++], sizeof(l->v[0]), "%s=%llu", o->name,
			 (unsigned long long)o->size);
	if (!o->is_dir && !o->version[0])
		l->versions_ok = false;
	return 0;
}

static bool has(const struct names *l, const char *s)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return true;
	return false;
}

static int list(const char *dir, struct names *l)
{
	memset(l, 0, sizeof(*l));
	l->versions_ok = true;
	return src->ops->list_dir(src, dir, collect, l);
}

/* Sends stderr (the log) to path until log_end(), at debug level. */
static int log_saved = -1;

static void log_to(const char *path)
{
	int fd;

	fflush(stderr);
	log_saved = dup(2);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	dup2(fd, 2);
	close(fd);
	log_set_level(WHARF_LOG_DEBUG);
}

/* Puts stderr back; @return what was logged since log_to(path). */
static char *log_end(const char *path)
{
	char *log;
	size_t n;

	fflush(stderr);
	dup2(log_saved, 2);
	close(log_saved);
	log_saved = -1;
	log_set_level(WHARF_LOG_INFO);
	log = fx_read_file(path, &n);
	ck_assert_ptr_nonnull(log);
	return log;
}

/* ---- listing, reading, versions ---- */

START_TEST(list_root)
{
	struct source_options o = {.anonymous = true};
	static struct names l;

	start_fake(NULL);
	open_ok(&o);
	ck_assert_str_eq(src->id, "gs://" BUCKET "/ds/");
	ck_assert_int_eq(list("", &l), 0);
	ck_assert_int_eq(l.n, 9);
	ck_assert(has(&l, "empty=0"));
	ck_assert(has(&l, "one=1"));
	ck_assert(has(&l, "chunk-1=1048575"));
	ck_assert(has(&l, "big=3145745"));
	ck_assert(has(&l, "odd name+%\xc3\xa9=1000"));
	ck_assert(has(&l, "sub/"));
	ck_assert(has(&l, "many/"));
	ck_assert(has(&l, "gen/"));
	ck_assert(has(&l, "sizes/"));
	ck_assert(l.versions_ok);
	/* Only the fields the source needs were asked for. */
	ck_assert_int_eq(fake_stat("bad_page_token"), 0);
}
END_TEST

START_TEST(pagination)
{
	static const char *const args[] = {"--page-size", "7", NULL};
	struct source_options o = {.anonymous = true};
	static struct names l;
	char want[64];
	long lists0;

	start_fake(args);
	open_ok(&o);
	lists0 = fake_stat("list");
	ck_assert_int_eq(list("many", &l), 0);
	ck_assert_int_eq(l.n, N_MANY);
	for (int i = 0; i < N_MANY; i++) {
		snprintf(want, sizeof(want), "f%04d=%llu", i,
			 (unsigned long long)many_size(i));
		ck_assert_msg(has(&l, want), "%s missing", want);
	}
	ck_assert_int_eq(fake_stat("list") - lists0, (N_MANY + 6) / 7);
	ck_assert_int_le(fake_stat("max_page"), 7);
	ck_assert_int_eq(fake_stat("bad_page_token"), 0);
	/* The root's page of 7 mixes objects and prefixes. */
	ck_assert_int_eq(list("", &l), 0);
	ck_assert_int_eq(l.n, 9);
}
END_TEST

START_TEST(nested)
{
	struct source_options o = {.anonymous = true};
	static struct names l;
	struct source_object so;

	start_fake(NULL);
	open_ok(&o);
	ck_assert_int_eq(list("sub", &l), 0);
	ck_assert_int_eq(l.n, 1);
	ck_assert(has(&l, "deeper/"));
	ck_assert_int_eq(list("sub/deeper", &l), 0);
	ck_assert_int_eq(l.n, 1);
	ck_assert(has(&l, "leaf=100000"));
	ck_assert_int_eq(src->ops->stat(src, "sub", &so), 0);
	ck_assert(so.is_dir);
	ck_assert_int_eq(src->ops->stat(src, "sub/deeper", &so), 0);
	ck_assert(so.is_dir);
	ck_assert_int_eq(src->ops->stat(src, "sub/deeper/leaf", &so), 0);
	ck_assert(!so.is_dir);
	ck_assert_uint_eq(so.size, 100000);
	ck_assert_int_gt(so.mtime, 1000000000);
	ck_assert_int_eq(src->ops->stat(src, "", &so), 0);
	ck_assert(so.is_dir);
	ck_assert_int_eq(list("nope", &l), -ENOENT);
	ck_assert_int_eq(src->ops->stat(src, "nope", &so), -ENOENT);
	ck_assert_int_eq(src->ops->stat(src, "sub/dee", &so), -ENOENT);
	/* A prefix at the bucket's root, and one that only shares letters. */
	ck_assert_int_eq(open_gs("gs://" BUCKET, &o), 0);
	ck_assert_int_eq(list("", &l), 0);
	ck_assert_int_eq(l.n, 3);
	ck_assert(has(&l, "ds/") && has(&l, "other/") &&
		  has(&l, "ds-sibling/"));
	ck_assert_int_eq(list("ds-sibling", &l), 0);
	ck_assert(has(&l, "y=10"));
	ck_assert_int_eq(l.n, 1);
}
END_TEST

START_TEST(bytes_equal)
{
	struct source_options o = {.anonymous = true};
	uint8_t buf[64];
	struct source_object so;
	size_t got;

	start_fake(NULL);
	open_ok(&o);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		check_object(files[i].name, files[i].size,
			     seed_of(files[i].name));
	check_object("many/f0042", many_size(42), seed_of("many/f0042"));
	/* A range across the end, and one past it. */
	ck_assert_int_eq(src->ops->stat(src, "big", &so), 0);
	ck_assert_int_eq(
	    read_range("big", so.version, 3 * CHUNK + 7, 64, buf, &got), 0);
	ck_assert_uint_eq(got, 10);
	ck_assert_uint_eq(buf[9], fx_byte(seed_of("big"), 3 * CHUNK + 16));
	ck_assert_int_eq(
	    read_range("big", so.version, 3 * CHUNK + 17, 64, buf, &got), 0);
	ck_assert_uint_eq(got, 0);
}
END_TEST

START_TEST(generation_pinning)
{
	struct source_options o = {.anonymous = true};
	struct source_object so;
	char v1[64], path[PATH_MAX];
	uint8_t buf[4096];
	struct timespec ts[2] = {{.tv_sec = 2000000000},
				 {.tv_sec = 2000000000}};
	size_t got;

	start_fake(NULL);
	open_ok(&o);
	ck_assert_int_eq(src->ops->stat(src, "gen/obj", &so), 0);
	snprintf(v1, sizeof(v1), "%s", so.version);
	ck_assert_int_eq(read_range("gen/obj", v1, 0, 4096, buf, &got), 0);
	ck_assert_uint_eq(buf[100], fx_byte(seed_of("gen/obj"), 100));
	/* Replace the object: a new generation. */
	snprintf(path, sizeof(path), "%s/%s/ds/gen/obj", root, BUCKET);
	ck_assert_int_eq(fx_write_file(path, 4096, 99), 0);
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	ck_assert_int_eq(src->ops->stat(src, "gen/obj", &so), 0);
	ck_assert_str_ne(so.version, v1);
	/* The old generation is gone: no mixed bytes, a clean error. */
	ck_assert_int_eq(read_range("gen/obj", v1, 0, 4096, buf, &got),
			 -ENOENT);
	ck_assert_int_ge(fake_stat("wrong_generation"), 1);
	ck_assert_int_eq(read_range("gen/obj", so.version, 0, 4096, buf, &got),
			 0);
	for (size_t i = 0; i < 4096; i++)
		ck_assert_uint_eq(buf[i], fx_byte(99, i));
	ck_assert_int_eq(fx_write_file(path, 4096, seed_of("gen/obj")), 0);
}
END_TEST

START_TEST(not_found)
{
	struct source_options o = {.anonymous = true};
	uint8_t buf[16];
	size_t got;

	start_fake(NULL);
	open_ok(&o);
	ck_assert_int_eq(read_range("missing", "", 0, 16, buf, &got), -ENOENT);
	ck_assert_int_eq(read_range("missing", "123", 0, 16, buf, &got),
			 -ENOENT);
	ck_assert_int_eq(open_gs("gs://no-such-bucket/x", &o), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "no-such-bucket"));
	ck_assert_ptr_nonnull(strstr(err, "404"));
	ck_assert_int_eq(open_gs("gs://Bad_Bucket/x", &o), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "bucket"));
}
END_TEST

/* ---- retries ---- */

START_TEST(retried)
{
	struct source_options o = {.anonymous = true};
	struct fetch_stats st;
	static struct names l;

	start_fake(NULL);
	open_ok(&o);
	inject(503, 2, "list");
	inject(429, 2, "media");
	inject(500, 1, "meta");
	ck_assert_int_eq(list("", &l), 0);
	ck_assert_int_eq(l.n, 9);
	check_object("big", 3 * CHUNK + 17, seed_of("big"));
	ck_assert_int_eq(fake_stat("injected"), 5);
	fetch_get_stats(fe, &st);
	ck_assert_uint_ge(st.retries, 5);
}
END_TEST

START_TEST(retries_run_out)
{
	struct source_options o = {.anonymous = true};
	uint8_t buf[16];
	size_t got;
	struct fetch_config cfg;

	fetch_engine_free(fe);
	fetch_config_default(&cfg);
	cfg.retries = 2;
	cfg.retry_budget_ms = 5000;
	ck_assert_int_eq(fetch_engine_new(&cfg, &fe), 0);
	start_fake(NULL);
	open_ok(&o);
	inject(503, 10, "media");
	ck_assert_int_eq(read_range("one", "", 0, 1, buf, &got), -EIO);
	ck_assert_int_eq(fake_stat("injected"), 3);
}
END_TEST

/* ---- credentials ---- */

static const char *const need_good[] = {"--token", GOOD, NULL};

static void write_text(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(auth_required)
{
	struct source_options o = {.anonymous = true};

	start_fake(need_good);
	ck_assert_int_eq(open_gs(SPEC, &o), -EACCES);
	ck_assert_ptr_nonnull(strstr(err, "401"));
	ck_assert_int_ge(fake_stat("unauthorized"), 1);
	/* No credentials anywhere: a clear refusal before any request. */
	o.anonymous = false;
	ck_assert_int_eq(open_gs(SPEC, &o), -EACCES);
	ck_assert_ptr_nonnull(strstr(err, "no Google credentials"));
	ck_assert_ptr_nonnull(strstr(err, "--anonymous"));
}
END_TEST

START_TEST(token_file)
{
	struct source_options o = {0};
	char path[PATH_MAX];

	start_fake(need_good);
	snprintf(path, sizeof(path), "%s/token", work);
	write_text(path, GOOD "\n", 0600);
	o.token_file = path;
	open_ok(&o);
	check_object("one", 1, seed_of("one"));
	ck_assert_int_eq(fake_stat("unauthorized"), 0);
	write_text(path, "  stale-token \n", 0600);
	ck_assert_int_eq(open_gs(SPEC, &o), -EACCES);
	o.token_file = "/nonexistent/token";
	ck_assert_int_eq(open_gs(SPEC, &o), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/token"));
}
END_TEST

/* A token the origin stops accepting is renewed once and the request
 * asked again. */
START_TEST(token_refused_renewed)
{
	static const char *const args[] = {"--token", "t-one", "--token",
					   "t-two", NULL};
	struct source_options o = {0};
	static struct names l;
	char path[PATH_MAX], buf[64];

	start_fake(args);
	snprintf(path, sizeof(path), "%s/token", work);
	write_text(path, "t-one\n", 0600);
	o.token_file = path;
	open_ok(&o);
	fake_get("/_fake/revoke?token=t-one", buf, sizeof(buf));
	write_text(path, "t-two\n", 0600);
	ck_assert_int_eq(list("sub", &l), 0);
	ck_assert_int_eq(l.n, 1);
	ck_assert_int_eq(fake_stat("unauthorized"), 1);
	/* Refused again after renewing: no loop, a clean EACCES. */
	fake_get("/_fake/revoke?token=t-two", buf, sizeof(buf));
	ck_assert_int_eq(list("many", &l), -EACCES);
	ck_assert_int_eq(fake_stat("unauthorized"), 3);
}
END_TEST

/* The fake's next listing answers body (200). */
static void inject_list(const char *body)
{
	char path[1024], enc[512], reply[128];

	ck_assert_int_ge(url_encode(body, false, enc, sizeof(enc)), 0);
	snprintf(path, sizeof(path),
		 "/_fake/inject?status=200&count=1&kind=list&body=%s", enc);
	fake_get(path, reply, sizeof(reply));
}

/* Answers that are not what the API sends: clear errors, no crash. */
START_TEST(malformed_answers)
{
	static const char *const odd[] = {
	    "{\"items\": [{\"name\": \"ds/sub/x\", \"size\": \"-1\", "
	    "\"generation\": \"1\"}]}",
	    "{\"items\": [{\"name\": \"ds/sub/a/b\", \"size\": 1, "
	    "\"generation\": 1}]}",
	    "{\"prefixes\": [\"ds/sub//\"]}",
	};
	static const char *const bodies[] = {
	    "{\"items\": [{\"name\": 5}]}",
	    "{\"items\": [{\"name\": \"elsewhere/x\", \"size\": \"1\", "
	    "\"generation\": \"1\"}]}",
	    "{\"prefixes\": [\"ds/sub/a\"]}",
	    "{\"items\": [{\"name\": \"ds/sub/x\"}]}",
	    "{\"items\": [",
	    "<html>",
	    "{\"nextPageToken\": \"x\"} junk",
	};
	struct source_options o = {.anonymous = true};
	static struct names l;
	struct source_object so;

	start_fake(NULL);
	open_ok(&o);
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		inject_list(bodies[i]);
		ck_assert_msg(list("sub", &l) == -EIO, "body %zu accepted", i);
	}
	ck_assert_int_eq(list("sub", &l), 0);
	ck_assert_int_eq(l.n, 1);
	/* Entries no filesystem can show are handed on for the tree to name
	 * and leave out; the page is read. */
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		inject_list(odd[i]);
		ck_assert_msg(list("sub", &l) == 0, "odd body %zu refused", i);
		ck_assert_int_eq(l.n, 1);
	}
	fake_get("/_fake/inject?status=200&count=1&kind=meta&body=%7B%7D",
		 l.v[0], sizeof(l.v[0]));
	ck_assert_int_eq(src->ops->stat(src, "one", &so), -EIO);
	ck_assert_int_eq(src->ops->stat(src, "one", &so), 0);
}
END_TEST

/* One parser reads GCP's and Azure's token answers; each provider's rules
 * decide what the answer must hold besides its token. */
START_TEST(token_answer_rules)
{
	static const char no_exp[] = "{\"access_token\": \"t.1\", "
				     "\"token_type\": \"mac\"}";
	static const char mac[] = "{\"access_token\": \"t.1\", "
				  "\"expires_in\": \"5\", \"token_type\": "
				  "\"mac\"}";
	static const char bearer[] = "{\"token_type\": \"bearer\", "
				     "\"expires_in\": 5, \"x\": [1], "
				     "\"access_token\": \"t.2\"}";
	static const char expired[] = "{\"access_token\": \"t.3\", "
				      "\"expires_in\": 0}";
	static const char *const bad[] = {
	    "{\"access_token\": \"a b\", \"expires_in\": 1}",
	    "{\"access_token\": \"\", \"expires_in\": 1}",
	    "{\"access_token\": \"abcdefgh\", \"expires_in\": 1}",
	    "{\"access_token\": \"t\", \"expires_in\": -1}",
	    "{\"access_token\": \"t\", \"expires_in\": 1} junk",
	    "{\"expires_in\": 1}",
	    "[]",
	};
	char tok[8], *why = NULL;
	uint64_t exp = 7;

	/* GCP: a token command may leave the expiry out; no token_type rule */
	ck_assert_int_eq(oauth_token_parse(no_exp, strlen(no_exp), tok,
					   sizeof(tok), GCP_TOKEN_RULES, &exp,
					   "t", &why),
			 0);
	ck_assert_str_eq(tok, "t.1");
	ck_assert_uint_eq(exp, 7);
	ck_assert_int_eq(oauth_token_parse(mac, strlen(mac), tok, sizeof(tok),
					   GCP_TOKEN_RULES, &exp, "t", &why),
			 0);
	ck_assert_uint_eq(exp, 5);
	/* Azure: both an expiry and a Bearer token_type (any case) */
	ck_assert_int_eq(oauth_token_parse(no_exp, strlen(no_exp), tok,
					   sizeof(tok), AZURE_TOKEN_RULES, &exp,
					   "Entra", &why),
			 -EINVAL);
	ck_assert_str_eq(tok, "");
	ck_assert_ptr_nonnull(strstr(why, "Entra: "));
	ck_assert_ptr_nonnull(strstr(why, "expires_in"));
	ck_assert_ptr_null(strstr(why, "t.1")); /* never the token */
	free(why);
	why = NULL;
	ck_assert_int_eq(oauth_token_parse(mac, strlen(mac), tok, sizeof(tok),
					   AZURE_TOKEN_RULES, &exp, "t", &why),
			 -EINVAL);
	free(why);
	why = NULL;
	exp = 0;
	ck_assert_int_eq(oauth_token_parse(bearer, strlen(bearer), tok,
					   sizeof(tok), AZURE_TOKEN_RULES, &exp,
					   "t", &why),
			 0);
	ck_assert_str_eq(tok, "t.2");
	ck_assert_uint_eq(exp, 5);
	/* Token endpoints' rules: an expiry, and one in the future */
	ck_assert_int_eq(oauth_token_parse(no_exp, strlen(no_exp), tok,
					   sizeof(tok),
					   GCP_TOKEN_RULES | OAUTH_NEED_EXPIRY,
					   &exp, "t", &why),
			 -EINVAL);
	free(why);
	why = NULL;
	ck_assert_int_eq(oauth_token_parse(expired, strlen(expired), tok,
					   sizeof(tok), AZURE_TOKEN_RULES, &exp,
					   "t", &why),
			 -EINVAL);
	free(why);
	why = NULL;
	/* Either way: a token a header can carry, within tok's size, in one
	 * JSON object and nothing after it */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(oauth_token_parse(bad[i], strlen(bad[i]), tok,
						sizeof(tok), GCP_TOKEN_RULES,
						&exp, "t", &why) == -EINVAL,
			      "answer %zu accepted", i);
		ck_assert_msg(why && !strncmp(why, "t", 1), "answer %zu: %s", i,
			      why ? why : "no error");
		ck_assert_str_eq(tok, "");
		free(why);
		why = NULL;
	}
}
END_TEST

/* A server that answers a page token with the same token: -EIO and a
 * clear message after two pages, not a loop holding the listing lock. */
START_TEST(repeated_page_token)
{
	struct source_options o = {.anonymous = true};
	static struct names l;
	char logp[PATH_MAX], buf[64], *log;
	long lists0;

	snprintf(logp, sizeof(logp), "%s/repeat.log", work);
	start_fake(NULL);
	open_ok(&o);
	lists0 = fake_stat("list");
	/* The first answer names token "stuck"; so does the answer to it. */
	fake_get("/_fake/inject?status=200&count=2&kind=list&body="
		 "%7B%22nextPageToken%22%3A%22stuck%22%7D",
		 buf, sizeof(buf));
	log_to(logp);
	ck_assert_int_eq(list("sub", &l), -EIO);
	log = log_end(logp);
	ck_assert_int_eq(fake_stat("list") - lists0, 2);
	ck_assert_int_eq(fake_stat("bad_page_token"), 0);
	ck_assert_msg(strstr(log, "listing gs://" BUCKET "/ds/sub/") &&
			  strstr(log, "page token \"stuck\" with the same "
				      "token"),
		      "unclear: %s", log);
	free(log);
	/* The next listing is the server's own again. */
	ck_assert_int_eq(list("sub", &l), 0);
	ck_assert_int_eq(l.n, 1);
}
END_TEST

START_TEST(token_env)
{
	struct source_options o = {0};
	char path[PATH_MAX];

	start_fake(need_good);
	setenv("GOOGLE_OAUTH_ACCESS_TOKEN", GOOD, 1);
	open_ok(&o);
	check_object("one", 1, seed_of("one"));
	/* --token-file comes first. */
	snprintf(path, sizeof(path), "%s/token", work);
	write_text(path, "another-token\n", 0600);
	o.token_file = path;
	ck_assert_int_eq(open_gs(SPEC, &o), -EACCES);
	/* --anonymous sends no token at all. */
	o.token_file = NULL;
	o.anonymous = true;
	ck_assert_int_eq(open_gs(SPEC, &o), -EACCES);
	ck_assert_int_eq(fake_stat("tokens_seen"), 2);
}
END_TEST

/* The start of a token command's script: $n, its run (1, 2, ...), counted
 * in a file (printf arguments: its path 4 times), written whole by a
 * rename, so that a test reading it while a renewal runs never sees it
 * empty. */
#define COUNT_RUN_SH                                                           \
	"n=$(( $(cat '%s' 2>/dev/null || echo 0) + 1 ))\n"                     \
	"echo $n > '%s.new' && mv '%s.new' '%s'\n"

/* Writes work/NAME, a --token-command whose Nth run prints token cmd-N,
 * good for expires_in seconds, after sleeping delay_s seconds, and counts
 * its runs in work/NAME.count (COUNT_RUN_SH). */
static void counting_token_command(const char *name, unsigned expires_in,
				   unsigned delay_s, char script[PATH_MAX],
				   char count[PATH_MAX])
{
	char text[4 * PATH_MAX + 256];

	snprintf(script, PATH_MAX, "%s/%s", work, name);
	snprintf(count, PATH_MAX, "%s/%s.count", work, name);
	snprintf(text, sizeof(text),
		 "#!/bin/sh\n" COUNT_RUN_SH "sleep %u\n"
		 "printf '{\"access_token\": \"cmd-%%d\", "
		 "\"expires_in\": %u}\\n' $n\n",
		 count, count, count, count, delay_s, expires_in);
	write_text(script, text, 0700);
}

/* Starts the fake with fake_args and opens the source with a counting
 * token command whose tokens last a second. */
static void open_with_short_tokens(const char *const fake_args[],
				   char count[PATH_MAX])
{
	static char script[PATH_MAX]; /* the source keeps a pointer */
	struct source_options o = {0};

	start_fake(fake_args);
	counting_token_command("token-cmd", 1, 0, script, count);
	o.token_command = script;
	open_ok(&o);
}

START_TEST(token_command_refresh)
{
	static const char *const args[] = {"--accept-prefix", "cmd-", NULL};
	char count[PATH_MAX];
	static struct names l;
	size_t n;
	char *c;

	int runs;

	open_with_short_tokens(args, count);
	ck_assert_int_eq(list("", &l), 0);
	c = fx_read_file(count, &n);
	runs = atoi(c);
	free(c);
	ck_assert_int_ge(runs, 1);
	/* With no request meanwhile, the renewal thread runs the command
	 * again (every half second for these 1 s tokens). */
	usleep(1200 * 1000);
	c = fx_read_file(count, &n);
	ck_assert_int_ge(atoi(c), runs + 1);
	free(c);
	ck_assert_int_eq(list("", &l), 0);
	ck_assert_int_ge(fake_stat("tokens_seen"), 2);
	ck_assert_int_eq(fake_stat("unauthorized"), 0);
}
END_TEST

/* A retry goes out with the token current then, not the one its first
 * attempt carried: here that one expired while the attempt failed slowly
 * (the fake refuses a token a second after its first use). */
START_TEST(retry_renews_token)
{
	static const char *const args[] = {"--accept-prefix", "cmd-",
					   "--token-ttl", "1", NULL};
	char count[PATH_MAX], buf[64];
	static struct names l;
	size_t n;
	char *c;

	open_with_short_tokens(args, count);
	fake_get("/_fake/inject?status=503&count=1&kind=media&delay=1.5", buf,
		 sizeof(buf));
	check_object("one", 1, seed_of("one"));
	/* A listing's retry likewise. */
	fake_get("/_fake/inject?status=503&count=1&kind=list&delay=1.5", buf,
		 sizeof(buf));
	ck_assert_int_eq(list("", &l), 0);
	ck_assert_int_eq(l.n, 9);
	ck_assert_int_eq(fake_stat("injected"), 2);
	ck_assert_int_eq(fake_stat("expired"), 0);
	ck_assert_int_eq(fake_stat("unauthorized"), 0);
	c = fx_read_file(count, &n);
	ck_assert_int_ge(atoi(c), 3);
	free(c);
}
END_TEST

/* Whether the process whose pid is in work/NAME still runs (a zombie
 * does not count), after up to 2 s for it to die. */
static bool process_lives(const char *dir, const char *name)
{
	char path[PATH_MAX], *text, state = 0;
	size_t n;
	int pid;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	text = fx_read_file(path, &n);
	ck_assert_ptr_nonnull(text);
	pid = atoi(text);
	free(text);
	ck_assert_int_gt(pid, 0);
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(path, "r");

		state = 0;
		if (f) {
			if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
				state = 0;
			fclose(f);
		}
		if (state == 0 || state == 'Z')
			return false;
		usleep(10000);
	}
	fprintf(stderr, "process %d is still in state %c\n", pid, state);
	return true;
}

START_TEST(token_command_bare)
{
	struct source_options o = {0};
	char script[PATH_MAX], text[PATH_MAX + 64];

	start_fake(need_good);
	snprintf(script, sizeof(script), "%s/token-bare", work);
	write_text(script, "#!/bin/sh\necho " GOOD "\n", 0700);
	o.token_command = script;
	o.token_lifetime = 600;
	open_ok(&o);
	check_object("one", 1, seed_of("one"));
	write_text(script, "#!/bin/sh\necho oops >&2\nexit 3\n", 0700);
	ck_assert_int_eq(open_gs(SPEC, &o), -EIO);
	ck_assert_ptr_nonnull(strstr(err, "status 3"));
	/* Named as "the token command", never by its text. */
	ck_assert_msg(strstr(err, "the token command") &&
			  !strstr(err, "token-bare"),
		      "%s", err);
	/* A command that hangs is killed, with what it started. */
	snprintf(text, sizeof(text),
		 "#!/bin/sh\nsleep 60 &\necho $! > '%s/child'\nsleep 60\n",
		 work);
	write_text(script, text, 0700);
	o.token_timeout = 1;
	ck_assert_int_eq(open_gs(SPEC, &o), -EIO);
	ck_assert_ptr_nonnull(strstr(err, "no answer after 1 s"));
	ck_assert(!process_lives(work, "child"));
}
END_TEST

/* An RSA key pair in work/NAME.pem and work/NAME.pub; a key file for it. */
static void make_key(const char *name, char *keyfile, size_t cap)
{
	char pem[PATH_MAX], *text, *json, *q;
	size_t n;

	ck_assert_int_eq(fx_sh("openssl genrsa -out '%s/%s.pem' 2048 "
			       ">/dev/null 2>&1 && openssl rsa -in "
			       "'%s/%s.pem' -pubout -out '%s/%s.pub' "
			       ">/dev/null 2>&1",
			       work, name, work, name, work, name),
			 0);
	snprintf(pem, sizeof(pem), "%s/%s.pem", work, name);
	text = fx_read_file(pem, &n);
	ck_assert_ptr_nonnull(text);
	json = malloc(2 * n + 1024);
	q = json + sprintf(json, "{\n  \"type\": \"service_account\",\n"
				 "  \"project_id\": \"wharf-test\",\n"
				 "  \"private_key_id\": \"abc123\",\n"
				 "  \"private_key\": \"");
	for (size_t i = 0; i < n; i++) {
		if (text[i] == '\n') {
			*q++ = '\\';
			*q++ = 'n';
		} else {
			*q++ = text[i];
		}
	}
	sprintf(
	    q,
	    "\",\n  \"client_email\": \"" SA_EMAIL "\",\n"
	    "  \"client_id\": \"1234\",\n"
	    "  \"auth_uri\": \"https://accounts.google.com/o/oauth2/auth\",\n"
	    "  \"token_uri\": \"%s/token\",\n"
	    "  \"nested\": {\"skipped\": [1, 2.5e3, true, null, \"x\"]}\n"
	    "}\n",
	    fake_url);
	snprintf(keyfile, cap, "%s/%s.json", work, name);
	write_text(keyfile, json, 0600);
	free(json);
	free(text);
}

START_TEST(service_account)
{
	char pub[PATH_MAX], keyfile[PATH_MAX];
	const char *args[] = {"--sa-email", SA_EMAIL, "--sa-pubkey", pub, NULL};
	struct source_options o = {0};

	snprintf(pub, sizeof(pub), "%s/sa.pub", work);
	start_fake(args);
	make_key("sa", keyfile, sizeof(keyfile));
	setenv("GOOGLE_APPLICATION_CREDENTIALS", keyfile, 1);
	open_ok(&o);
	check_object("sub/deeper/leaf", 100000, seed_of("sub/deeper/leaf"));
	ck_assert_int_eq(fake_stat("token"), 1);
	ck_assert_int_eq(fake_stat("jwt_verified"), 1);
	ck_assert_int_eq(fake_stat("unauthorized"), 0);
}
END_TEST

START_TEST(service_account_wrong_key)
{
	char pub[PATH_MAX], keyfile[PATH_MAX];
	const char *args[] = {"--sa-email", SA_EMAIL, "--sa-pubkey", pub, NULL};
	struct source_options o = {0};

	/* The fake trusts key "a"; the key file holds key "b". */
	snprintf(pub, sizeof(pub), "%s/a.pub", work);
	start_fake(args);
	make_key("a", keyfile, sizeof(keyfile));
	make_key("b", keyfile, sizeof(keyfile));
	setenv("GOOGLE_APPLICATION_CREDENTIALS", keyfile, 1);
	ck_assert_int_eq(open_gs(SPEC, &o), -EACCES);
	ck_assert_ptr_nonnull(strstr(err, "service account"));
	ck_assert_ptr_nonnull(strstr(err, "400"));
	ck_assert_int_eq(fake_stat("jwt_verified"), 0);
	/* Not a key at all. */
	write_text(keyfile,
		   "{\"type\": \"service_account\", \"client_email\":"
		   " \"x@y\", \"private_key\": \"junk\"}",
		   0600);
	ck_assert_int_eq(open_gs(SPEC, &o), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a PEM RSA key"));
}
END_TEST

START_TEST(authorized_user)
{
	static const char *const args[] = {"--refresh-token", "1//refresh-me",
					   NULL};
	struct source_options o = {0};
	char keyfile[PATH_MAX], text[512];

	start_fake(args);
	snprintf(keyfile, sizeof(keyfile),
		 "%s/application_default_"
		 "credentials.json",
		 work);
	snprintf(text, sizeof(text),
		 "{\"type\": \"authorized_user\", \"client_id\": \"c.apps\", "
		 "\"client_secret\": \"s3cr3t\", \"refresh_token\": "
		 "\"1//refresh-me\", \"token_uri\": \"%s/token\"}",
		 fake_url);
	write_text(keyfile, text, 0600);
	/* Found where gcloud keeps it ($CLOUDSDK_CONFIG is work). */
	open_ok(&o);
	check_object("one", 1, seed_of("one"));
	ck_assert_int_eq(fake_stat("token"), 1);
	unlink(keyfile);
}
END_TEST

START_TEST(metadata_server)
{
	static const char *const args[] = {"--metadata", NULL};
	struct source_options o = {0};
	char host[64];

	start_fake(args);
	snprintf(host, sizeof(host), "127.0.0.1:%d", fake_port);
	setenv("GCE_METADATA_HOST", host, 1);
	open_ok(&o);
	check_object("one", 1, seed_of("one"));
	ck_assert_int_eq(fake_stat("metadata"), 1);
	ck_assert_int_eq(fake_stat("unauthorized"), 0);
}
END_TEST

START_TEST(emulator_host)
{
	struct source_options o = {0};
	char host[64];

	start_fake(NULL);
	snprintf(host, sizeof(host), "127.0.0.1:%d", fake_port);
	setenv("STORAGE_EMULATOR_HOST", host, 1);
	/* No credentials with an emulator: anonymous, as Google's tools. */
	open_ok(&o);
	check_object("one", 1, seed_of("one"));
	ck_assert_int_eq(fake_stat("tokens_seen"), 0);
	ck_assert_int_ge(fake_stat("anonymous"), 2);
}
END_TEST

/* Every credential path, with failures, at debug level: no token in logs. */
START_TEST(token_never_logged)
{
	char pub[PATH_MAX], keyfile[PATH_MAX], logp[PATH_MAX], tok[PATH_MAX];
	const char *args[] = {"--sa-email", SA_EMAIL, "--sa-pubkey", pub,
			      "--token",    GOOD,     "--metadata",  NULL};
	struct source_options o = {0};
	static char stats[1 << 16];
	char *log, *p;
	size_t n;

	snprintf(pub, sizeof(pub), "%s/sa.pub", work);
	snprintf(logp, sizeof(logp), "%s/wharf.log", work);
	snprintf(tok, sizeof(tok), "%s/token", work);
	start_fake(args);
	make_key("sa", keyfile, sizeof(keyfile));
	log_to(logp);

	write_text(tok, GOOD "\n", 0600);
	o.token_file = tok;
	ck_assert_int_eq(open_gs(SPEC, &o), 0);
	check_object("one", 1, seed_of("one"));
	write_text(tok, "wrong-token-c0ffee\n", 0600);
	ck_assert_int_eq(open_gs(SPEC, &o), -EACCES);
	o.token_file = NULL;
	setenv("GOOGLE_APPLICATION_CREDENTIALS", keyfile, 1);
	ck_assert_int_eq(open_gs(SPEC, &o), 0);
	check_object("one", 1, seed_of("one"));
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	snprintf(stats, sizeof(stats), "127.0.0.1:%d", fake_port);
	setenv("GCE_METADATA_HOST", stats, 1);
	ck_assert_int_eq(open_gs(SPEC, &o), 0);
	check_object("one", 1, seed_of("one"));

	log = log_end(logp);
	/* The log did say things: which credentials, which refusal. */
	ck_assert_ptr_nonnull(strstr(log, "GCS credentials"));
	ck_assert_ptr_nonnull(strstr(log, "401"));
	ck_assert_ptr_null(strstr(log, GOOD));
	ck_assert_ptr_null(strstr(log, "wrong-token-c0ffee"));
	ck_assert_ptr_null(strstr(log, "PRIVATE KEY"));
	/* Nor any token the fake issued. */
	fake_get("/_fake/stats", stats, sizeof(stats));
	p = strstr(stats, "\"issued\": [");
	ck_assert_ptr_nonnull(p);
	n = 0;
	for (p = strstr(p, "ya29."); p; p = strstr(p + 1, "ya29.")) {
		char issued[128];
		size_t k = strcspn(p, "\"");

		ck_assert_uint_lt(k, sizeof(issued));
		memcpy(issued, p, k);
		issued[k] = '\0';
		ck_assert_msg(!strstr(log, issued), "a token in the log");
		n++;
	}
	ck_assert_uint_eq(n, 2);
	free(log);
}
END_TEST

/* ---- through a real mount ---- */

static char mnt[PATH_MAX]; /* the mountpoint a test made, for teardown */

static void mount_teardown(void)
{
	if (mnt[0]) {
		fx_sh("mountpoint -q '%s' && { '%s' umount '%s' || "
		      "umount -l '%s'; }; true",
		      mnt, fx_wharf_bin(), mnt, mnt);
		mnt[0] = '\0';
	}
	teardown();
}

/* `wharf mount` on work/NAME (daemonized: it returns once the mount is
 * up), which becomes `mnt`. */
static int mount_gs_on(const char *name, const char *cache, const char *extra)
{
	snprintf(mnt, sizeof(mnt), "%s/%s", work, name);
	ck_assert_int_eq(fx_mkdirs(mnt), 0);
	return fx_sh("'%s' mount --cache-dir '%s' --chunk-size 1M --retries 2 "
		     "--endpoint '%s' %s " SPEC " '%s' >>'%s/mount.log' 2>&1",
		     fx_wharf_bin(), cache, fake_url, extra, mnt, work);
}

static int mount_gs(const char *cache, const char *extra)
{
	return mount_gs_on("mnt", cache, extra);
}

static void check_mounted_file(const char *name, uint64_t size, uint32_t seed)
{
	char path[PATH_MAX + 64];
	uint8_t *buf;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", mnt, name);
	buf = fx_read_file(path, &len);
	ck_assert_msg(buf != NULL, "%s: %s", path, strerror(errno));
	ck_assert_uint_eq(len, size);
	for (size_t i = 0; i < len; i++)
		if (buf[i] != fx_byte(seed, i))
			ck_abort_msg("%s: byte %zu differs", path, i);
	free(buf);
}

/* Whether the mounts' log says what. */
static bool mount_log_has(const char *what)
{
	char path[PATH_MAX];
	size_t n;
	char *log;
	bool found;

	snprintf(path, sizeof(path), "%s/mount.log", work);
	log = fx_read_file(path, &n);
	found = log && strstr(log, what);
	free(log);
	return found;
}

static int count_dir(const char *rel)
{
	char path[PATH_MAX + 64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%s", mnt, rel);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

START_TEST(mount_bytes)
{
	static const char *const args[] = {"--page-size", "16", NULL};
	char cache[PATH_MAX], name[64];

	start_fake(args);
	snprintf(cache, sizeof(cache), "%s/cache", work);
	ck_assert_int_eq(mount_gs(cache, "--anonymous"), 0);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		check_mounted_file(files[i].name, files[i].size,
				   seed_of(files[i].name));
	ck_assert_int_eq(count_dir("many"), N_MANY);
	for (int i = 0; i < N_MANY; i += 7) {
		snprintf(name, sizeof(name), "many/f%04d", i);
		check_mounted_file(name, many_size(i), seed_of(name));
	}
	/* The origin gone, what was read comes from the cache. */
	fx_stop(fake_pid, 5000);
	fake_pid = 0;
	check_mounted_file("big", 3 * CHUNK + 17, seed_of("big"));
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	/* Mounted again with the origin gone: from the listing snapshot. */
	ck_assert_int_eq(mount_gs(cache, "--anonymous"), 0);
	ck_assert(mount_log_has("serving the listing snapshot"));
	check_mounted_file("big", 3 * CHUNK + 17, seed_of("big"));
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
}
END_TEST

START_TEST(mount_service_account)
{
	char pub[PATH_MAX], keyfile[PATH_MAX], cache[PATH_MAX];
	const char *args[] = {"--sa-email", SA_EMAIL, "--sa-pubkey", pub, NULL};

	snprintf(pub, sizeof(pub), "%s/sa.pub", work);
	start_fake(args);
	make_key("sa", keyfile, sizeof(keyfile));
	snprintf(cache, sizeof(cache), "%s/cache", work);
	/* Without credentials the mount is refused... */
	ck_assert_int_ne(mount_gs(cache, ""), 0);
	ck_assert(mount_log_has("no Google credentials found"));
	/* ...with the key file it works. */
	setenv("GOOGLE_APPLICATION_CREDENTIALS", keyfile, 1);
	ck_assert_int_eq(mount_gs(cache, ""), 0);
	check_mounted_file("sub/deeper/leaf", 100000,
			   seed_of("sub/deeper/leaf"));
	ck_assert_int_eq(fake_stat("jwt_verified"), 1);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
}
END_TEST

/* An object replaced while mounted: its old bytes or an error, never the
 * new generation's bytes inside the old file. */
START_TEST(mount_replaced_object)
{
	char cache[PATH_MAX], path[PATH_MAX + 64], obj[PATH_MAX];
	const uint64_t size = 50ull << 20, tail = size - 4096;
	const uint32_t seed = seed_of("sizes/50M");
	struct timespec ts[2] = {{.tv_sec = 2100000000},
				 {.tv_sec = 2100000000}};
	uint8_t buf[4096];
	int fd;

	start_fake(NULL);
	snprintf(cache, sizeof(cache), "%s/cache-replaced", work);
	ck_assert_int_eq(mount_gs(cache, "--anonymous --readahead 0"), 0);
	snprintf(path, sizeof(path), "%s/sizes/50M", mnt);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), sizeof(buf));
	ck_assert_uint_eq(buf[4095], fx_byte(seed, 4095));
	snprintf(obj, sizeof(obj), "%s/%s/ds/sizes/50M", root, BUCKET);
	ck_assert_int_eq(fx_write_file(obj, size, 4242), 0);
	ck_assert_int_eq(utimensat(AT_FDCWD, obj, ts, 0), 0);
	/* The last chunk was never fetched: its generation is gone. */
	errno = 0;
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), (off_t)tail), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_ge(fake_stat("wrong_generation"), 1);
	/* The first one still reads as it was. */
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), sizeof(buf));
	ck_assert_uint_eq(buf[100], fx_byte(seed, 100));
	close(fd);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	ck_assert_int_eq(fx_write_file(obj, size, seed), 0);
}
END_TEST

/*
 * SIGTERM while a --token-command runs: its first run gives a token that
 * lasts a second, its second (the renewal thread's, half a second later)
 * sleeps 20 s (in a child, as a slow helper would) before it answers.  The
 * daemon exits with the command and its child killed: neither lives to
 * its end, which each marks in a file (before, the daemon waited for the
 * command, up to its 30 s).  A read meanwhile ends while the command is
 * still running: it does not wait for it.
 */
START_TEST(mount_sigterm_during_token_command)
{
	static const char *const args[] = {"--accept-prefix", "cmd-", NULL};
	char cache[PATH_MAX], opts[PATH_MAX * 2], script[PATH_MAX];
	char count[PATH_MAX], sleeper[PATH_MAX], text[8 * PATH_MAX];
	char path[PATH_MAX + 16], child_done[PATH_MAX], cmd_done[PATH_MAX];
	pid_t daemon, reader, sleep_pid = 0;
	size_t n;
	char *c;
	int waited, status = 0;
	bool reaped = false;

	start_fake(args);
	snprintf(cache, sizeof(cache), "%s/cache-term", work);
	snprintf(script, sizeof(script), "%s/token-slow", work);
	snprintf(count, sizeof(count), "%s/token-slow.count", work);
	snprintf(sleeper, sizeof(sleeper), "%s/token-slow.sleep", work);
	snprintf(child_done, sizeof(child_done), "%s/token-slow.child-done",
		 work);
	snprintf(cmd_done, sizeof(cmd_done), "%s/token-slow.done", work);
	snprintf(text, sizeof(text),
		 "#!/bin/sh\n" COUNT_RUN_SH "if [ $n -gt 1 ]; then\n"
		 "  sh -c \"sleep 20; touch '%s'\" & echo $! > '%s'; wait\n"
		 "  touch '%s'\n"
		 "fi\n"
		 "printf '{\"access_token\": \"cmd-%%d\", "
		 "\"expires_in\": 1}\\n' $n\n",
		 count, count, count, count, child_done, sleeper, cmd_done);
	write_text(script, text, 0700);
	snprintf(opts, sizeof(opts), "--token-command '%s'", script);
	ck_assert_int_eq(mount_gs(cache, opts), 0);
	check_mounted_file("one", 1, seed_of("one"));
	daemon = (pid_t)fx_mount_stat(mnt, NULL, "pid");
	ck_assert_int_gt(daemon, 0);
	/* Past the token's second, a read, while the renewal thread runs
	 * the command again. */
	usleep(1200 * 1000);
	reader = fork();
	ck_assert_int_ge(reader, 0);
	if (reader == 0) {
		snprintf(path, sizeof(path), "%s/chunk-1", mnt);
		_exit(fx_read_file(path, &n) ? 0 : 1);
	}
	for (waited = 0; waited < 60000 && !sleep_pid; waited += 20) {
		c = fx_read_file(sleeper, &n);
		sleep_pid = c ? (pid_t)atoi(c) : 0;
		free(c);
		usleep(20000);
	}
	ck_assert_msg(sleep_pid > 0, "the command never ran a second time");
	/* The read is served with the current token meanwhile: it ends
	 * while the command still runs (its child has not marked its end;
	 * 60 s only stop a hang). */
	for (waited = 0; waited < 60000 && !reaped; waited += 20) {
		reaped = waitpid(reader, &status, WNOHANG) == reader;
		if (!reaped)
			usleep(20000);
	}
	ck_assert_msg(reaped && WIFEXITED(status) && !WEXITSTATUS(status),
		      "the read %s while the token command ran",
		      reaped ? "failed" : "never ended");
	ck_assert_msg(access(child_done, F_OK) != 0,
		      "the read waited for the token command");
	ck_assert_int_eq(kill(daemon, SIGTERM), 0);
	for (waited = 0; waited < 60000 && !fx_process_gone(daemon);
	     waited += 10)
		usleep(10000);
	ck_assert_msg(fx_process_gone(daemon), "the daemon outlived SIGTERM");
	/* The command's child went with it (its group was killed). */
	for (waited = 0; waited < 60000 && !fx_process_gone(sleep_pid);
	     waited += 10)
		usleep(10000);
	if (!fx_process_gone(sleep_pid))
		kill(sleep_pid, SIGKILL);
	/* Neither the command nor its child ran to its end: the daemon
	 * killed them rather than wait. */
	ck_assert_msg(access(child_done, F_OK) != 0,
		      "the token command's child outlived the daemon");
	ck_assert_msg(access(cmd_done, F_OK) != 0,
		      "SIGTERM waited for the token command");
	ck_assert_int_ne(fx_sh("mountpoint -q '%s'", mnt), 0);
}
END_TEST

/*
 * A mount whose tokens last 8 s (the fake refuses each 8 s after its first
 * use) from a command whose renewals each wait until the test lets them
 * answer: while each of them waits, a read of a fresh directory (it goes
 * to the origin with the token current then) ends, so no read waits for
 * the command; the tokens are renewed ahead of expiry on the renewal
 * thread, counted in .wharf/stats, and none is refused.
 */
START_TEST(mount_tokens_renewed_off_read_path)
{
	static const char *const args[] = {"--accept-prefix", "cmd-",
					   "--token-ttl", "8", NULL};
	enum { ROUNDS = 4 };
	char cache[PATH_MAX], opts[PATH_MAX * 2], script[PATH_MAX];
	char count[PATH_MAX], name[64], gate[PATH_MAX], text[8 * PATH_MAX];
	char path[PATH_MAX + 16];
	long long renewals;

	start_fake(args);
	for (int i = 0; i < ROUNDS; i++) {
		snprintf(name, sizeof(name), "ds/renew/d%02d/r", i);
		write_object(name, 1000 + (uint64_t)i, 700 + (uint32_t)i);
	}
	snprintf(cache, sizeof(cache), "%s/cache-renew", work);
	snprintf(script, sizeof(script), "%s/token-gated", work);
	snprintf(count, sizeof(count), "%s/token-gated.count", work);
	snprintf(gate, sizeof(gate), "%s/token-gated", work);
	/* Run n > 1 marks GATE.run-N and waits (60 s at most) for
	 * GATE.go-N. */
	snprintf(text, sizeof(text),
		 "#!/bin/sh\n" COUNT_RUN_SH "if [ $n -gt 1 ]; then\n"
		 "  touch '%s.run-'$n\n"
		 "  i=0; while [ ! -e '%s.go-'$n ] && [ $i -lt 600 ]; do\n"
		 "    sleep 0.1; i=$((i + 1)); done\n"
		 "fi\n"
		 "printf '{\"access_token\": \"cmd-%%d\", "
		 "\"expires_in\": 8}\\n' $n\n",
		 count, count, count, count, gate, gate);
	write_text(script, text, 0700);
	snprintf(opts, sizeof(opts), "--token-command '%s'", script);
	ck_assert_int_eq(mount_gs(cache, opts), 0);
	renewals = fx_mount_stat(mnt, "credentials", "renewals");
	for (int i = 0; i < ROUNDS; i++) {
		/* The renewal thread runs the command again (renewal i + 2;
		 * 60 s only stop a hang). */
		snprintf(path, sizeof(path), "%s.run-%d", gate, i + 2);
		for (int w = 0; w < 3000 && access(path, F_OK); w++)
			usleep(20000);
		ck_assert_msg(access(path, F_OK) == 0,
			      "the token command never ran a renewal %d",
			      i + 2);
		/* The read ends while the command waits for its gate. */
		snprintf(name, sizeof(name), "renew/d%02d/r", i);
		check_mounted_file(name, 1000 + (uint64_t)i, 700 + (uint32_t)i);
		snprintf(path, sizeof(path), "%s.go-%d", gate, i + 2);
		ck_assert_int_eq(fx_sh("touch '%s'", path), 0);
	}
	/* The last renewal let go is counted (60 s only stop a hang). */
	for (int w = 0;
	     w < 3000 &&
	     fx_mount_stat(mnt, "credentials", "renewals") - renewals < ROUNDS;
	     w++)
		usleep(20000);
	renewals = fx_mount_stat(mnt, "credentials", "renewals") - renewals;
	ck_assert_msg(renewals >= ROUNDS, "%lld renewals counted, %d made",
		      renewals, ROUNDS);
	ck_assert_int_eq(fx_mount_stat(mnt, "credentials", "renewal_failures"),
			 0);
	ck_assert_int_eq(fake_stat("expired"), 0);
	ck_assert_int_eq(fake_stat("unauthorized"), 0);
	ck_assert_int_ge(fake_stat("tokens_seen"), ROUNDS);
	/* The renewals to come answer at once (the unmount's). */
	for (int i = ROUNDS + 2; i < ROUNDS + 40; i++) {
		snprintf(path, sizeof(path), "%s.go-%d", gate, i);
		ck_assert_int_eq(fx_sh("touch '%s'", path), 0);
	}
}
END_TEST

/* The command-line options that pick a token. */
START_TEST(mount_token_options)
{
	char cache[PATH_MAX], opts[PATH_MAX * 2], tok[PATH_MAX];

	start_fake(need_good);
	snprintf(cache, sizeof(cache), "%s/cache", work);
	snprintf(opts, sizeof(opts),
		 "--token-command 'echo " GOOD "' --token-lifetime 60");
	ck_assert_int_eq(mount_gs(cache, opts), 0);
	check_mounted_file("one", 1, seed_of("one"));
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	snprintf(tok, sizeof(tok), "%s/token", work);
	write_text(tok, GOOD "\n", 0600);
	snprintf(opts, sizeof(opts), "--token-file '%s'", tok);
	ck_assert_int_eq(mount_gs(cache, opts), 0);
	check_mounted_file("chunk-1", CHUNK - 1, seed_of("chunk-1"));
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	ck_assert_int_eq(fake_stat("unauthorized"), 0);
	/* A lifetime of 0 is a usage error (status 2). */
	ck_assert_int_eq(mount_gs(cache, "--token-command true "
					 "--token-lifetime 0"),
			 2);
}
END_TEST

/*
 * A token command, and the token it prints, reach no log line, even at
 * the debug level, nor the daemon's command line (ps): the log names "the
 * token command" and how long it took.
 */
START_TEST(mount_token_command_secret)
{
	char cache[PATH_MAX], script[PATH_MAX], cmd[PATH_MAX + 32];
	char logp[PATH_MAX], stats[PATH_MAX + 16], *text;
	size_t n;
	pid_t pid;

	start_fake(need_good);
	snprintf(cache, sizeof(cache), "%s/cache", work);
	snprintf(logp, sizeof(logp), "%s/debug.log", work);
	snprintf(script, sizeof(script), "%s/tok-cmd-9q", work);
	write_text(script, "#!/bin/sh\necho " GOOD "\n", 0700);
	snprintf(cmd, sizeof(cmd), "%s pw=hunter2-7331", script);
	snprintf(mnt, sizeof(mnt), "%s/mnt", work);
	ck_assert_int_eq(fx_mkdirs(mnt), 0);
	{
		char *argv[] = {(char *)fx_wharf_bin(),
				"mount",
				"-d",
				"--cache-dir",
				cache,
				"--endpoint",
				fake_url,
				"--token-command",
				cmd,
				SPEC,
				mnt,
				NULL};

		pid = fx_spawn(argv, logp);
	}
	snprintf(stats, sizeof(stats), "%s/.wharf/stats", mnt);
	ck_assert_int_eq(fx_wait_path(&pid, stats, 30000, logp), 0);
	check_mounted_file("one", 1, seed_of("one"));
	text = fx_cmdline(pid);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(!strstr(text, "hunter2") && !strstr(text, "tok-cmd-9q"),
		      "ps shows the token command: %s", text);
	free(text);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	ck_assert_int_eq(fx_stop(pid, 10000), 0);
	text = fx_read_file(logp, &n);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "the token command answered in"), "%s",
		      text);
	ck_assert_msg(!strstr(text, "hunter2") && !strstr(text, "tok-cmd-9q") &&
			  !strstr(text, GOOD),
		      "the log shows a secret: %s", text);
	free(text);
}
END_TEST

/*
 * Mounts with a counting token command (its count into count, PATH_MAX),
 * reads "one", then has the fake revoke the token the mount holds: its
 * next request gets 401.
 */
static void mount_then_revoke(const char *tag, char *count)
{
	static const char *const args[] = {"--accept-prefix", "cmd-", NULL};
	char cache[PATH_MAX], opts[PATH_MAX * 2], script[PATH_MAX];
	char buf[256];

	start_fake(args);
	snprintf(cache, sizeof(cache), "%s/cache-%s", work, tag);
	counting_token_command(tag, 3600, 0, script, count);
	snprintf(opts, sizeof(opts), "--token-command '%s'", script);
	ck_assert_int_eq(mount_gs(cache, opts), 0);
	check_mounted_file("one", 1, seed_of("one"));
	fake_get("/_fake/revoke?token=cmd-1", buf, sizeof(buf));
}

/* Unmounts; the fake refused one request, and the token was renewed
 * once (two tokens in all). */
static void unmount_renewed_once(const char *count)
{
	size_t n;
	char *c;

	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	ck_assert_int_eq(fake_stat("unauthorized"), 1);
	c = fx_read_file(count, &n);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(atoi(c), 2);
	free(c);
}

/* A token revoked while mounted: the read that gets 401 renews it once
 * and succeeds; the reader never sees the refusal. */
/*
 * A relative --token-file is read from the directory the mount was started
 * in, also after the daemon has detached (it runs in "/"): a token revoked
 * while mounted is read again from the file, which then holds a new one.
 */
START_TEST(mount_token_file_relative)
{
	static const char *const args[] = {"--accept-prefix", "file-", NULL};
	char tok[PATH_MAX], buf[256];

	start_fake(args);
	snprintf(tok, sizeof(tok), "%s/token", work);
	write_text(tok, "file-1\n", 0600);
	snprintf(mnt, sizeof(mnt), "%s/mnt", work);
	ck_assert_int_eq(fx_mkdirs(mnt), 0);
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' mount --cache-dir cache-rel "
			       "--chunk-size 1M --retries 2 --endpoint '%s' "
			       "--token-file token " SPEC " mnt >>mount.log 2>&1",
			       work, fx_wharf_bin(), fake_url),
			 0);
	check_mounted_file("one", 1, seed_of("one"));
	write_text(tok, "file-2\n", 0600);
	fake_get("/_fake/revoke?token=file-1", buf, sizeof(buf));
	check_mounted_file("chunk-1", CHUNK - 1, seed_of("chunk-1"));
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	ck_assert_int_eq(fake_stat("unauthorized"), 1);
}
END_TEST

/*
 * A token command named by a relative path runs in the directory the mount
 * was started in, also after the daemon has detached (it runs in "/"):
 * tokens that last a second are renewed by running it there again.
 */
START_TEST(mount_token_command_relative)
{
	static const char *const args[] = {"--accept-prefix", "cmd-", NULL};
	char script[PATH_MAX], count[PATH_MAX];
	size_t n;
	char *c;

	start_fake(args);
	counting_token_command("relative-cmd", 1, 0, script, count);
	snprintf(mnt, sizeof(mnt), "%s/mnt", work);
	ck_assert_int_eq(fx_mkdirs(mnt), 0);
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' mount --cache-dir cache-cmd "
			       "--chunk-size 1M --retries 2 --endpoint '%s' "
			       "--token-command ./relative-cmd " SPEC
			       " mnt >>mount.log 2>&1",
			       work, fx_wharf_bin(), fake_url),
			 0);
	check_mounted_file("one", 1, seed_of("one"));
	sleep(2);
	check_mounted_file("chunk-1", CHUNK - 1, seed_of("chunk-1"));
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	c = fx_read_file(count, &n);
	ck_assert_ptr_nonnull(c);
	ck_assert_msg(atoi(c) >= 2, "the command ran %d times", atoi(c));
	free(c);
}
END_TEST

START_TEST(mount_token_revoked)
{
	char count[PATH_MAX];

	mount_then_revoke("revoked", count);
	check_mounted_file("chunk-1", CHUNK - 1, seed_of("chunk-1"));
	unmount_renewed_once(count);
}
END_TEST

/* The same for a load the pool makes for a hint, with no thread waiting
 * on it: the 401 is answered by renewing the token once and asking
 * again, and the reader then finds the chunk loaded. */
START_TEST(mount_token_revoked_hinted)
{
	char count[PATH_MAX];

	mount_then_revoke("revoked-hinted", count);
	ck_assert_int_eq(fx_sh("printf 'chunk-1 0 0\\n' | '%s' hints '%s'",
			       fx_wharf_bin(), mnt),
			 0);
	for (int i = 0; i < 200 && fx_mount_stat(mnt, "hints", "loaded") < 1;
	     i++)
		usleep(50000);
	ck_assert_int_eq(fx_mount_stat(mnt, "hints", "loaded"), 1);
	check_mounted_file("chunk-1", CHUNK - 1, seed_of("chunk-1"));
	/* only "one" was read on demand */
	ck_assert_int_eq(fx_mount_stat(mnt, "prefetch", "demand_fetches"), 1);
	unmount_renewed_once(count);
}
END_TEST

/* ---- through a site cache (nginx, the shipped config) ---- */

static struct fx_nginx site;

static void site_teardown(void)
{
	fx_sh("for d in '%s'/mnt-*; do mountpoint -q \"$d\" && "
	      "{ '%s' umount \"$d\" || umount -l \"$d\"; }; done "
	      "2>/dev/null; true",
	      work, fx_wharf_bin());
	if (site.dir)
		fx_nginx_stop(&site);
	mount_teardown();
}

/* The status of one GET of name's bytes through the site cache, with
 * the token given. */
static int site_get(const char *name, const char *token)
{
	return fx_sh("test \"$(curl -s -o /dev/null -w '%%{http_code}' "
		     "-H 'X-Wharf-Origin: %s' -H 'Host: 127.0.0.1:%d' "
		     "-H 'Authorization: Bearer %s' -H 'Range: bytes=0-9' "
		     "'%s/storage/v1/b/" BUCKET "/o/ds%%2F%s?alt=media')\" "
		     "= 206",
		     fake_url, fake_port, token, site.base, name);
}

/* Three mounts with a token, caches of their own, one site cache: every
 * byte right, and the fake serves each about once. */
START_TEST(site_cache_mounts)
{
	const char *origins[] = {fake_url, NULL};
	char cache[PATH_MAX], opts[PATH_MAX * 2], tok[PATH_MAX], name[16];
	uint64_t total = 0;
	long before, fetched;

	start_fake(need_good);
	ck_assert_int_eq(fx_site_cache_start(&site, origins, "1m", NULL), 0);
	snprintf(tok, sizeof(tok), "%s/token", work);
	write_text(tok, GOOD "\n", 0600);
	/* plain http to the cache: the token goes in clear, on purpose */
	snprintf(opts, sizeof(opts),
		 "--token-file '%s' --site-cache %s "
		 "--site-cache-insecure-credentials",
		 tok, site.base);
	before = fake_stat("media_bytes");
	for (int k = 0; k < 3; k++) {
		snprintf(name, sizeof(name), "mnt-%d", k);
		snprintf(cache, sizeof(cache), "%s/cache-%d", work, k);
		ck_assert_int_eq(mount_gs_on(name, cache, opts), 0);
		total = 0;
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
			if (files[i].size <= 4 * CHUNK) { /* not 50M thrice */
				check_mounted_file(files[i].name,
						   files[i].size,
						   seed_of(files[i].name));
				total += files[i].size;
			}
	}
	fetched = fake_stat("media_bytes") - before;
	fprintf(stderr, "gcs through the site cache: %ld bytes for %llu\n",
		fetched, (unsigned long long)total);
	ck_assert_int_ge(fetched, (long)total);
	ck_assert_msg((double)fetched <= 1.15 * (double)total,
		      "the fake served %ld bytes for %llu", fetched,
		      (unsigned long long)total);
	ck_assert_int_eq(fake_stat("unauthorized"), 0);
	/* A wrong token for bytes the cache does not hold: refused. */
	ck_assert_int_ne(site_get("many%2Ff0003", "not-" GOOD), 0);
	ck_assert_int_eq(fake_stat("unauthorized"), 1);
	/* And the refusal was not kept: the right token gets the bytes. */
	ck_assert_int_eq(site_get("many%2Ff0003", GOOD), 0);
}
END_TEST

/* ---- Origin checksums: a site cache that zeroes every body. */

static pid_t bad_pid = -1;
static struct fx_mount sums_mnt = {.pid = -1};
static char bad_url[64]; /* tests/bad-cache's */

static void sums_teardown(void)
{
	if (sums_mnt.pid > 0)
		fx_mount_stop(&sums_mnt);
	fx_unmount_leftovers(work);
	mnt[0] = '\0';
	if (bad_pid > 0)
		fx_stop(bad_pid, 5000);
	bad_pid = -1;
	teardown();
}

static uint64_t size_of(const char *name)
{
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (!strcmp(files[i].name, name))
			return files[i].size;
	ck_abort_msg("no file %s", name);
	return 0;
}

/* Reads the mounted file whole, drops the kernel's pages of it, and
 * checks it read again: the first read of an object of many chunks may
 * have had bad bytes (checked when its last chunk arrives). */
static void check_after_drop(const char *name)
{
	char path[PATH_MAX + 64];
	size_t len;
	void *buf;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", mnt, name);
	buf = fx_read_file(path, &len);
	ck_assert_msg(buf != NULL, "%s: %s", path, strerror(errno));
	free(buf);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	check_mounted_file(name, size_of(name), seed_of(name));
}

/* Mounts the fake (with its checksums) through a site cache that zeroes
 * bodies, with the options in `more` (NULL-ended) too. */
static void mount_bad_site_cache(const char *const *more)
{
	static const char *const args[] = {"--token", GOOD, "--checksums",
					   NULL};
	char tok[PATH_MAX];
	const char *opts[16] = {"--endpoint",
				fake_url,
				"--retries",
				"2",
				"--token-file",
				tok,
				"--site-cache",
				bad_url,
				"--site-cache-insecure-credentials",
				NULL};
	size_t n = 9;

	while (more && *more && n < sizeof(opts) / sizeof(opts[0]) - 1)
		opts[n++] = *more++;
	opts[n] = NULL;
	start_fake(args);
	bad_pid = fx_bad_cache_start(work, bad_url, sizeof(bad_url));
	ck_assert_int_gt(bad_pid, 0);
	snprintf(tok, sizeof(tok), "%s/token", work);
	write_text(tok, GOOD "\n", 0600);
	fx_mount_init(&sums_mnt, work, "sums");
	ck_assert_int_eq(fx_mount_start(&sums_mnt, SPEC, opts, NULL), 0);
	snprintf(mnt, sizeof(mnt), "%s", sums_mnt.dir);
}

/* Every object through a site cache that zeroes bodies: the mount finds
 * each out against its crc32c, fetches it again from the origin itself,
 * serves it right and counts it; the matches are on record, and `wharf
 * cache verify` checks them again. */
START_TEST(mount_checksums_bad_site_cache)
{
	static const char *const one_chunk[] = {"one", "chunk-1", "gen/obj"};
	const char *cache = sums_mnt.cache;
	long long mism;

	mount_bad_site_cache(NULL);
	/* One chunk: checked before a byte is served. */
	for (size_t i = 0; i < 3; i++)
		check_mounted_file(one_chunk[i], size_of(one_chunk[i]),
				   seed_of(one_chunk[i]));
	check_after_drop("big");
	check_after_drop("sizes/chunk+1");
	ck_assert_int_eq(
	    fx_sh("curl -s %s/_bad/stats | grep -q '\"requests\": [1-9]'",
		  bad_url),
	    0);
	ck_assert_int_eq(fx_mount_stat(mnt, "origin_checksums", "checked"), 5);
	mism = fx_mount_stat(mnt, "origin_checksums", "mismatches");
	ck_assert_int_ge(mism, 5);
	ck_assert_int_eq(fx_mount_stat(mnt, "origin_checksums", "repaired"),
			 mism);
	ck_assert_int_eq(fx_mount_stat(mnt, "origin_checksums", "failed"), 0);
	/* and in `wharf cache stats`, the mount's live counters */
	ck_assert_int_eq(fx_sh("'%s' cache stats --cache-dir '%s' | grep -q "
			       "'^  checksums   5 objects checked, [1-9][0-9]* "
			       "mismatches: [1-9][0-9]* repaired, 0 failed'",
			       fx_wharf_bin(), cache),
			 0);
	ck_assert_int_eq(fx_sh("'%s' cache stats --json --cache-dir '%s' | "
			       "grep -q '\"origin_checksums\": {\"checked\": "
			       "5, \"mismatches\": [1-9]'",
			       fx_wharf_bin(), cache),
			 0);
	/* Both sides of the mismatch in the log. */
	ck_assert_int_eq(fx_sh("grep -q 'big: its bytes do not match the "
			       "origin.s checksum: expected crc32c:[0-9a-f]"
			       "\\{8\\} (from the origin.s listing or "
			       "manifest), got crc32c:[0-9a-f]\\{8\\} from "
			       "the bytes received (4 chunks' '%s'",
			       sums_mnt.log),
			 0);
	/* On record, and good by `wharf cache verify` (the cache is in
	 * use: it only reads). */
	ck_assert_int_eq(
	    fx_sh("test $(grep -c '^wharf-sum1 ' '%s/sums') = 5", cache), 0);
	ck_assert_int_eq(fx_sh("'%s' cache verify --cache-dir '%s' | grep -q "
			       "'^5 objects checked against their origin.s "
			       "checksum: 5 good, 0 bad'",
			       fx_wharf_bin(), cache),
			 0);
}
END_TEST

/* Reads len bytes of the mounted file at off into buf, past the
 * kernel's pages of it (dropped first, none read ahead). */
static void read_mounted_range(const char *name, uint64_t off, size_t len,
			       uint8_t *buf)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", mnt, name);
	fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
	ck_assert_int_eq(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

/* Reads up to 4 KiB as read_mounted_range does.  @return the offset of
 * the first byte that differs from the file's, -1: none. */
static long long mounted_range_differs(const char *name, uint64_t off,
				       size_t len)
{
	uint8_t buf[4096];

	ck_assert_uint_le(len, sizeof(buf));
	read_mounted_range(name, off, len, buf);
	for (size_t i = 0; i < len; i++)
		if (buf[i] != fx_byte(seed_of(name), off + i))
			return (long long)(off + i);
	return -1;
}

/* Requests tests/bad-cache answered so far. */
static long long bad_requests(void)
{
	char cmd[128], json[256];
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "curl -sf %s/_bad/stats", bad_url);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	n = fread(json, 1, sizeof(json) - 1, p);
	json[n] = '\0';
	ck_assert_int_eq(pclose(p), 0);
	return fx_json_num(json, "requests");
}

/* A thread's read of the last chunk of "sizes/chunk+1": its result. */
static void *read_last_chunk(void *differs)
{
	*(long long *)differs =
	    mounted_range_differs("sizes/chunk+1", CHUNK, 1);
	return NULL;
}

/* A chunk read while its object, found bad, is fetched again from the
 * origin itself: the site cache's bytes for it are not served (the race
 * made sure here by a slow origin). */
START_TEST(mount_checksums_read_during_refetch)
{
	static const char *const more[] = {"--readahead", "0", NULL};
	const char *name = "sizes/chunk+1"; /* two chunks */
	long long last = -2, asked;
	uint8_t buf[4096];
	pthread_t th;

	mount_bad_site_cache(more);
	/* Chunk 0 through the site cache: zeroes, served before the object
	 * can be checked. */
	read_mounted_range(name, 0, sizeof(buf), buf);
	ck_assert_int_eq(fx_mount_stat(mnt, "origin_checksums", "mismatches"),
			 0);
	ck_assert_int_eq(fx_sh("curl -sf '%s/_fake/slow?seconds=2&count=1' "
			       ">/dev/null",
			       fake_url),
			 0);
	ck_assert_int_eq(pthread_create(&th, NULL, read_last_chunk, &last), 0);
	for (int i = 0; i < 200 && fx_mount_stat(mnt, "origin_checksums",
						 "mismatches") < 1;
	     i++)
		usleep(10000);
	ck_assert_int_eq(fx_mount_stat(mnt, "origin_checksums", "mismatches"),
			 1);
	/* The origin itself holds back the first chunk fetched again:
	 * chunk 0, dropped, is read meanwhile (from the origin itself), and
	 * then again. */
	asked = bad_requests();
	ck_assert_int_eq(mounted_range_differs(name, 0, sizeof(buf)), -1);
	ck_assert_int_eq(bad_requests(), asked);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(last, -1);
	ck_assert_int_eq(mounted_range_differs(name, 0, sizeof(buf)), -1);
	check_mounted_file(name, size_of(name), seed_of(name));
	ck_assert_int_eq(fx_mount_stat(mnt, "origin_checksums", "repaired"), 1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("gcs");
	TCase *tc = tcase_create("fake-gcs");
	/* What cannot run here is named, one SKIP line each, from a case
	 * of its own (without the fixtures). */
	TCase *left = tcase_create("left out");
	const char *why = fx_fuse_missing(), *why_site;

	if (!why && fx_sh("'%s' mount --help 2>&1 | grep -q -- --anonymous",
			  fx_wharf_bin()))
		why = "this wharf mounts no GCS (mount --help has no "
		      "--anonymous)";
	why_site = why ? why : fx_nginx_missing();
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, list_root);
	fx_tcase_add(why ? left : tc, mount_token_revoked, why);
	fx_tcase_add(why ? left : tc, mount_token_file_relative, why);
	fx_tcase_add(why ? left : tc, mount_token_command_relative, why);
	fx_tcase_add(why ? left : tc, mount_token_revoked_hinted, why);
	tcase_add_test(tc, pagination);
	tcase_add_test(tc, nested);
	tcase_add_test(tc, bytes_equal);
	tcase_add_test(tc, generation_pinning);
	tcase_add_test(tc, not_found);
	tcase_add_test(tc, retried);
	tcase_add_test(tc, retries_run_out);
	tcase_add_test(tc, auth_required);
	tcase_add_test(tc, token_file);
	tcase_add_test(tc, token_refused_renewed);
	tcase_add_test(tc, malformed_answers);
	tcase_add_test(tc, token_answer_rules);
	tcase_add_test(tc, repeated_page_token);
	tcase_add_test(tc, token_env);
	tcase_add_test(tc, token_command_refresh);
	tcase_add_test(tc, retry_renews_token);
	tcase_add_test(tc, token_command_bare);
	tcase_add_test(tc, service_account);
	tcase_add_test(tc, service_account_wrong_key);
	tcase_add_test(tc, authorized_user);
	tcase_add_test(tc, metadata_server);
	tcase_add_test(tc, emulator_host);
	tcase_add_test(tc, token_never_logged);
	suite_add_tcase(s, tc);
	tc = tcase_create("mount");
	tcase_add_checked_fixture(tc, setup, mount_teardown);
	tcase_set_timeout(tc, 120);
	fx_tcase_add(why ? left : tc, mount_bytes, why);
	fx_tcase_add(why ? left : tc, mount_service_account, why);
	fx_tcase_add(why ? left : tc, mount_token_options, why);
	fx_tcase_add(why ? left : tc, mount_token_command_secret, why);
	fx_tcase_add(why ? left : tc, mount_sigterm_during_token_command, why);
	fx_tcase_add(why ? left : tc, mount_tokens_renewed_off_read_path, why);
	fx_tcase_add(why ? left : tc, mount_replaced_object, why);
	suite_add_tcase(s, tc);
	tc = tcase_create("origin checksums");
	tcase_add_checked_fixture(tc, setup, sums_teardown);
	tcase_set_timeout(tc, 120);
	fx_tcase_add(why ? left : tc, mount_checksums_bad_site_cache, why);
	fx_tcase_add(why ? left : tc, mount_checksums_read_during_refetch, why);
	suite_add_tcase(s, tc);
	tc = tcase_create("site-cache");
	tcase_add_checked_fixture(tc, setup, site_teardown);
	tcase_set_timeout(tc, 120);
	fx_tcase_add(why_site ? left : tc, site_cache_mounts, why_site);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, left);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	/* Every test talks to the fake: without it, none can run. */
	fx_need(access("/usr/bin/python3", X_OK)
		    ? "/usr/bin/python3 (for tests/fake-gcs) is absent"
		    : NULL);
	fx_need(fx_sh("openssl version >/dev/null 2>&1")
		    ? "the openssl command (the fake checks JWTs with it) is "
		      "absent"
		    : NULL);
	make_dataset();
	sr = srunner_create(suite());
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	fx_rmtree(root);
	fx_rmtree(work);
	free(root);
	free(work);
	return failed ? 1 : 0;
}
