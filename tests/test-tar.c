/* Tar shards: member extents from GNU tar's archives (gnu, posix, ustar)
 * checked against the files' own bytes, crafted headers (base-256 and pax
 * sizes over 8 GiB, signed checksums, odd octal), damage, and the
 * WebDataset grouping. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "tar.h"

#define GiB (1ull << 30)

/* ---- what a walk saw ---- */

#define SEEN_MAX 64

struct seen {
	size_t n;
	struct {
		char *name;
		uint64_t header, offset, size;
		enum tar_type type;
	} m[SEEN_MAX];
};

static int record(void *arg, const struct tar_member *m)
{
	struct seen *s = arg;

	ck_assert_uint_lt(s->n, SEEN_MAX);
	s->m[s->n].name = strdup(m->name);
	s->m[s->n].header = m->header;
	s->m[s->n].offset = m->offset;
	s->m[s->n].size = m->size;
	s->m[s->n].type = m->type;
	s->n++;
	return 0;
}

static void seen_free(struct seen *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->m[i].name);
	s->n = 0;
}

static int find(const struct seen *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->m[i].name, name))
			return (int)i;
	return -1;
}

/* ---- a sparse archive: header blocks at offsets, zeros elsewhere ---- */

#define BLOCKS_MAX 16

struct sparse {
	size_t n;
	uint64_t off[BLOCKS_MAX];
	uint8_t blk[BLOCKS_MAX][512];
	uint64_t reads_past; /* reads that touched no header block */
};

static int sparse_read(void *arg, uint64_t off, void *buf, size_t len)
{
	struct sparse *sp = arg;
	bool hit = false;

	memset(buf, 0, len);
	for (size_t i = 0; i < sp->n; i++) {
		uint64_t b = sp->off[i];

		if (b + 512 <= off || b >= off + len)
			continue;
		hit = true;
		for (uint64_t o = b > off ? b : off;
		     o < b + 512 && o < off + len; o++)
			((uint8_t *)buf)[o - off] = sp->blk[i][o - b];
	}
	sp->reads_past += !hit;
	return 0;
}

static uint8_t *add_block(struct sparse *sp, uint64_t off)
{
	ck_assert_uint_lt(sp->n, BLOCKS_MAX);
	sp->off[sp->n] = off;
	memset(sp->blk[sp->n], 0, 512);
	return sp->blk[sp->n++];
}

static void octal(uint8_t *f, size_t n, uint64_t v)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%0*llo", (int)n - 1, (unsigned long long)v);
	memcpy(f, tmp, n - 1);
	f[n - 1] = '\0';
}

/* The checksum field as tar writes it: six digits, NUL, space.  signed_sum
 * sums the bytes as signed chars, as some old writers did. */
static void seal(uint8_t *b, bool signed_sum)
{
	long sum = 0;
	char tmp[8];

	memset(b + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += signed_sum ? (int8_t)b[i] : b[i];
	snprintf(tmp, sizeof(tmp), "%06lo", (unsigned long)sum);
	memcpy(b + 148, tmp, 6);
	b[154] = '\0';
	b[155] = ' ';
}

/* A ustar header block at off: name, size (octal when it fits 11 digits,
 * else base-256 as GNU writes it), type. */
static uint8_t *header(struct sparse *sp, uint64_t off, const char *name,
		       uint64_t size, char type)
{
	uint8_t *b = add_block(sp, off);

	memcpy(b, name, strlen(name));
	octal(b + 100, 8, 0644);
	if (size < (1ull << 33)) {
		octal(b + 124, 12, size);
	} else {
		b[124] = 0x80;
		for (int i = 11; i >= 1; i--, size >>= 8)
			b[124 + i] = (uint8_t)size;
	}
	b[156] = (uint8_t)type;
	memcpy(b + 257,
	       "ustar\0"
	       "00",
	       8);
	seal(b, false);
	return b;
}

/* A pax x or g header at off with the given records; returns the offset
 * after its data. */
static uint64_t pax(struct sparse *sp, uint64_t off, char type,
		    const char *records)
{
	size_t n = strlen(records);

	ck_assert_uint_le(n, 512);
	header(sp, off, "PaxHeaders/x", n, type);
	memcpy(add_block(sp, off + 512), records, n);
	return off + 1024;
}

static int walk_sparse(struct sparse *sp, uint64_t size, struct seen *s,
		       char **err)
{
	return tar_walk("crafted.tar", size, sparse_read, sp, record, s, err);
}

/* ---- GNU tar's archives, against the files ---- */

struct file {
	const char *name;
	uint64_t size;
	bool ustar; /* representable in ustar (name <= 100, or split at a
		     * slash into prefix <= 155 and name <= 100) */
};

static char long_names[4][400];

static void make_names(void)
{
	/* 125 chars: ustar splits it at the slash; 185: too; 275: only gnu
	 * and posix; a 134-char basename: only gnu and posix. */
	snprintf(
	    long_names[0], 400, "%s/%s.txt",
	    "pppppppppppppppppppppppp"
	    "pppppppppppppppppppppppppppppppppppp",
	    "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq");
	memset(long_names[1], 'r', 100);
	snprintf(
	    long_names[1] + 100, 300, "/%s",
	    "ssssssssssssssssssssssss"
	    "ssssssssssssssssssssssssssssssssssssssssssssssssssssssss.bin");
	memset(long_names[2], 't', 150);
	long_names[2][150] = '/';
	memset(long_names[2] + 151, 'u', 120);
	strcpy(long_names[2] + 271, ".dat");
	memset(long_names[3], 'v', 130);
	strcpy(long_names[3] + 130, ".txt");
}

static const struct file files[] = {
    {"0001.jpg", 1000, true}, {"0001.cls", 1, true},
    {"0002.jpg", 0, true}, /* a 0-byte field */
    {"0002.cls", 2, true},    {"empty", 0, true},
    {"big.bin", 70000, true}, {"sub/0003.seg.png", 513, true},
    {NULL, 777, true},	      {NULL, 512, true},
    {NULL, 1536, false},      {NULL, 3, false},
};
#define NFILES (sizeof(files) / sizeof(files[0]))

static const char *file_name(size_t i)
{
	return files[i].name ? files[i].name : long_names[i - 7];
}

static const char *const formats[] = {"gnu", "posix", "ustar"};

/* Writes the files (plus a directory and a symlink) under dir/in and
 * archives them in that order as dir/shard.tar with tar --format=fmt. */
static void make_archive(const char *dir, const char *fmt)
{
	char path[1024], list[1024];
	FILE *f;

	make_names();
	snprintf(list, sizeof(list), "%s/list", dir);
	f = fopen(list, "w");
	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < NFILES; i++) {
		const char *name = file_name(i);
		char *slash;

		if (!files[i].ustar && !strcmp(fmt, "ustar"))
			continue;
		snprintf(path, sizeof(path), "%s/in/%s", dir, name);
		slash = strrchr(path, '/');
		*slash = '\0';
		ck_assert_int_eq(fx_mkdirs(path), 0);
		*slash = '/';
		ck_assert_int_eq(
		    fx_write_file(path, files[i].size, (uint32_t)i), 0);
		fprintf(f, "%s\n", name);
	}
	fprintf(f, "sub\nlink\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/in/link", dir);
	ck_assert_int_eq(symlink("0001.jpg", path), 0);
	ck_assert_int_eq(
	    fx_sh("tar --format=%s --no-recursion -cf %s/shard.tar "
		  "-C %s/in -T %s",
		  fmt, dir, dir, list),
	    0);
}

START_TEST(gnu_tar_archives)
{
	const char *fmt = formats[_i];
	char *dir = fx_tmpdir("tar");
	char path[1024];
	struct seen s = {0};
	char *err = NULL;
	uint8_t *tar;
	size_t len, expect = 0;
	int fd, rc, x_headers = 0;

	make_archive(dir, fmt);
	snprintf(path, sizeof(path), "%s/shard.tar", dir);
	tar = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(tar);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	rc = tar_walk(path, len, tar_pread, &fd, record, &s, &err);
	ck_assert_msg(rc == 0, "%s: %s", fmt, err);
	close(fd);
	for (size_t i = 0; i < NFILES; i++) {
		const char *name = file_name(i);
		int k;

		if (!files[i].ustar && !strcmp(fmt, "ustar"))
			continue;
		expect++;
		k = find(&s, name);
		ck_assert_msg(k >= 0, "%s: %s not found", fmt, name);
		ck_assert_int_eq(s.m[k].type, TAR_REGULAR);
		ck_assert_uint_eq(s.m[k].size, files[i].size);
		ck_assert_uint_le(s.m[k].offset + s.m[k].size, len);
		ck_assert_uint_eq(s.m[k].offset % 512, 0);
		ck_assert_uint_lt(s.m[k].header, s.m[k].offset);
		/* The bytes at the offset are the file's. */
		for (uint64_t o = 0; o < files[i].size; o++)
			ck_assert_msg(tar[s.m[k].offset + o] ==
					  fx_byte((uint32_t)i, o),
				      "%s: %s byte %llu", fmt, name,
				      (unsigned long long)o);
	}
	/* The directory and the symlink: other, no data. */
	ck_assert_uint_eq(s.n, expect + 2);
	ck_assert_int_eq(s.m[find(&s, "sub/")].type, TAR_OTHER);
	ck_assert_int_eq(s.m[find(&s, "link")].type, TAR_OTHER);
	ck_assert_uint_eq(s.m[find(&s, "link")].size, 0);
	/* posix wrote pax x headers for the long names: the walk read them. */
	for (size_t o = 0; o + 512 <= len; o += 512)
		x_headers +=
		    tar[o + 156] == 'x' && !memcmp(tar + o + 257, "ustar", 5);
	if (!strcmp(fmt, "posix"))
		ck_assert_int_ge(x_headers, 2);
	seen_free(&s);
	free(tar);
	fx_rmtree(dir);
	free(dir);
}
END_TEST

/* Damage in a real archive: the members before it are passed, then an
 * error that names the shard and the header's offset. */
static void damaged(uint8_t *tar, size_t len, size_t keep_before,
		    const char *want, uint64_t at)
{
	struct seen s = {0};
	char *err = NULL;
	char where[64];
	int fd;
	char path[] = "/tmp/wharf-tar-damaged-XXXXXX";
	int rc;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, tar, len), (ssize_t)len);
	rc = tar_walk("shard-7.tar", len, tar_pread, &fd, record, &s, &err);
	close(fd);
	unlink(path);
	ck_assert_int_eq(rc, -EBADMSG);
	ck_assert_ptr_nonnull(err);
	snprintf(where, sizeof(where),
		 "shard-7.tar: byte %llu: ", (unsigned long long)at);
	ck_assert_msg(!strncmp(err, where, strlen(where)), "%s", err);
	ck_assert_msg(strstr(err, want), "%s", err);
	ck_assert_uint_eq(s.n, keep_before);
	free(err);
	seen_free(&s);
}

START_TEST(damaged_archives)
{
	char *dir = fx_tmpdir("tar");
	char path[1024];
	struct seen s = {0};
	uint8_t *tar;
	size_t len;
	uint64_t h2, big;
	int fd;

	make_archive(dir, "gnu");
	snprintf(path, sizeof(path), "%s/shard.tar", dir);
	tar = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(tar);
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(tar_walk(path, len, tar_pread, &fd, record, &s, NULL),
			 0);
	close(fd);
	/* Member 0 is 0001.jpg (1000 bytes); member 1 starts at h2. */
	h2 = s.m[1].header;
	ck_assert_uint_eq(h2, 512 + 1024);
	big = s.m[find(&s, "big.bin")].header;

	/* Cut in the middle of big.bin's data: its size runs past the end. */
	damaged(tar, big + 512 + 1000, (size_t)find(&s, "big.bin"),
		"run past the end", big);
	/* Cut in the middle of the second header. */
	damaged(tar, h2 + 100, 1, "truncated", h2);
	/* Cut just after the first member's data, inside its padding. */
	damaged(tar, 512 + 1000, 0, "run past the end", 0);
	/* A bit flipped in the second header. */
	tar[h2 + 20] ^= 1;
	damaged(tar, len, 1, "checksum", h2);
	tar[h2 + 20] ^= 1;
	/* The trailer cut off at a header boundary: accepted, all members. */
	{
		struct seen t = {0};

		fd = open(path, O_RDONLY);
		ck_assert_int_eq(tar_walk(path, s.m[s.n - 1].offset, tar_pread,
					  &fd, record, &t, NULL),
				 0);
		close(fd);
		ck_assert_uint_eq(t.n, s.n);
		seen_free(&t);
	}
	seen_free(&s);
	free(tar);
	fx_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- crafted headers ---- */

START_TEST(base256_size_over_8gib)
{
	const uint64_t size = 9 * GiB + 5;
	const uint64_t next = 512 + ((size + 511) & ~511ull);
	struct sparse sp = {0};
	struct seen s = {0};
	char *err = NULL;
	uint8_t *b;

	b = header(&sp, 0, "huge.npy", size, '0');
	ck_assert_uint_eq(b[124], 0x80); /* base-256 indeed */
	header(&sp, next, "after.cls", 3, '0');
	ck_assert_int_eq(walk_sparse(&sp, next + 1024 + 1024, &s, &err), 0);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_str_eq(s.m[0].name, "huge.npy");
	ck_assert_uint_eq(s.m[0].offset, 512);
	ck_assert_uint_eq(s.m[0].size, size);
	ck_assert_str_eq(s.m[1].name, "after.cls");
	ck_assert_uint_eq(s.m[1].header, next);
	ck_assert_uint_eq(s.m[1].offset, next + 512);
	ck_assert_uint_eq(s.m[1].size, 3);
	/* Only headers were read: no read landed in the 9 GiB of data
	 * except the end-of-archive check, which reads zero blocks. */
	ck_assert_uint_le(sp.reads_past, 2);
	seen_free(&s);

	/* The same size one byte short of the end: damage, named. */
	ck_assert_int_eq(walk_sparse(&sp, next - 1, &s, &err), -EBADMSG);
	ck_assert_msg(strstr(err, "crafted.tar: byte 0: member huge.npy"), "%s",
		      err);
	ck_assert_uint_eq(s.n, 0);
	/* A negative base-256 size. */
	sp.blk[0][124] = 0xff;
	seal(sp.blk[0], false);
	ck_assert_int_eq(walk_sparse(&sp, next + 2048, &s, &err), -EBADMSG);
	ck_assert_msg(strstr(err, "size field"), "%s", err);
	free(err);
}
END_TEST

START_TEST(pax_size_and_path)
{
	const uint64_t size = 10000000000ull; /* over 8 GiB */
	struct sparse sp = {0};
	struct seen s = {0};
	char *err = NULL;
	uint64_t off, next;

	/* A global path (g) for later members, then an x record with a
	 * size and a path for the next one, whose header says 0 bytes. */
	off = pax(&sp, 0, 'x',
		  "29 path=dir/long/name.tensor\n"
		  "20 size=10000000000\n"
		  "30 mtime=1700000000.123456789\n");
	header(&sp, off, "ignored-short", 0, '0');
	next = off + 512 + ((size + 511) & ~511ull);
	header(&sp, next, "plain.txt", 4, '0');
	off = pax(&sp, next + 1024, 'g', "13 size=1024\n");
	header(&sp, off, "g-sized.bin", 0, '0');
	off = pax(&sp, off + 512 + 1024, 'g', "8 size=\n");
	header(&sp, off, "unsized.bin", 7, '0');
	ck_assert_int_eq(walk_sparse(&sp, off + 1024 + 1024, &s, &err), 0);
	ck_assert_uint_eq(s.n, 4);
	ck_assert_str_eq(s.m[0].name, "dir/long/name.tensor");
	ck_assert_uint_eq(s.m[0].header, 0);
	ck_assert_uint_eq(s.m[0].offset, 1536);
	ck_assert_uint_eq(s.m[0].size, size);
	/* The x record was for one member only. */
	ck_assert_str_eq(s.m[1].name, "plain.txt");
	ck_assert_uint_eq(s.m[1].offset, next + 512);
	ck_assert_uint_eq(s.m[1].size, 4);
	ck_assert_uint_eq(s.m[2].size, 1024);
	/* An empty value unsets the global keyword. */
	ck_assert_uint_eq(s.m[3].size, 7);
	seen_free(&s);

	/* A record whose length is wrong. */
	memcpy(sp.blk[1], "31", 2); /* it is 29 */
	ck_assert_int_eq(walk_sparse(&sp, off + 2048, &s, &err), -EBADMSG);
	ck_assert_msg(strstr(err, "byte 0: a malformed pax record"), "%s", err);
	ck_assert_uint_eq(s.n, 0);
	free(err);
}
END_TEST

START_TEST(gnu_long_name_and_link)
{
	struct sparse sp = {0};
	struct seen s = {0};
	char *err = NULL;
	char name[300];

	memset(name, 'n', 299);
	name[299] = '\0';
	ck_assert_uint_le(300, 512);
	header(&sp, 0, "././@LongLink", 300, 'L');
	memcpy(add_block(&sp, 512), name, 300);
	header(&sp, 1024, "././@LongLink", 200, 'K');
	/* A symlink (long target) whose size field is not a data length. */
	header(&sp, 2048, "nnnnn", 100, '2');
	header(&sp, 2560, "file.txt", 1, '0');
	ck_assert_int_eq(walk_sparse(&sp, 3072 + 512 + 1024, &s, &err), 0);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_str_eq(s.m[0].name, name);
	ck_assert_uint_eq(s.m[0].header, 0);
	ck_assert_int_eq(s.m[0].type, TAR_OTHER);
	ck_assert_str_eq(s.m[1].name, "file.txt");
	ck_assert_uint_eq(s.m[1].offset, 3072);
	seen_free(&s);
	/* A long name with nothing after it: truncated. */
	ck_assert_int_eq(walk_sparse(&sp, 1024, &s, &err), -EBADMSG);
	ck_assert_msg(strstr(err, "byte 0: the archive ends after an extended"),
		      "%s", err);
	free(err);
}
END_TEST

START_TEST(checksums_and_numbers)
{
	struct sparse sp = {0};
	struct seen s = {0};
	char *err = NULL;
	uint8_t *b;

	/* A name with high bytes, summed as signed chars. */
	b = header(&sp, 0, "caf\xe9\xff.txt", 5, '0');
	seal(b, true);
	/* Octal with leading spaces and a space then NUL after it; a v7
	 * header (no magic, type NUL). */
	b = header(&sp, 1024, "v7.txt", 0, '\0');
	memcpy(b + 124, "   12  \0\0\0\0\0", 12);
	memset(b + 257, 0, 8);
	seal(b, false);
	ck_assert_int_eq(walk_sparse(&sp, 2048 + 1024, &s, &err), 0);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_str_eq(s.m[0].name, "caf\xe9\xff.txt");
	ck_assert_uint_eq(s.m[1].size, 10);
	ck_assert_int_eq(s.m[1].type, TAR_REGULAR);
	seen_free(&s);

	/* Digits after a space: not a number. */
	memcpy(b + 124, " 12 3\0\0\0\0\0\0\0", 12);
	seal(b, false);
	ck_assert_int_eq(walk_sparse(&sp, 3072, &s, &err), -EBADMSG);
	ck_assert_msg(strstr(err, "byte 1024: the size field"), "%s", err);
	ck_assert_uint_eq(s.n, 1);
	seen_free(&s);
	/* A checksum off by one. */
	b[148 + 5]++;
	ck_assert_int_eq(walk_sparse(&sp, 3072, &s, &err), -EBADMSG);
	ck_assert_msg(strstr(err, "byte 1024: bad header checksum"), "%s", err);
	seen_free(&s);
	free(err);
}
END_TEST

START_TEST(end_of_archive)
{
	struct sparse sp = {0};
	struct seen s = {0};
	char *err = NULL;

	header(&sp, 0, "a.txt", 1, '0');
	/* EOF right after a member, one zero block then EOF, two zero
	 * blocks then anything: all end the archive. */
	ck_assert_int_eq(walk_sparse(&sp, 1024, &s, &err), 0);
	ck_assert_int_eq(walk_sparse(&sp, 1536, &s, &err), 0);
	header(&sp, 2048, "junk-after-trailer", 0, '0');
	ck_assert_int_eq(walk_sparse(&sp, 4096, &s, &err), 0);
	ck_assert_uint_eq(s.n, 3);
	seen_free(&s);
	/* A lone zero block before a header; a partial block. */
	header(&sp, 1536, "b.txt", 0, '0');
	ck_assert_int_eq(walk_sparse(&sp, 2048, &s, &err), -EBADMSG);
	ck_assert_msg(strstr(err, "byte 1024: a lone zero block"), "%s", err);
	ck_assert_int_eq(walk_sparse(&sp, 1024 + 100, &s, &err), -EBADMSG);
	ck_assert_msg(strstr(err, "byte 1024: truncated"), "%s", err);
	seen_free(&s);
	free(err);
}
END_TEST

/* ---- WebDataset grouping ---- */

struct samples {
	size_t n;
	char text[4096];
};

/* "key:ext@offset+size,...;" per sample. */
static int collect(void *arg, const struct tar_sample *smp)
{
	struct samples *g = arg;
	size_t at = strlen(g->text);

	at += (size_t)snprintf(g->text + at, sizeof(g->text) - at,
			       "%s:", smp->key);
	for (size_t i = 0; i < smp->nfields; i++)
		at += (size_t)snprintf(
		    g->text + at, sizeof(g->text) - at, "%s%s@%llu+%llu",
		    i ? "," : "", smp->fields[i].ext,
		    (unsigned long long)smp->fields[i].offset,
		    (unsigned long long)smp->fields[i].size);
	snprintf(g->text + at, sizeof(g->text) - at, ";");
	g->n++;
	return 0;
}

START_TEST(wds_split)
{
	const char *ext = NULL;

	ck_assert_int_eq(tar_wds_split("a/b.c/0001.seg.png", &ext), 10);
	ck_assert_str_eq(ext, "seg.png");
	ck_assert_int_eq(tar_wds_split("0001.jpg", &ext), 4);
	ck_assert_str_eq(ext, "jpg");
	ck_assert_int_eq(tar_wds_split("a.b/README", &ext), -1);
	ck_assert_int_eq(tar_wds_split("dir/.hidden", &ext), -1);
	ck_assert_int_eq(tar_wds_split("dot.", &ext), -1);
}
END_TEST

START_TEST(wds_samples)
{
	char *dir = fx_tmpdir("tar");
	char path[1024];
	struct samples g = {0};
	uint64_t skipped = 0;
	char *err = NULL;
	size_t len;
	uint8_t *tar;
	int fd, rc;

	make_archive(dir, "gnu");
	snprintf(path, sizeof(path), "%s/shard.tar", dir);
	tar = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(tar);
	free(tar);
	fd = open(path, O_RDONLY);
	rc = tar_wds_walk("s.tar", len, tar_pread, &fd, collect, &g, &skipped,
			  &err);
	close(fd);
	ck_assert_msg(rc == 0, "%s", err);
	/* 0002.jpg is the 0-byte field; "empty" (no dot), the directory
	 * and the symlink are skipped. */
	ck_assert_msg(!strncmp(g.text,
			       "0001:jpg@512+1000,cls@2048+1;"
			       "0002:jpg@3072+0,cls@3584+2;"
			       "big:bin@",
			       strlen("0001:jpg@512+1000,cls@2048+1;"
				      "0002:jpg@3072+0,cls@3584+2;big:bin@")),
		      "%s", g.text);
	ck_assert_msg(strstr(g.text, ";sub/0003:seg.png@"), "%s", g.text);
	ck_assert_uint_eq(g.n, 8);
	ck_assert_uint_eq(skipped, 3);
	fx_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(wds_split_key)
{
	char *dir = fx_tmpdir("tar");
	struct samples g = {0};
	char path[1024];
	char *err = NULL;
	struct seen s = {0};
	int fd, rc;
	struct stat st;

	ck_assert_int_eq(fx_sh("cd %s && mkdir in && cd in && "
			       "echo a >0001.jpg && echo 1 >0001.cls && "
			       "echo b >0002.jpg && echo c >0001.txt && "
			       "echo d >0003.jpg && "
			       "tar --format=gnu -cf ../shard.tar 0001.jpg "
			       "0001.cls 0002.jpg 0001.txt 0003.jpg",
			       dir),
			 0);
	snprintf(path, sizeof(path), "%s/shard.tar", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(tar_walk("s.tar", (uint64_t)st.st_size, tar_pread, &fd,
				  record, &s, NULL),
			 0);
	rc = tar_wds_walk("s.tar", (uint64_t)st.st_size, tar_pread, &fd,
			  collect, &g, NULL, &err);
	close(fd);
	ck_assert_int_eq(rc, -EBADMSG);
	/* Named at 0001.txt's header; the samples before it were passed. */
	ck_assert_str_eq(s.m[3].name, "0001.txt");
	snprintf(path, sizeof(path), "s.tar: byte %llu: key 0001 comes back",
		 (unsigned long long)s.m[3].header);
	ck_assert_msg(!strncmp(err, path, strlen(path)), "%s", err);
	ck_assert_uint_eq(g.n, 2);
	ck_assert_msg(!strncmp(g.text, "0001:jpg@512+2,cls@1536+2;0002:", 31),
		      "%s", g.text);
	free(err);
	seen_free(&s);
	fx_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(wds_field_twice)
{
	struct sparse sp = {0};
	struct samples g = {0};
	char *err = NULL;

	header(&sp, 0, "k/0001.jpg", 0, '0');
	header(&sp, 512, "k/0001.jpg", 0, '0');
	ck_assert_int_eq(tar_wds_walk("t.tar", 1024, sparse_read, &sp, collect,
				      &g, NULL, &err),
			 -EBADMSG);
	ck_assert_msg(strstr(err, "t.tar: byte 512: key k/0001 has field jpg "
				  "twice"),
		      "%s", err);
	ck_assert_uint_eq(g.n, 0);
	free(err);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tar");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, gnu_tar_archives, 0, 3);
	tcase_add_test(tc, damaged_archives);
	tcase_add_test(tc, base256_size_over_8gib);
	tcase_add_test(tc, pax_size_and_path);
	tcase_add_test(tc, gnu_long_name_and_link);
	tcase_add_test(tc, checksums_and_numbers);
	tcase_add_test(tc, end_of_archive);
	tcase_add_test(tc, wds_split);
	tcase_add_test(tc, wds_samples);
	tcase_add_test(tc, wds_split_key);
	tcase_add_test(tc, wds_field_twice);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
