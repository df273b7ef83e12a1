#ifndef WHARF_FS_CONTROL_H
#define WHARF_FS_CONTROL_H
/*
 * control: the hidden directory `.wharf` in a mount's root and its two
 * files, which are how a program talks to the mount rather than to the
 * dataset.  `stats` reads as a JSON snapshot of the mount's counters
 * (stats.h), `metrics` as the same snapshot in Prometheus' text format;
 * `hints` takes read-order hints through an ioctl
 * (<wharf/hints.h>): the mount is read-only, so the kernel lets no write
 * through to it.  `.wharf` shadows an origin entry of that name, and a
 * listing of the root leaves it out: it is reachable by name only.
 *
 * Their inodes lie above the tree's (which stay below 2^32).  Calls here
 * return 0 or -errno; ops.c decodes the requests and replies.  A snapshot
 * file's (stats, metrics) calls go open -> (read -> read_done)* -> release;
 * without opens (the kernel was told it needs none) reads find getattr's
 * snapshot.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"


struct ops_ctx;
struct stat;

#define CONTROL_DIR ((uint64_t)1 << 40)
#define CONTROL_STATS (CONTROL_DIR + 1)
#define CONTROL_HINTS (CONTROL_DIR + 2)
#define CONTROL_METRICS (CONTROL_DIR + 3)
#define CONTROL_NAME ".wharf"

static inline bool control_is(uint64_t ino)
{
	return ino >= CONTROL_DIR && ino <= CONTROL_METRICS;
}

/* The files that read as a snapshot of the counters: stats, metrics. */
static inline bool control_is_snapshot(uint64_t ino)
{
	return ino == CONTROL_STATS || ino == CONTROL_METRICS;
}

/* The files of .wharf, in listing order. */
struct control_entry {
	const char *name;
	uint64_t ino;
};
#define CONTROL_NFILES 3
extern const struct control_entry control_files[CONTROL_NFILES];

/* Called once, before the session's first request / after its last. */
void control_setup(struct ops_ctx *ctx);
void control_cleanup(struct ops_ctx *ctx);

/* The control inode that name in directory parent is (.wharf in the root,
 * its files in it) in *ino, or 0 where the tree answers.  @return 0, or
 * -ENOENT for another name in .wharf. */
int control_lookup(uint64_t parent, const char *name,
		   uint64_t *ino) WHARF_CHECK;

/* The attributes of control inode ino as a lookup or a listing shows
 * them.  The stats file's size is not known before a snapshot is taken:
 * 0, and direct_io makes readers read to the end anyway. */
void control_stat(const struct ops_ctx *ctx, uint64_t ino, struct stat *st);
/* The same for a getattr, which takes the snapshot that reads without an
 * open see (the kernel asks before reading past the size it knows, and a
 * new size makes it drop the old pages). */
void control_getattr(struct ops_ctx *ctx, uint64_t ino, struct stat *st);

/* An open of control inode ino: *fh is the handle its reads and release
 * pass back (a snapshot's, taken now; 0 for hints).  @return 0,
 * -EISDIR (the directory), -ENOMEM, or -EAGAIN (too many snapshot files
 * open: try again once some are closed). */
int control_open(struct ops_ctx *ctx, uint64_t ino, uint64_t *fh) WHARF_CHECK;
/* Bytes [off, off+size) of open fh of ino (a snapshot file; hints read
 * empty), in *data and *n, which stay valid until control_read_done
 * (a lock is held meanwhile: reply, then call it).  @return 0, or -EBADF
 * (released under a read that was given up on: nothing to call after),
 * -EISDIR. */
int control_read(struct ops_ctx *ctx, uint64_t ino, uint64_t fh, size_t size,
		 uint64_t off, const char **data, size_t *n) WHARF_CHECK;
void control_read_done(struct ops_ctx *ctx, uint64_t ino);
/* The last of open fh of ino; also for an open whose reply failed. */
void control_release(struct ops_ctx *ctx, uint64_t ino, uint64_t fh);

/* ioctl cmd on control inode ino, with in_len bytes at in: WHARF_IOC_HINTS
 * on hints takes whole lines, parsed and queued (prefetch_hint), counted
 * in the stats.  @return 0, -ENOTTY (another file or command) or -EINVAL
 * (too short, or text over its size). */
int control_ioctl(struct ops_ctx *ctx, uint64_t ino, unsigned cmd,
		  const void *in, size_t in_len) WHARF_CHECK;

/*
 * Splits one hint line, "PATH OFFSET LENGTH" (LENGTH 0: to the end; see
 * <wharf/hints.h>), len bytes without its newline; line[len] must be
 * there to be written.  PATH is relative to the mount root, or absolute
 * under the mountpoint mp (NULL: none), whose prefix is then dropped.
 * *path points into line.  @return 0, or -EINVAL for a malformed line.
 */
int control_hint_parse(char *line, size_t len, const char *mp, char **path,
		       uint64_t *off, uint64_t *n);

#endif
