/*
 * walk: directory-walk read-ahead (see walk.h).  Three files in order make
 * a walk: a shuffled reader meets two in a row too often.  A walk has the
 * next WALK_FILES files queued (OPS_SIBLINGS), a file's first
 * WALK_FILE_BYTES at most, WALK_BYTES in all.
 */
#include "config.h"

#include "ops_i.h"
#include "walk.h"

#define WALK_FILES OPS_SIBLINGS
#define WALK_FILE_BYTES (8ull << 20)
#define WALK_BYTES (64ull << 20)

/* The run and lead of the walk whose last file read is prev, or all
 * zero. */
static struct walk_step walk_continued(struct ops_walks *w, uint64_t prev)
{
	struct walk_step found = {0};

	for (unsigned i = 0; i < WALK_RECENT; i++)
		if (__atomic_load_n(&w->recent[i].ino, __ATOMIC_RELAXED) ==
		    prev) {
			found.run = __atomic_load_n(&w->recent[i].run,
						    __ATOMIC_RELAXED);
			found.ahead = __atomic_load_n(&w->recent[i].ahead,
						      __ATOMIC_RELAXED);
			break;
		}
	return found;
}

/* When the read of self continues a walk over its directory, queue the
 * files after it. */
void walk_note(struct ops_ctx *ctx, uint64_t ino, const struct ops_file *self)
{
	struct ops_walks *w = &ctx->state->walks;
	struct walk_step prev;
	uint64_t run, ahead = ino, budget = WALK_BYTES, next;
	uint64_t queued;
	unsigned at;

	if (!ctx->walk_readahead)
		return;
	prev = walk_continued(w, self->walk_prev);
	run = prev.run + 1;
	if (run >= 3) {
		ahead = prev.ahead > ino ? prev.ahead : ino;
		for (next = ahead + 1; next <= ino + WALK_FILES && budget;
		     next++) {
			struct ops_file *f;

			/* A directory, or a file of another one, ends it. */
			if (files_get(ctx, next, &f) ||
			    f->parent != self->parent)
				break;
			/* Nothing, or failing: its reader will be told. */
			if (!f->size || files_failed(ctx, f))
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
	at = __atomic_fetch_add(&w->at, 1, __ATOMIC_RELAXED) % WALK_RECENT;
	__atomic_store_n(&w->recent[at].run, run, __ATOMIC_RELAXED);
	__atomic_store_n(&w->recent[at].ahead, ahead, __ATOMIC_RELAXED);
	__atomic_store_n(&w->recent[at].ino, ino, __ATOMIC_RELAXED);
}

/* The bytes go to the next file in listing order, which `cat a b`, tar or
 * a copy read next. */
void walk_spill(struct ops_ctx *ctx, uint64_t ino, const struct ops_file *self,
		uint64_t bytes)
{
	if (!ctx->walk_readahead)
		return;
	for (uint64_t next = ino + 1; next <= ino + WALK_FILES; next++) {
		struct ops_file *f;

		if (files_get(ctx, next, &f) || f->parent != self->parent)
			return;
		if (!f->size)
			continue;
		/* Failing: its reader will be told, without a fetch. */
		if (!files_failed(ctx, f))
			prefetch_ahead(ctx->prefetch, f->pf, bytes);
		return;
	}
}
