#ifndef WHARF_FIXTURE_STORE_H
#define WHARF_FIXTURE_STORE_H
/*
 * fixture-store: the helpers of the store's test programs (fixture-store.c
 * says which), so that each keeps only its own tests.  They fail the
 * running Check test (ck_assert) where a step does not do as it must.
 */
#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fixture.h"
#include "store.h"

#define HDR 48
#define HDR_XATTR "user.wharf.chunk"
#define MiB (1024 * 1024)

/* ---- the fixture of every case ---- */

extern char *root; /* every test's files, removed by main */
extern char *dir;  /* this test's cache dir */
/* Stores opened by open_store write format 1 (the header at the start of
 * the file) rather than format 2 (the header in an xattr): the loop tests
 * set it from their index, so that both formats are read and damaged. */
extern bool inline_hdr;

/* The checked fixture of every case: a new cache dir in dir, under root;
 * teardown removes it and sets inline_hdr back to false. */
void setup(void);
void teardown(void);

/* A store opened on d with cap max (0: none), format 1 where inline_hdr;
 * the test fails where it cannot be opened. */
struct store *open_store(const char *d, uint64_t max);
/* The key of chunk n of one fixed object of 1 TiB in 4 MiB chunks. */
void key_n(struct chunk_key *k, unsigned n);
/* The path of k's chunk file in cache dir d, into out (len bytes). */
void chunk_path(const char *d, const struct chunk_key *k, char *out,
		size_t len);
/* path's size, or -1 where it cannot be stat'd. */
off_t file_size(const char *path);
/* Incompressible bytes: a function of seed and offset. */
void fill_random(uint8_t *p, size_t n, uint32_t seed);
/* Compressible bytes: text-like lines. */
void fill_text(uint8_t *p, size_t n, uint32_t seed);
/* XORs the byte at off with mask. */
void flip_byte(const char *path, long off, int mask);
/* Whether chunk file path keeps its header in its xattr (format 2) rather
 * than in its first HDR bytes (format 1). */
bool hdr_in_xattr(const char *path);
/* Where the chunk's payload starts in its file. */
off_t payload_off(const char *path);
/* Stores n bytes of data as k and reads exactly them back. */
void put_get(struct store *st, const struct chunk_key *k, const uint8_t *data,
	     size_t n);

/* ---- a walk of the cache dir (store_walk) ---- */

/* Sum of the chunk files' sizes (rounded to 4 KiB) and their number. */
struct tally {
	uint64_t bytes, n, bad, removed;
};
/* What store_walk of d with flags finds; the walk must succeed. */
struct tally tally(const char *d, unsigned flags);
/* The temp files left in the fan-out dirs of cache dir d: how many. */
unsigned count_tmp(const char *d);

/* ---- `wharf cache` through the built command ---- */

/* Runs `wharf ARGS` (any command); *out gets what it printed. */
int wharf_cmd(const char *args, char **out);
/* Runs `wharf cache ARGS`. */
int wharf(const char *args, char **out);

/* ---- packs: an object's chunks in one file (store_open_object) ---- */

/* A pack test's chunk size: not a multiple of the page size, so that a
 * chunk in a pack starts within a page. */
#define PCS 70000
#define PN 4
#define PSIZE (3 * PCS + 1234)

/* The keys of the PN chunks of the object at path (PSIZE bytes). */
void obj_keys(struct chunk_key k[PN], const char *path);
/* The length of the object's chunk i. */
size_t obj_chunk_len(unsigned i);
/* Stores the object's chunks (data, PSIZE bytes) one by one. */
void put_object(struct store *st, const struct chunk_key k[PN],
		const uint8_t *data);
/* The path of the pack of chunk 0 k0 in cache dir d, with suffix (".pack"
 * or ".idx"), into out (len bytes). */
void pack_path(const char *d, const struct chunk_key *k0, const char *suffix,
	       char *out, size_t len);
/* Opens the object's pack and checks that it holds exactly data. */
void object_reads(struct store *st, const struct chunk_key k[PN],
		  const uint8_t *data, struct store_file_id *checked);
/* Each chunk reads back from the store, copied and mapped (a chunk in a
 * pack from within a page of it). */
void chunks_read(struct store *st, const struct chunk_key k[PN],
		 const uint8_t *data);

/* The main of each of the store's test programs: runs the tests that
 * add_tests puts in a case named `name` (of the suite "store"), with the
 * fixture above and a timeout of 120 s, in a tmp dir of their own (root),
 * and removes it.  @return the exit status: 0, or 1 where a test
 * failed. */
int store_fx_main(const char *name, void (*add_tests)(TCase *tc));

#endif
