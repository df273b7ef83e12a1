/*
 * A mount's read-ahead, end to end: a walk of a directory in name order
 * queues the files after it (over empty files too), a sequential reader
 * of a large file has it go on into the next file, and the chunks it
 * read are let go once the kernel holds them.  Its own program: the read
 * path's planning (fs/read) is what it tests, not the mount's front.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture-mount.h"
#include "fixture.h"

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

/*
 * Waits for the number key of the stats' section (NULL: the first found)
 * to reach want: up to 60 s, a bound that only stops a hang (a loaded
 * machine's pool may lag for seconds).  @return its last value.
 */
static long long stat_reaches(const char *dir, const char *section,
			      const char *key, long long want)
{
	long long v = fx_mount_stat(dir, section, key);

	for (int i = 0; i < 3000 && v < want; i++) {
		usleep(20000);
		v = fx_mount_stat(dir, section, key);
	}
	return v;
}

/*
 * Waits until the store holds as many chunks as the mount fetched (up to
 * 60 s, a bound that only stops a hang).  @return the chunks stored, and
 * in *fetched those fetched, both as last read.
 */
static long long stored_all_fetched(const char *dir, long long *fetched)
{
	long long stored = 0;

	for (int i = 0; i < 3000; i++) {
		*fetched = fx_mount_stat(dir, NULL, "chunks_fetched");
		stored = fx_mount_stat(dir, "disk_cache", "chunks");
		if (stored >= *fetched)
			break;
		usleep(20000);
	}
	return stored;
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
	long long stored, fetched;
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
	/* Every chunk fetched is stored before the unmount (which drops what
	 * is still queued): the 40 files read out of order, the 40 in order
	 * and those of the 32 after f0139 that the pool loaded (a loaded
	 * machine's pool may drop some, or fail them: those are neither
	 * fetched nor stored; a chunk the counters missed as fetched may
	 * be one over).  A pool that never stores its loads stops short of
	 * what it fetched. */
	stored = stored_all_fetched(m.dir, &fetched);
	ck_assert_msg(stored >= fetched && stored >= 80,
		      "%lld of the %lld chunks fetched were stored "
		      "(read-ahead loads not written to disk?)",
		      stored, fetched);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* After a remount the same walk finds the files cached: each reader
	 * loads its own, and no pool thread is woken for them (but for any
	 * of the 112 the first mount's pool dropped). */
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	check_numbered(m.dir, "many/f", 100, 140, small_size);
	ck_assert_msg(readahead_queued(m.dir) <= 112 - stored,
		      "%lld queued after the remount; %lld of 112 were stored",
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
	ck_assert_int_eq(stat_reaches(m.dir, NULL, "chunks_fetched", 51), 51);
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
	ck_assert_int_eq(stat_reaches(m.dir, NULL, "chunks_fetched", 51), 51);
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

static Suite *readahead_suite(void)
{
	Suite *s = suite_create("readahead");
	const char *why;
	TCase *tc = mount_tcase("readahead", &why);

	fx_tcase_add(tc, test_directory_readahead, why);
	fx_tcase_add(tc, test_readahead_crosses_into_next_file, why);
	fx_tcase_add(tc, test_read_chunks_let_go, why);
	fx_tcase_add(tc, test_directory_readahead_over_empty_files, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return fx_suite_run(readahead_suite());
}
