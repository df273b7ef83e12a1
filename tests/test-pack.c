/*
 * pack: an object's chunks in one file (store_open_object): made, read,
 * damaged, evicted whole, and what a crash leaves.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fixture-store.h"

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

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, pack_made_and_read);
	tcase_add_loop_test(tc, pack_damaged, 0, 6);
	tcase_add_test(tc, pack_evicted_whole);
	tcase_add_test(tc, pack_compressed_evicts_nothing);
	tcase_add_test(tc, pack_crash_leftovers);
}

int main(void)
{
	return store_fx_main("pack", add_tests);
}
