#ifndef WHARF_FS_SNAPSHOT_H
#define WHARF_FS_SNAPSHOT_H
/*
 * snapshot: the listing a mount served, kept in its cache dir (where
 * store_snapshot_path() says) so that a later mount of the same source can
 * come up while the origin cannot be reached.
 *
 * A text file, one record a line; names, paths and versions are
 * percent-encoded, so that no field holds a space or a newline:
 *
 *   wharf-snapshot 1
 *   source SOURCE-ID          the source it belongs to, and no other
 *   saved EPOCH-SECONDS
 *   D DIR                     a listed directory ("" the root); its
 *   d MTIME NAME              subdirectories and
 *   f SIZE MTIME NAME VERSION files follow (VERSION may be empty)
 *   end ENTRIES HASH          d and f lines, XXH64 of every byte above
 *
 * Saving writes a temp file, fsyncs it, renames it over the old one and
 * fsyncs the directory: a crash, or a disk too full for the new one,
 * leaves the old snapshot or the new one.
 * The end line catches the rest (a truncated or damaged file is refused,
 * never half used).
 */
#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"
#include "source.h"
#include "store.h"
#include "tree.h"

struct snapshot;

/*
 * Writes the directories tree has listed, and those of `old` (may be NULL)
 * that it has not, to path (its directory is made when missing): a mount
 * that looked at less than the last one does not make the snapshot forget
 * the rest.  A disk too full for it has st (the store of that cache dir;
 * may be NULL) evict chunks to make room (store_room), and the write is
 * tried once more.  @return 0, or -errno with *err naming the file.
 */
int snapshot_save(const char *path, const char *source_id, struct tree *tree,
		  const struct snapshot *old, struct store *st,
		  char **err) WHARF_CHECK;

/*
 * Reads and checks the snapshot at path.  source_id NULL takes any source
 * (`wharf cache stats`); otherwise a snapshot of another source is refused
 * with -ESTALE.  @return 0, -ENOENT when there is none, or -errno with
 * *err saying what is wrong with it (caller frees).
 */
int snapshot_load(const char *path, const char *source_id,
		  struct snapshot **out, char **err) WHARF_CHECK;
void snapshot_free(struct snapshot *s);

/* Hands each entry of directory dir ("" the root) to cb, as a listing
 * would.  @return 0, cb's value, or -ENOENT when dir was never listed. */
int snapshot_list(const struct snapshot *s, const char *dir, source_list_cb cb,
		  void *arg);
/* The object at path.  @return 0 (strings valid while s lives), -ENOENT. */
int snapshot_stat(const struct snapshot *s, const char *path,
		  struct source_object *out);

struct snapshot_info {
	const char *source; /* valid while the snapshot lives */
	int64_t saved;	    /* epoch seconds */
	uint64_t dirs, entries;
};
void snapshot_info(const struct snapshot *s, struct snapshot_info *out);

/*
 * The snapshot files in cache dir `dir`: fn gets each one's path.
 * @return 0 (also when there is no snapshot dir), fn's nonzero value, or
 * -errno with *err.
 */
typedef int (*snapshot_each_fn)(void *arg, const char *path);
int snapshot_each(const char *dir, snapshot_each_fn fn, void *arg,
		  char **err) WHARF_CHECK;

/* Removes every snapshot of cache dir `dir` (and unfinished temp files);
 * *removed gets how many snapshots.  @return 0 or -errno with *err. */
int snapshot_clear(const char *dir, uint64_t *removed, char **err) WHARF_CHECK;

#endif
