/* common/jsonw (the writer), exact text, and read back by common/json. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "jsonw.h"

/* A writer on a memory stream; done() closes it and returns the text. */
struct out {
	struct jsonw w;
	FILE *f;
	char *text;
	size_t len;
};

static struct jsonw *start(struct out *o)
{
	o->text = NULL;
	o->len = 0;
	o->f = open_memstream(&o->text, &o->len);
	ck_assert_ptr_nonnull(o->f);
	jsonw_init(&o->w, o->f);
	return &o->w;
}

static char *done(struct out *o)
{
	ck_assert_int_eq(fclose(o->f), 0);
	ck_assert_uint_eq(o->w.depth, 0);
	return o->text;
}

/* Ends the stream and compares all it holds with want. */
static void expect(struct out *o, const char *want)
{
	char *t = done(o);

	ck_assert_str_eq(t, want);
	free(t);
}

START_TEST(test_inline_nesting)
{
	struct out o;
	struct jsonw *w = start(&o);

	jsonw_object(w, NULL, JSONW_INLINE);
	jsonw_u64(w, "a", 1);
	jsonw_array(w, "b", JSONW_INLINE);
	jsonw_u64(w, NULL, 1);
	jsonw_str(w, NULL, "two");
	jsonw_object(w, NULL, JSONW_INLINE);
	jsonw_bool(w, "c", true);
	jsonw_end(w);
	jsonw_array(w, NULL, JSONW_INLINE);
	jsonw_end(w);
	jsonw_end(w);
	jsonw_object(w, "d", JSONW_INLINE);
	jsonw_end(w);
	/* A block inside an inline container is inline. */
	jsonw_object(w, "e", JSONW_BLOCK);
	jsonw_null(w, "f");
	jsonw_bool(w, "g", false);
	jsonw_end(w);
	jsonw_end(w);
	expect(&o, "{\"a\": 1, \"b\": [1, \"two\", {\"c\": true}, []], "
		   "\"d\": {}, \"e\": {\"f\": null, \"g\": false}}\n");
}
END_TEST

/* The stats file's layout: a block object whose members are inline, a
 * block array of inline objects wrapped by jsonw_break. */
START_TEST(test_block_layout)
{
	struct out o;
	struct jsonw *w = start(&o);

	jsonw_object(w, NULL, JSONW_BLOCK);
	jsonw_str(w, "source", "http://h/");
	jsonw_object(w, "origin", JSONW_INLINE);
	jsonw_u64(w, "requests", 3);
	jsonw_object(w, "ttfb_ms", JSONW_INLINE);
	jsonw_double(w, "p50", 1.5, 3);
	jsonw_end(w);
	jsonw_end(w);
	jsonw_array(w, "hosts", JSONW_BLOCK);
	for (int i = 0; i < 2; i++) {
		jsonw_object(w, NULL, JSONW_INLINE);
		jsonw_str(w, "host", "h");
		jsonw_u64(w, "limit", 8);
		jsonw_break(w);
		jsonw_u64(w, "waiting", 0);
		jsonw_break(w);
		jsonw_str(w, "why", "x");
		jsonw_end(w);
	}
	jsonw_end(w);
	jsonw_array(w, "none", JSONW_BLOCK);
	jsonw_end(w);
	jsonw_object(w, "empty", JSONW_BLOCK);
	jsonw_end(w);
	jsonw_object(w, "nested", JSONW_BLOCK);
	jsonw_u64(w, "n", 1);
	jsonw_end(w);
	jsonw_end(w);
	expect(&o, "{\n"
		   "  \"source\": \"http://h/\",\n"
		   "  \"origin\": {\"requests\": 3, \"ttfb_ms\": "
		   "{\"p50\": 1.500}},\n"
		   "  \"hosts\": [\n"
		   "    {\"host\": \"h\", \"limit\": 8,\n"
		   "     \"waiting\": 0,\n"
		   "     \"why\": \"x\"},\n"
		   "    {\"host\": \"h\", \"limit\": 8,\n"
		   "     \"waiting\": 0,\n"
		   "     \"why\": \"x\"}\n"
		   "  ],\n"
		   "  \"none\": [],\n"
		   "  \"empty\": {},\n"
		   "  \"nested\": {\n"
		   "    \"n\": 1\n"
		   "  }\n"
		   "}\n");
}
END_TEST

/* A break lines up under the first member wherever the object began, and
 * a break before the end or in a block container does nothing. */
START_TEST(test_break)
{
	struct out o;
	struct jsonw *w = start(&o);

	jsonw_object(w, NULL, JSONW_INLINE);
	jsonw_u64(w, "a", 1);
	jsonw_object(w, "bb", JSONW_INLINE);
	jsonw_u64(w, "c", 2);
	jsonw_break(w);
	jsonw_u64(w, "d", 3);
	jsonw_break(w);
	jsonw_end(w);
	jsonw_break(w);
	jsonw_u64(w, "e", 4);
	jsonw_end(w);
	expect(&o, "{\"a\": 1, \"bb\": {\"c\": 2,\n"
		   "                \"d\": 3},\n"
		   " \"e\": 4}\n");

	w = start(&o);
	jsonw_object(w, NULL, JSONW_BLOCK);
	jsonw_u64(w, "a", 1);
	jsonw_break(w);
	jsonw_u64(w, "b", 2);
	jsonw_end(w);
	expect(&o, "{\n  \"a\": 1,\n  \"b\": 2\n}\n");
}
END_TEST

START_TEST(test_empty_and_top)
{
	struct out o;
	struct jsonw *w = start(&o);

	jsonw_object(w, NULL, JSONW_INLINE);
	jsonw_end(w);
	jsonw_array(w, NULL, JSONW_INLINE);
	jsonw_end(w);
	jsonw_object(w, NULL, JSONW_BLOCK);
	jsonw_end(w);
	jsonw_array(w, NULL, JSONW_BLOCK);
	jsonw_end(w);
	/* A scalar as the document, and documents one after another (JSON
	 * lines, as `wharf bench --json` writes them). */
	jsonw_u64(w, NULL, 7);
	jsonw_str(w, NULL, "s");
	expect(&o, "{}\n[]\n{}\n[]\n7\n\"s\"\n");
}
END_TEST

START_TEST(test_escape)
{
	struct out o;
	struct jsonw *w = start(&o);
	char s[256], *t;

	/* Every byte from 1 to 255. */
	for (int i = 1; i < 256; i++)
		s[i - 1] = (char)i;
	s[255] = '\0';
	jsonw_object(w, NULL, JSONW_INLINE);
	jsonw_str(w, "q\"b\\\n", "a \"quoted\" C:\\path\\");
	jsonw_str(w, "all", s);
	jsonw_str(w, "none", NULL);
	jsonw_str(w, "empty", "");
	jsonw_end(w);
	t = done(&o);
	ck_assert_ptr_nonnull(strstr(
	    t,
	    "{\"q\\\"b\\\\\\u000a\": \"a \\\"quoted\\\" C:\\\\path\\\\\", "));
	ck_assert_ptr_nonnull(strstr(
	    t, "\"all\": \"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007"
	       "\\u0008\\u0009\\u000a\\u000b\\u000c\\u000d\\u000e\\u000f"
	       "\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017"
	       "\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f"
	       " !\\\"#$%&'()*+,-./0123456789:;<=>?@"
	       "ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`"
	       "abcdefghijklmnopqrstuvwxyz{|}~\x7f\x80\x81"));
	/* Bytes from 0x80 up, valid UTF-8 or not, go out as they are. */
	ck_assert_ptr_nonnull(strstr(t, "\xfd\xfe\xff\", \"none\": null, "
					"\"empty\": \"\"}\n"));
	free(t);
}
END_TEST

START_TEST(test_numbers)
{
	struct out o;
	struct jsonw *w = start(&o);

	jsonw_array(w, NULL, JSONW_INLINE);
	jsonw_u64(w, NULL, 0);
	jsonw_u64(w, NULL, UINT64_MAX);
	jsonw_i64(w, NULL, -1);
	jsonw_i64(w, NULL, INT64_MIN);
	jsonw_i64(w, NULL, INT64_MAX);
	jsonw_double(w, NULL, 0.1234567, 3);
	jsonw_double(w, NULL, 2.5, 0);
	jsonw_double(w, NULL, 1e6 / 3, 1);
	jsonw_double(w, NULL, 0.0041594, 6);
	jsonw_double(w, NULL, -1.25, 4);
	jsonw_double(w, NULL, NAN, 3);
	jsonw_double(w, NULL, INFINITY, 3);
	jsonw_double(w, NULL, -INFINITY, 3);
	jsonw_end(w);
	expect(&o, "[0, 18446744073709551615, -1, "
		   "-9223372036854775808, 9223372036854775807, "
		   "0.123, 2, 333333.3, 0.004159, -1.2500, "
		   "null, null, null]\n");
}
END_TEST

START_TEST(test_raw)
{
	struct out o;
	struct jsonw *w = start(&o);

	jsonw_object(w, NULL, JSONW_INLINE);
	ck_assert_int_eq(jsonw_raw(w, "ok", "{\n  \"a\": [1, \"}\"]\n}\n"), 0);
	ck_assert_int_eq(jsonw_raw(w, "cut", "{\"a\": [1"), -EINVAL);
	ck_assert_int_eq(jsonw_raw(w, "junk", "{} {}"), -EINVAL);
	ck_assert_int_eq(jsonw_raw(w, "open", "\"abc"), -EINVAL);
	ck_assert_int_eq(jsonw_raw(w, "empty", " "), -EINVAL);
	ck_assert_int_eq(jsonw_raw(w, "none", NULL), 0);
	jsonw_end(w);
	expect(&o, "{\"ok\": {\n  \"a\": [1, \"}\"]\n}\n, "
		   "\"cut\": null, \"junk\": null, \"open\": null, "
		   "\"empty\": null, \"none\": null}\n");
}
END_TEST

/* What the writer writes, common/json reads back the same. */
START_TEST(test_round_trip)
{
	struct out o;
	struct jsonw *w = start(&o);
	struct json s;
	char s1[256], key[64], got[1024], num[64], *err = NULL, *t;
	const char *tok;
	size_t n, toklen;
	bool first = true, afirst = true;
	uint64_t u;
	int members = 0;

	for (int i = 1; i < 256; i++)
		s1[i - 1] = (char)i;
	s1[255] = '\0';
	jsonw_object(w, NULL, JSONW_BLOCK);
	jsonw_str(w, "bytes", s1);
	jsonw_str(w, "k\"\\\t", "v");
	jsonw_u64(w, "big", UINT64_MAX);
	jsonw_i64(w, "neg", -42);
	jsonw_double(w, "d", 2.0 / 3, 4);
	jsonw_array(w, "list", JSONW_BLOCK);
	jsonw_object(w, NULL, JSONW_INLINE);
	jsonw_bool(w, "t", true);
	jsonw_break(w);
	jsonw_null(w, "n");
	jsonw_end(w);
	jsonw_end(w);
	jsonw_end(w);
	t = done(&o);

	json_init(&s, t, strlen(t), "written", &err);
	ck_assert_int_eq(json_expect(&s, '{'), 0);
	while (json_next(&s, '}', &first) == 1) {
		ck_assert_int_eq(json_key(&s, key, sizeof(key)), 0);
		members++;
		if (!strcmp(key, "bytes")) {
			ck_assert_int_eq(json_string(&s, got, sizeof(got), &n),
					 0);
			ck_assert_uint_eq(n, 255);
			ck_assert_mem_eq(got, s1, 256);
		} else if (!strcmp(key, "k\"\\\t")) {
			ck_assert_int_eq(json_string(&s, got, sizeof(got), &n),
					 0);
			ck_assert_str_eq(got, "v");
		} else if (!strcmp(key, "big")) {
			ck_assert_int_eq(json_u64(&s, &u), 0);
			ck_assert_uint_eq(u, UINT64_MAX);
		} else if (!strcmp(key, "neg") || !strcmp(key, "d")) {
			ck_assert_int_eq(json_num_text(&s, num, sizeof(num)),
					 0);
			ck_assert_str_eq(num, key[0] == 'n' ? "-42" : "0.6667");
		} else {
			ck_assert_str_eq(key, "list");
			ck_assert_int_eq(json_expect(&s, '['), 0);
			ck_assert_int_eq(json_next(&s, ']', &afirst), 1);
			ck_assert_int_eq(json_expect(&s, '{'), 0);
			first = true;
			ck_assert_int_eq(json_next(&s, '}', &first), 1);
			ck_assert_int_eq(json_key(&s, key, sizeof(key)), 0);
			ck_assert_str_eq(key, "t");
			ck_assert_int_eq(json_scalar(&s, &tok, &toklen), 0);
			ck_assert_int_eq(strncmp(tok, "true", toklen), 0);
			ck_assert_int_eq(json_next(&s, '}', &first), 1);
			ck_assert_int_eq(json_key(&s, key, sizeof(key)), 0);
			ck_assert_str_eq(key, "n");
			ck_assert_int_eq(json_scalar(&s, &tok, &toklen), 0);
			ck_assert_int_eq(strncmp(tok, "null", toklen), 0);
			ck_assert_int_eq(json_next(&s, '}', &first), 0);
			ck_assert_int_eq(json_next(&s, ']', &afirst), 0);
			first = false;
		}
	}
	ck_assert_ptr_null(err);
	ck_assert_int_eq(members, 6);
	ck_assert_int_eq(json_end(&s), 0);
	free(t);
}
END_TEST

#ifndef NDEBUG
/* A member without its key in an object is a bug of the caller. */
START_TEST(test_misuse)
{
	struct out o;
	struct jsonw *w = start(&o);

	jsonw_object(w, NULL, JSONW_INLINE);
	jsonw_u64(w, NULL, 1);
}
END_TEST
#endif

static Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("writer");

	tcase_add_test(tc, test_inline_nesting);
	tcase_add_test(tc, test_block_layout);
	tcase_add_test(tc, test_break);
	tcase_add_test(tc, test_empty_and_top);
	tcase_add_test(tc, test_escape);
	tcase_add_test(tc, test_numbers);
	tcase_add_test(tc, test_raw);
	tcase_add_test(tc, test_round_trip);
#ifndef NDEBUG
	tcase_add_test_raise_signal(tc, test_misuse, SIGABRT);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(json_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
