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
#include "config.h"

#include "backing.h"
#include "log.h"
#include "ops_i.h"
#include "passthrough.h"
#include "store.h"
#include "walk.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

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

	/* Opens are what passthrough needs: keep them coming, in auto mode
	 * too (ops.h). */
	b->on =
	    ctx->passthrough != OPS_PASSTHROUGH_OFF && passthrough_offered();
	b->auto_ = b->on && ctx->passthrough == OPS_PASSTHROUGH_AUTO;
	if (ctx->prefetch && b->on)
		prefetch_kernel_reads_cached(ctx->prefetch,
					     PF_KERNEL_ONE_CHUNK |
						 PF_KERNEL_PACKS);
	return !b->on;
}

void backing_cleanup(struct ops_ctx *ctx)
{
	struct ops_backing *b = &ctx->state->backing;

	/* The packer finishes its queue, for a few seconds at most (`wharf
	 * umount` waits 10 for the process to end): packs left for later
	 * make the next mount's first read of those files a read through
	 * it beside the making of their packs. */
	pthread_mutex_lock(&b->pack_mu);
	__atomic_store_n(&b->packs_until_ns, now_ns() + PACKS_AT_UNMOUNT_NS,
			 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&b->pack_mu);
	/* The pack being made stops too, mid-copy (a stop signal made that
	 * now already), and at the mount's priority: at idle priority on
	 * busy CPUs one chunk's copy could take seconds. */
	if (ctx->stats.store)
		store_packs_until(ctx->stats.store, b->packs_until_ns);
	if (b->packer_started) {
		struct sched_param sp;
		int policy;

		if (!pthread_getschedparam(pthread_self(), &policy, &sp))
			(void)pthread_setschedparam(b->packer, policy, &sp);
		pthread_join(b->packer, NULL);
	}
	b->packer_started = false;
	pthread_mutex_destroy(&b->pack_mu);
}

bool backing_on(const struct ops_ctx *ctx)
{
	return ctx->state->backing.on;
}

/*
 * Whether f is one the mount may hand to the kernel now.  Not one the
 * store holds compressed (f->no_pack): its open would find that again.
 * In auto mode a file of one chunk whose pages the kernel got from this
 * mount is opened with keep_cache, so that its reads ask nothing; after
 * a remount (or once those pages went) its chunk file is handed over,
 * which spares each file its READ round trip and the copy of its bytes
 * into that round trip's reply.
 */
static bool wanted(const struct ops_ctx *ctx, const struct ops_file *f)
{
	if (f->size > ctx->chunk_size)
		return true;
	if (__atomic_load_n(&f->no_pack, __ATOMIC_RELAXED))
		return false;
	return !ctx->state->backing.auto_ || !prefetch_kernel_had(f->pf, 0);
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

/* Under pack_mu: puts j back in the queue, unless a release queued its
 * file again meanwhile (or the queue is full: a later one asks again). */
static void requeue(struct ops_backing *b, struct pack_job j)
{
	for (unsigned i = 0; i < b->npacks; i++)
		if (b->packs[i].f == j.f)
			return;
	if (b->npacks < PACK_QUEUE)
		b->packs[b->npacks++] = j;
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
		 * look again a little later, a few times (not once unmounting:
		 * the reads are over, and a file not cached whole then is
		 * one the disk did not keep, which no wait makes whole). */
		if (rc == -ENOENT && j.tries < PACK_TRIES &&
		    !__atomic_load_n(&b->packs_until_ns, __ATOMIC_RELAXED)) {
			j.tries++;
			pthread_mutex_lock(&b->pack_mu);
			requeue(b, j);
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
 * does a read to the end of a file through the mount.  With check, the pack is
 * checked instead where it exists (check_next).
 */
static void pack_later(struct ops_ctx *ctx, struct ops_file *f, bool check)
{
	struct ops_backing *b = &ctx->state->backing;

	const uint64_t cap =
	    ctx->stats.store ? store_cap(ctx->stats.store) : 0;

	/* A pack is made beside its chunk files: a file of more than half
	 * the cap (the filesystem's room, where that is less) never gets
	 * one. */
	if (!b->on || f->size <= ctx->chunk_size ||
	    (cap && f->size > cap / 2) ||
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
	/* A part of the directory walk's read-ahead (walk.h): on with it.
	 * A file of one chunk read by the kernel is a step of the walk that
	 * its first read would have noted: the files past the cached ones
	 * are queued as a walk through the mount would have them. */
	if (f->size <= ctx->chunk_size)
		walk_note(ctx, ino, f);
	else if (ctx->walk_readahead)
		check_next(ctx, ino, f);
}

/*
 * Under f->mu, at f's last passthrough release: whether f's backing file
 * stays registered for its next open, which then costs one stat instead
 * of an open, a check and two ioctls (a reader that opens its files each
 * epoch, or twice).  Files of one chunk only: packs are opened rarely.
 * A kept file that the store evicts holds its disk space until f's next
 * open finds it gone, or unmount: so all kept files together stay under
 * an eighth of the store's cap.
 */
static bool keep(struct ops_ctx *ctx, struct ops_file *f)
{
	uint64_t *kept = &ctx->state->backing.kept_bytes;
	uint64_t cap;

	if (f->size > ctx->chunk_size || !ctx->stats.store)
		return false;
	cap = store_cap(ctx->stats.store) / 8;
	if (__atomic_add_fetch(kept, f->size, __ATOMIC_RELAXED) > cap) {
		__atomic_fetch_sub(kept, f->size, __ATOMIC_RELAXED);
		return false;
	}
	f->backing_kept = true;
	return true;
}

/* Under f->mu: f's backing file is kept no more (and let go of, unless
 * reused). */
static void unkeep(struct ops_ctx *ctx, struct ops_file *f, bool reused)
{
	if (!reused)
		passthrough_close(f->backing_id);
	f->backing_kept = false;
	__atomic_fetch_sub(&ctx->state->backing.kept_bytes, f->size,
			   __ATOMIC_RELAXED);
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
	    !__atomic_load_n(&b->failed, __ATOMIC_RELAXED)) {
		/* Kept: handed over again while its chunk file is the one
		 * checked; evicted, fetched again or written since, let go
		 * of and the file found and checked anew. */
		if (f->backing_kept) {
			const bool same = prefetch_whole_unchanged(
			    ctx->prefetch, f->pf, &f->checked);

			unkeep(ctx, f, same);
			if (same) {
				f->backing_opens = 1;
				id = f->backing_id;
				goto out;
			}
		}
		/* No pack yet (-EAGAIN): its release has one made. */
		rc =
		    prefetch_open_whole(ctx->prefetch, f->pf, &f->checked, &fd);
		if (rc == 0) {
			id = passthrough_open(fd);
			/* The kernel holds the file itself from here. */
			close(fd);
			if (id > 0) {
				f->backing_id = id;
				f->backing_opens = 1;
				goto out;
			}
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
		} else if (rc == -ENOTSUP && f->size <= ctx->chunk_size) {
			/* Stored compressed: asked no more in this mount. */
			__atomic_store_n(&f->no_pack, true, __ATOMIC_RELAXED);
		}
	}
	f->cached_opens++;
out:
	pthread_mutex_unlock(&f->mu);
	return id;
}

void backing_drop(struct ops_ctx *ctx, struct ops_file *f, uint64_t how)
{
	pthread_mutex_lock(&f->mu);
	if (how == BACKING_PASSTHROUGH && f->backing_opens &&
	    !--f->backing_opens && !keep(ctx, f)) {
		passthrough_close(f->backing_id);
	} else if (how == BACKING_CACHED && f->cached_opens) {
		f->cached_opens--;
	}
	pthread_mutex_unlock(&f->mu);
}
