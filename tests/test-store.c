/*
 * store: reading and writing chunks through store.h, on real files: round
 * trips, copies and mappings, raw files handed to the kernel, what a
 * reopen finds, threads at once, files gone behind the store's back.
 * The store's other concerns have test programs of their own (chunkfile,
 * cachedir, evict, pack, seal, cmd-cache); fixture-store.c is theirs.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture-store.h"

START_TEST(round_trip)
{
	static const size_t sizes[] = {0, 1, 4 * MiB, 4 * MiB - 1, 100000};
	struct store *st;
	uint8_t *buf = malloc(4 * MiB);
	char path[1024];
	struct chunk_key k;
	unsigned n = 0;

	inline_hdr = _i;
	st = open_store(dir, 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const size_t sz = sizes[i];

		/* Random data: stored raw, header + bytes. */
		fill_random(buf, sz, (uint32_t)i);
		key_n(&k, n++);
		put_get(st, &k, buf, sz);
		chunk_path(dir, &k, path, sizeof(path));
		ck_assert_int_eq(hdr_in_xattr(path), !inline_hdr);
		ck_assert_int_eq(file_size(path), payload_off(path) + (off_t)sz);

		/* Text: stored compressed. */
		fill_text(buf, sz, (uint32_t)i);
		key_n(&k, n++);
		put_get(st, &k, buf, sz);
		chunk_path(dir, &k, path, sizeof(path));
		if (sz >= 4096)
			ck_assert_int_lt(file_size(path), (off_t)(sz / 2));
	}
	store_close(st);
	free(buf);
}
END_TEST

/*
 * A chunk of 64 KiB to 256 KiB is judged from a 16 KiB sample of its
 * start: one whose start does not compress is stored raw, whatever
 * follows (the trade-off for a cheap decision on incompressible small
 * objects); one that compresses throughout is stored compressed; a
 * smaller chunk is judged whole.
 */
START_TEST(small_chunk_sampled)
{
	static const size_t sizes[] = {128 * 1024, 64 * 1024, 60 * 1024};
	struct store *st = open_store(dir, 0);
	uint8_t buf[128 * 1024];
	char path[1024];
	struct chunk_key k;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const size_t n = sizes[i];

		fill_random(buf, 16 * 1024, 7);
		fill_text(buf + 16 * 1024, n - 16 * 1024, 7);
		key_n(&k, 2 * i);
		put_get(st, &k, buf, n);
		chunk_path(dir, &k, path, sizeof(path));
		if (n >= 64 * 1024)
			ck_assert_int_eq(file_size(path),
					 payload_off(path) + (off_t)n);
		else
			ck_assert_int_lt(file_size(path), (off_t)(n / 2));

		fill_text(buf, n, 8);
		key_n(&k, 2 * i + 1);
		put_get(st, &k, buf, n);
		chunk_path(dir, &k, path, sizeof(path));
		ck_assert_int_lt(file_size(path), (off_t)(n / 2));
	}
	store_close(st);
}
END_TEST

/* A buffer too small for the chunk is refused without harm. */
START_TEST(small_buffer)
{
	struct store *st = open_store(dir, 0);
	uint8_t data[5000], back[100];
	struct chunk_key k;
	size_t len;

	fill_random(data, sizeof(data), 1);
	key_n(&k, 1);
	ck_assert_int_eq(store_put(st, &k, data, sizeof(data)), 0);
	ck_assert_int_eq(store_get(st, &k, back, sizeof(back), &len),
			 -EOVERFLOW);
	put_get(st, &k, data, sizeof(data));
	store_close(st);
}
END_TEST

/* store_open_raw: a raw chunk's file holds the chunk's bytes alone, and
 * is handed out verified; a compressed chunk, or a file that starts with
 * its header, says -ENOTSUP; a damaged one is refused and removed.
 * store_raw_unchanged: true for the file last checked only, not once
 * written to or removed. */
START_TEST(open_raw)
{
	struct store *st = open_store(dir, 0);
	const size_t n = 200000;
	uint8_t *data = malloc(n), *back = malloc(n + 1);
	struct store_file_id checked = {0}, none = {0};
	struct timespec old_mtime[2];
	struct chunk_key k;
	struct stat sb;
	char path[1024];
	size_t len = 0;
	int fd = -1;

	fill_random(data, n, 33);
	key_n(&k, 1);
	ck_assert_int_eq(store_open_raw(st, &k, n, &checked, &fd, &len), -ENOENT);
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	ck_assert_int_eq(store_open_raw(st, &k, n - 1, &checked, &fd, &len),
			 -EOVERFLOW);
	ck_assert_int_eq(store_open_raw(st, &k, n, &checked, &fd, &len), 0);
	ck_assert_uint_eq(len, n);
	ck_assert_int_eq(pread(fd, back, n + 1, 0), (ssize_t)n);
	ck_assert_mem_eq(back, data, n);
	ck_assert_int_eq(close(fd), 0);
	chunk_path(dir, &k, path, sizeof(path));
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq(checked.ino, sb.st_ino);
	ck_assert_int_eq(store_open_raw(st, &k, n, &checked, &fd, &len), 0);
	ck_assert_int_eq(close(fd), 0);
	/* The very file checked, for a backing file kept registered. */
	ck_assert(store_raw_unchanged(st, &k, &checked));
	ck_assert(!store_raw_unchanged(st, &k, &none));

	/* Damaged in place (a new mtime): checked again, never handed out,
	 * though this caller checked that file before. */
	old_mtime[0] = sb.st_atim;
	old_mtime[1] = sb.st_mtim;
	flip_byte(path, 777, 0x01);
	ck_assert_int_eq(stat(path, &sb), 0);
	if (sb.st_mtim.tv_sec == old_mtime[1].tv_sec &&
	    sb.st_mtim.tv_nsec == old_mtime[1].tv_nsec) {
		/* A coarse clock: make the change show. */
		old_mtime[1].tv_sec -= 10;
		ck_assert_int_eq(utimensat(AT_FDCWD, path, old_mtime, 0), 0);
	}
	ck_assert(!store_raw_unchanged(st, &k, &checked));
	ck_assert_int_eq(store_open_raw(st, &k, n, &checked, &fd, &len),
			 -EBADMSG);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert(!store_raw_unchanged(st, &k, &checked));
	ck_assert_int_eq(store_open_raw(st, &k, n, &none, &fd, &len),
			 -ENOENT);

	fill_text(data, n, 33);
	key_n(&k, 2);
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	ck_assert_int_eq(store_open_raw(st, &k, n, &checked, &fd, &len), -ENOTSUP);
	store_close(st);

	inline_hdr = true;
	st = open_store(dir, 0);
	fill_random(data, n, 34);
	key_n(&k, 3);
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	ck_assert_int_eq(store_open_raw(st, &k, n, &checked, &fd, &len), -ENOTSUP);
	/* ... and is still served the other ways. */
	ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
	ck_assert_mem_eq(back, data, n);
	store_close(st);
	free(data);
	free(back);
}
END_TEST

/* store_map: a raw chunk is mapped and verified in place, and stays
 * readable after its file is evicted; a compressed one says -ENOTSUP; a
 * damaged one is refused and removed like store_get does. */
START_TEST(mapped)
{
	struct store *st;
	const size_t n = 300000;
	uint8_t *data = malloc(n), *back = malloc(n);
	struct store_stats ss;
	struct store_map m;
	struct chunk_key k;
	char path[1024];
	size_t len = 0;

	inline_hdr = _i;
	st = open_store(dir, 0);
	fill_random(data, n, 21);
	key_n(&k, 1);
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	ck_assert_int_eq(store_map(st, &k, n - 1, &m, &len), -EOVERFLOW);
	ck_assert_int_eq(store_map(st, &k, n, &m, &len), 0);
	ck_assert_uint_eq(len, n);
	chunk_path(dir, &k, path, sizeof(path));
	ck_assert_uint_eq(m.map_len, (size_t)payload_off(path) + n);
	ck_assert_ptr_eq(m.data, (uint8_t *)m.map + payload_off(path));
	chunk_path(dir, &k, path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0); /* as eviction does */
	ck_assert_mem_eq(m.data, data, n);
	ck_assert_int_eq(munmap(m.map, m.map_len), 0);

	fill_text(data, n, 21);
	key_n(&k, 2);
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	ck_assert_int_eq(store_map(st, &k, n, &m, &len), -ENOTSUP);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
	ck_assert_mem_eq(back, data, n);

	fill_random(data, n, 22);
	key_n(&k, 3);
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	chunk_path(dir, &k, path, sizeof(path));
	flip_byte(path, payload_off(path) + 4321, 0x10);
	ck_assert_int_eq(store_map(st, &k, n, &m, &len), -EBADMSG);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(store_map(st, &k, n, &m, &len), -ENOENT);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.corrupt, 1);
	store_close(st);
	free(data);
	free(back);
}
END_TEST

/* min_saving_pct 100 (`--zstd-level 0`): text that zstd would shrink is
 * stored raw, so it is served from a mapping of its file. */
START_TEST(always_raw)
{
	struct store_config cfg = {
	    .dir = dir, .min_saving_pct = 100, .inline_headers = _i};
	struct store *st = NULL;
	const size_t n = 300000;
	uint8_t *data = malloc(n);
	struct store_map m;
	struct chunk_key k;
	char path[1024], *err = NULL;
	size_t len = 0;

	ck_assert_int_eq(store_open(&cfg, &st, &err), 0);
	fill_text(data, n, 5);
	key_n(&k, 1);
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	chunk_path(dir, &k, path, sizeof(path));
	ck_assert_int_eq(file_size(path), payload_off(path) + (off_t)n);
	ck_assert_int_eq(store_map(st, &k, n, &m, &len), 0);
	ck_assert_uint_eq(len, n);
	ck_assert_mem_eq(m.data, data, n);
	ck_assert_int_eq(munmap(m.map, m.map_len), 0);
	store_close(st);
	free(data);
}
END_TEST

START_TEST(persistence)
{
	const size_t n = 20000; /* 5 blocks with the header */
	struct store *st = open_store(dir, 0);
	uint8_t data[20000], back[20000];
	struct store_stats ss;
	struct chunk_key k;
	char path[1024], tmp[1100];
	size_t len;

	for (unsigned i = 0; i < 8; i++) {
		struct timespec ts[2] = {{.tv_sec = 1000000 + i},
					 {.tv_sec = 1000000 + i}};

		fill_text(data, n, i);
		key_n(&k, i);
		ck_assert_int_eq(store_put(st, &k, data, n), 0);
		/* Used in the order 0..7, so 7 is the most recent. */
		chunk_path(dir, &k, path, sizeof(path));
		ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
	/* A crash left a temp file behind: the next open removes it. */
	snprintf(tmp, sizeof(tmp), "%.*s.tmp.x.1.2",
		 (int)(strrchr(path, '/') - path + 1), path);
	ck_assert_int_eq(fx_write_file(tmp, 100, 1), 0);
	store_close(st);

	st = open_store(dir, 0);
	ck_assert_int_eq(access(tmp, F_OK), -1);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, 8);
	ck_assert_uint_eq(ss.bytes_raw, 8 * n);
	for (unsigned i = 0; i < 8; i++) {
		fill_text(data, n, i);
		key_n(&k, i);
		ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
		ck_assert_mem_eq(back, data, n);
	}
	store_close(st);

	/* Reopened with a smaller cap: the least recently used go. */
	{
		struct timespec ts[2] = {{.tv_sec = 2000000},
					 {.tv_sec = 2000000}};

		for (unsigned i = 0; i < 8; i++) {
			key_n(&k, i);
			chunk_path(dir, &k, path, sizeof(path));
			ts[0].tv_sec = ts[1].tv_sec = 2000000 + i;
			ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
		}
	}
	st = open_store(dir, 3 * 4096 * 2);
	store_get_stats(st, &ss);
	ck_assert_uint_le(ss.bytes_on_disk, 3 * 4096 * 2);
	ck_assert_uint_le(tally(dir, 0).bytes, 3 * 4096 * 2);
	key_n(&k, 7);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
	key_n(&k, 0);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), -ENOENT);
	store_close(st);
}
END_TEST

/* Threads put and get overlapping keys under a cap that forces eviction;
 * every get sees either the exact chunk or nothing. */
#define NKEYS 24
#define CSIZE 20000
static struct store *shared;
static uint64_t bad_reads;

/* Odd keys compress, even ones do not: both paths run at once. */
static void fill_kind(uint8_t *p, size_t n, unsigned k)
{
	if (k % 2)
		fill_text(p, n, k);
	else
		fill_random(p, n, k);
}

static void *hammer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	uint8_t *data = malloc(CSIZE), *back = malloc(CSIZE);

	for (unsigned op = 0; op < 400; op++) {
		const unsigned k = (unsigned)rand_r(&seed) % NKEYS;
		const size_t n = CSIZE - k * 100;
		struct chunk_key key;
		size_t len;
		int rc;

		key_n(&key, k);
		if (rand_r(&seed) % 2) {
			fill_kind(data, n, k);
			rc = store_put(shared, &key, data, n);
			/* -ENOSPC: the room is reserved by other puts. */
			if (rc && rc != -ENOSPC)
				__atomic_fetch_add(&bad_reads, 1,
						   __ATOMIC_RELAXED);
			continue;
		}
		rc = store_get(shared, &key, back, CSIZE, &len);
		if (rc == -ENOENT)
			continue;
		fill_kind(data, n, k);
		if (rc || len != n || memcmp(back, data, n))
			__atomic_fetch_add(&bad_reads, 1, __ATOMIC_RELAXED);
	}
	free(data);
	free(back);
	return NULL;
}

START_TEST(concurrency)
{
	const uint64_t cap = 12 * 20480;
	pthread_t th[8];
	struct store_stats ss;
	struct tally t;

	shared = open_store(dir, cap);
	for (uintptr_t i = 0; i < 8; i++)
		ck_assert_int_eq(
		    pthread_create(&th[i], NULL, hammer, (void *)(i + 1)), 0);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_eq(bad_reads, 0);
	store_get_stats(shared, &ss);
	ck_assert_uint_le(ss.bytes_on_disk, cap);
	ck_assert_uint_gt(ss.evictions, 0);
	ck_assert_uint_gt(ss.hits, 0);
	t = tally(dir, STORE_WALK_VERIFY);
	ck_assert_uint_eq(t.bad, 0);
	ck_assert_uint_eq(t.bytes, ss.bytes_on_disk);
	ck_assert_uint_eq(t.n, ss.chunks);
	ck_assert_uint_eq(count_tmp(dir), 0);
	store_close(shared);
}
END_TEST

/*
 * A chunk file or a pack removed behind the store's back while it is open
 * is forgotten at its next read and counted (vanished): no loss goes
 * uncounted.  An eviction is not counted there.
 */
START_TEST(vanished_counted)
{
	struct store *st = open_store(dir, 0);
	uint8_t *data = malloc(PSIZE), *back = malloc(PCS);
	struct store_file_id checked = {0};
	struct chunk_key k[PN], one;
	struct store_stats ss;
	char path[1024];
	size_t len;
	int fd = -1;

	fill_random(data, PSIZE, 61);
	obj_keys(k, "/data/vanish.bin");
	put_object(st, k, data);
	object_reads(st, k, data, &checked);
	key_n(&one, 3);
	ck_assert_int_eq(store_put(st, &one, data, PCS), 0);
	chunk_path(dir, &one, path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(store_get(st, &one, back, PCS, &len), -ENOENT);
	ck_assert(!store_has(st, &one));
	pack_path(dir, &k[0], ".pack", path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(
	    store_open_object(st, k, PN, PCS, PSIZE, &checked, &fd), -ENOENT);
	for (unsigned i = 0; i < PN; i++)
		ck_assert(!store_has(st, &k[i]));
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.vanished, 2);
	ck_assert_uint_eq(ss.corrupt, 0);
	/* Gone by eviction: not vanished. */
	ck_assert_int_eq(store_put(st, &one, data, PCS), 0);
	ck_assert_int_eq(store_prune(st, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_get(st, &one, back, PCS, &len), -ENOENT);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.vanished, 2);
	store_close(st);
	free(data);
	free(back);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_loop_test(tc, round_trip, 0, 2);
	tcase_add_test(tc, small_buffer);
	tcase_add_test(tc, small_chunk_sampled);
	tcase_add_loop_test(tc, mapped, 0, 2);
	tcase_add_test(tc, open_raw);
	tcase_add_loop_test(tc, always_raw, 0, 2);
	tcase_add_test(tc, persistence);
	tcase_add_test(tc, concurrency);
	tcase_add_test(tc, vanished_counted);
}

int main(void)
{
	return store_fx_main("store", add_tests);
}
