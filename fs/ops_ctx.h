#ifndef WHARF_FS_OPS_CTX_H
#define WHARF_FS_OPS_CTX_H
/*
 * ops_ctx: what a mount hands its FUSE callbacks (mount.c fills it in from
 * a settled configuration).  A header of its own, below ops.h, so that the
 * callbacks' parts (ops_i.h: control, backing, walk, files) read it without
 * including the header of the file that calls them.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "prefetch.h"
#include "stats.h"
#include "tree.h"

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

#endif
