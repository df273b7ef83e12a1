/* The loader index: builders, round trips, corruption caught with a clear
 * message. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wharf/loader.h>

#include "fixture.h"
#include "index.h"

static char *root;

/* root/ followed by the formatted name, malloc'd. */
static char *pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *pathf(const char *fmt, ...)
{
	char *name, *p;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&name, fmt, ap) < 0)
		abort();
	va_end(ap);
	if (asprintf(&p, "%s/%s", root, name) < 0)
		abort();
	free(name);
	return p;
}

/* Flips one byte of a file at off. */
static void flip(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	unsigned char b;
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

START_TEST(dir_round_trip)
{
	/* Classes b, a, c (empty) and a file at the top; sizes differ. */
	static const char *const files[] = {"b/2", "b/10", "a/x", "a/sub/y",
					    "top"};
	for (size_t i = 0; i < 5; i++) {
		char *p = pathf("tree/%s", files[i]);
		char *d = strdup(p);
		*strrchr(d, '/') = '\0';
		ck_assert_int_eq(fx_mkdirs(d), 0);
		ck_assert_int_eq(fx_write_file(p, 100 + i, (uint32_t)i), 0);
		free(d);
		free(p);
	}
	char *c = pathf("tree/c");
	ck_assert_int_eq(fx_mkdirs(c), 0);
	free(c);
	char *tree = pathf("tree"), *out = pathf("d.idx");
	ck_assert_int_eq(wharf_index_build_dir(tree, out), 0);

	wharf_index *idx;
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 5);
	ck_assert_uint_eq(wharf_index_num_files(idx), 5);
	ck_assert_uint_eq(wharf_index_num_labels(idx), 3);
	/* Byte order of the path: a/sub/y, a/x, b/10, b/2, top. */
	static const char *const want[] = {"a/sub/y", "a/x", "b/10", "b/2",
					   "top"};
	static const int32_t labels[] = {0, 0, 1, 1, -1};
	static const uint64_t sizes[] = {103, 102, 101, 100, 104};
	for (uint64_t i = 0; i < 5; i++) {
		struct wharf_sample s;
		ck_assert_int_eq(wharf_index_sample(idx, i, &s), 0);
		char buf[4096];
		ck_assert_int_gt(
		    wharf_index_path(idx, s.file, buf, sizeof(buf)), 0);
		char *full = pathf("tree/%s", want[i]);
		char *real = realpath(full, NULL);
		ck_assert_str_eq(buf, real);
		ck_assert_int_eq(s.label, labels[i]);
		ck_assert_uint_eq(s.length, sizes[i]);
		ck_assert_uint_eq(s.offset, 0);
		free(full);
		free(real);
	}
	struct wharf_sample s;
	ck_assert_int_eq(wharf_index_sample(idx, 5, &s), -ERANGE);
	char small[4];
	ck_assert_int_eq(wharf_index_path(idx, 0, small, sizeof(small)),
			 -ENAMETOOLONG);
	ck_assert_int_eq(wharf_index_path(idx, 9, small, sizeof(small)),
			 -ERANGE);
	struct wharf_index_info in = {.size = sizeof(in)};
	ck_assert_int_eq(wharf_index_info(idx, &in), 0);
	ck_assert_uint_eq(in.min_length, 100);
	ck_assert_uint_eq(in.max_length, 104);
	ck_assert_uint_eq(in.total_bytes, 510);
	/* Class names by label, the empty class folder included. */
	ck_assert_str_eq(wharf_index_class_name(idx, 0), "a");
	ck_assert_str_eq(wharf_index_class_name(idx, 1), "b");
	ck_assert_str_eq(wharf_index_class_name(idx, 2), "c");
	ck_assert_ptr_null(wharf_index_class_name(idx, 3));
	wharf_index_close(idx);

	/* A directory where an index goes: what to do instead. */
	ck_assert_int_eq(wharf_index_open(tree, 0, &idx), -EISDIR);
	ck_assert_ptr_nonnull(
	    strstr(wharf_last_error(), "wharf index build --dir"));

	/* Same tree, same bytes: the build is deterministic. */
	char *out2 = pathf("d2.idx");
	ck_assert_int_eq(wharf_index_build_dir(tree, out2), 0);
	size_t l1, l2;
	void *a = fx_read_file(out, &l1), *b = fx_read_file(out2, &l2);
	ck_assert_uint_eq(l1, l2);
	ck_assert_int_eq(memcmp(a, b, l1), 0);
	free(a);
	free(b);
	free(tree);
	free(out);
	free(out2);
}
END_TEST

START_TEST(list_round_trip)
{
	char *d = pathf("ld");
	ck_assert_int_eq(fx_mkdirs(d), 0);
	char *f1 = pathf("ld/one"), *f2 = pathf("abs");
	ck_assert_int_eq(fx_write_file(f1, 10, 1), 0);
	ck_assert_int_eq(fx_write_file(f2, 20, 2), 0);
	char *list = pathf("ld/list");
	FILE *f = fopen(list, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# a comment\none 3\n\n  %s\t7\r\none\n", f2);
	fclose(f);
	char *out = pathf("l.idx");
	ck_assert_int_eq(wharf_index_build_list(list, 0, out), 0);
	wharf_index *idx;
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 3);
	struct wharf_sample s;
	char buf[4096];
	ck_assert_int_eq(wharf_index_sample(idx, 0, &s), 0);
	ck_assert_int_eq(s.label, 3);
	ck_assert_uint_eq(s.length, WHARF_LENGTH_UNKNOWN);
	ck_assert_int_gt(wharf_index_path(idx, s.file, buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "/ld/one"));
	ck_assert_int_eq(wharf_index_sample(idx, 1, &s), 0);
	ck_assert_int_eq(s.label, 7);
	ck_assert_int_gt(wharf_index_path(idx, s.file, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, f2);
	ck_assert_int_eq(wharf_index_sample(idx, 2, &s), 0);
	ck_assert_int_eq(s.label, -1);
	/* Labels from a list have no class names. */
	ck_assert_ptr_null(wharf_index_class_name(idx, 3));
	wharf_index_close(idx);

	/* With --stat the sizes are recorded; a missing file is named. */
	ck_assert_int_eq(wharf_index_build_list(list, 1, out), 0);
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	ck_assert_int_eq(wharf_index_sample(idx, 1, &s), 0);
	ck_assert_uint_eq(s.length, 20);
	wharf_index_close(idx);
	f = fopen(list, "a");
	fprintf(f, "missing-file 1\n");
	fclose(f);
	ck_assert_int_eq(wharf_index_build_list(list, 1, out), -ENOENT);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "list:6"));
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "missing-file"));
	/* The failed build left the earlier index alone. */
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 3);
	wharf_index_close(idx);
	free(d);
	free(f1);
	free(f2);
	free(list);
	free(out);
}
END_TEST

START_TEST(records_round_trip)
{
	char *a = pathf("ra"), *b = pathf("rb");
	ck_assert_int_eq(fx_write_file(a, 1000, 1), 0); /* 3 + a 100 tail */
	ck_assert_int_eq(fx_write_file(b, 600, 2), 0);	/* 2 */
	char *out = pathf("r.idx");
	const char *files[] = {a, b};
	ck_assert_int_eq(wharf_index_build_records(300, files, 2, out), 0);
	wharf_index *idx;
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 5);
	ck_assert_uint_eq(wharf_index_num_files(idx), 2);
	static const uint32_t fid[] = {0, 0, 0, 1, 1};
	static const uint64_t off[] = {0, 300, 600, 0, 300};
	for (uint64_t i = 0; i < 5; i++) {
		struct wharf_sample s;
		ck_assert_int_eq(wharf_index_sample(idx, i, &s), 0);
		ck_assert_uint_eq(s.file, fid[i]);
		ck_assert_uint_eq(s.offset, off[i]);
		ck_assert_uint_eq(s.length, 300);
		ck_assert_int_eq(s.label, -1);
	}
	wharf_index_close(idx);
	ck_assert_int_eq(wharf_index_build_records(0, files, 2, out), -EINVAL);
	free(a);
	free(b);
	free(out);
}
END_TEST

/* Writes text to the file at path. */
static void put_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

struct want {
	uint64_t off, len;
	int32_t label;
	uint32_t file;
};

/* The index holds exactly the n samples of want, in nfiles files. */
static void check_samples(const wharf_index *idx, const struct want *want,
			  size_t n, uint64_t nfiles)
{
	ck_assert_uint_eq(wharf_index_count(idx), n);
	ck_assert_uint_eq(wharf_index_num_files(idx), nfiles);
	for (size_t i = 0; i < n; i++) {
		struct wharf_sample s;
		ck_assert_int_eq(wharf_index_sample(idx, i, &s), 0);
		ck_assert_uint_eq(s.file, want[i].file);
		ck_assert_uint_eq(s.offset, want[i].off);
		ck_assert_uint_eq(s.length, want[i].len);
		ck_assert_int_eq(s.label, want[i].label);
	}
}

START_TEST(builder_round_trip)
{
	char *a = pathf("b a"), *out = pathf("b.idx");
	ck_assert_int_eq(fx_write_file(a, 100, 4), 0);
	/* Three samples of one file (one entry), an absolute path, the first
	 * file again (a second entry), an unknown length. */
	static const char *const path[] = {"b a", "b a", "b a", NULL, "b a"};
	static const struct want in[] = {
	    {0, 10, 5, 0},
	    {10, 0, -1, 0},
	    {90, 10, 2147483647, 0},
	    {3, 4, 1, 1},
	    {1, WHARF_LENGTH_UNKNOWN, 0, 2},
	};
	wharf_index_builder *b;
	ck_assert_int_eq(wharf_index_builder_new(out, root, &b), 0);
	for (size_t i = 0; i < 5; i++)
		ck_assert_int_eq(
		    wharf_index_builder_add(b, path[i] ? path[i] : a, in[i].off,
					    in[i].len, in[i].label),
		    0);
	/* Refused arguments name the sample and leave the builder usable. */
	ck_assert_int_eq(wharf_index_builder_add(b, "", 0, 1, -1), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "sample 5"));
	ck_assert_int_eq(wharf_index_builder_add(b, "x", 0, 1, -2), -EINVAL);
	ck_assert_int_eq(wharf_index_builder_add(b, "x", UINT64_MAX - 1, 2, -1),
			 -EOVERFLOW);
	ck_assert_int_eq(wharf_index_builder_finish(b), 0);
	ck_assert_int_eq(wharf_index_builder_finish(b), -EINVAL);
	wharf_index_builder_free(b);

	wharf_index *idx;
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	check_samples(idx, in, 5, 3);
	char buf[4096];
	for (uint32_t f = 0; f < 3; f++) {
		ck_assert_int_gt(wharf_index_path(idx, f, buf, sizeof(buf)), 0);
		ck_assert_str_eq(buf, a);
	}
	struct wharf_index_info info = {.size = sizeof(info)};
	ck_assert_int_eq(wharf_index_info(idx, &info), 0);
	ck_assert_uint_eq(info.num_labels, 2147483648u);
	ck_assert_uint_eq(info.unknown_lengths, 1);
	wharf_index_close(idx);

	/* No samples at all: an empty index that opens verified. */
	char *empty = pathf("empty.idx");
	ck_assert_int_eq(wharf_index_builder_new(empty, NULL, &b), 0);
	ck_assert_int_eq(wharf_index_builder_finish(b), 0);
	wharf_index_builder_free(b);
	ck_assert_int_eq(wharf_index_open(empty, WHARF_INDEX_VERIFY, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 0);
	ck_assert_uint_eq(wharf_index_num_files(idx), 0);
	wharf_index_close(idx);
	free(empty);

	/* Freed unfinished: nothing written, nothing left behind. */
	char *gone = pathf("gone.idx");
	ck_assert_int_eq(wharf_index_builder_new(gone, NULL, &b), 0);
	ck_assert_int_eq(wharf_index_builder_add(b, a, 0, 1, -1), 0);
	wharf_index_builder_free(b);
	ck_assert_int_ne(access(gone, F_OK), 0);
	char *nowhere = pathf("nowhere");
	ck_assert_int_eq(wharf_index_builder_new(gone, nowhere, &b), -ENOENT);
	ck_assert_ptr_null(b);
	free(nowhere);
	free(gone);
	free(a);
	free(out);
}
END_TEST

/* Builds list (text) with stat_files; the build's return code. */
static int build_text(const char *text, int stat_files)
{
	char *list = pathf("ol/list"), *out = pathf("ol.idx");
	put_text(list, text);
	int rc = wharf_index_build_list(list, stat_files, out);
	free(list);
	free(out);
	return rc;
}

START_TEST(list_offsets)
{
	char *d = pathf("ol");
	ck_assert_int_eq(fx_mkdirs(d), 0);
	char *p = pathf("ol/shard.tar"), *q = pathf("ol/a b 7");
	ck_assert_int_eq(fx_write_file(p, 4096, 5), 0);
	ck_assert_int_eq(fx_write_file(q, 100, 6), 0);
	ck_assert_int_eq(build_text("#wharf-list offsets\n"
				    "shard.tar 512 1234 3\n"
				    "# a comment\n\n"
				    "  shard.tar   0  512\r\n"
				    "a b 7\t10\t20\t-1\n"
				    "a b 7\t30\t70\n"
				    "shard.tar 4000 96 0\n",
				    1),
			 0);
	char *out = pathf("ol.idx");
	wharf_index *idx;
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	static const struct want want[] = {{512, 1234, 3, 0},
					   {0, 512, -1, 0},
					   {10, 20, -1, 1},
					   {30, 70, -1, 1},
					   {4000, 96, 0, 2}};
	check_samples(idx, want, 5, 3);
	char buf[4096];
	ck_assert_int_gt(wharf_index_path(idx, 1, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, q);
	wharf_index_close(idx);

	/* Without the first line, an old list means what it meant: one
	 * path with spaces and a label. */
	ck_assert_int_eq(build_text("shard.tar 512 1234 3\n", 0), 0);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	ck_assert_int_gt(wharf_index_path(idx, 0, buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "/ol/shard.tar 512 1234"));
	struct wharf_sample s;
	ck_assert_int_eq(wharf_index_sample(idx, 0, &s), 0);
	ck_assert_int_eq(s.label, 3);
	ck_assert_uint_eq(s.offset, 0);
	wharf_index_close(idx);
	/* With --stat such a missing path hints at the first line. */
	ck_assert_int_eq(build_text("shard.tar 512  1234 3\n", 1), -ENOENT);
	ck_assert_ptr_nonnull(
	    strstr(wharf_last_error(), "first line \"#wharf-list offsets\""));
	ck_assert_int_eq(build_text("shard.tar 3\nmissing 1\n", 1), -ENOENT);
	ck_assert_ptr_null(strstr(wharf_last_error(), "#wharf-list"));

	/* A list of comments only: an empty index that opens. */
	ck_assert_int_eq(build_text("#wharf-list offsets\n# none\n", 1), 0);
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 0);
	wharf_index_close(idx);

	/* Refused lines, each named by its number. */
	static const struct {
		const char *text, *why;
	} bad[] = {
	    {"#wharf-list offsets\nshard.tar 0 1\nshard.tar 7\n",
	     "list:3: expected PATH OFFSET LENGTH"},
	    {"#wharf-list offsets\na b 7 1 2 3\n", "list:2: ambiguous"},
	    {"#wharf-list offsets\nshard.tar -1 2\n", "list:2: the offset"},
	    {"#wharf-list offsets\nshard.tar 1 -2\n", "list:2: the length"},
	    {"#wharf-list offsets\nshard.tar 1 2 -3\n", "list:2: the label"},
	    {"#wharf-list offsets\nshard.tar\t1\n",
	     "list:2: expected PATH<TAB>"},
	    {"#wharf-list offsets\nshard.tar\tx\t2\n", "list:2: the offset"},
	    {"#wharf-list offsets\n\t1\t2\n", "list:2: expected PATH<TAB>"},
	    {"#wharf-list offsets\nshard.tar 99999999999999999999 1\n",
	     "list:2: the offset"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(build_text(bad[i].text, 0), -EINVAL);
		ck_assert_msg(strstr(wharf_last_error(), bad[i].why),
			      "case %zu: %s", i, wharf_last_error());
	}
	/* Out of the file, caught with --stat only. */
	const char *past = "#wharf-list offsets\nshard.tar 0 4096\n"
			   "shard.tar 4000 97\n";
	ck_assert_int_eq(build_text(past, 0), 0);
	ck_assert_int_eq(build_text(past, 1), -ERANGE);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "list:3: shard.tar"));
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "4096 bytes"));
	ck_assert_int_eq(
	    build_text("#wharf-list offsets\nshard.tar 4097 0\n", 1), -ERANGE);
	ck_assert_int_eq(build_text("#wharf-list offsets\nshard.tar "
				    "18446744073709551615 2\n",
				    1),
			 -ERANGE);
	free(d);
	free(p);
	free(q);
	free(out);
}
END_TEST

START_TEST(corrupted)
{
	char *a = pathf("ca");
	ck_assert_int_eq(fx_write_file(a, 4096, 1), 0);
	char *out = pathf("c.idx");
	const char *files[] = {a};
	ck_assert_int_eq(wharf_index_build_records(16, files, 1, out), 0);
	wharf_index *idx = NULL;

	/* A flipped byte in the arrays: the header still opens (O(1)), the
	 * full check names the corruption. */
	flip(out, 256 + 100);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	ck_assert_int_eq(wharf_index_verify(idx), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "checksum"));
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), out));
	wharf_index_close(idx);
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "corrupted"));
	flip(out, 256 + 100);
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	wharf_index_close(idx);

	/* A flipped byte in the header: refused at open. */
	flip(out, 20);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "header checksum"));
	flip(out, 20);

	/* Truncated, and a file that is no index at all. */
	ck_assert_int_eq(truncate(out, 1000), 0);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "truncated"));
	ck_assert_int_eq(wharf_index_open(a, 0, &idx), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "not a wharf index"));
	ck_assert_int_eq(truncate(out, 10), 0);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), -EINVAL);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), "too short"));
	char *none = pathf("nothing");
	ck_assert_int_eq(wharf_index_open(none, 0, &idx), -ENOENT);
	ck_assert_ptr_nonnull(strstr(wharf_last_error(), none));
	free(none);
	free(a);
	free(out);
}
END_TEST

/* Rewrites the header of the index at path through edit, with a fresh
 * header checksum: a damaged index that still passes that check. */
static void edit_header(const char *path,
			void (*edit)(struct index_header *h, int fd))
{
	struct index_header h;
	int fd = open(path, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &h, sizeof(h), 0), sizeof(h));
	edit(&h, fd);
	h.header_hash = index_header_hash(&h);
	ck_assert_int_eq(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
	close(fd);
}

static void count_overflows(struct index_header *h, int fd)
{
	(void)fd;
	/* count * 4 and count * 8 wrap around to 0: every section would
	 * seem to fit. */
	h->count = 1ull << 62;
}

static void blob_past_end(struct index_header *h, int fd)
{
	(void)fd;
	h->off_blob = h->file_size + 64;
}

static void blob_cut_short(struct index_header *h, int fd)
{
	(void)fd;
	h->blob_size -= 1; /* then the last path's end is not the blob's */
}

static void odd_size(struct index_header *h, int fd)
{
	ck_assert_int_eq(ftruncate(fd, (off_t)h->file_size + 4), 0);
	h->file_size += 4;
}

/* Headers whose own checksum holds but whose sections do not: each is
 * refused at open, with what is wrong. */
START_TEST(bad_sections)
{
	static const struct {
		void (*edit)(struct index_header *h, int fd);
		const char *says;
	} cases[] = {
	    {count_overflows, "a section lies outside the file"},
	    {blob_past_end, "a section lies outside the file"},
	    {blob_cut_short, "path table is inconsistent"},
	    {odd_size, "not a whole number of 8-byte words"},
	};
	char *a = pathf("sa");
	const char *files[] = {a};
	wharf_index *idx = NULL;

	ck_assert_int_eq(fx_write_file(a, 4096, 2), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = pathf("s.idx");

		ck_assert_int_eq(wharf_index_build_records(16, files, 1, out),
				 0);
		ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
		wharf_index_close(idx);
		edit_header(out, cases[i].edit);
		ck_assert_int_eq(wharf_index_open(out, 0, &idx), -EINVAL);
		ck_assert_msg(strstr(wharf_last_error(), cases[i].says),
			      "case %zu: %s", i, wharf_last_error());
		free(out);
	}
	free(a);
}
END_TEST

START_TEST(cli)
{
	const char *w = fx_wharf_bin();
	if (access(w, X_OK))
		fx_skip("no wharf command at %s (a --disable-fs build)", w);
	/* A '"' in the name: --json output must still parse. */
	char *a = pathf("cli-a"), *out = pathf("cli\"q.idx");
	ck_assert_int_eq(fx_write_file(a, 1024, 3), 0);
	ck_assert_int_eq(fx_sh("'%s' index build --records 1K '%s' -o '%s' "
			       ">/dev/null",
			       w, a, out),
			 0);
	ck_assert_int_eq(fx_sh("'%s' index info --verify --json '%s' | "
			       "python3 -c 'import json, sys; "
			       "d = json.load(sys.stdin); "
			       "sys.exit(d[\"samples\"] != 1 or "
			       "d[\"index\"] != sys.argv[1])' '%s'",
			       w, out, out),
			 0);
	ck_assert_int_eq(
	    fx_sh("'%s' index build --dir '%s' 2>/dev/null", w, root), 2);
	flip(out, 300);
	ck_assert_int_eq(fx_sh("'%s' index info --verify '%s' 2>&1 | "
			       "grep -q corrupted",
			       w, out),
			 0);
	/* A list with offsets: a refused line is named on stderr. */
	char *list = pathf("cli-list");
	put_text(list, "#wharf-list offsets\ncli-a 0 1024 2\ncli-a 1 1024\n");
	ck_assert_int_eq(fx_sh("'%s' index build --list '%s' -o '%s' "
			       ">/dev/null",
			       w, list, out),
			 0);
	ck_assert_int_eq(fx_sh("'%s' index build --stat --list '%s' -o '%s' "
			       "2>&1 | grep -q 'cli-list:3: cli-a: bytes 1 "
			       "to 1025 are past its end'",
			       w, list, out),
			 0);
	free(list);
	free(a);
	free(out);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("index");
	TCase *tc = tcase_create("index");
	tcase_add_test(tc, dir_round_trip);
	tcase_add_test(tc, list_round_trip);
	tcase_add_test(tc, records_round_trip);
	tcase_add_test(tc, builder_round_trip);
	tcase_add_test(tc, list_offsets);
	tcase_add_test(tc, corrupted);
	tcase_add_test(tc, bad_sections);
	tcase_add_test(tc, cli);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	root = fx_tmpdir("index");
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	fx_rmtree(root);
	free(root);
	return failed ? 1 : 0;
}
