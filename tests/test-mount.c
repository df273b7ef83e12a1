/*
 * wharffs end to end: a real nginx on 127.0.0.1 serves a dataset, `wharf
 * mount -f` serves it on a temporary mountpoint, and every byte read
 * through the mount is compared with what the origin holds.
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
#include <poll.h>
#include <stdint.h>
#include <sys/fanotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"
#include "fixture-ck.h"
#include "fixture.h"
#include "log.h"
#include "tree.h"

#define CHUNK (1u << 20)
#define BIG_SIZE (50ull << 20)
#define N_SMALL 2000

/* The dataset: name, size, seed. */
static const struct {
	const char *name;
	uint64_t size;
} sized_files[] = {
    {"empty", 0},
    {"one", 1},
    {"chunk-1", CHUNK - 1},
    {"chunk", CHUNK},
    {"chunk+1", CHUNK + 1},
    {"big", BIG_SIZE},
    {"sub/deeper/leaf", 3 * CHUNK + 17},
};

static char *data_dir;	/* the origin's files */
static char *cache_dir; /* the shared mount's cache */
static struct fx_mount shared; /* the shared mount */
static char *mnt_dir;	       /* its mountpoint */
static char *work_dir;	/* logs, manifests, other mounts */
static struct fx_nginx ng;

static uint32_t seed_of(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h;
}

static uint64_t small_size(int i)
{
	return 1 + (uint64_t)(i * 7919) % 8192;
}

/* gaps/: every other file is empty (as __init__.py files are). */
#define N_GAPS 60
static uint64_t gap_size(int i)
{
	return i % 2 ? 0 : small_size(i);
}

/* Files PREFIX0000.. PREFIX(n-1) under the data dir, file i of
 * size_of(i) bytes; PREFIX is "dir/" and the names' first letters. */
static void write_numbered(const char *prefix, int n, uint64_t (*size_of)(int))
{
	char path[PATH_MAX], name[64];

	snprintf(path, sizeof(path), "%s/%s", data_dir, prefix);
	*strrchr(path, '/') = '\0';
	if (fx_mkdirs(path))
		abort();
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%04d", prefix, i);
		snprintf(path, sizeof(path), "%s/%s", data_dir, name);
		if (fx_write_file(path, size_of(i), seed_of(name)))
			abort();
	}
}

static void make_dataset(void)
{
	char path[PATH_MAX];

	data_dir = fx_tmpdir("mount-data");
	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++) {
		char dir[PATH_MAX], *slash;

		snprintf(path, sizeof(path), "%s/%s", data_dir,
			 sized_files[i].name);
		snprintf(dir, sizeof(dir), "%s", path);
		slash = strrchr(dir, '/');
		*slash = '\0';
		if (fx_mkdirs(dir) ||
		    fx_write_file(path, sized_files[i].size,
				  seed_of(sized_files[i].name))) {
			fprintf(stderr, "cannot write %s\n", path);
			abort();
		}
	}
	write_numbered("many/f", N_SMALL, small_size);
	write_numbered("gaps/g", N_GAPS, gap_size);
}

/* `wharf mount -f` of url on cache, with one retry; see fx_mount_start. */
static int mount_start(struct fx_mount *m, const char *url, const char *cache,
		       const char *const extra[])
{
	static const char *const opts[] = {"--retries", "1", NULL};

	snprintf(m->cache, sizeof(m->cache), "%s", cache);
	return fx_mount_start(m, url, opts, extra);
}

/* Compares root/name with what fx_write_file wrote for `as`. */
static int check_file_as(const char *root, const char *name, const char *as,
			 uint64_t size)
{
	char path[PATH_MAX];
	uint32_t seed = seed_of(as);
	size_t len;
	uint8_t *buf;
	int bad = 0;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	buf = fx_read_file(path, &len);
	if (!buf) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (len != size) {
		fprintf(stderr, "%s: %zu bytes, expected %llu\n", path, len,
			(unsigned long long)size);
		bad = 1;
	}
	for (size_t i = 0; !bad && i < len; i++)
		if (buf[i] != fx_byte(seed, i)) {
			fprintf(stderr, "%s: byte %zu differs\n", path, i);
			bad = 1;
		}
	free(buf);
	return bad ? -1 : 0;
}

static int check_file(const char *root, const char *name, uint64_t size)
{
	return check_file_as(root, name, name, size);
}

static void setup(void)
{
	char url[256];

	work_dir = fx_tmpdir("mount-work");
	make_dataset();
	if (fx_nginx_start(&ng, data_dir))
		abort();
	cache_dir = fx_tmpdir("mount-cache");
	fx_mount_init(&shared, work_dir, "mnt");
	mnt_dir = shared.dir;
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	if (mount_start(&shared, url, cache_dir, NULL)) {
		fx_sh("cat '%s' >&2", shared.log);
		abort();
	}
}

static void teardown(void)
{
	const int status = fx_mount_stop(&shared);

	if (status != 0) {
		fprintf(stderr, "the shared mount exited with status %d\n",
			status);
		fx_sh("cat '%s' >&2", shared.log);
	}
	fx_unmount_leftovers(work_dir);
	fx_nginx_stop(&ng);
	fx_rmtree(data_dir);
	fx_rmtree(cache_dir);
	fx_rmtree(work_dir);
	free(data_dir);
	free(cache_dir);
	free(work_dir);
}

START_TEST(test_sizes_and_bytes)
{
	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++) {
		char path[PATH_MAX];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", mnt_dir,
			 sized_files[i].name);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_uint_eq((uint64_t)st.st_size, sized_files[i].size);
		ck_assert_int_eq(st.st_mode & 07777, 0444);
		ck_assert(S_ISREG(st.st_mode));
		ck_assert_int_eq(st.st_uid, getuid());
		ck_assert_msg(st.st_mtime > 0, "%s has no mtime", path);
		ck_assert_msg(check_file(mnt_dir, sized_files[i].name,
					 sized_files[i].size) == 0,
			      "%s differs from the origin", path);
	}
	{
		char path[PATH_MAX];
		struct stat st;

		snprintf(path, sizeof(path), "%s/sub/deeper", mnt_dir);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert(S_ISDIR(st.st_mode));
		ck_assert_int_eq(st.st_mode & 07777, 0555);
		snprintf(path, sizeof(path), "%s/no-such-file", mnt_dir);
		ck_assert_int_eq(stat(path, &st), -1);
		ck_assert_int_eq(errno, ENOENT);
	}
}
END_TEST

START_TEST(test_many_small_files)
{
	char path[PATH_MAX];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/many", mnt_dir);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	ck_assert_int_eq(n, N_SMALL);
	for (int i = 0; i < N_SMALL; i++) {
		char name[64];

		snprintf(name, sizeof(name), "many/f%04d", i);
		ck_assert_msg(check_file(mnt_dir, name, small_size(i)) == 0,
			      "%s differs from the origin", name);
	}
}
END_TEST

/* Random preads of the big file compared byte by byte. */
static int random_reads(unsigned seed, int count)
{
	char path[PATH_MAX];
	uint32_t fseed = seed_of("big");
	static __thread uint8_t buf[3 * CHUNK];
	int fd, bad = 0;

	snprintf(path, sizeof(path), "%s/big", mnt_dir);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	for (int i = 0; i < count && !bad; i++) {
		uint64_t off = (uint64_t)rand_r(&seed) * 4099 % BIG_SIZE;
		size_t len = (size_t)rand_r(&seed) % sizeof(buf) + 1;
		ssize_t n = pread(fd, buf, len, (off_t)off);
		size_t want = off + len > BIG_SIZE ? BIG_SIZE - off : len;

		if (n != (ssize_t)want) {
			fprintf(stderr, "pread(%zu at %llu) = %zd\n", len,
				(unsigned long long)off, n);
			bad = 1;
		}
		for (ssize_t j = 0; !bad && j < n; j++)
			if (buf[j] != fx_byte(fseed, off + (uint64_t)j)) {
				fprintf(stderr, "big: byte %llu differs\n",
					(unsigned long long)(off + j));
				bad = 1;
			}
	}
	close(fd);
	return bad ? -1 : 0;
}

START_TEST(test_random_offsets)
{
	ck_assert_int_eq(random_reads(12345, 300), 0);
	/* Reads that end exactly at, and start beyond, the end of file. */
	{
		char path[PATH_MAX], b[16];
		int fd;

		snprintf(path, sizeof(path), "%s/chunk+1", mnt_dir);
		fd = open(path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, b, sizeof(b), CHUNK), 1);
		ck_assert_uint_eq((uint8_t)b[0],
				  fx_byte(seed_of("chunk+1"), CHUNK));
		ck_assert_int_eq(pread(fd, b, sizeof(b), CHUNK + 1), 0);
		ck_assert_int_eq(pread(fd, b, sizeof(b), 10 * CHUNK), 0);
		close(fd);
	}
}
END_TEST

static void *reader_thread(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	int rc = random_reads(1000 + id, 60);

	for (int i = (int)id; rc == 0 && i < N_SMALL; i += 40) {
		char name[64];

		snprintf(name, sizeof(name), "many/f%04d", i);
		rc = check_file(mnt_dir, name, small_size(i));
	}
	if (rc == 0)
		rc = check_file(mnt_dir, "sub/deeper/leaf", 3 * CHUNK + 17);
	return (void *)(intptr_t)rc;
}

START_TEST(test_concurrent_readers)
{
	pthread_t t[8];

	for (unsigned i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, reader_thread,
						(void *)(uintptr_t)i),
				 0);
	for (unsigned i = 0; i < 8; i++) {
		void *rc;

		pthread_join(t[i], &rc);
		ck_assert_msg(rc == NULL, "reader %u saw wrong bytes", i);
	}
}
END_TEST

START_TEST(test_read_only)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/one", mnt_dir);
	/* The mount is "ro": the kernel refuses the open; were one let
	 * through, the mount would refuse the write. */
	for (int k = 0; k < 2; k++) {
		fd = open(path, k ? O_RDWR : O_WRONLY);
		if (fd >= 0) {
			ck_assert_int_eq(write(fd, "x", 1), -1);
			ck_assert_int_eq(errno, EROFS);
			close(fd);
		} else {
			ck_assert_int_eq(errno, EROFS);
		}
	}
	ck_assert_int_eq(unlink(path), -1);
	ck_assert_int_eq(errno, EROFS);
	ck_assert_int_eq(truncate(path, 0), -1);
	ck_assert_int_eq(errno, EROFS);
	snprintf(path, sizeof(path), "%s/new-file", mnt_dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(fd, -1);
	ck_assert_int_eq(errno, EROFS);
	snprintf(path, sizeof(path), "%s/new-dir", mnt_dir);
	ck_assert_int_eq(mkdir(path, 0755), -1);
	ck_assert_int_eq(errno, EROFS);
}
END_TEST

START_TEST(test_stats_file)
{
	char *json;

	ck_assert_int_eq(check_file(mnt_dir, "chunk", CHUNK), 0);
	json = fx_mount_stats(mnt_dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(json[0] == '{', "not JSON: %s", json);
	ck_assert_int_ge(fx_json_num(json, "bytes_served"), CHUNK);
	ck_assert_int_ge(fx_json_num(json, "requests"), 1);
	ck_assert_ptr_nonnull(strstr(json, "\"p99\": "));
	ck_assert_ptr_nonnull(strstr(json, "\"disk_cache\""));
	/* A later read sees later numbers, not a cached copy. */
	{
		const char *p = strstr(json, "\"uptime_s\": ");
		double before = p ? strtod(p + 12, NULL) : -1;
		char *again;

		ck_assert(before >= 0);
		usleep(20000);
		again = fx_mount_stats(mnt_dir);
		ck_assert_ptr_nonnull(again);
		p = strstr(again, "\"uptime_s\": ");
		ck_assert_ptr_nonnull(p);
		ck_assert_msg(strtod(p + 12, NULL) > before, "stale stats: %s",
			      again);
		free(again);
	}
	free(json);
	/* The hidden directory lists like any other (find walks it). */
	{
		char path[PATH_MAX];
		struct dirent *de;
		bool seen = false;
		DIR *d;

		snprintf(path, sizeof(path), "%s/.wharf", mnt_dir);
		d = opendir(path);
		ck_assert_ptr_nonnull(d);
		while ((de = readdir(d)))
			seen |= !strcmp(de->d_name, "stats");
		closedir(d);
		ck_assert(seen);
	}
}
END_TEST

START_TEST(test_second_mount_refused)
{
	struct fx_mount m;
	char url[256], *log;
	size_t len;
	int status = -1, waited;

	fx_mount_init(&m, work_dir, "second");
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	{
		char *argv[] = {(char *)fx_wharf_bin(),
				"mount",
				"-f",
				"--cache-dir",
				cache_dir,
				url,
				m.dir,
				NULL};

		m.pid = fx_spawn(argv, m.log);
	}
	for (waited = 0; waited < 30000; waited += 20) {
		if (waitpid(m.pid, &status, WNOHANG) == m.pid)
			break;
		usleep(20000);
	}
	if (waited >= 30000) {
		fx_mount_stop(&m);
		ck_abort_msg("a second mount on the same cache dir came up");
	}
	rmdir(m.dir);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 1);
	log = fx_read_file(m.log, &len);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(strstr(log, cache_dir), "no clear message: %s", log);
	free(log);
}
END_TEST

START_TEST(test_unreachable_origin)
{
	char mnt[PATH_MAX], url[128], *log, logpath[PATH_MAX + 8];
	char *cache = fx_tmpdir("mount-unreach");
	size_t len;
	int rc;

	snprintf(mnt, sizeof(mnt), "%s/mnt", cache);
	ck_assert_int_eq(fx_mkdirs(mnt), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/data/", fx_free_port());
	snprintf(logpath, sizeof(logpath), "%s/log", work_dir);
	/* Without -f: the error must still reach the terminal. */
	rc = fx_sh("'%s' mount --retries 0 --cache-dir '%s/c' '%s' '%s' "
		   ">'%s' 2>&1",
		   fx_wharf_bin(), cache, url, mnt, logpath);
	log = fx_read_file(logpath, &len);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(rc == 1, "exit status %d: %s", rc, log);
	ck_assert_msg(strstr(log, "127.0.0.1"), "unclear message: %s", log);
	free(log);
	/* A name that does not resolve: the last word keeps the cause (it
	 * was "Failed initialization" once a retry took a spoiled handle). */
	rc = fx_sh("'%s' mount --retries 1 --cache-dir '%s/c' "
		   "http://no-such-host.invalid/data/ '%s' >'%s' 2>&1",
		   fx_wharf_bin(), cache, mnt, logpath);
	log = fx_read_file(logpath, &len);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(rc == 1, "exit status %d: %s", rc, log);
	const char *last = strstr(log, "wharf mount: ");
	ck_assert_msg(last && strstr(last, "Could not resolve host") &&
			  !strstr(log, "Failed initialization"),
		      "the cause is lost: %s", log);
	free(log);
	fx_sh("umount '%s' 2>/dev/null", mnt);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/* Writes a manifest of the dataset's sized files and a sample of the
 * small ones, plus `extra` lines. */
static void write_manifest(const char *path, const char *prefix,
			   const char *extra)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++)
		fprintf(f, "%s%s %llu\n", prefix, sized_files[i].name,
			(unsigned long long)sized_files[i].size);
	for (int i = 0; i < N_SMALL; i += 10)
		fprintf(f, "%smany/f%04d %llu\n", prefix, i,
			(unsigned long long)small_size(i));
	if (extra)
		fputs(extra, f);
	ck_assert_int_eq(fclose(f), 0);
}

static void check_manifest_files(const char *root, const char *prefix)
{
	char name[PATH_MAX];

	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++) {
		snprintf(name, sizeof(name), "%s%s", prefix,
			 sized_files[i].name);
		ck_assert_msg(check_file(root, name, sized_files[i].size) == 0,
			      "%s differs", name);
	}
	for (int i = 0; i < N_SMALL; i += 10) {
		snprintf(name, sizeof(name), "%smany/f%04d", prefix, i);
		ck_assert_msg(check_file(root, name, small_size(i)) == 0,
			      "%s differs", name);
	}
}

/* A test's own mount of the JSON listing on its own cache (returned,
 * for own_mount_end). */
static char *own_mount_start(struct fx_mount *m, const char *tag,
			     const char *const extra[])
{
	static const char *const none[] = {NULL};
	char *cache = fx_tmpdir(tag), url[256];

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(m, work_dir, tag);
	ck_assert_int_eq(mount_start(m, url, cache, extra ? extra : none), 0);
	return cache;
}

/* Reads and checks PREFIX<k> for k in [from, to) under the mount. */
static void check_numbered(const char *root, const char *prefix, int from,
			   int to, uint64_t (*size_of)(int))
{
	char name[64];

	for (int k = from; k < to; k++) {
		snprintf(name, sizeof(name), "%s%04d", prefix, k);
		ck_assert(check_file(root, name, size_of(k)) == 0);
	}
}

/* Unmounts a test's own mount (the daemon must exit 0) and removes its
 * mountpoint and cache (cache is freed). */
static void own_mount_end(struct fx_mount *m, char *cache)
{
	ck_assert_int_eq(fx_mount_stop(m), 0);
	rmdir(m->dir);
	fx_rmtree(cache);
	free(cache);
}

/*
 * Paths on the command line are settled before the daemon detaches (it
 * runs in "/"): a daemonized mount given a relative --ca-file, --manifest
 * and --cache-dir reads every file over TLS after it has detached, and
 * its chunks land in the cache under the directory it was started from.
 */
START_TEST(test_relative_paths_after_detach)
{
	struct fx_nginx tls;
	char *rel = fx_tmpdir("mount-relative");
	char url[256], path[PATH_MAX], cwd[PATH_MAX], *lock;
	ssize_t n;
	size_t len;
	long pid;

	if (fx_sh("openssl version >/dev/null 2>&1")) {
		fx_rmtree(rel);
		free(rel);
		fx_skip("no openssl command (for the origin's certificate)");
	}
	ck_assert_msg(fx_nginx_tls_start(&tls, data_dir) == 0,
		      "nginx over TLS did not start");
	ck_assert_int_eq(fx_sh("mkdir -p '%s/tls' '%s/mnt' && cp '%s/cert.pem' "
			       "'%s/tls/cert.pem'",
			       rel, rel, tls.dir, rel),
			 0);
	snprintf(path, sizeof(path), "%s/manifest.txt", rel);
	write_manifest(path, "", NULL);
	snprintf(url, sizeof(url), "%s/", tls.base);
	/* A CA file that is not there is refused before anything starts. */
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' mount --cache-dir cache "
			       "--ca-file tls/none.pem '%s' mnt 2>ca.err",
			       rel, fx_wharf_bin(), url),
			 1);
	ck_assert_int_eq(fx_sh("grep -q -- '--ca-file .*/tls/none.pem: No such "
			       "file' '%s/ca.err'",
			       rel),
			 0);
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' mount --ca-file tls '%s' mnt "
			       "2>&1 | grep -q -- '--ca-file .*/tls: Is a "
			       "directory'",
			       rel, fx_wharf_bin(), url),
			 0);
	/* An empty path is not the current directory. */
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' mount --cache-dir '' '%s' mnt "
			       "2>&1 | grep -q -- '--cache-dir: an empty path'",
			       rel, fx_wharf_bin(), url),
			 0);
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' mount --cache-dir cache "
			       "--ca-file tls/cert.pem --manifest manifest.txt "
			       "'%s' mnt >>mount.log 2>&1",
			       rel, fx_wharf_bin(), url),
			 0);
	/* Detached: the daemon named in the cache's lock runs in "/". */
	snprintf(path, sizeof(path), "%s/cache/lock", rel);
	lock = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(lock);
	pid = strtol(lock, NULL, 10);
	free(lock);
	ck_assert_int_gt(pid, 0);
	/* It lets go of the terminal and its directory just after it told
	 * the parent that the mount is up. */
	snprintf(path, sizeof(path), "/proc/%ld/cwd", pid);
	for (int i = 0; i < 250; i++) {
		n = readlink(path, cwd, sizeof(cwd) - 1);
		ck_assert_int_gt(n, 0);
		cwd[n] = '\0';
		if (!strcmp(cwd, "/"))
			break;
		usleep(20000);
	}
	ck_assert_str_eq(cwd, "/");
	snprintf(path, sizeof(path), "%s/mnt", rel);
	check_manifest_files(path, "");
	ck_assert_int_eq(fx_sh("test -n \"$(ls -A '%s/cache/chunks')\"", rel),
			 0);
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' umount mnt", rel,
			       fx_wharf_bin()),
			 0);
	fx_nginx_stop(&tls);
	fx_rmtree(rel);
	free(rel);
}
END_TEST

START_TEST(test_remount_from_cache_origin_down)
{
	struct fx_nginx ng2;
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-remount");
	char manifest[PATH_MAX], url[256], *json;
	const char *extra[] = {"--manifest", manifest, NULL};

	ck_assert_int_eq(fx_nginx_start(&ng2, data_dir), 0);
	snprintf(manifest, sizeof(manifest), "%s/manifest-remount", work_dir);
	write_manifest(manifest, "", NULL);
	snprintf(url, sizeof(url), "%s/plain/", ng2.base);
	fx_mount_init(&m, work_dir, "remount");
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);
	check_manifest_files(m.dir, "");
	/* The daemon exits 0 after `wharf umount`. */
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	fx_nginx_stop(&ng2);
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);
	check_manifest_files(m.dir, "");
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(fx_json_num(json, "chunks_fetched") == 0,
		      "chunks came from the origin: %s", json);
	/* By the mount, or by the kernel from the cache files
	 * (passthrough: opens). */
	ck_assert_int_gt(fx_json_num(json, "bytes_served") +
			     fx_json_num(json, "opens"),
			 0);
	free(json);
	own_mount_end(&m, cache);
}
END_TEST

/* The errno of a read of all of root/name, 0 when it reads whole. */
static int read_whole_errno(const char *root, const char *name)
{
	char path[PATH_MAX + 64], buf[65536];
	ssize_t r;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno;
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		;
	if (r < 0)
		err = errno;
	close(fd);
	return err;
}

/* "ALGO:HEX" of data_dir/name into out. */
static const char *digest_of(const char *name, enum checksum_algo a,
			     char out[CHECKSUM_TEXT_MAX])
{
	char path[PATH_MAX];
	struct checksum_ctx ctx;
	struct checksum c;
	size_t len;
	void *buf;

	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	buf = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(checksum_begin(&ctx, a), 0);
	checksum_feed(&ctx, buf, len);
	checksum_end(&ctx, &c);
	free(buf);
	return checksum_format(&c, out);
}

/*
 * A manifest's digest column, through a site cache that zeroes every
 * body: each object is found out, fetched again from the origin itself
 * and served right; an object whose digest is wrong fails with EIO and a
 * clear log line, and nothing of it stays cached.
 */
START_TEST(test_manifest_digests_bad_site_cache)
{
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-digests");
	char manifest[PATH_MAX], url[256], bad[64], d[3][CHECKSUM_TEXT_MAX];
	char path[PATH_MAX + 64];
	const char *extra[] = {"--manifest", manifest, "--site-cache", bad,
			       NULL};
	pid_t bad_pid;
	FILE *f;
	int fd;

	bad_pid = fx_bad_cache_start(work_dir, bad, sizeof(bad));
	ck_assert_int_gt(bad_pid, 0);
	snprintf(manifest, sizeof(manifest), "%s/manifest-digests", work_dir);
	f = fopen(manifest, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "chunk-1 %u - %s\n", CHUNK - 1,
		digest_of("chunk-1", CHECKSUM_SHA256, d[0]));
	fprintf(f, "chunk+1 %u - %s\n", CHUNK + 1,
		digest_of("chunk+1", CHECKSUM_MD5, d[1]));
	fprintf(f, "sub/deeper/leaf %u - %s\n", 3 * CHUNK + 17,
		digest_of("sub/deeper/leaf", CHECKSUM_CRC32C, d[2]));
	/* the digest of another file: no bytes of "one" match it */
	fprintf(f, "one 1 - %s\n", d[0]);
	/* an S3 ETag that is no MD5: the origin's own bytes are served */
	fprintf(f, "chunk %u - md5-etag:%s\n", CHUNK, strchr(d[1], ':') + 1);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(url, sizeof(url), "%s/plain/", ng.base);
	fx_mount_init(&m, work_dir, "digests");
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);

	/* One chunk: checked before a byte is served. */
	ck_assert_int_eq(check_file(m.dir, "chunk-1", CHUNK - 1), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_eq(read_whole_errno(m.dir, "one"), EIO);
	/* Many: the first read may have had bad bytes, a read after the
	 * kernel's pages are dropped has none. */
	for (int i = 0; i < 2; i++) {
		const char *name = i ? "sub/deeper/leaf" : "chunk+1";
		const uint64_t size = i ? 3 * CHUNK + 17 : CHUNK + 1;

		ck_assert_int_eq(read_whole_errno(m.dir, name), 0);
		snprintf(path, sizeof(path), "%s/%s", m.dir, name);
		fd = open(path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED),
				 0);
		close(fd);
		ck_assert_int_eq(check_file(m.dir, name, size), 0);
	}
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin_checksums", "checked"),
			 5);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin_checksums", "failed"), 1);
	ck_assert_int_eq(
	    fx_mount_stat(m.dir, "origin_checksums", "etag_not_md5"), 1);
	ck_assert_int_eq(
	    fx_mount_stat(m.dir, "origin_checksums", "repaired") + 2,
	    fx_mount_stat(m.dir, "origin_checksums", "mismatches"));
	/* "one" again: it fails at once */
	ck_assert_int_eq(read_whole_errno(m.dir, "one"), EIO);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(
	    fx_sh("grep -q 'one: fetched again from the origin itself, its "
		  "bytes still do not match: expected %s (from the origin.s "
		  "listing or manifest), got sha256:[0-9a-f]* from the "
		  "origin.s own bytes; reads of it fail with EIO' '%s'",
		  d[0], m.log),
	    0);
	/* what was verified is on record, and nothing of "one" is cached */
	ck_assert_int_eq(fx_sh("'%s' cache verify --cache-dir '%s' | grep -q "
			       "'^4 objects checked against their origin.s "
			       "checksum: 4 good, 0 bad; 0 not cached whole'",
			       fx_wharf_bin(), cache),
			 0);
	/* 1 + 1 + 2 + 4 chunks: none of "one" */
	ck_assert_int_eq(fx_sh("test $('%s' cache ls --cache-dir '%s' | wc -l) "
			       "= 8",
			       fx_wharf_bin(), cache),
			 0);
	fx_stop(bad_pid, 5000);
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/* Waits up to 5 s for the stats' number key to reach want; its last value. */
static long long stat_reaches(const char *dir, const char *key, long long want)
{
	long long v = fx_mount_stat(dir, NULL, key);

	for (int i = 0; i < 250 && v < want; i++) {
		usleep(20000);
		v = fx_mount_stat(dir, NULL, key);
	}
	return v;
}

/* The read-ahead chunks queued so far. */
static long long readahead_queued(const char *dir)
{
	return fx_mount_stat(dir, "readahead", "queued");
}

/* Reading a directory's files in name order queues the files after them;
 * reading them out of order queues none. */
START_TEST(test_directory_readahead)
{
	struct fx_mount m;
	char *cache = own_mount_start(&m, "mount-walk", NULL);
	long long stored = 0, missing;
	char url[256];

	for (int i = 0; i < 40; i++) {
		int k = (i * 7) % 40; /* never two neighbours in a row */

		check_numbered(m.dir, "many/f", k, k + 1, small_size);
	}
	ck_assert_int_eq(readahead_queued(m.dir), 0);
	check_numbered(m.dir, "many/f", 100, 140, small_size);
	/* From the third file in order on: 32 files ahead, then one more
	 * with each file read. */
	ck_assert_int_ge(readahead_queued(m.dir), 32);
	/* Stored before the unmount, which drops what is still queued (a
	 * busy machine's pool can lag that far behind): the 40 files read
	 * out of order, the 40 in order and the 32 after f0139. */
	for (int i = 0; i < 500 && (stored = fx_mount_stat(m.dir, "disk_cache",
							   "chunks")) < 112;
	     i++)
		usleep(20000);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* After a remount the same walk finds the files cached: each reader
	 * loads its own, no pool thread is woken for them (on a machine so
	 * busy that the pool had not stored them all, only those it had
	 * not are queued). */
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	check_numbered(m.dir, "many/f", 100, 140, small_size);
	missing = stored < 112 ? 112 - stored : 0;
	ck_assert_msg(readahead_queued(m.dir) <= missing,
		      "%lld queued after the remount, %lld of 112 stored",
		      readahead_queued(m.dir), stored);
	/* ... and the files past the cached ones (the first mount cached 32
	 * ahead of f0139) are queued as before. */
	check_numbered(m.dir, "many/f", 140, 150, small_size);
	ck_assert_int_gt(readahead_queued(m.dir), 0);
	own_mount_end(&m, cache);
}
END_TEST

/*
 * A sequential reader nearly through a large file has its read-ahead go
 * on into the next file in listing order (as `cat big chunk` reads): the
 * next file's chunk is fetched before it is read, and its reader fetches
 * nothing itself.
 */
START_TEST(test_readahead_crosses_into_next_file)
{
	struct fx_mount m;
	char *cache = own_mount_start(&m, "mount-cross", NULL);
	long long demand;

	ck_assert_int_eq(check_file(m.dir, "big", BIG_SIZE), 0);
	/* big's 50 chunks and then chunk's one, loaded by the pool. */
	ck_assert_int_eq(stat_reaches(m.dir, "chunks_fetched", 51), 51);
	demand = fx_mount_stat(m.dir, NULL, "demand_fetches");
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "demand_fetches"), demand);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "chunks_fetched"), 51);
	own_mount_end(&m, cache);
}
END_TEST

/*
 * A sequential reader's chunks are let go once the kernel has had them
 * whole (its page cache holds them) and none is fetched twice; with a
 * memory cache smaller than the file the buffers let go are the next
 * loads', within the cap.
 */
START_TEST(test_read_chunks_let_go)
{
	static const char *const small_cap[] = {"--memory-cache", "8M", NULL};
	struct fx_mount m;
	char *cache = own_mount_start(&m, "mount-letgo", NULL);
	char url[256];

	ck_assert_int_eq(check_file(m.dir, "big", BIG_SIZE), 0);
	/* big's 50 chunks, and chunk's one that the read-ahead spills. */
	ck_assert_int_eq(stat_reaches(m.dir, "chunks_fetched", 51), 51);
	/* Each chunk fetched once; a read-ahead job that took its chunk just
	 * as the reader let go of it loads it again from disk, rarely (up to
	 * 3 of 51 seen with 5 busy loops beside it). */
	ck_assert_int_le(fx_mount_stat(m.dir, "memory_cache", "misses"), 56);
	ck_assert_int_eq(fx_mount_stat(m.dir, "memory_cache", "read_whole"),
			 50);
	/* What is left in memory is the unread chunk of "chunk". */
	ck_assert_int_le(fx_mount_stat(m.dir, "memory_cache", "bytes"),
			 2 * CHUNK);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* An empty cache again (raw chunks read back from disk are mapped
	 * files, not buffers of ours). */
	fx_rmtree(cache);
	ck_assert_int_eq(mkdir(cache, 0700), 0);
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, small_cap), 0);
	ck_assert_int_eq(check_file(m.dir, "big", BIG_SIZE), 0);
	/* The kernel's own read-ahead (a dozen 1 MiB reads at once) alone
	 * outgrows an 8 MiB cache, so some chunks are evicted before they
	 * are read; those read whole go, and their buffers are later
	 * loads', within the cap. */
	ck_assert_int_gt(fx_mount_stat(m.dir, "memory_cache", "read_whole"), 0);
	ck_assert_int_gt(fx_mount_stat(m.dir, "memory_cache", "buffers_reused"),
			 0);
	{
		char *json = fx_mount_stats(m.dir);

		ck_assert_ptr_nonnull(json);
		ck_assert_int_le(
		    fx_stats_num(json, "memory_cache", "bytes") +
			fx_stats_num(json, "memory_cache", "buffers_kept"),
		    8 * CHUNK);
		free(json);
	}
	own_mount_end(&m, cache);
}
END_TEST

/* Drops the kernel's pages of root/name, so that its next read reaches
 * the mount. */
static void drop_pages(const char *root, const char *name)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
}

/*
 * A one-chunk file's chunk, loaded from disk (a mapping of its file), is
 * evicted from a small memory cache by the read of a larger file; read
 * again in the same mount, it is loaded without a hash when the first
 * load checked and sealed it (the load does not touch the file, which
 * would break the seal).  Its chunk file's times are set back two hours
 * between the mounts (its stat changes: the first load checks it).
 * _i 1: a byte of it flipped between the two loads is caught, and the
 * chunk fetched again.
 */
START_TEST(test_reload_in_mount_sealed)
{
	static const char *const small[] = {"--passthrough=off",
					    "--memory-cache", "4M", NULL};
	struct fx_mount m;
	char *cache = own_mount_start(&m, "mount-reload-sealed", small);
	char url[256], file[PATH_MAX + 64];
	long long checked, sealed;
	char *find;
	FILE *p;

	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	/* Its chunk file: raw, the object's bytes alone. */
	find = strdupf("for f in $(find '%s/chunks' -type f -size %uc); do "
		       "cmp -s $f '%s/chunk' && echo $f; done",
		       cache, CHUNK, m.dir);
	p = popen(find, "r");
	free(find);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(file, sizeof(file), p));
	pclose(p);
	file[strcspn(file, "\n")] = 0;
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(fx_sh("touch -d '2 hours ago' '%s'", file), 0);
	usleep(200000); /* past the ctime's tick (store_seal.c) */
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, small), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, "disk_cache", "checked_bytes"),
			 CHUNK);
	ck_assert_int_eq(check_file(m.dir, "big", BIG_SIZE), 0);
	if (_i)
		ck_assert_int_eq(fx_sh("printf '\\377' | dd of='%s' bs=1 "
				       "seek=999 conv=notrunc status=none",
				       file),
				 0);
	checked = fx_mount_stat(m.dir, "disk_cache", "checked_bytes");
	sealed = fx_mount_stat(m.dir, "disk_cache", "sealed");
	drop_pages(m.dir, "chunk");
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	if (_i) {
		ck_assert_int_ge(fx_mount_stat(m.dir, "disk_cache", "corrupt"),
				 1);
	} else {
		ck_assert_int_eq(
		    fx_mount_stat(m.dir, "disk_cache", "checked_bytes"),
		    checked);
		ck_assert_int_gt(fx_mount_stat(m.dir, "disk_cache", "sealed"),
				 sealed);
	}
	own_mount_end(&m, cache);
}
END_TEST

/* Empty files between (the kernel reads nothing of them) do not break a
 * walk: reading gaps/ in order queues the files ahead. */
START_TEST(test_directory_readahead_over_empty_files)
{
	struct fx_mount m;
	char *cache = own_mount_start(&m, "mount-gaps", NULL);

	check_numbered(m.dir, "gaps/g", 0, 10, gap_size);
	/* Five non-empty files read in order: queued up to 32 files ahead,
	 * half of them empty (not queued). */
	ck_assert_int_ge(readahead_queued(m.dir), 14);
	check_numbered(m.dir, "gaps/g", 10, N_GAPS, gap_size);
	own_mount_end(&m, cache);
}
END_TEST

/* Sums the sizes of the chunk files under cache dir: what --cache-size
 * caps. */
static uint64_t cache_bytes(const char *dir)
{
	char cmd[PATH_MAX + 128], line[64];
	uint64_t total = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "find '%s/chunks' -type f -printf '%%s\\n'",
		 dir);
	p = popen(cmd, "r");
	if (!p)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), p))
		total += strtoull(line, NULL, 10);
	pclose(p);
	return total;
}

/*
 * Bytes of files under dir that process pid still maps though they were
 * removed: their disk blocks stay taken until they are unmapped.
 */
static uint64_t removed_but_mapped(pid_t pid, const char *dir)
{
	char path[64], line[PATH_MAX + 128], real[PATH_MAX];
	uint64_t total = 0;
	size_t dlen;
	FILE *f;

	ck_assert_ptr_nonnull(realpath(dir, real));
	dlen = strlen(real);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end;
		char *file = strchr(line, '/');

		if (!file || strncmp(file, real, dlen) || file[dlen] != '/' ||
		    !strstr(file, " (deleted)") ||
		    sscanf(line, "%llx-%llx", &start, &end) != 2)
			continue;
		total += end - start;
	}
	fclose(f);
	return total;
}

START_TEST(test_size_cap_holds)
{
	static const char *const extra[] = {"--cache-size", "6M", NULL};
	struct fx_mount m;
	char *cache = own_mount_start(&m, "mount-cap", extra);
	const uint64_t leaf_size = 3 * CHUNK + 17;
	char url[256];
	uint64_t total, held;

	/* The leaf's chunks on disk; then, in a new mount, read from there,
	 * so that the memory cache maps their files (they do not compress). */
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", leaf_size), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", leaf_size), 0);
	ck_assert_uint_eq(removed_but_mapped(m.pid, cache), 0);

	/* 50 MiB through the 6 MiB cache evicts them. */
	ck_assert_int_eq(check_file(m.dir, "big", BIG_SIZE), 0);
	total = cache_bytes(cache);
	ck_assert_msg(total <= (6u << 20),
		      "the cache holds %llu bytes, over its 6 MiB cap",
		      (unsigned long long)total);
	ck_assert_msg(total > 0, "nothing was cached");
	/* Evicted files must not live on in the memory cache's mappings:
	 * no reader holds a chunk now, so none may be left. */
	held = removed_but_mapped(m.pid, cache);
	ck_assert_msg(held == 0,
		      "%llu bytes of evicted chunk files are still mapped",
		      (unsigned long long)held);
	own_mount_end(&m, cache);
}
END_TEST

/* Flips a byte in the middle of every chunk file under dir (names that
 * start with 32 hex digits).  Returns how many. */
static int corrupt_chunks(const char *dir)
{
	char cmd[PATH_MAX + 256];

	snprintf(cmd, sizeof(cmd),
		 "n=0; for f in $(find '%s' -type f -regextype egrep "
		 "-regex '.*/[0-9a-f]{32}[^/]*'); do "
		 "s=$(stat -c %%s \"$f\"); o=$((s / 2)); "
		 "b=$(od -An -tu1 -j$o -N1 \"$f\" | tr -d ' '); "
		 "printf \"\\\\$(printf %%o $(( (b + 1) %% 256 )))\" | "
		 "dd of=\"$f\" bs=1 seek=$o conv=notrunc status=none; "
		 "n=$((n+1)); done; exit $((n > 200 ? 200 : n))",
		 dir);
	return fx_sh("%s", cmd);
}

/* Removes from cache dir the chunk files that hold the bytes of the
 * origin's file name, as an eviction would.  @return how many. */
static int remove_chunk_of(const char *dir, const char *name)
{
	return fx_sh("n=0; for f in $(find '%s' -type f -regextype egrep "
		     "-regex '.*/[0-9a-f]{32}'); do "
		     "if cmp -s \"$f\" '%s/%s'; then rm \"$f\"; n=$((n+1)); "
		     "fi; done; exit $n",
		     dir, data_dir, name);
}

/* How many packs (files of an object's chunks) cache dir holds. */
static int count_packs(const char *dir)
{
	return fx_sh("exit $(find '%s' -name '*.pack' | wc -l)", dir);
}

/* Waits up to 10 s for mount mnt's cache to hold n packs.
 * @return 0 or -1. */
static int wait_packs(const char *mnt, int n)
{
	for (int i = 0; i < 200; i++) {
		if (fx_mount_stat(mnt, "disk_cache", "packs") == n)
			return 0;
		usleep(50000);
	}
	return -1;
}

START_TEST(test_corrupt_chunk_refetched)
{
	/* Chunk files (0); packs, made by default where the kernel offers
	 * passthrough (1). */
	static const char *const off[] = {"--passthrough=off", NULL};
	const char *const *opts = _i ? NULL : off;
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-corrupt");
	char url[256], *json;
	int n, packs, rc;

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(&m, work_dir, "corrupt");
	ck_assert_int_eq(mount_start(&m, url, cache, opts), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", 3 * CHUNK + 17),
			 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	packs = count_packs(cache);
	ck_assert_int_eq(packs, _i && fx_passthrough_expected() ? 2 : 0);
	n = corrupt_chunks(cache);
	/* 6 chunk files, or two packs and their indexes and a chunk file
	 * of the listing's. */
	ck_assert_msg(n >= (packs ? 4 : 6), "found %d chunk files to corrupt",
		      n);
	rc = fx_sh("'%s' cache verify --cache-dir '%s' >>'%s' 2>&1",
		   fx_wharf_bin(), cache, m.log);
	ck_assert_msg(rc != 0, "wharf cache verify found nothing");
	/* verify removed them; corrupt the survivors again below */
	ck_assert_int_eq(mount_start(&m, url, cache, opts), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_gt(corrupt_chunks(cache), 0);
	ck_assert_int_eq(mount_start(&m, url, cache, opts), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", 3 * CHUNK + 17),
			 0);
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(fx_json_num(json, "chunks_fetched") >= 1,
		      "corrupt chunks were not fetched again: %s", json);
	free(json);
	own_mount_end(&m, cache);
}
END_TEST

/* The backing files a mount holds drop as the kernel's releases (sent
 * after close returns) come in. */
static long long backing_files_settled(const char *dir, long long want)
{
	long long v = -1;

	for (int i = 0; i < 250 && v != want; i++) {
		v = fx_mount_stat(dir, NULL, "backing_files");
		if (v != want)
			usleep(20000);
	}
	return v;
}

/* Byte-exact through an mmap of the file, as loaders that map samples
 * read. */
static int check_mapped(const char *root, const char *name, uint64_t size)
{
	char path[PATH_MAX + 64];
	const uint32_t seed = seed_of(name);
	const uint8_t *p;
	int fd, bad = 0;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	for (uint64_t i = 0; i < size && !bad; i++)
		bad = p[i] != fx_byte(seed, i);
	munmap((void *)p, size);
	return bad;
}

/* Whether mount m got passthrough.  Where mounts must get it (root on
 * Linux 6.9 or later) its absence fails the test; elsewhere m is ended,
 * for the test to skip. */
static bool passthrough_or_end(struct fx_mount *m, char *cache)
{
	if (fx_mount_passthrough_on(m->dir))
		return true;
	ck_assert_msg(!fx_passthrough_expected(),
		      "no passthrough as root on Linux 6.9 or later");
	own_mount_end(m, cache);
	return false;
}

/*
 * Passthrough: after a remount, a file held whole by one raw chunk is
 * read by the kernel from its cache file (no read reaches the mount), byte
 * for byte, by read and by mmap; opens of one file share one backing file,
 * which stays after the last closes and serves its later opens, until its
 * chunk file leaves the store; a file opened while its chunk was not
 * yet cached keeps being served through the mount while that open lasts,
 * and a second open then succeeds; a chunk damaged between mounts is never
 * served but fetched again; a file of several chunks is read by the kernel
 * from a pack of them, made at its first open and found again after a
 * remount, and a damaged pack is fetched again; without --passthrough, all
 * reads go through the mount.
 */
START_TEST(test_passthrough)
{
	static const char *const on[] = {"--passthrough", NULL};
	static const char *const off[] = {"--passthrough=off", NULL};
	char *cache = fx_tmpdir("mount-passthrough");
	char url[256], path[PATH_MAX + 64], name[64];
	struct fx_mount m;
	int fd1, fd2, fd3;
	long long opens;

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(&m, work_dir, "passthrough");
	ck_assert_int_eq(mount_start(&m, url, cache, on), 0);
	if (!passthrough_or_end(&m, cache))
		fx_skip("no FUSE passthrough here (it needs root and Linux "
			"6.9 or later)");
	/* Cold: an open made before the chunk is cached is served through
	 * the mount; a second open while it lasts must not fail. */
	snprintf(path, sizeof(path), "%s/many/f0001", m.dir);
	fd1 = open(path, O_RDONLY);
	ck_assert_int_ge(fd1, 0);
	ck_assert_int_eq(check_file(m.dir, "many/f1000", small_size(1000)), 0);
	fd2 = open(path, O_RDONLY);
	ck_assert_int_ge(fd2, 0);
	ck_assert_int_eq(check_file(m.dir, "many/f1000", small_size(1000)), 0);
	close(fd2);
	close(fd1);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "many/f%04d", i);
		ck_assert_int_eq(check_file(m.dir, name, small_size(i)), 0);
	}
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk-1", CHUNK - 1), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* Warm, after a remount: the kernel reads the cache files. */
	ck_assert_int_eq(mount_start(&m, url, cache, on), 0);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "many/f%04d", i);
		ck_assert_int_eq(check_file(m.dir, name, small_size(i)), 0);
	}
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_eq(check_mapped(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, NULL, "opens"), 21);
	/* Each file's backing file outlives its last close, for its next
	 * open. */
	ck_assert_int_eq(backing_files_settled(m.dir, 21), 21);
	/* Two opens at once share one backing file, kept after both. */
	snprintf(path, sizeof(path), "%s/chunk-1", m.dir);
	fd1 = open(path, O_RDONLY);
	fd2 = open(path, O_RDONLY);
	ck_assert_int_ge(fd1, 0);
	ck_assert_int_ge(fd2, 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "backing_files"), 22);
	close(fd1);
	ck_assert_int_eq(check_file(m.dir, "chunk-1", CHUNK - 1), 0);
	close(fd2);
	ck_assert_int_eq(backing_files_settled(m.dir, 22), 22);
	/* Many opens of one file: its one backing file each time. */
	opens = fx_mount_stat(m.dir, NULL, "opens");
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(check_file(m.dir, "many/f0003", small_size(3)),
				 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "opens"), opens + 50);
	ck_assert_int_eq(backing_files_settled(m.dir, 22), 22);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"), 0);
	/* Its chunk file evicted (removed from the store): its backing file
	 * goes at the next open, which is served through the mount. */
	ck_assert_int_eq(remove_chunk_of(cache, "many/f0003"), 1);
	ck_assert_int_eq(check_file(m.dir, "many/f0003", small_size(3)), 0);
	ck_assert_int_eq(backing_files_settled(m.dir, 21), 21);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"),
			 (long long)small_size(3));
	opens = fx_mount_stat(m.dir, NULL, "opens");
	/* Two chunks: the kernel reads a pack of them, made from their
	 * chunk files after the first read (through the mount). */
	ck_assert_int_eq(count_packs(cache), 1);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(check_mapped(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"),
			 (long long)small_size(3));
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "opens"), opens + 2);
	ck_assert_int_eq(count_packs(cache), 1);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(mount_start(&m, url, cache, on), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "chunks_fetched"), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* Damaged between mounts (the pack too): fetched again, never
	 * served. */
	ck_assert_int_ge(corrupt_chunks(cache), 20);
	ck_assert_int_eq(mount_start(&m, url, cache, on), 0);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "many/f%04d", i);
		ck_assert_int_eq(check_file(m.dir, name, small_size(i)), 0);
	}
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, NULL, "corrupt"), 20);
	ck_assert_int_ge(fx_mount_stat(m.dir, NULL, "chunks_fetched"), 22);
	/* ... and once fetched again, passed through at the next open (a
	 * pack is made after a read through the mount, off its path). */
	ck_assert_int_eq(wait_packs(m.dir, 1), 0);
	opens = fx_mount_stat(m.dir, NULL, "opens");
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "opens"), opens + 1);
	snprintf(path, sizeof(path), "%s/many/f0003", m.dir);
	opens = fx_mount_stat(m.dir, NULL, "opens");
	fd3 = open(path, O_RDONLY);
	ck_assert_int_ge(fd3, 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "opens"), opens + 1);
	close(fd3);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* Off: every read through the mount. */
	ck_assert_int_eq(mount_start(&m, url, cache, off), 0);
	ck_assert(!fx_mount_passthrough_on(m.dir));
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, NULL, "bytes_served"),
			 2 * CHUNK + 1);
	own_mount_end(&m, cache);
}
END_TEST

/* Opens and closes mnt/name n times. */
static void open_close_n(const char *mnt, const char *name, int n)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", mnt, name);
	for (int i = 0; i < n; i++) {
		const int fd = open(path, O_RDONLY);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(close(fd), 0);
	}
}

/*
 * Passthrough by default (auto): after a remount a file of many chunks
 * is read by the kernel from its pack, one of one chunk from its chunk
 * file, but one read through this mount from the kernel's pages of it
 * (keep_cache); opens of files of one chunk, however many (the labels a job
 * opens before its shards), never stop opens coming, so a file of many
 * chunks opened after them still goes through passthrough; a file of
 * many chunks read through the mount to its end gets its pack.  A pack a
 * mount checked is sealed: a later mount's first open of it hashes
 * nothing, but with --verify=mount.
 */
START_TEST(test_passthrough_auto)
{
	static const char *const verify_mount[] = {"--verify=mount", NULL};
	char *cache = fx_tmpdir("mount-passthrough-auto");
	char url[256], path[PATH_MAX + 64], *json, buf[16];
	long long served, opens;
	struct fx_mount m;
	int big;

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(&m, work_dir, "passthrough-auto");
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	if (!passthrough_or_end(&m, cache))
		fx_skip("no FUSE passthrough here (it needs root and Linux "
			"6.9 or later)");
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(check_file(m.dir, "many/f0000", small_size(0)), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	ck_assert(fx_mount_passthrough_on(m.dir));
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"), 0);
	ck_assert_int_eq(count_packs(cache), 1);
	opens = fx_mount_stat(m.dir, NULL, "opens");
	ck_assert_int_eq(opens, 1);
	/* A file of one chunk the store holds raw: handed over too. */
	ck_assert_int_eq(check_file(m.dir, "many/f0000", small_size(0)), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "opens"), opens + 1);
	/* One read through this mount (cold): its later opens read the
	 * kernel's pages of it (keep_cache), asking the mount nothing. */
	ck_assert_int_eq(check_file(m.dir, "many/f1000", small_size(1000)), 0);
	served = fx_mount_stat(m.dir, NULL, "bytes_served");
	ck_assert_int_eq(served, (long long)small_size(1000));
	/* (The mount notes that the kernel has the pages just after its
	 * reply: an open that comes sooner is still passed through.) */
	for (int i = 0; i < 100; i++) {
		opens = fx_mount_stat(m.dir, NULL, "opens");
		ck_assert_int_eq(
		    check_file(m.dir, "many/f1000", small_size(1000)), 0);
		if (fx_mount_stat(m.dir, NULL, "opens") == opens)
			break;
		usleep(20000);
	}
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"), served);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "opens"), opens);
	/* Small files make every open of two windows of 64, with a file
	 * open by passthrough and without. */
	snprintf(path, sizeof(path), "%s/chunk+1", m.dir);
	big = open(path, O_RDONLY);
	ck_assert_int_ge(big, 0);
	open_close_n(m.dir, "many/f1000", 70);
	ck_assert_int_eq(pread(big, buf, sizeof(buf), CHUNK - 2), 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(
		    (uint8_t)buf[i],
		    fx_byte(seed_of("chunk+1"), CHUNK - 2 + (uint64_t)i));
	ck_assert_int_eq(close(big), 0);
	/* many/f0000's, kept; not the pack's. */
	ck_assert_int_eq(backing_files_settled(m.dir, 1), 1);
	open_close_n(m.dir, "many/f1000", 130);
	ck_assert(fx_mount_passthrough_on(m.dir));
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_ptr_nonnull(strstr(json, "\"stopped\": false"));
	free(json);
	/* The file of many chunks opened after them: by passthrough. */
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"), served);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "opens"), opens + 2);
	/* A file of many chunks read through the mount gets its pack, for
	 * its next open. */
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", 3 * CHUNK + 17),
			 0);
	ck_assert_int_eq(wait_packs(m.dir, 2), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	ck_assert(fx_mount_passthrough_on(m.dir));
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", 3 * CHUNK + 17),
			 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "bytes_served"), 0);
	/* chunk+1's pack, checked by the mount before, was sealed: its
	 * first open here hashed nothing. */
	ck_assert_int_ge(fx_mount_stat(m.dir, "disk_cache", "sealed"), 1);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* --verify=mount trusts no seal. */
	ck_assert_int_eq(mount_start(&m, url, cache, verify_mount), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "disk_cache", "sealed"), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, "disk_cache", "checked_bytes"),
			 CHUNK + 1);
	own_mount_end(&m, cache);
}
END_TEST

/* An object replaced at the origin while a mount reads it: the chunks
 * not yet read fail with EIO, never bytes of the new version. */
START_TEST(test_object_replaced_mid_read)
{
	char *data = fx_tmpdir("mount-replaced-data");
	char *cache = fx_tmpdir("mount-replaced");
	const char *extra[] = {"--readahead", "0", NULL};
	struct fx_nginx ng2;
	char path[PATH_MAX + 64], url[256], buf[4096];
	struct fx_mount m;
	int fd;

	snprintf(path, sizeof(path), "%s/obj", data);
	ck_assert_int_eq(fx_write_file(path, 3 * CHUNK, 1), 0);
	ck_assert_int_eq(fx_sh("touch -d '2020-01-02 03:04:05' '%s'", path), 0);
	ck_assert_int_eq(fx_nginx_start(&ng2, data), 0);
	snprintf(url, sizeof(url), "%s/json/", ng2.base);
	fx_mount_init(&m, work_dir, "replaced");
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);
	snprintf(path, sizeof(path), "%s/obj", m.dir);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_int_eq(buf[100], (char)fx_byte(1, 100));

	snprintf(path, sizeof(path), "%s/obj", data);
	ck_assert_int_eq(fx_write_file(path, 3 * CHUNK, 2), 0);
	errno = 0;
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 2 * CHUNK), -1);
	ck_assert_int_eq(errno, EIO);
	close(fd);
	ck_assert_int_eq(
	    fx_sh("grep -q 'the object changed while open' '%s'", m.log), 0);
	own_mount_end(&m, cache);
	fx_nginx_stop(&ng2);
	fx_rmtree(data);
	free(data);
}
END_TEST

static int read_errno(const char *root, const char *name)
{
	char path[PATH_MAX], b[64];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno;
	n = read(fd, b, sizeof(b));
	n = n < 0 ? errno : 0;
	close(fd);
	return (int)n;
}

START_TEST(test_origin_errors_map)
{
	static const char *const extra_lines =
	    "status/404/gone 100\nstatus/403/secret 100\n"
	    "status/500/broken 100\n";
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-errors");
	char manifest[PATH_MAX], url[256];
	const char *extra[] = {"--manifest", manifest, NULL};

	snprintf(manifest, sizeof(manifest), "%s/manifest-errors", work_dir);
	write_manifest(manifest, "plain/", extra_lines);
	snprintf(url, sizeof(url), "%s/", ng.base);
	fx_mount_init(&m, work_dir, "errors");
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);
	ck_assert_int_eq(check_file_as(m.dir, "plain/chunk", "chunk", CHUNK),
			 0);
	ck_assert_int_eq(read_errno(m.dir, "status/404/gone"), ENOENT);
	ck_assert_int_eq(read_errno(m.dir, "status/403/secret"), EACCES);
	ck_assert_int_eq(read_errno(m.dir, "status/500/broken"), EIO);
	own_mount_end(&m, cache);
}
END_TEST

/* Names in dir (not "." or ".."), sorted, each followed by ' '. */
static void list_names(const char *dir, char *out, size_t cap)
{
	struct dirent **v;
	int n = scandir(dir, &v, NULL, alphasort);
	size_t l = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, ".."))
			l += (size_t)snprintf(out + l, cap - l, "%s ",
					      v[i]->d_name);
		free(v[i]);
	}
	if (n >= 0)
		free(v);
}

/*
 * python's http.server lists a dangling symlink, and its HEAD is 404: the
 * pages give no sizes, so each entry is HEADed, and that one entry is left
 * out (with a warning naming it) rather than the whole directory.
 */
START_TEST(test_html_listing_without_entry)
{
	char *root = fx_tmpdir("mount-pyroot"), *cache = fx_tmpdir("mount-py");
	char path[PATH_MAX + 64], port_s[16], url[64], names[256],
	    plog[PATH_MAX];
	char *argv[] = {"python3", "-m",	"http.server",
			"--bind",  "127.0.0.1", "--directory",
			root,	   port_s,	NULL};
	const char *const extra[] = {NULL};
	struct fx_mount m;
	struct stat st;
	pid_t py;
	char *log;
	size_t len;
	int port = fx_free_port();

	if (fx_sh("python3 -c 'import http.server' 2>/dev/null")) {
		fx_rmtree(root);
		fx_rmtree(cache);
		free(root);
		free(cache);
		fx_skip("no python3 with http.server on PATH");
	}
	snprintf(path, sizeof(path), "%s/d", root);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/d/ok1", root);
	ck_assert_int_eq(fx_write_file(path, 10, seed_of("ok1")), 0);
	snprintf(path, sizeof(path), "%s/d/ok2", root);
	ck_assert_int_eq(fx_write_file(path, 20, seed_of("ok2")), 0);
	snprintf(path, sizeof(path), "%s/d/dangling", root);
	ck_assert_int_eq(symlink("nowhere", path), 0);
	snprintf(port_s, sizeof(port_s), "%d", port);
	snprintf(plog, sizeof(plog), "%s/pyserver.log", work_dir);
	py = fx_spawn(argv, plog);
	ck_assert_int_gt(py, 0);
	ck_assert_int_eq(fx_wait_port(port, 10000), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	fx_mount_init(&m, work_dir, "pyhttp");
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);

	snprintf(path, sizeof(path), "%s/d", m.dir);
	list_names(path, names, sizeof(names));
	ck_assert_str_eq(names, "ok1 ok2 ");
	snprintf(path, sizeof(path), "%s/d/ok2", m.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 20);
	ck_assert_int_eq(check_file_as(m.dir, "d/ok1", "ok1", 10), 0);
	log = fx_read_file(m.log, &len);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(strstr(log, "\"d/dangling\" left out") &&
			  strstr(log, "404"),
		      "no warning naming the entry: %s", log);
	free(log);

	own_mount_end(&m, cache);
	fx_stop(py, 5000);
	fx_rmtree(root);
	free(root);
}
END_TEST

START_TEST(test_daemonized_mount_and_umount)
{
	char *cache = fx_tmpdir("mount-daemon");
	char mnt[PATH_MAX], stats[PATH_MAX + 16], url[256];
	struct stat st;
	int rc;

	snprintf(mnt, sizeof(mnt), "%s/mnt", cache);
	ck_assert_int_eq(fx_mkdirs(mnt), 0);
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	rc = fx_sh("'%s' mount --cache-dir '%s/c' --chunk-size 1M '%s' '%s'",
		   fx_wharf_bin(), cache, url, mnt);
	ck_assert_int_eq(rc, 0);
	/* The mount is up when the command returns. */
	snprintf(stats, sizeof(stats), "%s/.wharf/stats", mnt);
	ck_assert_int_eq(stat(stats, &st), 0);
	ck_assert_int_eq(check_file(mnt, "chunk-1", CHUNK - 1), 0);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	ck_assert_int_eq(stat(stats, &st), -1);
	/* umount returns once the daemon let go of the cache dir: it can be
	 * mounted again at once. */
	rc = fx_sh("'%s' mount --cache-dir '%s/c' --chunk-size 1M '%s' '%s'",
		   fx_wharf_bin(), cache, url, mnt);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(check_file(mnt, "chunk-1", CHUNK - 1), 0);
	/* A symlink to the mountpoint names the mount. */
	ck_assert_int_eq(fx_sh("ln -s mnt '%s/link' && '%s' umount '%s/link'",
			       cache, fx_wharf_bin(), cache),
			 0);
	ck_assert_int_eq(stat(stats, &st), -1);
	ck_assert_int_ne(
	    fx_sh("'%s' umount '%s' 2>/dev/null", fx_wharf_bin(), mnt), 0);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/* A detached mount where no syslog listens (most containers) logs to its
 * cache directory, says so at mount time, and a reader's 404 leaves its
 * cause there; --log-file and --log-level choose. */
START_TEST(test_detached_mount_logs)
{
	char *cache = fx_tmpdir("mount-logs");
	char mnt[PATH_MAX], manifest[PATH_MAX], path[PATH_MAX + 32], url[256];
	char *text;
	size_t len;

	snprintf(mnt, sizeof(mnt), "%s/mnt", cache);
	ck_assert_int_eq(fx_mkdirs(mnt), 0);
	snprintf(manifest, sizeof(manifest), "%s/manifest", cache);
	write_manifest(manifest, "plain/", "status/404/gone 100\n");
	snprintf(url, sizeof(url), "%s/", ng.base);
	if (log_syslog_present()) {
		fx_skip_note(__func__, "a syslog listens on /dev/log: the "
				       "default log file is not used");
	} else {
		ck_assert_int_eq(
		    fx_sh("'%s' mount --cache-dir '%s/c' --manifest '%s' "
			  "'%s' '%s' 2> '%s/mount.err'",
			  fx_wharf_bin(), cache, manifest, url, mnt, cache),
		    0);
		snprintf(path, sizeof(path), "%s/mount.err", cache);
		text = fx_read_file(path, &len);
		ck_assert_ptr_nonnull(text);
		ck_assert_msg(strstr(text, "logging to ") &&
				  strstr(text, "/c/wharf.log"),
			      "mount said: %s", text);
		free(text);
		ck_assert_int_eq(read_errno(mnt, "status/404/gone"), ENOENT);
		ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt),
				 0);
		snprintf(path, sizeof(path), "%s/c/wharf.log", cache);
		text = fx_read_file(path, &len);
		ck_assert_ptr_nonnull(text);
		ck_assert_msg(strstr(text, "status/404/gone") &&
				  strstr(text, "404"),
			      "log: %s", text);
		ck_assert_ptr_nonnull(strstr(text, "]: info: mounted "));
		free(text);
	}
	/* A relative --log-file, errors only; a bad level refused. */
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' mount --cache-dir c2 "
			       "--log-file my.log -o log_level=error "
			       "--manifest manifest '%s' mnt",
			       cache, fx_wharf_bin(), url),
			 0);
	ck_assert_int_eq(read_errno(mnt, "status/404/gone"), ENOENT);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	snprintf(path, sizeof(path), "%s/my.log", cache);
	text = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "]: error: ") &&
			  !strstr(text, "]: info: "),
		      "log at level error: %s", text);
	free(text);
	ck_assert_int_eq(fx_sh("'%s' mount --log-level loud '%s/json/' '%s' "
			       "2>/dev/null",
			       fx_wharf_bin(), ng.base, mnt),
			 2);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/* ---- offline operation, and names no filesystem can show ---- */

START_TEST(test_wharf_dir_hidden)
{
	char names[65536], path[PATH_MAX];
	struct stat st;

	list_names(mnt_dir, names, sizeof(names));
	ck_assert_msg(!strstr(names, ".wharf"), "readdir shows it: %s", names);
	ck_assert_ptr_nonnull(strstr(names, "chunk+1 "));
	snprintf(path, sizeof(path), "%s/.wharf", mnt_dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
}
END_TEST

static double seconds_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* How many times s occurs in the file at path. */
static int count_in_file(const char *path, const char *s)
{
	size_t len;
	char *text = fx_read_file(path, &len), *p = text;
	int n = 0;

	while (p && (p = strstr(p, s))) {
		n++;
		p += strlen(s);
	}
	free(text);
	return n;
}

/* An origin of a test's own, to take down and bring back: a, b, d/c,
 * d/e and u, each fx_write_file of its own name. */
struct origin {
	struct fx_nginx ng;
	char *data;
	char url[256];
};

static const struct {
	const char *name;
	uint64_t size;
} origin_files[] = {
    {"a", CHUNK + 5}, {"b", 2 * CHUNK + 3}, {"d/c", 1000},
    {"d/e", 5000},    {"u", 3000},
};

static void origin_write(struct origin *o, const char *name, const char *as,
			 uint64_t size)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", o->data, name);
	ck_assert_int_eq(fx_write_file(path, size, seed_of(as)), 0);
}

static void origin_start(struct origin *o, const char *tag)
{
	char path[PATH_MAX];

	o->data = fx_tmpdir(tag);
	snprintf(path, sizeof(path), "%s/d", o->data);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	for (size_t i = 0; i < sizeof(origin_files) / sizeof(origin_files[0]);
	     i++)
		origin_write(o, origin_files[i].name, origin_files[i].name,
			     origin_files[i].size);
	ck_assert_int_eq(fx_nginx_start(&o->ng, o->data), 0);
	snprintf(o->url, sizeof(o->url), "%s/json/", o->ng.base);
}

static void origin_stop(struct origin *o)
{
	fx_nginx_stop(&o->ng);
	fx_rmtree(o->data);
	free(o->data);
}

/* Waits (bounded) until the mount's stats say offline is `want`. */
static bool wait_offline(const char *dir, bool want)
{
	for (int waited = 0; waited < 30000; waited += 200) {
		char *json = fx_mount_stats(dir);
		bool now = json && strstr(json, "\"offline\": true");

		free(json);
		if (now == want)
			return true;
		usleep(200000);
	}
	return false;
}

/* `wharf mount -f ARGS` that must fail, its output in work_dir/TAG.
 * @return whether the output holds `expect`. */
static bool mount_refused(const char *tag, const char *args, const char *dir,
			  const char *expect)
{
	char path[PATH_MAX];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", work_dir, tag);
	rc = fx_sh("'%s' mount -f --retries 0 --origin-wait 1 %s '%s' "
		   ">'%s' 2>&1",
		   fx_wharf_bin(), args, dir, path);
	if (rc == 0)
		fx_sh("'%s' umount '%s'", fx_wharf_bin(), dir);
	return rc != 0 && count_in_file(path, expect) > 0;
}

/*
 * Setup errors name their fix: a listing refused with 403 suggests
 * --manifest; a mountpoint whose mount lost its process (ENOTCONN)
 * suggests `wharf umount DIR`, which then lets it go.
 */
START_TEST(test_setup_errors_name_fix)
{
	char url[256], args[FX_MOUNT_PATH + 64], out[PATH_MAX];
	char *cache = fx_tmpdir("mount-fix"), *said;
	struct fx_mount m;
	size_t n = 0;
	int st;

	snprintf(args, sizeof(args), "'%s/status/403/'", ng.base);
	fx_mount_init(&m, work_dir, "fix");
	ck_assert(mount_refused("refused-listing", args, m.dir,
				"or name the objects with --manifest"));

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	ck_assert_int_eq(kill(m.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(m.pid, &st, 0), m.pid);
	m.pid = -1;
	snprintf(out, sizeof(out), "%s/dead-mount.out", work_dir);
	ck_assert_int_eq(fx_sh("'%s' mount '%s' '%s' >'%s' 2>&1",
			       fx_wharf_bin(), url, m.dir, out),
			 1);
	snprintf(args, sizeof(args), "run 'wharf umount %s' to let it go",
		 m.dir);
	said = fx_read_file(out, &n);
	ck_assert_msg(said && memmem(said, n, args, strlen(args)),
		      "wharf mount on a dead mount said: %.*s", (int)n, said);
	free(said);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), m.dir), 0);
	ck_assert_int_ne(fx_sh("mountpoint -q '%s'", m.dir), 0);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/*
 * A remount whose origin's TLS certificate is not trusted (its CA, given
 * with --ca-file to the first mount, left out of the second), with a
 * listing snapshot in the cache: a setup error, like a refused
 * credential, not an origin out of reach.  The mount fails (exit status
 * 1) with a message that names --ca-file and --insecure's risk, instead of
 * coming up offline from the snapshot.
 */
START_TEST(test_tls_untrusted_remount)
{
	char *cache = fx_tmpdir("mount-tls"), ca[PATH_MAX], url[256];
	char out[PATH_MAX], names[256];
	const char *const trusted[] = {"--ca-file", ca, NULL};
	struct fx_nginx tls;
	struct fx_mount m;

	ck_assert_int_eq(fx_nginx_tls_start(&tls, data_dir), 0);
	snprintf(ca, sizeof(ca), "%s/cert.pem", tls.dir);
	snprintf(url, sizeof(url), "%s/", tls.base);
	fx_mount_init(&m, work_dir, "tls");
	ck_assert_int_eq(mount_start(&m, url, cache, trusted), 0);
	list_names(m.dir, names, sizeof(names));
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(
	    fx_sh("test -s \"$(ls '%s'/snapshots/*.list)\"", cache), 0);

	snprintf(out, sizeof(out), "%s/tls-remount.out", work_dir);
	ck_assert_int_eq(fx_sh("'%s' mount --retries 1 --cache-dir '%s' '%s' "
			       "'%s' >'%s' 2>&1",
			       fx_wharf_bin(), cache, url, m.dir, out),
			 1);
	ck_assert_int_eq(count_in_file(out, "not trusted here"), 1);
	ck_assert_int_eq(count_in_file(out, "--ca-file FILE"), 1);
	ck_assert_int_eq(count_in_file(out, "--insecure turns the check off"),
			 1);
	ck_assert_int_eq(count_in_file(out, "offline"), 0);
	{
		size_t n;
		char *said = fx_read_file(out, &n);

		fprintf(stderr, "the refused remount said: %.*s", (int)n,
			said);
		free(said);
	}
	ck_assert_int_ne(fx_sh("mountpoint -q '%s'", m.dir), 0);
	fx_nginx_stop(&tls);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/*
 * Mount, read part of the tree, unmount, take the origin down, mount
 * again: the listing comes from the snapshot, cached bytes are served, an
 * uncached file fails with EIO at once (one log line for it); the origin
 * back, the same mount reads it.  Another prefix or URL of the same origin
 * never takes that snapshot.
 */
START_TEST(test_offline_remount)
{
	const char *extra[] = {"--origin-wait", "2", NULL};
	char *cache = fx_tmpdir("mount-offline");
	char root_on[256], d_on[256], names[256], path[PATH_MAX + 32];
	char args[PATH_MAX + 512], *json;
	struct origin o;
	struct fx_mount m;
	double t0;

	ck_assert_int_eq(fx_sh("'%s' mount --help | grep -q -- '--offline ' && "
			       "'%s' mount --help | grep -q -- "
			       "'--origin-wait SEC '",
			       fx_wharf_bin(), fx_wharf_bin()),
			 0);
	origin_start(&o, "offline-data");
	fx_mount_init(&m, work_dir, "offline");
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_int_eq(check_file(m.dir, "a", CHUNK + 5), 0);
	ck_assert_int_eq(check_file(m.dir, "d/c", 1000), 0);
	list_names(m.dir, root_on, sizeof(root_on));
	snprintf(path, sizeof(path), "%s/d", m.dir);
	list_names(path, d_on, sizeof(d_on));
	ck_assert_str_eq(root_on, "a b d u ");
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(
	    fx_sh("test -s \"$(ls '%s'/snapshots/*.list)\"", cache), 0);

	fx_nginx_pause(&o.ng);
	t0 = seconds_now();
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_msg(seconds_now() - t0 < 20, "the mount took %.1f s",
		      seconds_now() - t0);
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(strstr(json, "\"offline\": true"), "%s", json);
	free(json);
	ck_assert_int_gt(count_in_file(m.log, "snapshot saved"), 0);
	list_names(m.dir, names, sizeof(names));
	ck_assert_str_eq(names, root_on);
	snprintf(path, sizeof(path), "%s/d", m.dir);
	list_names(path, names, sizeof(names));
	ck_assert_str_eq(names, d_on);
	ck_assert_int_eq(check_file(m.dir, "a", CHUNK + 5), 0);
	ck_assert_int_eq(check_file(m.dir, "d/c", 1000), 0);
	t0 = seconds_now();
	ck_assert_int_eq(read_errno(m.dir, "u"), EIO);
	ck_assert_int_eq(read_errno(m.dir, "u"), EIO);
	ck_assert_int_eq(read_errno(m.dir, "d/e"), EIO);
	ck_assert_msg(seconds_now() - t0 < 30, "EIO took %.1f s",
		      seconds_now() - t0);
	ck_assert_int_eq(count_in_file(m.log, "/u: not cached"), 1);
	ck_assert_int_eq(count_in_file(m.log, "/d/e: not cached"), 1);

	/* The origin is back: the same mount notices and reads again. */
	ck_assert_int_eq(fx_nginx_resume(&o.ng), 0);
	ck_assert(wait_offline(m.dir, false));
	ck_assert_int_eq(check_file(m.dir, "u", 3000), 0);
	ck_assert_int_eq(check_file(m.dir, "d/e", 5000), 0);
	ck_assert_int_eq(check_file(m.dir, "b", 2 * CHUNK + 3), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* A snapshot belongs to its source. */
	fx_nginx_pause(&o.ng);
	snprintf(args, sizeof(args), "--cache-dir '%s' '%sd/'", cache, o.url);
	ck_assert(mount_refused("other-prefix", args, m.dir,
				"no listing snapshot of"));
	snprintf(args, sizeof(args), "--cache-dir '%s' '%s/html/'", cache,
		 o.ng.base);
	ck_assert(
	    mount_refused("other-url", args, m.dir, "no listing snapshot of"));
	snprintf(args, sizeof(args), "--offline --cache-dir '%s' '%sd/'", cache,
		 o.url);
	ck_assert(mount_refused("other-offline", args, m.dir,
				"no listing snapshot of"));
	/* --offline takes its own, and never asks the origin. */
	ck_assert_int_eq(fx_nginx_resume(&o.ng), 0);
	{
		const char *off[] = {"--offline", NULL};

		ck_assert_int_eq(mount_start(&m, o.url, cache, off), 0);
		ck_assert(wait_offline(m.dir, true));
		ck_assert_int_eq(check_file(m.dir, "u", 3000), 0);
		json = fx_mount_stats(m.dir);
		ck_assert_ptr_nonnull(json);
		ck_assert_msg(fx_json_num(json, "requests") == 0, "%s", json);
		free(json);
	}
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	/* `wharf cache stats` shows it; `wharf cache clear` removes it. */
	snprintf(path, sizeof(path), "%s/cache-stats", work_dir);
	ck_assert_int_eq(fx_sh("'%s' cache stats --cache-dir '%s' >'%s'",
			       fx_wharf_bin(), cache, path),
			 0);
	snprintf(args, sizeof(args), "listing snapshot of %s: 2 directories",
		 o.url);
	ck_assert_int_eq(count_in_file(path, args), 1);
	ck_assert_int_eq(fx_sh("'%s' cache clear --cache-dir '%s' >'%s'",
			       fx_wharf_bin(), cache, path),
			 0);
	ck_assert_int_eq(count_in_file(path, ", 1 listing snapshots"), 1);
	snprintf(args, sizeof(args), "--offline --cache-dir '%s' '%s'", cache,
		 o.url);
	ck_assert(
	    mount_refused("cleared", args, m.dir, "no listing snapshot of"));
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
	origin_stop(&o);
}
END_TEST

/*
 * Chunk keys include the version: an object changed between two mounts is
 * read in its new version, and so is one that changed while a mount was
 * offline, once the origin is back.
 */
START_TEST(test_changed_object_not_stale)
{
	const char *extra[] = {"--origin-wait", "2", NULL};
	char *cache = fx_tmpdir("mount-changed");
	char path[PATH_MAX];
	struct origin o;
	struct fx_mount m;

	origin_start(&o, "changed-data");
	snprintf(path, sizeof(path), "%s/a", o.data);
	fx_mount_init(&m, work_dir, "changed");
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_int_eq(check_file(m.dir, "a", CHUNK + 5), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* Same size, other bytes, a later mtime: a new version. */
	origin_write(&o, "a", "a2", CHUNK + 5);
	ck_assert_int_eq(fx_sh("touch -d '+100 seconds' '%s'", path), 0);
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_int_eq(check_file_as(m.dir, "a", "a2", CHUNK + 5), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	fx_nginx_pause(&o.ng);
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert(wait_offline(m.dir, true));
	origin_write(&o, "a", "a3", CHUNK + 5);
	ck_assert_int_eq(fx_sh("touch -d '+200 seconds' '%s'", path), 0);
	ck_assert_int_eq(fx_nginx_resume(&o.ng), 0);
	ck_assert(wait_offline(m.dir, false));
	ck_assert_int_eq(check_file_as(m.dir, "a", "a3", CHUNK + 5), 0);
	own_mount_end(&m, cache);
	origin_stop(&o);
}
END_TEST

/* A listing with "..", "a/b", a negative and a huge size and a name of 300
 * bytes among good entries: the good ones mount, each bad one is named
 * once in the log and counted.  A name listed twice is shown once: the
 * first listed, or the directory of a file and a directory.  The same for
 * a manifest. */
START_TEST(test_unshowable_entries)
{
	static const char listing[] =
	    "[{\"name\":\"g1\",\"type\":\"file\",\"size\":100},"
	    "{\"name\":\"..\",\"type\":\"directory\"},"
	    "{\"name\":\"a/b\",\"type\":\"file\",\"size\":1},"
	    "{\"name\":\"neg\",\"type\":\"file\",\"size\":-5},"
	    "{\"name\":\"huge\",\"type\":\"file\","
	    "\"size\":9223372036854775808},"
	    "{\"name\":\"%s\",\"type\":\"file\",\"size\":1},"
	    "{\"name\":\"g2\",\"type\":\"file\",\"size\":200},"
	    "{\"name\":\"g1\",\"type\":\"file\",\"size\":999},"
	    "{\"name\":\"d\",\"type\":\"file\",\"size\":7},"
	    "{\"name\":\"d\",\"type\":\"directory\"}]";
	static const char manifest_text[] =
	    "one 1\nchunk 1048576\n../x 5\na//b 3\nempty -5\n"
	    "big 9223372036854775808\n";
	char *root = fx_tmpdir("mount-weird"), *cache = fx_tmpdir("mount-w");
	char path[PATH_MAX + 16], manifest[PATH_MAX], url[256], names[256];
	char long_name[301], *json;
	const char *man[] = {"--manifest", manifest, NULL};
	struct fx_nginx ng2;
	struct stat st;
	struct fx_mount m;
	FILE *f;

	memset(long_name, 'L', 300);
	long_name[300] = '\0';
	snprintf(path, sizeof(path), "%s/w", root);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/w/listing.json", root);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, listing, long_name);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(path, sizeof(path), "%s/w/g1", root);
	ck_assert_int_eq(fx_write_file(path, 100, seed_of("g1")), 0);
	snprintf(path, sizeof(path), "%s/w/g2", root);
	ck_assert_int_eq(fx_write_file(path, 200, seed_of("g2")), 0);
	ck_assert_int_eq(fx_nginx_start(&ng2, root), 0);

	snprintf(url, sizeof(url), "%s/jsonfile/w/", ng2.base);
	fx_mount_init(&m, work_dir, "weird");
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	list_names(m.dir, names, sizeof(names));
	ck_assert_str_eq(names, "d g1 g2 ");
	ck_assert_int_eq(check_file(m.dir, "g1", 100), 0);
	ck_assert_int_eq(check_file(m.dir, "g2", 200), 0);
	snprintf(path, sizeof(path), "%s/d", m.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(fx_json_num(json, "skipped_entries") == 7, "%s", json);
	free(json);
	ck_assert_int_eq(count_in_file(m.log, "\"g1\" left out: named twice"),
			 1);
	ck_assert_int_eq(count_in_file(m.log, "\"d\" left out: a file named"),
			 1);
	ck_assert_int_eq(count_in_file(m.log, "\"..\" left out"), 1);
	ck_assert_int_eq(count_in_file(m.log, "\"a/b\" left out"), 1);
	ck_assert_int_eq(count_in_file(m.log, "\"neg\" left out"), 1);
	ck_assert_int_eq(count_in_file(m.log, "\"huge\" left out"), 1);
	ck_assert_int_eq(count_in_file(m.log, "LLLL\" left out"), 1);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	fx_nginx_stop(&ng2);

	snprintf(manifest, sizeof(manifest), "%s/manifest-weird", work_dir);
	f = fopen(manifest, "w");
	ck_assert_ptr_nonnull(f);
	fputs(manifest_text, f);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(url, sizeof(url), "%s/plain/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, man), 0);
	list_names(m.dir, names, sizeof(names));
	ck_assert_str_eq(names, "chunk one ");
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(fx_json_num(json, "skipped_entries") == 4, "%s", json);
	free(json);
	ck_assert_int_eq(count_in_file(m.log, "\"a//b\" left out"), 1);
	own_mount_end(&m, cache);
	fx_rmtree(root);
	free(root);
}
END_TEST

/*
 * kill -9 of the daemon during a cold read, three times: then `wharf cache
 * verify` finds no bad chunk, and every byte reads right.  The origin
 * answers each request 200 ms late at 8 MB/s a connection, so the 50 MB
 * file is still coming (for seconds) when the kill comes.
 */
START_TEST(test_kill_during_cold_read)
{
	/* A total cap too: the mount opens as many connections as the
	 * origin's throughput rewards, so a cap per connection alone lets
	 * the read end before the kill. */
	static const char *const slow[] = {
	    "--ttfb-ms",    "200", "--conn-rate", "8M",
	    "--total-rate", "16M", NULL};
	char *cache = fx_tmpdir("mount-kill"), url[256], path[PATH_MAX + 8];
	char vlog[PATH_MAX];
	struct fx_mount m;
	pid_t origin;

	origin = fx_origin_start(data_dir, slow, work_dir, "kill-origin", url,
				 sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work_dir, "kill");
	for (int round = 0; round < 3; round++) {
		pid_t reader;
		int status = 0;

		ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
		reader = fork();
		ck_assert_int_ge(reader, 0);
		if (reader == 0) {
			size_t n = 0;

			snprintf(path, sizeof(path), "%s/big", m.dir);
			/* fx_read_file stops at an error: a short file. */
			_exit(fx_read_file(path, &n) && n == BIG_SIZE ? 0 : 1);
		}
		usleep(100000 + 300000 * (useconds_t)round);
		kill(m.pid, SIGKILL);
		waitpid(m.pid, NULL, 0);
		m.pid = -1;
		waitpid(reader, &status, 0);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
			      "round %d: the read was over before the kill "
			      "(status %#x)",
			      round, status);
		/* A dead daemon's mount answers ENOTCONN until unmounted. */
		ck_assert_int_eq(fx_sh("'%s' umount '%s' >>'%s' 2>&1",
				       fx_wharf_bin(), m.dir, m.log),
				 0);
	}
	snprintf(vlog, sizeof(vlog), "%s/kill-verify.log", work_dir);
	ck_assert_int_eq(fx_sh("'%s' cache verify --cache-dir '%s' >'%s' 2>&1",
			       fx_wharf_bin(), cache, vlog),
			 0);
	ck_assert_int_eq(count_in_file(vlog, " 0 bad, 0 removed"), 1);
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++)
		ck_assert_int_eq(
		    check_file(m.dir, sized_files[i].name, sized_files[i].size),
		    0);
	own_mount_end(&m, cache);
	fx_stop(origin, 5000);
}
END_TEST

/* A reader's read of one file, for the tests of deferred store writes. */
struct later_read {
	const char *root, *name;
	uint64_t size;
	int rc;
	bool done; /* atomic */
};

static void *later_read_run(void *arg)
{
	struct later_read *r = arg;

	r->rc = check_file_as(r->root, r->name, r->name, r->size);
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void *later_stop_run(void *arg)
{
	return (void *)(intptr_t)fx_mount_stop(arg);
}

/* fanotify permission events on a cache's chunk directories: the
 * daemon's creates of chunk files, held until let go. */
struct fan_hold {
	int fan;
	pid_t pid;	/* whose events are held; others are allowed */
	int held[64];	/* their event fds */
	int n, max;	/* held, and at most */
};

/* Starts holding pid's creates under CACHE/chunks (at most max at a
 * time).  @return 0, or -errno when fanotify cannot (not CAP_SYS_ADMIN,
 * or no permission events in this kernel). */
static int fan_start(struct fan_hold *h, const char *cache, pid_t pid,
		     int max)
{
	char path[PATH_MAX];

	h->fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC,
			       O_RDONLY | O_LARGEFILE);
	if (h->fan < 0)
		return -errno;
	h->pid = pid;
	h->n = 0;
	h->max = max;
	for (int i = 0; i < 256; i++) {
		snprintf(path, sizeof(path), "%s/chunks/%02x", cache, i);
		if (fanotify_mark(h->fan, FAN_MARK_ADD,
				  FAN_OPEN_PERM | FAN_EVENT_ON_CHILD, AT_FDCWD,
				  path))
			return -errno;
	}
	return 0;
}

static void fan_reply(int fan, int fd)
{
	const struct fanotify_response r = {.fd = fd, .response = FAN_ALLOW};

	ck_assert_int_eq(write(fan, &r, sizeof(r)), sizeof(r));
	close(fd);
}

/* Takes the events that come within ms (0: those waiting), holding
 * pid's while there is room.  @return how many are held. */
static int fan_take(struct fan_hold *h, int ms)
{
	struct pollfd p = {.fd = h->fan, .events = POLLIN};
	char buf[4096] __attribute__((aligned(8)));

	while (poll(&p, 1, ms) > 0) {
		const ssize_t n = read(h->fan, buf, sizeof(buf));
		struct fanotify_event_metadata *ev = (void *)buf;
		ssize_t left = n;

		for (; n > 0 && FAN_EVENT_OK(ev, left);
		     ev = FAN_EVENT_NEXT(ev, left)) {
			if (ev->pid == h->pid && h->n < h->max)
				h->held[h->n++] = ev->fd;
			else
				fan_reply(h->fan, ev->fd);
		}
		ms = 0;
	}
	return h->n;
}

/* Lets every held create go, and stops watching. */
static void fan_stop(struct fan_hold *h)
{
	for (int i = 0; i < h->n; i++)
		fan_reply(h->fan, h->held[i]);
	h->n = 0;
	close(h->fan);
}

/* Waits up to ms for r to end, answering events meanwhile. */
static bool later_wait(struct fan_hold *h, struct later_read *r, int ms)
{
	for (int waited = 0;
	     !__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) && waited < ms;
	     waited += 20)
		(void)fan_take(h, 20);
	return __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
}

/* Writes DATA/dir/name of size bytes, alone in its directory (no other
 * file's chunk is read ahead). */
static void write_alone(const char *dir, const char *name, uint64_t size)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", data_dir, dir);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	ck_assert_int_eq(fx_write_file(path, size, seed_of(name)), 0);
}

/* An own mount (tag) whose chunk file creates h holds (max at a time),
 * and a thread reading rd from it.  @return 0, or fan_start's -errno
 * (the mount ended: the caller skips). */
static int later_start(struct fx_mount *m, char **cache, const char *tag,
		       struct fan_hold *h, int max, struct later_read *rd,
		       pthread_t *reader)
{
	int rc;

	write_alone(tag, rd->name, rd->size);
	*cache = own_mount_start(m, tag, NULL);
	rc = fan_start(h, *cache, m->pid, max);
	if (rc) {
		own_mount_end(m, *cache);
		return rc;
	}
	rd->root = m->dir;
	ck_assert_int_eq(pthread_create(reader, NULL, later_read_run, rd), 0);
	return 0;
}

#define FAN_SKIP_WHY                                                           \
	"fanotify: %s (permission events need CAP_SYS_ADMIN and "             \
	"CONFIG_FANOTIFY_ACCESS_PERMISSIONS)"

/*
 * A chunk fetched from the origin is served before it is stored: while
 * the store's create of its file waits (a fanotify permission event on
 * the cache's chunk directories, left unanswered), a read of the file
 * still ends.  A clean unmount started then waits for that write: the
 * chunk is on disk afterwards, and no temp file is left.
 */
START_TEST(test_chunk_served_before_stored)
{
	struct later_read rd = {.name = "later/only", .size = 300000};
	char path[PATH_MAX], *cache, *listing;
	pthread_t reader, stopper;
	struct fan_hold h;
	struct fx_mount m;
	void *status;
	size_t len;
	int rc;

	rc = later_start(&m, &cache, "later", &h, 1, &rd, &reader);
	if (rc)
		fx_skip(FAN_SKIP_WHY, strerror(-rc));
	for (int waited = 0; !fan_take(&h, 100) && waited < 30000;
	     waited += 100)
		;
	ck_assert_msg(h.n == 1, "the daemon never created a chunk file");
	/* The write waits: the read must end all the same. */
	ck_assert_msg(later_wait(&h, &rd, 20000),
		      "the read waited for the chunk's store write");
	ck_assert_int_eq(pthread_join(reader, NULL), 0);
	ck_assert_int_eq(rd.rc, 0);
	/* Unmounting with the write still held: it waits for it. */
	ck_assert_int_eq(pthread_create(&stopper, NULL, later_stop_run, &m),
			 0);
	usleep(300000);
	fan_stop(&h);
	ck_assert_int_eq(pthread_join(stopper, &status), 0);
	ck_assert_int_eq((int)(intptr_t)status, 0);
	snprintf(path, sizeof(path), "%s/listing", work_dir);
	ck_assert_int_eq(fx_sh("cd '%s/chunks' && find . -type f >'%s'",
			       cache, path),
			 0);
	listing = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(listing);
	ck_assert_msg(!strstr(listing, "/.tmp."), "a temp file was left: %s",
		      listing);
	ck_assert_msg(strchr(listing, '\n') &&
			  strchr(listing, '\n') == strrchr(listing, '\n'),
		      "expected one chunk file, found: %s", listing);
	free(listing);
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/*
 * A file of several chunks read through the mount is packed, though its
 * chunks' store writes come after its reads: the packer has them written
 * first.  Here the creates of its chunk files are held for a second after
 * the read, longer than the packer's retries for chunks not yet stored.
 */
START_TEST(test_pack_after_deferred_writes)
{
	struct later_read rd = {.name = "laterpack/big", .size = 3 * CHUNK + 5};
	pthread_t reader;
	struct fan_hold h;
	struct fx_mount m;
	long long packs = 0;
	char *cache;
	int rc;

	if (!fx_passthrough_expected())
		fx_skip("packs are made where FUSE passthrough is (root, "
			"Linux 6.9 or later)");
	rc = later_start(&m, &cache, "laterpack", &h, 64, &rd, &reader);
	if (rc)
		fx_skip(FAN_SKIP_WHY, strerror(-rc));
	ck_assert_msg(later_wait(&h, &rd, 30000),
		      "the read waited for its chunks' store writes");
	ck_assert_int_eq(pthread_join(reader, NULL), 0);
	ck_assert_int_eq(rd.rc, 0);
	for (int waited = 0; waited < 1000; waited += 20)
		(void)fan_take(&h, 20);
	ck_assert_int_gt(h.n, 0);
	fan_stop(&h);
	for (int waited = 0; waited < 20000 && packs < 1; waited += 50) {
		usleep(50000);
		packs = fx_mount_stat(m.dir, "disk_cache", "packs");
	}
	ck_assert_int_eq(packs, 1);
	own_mount_end(&m, cache);
}
END_TEST

/* Waits up to ms for pid to end.  @return its wait status, or -1. */
static int wait_exit(pid_t pid, int ms)
{
	int status;

	for (int waited = 0; waited < ms; waited += 20) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		usleep(20000);
	}
	return -1;
}

/*
 * SIGTERM ends the daemon while a read waits on an origin that trickles
 * at 4 KB/s a connection: fast enough not to count as a stall, so the
 * 1 MiB chunk would take minutes.  The fetches in flight are cancelled,
 * the daemon exits 0 within seconds, and the reader gets an error.
 */
START_TEST(test_sigterm_during_slow_read)
{
	static const char *const slow[] = {"--conn-rate", "4k", NULL};
	char *cache = fx_tmpdir("mount-term"), url[256], path[PATH_MAX + 8];
	struct fx_mount m;
	pid_t origin, reader;
	int status, rstatus;
	double t0, took;

	origin = fx_origin_start(data_dir, slow, work_dir, "term-origin", url,
				 sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work_dir, "term");
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	reader = fork();
	ck_assert_int_ge(reader, 0);
	if (reader == 0) {
		static char buf[65536];
		ssize_t n;
		int fd;

		snprintf(path, sizeof(path), "%s/big", m.dir);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			_exit(1);
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			;
		/* 2: the read was cancelled, or the daemon was gone (the
		 * kernel then fails what it had sent with ECONNABORTED, and
		 * later requests with ENOTCONN). */
		if (n < 0 && (errno == ECANCELED || errno == ECONNABORTED ||
			      errno == ENOTCONN))
			_exit(2);
		_exit(n == 0 ? 0 : 3);
	}
	/* The read is under way: its first chunk is coming. */
	for (int i = 0; i < 100 && fx_mount_stat(m.dir, NULL, "requests") < 2;
	     i++)
		usleep(50000);
	usleep(300000);
	t0 = seconds_now();
	kill(m.pid, SIGTERM);
	status = wait_exit(m.pid, 10000);
	took = seconds_now() - t0;
	if (status == -1)
		fx_stop(m.pid, 1000);
	m.pid = -1;
	rstatus = wait_exit(reader, 10000);
	if (rstatus == -1)
		fx_stop(reader, 1000);
	fx_sh("umount -l '%s' 2>/dev/null", m.dir);
	fx_stop(origin, 5000);
	ck_assert_msg(status != -1,
		      "the daemon is still up 10 s after SIGTERM");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the daemon ended with status %#x", status);
	ck_assert_msg(took < 5, "SIGTERM took %.1f s", took);
	ck_assert_msg(rstatus != -1 && WIFEXITED(rstatus) &&
			  WEXITSTATUS(rstatus) == 2,
		      "the reader: status %#x, not a cancelled read", rstatus);
	ck_assert_int_eq(count_in_file(m.log, "unmounting"), 1);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/*
 * SIGTERM at any moment of start-up: before the mount, while the kernel's
 * INIT is unanswered, while the waiter's first stat is in flight.  The
 * daemon ends (0, 1, or killed before its handlers were set), never
 * crashes (under ASan: no use of a destroyed session), and leaves
 * nothing mounted.  A signal that was pending from the start is taken
 * too, at the point where it is most likely to race with start-up.
 */
START_TEST(test_sigterm_during_startup)
{
	char *cache = fx_tmpdir("mount-termstart"), url[256];
	struct fx_mount m;

	char *argv[] = {(char *)fx_wharf_bin(),
			"mount",
			"-f",
			"--cache-dir",
			cache,
			url,
			m.dir,
			NULL};
	char stats[PATH_MAX + 16];
	double up;

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(&m, work_dir, "termstart");
	/* How long start-up takes here; then signals from 0 to 150% of
	 * that, in steps of 5%, so that some land in each stage. */
	snprintf(stats, sizeof(stats), "%s/.wharf/stats", m.dir);
	up = seconds_now();
	m.pid = fx_spawn(argv, m.log);
	ck_assert_int_gt(m.pid, 0);
	for (int i = 0; i < 10000 && access(stats, F_OK); i++)
		usleep(1000);
	up = seconds_now() - up;
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	for (int round = 0; round < 30; round++) {
		int status;

		m.pid = fx_spawn(argv, m.log);
		ck_assert_int_gt(m.pid, 0);
		usleep((useconds_t)(up * 0.05 * round * 1e6));
		kill(m.pid, SIGTERM);
		status = wait_exit(m.pid, 10000);
		if (status == -1)
			fx_stop(m.pid, 1000);
		m.pid = -1;
		ck_assert_msg(status != -1, "round %d: still up after SIGTERM",
			      round);
		ck_assert_msg(
		    (WIFEXITED(status) && WEXITSTATUS(status) <= 1) ||
			(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM),
		    "round %d: status %#x", round, status);
		ck_assert_int_eq(count_in_file(m.log, "Sanitizer"), 0);
		ck_assert_int_eq(count_in_file(m.log, "runtime error"), 0);
		ck_assert_msg(fx_sh("mountpoint -q '%s'", m.dir) != 0,
			      "round %d: left mounted", round);
	}
	/* Started with SIGTERM blocked (a launcher's mask is inherited) and
	 * already sent: the daemon takes it as soon as its handlers are
	 * set, so the session ends before the kernel's INIT is answered,
	 * while the waiter's first stat of the mountpoint is in flight
	 * (which it need not be every time: rounds enough that one is). */
	for (int round = 0; round < 6; round++) {
		sigset_t term, old;
		int status;

		sigemptyset(&term);
		sigaddset(&term, SIGTERM);
		sigprocmask(SIG_BLOCK, &term, &old);
		m.pid = fx_spawn(argv, m.log);
		sigprocmask(SIG_SETMASK, &old, NULL);
		ck_assert_int_gt(m.pid, 0);
		kill(m.pid, SIGTERM);
		status = wait_exit(m.pid, 10000);
		if (status == -1)
			fx_stop(m.pid, 1000);
		m.pid = -1;
		ck_assert_msg(status == 0, "pending SIGTERM: status %#x%s",
			      status, status == -1 ? " (still up)" : "");
		/* A stop, not a mount that failed to answer. */
		ck_assert_int_eq(count_in_file(m.log, "does not answer"), 0);
		ck_assert_int_eq(count_in_file(m.log, "Sanitizer"), 0);
		ck_assert_msg(fx_sh("mountpoint -q '%s'", m.dir) != 0,
			      "left mounted");
	}
	/* ... and the waiter, whose stat failed, said so. */
	ck_assert_int_ge(count_in_file(m.log, "stopped before it was up"), 1);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

START_TEST(test_cli_usage)
{
	ck_assert_int_eq(fx_sh("'%s' mount --help >/dev/null", fx_wharf_bin()),
			 0);
	ck_assert_int_eq(fx_sh("'%s' umount --help >/dev/null", fx_wharf_bin()),
			 0);
	ck_assert_int_eq(fx_sh("'%s' mount 2>/dev/null", fx_wharf_bin()), 2);
	ck_assert_int_eq(
	    fx_sh("'%s' mount --chunk-size 1k a b 2>/dev/null", fx_wharf_bin()),
	    2);
	ck_assert_int_eq(
	    fx_sh("'%s' mount --bogus a b 2>/dev/null", fx_wharf_bin()), 2);
	ck_assert_int_eq(
	    fx_sh("'%s' mount --zstd-level 23 a b 2>/dev/null", fx_wharf_bin()),
	    2);
	ck_assert_int_eq(fx_sh("'%s' umount 2>/dev/null", fx_wharf_bin()), 2);
	/* The option is named, and a missing value is told apart. */
	ck_assert_int_eq(
	    fx_sh("'%s' mount --cache-size 2>/dev/null", fx_wharf_bin()), 2);
	ck_assert_int_eq(
	    fx_sh("'%s' mount --cache-size 2>&1 | grep -q "
		  "'^wharf mount: option --cache-size needs a value$'",
		  fx_wharf_bin()),
	    0);
	ck_assert_int_eq(fx_sh("'%s' mount -fx a b 2>&1 | grep -q "
			       "\"^wharf mount: unknown option '-x'$\"",
			       fx_wharf_bin()),
			 0);
	ck_assert_int_eq(
	    fx_sh("'%s' mount --passthrough=yes a b 2>&1 | "
		  "grep -q -- '--passthrough=yes: auto, on or off'",
		  fx_wharf_bin()),
	    0);
	ck_assert_int_eq(fx_sh("'%s' mount --verify=never a b 2>&1 | "
			       "grep -q -- '--verify=never: sealed or mount'",
			       fx_wharf_bin()),
			 0);
	ck_assert_int_eq(
	    fx_sh("'%s' mount --help | grep -q -- '0: no cap'", fx_wharf_bin()),
	    0);
}
END_TEST

/* The tree alone, over a fake source: one directory of 100,000 files. */
#define BIG_DIR 100000

static int fake_list(struct source *src, const char *dir, source_list_cb cb,
		     void *arg)
{
	struct source_object o = {.version = "etag"};
	char name[32];
	int rc;

	if (*dir && strcmp(dir, "big") && strcmp(dir, "sub"))
		return -ENOENT;
	if (!*dir) {
		/* A duplicate and names that cannot be shown are dropped. */
		static const char *const dirs[] = {"big", "sub", "sub",
						   "a/b", ".",	 ".."};

		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
			o.name = dirs[i];
			o.is_dir = true;
			rc = cb(arg, &o);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (!strcmp(dir, "sub")) {
		o.name = "leaf";
		o.size = 42;
		o.mtime = 1700000000;
		return cb(arg, &o);
	}
	/* Backwards: the tree sorts a listing by name. */
	for (int i = BIG_DIR - 1; i >= 0; i--) {
		snprintf(name, sizeof(name), "file-%06d.jpg", i);
		o.name = name;
		o.size = (uint64_t)i;
		rc = cb(arg, &o);
		if (rc)
			return rc;
	}
	return 0;
}

static int count_child(void *arg, const struct tree_attr *child,
		       uint64_t next_index)
{
	uint64_t *n = arg;

	/* Children come in name order with consecutive inodes. */
	if (child->size != *n)
		return 1;
	(*n)++;
	return 0;
}

START_TEST(test_tree_large_directory)
{
	static const struct source_ops ops = {.scheme = "fake",
					      .list_dir = fake_list};
	struct source src = {.ops = &ops, .id = "fake://"};
	struct tree_attr a, b, root_big;
	uint64_t n = 0, nodes, bytes;
	struct tree *t;
	char path[256];

	ck_assert_int_eq(tree_new(&src, &t), 0);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "big", &root_big), 0);
	ck_assert(root_big.is_dir);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "a/b", &a), -ENOENT);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "..", &a), -ENOENT);
	ck_assert_int_eq(tree_readdir(t, root_big.ino, 0, count_child, &n), 0);
	ck_assert_uint_eq(n, BIG_DIR);
	ck_assert_int_eq(tree_lookup(t, root_big.ino, "file-031337.jpg", &a),
			 0);
	ck_assert_uint_eq(a.size, 31337);
	ck_assert_str_eq(a.version, "etag");
	ck_assert_int_eq(tree_lookup(t, root_big.ino, "file-031337.jpg", &b),
			 0);
	ck_assert_uint_eq(a.ino, b.ino); /* stable */
	ck_assert_int_eq(tree_path(t, a.ino, path, sizeof(path)), 19);
	ck_assert_str_eq(path, "big/file-031337.jpg");
	ck_assert_int_eq(tree_path(t, a.ino, path, 10), -ENAMETOOLONG);
	ck_assert_int_eq(tree_lookup(t, a.ino, "x", &b), -ENOTDIR);
	ck_assert_int_eq(tree_lookup(t, root_big.ino, "file-100000.jpg", &b),
			 -ENOENT);
	/* Readdir resumes at an index. */
	n = BIG_DIR - 5;
	ck_assert_int_eq(
	    tree_readdir(t, root_big.ino, BIG_DIR - 5, count_child, &n), 0);
	ck_assert_uint_eq(n, BIG_DIR);
	/* The duplicate "sub" was dropped; its child is found. */
	n = 0;
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "sub", &b), 0);
	ck_assert_int_eq(tree_lookup(t, b.ino, "leaf", &a), 0);
	ck_assert_int_eq(a.mtime, 1700000000);
	tree_usage(t, &nodes, &bytes);
	ck_assert_uint_eq(nodes, 1 + 2 + BIG_DIR + 1);
	/* Compact: well under 200 bytes an entry, names included. */
	ck_assert_msg(bytes < (uint64_t)BIG_DIR * 200, "%llu bytes",
		      (unsigned long long)bytes);
	tree_free(t);
}
END_TEST

/* A source whose directory "slow" lists only when released, counting its
 * listings. */
static pthread_mutex_t slow_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cond = PTHREAD_COND_INITIALIZER;
static bool slow_released;
static int slow_listings;

static int slow_list(struct source *src, const char *dir, source_list_cb cb,
		     void *arg)
{
	struct source_object o = {.version = "etag", .size = 1};

	(void)src;
	if (!*dir) {
		static const char *const dirs[] = {"fast", "slow"};

		for (int i = 0; i < 2; i++) {
			int rc;

			o.name = dirs[i];
			o.is_dir = true;
			rc = cb(arg, &o);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (!strcmp(dir, "slow")) {
		pthread_mutex_lock(&slow_mu);
		slow_listings++;
		while (!slow_released)
			pthread_cond_wait(&slow_cond, &slow_mu);
		pthread_mutex_unlock(&slow_mu);
	}
	o.name = "f";
	return cb(arg, &o);
}

struct lister_arg {
	struct tree *t;
	uint64_t ino;
	int rc;
	bool done; /* under slow_mu */
};

static void *list_one(void *arg)
{
	struct lister_arg *a = arg;
	char *err = NULL;

	a->rc = tree_list(a->t, a->ino, &err);
	free(err);
	pthread_mutex_lock(&slow_mu);
	a->done = true;
	pthread_cond_broadcast(&slow_cond);
	pthread_mutex_unlock(&slow_mu);
	return NULL;
}

/* Directories are listed independently: while one listing hangs on a slow
 * origin, another directory lists; two askers of the slow one share one
 * listing. */
START_TEST(test_tree_slow_listing_blocks_no_other)
{
	static const struct source_ops ops = {.scheme = "fake",
					      .list_dir = slow_list};
	struct source src = {.ops = &ops, .id = "fake://"};
	struct lister_arg slow1, slow2, fast;
	struct tree_attr fa, sa, f;
	struct timespec until;
	pthread_t th[3];
	struct tree *t;
	int rc = 0;

	ck_assert_int_eq(tree_new(&src, &t), 0);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "fast", &fa), 0);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "slow", &sa), 0);
	slow1 = (struct lister_arg){.t = t, .ino = sa.ino};
	slow2 = slow1;
	fast = (struct lister_arg){.t = t, .ino = fa.ino};
	ck_assert_int_eq(pthread_create(&th[0], NULL, list_one, &slow1), 0);
	ck_assert_int_eq(pthread_create(&th[1], NULL, list_one, &slow2), 0);
	ck_assert_int_eq(pthread_create(&th[2], NULL, list_one, &fast), 0);

	/* The fast directory lists while the slow one hangs (5 s at most,
	 * then the slow one is let go so that a failure cannot hang). */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&slow_mu);
	while (!fast.done && rc == 0)
		rc = pthread_cond_timedwait(&slow_cond, &slow_mu, &until);
	const bool fast_first = fast.done && !slow1.done && !slow2.done;
	slow_released = true;
	pthread_cond_broadcast(&slow_cond);
	pthread_mutex_unlock(&slow_mu);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(fast_first, "a slow listing held up another directory");
	ck_assert_int_eq(slow1.rc, 0);
	ck_assert_int_eq(slow2.rc, 0);
	ck_assert_int_eq(fast.rc, 0);
	ck_assert_int_eq(slow_listings, 1);
	ck_assert_int_eq(tree_lookup(t, sa.ino, "f", &f), 0);
	ck_assert_int_eq(tree_lookup(t, fa.ino, "f", &f), 0);
	tree_free(t);
}
END_TEST

static Suite *mount_suite(void)
{
	Suite *s = suite_create("mount");
	TCase *tc = tcase_create("mount");
	TCase *tt = tcase_create("tree");
	const char *why = fx_fuse_missing();

	if (!why && fx_sh("'%s' mount --help >/dev/null 2>&1", fx_wharf_bin()))
		why = "this wharf has no mount command";
	if (!why)
		why = fx_nginx_missing();

	tcase_add_test(tt, test_tree_large_directory);
	tcase_add_test(tt, test_tree_slow_listing_blocks_no_other);
	suite_add_tcase(s, tt);

	/* Without what the mounts need, each is named as skipped (after
	 * the tree's tests have run and counted). */
	if (!why)
		tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	fx_tcase_add(tc, test_cli_usage, why);
	fx_tcase_add(tc, test_sizes_and_bytes, why);
	fx_tcase_add(tc, test_many_small_files, why);
	fx_tcase_add(tc, test_random_offsets, why);
	fx_tcase_add(tc, test_concurrent_readers, why);
	fx_tcase_add(tc, test_read_only, why);
	fx_tcase_add(tc, test_stats_file, why);
	fx_tcase_add(tc, test_second_mount_refused, why);
	fx_tcase_add(tc, test_unreachable_origin, why);
	fx_tcase_add(tc, test_remount_from_cache_origin_down, why);
	fx_tcase_add(tc, test_manifest_digests_bad_site_cache, why);
	fx_tcase_add(tc, test_relative_paths_after_detach, why);
	fx_tcase_add(tc, test_directory_readahead, why);
	fx_tcase_add(tc, test_readahead_crosses_into_next_file, why);
	fx_tcase_add(tc, test_read_chunks_let_go, why);
	fx_tcase_add_loop(tc, test_reload_in_mount_sealed, 0, 2, why);
	fx_tcase_add(tc, test_directory_readahead_over_empty_files, why);
	fx_tcase_add(tc, test_size_cap_holds, why);
	fx_tcase_add_loop(tc, test_corrupt_chunk_refetched, 0, 2, why);
	fx_tcase_add(tc, test_passthrough, why);
	fx_tcase_add(tc, test_passthrough_auto, why);
	fx_tcase_add(tc, test_object_replaced_mid_read, why);
	fx_tcase_add(tc, test_origin_errors_map, why);
	fx_tcase_add(tc, test_html_listing_without_entry, why);
	fx_tcase_add(tc, test_daemonized_mount_and_umount, why);
	fx_tcase_add(tc, test_detached_mount_logs, why);
	fx_tcase_add(tc, test_wharf_dir_hidden, why);
	fx_tcase_add(tc, test_offline_remount, why);
	fx_tcase_add(tc, test_setup_errors_name_fix, why);
	fx_tcase_add(tc, test_tls_untrusted_remount,
		     why ? why
		     : fx_sh("openssl version >/dev/null 2>&1")
			 ? "no openssl command (for the origin's certificate)"
			 : NULL);
	fx_tcase_add(tc, test_changed_object_not_stale, why);
	fx_tcase_add(tc, test_unshowable_entries, why);
	fx_tcase_add(tc, test_kill_during_cold_read, why);
	fx_tcase_add(tc, test_chunk_served_before_stored, why);
	fx_tcase_add(tc, test_pack_after_deferred_writes, why);
	fx_tcase_add(tc, test_sigterm_during_slow_read, why);
	fx_tcase_add(tc, test_sigterm_during_startup, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mount_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
