/* checksum: CRC32C against published vectors and a bit-at-a-time
 * reference, its combination, MD5 and SHA-256, and the text form. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"

/* The CRC one bit at a time: slow, and obviously the definition. */
static uint32_t crc_ref(const uint8_t *p, size_t n)
{
	uint32_t c = ~0u;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

static uint8_t *random_bytes(size_t n, unsigned seed)
{
	uint8_t *b = malloc(n + 16);

	ck_assert_ptr_nonnull(b);
	srand(seed);
	for (size_t i = 0; i < n + 16; i++)
		b[i] = (uint8_t)rand();
	return b;
}

START_TEST(crc32c_vectors)
{
	uint8_t z[32] = {0}, ff[32];

	memset(ff, 0xff, sizeof(ff));
	ck_assert_uint_eq(crc32c_update(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(crc32c_update(0, "", 0), 0);
	/* RFC 3720, B.4 */
	ck_assert_uint_eq(crc32c_update(0, z, 32), 0x8a9136aau);
	ck_assert_uint_eq(crc32c_update(0, ff, 32), 0x62a8ab43u);
	/* in pieces */
	ck_assert_uint_eq(
	    crc32c_update(crc32c_update(0, "1234", 4), "56789", 5),
	    0xe3069283u);
}
END_TEST

/* Every length and alignment the word loop and its edges see. */
START_TEST(crc32c_matches_reference)
{
	uint8_t *b = random_bytes(4096, 7);

	for (size_t off = 0; off < 9; off++)
		for (size_t n = 0; n < 300; n += 1 + n / 16) {
			ck_assert_uint_eq(crc32c_update(0, b + off, n),
					  crc_ref(b + off, n));
			ck_assert_uint_eq(crc32c_update_sw(0, b + off, n),
					  crc_ref(b + off, n));
		}
	ck_assert_uint_eq(crc32c_update(0, b + 3, 4093), crc_ref(b + 3, 4093));
	free(b);
}
END_TEST

START_TEST(crc32c_combines)
{
	const size_t n = (5u << 20) + 7;
	uint8_t *b = random_bytes(n, 11);
	const uint32_t whole = crc32c_update(0, b, n);
	const size_t cuts[] = {0, 1, 7, 4096, 1u << 20, n - 1, n};

	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		const size_t k = cuts[i];

		ck_assert_uint_eq(crc32c_combine(crc32c_update(0, b, k),
						 crc32c_update(0, b + k, n - k),
						 n - k),
				  whole);
	}
	/* as an object of 1 MiB chunks is checked */
	{
		struct checksum_ctx ctx;
		struct checksum got, want;

		ck_assert_int_eq(checksum_begin(&ctx, CHECKSUM_CRC32C), 0);
		for (size_t off = 0; off < n; off += 1u << 20) {
			const size_t len =
			    n - off < (1u << 20) ? n - off : 1u << 20;

			checksum_feed_crc32c(
			    &ctx, crc32c_update(0, b + off, len), len);
		}
		checksum_end(&ctx, &got);
		checksum_from_crc32c(whole, &want);
		ck_assert(checksum_equal(&got, &want));
	}
	free(b);
}
END_TEST

static void digest_is(enum checksum_algo a, const char *data, const char *text)
{
	struct checksum_ctx ctx;
	struct checksum got;
	char out[CHECKSUM_TEXT_MAX];

	ck_assert_int_eq(checksum_begin(&ctx, a), 0);
	checksum_feed(&ctx, data, strlen(data) / 2);
	checksum_feed(&ctx, data + strlen(data) / 2,
		      strlen(data) - strlen(data) / 2);
	checksum_end(&ctx, &got);
	ck_assert_str_eq(checksum_format(&got, out), text);
}

START_TEST(md5_sha256_crc_digests)
{
	digest_is(CHECKSUM_MD5, "abc", "md5:900150983cd24fb0d6963f7d28e17f72");
	digest_is(CHECKSUM_SHA256, "abc",
		  "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb41"
		  "0ff61f20015ad");
	digest_is(CHECKSUM_CRC32C, "123456789", "crc32c:e3069283");
}
END_TEST

START_TEST(text_form)
{
	static const char *const bad[] = {
	    "",
	    "crc32c",
	    "crc32c:",
	    "crc32c:e306928",
	    "crc32c:e30692833",
	    "crc32c:e306928g",
	    "md5:900150983cd24fb0d6963f7d28e17f7",
	    "sha1:a9993e364706816aba3e25717850c26c9cd0d89d",
	    ":00",
	    "md5 :900150983cd24fb0d6963f7d28e17f72",
	};
	struct checksum a, b;
	char out[CHECKSUM_TEXT_MAX];

	ck_assert_int_eq(checksum_parse("CRC32C:E3069283", &a), 0);
	ck_assert_int_eq(a.algo, CHECKSUM_CRC32C);
	ck_assert_str_eq(checksum_format(&a, out), "crc32c:e3069283");
	checksum_from_crc32c(0xe3069283u, &b);
	ck_assert(checksum_equal(&a, &b));
	ck_assert_int_eq(
	    checksum_parse("md5-etag:900150983cd24fb0d6963f7d28e17f72", &a), 0);
	ck_assert(a.weak);
	ck_assert_int_eq(a.algo, CHECKSUM_MD5);
	ck_assert_str_eq(checksum_format(&a, out),
			 "md5-etag:900150983cd24fb0d6963f7d28e17f72");
	ck_assert_int_eq(
	    checksum_parse("md5:900150983cd24fb0d6963f7d28e17f72", &b), 0);
	ck_assert(!b.weak);
	/* the same value, whatever the ETag's doubt */
	ck_assert(checksum_equal(&a, &b));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(checksum_parse(bad[i], &a) == -EINVAL, "%s",
			      bad[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("checksum");
	TCase *tc = tcase_create("checksum");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, crc32c_vectors);
	tcase_add_test(tc, crc32c_matches_reference);
	tcase_add_test(tc, crc32c_combines);
	tcase_add_test(tc, md5_sha256_crc_digests);
	tcase_add_test(tc, text_form);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
