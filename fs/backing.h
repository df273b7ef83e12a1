#ifndef WHARF_FS_BACKING_H
#define WHARF_FS_BACKING_H
/*
 * backing: which opens the kernel serves itself from a cache file
 * (passthrough.h), and the packer, a thread that makes and checks the
 * packs those opens need off the read path.
 *
 * A file is handed over when the store holds it whole and raw (one chunk
 * file, or a pack of its chunks) and no open of it is served the other
 * way: the kernel requires every open of an inode to use one backing id
 * while any is open, and no passthrough open while a cached one is; the
 * counts are kept per file (struct ops_file) under its mu, which reads
 * never take.  In auto mode (ops.h) a file of one chunk whose pages the
 * kernel has from this mount's reads is not handed over: an open with
 * keep_cache reads them without a request.  A file of one chunk keeps
 * its backing id past its last release, for its next open, while its
 * chunk file is the one checked.
 *
 * Calls, per open: backing_take (then the reply, which carries the id)
 * -> backing_drop at its release, or where the reply failed; then
 * backing_pack_later.  Calls return values, never replies (ops.c).
 */
#include <stdbool.h>
#include <stdint.h>

struct ops_ctx;
struct ops_file;

/* How an open is served, kept in its fi->fh while passthrough is on. */
enum { BACKING_CACHED, BACKING_PASSTHROUGH };

/* Called once, before the session's first request. */
void backing_setup(struct ops_ctx *ctx);
/* At INIT, once the kernel said whether it offers passthrough.  @return
 * whether the mount may do without opens: when none is served by
 * passthrough. */
bool backing_connect(struct ops_ctx *ctx);
/* Lets the packer finish its queue, for a few seconds at most, and joins
 * it: after the session is destroyed and before the files are freed. */
void backing_cleanup(struct ops_ctx *ctx);

/* Whether opens may be served by passthrough (from INIT on): when not, no
 * other call here is needed. */
bool backing_on(const struct ops_ctx *ctx);

/*
 * How the kernel is to serve an open of f: from f's cache file (a backing
 * id > 0, shared by all of f's opens at once, for passthrough_arm) or
 * through the mount (0).  The file is verified the first time this mount
 * hands it over, and again if it changed: a corrupt one is removed and
 * the open is served through the mount, which fetches it.
 */
int backing_take(struct ops_ctx *ctx, struct ops_file *f);
/* An open of f ends (how it was served: BACKING_*). */
void backing_drop(struct ops_ctx *ctx, struct ops_file *f, uint64_t how);
/* f (inode ino) was just handed to the kernel: the walk of its
 * directory is noted (walk.h), or for a file of many chunks the next such
 * file has its pack checked meanwhile. */
void backing_handed(struct ops_ctx *ctx, uint64_t ino,
		    const struct ops_file *f);

/* f was read through the mount, at its release or to its end: the
 * packer makes its pack, if f is a file the kernel may be handed.  Takes
 * a lock only then: call it after the reply. */
void backing_pack_later(struct ops_ctx *ctx, struct ops_file *f);

#endif
