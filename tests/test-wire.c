/*
 * What crosses the wire between a mount and its origin, through real
 * `wharf mount` daemons: answers to ranged GETs are checked before a byte
 * of them is served or cached (bench/origin --bad-ranges plays the broken
 * server), credentials never go in clear to a site cache (nginx from the
 * shipped config, over plain HTTP and over TLS, in front of tests/fake-gcs),
 * and a redirect to another scheme than http(s) fails its request without
 * breaking the mount (bench/origin --redirect).  Also: an answer of another
 * version than the one pinned fails its read (bench/origin ignores
 * conditional headers), bodies cut mid-way do not cut the host's
 * concurrency (--truncate, --reset), and background loads that gave up
 * are not a reader's errors (--fail-first).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "compiler.h"
#include "fixture-ck.h"
#include "fixture.h"

#define CHUNK (1u << 20) /* fx_mount_start's --chunk-size */
#define BUCKET "wharf-wire"
#define TOKEN "wire-token-9c2e"

static const struct {
	const char *name;
	uint64_t size;
} files[] = {
    {"f.bin", 3 * CHUNK + 17},
    {"sub/a.bin", 100000},
    {"g.bin", 1000},
    {"ftp.bin", 1000},
};
#define F_BIG 0
#define F_SUB 1

static char *work, *data;

static uint32_t seed_of(size_t i)
{
	return 40 + (uint32_t)i;
}

/* The dataset under dir (the origin's root, or a bucket's prefix). */
static void write_files(const char *dir)
{
	char path[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
		*strrchr(path, '/') = '\0';
		ck_assert_int_eq(fx_mkdirs(path), 0);
		snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
		ck_assert_int_eq(fx_write_file(path, files[i].size, seed_of(i)),
				 0);
	}
}

static void setup(void)
{
	work = fx_tmpdir("wire");
	if (asprintf(&data, "%s/data", work) < 0)
		abort();
	write_files(data);
}

static void teardown(void)
{
	fx_unmount_leftovers(work);
	fx_rmtree(work);
	free(work);
	free(data);
}

/* Whether file i reads whole and right under the mountpoint dir. */
static void check_file(const char *dir, size_t i)
{
	char path[PATH_MAX + 64];
	uint8_t *buf;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
	buf = fx_read_file(path, &len);
	ck_assert_msg(buf != NULL, "%s: %s", path, strerror(errno));
	ck_assert_uint_eq(len, files[i].size);
	for (size_t k = 0; k < len; k++)
		if (buf[k] != fx_byte(seed_of(i), k))
			ck_abort_msg("%s: byte %zu differs", path, k);
	free(buf);
}

/* The errno of a read of 4 KiB at off of file i; 0 when it read. */
static int read_errno(const char *dir, size_t i, uint64_t off)
{
	char path[PATH_MAX + 64], buf[4096];
	int fd, e = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
	fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	if (pread(fd, buf, sizeof(buf), (off_t)off) < 0)
		e = errno;
	close(fd);
	return e;
}

/* Whether the file at path holds text. */
static bool file_has(const char *path, const char *text)
{
	size_t n;
	char *s = fx_read_file(path, &n);
	bool found = s && memmem(s, n, text, strlen(text));

	free(s);
	return found;
}

/* ---- checked ranges ---- */

static const struct {
	const char *mode; /* bench/origin --bad-ranges */
	const char *said; /* what the log line says came */
} bad[] = {
    {"from-zero", "HTTP 206 without a Content-Range"},
    {"no-header", "HTTP 206 without a Content-Range"},
    {"wrong-total", "HTTP 206 with Content-Range: bytes 1048576-2097151/"
		    "3145746, not bytes 1048576-2097151/3145745"},
};

/*
 * An origin that answers every ranged GET wrong: each read fails (EIO)
 * after its retries, no byte of those answers is served or lands in the
 * cache, and the log names the URL, the range asked and what came.
 */
START_TEST(bad_ranges_never_served)
{
	const char *const extra[] = {"--bad-ranges", bad[_i].mode, NULL};
	/* No error cache: each read goes to the origin and is retried. */
	const char *const opts[] = {"--retries", "2", "--readahead", "0",
				    "--error-ttl", "0", NULL};
	char url[256], line[256];
	struct fx_mount m;
	pid_t origin;

	origin =
	    fx_origin_start(data, extra, work, bad[_i].mode, url, sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work, bad[_i].mode);
	ck_assert_int_eq(fx_mount_start(&m, url, opts, NULL), 0);
	ck_assert_int_eq(read_errno(m.dir, F_BIG, CHUNK), EIO);
	ck_assert_int_eq(read_errno(m.dir, F_BIG, 0), EIO);
	ck_assert_int_eq(fx_mount_stat(m.dir, "reads", "chunks_loaded"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "disk_cache", "chunks"), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, "origin", "retries"), 4);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	snprintf(line, sizeof(line), "/f.bin bytes=1048576-2097151: %s",
		 bad[_i].said);
	ck_assert_msg(file_has(m.log, line), "%s says no '%s'", m.log, line);
	fx_stop(origin, 5000);
}
END_TEST

/* An origin that ignores Range (200, the whole object) is read right:
 * the engine takes the chunk's bytes out of it. */
START_TEST(range_ignored_served)
{
	const char *const extra[] = {"--bad-ranges", "whole", NULL};
	char url[256];
	struct fx_mount m;
	pid_t origin;

	origin = fx_origin_start(data, extra, work, "whole", url, sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work, "whole");
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, NULL), 0);
	check_file(m.dir, F_BIG);
	check_file(m.dir, F_SUB);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	fx_stop(origin, 5000);
}
END_TEST

/* ---- versions ---- */

/*
 * An object replaced at the origin between two reads of one open file,
 * by an origin that ignores If-Unmodified-Since (bench/origin ignores
 * every conditional header): the second read fails with EIO rather than
 * give the new bytes after the old, the log says what was pinned and what
 * came, the chunk read before stays, and nothing of the new version is
 * cached.
 */
START_TEST(replaced_object_fails)
{
	const char *const opts[] = {"--readahead", "0", NULL};
	char url[256], path[PATH_MAX], tmp[PATH_MAX + 8], buf[4096];
	struct timespec t[2] = {{0}, {0}};
	struct fx_mount m;
	uint64_t got = 0;
	pid_t origin;
	int fd;

	snprintf(path, sizeof(path), "%s/replaced", data);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/replaced/r.bin", data);
	ck_assert_int_eq(fx_write_file(path, 3 * CHUNK, 7), 0);
	t[0].tv_sec = t[1].tv_sec = 1700000000;
	ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
	origin = fx_origin_start(data, NULL, work, "replaced", url,
				 sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work, "replaced");
	ck_assert_int_eq(fx_mount_start(&m, url, opts, NULL), 0);
	snprintf(tmp, sizeof(tmp), "%s/replaced/r.bin", m.dir);
	fd = open(tmp, O_RDONLY);
	ck_assert_msg(fd >= 0, "%s: %s", tmp, strerror(errno));
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_uint_eq((uint8_t)buf[100], fx_byte(7, 100));

	/* the same size, other bytes, a later time */
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	ck_assert_int_eq(fx_write_file(tmp, 3 * CHUNK, 8), 0);
	t[0].tv_sec = t[1].tv_sec = 1700000100;
	ck_assert_int_eq(utimensat(AT_FDCWD, tmp, t, 0), 0);
	ck_assert_int_eq(rename(tmp, path), 0);

	errno = 0;
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 2 * CHUNK), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_uint_eq((uint8_t)buf[100], fx_byte(7, 100));
	close(fd);
	/* The first chunk goes to the store after its read (a deferred
	 * write): wait for it, then nothing more may have come. */
	for (int i = 0;
	     i < 600 && fx_mount_stat(m.dir, "disk_cache", "chunks") < 1; i++)
		usleep(50000);
	ck_assert_int_eq(fx_mount_stat(m.dir, "disk_cache", "chunks"), 1);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_msg(file_has(m.log, "/replaced/r.bin bytes=2097152-3145727: "
				      "the object changed: Last-Modified "
				      "Tue, 14 Nov 2023 22:15:00 GMT, pinned "
				      "Tue, 14 Nov 2023 22:13:20 GMT"),
		      "%s says nothing of the changed object", m.log);
	/* A remount lists the new version and reads it whole. */
	ck_assert_int_eq(fx_mount_start(&m, url, opts, NULL), 0);
	ck_assert_int_eq(fx_read_seed(m.dir, "replaced/r.bin", 8, &got), 0);
	ck_assert_uint_eq(got, 3 * CHUNK);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	fx_stop(origin, 5000);
}
END_TEST

/* ---- cut bodies ---- */

/*
 * An origin that cuts 30% of its bodies halfway (the connection closes or
 * resets mid-body): every read returns the right bytes after retries, and
 * the host's concurrency is not cut for it (a cut body is not a refusal).
 */
START_TEST(cut_bodies_keep_concurrency)
{
	const char *const extra[] = {_i ? "--reset" : "--truncate", "0.3",
				     "--ttfb-ms", "20", "--conn-rate", "20M",
				     NULL};
	const char *const opts[] = {"--retries", "10", NULL};
	char url[256], path[PATH_MAX], tag[32];
	struct fx_mount m;
	pid_t origin;
	uint8_t *buf;
	size_t len;

	snprintf(tag, sizeof(tag), "cut%d", _i);
	snprintf(path, sizeof(path), "%s/cut", data);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/cut/c.bin", data);
	if (access(path, F_OK))
		ck_assert_int_eq(fx_write_file(path, 32 * CHUNK + 5, 9), 0);
	origin = fx_origin_start(data, extra, work, tag, url, sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work, tag);
	ck_assert_int_eq(fx_mount_start(&m, url, opts, NULL), 0);
	snprintf(path, sizeof(path), "%s/cut/c.bin", m.dir);
	buf = fx_read_file(path, &len);
	ck_assert_msg(buf != NULL, "%s: %s", path, strerror(errno));
	ck_assert_uint_eq(len, 32 * CHUNK + 5);
	for (size_t k = 0; k < len; k++)
		if (buf[k] != fx_byte(9, k))
			ck_abort_msg("%s: byte %zu differs", path, k);
	free(buf);
	ck_assert_int_ge(fx_mount_stat(m.dir, "origin", "retries"), 1);
	ck_assert_int_le(fx_mount_stat(m.dir, "concurrency", "backoffs"), 1);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	fx_stop(origin, 5000);
}
END_TEST

/* ---- background loads that gave up ---- */

/*
 * Hinted loads that gave up (the origin refused them before any reader
 * came) are no reader's error: counted in origin.gave_up, not in
 * origin.errors, logged without an error line; a reader that then reads
 * the file (0), or that was waiting for those loads when they failed
 * (1: they take 400 ms to their answer), fetches it itself and gets its
 * bytes.
 */
START_TEST(gave_up_loads_not_errors)
{
	const char *const extra[] = {"--fail-first", "4", "--ttfb-ms",
				     _i ? "400" : "0", NULL};
	const char *const opts[] = {"--retries", "0", "--readahead", "0",
				    NULL};
	char url[256], path[PATH_MAX], tag[16];
	struct fx_mount m;
	uint64_t got = 0;
	long long gave_up = 0, start, sent;
	pid_t origin;

	snprintf(path, sizeof(path), "%s/gaveup", data);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/gaveup/h.bin", data);
	ck_assert_int_eq(fx_write_file(path, 4 * CHUNK, 11), 0);
	snprintf(tag, sizeof(tag), "gaveup%d", _i);
	origin = fx_origin_start(data, extra, work, tag, url, sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work, tag);
	ck_assert_int_eq(fx_mount_start(&m, url, opts, NULL), 0);
	start = sent = fx_mount_stat(m.dir, "origin", "requests");
	ck_assert_int_eq(fx_sh("printf 'gaveup/h.bin 0 0\\n' | '%s' hints '%s'",
			       fx_wharf_bin(), m.dir),
			 0);
	/* 1: the reader comes once the directory's listing and the four
	 * loads are out */
	for (int i = 0; _i && i < 1500 && sent < start + 5; i++) {
		usleep(20 * 1000);
		sent = fx_mount_stat(m.dir, "origin", "requests");
	}
	ck_assert_msg(!_i || sent >= start + 5,
		      "the listing and the four loads not out after 30 s");
	for (int i = 0; !_i && i < 600 && gave_up < 4; i++) {
		usleep(50 * 1000);
		gave_up = fx_mount_stat(m.dir, "origin", "gave_up");
	}
	ck_assert_int_eq(fx_read_seed(m.dir, "gaveup/h.bin", 11, &got), 0);
	ck_assert_uint_eq(got, 4 * CHUNK);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin", "gave_up"), 4);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin", "errors"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "reads", "chunk_errors"), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_msg(!file_has(m.log, "error:"), "%s has an error line",
		      m.log);
	ck_assert_msg(file_has(m.log, "gave up"), "%s says nothing of them",
		      m.log);
	fx_stop(origin, 5000);
}
END_TEST

/* ---- redirects ---- */

/* A socket listening on 127.0.0.1 that nobody answers on: *port. */
static int silent_listener(int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	ck_assert_int_ge(fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/*
 * An origin that answers one object 302 to gopher:// and another 302 to
 * ftp://: each read fails at once, saying so, nothing connects to the ftp
 * port, and the mount lists and reads on.
 */
START_TEST(redirect_schemes)
{
	char url[256], gopher[128], ftp[128];
	const char *const extra[] = {"--redirect", gopher, "--redirect", ftp,
				     NULL};
	struct fx_mount m;
	pid_t origin;
	int port, lfd;

	lfd = silent_listener(&port);
	snprintf(gopher, sizeof(gopher), "/g.bin=gopher://127.0.0.1:%d/1x",
		 port);
	snprintf(ftp, sizeof(ftp), "/ftp.bin=ftp://127.0.0.1:%d/x", port);
	origin =
	    fx_origin_start(data, extra, work, "redirect", url, sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work, "redirect");
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, NULL), 0);
	ck_assert_int_eq(read_errno(m.dir, 2, 0), EIO);
	ck_assert_int_eq(read_errno(m.dir, 3, 0), EIO);
	/* sub/ is listed only now, then read; and the big file */
	check_file(m.dir, F_SUB);
	check_file(m.dir, F_BIG);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_lt(accept(lfd, NULL, NULL), 0);
	ck_assert_int_eq(errno, EAGAIN);
	close(lfd);
	ck_assert(file_has(m.log, "HTTP 302 redirects to gopher://"));
	ck_assert(file_has(m.log, "HTTP 302 redirects to ftp://"));
	ck_assert(file_has(m.log, "only http:// and https:// redirects are "
				  "followed"));
	fx_stop(origin, 5000);
}
END_TEST

/* ---- credentials and the site cache ---- */

/* `wharf mount` (daemonized) of spec with args (a string for the shell,
 * run in WORK) on a fresh mountpoint tag, its output in m->log.
 * @return its exit status. */
static int mount_sh(struct fx_mount *m, const char *tag, const char *spec,
		    const char *args)
{
	fx_mount_init(m, work, tag);
	ck_assert_int_eq(fx_mkdirs(m->cache), 0);
	return fx_sh("cd '%s' && '%s' mount --cache-dir '%s' --chunk-size 1M "
		     "--retries 0 --origin-wait 1 %s '%s' '%s' >'%s' 2>&1",
		     work, fx_wharf_bin(), m->cache, args, spec, m->dir,
		     m->log);
}

/*
 * A source that sends credentials (S3 signatures, GCS tokens) through a
 * plain-http site cache is refused at mount time, before anything is
 * asked of anyone, with the fix named; an unsigned one is not; and the
 * option (also as -o) lets it go on.
 */
START_TEST(credentials_refused_in_clear)
{
	static const char *const refused = "which would go in clear to the "
					   "site cache http://127.0.0.1:9";
	static const struct {
		const char *tag, *spec, *args;
		bool refused;
	} cases[] = {
	    {"s3", "s3://bkt/p", "--endpoint http://127.0.0.1:9", true},
	    {"s3-unsigned", "s3://bkt/p",
	     "--endpoint http://127.0.0.1:9 --no-sign", false},
	    {"gs", "gs://bkt/p", "--endpoint http://127.0.0.1:9 --token-file x",
	     true},
	    {"gs-anonymous", "gs://bkt/p",
	     "--endpoint http://127.0.0.1:9 "
	     "--anonymous",
	     false},
	    {"s3-opt-in", "s3://bkt/p",
	     "--endpoint http://127.0.0.1:9 "
	     "--site-cache-insecure-credentials",
	     false},
	    {"gs-opt-in", "gs://bkt/p",
	     "--endpoint http://127.0.0.1:9 "
	     "--token-file x "
	     "-o site_cache_insecure_credentials",
	     false},
	};
	char args[512];
	struct fx_mount m;

	/* gs:// wants a token; it is never read */
	ck_assert_int_eq(fx_sh("echo t >'%s/x'", work), 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		snprintf(args, sizeof(args),
			 "--site-cache http://127.0.0.1:9 %s", cases[i].args);
		/* None comes up (the endpoint is a closed port), and none
		 * for a usage error (status 2). */
		ck_assert_int_eq(
		    mount_sh(&m, cases[i].tag, cases[i].spec, args), 1);
		ck_assert_msg(file_has(m.log, refused) == cases[i].refused,
			      "%s: refused %d", cases[i].tag,
			      !cases[i].refused);
		if (!cases[i].refused)
			continue;
		ck_assert(file_has(m.log, "https://"));
		ck_assert(file_has(m.log, "--site-cache-insecure-credentials"));
		ck_assert(file_has(m.log, cases[i].spec));
	}
	/* https to the cache is no refusal */
	ck_assert_int_eq(mount_sh(&m, "s3-https", "s3://bkt/p",
				  "--site-cache https://127.0.0.1:9 "
				  "--endpoint http://127.0.0.1:9"),
			 1);
	ck_assert(!file_has(m.log, "in clear"));
}
END_TEST

/* tests/fake-gcs over root on a free port, wanting TOKEN; *url its
 * endpoint.  @return its pid. */
static pid_t fake_gcs_start(const char *root, char *url, size_t cap)
{
	char script[PATH_MAX], port[16], logp[PATH_MAX];
	const char *src = getenv("WHARF_SRCDIR");
	const int p = fx_free_port();
	pid_t pid;

	snprintf(script, sizeof(script), "%s/tests/fake-gcs", src ? src : "..");
	snprintf(port, sizeof(port), "%d", p);
	snprintf(logp, sizeof(logp), "%s/fake-gcs.log", work);
	{
		char *argv[] = {"/usr/bin/python3", script,   "--root",
				(char *)root,	    "--port", port,
				"--token",	    TOKEN,    NULL};

		pid = fx_spawn(argv, logp);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(fx_wait_port(p, 15000) == 0,
		      "fake-gcs did not come up; see %s", logp);
	snprintf(url, cap, "http://127.0.0.1:%d", p);
	return pid;
}

/*
 * The site cache as fx_site_cache_start makes it from the shipped config,
 * then speaking TLS with a certificate of its own (ng->dir/cert.pem, for
 * --ca-file) on the same port; *url its https:// URL.
 */
static void site_cache_tls(struct fx_nginx *ng, const char *const origins[],
			   char *url, size_t cap)
{
	ck_assert_int_eq(fx_site_cache_start(ng, origins, "1m", NULL), 0);
	fx_nginx_pause(ng);
	ck_assert_int_eq(
	    fx_sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout "
		  "'%1$s/key.pem' -out '%1$s/cert.pem' -days 2 "
		  "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
		  ">/dev/null 2>&1 && sed -i 's|listen 127.0.0.1:%2$d;|"
		  "listen 127.0.0.1:%2$d ssl; ssl_certificate %1$s/cert.pem; "
		  "ssl_certificate_key %1$s/key.pem;|' '%1$s/wharf.conf' && "
		  "grep -q '%2$d ssl;' '%1$s/wharf.conf'",
		  ng->dir, ng->port),
	    0);
	ck_assert_int_eq(fx_nginx_resume(ng), 0);
	snprintf(url, cap, "https://127.0.0.1:%d", ng->port);
}

/*
 * A gs:// mount with a token through a real site cache: refused over
 * plain HTTP, served over TLS (--ca-file trusts the cache's certificate),
 * every byte right and the chunk reads through the cache; and over plain
 * HTTP when the user opts in.
 */
START_TEST(credentials_through_tls_site_cache)
{
	char root[PATH_MAX], prefix[PATH_MAX + 32], tok[PATH_MAX], fake[128];
	char tls_url[128], args[PATH_MAX * 3], cert[PATH_MAX];
	const char *origins[] = {fake, NULL};
	struct fx_site_cache_log counts;
	struct fx_nginx plain, tls;
	struct fx_mount m;
	FILE *f;
	pid_t pid;

	snprintf(root, sizeof(root), "%s/gcs", work);
	snprintf(prefix, sizeof(prefix), "%s/" BUCKET "/ds", root);
	write_files(prefix);
	pid = fake_gcs_start(root, fake, sizeof(fake));
	snprintf(tok, sizeof(tok), "%s/token", work);
	f = fopen(tok, "w");
	ck_assert_ptr_nonnull(f);
	fputs(TOKEN "\n", f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(fx_site_cache_start(&plain, origins, "1m", NULL), 0);
	site_cache_tls(&tls, origins, tls_url, sizeof(tls_url));
	snprintf(cert, sizeof(cert), "%s/cert.pem", tls.dir);

	snprintf(args, sizeof(args),
		 "--endpoint %s --token-file '%s' --site-cache %s", fake, tok,
		 plain.base);
	ck_assert_int_eq(mount_sh(&m, "gs-plain", "gs://" BUCKET "/ds", args),
			 1);
	ck_assert(file_has(m.log, "in clear"));

	snprintf(args, sizeof(args),
		 "--endpoint %s --token-file '%s' --site-cache %s "
		 "--ca-file '%s'",
		 fake, tok, tls_url, cert);
	ck_assert_int_eq(mount_sh(&m, "gs-tls", "gs://" BUCKET "/ds", args), 0);
	check_file(m.dir, F_BIG);
	check_file(m.dir, F_SUB);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), m.dir), 0);
	ck_assert_int_eq(fx_site_cache_counts(&tls, &counts), 0);
	ck_assert_int_ge(counts.miss, 4); /* f.bin's four chunks, and a.bin */
	ck_assert_int_eq(counts.refused, 0);

	snprintf(args, sizeof(args),
		 "--endpoint %s --token-file '%s' --site-cache %s "
		 "--site-cache-insecure-credentials",
		 fake, tok, plain.base);
	ck_assert_int_eq(mount_sh(&m, "gs-opt-in", "gs://" BUCKET "/ds", args),
			 0);
	check_file(m.dir, F_SUB);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), m.dir), 0);
	ck_assert_int_eq(fx_site_cache_counts(&plain, &counts), 0);
	ck_assert_int_ge(counts.miss, 1);

	fx_nginx_stop(&plain);
	fx_nginx_stop(&tls);
	fx_stop(pid, 5000);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("wire");
	const char *why = fx_fuse_missing(), *why_gcs;

	if (!why && fx_sh("'%s' mount --help >/dev/null 2>&1", fx_wharf_bin()))
		why = "this wharf has no mount command";
	why_gcs = why ? why : fx_nginx_missing();
	if (!why_gcs && access("/usr/bin/python3", X_OK))
		why_gcs = "/usr/bin/python3 (for tests/fake-gcs) is absent";
	if (!why_gcs && fx_sh("openssl version >/dev/null 2>&1"))
		why_gcs = "no openssl command (for the cache's certificate)";
	/* Once for all: a failed test's mounts are let go at the end (its
	 * helper daemons go with its process group). */
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	fx_tcase_add_loop(tc, bad_ranges_never_served, 0, (int)ARRAY_SIZE(bad),
			  why);
	fx_tcase_add(tc, range_ignored_served, why);
	fx_tcase_add(tc, replaced_object_fails, why);
	fx_tcase_add_loop(tc, cut_bodies_keep_concurrency, 0, 2, why);
	fx_tcase_add_loop(tc, gave_up_loads_not_errors, 0, 2, why);
	fx_tcase_add(tc, redirect_schemes, why);
	fx_tcase_add(tc, credentials_refused_in_clear, why);
	fx_tcase_add(tc, credentials_through_tls_site_cache, why_gcs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
