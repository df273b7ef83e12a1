#ifndef WHARF_LOADER_LOADER_I_H
#define WHARF_LOADER_LOADER_I_H
/*
 * The loader's insides, for the modules that extend it (cuda.c) and the
 * tests.  Not installed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <wharf/loader.h>

#include "index.h"
#include "ring.h"
#include "sampler.h"
#include "workers.h"

struct hints;

enum slot_state {
	SLOT_FREE,
	SLOT_BUSY,  /* a worker fills it */
	SLOT_READY, /* filled, not yet returned */
	SLOT_HELD,  /* returned by next, not yet released */
};

struct slot_info {
	enum slot_state state;
	bool stale; /* belongs to an epoch or position given up */
	uint64_t epoch;
	uint64_t index;
	uint64_t done_seq; /* order of completion (out-of-order delivery) */
	uint32_t worker;
	/* Hand-outs of this slot so far: a release names the one it ends, so
	 * that a late second release of an earlier one is refused. */
	uint64_t generation;
	/* The view of hand-out g is views[g % 2]: a pointer released twice
	 * with one more hand-out of its slot in between still shows the
	 * generation it was handed out with, and is refused. */
	struct wharf_batch views[2];
};

/* The order of an epoch, decided once, at open, from wharf_options.shuffle
 * (0, 1 or WHARF_SHUFFLE_SHARDS; anything else is refused there). */
enum shuffle_mode {
	SHUFFLE_NONE,	/* the index's order */
	SHUFFLE_GLOBAL, /* samples in a keyed order over the whole index */
	SHUFFLE_SHARDS, /* shards keyed, samples shuffled within a window */
};

/* Called with a slot number when the caller releases its batch (before the
 * slot can be refilled), or the loader closes. */
typedef void (*loader_slot_hook)(void *ctx, uint32_t slot);

/* wharf_loader.magic: an open loader, and one closed.  A closed loader's
 * struct is kept (its insides freed, about a kilobyte) so that a call on
 * it is refused with a message instead of reading freed memory. */
#define LOADER_MAGIC 0x776c6472u  /* "wldr" */
#define LOADER_CLOSED 0x636c7364u /* "clsd" */

struct wharf_loader {
	uint32_t magic; /* LOADER_MAGIC, LOADER_CLOSED once closed */
	/* WHARF_END was returned and no epoch chosen since: the next call
	 * to next starts the next epoch, or is refused (opt.epoch_end). */
	bool ended;
	struct wharf_loader *tomb_next; /* closed loaders, kept reachable */
	const struct index *idx;
	struct wharf_options opt;
	enum shuffle_mode shuffle; /* opt.shuffle, checked and named */
	struct sampler sampler;
	struct sampler_epoch ekeys;
	struct ring ring;
	struct workers workers;
	struct fill_ctx fill;
	struct hints *hints;
	struct slot_info *slots;
	uint64_t *scratch_ids; /* batch_size ids, for hints */
	uint32_t nslots;
	uint64_t epoch;
	uint64_t low;	   /* every batch below was returned */
	uint64_t done;	   /* bit k: batch low + k was returned */
	uint64_t dispatch; /* next batch to consider dispatching */
	uint64_t done_seq;
	uint64_t hinted;   /* batches below this were hinted */
	/* Batches hinted ahead of dispatch: enough for HINT_LEAD_NS of
	 * consumption at the rate measured (EWMA of the time between
	 * batches returned), within the slots and HINT_LEAD_BYTES. */
	uint64_t hint_lead, hint_lead_max;
	uint64_t last_return_ns, batch_gap_ns;
	uint64_t slot_cap; /* data bytes per slot */
	bool failed;
	int fail_rc;
	char *error;
	struct wharf_stats stats;
	uint64_t open_ns;
	loader_slot_hook release_hook;
	void *release_ctx;
	void (*close_hook)(void *ctx); /* before the ring is unmapped */
	void *close_ctx;
	struct loader_cuda *cuda; /* cuda.c: device prefetch, or NULL */
	/* The process that opened it: workers, ring and batches are its own,
	 * a child forked later may only free its copy. */
	pid_t owner;
};

/* The ring as one contiguous mapping (e.g. for cudaHostRegister). */
static inline void *loader_ring_base(const struct wharf_loader *l, size_t *size)
{
	*size = l->ring.size;
	return l->ring.base;
}

/* Sets the hook called when a slot's batch is released. */
void loader_set_release_hook(struct wharf_loader *l, loader_slot_hook fn,
			     void *ctx);

/* Sets the hook called by wharf_loader_close() before the ring is unmapped
 * (e.g. to unregister it from CUDA). */
void loader_set_close_hook(struct wharf_loader *l, void (*fn)(void *ctx),
			   void *ctx);

/* 0 for an open loader in the process that opened it; else -EINVAL (NULL,
 * not a loader), -EBADF (closed) or -EPERM (another process, with the
 * message that says to open a loader in each process), the message in
 * wharf_last_error(). */
int loader_check_owner(const struct wharf_loader *l)
    __attribute__((warn_unused_result));

/* -EINVAL for the release of a batch whose hand-out (its slot or device
 * buffer `which`, and generation) is over, with the message that says so;
 * `call` and `unit` name the release and what holds the batch. */
int loader_refuse_stale(const char *call, const char *unit, uint64_t index,
			uint64_t epoch, uint32_t which, uint64_t generation);

/* Records msg as the loader's error and the thread's last error; returns
 * rc.  Takes ownership of msg. */
int loader_fail(struct wharf_loader *l, int rc, char *msg);

#endif
