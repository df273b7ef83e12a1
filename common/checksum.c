/* Whole-object checksums: see checksum.h. */
#include "config.h"

#include "checksum.h"
#include "text.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

/* The Castagnoli polynomial, bit-reversed (CRCs here are reflected). */
#define POLY 0x82f63b78u

/* Slicing by 8: table[k][b] is the CRC of byte b followed by k zeros. */
static uint32_t table[8][256];
/* x2n[k] is x^(2^k) modulo the polynomial, for crc32c_combine. */
static uint32_t x2n[32];
static bool hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* a * b modulo the polynomial, both reflected (x^0 is the top bit). */
static uint32_t mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (uint32_t bit = 1u << 31; bit; bit >>= 1) {
		if (a & bit)
			prod ^= b;
		/* b *= x */
		b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
	}
	return prod;
}

static void init(void)
{
	uint32_t p;

	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;

		for (int i = 0; i < 8; i++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][b] = c;
	}
	for (uint32_t b = 0; b < 256; b++)
		for (int k = 1; k < 8; k++)
			table[k][b] = (table[k - 1][b] >> 8) ^
				      table[0][table[k - 1][b] & 0xff];
	p = 1u << 30; /* x^1 */
	for (int k = 0; k < 32; k++) {
		x2n[k] = p;
		p = mulmod(p, p);
	}
#if defined(__x86_64__)
	hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
		n--;
	}
	for (; n >= 8; n -= 8, p += 8) {
		uint32_t lo, hi;

		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
		lo ^= c; /* little-endian: the code runs where that holds */
		c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
		    table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
		    table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
		    table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c64;

	while (n && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8(c, *p++);
		n--;
	}
	c64 = c;
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c64 = _mm_crc32_u64(c64, w);
	}
	c = (uint32_t)c64;
	while (n--)
		c = _mm_crc32_u8(c, *p++);
	return c;
}
#endif

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
	uint32_t c = ~crc;

	pthread_once(&once, init);
#if defined(__x86_64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (hw)
		return ~crc_hw(c, data, len);
#endif
	return ~crc_sw(c, data, len);
}

uint32_t crc32c_update_sw(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&once, init);
	return ~crc_sw(~crc, data, len);
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	/* crc(A.B) = crc_a * x^(8 len_b) + crc_b (mod P): the inversions at
	 * both ends cancel, since CRCs of equal lengths are linear. */
	uint32_t xp = 1u << 31; /* x^0 */
	unsigned k = 3;		/* 8 len_b = len_b * 2^3 */

	pthread_once(&once, init);
	for (uint64_t n = len_b; n; n >>= 1, k++)
		if (n & 1)
			xp = mulmod(x2n[k & 31], xp);
	return mulmod(xp, crc_a) ^ crc_b;
}

static const struct {
	const char *name;
	uint8_t len;
} algos[] = {
    [CHECKSUM_NONE] = {"", 0},
    [CHECKSUM_CRC32C] = {"crc32c", 4},
    [CHECKSUM_MD5] = {"md5", 16},
    [CHECKSUM_SHA256] = {"sha256", 32},
};

const char *checksum_algo_name(enum checksum_algo a)
{
	return algos[a].name;
}

#define WEAK_MD5 "md5-etag"

int checksum_parse(const char *text, struct checksum *out)
{
	const char *colon = strchr(text, ':');
	bool weak;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!colon)
		return -EINVAL;
	n = (size_t)(colon - text);
	weak = n == strlen(WEAK_MD5) && !strncasecmp(text, WEAK_MD5, n);
	if (weak) {
		text = "md5";
		n = 3;
	}
	for (int a = CHECKSUM_CRC32C; a <= CHECKSUM_SHA256; a++) {
		const char *hex = colon + 1;

		if (strlen(algos[a].name) != n ||
		    strncasecmp(text, algos[a].name, n) ||
		    strlen(hex) != 2u * algos[a].len)
			continue;
		for (unsigned i = 0; i < algos[a].len; i++) {
			const int hi = hex_value(hex[2 * i]);
			const int lo = hex_value(hex[2 * i + 1]);

			if (hi < 0 || lo < 0)
				return -EINVAL;
			out->v[i] = (uint8_t)(hi << 4 | lo);
		}
		out->algo = (enum checksum_algo)a;
		out->weak = weak;
		out->len = algos[a].len;
		return 0;
	}
	return -EINVAL;
}

const char *checksum_format(const struct checksum *c, char *out)
{
	size_t n = (size_t)snprintf(out, CHECKSUM_TEXT_MAX, "%s",
				    c->weak ? WEAK_MD5 : algos[c->algo].name);

	if (c->algo == CHECKSUM_NONE)
		return out;
	out[n++] = ':';
	for (unsigned i = 0; i < c->len; i++)
		n += (size_t)snprintf(out + n, CHECKSUM_TEXT_MAX - n, "%02x",
				      c->v[i]);
	return out;
}

void checksum_from_crc32c(uint32_t crc, struct checksum *out)
{
	memset(out, 0, sizeof(*out));
	out->algo = CHECKSUM_CRC32C;
	out->len = 4;
	out->v[0] = (uint8_t)(crc >> 24);
	out->v[1] = (uint8_t)(crc >> 16);
	out->v[2] = (uint8_t)(crc >> 8);
	out->v[3] = (uint8_t)crc;
}

bool checksum_equal(const struct checksum *a, const struct checksum *b)
{
	return a->algo == b->algo && a->len == b->len &&
	       !memcmp(a->v, b->v, a->len);
}

int checksum_begin(struct checksum_ctx *ctx, enum checksum_algo algo)
{
	const EVP_MD *md = algo == CHECKSUM_MD5	     ? EVP_md5()
			   : algo == CHECKSUM_SHA256 ? EVP_sha256()
						     : NULL;

	memset(ctx, 0, sizeof(*ctx));
	ctx->algo = algo;
	if (algo == CHECKSUM_CRC32C)
		return 0;
	if (!md)
		return -EINVAL;
	ctx->md = EVP_MD_CTX_new();
	if (!ctx->md)
		return -ENOMEM;
	if (!EVP_DigestInit_ex(ctx->md, md, NULL)) {
		checksum_abort(ctx);
		return -ENOMEM;
	}
	return 0;
}

void checksum_feed(struct checksum_ctx *ctx, const void *data, size_t len)
{
	if (ctx->algo == CHECKSUM_CRC32C)
		ctx->crc = crc32c_update(ctx->crc, data, len);
	else
		EVP_DigestUpdate(ctx->md, data, len);
}

void checksum_feed_crc32c(struct checksum_ctx *ctx, uint32_t crc, uint64_t len)
{
	ctx->crc = crc32c_combine(ctx->crc, crc, len);
}

void checksum_end(struct checksum_ctx *ctx, struct checksum *out)
{
	unsigned n = 0;

	if (ctx->algo == CHECKSUM_CRC32C) {
		checksum_from_crc32c(ctx->crc, out);
		return;
	}
	memset(out, 0, sizeof(*out));
	out->algo = ctx->algo;
	EVP_DigestFinal_ex(ctx->md, out->v, &n);
	out->len = (uint8_t)n;
	checksum_abort(ctx);
}

void checksum_abort(struct checksum_ctx *ctx)
{
	EVP_MD_CTX_free(ctx->md);
	ctx->md = NULL;
}
