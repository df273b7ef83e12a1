/*
 * A cache on a disk that fills: a real tmpfs, mounted by the test (so as
 * root only), smaller than --cache-size.  The cap comes down to what the
 * filesystem holds (at open, and when a write finds the disk full), one
 * warning names the filesystem, eviction makes the room, the chunks used
 * last stay, the counters say what happened, and the listing snapshot is
 * kept: on a full disk the old one stays until a new one fits, and chunks
 * are evicted to make it fit.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture.h"
#include "log.h"
#include "snapshot.h"
#include "store.h"
#include "text.h"
#include "tree.h"

#define MIB (1ull << 20)
#define ID "fake://fulldisk/"
#define RECHECK_MS 100 /* a lowered cap looks this often for room */

/* The program's dir: tmpfs mounts, the mount test's work dir and the
 * origin's pid, for main to clear what a failed test left. */
static char *root;

/* ---- a tmpfs of the test's own ---- */

/* Mounts a tmpfs of mib MiB on a fresh dir under root (caller frees). */
static char *tmpfs_new(unsigned mib)
{
	char *dir = strdupf("%s/fs-XXXXXX", root), opts[32];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(opts, sizeof(opts), "size=%um", mib);
	ck_assert_msg(!mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts),
		      "mount -t tmpfs -o %s tmpfs %s: %s", opts, dir,
		      strerror(errno));
	return dir;
}

static void tmpfs_free(char *dir)
{
	if (umount2(dir, MNT_DETACH))
		fprintf(stderr, "umount %s: %s\n", dir, strerror(errno));
	free(dir);
}

/* Writes up to `bytes` to a new file at path, less when the disk fills
 * first (0: until it does).  @return the bytes written. */
static uint64_t fill(const char *path, uint64_t bytes)
{
	static char buf[1 << 16];
	uint64_t done = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	ck_assert_int_ge(fd, 0);
	memset(buf, 0x5a, sizeof(buf));
	while (!bytes || done < bytes) {
		const size_t want = !bytes || bytes - done > sizeof(buf)
					? sizeof(buf)
					: (size_t)(bytes - done);
		const ssize_t n = write(fd, buf, want);

		if (n <= 0)
			break;
		done += (uint64_t)n;
	}
	close(fd);
	return done;
}

/* ---- the store on a small tmpfs ---- */

/* Chunk i of the test's object: MiB bytes that do not compress. */
static void chunk_of(unsigned i, uint8_t *buf, struct chunk_key *key)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);

	for (size_t j = 0; j < MIB; j += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + j, &x, 8);
	}
	store_key(key, ID, "obj", "v1", 1ull << 30, 0, (uint32_t)MIB, i);
}

/* Warnings logged, and the last one. */
static unsigned warnings;
static char last_warning[1024];

static void count_warnings(enum wharf_log_level level, const char *msg,
			   void *arg)
{
	(void)arg;
	if (level > WHARF_LOG_WARN)
		return;
	warnings++;
	snprintf(last_warning, sizeof(last_warning), "%s", msg);
	fprintf(stderr, "%s\n", msg);
}

/* Opens a store in DIR/cache with --cache-size 10G, chunks stored raw. */
static struct store *store_on(const char *dir, char *cache, size_t cap)
{
	struct store_config cfg = {.max_bytes = 10ull << 30,
				   .min_saving_pct = 100,
				   .cap_recheck_ms = RECHECK_MS};
	struct store *st = NULL;
	char *err = NULL;

	snprintf(cache, cap, "%s/cache", dir);
	cfg.dir = cache;
	ck_assert_msg(store_open(&cfg, &st, &err) == 0, "%s", err);
	return st;
}

/* Puts chunks [from, to): every one must be written.  */
static void put_all(struct store *st, unsigned from, unsigned to)
{
	uint8_t *buf = malloc(MIB);
	struct chunk_key key;

	ck_assert_ptr_nonnull(buf);
	for (unsigned i = from; i < to; i++) {
		chunk_of(i, buf, &key);
		ck_assert_msg(store_put(st, &key, buf, MIB) == 0,
			      "chunk %u of %u was not cached", i, to);
	}
	free(buf);
}

/* Chunks [from, to) read back whole from the store. */
static void get_all(struct store *st, unsigned from, unsigned to)
{
	uint8_t *want = malloc(MIB), *got = malloc(MIB);
	struct chunk_key key;
	size_t len = 0;

	ck_assert_ptr_nonnull(want);
	ck_assert_ptr_nonnull(got);
	for (unsigned i = from; i < to; i++) {
		chunk_of(i, want, &key);
		ck_assert_msg(store_get(st, &key, got, MIB, &len) == 0,
			      "chunk %u, one of the last written, is gone", i);
		ck_assert_uint_eq(len, MIB);
		ck_assert(!memcmp(want, got, MIB));
	}
	free(want);
	free(got);
}

/* 48 MiB through a 16 MiB tmpfs under a 10G cap: the cap is what the
 * filesystem holds from the start, said once, and eviction keeps the
 * last chunks; no write is dropped. */
START_TEST(test_cap_fits_filesystem)
{
	char *fs = tmpfs_new(16), cache[PATH_MAX];
	struct store_stats ss;
	struct store *st;

	warnings = 0;
	log_set_func(count_warnings, NULL);
	st = store_on(fs, cache, sizeof(cache));
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.max_bytes, 10ull << 30);
	ck_assert_msg(ss.cap_bytes > 8 * MIB && ss.cap_bytes < 16 * MIB,
		      "cap %llu bytes on a 16 MiB filesystem",
		      (unsigned long long)ss.cap_bytes);
	ck_assert_uint_eq(warnings, 1);
	ck_assert_msg(strstr(last_warning, fs) &&
			  strstr(last_warning, "tmpfs") &&
			  strstr(last_warning, "--cache-size"),
		      "the warning names neither the filesystem nor the fix: "
		      "%s",
		      last_warning);

	put_all(st, 0, 48);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.writes_dropped, 0);
	ck_assert_uint_ge(ss.evictions, 32);
	ck_assert_uint_le(ss.bytes_on_disk, ss.cap_bytes);
	get_all(st, 40, 48);
	ck_assert_uint_eq(warnings, 1);
	store_close(st);
	log_set_func(NULL, NULL);
	tmpfs_free(fs);
}
END_TEST

/* Another file takes 6 MiB of the filesystem after the store opened: the
 * write that finds the disk full lowers the cap, evicts and is tried
 * again, so that no chunk is dropped and the last ones stay.  Then the
 * disk is full with nothing to evict (a chunk is dropped, and counted),
 * and room comes back (so does the cap). */
START_TEST(test_full_disk_lowers_cap)
{
	char *fs = tmpfs_new(16), cache[PATH_MAX], filler[PATH_MAX];
	struct store_stats ss;
	struct store *st;
	uint64_t cap0;

	st = store_on(fs, cache, sizeof(cache));
	store_get_stats(st, &ss);
	cap0 = ss.cap_bytes;
	ck_assert_uint_eq(ss.cap_lowered, 0);
	snprintf(filler, sizeof(filler), "%s/filler", fs);
	ck_assert_uint_eq(fill(filler, 6 * MIB), 6 * MIB);

	put_all(st, 0, 40);
	store_get_stats(st, &ss);
	ck_assert_uint_ge(ss.cap_lowered, 1);
	ck_assert_msg(ss.cap_bytes + 5 * MIB <= cap0,
		      "the cap went from %llu to %llu bytes only",
		      (unsigned long long)cap0,
		      (unsigned long long)ss.cap_bytes);
	ck_assert_uint_le(ss.bytes_on_disk, ss.cap_bytes);
	ck_assert_uint_eq(ss.writes_dropped, 0);
	get_all(st, 32, 40);

	/* Full to the last block by something else, and no chunk left to
	 * evict: the chunk is dropped, and counted. */
	ck_assert_int_eq(store_prune(st, 0, NULL, NULL), 0);
	fill(filler, 0);
	{
		const uint64_t lowered = ss.cap_lowered;
		uint8_t *buf = malloc(MIB);
		struct chunk_key key;

		ck_assert_ptr_nonnull(buf);
		chunk_of(1000, buf, &key);
		ck_assert_int_eq(store_put(st, &key, buf, MIB), -ENOSPC);
		store_get_stats(st, &ss);
		ck_assert_uint_gt(ss.cap_lowered, lowered);
		ck_assert_uint_eq(ss.writes_dropped, 1);
		ck_assert_uint_eq(ss.cap_bytes, 0);

		/* Room comes back: so does the cap, once it looks. */
		ck_assert_int_eq(unlink(filler), 0);
		usleep(2 * RECHECK_MS * 1000);
		ck_assert_int_eq(store_put(st, &key, buf, MIB), 0);
		store_get_stats(st, &ss);
		ck_assert_uint_gt(ss.cap_bytes, 8 * MIB);
		ck_assert_uint_eq(ss.writes_dropped, 1);
		free(buf);
	}
	store_close(st);
	tmpfs_free(fs);
}
END_TEST

/* Free bytes on the filesystem of dir. */
static uint64_t fs_free(const char *dir)
{
	struct statvfs sv;

	ck_assert_int_eq(statvfs(dir, &sv), 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* A floor of 4 MiB (--cache-min-free 4M) on a 16 MiB tmpfs: another file
 * takes 4 MiB while the store holds 8 (the disk is far from full), and
 * the next write finds the cap lowered and chunks evicted, so that the
 * floor is kept; a file that leaves less than the floor with the cache
 * empty gets one warning that says so. */
START_TEST(test_free_floor_kept)
{
	char *fs = tmpfs_new(16), cache[PATH_MAX], filler[PATH_MAX];
	struct store_config cfg = {.max_bytes = 10ull << 30,
				   .min_saving_pct = 100,
				   .cap_recheck_ms = RECHECK_MS,
				   .min_free = 4 * MIB,
				   .min_free_set = true};
	struct store_stats ss;
	struct store *st = NULL;
	char *err = NULL;

	snprintf(cache, sizeof(cache), "%s/cache", fs);
	cfg.dir = cache;
	ck_assert_msg(store_open(&cfg, &st, &err) == 0, "%s", err);
	put_all(st, 0, 8);
	snprintf(filler, sizeof(filler), "%s/filler", fs);
	ck_assert_uint_eq(fill(filler, 4 * MIB), 4 * MIB);
	usleep(2 * RECHECK_MS * 1000);
	put_all(st, 8, 9);
	store_get_stats(st, &ss);
	ck_assert_uint_ge(ss.cap_lowered, 1);
	ck_assert_uint_eq(ss.writes_dropped, 0);
	/* The floor, less the slack the cap moves by (an eighth). */
	ck_assert_msg(fs_free(fs) >= 4 * MIB - MIB / 2,
		      "%llu bytes free under a floor of 4 MiB",
		      (unsigned long long)fs_free(fs));
	get_all(st, 8, 9);

	/* With the cache emptied, something else leaves 2 MiB: the floor
	 * cannot be kept, and that is said once. */
	warnings = 0;
	last_warning[0] = '\0';
	log_set_func(count_warnings, NULL);
	ck_assert_int_eq(store_prune(st, 0, NULL, NULL), 0);
	ck_assert_int_eq(unlink(filler), 0);
	fill(filler, fs_free(fs) - 2 * MIB);
	usleep(2 * RECHECK_MS * 1000);
	{
		uint8_t *buf = malloc(MIB);
		struct chunk_key key;

		ck_assert_ptr_nonnull(buf);
		chunk_of(1000, buf, &key);
		(void)store_put(st, &key, buf, MIB);
		usleep(2 * RECHECK_MS * 1000);
		(void)store_put(st, &key, buf, MIB);
		free(buf);
	}
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.bytes_on_disk, 0);
	ck_assert_msg(strstr(last_warning, "--cache-min-free"),
		      "no warning names the floor: '%s' (%u warnings)",
		      last_warning, warnings);
	log_set_func(NULL, NULL);
	store_close(st);
	tmpfs_free(fs);
}
END_TEST

/* ---- the snapshot on a full disk ---- */

static int fake_list(struct source *src, const char *dir, source_list_cb cb,
		     void *arg)
{
	struct source_object o = {.name = "f", .size = 3, .version = "v"};
	struct source_object d = {.name = "d", .is_dir = true};
	int rc;

	(void)src;
	if (*dir && strcmp(dir, "d"))
		return -ENOENT;
	rc = cb(arg, &o);
	return rc || *dir ? rc : cb(arg, &d);
}

static void fake_destroy(struct source *src)
{
	(void)src;
}

static const struct source_ops fake_ops = {
    .scheme = "fake", .list_dir = fake_list, .destroy = fake_destroy};
static struct source fake = {.ops = &fake_ops, .id = ID};

/* How many directories the snapshot at path holds (it must load). */
static uint64_t snapshot_dirs(const char *path)
{
	struct snapshot_info si;
	struct snapshot *s = NULL;
	char *err = NULL;

	ck_assert_msg(snapshot_load(path, ID, &s, &err) == 0, "%s", err);
	snapshot_info(s, &si);
	snapshot_free(s);
	return si.dirs;
}

/* A disk full to its last block: a save without the store fails and
 * leaves the old snapshot whole; with it, chunks are evicted to make
 * room and the new one is saved. */
START_TEST(test_snapshot_on_full_disk)
{
	char *fs = tmpfs_new(16), cache[PATH_MAX], filler[PATH_MAX];
	struct store_stats before, after;
	struct tree_attr a;
	struct store *st;
	struct tree *t;
	char *path, *err = NULL;
	uint64_t ino;

	st = store_on(fs, cache, sizeof(cache));
	path = store_snapshot_path(cache, ID);
	ck_assert_int_eq(tree_new(&fake, &t), 0);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "f", &a), 0);
	ck_assert_int_eq(snapshot_save(path, ID, t, NULL, st, &err), 0);
	ck_assert_uint_eq(snapshot_dirs(path), 1);

	put_all(st, 0, 20);
	snprintf(filler, sizeof(filler), "%s/filler", fs);
	ck_assert_uint_gt(fill(filler, 0), 0);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "d", &a), 0);
	ino = a.ino;
	ck_assert_int_eq(tree_lookup(t, ino, "f", &a), 0);

	ck_assert_int_eq(snapshot_save(path, ID, t, NULL, NULL, &err), -ENOSPC);
	free(err);
	err = NULL;
	ck_assert_uint_eq(snapshot_dirs(path), 1);

	store_get_stats(st, &before);
	ck_assert_msg(snapshot_save(path, ID, t, NULL, st, &err) == 0, "%s",
		      err);
	ck_assert_uint_eq(snapshot_dirs(path), 2);
	store_get_stats(st, &after);
	ck_assert_uint_gt(after.evictions, before.evictions);
	ck_assert_uint_gt(after.cap_lowered, before.cap_lowered);

	tree_free(t);
	free(path);
	store_close(st);
	tmpfs_free(fs);
}
END_TEST

/* ---- a mount whose cache fills its disk ---- */

#define N_FILES 16
#define FILE_SIZE (8 * MIB)
#define KEPT 3 /* the files read last, which the cache must hold */

static uint32_t seed_of(int i)
{
	return 0xf111d15cu + (uint32_t)i;
}

/* Reads file i through mnt chunk by chunk, comparing it with the
 * origin's copy in data.  @return how many chunks it read (a chunk that
 * fails to read is one the cache lacks); a byte that differs fails the
 * test. */
static unsigned read_file(const char *mnt, const char *data, int i)
{
	char path[PATH_MAX], want_path[PATH_MAX];
	uint8_t *buf = malloc(MIB), *want = malloc(MIB);
	unsigned got = 0;
	int fd, wfd;

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(want);
	snprintf(path, sizeof(path), "%s/s%02d", mnt, i);
	snprintf(want_path, sizeof(want_path), "%s/s%02d", data, i);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	wfd = open(want_path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(wfd, 0);
	for (uint64_t off = 0; off < FILE_SIZE; off += MIB) {
		const ssize_t n = pread(fd, buf, MIB, (off_t)off);

		if (n < 0 && errno == EIO)
			continue;
		ck_assert_msg(n == (ssize_t)MIB, "%s at %llu: %s", path,
			      (unsigned long long)off,
			      n < 0 ? strerror(errno) : "short read");
		ck_assert_int_eq(pread(wfd, want, MIB, (off_t)off), MIB);
		ck_assert_msg(!memcmp(buf, want, MIB),
			      "%s: bytes %llu+1M differ", path,
			      (unsigned long long)off);
		got++;
	}
	close(fd);
	close(wfd);
	free(buf);
	free(want);
	return got;
}

/* How many lines of file path hold s. */
static int lines_with(const char *path, const char *s)
{
	return fx_sh("exit $(grep -c -F -e '%s' '%s')", s, path);
}

/*
 * The reproduction, smaller: 128 MiB read through a mount whose
 * cache is on a 64 MiB tmpfs (--cache-size left at 10G), a quarter of it
 * taken by another file once mounted.  Then a remount --offline: the
 * listing snapshot must be there, and the files read last must come from
 * the disk, the origin not asked.  (Not all of them: read-ahead stores
 * chunks ahead of their reads, and the store ranks them by that.)
 */
START_TEST(test_mount_on_full_disk)
{
	static const char *const extra[] = {"--memory-cache", "8M", NULL};
	static const char *const offline[] = {"--memory-cache", "8M",
					      "--offline", NULL};
	char *work = strdupf("%s/work", root), *data, *fs;
	char url[256], path[PATH_MAX];
	struct fx_mount m;
	unsigned kept = 0;
	pid_t origin;
	long long cap, lowered, dropped;

	data = strdupf("%s/data", root);
	ck_assert_int_eq(fx_mkdirs(work), 0);
	ck_assert_int_eq(fx_mkdirs(data), 0);
	for (int i = 0; i < N_FILES; i++) {
		snprintf(path, sizeof(path), "%s/s%02d", data, i);
		ck_assert_int_eq(fx_write_file(path, FILE_SIZE, seed_of(i)),
				 0);
	}
	origin = fx_origin_start(data, NULL, work, "origin", url, sizeof(url));
	ck_assert_int_gt(origin, 0);
	ck_assert_int_eq(fx_sh("echo %d > '%s/origin.pid'", (int)origin, work),
			 0);
	fs = tmpfs_new(64);
	fx_mount_init(&m, work, "mnt");
	snprintf(m.cache, sizeof(m.cache), "%s/cache", fs);
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, extra), 0);
	snprintf(path, sizeof(path), "the filesystem on %s (tmpfs", fs);
	ck_assert_int_eq(lines_with(m.log, path), 1);
	snprintf(path, sizeof(path), "%s/filler", fs);
	ck_assert_uint_eq(fill(path, 16 * MIB), 16 * MIB);

	for (int i = 0; i < N_FILES; i++)
		ck_assert_uint_eq(read_file(m.dir, data, i), FILE_SIZE / MIB);
	cap = fx_mount_stat(m.dir, "disk_cache", "cap_bytes");
	lowered = fx_mount_stat(m.dir, "disk_cache", "cap_lowered");
	dropped = fx_mount_stat(m.dir, "disk_cache", "writes_dropped");
	fprintf(stderr, "cap %lld bytes, lowered %lld times, %lld dropped\n",
		cap, lowered, dropped);
	/* At most what the disk holds beside the filler, give or take the
	 * chunk writes in flight when it filled: they count as the store's
	 * (they land or are dropped), so the cap may stand up to two 4 MiB
	 * chunks above it until the next full disk lowers it again (seen
	 * once: 49.9 MiB for 48). */
	ck_assert_int_le(cap, (long long)(64 - 16 + 8) * (long long)MIB);
	ck_assert_int_ge(lowered, 1);
	ck_assert_int_gt(fx_mount_stat(m.dir, "disk_cache", "evictions"), 0);
	ck_assert_int_le(fx_mount_stat(m.dir, "disk_cache", "bytes_on_disk"),
			 cap);
	/* Writes dropped are counted, and few: the first full disk's. */
	ck_assert_int_lt(dropped, N_FILES);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	/* Still the one warning; and no pack promised that cannot be. */
	ck_assert_int_eq(lines_with(m.log, "cannot hold --cache-size"), 1);
	ck_assert_int_eq(lines_with(m.log, "left without a pack"), 0);

	/* The snapshot lists the files; the disk holds most of the last. */
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, offline), 0);
	for (int i = N_FILES - KEPT; i < N_FILES; i++)
		kept += read_file(m.dir, data, i);
	fprintf(stderr, "%u chunks of the last %d files read offline\n", kept,
		KEPT);
	ck_assert_uint_ge(kept, KEPT * FILE_SIZE / MIB * 3 / 4);
	ck_assert_int_gt(fx_mount_stat(m.dir, "disk_cache", "hits"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin", "requests"), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	fx_stop(origin, 5000);
	tmpfs_free(fs);
	free(data);
	free(work);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fulldisk");
	TCase *tc = tcase_create("store");
	TCase *mt = tcase_create("mount");
	const char *why = geteuid() ? "needs root to mount a tmpfs" : NULL;
	const char *fuse = why ? why : fx_fuse_missing();

	tcase_set_timeout(tc, 60);
	fx_tcase_add(tc, test_cap_fits_filesystem, why);
	fx_tcase_add(tc, test_full_disk_lowers_cap, why);
	fx_tcase_add(tc, test_free_floor_kept, why);
	fx_tcase_add(tc, test_snapshot_on_full_disk, why);
	suite_add_tcase(s, tc);
	tcase_set_timeout(mt, 240);
	fx_tcase_add(mt, test_mount_on_full_disk, fuse);
	suite_add_tcase(s, mt);
	return s;
}

int main(void)
{
	SRunner *sr;
	char *work;
	int failed;

	root = fx_tmpdir("fulldisk");
	work = strdupf("%s/work", root);
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	/* What a failed test left: its mount, origin and tmpfs. */
	if (fx_sh("test -e '%s/mounts'", work) == 0)
		fx_unmount_leftovers(work);
	fx_sh("p=$(cat '%s/origin.pid' 2>/dev/null) && kill $p 2>/dev/null; "
	      "for m in '%s'/fs-*; do mountpoint -q \"$m\" && "
	      "umount -l \"$m\"; done; true",
	      work, root);
	fx_rmtree(root);
	free(work);
	free(root);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
