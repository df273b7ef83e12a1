#ifndef WHARF_LOADER_RING_H
#define WHARF_LOADER_RING_H
/*
 * The batch ring: one shared-memory segment, one contiguous mapping, made of
 * a small header (per-worker counters) and nslots equal slots.  Each slot is
 * a header (struct slot_hdr), the sample ids, labels and offsets of its batch,
 * then the data area.  The segment is created in a shm directory (/dev/shm)
 * without a name (O_TMPFILE; or named wharf-PID-ring-N and unlinked at once
 * where O_TMPFILE is refused), all its pages reserved with posix_fallocate,
 * and inherited by forked workers through the mapping.  Nothing is left
 * behind on any exit.
 */
#include <stddef.h>
#include <stdint.h>

/* Written by the worker that fills the slot; read by the caller once the
 * worker reported the slot done. */
struct slot_hdr {
	uint64_t epoch;
	uint64_t index;	      /* batch number */
	uint64_t sample_size; /* 0: variable-size */
	uint64_t bytes;	      /* data bytes used */
	uint64_t cur; /* position in the batch being read (for errors) */
	uint64_t read_bytes;
	uint64_t preads;
	uint32_t count; /* samples (after skipping) */
	uint32_t skipped;
	uint32_t worker;
	int32_t status; /* 0 or -errno */
	/* Set by the caller (atomic) when it no longer wants the batch (a
	 * restart made it stale): the worker stops at its next sample. */
	uint32_t dropped;
	char msg[448]; /* what went wrong, when status < 0 */
};

/* Per-worker counters at the start of the segment, one cache line each. */
struct ring_worker_stats {
	uint64_t busy_ns;
	uint64_t read_bytes;
	uint64_t preads;
	uint64_t skipped;
	uint64_t pad[4];
};

struct ring {
	void *base; /* the whole segment: one mapping of `size` bytes */
	size_t size;
	size_t slot_size;
	size_t slots_off; /* where slot 0 starts */
	size_t off_samples, off_labels, off_offsets, off_data; /* in a slot */
	uint64_t data_cap;
	uint32_t nslots;
	uint32_t batch_size;
	uint32_t nstats;
	int fd;
};

/* Creates and maps the segment in dir (NULL: $WHARF_SHM_DIR or /dev/shm)
 * and reserves its pages.  On -ENOSPC the message gives the bytes needed,
 * the bytes free and what to lower. */
int ring_open(struct ring *r, const char *dir, uint32_t nslots,
	      uint32_t batch_size, uint64_t data_cap, uint32_t nstats,
	      char **err) __attribute__((warn_unused_result));
void ring_close(struct ring *r);

/* Maps every page of the ring into this process now: one that fills slots
 * (a forked worker, or the caller of a loader without workers). */
void ring_populate(const struct ring *r);

/* Bytes a ring of these dimensions takes (for messages and planning). */
size_t ring_bytes(uint32_t nslots, uint32_t batch_size, uint64_t data_cap,
		  uint32_t nstats);

/* The shm directory ring_open(NULL) uses. */
const char *ring_default_dir(void);

static inline char *ring_slot_base(const struct ring *r, uint32_t s)
{
	return (char *)r->base + r->slots_off + (size_t)s * r->slot_size;
}

static inline struct slot_hdr *ring_hdr(const struct ring *r, uint32_t s)
{
	return (struct slot_hdr *)(void *)ring_slot_base(r, s);
}

static inline uint64_t *ring_samples(const struct ring *r, uint32_t s)
{
	return (uint64_t *)(void *)(ring_slot_base(r, s) + r->off_samples);
}

static inline int32_t *ring_labels(const struct ring *r, uint32_t s)
{
	return (int32_t *)(void *)(ring_slot_base(r, s) + r->off_labels);
}

static inline uint64_t *ring_offsets(const struct ring *r, uint32_t s)
{
	return (uint64_t *)(void *)(ring_slot_base(r, s) + r->off_offsets);
}

static inline char *ring_data(const struct ring *r, uint32_t s)
{
	return ring_slot_base(r, s) + r->off_data;
}

static inline struct ring_worker_stats *ring_stats(const struct ring *r,
						   uint32_t w)
{
	return (struct ring_worker_stats *)r->base + w;
}

#endif
