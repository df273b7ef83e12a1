/* store: the on-disk chunk cache, on real files; and `wharf cache`. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "checksum.h"
#include "fixture.h"
#include "store.h"

#define HDR 48
#define HDR_XATTR "user.wharf.chunk"
#define MiB (1024 * 1024)

static char *root; /* every test's files, removed by main */
static char *dir;  /* this test's cache dir */
/* Stores opened by open_store write format 1 (the header at the start of
 * the file) rather than format 2 (the header in an xattr): the loop tests
 * set it from their index, so that both formats are read and damaged. */
static bool inline_hdr;

static void setup(void)
{
	char tmpl[512];

	snprintf(tmpl, sizeof(tmpl), "%s/t-XXXXXX", root);
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	dir = strdup(tmpl);
}

static void teardown(void)
{
	fx_rmtree(dir);
	free(dir);
	dir = NULL;
	inline_hdr = false;
}

static struct store *open_store(const char *d, uint64_t max)
{
	struct store_config cfg = {
	    .dir = d, .max_bytes = max, .inline_headers = inline_hdr};
	struct store *st = NULL;
	char *err = NULL;
	int rc = store_open(&cfg, &st, &err);

	ck_assert_msg(rc == 0, "store_open(%s): %d %s", d, rc, err ? err : "");
	free(err);
	return st;
}

static void key_n(struct chunk_key *k, unsigned n)
{
	store_key(k, "http://origin/", "/data/file.bin", "etag-1", 1ull << 40,
		  1700000000, 4 * MiB, n);
}

static void chunk_path(const char *d, const struct chunk_key *k, char *out,
		       size_t len)
{
	char hex[33];

	store_key_hex(k, hex);
	snprintf(out, len, "%s/chunks/%.2s/%s", d, hex, hex);
}

static off_t file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) ? -1 : sb.st_size;
}

/* Incompressible bytes: a function of seed and offset. */
static void fill_random(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = fx_byte(seed, i);
}

/* Compressible bytes: text-like lines. */
static void fill_text(uint8_t *p, size_t n, uint32_t seed)
{
	size_t i = 0;

	while (i < n) {
		char line[64];
		int k = snprintf(line, sizeof(line), "record %u value %zu\n",
				 seed, i / 7);

		for (int j = 0; j < k && i < n; j++)
			p[i++] = (uint8_t)line[j];
	}
}

/* XORs the byte at off with mask. */
static void flip_byte(const char *path, long off, int mask)
{
	FILE *f = fopen(path, "r+");
	int c;

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, off, SEEK_SET), 0);
	c = fgetc(f);
	ck_assert_int_ne(c, EOF);
	ck_assert_int_eq(fseek(f, off, SEEK_SET), 0);
	fputc(c ^ mask, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* Whether chunk file path keeps its header in its xattr (format 2) rather
 * than in its first HDR bytes (format 1). */
static bool hdr_in_xattr(const char *path)
{
	return getxattr(path, HDR_XATTR, NULL, 0) > 0;
}

/* Where the chunk's payload starts in its file. */
static off_t payload_off(const char *path)
{
	return hdr_in_xattr(path) ? 0 : HDR;
}

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

static void put_get(struct store *st, const struct chunk_key *k,
		    const uint8_t *data, size_t n)
{
	uint8_t *back = malloc(n ? n : 1);
	size_t len = 12345;

	ck_assert_int_eq(store_put(st, k, data, n), 0);
	ck_assert_int_eq(store_get(st, k, back, n, &len), 0);
	ck_assert_uint_eq(len, n);
	ck_assert(n == 0 || memcmp(back, data, n) == 0);
	free(back);
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

/* Sum of the chunk files' sizes (rounded to 4 KiB) and their number. */
struct tally {
	uint64_t bytes, n, bad, removed;
};

static int tally_one(const struct store_entry *e, void *arg)
{
	struct tally *t = arg;

	t->bytes += e->disk_bytes;
	t->n++;
	t->bad += e->error != 0;
	t->removed += e->removed;
	return 0;
}

static struct tally tally(const char *d, unsigned flags)
{
	struct tally t = {0};
	char *err = NULL;

	ck_assert_int_eq(store_walk(d, flags, tally_one, &t, &err), 0);
	return t;
}

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

START_TEST(lock_one_mount)
{
	struct store_config cfg = {.dir = dir};
	struct store *st = open_store(dir, 0), *st2 = NULL;
	char *err = NULL, *mp = NULL, want[64];
	pid_t pid;

	ck_assert_int_eq(store_open(&cfg, &st2, &err), -EBUSY);
	ck_assert_ptr_null(st2);
	ck_assert_ptr_nonnull(err);
	snprintf(want, sizeof(want), "process %d", (int)getpid());
	ck_assert_msg(strstr(err, want), "'%s' lacks '%s'", err, want);
	ck_assert_ptr_nonnull(strstr(err, dir));
	free(err);
	err = NULL;

	ck_assert_int_eq(store_set_mountpoint(st, "/mnt/data set"), 0);
	ck_assert_int_eq(store_open(&cfg, &st2, &err), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "mounted on /mnt/data set"));
	free(err);
	ck_assert_int_eq(store_lock_holder(dir, &pid, &mp), 0);
	ck_assert_int_eq(pid, getpid());
	ck_assert_str_eq(mp, "/mnt/data set");
	free(mp);

	store_close(st);
	ck_assert_int_eq(store_lock_holder(dir, &pid, &mp), -ENOENT);
	st = open_store(dir, 0);
	store_close(st);
}
END_TEST

static void *close_later(void *st)
{
	usleep(150 * 1000);
	store_close(st);
	return NULL;
}

/* A holder that lets go within half a second (`wharf cache stats`
 * probing, a mount on its way out): the open waits for it instead of
 * failing. */
START_TEST(lock_waits_for_exiting_holder)
{
	struct store_config cfg = {.dir = dir};
	struct store *st = open_store(dir, 0), *st2 = NULL;
	char *err = NULL;
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, close_later, st), 0);
	ck_assert_int_eq(store_open(&cfg, &st2, &err), 0);
	ck_assert_ptr_null(err);
	pthread_join(t, NULL);
	store_close(st2);
}
END_TEST

START_TEST(mode_0700)
{
	char *d = strdupf("%s/a/b/cache", dir), *a = strdupf("%s/a", dir);
	struct store *st = open_store(d, 0);
	struct stat sb;

	ck_assert_int_eq(stat(d, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(a, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0700);
	store_close(st);
	free(d);
	free(a);
}
END_TEST

/* store_open's err, for a dir that must be refused with -EPERM. */
static void refused(const char *d, const char *says)
{
	struct store_config cfg = {.dir = d};
	struct store *st = NULL;
	char *err = NULL;

	ck_assert_int_eq(store_open(&cfg, &st, &err), -EPERM);
	ck_assert_ptr_null(st);
	ck_assert_msg(err && strstr(err, says), "message: %s", err);
	free(err);
}

/* A cache dir another user could write to is refused, as one that
 * belongs to another user; fixed, it opens. */
START_TEST(foreign_dir_refused)
{
	struct store *st;

	ck_assert_int_eq(chmod(dir, 0777), 0);
	refused(dir, "writable by others");
	ck_assert_int_eq(chmod(dir, 0770), 0);
	refused(dir, "chmod go-w");
	ck_assert_int_eq(chmod(dir, 0700), 0);
	st = open_store(dir, 0);
	store_close(st);
	/* Its chunk dirs too. */
	{
		char *fan = strdupf("%s/chunks/7f", dir);

		ck_assert_int_eq(chmod(fan, 0757), 0);
		refused(dir, "chunks/7f is writable by others");
		free(fan);
	}
}
END_TEST

/* A cache dir that belongs to another user is refused (only root can
 * give it away to try). */
START_TEST(foreign_owner_refused)
{
	struct store *st;

	if (geteuid() != 0)
		fx_skip("not root: cannot chown the cache dir to another user");
	st = open_store(dir, 0);
	store_close(st);
	ck_assert_int_eq(chown(dir, 65534, 65534), 0);
	refused(dir, "belongs to uid 65534");
	ck_assert_int_eq(chown(dir, 0, 0), 0);
	st = open_store(dir, 0);
	store_close(st);
}
END_TEST

/* Links planted in a cache dir are not followed: a `lock` link would
 * make the mount truncate and write its target. */
START_TEST(planted_links_refused)
{
	char *target = strdupf("%s/victim", root),
	     *lock = strdupf("%s/lock", dir);
	char *chunks = strdupf("%s/chunks", dir), *elsewhere;
	struct store_config cfg = {.dir = dir};
	struct store *st = NULL;
	char *err = NULL;

	ck_assert_int_eq(fx_sh("printf precious >'%s'", target), 0);
	ck_assert_int_eq(symlink(target, lock), 0);
	ck_assert_int_lt(store_open(&cfg, &st, &err), 0);
	ck_assert_ptr_null(st);
	free(err);
	err = NULL;
	ck_assert_int_eq(fx_sh("test \"$(cat '%s')\" = precious", target), 0);
	ck_assert_int_eq(unlink(lock), 0);

	elsewhere = fx_tmpdir("store-elsewhere");
	ck_assert_int_eq(symlink(elsewhere, chunks), 0);
	ck_assert_int_lt(store_open(&cfg, &st, &err), 0);
	ck_assert_ptr_null(st);
	ck_assert_int_eq(fx_sh("test -z \"$(ls -A '%s')\"", elsewhere), 0);
	free(err);
	free(elsewhere);
	free(target);
	free(lock);
	free(chunks);
}
END_TEST

static int count_bad(const struct store_entry *e, void *arg)
{
	if (e->error == -EINVAL && !strcmp(e->why, "not a regular file"))
		++*(int *)arg;
	return 0;
}

/* A FIFO with a chunk's name hangs nothing: not the scan at open, not a
 * read of that chunk, not a walk, which reports it. */
START_TEST(fifo_chunk_skipped)
{
	struct store *st = open_store(dir, 0);
	uint8_t buf[64];
	char path[1024], *err = NULL;
	struct chunk_key k;
	size_t len;
	int n = 0;

	key_n(&k, 9);
	store_close(st);
	chunk_path(dir, &k, path, sizeof(path));
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	st = open_store(dir, 0); /* the scan skips it */
	ck_assert_int_eq(
	    store_walk(dir, STORE_WALK_VERIFY, count_bad, &n, &err), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(store_get(st, &k, buf, sizeof(buf), &len), -EBADMSG);
	ck_assert_int_eq(store_get(st, &k, buf, sizeof(buf), &len), -ENOENT);
	store_close(st);
}
END_TEST

/* Without HOME, a user's default cache is in the home the password file
 * names, never in a shared dir such as /tmp. */
START_TEST(default_dir_without_home)
{
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	char *xdg =
	    getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
	char *d;

	unsetenv("HOME");
	unsetenv("XDG_CACHE_HOME");
	d = store_default_dir();
	if (geteuid() == 0)
		ck_assert_str_eq(d, "/var/cache/wharf");
	else
		ck_assert_msg(!d || strncmp(d, "/tmp", 4), "default %s", d);
	free(d);
	if (home)
		setenv("HOME", home, 1);
	if (xdg)
		setenv("XDG_CACHE_HOME", xdg, 1);
	free(home);
	free(xdg);
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

/* No leftover temp file in any fan-out dir. */
static unsigned count_tmp(const char *d)
{
	char cmd[1024], out[64] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "find '%s/chunks' -name '.tmp.*' | wc -l",
		 d);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(out, sizeof(out), p));
	pclose(p);
	return (unsigned)atoi(out);
}

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

/* ---- `wharf cache` through the built command ---- */

/* Runs `wharf ARGS` (any command); *out gets what it printed. */
static int wharf_cmd(const char *args, char **out)
{
	char *cmd =
	    strdupf("'%s' %s > '%s/out' 2>&1", fx_wharf_bin(), args, dir);
	char *path = strdupf("%s/out", dir);
	size_t len;
	int rc = fx_sh("%s", cmd);

	if (out)
		*out = fx_read_file(path, &len);
	free(cmd);
	free(path);
	return rc;
}

/* Runs `wharf cache ARGS`. */
static int wharf(const char *args, char **out)
{
	char *full = strdupf("cache %s", args);
	int rc = wharf_cmd(full, out);

	free(full);
	return rc;
}

static char *populate(unsigned n)
{
	char *cache = strdupf("%s/cache", dir);
	struct store *st = open_store(cache, 0);
	uint8_t data[30000];
	struct chunk_key k;

	for (unsigned i = 0; i < n; i++) {
		if (i % 2)
			fill_text(data, sizeof(data), i);
		else
			fill_random(data, sizeof(data), i);
		key_n(&k, i);
		ck_assert_int_eq(store_put(st, &k, data, sizeof(data)), 0);
	}
	store_close(st);
	return cache;
}

START_TEST(cli_verify)
{
	char *cache = populate(6), *out = NULL, *args, path[1024], hex[33];
	struct chunk_key k;

	args = strdupf("verify --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	free(out);
	key_n(&k, 3);
	chunk_path(cache, &k, path, sizeof(path));
	flip_byte(path, payload_off(path) + 5, 0xff);
	ck_assert_int_eq(wharf(args, &out), 1);
	store_key_hex(&k, hex);
	ck_assert_msg(out && strstr(out, hex), "verify said: %s", out);
	ck_assert_int_eq(access(path, F_OK), -1);
	free(out);
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_uint_eq(tally(cache, 0).n, 5);
	free(out);
	free(args);
	free(cache);
}
END_TEST

/* verify on a mounted cache: the bad chunk goes, the store forgets it. */
START_TEST(cli_verify_mounted)
{
	char *cache = populate(4), *out = NULL, *args, path[1024];
	struct store *st = open_store(cache, 0);
	struct store_stats ss;
	struct chunk_key k;
	uint8_t buf[30000];
	size_t len;

	key_n(&k, 2);
	chunk_path(cache, &k, path, sizeof(path));
	flip_byte(path, payload_off(path) + 100, 0x10);
	args = strdupf("verify --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 1);
	ck_assert_msg(out && strstr(out, "1 bad"), "verify said: %s", out);
	free(out);
	ck_assert_int_eq(store_get(st, &k, buf, sizeof(buf), &len), -ENOENT);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, 3);
	ck_assert_uint_eq(ss.corrupt, 0);
	store_close(st);
	free(args);
	free(cache);
}
END_TEST

START_TEST(cli_prune_clear)
{
	char *cache = populate(10), *out = NULL, *args;
	struct store *st;

	args = strdupf("prune --max-size 64K --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	free(out);
	free(args);
	ck_assert_uint_le(tally(cache, 0).bytes, 64 * 1024);
	ck_assert_uint_gt(tally(cache, 0).n, 0);

	/* Refused while the cache is in use. */
	st = open_store(cache, 0);
	args = strdupf("clear --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 1);
	ck_assert_msg(out && strstr(out, "in use"), "clear said: %s", out);
	free(out);
	ck_assert_uint_gt(tally(cache, 0).n, 0);
	store_close(st);

	ck_assert_int_eq(wharf(args, &out), 0);
	free(out);
	ck_assert_uint_eq(tally(cache, 0).n, 0);
	free(args);
	free(cache);
}
END_TEST

START_TEST(cli_stats_ls)
{
	char *cache = populate(7), *out = NULL, *args;
	unsigned lines = 0;

	args = strdupf("stats --json --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	free(out);
	free(args);
	ck_assert_int_eq(
	    fx_sh("/usr/bin/python3 -c 'import json,sys; "
		  "d = json.load(open(sys.argv[1])); "
		  "sys.exit(0 if d[\"chunks\"] == 7 and "
		  "d[\"bytes_raw\"] == 7 * 30000 and not d[\"mounted\"] "
		  "else 1)' '%s/out'",
		  dir),
	    0);

	args = strdupf("stats --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_ptr_nonnull(strstr(out, "7 chunks"));
	/* Not mounted: what the cache holds, and no mount's lines. */
	ck_assert_msg(strstr(out, "\nnot mounted\n") && !strchr(out, '{') &&
			  !strstr(out, "  source "),
		      "%s", out);
	free(out);
	free(args);

	args = strdupf("ls --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	for (char *p = out; p && (p = strchr(p, '\n')); p++)
		lines++;
	ck_assert_uint_eq(lines, 7);
	free(out);
	free(args);

	/* Held, the holder is named; a directory that only looks like a
	 * mount (the live counters of a real one: test-secrets) is not
	 * read, and says so. */
	{
		struct store *st = open_store(cache, 0);
		char *mnt = strdupf("%s/mnt", dir);

		ck_assert_int_eq(fx_mkdirs(mnt), 0);
		ck_assert_int_eq(fx_sh("mkdir '%s/.wharf' && echo "
				       "'{\"reads\": {\"count\": 42}}' > "
				       "'%s/.wharf/stats'",
				       mnt, mnt),
				 0);
		ck_assert_int_eq(store_set_mountpoint(st, mnt), 0);
		ck_assert_int_eq(fx_sh("'%s' cache stats --json --cache-dir "
				       "'%s' >'%s/out' 2>/dev/null",
				       fx_wharf_bin(), cache, dir),
				 1);
		ck_assert_int_eq(
		    fx_sh("/usr/bin/python3 -c 'import json,sys; "
			  "d = json.load(open(sys.argv[1])); "
			  "sys.exit(0 if d[\"mounted\"] and "
			  "d[\"pid\"] == int(sys.argv[3]) and "
			  "d[\"mountpoint\"] == sys.argv[2] and "
			  "d[\"mount\"] is None "
			  "else 1)' '%s/out' '%s' %d",
			  dir, mnt, (int)getpid()),
		    0);
		args = strdupf("stats --cache-dir '%s'", cache);
		ck_assert_int_eq(wharf(args, &out), 1);
		ck_assert_msg(strstr(out, "it is not a wharf mount of process"),
			      "stats said: %s", out);
		ck_assert_msg(!strstr(out, "42"), "stats said: %s", out);
		ck_assert_msg(strstr(out, "mounted on ") &&
				  !strstr(out, "  source ") &&
				  !strstr(out, "  reads "),
			      "stats said: %s", out);
		free(out);
		free(args);
		store_close(st);
		free(mnt);
	}

	ck_assert_int_eq(wharf("--help", &out), 0);
	ck_assert_ptr_nonnull(strstr(out, "prune"));
	free(out);
	ck_assert_int_eq(wharf("frobnicate", NULL), 2);
	ck_assert_int_eq(wharf("prune", NULL), 2); /* --max-size missing */
	free(cache);
}
END_TEST

/* A directory that is not a cache is refused, and nothing is made in it. */
START_TEST(cli_not_a_cache)
{
	static const char *const cmds[] = {"clear", "prune --max-size 1M",
					   "stats", "ls", "verify"};
	char *home = strdupf("%s/home", dir), *out = NULL, *args;

	ck_assert_int_eq(fx_mkdirs(home), 0);
	ck_assert_int_eq(fx_sh("echo keep > '%s/keep.txt'", home), 0);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		args = strdupf("%s --cache-dir '%s'", cmds[i], home);
		ck_assert_int_eq(wharf(args, &out), 1);
		ck_assert_msg(out && strstr(out, "is not a wharf cache "
						 "directory"),
			      "%s said: %s", cmds[i], out);
		free(out);
		free(args);
	}
	ck_assert_int_eq(fx_sh("test \"$(ls -A '%s')\" = keep.txt", home), 0);
	free(home);
}
END_TEST

/* A bad option is named once, by wharf, not by getopt. */
START_TEST(cli_bad_options)
{
	static const struct {
		const char *args, *says;
	} cases[] = {
	    {"stats --bogus", "unknown option '--bogus'"},
	    {"stats -x", "unknown option '-x'"},
	    {"stats --cache-dir", "option --cache-dir needs a value"},
	    {"stats --json=yes", "option --json takes no value"},
	};
	char *out = NULL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(wharf(cases[i].args, &out), 2);
		ck_assert_msg(out && strstr(out, cases[i].says) &&
				  !strstr(out, "unrecognized") &&
				  !strstr(out, "invalid option") &&
				  !strstr(out, "requires an argument"),
			      "%s said: %s", cases[i].args, out);
		free(out);
	}
	/* Numbers out of range, or not numbers, are refused by name. */
	ck_assert_int_eq(wharf_cmd("prefetch -j 4294967297 /tmp", &out), 2);
	ck_assert_msg(out && strstr(out, "--jobs: expected 1 to 1024, got "
					 "'4294967297'"),
		      "prefetch said: %s", out);
	free(out);
	ck_assert_int_eq(wharf_cmd("bench loader --seed abc x.idx", &out), 2);
	ck_assert_msg(out && strstr(out, "--seed: bad number 'abc'"),
		      "bench said: %s", out);
	free(out);
}
END_TEST

/* ---- packs: an object's chunks in one file (store_open_object) ---- */

/* A pack test's chunk size: not a multiple of the page size, so that a
 * chunk in a pack starts within a page. */
#define PCS 70000
#define PN 4
#define PSIZE (3 * PCS + 1234)

static void obj_keys(struct chunk_key k[PN], const char *path)
{
	for (unsigned i = 0; i < PN; i++)
		store_key(&k[i], "http://origin/", path, "etag-9", PSIZE,
			  1700000000, PCS, i);
}

static size_t obj_chunk_len(unsigned i)
{
	return i + 1 < PN ? PCS : PSIZE - (size_t)i * PCS;
}

/* Stores the object's chunks (data, PSIZE bytes) one by one. */
static void put_object(struct store *st, const struct chunk_key k[PN],
		       const uint8_t *data)
{
	for (unsigned i = 0; i < PN; i++)
		ck_assert_int_eq(store_put(st, &k[i], data + (size_t)i * PCS,
					   obj_chunk_len(i)),
				 0);
}

static void pack_path(const char *d, const struct chunk_key *k0,
		      const char *suffix, char *out, size_t len)
{
	char hex[33];

	store_key_hex(k0, hex);
	snprintf(out, len, "%s/chunks/%.2s/%s%s", d, hex, hex, suffix);
}

/* Opens the object's pack and checks that it holds exactly data. */
static void object_reads(struct store *st, const struct chunk_key k[PN],
			 const uint8_t *data, struct store_file_id *checked)
{
	uint8_t *back = malloc(PSIZE + 1);
	int fd = -1;

	ck_assert_int_eq(store_open_object(st, k, PN, PCS, PSIZE, checked, &fd),
			 0);
	ck_assert_int_eq(pread(fd, back, PSIZE + 1, 0), PSIZE);
	ck_assert_mem_eq(back, data, PSIZE);
	ck_assert_int_eq(close(fd), 0);
	free(back);
}

/* Each chunk reads back from the store, copied and mapped (a chunk in a
 * pack from within a page of it). */
static void chunks_read(struct store *st, const struct chunk_key k[PN],
			const uint8_t *data)
{
	uint8_t *back = malloc(PCS);
	const long page = sysconf(_SC_PAGESIZE);

	for (unsigned i = 0; i < PN; i++) {
		struct store_map m;
		size_t len = 0;

		ck_assert_int_eq(store_get(st, &k[i], back, PCS, &len), 0);
		ck_assert_uint_eq(len, obj_chunk_len(i));
		ck_assert_mem_eq(back, data + (size_t)i * PCS, len);
		ck_assert_int_eq(store_map(st, &k[i], PCS, &m, &len), 0);
		ck_assert_uint_eq(len, obj_chunk_len(i));
		ck_assert_mem_eq(m.data, data + (size_t)i * PCS, len);
		if (store_packed(st, &k[i]))
			ck_assert_int_eq((uint8_t *)m.data - (uint8_t *)m.map,
					 (long)i * PCS % page);
		ck_assert_int_eq(munmap(m.map, m.map_len), 0);
	}
	free(back);
}

/*
 * The first store_open_object makes the pack from the chunk files and
 * removes them; the pack holds the object's bytes alone; each chunk still
 * reads, copied and mapped; all of it survives a reopen (the scan), and a
 * walk sees each chunk once.  What cannot be packed says why: a chunk
 * missing, compressed, or with its header in its file.
 */
START_TEST(pack_made_and_read)
{
	struct store *st = open_store(dir, 0);
	uint8_t *data = malloc(PSIZE);
	struct store_file_id checked = {0};
	struct chunk_key k[PN], k2[PN];
	struct store_stats ss;
	char path[1024], args[1200], *out = NULL;
	struct stat sb;
	struct tally t;
	int fd = -1;

	fill_random(data, PSIZE, 71);
	obj_keys(k, "/data/obj.bin");
	ck_assert_int_eq(
	    store_open_object(st, k, PN, PCS, PSIZE, &checked, &fd), -ENOENT);
	put_object(st, k, data);
	ck_assert(!store_packed(st, &k[0]));
	ck_assert_int_eq(
	    store_open_object(st, k, PN, PCS, PSIZE - PCS, &checked, &fd),
	    -EINVAL);
	object_reads(st, k, data, &checked);
	pack_path(dir, &k[0], ".pack", path, sizeof(path));
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_size, PSIZE);
	ck_assert_uint_eq(checked.ino, sb.st_ino);
	pack_path(dir, &k[0], ".idx", path, sizeof(path));
	ck_assert_int_eq(access(path, F_OK), 0);
	for (unsigned i = 0; i < PN; i++) {
		chunk_path(dir, &k[i], path, sizeof(path));
		ck_assert_int_eq(access(path, F_OK), -1);
		ck_assert(store_packed(st, &k[i]));
		ck_assert(store_has(st, &k[i]));
	}
	chunks_read(st, k, data);
	object_reads(st, k, data, &checked);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, PN);
	ck_assert_uint_eq(ss.packs, 1);
	ck_assert_uint_eq(ss.corrupt, 0);
	/* A chunk fetched again meanwhile: the pack has it already. */
	ck_assert_int_eq(store_put(st, &k[1], data + PCS, PCS), 0);
	chunk_path(dir, &k[1], path, sizeof(path));
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert(store_packed(st, &k[1]));
	store_close(st);

	st = open_store(dir, 0);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, PN);
	ck_assert_uint_eq(ss.packs, 1);
	for (unsigned i = 0; i < PN; i++)
		ck_assert(store_packed(st, &k[i]));
	chunks_read(st, k, data);
	memset(&checked, 0, sizeof(checked));
	object_reads(st, k, data, &checked);
	t = tally(dir, 0);
	ck_assert_uint_eq(t.n, PN);
	ck_assert_uint_eq(t.bad, 0);
	t = tally(dir, STORE_WALK_VERIFY);
	ck_assert_uint_eq(t.n, PN);
	ck_assert_uint_eq(t.bad, 0);
	store_close(st);
	snprintf(args, sizeof(args), "stats --cache-dir '%s'", dir);
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_ptr_nonnull(strstr(out, "4 chunks,"));
	ck_assert_ptr_nonnull(strstr(out, ", 4 in packs"));
	free(out);
	st = open_store(dir, 0);

	/* Not all cached: nothing made. */
	obj_keys(k2, "/data/partial.bin");
	for (unsigned i = 0; i + 1 < PN; i++)
		ck_assert_int_eq(store_put(st, &k2[i], data, obj_chunk_len(i)),
				 0);
	ck_assert_int_eq(
	    store_open_object(st, k2, PN, PCS, PSIZE, &checked, &fd), -ENOENT);
	chunk_path(dir, &k2[0], path, sizeof(path));
	ck_assert_int_eq(access(path, F_OK), 0);
	/* Compressed: read through the mount. */
	fill_text(data, PSIZE, 72);
	obj_keys(k2, "/data/text.bin");
	put_object(st, k2, data);
	ck_assert_int_eq(
	    store_open_object(st, k2, PN, PCS, PSIZE, &checked, &fd), -ENOTSUP);
	ck_assert(!store_packed(st, &k2[0]));
	store_close(st);

	/* Headers in the files (a cache without xattrs): no pack. */
	inline_hdr = true;
	st = open_store(dir, 0);
	fill_random(data, PSIZE, 73);
	obj_keys(k2, "/data/inline.bin");
	put_object(st, k2, data);
	ck_assert_int_eq(
	    store_open_object(st, k2, PN, PCS, PSIZE, &checked, &fd), -ENOTSUP);
	chunks_read(st, k2, data);
	store_close(st);
	free(data);
}
END_TEST

/* Truncates path to n bytes. */
static void cut_to(const char *path, off_t n)
{
	ck_assert_int_eq(truncate(path, n), 0);
}

/*
 * A pack damaged between mounts is never served, and goes whole (its
 * chunks are fetched again): found by the open that hands it over (0), by
 * a read of one chunk (1), by `wharf cache verify`'s walk (2), or by the
 * scan at open: a pack cut short (3), a damaged index (4).  A pack cut
 * short while the store is open goes whole at its next read (5).
 */
START_TEST(pack_damaged)
{
	struct store *st = open_store(dir, 0);
	uint8_t *data = malloc(PSIZE), *back = malloc(PCS);
	struct store_file_id checked = {0};
	char path[1024], idx[1024];
	struct chunk_key k[PN];
	struct store_stats ss;
	struct timespec ts[2];
	struct stat sb;
	struct tally t;
	size_t len;
	int fd = -1;

	fill_random(data, PSIZE, 81 + _i);
	obj_keys(k, "/data/obj.bin");
	put_object(st, k, data);
	object_reads(st, k, data, &checked);
	store_close(st);
	pack_path(dir, &k[0], ".pack", path, sizeof(path));
	pack_path(dir, &k[0], ".idx", idx, sizeof(idx));
	ck_assert_int_eq(stat(path, &sb), 0);
	switch (_i) {
	case 0:
	case 1:
	case 2:
		/* In chunk 1, the mtime kept: only the bytes tell. */
		flip_byte(path, PCS + 999, 0x20);
		ts[0] = sb.st_atim;
		ts[1] = sb.st_mtim;
		ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
		break;
	case 3:
		cut_to(path, PSIZE - 1);
		break;
	case 4:
		flip_byte(idx, 70, 0x01);
		break;
	default:
		break; /* cut below, while the store is open */
	}
	if (_i == 2) {
		t = tally(dir, STORE_WALK_VERIFY);
		ck_assert_uint_eq(t.n, PN);
		ck_assert_uint_eq(t.bad, PN);
		ck_assert_uint_eq(t.removed, PN);
	}
	st = open_store(dir, 0);
	if (_i == 0) {
		/* checked names this very file: a new mount checks anew. */
		memset(&checked, 0, sizeof(checked));
		ck_assert_int_eq(
		    store_open_object(st, k, PN, PCS, PSIZE, &checked, &fd),
		    -EBADMSG);
	} else if (_i == 1) {
		ck_assert_int_eq(store_get(st, &k[0], back, PCS, &len), 0);
		ck_assert_int_eq(store_get(st, &k[1], back, PCS, &len),
				 -EBADMSG);
	} else if (_i == 5) {
		char log[1100], *said;
		size_t said_len;
		int saved;
		FILE *f;

		/* Both of its files go, not the index alone, and the log
		 * says why. */
		cut_to(path, PSIZE - 1);
		snprintf(log, sizeof(log), "%s.log", dir);
		fflush(stderr);
		saved = dup(STDERR_FILENO);
		f = fopen(log, "w");
		ck_assert_ptr_nonnull(f);
		ck_assert_int_ge(dup2(fileno(f), STDERR_FILENO), 0);
		ck_assert_int_eq(store_get(st, &k[1], back, PCS, &len),
				 -EBADMSG);
		fflush(stderr);
		ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
		close(saved);
		fclose(f);
		said = fx_read_file(log, &said_len);
		ck_assert_ptr_nonnull(said);
		ck_assert_msg(strstr(said, "pack truncated") &&
				  strstr(said, "will be fetched again"),
			      "log: %s", said);
		free(said);
		unlink(log);
	}
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(access(idx, F_OK), -1);
	for (unsigned i = 0; i < PN; i++) {
		ck_assert(!store_has(st, &k[i]));
		ck_assert_int_eq(store_get(st, &k[i], back, PCS, &len),
				 -ENOENT);
	}
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, 0);
	ck_assert_uint_eq(ss.packs, 0);
	/* The scan's removals count too (3, 4): only `wharf cache verify`
	 * removed it outside the store (2). */
	ck_assert_uint_eq(ss.corrupt, _i == 2 ? 0 : 1);
	/* Fetched again, it is packed again. */
	put_object(st, k, data);
	memset(&checked, 0, sizeof(checked));
	object_reads(st, k, data, &checked);
	store_close(st);
	free(data);
	free(back);
}
END_TEST

struct evicted {
	struct chunk_key k[PN];
	unsigned n, of_object;
};

static void count_evicted(void *arg, const struct chunk_key *key)
{
	struct evicted *ev = arg;

	ev->n++;
	for (unsigned i = 0; i < PN; i++)
		ev->of_object += !memcmp(key->b, ev->k[i].b, 16);
}

/*
 * A pack is evicted whole, and an open of it keeps reading its bytes
 * after that (the kernel holds the file); a cap that cannot hold the pack
 * beside its chunk files for a moment makes none.
 */
START_TEST(pack_evicted_whole)
{
	struct evicted ev = {0};
	/* The chunks' blocks twice (chunk files and pack), and a little. */
	struct store_config cfg = {.dir = dir,
				   .max_bytes = 2 * PN * 73728 + 8192,
				   .evicted = count_evicted,
				   .evicted_arg = &ev};
	struct store_file_id checked = {0};
	uint8_t *data = malloc(PSIZE), *back = malloc(PSIZE);
	struct store *st = NULL;
	struct store_stats ss;
	struct chunk_key k;
	char path[1024];
	char *err = NULL;
	int fd = -1;

	ck_assert_int_eq(store_open(&cfg, &st, &err), 0);
	fill_random(data, PSIZE, 91);
	obj_keys(ev.k, "/data/obj.bin");
	put_object(st, ev.k, data);
	ck_assert_int_eq(
	    store_open_object(st, ev.k, PN, PCS, PSIZE, &checked, &fd), 0);
	/* The chunk files the pack replaced are reported gone: a mapping
	 * of one would keep its blocks. */
	ck_assert_uint_eq(ev.n, PN);
	ck_assert_uint_eq(ev.of_object, PN);
	ev.n = ev.of_object = 0;
	/* Newer chunks push the pack out: all of it at once. */
	for (unsigned i = 0; ev.of_object == 0; i++) {
		ck_assert_uint_lt(i, 20);
		fill_random(back, PCS, 100 + i);
		key_n(&k, i);
		ck_assert_int_eq(store_put(st, &k, back, PCS), 0);
		store_get_stats(st, &ss);
		ck_assert_uint_le(ss.bytes_on_disk, cfg.max_bytes);
	}
	ck_assert_uint_eq(ev.of_object, PN);
	ck_assert_uint_eq(ss.packs, 0);
	pack_path(dir, &ev.k[0], ".pack", path, sizeof(path));
	ck_assert_int_eq(access(path, F_OK), -1);
	pack_path(dir, &ev.k[0], ".idx", path, sizeof(path));
	ck_assert_int_eq(access(path, F_OK), -1);
	for (unsigned i = 0; i < PN; i++)
		ck_assert(!store_has(st, &ev.k[i]));
	ck_assert_int_eq(pread(fd, back, PSIZE, 0), PSIZE);
	ck_assert_mem_eq(back, data, PSIZE);
	ck_assert_int_eq(close(fd), 0);
	store_close(st);

	/* Room for the chunks, not for the pack beside them. */
	fx_rmtree(dir);
	cfg.max_bytes = PN * 73728 + 8192;
	ck_assert_int_eq(store_open(&cfg, &st, &err), 0);
	put_object(st, ev.k, data);
	ck_assert_int_eq(
	    store_open_object(st, ev.k, PN, PCS, PSIZE, &checked, &fd),
	    -ENOSPC);
	chunks_read(st, ev.k, data);
	store_close(st);
	free(data);
	free(back);
}
END_TEST

/*
 * An object stored compressed makes no pack, and asking for one evicts
 * nothing: the store finds that out before it makes room for the pack.
 */
START_TEST(pack_compressed_evicts_nothing)
{
	const uint64_t pdisk = (PSIZE + 4095) / 4096 * 4096;
	struct store_config cfg = {.dir = dir};
	uint8_t *data = malloc(PSIZE), *other = malloc(PCS);
	struct store *st = NULL;
	struct store_stats ss;
	struct chunk_key k[PN], o;
	char *err = NULL;

	fill_text(data, PSIZE, 95);
	obj_keys(k, "/data/text.bin");
	fill_random(other, PCS, 96);
	key_n(&o, 7);
	st = open_store(dir, 0);
	put_object(st, k, data);
	ck_assert_int_eq(store_put(st, &o, other, PCS), 0);
	store_get_stats(st, &ss);
	store_close(st);
	/* Room for the object's chunks and a pack beside them, but not for
	 * the other chunk too: making the pack would evict it. */
	cfg.max_bytes = ss.bytes_on_disk - 73728 + pdisk + 73728 / 2;
	ck_assert_int_eq(store_open(&cfg, &st, &err), 0);
	ck_assert_int_eq(store_pack_object(st, k, PN, PCS, PSIZE), -ENOTSUP);
	ck_assert(store_has(st, &o));
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.evictions, 0);
	ck_assert_uint_eq(ss.packs, 0);
	for (unsigned i = 0; i < PN; i++) {
		size_t len = 0;

		ck_assert_int_eq(store_get(st, &k[i], other, PCS, &len), 0);
		ck_assert_mem_eq(other, data + (size_t)i * PCS, len);
	}
	store_close(st);
	free(data);
	free(other);
}
END_TEST

/* Copies file from to to, with its header xattr. */
static void copy_chunk_file(const char *from, const char *to)
{
	uint8_t h[HDR];
	size_t n = 0;
	void *buf;
	FILE *f;

	ck_assert_int_eq(getxattr(from, HDR_XATTR, h, HDR), HDR);
	buf = fx_read_file(from, &n);
	ck_assert_ptr_nonnull(buf);
	f = fopen(to, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(setxattr(to, HDR_XATTR, h, HDR, 0), 0);
	free(buf);
}

/*
 * What a crash while a pack is made leaves is cleaned up at open: a chunk
 * file beside the pack that holds it (the pack wins), an index alone, a
 * pack's bytes alone.
 */
START_TEST(pack_crash_leftovers)
{
	struct store *st = open_store(dir, 0);
	uint8_t *data = malloc(PSIZE);
	struct store_file_id checked = {0};
	char chunk[1024], aside[1024], path[1024];
	struct chunk_key k[PN], k2[PN];
	struct store_stats ss;
	struct tally t;
	FILE *f;

	fill_random(data, PSIZE, 95);
	obj_keys(k, "/data/obj.bin");
	put_object(st, k, data);
	chunk_path(dir, &k[2], chunk, sizeof(chunk));
	snprintf(aside, sizeof(aside), "%s/aside", dir);
	copy_chunk_file(chunk, aside);
	object_reads(st, k, data, &checked);
	store_close(st);
	ck_assert_int_eq(rename(aside, chunk), 0);
	/* Halves of a pack of another object. */
	obj_keys(k2, "/data/other.bin");
	pack_path(dir, &k2[0], ".idx", path, sizeof(path));
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fclose(f), 0);
	pack_path(dir, &k2[1], ".pack", path, sizeof(path));
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fclose(f), 0);
	/* A walk while such a pack is being made skips it. */
	t = tally(dir, 0);
	ck_assert_uint_eq(t.bad, 0);

	st = open_store(dir, 0);
	ck_assert_int_eq(access(chunk, F_OK), -1);
	pack_path(dir, &k2[0], ".idx", path, sizeof(path));
	ck_assert_int_eq(access(path, F_OK), -1);
	pack_path(dir, &k2[1], ".pack", path, sizeof(path));
	ck_assert_int_eq(access(path, F_OK), -1);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, PN);
	ck_assert(store_packed(st, &k[2]));
	chunks_read(st, k, data);
	store_close(st);
	free(data);
}
END_TEST

/* Records that an object (obj_keys's) matched its origin's checksum, as
 * a mount does. */
static void record_sum(struct store *st, const char *path, const uint8_t *data,
		       enum checksum_algo a)
{
	char text[CHECKSUM_TEXT_MAX];
	struct checksum_ctx ctx;
	struct checksum c;
	struct store_sum s = {.source = "http://origin/",
			      .path = path,
			      .version = "etag-9",
			      .size = PSIZE,
			      .mtime = 1700000000,
			      .chunk_size = PCS};

	ck_assert_int_eq(checksum_begin(&ctx, a), 0);
	checksum_feed(&ctx, data, PSIZE);
	checksum_end(&ctx, &c);
	s.digest = checksum_format(&c, text);
	ck_assert_int_eq(store_sum_record(st, &s), 0);
}

/* `wharf cache verify` checks the objects on record against their
 * origin's checksums: a chunk changed after the fact whose own checksum
 * was made to match (store_put writes one) is found by them alone. */
START_TEST(cli_verify_origin_sums)
{
	char *cache = strdupf("%s/cache", dir), *out = NULL, *args;
	struct store *st = open_store(cache, 0);
	uint8_t *data = malloc(PSIZE), *bad = malloc(PCS);
	struct chunk_key a[PN], b[PN], p[PN];
	char path[1024];
	int rc;

	fill_random(data, PSIZE, 5);
	obj_keys(a, "a b.bin");
	obj_keys(b, "md5.bin");
	obj_keys(p, "packed.bin");
	put_object(st, a, data);
	record_sum(st, "a b.bin", data, CHECKSUM_CRC32C);
	put_object(st, b, data);
	record_sum(st, "md5.bin", data, CHECKSUM_MD5);
	put_object(st, p, data);
	/* a pack where the filesystem keeps xattrs: read as one file */
	rc = store_pack_object(st, p, PN, PCS, PSIZE);
	ck_assert_msg(rc == 0 || rc == -ENOTSUP, "%d", rc);
	record_sum(st, "packed.bin", data, CHECKSUM_SHA256);
	/* a second line of the same object: checked once */
	record_sum(st, "a b.bin", data, CHECKSUM_CRC32C);
	store_close(st);
	ck_assert_int_eq(fx_sh("echo 'not a record' >> '%s/sums'", cache), 0);

	args = strdupf("verify --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_msg(strstr(out, "3 objects checked against their origin's "
				  "checksum: 3 good, 0 bad; 0 not cached "
				  "whole"),
		      "verify said: %s", out);
	free(out);

	st = open_store(cache, 0);
	memcpy(bad, data + 2 * PCS, PCS);
	bad[100] ^= 1;
	ck_assert_int_eq(store_put(st, &a[2], bad, PCS), 0);
	ck_assert_int_eq(store_put(st, &b[2], bad, PCS), 0);
	store_close(st);
	ck_assert_uint_eq(tally(cache, STORE_WALK_VERIFY).bad, 0);
	ck_assert_int_eq(wharf(args, &out), 1);
	ck_assert_msg(strstr(out, "http://origin/a b.bin (version etag-9): "
				  "its cached bytes give crc32c:") &&
			  strstr(out, ", not the origin's crc32c:") &&
			  strstr(out, "http://origin/md5.bin (version etag-9): "
				      "its cached bytes give md5:") &&
			  strstr(out, "; its chunks removed") &&
			  strstr(out, ": 1 good, 2 bad"),
		      "verify said: %s", out);
	free(out);
	for (unsigned i = 0; i < PN; i++) {
		chunk_path(cache, &a[i], path, sizeof(path));
		ck_assert_int_eq(access(path, F_OK), -1);
		chunk_path(cache, &b[i], path, sizeof(path));
		ck_assert_int_eq(access(path, F_OK), -1);
	}
	/* What is left is good; the rest is not cached whole. */
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_msg(strstr(out, "1 objects checked against their origin's "
				  "checksum: 1 good, 0 bad; 2 not cached "
				  "whole"),
		      "verify said: %s", out);
	free(out);
	/* emptied with the cache */
	snprintf(path, sizeof(path), "%s/sums", cache);
	ck_assert_int_eq(access(path, F_OK), 0);
	free(args);
	args = strdupf("clear --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, NULL), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	free(args);
	free(data);
	free(bad);
	free(cache);
}
END_TEST

/* ---- seals: a later open trusts a file a check found good ---- */

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

static Suite *suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("store");
	TCase *cli = tcase_create("cli");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hash_known_values);
	tcase_add_test(tc, keys);
	tcase_add_test(tc, key_layout);
	tcase_add_test(tc, golden_keys_and_sums);
	tcase_add_loop_test(tc, golden_xxh64_files, 0, 2);
	tcase_add_loop_test(tc, round_trip, 0, 2);
	tcase_add_test(tc, small_buffer);
	tcase_add_test(tc, small_chunk_sampled);
	tcase_add_loop_test(tc, corrupt_byte, 0, 2);
	tcase_add_loop_test(tc, truncated, 0, 2);
	tcase_add_loop_test(tc, bad_checksum, 0, 2);
	tcase_add_test(tc, wrong_key);
	tcase_add_test(tc, lost_xattrs);
	tcase_add_loop_test(tc, xxh64_chunks_read, 0, 2);
	tcase_add_loop_test(tc, empty_chunk_checked, 0, 2);
	tcase_add_loop_test(tc, bad_header_fields, 0, 2);
	tcase_add_loop_test(tc, mapped, 0, 2);
	tcase_add_test(tc, open_raw);
	tcase_add_loop_test(tc, always_raw, 0, 2);
	tcase_add_test(tc, cap_holds);
	tcase_add_test(tc, lru_order);
	tcase_add_test(tc, lock_one_mount);
	tcase_add_test(tc, lock_waits_for_exiting_holder);
	tcase_add_test(tc, mode_0700);
	tcase_add_test(tc, foreign_dir_refused);
	tcase_add_test(tc, foreign_owner_refused);
	tcase_add_test(tc, planted_links_refused);
	tcase_add_test(tc, fifo_chunk_skipped);
	tcase_add_test(tc, default_dir_without_home);
	tcase_add_test(tc, persistence);
	tcase_add_loop_test(tc, recency_survives_remount, 0, 2);
	tcase_add_test(tc, disk_full);
	tcase_add_test(tc, concurrency);
	tcase_add_test(tc, prune_and_clear);
	tcase_add_test(tc, pack_made_and_read);
	tcase_add_loop_test(tc, pack_damaged, 0, 6);
	tcase_add_test(tc, pack_evicted_whole);
	tcase_add_test(tc, pack_compressed_evicts_nothing);
	tcase_add_test(tc, pack_crash_leftovers);
	tcase_add_loop_test(tc, sealed_chunks, 0, 5);
	tcase_add_test(tc, racy_seal_not_kept);
	tcase_add_test(tc, seals_version_1_read);
	tcase_add_loop_test(tc, sealed_pack, 0, 5);
	tcase_add_test(tc, vanished_counted);
	tcase_add_test(tc, touched_stays_checked);
	tcase_add_loop_test(tc, reload_in_mount_sealed, 0, 5);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(cli, setup, teardown);
	tcase_set_timeout(cli, 120);
	tcase_add_test(cli, cli_verify);
	tcase_add_test(cli, cli_verify_origin_sums);
	tcase_add_test(cli, cli_verify_mounted);
	tcase_add_test(cli, cli_prune_clear);
	tcase_add_test(cli, cli_stats_ls);
	tcase_add_test(cli, cli_not_a_cache);
	tcase_add_test(cli, cli_bad_options);
	suite_add_tcase(s, cli);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	root = fx_tmpdir("store");
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	/* A failed disk_full test may have left its tmpfs mounted. */
	fx_sh("for m in %s/*/tiny; do mountpoint -q \"$m\" && "
	      "umount -l \"$m\"; done; true",
	      root);
	fx_rmtree(root);
	free(root);
	return failed ? 1 : 0;
}
