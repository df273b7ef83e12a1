/*
 * fixture-store: what the store's test programs (test-store, -chunkfile,
 * -cachedir, -evict, -pack, -seal, -cmd-cache) share: a cache dir per
 * test, a store opened on it, chunk keys and bytes, a walk's tally,
 * `wharf cache` run, an object of PN chunks to pack, and their main.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fixture-store.h"
#include "text.h"

char *root; /* every test's files, removed by main */
char *dir;  /* this test's cache dir */
/* Stores opened by open_store write format 1 (the header at the start of
 * the file) rather than format 2 (the header in an xattr): the loop tests
 * set it from their index, so that both formats are read and damaged. */
bool inline_hdr;

void setup(void)
{
	char tmpl[512];

	snprintf(tmpl, sizeof(tmpl), "%s/t-XXXXXX", root);
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	dir = strdup(tmpl);
}

void teardown(void)
{
	fx_rmtree(dir);
	free(dir);
	dir = NULL;
	inline_hdr = false;
}

struct store *open_store(const char *d, uint64_t max)
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

void key_n(struct chunk_key *k, unsigned n)
{
	store_key(k, "http://origin/", "/data/file.bin", "etag-1", 1ull << 40,
		  1700000000, 4 * MiB, n);
}

void chunk_path(const char *d, const struct chunk_key *k, char *out,
		size_t len)
{
	char hex[33];

	store_key_hex(k, hex);
	snprintf(out, len, "%s/chunks/%.2s/%s", d, hex, hex);
}

off_t file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) ? -1 : sb.st_size;
}

/* Incompressible bytes: a function of seed and offset. */
void fill_random(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = fx_byte(seed, i);
}

/* Compressible bytes: text-like lines. */
void fill_text(uint8_t *p, size_t n, uint32_t seed)
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
void flip_byte(const char *path, long off, int mask)
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
bool hdr_in_xattr(const char *path)
{
	return getxattr(path, HDR_XATTR, NULL, 0) > 0;
}

/* Where the chunk's payload starts in its file. */
off_t payload_off(const char *path)
{
	return hdr_in_xattr(path) ? 0 : HDR;
}

void put_get(struct store *st, const struct chunk_key *k, const uint8_t *data,
	     size_t n)
{
	uint8_t *back = malloc(n ? n : 1);
	size_t len = 12345;

	ck_assert_int_eq(store_put(st, k, data, n), 0);
	ck_assert_int_eq(store_get(st, k, back, n, &len), 0);
	ck_assert_uint_eq(len, n);
	ck_assert(n == 0 || memcmp(back, data, n) == 0);
	free(back);
}

/* ---- a walk of the cache dir (store_walk) ---- */

static int tally_one(const struct store_entry *e, void *arg)
{
	struct tally *t = arg;

	t->bytes += e->disk_bytes;
	t->n++;
	t->bad += e->error != 0;
	t->removed += e->removed;
	return 0;
}

struct tally tally(const char *d, unsigned flags)
{
	struct tally t = {0};
	char *err = NULL;

	ck_assert_int_eq(store_walk(d, flags, tally_one, &t, &err), 0);
	return t;
}

/* No leftover temp file in any fan-out dir. */
unsigned count_tmp(const char *d)
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

/* ---- `wharf cache` through the built command ---- */

/* Runs `wharf ARGS` (any command); *out gets what it printed. */
int wharf_cmd(const char *args, char **out)
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
int wharf(const char *args, char **out)
{
	char *full = strdupf("cache %s", args);
	int rc = wharf_cmd(full, out);

	free(full);
	return rc;
}

/* ---- packs: an object's chunks in one file (store_open_object) ---- */

void obj_keys(struct chunk_key k[PN], const char *path)
{
	for (unsigned i = 0; i < PN; i++)
		store_key(&k[i], "http://origin/", path, "etag-9", PSIZE,
			  1700000000, PCS, i);
}

size_t obj_chunk_len(unsigned i)
{
	return i + 1 < PN ? PCS : PSIZE - (size_t)i * PCS;
}

/* Stores the object's chunks (data, PSIZE bytes) one by one. */
void put_object(struct store *st, const struct chunk_key k[PN],
		const uint8_t *data)
{
	for (unsigned i = 0; i < PN; i++)
		ck_assert_int_eq(store_put(st, &k[i], data + (size_t)i * PCS,
					   obj_chunk_len(i)),
				 0);
}

void pack_path(const char *d, const struct chunk_key *k0, const char *suffix,
	       char *out, size_t len)
{
	char hex[33];

	store_key_hex(k0, hex);
	snprintf(out, len, "%s/chunks/%.2s/%s%s", d, hex, hex, suffix);
}

/* Opens the object's pack and checks that it holds exactly data. */
void object_reads(struct store *st, const struct chunk_key k[PN],
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
void chunks_read(struct store *st, const struct chunk_key k[PN],
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

/* ---- main ---- */

/* The suite "store" of one case, `name`: the checked fixture, and time
 * for a slow disk. */
static Suite *suite(const char *name, void (*add_tests)(TCase *tc))
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	add_tests(tc);
	suite_add_tcase(s, tc);
	return s;
}

int store_fx_main(const char *name, void (*add_tests)(TCase *tc))
{
	SRunner *sr;
	int failed;

	root = fx_tmpdir("store");
	sr = srunner_create(suite(name, add_tests));
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
