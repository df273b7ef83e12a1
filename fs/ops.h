#ifndef WHARF_FS_OPS_H
#define WHARF_FS_OPS_H
/*
 * ops: the FUSE low-level callbacks of a mount, and the only place that
 * replies to the kernel.  Read-only: anything that would change the tree
 * gets EROFS.  The root holds a hidden directory `.wharf` with the files
 * `stats` and `hints` (see control.h), which shadows an origin entry of
 * that name.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "prefetch.h"
#include "stats.h"
#include "tree.h"

struct fuse_args;
struct fuse_session;
struct ops_state;

/*
 * --passthrough: OFF, never; ON, every file the store holds whole and raw;
 * AUTO (the default), files of many chunks (packs), whatever else the job
 * opens: the kernel takes "no opens" once per mount, so opens keep coming
 * (a round trip each, for files of one chunk too), or a job that opens
 * small files before its shards would read the shards through the mount.
 */
enum ops_passthrough {
	OPS_PASSTHROUGH_OFF,
	OPS_PASSTHROUGH_AUTO,
	OPS_PASSTHROUGH_ON
};

struct ops_ctx {
	struct tree *tree;
	struct prefetch *prefetch;
	struct stats_sources stats; /* what .wharf/stats reports */
	uid_t uid;		    /* owner shown for every inode */
	gid_t gid;
	/* Their permission bits, which the kernel checks (the mount has
	 * default_permissions). */
	mode_t file_mode, dir_mode;
	time_t mounted_at;	 /* mtime of the virtual inodes */
	bool walk_readahead;	 /* queue files ahead of a directory walk */
	/* When to serve cached files by passthrough.h, where the kernel
	 * offers it (--passthrough). */
	enum ops_passthrough passthrough;
	uint64_t chunk_size;	 /* the store's: which files are of many */
	struct ops_state *state; /* private to ops.c and its parts (ops_i.h) */
};

/* A session whose callbacks use ctx (which must outlive it); NULL on error
 * (libfuse has printed why, or memory ran out). */
struct fuse_session *ops_session_new(struct fuse_args *args,
				     struct ops_ctx *ctx);
/* Frees what the callbacks kept (per-file state), after the session is
 * destroyed and before the prefetch engine is. */
void ops_cleanup(struct ops_ctx *ctx);

#endif
