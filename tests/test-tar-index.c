/* The index of WebDataset tar shards: samples, fields and labels against
 * the files GNU tar packed (gnu and posix formats: long names, pax
 * headers, empty members), crafted base-256 and pax sizes over 8 GiB,
 * damage with and without --tar-partial, keys split across shards, the
 * builder's fields, a loader and a decoder reading one field, and a build
 * over a wharf mount that reads headers only. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wharf/decode.h>
#include <wharf/loader.h>

#include "fixture-ck.h"
#include "fixture.h"

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

static void put(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

/* A directory name over 100 bytes: a ustar name field cannot hold its
 * members' paths, so GNU tar writes L records, pax tar path records. */
#define LONG_DIR                                                               \
	"a-directory-name-long-enough-that-a-member-path-below-it-runs-past-"  \
	"the-hundred-bytes-of-a-ustar-name-field"

/* The members, in the order tar packs them (a key's members adjacent),
 * and what each holds: jpg random bytes (seeded), cls a label, txt empty
 * (a 0-byte field). */
static const struct member {
	const char *name;
	size_t size; /* random bytes when text is NULL */
	const char *text;
} members[] = {
    {"0001.jpg", 3000, NULL},
    {"0001.cls", 0, "3\n"},
    {"0001.txt", 0, ""},
    {LONG_DIR "/0002.jpg", 70000, NULL},
    {LONG_DIR "/0002.cls", 0, "  7 "},
    {"0003.jpg", 1, NULL},
    {"0003.seg.png", 513, NULL},
};
#define NMEMBERS (sizeof(members) / sizeof(members[0]))

/* The sample keys and their labels (0003 has no cls). */
static const char *const keys[] = {"0001", LONG_DIR "/0002", "0003"};
static const int32_t labels[] = {3, 7, -1};

/* Writes the members under root/src, and a directory entry that the
 * index leaves out. */
static char *make_members(void)
{
	char *src = pathf("src");

	ck_assert_int_eq(fx_mkdirs(src), 0);
	ck_assert_int_eq(
	    fx_sh("mkdir -p '%s/%s' '%s/emptydir'", src, LONG_DIR, src), 0);
	for (size_t i = 0; i < NMEMBERS; i++) {
		char *p = pathf("src/%s", members[i].name);

		if (members[i].text)
			put(p, members[i].text, strlen(members[i].text));
		else
			ck_assert_int_eq(
			    fx_write_file(p, members[i].size, (uint32_t)i), 0);
		free(p);
	}
	return src;
}

/* tar --format=FORMAT of the members (and emptydir) into root/NAME. */
static char *make_shard(const char *src, const char *format, const char *name)
{
	char *out = pathf("%s", name);
	char list[8192] = "emptydir";

	for (size_t i = 0; i < NMEMBERS; i++) {
		strcat(list, " '");
		strcat(list, members[i].name);
		strcat(list, "'");
	}
	ck_assert_int_eq(fx_sh("tar --format=%s --no-recursion -C '%s' -cf "
			       "'%s' %s",
			       format, src, out, list),
			 0);
	return out;
}

/* The bytes of [off, off + len) of path. */
static void *slice(const char *path, uint64_t off, uint64_t len)
{
	int fd = open(path, O_RDONLY);
	char *buf = malloc(len ? len : 1);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
	return buf;
}

static int build(const char *const *shards, size_t n, bool partial,
		 const char *label_field, const char *out)
{
	struct wharf_tar_options o;

	wharf_tar_options_init(&o);
	o.partial = partial;
	o.label_field = label_field;
	return wharf_index_build_tar(shards, n, &o, out);
}

/* Every sample of idx (over `shard`, read at `at`) against the member
 * files under src: keys in order, each field's bytes equal to its file's,
 * labels from cls. */
static void check_samples(wharf_index *idx, const char *src, const char *at)
{
	size_t m = 0;

	ck_assert_uint_eq(wharf_index_count(idx), 3);
	for (uint64_t i = 0; i < 3; i++) {
		struct wharf_sample s;
		uint32_t n = wharf_index_num_fields(idx, i);

		ck_assert_int_eq(wharf_index_sample(idx, i, &s), 0);
		ck_assert_int_eq(s.label, labels[i]);
		for (uint32_t k = 0; k < n; k++, m++) {
			struct wharf_field f;
			char want[PATH_MAX];
			size_t len;

			ck_assert_int_eq(wharf_index_field(idx, i, k, &f), 0);
			snprintf(want, sizeof(want), "%s.%s", keys[i], f.name);
			ck_assert_str_eq(want, members[m].name);
			/* Inside the sample's span, which whole-sample
			 * readers read. */
			ck_assert_uint_ge(f.offset, s.offset);
			ck_assert_uint_le(f.offset + f.length,
					  s.offset + s.length);
			char *p = pathf("src/%s", members[m].name);
			void *file = fx_read_file(p, &len);
			void *got = slice(at, f.offset, f.length);
			ck_assert_uint_eq(f.length, len);
			ck_assert_msg(!memcmp(file, got, len),
				      "%s differs in the shard", p);
			free(p);
			free(file);
			free(got);
		}
		ck_assert_int_eq(
		    wharf_index_field(idx, i, n, &(struct wharf_field){0}),
		    -ERANGE);
	}
	ck_assert_uint_eq(m, NMEMBERS);
	(void)src;
}

START_TEST(members_byte_for_byte)
{
	static const char *const formats[] = {"gnu", "posix", "ustar"};
	char *src = make_members();

	for (size_t f = 0; f < 3; f++) {
		char name[32];
		wharf_index *idx;

		snprintf(name, sizeof(name), "%s.tar", formats[f]);
		char *shard = make_shard(src, formats[f], name);
		char *out = pathf("%s.idx", formats[f]);
		const char *const one[] = {shard};
		int rc = build(one, 1, false, NULL, out);

		/* (ustar holds the long path in its prefix field.) */
		ck_assert_msg(rc == 0, "%s: %s", formats[f],
			      wharf_last_error());
		ck_assert_int_eq(
		    wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
		check_samples(idx, src, shard);
		struct wharf_index_info in = {.size = sizeof(in)};
		ck_assert_int_eq(wharf_index_info(idx, &in), 0);
		ck_assert_uint_eq(in.num_fields, NMEMBERS);
		ck_assert_uint_eq(in.num_labels, 8);
		wharf_index_close(idx);
		free(shard);
		free(out);
	}
	free(src);
}
END_TEST

/* ---- crafted headers: sizes over 8 GiB ---- */

#define GiB (1ull << 30)

static void octal(char *f, size_t n, uint64_t v)
{
	snprintf(f, n, "%0*llo", (int)n - 1, (unsigned long long)v);
}

/* A header block: name, size in octal (or base-256 when huge), type; the
 * checksum set. */
static void put_header(int fd, uint64_t at, const char *name, uint64_t size,
		       char type, bool base256)
{
	unsigned char b[512] = {0};
	unsigned sum = 0;

	memcpy(b, name, strlen(name));
	octal((char *)b + 100, 8, 0644);
	if (base256) {
		b[124] = 0x80;
		for (int i = 11; i >= 1; i--, size >>= 8)
			b[124 + i] = (unsigned char)size;
	} else {
		octal((char *)b + 124, 12, size);
	}
	b[156] = (unsigned char)type;
	memcpy(b + 257, "ustar", 6);
	memcpy(b + 263, "00", 2);
	memset(b + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += b[i];
	snprintf((char *)b + 148, 8, "%06o", sum);
	ck_assert_int_eq(pwrite(fd, b, 512, (off_t)at), 512);
}

START_TEST(crafted_huge_sizes)
{
	char *path = pathf("huge.tar"), *out = pathf("huge.idx");
	const uint64_t big = 9 * GiB, paxsize = 9 * GiB + 1;
	char rec[64];
	wharf_index *idx;
	struct wharf_field f;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	/* k1.bin: a base-256 size, as GNU tar writes sizes of 8 GiB on. */
	put_header(fd, 0, "k1.bin", big, '0', true);
	/* k2.bin: a pax size record over an octal 0 in the header. */
	const uint64_t x = 512 + big;
	/* The record's length counts its own digits: iterate to the
	 * fixed point. */
	int n = 0;
	for (int i = 0; i < 3; i++)
		n = snprintf(rec, sizeof(rec), "%d size=%llu\n", n,
			     (unsigned long long)paxsize);
	put_header(fd, x, "PaxHeaders/k2.bin", (uint64_t)n, 'x', false);
	ck_assert_int_eq(pwrite(fd, rec, (size_t)n, (off_t)(x + 512)), n);
	put_header(fd, x + 1024, "k2.bin", 0, '0', false);
	const uint64_t data2 = x + 1536;
	const uint64_t end = data2 + ((paxsize + 511) & ~511ull);
	/* Two zero blocks end it; the data between stay holes. */
	ck_assert_int_eq(ftruncate(fd, (off_t)(end + 1024)), 0);
	close(fd);

	const char *const one[] = {path};
	ck_assert_msg(build(one, 1, false, NULL, out) == 0, "%s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 2);
	ck_assert_int_eq(wharf_index_field(idx, 0, 0, &f), 0);
	ck_assert_str_eq(f.name, "bin");
	ck_assert_uint_eq(f.offset, 512);
	ck_assert_uint_eq(f.length, big);
	ck_assert_int_eq(wharf_index_field(idx, 1, 0, &f), 0);
	ck_assert_uint_eq(f.offset, data2);
	ck_assert_uint_eq(f.length, paxsize);
	wharf_index_close(idx);
	unlink(path);
	free(path);
	free(out);
}
END_TEST

/* ---- damage ---- */

/* The offset of the header of member `name` in a shard. */
static uint64_t header_of(const char *shard, const char *name)
{
	size_t len;
	char *b = fx_read_file(shard, &len);

	for (size_t at = 0; at + 512 <= len; at += 512)
		if (!strcmp(b + at, name)) {
			free(b);
			return at;
		}
	ck_abort_msg("%s: no header of %s", shard, name);
	return 0;
}

START_TEST(damaged_shards)
{
	char *src = make_members();
	char *good = make_shard(src, "gnu", "good.tar");
	char *cut = make_shard(src, "gnu", "cut.tar");
	char *bad = make_shard(src, "gnu", "bad.tar");
	char *out = pathf("damaged.idx");
	const uint64_t at = header_of(cut, "0003.jpg");
	wharf_index *idx;

	/* Cut inside 0003.seg.png's data; a checksum broken at 0003.jpg. */
	ck_assert_int_eq(truncate(cut, (off_t)(at + 512 + 512 + 512 + 100)), 0);
	int fd = open(bad, O_RDWR);
	ck_assert_int_eq(pwrite(fd, "X", 1, (off_t)at + 1), 1);
	close(fd);

	const char *const cuts[] = {good, cut};
	ck_assert_int_eq(build(cuts, 2, false, NULL, out), -EBADMSG);
	ck_assert_msg(strstr(wharf_last_error(), "cut.tar: byte ") != NULL,
		      "%s", wharf_last_error());
	ck_assert_int_eq(access(out, F_OK), -1); /* nothing written */

	const char *const bads[] = {bad};
	ck_assert_int_eq(build(bads, 1, false, NULL, out), -EBADMSG);
	ck_assert_msg(strstr(wharf_last_error(), "bad.tar: byte ") &&
			  strstr(wharf_last_error(), "checksum"),
		      "%s", wharf_last_error());

	/* Partial: the samples before the damage (0003 is cut: left out). */
	ck_assert_msg(build(cuts, 2, true, NULL, out) == 0, "%s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 3 + 2);
	wharf_index_close(idx);
	/* The broken header is 0003's first: whether 0002 had more members
	 * after it is unknown, so 0002 goes too. */
	ck_assert_int_eq(build(bads, 1, true, NULL, out), 0);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	ck_assert_uint_eq(wharf_index_count(idx), 1);
	wharf_index_close(idx);

	/* The CLI says it, and --tar-partial warns. */
	ck_assert_int_eq(fx_sh("'%s' index build --tar '%s' -o '%s' 2>&1 | "
			       "grep -q 'cut.tar: byte '",
			       fx_wharf_bin(), cut, out),
			 0);
	ck_assert_int_eq(fx_sh("'%s' index build --tar-partial --tar '%s' -o "
			       "'%s' 2>&1 | grep -q 'kept the 2 samples'",
			       fx_wharf_bin(), cut, out),
			 0);
	free(src);
	free(good);
	free(cut);
	free(bad);
	free(out);
}
END_TEST

static void progress(void *arg, uint64_t done, uint64_t total, uint64_t samples)
{
	uint64_t *seen = arg;

	ck_assert_uint_eq(done, seen[0] + 1);
	seen[0] = done;
	seen[1] = total;
	seen[2] = samples;
}

START_TEST(key_split_across_shards)
{
	char *d = pathf("split");
	char *a = pathf("split-a.tar"), *b = pathf("split-b.tar");
	char *out = pathf("split.idx");

	ck_assert_int_eq(fx_mkdirs(d), 0);
	ck_assert_int_eq(fx_sh("cd '%s' && echo x > 1.jpg && echo 1 > 1.cls && "
			       "echo y > 2.jpg && echo 2 > 2.cls && "
			       "tar -cf '%s' 1.jpg 1.cls 2.jpg && "
			       "tar -cf '%s' 2.cls",
			       d, a, b),
			 0);
	const char *const shards[] = {a, b};
	ck_assert_int_eq(build(shards, 2, false, NULL, out), -EBADMSG);
	ck_assert_msg(
	    strstr(wharf_last_error(), "split-b.tar: byte 0: key 2") &&
		strstr(wharf_last_error(), "split across two shards"),
	    "%s", wharf_last_error());
	/* Never kept by --tar-partial: it is not damage of one shard. */
	ck_assert_int_eq(build(shards, 2, true, NULL, out), -EBADMSG);
	/* Keys that come back in a later shard, not at its seam, are
	 * another shard's samples (datasets that number each shard's keys
	 * from 0). */
	const char *const twice[] = {a, a};
	struct wharf_tar_options o;
	uint64_t seen[3] = {0};
	wharf_tar_options_init(&o);
	o.progress = progress;
	o.progress_arg = seen;
	ck_assert_int_eq(wharf_index_build_tar(twice, 2, &o, out), 0);
	/* Progress after each shard: the last call says all of them. */
	ck_assert_uint_eq(seen[0], 2);
	ck_assert_uint_eq(seen[1], 2);
	ck_assert_uint_eq(seen[2], 4);
	free(d);
	free(a);
	free(b);
	free(out);
}
END_TEST

START_TEST(label_fields)
{
	char *d = pathf("labels");
	char *shard = pathf("labels.tar"), *out = pathf("labels.idx");
	wharf_index *idx;
	struct wharf_sample s;

	ck_assert_int_eq(fx_mkdirs(d), 0);
	ck_assert_int_eq(fx_sh("cd '%s' && echo x > a.jpg && printf 12 > "
			       "a.idx && echo 5 > a.cls && echo y > b.jpg && "
			       "printf oops > b.idx && tar -cf '%s' a.jpg "
			       "a.idx a.cls b.jpg b.idx",
			       d, shard),
			 0);
	const char *const one[] = {shard};
	/* Default: cls (b has none: -1). */
	ck_assert_int_eq(build(one, 1, false, NULL, out), 0);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	ck_assert_int_eq(wharf_index_sample(idx, 0, &s), 0);
	ck_assert_int_eq(s.label, 5);
	ck_assert_int_eq(wharf_index_sample(idx, 1, &s), 0);
	ck_assert_int_eq(s.label, -1);
	wharf_index_close(idx);
	/* No labels. */
	ck_assert_int_eq(build(one, 1, false, "", out), 0);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	ck_assert_uint_eq(wharf_index_num_labels(idx), 0);
	wharf_index_close(idx);
	/* A named field that is not an integer in b. */
	ck_assert_int_eq(build(one, 1, false, "idx", out), -EINVAL);
	ck_assert_msg(strstr(wharf_last_error(), "the label of key b "
						 "(b.idx, 4 bytes) is not an "
						 "integer"),
		      "%s", wharf_last_error());
	free(d);
	free(shard);
	free(out);
}
END_TEST

START_TEST(sparse_members_left_out)
{
	static const char *const formats[] = {"gnu", "posix"};
	char *d = pathf("sparse");

	ck_assert_int_eq(fx_mkdirs(d), 0);
	/* 2.bin: a hole, 4 KiB of data, a hole. */
	ck_assert_int_eq(fx_sh("cd '%s' && echo a > 1.jpg && echo c > 3.jpg "
			       "&& truncate -s 1M 2.bin && head -c 4096 "
			       "/dev/urandom | dd of=2.bin bs=4096 seek=100 "
			       "conv=notrunc status=none",
			       d),
			 0);
	for (size_t f = 0; f < 2; f++) {
		ck_assert_int_eq(
		    fx_sh("cd '%s' && tar --sparse --format=%s -cf s.tar "
			  "1.jpg 2.bin 3.jpg && '%s' index build --tar s.tar "
			  "-o s.idx 2>&1 | grep -q 'left out 1 members that "
			  "are not regular files' && '%s' index info s.idx | "
			  "grep -q 'samples: *2$'",
			  d, formats[f], fx_wharf_bin(), fx_wharf_bin()),
		    0);
	}
	free(d);
}
END_TEST

/* ---- the builder's fields ---- */

START_TEST(builder_fields)
{
	char *out = pathf("fields.idx");
	wharf_index_builder *b;
	wharf_index *idx;
	struct wharf_field f;

	ck_assert_int_eq(wharf_index_builder_new(out, root, &b), 0);
	ck_assert_int_eq(wharf_index_builder_field(b, "jpg", 0, 1), -EINVAL);
	ck_assert_int_eq(wharf_index_builder_add(b, "plain", 0, 10, -1), 0);
	ck_assert_int_eq(wharf_index_builder_add(b, "shard", 100, 50, 2), 0);
	ck_assert_int_eq(wharf_index_builder_field(b, "jpg", 100, 40), 0);
	ck_assert_int_eq(wharf_index_builder_field(b, "jpg", 140, 0), -EEXIST);
	ck_assert_int_eq(wharf_index_builder_field(b, "cls", 140, 11), -ERANGE);
	ck_assert_int_eq(wharf_index_builder_field(b, "", 140, 1), -EINVAL);
	ck_assert_int_eq(wharf_index_builder_field(b, "cls", 140, 10), 0);
	ck_assert_int_eq(wharf_index_builder_add(b, "shard", 150, 8, 1), 0);
	ck_assert_int_eq(wharf_index_builder_field(b, "cls", 150, 8), 0);
	ck_assert_int_eq(wharf_index_builder_finish(b), 0);
	wharf_index_builder_free(b);

	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	ck_assert_uint_eq(wharf_index_num_fields(idx, 0), 0);
	ck_assert_uint_eq(wharf_index_num_fields(idx, 1), 2);
	ck_assert_uint_eq(wharf_index_num_fields(idx, 2), 1);
	ck_assert_uint_eq(wharf_index_num_fields(idx, 3), 0);
	ck_assert_int_eq(wharf_index_field(idx, 1, 1, &f), 0);
	ck_assert_str_eq(f.name, "cls");
	ck_assert_uint_eq(f.offset, 140);
	ck_assert_uint_eq(f.length, 10);
	ck_assert_int_eq(wharf_index_field(idx, 2, 0, &f), 0);
	ck_assert_str_eq(f.name, "cls");
	ck_assert_str_eq(wharf_index_field_name(idx, 0), "jpg");
	ck_assert_ptr_null(wharf_index_field_name(idx, 2));
	wharf_index_close(idx);

	/* An index without fields has none, and opens as it always did. */
	ck_assert_int_eq(wharf_index_builder_new(out, root, &b), 0);
	ck_assert_int_eq(wharf_index_builder_add(b, "plain", 0, 10, -1), 0);
	ck_assert_int_eq(wharf_index_builder_finish(b), 0);
	wharf_index_builder_free(b);
	ck_assert_int_eq(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx), 0);
	struct wharf_index_info in = {.size = sizeof(in)};
	ck_assert_int_eq(wharf_index_info(idx, &in), 0);
	ck_assert_uint_eq(in.num_fields, 0);
	ck_assert_uint_eq(wharf_index_num_fields(idx, 0), 0);
	wharf_index_close(idx);
	free(out);
}
END_TEST

/* ---- reading one field ---- */

/* Every batch of a loader over idx with `field` (num_workers workers):
 * sample k of the epoch equals member `want[k]` (file under src). */
static void read_field(wharf_index *idx, const char *field, uint32_t workers,
		       const char *decoder, const char *const want[3])
{
	struct wharf_options o;
	wharf_decoder *d = NULL;
	wharf_loader *l;
	const struct wharf_batch *b;

	wharf_options_init(&o);
	o.batch_size = 3;
	o.num_workers = workers;
	if (decoder) {
		ck_assert_int_eq(wharf_decoder_new(decoder, &d), 0);
		ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	}
	if (field)
		o.field = field;
	ck_assert_msg(wharf_loader_open(idx, &o, &l) == 0, "%s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->count, 3);
	ck_assert_ptr_nonnull(b->offsets); /* variable-size: the fields' */
	for (uint32_t k = 0; k < 3; k++) {
		size_t len;
		char *p = pathf("src/%s", want[k]);
		void *file = fx_read_file(p, &len);

		ck_assert_uint_eq(b->offsets[k + 1] - b->offsets[k], len);
		ck_assert(
		    !memcmp((const char *)b->data + b->offsets[k], file, len));
		ck_assert_int_eq(b->labels[k], labels[k]);
		free(file);
		free(p);
	}
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	wharf_loader_close(l);
	wharf_decoder_free(d);
}

START_TEST(loader_reads_a_field)
{
	char *src = make_members();
	char *shard = make_shard(src, "posix", "read.tar");
	char *out = pathf("read.idx"), *plain = pathf("plain.idx");
	const char *const one[] = {shard};
	const char *const jpgs[] = {"0001.jpg", LONG_DIR "/0002.jpg",
				    "0003.jpg"};
	const char *const firsts[] = {"0001.cls", LONG_DIR "/0002.cls",
				      "0003.seg.png"};
	wharf_index *idx, *pidx;
	wharf_loader *l;
	struct wharf_options o;
	const struct wharf_batch *b;

	ck_assert_int_eq(build(one, 1, false, NULL, out), 0);
	ck_assert_int_eq(wharf_index_open(out, 0, &idx), 0);
	read_field(idx, "jpg", 0, NULL, jpgs);
	read_field(idx, "jpg", 2, NULL, jpgs);
	/* The first of several names that a sample has, in its order. */
	read_field(idx, "seg.png,cls", 1, NULL, firsts);
	/* Through the decoders' field=. */
	read_field(idx, NULL, 1, "raw field=jpg", jpgs);
	read_field(idx, NULL, 0, "raw field=cls,seg.png", firsts);

	/* A name no sample has: the open fails, naming those it has. */
	wharf_options_init(&o);
	o.batch_size = 3;
	o.num_workers = 0;
	o.field = "webp";
	ck_assert_int_eq(wharf_loader_open(idx, &o, &l), -ENOENT);
	ck_assert_msg(strstr(wharf_last_error(), "its fields: jpg, cls, "
						 "txt, seg.png"),
		      "%s", wharf_last_error());
	/* A sample without it fails its read; skip_bad leaves it out. */
	o.field = "cls";
	ck_assert_int_eq(wharf_loader_open(idx, &o, &l), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), -ENOENT);
	ck_assert_msg(
	    strstr(wharf_loader_error(l), "no field cls (it has: jpg,seg.png)"),
	    "%s", wharf_loader_error(l));
	wharf_loader_close(l);
	o.skip_bad = 1;
	ck_assert_int_eq(wharf_loader_open(idx, &o, &l), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->count, 2);
	ck_assert_uint_eq(b->skipped, 1);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	wharf_loader_close(l);

	/* An index without fields: a field fails the open, unless it is
	 * the image decoders' default (whole samples then). */
	wharf_index_builder *wb;
	ck_assert_int_eq(wharf_index_builder_new(plain, root, &wb), 0);
	ck_assert_int_eq(
	    wharf_index_builder_add(wb, "src/0001.jpg", 0, 3000, 3), 0);
	ck_assert_int_eq(wharf_index_builder_finish(wb), 0);
	wharf_index_builder_free(wb);
	ck_assert_int_eq(wharf_index_open(plain, 0, &pidx), 0);
	wharf_options_init(&o);
	o.num_workers = 0;
	o.field = "jpg";
	ck_assert_int_eq(wharf_loader_open(pidx, &o, &l), -EINVAL);
	ck_assert_msg(strstr(wharf_last_error(), "has no fields"), "%s",
		      wharf_last_error());
	o.field_if_any = 1;
	ck_assert_int_eq(wharf_loader_open(pidx, &o, &l), 0);
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	ck_assert_uint_eq(b->bytes, 3000);
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	wharf_loader_close(l);
	wharf_index_close(pidx);
	wharf_index_close(idx);
	free(src);
	free(shard);
	free(out);
	free(plain);
}
END_TEST

START_TEST(decoder_field_words)
{
	wharf_decoder *d;
	struct wharf_options o;

	static const char *const bad[] = {"raw field=", "raw field=,jpg",
					  "raw field=jpg,", "raw field=a,,b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(wharf_decoder_new(bad[i], &d), -EINVAL);
		ck_assert_msg(strstr(wharf_last_error(), "field="), "%s",
			      wharf_last_error());
	}
	wharf_options_init(&o);
	ck_assert_int_eq(
	    wharf_decoder_new("array dtype=u8 shape=4 field=npy", &d), 0);
	ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	ck_assert_str_eq(o.field, "npy");
	ck_assert_uint_eq(o.field_if_any, 0);
	wharf_decoder_free(d);
	ck_assert_int_eq(wharf_decoder_new("raw", &d), 0);
	ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	ck_assert_ptr_null(o.field);
	wharf_decoder_free(d);
#ifdef HAVE_JPEG
	ck_assert_int_eq(wharf_decoder_new("jpeg size=8", &d), 0);
	ck_assert_int_eq(wharf_decoder_apply(d, &o), 0);
	ck_assert_str_eq(o.field, "jpg,jpeg,png,webp");
	ck_assert_uint_eq(o.field_if_any, 1);
	wharf_decoder_free(d);
#endif
}
END_TEST

START_TEST(cli)
{
	char *src = make_members();
	char *d = pathf("cli");
	const char *w = fx_wharf_bin();

	ck_assert_int_eq(fx_mkdirs(d), 0);
	free(make_shard(src, "gnu", "cli/a.tar"));
	free(make_shard(src, "posix", "cli/b.tar"));
	/* A glob, in sorted order; info lists the fields. */
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' index build --tar '*.tar' -o "
			       "g.idx | grep -q '6 samples in 2 files' && "
			       "'%s' index info g.idx | grep -q 'fields: *14 "
			       "(jpg, cls, txt, seg.png)' && '%s' index info "
			       "--json g.idx | grep -q '\"field_names\": "
			       "\\[\"jpg\", \"cls\"'",
			       d, w, w, w),
			 0);
	/* A list, relative to its directory; another label field. */
	ck_assert_int_eq(
	    fx_sh("cd '%s' && printf '# shards\\nb.tar\\n\\na.tar\\n'"
		  " > list && cd / && '%s' index build --tar-list "
		  "'%s/list' --label-field txt -o '%s/l.idx' "
		  "2>&1 | grep -q \"key 0001 (0001.txt, 0 bytes) "
		  "is not an integer\"",
		  d, w, d, d),
	    0);
	ck_assert_int_eq(fx_sh("cd / && '%s' index build --tar-list '%s/list' "
			       "--label-field '' -o '%s/l.idx' | grep -q '6 "
			       "samples in 2 files'",
			       w, d, d),
			 0);
	/* Usage: a glob that matches nothing, options without --tar. */
	ck_assert_int_eq(fx_sh("cd '%s' && '%s' index build --tar 'no-*.tar' "
			       "-o x.idx 2>&1 | grep -q \"no shard matches "
			       "'no-\\*.tar'\"",
			       d, w),
			 0);
	ck_assert_int_eq(fx_sh("cd '%s' && ! '%s' index build --tar-partial "
			       "--dir . -o x.idx 2>/dev/null",
			       d, w),
			 0);
	free(src);
	free(d);
}
END_TEST

/* ---- over a mount ---- */

START_TEST(build_over_a_mount)
{
#ifdef HAVE_FS
	char *data = pathf("mount-data"), *work = pathf("mount-work");
	char *local = pathf("local.idx"), *remote = pathf("remote.idx");
	char url[256], shard[PATH_MAX];
	struct fx_mount m;
	wharf_index *a, *b;
	const uint64_t member = 4u << 20; /* past 1 MiB chunks */

	ck_assert_int_eq(fx_mkdirs(data), 0);
	ck_assert_int_eq(fx_mkdirs(work), 0);
	ck_assert_int_eq(fx_sh("cd '%s' && for k in 0 1 2 3; do head -c %llu "
			       "/dev/urandom > s$k.jpg; echo $k > s$k.cls; "
			       "done && tar -cf shard.tar s0.jpg s0.cls s1.jpg "
			       "s1.cls s2.jpg s2.cls s3.jpg s3.cls && rm s?.*",
			       data, (unsigned long long)member),
			 0);
	pid_t origin =
	    fx_origin_start(data, NULL, work, "origin", url, sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work, "tarmnt");
	static const char *const ra[] = {"--readahead", "0", NULL};
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, ra), 0);

	snprintf(shard, sizeof(shard), "%s/shard.tar", data);
	const char *const here[] = {shard};
	ck_assert_int_eq(build(here, 1, false, NULL, local), 0);
	snprintf(shard, sizeof(shard), "%s/shard.tar", m.dir);
	const char *const there[] = {shard};
	ck_assert_msg(build(there, 1, false, NULL, remote) == 0, "%s",
		      wharf_last_error());
	/* Headers and labels only: a chunk around each, not the shard. */
	long long fetched = fx_mount_stat(m.dir, "origin", "bytes_fetched");
	ck_assert_int_gt(fetched, 0);
	ck_assert_msg(fetched < (long long)(2 * member), "%lld bytes fetched",
		      fetched);

	ck_assert_int_eq(wharf_index_open(local, 0, &a), 0);
	ck_assert_int_eq(wharf_index_open(remote, 0, &b), 0);
	ck_assert_uint_eq(wharf_index_count(a), 4);
	ck_assert_uint_eq(wharf_index_count(b), 4);
	for (uint64_t i = 0; i < 4; i++) {
		struct wharf_sample sa, sb;
		ck_assert_int_eq(wharf_index_sample(a, i, &sa), 0);
		ck_assert_int_eq(wharf_index_sample(b, i, &sb), 0);
		ck_assert_int_eq(sa.label, (int32_t)i);
		ck_assert_int_eq(sb.label, (int32_t)i);
		ck_assert_uint_eq(sa.offset, sb.offset);
		ck_assert_uint_eq(sa.length, sb.length);
		for (uint32_t k = 0; k < 2; k++) {
			struct wharf_field fa, fb;
			ck_assert_int_eq(wharf_index_field(a, i, k, &fa), 0);
			ck_assert_int_eq(wharf_index_field(b, i, k, &fb), 0);
			ck_assert_str_eq(fa.name, fb.name);
			ck_assert_uint_eq(fa.offset, fb.offset);
			ck_assert_uint_eq(fa.length, fb.length);
		}
	}
	/* A loader reading the cls fields hints those, not the samples'
	 * spans (which hold the 4 MiB jpgs). */
	struct wharf_options o;
	wharf_loader *l;
	const struct wharf_batch *batch;
	wharf_options_init(&o);
	o.batch_size = 4;
	o.num_workers = 1;
	o.field = "cls";
	ck_assert_int_eq(wharf_loader_open(b, &o, &l), 0);
	ck_assert_int_eq(wharf_loader_next(l, &batch), 0);
	ck_assert_uint_eq(batch->bytes, 8);
	ck_assert_int_eq(wharf_loader_release(l, batch), 0);
	wharf_loader_close(l);
	for (int i = 0; i < 200; i++) {
		if (fx_mount_stat(m.dir, "hints", "queue") == 0 &&
		    fx_mount_stat(m.dir, "prefetch", "inflight_bytes") == 0)
			break;
		usleep(50000);
	}
	long long after = fx_mount_stat(m.dir, "origin", "bytes_fetched");
	ck_assert_msg(after < (long long)(2 * member),
		      "%lld bytes fetched after reading the cls fields", after);

	wharf_index_close(a);
	wharf_index_close(b);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	fx_stop(origin, 5000);
	fx_unmount_leftovers(work);
	free(data);
	free(work);
	free(local);
	free(remote);
#endif
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tar-index");
	TCase *tc = tcase_create("tar-index");
#ifdef HAVE_FS
	const char *why = fx_fuse_missing();
#else
	const char *why = "built without the filesystem (--disable-fs)";
#endif

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, members_byte_for_byte);
	tcase_add_test(tc, crafted_huge_sizes);
	tcase_add_test(tc, damaged_shards);
	tcase_add_test(tc, key_split_across_shards);
	tcase_add_test(tc, label_fields);
	tcase_add_test(tc, sparse_members_left_out);
	tcase_add_test(tc, builder_fields);
	tcase_add_test(tc, loader_reads_a_field);
	tcase_add_test(tc, decoder_field_words);
	tcase_add_test(tc, cli);
	fx_tcase_add(tc, build_over_a_mount, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	root = fx_tmpdir("tar-index");
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	fx_rmtree(root);
	free(root);
	return failed ? 1 : 0;
}
