/*
 * FUSE passthrough end to end: the kernel reads cached chunk files and
 * packs itself, their backing files kept and let go, damaged ones never
 * served; the automatic mode.  Its own program: it needs root on Linux
 * 6.9 or later (elsewhere each test prints its SKIP line).
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture-mount.h"
#include "fixture.h"

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

/* Waits up to 60 s (a bound that only stops a hang) for mount mnt's
 * cache to hold n packs.  @return 0 or -1. */
static int wait_packs(const char *mnt, int n)
{
	for (int i = 0; i < 1200; i++) {
		if (fx_mount_stat(mnt, "disk_cache", "packs") == n)
			return 0;
		usleep(50000);
	}
	return -1;
}

/* The backing files a mount holds drop as the kernel's releases (sent
 * after close returns) come in: waits up to 60 s (a bound that only stops
 * a hang) for want of them.  @return the last count. */
static long long backing_files_settled(const char *dir, long long want)
{
	long long v = -1;

	for (int i = 0; i < 3000 && v != want; i++) {
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
	long long opens, handed;

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
	/* Many opens of one file: its one backing file each time, and its
	 * size counted as handed to the kernel each time (the mount serves
	 * none of those reads). */
	opens = fx_mount_stat(m.dir, NULL, "opens");
	handed = fx_mount_stat(m.dir, "passthrough", "bytes");
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(check_file(m.dir, "many/f0003", small_size(3)),
				 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, NULL, "opens"), opens + 50);
	ck_assert_int_eq(fx_mount_stat(m.dir, "passthrough", "bytes"),
			 handed + 50 * (long long)small_size(3));
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
	for (int i = 0; i < 3000; i++) {
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

static Suite *passthrough_suite(void)
{
	Suite *s = suite_create("passthrough");
	const char *why;
	TCase *tc = mount_tcase("passthrough", &why);

	fx_tcase_add(tc, test_passthrough, why);
	fx_tcase_add(tc, test_passthrough_auto, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return fx_suite_run(passthrough_suite());
}
