/*
 * The FUSE callbacks: thin.  Lower layers return 0 or -errno; this file
 * turns that into the reply, and is the only one that calls fuse_reply_*.
 *
 * Inodes: the tree's numbers (below 2^32), plus two virtual ones for the
 * hidden `.wharf` directory, its `stats` file and its `hints` file, which
 * takes lines through an ioctl (include/wharf/hints.h): the mount is
 * read-only, so the kernel lets no write through to it.  Inodes live as long as
 * the mount, so lookup counts need no bookkeeping (forget is a no-op).
 * Objects are immutable while mounted, so attributes, entries (negative
 * ones too) and file pages are cached by the kernel for a long time.
 *
 * Files need no open: their state (struct ops_file) is kept per inode,
 * created by the first open, read or hint of the file (or by directory
 * read-ahead) and kept until unmount (about 150 bytes and the path per
 * file).  Where the kernel allows it, the first open answers ENOSYS, and
 * from then on the kernel sends no OPEN or RELEASE at all (and keeps file
 * pages cached): a file whose pages are cached is read without a single
 * request to this process.  The stats file then cannot rely on open
 * either: its snapshot is taken when its attributes are asked for (the
 * kernel asks before reading past the size it knows), and a new size makes
 * the kernel drop the old pages.  The hints ioctl needs no open.
 */
#include "config.h"

#define FUSE_USE_VERSION 312

#include "ops.h"
#include "passthrough.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <wharf/hints.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#define INO_WHARF_DIR ((fuse_ino_t)1 << 40)
#define INO_STATS (INO_WHARF_DIR + 1)
#define INO_HINTS (INO_WHARF_DIR + 2)
#define WHARF_DIR_NAME ".wharf"
#define STATS_NAME "stats"
#define HINTS_NAME "hints"
/* A day: nothing changes under a mount, and a remount starts afresh. */
#define CACHE_TIMEOUT 86400.0

/* The per-inode file table: pages of pointers, allocated on first use and
 * read without locks. */
#define FT_BITS 16
#define FT_PAGE (1u << FT_BITS)
#define FT_PAGES (1u << 16)

/*
 * Directory read-ahead: a reader that reads a directory's files one after
 * the other in listing order (cat, cp -r, tar, md5sum) gets the next
 * WALK_FILES of them queued while it reads this one; a file's first
 * WALK_FILE_BYTES at most, WALK_BYTES in all.  Siblings have consecutive
 * inode numbers, so "the next file" is the next inode with the same parent.
 */
#define WALK_RECENT 16 /* first reads remembered */
#define WALK_FILES 32
#define WALK_FILE_BYTES (8ull << 20)
#define WALK_BYTES (64ull << 20)

/* What the mount keeps of a file: prefetch's read state, and where the
 * file sits among its siblings (fixed while mounted), so that reads look
 * nothing up in the tree. */
struct ops_file {
	struct pf_file *pf;
	uint64_t parent, size;
	uint64_t walk_prev; /* see walk_prev() */
	/*
	 * Opens of the file while passthrough is on, under mu (taken by
	 * open and release, never by a read).  The kernel serves every open
	 * of an inode one way while any is open, and all of those it serves
	 * from a cache file from the same one: they share backing_id.
	 */
	pthread_mutex_t mu;
	unsigned cached_opens, backing_opens;
	int backing_id, backing_fd;
	struct store_file_id checked; /* the cache file last verified */
	bool no_pack; /* atomic: the store cannot pack it (compressed chunks) */
};

/* A file whose pack the packer is to make or check (pack_later). */
struct pack_job {
	struct ops_file *f;
	bool check;	/* check f's pack ahead of its open (check_next) */
	unsigned tries; /* made when not all of f was in the store yet */
};
#define PACK_QUEUE 64
#define PACK_TRIES 3
#define PACK_RETRY_US 100000
#define PACKS_AT_UNMOUNT_NS (5 * 1000000000ull)

/* fi->fh of a file's open while passthrough is on: how it is served. */
enum { FH_CACHED, FH_PASSTHROUGH };

/* A file whose first byte was read, how many files in order led to it,
 * and the last sibling queued after it (fields read and written with
 * relaxed atomics; a torn read only makes one decision worse). */
struct walk {
	uint64_t ino, run, ahead;
};

#define HINT_LINE_MAX 4200 /* a path and two numbers */

/* A stats snapshot: taken at open, or (without opens) at getattr. */
struct stats_file {
	char *json;
	size_t len;
	uint64_t id;		 /* the open's file handle; 0 for getattr's */
	struct stats_file *next; /* in ops_state.opened */
};

struct ops_state {
	struct fuse_session *se;
	bool passthrough;	 /* opens may be served by the kernel */
	bool passthrough_auto;	 /* ... of files of many chunks, for now */
	bool passthrough_failed; /* ... but it refused a backing file */
	uint64_t auto_opens;	 /* atomic: opens counted by keep_opens */
	uint64_t auto_many;	 /* atomic: of files of many chunks, since
				  * keep_opens last looked */
	/* Files with a backing file now, or being given one, and whether
	 * keep_opens is about to stop opens (both atomic: see there). */
	unsigned backing_live;
	bool stopping;
	/* The packer (pack_later), all under pack_mu. */
	pthread_mutex_t pack_mu;
	struct pack_job packs[PACK_QUEUE];
	unsigned npacks;
	pthread_t packer;
	bool packer_started;	 /* to be joined */
	bool packer_running;	 /* it takes jobs */
	uint64_t packs_until_ns; /* unmounting: jobs left then are dropped */
	bool no_open_ok;	 /* the kernel can do without OPEN/RELEASE */
	bool no_open;		 /* ... and was told so (atomic) */
	pthread_mutex_t stats_mu;
	struct stats_file stats; /* the getattr snapshot, under stats_mu */
	/*
	 * Snapshots of open stats files, under stats_mu.  A read finds its
	 * snapshot here by id rather than trusting a pointer in fi->fh: a
	 * read whose caller was killed can still be running here when the
	 * kernel sends that file's release.
	 */
	struct stats_file *opened;
	uint64_t last_id;
	struct walk walks[WALK_RECENT];
	unsigned walk_at; /* atomic */
	struct ops_file **pages[FT_PAGES];
};

static struct ops_ctx *ctx_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_stat(const struct ops_ctx *ctx, const struct tree_attr *a,
		      struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_uid = ctx->uid;
	st->st_gid = ctx->gid;
	/* Origins that give no time (manifests, prefixes) show the mount's. */
	st->st_mtime = a->mtime ? a->mtime : ctx->mounted_at;
	st->st_ctime = st->st_mtime;
	st->st_atime = st->st_mtime;
	st->st_blksize = PF_MAX_READ;
	if (a->is_dir) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)a->size;
		st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	}
}

static void fill_virtual(const struct ops_ctx *ctx, fuse_ino_t ino,
			 struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = ctx->uid;
	st->st_gid = ctx->gid;
	st->st_mtime = st->st_ctime = st->st_atime = ctx->mounted_at;
	if (ino == INO_WHARF_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else if (ino == INO_HINTS) {
		/* Opened read-only for the ioctl; reads find it empty. */
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
	} else {
		/* Its size is not known before it is opened; direct_io makes
		 * readers read to the end anyway. */
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
	}
}

static bool is_virtual(fuse_ino_t ino)
{
	return ino == INO_WHARF_DIR || ino == INO_STATS || ino == INO_HINTS;
}

/* Fills e for ino, which must exist.  Returns 0 or -errno. */
static int entry_of(struct ops_ctx *ctx, fuse_ino_t ino,
		    const struct tree_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = ino == INO_STATS ? 0 : CACHE_TIMEOUT;
	e->entry_timeout = CACHE_TIMEOUT;
	if (is_virtual(ino))
		fill_virtual(ctx, ino, &e->attr);
	else
		fill_stat(ctx, a, &e->attr);
	return 0;
}

/* The sibling a walk read before file self: the one just before it, or
 * the one before the empty files in between (the kernel reads nothing of
 * an empty file, so none of them is ever noted). */
static uint64_t walk_prev(struct ops_ctx *ctx, const struct tree_attr *self)
{
	uint64_t p = self->ino - 1;
	struct tree_attr a;

	for (unsigned i = 0; i < WALK_FILES && p > FUSE_ROOT_ID; i++, p--)
		if (tree_getattr(ctx->tree, p, &a) || a.is_dir ||
		    a.parent != self->parent || a.size)
			break;
	return p;
}

static void file_free(struct ops_ctx *ctx, struct ops_file *f)
{
	/* Still open at unmount (a lazy one): the kernel let go with the
	 * session. */
	if (f->backing_opens)
		close(f->backing_fd);
	prefetch_close(ctx->prefetch, f->pf);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* A new ops_file for ino: the tree is asked here, once per file. */
static int file_new(struct ops_ctx *ctx, fuse_ino_t ino, struct ops_file **out)
{
	struct ops_file *f;
	struct tree_attr a;
	char path[4096];
	int rc;

	rc = tree_getattr(ctx->tree, ino, &a);
	if (!rc && a.is_dir)
		rc = -EISDIR;
	if (!rc)
		rc = tree_path(ctx->tree, ino, path, sizeof(path));
	if (rc < 0)
		return rc;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	rc = prefetch_open(ctx->prefetch, path, a.version, a.size, a.mtime,
			   &f->pf);
	if (rc < 0) {
		free(f);
		return rc;
	}
	f->parent = a.parent;
	f->size = a.size;
	f->walk_prev = walk_prev(ctx, &a);
	pthread_mutex_init(&f->mu, NULL);
	*out = f;
	return 0;
}

/* The state of file ino, created on first use. */
static int file_of(struct ops_ctx *ctx, fuse_ino_t ino, struct ops_file **out)
{
	struct ops_state *st = ctx->state;
	struct ops_file **page, *f, *expected = NULL;
	struct ops_file ***slot;
	int rc;

	if (ino >= (fuse_ino_t)FT_PAGE * FT_PAGES)
		return -ENOENT;
	slot = &st->pages[ino >> FT_BITS];
	page = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!page) {
		struct ops_file **fresh = calloc(FT_PAGE, sizeof(*fresh));

		if (!fresh)
			return -ENOMEM;
		if (__atomic_compare_exchange_n(slot, &page, fresh, false,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			page = fresh;
		else
			free(fresh);
	}
	f = __atomic_load_n(&page[ino & (FT_PAGE - 1)], __ATOMIC_ACQUIRE);
	if (f) {
		*out = f;
		return 0;
	}
	rc = file_new(ctx, ino, &f);
	if (rc)
		return rc;
	if (!__atomic_compare_exchange_n(&page[ino & (FT_PAGE - 1)], &expected,
					 f, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		file_free(ctx, f); /* another thread won */
		f = expected;
	}
	*out = f;
	return 0;
}

/* Takes a new getattr snapshot of the stats; returns its length. */
static size_t stats_refresh(struct ops_ctx *ctx)
{
	struct ops_state *st = ctx->state;
	struct stats_file fresh = {0};
	size_t len;

	if (stats_json(&ctx->stats, &fresh.json, &fresh.len))
		fresh = (struct stats_file){0};
	pthread_mutex_lock(&st->stats_mu);
	/*
	 * The kernel drops the pages it cached of the last snapshot only when
	 * the size changes (an invalidation from here would race with this
	 * very getattr), so two snapshots in a row never have the same size:
	 * the JSON ends in one newline or two.
	 */
	if (fresh.json && fresh.len == st->stats.len) {
		char *longer = realloc(fresh.json, fresh.len + 2);

		if (longer) {
			longer[fresh.len] = '\n';
			longer[++fresh.len] = '\0';
			fresh.json = longer;
		}
	}
	free(st->stats.json);
	st->stats = fresh;
	len = fresh.len;
	pthread_mutex_unlock(&st->stats_mu);
	return len;
}

/* Takes a snapshot for a new open of the stats file; returns its id, or 0
 * without memory. */
static uint64_t stats_open(struct ops_ctx *ctx)
{
	struct ops_state *st = ctx->state;
	struct stats_file *sf = calloc(1, sizeof(*sf));

	if (!sf || stats_json(&ctx->stats, &sf->json, &sf->len)) {
		free(sf);
		return 0;
	}
	pthread_mutex_lock(&st->stats_mu);
	sf->id = ++st->last_id;
	sf->next = st->opened;
	st->opened = sf;
	pthread_mutex_unlock(&st->stats_mu);
	return sf->id;
}

/* Answers a read of the stats file: the open's snapshot, or getattr's when
 * the kernel does without opens (id 0).  Few readers, so one lock. */
static void stats_read(fuse_req_t req, struct ops_ctx *ctx, uint64_t id,
		       size_t size, off_t off)
{
	struct ops_state *st = ctx->state;
	const struct stats_file *sf = &st->stats;
	size_t n = 0;

	pthread_mutex_lock(&st->stats_mu);
	if (id)
		for (sf = st->opened; sf && sf->id != id; sf = sf->next)
			;
	if (!sf) { /* released under a read that was given up on */
		pthread_mutex_unlock(&st->stats_mu);
		fuse_reply_err(req, EBADF);
		return;
	}
	if ((uint64_t)off < sf->len)
		n = sf->len - (size_t)off < size ? sf->len - (size_t)off : size;
	fuse_reply_buf(req, n ? sf->json + off : NULL, n);
	pthread_mutex_unlock(&st->stats_mu);
}

static void stats_file_free(struct stats_file *sf)
{
	free(sf->json);
	free(sf);
}

static void stats_close(struct ops_ctx *ctx, uint64_t id)
{
	struct ops_state *st = ctx->state;
	struct stats_file **at, *gone = NULL;

	pthread_mutex_lock(&st->stats_mu);
	for (at = &st->opened; *at; at = &(*at)->next)
		if ((*at)->id == id) {
			gone = *at;
			*at = gone->next;
			break;
		}
	pthread_mutex_unlock(&st->stats_mu);
	if (gone)
		stats_file_free(gone);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ops_ctx *ctx = userdata;

	/* Many read-ahead requests in flight keep the prefetch pool busy. */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* Nothing is ever invalidated: objects are immutable. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	conn->time_gran = 1000000000;
	conn->max_read = PF_MAX_READ; /* as the max_read mount option says */
	/* Opens are what passthrough needs: keep them coming (in auto
	 * mode, for as long as keep_opens says). */
	ctx->state->passthrough =
	    ctx->passthrough != OPS_PASSTHROUGH_OFF && passthrough_offered();
	ctx->state->passthrough_auto =
	    ctx->state->passthrough && ctx->passthrough == OPS_PASSTHROUGH_AUTO;
	if (ctx->prefetch && ctx->state->passthrough)
		prefetch_kernel_reads_cached(
		    ctx->prefetch, ctx->state->passthrough_auto
				       ? PF_KERNEL_PACKS
				       : PF_KERNEL_ONE_CHUNK | PF_KERNEL_PACKS);
	ctx->state->no_open_ok =
	    (!ctx->state->passthrough || ctx->state->passthrough_auto) &&
	    (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct fuse_entry_param e;
	struct tree_attr a;
	int rc;

	if (parent == FUSE_ROOT_ID && !strcmp(name, WHARF_DIR_NAME)) {
		entry_of(ctx, INO_WHARF_DIR, NULL, &e);
		fuse_reply_entry(req, &e);
		return;
	}
	if (parent == INO_WHARF_DIR) {
		if (strcmp(name, STATS_NAME) && strcmp(name, HINTS_NAME)) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		entry_of(ctx, strcmp(name, STATS_NAME) ? INO_HINTS : INO_STATS,
			 NULL, &e);
		fuse_reply_entry(req, &e);
		return;
	}
	rc = tree_lookup(ctx->tree, parent, name, &a);
	if (rc == -ENOENT) {
		/* A negative entry the kernel may keep: nothing appears. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = CACHE_TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	entry_of(ctx, a.ino, &a, &e);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct tree_attr a;
	struct stat st;
	int rc;

	if (is_virtual(ino)) {
		fill_virtual(ctx, ino, &st);
		if (ino == INO_STATS &&
		    __atomic_load_n(&ctx->state->no_open, __ATOMIC_ACQUIRE)) {
			/* Reads without open see this snapshot. */
			st.st_size = (off_t)stats_refresh(ctx);
		}
		fuse_reply_attr(req, &st, ino == INO_STATS ? 0 : CACHE_TIMEOUT);
		return;
	}
	rc = tree_getattr(ctx->tree, ino, &a);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fill_stat(ctx, &a, &st);
	fuse_reply_attr(req, &st, CACHE_TIMEOUT);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	char *err = NULL;
	int rc = 0;

	if (ino == INO_STATS || ino == INO_HINTS) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (!is_virtual(ino)) {
		rc = tree_list(ctx->tree, ino, &err);
		if (err) {
			log_error("%s", err);
			free(err);
		}
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* The listing never changes: let the kernel keep it. */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* One readdir reply being filled. */
struct dirbuf {
	fuse_req_t req;
	struct ops_ctx *ctx;
	bool plus;
	char *buf;
	size_t size, used;
	off_t base; /* offsets before the tree's children */
};

/* Adds one entry whose successor is at offset next; 1 when full. */
static int dir_add(struct dirbuf *d, const char *name, fuse_ino_t ino,
		   const struct tree_attr *a, off_t next)
{
	size_t n;

	if (d->plus) {
		struct fuse_entry_param e;

		entry_of(d->ctx, ino, a, &e);
		n = fuse_add_direntry_plus(d->req, d->buf + d->used,
					   d->size - d->used, name, &e, next);
	} else {
		struct stat st = {0};

		st.st_ino = ino;
		st.st_mode =
		    (a ? a->is_dir : ino == INO_WHARF_DIR) ? S_IFDIR : S_IFREG;
		n = fuse_add_direntry(d->req, d->buf + d->used,
				      d->size - d->used, name, &st, next);
	}
	if (n > d->size - d->used)
		return 1;
	d->used += n;
	return 0;
}

static int dir_add_child(void *arg, const struct tree_attr *child,
			 uint64_t next_index)
{
	struct dirbuf *d = arg;

	/* The virtual directory shadows an origin entry of the same name. */
	if (child->parent == FUSE_ROOT_ID &&
	    !strcmp(child->name, WHARF_DIR_NAME))
		return 0;
	return dir_add(d, child->name, child->ino, child,
		       d->base + (off_t)next_index);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       bool plus)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct dirbuf d = {.req = req, .ctx = ctx, .plus = plus, .size = size};
	struct tree_attr self, parent;
	int rc = 0;

	assert(size > 0);
	d.buf = malloc(size);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (ino == INO_WHARF_DIR) {
		rc = tree_getattr(ctx->tree, FUSE_ROOT_ID, &parent);
		if (rc)
			goto reply;
		if (off < 1 && dir_add(&d, ".", INO_WHARF_DIR, NULL, 1))
			goto reply;
		if (off < 2 && dir_add(&d, "..", FUSE_ROOT_ID, &parent, 2))
			goto reply;
		if (off < 3 && dir_add(&d, STATS_NAME, INO_STATS, NULL, 3))
			goto reply;
		if (off < 4)
			dir_add(&d, HINTS_NAME, INO_HINTS, NULL, 4);
		goto reply;
	}
	rc = tree_getattr(ctx->tree, ino, &self);
	if (!rc)
		rc = tree_getattr(ctx->tree, self.parent, &parent);
	if (rc)
		goto reply;
	if (off < 1 && dir_add(&d, ".", ino, &self, 1))
		goto reply;
	if (off < 2 && dir_add(&d, "..", self.parent, &parent, 2))
		goto reply;
	/* .wharf is reachable by name only: a walk of the tree (find, du,
	 * rsync, a loader taking subdirectories for classes) must see the
	 * dataset and nothing else. */
	d.base = 2;
	rc = tree_readdir(ctx->tree, ino,
			  off > d.base ? (uint64_t)(off - d.base) : 0,
			  dir_add_child, &d);
reply:
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true);
}

/* Whether f is one the mount may hand to the kernel: in auto mode files of one
 * chunk are served through the mount, from its memory and the kernel's page
 * cache of the file. */
static bool passthrough_wanted(const struct ops_ctx *ctx,
			       const struct ops_file *f)
{
	return !ctx->state->passthrough_auto || f->size > ctx->chunk_size;
}

/*
 * Whether the kernel should keep sending opens, at an open of f (the
 * mount can do without them, no_open_ok).  In auto mode: yes while files
 * of many chunks make one open in OPS_AUTO_SHARE or more, looked at every
 * OPS_AUTO_WINDOW opens; else it is told to stop, for good (the kernel
 * takes that answer once per mount), and files of one chunk are then
 * opened and re-read from its page cache without a round trip each.
 */
static bool keep_opens(struct ops_ctx *ctx, const struct ops_file *f)
{
	struct ops_state *st = ctx->state;
	uint64_t many;

	if (!st->passthrough_auto ||
	    __atomic_load_n(&st->no_open, __ATOMIC_ACQUIRE))
		return false;
	if (f->size > ctx->chunk_size)
		__atomic_add_fetch(&st->auto_many, 1, __ATOMIC_RELAXED);
	if (__atomic_add_fetch(&st->auto_opens, 1, __ATOMIC_RELAXED) %
	    OPS_AUTO_WINDOW)
		return true;
	many = __atomic_exchange_n(&st->auto_many, 0, __ATOMIC_RELAXED);
	if (many * OPS_AUTO_SHARE >= OPS_AUTO_WINDOW)
		return true;
	/* Not while a file is open by passthrough: the kernel fails with
	 * EIO an open it makes itself (no OPEN sent) of an inode it reads
	 * by passthrough.  backing_take counts itself in before it looks at
	 * stopping, this looks at the count after setting it: one of the
	 * two sees the other. */
	__atomic_store_n(&st->stopping, true, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&st->backing_live, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&st->stopping, false, __ATOMIC_SEQ_CST);
		return true; /* looked at again after the next window */
	}
	passthrough_stop();
	if (ctx->prefetch)
		prefetch_kernel_reads_cached(ctx->prefetch, 0);
	log_info("passthrough: %llu of the last %d opens were of files of "
		 "many chunks; opens stop coming to the mount, and every file "
		 "is read through it",
		 (unsigned long long)many, OPS_AUTO_WINDOW);
	return false;
}

/* Counts a file in among those with a backing file, unless keep_opens
 * is stopping opens.  @return whether it was. */
static bool backing_may_start(struct ops_state *st)
{
	__atomic_add_fetch(&st->backing_live, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&st->stopping, __ATOMIC_SEQ_CST))
		return true;
	__atomic_sub_fetch(&st->backing_live, 1, __ATOMIC_SEQ_CST);
	return false;
}

/* Checks f's pack, as its first passthrough open in this mount would, if
 * nothing has it open: that open then finds it checked (f->checked).
 * f->mu is held meanwhile, so an open that comes sooner waits for the
 * check rather than making it again.  @return prefetch_open_whole's. */
static int check_ahead(struct ops_ctx *ctx, struct ops_file *f)
{
	int fd, rc = -EBUSY;

	pthread_mutex_lock(&f->mu);
	if (!f->backing_opens && !f->cached_opens) {
		rc =
		    prefetch_open_whole(ctx->prefetch, f->pf, &f->checked, &fd);
		if (!rc)
			close(fd);
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/* The packer: takes jobs off st->packs until none is left. */
static void *packer_run(void *arg)
{
	struct ops_ctx *ctx = arg;
	struct ops_state *st = ctx->state;

	/* At the mount's priority: an open may wait for a check made here,
	 * and the store copies into a pack at idle priority itself. */
	for (;;) {
		struct pack_job j;
		int rc;

		pthread_mutex_lock(&st->pack_mu);
		if (st->npacks && st->packs_until_ns &&
		    now_ns() > st->packs_until_ns) {
			log_info("%u files left without a pack at unmount: "
				 "the next mount reads them through itself "
				 "once, then packs them",
				 st->npacks);
			st->npacks = 0;
		}
		if (!st->npacks) {
			st->packer_running = false;
			pthread_mutex_unlock(&st->pack_mu);
			return NULL;
		}
		j = st->packs[0];
		memmove(st->packs, st->packs + 1,
			--st->npacks * sizeof(st->packs[0]));
		pthread_mutex_unlock(&st->pack_mu);
		rc = j.check ? check_ahead(ctx, j.f) : -EAGAIN;
		if (rc == -EAGAIN)
			rc = prefetch_pack_whole(ctx->prefetch, j.f->pf);
		/* A read's last chunks can reach the store after its reply:
		 * look again a little later, a few times. */
		if (rc == -ENOENT && j.tries < PACK_TRIES) {
			j.tries++;
			pthread_mutex_lock(&st->pack_mu);
			if (st->npacks < PACK_QUEUE)
				st->packs[st->npacks++] = j;
			pthread_mutex_unlock(&st->pack_mu);
			usleep(PACK_RETRY_US);
			continue;
		}
		/* Compressed: asked no more in this mount. */
		if (rc == -ENOTSUP)
			__atomic_store_n(&j.f->no_pack, true, __ATOMIC_RELAXED);
		/* Not cached whole, compressed, no room, open: nothing to
		 * do. */
		if (rc && rc != -ENOENT && rc != -ENOTSUP && rc != -ENOSPC &&
		    rc != -EBUSY)
			log_debug("cannot make or check a pack: %s",
				  strerror(-rc));
	}
}

/*
 * Has the pack of f made off the read path, if f is a file of many chunks
 * the kernel may be handed: queued for the packer, one thread that makes
 * one pack at a time (a full queue drops it; a later open or release asks
 * again).  A pack is a copy of the whole file into fresh pages: made at
 * the open that needs it, it held that open for longer than reading the
 * file through the mount takes (578 against 1952 MB/s for two 256 MiB
 * shards here).  So the open that finds no pack is served through the
 * mount, and its release, as that of any file read through it (its first
 * read, from the origin), has the pack made, after the read rather than
 * beside it: the next open finds the pack.  So does a read to the end of
 * a file through the mount, as releases stop coming once opens do (auto
 * mode): that mount no longer hands files over, the next one will.  With
 * check, the pack is checked instead where it exists (check_next).
 */
static void pack_later(struct ops_ctx *ctx, struct ops_file *f, bool check)
{
	struct ops_state *st = ctx->state;

	if (!st->passthrough || f->size <= ctx->chunk_size ||
	    __atomic_load_n(&f->no_pack, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&st->passthrough_failed, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&st->pack_mu);
	for (unsigned i = 0; i < st->npacks; i++)
		if (st->packs[i].f == f)
			goto out;
	if (st->npacks == PACK_QUEUE)
		goto out;
	st->packs[st->npacks++] = (struct pack_job){.f = f, .check = check};
	if (st->packer_running)
		goto out;
	/* The one before is done: it said so under pack_mu. */
	if (st->packer_started)
		pthread_join(st->packer, NULL);
	st->packer_started = st->packer_running =
	    !pthread_create(&st->packer, NULL, packer_run, ctx);
	if (!st->packer_running)
		st->npacks = 0;
out:
	pthread_mutex_unlock(&st->pack_mu);
}

/*
 * f (inode ino, of many chunks) was just handed to the kernel: has the
 * pack of the next file of many chunks in its directory checked (or
 * made) while f is read, as a reader that takes a directory's shards in
 * order opens it next.  Its open then waits for no check: a 256 MiB pack
 * takes about 25 ms on two cores here, as long as a read of it does.
 */
static void check_next(struct ops_ctx *ctx, uint64_t ino,
		       const struct ops_file *f)
{
	for (uint64_t next = ino + 1; next <= ino + WALK_FILES; next++) {
		struct ops_file *g;

		if (file_of(ctx, next, &g) || g->parent != f->parent)
			return;
		if (g->size > ctx->chunk_size) {
			pack_later(ctx, g, true);
			return;
		}
	}
}

/*
 * How the kernel will serve an open of f: from f's cache file (a backing
 * id > 0, shared by all of f's opens at once) when the store holds f
 * whole and raw (one chunk file, or a pack of its chunks) and no open of
 * f is served the other way, else through the mount (0).  The file is
 * verified the first time this mount hands it over, and again if it
 * changed: a corrupt one is removed and the open is served through the
 * mount, which fetches it.
 */
static int backing_take(struct ops_ctx *ctx, struct ops_file *f)
{
	struct ops_state *st = ctx->state;
	int id = 0, fd, rc;

	pthread_mutex_lock(&f->mu);
	if (f->backing_opens) {
		f->backing_opens++;
		id = f->backing_id;
		goto out;
	}
	if (!f->cached_opens && passthrough_wanted(ctx, f) &&
	    !__atomic_load_n(&st->passthrough_failed, __ATOMIC_RELAXED) &&
	    backing_may_start(st)) {
		/* No pack yet (-EAGAIN): its release has one made. */
		rc =
		    prefetch_open_whole(ctx->prefetch, f->pf, &f->checked, &fd);
		if (rc == 0) {
			id = passthrough_open(fd);
			if (id > 0) {
				f->backing_fd = fd;
				f->backing_id = id;
				f->backing_opens = 1;
				goto out;
			}
			close(fd);
			/* The kernel's answer does not change while
			 * mounted. */
			if (!__atomic_exchange_n(&st->passthrough_failed, true,
						 __ATOMIC_RELAXED)) {
				log_warn("the kernel refused a cache file for "
					 "passthrough (%s): reads go through "
					 "the mount",
					 strerror(-id));
				/* Hints load those files again. */
				prefetch_kernel_reads_cached(ctx->prefetch, 0);
			}
			id = 0;
		}
		__atomic_sub_fetch(&st->backing_live, 1, __ATOMIC_SEQ_CST);
	}
	f->cached_opens++;
out:
	pthread_mutex_unlock(&f->mu);
	return id;
}

/* An open of f ends (how it was served: FH_*). */
static void backing_drop(struct ops_state *st, struct ops_file *f, uint64_t how)
{
	pthread_mutex_lock(&f->mu);
	if (how == FH_PASSTHROUGH && f->backing_opens && !--f->backing_opens) {
		passthrough_close(f->backing_id);
		close(f->backing_fd);
		__atomic_sub_fetch(&st->backing_live, 1, __ATOMIC_SEQ_CST);
	} else if (how == FH_CACHED && f->cached_opens) {
		f->cached_opens--;
	}
	pthread_mutex_unlock(&f->mu);
}

static void open_counted(struct ops_ctx *ctx, struct ops_file *f,
			 fuse_req_t req, struct fuse_file_info *fi)
{
	const int id = backing_take(ctx, f);
	int rc;

	fi->fh = id ? FH_PASSTHROUGH : FH_CACHED;
	if (id) {
		/* The kernel refuses page-cache flags on such an open: the
		 * cache file's own page cache serves it. */
		fi->keep_cache = 0;
		passthrough_arm(id);
	}
	rc = fuse_reply_open(req, fi);
	passthrough_disarm();
	/* Its opener is gone: no release will come. */
	if (rc)
		backing_drop(ctx->state, f, fi->fh);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct ops_file *f;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY ||
	    (fi->flags & (O_TRUNC | O_CREAT))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (ino == INO_WHARF_DIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (ino == INO_HINTS) {
		fi->direct_io = 1;
		fi->nonseekable = 1;
		fuse_reply_open(req, fi);
		return;
	}
	if (ino == INO_STATS) {
		uint64_t id = stats_open(ctx);

		if (!id) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fi->fh = id;
		fi->direct_io = 1;
		/* An open given up on gets no release: let go of it now. */
		if (fuse_reply_open(req, fi))
			stats_close(ctx, id);
		return;
	}
	rc = file_of(ctx, ino, &f);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (ctx->state->no_open_ok && !keep_opens(ctx, f)) {
		/* Not an error: the kernel stops sending opens. */
		__atomic_store_n(&ctx->state->no_open, true, __ATOMIC_RELEASE);
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->fh = 0;
	/* Objects are immutable: pages cached by an earlier open stay good. */
	fi->keep_cache = 1;
	if (!ctx->state->passthrough) {
		fuse_reply_open(req, fi);
		return;
	}
	open_counted(ctx, f, req, fi);
	if (fi->fh == FH_PASSTHROUGH && f->size > ctx->chunk_size &&
	    ctx->walk_readahead)
		check_next(ctx, ino, f);
}

/* The run and lead of the walk whose last file read is prev, or all
 * zero. */
static struct walk walk_continued(struct ops_state *st, uint64_t prev)
{
	struct walk w = {0};

	for (unsigned i = 0; i < WALK_RECENT; i++)
		if (__atomic_load_n(&st->walks[i].ino, __ATOMIC_RELAXED) ==
		    prev) {
			w.run = __atomic_load_n(&st->walks[i].run,
						__ATOMIC_RELAXED);
			w.ahead = __atomic_load_n(&st->walks[i].ahead,
						  __ATOMIC_RELAXED);
			break;
		}
	return w;
}

/* The first byte of file self (inode ino) is being read: when that
 * continues a walk over its directory, queue the files after it.  Three
 * files in order make a walk: a shuffled reader meets two in a row too
 * often.  No tree lookup: a shuffled reader takes no lock here. */
static void walk_note(struct ops_ctx *ctx, uint64_t ino,
		      const struct ops_file *self)
{
	struct ops_state *st = ctx->state;
	struct walk prev = walk_continued(st, self->walk_prev);
	uint64_t run = prev.run + 1, ahead = ino, budget = WALK_BYTES, next;
	uint64_t queued;
	unsigned at;

	if (run >= 3) {
		ahead = prev.ahead > ino ? prev.ahead : ino;
		for (next = ahead + 1; next <= ino + WALK_FILES && budget;
		     next++) {
			struct ops_file *f;

			/* A directory, or a file of another one, ends it. */
			if (file_of(ctx, next, &f) || f->parent != self->parent)
				break;
			if (!f->size)
				continue;
			queued = prefetch_ahead(ctx->prefetch, f->pf,
						budget < WALK_FILE_BYTES
						    ? budget
						    : WALK_FILE_BYTES);
			/* Queue full: the next note tries again from here. */
			if (!queued)
				break;
			budget -= queued;
			ahead = next;
		}
	}
	at =
	    __atomic_fetch_add(&st->walk_at, 1, __ATOMIC_RELAXED) % WALK_RECENT;
	__atomic_store_n(&st->walks[at].run, run, __ATOMIC_RELAXED);
	__atomic_store_n(&st->walks[at].ahead, ahead, __ATOMIC_RELAXED);
	__atomic_store_n(&st->walks[at].ino, ino, __ATOMIC_RELAXED);
}

/* A sequential reader of file self (inode ino) has a read-ahead window
 * that passes its end by `bytes`: they go to the next file in listing
 * order, which `cat a b`, tar or a copy read next. */
static void spill_to_next(struct ops_ctx *ctx, uint64_t ino,
			  const struct ops_file *self, uint64_t bytes)
{
	for (uint64_t next = ino + 1; next <= ino + WALK_FILES; next++) {
		struct ops_file *f;

		if (file_of(ctx, next, &f) || f->parent != self->parent)
			return;
		if (f->size) {
			prefetch_ahead(ctx->prefetch, f->pf, bytes);
			return;
		}
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct iovec iov[PF_MAX_SPANS];
	struct ops_file *f;
	struct pf_read rd;
	int rc;

	if (ino == INO_STATS) {
		stats_read(req, ctx, fi->fh, size, off);
		return;
	}
	if (ino == INO_HINTS) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* The mount's max_read keeps the kernel under this; a short reply
	 * would read as the end of the file, so refuse instead. */
	if (size > PF_MAX_READ) {
		log_error("a read of %zu bytes is over the %u byte limit", size,
			  PF_MAX_READ);
		fuse_reply_err(req, EIO);
		return;
	}
	rc = file_of(ctx, ino, &f);
	if (!rc && off == 0 && ctx->walk_readahead)
		walk_note(ctx, ino, f);
	if (!rc)
		rc = prefetch_read(ctx->prefetch, f->pf, (uint64_t)off, size,
				   &rd);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	for (unsigned i = 0; i < rd.n; i++) {
		iov[i].iov_base = (void *)rd.span[i].data;
		iov[i].iov_len = rd.span[i].len;
	}
	/* The kernel copies straight from chunk memory; then we let go. */
	if (rd.n)
		rc = fuse_reply_iov(req, iov, (int)rd.n);
	else
		rc = fuse_reply_buf(req, NULL, 0);
	/* An O_DIRECT read leaves nothing in the kernel's page cache. */
	prefetch_read_done(ctx->prefetch, &rd,
			   rc == 0 && !(fi->flags & O_DIRECT));
	/* After the reply: the reader need not wait for it. */
	if (rd.spill && ctx->walk_readahead)
		spill_to_next(ctx, ino, f, rd.spill);
	/* Read to its end through the mount: have its pack made, also when
	 * opens (and releases) no longer come, for the next mount. */
	if (rc == 0 && (uint64_t)off + size >= f->size)
		pack_later(ctx, f, false);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct ops_file *f;

	if (ino == INO_STATS && fi->fh)
		stats_close(ctx, fi->fh);
	else if (ctx->state->passthrough && !is_virtual(ino) &&
		 !file_of(ctx, ino, &f))
		backing_drop(ctx->state, f, fi->fh);
	/* A file's read state stays with its inode. */
	fuse_reply_err(req, 0);
	/* Read through the mount (from the origin, the first time): the
	 * next open may hand it to the kernel. */
	if (ctx->state->passthrough && fi->fh == FH_CACHED &&
	    !is_virtual(ino) && !file_of(ctx, ino, &f))
		pack_later(ctx, f, false);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct statvfs sv = {0};
	uint64_t nodes = 0, bytes = 0;

	tree_usage(ctx->tree, &nodes, &bytes);
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_files = nodes;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* Everything that would change the tree. */
static void erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	erofs(req);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	erofs(req);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	erofs(req);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	erofs(req);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	erofs(req);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	erofs(req);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	erofs(req);
}

int ops_hint_parse(char *line, size_t len, const char *mp, char **path,
		   uint64_t *off, uint64_t *n)
{
	unsigned long long o, k;
	char *sp2, *sp1, *p, *end;
	size_t mpl;

	line[len] = '\0';
	sp2 = strrchr(line, ' ');
	if (!sp2 || sp2 == line)
		return -EINVAL;
	*sp2 = '\0';
	sp1 = strrchr(line, ' ');
	if (!sp1 || sp1 == line)
		return -EINVAL;
	*sp1 = '\0';
	errno = 0;
	o = strtoull(sp1 + 1, &end, 10);
	if (errno || *end || end == sp1 + 1)
		return -EINVAL;
	k = strtoull(sp2 + 1, &end, 10);
	if (errno || *end || end == sp2 + 1)
		return -EINVAL;
	p = line;
	mpl = mp ? strlen(mp) : 0;
	if (mpl && !strncmp(p, mp, mpl) && p[mpl] == '/')
		p += mpl;
	*path = p;
	*off = o;
	*n = k;
	return 0;
}

/*
 * One hint line: resolves its path one component at a time and queues the
 * range.  A directory not yet listed is listed here, once.  line[len] must
 * be there to be written.  @return 0 or -errno.
 */
static int hint_line(struct ops_ctx *ctx, char *line, size_t len)
{
	uint64_t off, n;
	fuse_ino_t ino = FUSE_ROOT_ID;
	struct tree_attr a;
	struct ops_file *f;
	char *path;
	int rc;

	rc = ops_hint_parse(line, len, ctx->stats.mountpoint, &path, &off, &n);
	if (rc)
		return rc;
	while (*path) {
		char *slash;

		while (*path == '/')
			path++;
		if (!*path)
			break;
		slash = strchr(path, '/');
		if (slash)
			*slash = '\0';
		rc = tree_lookup(ctx->tree, ino, path, &a);
		if (rc)
			return rc;
		ino = a.ino;
		path = slash ? slash + 1 : path + strlen(path);
	}
	if (ino == FUSE_ROOT_ID)
		return -EISDIR;
	rc = file_of(ctx, ino, &f);
	if (rc)
		return rc;
	return prefetch_hint(ctx->prefetch, f->pf, off, n);
}

/* WHARF_IOC_HINTS on .wharf/hints: whole lines, parsed and queued. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
		     void *arg, struct fuse_file_info *fi, unsigned flags,
		     const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	struct ops_ctx *ctx = ctx_of(req);
	const struct wharf_hints *h = in_buf;
	uint64_t lines = 0, bad = 0;
	char line[HINT_LINE_MAX + 1];
	size_t i = 0;

	if (ino != INO_HINTS || cmd != WHARF_IOC_HINTS ||
	    (flags & FUSE_IOCTL_COMPAT)) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (in_bufsz < sizeof(*h) || h->len > sizeof(h->text)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	while (i < h->len) {
		const char *nl = memchr(h->text + i, '\n', h->len - i);
		const size_t n = (nl ? (size_t)(nl - h->text) : h->len) - i;

		/* A line cut by the end of text is bad: nothing joins it. */
		if (!nl || n > HINT_LINE_MAX) {
			bad++;
		} else if (n) {
			memcpy(line, h->text + i, n);
			if (hint_line(ctx, line, n))
				bad++;
			else
				lines++;
		}
		i += n + 1;
	}
	__atomic_fetch_add(&ctx->stats.hint_lines, lines, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->stats.hint_bad, bad, __ATOMIC_RELAXED);
	fuse_reply_ioctl(req, 0, NULL, 0);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	erofs(req);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	erofs(req);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	erofs(req);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	erofs(req);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
			 off_t length, struct fuse_file_info *fi)
{
	erofs(req);
}

static const struct fuse_lowlevel_ops wharf_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .getattr = op_getattr,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .statfs = op_statfs,
    .setattr = op_setattr,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_unlink,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .write = op_write,
    .ioctl = op_ioctl,
    .create = op_create,
    .setxattr = op_setxattr,
    .removexattr = op_removexattr,
    .fallocate = op_fallocate,
};

struct fuse_session *ops_session_new(struct fuse_args *args,
				     struct ops_ctx *ctx)
{
	struct ops_state *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	pthread_mutex_init(&st->stats_mu, NULL);
	pthread_mutex_init(&st->pack_mu, NULL);
	ctx->state = st;
	st->se = fuse_session_new(args, &wharf_ops, sizeof(wharf_ops), ctx);
	if (!st->se) {
		ops_cleanup(ctx);
		return NULL;
	}
	return st->se;
}

void ops_cleanup(struct ops_ctx *ctx)
{
	struct ops_state *st = ctx->state;

	if (!st)
		return;
	/* The packer finishes its queue, for a few seconds at most (`wharf
	 * umount` waits 10 for the process to end): packs left for later
	 * make the next mount's first read of those files a read through
	 * it beside the making of their packs. */
	pthread_mutex_lock(&st->pack_mu);
	st->packs_until_ns = now_ns() + PACKS_AT_UNMOUNT_NS;
	pthread_mutex_unlock(&st->pack_mu);
	if (st->packer_started)
		pthread_join(st->packer, NULL);
	pthread_mutex_destroy(&st->pack_mu);
	for (size_t i = 0; i < FT_PAGES; i++) {
		if (!st->pages[i])
			continue;
		for (size_t j = 0; j < FT_PAGE; j++)
			if (st->pages[i][j])
				file_free(ctx, st->pages[i][j]);
		free(st->pages[i]);
	}
	while (st->opened) {
		struct stats_file *sf = st->opened;

		st->opened = sf->next;
		stats_file_free(sf);
	}
	free(st->stats.json);
	pthread_mutex_destroy(&st->stats_mu);
	free(st);
	ctx->state = NULL;
}
