/*
 * files: the per-inode file table of a mount (ops_i.h).  Files need no
 * open: their state (struct ops_file) is kept per inode, made by the first
 * open, read or hint of the file (or by directory read-ahead) and kept
 * until unmount (about 150 bytes and the path per file).  Inodes live as
 * long as the mount, so no entry is ever dropped, and a lookup of one made
 * before takes no lock.
 *
 * The error cache lives here too, per file: a read that failed at the
 * origin (403, 404, 5xx after retries, the object gone or changed) is
 * answered again, without a request, for --error-ttl (10 s by default).
 * The retries already spent up to --origin-wait on it, so a fresh try a
 * moment later would mostly fail the same way; 10 s is short enough that
 * a fixed permission or a passing outage shows soon, and long enough that
 * a reader (or another user) in a loop costs the origin one request, and
 * the log a line, per file every 10 s instead of one per read.
 */
#include "config.h"

#include "ops_i.h"
#include "offline.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* The sibling a walk read before file self: the one just before it, or
 * the one before the empty files in between (the kernel reads nothing of
 * an empty file, so none of them is ever noted). */
static uint64_t walk_prev(struct ops_ctx *ctx, const struct tree_attr *self)
{
	uint64_t p = self->ino - 1;
	struct tree_attr a;

	for (unsigned i = 0; i < OPS_SIBLINGS && p > TREE_ROOT; i++, p--)
		if (tree_getattr(ctx->tree, p, &a) || a.is_dir ||
		    a.parent != self->parent || a.size)
			break;
	return p;
}

static void file_free(struct ops_ctx *ctx, struct ops_file *f)
{
	/* Backing files still registered at unmount (open, or kept): the
	 * kernel let go of them with the session. */
	prefetch_close(ctx->prefetch, f->pf);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* A new ops_file for ino: the tree is asked here, once per file. */
static int file_new(struct ops_ctx *ctx, uint64_t ino, struct ops_file **out)
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
	rc = prefetch_open(ctx->prefetch, path, a.version, a.digest, a.size,
			   a.mtime, &f->pf);
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

int files_get(struct ops_ctx *ctx, uint64_t ino, struct ops_file **out)
{
	struct ops_state *st = ctx->state;
	struct ops_file **page, *f, *expected = NULL;
	struct ops_file ***slot;
	int rc;

	if (ino >= (uint64_t)FT_PAGE * FT_PAGES)
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

int files_failed(const struct ops_ctx *ctx, struct ops_file *f)
{
	const int rc = __atomic_load_n(&f->failed, __ATOMIC_ACQUIRE);

	if (!rc)
		return 0;
	if (now_ns() < __atomic_load_n(&f->failed_until_ns, __ATOMIC_RELAXED))
		return rc;
	/* Over: the next read asks the origin again (a race with a new
	 * failure only makes that one stand shorter). */
	__atomic_store_n(&f->failed, 0, __ATOMIC_RELAXED);
	return 0;
}

void files_note(const struct ops_ctx *ctx, struct ops_file *f, int rc)
{
	const unsigned ttl = ctx->stats.error_ttl_ms;

	/* Offline, no request went out, and the mount reads again as soon
	 * as the origin is back. */
	if (!ttl || !origin_error_stands(rc) ||
	    offline_is_offline(ctx->stats.source))
		return;
	__atomic_store_n(&f->failed_until_ns,
			 now_ns() + (uint64_t)ttl * 1000000, __ATOMIC_RELAXED);
	__atomic_store_n(&f->failed, rc, __ATOMIC_RELEASE);
}

void files_cleanup(struct ops_ctx *ctx)
{
	struct ops_state *st = ctx->state;

	for (size_t i = 0; i < FT_PAGES; i++) {
		if (!st->pages[i])
			continue;
		for (size_t j = 0; j < FT_PAGE; j++)
			if (st->pages[i][j])
				file_free(ctx, st->pages[i][j]);
		free(st->pages[i]);
		st->pages[i] = NULL;
	}
}
