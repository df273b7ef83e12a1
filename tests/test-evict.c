/*
 * evict: the cap and what keeps it: least recently used chunks go first,
 * the recency survives a remount, a full disk lowers the cap, and a
 * prune empties the cache.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fixture-store.h"
#include "text.h"

START_TEST(cap_holds)
{
	const size_t n = 64 * 1024;
	const uint64_t cap = 10 * 69632; /* ten 64 KiB chunks + headers */
	struct store *st = open_store(dir, cap);
	uint8_t *data = malloc(n);
	struct store_stats ss;
	struct chunk_key k;
	struct tally t;

	for (unsigned i = 0; i < 100; i++) {
		fill_random(data, n, i);
		key_n(&k, i);
		ck_assert_int_eq(store_put(st, &k, data, n), 0);
		store_get_stats(st, &ss);
		ck_assert_uint_le(ss.bytes_on_disk, cap);
		t = tally(dir, 0);
		ck_assert_uint_le(t.bytes, cap);
		ck_assert_uint_eq(t.bytes, ss.bytes_on_disk);
	}
	ck_assert_uint_eq(ss.chunks, 10);
	ck_assert_uint_eq(ss.evictions, 90);
	/* The newest ten are the ones left. */
	for (unsigned i = 90; i < 100; i++) {
		size_t len;

		key_n(&k, i);
		ck_assert_int_eq(store_get(st, &k, data, n, &len), 0);
	}
	/* A chunk larger than the whole cap is not cached. */
	{
		struct store *st2;

		store_close(st);
		st2 = open_store(dir, 4096);
		ck_assert_int_eq(store_put(st2, &k, data, n), -ENOSPC);
		store_close(st2);
	}
	free(data);
}
END_TEST

START_TEST(lru_order)
{
	const size_t n = 10000; /* 3 blocks each with the header */
	struct store *st = open_store(dir, 4 * 12288);
	uint8_t data[10000];
	struct chunk_key k[6];
	size_t len;

	for (unsigned i = 0; i < 4; i++) {
		fill_random(data, n, i);
		key_n(&k[i], i);
		ck_assert_int_eq(store_put(st, &k[i], data, n), 0);
	}
	/* Read 0: 1 is now the least recently used. */
	ck_assert_int_eq(store_get(st, &k[0], data, n, &len), 0);
	key_n(&k[4], 4);
	ck_assert_int_eq(store_put(st, &k[4], data, n), 0);
	ck_assert_int_eq(store_get(st, &k[1], data, n, &len), -ENOENT);
	ck_assert_int_eq(store_get(st, &k[0], data, n, &len), 0);
	ck_assert_int_eq(store_get(st, &k[2], data, n, &len), 0);
	/* Now 3 is the oldest. */
	key_n(&k[5], 5);
	ck_assert_int_eq(store_put(st, &k[5], data, n), 0);
	ck_assert_int_eq(store_get(st, &k[3], data, n, &len), -ENOENT);
	ck_assert_int_eq(store_get(st, &k[4], data, n, &len), 0);
	store_close(st);
}
END_TEST

/* A store whose reads are checked each mount (_i 1), or not. */
static struct store *open_store_capped(const char *d, uint64_t max, bool each)
{
	struct store_config cfg = {.dir = d,
				   .max_bytes = max,
				   .inline_headers = inline_hdr,
				   .check_each_mount = each};
	struct store *st = NULL;
	char *err = NULL;

	ck_assert_int_eq(store_open(&cfg, &st, &err), 0);
	free(err);
	return st;
}

/* A read's recency is kept on disk (DIR/seals, also with
 * check_each_mount: _i 1): a remount with a smaller cap evicts the chunks
 * read longest ago, not the ones written first.  The chunk read keeps
 * its file's times (a touch would break its seal). */
START_TEST(recency_survives_remount)
{
	struct stat before, after;
	const size_t n = 10000; /* 3 blocks with the header */
	struct store *st = open_store_capped(dir, 0, _i);
	uint8_t data[10000];
	struct chunk_key k;
	char path[1024];
	size_t len;

	for (unsigned i = 0; i < 4; i++) {
		struct timespec ts[2] = {{.tv_sec = 1000000 + i},
					 {.tv_sec = 1000000 + i}};

		fill_random(data, n, i);
		key_n(&k, i);
		ck_assert_int_eq(store_put(st, &k, data, n), 0);
		chunk_path(dir, &k, path, sizeof(path));
		ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
	store_close(st);
	st = open_store_capped(dir, 0, _i);
	key_n(&k, 0);
	chunk_path(dir, &k, path, sizeof(path));
	ck_assert_int_eq(stat(path, &before), 0);
	ck_assert_int_eq(store_get(st, &k, data, n, &len), 0);
	ck_assert_int_eq(stat(path, &after), 0);
	ck_assert_int_eq(after.st_ctim.tv_sec, before.st_ctim.tv_sec);
	ck_assert_int_eq(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
	store_close(st);

	st = open_store_capped(dir, 3 * 12288, _i);
	key_n(&k, 1);
	ck_assert_int_eq(store_get(st, &k, data, n, &len), -ENOENT);
	for (unsigned i = 0; i < 4; i += 1 + (i == 0)) {
		key_n(&k, i);
		ck_assert_int_eq(store_get(st, &k, data, n, &len), 0);
	}
	store_close(st);
}
END_TEST

START_TEST(disk_full)
{
	char *mnt = strdupf("%s/tiny", dir);
	const size_t n = 300 * 1024;
	uint8_t *data = malloc(n), *back = malloc(n);
	struct store_stats ss;
	struct store *st;
	struct tally t;
	int rc = 0;
	unsigned i;

	ck_assert_int_eq(fx_mkdirs(mnt), 0);
	if (fx_sh("mount -t tmpfs -o size=2m,mode=0700 wharf-test '%s' "
		  "2>/dev/null",
		  mnt)) {
		free(mnt);
		free(data);
		free(back);
		/* Not root, or no tmpfs: nothing to fill. */
		fx_skip("cannot mount a 2 MiB tmpfs to fill (it needs "
			"root)");
	}
	/* No cap asked for: the disk's room is the cap, found when a write
	 * fills it; the chunks written first make room for the later ones,
	 * none is refused. */
	st = open_store(mnt, 0);
	for (i = 0; i < 50 && rc == 0; i++) {
		struct chunk_key k;

		fill_random(data, n, i);
		key_n(&k, i);
		rc = store_put(st, &k, data, n);
	}
	ck_assert_int_eq(rc, 0);
	store_get_stats(st, &ss);
	ck_assert_uint_ge(ss.cap_lowered, 1);
	ck_assert_uint_gt(ss.evictions, 0);
	ck_assert_uint_eq(ss.writes_dropped, 0);
	ck_assert_uint_eq(count_tmp(mnt), 0);
	/* What is cached is whole, and the last chunk is. */
	t = tally(mnt, STORE_WALK_VERIFY);
	ck_assert_uint_eq(t.n, ss.chunks);
	ck_assert_uint_eq(t.bad, 0);
	for (unsigned j = i - 1; j < i; j++) {
		struct chunk_key k;
		size_t len;

		key_n(&k, j);
		ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
		fill_random(data, n, j);
		ck_assert_mem_eq(back, data, n);
	}
	store_close(st);
	ck_assert_int_eq(fx_sh("umount '%s'", mnt), 0);
	free(mnt);
	free(data);
	free(back);
}
END_TEST

START_TEST(prune_and_clear)
{
	struct store *st = open_store(dir, 0);
	uint8_t data[10000];
	struct store_stats ss;
	uint64_t chunks, bytes;
	struct chunk_key k;

	for (unsigned i = 0; i < 10; i++) {
		fill_random(data, sizeof(data), i);
		key_n(&k, i);
		ck_assert_int_eq(store_put(st, &k, data, sizeof(data)), 0);
	}
	ck_assert_int_eq(store_prune(st, 4 * 12288, &chunks, &bytes), 0);
	ck_assert_uint_eq(chunks, 6);
	ck_assert_uint_eq(bytes, 6 * 12288);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, 4);
	ck_assert_uint_eq(tally(dir, 0).n, 4);
	ck_assert_int_eq(store_prune(st, 0, &chunks, NULL), 0);
	ck_assert_uint_eq(chunks, 4);
	ck_assert_uint_eq(tally(dir, 0).n, 0);
	store_close(st);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, cap_holds);
	tcase_add_test(tc, lru_order);
	tcase_add_loop_test(tc, recency_survives_remount, 0, 2);
	tcase_add_test(tc, disk_full);
	tcase_add_test(tc, prune_and_clear);
}

int main(void)
{
	return store_fx_main("evict", add_tests);
}
