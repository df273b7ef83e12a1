#ifndef WHARF_TEST_FIXTURE_MOUNT_H
#define WHARF_TEST_FIXTURE_MOUNT_H
/*
 * The mount's end-to-end tests' dataset, shared mount and helpers (the
 * programs test-mount, test-readahead, test-mount-cache, test-passthrough,
 * test-offline and test-signals): nginx on 127.0.0.1 serves DATA_DIR,
 * `wharf mount -f` of its /json/ listing runs on MNT_DIR for the whole
 * program, and tests start mounts of their own beside it.  The checks
 * fail the test through Check where they say so.
 */
#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fixture-ck.h"
#include "fixture.h"

#define CHUNK (1u << 20)
#define BIG_SIZE (50ull << 20)
/* many/f0000 .. many/f1999, of small_size(i) bytes */
#define N_SMALL 2000
/* gaps/g0000 .. gaps/g0059, of gap_size(i) bytes */
#define N_GAPS 60

/* The dataset's files of chosen sizes (around a chunk's edges), each
 * fx_write_file of seed_of(name). */
struct sized_file {
	const char *name;
	uint64_t size;
};
#define N_SIZED 7
extern const struct sized_file sized_files[N_SIZED];

extern char *data_dir;	   /* the origin's files */
extern char *cache_dir;	   /* the shared mount's cache */
extern char *mnt_dir;	   /* the shared mount's mountpoint */
extern char *work_dir;	   /* logs, manifests, other mounts */
extern struct fx_nginx ng; /* the origin, over data_dir */

/* The seed of the bytes of the dataset's file name (FNV-1a). */
uint32_t seed_of(const char *name);
/* The size of many/f<i>: 1 to 8192 bytes. */
uint64_t small_size(int i);
/* The size of gaps/g<i>: every other file is empty (as __init__.py
 * files are). */
uint64_t gap_size(int i);

/*
 * Why the mounts cannot run here (no FUSE, no mount command, no nginx),
 * or NULL.  A program's tests are then each named as skipped.
 */
const char *mount_missing(void);
/*
 * A TCase named name for tests of the shared mount: *why is
 * mount_missing(); when NULL, mount_setup and mount_teardown run around
 * the TCase (once, unchecked).  Add its tests with fx_tcase_add(tc, t,
 * *why).
 */
TCase *mount_tcase(const char *name, const char **why);
/* Writes the dataset, starts nginx and the shared mount; aborts when
 * one does not come up. */
void mount_setup(void);
/* Unmounts the shared mount (its exit status and log on stderr when it
 * was not 0), and removes all that mount_setup made. */
void mount_teardown(void);

/* `wharf mount -f` of url on cache, with one retry; see fx_mount_start. */
int mount_start(struct fx_mount *m, const char *url, const char *cache,
		const char *const extra[]);
/*
 * A test's own mount of the JSON listing on its own cache (fx_tmpdir(tag),
 * returned, for own_mount_end); extra: more options, or NULL.  Fails the
 * test when it does not come up.
 */
char *own_mount_start(struct fx_mount *m, const char *tag,
		      const char *const extra[]);
/* Unmounts a test's own mount (the daemon must exit 0) and removes its
 * mountpoint and cache (cache is freed). */
void own_mount_end(struct fx_mount *m, char *cache);
/* `wharf mount -f ARGS DIR` that must fail, its output in work_dir/TAG.
 * @return whether the output holds `expect`. */
bool mount_refused(const char *tag, const char *args, const char *dir,
		   const char *expect);

/* Compares root/name with what fx_write_file wrote for `as`.
 * @return 0, or -1 (with a line on stderr). */
int check_file_as(const char *root, const char *name, const char *as,
		  uint64_t size);
/* check_file_as of name as itself. */
int check_file(const char *root, const char *name, uint64_t size);
/* The errno of the first read of root/name (or of its open); 0 when it
 * reads. */
int read_errno(const char *root, const char *name);
/* Names in dir (not "." or ".."), sorted, each followed by ' '. */
void list_names(const char *dir, char *out, size_t cap);

/* Writes a manifest of the dataset's sized files and a sample of the
 * small ones (every tenth), each name after prefix, plus `extra` lines. */
void write_manifest(const char *path, const char *prefix, const char *extra);
/* check_file of each file write_manifest named, under root; fails the
 * test at the first that differs. */
void check_manifest_files(const char *root, const char *prefix);

/* Flips a byte in the middle of every chunk file under dir (names that
 * start with 32 hex digits).  @return how many (200 at most). */
int corrupt_chunks(const char *dir);
/* How many packs (files of an object's chunks) cache dir holds. */
int count_packs(const char *dir);

/* How many times s occurs in the file at path. */
int count_in_file(const char *path, const char *s);
/* CLOCK_MONOTONIC in seconds. */
double seconds_now(void);

#endif
