/*
 * wharffs end to end, the mount itself: a real nginx on 127.0.0.1 serves
 * a dataset, `wharf mount -f` serves it on a temporary mountpoint, and
 * every byte read through the mount is compared with what the origin
 * holds; listings, errors as a reader sees them, the command line, and
 * mounting and unmounting (detached or not).  The read-ahead, the cache
 * under a mount, passthrough, offline operation and signals have their
 * own programs (test-readahead, test-mount-cache, test-passthrough,
 * test-offline, test-signals); the dataset and helpers: fixture-mount.h.
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
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture-mount.h"
#include "fixture.h"
#include "log.h"

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
	for (int i = 0; i < 3000; i++) {
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

START_TEST(test_origin_errors_map)
{
	static const char *const extra_lines =
	    "status/404/gone 100\nstatus/403/secret 100\n"
	    "status/500/broken 100\n";
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-errors");
	char manifest[PATH_MAX], url[256];
	/* A 500 is an outage, waited for; with --outage-wait 0 it fails
	 * after the retries, as here. */
	const char *extra[] = {"--manifest", manifest, "--outage-wait", "0",
			       NULL};

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

static Suite *mount_suite(void)
{
	Suite *s = suite_create("mount");
	const char *why;
	TCase *tc = mount_tcase("mount", &why);

	fx_tcase_add(tc, test_cli_usage, why);
	fx_tcase_add(tc, test_sizes_and_bytes, why);
	fx_tcase_add(tc, test_many_small_files, why);
	fx_tcase_add(tc, test_random_offsets, why);
	fx_tcase_add(tc, test_concurrent_readers, why);
	fx_tcase_add(tc, test_read_only, why);
	fx_tcase_add(tc, test_stats_file, why);
	fx_tcase_add(tc, test_second_mount_refused, why);
	fx_tcase_add(tc, test_unreachable_origin, why);
	fx_tcase_add(tc, test_relative_paths_after_detach, why);
	fx_tcase_add(tc, test_object_replaced_mid_read, why);
	fx_tcase_add(tc, test_origin_errors_map, why);
	fx_tcase_add(tc, test_html_listing_without_entry, why);
	fx_tcase_add(tc, test_daemonized_mount_and_umount, why);
	fx_tcase_add(tc, test_detached_mount_logs, why);
	fx_tcase_add(tc, test_wharf_dir_hidden, why);
	fx_tcase_add(tc, test_setup_errors_name_fix, why);
	fx_tcase_add(tc, test_tls_untrusted_remount,
		     why ? why
		     : fx_sh("openssl version >/dev/null 2>&1")
			 ? "no openssl command (for the origin's certificate)"
			 : NULL);
	fx_tcase_add(tc, test_unshowable_entries, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return fx_suite_run(mount_suite());
}
