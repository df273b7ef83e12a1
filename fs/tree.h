#ifndef WHARF_FS_TREE_H
#define WHARF_FS_TREE_H
/*
 * tree: the inodes of a mount, built from the source's listings.
 *
 * A directory is listed once, on its first lookup or readdir, and never
 * again: datasets are immutable while mounted.  Its children, sorted by
 * name, get consecutive inode numbers, so a readdir is a walk over a range
 * (and the next file in a directory is the next inode) and a
 * lookup is one probe of a (parent, name) hash table.  Names and versions
 * live in an arena of strings that never moves, so the pointers handed out
 * stay valid until tree_free().  Inode numbers are stable for the life of
 * the tree; the root is TREE_ROOT (FUSE's root id).
 *
 * Thread-safe: lookups take a read lock; a listing runs outside any lock
 * (one listing at a time per tree) and publishes its entries under a short
 * write lock.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"
#include "source.h"

#define TREE_ROOT 1

struct tree;

struct tree_attr {
	uint64_t ino;
	uint64_t parent;
	bool is_dir;
	uint64_t size;
	int64_t mtime;
	const char *name;    /* "" for the root; valid until tree_free */
	const char *version; /* "" when the origin gives none; same lifetime */
	const char *digest;  /* the origin's checksum of the object, "ALGO:HEX"
			      * (checksum.h), or ""; same lifetime */
};

/* @return 0 or -ENOMEM.  The source must outlive the tree. */
int tree_new(struct source *src, struct tree **out) WHARF_CHECK;
void tree_free(struct tree *t);

/*
 * The errors that stand for --error-ttl, for a file's reads (files.c)
 * and a directory's listing alike: the origin's answers (403, 404, 5xx,
 * none after the retries), not this process's (ENOMEM, EINVAL) nor an
 * interrupted reader's EINTR.
 */
static inline bool origin_error_stands(int rc)
{
	return rc == -ENOENT || rc == -EACCES || rc == -EIO;
}

/* A directory whose listing failed with such an error answers it again,
 * without a request, for ms (0: every lookup asks; default 0).  Set
 * before the tree is shared. */
void tree_set_error_ttl(struct tree *t, unsigned ms);
/* Lookups and listings so answered. */
uint64_t tree_errors_cached(struct tree *t);

/* Lists directory ino unless already listed.  @return 0, -ENOTDIR,
 * -ENOENT (no such inode), or the listing's -errno (then *err, when not
 * NULL, gets a malloc'd message naming the directory). */
int tree_list(struct tree *t, uint64_t ino, char **err) WHARF_CHECK;

/* The child `name` of directory `parent` (listed on demand).
 * @return 0, -ENOENT, -ENOTDIR, or a listing error. */
int tree_lookup(struct tree *t, uint64_t parent, const char *name,
		struct tree_attr *out) WHARF_CHECK;

/* @return 0 or -ENOENT. */
int tree_getattr(struct tree *t, uint64_t ino,
		 struct tree_attr *out) WHARF_CHECK;

/* Calls cb for the children of listed directory `dir`, starting at the
 * index-th, until cb returns nonzero (the buffer is full) or they run out.
 * cb runs under the read lock and must not call back into the tree.
 * @return 0, -ENOTDIR, -ENOENT or a listing error. */
typedef int (*tree_dir_cb)(void *arg, const struct tree_attr *child,
			   uint64_t next_index);
int tree_readdir(struct tree *t, uint64_t dir, uint64_t index, tree_dir_cb cb,
		 void *arg) WHARF_CHECK;

/* The path of ino relative to the source root ("" for the root, no leading
 * '/') into buf.  @return its length, -ENOENT or -ENAMETOOLONG. */
int tree_path(struct tree *t, uint64_t ino, char *buf, size_t len) WHARF_CHECK;

/*
 * Calls fn once for each listed directory with child NULL (dir is its path
 * as tree_path gives it), then once for each of its children, in inode
 * order.  Runs under the read lock, so a listing waits for the walk to
 * publish: fn must not call into the tree.  @return 0 or fn's nonzero
 * value.
 */
typedef int (*tree_walk_fn)(void *arg, const char *dir,
			    const struct tree_attr *child);
int tree_walk_listed(struct tree *t, tree_walk_fn fn, void *arg) WHARF_CHECK;

/*
 * Lists the listed directory at path again and takes the size, mtime and
 * version the origin gives now for each file whose version or size
 * changed: a mount that came up from a snapshot meets its origin again,
 * and reads from then on fetch the new version (chunk keys include it)
 * instead of serving chunks of the old.  Files already open keep the
 * version they were opened with; names added or removed meanwhile show
 * after a remount (a directory's inode range is fixed).
 * @return how many files changed, -ENOENT, or the listing's -errno.
 */
int tree_revalidate(struct tree *t, const char *path) WHARF_CHECK;

/* A number that changes whenever the tree gets new entries (a directory
 * listed) or new versions (tree_revalidate): whoever saves the tree
 * compares it with the one it saw last. */
uint64_t tree_listings(struct tree *t);

/* Inodes known so far and bytes held (nodes, hash table, strings). */
void tree_usage(struct tree *t, uint64_t *nodes, uint64_t *bytes);

#endif
