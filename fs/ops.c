/*
 * The FUSE callbacks: thin.  Each decodes its request, calls the part of
 * the mount that answers it, and replies: lower layers return 0 or
 * -errno, and this file is the only one that calls fuse_reply_*.  The
 * parts, around the shared state of ops_i.h: files (the per-inode file
 * table), control (.wharf and its files), backing (passthrough handover
 * and the packer), walk (read-ahead across a directory's files), and
 * prefetch for the bytes themselves.
 *
 * Inodes: the tree's numbers (below 2^32), plus the control ones of
 * control.h.  Inodes live as long as the mount, so lookup counts need no
 * bookkeeping (forget is a no-op).  Objects are immutable while mounted,
 * so attributes, entries (negative ones too) and file pages are cached by
 * the kernel for a long time.
 *
 * Files need no open (files.c): where the kernel allows it, the first
 * open answers ENOSYS, and from then on the kernel sends no OPEN or
 * RELEASE at all (and keeps file pages cached): a file whose pages are
 * cached is read without a single request to this process.  While
 * passthrough is on, opens are kept coming for as long as
 * backing_keep_opens says.
 */
#include "config.h"

#define FUSE_USE_VERSION 312

#include "ops.h"
#include "control.h"
#include "ops_i.h"
#include "passthrough.h"
#include "walk.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

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
 * never take.  In auto mode (ops.h) only files of many chunks are handed
 * over, and backing_keep_opens decides when opens stop coming at all.
 *
 * Calls, per open: backing_take (then the reply, which carries the id)
 * -> backing_drop at its release, or where the reply failed; then
 * backing_pack_later.  Calls return values, never replies (ops.c).
 */


/* How an open is served, kept in its fi->fh while passthrough is on. */
enum { BACKING_CACHED, BACKING_PASSTHROUGH };

/* Called once, before the session's first request. */
void backing_setup(struct ops_ctx *ctx);
/* At INIT, once the kernel said whether it offers passthrough.  @return
 * whether the mount may do without opens: when none is served by
 * passthrough, or in auto mode, until backing_keep_opens says no. */
bool backing_connect(struct ops_ctx *ctx);
/* Lets the packer finish its queue, for a few seconds at most, and joins
 * it: after the session is destroyed and before the files are freed. */
void backing_cleanup(struct ops_ctx *ctx);

/* Whether opens may be served by passthrough (from INIT on): when not, no
 * other call here is needed. */
bool backing_on(const struct ops_ctx *ctx);

/* Whether the kernel should keep sending opens, counting an open of f
 * (the mount can do without them).  Once false, it stays false: the
 * kernel takes that answer once per mount. */
bool backing_keep_opens(struct ops_ctx *ctx, const struct ops_file *f);

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
/* f (inode ino) was just handed to the kernel: the next file of many
 * chunks in its directory has its pack checked meanwhile. */
void backing_handed(struct ops_ctx *ctx, uint64_t ino,
		    const struct ops_file *f);

/* f was read through the mount, at its release or to its end: the
 * packer makes its pack, if f is a file the kernel may be handed.  Takes
 * a lock only then: call it after the reply. */
void backing_pack_later(struct ops_ctx *ctx, struct ops_file *f);

/*
 * backing: passthrough handover and the packer (see backing.h).
 *
 * A pack is a copy of a whole file of many chunks into one cache file,
 * which is what the kernel can be handed.  Made at the open that needs
 * it, it held that open for longer than reading the file through the
 * mount takes (578 against 1952 MB/s for two 256 MiB shards here).  So
 * the open that finds no pack is served through the mount, and the
 * packer, one thread that makes one pack at a time, makes it after the
 * read rather than beside it: the next open finds the pack.
 */

#define PACK_TRIES 3
#define PACK_RETRY_US 100000
#define PACKS_AT_UNMOUNT_NS (5 * 1000000000ull)

void backing_setup(struct ops_ctx *ctx)
{
	pthread_mutex_init(&ctx->state->backing.pack_mu, NULL);
}

bool backing_connect(struct ops_ctx *ctx)
{
	struct ops_backing *b = &ctx->state->backing;

	/* Opens are what passthrough needs: keep them coming (in auto
	 * mode, for as long as backing_keep_opens says). */
	b->on =
	    ctx->passthrough != OPS_PASSTHROUGH_OFF && passthrough_offered();
	b->auto_ = b->on && ctx->passthrough == OPS_PASSTHROUGH_AUTO;
	if (ctx->prefetch && b->on)
		prefetch_kernel_reads_cached(ctx->prefetch,
					     b->auto_ ? PF_KERNEL_PACKS
						      : PF_KERNEL_ONE_CHUNK |
							    PF_KERNEL_PACKS);
	return !b->on || b->auto_;
}

void backing_cleanup(struct ops_ctx *ctx)
{
	struct ops_backing *b = &ctx->state->backing;

	/* The packer finishes its queue, for a few seconds at most (`wharf
	 * umount` waits 10 for the process to end): packs left for later
	 * make the next mount's first read of those files a read through
	 * it beside the making of their packs. */
	pthread_mutex_lock(&b->pack_mu);
	b->packs_until_ns = now_ns() + PACKS_AT_UNMOUNT_NS;
	pthread_mutex_unlock(&b->pack_mu);
	if (b->packer_started)
		pthread_join(b->packer, NULL);
	b->packer_started = false;
	pthread_mutex_destroy(&b->pack_mu);
}

bool backing_on(const struct ops_ctx *ctx)
{
	return ctx->state->backing.on;
}

/* Whether f is one the mount may hand to the kernel: in auto mode files of one
 * chunk are served through the mount, from its memory and the kernel's page
 * cache of the file. */
static bool wanted(const struct ops_ctx *ctx, const struct ops_file *f)
{
	return !ctx->state->backing.auto_ || f->size > ctx->chunk_size;
}

/*
 * In auto mode: opens keep coming while files of many chunks make one
 * open in OPS_AUTO_SHARE or more, looked at every OPS_AUTO_WINDOW opens;
 * else the kernel is told to stop, for good, and files of one chunk are
 * then opened and re-read from its page cache without a round trip each.
 */
bool backing_keep_opens(struct ops_ctx *ctx, const struct ops_file *f)
{
	struct ops_backing *b = &ctx->state->backing;
	uint64_t many;

	if (!b->auto_ ||
	    __atomic_load_n(&ctx->state->no_open, __ATOMIC_ACQUIRE))
		return false;
	if (f->size > ctx->chunk_size)
		__atomic_add_fetch(&b->many, 1, __ATOMIC_RELAXED);
	if (__atomic_add_fetch(&b->opens, 1, __ATOMIC_RELAXED) %
	    OPS_AUTO_WINDOW)
		return true;
	many = __atomic_exchange_n(&b->many, 0, __ATOMIC_RELAXED);
	if (many * OPS_AUTO_SHARE >= OPS_AUTO_WINDOW)
		return true;
	/* Not while a file is open by passthrough: the kernel fails with
	 * EIO an open it makes itself (no OPEN sent) of an inode it reads
	 * by passthrough.  backing_take counts itself in before it looks at
	 * stopping, this looks at the count after setting it: one of the
	 * two sees the other. */
	__atomic_store_n(&b->stopping, true, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&b->live, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&b->stopping, false, __ATOMIC_SEQ_CST);
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

/* Counts a file in among those with a backing file, unless
 * backing_keep_opens is stopping opens.  @return whether it was. */
static bool may_start(struct ops_backing *b)
{
	__atomic_add_fetch(&b->live, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&b->stopping, __ATOMIC_SEQ_CST))
		return true;
	__atomic_sub_fetch(&b->live, 1, __ATOMIC_SEQ_CST);
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

/* The packer: takes jobs off b->packs until none is left. */
static void *packer_run(void *arg)
{
	struct ops_ctx *ctx = arg;
	struct ops_backing *b = &ctx->state->backing;

	/* At the mount's priority: an open may wait for a check made here,
	 * and the store copies into a pack at idle priority itself. */
	for (;;) {
		struct pack_job j;
		int rc;

		pthread_mutex_lock(&b->pack_mu);
		if (b->npacks && b->packs_until_ns &&
		    now_ns() > b->packs_until_ns) {
			log_info("%u files left without a pack at unmount: "
				 "the next mount reads them through itself "
				 "once, then packs them",
				 b->npacks);
			b->npacks = 0;
		}
		if (!b->npacks) {
			b->packer_running = false;
			pthread_mutex_unlock(&b->pack_mu);
			return NULL;
		}
		j = b->packs[0];
		memmove(b->packs, b->packs + 1,
			--b->npacks * sizeof(b->packs[0]));
		pthread_mutex_unlock(&b->pack_mu);
		rc = j.check ? check_ahead(ctx, j.f) : -EAGAIN;
		if (rc == -EAGAIN)
			rc = prefetch_pack_whole(ctx->prefetch, j.f->pf);
		/* A read's last chunks can reach the store after its reply:
		 * look again a little later, a few times. */
		if (rc == -ENOENT && j.tries < PACK_TRIES) {
			j.tries++;
			pthread_mutex_lock(&b->pack_mu);
			if (b->npacks < PACK_QUEUE)
				b->packs[b->npacks++] = j;
			pthread_mutex_unlock(&b->pack_mu);
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
 * the kernel may be handed: queued for the packer (a full queue drops it;
 * a later open or release asks again).  An open that finds no pack is
 * served through the mount, and its release, as that of any file read
 * through it (its first read, from the origin), has the pack made.  So
 * does a read to the end of a file through the mount, as releases stop
 * coming once opens do (auto mode): that mount no longer hands files
 * over, the next one will.  With check, the pack is checked instead where
 * it exists (check_next).
 */
static void pack_later(struct ops_ctx *ctx, struct ops_file *f, bool check)
{
	struct ops_backing *b = &ctx->state->backing;

	if (!b->on || f->size <= ctx->chunk_size ||
	    __atomic_load_n(&f->no_pack, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&b->failed, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&b->pack_mu);
	for (unsigned i = 0; i < b->npacks; i++)
		if (b->packs[i].f == f)
			goto out;
	if (b->npacks == PACK_QUEUE)
		goto out;
	b->packs[b->npacks++] = (struct pack_job){.f = f, .check = check};
	if (b->packer_running)
		goto out;
	/* The one before is done: it said so under pack_mu. */
	if (b->packer_started)
		pthread_join(b->packer, NULL);
	b->packer_started = b->packer_running =
	    !pthread_create(&b->packer, NULL, packer_run, ctx);
	if (!b->packer_running)
		b->npacks = 0;
out:
	pthread_mutex_unlock(&b->pack_mu);
}

void backing_pack_later(struct ops_ctx *ctx, struct ops_file *f)
{
	pack_later(ctx, f, false);
}

/*
 * Has the pack of the next file of many chunks in f's directory checked
 * (or made) while f is read, as a reader that takes a directory's shards
 * in order opens it next.  Its open then waits for no check: a 256 MiB
 * pack takes about 25 ms on two cores here, as long as a read of it does.
 */
static void check_next(struct ops_ctx *ctx, uint64_t ino,
		       const struct ops_file *f)
{
	for (uint64_t next = ino + 1; next <= ino + OPS_SIBLINGS; next++) {
		struct ops_file *g;

		if (files_get(ctx, next, &g) || g->parent != f->parent)
			return;
		if (g->size > ctx->chunk_size) {
			pack_later(ctx, g, true);
			return;
		}
	}
}

void backing_handed(struct ops_ctx *ctx, uint64_t ino, const struct ops_file *f)
{
	/* A part of the directory walk's read-ahead (walk.h): on with it. */
	if (f->size > ctx->chunk_size && ctx->walk_readahead)
		check_next(ctx, ino, f);
}

int backing_take(struct ops_ctx *ctx, struct ops_file *f)
{
	struct ops_backing *b = &ctx->state->backing;
	int id = 0, fd, rc;

	pthread_mutex_lock(&f->mu);
	if (f->backing_opens) {
		f->backing_opens++;
		id = f->backing_id;
		goto out;
	}
	if (!f->cached_opens && wanted(ctx, f) &&
	    !__atomic_load_n(&b->failed, __ATOMIC_RELAXED) && may_start(b)) {
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
			if (!__atomic_exchange_n(&b->failed, true,
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
		__atomic_sub_fetch(&b->live, 1, __ATOMIC_SEQ_CST);
	}
	f->cached_opens++;
out:
	pthread_mutex_unlock(&f->mu);
	return id;
}

void backing_drop(struct ops_ctx *ctx, struct ops_file *f, uint64_t how)
{
	struct ops_backing *b = &ctx->state->backing;

	pthread_mutex_lock(&f->mu);
	if (how == BACKING_PASSTHROUGH && f->backing_opens &&
	    !--f->backing_opens) {
		passthrough_close(f->backing_id);
		close(f->backing_fd);
		__atomic_sub_fetch(&b->live, 1, __ATOMIC_SEQ_CST);
	} else if (how == BACKING_CACHED && f->cached_opens) {
		f->cached_opens--;
	}
	pthread_mutex_unlock(&f->mu);
}

/* A day: nothing changes under a mount, and a remount starts afresh. */
#define CACHE_TIMEOUT 86400.0

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

/* The attributes' timeout: the stats file's change at every snapshot. */
static double attr_timeout(fuse_ino_t ino)
{
	return ino == CONTROL_STATS ? 0 : CACHE_TIMEOUT;
}

/* Fills e for ino, which must exist (a, the tree's attributes, for the
 * tree's inodes). */
static void entry_of(struct ops_ctx *ctx, fuse_ino_t ino,
		     const struct tree_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = attr_timeout(ino);
	e->entry_timeout = CACHE_TIMEOUT;
	if (control_is(ino))
		control_stat(ctx, ino, &e->attr);
	else
		fill_stat(ctx, a, &e->attr);
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
	ctx->state->no_open_ok =
	    backing_connect(ctx) && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct fuse_entry_param e;
	struct tree_attr a;
	uint64_t ino;
	int rc;

	rc = control_lookup(parent, name, &ino);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (ino) {
		entry_of(ctx, ino, NULL, &e);
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

	if (control_is(ino)) {
		control_getattr(ctx, ino, &st);
		fuse_reply_attr(req, &st, attr_timeout(ino));
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

	if (control_is(ino) && ino != CONTROL_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (!control_is(ino)) {
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
		    (a ? a->is_dir : ino == CONTROL_DIR) ? S_IFDIR : S_IFREG;
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

	/* .wharf shadows an origin entry of the same name. */
	if (child->parent == FUSE_ROOT_ID && !strcmp(child->name, CONTROL_NAME))
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
	if (ino == CONTROL_DIR) {
		rc = tree_getattr(ctx->tree, FUSE_ROOT_ID, &parent);
		if (rc)
			goto reply;
		if (off < 1 && dir_add(&d, ".", CONTROL_DIR, NULL, 1))
			goto reply;
		if (off < 2 && dir_add(&d, "..", FUSE_ROOT_ID, &parent, 2))
			goto reply;
		for (off_t i = 0; i < CONTROL_NFILES; i++)
			if (off < 3 + i &&
			    dir_add(&d, control_files[i].name,
				    control_files[i].ino, NULL, 3 + i))
				break;
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

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct ops_file *f;
	int id, rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY ||
	    (fi->flags & (O_TRUNC | O_CREAT))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (control_is(ino)) {
		rc = control_open(ctx, ino, &fi->fh);
		if (rc) {
			fuse_reply_err(req, -rc);
			return;
		}
		/* No size ahead of the reads: readers read to the end. */
		fi->direct_io = 1;
		fi->nonseekable = ino == CONTROL_HINTS;
		/* An open given up on gets no release: let go of it now. */
		if (fuse_reply_open(req, fi))
			control_release(ctx, ino, fi->fh);
		return;
	}
	rc = files_get(ctx, ino, &f);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (ctx->state->no_open_ok && !backing_keep_opens(ctx, f)) {
		/* Not an error: the kernel stops sending opens. */
		__atomic_store_n(&ctx->state->no_open, true, __ATOMIC_RELEASE);
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->fh = 0;
	/* Objects are immutable: pages cached by an earlier open stay good. */
	fi->keep_cache = 1;
	if (!backing_on(ctx)) {
		fuse_reply_open(req, fi);
		return;
	}
	id = backing_take(ctx, f);
	fi->fh = id ? BACKING_PASSTHROUGH : BACKING_CACHED;
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
		backing_drop(ctx, f, fi->fh);
	if (id)
		backing_handed(ctx, ino, f);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct iovec iov[PF_MAX_SPANS];
	struct ops_file *f;
	struct pf_read rd;
	int rc;

	if (control_is(ino)) {
		const char *data;
		size_t n;

		rc = control_read(ctx, ino, fi->fh, size, (uint64_t)off, &data,
				  &n);
		if (rc) {
			fuse_reply_err(req, -rc);
			return;
		}
		fuse_reply_buf(req, data, n);
		control_read_done(ctx, ino);
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
	rc = files_get(ctx, ino, &f);
	if (!rc && off == 0)
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
	/* After the reply: the reader need not wait for these. */
	if (rd.spill)
		walk_spill(ctx, ino, f, rd.spill);
	/* Read to its end through the mount: have its pack made, also when
	 * opens (and releases) no longer come, for the next mount. */
	if (rc == 0 && (uint64_t)off + size >= f->size)
		backing_pack_later(ctx, f);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	struct ops_file *f = NULL;

	/* Opens of files are counted only while passthrough is on. */
	if (control_is(ino))
		control_release(ctx, ino, fi->fh);
	else if (backing_on(ctx) && files_get(ctx, ino, &f))
		f = NULL;
	if (f)
		backing_drop(ctx, f, fi->fh);
	/* A file's read state stays with its inode. */
	fuse_reply_err(req, 0);
	/* Read through the mount (from the origin, the first time): the
	 * next open may hand it to the kernel. */
	if (f && fi->fh == BACKING_CACHED)
		backing_pack_later(ctx, f);
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

/* WHARF_IOC_HINTS on .wharf/hints (control.h). */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
		     void *arg, struct fuse_file_info *fi, unsigned flags,
		     const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	int rc = -ENOTTY;

	if (!(flags & FUSE_IOCTL_COMPAT))
		rc = control_ioctl(ctx_of(req), ino, cmd, in_buf, in_bufsz);
	if (rc)
		fuse_reply_err(req, -rc);
	else
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
	ctx->state = st;
	control_setup(ctx);
	backing_setup(ctx);
	st->se = fuse_session_new(args, &wharf_ops, sizeof(wharf_ops), ctx);
	if (!st->se) {
		ops_cleanup(ctx);
		return NULL;
	}
	return st->se;
}

void ops_cleanup(struct ops_ctx *ctx)
{
	if (!ctx->state)
		return;
	/* The packer uses files: it ends first. */
	backing_cleanup(ctx);
	files_cleanup(ctx);
	control_cleanup(ctx);
	free(ctx->state);
	ctx->state = NULL;
}
