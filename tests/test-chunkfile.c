/*
 * chunkfile: the keys and one chunk file's format, through the store:
 * known values and golden bytes that caches on disk depend on, both
 * header formats and both checksums, and every kind of damage caught.
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
#include <unistd.h>
#include <zstd.h>

#include "fixture-store.h"

static void hdr_get(const char *path, uint8_t h[HDR])
{
	FILE *f;

	if (hdr_in_xattr(path)) {
		ck_assert_int_eq(getxattr(path, HDR_XATTR, h, HDR), HDR);
		return;
	}
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(h, 1, HDR, f), HDR);
	ck_assert_int_eq(fclose(f), 0);
}

/* Writes the first n bytes of a header where the file keeps it; n < HDR
 * leaves only part of one. */
static void hdr_set(const char *path, const uint8_t *h, size_t n)
{
	FILE *f;

	if (hdr_in_xattr(path)) {
		ck_assert_int_eq(setxattr(path, HDR_XATTR, h, n, 0), 0);
		return;
	}
	if (n < HDR) {
		ck_assert_int_eq(truncate(path, (off_t)n), 0);
		return;
	}
	f = fopen(path, "r+");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(h, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

/* XORs byte off of the header with mask. */
static void hdr_flip(const char *path, size_t off, int mask)
{
	uint8_t h[HDR];

	hdr_get(path, h);
	h[off] ^= (uint8_t)mask;
	hdr_set(path, h, HDR);
}

/* Overwrites the little-endian 64-bit field at off of the header. */
static void hdr_poke64(const char *path, size_t off, uint64_t v)
{
	uint8_t h[HDR];

	hdr_get(path, h);
	for (int i = 0; i < 8; i++)
		h[off + i] = (uint8_t)(v >> (8 * i));
	hdr_set(path, h, HDR);
}

START_TEST(hash_known_values)
{
	static const uint8_t data[] = "abc";
	uint8_t buf[1000], frame[2048];
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t n;
	uint32_t tail;

	/* Published XXH64 values. */
	ck_assert_uint_eq(store_hash64("", 0, 0), 0xEF46DB3751D8E999ull);
	ck_assert_uint_eq(store_hash64("a", 1, 0), 0xD24EC4F1A98C6E5Bull);
	ck_assert_uint_eq(store_hash64(data, 3, 0), 0x44BC2CF5AD770999ull);
	/* zstd's frame checksum is the low half of XXH64 (seed 0) of the
	 * content: that covers the 32-byte stripes too. */
	fill_random(buf, sizeof(buf), 3);
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	n = ZSTD_compress2(c, frame, sizeof(frame), buf, sizeof(buf));
	ck_assert(!ZSTD_isError(n));
	memcpy(&tail, frame + n - 4, 4);
	ck_assert_uint_eq(tail, (uint32_t)store_hash64(buf, sizeof(buf), 0));
	ZSTD_freeCCtx(c);
}
END_TEST

START_TEST(keys)
{
	struct chunk_key a, b;
	char hex[33];

	store_key(&a, "s", "/p", "v", 10, 20, 4096, 0);
	store_key(&b, "s", "/p", "v", 10, 20, 4096, 0);
	ck_assert_mem_eq(a.b, b.b, 16);
	/* Every field counts. */
	store_key(&b, "t", "/p", "v", 10, 20, 4096, 0);
	ck_assert(memcmp(a.b, b.b, 16));
	store_key(&b, "s", "/q", "v", 10, 20, 4096, 0);
	ck_assert(memcmp(a.b, b.b, 16));
	store_key(&b, "s", "/p", "w", 10, 20, 4096, 0);
	ck_assert(memcmp(a.b, b.b, 16));
	store_key(&b, "s", "/p", "v", 11, 20, 4096, 0);
	ck_assert(memcmp(a.b, b.b, 16));
	store_key(&b, "s", "/p", "v", 10, 21, 4096, 0);
	ck_assert(memcmp(a.b, b.b, 16));
	store_key(&b, "s", "/p", "v", 10, 20, 8192, 0);
	ck_assert(memcmp(a.b, b.b, 16));
	store_key(&b, "s", "/p", "v", 10, 20, 4096, 1);
	ck_assert(memcmp(a.b, b.b, 16));
	/* Field boundaries are not ambiguous. */
	store_key(&a, "ab", "c", "", 1, 1, 1, 1);
	store_key(&b, "a", "bc", "", 1, 1, 1, 1);
	ck_assert(memcmp(a.b, b.b, 16));
	/* Stable across runs and machines: cached chunks outlive us. */
	store_key(&a, "http://h/", "/x", "e", 1, 2, 4194304, 3);
	store_key_hex(&a, hex);
	ck_assert_int_eq(store_key_parse(hex, &b), 0);
	ck_assert_mem_eq(a.b, b.b, 16);
	ck_assert_int_eq(store_key_parse("00zz", &b), -EINVAL);
	ck_assert_int_eq(
	    store_key_parse("ABCDEF0123456789abcdef0123456789", &b), -EINVAL);
}
END_TEST

static size_t ser(uint8_t *p, const void *v, size_t n)
{
	memcpy(p, v, n);
	return n;
}

/* The key is two seeded XXH64 of the length-prefixed little-endian
 * fields, short names or long: a cache written once keeps its keys. */
static void check_key_layout(const char *src, const char *path, const char *ver)
{
	const size_t ls = strlen(src), lp = strlen(path), lv = strlen(ver);
	uint8_t *buf = malloc(ls + lp + lv + 7 * 8);
	const uint64_t f[] = {1234567, (uint64_t)-5, 65536, 77};
	uint64_t len, h[2];
	size_t n = 0;
	struct chunk_key k;

	len = ls;
	n += ser(buf + n, &len, 8);
	n += ser(buf + n, src, ls);
	len = lp;
	n += ser(buf + n, &len, 8);
	n += ser(buf + n, path, lp);
	len = lv;
	n += ser(buf + n, &len, 8);
	n += ser(buf + n, ver, lv);
	n += ser(buf + n, f, sizeof(f));
	h[0] = store_hash64(buf, n, 0x7768617266000001ull);
	h[1] = store_hash64(buf, n, 0x7768617266000002ull);
	store_key(&k, src, path, ver, f[0], (int64_t)f[1], (uint32_t)f[2],
		  f[3]);
	ck_assert_mem_eq(k.b, h, 16);
	free(buf);
}

START_TEST(key_layout)
{
	char *long_path = malloc(5000);

	check_key_layout("http://127.0.0.1/json/", "/a/b.JPEG", "\"etag\"");
	check_key_layout("", "", "");
	memset(long_path, 'x', 4999);
	long_path[4999] = '\0';
	check_key_layout("s3://bucket/", long_path, "v");
	free(long_path);
}
END_TEST

/* ---- golden values: what caches on disk depend on ---- */

/* The golden values' bytes: a fixed function of the offset, apart from
 * the fixture's, so that they never move. */
static uint8_t gold_byte(uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (uint8_t)x;
}

static uint8_t *gold_bytes(size_t n)
{
	uint8_t *p = malloc(n);

	for (size_t i = 0; i < n; i++)
		p[i] = gold_byte(i);
	return p;
}

/*
 * Keys name the chunk files of every cache on disk, and XXH64 sums check
 * the chunks of caches written before XXH3 (and the snapshot files): the
 * values below were computed by the store's own XXH64 before libxxhash's
 * took its place, and must never change.
 */
START_TEST(golden_keys_and_sums)
{
	static const struct {
		size_t len;
		uint64_t seed, sum;
	} sums[] = {
	    {0, 0, 0xEF46DB3751D8E999ull},
	    {1, 0x7768617266000001ull, 0xBFA455A50102665Full},
	    {3, 0xFFFFFFFFFFFFFFFFull, 0xC23ABCAE969AB9EDull},
	    {4, 1, 0x158F8F3188B5447Dull},
	    {7, 0x5EED, 0x4F68AA6E833E0D77ull},
	    {8, 0, 0x01ABB78A2874A969ull},
	    {31, 0x7768617266000002ull, 0xDC6534369294535Aull},
	    {32, 0, 0x13DBBF8E9F41CFFCull},
	    {33, 0x9E3779B185EBCA87ull, 0x6F858994DD9D1788ull},
	    {64, 0xFFFFFFFFFFFFFFFFull, 0xE2988822841C191Aull},
	    {100, 0x5EED, 0x5E022CC6F28031D4ull},
	    {1000, 0x7768617266000001ull, 0x79B2D522410C7F9Eull},
	    {65549, 42, 0x1AE0E705378E871Cull},
	};
	uint8_t *buf = gold_bytes(65549);
	char lp[2001], hex[33], *path;
	struct chunk_key k;

	for (size_t i = 0; i < sizeof(sums) / sizeof(sums[0]); i++)
		ck_assert_msg(store_hash64(buf, sums[i].len, sums[i].seed) ==
				  sums[i].sum,
			      "XXH64 of %zu bytes", sums[i].len);
	free(buf);

	store_key(&k, "http://origin/", "/data/file.bin", "etag-1", 1ull << 40,
		  1700000000, 4 * MiB, 7);
	store_key_hex(&k, hex);
	ck_assert_str_eq(hex, "5ea5e554afc5548d4e013bce4333b2a8");
	store_key(&k, "", "", "", 0, 0, 0, 0);
	store_key_hex(&k, hex);
	ck_assert_str_eq(hex, "2cb141b09fa1db5a2df74449ef85d184");
	store_key(&k, "s3://bucket/", "/a/b.JPEG", "\"v\"", 123, -5, 65536, 1);
	store_key_hex(&k, hex);
	ck_assert_str_eq(hex, "b3ddf58d8b8c6e9dfe70cbebf319827d");
	store_key(&k, "gs://b/", "/x", NULL, 1, 2, 3, 4);
	store_key_hex(&k, hex);
	ck_assert_str_eq(hex, "8086605a1dc79cbeb1f83b5ea06eb8c4");
	/* Names too long for store_key's buffer are streamed: 2000 bytes,
	 * then fields of 1024 bytes in all (the buffer's size: one pass),
	 * then 1025 (streamed). */
	for (int i = 0; i < 2000; i++)
		lp[i] = (char)('a' + i % 26);
	lp[2000] = '\0';
	store_key(&k, "s", lp, "", 9, 9, 9, 9);
	store_key_hex(&k, hex);
	ck_assert_str_eq(hex, "6add915157bb0f5428ec82162d5ca415");
	lp[967] = '\0';
	store_key(&k, "s", lp, "", 9, 9, 9, 9);
	store_key_hex(&k, hex);
	ck_assert_str_eq(hex, "42ac77d29b8cc58b8a8953a03f37ca02");
	lp[967] = (char)('a' + 967 % 26);
	lp[968] = '\0';
	store_key(&k, "s", lp, "", 9, 9, 9, 9);
	store_key_hex(&k, hex);
	ck_assert_str_eq(hex, "79fec7b8fda1171731142c66f0bd87f6");

	path = store_snapshot_path("/c", "http://origin/");
	ck_assert_str_eq(path, "/c/snapshots/87d830253594df2a.list");
	free(path);
}
END_TEST

/* Writes a raw chunk file as versions before XXH3 did: its sum an XXH64
 * (header byte 6 is 0), its header in its xattr, or at its start. */
static void plant_xxh64_chunk(const char *d, const struct chunk_key *k,
			      const uint8_t *data, size_t len, uint64_t sum,
			      bool inline_header)
{
	uint8_t h[HDR] = {'W', 'H', 'C', 'K', inline_header ? 1 : 2, 0, 0, 0};
	char path[1024];
	int fd;

	for (int i = 0; i < 8; i++) {
		h[8 + i] = (uint8_t)((uint64_t)len >> (8 * i));
		h[16 + i] = (uint8_t)((uint64_t)len >> (8 * i));
		h[24 + i] = (uint8_t)(sum >> (8 * i));
	}
	memcpy(h + 32, k->b, 16);
	chunk_path(d, k, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	if (inline_header)
		ck_assert_int_eq(write(fd, h, HDR), HDR);
	else
		ck_assert_int_eq(fsetxattr(fd, HDR_XATTR, h, HDR, 0), 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}

/*
 * Chunk files summed with XXH64, with the golden sums (not computed
 * here): they verify, read whole and mapped; and (format 2) they pack,
 * which sums them piece by piece and writes the pack's index with an
 * XXH64 of its own (golden too), which verifies after a reopen.
 */
START_TEST(golden_xxh64_files)
{
	static const uint64_t pack_sum[3] = {0x510646C148E864CDull,
					     0xB0DF601B5A49FF3Full,
					     0x887E0A0EC538FF94ull};
	uint8_t *data = gold_bytes(141234), *back = malloc(141234);
	struct store_file_id checked = {0};
	struct chunk_key one, k[3];
	struct store_map m;
	struct store *st;
	char path[1024];
	uint8_t idx[8];
	size_t len = 0;
	uint64_t sum = 0;
	int fd;

	inline_hdr = _i;
	store_close(open_store(dir, 0)); /* makes the dirs */
	store_key(&one, "http://origin/", "/gold/one", "v1", 100003, 1700000000,
		  MiB, 0);
	plant_xxh64_chunk(dir, &one, data, 100003, 0x39D5F35E25A46633ull, _i);
	for (unsigned i = 0; i < 3; i++) {
		store_key(&k[i], "http://origin/", "/gold/obj", "v1", 141234,
			  1700000000, 70000, i);
		plant_xxh64_chunk(dir, &k[i], data + i * 70000,
				  i < 2 ? 70000 : 1234, pack_sum[i], _i);
	}
	st = open_store(dir, 0);
	ck_assert_int_eq(store_get(st, &one, back, 141234, &len), 0);
	ck_assert_uint_eq(len, 100003);
	ck_assert_mem_eq(back, data, 100003);
	ck_assert_int_eq(store_map(st, &one, 141234, &m, &len), 0);
	ck_assert_mem_eq(m.data, data, 100003);
	ck_assert_int_eq(munmap(m.map, m.map_len), 0);
	if (_i) {
		store_close(st);
		goto out;
	}
	ck_assert_int_eq(
	    store_open_object(st, k, 3, 70000, 141234, &checked, &fd), 0);
	ck_assert_int_eq(pread(fd, back, 141234, 0), 141234);
	ck_assert_mem_eq(back, data, 141234);
	ck_assert_int_eq(close(fd), 0);
	chunk_path(dir, &k[0], path, sizeof(path) - 4);
	strcat(path, ".idx");
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(pread(fd, idx, 8, 32), 8);
	ck_assert_int_eq(close(fd), 0);
	for (int i = 7; i >= 0; i--)
		sum = sum << 8 | idx[i];
	ck_assert_uint_eq(sum, 0xCBD5F916F99A7F38ull);
	store_close(st);

	st = open_store(dir, 0);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert(store_packed(st, &k[i]));
		ck_assert_int_eq(store_get(st, &k[i], back, 70000, &len), 0);
		ck_assert_mem_eq(back, data + i * 70000, len);
	}
	checked = (struct store_file_id){0};
	ck_assert_int_eq(
	    store_open_object(st, k, 3, 70000, 141234, &checked, &fd), 0);
	ck_assert_int_eq(close(fd), 0);
	store_close(st);
out:
	free(data);
	free(back);
}
END_TEST

/* Damages the file of chunk n in one of several ways; the next get must
 * say -EBADMSG, remove the file, and then say -ENOENT. */
static void damaged(int how, bool compressible)
{
	struct store *st = open_store(dir, 0);
	const size_t n = 256 * 1024;
	uint8_t *data = malloc(n), *back = malloc(n);
	struct store_stats ss;
	struct chunk_key k;
	uint8_t h[HDR];
	char path[1024];
	size_t len;
	off_t off;

	if (compressible)
		fill_text(data, n, 9);
	else
		fill_random(data, n, 9);
	key_n(&k, 7);
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	chunk_path(dir, &k, path, sizeof(path));
	switch (how) {
	case 0: /* one byte in the payload */
		off = payload_off(path);
		flip_byte(path, off + 1000 % (file_size(path) - off), 0x40);
		break;
	case 1: /* truncated */
		ck_assert_int_eq(truncate(path, file_size(path) - 10), 0);
		break;
	case 2: /* only part of the header */
		hdr_get(path, h);
		hdr_set(path, h, 20);
		break;
	case 3: /* the checksum in the header */
		hdr_flip(path, 30, 1);
		break;
	case 4: /* a raw length too short for the compressed payload */
		hdr_poke64(path, 8, 10);
		break;
	case 5: /* an implausible raw length (raw: both lengths) */
		hdr_poke64(path, 8, 1ull << 40);
		if (!compressible)
			hdr_poke64(path, 16, 1ull << 40);
		break;
	case 6: /* an unknown codec */
		hdr_flip(path, 5, 0x70);
		break;
	case 7: /* a version 1 header in an xattr, or 2 in the file */
		hdr_flip(path, 4, 3);
		break;
	case 8: /* an unknown checksum */
		hdr_flip(path, 6, 0x40);
		break;
	}
	ck_assert_int_eq(store_get(st, &k, back, n, &len), -EBADMSG);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), -ENOENT);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.corrupt, 1);
	ck_assert_uint_eq(ss.chunks, 0);
	/* It can be cached again. */
	put_get(st, &k, data, n);
	store_close(st);
	free(data);
	free(back);
}

START_TEST(corrupt_byte)
{
	inline_hdr = _i;
	damaged(0, false);
	damaged(0, true);
}
END_TEST

START_TEST(truncated)
{
	inline_hdr = _i;
	damaged(1, false);
	damaged(1, true);
	damaged(2, true);
}
END_TEST

START_TEST(bad_checksum)
{
	inline_hdr = _i;
	damaged(3, false);
}
END_TEST

/* Lengths and codec in the header are checked before they size a read. */
START_TEST(bad_header_fields)
{
	inline_hdr = _i;
	damaged(4, true);
	damaged(5, true);
	damaged(5, false);
	damaged(6, false);
	damaged(7, false);
	damaged(8, false);
}
END_TEST

/* Chunks are summed with XXH3 (header byte 6 is 1); chunks summed with
 * XXH64 (byte 6 was 0) by earlier versions still verify, and only with
 * XXH64. */
START_TEST(xxh64_chunks_read)
{
	struct store *st;
	const size_t n = 150000;
	uint8_t *data = malloc(n), *back = malloc(n), h[HDR];
	struct chunk_key k;
	char path[1024];
	uint64_t seed = 0, sum;
	size_t len;

	inline_hdr = _i;
	st = open_store(dir, 0);
	fill_random(data, n, 17);
	key_n(&k, 4);
	for (int i = 7; i >= 0; i--)
		seed = seed << 8 | k.b[i];
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	chunk_path(dir, &k, path, sizeof(path));
	hdr_get(path, h);
	ck_assert_int_eq(h[6], 1);

	/* Byte 6 says XXH64 but the sum is XXH3's: refused. */
	hdr_flip(path, 6, 1);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), -EBADMSG);

	/* An XXH64 chunk as an earlier version wrote it. */
	ck_assert_int_eq(store_put(st, &k, data, n), 0);
	hdr_get(path, h);
	h[6] = 0;
	sum = store_hash64(data, n, seed);
	for (int i = 0; i < 8; i++)
		h[24 + i] = (uint8_t)(sum >> (8 * i));
	hdr_set(path, h, HDR);
	ck_assert_int_eq(store_get(st, &k, back, n, &len), 0);
	ck_assert_mem_eq(back, data, n);
	store_close(st);
	free(data);
	free(back);
}
END_TEST

/* A copy of a cache that dropped the chunks' xattrs: every chunk fails
 * its check at the next open, is removed, and none is served. */
START_TEST(lost_xattrs)
{
	struct store *st = open_store(dir, 0);
	uint8_t data[5000], back[5000];
	struct store_stats ss;
	struct chunk_key k;
	char path[1024];
	size_t len;

	for (unsigned i = 0; i < 30; i++) {
		fill_random(data, sizeof(data), i);
		key_n(&k, i);
		ck_assert_int_eq(store_put(st, &k, data, sizeof(data)), 0);
		chunk_path(dir, &k, path, sizeof(path));
		ck_assert(hdr_in_xattr(path));
		ck_assert_int_eq(removexattr(path, HDR_XATTR), 0);
	}
	store_close(st);
	st = open_store(dir, 0);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, 0);
	for (unsigned i = 0; i < 30; i++) {
		key_n(&k, i);
		chunk_path(dir, &k, path, sizeof(path));
		ck_assert_int_eq(access(path, F_OK), -1);
		ck_assert_int_eq(store_get(st, &k, back, sizeof(back), &len),
				 -ENOENT);
	}
	store_close(st);
}
END_TEST

/* A chunk file under another key's name is not served for that key. */
START_TEST(wrong_key)
{
	struct store *st = open_store(dir, 0);
	uint8_t data[3000], back[3000];
	char pa[1024], pb[1024];
	struct chunk_key a, b;
	size_t len;

	fill_random(data, sizeof(data), 4);
	key_n(&a, 1);
	key_n(&b, 2);
	ck_assert_int_eq(store_get(st, &b, back, sizeof(back), &len), -ENOENT);
	ck_assert_int_eq(store_put(st, &a, data, sizeof(data)), 0);
	chunk_path(dir, &a, pa, sizeof(pa));
	chunk_path(dir, &b, pb, sizeof(pb));
	ck_assert_int_eq(fx_sh("cp '%s' '%s'", pa, pb), 0);
	ck_assert_int_eq(store_get(st, &b, back, sizeof(back), &len), -EBADMSG);
	ck_assert_int_eq(access(pb, F_OK), -1);
	ck_assert_int_eq(store_get(st, &a, back, sizeof(back), &len), 0);
	ck_assert_mem_eq(back, data, sizeof(data));
	store_close(st);
}
END_TEST

/* An empty chunk's checksum is checked too, by a read and by a verifying
 * walk (which removes the file). */
START_TEST(empty_chunk_checked)
{
	struct store *st;
	struct chunk_key k;
	struct tally t;
	char path[1024];
	uint8_t back[1];
	size_t len = 99;

	inline_hdr = _i;
	st = open_store(dir, 0);
	key_n(&k, 3);
	ck_assert_int_eq(store_put(st, &k, "", 0), 0);
	ck_assert_int_eq(store_get(st, &k, back, sizeof(back), &len), 0);
	ck_assert_uint_eq(len, 0);
	t = tally(dir, STORE_WALK_VERIFY);
	ck_assert_uint_eq(t.n, 1);
	ck_assert_uint_eq(t.bad, 0);

	chunk_path(dir, &k, path, sizeof(path));
	hdr_flip(path, 30, 1);
	t = tally(dir, STORE_WALK_VERIFY);
	ck_assert_uint_eq(t.bad, 1);
	ck_assert_uint_eq(t.removed, 1);
	ck_assert_int_eq(access(path, F_OK), -1);

	ck_assert_int_eq(store_put(st, &k, "", 0), 0);
	hdr_flip(path, 30, 1);
	ck_assert_int_eq(store_get(st, &k, back, sizeof(back), &len), -EBADMSG);
	store_close(st);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, hash_known_values);
	tcase_add_test(tc, keys);
	tcase_add_test(tc, key_layout);
	tcase_add_test(tc, golden_keys_and_sums);
	tcase_add_loop_test(tc, golden_xxh64_files, 0, 2);
	tcase_add_loop_test(tc, corrupt_byte, 0, 2);
	tcase_add_loop_test(tc, truncated, 0, 2);
	tcase_add_loop_test(tc, bad_checksum, 0, 2);
	tcase_add_test(tc, wrong_key);
	tcase_add_test(tc, lost_xattrs);
	tcase_add_loop_test(tc, xxh64_chunks_read, 0, 2);
	tcase_add_loop_test(tc, empty_chunk_checked, 0, 2);
	tcase_add_loop_test(tc, bad_header_fields, 0, 2);
}

int main(void)
{
	return store_fx_main("chunkfile", add_tests);
}
