/*
 * Many nodes, one site cache: three mounts with caches of their own read
 * an HTTP origin (bench/origin, whose counters are the truth) through a
 * real nginx started from examples/site-cache/nginx-wharf.conf as shipped,
 * every byte checked, and the origin serves each byte about once; `wharf
 * prefetch --rank/--world` splits a warm-up between them without overlap.
 * The signed cases (S3, GCS) are in test-s3.c and test-gcs.c.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture.h"

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
	/* The listed one, asked the same way, answers. */
	ck_assert_int_eq(
	    fx_sh("test \"$(curl -s -o /dev/null -w '%%{http_code}' "
		  "-H 'X-Wharf-Origin: %.*s' -H 'Range: bytes=0-9' "
		  "'%s/shards/a.bin')\" = 206",
		  (int)strlen(origin_url) - 1, origin_url, sc.base),
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

int main(void)
{
	Suite *s = suite_create("sitecache");
	TCase *tc = tcase_create("nginx");
	TCase *left = tcase_create("left out");
	const char *why = fx_nginx_missing();
	const char *why_mount = why ? why : fx_fuse_missing();
	const char *why_tls = why_mount;
	SRunner *sr;
	int failed;

	if (!why_tls && fx_sh("openssl version >/dev/null 2>&1"))
		why_tls = "no openssl command (for the origin's certificate)";
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	/* What cannot run here is named, one SKIP line each, from a case
	 * of its own (without the fixture). */
#define ADD(t, why) fx_tcase_add((why) ? left : tc, t, why)
	ADD(three_mounts_one_fetch, why_mount);
	ADD(prefetch_ranks_split_the_warmup, why_mount);
	ADD(bad_rank_and_url_refused, why);
	ADD(unlisted_origin_refused, why);
	ADD(https_origin, why_tls);
#undef ADD
	suite_add_tcase(s, tc);
	suite_add_tcase(s, left);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
