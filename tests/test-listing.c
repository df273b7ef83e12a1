/* listing parsers on fixed inputs: JSON, HTML pages, manifests. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listing.h"

/* Every entry as "name|d|size|mtime;" ('-' for an unknown size). */
struct out {
	char s[8192];
	int n;
	int bad; /* entries marked bad, left out of s */
};

static int put(void *arg, const struct listing_entry *e)
{
	struct out *o = arg;
	size_t l = strlen(o->s);
	char size[32] = "-";

	if (e->bad) {
		o->bad++;
		return 0;
	}
	if (e->has_size)
		snprintf(size, sizeof(size), "%" PRIu64, e->size);
	snprintf(o->s + l, sizeof(o->s) - l, "%s|%c|%s|%" PRId64 ";", e->name,
		 e->is_dir ? 'd' : 'f', size, e->mtime);
	o->n++;
	return 0;
}

/* "name=digest;" per entry. */
static int put_digest(void *arg, const struct listing_entry *e)
{
	struct out *o = arg;
	size_t l = strlen(o->s);

	snprintf(o->s + l, sizeof(o->s) - l, "%s=%s;", e->name,
		 e->digest ? e->digest : "(null)");
	return 0;
}

static int stop_at_two(void *arg, const struct listing_entry *e)
{
	struct out *o = arg;

	(void)e;
	return ++o->n == 2 ? 42 : 0;
}

#define T2026 "1767225600" /* Thu, 01 Jan 2026 00:00:00 GMT */

static int json(const char *s, struct out *o, char **err)
{
	memset(o, 0, sizeof(*o));
	*err = NULL;
	return listing_parse_json(s, strlen(s), put, o, err);
}

static int html(const char *s, struct out *o, char **err)
{
	memset(o, 0, sizeof(*o));
	*err = NULL;
	return listing_parse_html(s, strlen(s), put, o, err);
}

START_TEST(json_nginx)
{
	static const char body[] =
	    "[\n"
	    "{ \"name\":\"a \\\"q\\\" b\\\\.txt\", \"type\":\"file\", "
	    "\"mtime\":\"Thu, 01 Jan 2026 00:00:00 GMT\", \"size\":42 },\n"
	    "{ \"name\":\"d\\u00e9j\\u00e0\", \"type\":\"directory\", "
	    "\"mtime\":\"Thu, 01 Jan 2026 00:00:00 GMT\" },\n"
	    "{ \"name\":\"smile\\ud83d\\ude00 & <tag>\", \"type\":\"file\", "
	    "\"mtime\":\"Thu, 01 Jan 2026 00:00:01 GMT\", "
	    "\"size\":9223372036854775807 }\n"
	    "]\n";
	struct out o;
	char *err;

	ck_assert_int_eq(json(body, &o, &err), 0);
	ck_assert_ptr_null(err);
	ck_assert_int_eq(o.n, 3);
	ck_assert_str_eq(o.s, "a \"q\" b\\.txt|f|42|" T2026 ";"
			      "d\xc3\xa9j\xc3\xa0|d|0|" T2026 ";"
			      "smile\xf0\x9f\x98\x80 & <tag>|f|"
			      "9223372036854775807|1767225601;");
	ck_assert_int_eq(json("  [ ]  ", &o, &err), 0);
	ck_assert_int_eq(o.n, 0);
	/* the callback's value stops the parse */
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(
	    listing_parse_json(body, strlen(body), stop_at_two, &o, &err), 42);
}
END_TEST

START_TEST(json_malformed)
{
	static const char *const bad[] = {
	    "",
	    "{}",
	    "[",
	    "[{",
	    "[{\"name\":\"a\",\"type\":\"file\"",
	    "[{\"name\":\"a\"}]",
	    "[{\"name\":\"a\\q\",\"type\":\"file\"}]",
	    "[{\"name\":\"a\\u12\",\"type\":\"file\"}]",
	    "[{\"name\":\"a\\ud800\",\"type\":\"file\"}]",
	    "[{\"name\":\"a\\u0000\",\"type\":\"file\"}]",
	    "[{\"name\":\"a\",\"type\":\"file\"}] junk",
	    "[{\"name\":\"a\",\"type\":\"file\"},]",
	    "[{\"name\":\"a\" \"type\":\"file\"}]",
	    "[{\"name\":\"a\nb\",\"type\":\"file\"}]",
	};
	struct out o;
	char *err;
	char *huge;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = json(bad[i], &o, &err);

		if (rc != -EINVAL)
			ck_abort_msg("case %zu: rc %d", i, rc);
		ck_assert_ptr_nonnull(err);
		ck_assert_ptr_nonnull(strstr(err, "JSON listing, byte"));
		free(err);
	}
	/* a name far over the limit */
	huge = malloc(100000);
	strcpy(huge, "[{\"name\":\"");
	memset(huge + 10, 'x', 90000);
	strcpy(huge + 90010, "\",\"type\":\"file\"}]");
	ck_assert_int_eq(json(huge, &o, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "too long"));
	free(err);
	free(huge);
}
END_TEST

START_TEST(html_nginx)
{
	static const char body[] =
	    "<html>\r\n<head><title>Index of /html/</title></head>\r\n"
	    "<body>\r\n<h1>Index of /html/</h1><hr><pre>"
	    "<a href=\"../\">../</a>\r\n"
	    "<a href=\"sub/\">sub/</a>                        "
	    "01-Jan-2026 00:00                   -\r\n"
	    "<a href=\"a%20b%26c.bin\">a b&amp;c.bin</a>          "
	    "01-Jan-2026 00:00                1234\r\n"
	    "<a href=\"long-name-abcdefghijklmnopqrstuvwxyz-0123456789-"
	    "abcdefghij.bin\">long-name-abcdefghijklmnopqrstuvwxyz-0123"
	    "456789-ab..&gt;</a> 01-Jan-2026 00:01               5\r\n"
	    "</pre><hr></body>\r\n</html>\r\n";
	struct out o;
	char *err;

	ck_assert_int_eq(html(body, &o, &err), 0);
	ck_assert_int_eq(o.n, 3);
	ck_assert_str_eq(o.s, "sub|d|0|" T2026 ";a b&c.bin|f|1234|" T2026 ";"
			      "long-name-abcdefghijklmnopqrstuvwxyz-0123456789-"
			      "abcdefghij.bin|f|5|1767225660;");
}
END_TEST

START_TEST(html_apache)
{
	static const char body[] =
	    "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final//EN\">\n"
	    "<html>\n <head>\n  <title>Index of /data</title>\n </head>\n"
	    " <body>\n<h1>Index of /data</h1>\n  <table>\n"
	    "   <tr><th valign=\"top\"><img src=\"/icons/blank.gif\" "
	    "alt=\"[ICO]\"></th><th><a href=\"?C=N;O=D\">Name</a></th>"
	    "<th><a href=\"?C=M;O=A\">Last modified</a></th><th><a "
	    "href=\"?C=S;O=A\">Size</a></th></tr>\n"
	    "<tr><td valign=\"top\"><img src=\"/icons/back.gif\" "
	    "alt=\"[PARENTDIR]\"></td><td><a href=\"/\">Parent "
	    "Directory</a></td><td>&nbsp;</td></tr>\n"
	    "<tr><td><img src=\"/icons/folder.gif\" alt=\"[DIR]\"></td>"
	    "<td><a href=\"train/\">train/</a></td><td "
	    "align=\"right\">2026-01-01 00:00  </td><td "
	    "align=\"right\">  - </td></tr>\n"
	    "<tr><td><img src=\"/icons/unknown.gif\" alt=\"[   ]\"></td>"
	    "<td><a href=\"x%26y.tar\">x&amp;y.tar</a></td><td "
	    "align=\"right\">2026-01-01 00:00  </td><td "
	    "align=\"right\">3.0M</td></tr>\n"
	    "<tr><td><a href=\"https://elsewhere.example/\">x</a>"
	    "<a href=\"#top\">top</a><a HREF='b%C3%A4r.txt'>b</a></td></tr>\n"
	    "</table>\n<address>Apache/2.4.57 (Debian) Server at "
	    "localhost Port 80</address>\n</body></html>\n";
	struct out o;
	char *err;

	ck_assert_int_eq(html(body, &o, &err), 0);
	ck_assert_str_eq(o.s,
			 "train|d|0|0;x&y.tar|f|-|0;b\xc3\xa4r.txt|f|-|0;");
}
END_TEST

START_TEST(html_python)
{
	static const char body[] =
	    "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n"
	    "<meta charset=\"utf-8\">\n"
	    "<title>Directory listing for /</title>\n</head>\n<body>\n"
	    "<h1>Directory listing for /</h1>\n<hr>\n<ul>\n"
	    "<li><a href=\"d%C3%A9j%C3%A0/\">d\xc3\xa9j\xc3\xa0/</a></li>\n"
	    "<li><a href=\"file%231.txt\">file#1.txt</a></li>\n"
	    "<li><a href=\"q%3Fx%3D1\">q?x=1</a></li>\n"
	    "</ul>\n<hr>\n</body>\n</html>\n";
	struct out o;
	char *err;

	ck_assert_int_eq(html(body, &o, &err), 0);
	ck_assert_str_eq(o.s, "d\xc3\xa9j\xc3\xa0|d|0|0;file#1.txt|f|-|0;"
			      "q?x=1|f|-|0;");
}
END_TEST

/* nginx and Apache write "./a:b.txt" so that the colon is not a scheme. */
START_TEST(html_colon_names)
{
	static const char body[] =
	    "<html>\r\n<head><title>Index of /t/</title></head>\r\n"
	    "<body>\r\n<h1>Index of /t/</h1><hr><pre>"
	    "<a href=\"../\">../</a>\r\n"
	    "<a href=\"./a:b.txt\">a:b.txt</a>                       "
	    "01-Jan-2026 00:00                  12\r\n"
	    "<a href=\"./2024-01-01T00:00:00.jpg\">2024-01-01T00:00:00.jpg"
	    "</a> 01-Jan-2026 00:00                   7\r\n"
	    "<a href=\"./x:y/\">x:y/</a>                          "
	    "01-Jan-2026 00:00                   -\r\n"
	    "<a href=\"c.txt\">c.txt</a>                           "
	    "01-Jan-2026 00:00                   3\r\n"
	    "<a href=\"https://elsewhere.example/a\">x</a>"
	    "<a href=\"mailto:x@example.com\">m</a>\r\n"
	    "</pre><hr></body>\r\n</html>\r\n";
	struct out o;
	char *err;

	ck_assert_int_eq(html(body, &o, &err), 0);
	ck_assert_str_eq(o.s, "a:b.txt|f|12|" T2026 ";"
			      "2024-01-01T00:00:00.jpg|f|7|" T2026 ";"
			      "x:y|d|0|" T2026 ";c.txt|f|3|" T2026 ";");
}
END_TEST

/* A fetched body has no NUL after it: nothing past len may be read. */
START_TEST(html_exact_length)
{
	static const char page[] = "<html><body><pre><a href=\"x.bin\">x</a>"
				   "\n</pre></body></html>";
	size_t len = strlen(page), cut = strstr(page, "</html>") - page;
	struct out o;
	char *copy = malloc(len), *err = NULL;

	memcpy(copy, page, len);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(listing_parse_html(copy, len, put, &o, &err), 0);
	ck_assert_str_eq(o.s, "x.bin|f|-|0;");
	/* the "</html>" just past the end does not count */
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(listing_parse_html(copy, cut, put, &o, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "ends before </html>"));
	free(err);
	free(copy);
}
END_TEST

START_TEST(html_malformed)
{
	static const char *const bad[] = {
	    /* ends inside a tag */
	    "<html><body><a href=\"x.bin\">x</a><a hr",
	    /* unterminated quoted href */
	    "<html><body><a href=\"x.bin",
	    /* ends before </html> */
	    "<html><body><pre><a href=\"x.bin\">x</a>\n",
	    /* bad escapes, an escaped NUL */
	    "<html><a href=\"a%zz\">a</a></html>",
	    "<html><a href=\"a%00b\">a</a></html>",
	    "<html><a href=\"a%4\">a</a></html>",
	};
	struct out o;
	char *err, *huge;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = html(bad[i], &o, &err);

		if (rc != -EINVAL)
			ck_abort_msg("case %zu: rc %d", i, rc);
		ck_assert_ptr_nonnull(strstr(err, "HTML listing, byte"));
		free(err);
	}
	huge = malloc(200000);
	strcpy(huge, "<html><a href=\"");
	memset(huge + 15, 'y', 150000);
	strcpy(huge + 150015, "\">y</a></html>");
	ck_assert_int_eq(html(huge, &o, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "too long"));
	free(err);
	free(huge);
	/* a page with no links at all is an empty directory */
	ck_assert_int_eq(html("<html><body>empty</body></html>", &o, &err), 0);
	ck_assert_int_eq(o.n, 0);
}
END_TEST

/* Entries no filesystem can show are handed on marked bad (the reader
 * names and skips them), or, in a manifest, left out: the rest parses. */
START_TEST(unshowable_entries)
{
	static const char *const json_cases[] = {
	    "{\"name\":\"a/b\",\"type\":\"file\",\"size\":1}",
	    "{\"name\":\"..\",\"type\":\"directory\"}",
	    "{\"name\":\"\",\"type\":\"file\",\"size\":1}",
	    "{\"name\":\"n\",\"type\":\"file\",\"size\":-5}",
	    "{\"name\":\"h\",\"type\":\"file\",\"size\":1e99}",
	    "{\"name\":\"h\",\"type\":\"file\",\"size\":"
	    "99999999999999999999999}",
	    /* over INT64_MAX: st_size would be negative */
	    "{\"name\":\"h\",\"type\":\"file\",\"size\":"
	    "18446744073709551615}",
	    "{\"name\":\"h\",\"type\":\"file\",\"size\":"
	    "9223372036854775808}",
	};
	static const char good[] =
	    "{\"name\":\"ok\",\"type\":\"file\",\"size\":3}";
	char body[512], *err, *text;
	struct manifest *m;
	struct out o;
	uint64_t before;
	size_t i;

	for (i = 0; i < sizeof(json_cases) / sizeof(json_cases[0]); i++) {
		snprintf(body, sizeof(body), "[%s,%s,%s]", good, json_cases[i],
			 good);
		ck_assert_int_eq(json(body, &o, &err), 0);
		ck_assert_ptr_null(err);
		ck_assert_int_eq(o.n, 2);
		ck_assert_int_eq(o.bad, 1);
		ck_assert_str_eq(o.s, "ok|f|3|0;ok|f|3|0;");
	}
	ck_assert_int_eq(
	    html("<html><pre><a href=\"a\">a</a> 01-Jan-2026 00:00 "
		 "18446744073709551615\r\n<a href=\"a%2Fb\">x</a>\n"
		 "<a href=\"../\">..</a>\n<a href=\"ok\">ok</a>\n"
		 "</pre></html>",
		 &o, &err),
	    0);
	ck_assert_int_eq(o.bad, 2);
	ck_assert_str_eq(o.s, "ok|f|-|0;");
	before = listing_skipped();
	text = "good 1\na -1\nb 99999999999999999999999\n"
	       "c 18446744073709551615\nd 9223372036854775808\ne +1\n"
	       "/abs 1\ndir/ 1\na//b 1\na/../b 1\n..%2Fx 1\nz/ok 2\n";
	err = NULL;
	ck_assert_int_eq(manifest_parse(text, strlen(text), &m, &err), 0);
	ck_assert_ptr_null(err);
	ck_assert_uint_eq(m->n, 2);
	ck_assert_str_eq(m->v[0].path, "good");
	ck_assert_str_eq(m->v[1].path, "z/ok");
	ck_assert_uint_eq(listing_skipped() - before, 10);
	manifest_free(m);
}
END_TEST

START_TEST(detect_and_urls)
{
	char buf[64];

	ck_assert_int_eq(listing_detect("application/json", "<", 1),
			 LISTING_JSON);
	ck_assert_int_eq(listing_detect("text/html; charset=utf-8", "[", 1),
			 LISTING_HTML);
	ck_assert_int_eq(listing_detect("", "  \n[{}]", 7), LISTING_JSON);
	ck_assert_int_eq(listing_detect(NULL, "\n<html>", 7), LISTING_HTML);
	ck_assert_int_eq(listing_detect("text/plain", "hello", 5),
			 LISTING_UNKNOWN);

	ck_assert_int_eq(
	    listing_url_encode_path("a b/c#d?e%f~g_h.i-j", buf, sizeof(buf)),
	    27);
	ck_assert_str_eq(buf, "a%20b/c%23d%3Fe%25f~g_h.i-j");
	ck_assert_int_eq(listing_url_encode_path("\xc3\xa9", buf, 7), 6);
	ck_assert_str_eq(buf, "%C3%A9");
	ck_assert_int_eq(listing_url_encode_path("\xc3\xa9", buf, 6),
			 -ENAMETOOLONG);
	ck_assert_int_eq(listing_url_decode("a%20b%2fc", 9, buf, sizeof(buf)),
			 5);
	ck_assert_str_eq(buf, "a b/c");
	ck_assert_int_eq(listing_url_decode("abc", 3, buf, 3), -EINVAL);
	ck_assert_int_eq(listing_url_decode("%", 1, buf, sizeof(buf)), -EINVAL);
}
END_TEST

static const char manifest_text[] = "# dataset v1\n"
				    "train/n01/img1.jpg 100 \"etag-1\"\n"
				    "\n"
				    "train/n01/img2.jpg 200\r\n"
				    "   train/n02/img3.jpg\t300   abc\n"
				    "train/n01-extra.txt 5\n"
				    "README 7\n"
				    "val/x.bin 0";

START_TEST(manifest_ok)
{
	struct manifest *m;
	const struct manifest_entry *e;
	struct out o;
	char *err = NULL;

	ck_assert_int_eq(
	    manifest_parse(manifest_text, strlen(manifest_text), &m, &err), 0);
	ck_assert_uint_eq(m->n, 6);
	e = manifest_find(m, "train/n01/img1.jpg");
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->size, 100);
	ck_assert_str_eq(e->etag, "\"etag-1\"");
	e = manifest_find(m, "train/n01/img2.jpg");
	ck_assert_str_eq(e->etag, "");
	ck_assert_uint_eq(e->size, 200);
	ck_assert_ptr_null(manifest_find(m, "train/n01"));
	ck_assert_ptr_null(manifest_find(m, "nothere"));

	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(manifest_list(m, "", put, &o), 0);
	ck_assert_str_eq(o.s, "README|f|7|0;train|d|0|0;val|d|0|0;");
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(manifest_list(m, "train", put, &o), 0);
	ck_assert_str_eq(o.s, "n01-extra.txt|f|5|0;n01|d|0|0;n02|d|0|0;");
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(manifest_list(m, "train/n01", put, &o), 0);
	ck_assert_str_eq(o.s, "img1.jpg|f|100|0;img2.jpg|f|200|0;");
	ck_assert_int_eq(manifest_list(m, "train/n0", put, &o), -ENOENT);
	ck_assert_int_eq(manifest_list(m, "README", put, &o), -ENOENT);
	manifest_free(m);

	/* an empty manifest is an empty root */
	ck_assert_int_eq(manifest_parse("# nothing\n", 10, &m, &err), 0);
	ck_assert_uint_eq(m->n, 0);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(manifest_list(m, "", put, &o), 0);
	ck_assert_int_eq(o.n, 0);
	manifest_free(m);
}
END_TEST

/* The digest column: after an etag, or after "-" for none. */
START_TEST(manifest_digest)
{
	static const char text[] =
	    "a 3 - MD5:900150983CD24FB0D6963F7D28E17F72\n"
	    "b 9 \"e-9\" crc32c:e3069283\n"
	    "c 1 \"e-1\"\n"
	    "d 2\n";
	struct manifest *m;
	const struct manifest_entry *e;
	struct out o;
	char *err = NULL;

	ck_assert_int_eq(manifest_parse(text, strlen(text), &m, &err), 0);
	e = manifest_find(m, "a");
	ck_assert_str_eq(e->etag, "");
	ck_assert_str_eq(e->digest, "md5:900150983cd24fb0d6963f7d28e17f72");
	e = manifest_find(m, "b");
	ck_assert_str_eq(e->etag, "\"e-9\"");
	ck_assert_str_eq(e->digest, "crc32c:e3069283");
	ck_assert_str_eq(manifest_find(m, "c")->digest, "");
	ck_assert_str_eq(manifest_find(m, "d")->digest, "");
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(manifest_list(m, "", put_digest, &o), 0);
	ck_assert_str_eq(o.s, "a=md5:900150983cd24fb0d6963f7d28e17f72;"
			      "b=crc32c:e3069283;c=;d=;");
	manifest_free(m);
}
END_TEST

START_TEST(manifest_malformed)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"a 1\nb\n", "line 2"},
	    {"a 1 e extra\n", "line 1"},
	    {"a 1 e crc32c:e3069283 x\n", "line 1"},
	    {"a 1 - crc32c:e306928\n", "digest \"crc32c:e306928\""},
	    {"a 1 - sha1:a9993e364706816aba3e25717850c26c9cd0d89d\n",
	     "not crc32c:HEX, md5:HEX or sha256:HEX"},
	    {"a 1\na 2\n", "listed twice"},
	    {"a 1\na/b 2\n", "both a file and a directory"},
	    /* "a.txt" sorts between "a" and "a/b" */
	    {"a 10\na.txt 5\na/b 7\n", "\"a\" is both a file and a directory"},
	    {"x/a 10\nx/a.txt 5\nx/a/b/c 7\n",
	     "\"x/a\" is both a file and a directory"},
	};
	struct manifest *m;
	char *err, *huge;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = NULL;
		ck_assert_int_eq(
		    manifest_parse(bad[i].text, strlen(bad[i].text), &m, &err),
		    -EINVAL);
		ck_assert_ptr_null(m);
		if (!err || !strstr(err, bad[i].msg))
			ck_abort_msg("case %zu: \"%s\"", i, err ? err : "");
		free(err);
	}
	/* a path too long to show is left out, not the manifest */
	huge = malloc(20000);
	memset(huge, 'z', 10000);
	strcpy(huge + 10000, " 5\nok 1\n");
	err = NULL;
	ck_assert_int_eq(manifest_parse(huge, strlen(huge), &m, &err), 0);
	ck_assert_uint_eq(m->n, 1);
	manifest_free(m);
	free(huge);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("listing");
	TCase *tc = tcase_create("parsers");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, json_nginx);
	tcase_add_test(tc, json_malformed);
	tcase_add_test(tc, html_nginx);
	tcase_add_test(tc, html_apache);
	tcase_add_test(tc, html_python);
	tcase_add_test(tc, html_colon_names);
	tcase_add_test(tc, html_exact_length);
	tcase_add_test(tc, html_malformed);
	tcase_add_test(tc, unshowable_entries);
	tcase_add_test(tc, detect_and_urls);
	tcase_add_test(tc, manifest_ok);
	tcase_add_test(tc, manifest_digest);
	tcase_add_test(tc, manifest_malformed);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
