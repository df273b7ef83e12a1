/*
 * Many nodes, one site cache: three mounts with caches of their own read
 * an HTTP origin (bench/origin, whose counters are the truth) through a
 * real nginx started from examples/site-cache/nginx-wharf.conf as shipped,
 * every byte checked, and the origin serves each byte about once; `wharf
 * prefetch --rank/--world` splits a warm-up between them without overlap.
 * In front of a real nginx origin with two virtual hosts, the same config
 * never mixes versions of a replaced file, keeps nothing for a forged
 * version and refuses a Host other than the origin's; a signed query
 * keeps its snapshot= (and the like) in the key, never its credentials.
 * The signed cases (S3, GCS) are in test-s3.c and test-gcs.c.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture.h"
#include "sitecache.h"

#define MOUNTS 3
/* Mounts cut files into 1 MiB chunks (fx_mount_start). */
#define SLICE "1m"
/* The bar: the origin serves the dataset at most this many times
 * over (listings, a hedge or two). */
#define ORIGIN_MAX_RATIO 1.15

static const struct {
	const char *name;
	uint64_t size;
} files[] = {
    {"shards/a.bin", 5 * 1024 * 1024 + 123},
    {"shards/b.bin", 3 * 1024 * 1024},
    {"shards/c.bin", 1024 * 1024 - 1},
    {"img/0.jpg", 51200},  {"img/1.jpg", 70001}, {"img/2.jpg", 1},
    {"img/3.jpg", 99999},  {"img/4.jpg", 4096},  {"img/5.jpg", 123457},
};
#define NFILES (sizeof(files) / sizeof(files[0]))

static char *work, *data;
static pid_t origin_pid = -1;
static char origin_url[128], origin_log[PATH_MAX];
static struct fx_nginx sc;

static struct fx_mount mnts[MOUNTS];

static uint64_t dataset_bytes(void)
{
	uint64_t n = 0;

	for (size_t i = 0; i < NFILES; i++)
		n += files[i].size;
	return n;
}

static void setup(void)
{
	char path[PATH_MAX], origin[128];
	const char *origins[2] = {origin, NULL};

	work = fx_tmpdir("sitecache");
	if (asprintf(&data, "%s/data", work) < 0)
		abort();
	for (size_t i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "%s/%s", data, files[i].name);
		*strrchr(path, '/') = '\0';
		ck_assert_int_eq(fx_mkdirs(path), 0);
		snprintf(path, sizeof(path), "%s/%s", data, files[i].name);
		ck_assert_int_eq(fx_write_file(path, files[i].size, (uint32_t)i),
				 0);
	}
	origin_pid = fx_origin_start(data, NULL, work, "origin", origin_url,
				     sizeof(origin_url));
	ck_assert_int_gt(origin_pid, 0);
	snprintf(origin_log, sizeof(origin_log), "%s/origin.log", work);
	/* X-Wharf-Origin is scheme://host:port, no path. */
	snprintf(origin, sizeof(origin), "%.*s", (int)strlen(origin_url) - 1,
		 origin_url);
	ck_assert_int_eq(fx_site_cache_start(&sc, origins, SLICE, NULL), 0);
}

static void teardown(void)
{
	for (int i = 0; i < MOUNTS; i++)
		fx_mount_stop(&mnts[i]);
	fx_unmount_leftovers(work);
	if (origin_pid > 0)
		fx_stop(origin_pid, 5000);
	origin_pid = -1;
	fx_nginx_stop(&sc);
	fx_rmtree(work);
	free(work);
	free(data);
}

/* Mount i of url through the site cache, a cache of its own; the last
 * one says it as fstab would (-o site_cache=URL).  ca: --ca-file or NULL. */
static void mount_url(int i, const char *url, const char *ca)
{
	struct fx_mount *m = &mnts[i];
	char opt[160];
	const char *args[6] = {"--site-cache", sc.base};
	int n = 2;

	snprintf(opt, sizeof(opt), "site_cache=%s", sc.base);
	if (i == MOUNTS - 1) {
		args[0] = "-o";
		args[1] = opt;
	}
	if (ca) {
		args[n++] = "--ca-file";
		args[n++] = ca;
	}
	args[n] = NULL;
	fx_mount_init(m, work, "sitecache-mnt");
	if (fx_mount_start(m, url, NULL, args)) {
		fx_sh("cat '%s' >&2", m->log);
		ck_abort_msg("mount %d did not come up", i);
	}
}

static void mount_through(int i)
{
	mount_url(i, origin_url, NULL);
}

static void unmount(int i)
{
	const int status = fx_mount_stop(&mnts[i]);

	ck_assert_msg(status == 0, "mount %d ended with status %d; see %s", i,
		      status, mnts[i].log);
}

/* Reads every file of the mount at dir and checks every byte. */
static void *read_all(void *arg)
{
	const char *dir = arg;
	static const size_t step = 300007; /* not chunk-aligned on purpose */
	char *buf = malloc(step);
	uintptr_t bad = 0;

	for (size_t i = 0; buf && i < NFILES && !bad; i++) {
		char path[PATH_MAX];
		uint64_t off = 0;
		ssize_t n;
		int fd;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			bad = 1;
			break;
		}
		while ((n = read(fd, buf, step)) > 0) {
			for (ssize_t k = 0; k < n; k++)
				if ((uint8_t)buf[k] !=
				    fx_byte((uint32_t)i, off + (uint64_t)k)) {
					fprintf(stderr,
						"%s: byte %llu differs\n",
						path,
						(unsigned long long)(off + k));
					bad = 1;
					break;
				}
			off += (uint64_t)n;
		}
		if (n < 0 || off != files[i].size)
			bad = 1;
		close(fd);
	}
	free(buf);
	return (void *)bad;
}

/* The origin's body bytes, from the counters it logs as it stops. */
static long origin_bytes(void)
{
	fx_stop(origin_pid, 5000);
	origin_pid = -1;
	return fx_origin_logged(origin_log, " requests, ");
}

static void check_origin_served_once(void)
{
	const long bytes = origin_bytes();
	const double ratio = (double)bytes / (double)dataset_bytes();

	fprintf(stderr, "origin served %ld bytes for %llu: %.3fx\n", bytes,
		(unsigned long long)dataset_bytes(), ratio);
	ck_assert_int_gt(bytes, 0);
	ck_assert_msg(ratio <= ORIGIN_MAX_RATIO,
		      "the origin served %.2fx the dataset (at most %.2f)",
		      ratio, ORIGIN_MAX_RATIO);
}

START_TEST(three_mounts_one_fetch)
{
	pthread_t th[MOUNTS];
	struct fx_site_cache_log log;
	void *bad;

	for (int i = 0; i < MOUNTS; i++)
		mount_through(i);
	/* At once, as the nodes of a job start an epoch: the same cold
	 * chunks asked for by three mounts together. */
	for (int i = 0; i < MOUNTS; i++)
		ck_assert_int_eq(
		    pthread_create(&th[i], NULL, read_all, mnts[i].dir), 0);
	for (int i = 0; i < MOUNTS; i++) {
		ck_assert_int_eq(pthread_join(th[i], &bad), 0);
		ck_assert_msg(!bad, "mount %d read wrong bytes", i);
	}
	for (int i = 0; i < MOUNTS; i++)
		unmount(i);
	check_origin_served_once();
	/* The cache served the chunks: hits for the mounts that came
	 * second, misses for the first. */
	ck_assert_int_eq(fx_site_cache_counts(&sc, &log), 0);
	ck_assert_int_gt(log.hit, 0);
	ck_assert_int_gt(log.miss, 0);
	ck_assert_int_eq(log.refused, 0);
}
END_TEST

/* `wharf prefetch` of rank r of 3 on mount r; its JSON summary's bytes. */
static long prefetch_share(int r, const char *how)
{
	char out[PATH_MAX];
	size_t len;
	char *json;
	long bytes;

	snprintf(out, sizeof(out), "%s/prefetch-%d.json", work, r);
	/* The share from flags, from torchrun's and from SLURM's variables:
	 * the same code the loader asks (wharf_rank_world). */
	if (!strcmp(how, "flags"))
		ck_assert_int_eq(fx_sh("env -u RANK -u WORLD_SIZE '%s' "
				       "prefetch -q --json --rank %d "
				       "--world 3 '%s' >'%s'",
				       fx_wharf_bin(), r, mnts[r].dir, out),
				 0);
	else if (!strcmp(how, "torchrun"))
		ck_assert_int_eq(fx_sh("RANK=%d WORLD_SIZE=3 '%s' prefetch -q "
				       "--json '%s' >'%s'",
				       r, fx_wharf_bin(), mnts[r].dir, out),
				 0);
	else
		ck_assert_int_eq(fx_sh("env -u RANK -u WORLD_SIZE "
				       "SLURM_PROCID=%d SLURM_NTASKS=3 '%s' "
				       "prefetch -q --json '%s' >'%s'",
				       r, fx_wharf_bin(), mnts[r].dir, out),
				 0);
	json = fx_read_file(out, &len);
	ck_assert_ptr_nonnull(json);
	ck_assert_int_eq(fx_json_num(json, "rank"), r);
	ck_assert_int_eq(fx_json_num(json, "world"), 3);
	bytes = (long)fx_json_num(json, "bytes");
	free(json);
	return bytes;
}

START_TEST(prefetch_ranks_split_the_warmup)
{
	static const char *const how[MOUNTS] = {"flags", "torchrun", "slurm"};
	long sum = 0;
	void *bad;

	for (int i = 0; i < MOUNTS; i++)
		mount_through(i);
	for (int r = 0; r < MOUNTS; r++) {
		const long b = prefetch_share(r, how[r]);

		/* Every rank has work, and none has it all. */
		ck_assert_int_gt(b, 0);
		ck_assert_int_lt(b, (long)dataset_bytes());
		sum += b;
	}
	/* Shares that cover the dataset exactly: no file twice, none left. */
	ck_assert_int_eq(sum, (long)dataset_bytes());
	/* Then every mount reads everything: the site cache has it all,
	 * so the origin sees nothing more. */
	for (int i = 0; i < MOUNTS; i++) {
		bad = read_all(mnts[i].dir);
		ck_assert_msg(!bad, "mount %d read wrong bytes", i);
	}
	for (int i = 0; i < MOUNTS; i++)
		unmount(i);
	check_origin_served_once();
}
END_TEST

START_TEST(bad_rank_and_url_refused)
{
	/* Usage errors exit 2, with a message naming the option. */
	ck_assert_int_eq(fx_sh("'%s' prefetch --rank 3 --world 3 '%s' "
			       "2>&1 | grep -q 'rank 3 is not below'",
			       fx_wharf_bin(), data),
			 0);
	ck_assert_int_eq(fx_sh("RANK=x '%s' prefetch '%s' 2>/dev/null; "
			       "test $? = 2",
			       fx_wharf_bin(), data),
			 0);
	ck_assert_int_eq(fx_sh("'%s' mount --site-cache ftp://c:21 '%s' "
			       "'%s' 2>&1 | grep -q 'site-cache'",
			       fx_wharf_bin(), origin_url, work),
			 0);
}
END_TEST

START_TEST(unlisted_origin_refused)
{
	/* The cache fetches only from the origins it lists: not an open
	 * proxy for whatever a client names in X-Wharf-Origin. */
	ck_assert_int_eq(
	    fx_sh("test \"$(curl -s -o /dev/null -w '%%{http_code}' "
		  "-H 'X-Wharf-Origin: http://127.0.0.2:9' -H 'Range: "
		  "bytes=0-9' '%s/shards/a.bin')\" = 403",
		  sc.base),
	    0);
	/* The listed one, asked the same way (with its Host), answers. */
	ck_assert_int_eq(
	    fx_sh("test \"$(curl -s -o /dev/null -w '%%{http_code}' "
		  "-H 'X-Wharf-Origin: %.*s' -H 'Host: %.*s' "
		  "-H 'Range: bytes=0-9' '%s/shards/a.bin')\" = 206",
		  (int)strlen(origin_url) - 1, origin_url,
		  (int)strlen(origin_url) - 8, origin_url + 7, sc.base),
	    0);
}
END_TEST

/* An https origin: the mounts speak plain HTTP to the site cache, the
 * cache TLS to the origin, verifying its certificate. */
START_TEST(https_origin)
{
	struct fx_nginx tls;
	char cert[PATH_MAX], trust[PATH_MAX + 40], log[PATH_MAX];
	const char *origins[2] = {NULL, NULL};
	const char *more[3] = {
	    "proxy_ssl_trusted_certificate "
	    "/etc/ssl/certs/ca-certificates.crt;",
	    trust, NULL};
	long long bytes;
	void *bad;

	ck_assert_int_eq(fx_nginx_tls_start(&tls, data), 0);
	snprintf(cert, sizeof(cert), "%s/cert.pem", tls.dir);
	snprintf(trust, sizeof(trust), "proxy_ssl_trusted_certificate %s;",
		 cert);
	origins[0] = tls.base;
	/* This test's cache: the same shipped file, trusting the origin's
	 * own certificate. */
	fx_nginx_stop(&sc);
	ck_assert_int_eq(fx_site_cache_start(&sc, origins, SLICE, more), 0);
	for (int i = 0; i < 2; i++) {
		char url[160];

		snprintf(url, sizeof(url), "%s/", tls.base);
		mount_url(i, url, cert);
		bad = read_all(mnts[i].dir);
		ck_assert_msg(!bad, "mount %d read wrong bytes", i);
		unmount(i);
	}
	snprintf(log, sizeof(log), "%s/bytes.log", tls.dir);
	bytes = fx_sum_lines(log);
	fx_nginx_stop(&tls);
	fprintf(stderr, "https origin sent %lld bytes for %llu\n", bytes,
		(unsigned long long)dataset_bytes());
	ck_assert_int_ge(bytes, (long long)dataset_bytes());
	ck_assert_msg((double)bytes <= ORIGIN_MAX_RATIO *
					   (double)dataset_bytes(),
		      "the origin sent %lld bytes", bytes);
}
END_TEST

/* The headers a read takes through the cache: X-Wharf-Origin, the
 * version the source pinned in the origin's own terms (none when it has
 * none the cache could check), Host, then the request's own. */
START_TEST(version_header_sent)
{
	static const struct {
		const char *version, *header; /* NULL: no X-Wharf-Version */
	} cases[] = {
	    {"\"9b2c-1\"", "X-Wharf-Version: etag \"9b2c-1\""},
	    {"W/\"w1\"", "X-Wharf-Version: etag W/\"w1\""},
	    {"1712345678901234", "X-Wharf-Version: generation 1712345678901234"},
	    {"t1700000000-s10",
	     "X-Wharf-Version: last-modified Tue, 14 Nov 2023 22:13:20 GMT"},
	    {"s10", NULL},	/* a manifest's size alone */
	    {"abc", NULL},	/* an unquoted ETag: not what an origin sends */
	    {"t12x-s1", NULL},
	    {"", NULL},
	    {NULL, NULL},
	};
	char pin[] = "If-Match: \"9b2c-1\"";
	struct curl_slist own = {pin, NULL};
	struct fetch_req req = {.url = "http://Origin.example:81/a?b",
				.headers = &own,
				.range_len = 4};
	struct sitecache_via v;
	char url[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct curl_slist *h = v.list;

		req.version = cases[i].version;
		ck_assert_int_eq(sitecache_route("http://c:8080", &req, &v,
						 url, sizeof(url)),
				 1);
		ck_assert_str_eq(url, "http://c:8080/a?b");
		ck_assert_str_eq(h->data,
				 "X-Wharf-Origin: http://Origin.example:81");
		h = h->next;
		if (cases[i].header) {
			ck_assert_str_eq(h->data, cases[i].header);
			h = h->next;
		}
		ck_assert_str_eq(h->data, "Host: Origin.example:81");
		ck_assert_ptr_eq(h->next, &own);
	}
	/* Straight to the origin, url untouched: no cache, or a read that
	 * must not go through one. */
	url[0] = '\0';
	ck_assert_int_eq(sitecache_route(NULL, &req, &v, url, sizeof(url)), 0);
	req.origin_only = true;
	ck_assert_int_eq(
	    sitecache_route("http://c:8080", &req, &v, url, sizeof(url)), 0);
	ck_assert_str_eq(url, "");
}
END_TEST

/* ---- Versions and hosts: the shipped config in front of a real nginx
 * origin with two virtual hosts, the default one mounted. */

#define OTHER_HOST "other-vhost.example"
#define BIG (10 * 1000 * 1000) /* ten chunks */
#define SMALL 100000	       /* one chunk */

static struct fx_nginx vh;
static char vroot[PATH_MAX], vother[PATH_MAX];
static time_t t0; /* the first versions' time, well in the past */

/* The origin with its two virtual hosts. */
static void vhosts_origin(void)
{
	work = fx_tmpdir("sitekeys");
	snprintf(vroot, sizeof(vroot), "%s/origin", work);
	snprintf(vother, sizeof(vother), "%s/other", work);
	ck_assert_int_eq(fx_mkdirs(vroot), 0);
	ck_assert_int_eq(fx_mkdirs(vother), 0);
	ck_assert_int_eq(fx_nginx_vhosts_start(&vh, vroot, OTHER_HOST, vother),
			 0);
	t0 = time(NULL) - 3600;
}

/* ... behind nginx-wharf.conf. */
static void vhosts_setup(void)
{
	const char *origins[2] = {NULL, NULL};

	vhosts_origin();
	origins[0] = vh.base;
	ck_assert_int_eq(fx_site_cache_start(&sc, origins, SLICE, NULL), 0);
}

/* ... behind squid-wharf.conf instead. */
static void squid_setup(void)
{
	vhosts_origin();
	ck_assert_int_eq(fx_squid_start(&sc, vh.base), 0);
}

static void vhosts_teardown(void)
{
	for (int i = 0; i < MOUNTS; i++)
		fx_mount_stop(&mnts[i]);
	fx_unmount_leftovers(work);
	fx_nginx_stop(&vh);
	fx_nginx_stop(&sc);
	fx_rmtree(work);
	free(work);
}

/* Puts (or replaces, as one rename) root/name: size bytes of seed,
 * modified at mtime. */
static void put(const char *root, const char *name, uint64_t size,
		uint32_t seed, time_t mtime)
{
	char path[PATH_MAX + 64], tmp[PATH_MAX + 72];
	const struct timeval tv[2] = {{mtime, 0}, {mtime, 0}};

	snprintf(path, sizeof(path), "%s/%s", root, name);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	ck_assert_int_eq(fx_write_file(tmp, size, seed), 0);
	ck_assert_int_eq(utimes(tmp, tv), 0);
	ck_assert_int_eq(rename(tmp, path), 0);
}

/* Every byte of dir/name is seed's, size of them. */
static void check_all(const char *dir, const char *name, uint64_t size,
		      uint32_t seed)
{
	uint64_t got;
	const long long bad = fx_read_seed(dir, name, seed, &got);

	ck_assert_msg(bad == 0 && got == size,
		      "%s/%s: %lld of %llu bytes read are not the version "
		      "expected (of %llu)",
		      dir, name, bad, (unsigned long long)got,
		      (unsigned long long)size);
}

static void mount_vh(int i)
{
	char url[160];

	snprintf(url, sizeof(url), "%s/", vh.base);
	mount_url(i, url, NULL);
}

/* Replaced at the origin (same size, newer time) after a mount read it
 * through the cache: a fresh mount reads all of the new version; the
 * mount that pinned the old one reads old bytes or EIO, never new ones. */
START_TEST(replaced_object_never_mixed)
{
	unsigned char buf[4096];
	char path[PATH_MAX + 64];
	long long bad;
	uint64_t got;
	int fd;

	put(vroot, "big.bin", BIG, 1, t0);
	put(vroot, "small.bin", SMALL, 2, t0);
	mount_vh(0);
	/* The first chunk of the big one, all of the small one. */
	snprintf(path, sizeof(path), "%s/big.bin", mnts[0].dir);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), sizeof(buf));
	close(fd);
	for (size_t k = 0; k < sizeof(buf); k++)
		ck_assert_uint_eq(buf[k], fx_byte(1, k));
	check_all(mnts[0].dir, "small.bin", SMALL, 2);

	put(vroot, "big.bin", BIG, 3, t0 + 60);
	put(vroot, "small.bin", SMALL, 4, t0 + 60);
	mount_vh(1);
	check_all(mnts[1].dir, "big.bin", BIG, 3);
	check_all(mnts[1].dir, "small.bin", SMALL, 4);

	bad = fx_read_seed(mnts[0].dir, "big.bin", 1, &got);
	fprintf(stderr, "the mount that pinned the old version read %llu "
		"bytes of it, then %s\n", (unsigned long long)got,
		got == BIG ? "the end" : "EIO");
	ck_assert_msg(bad == 0, "the old mount read %lld bytes that are not "
		      "the old version's", bad);
	unmount(0);
	unmount(1);
}
END_TEST

/* The X-Wharf-Version a mount sends for a file of an nginx origin
 * (no ETag in its listings) modified at t. */
static void version_of_time(time_t t, char *out, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "last-modified %a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* One ranged GET of name's first chunk through the cache, as a client
 * other than a mount may send it, with one more header (or "").
 * @return the HTTP status. */
static int cache_get(const char *name, const char *host, const char *version,
		     const char *more)
{
	char out[PATH_MAX], *text;
	size_t len;
	int code = -1;

	snprintf(out, sizeof(out), "%s/status", work);
	if (fx_sh("curl -s -o /dev/null -w '%%{http_code}' -H "
		  "'X-Wharf-Origin: %s' -H 'Host: %s' -H 'X-Wharf-Version: %s' "
		  "-H '%s' -r 0-1048575 '%s/%s' >'%s'",
		  vh.base, host, version, more, sc.base, name, out))
		return -1;
	text = fx_read_file(out, &len);
	if (text)
		code = atoi(text);
	free(text);
	return code;
}

/* A request naming a version the origin does not (yet) have keeps
 * nothing, whatever pin it sends: once the object is replaced by that
 * version, mounts read it.  (Squid cannot check this: its file says so.) */
START_TEST(forged_version_keeps_nothing)
{
	char version[96], pin[128];

	put(vroot, "f.bin", SMALL, 5, t0);
	version_of_time(t0 + 60, version, sizeof(version));
	snprintf(pin, sizeof(pin), "If-Unmodified-Since: %s",
		 version + strlen("last-modified "));
	/* The origin answers with what it has; the cache passes it on. */
	ck_assert_int_eq(cache_get("f.bin", vh.base + 7, version, pin), 206);
	put(vroot, "f.bin", SMALL, 6, t0 + 60);
	mount_vh(0);
	check_all(mnts[0].dir, "f.bin", SMALL, 6);
	unmount(0);
}
END_TEST

/* A request that accepts gzip, of the version mounts pin, from an origin
 * that gzips: what the cache keeps is still the bytes as stored, which
 * mounts take (they refuse an encoded body). */
START_TEST(encoded_answer_not_kept)
{
	char version[96], pin[128];

	put(vroot, "f.bin", SMALL, 9, t0);
	version_of_time(t0, version, sizeof(version));
	snprintf(pin, sizeof(pin), "If-Unmodified-Since: %s",
		 version + strlen("last-modified "));
	ck_assert_int_eq(fx_sh("curl -s -o /dev/null -H 'X-Wharf-Origin: %s' "
			       "-H 'Host: %s' -H 'X-Wharf-Version: %s' "
			       "-H '%s' -H 'Accept-Encoding: gzip' "
			       "-r 0-1048575 '%s/f.bin'",
			       vh.base, vh.base + 7, version, pin, sc.base),
			 0);
	mount_vh(0);
	check_all(mnts[0].dir, "f.bin", SMALL, 9);
	unmount(0);
}
END_TEST

/* A Host other than X-Wharf-Origin's authority is refused, even when the
 * other virtual host's file has the same size and time: mounts read
 * their origin's bytes. */
START_TEST(foreign_host_refused)
{
	char version[96];
	int status;

	put(vroot, "f.bin", SMALL, 7, t0);
	put(vother, "f.bin", SMALL, 8, t0);
	version_of_time(t0, version, sizeof(version));
	status = cache_get("f.bin", OTHER_HOST, version, "");
	mount_vh(0);
	check_all(mnts[0].dir, "f.bin", SMALL, 7);
	unmount(0);
	ck_assert_int_eq(status, 403);
	/* Asked with its own Host, the same request is answered. */
	ck_assert_int_eq(cache_get("f.bin", vh.base + 7, version, ""), 206);
}
END_TEST

/* ---- The key: a signed query's credentials are left out, its other
 * parameters kept (tests/snapshot-origin.py, an Azure-like origin whose
 * answers all carry one ETag). */

/* GET of path?query through the cache, as a mount sends it (ranged, with
 * the origin's version), into WORK/got; the body's first bytes in head
 * and the cache's X-Wharf-Cache in status.  @return 0 or -1. */
static int key_get(const char *origin, const char *query, char *head,
		   size_t head_cap, char *status, size_t status_cap)
{
	char out[PATH_MAX], hdrs[PATH_MAX], *text, *hit;
	size_t len;

	snprintf(out, sizeof(out), "%s/got", work);
	snprintf(hdrs, sizeof(hdrs), "%s/headers", work);
	if (fx_sh("curl -sf -o '%s' -D '%s' -H 'X-Wharf-Origin: %s' "
		  "-H 'Host: %s' -H 'X-Wharf-Version: etag \"0x8DCSAME\"' "
		  "-r 0-99999 '%s/c/blob?%s'",
		  out, hdrs, origin, origin + strlen("http://"), sc.base,
		  query))
		return -1;
	text = fx_read_file(out, &len);
	if (!text)
		return -1;
	snprintf(head, head_cap, "%.*s", (int)strcspn(text, ";"), text);
	free(text);
	text = fx_read_file(hdrs, &len);
	hit = text ? strstr(text, "X-Wharf-Cache: ") : NULL;
	snprintf(status, status_cap, "%.*s",
		 hit ? (int)strcspn(hit + 15, "\r\n") : 0, hit ? hit + 15 : "");
	free(text);
	return 0;
}

/*
 * Two snapshots of one blob, its block list and the blob itself, each
 * asked with a SAS (sig= and the rest) and the same version: each gives
 * its own bytes, and the same one asked again with another node's SAS is
 * a hit (the credentials are not in the key).
 */
START_TEST(signed_query_keeps_snapshot)
{
	static const struct {
		const char *query, *expect;
	} asks[] = {
	    {"snapshot=2026-01-01T00:00:00.0000000Z&sv=2022-11-02&sr=b&sp=r&"
	     "se=2030-01-01&sig=AAAA",
	     "snapshot=2026-01-01T00:00:00.0000000Z"},
	    {"snapshot=2026-02-01T00:00:00.0000000Z&sv=2022-11-02&sr=b&sp=r&"
	     "se=2030-01-01&sig=BBBB",
	     "snapshot=2026-02-01T00:00:00.0000000Z"},
	    {"sv=2022-11-02&comp=blocklist&sr=b&sp=r&sig=CCCC",
	     "comp=blocklist"},
	    {"sv=2022-11-02&sr=b&sp=r&se=2030-01-01&sig=DDDD", "base"},
	    {"versionid=2026-03-01T00:00:00.0000000Z&sv=2022-11-02&sig=EEEE",
	     "versionid=2026-03-01T00:00:00.0000000Z"},
	    /* Another node's SAS for the second snapshot: shared. */
	    {"snapshot=2026-02-01T00:00:00.0000000Z&sv=2022-11-02&sr=b&sp=r&"
	     "se=2031-05-05&sig=ZZZZ",
	     "snapshot=2026-02-01T00:00:00.0000000Z"},
	};
	char origin[64], port[16], log[PATH_MAX], script[PATH_MAX];
	char head[128], status[32];
	const char *src = getenv("WHARF_SRCDIR");
	const char *origins[2] = {origin, NULL};
	pid_t pid;
	int p;

	if (access("/usr/bin/python3", X_OK))
		fx_skip("no /usr/bin/python3 for tests/snapshot-origin.py");
	work = fx_tmpdir("sitekey");
	p = fx_free_port();
	snprintf(port, sizeof(port), "%d", p);
	snprintf(origin, sizeof(origin), "http://127.0.0.1:%d", p);
	snprintf(log, sizeof(log), "%s/origin.log", work);
	snprintf(script, sizeof(script), "%s/tests/snapshot-origin.py",
		 src ? src : "..");
	pid = fx_spawn_server(
	    (char *const[]){"/usr/bin/python3", script, port, NULL}, log, p,
	    10000);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(fx_site_cache_start(&sc, origins, SLICE, NULL), 0);
	for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		ck_assert_int_eq(key_get(origin, asks[i].query, head,
					 sizeof(head), status, sizeof(status)),
				 0);
		ck_assert_msg(!strcmp(head, asks[i].expect),
			      "?%s through the cache gave the bytes of %s "
			      "(cache: %s)",
			      asks[i].query, head, status);
		ck_assert_str_eq(status, i == 5 ? "HIT" : "MISS");
	}
	fx_stop(pid, 5000);
	fx_nginx_stop(&sc);
	fx_rmtree(work);
	free(work);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sitecache");
	TCase *tc = tcase_create("nginx");
	TCase *unit = tcase_create("route");
	TCase *vers = tcase_create("versions");
	TCase *squid = tcase_create("squid");
	TCase *left = tcase_create("left out");
	const char *why = fx_nginx_missing();
	const char *why_mount = why ? why : fx_fuse_missing();
	const char *why_tls = why_mount;
	const char *why_squid = why_mount ? why_mount : fx_squid_missing();
	SRunner *sr;
	int failed;

	if (!why_tls && fx_sh("openssl version >/dev/null 2>&1"))
		why_tls = "no openssl command (for the origin's certificate)";
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(vers, vhosts_setup, vhosts_teardown);
	tcase_set_timeout(vers, 120);
	tcase_add_checked_fixture(squid, squid_setup, vhosts_teardown);
	tcase_set_timeout(squid, 120);
	/* What cannot run here is named, one SKIP line each, from a case
	 * of its own (without the fixture). */
#define ADD(t, why) fx_tcase_add((why) ? left : tc, t, why)
	ADD(three_mounts_one_fetch, why_mount);
	ADD(prefetch_ranks_split_the_warmup, why_mount);
	ADD(bad_rank_and_url_refused, why);
	ADD(unlisted_origin_refused, why);
	ADD(https_origin, why_tls);
#undef ADD
	tcase_add_test(unit, version_header_sent);
	fx_tcase_add(why ? left : unit, signed_query_keeps_snapshot, why);
#define ADD(t, why) fx_tcase_add((why) ? left : vers, t, why)
	ADD(replaced_object_never_mixed, why_mount);
	ADD(forged_version_keeps_nothing, why_mount);
	ADD(foreign_host_refused, why_mount);
	ADD(encoded_answer_not_kept, why_mount);
#undef ADD
#define ADD(t, why) fx_tcase_add((why) ? left : squid, t, why)
	ADD(replaced_object_never_mixed, why_squid);
	ADD(foreign_host_refused, why_squid);
	ADD(encoded_answer_not_kept, why_squid);
#undef ADD
	suite_add_tcase(s, unit);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, vers);
	suite_add_tcase(s, squid);
	suite_add_tcase(s, left);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
