/* fs/util: size parsing and formatting. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "util.h"

START_TEST(test_parse_size_units)
{
	uint64_t v = 0;

	ck_assert_int_eq(parse_size("123", &v), 0);
	ck_assert_uint_eq(v, 123);
	ck_assert_int_eq(parse_size("4M", &v), 0);
	ck_assert_uint_eq(v, 4u << 20);
	ck_assert_int_eq(parse_size("512k", &v), 0);
	ck_assert_uint_eq(v, 512u << 10);
	ck_assert_int_eq(parse_size("10GiB", &v), 0);
	ck_assert_uint_eq(v, 10ull << 30);
	ck_assert_int_eq(parse_size("2T", &v), 0);
	ck_assert_uint_eq(v, 2ull << 40);
}
END_TEST

START_TEST(test_parse_size_rejects)
{
	uint64_t v = 77;

	ck_assert_int_eq(parse_size("", &v), -EINVAL);
	ck_assert_int_eq(parse_size("-1", &v), -EINVAL);
	ck_assert_int_eq(parse_size("4X", &v), -EINVAL);
	ck_assert_int_eq(parse_size("M", &v), -EINVAL);
	ck_assert_int_eq(parse_size("99999999999T", &v), -EINVAL);
	ck_assert_int_eq(parse_size("4Mfoo", &v), -EINVAL);
	ck_assert_uint_eq(v, 77);
}
END_TEST

START_TEST(test_format_size)
{
	char buf[32];

	ck_assert_str_eq(format_size(999, buf, sizeof(buf)), "999 B");
	ck_assert_str_eq(format_size(1536, buf, sizeof(buf)), "1.5 KiB");
	ck_assert_str_eq(format_size(3ull << 30, buf, sizeof(buf)), "3.0 GiB");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_parse_size_units);
	tcase_add_test(tc, test_parse_size_rejects);
	tcase_add_test(tc, test_format_size);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
