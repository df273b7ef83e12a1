/*
 * seal: a later open trusts a file a check found good (DIR/seals), and
 * never one changed since: chunk files and packs, seals too young to
 * vouch, an older seal file, reloads within one mount.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "fixture-store.h"

/* A seal vouches for a file only once its ctime's tick has passed (a
 * tenth of a second: store_seal.c); the tests wait that long before the
 * store that seals it closes. */
#define SEAL_SETTLE_US 150000

static struct store *open_store_each(const char *d, bool check_each_mount)
{
	struct store_config cfg = {.dir = d,
				   .check_each_mount = check_each_mount};
	struct store *st = NULL;
	char *err = NULL;

	ck_assert_int_eq(store_open(&cfg, &st, &err), 0);
	free(err);
	return st;
}

/* The store's seal counters are these. */
static void seal_stats(struct store *st, uint64_t sealed, uint64_t checked)
{
	struct store_stats ss;

	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.sealed, sealed);
	ck_assert_uint_eq(ss.checked_bytes, checked);
}

/* Chunk k, damaged, is caught at its read from st (closed then), no seal
 * trusted. */
static void damage_caught(struct store *st, const struct chunk_key *k,
			  uint8_t *back, size_t n)
{
	struct store_stats ss;
	size_t len;

	ck_assert_int_eq(store_get(st, k, back, n, &len), -EBADMSG);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.corrupt, 1);
	ck_assert_uint_eq(ss.sealed, 0);
	store_close(st);
}

/* Sets path's atime and mtime back to those of sb. */
static void times_back(const char *path, const struct stat *sb)
{
	const struct timespec ts[2] = {sb->st_atim, sb->st_mtim};

	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/*
 * Changes file path between two opens of the store, keeping its size and
 * times where it can, as a scrub that trusted size and mtime alone would
 * miss: 1 a byte flipped (times set back by utimensat), 2 cut short and
 * grown back with zeros, 3 replaced by a copy with a byte flipped (its
 * xattr copied), 4 a byte flipped and `touch -d` back to the old mtime.
 */
static void seal_damage(const char *path, off_t off, int how)
{
	char tmp[1100];
	uint8_t h[HDR];
	struct stat sb;
	ssize_t hn;

	ck_assert_int_eq(stat(path, &sb), 0);
	switch (how) {
	case 1:
		flip_byte(path, off, 0x10);
		break;
	case 2:
		ck_assert_int_eq(truncate(path, off), 0);
		ck_assert_int_eq(truncate(path, sb.st_size), 0);
		break;
	case 3:
		snprintf(tmp, sizeof(tmp), "%s.new", path);
		fx_sh("cp '%s' '%s'", path, tmp);
		hn = getxattr(path, HDR_XATTR, h, sizeof(h));
		if (hn > 0)
			ck_assert_int_eq(setxattr(tmp, HDR_XATTR, h, hn, 0), 0);
		flip_byte(tmp, off, 0x10);
		times_back(tmp, &sb);
		ck_assert_int_eq(rename(tmp, path), 0);
		return;
	case 4:
		flip_byte(path, off, 0x10);
		ck_assert_int_eq(fx_sh("touch -m -d @%lld.%09ld '%s'",
				       (long long)sb.st_mtim.tv_sec,
				       sb.st_mtim.tv_nsec, path),
				 0);
		ck_assert_int_eq(stat(path, &sb), 0);
		return;
	}
	times_back(path, &sb);
}

/*
 * A chunk file sealed by one open of the store is read by the next
 * without a hash, copied or mapped, while it is the file that was
 * sealed; changed in any way between the two (seal_damage), it is checked
 * and caught.  With check_each_mount no seal is trusted.
 */
START_TEST(sealed_chunks)
{
	const size_t n = 256 * 1024;
	uint8_t *data = malloc(n), *back = malloc(n);
	struct store_map m;
	struct chunk_key k[2];
	char path[1024];
	struct store *st;
	size_t len;

	fill_random(data, n, 31);
	key_n(&k[0], 1);
	key_n(&k[1], 2);
	st = open_store_each(dir, false);
	ck_assert_int_eq(store_put(st, &k[0], data, n), 0);
	fill_text(data + n / 2, n / 2, 5); /* compressible: zstd */
	ck_assert_int_eq(store_put(st, &k[1], data, n), 0);
	usleep(SEAL_SETTLE_US);
	store_close(st);
	chunk_path(dir, &k[0], path, sizeof(path));
	if (_i)
		seal_damage(path, 4321, _i);

	st = open_store_each(dir, false);
	if (_i) {
		damage_caught(st, &k[0], back, n);
		goto out;
	}
	ck_assert_int_eq(store_get(st, &k[0], back, n, &len), 0);
	ck_assert_int_eq(store_get(st, &k[1], back, n, &len), 0);
	ck_assert_mem_eq(back, data, n);
	ck_assert_int_eq(store_map(st, &k[0], n, &m, &len), 0);
	ck_assert_int_eq(munmap(m.map, m.map_len), 0);
	seal_stats(st, 3, 0);
	store_close(st);

	/* Checked each mount: hashed at every read. */
	st = open_store_each(dir, true);
	ck_assert_int_eq(store_get(st, &k[0], back, n, &len), 0);
	ck_assert_int_eq(store_get(st, &k[1], back, n, &len), 0);
	seal_stats(st, 0, 2 * n);
	store_close(st);
	/* The seals stay for the next mount that trusts them. */
	st = open_store_each(dir, false);
	ck_assert_int_eq(store_get(st, &k[0], back, n, &len), 0);
	seal_stats(st, 1, 0);
	store_close(st);

	/* A seal file that does not verify is ignored whole. */
	snprintf(path, sizeof(path), "%s/seals", dir);
	flip_byte(path, 20, 0x01);
	st = open_store_each(dir, false);
	ck_assert_int_eq(store_get(st, &k[0], back, n, &len), 0);
	seal_stats(st, 0, n);
	store_close(st);
out:
	free(data);
	free(back);
}
END_TEST

/* Writes chunk k (n bytes of data) into a store of dir opened for it
 * alone, and closes it, its seal settled first where settle. */
static void put_one(const struct chunk_key *k, const uint8_t *data, size_t n,
		    bool settle)
{
	struct store *st = open_store_each(dir, false);

	ck_assert_int_eq(store_put(st, k, data, n), 0);
	if (settle)
		usleep(SEAL_SETTLE_US);
	store_close(st);
}

/* Rewrites the seal file at path (version 2) as version 1 wrote it: the
 * same entries without their last use (80 bytes, not 88). */
static void seals_as_v1(const char *path)
{
	uint8_t b[16 + 64 * 88 + 8];
	FILE *f = fopen(path, "rb");
	size_t len, n, out = 16;
	uint64_t sum;

	ck_assert_ptr_nonnull(f);
	len = fread(b, 1, sizeof(b), f);
	fclose(f);
	ck_assert_int_eq(b[4], 2);
	n = (len - 16 - 8) / 88;
	ck_assert_uint_eq(len, 16 + n * 88 + 8);
	for (size_t i = 0; i < n; i++, out += 80)
		memmove(b + out, b + 16 + i * 88, 80);
	b[4] = 1;
	sum = htole64(XXH3_64bits_withSeed(b, out, 0));
	memcpy(b + out, &sum, 8);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(b, 1, out + 8, f), out + 8);
	ck_assert_int_eq(fclose(f), 0);
}

/* A cache sealed by a version that kept no last uses (seal file version
 * 1) keeps its seals: its chunks are read without a hash. */
START_TEST(seals_version_1_read)
{
	const size_t n = 64 * 1024;
	uint8_t *data = malloc(n), *back = malloc(n);
	struct chunk_key k;
	char path[1024];
	struct store *st;
	size_t len;

	fill_random(data, n, 34);
	key_n(&k, 9);
	put_one(&k, data, n, true);
	snprintf(path, sizeof(path), "%s/seals", dir);
	seals_as_v1(path);
	st = open_store_each(dir, false);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
	ck_assert_mem_eq(back, data, n);
	seal_stats(st, 1, 0);
	store_close(st);
	free(data);
	free(back);
}
END_TEST

/* A chunk file written and damaged at once, before its ctime's tick has
 * passed, is not trusted: the seal of a file the store just wrote is
 * kept only once it has settled. */
START_TEST(racy_seal_not_kept)
{
	const size_t n = 64 * 1024;
	uint8_t *data = malloc(n), *back = malloc(n);
	struct chunk_key k;
	char path[1024];
	struct store *st;
	size_t len;

	fill_random(data, n, 32);
	key_n(&k, 1);
	put_one(&k, data, n, false);
	chunk_path(dir, &k, path, sizeof(path));
	seal_damage(path, 100, 1);
	st = open_store_each(dir, false);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), -EBADMSG);
	store_close(st);
	free(data);
	free(back);
}
END_TEST

/*
 * A sealed pack's first open in a later mount hashes nothing, nor do
 * reads of its chunks; changed between the two (seal_damage) it is
 * checked at that open and caught.
 */
START_TEST(sealed_pack)
{
	uint8_t *data = malloc(PSIZE);
	struct store_file_id checked = {0};
	struct chunk_key k[PN];
	char path[1024];
	struct store *st;
	int fd = -1;

	fill_random(data, PSIZE, 91);
	obj_keys(k, "/data/sealed.bin");
	st = open_store_each(dir, false);
	put_object(st, k, data);
	object_reads(st, k, data, &checked);
	usleep(SEAL_SETTLE_US);
	store_close(st);
	pack_path(dir, &k[0], ".pack", path, sizeof(path));
	if (_i)
		seal_damage(path, PCS + 77, _i);

	st = open_store_each(dir, false);
	memset(&checked, 0, sizeof(checked));
	if (_i) {
		ck_assert_int_eq(
		    store_open_object(st, k, PN, PCS, PSIZE, &checked, &fd),
		    -EBADMSG);
		ck_assert_int_eq(access(path, F_OK), -1);
		store_close(st);
		goto out;
	}
	object_reads(st, k, data, &checked);
	seal_stats(st, 1, 0);
	chunks_read(st, k, data);
	seal_stats(st, 1 + 2 * PN, 0);
	store_close(st);

	st = open_store_each(dir, true);
	memset(&checked, 0, sizeof(checked));
	object_reads(st, k, data, &checked);
	seal_stats(st, 0, PSIZE);
	store_close(st);
out:
	free(data);
}
END_TEST

/*
 * A chunk read again in the same mount (after the memory cache let it
 * go) is not hashed again: its use is kept in the index, not by a touch
 * of its file's atime, which would move its ctime and so break the seal
 * the first read made.  Its file last used hours ago (times set back, so
 * that its ctime moved and the first read checks it); changed between the
 * two reads (seal_damage), it is caught.
 */
START_TEST(reload_in_mount_sealed)
{
	const size_t n = 128 * 1024;
	uint8_t *data = malloc(n), *back = malloc(n);
	struct timespec old[2];
	struct chunk_key k;
	char path[1024];
	struct store *st;
	size_t len;

	fill_random(data, n, 33);
	key_n(&k, 7);
	put_one(&k, data, n, true);
	chunk_path(dir, &k, path, sizeof(path));
	ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &old[0]), 0);
	old[0].tv_sec -= 7200;
	old[1] = old[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, path, old, 0), 0);
	usleep(SEAL_SETTLE_US);

	st = open_store_each(dir, false);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
	seal_stats(st, 0, n);
	if (_i) {
		usleep(SEAL_SETTLE_US);
		seal_damage(path, 999, _i);
		damage_caught(st, &k, back, n);
		goto out;
	}
	ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
	ck_assert_mem_eq(back, data, n);
	seal_stats(st, 1, n);
	store_close(st);
out:
	free(data);
	free(back);
}
END_TEST

/*
 * A file whose stat changed behind the store (its times set by hand,
 * which moves its ctime) is checked again at its next open, once: the
 * caller's *checked then names it as it is, and the store does not
 * change it.
 */
START_TEST(touched_stays_checked)
{
	struct store *st = open_store_each(dir, true);
	uint8_t *data = malloc(PSIZE);
	struct store_file_id checked = {0}, cchecked = {0};
	struct timespec old[2];
	struct chunk_key k[PN], one;
	char path[1024], cpath[1024];
	size_t len;
	int fd = -1;

	fill_random(data, PSIZE, 51);
	obj_keys(k, "/data/touched.bin");
	put_object(st, k, data);
	key_n(&one, 5);
	ck_assert_int_eq(store_put(st, &one, data, PCS), 0);
	pack_path(dir, &k[0], ".pack", path, sizeof(path));
	chunk_path(dir, &one, cpath, sizeof(cpath));
	object_reads(st, k, data, &checked);
	/* Last used two minutes ago. */
	ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &old[0]), 0);
	old[0].tv_sec -= 120;
	old[1] = old[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, path, old, 0), 0);
	ck_assert_int_eq(utimensat(AT_FDCWD, cpath, old, 0), 0);
	/* Changed (its ctime moved): checked again, and touched. */
	object_reads(st, k, data, &checked);
	ck_assert_int_eq(store_open_raw(st, &one, PCS, &cchecked, &fd, &len),
			 0);
	ck_assert_int_eq(close(fd), 0);
	seal_stats(st, 0, 2 * (uint64_t)PSIZE + PCS);
	object_reads(st, k, data, &checked);
	ck_assert_int_eq(store_open_raw(st, &one, PCS, &cchecked, &fd, &len),
			 0);
	ck_assert_int_eq(close(fd), 0);
	seal_stats(st, 0, 2 * (uint64_t)PSIZE + PCS);
	store_close(st);
	free(data);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_loop_test(tc, sealed_chunks, 0, 5);
	tcase_add_test(tc, racy_seal_not_kept);
	tcase_add_test(tc, seals_version_1_read);
	tcase_add_loop_test(tc, sealed_pack, 0, 5);
	tcase_add_test(tc, touched_stays_checked);
	tcase_add_loop_test(tc, reload_in_mount_sealed, 0, 5);
}

int main(void)
{
	return store_fx_main("seal", add_tests);
}
