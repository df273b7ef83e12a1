#ifndef WHARF_FS_WALK_H
#define WHARF_FS_WALK_H
/*
 * walk: read-ahead across the files of a directory.  A reader that reads
 * a directory's files one after the other in listing order (cat, cp -r,
 * tar, md5sum) gets the next of them queued while it reads this one; a
 * file's own read-ahead window, where it passes the file's end, goes on
 * into the next one.  Siblings have consecutive inode numbers (tree.h),
 * so "the next file" is the next inode with the same parent.  Prefetch
 * reads ahead within one file; this part knows inodes, which it does not.
 *
 * Both calls do nothing unless ctx->walk_readahead.  For a shuffled
 * reader walk_note takes no lock and looks nothing up in the tree: it
 * pays a few loads; a walk makes its siblings' files (files_get) and
 * queues them (prefetch_ahead).
 */
#include <stdint.h>

struct ops_ctx;
struct ops_file;

/* The first byte of file self (inode ino) is being read. */
void walk_note(struct ops_ctx *ctx, uint64_t ino, const struct ops_file *self);
/* A sequential reader of file self (inode ino) has a read-ahead window
 * that passes its end by bytes (pf_read.spill).  Call it after the reply:
 * the reader need not wait for it. */
void walk_spill(struct ops_ctx *ctx, uint64_t ino, const struct ops_file *self,
		uint64_t bytes);

#endif
