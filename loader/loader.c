/*
 * loader: the public loader API, which ties index, sampler, ring, workers
 * and hints together, keeps the ring's slots moving (dispatch, in-order or
 * first-ready delivery, release), and turns every failure into one message;
 * with the library-wide calls (version, log function).
 *
 * Slots go FREE -> BUSY (a worker fills it) -> READY -> HELD (the caller has
 * the view) -> FREE.  Dispatch runs in sampler order and never more than 64
 * batches past the oldest one not yet returned, so that the returned set is
 * always (position, a 64-bit mask): the state that save/restore carries.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "hints.h"
#include "loader_i.h"
#include "log.h"
#include "text.h"
#include "units.h"

#define WINDOW 64
/* Fits the 24 bits a state's flags give it; far past any sensible window. */
#define SHARD_WINDOW_MAX (1u << 20)

unsigned wharf_version_number(void)
{
	return WHARF_VERSION_NUMBER;
}

#define WHARF_STR_(x) #x
#define WHARF_STR(x) WHARF_STR_(x)

const char *wharf_version(void)
{
	return WHARF_STR(WHARF_VERSION_MAJOR) "." WHARF_STR(
	    WHARF_VERSION_MINOR) "." WHARF_STR(WHARF_VERSION_PATCH);
}

void wharf_log_set_func(wharf_log_func fn, void *arg)
{
	log_set_func(fn, arg);
}

int loader_check_owner(const struct wharf_loader *l)
{
	if (!l)
		return error_set(-EINVAL, strdupf("no loader (NULL): open one "
						  "with wharf_loader_open"));
	if (l->magic == LOADER_CLOSED)
		return error_set(-EBADF,
				 strdupf("this loader was closed "
					 "(wharf_loader_close): open a new one"));
	if (l->magic != LOADER_MAGIC)
		return error_set(-EINVAL,
				 strdupf("not a loader that wharf_loader_open "
					 "handed out"));
	if (getpid() == l->owner)
		return 0;
	/* A forked child that took batches would take its parent's: the
	 * workers answer whoever reads their channel first. */
	return error_set(-EPERM,
			 strdupf("this loader was opened in process %d; open "
				 "one in each process (inside the DataLoader "
				 "worker, not before the fork)",
				 (int)l->owner));
}

int loader_refuse_stale(const char *call, const char *unit, uint64_t index,
			uint64_t epoch, uint32_t which, uint64_t generation)
{
	return error_set(-EINVAL,
			 strdupf("%s: batch %llu of epoch %llu (%s %u, "
				 "generation %llu) was released already (a "
				 "later batch in its %s stays held): release "
				 "each batch once",
				 call, (unsigned long long)index,
				 (unsigned long long)epoch, unit, which,
				 (unsigned long long)generation, unit));
}

int loader_fail(struct wharf_loader *l, int rc, char *msg)
{
	free(l->error);
	l->error = msg;
	l->failed = true;
	l->fail_rc = rc;
	error_note(msg);
	return rc;
}

/* A worker found dead fails the loader, and is logged as well: a process
 * gone (the OOM killer, a crash in a transform) is news that the caller's
 * logs should carry even where the caller handles the error. */
static int fail_worker_gone(struct wharf_loader *l, char *msg)
{
	log_error("%s", msg);
	return loader_fail(l, -ECHILD, msg);
}

void wharf_options_init(struct wharf_options *o)
{
	if (!o) {
		(void)error_set(-EINVAL, strdupf("wharf_options_init: NULL "
						 "options"));
		return;
	}
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->batch_size = 32;
	o->num_workers = 2;
	o->prefetch = 2;
	o->in_order = 1;
	o->even = WHARF_EVEN_PAD;
	o->rank = -1;
	o->world = -1;
	o->persistent = 1;
	/* A stuck worker (stopped, blocked on a dead mount) is named within
	 * a minute rather than hang the trainer for good. */
	o->timeout_ms = 60000;
	o->shard_window = WHARF_SHARD_WINDOW_DEFAULT;
}

struct wharf_options *wharf_options_default(void)
{
	struct wharf_options *o = malloc(sizeof(*o));
	if (o)
		wharf_options_init(o);
	return o;
}

void wharf_options_free(struct wharf_options *o)
{
	free(o);
}

void loader_set_release_hook(struct wharf_loader *l, loader_slot_hook fn,
			     void *ctx)
{
	l->release_hook = fn;
	l->release_ctx = ctx;
}

void loader_set_close_hook(struct wharf_loader *l, void (*fn)(void *ctx),
			   void *ctx)
{
	l->close_hook = fn;
	l->close_ctx = ctx;
}

static uint32_t nworkers(const struct wharf_loader *l)
{
	return l->opt.num_workers;
}

static bool is_done(const struct wharf_loader *l, uint64_t b)
{
	return b < l->low ||
	       (b - l->low < WINDOW && (l->done >> (b - l->low)) & 1);
}

static void mark_done(struct wharf_loader *l, uint64_t b)
{
	assert(b >= l->low && b - l->low < WINDOW);
	l->done |= 1ull << (b - l->low);
	while (l->done & 1) {
		l->done >>= 1;
		l->low++;
	}
}

/* Hints run this long ahead of consumption: a few origin round trips, so
 * that a hinted object has arrived when a worker reads it. */
#define HINT_LEAD_NS 2000000000ull
/* ... but never more bytes ahead than this: hinted data waits in the
 * mount's memory cache until read. */
#define HINT_LEAD_BYTES (256ull << 20)

/* The hint lead's bounds: the slots in flight, and HINT_LEAD_BYTES of
 * samples of the index's mean size.  In the shard-aware order, no more
 * than a window of shards of the mean size: hints further ahead load
 * shards that push the open ones out of a mount's cache of three windows
 * (bench/shards at a quarter cache: 1.4x to 1.8x the data fetched without
 * it, 1.01x to 1.04x with it). */
static void hint_lead_init(struct wharf_loader *l)
{
	uint64_t mean = l->idx->count ? l->idx->total_bytes / l->idx->count : 0;
	uint64_t batch_bytes = mean * l->opt.batch_size;
	uint64_t lead_bytes = HINT_LEAD_BYTES;

	if (l->sampler.nshards) {
		const uint64_t window = l->idx->total_bytes /
					l->sampler.nshards * l->sampler.window;
		if (window < lead_bytes)
			lead_bytes = window;
	}
	l->hint_lead = l->nslots + 1;
	l->hint_lead_max = batch_bytes ? lead_bytes / batch_bytes : 64;
	if (l->hint_lead_max < l->hint_lead)
		l->hint_lead_max = l->hint_lead;
}

/*
 * The global shuffle over samples packed in files (shards, record files)
 * larger than the wharf mount's disk cache: nearly every sample then
 * costs a chunk fetched again from the origin (bench/shards at a quarter
 * cache: 394x the data per epoch, 5 samples/s).  Nothing fails, so it
 * says so once, with the fix, rather than let an epoch crawl silently.
 */
static void warn_global_over_cache(const struct wharf_loader *l)
{
	const struct index *idx = l->idx;
	uint64_t cap;

	if (!l->hints || l->shuffle != SHUFFLE_GLOBAL ||
	    idx->count < 2 * idx->nfiles)
		return;
	cap = hints_cache_cap(l->hints);
	if (!cap || idx->total_bytes <= cap)
		return;
	log_warn("the global shuffle reads %llu MB of samples packed in %llu "
		 "files through a wharf mount whose disk cache holds %llu MB: "
		 "most samples will fetch their chunk from the origin again, "
		 "many times the data each epoch; use shuffle=\"shards\" "
		 "(WHARF_SHUFFLE_SHARDS), or mount with --cache-size of at "
		 "least the dataset",
		 (unsigned long long)(idx->total_bytes >> 20),
		 (unsigned long long)idx->nfiles,
		 (unsigned long long)(cap >> 20));
}

/* A batch goes to the caller: the lead follows the consumption rate. */
static void hint_lead_update(struct wharf_loader *l)
{
	uint64_t now = now_ns(), gap, want;

	if (!l->hints)
		return;
	if (l->last_return_ns) {
		gap = now - l->last_return_ns;
		l->batch_gap_ns = l->batch_gap_ns
				      ? (l->batch_gap_ns * 7 + gap) / 8
				      : gap;
		want = HINT_LEAD_NS / (l->batch_gap_ns ? l->batch_gap_ns : 1);
		if (want < l->nslots + 1ull)
			want = l->nslots + 1ull;
		l->hint_lead = want < l->hint_lead_max ? want : l->hint_lead_max;
	}
	l->last_return_ns = now;
}

/* Hints for every batch below `upto` not hinted yet (a window ahead). */
static void hint_upto(struct wharf_loader *l, uint64_t upto)
{
	if (!l->hints)
		return;
	if (upto > l->sampler.nbatches)
		upto = l->sampler.nbatches;
	for (; l->hinted < upto; l->hinted++) {
		uint32_t n = sampler_batch(&l->sampler, &l->ekeys, l->hinted,
					   l->scratch_ids);
		hints_send(l->hints, l->scratch_ids, n);
	}
}

/* Puts batch b's sample ids and labels into slot s. */
static void prepare(struct wharf_loader *l, uint32_t s, uint64_t b)
{
	struct slot_hdr *h = ring_hdr(&l->ring, s);
	uint64_t *ids = ring_samples(&l->ring, s);
	int32_t *labels = ring_labels(&l->ring, s);
	uint32_t n = sampler_batch(&l->sampler, &l->ekeys, b, ids);
	for (uint32_t k = 0; k < n; k++)
		labels[k] = ids[k] < l->idx->count ? l->idx->label[ids[k]] : -1;
	h->epoch = l->epoch;
	h->index = b;
	h->count = n;
	h->cur = 0;
	h->status = 0;
	h->dropped = 0; /* before the task is sent: the pipe orders it */
	struct slot_info *si = &l->slots[s];
	si->epoch = l->epoch;
	si->index = b;
	si->stale = false;
}

/* The next batch to dispatch, or false when none may go yet. */
static bool next_batch(struct wharf_loader *l, uint64_t *b)
{
	while (l->dispatch < l->sampler.nbatches &&
	       l->dispatch < l->low + WINDOW && is_done(l, l->dispatch))
		l->dispatch++;
	if (l->dispatch >= l->sampler.nbatches ||
	    l->dispatch >= l->low + WINDOW)
		return false;
	*b = l->dispatch;
	return true;
}

static int free_slot(const struct wharf_loader *l)
{
	for (uint32_t s = 0; s < l->nslots; s++)
		if (l->slots[s].state == SLOT_FREE)
			return (int)s;
	return -1;
}

/* Opens the mount's hints file, if the index lies on one, where no worker
 * inherits it. */
static void open_hints(struct wharf_loader *l)
{
	l->hints = hints_new(l->idx);
	workers_exclude_fd(hints_fd(l->hints));
	hints_set_field(l->hints, l->fill.field_want);
}

static void close_hints(struct wharf_loader *l)
{
	workers_include_fd(hints_fd(l->hints));
	hints_free(l->hints);
	l->hints = NULL;
}

/* Hands batches to workers while slots and queue room last.
 * @return 0, or loader_fail's code when a worker turned out dead while
 * idle. */
static int pump(struct wharf_loader *l)
{
	uint64_t b;
	while (next_batch(l, &b)) {
		int s = free_slot(l);
		if (s < 0)
			return 0;
		uint32_t best = UINT32_MAX;
		for (uint32_t i = 0; i < nworkers(l); i++) {
			const struct worker *w = &l->workers.w[i];
			if (w->dead || w->queued >= l->workers.depth)
				continue;
			if (best == UINT32_MAX ||
			    w->queued < l->workers.w[best].queued)
				best = i;
		}
		if (best == UINT32_MAX)
			return 0;
		prepare(l, (uint32_t)s, b);
		char *err = NULL;
		int rc = workers_send(&l->workers, best, (uint32_t)s, &err);
		if (rc == -EPIPE)
			return 0; /* the next wait names the batch it held */
		if (rc) {
			assert(rc == -ECHILD);
			rc = fail_worker_gone(
			    l, strdupf("%s (found sending it batch %llu)",
				       err ? err : "a worker",
				       (unsigned long long)b));
			free(err);
			return rc;
		}
		l->slots[s].state = SLOT_BUSY;
		l->slots[s].worker = best;
		l->dispatch++;
		hint_upto(l, b + l->hint_lead);
	}
	return 0;
}

/* Without workers: reads the next batch here, into a free slot. */
static int fill_here(struct wharf_loader *l)
{
	uint64_t b;
	if (!next_batch(l, &b))
		return 0;
	int s = free_slot(l);
	if (s < 0)
		return -ENOBUFS;
	prepare(l, (uint32_t)s, b);
	hint_upto(l, b + l->hint_lead);
	workers_fill(&l->fill, (uint32_t)s, 0);
	l->slots[s].state = SLOT_READY;
	l->slots[s].done_seq = ++l->done_seq;
	l->slots[s].worker = 0;
	l->dispatch++;
	return 0;
}

/* "sample N (path)" for position k of slot s, for error messages. */
static char *where(const struct wharf_loader *l, uint32_t s)
{
	const struct slot_hdr *h = ring_hdr(&l->ring, s);
	uint64_t k = h->cur;
	if (k >= l->opt.batch_size)
		return strdupf("batch %llu",
			       (unsigned long long)l->slots[s].index);
	uint64_t id = ring_samples(&l->ring, s)[k];
	char path[PATH_MAX];
	if (id >= l->idx->count ||
	    index_full_path(l->idx, l->idx->file[id], path, sizeof(path)) < 0)
		snprintf(path, sizeof(path), "?");
	return strdupf("sample %llu (%s) of batch %llu", (unsigned long long)id,
		       path, (unsigned long long)l->slots[s].index);
}

/* Fails the loader for a timeout, naming what the worker of the batch
 * waited for (in order), else of the oldest one in flight, reads now:
 * maybe a batch from before set_epoch. */
static int fail_timed_out(struct wharf_loader *l)
{
	int bs = -1;
	for (uint32_t k = 0; k < l->nslots; k++) {
		const struct slot_info *si = &l->slots[k];
		if (si->state != SLOT_BUSY || si->stale)
			continue;
		if (bs < 0 || si->index < l->slots[bs].index)
			bs = (int)k;
	}
	uint32_t wi = 0, now = UINT32_MAX;
	const pid_t pid0 = l->workers.n ? l->workers.w[0].pid : -1;
	if (bs >= 0) {
		wi = l->slots[bs].worker;
		now = workers_current(&l->workers, wi);
	} else {
		/* Only earlier epochs' batches in flight: any worker's. */
		for (uint32_t i = 0; i < l->workers.n && now == UINT32_MAX;
		     i++)
			now = workers_current(&l->workers, wi = i);
	}
	if (now != UINT32_MAX)
		bs = (int)now;
	char *wh = bs >= 0 ? where(l, (uint32_t)bs) : strdupf("a batch");
	const pid_t pid = wi < l->workers.n ? l->workers.w[wi].pid : pid0;
	int rc = loader_fail(
	    l, -ETIMEDOUT,
	    strdupf("timed out after %u ms waiting for worker %u (pid %d), "
		    "reading %s%s (stopped, or blocked in a read or the "
		    "transform; raise timeout_ms if it is only slow)",
		    l->opt.timeout_ms, wi, (int)pid, wh,
		    bs >= 0 && l->slots[bs].stale ? " (an earlier epoch's)"
						  : ""));
	free(wh);
	return rc;
}

static int deliverable(const struct wharf_loader *l)
{
	int best = -1;
	for (uint32_t s = 0; s < l->nslots; s++) {
		const struct slot_info *si = &l->slots[s];
		if (si->state != SLOT_READY || si->stale)
			continue;
		if (l->opt.in_order) {
			if (si->index == l->low)
				return (int)s;
			continue;
		}
		if (best < 0 || si->done_seq < l->slots[best].done_seq)
			best = (int)s;
	}
	return best;
}

static int deliver(struct wharf_loader *l, uint32_t s,
		   const struct wharf_batch **out)
{
	struct slot_info *si = &l->slots[s];
	const struct slot_hdr *h = ring_hdr(&l->ring, s);
	if (h->status) {
		char msg[sizeof(h->msg)];
		memcpy(msg, h->msg, sizeof(msg));
		msg[sizeof(msg) - 1] = '\0';
		si->state = SLOT_FREE;
		return loader_fail(
		    l, h->status,
		    strdupf("worker %u, batch %llu of epoch %llu: %s",
			    h->worker, (unsigned long long)si->index,
			    (unsigned long long)si->epoch, msg));
	}
	si->generation++;
	struct wharf_batch *v = &si->views[si->generation % 2];
	v->epoch = si->epoch;
	v->index = si->index;
	v->sample_size = h->sample_size;
	v->bytes = h->bytes;
	v->data = ring_data(&l->ring, s);
	v->offsets = h->sample_size ? NULL : ring_offsets(&l->ring, s);
	v->samples = ring_samples(&l->ring, s);
	v->labels = ring_labels(&l->ring, s);
	v->count = h->count;
	v->skipped = h->skipped;
	v->worker = h->worker;
	v->slot = s;
	v->generation = si->generation;
	si->state = SLOT_HELD;
	mark_done(l, si->index);
	l->stats.batches++;
	l->stats.samples += h->count;
	l->stats.bytes += h->bytes;
	l->stats.skipped += h->skipped;
	*out = v;
	return 0;
}

static int restart(struct wharf_loader *l, uint64_t epoch, uint64_t low,
		   uint64_t done);
static void loader_teardown(struct wharf_loader *l);

/* next after WHARF_END: the next epoch, or a refusal that says what to
 * call; never a silent WHARF_END again. */
static int next_epoch(struct wharf_loader *l)
{
	if (l->opt.epoch_end == WHARF_EPOCH_EXPLICIT)
		return error_set(
		    -EINVAL,
		    strdupf("epoch %llu has ended (wharf_loader_next returned "
			    "WHARF_END): call wharf_loader_set_epoch(loader, "
			    "%llu) to start the next one",
			    (unsigned long long)l->epoch,
			    (unsigned long long)l->epoch + 1));
	return restart(l, l->epoch + 1, 0, 0);
}

int wharf_loader_next(wharf_loader *l, const struct wharf_batch **out)
{
	uint64_t t0 = now_ns();
	int rc = 0;

	if (!out)
		return error_set(-EINVAL, strdupf("wharf_loader_next: NULL "
						  "batch pointer"));
	*out = NULL;
	rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (l->failed) {
		error_note(l->error);
		return l->fail_rc;
	}
	if (l->ended) {
		rc = next_epoch(l);
		if (rc)
			return rc;
	}
	for (;;) {
		if (l->low >= l->sampler.nbatches) {
			l->ended = true;
			rc = WHARF_END;
			break;
		}
		int s = deliverable(l);
		if (s >= 0) {
			rc = deliver(l, (uint32_t)s, out);
			if (rc == 0)
				hint_lead_update(l);
			break;
		}
		if (nworkers(l) == 0) {
			rc = fill_here(l);
			if (rc == -ENOBUFS)
				goto nobufs;
			continue;
		}
		rc = pump(l); /* nonzero only when it failed the loader */
		if (rc)
			break;
		bool busy = false;
		for (uint32_t k = 0; k < l->nslots; k++)
			busy |= l->slots[k].state == SLOT_BUSY;
		if (!busy)
			goto nobufs;
		int timeout = -1;
		if (l->opt.timeout_ms) {
			uint64_t spent = (now_ns() - t0) / 1000000u;
			timeout = spent >= l->opt.timeout_ms
				      ? 0
				      : (int)(l->opt.timeout_ms - spent);
		}
		uint32_t w = 0, slot = UINT32_MAX;
		char *err = NULL;
		rc = workers_wait(&l->workers, timeout, &w, &slot, &err);
		if (rc == -EINTR && !l->opt.interruptible)
			continue; /* the handler has run; the timeout holds */
		if (rc == -EINTR) {
			/* Not a failure: the loader goes on at the next call. */
			error_note("interrupted by a signal while waiting for "
				   "workers");
			break;
		}
		if (rc == 1) {
			struct slot_info *si = &l->slots[slot];
			if (si->stale) {
				si->stale = false;
				si->state = SLOT_FREE;
			} else {
				si->state = SLOT_READY;
				si->done_seq = ++l->done_seq;
			}
			continue;
		}
		if (rc == 0) {
			rc = fail_timed_out(l);
			break;
		}
		if (rc == -ECHILD && err) {
			char *wh = slot != UINT32_MAX ? where(l, slot)
						      : strdupf("no batch");
			rc = fail_worker_gone(
			    l, strdupf("%s while reading %s", err, wh));
			free(wh);
			free(err);
			break;
		}
		free(err);
		rc = loader_fail(
		    l, rc, strdupf("waiting for workers: %s", strerror(-rc)));
		break;
	}
	l->stats.wait_ns += now_ns() - t0;
	return rc;
nobufs:
	l->stats.wait_ns += now_ns() - t0;
	return error_set(-ENOBUFS, strdupf("all %u ring slots hold batches not "
					   "released yet: release some (or "
					   "raise prefetch)",
					   l->nslots));
}

int wharf_loader_release(wharf_loader *l, const struct wharf_batch *b)
{
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!b || b->slot >= l->nslots ||
	    b->data != ring_data(&l->ring, b->slot))
		return error_set(-EINVAL, strdupf("release: not a batch this "
						  "loader handed out"));
	/* By generation, not by pointer: a copy of the view, kept by a
	 * caller that releases late, names the hand-out it ends. */
	const struct slot_info *si = &l->slots[b->slot];
	if (si->state != SLOT_HELD || si->generation != b->generation)
		return loader_refuse_stale("release", "slot", b->index,
					   b->epoch, b->slot, b->generation);
	uint32_t s = b->slot;
	if (l->release_hook)
		l->release_hook(l->release_ctx, s);
	l->slots[s].state = SLOT_FREE;
	if (!l->failed && nworkers(l))
		(void)pump(l); /* keep workers busy; errors show in next */
	return 0;
}

/* Drops what was read ahead and restarts dispatch at low. */
static int restart(struct wharf_loader *l, uint64_t epoch, uint64_t low,
		   uint64_t done)
{
	if (l->failed) {
		error_note(l->error);
		return l->fail_rc;
	}
	for (uint32_t s = 0; s < l->nslots; s++) {
		struct slot_info *si = &l->slots[s];
		if (si->state == SLOT_READY) {
			si->state = SLOT_FREE;
		} else if (si->state == SLOT_BUSY) {
			/* Its worker stops at the next sample rather than
			 * read and decode a batch nobody takes. */
			si->stale = true;
			__atomic_store_n(&ring_hdr(&l->ring, s)->dropped, 1,
					 __ATOMIC_RELAXED);
		}
	}
	if (!l->opt.persistent && nworkers(l) && epoch != l->epoch) {
		/* Fresh workers per epoch, as asked: wait for the stale
		 * batches by stopping the old ones outright. */
		workers_stop(&l->workers);
		for (uint32_t s = 0; s < l->nslots; s++)
			if (l->slots[s].state == SLOT_BUSY)
				l->slots[s].state = SLOT_FREE;
		char *err = NULL;
		int rc = workers_start(&l->workers, nworkers(l),
				       l->opt.prefetch, &l->fill,
				       l->opt.worker_init, l->opt.user, &err);
		if (rc)
			return loader_fail(l, rc, err);
	}
	l->epoch = epoch;
	l->ended = false;
	sampler_epoch_keys(&l->sampler, epoch, &l->ekeys);
	l->low = low;
	l->done = done;
	while (l->done & 1) {
		l->done >>= 1;
		l->low++;
	}
	l->dispatch = l->low;
	l->hinted = l->low;
	l->last_return_ns = 0; /* the pause between epochs is no gap */
	hint_upto(l, l->low + l->hint_lead);
	if (nworkers(l))
		(void)pump(l);
	return 0;
}

int wharf_loader_set_epoch(wharf_loader *l, uint64_t epoch)
{
	/* The epoch it is at, none of it taken yet (a loop that sets every
	 * epoch, starting with the one the open began): what was read ahead
	 * is what a restart would read again. */
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!l->failed && epoch == l->epoch && l->low == 0 && l->done == 0) {
		l->ended = false; /* an empty epoch, chosen again */
		return 0;
	}
	return restart(l, epoch, 0, 0);
}

uint64_t wharf_loader_num_batches(const wharf_loader *l)
{
	return loader_check_owner(l) ? 0 : l->sampler.nbatches;
}

int wharf_rank_world(int32_t rank, int32_t world, uint32_t *out_rank,
		     uint32_t *out_world)
{
	char *err = NULL;
	if (!out_rank || !out_world)
		return error_set(-EINVAL, strdupf("wharf_rank_world: NULL out "
						  "pointer"));
	int rc = sampler_rank_world(rank, world, out_rank, out_world, &err);

	return rc ? error_set(rc, err) : 0;
}

uint32_t wharf_loader_rank(const wharf_loader *l)
{
	return loader_check_owner(l) ? 0 : l->sampler.rank;
}

uint32_t wharf_loader_world(const wharf_loader *l)
{
	return loader_check_owner(l) ? 0 : l->sampler.world;
}

static uint32_t state_flags(const wharf_loader *l)
{
	/* The window changes the order, so a state carries it. */
	const uint32_t shards = l->sampler.nshards
				    ? 8u | l->sampler.window << 8
				    : 0u;

	return (l->shuffle != SHUFFLE_NONE ? 1u : 0u) |
	       (l->opt.drop_last ? 2u : 0u) |
	       (l->opt.even == WHARF_EVEN_DROP ? 4u : 0u) | shards;
}

int wharf_loader_state_save(const wharf_loader *l, struct wharf_state *st)
{
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!st)
		return error_set(-EINVAL, strdupf("state_save: NULL state"));
	struct wharf_state s = {
	    .size = sizeof(s),
	    .version = 1,
	    .seed = l->opt.seed,
	    .epoch = l->epoch,
	    .position = l->low,
	    .done_mask = l->done >> 1,
	    .num_samples = l->sampler.n, /* the index may be closed */
	    .batch_size = l->opt.batch_size,
	    .rank = l->sampler.rank,
	    .world = l->sampler.world,
	    .flags = state_flags(l),
	};
	/* A caller's smaller struct gets what fits (0: the whole). */
	size_t n = st->size && st->size < sizeof(s) ? st->size : sizeof(s);
	memcpy(st, &s, n);
	st->size = (uint32_t)n;
	return 0;
}

int wharf_loader_state_restore(wharf_loader *l, const struct wharf_state *st)
{
	const char *bad = NULL;
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!st)
		return error_set(-EINVAL, strdupf("state_restore: NULL state"));
	if (st->size < sizeof(*st) || st->version != 1)
		bad = "size/version";
	else if (st->seed != l->opt.seed)
		bad = "seed";
	else if (st->num_samples != l->sampler.n)
		bad = "num_samples";
	else if (st->batch_size != l->opt.batch_size)
		bad = "batch_size";
	else if (st->rank != l->sampler.rank)
		bad = "rank";
	else if (st->world != l->sampler.world)
		bad = "world";
	else if (st->flags != state_flags(l))
		bad = "flags (shuffle, shard_window, drop_last, even)";
	else if (st->position > l->sampler.nbatches)
		bad = "position";
	if (bad)
		return error_set(-EINVAL, strdupf("state_restore: %s differs "
						  "from this loader's",
						  bad));
	return restart(l, st->epoch, st->position, st->done_mask << 1);
}

int wharf_loader_stats(const wharf_loader *l, struct wharf_stats *st)
{
	int rc = loader_check_owner(l);
	if (rc)
		return rc;
	if (!st)
		return error_set(-EINVAL, strdupf("stats: NULL stats"));
	struct wharf_stats s = l->stats;
	s.size = sizeof(s);
	s.num_workers = nworkers(l);
	s.open_ns = now_ns() - l->open_ns;
	for (uint32_t i = 0; i < l->ring.nstats; i++) {
		const struct ring_worker_stats *w = ring_stats(&l->ring, i);
		s.read_bytes +=
		    __atomic_load_n(&w->read_bytes, __ATOMIC_RELAXED);
		s.preads += __atomic_load_n(&w->preads, __ATOMIC_RELAXED);
	}
	size_t n = st->size && st->size < sizeof(s) ? st->size : sizeof(s);
	memcpy(st, &s, n);
	st->size = (uint32_t)n;
	return 0;
}

uint64_t wharf_loader_worker_busy_ns(const wharf_loader *l, uint32_t worker)
{
	if (loader_check_owner(l) || worker >= l->ring.nstats)
		return 0;
	return __atomic_load_n(&ring_stats(&l->ring, worker)->busy_ns,
			       __ATOMIC_RELAXED);
}

const char *wharf_loader_error(const wharf_loader *l)
{
	/* Readable in a forked child too: only the handle is checked. */
	if (!l || l->magic != LOADER_MAGIC)
		return l && l->magic == LOADER_CLOSED ? "the loader was closed"
						       : "no loader";
	return l->error ? l->error : "";
}

static int plan_sizes(struct wharf_loader *l, char **err)
{
	const struct index *idx = l->idx;
	const struct wharf_options *o = &l->opt;
	uint64_t ss = o->sample_bytes;
	/* A field's length is its own, whatever the samples' spans. */
	if (!ss && !idx->unknown_lengths && !l->fill.field_want &&
	    idx->min_length == idx->max_length && !o->sample_fn)
		ss = idx->max_length;
	uint64_t cap = o->slot_bytes;
	if (!cap) {
		uint64_t per = ss ? ss : idx->max_length;
		if (!ss && idx->unknown_lengths) {
			*err = strdupf("index %s has samples of unknown "
				       "length: set sample_bytes or "
				       "slot_bytes",
				       idx->path);
			return -EINVAL;
		}
		if (per > UINT64_MAX / o->batch_size) {
			*err = strdupf("batch of %u samples of %llu "
				       "bytes overflows",
				       o->batch_size, (unsigned long long)per);
			return -EOVERFLOW;
		}
		cap = per * o->batch_size;
	}
	if (ss && cap / o->batch_size < ss) { /* cap < ss x batch, unwrapped */
		*err = strdupf("slot_bytes %llu is less than batch_size "
			       "%u x sample_bytes %llu",
			       (unsigned long long)cap, o->batch_size,
			       (unsigned long long)ss);
		return -EINVAL;
	}
	l->fill.sample_size = ss;
	l->slot_cap = cap ? cap : 1;
	return 0;
}

/* wharf_options.shuffle as the mode every other place reads.
 * @return 0, or -EINVAL with *err for a value that names none. */
static int shuffle_mode_of(uint32_t shuffle, enum shuffle_mode *mode,
			   char **err)
{
	switch (shuffle) {
	case 0:
		*mode = SHUFFLE_NONE;
		return 0;
	case 1:
		*mode = SHUFFLE_GLOBAL;
		return 0;
	case WHARF_SHUFFLE_SHARDS:
		*mode = SHUFFLE_SHARDS;
		return 0;
	}
	*err = strdupf("shuffle %u: 0 (sequential), 1 (global) or %d "
		       "(shard-aware)",
		       shuffle, WHARF_SHUFFLE_SHARDS);
	return -EINVAL;
}

int wharf_loader_open(const wharf_index *widx, const struct wharf_options *opt,
		      wharf_loader **out)
{
	struct wharf_loader *l;
	char *err = NULL;
	int rc;

	if (!widx || !opt || !out ||
	    opt->size < offsetof(struct wharf_options, shm_dir))
		return error_set(-EINVAL, strdupf("loader_open: missing index, "
						  "options or out pointer, or "
						  "options not initialised "
						  "(wharf_options_init)"));
	l = calloc(1, sizeof(*l));
	if (!l)
		return error_set(-ENOMEM, NULL);
	l->magic = LOADER_MAGIC;
	l->owner = getpid();
	l->idx = index_from_public(widx);
	wharf_options_init(&l->opt);
	memcpy(&l->opt, opt,
	       opt->size < sizeof(l->opt) ? opt->size : sizeof(l->opt));
	l->opt.size = sizeof(l->opt);
	if (l->opt.prefetch == 0)
		l->opt.prefetch = 1;
	if (l->opt.batch_size == 0 || l->opt.batch_size > (1u << 24)) {
		err = strdupf("batch_size %u: must be 1 to %u",
			      l->opt.batch_size, 1u << 24);
		rc = -EINVAL;
		goto fail;
	}
	if (l->opt.num_workers > 1024) {
		err =
		    strdupf("num_workers %u: at most 1024", l->opt.num_workers);
		rc = -EINVAL;
		goto fail;
	}
	/* Slots are workers x prefetch, in 32 bits. */
	if (l->opt.prefetch > 1024) {
		err = strdupf("prefetch %u: at most 1024 batches a "
			      "worker",
			      l->opt.prefetch);
		rc = -EINVAL;
		goto fail;
	}
	rc = shuffle_mode_of(l->opt.shuffle, &l->shuffle, &err);
	if (rc)
		goto fail;
	if (!l->opt.shard_window)
		l->opt.shard_window = WHARF_SHARD_WINDOW_DEFAULT;
	if (l->opt.shard_window > SHARD_WINDOW_MAX) {
		err = strdupf("shard_window %u: at most %u shards",
			      l->opt.shard_window, SHARD_WINDOW_MAX);
		rc = -EINVAL;
		goto fail;
	}
	uint32_t rank, world;
	rc = sampler_rank_world(l->opt.rank, l->opt.world, &rank, &world, &err);
	if (rc)
		goto fail;
	rc = sampler_init(&l->sampler, l->idx->count, l->opt.seed,
			  l->opt.batch_size, rank, world,
			  l->shuffle != SHUFFLE_NONE, l->opt.drop_last != 0,
			  l->opt.even == WHARF_EVEN_DROP, &err);
	if (!rc && l->shuffle == SHUFFLE_SHARDS)
		rc = sampler_use_shards(&l->sampler, l->idx->file,
					l->opt.shard_window, &err);
	if (rc)
		goto fail;
	if (l->opt.field && (l->idx->fstart || !l->opt.field_if_any)) {
		bool *want;
		rc = index_field_want(l->idx, l->opt.field, &want, &err);
		if (rc)
			goto fail;
		l->fill.field_want = want;
	}
	rc = plan_sizes(l, &err);
	if (rc)
		goto fail;
	if (l->opt.held > 1024) {
		err = strdupf("held %u: at most 1024 batches", l->opt.held);
		rc = -EINVAL;
		goto fail;
	}
	uint32_t nw = l->opt.num_workers;
	l->nslots = (nw ? nw : 1) * l->opt.prefetch + l->opt.held;
	rc = ring_open(&l->ring, l->opt.shm_dir, l->nslots, l->opt.batch_size,
		       l->slot_cap, nw ? nw : 1, &err);
	if (rc)
		goto fail;
	l->slots = calloc(l->nslots, sizeof(*l->slots));
	l->scratch_ids = calloc(l->opt.batch_size, sizeof(uint64_t));
	if (!l->slots || !l->scratch_ids) {
		rc = -ENOMEM;
		err = strdupf("loader: out of memory");
		goto fail;
	}
	l->fill.idx = l->idx;
	l->fill.ring = &l->ring;
	l->fill.skip_bad = l->opt.skip_bad != 0;
	l->fill.seed = l->opt.seed;
	l->fill.shift_step = l->opt.shift_step;
	l->fill.sample_fn = l->opt.sample_fn;
	l->fill.batch_fn = l->opt.batch_fn;
	l->fill.user = l->opt.user;
	open_hints(l);
	warn_global_over_cache(l);
	hint_lead_init(l);
	if (nw) {
		rc = workers_start(&l->workers, nw, l->opt.prefetch, &l->fill,
				   l->opt.worker_init, l->opt.user, &err);
		if (rc)
			goto fail;
	} else {
		ring_populate(&l->ring); /* this process fills the slots */
		rc = fill_init(&l->fill, false);
		if (rc) {
			err = strdupf("loader: out of memory");
			goto fail;
		}
		if (l->opt.worker_init) {
			error_transform_clear();
			rc = l->opt.worker_init(l->opt.user, 0);
			if (rc) {
				rc = rc < 0 ? rc : -EINVAL;
				err = strdupf("worker_init: %s",
					      error_transform()[0]
						  ? error_transform()
						  : strerror(-rc));
				goto fail;
			}
		}
	}
	l->open_ns = now_ns();
	l->stats.size = sizeof(l->stats);
	rc = restart(l, 0, 0, 0);
	if (rc) {
		err = strdup(l->error ? l->error : "loader: start failed");
		goto fail;
	}
	*out = l;
	return 0;
fail:
	loader_teardown(l);
	free(l);
	return error_set(rc, err);
}

void wharf_loader_stop(wharf_loader *l)
{
	if (loader_check_owner(l) || (l->failed && l->fail_rc == -ESHUTDOWN))
		return;
	workers_stop(&l->workers);
	/* Batches read ahead or in flight are nobody's now; held ones stay. */
	for (uint32_t s = 0; s < l->nslots; s++)
		if (l->slots[s].state != SLOT_HELD)
			l->slots[s].state = SLOT_FREE;
	/* Held batches live in the ring, not on the dataset's filesystem:
	 * let go of every file there (the caller's own reads' files, the
	 * mount's hints file), so that a mount can be unmounted while the
	 * caller keeps a batch.  The index is not read after this either. */
	fill_fini(&l->fill);
	close_hints(l);
	(void)loader_fail(l, -ESHUTDOWN,
			  strdupf("the loader was stopped: it hands out no "
				  "more batches (open a new one)"));
}

/* Closed loaders: never freed, so that a call on one reads a tombstone. */
static pthread_mutex_t tombs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct wharf_loader *tombs;

void wharf_loader_close(wharf_loader *l)
{
	if (!l || l->magic != LOADER_MAGIC)
		return; /* NULL, or closed already */
	loader_teardown(l);
	/* Poisoned, not freed: next, release or close again on this handle
	 * is refused (-EBADF) instead of reading freed memory. */
	memset(l, 0, sizeof(*l));
	l->magic = LOADER_CLOSED;
	pthread_mutex_lock(&tombs_mu);
	l->tomb_next = tombs;
	tombs = l;
	pthread_mutex_unlock(&tombs_mu);
}

/* Frees what l holds, not l itself. */
static void loader_teardown(struct wharf_loader *l)
{
	/* In a child forked after the open, the workers, the batches and the
	 * CUDA side (whose runtime a child cannot use) are the opener's: this
	 * process only lets go of its copies of the mappings and files. */
	const bool own = l->owner == getpid();
	if (own)
		workers_stop(&l->workers);
	else
		workers_forget(&l->workers);
	fill_fini(&l->fill);
	if (own && l->release_hook && l->slots)
		for (uint32_t s = 0; s < l->nslots; s++)
			if (l->slots[s].state == SLOT_HELD)
				l->release_hook(l->release_ctx, s);
	if (own && l->close_hook)
		l->close_hook(l->close_ctx);
	ring_close(&l->ring);
	close_hints(l);
	sampler_free(&l->sampler);
	free(l->slots);
	free(l->scratch_ids);
	free((void *)l->fill.field_want);
	free(l->error);
}
