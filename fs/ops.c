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
 * passthrough is on (auto included), opens keep coming: it needs them.
 */
#include "config.h"

#define FUSE_USE_VERSION 312

#include "ops.h"
#include "backing.h"
#include "control.h"
#include "ops_i.h"
#include "passthrough.h"
#include "walk.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

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
		st->st_mode = S_IFDIR | ctx->dir_mode;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | ctx->file_mode;
		st->st_nlink = 1;
		st->st_size = (off_t)a->size;
		st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	}
}

/* The attributes' timeout: the snapshot files' change at every snapshot. */
static double attr_timeout(fuse_ino_t ino)
{
	return control_is_snapshot(ino) ? 0 : CACHE_TIMEOUT;
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
			log_error_limited("%s", err);
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
	if (ctx->state->no_open_ok) {
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
		passthrough_arm(id, f->size);
	}
	rc = fuse_reply_open(req, fi);
	passthrough_disarm();
	/* Its opener is gone: no release will come. */
	if (rc)
		backing_drop(ctx, f, fi->fh);
	if (id)
		backing_handed(ctx, ino, f);
}

/* A read of a file (not of .wharf/): answered from chunks, fetched when
 * they are not cached. */
static void read_file(struct ops_ctx *ctx, fuse_req_t req, fuse_ino_t ino,
		      size_t size, off_t off, struct fuse_file_info *fi)
{
	struct iovec iov[PF_MAX_SPANS];
	struct ops_file *f;
	struct pf_read rd;
	int rc;

	/* The mount's max_read keeps the kernel under this; a short reply
	 * would read as the end of the file, so refuse instead. */
	if (size > PF_MAX_READ) {
		log_error("a read of %zu bytes is over the %u byte limit", size,
			  PF_MAX_READ);
		fuse_reply_err(req, EIO);
		return;
	}
	rc = files_get(ctx, ino, &f);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	rc = files_failed(ctx, f);
	if (rc) {
		__atomic_fetch_add(&ctx->stats.errors_cached, 1,
				   __ATOMIC_RELAXED);
		fuse_reply_err(req, -rc);
		return;
	}
	if (off == 0)
		walk_note(ctx, ino, f);
	rc = prefetch_read(ctx->prefetch, f->pf, (uint64_t)off, size, &rd);
	if (rc) {
		files_note(ctx, f, rc);
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

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ops_ctx *ctx = ctx_of(req);
	uint64_t t0;

	if (control_is(ino)) {
		const char *data;
		size_t n;
		const int rc = control_read(ctx, ino, fi->fh, size,
					    (uint64_t)off, &data, &n);

		if (rc) {
			fuse_reply_err(req, -rc);
			return;
		}
		fuse_reply_buf(req, data, n);
		control_read_done(ctx, ino);
		return;
	}
	/* As the reader sees it: the reply included, failures too (and the
	 * bookkeeping after the reply, which only queues work: a few us). */
	t0 = now_ns();
	read_file(ctx, req, ino, size, off, fi);
	stats_note_read(&ctx->stats, now_ns() - t0);
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
