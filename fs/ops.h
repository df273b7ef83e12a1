#ifndef WHARF_FS_OPS_H
#define WHARF_FS_OPS_H
/*
 * ops: the FUSE low-level callbacks of a mount, and the only place that
 * replies to the kernel.  Read-only: anything that would change the tree
 * gets EROFS.  The root holds a hidden directory `.wharf` with the files
 * `stats` and `hints` (see control.h), which shadows an origin entry of
 * that name.
 */
#include "ops_ctx.h"

struct fuse_args;
struct fuse_session;

/* A session whose callbacks use ctx (which must outlive it); NULL on error
 * (libfuse has printed why, or memory ran out). */
struct fuse_session *ops_session_new(struct fuse_args *args,
				     struct ops_ctx *ctx);
/* Frees what the callbacks kept (per-file state), after the session is
 * destroyed and before the prefetch engine is. */
void ops_cleanup(struct ops_ctx *ctx);

#endif
