#ifndef WHARF_FS_OPS_I_H
#define WHARF_FS_OPS_I_H
/*
 * ops_i: what the parts of a mount's FUSE side share, private to them
 * (ops.c, control.c, backing.c, walk.c, files.c): the per-mount state
 * behind ops_ctx.state, each part's fields kept together and named for
 * their owner, and the per-inode file table (files.c).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops_ctx.h" /* and prefetch.h: struct store_file_id */

/* How far a look among a file's siblings goes, before or after it: a
 * directory walk queues at most this many files ahead of its reader. */
#define OPS_SIBLINGS 32

/* What the mount keeps of a file: prefetch's read state, and where the
 * file sits among its siblings (fixed while mounted), so that reads look
 * nothing up in the tree.  Made by files_get, freed at unmount. */
struct ops_file {
	struct pf_file *pf;
	uint64_t parent, size;
	uint64_t walk_prev; /* the sibling a walk reads before it (walk.c) */
	/*
	 * backing.c's: opens of the file while passthrough is on, under mu
	 * (taken by open and release, never by a read).  The kernel serves
	 * every open of an inode one way while any is open, and all of
	 * those it serves from a cache file from the same one: they share
	 * backing_id, registered while backing_opens > 0 or backing_kept
	 * (a file of one chunk: kept past its last release for the next
	 * open, while its chunk file is the one checked).
	 */
	pthread_mutex_t mu;
	unsigned cached_opens, backing_opens;
	int backing_id;
	bool backing_kept;
	struct store_file_id checked; /* the cache file last verified */
	bool no_pack; /* atomic: the store cannot pack it or hand its one
			 chunk over (compressed chunks) */
	/* files.c's error cache: the -errno of the last read that failed
	 * at the origin and until when it stands (both atomic; 0: none). */
	int failed;
	uint64_t failed_until_ns;
};

/* A file whose pack the packer is to make or check (backing_pack_later). */
struct pack_job {
	struct ops_file *f;
	bool check;	/* check f's pack ahead of its open */
	unsigned tries; /* made when not all of f was in the store yet */
};
#define PACK_QUEUE 64

/* backing.c's: which opens the kernel serves from cache files, and the
 * packer that makes their packs. */
struct ops_backing {
	bool on;	/* opens may be served by the kernel */
	bool auto_;	/* ... but not files of one chunk the kernel has */
	bool failed;	/* ... but it refused a backing file (atomic) */
	uint64_t kept_bytes; /* atomic: the sizes of files backing_kept */
	/* The packer, all under pack_mu. */
	pthread_mutex_t pack_mu;
	struct pack_job packs[PACK_QUEUE];
	unsigned npacks;
	pthread_t packer;
	bool packer_started;	 /* to be joined */
	bool packer_running;	 /* it takes jobs */
	uint64_t packs_until_ns; /* unmounting: jobs left then are dropped */
};

/* A snapshot of .wharf/stats or .wharf/metrics: taken at open, or
 * (without opens) at getattr. */
struct stats_file {
	char *text;
	size_t len;
	uint64_t id;		 /* the open's file handle; 0 for getattr's */
	struct stats_file *next; /* in ops_control.opened */
};

/* control.c's: the snapshots behind .wharf/stats and .wharf/metrics, all
 * under mu. */
struct ops_control {
	pthread_mutex_t mu;
	struct stats_file stats, metrics; /* the getattr snapshots */
	/*
	 * Snapshots of open stats files.  A read finds its snapshot here by
	 * id rather than trusting a pointer in fi->fh: a read whose caller
	 * was killed can still be running when the kernel sends that file's
	 * release.
	 */
	struct stats_file *opened;
	unsigned n_opened; /* at most CONTROL_STATS_OPENS */
	uint64_t last_id;
};

/* walk.c's: a file whose first byte was read, how many files in order
 * led to it, and the last sibling queued after it (fields read and
 * written with relaxed atomics; a torn read only makes one decision
 * worse). */
struct walk_step {
	uint64_t ino, run, ahead;
};
#define WALK_RECENT 16 /* first reads remembered */

struct ops_walks {
	struct walk_step recent[WALK_RECENT];
	unsigned at; /* atomic */
};

/* The per-inode file table: pages of pointers, allocated on first use and
 * read without locks. */
#define FT_BITS 16
#define FT_PAGE (1u << FT_BITS)
#define FT_PAGES (1u << 16)

struct ops_state {
	/* ops.c's; control.c and backing.c look at no_open. */
	struct fuse_session *se;
	bool no_open_ok; /* the kernel can do without OPEN/RELEASE */
	bool no_open;	 /* ... and was told so (atomic) */
	struct ops_backing backing;
	struct ops_control control;
	struct ops_walks walks;
	struct ops_file **pages[FT_PAGES]; /* files.c's */
};

/* The state of file ino, made on first use (the tree is asked then, once
 * per file) and kept until files_cleanup.  Takes no lock once made.
 * @return 0, -ENOENT (no such inode), -EISDIR, -ENOMEM or prefetch_open's
 * -errno. */
int files_get(struct ops_ctx *ctx, uint64_t ino,
	      struct ops_file **out) WHARF_CHECK;
/*
 * The error cache, so that a failing file costs the origin one request
 * (and the log a line or two) per --error-ttl however often it is read.
 * files_failed: the error a read or hint of f answers without a fetch, or
 * 0; no lock, and the clock is read only for a file that failed.
 * files_note: the result of a read of f that went to prefetch_read (an
 * origin's refusal or EIO is kept; anything else is the reader's own).
 */
int files_failed(const struct ops_ctx *ctx, struct ops_file *f);
void files_note(const struct ops_ctx *ctx, struct ops_file *f, int rc);
/* Frees every file, at unmount, once nothing uses them. */
void files_cleanup(struct ops_ctx *ctx);

#endif
