#ifndef WHARF_CHUNKS_H
#define WHARF_CHUNKS_H
/*
 * chunks: the in-memory cache of decompressed chunks, with its own byte
 * cap, so that a hot chunk is not read from disk and decompressed again for
 * every 128 KiB kernel read.  It is also the rendezvous that keeps a chunk
 * from being fetched twice: the first asker owns the load, later askers
 * wait for it.
 *
 * Lookups take a per-bucket lock, never a global one; a hit allocates
 * nothing.  Eviction is LRU over chunks nobody holds; a chunk the kernel
 * has had whole goes at once.  Buffers let go are kept for later loads
 * while the cap has room for them.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct chunk_cache;

struct chunk {
	struct chunk_key key;
	void *data; /* valid while held and ready */
	size_t len; /* bytes in data */
		    /* the rest is private to chunks.c */
};

/* @return 0 or -ENOMEM. */
int chunks_new(uint64_t cap_bytes, struct chunk_cache **out) WHARF_CHECK;
void chunks_free(struct chunk_cache *cc);

/*
 * Finds the chunk for key and takes a reference.
 * - Ready: returns 0, *owner = false.
 * - Absent: inserts a loading entry, returns 0, *owner = true: the caller
 *   must fill it with chunks_fill_buffer + chunks_ready, or chunks_fail.
 * - Being loaded by someone else: if wait, sleeps until it is ready (0) or
 *   failed (that load's -errno); if !wait, returns -EAGAIN without a
 *   reference (prefetchers use this: nothing is fetched twice).
 */
int chunks_get(struct chunk_cache *cc, const struct chunk_key *key, bool wait,
	       struct chunk **out, bool *owner) WHARF_CHECK;

/* The owner's buffer of `cap` bytes to load into (allocated once per load,
 * never per read).  NULL on -ENOMEM. */
void *chunks_fill_buffer(struct chunk_cache *cc, struct chunk *c, size_t cap);

/* Instead of a buffer of ours, the owner hands over a read-only mapping of
 * map_len bytes at map (store_map's) whose chunk starts at data; it is
 * unmapped when the entry goes.  Then chunks_ready as usual. */
void chunks_adopt(struct chunk_cache *cc, struct chunk *c, void *map,
		  size_t map_len, void *data);
/* The owner publishes len loaded bytes and wakes the waiters. */
void chunks_ready(struct chunk_cache *cc, struct chunk *c, size_t len);
/* The owner gives up: waiters get err, the entry is dropped, and the next
 * asker becomes a new owner.  Also drops the owner's reference. */
void chunks_fail(struct chunk_cache *cc, struct chunk *c, int err);
/* Another reference to a ready chunk the caller holds: its bytes stay
 * while a store write of them waits (prefetch's deferred writes). */
void chunks_hold(struct chunk_cache *cc, struct chunk *c);
/* Drops a reference taken by chunks_get (after chunks_ready for owners). */
void chunks_put(struct chunk_cache *cc, struct chunk *c);
/* The same, after `served` bytes of it went to the kernel in a read reply.
 * A chunk in a buffer of ours that the kernel has had whole (bytes served
 * add up to its length) is let go once nobody holds it, its buffer kept
 * for the next load: the kernel's page cache holds it now.  A mapped
 * cache file stays (its pages are the page cache's).
 * @return whether, with these bytes, the kernel has had all of it. */
bool chunks_put_served(struct chunk_cache *cc, struct chunk *c, size_t served);
/* The store removed the chunk's file (store_config.evicted, with the
 * cache as arg): a mapping of it is dropped now, or when it is let go, so
 * that the file's disk blocks are freed. */
void chunks_file_removed(void *cache, const struct chunk_key *key);
/* The chunk's bytes are bad (its object failed the origin's checksum):
 * the next chunks_get of key loads it afresh.  Whoever holds the old
 * entry keeps it until chunks_put; a load in flight is left alone. */
void chunks_forget(struct chunk_cache *cc, const struct chunk_key *key);
/* Is the chunk ready in memory now?  No reference is taken; a ready
 * chunk counts as used, as by chunks_get, for eviction. */
bool chunks_contains(struct chunk_cache *cc, const struct chunk_key *key);

struct chunks_stats {
	uint64_t hits, misses, waits, bytes, cap, evictions;
	uint64_t read_whole; /* let go once the kernel had them whole */
	uint64_t reused;     /* loads into a buffer kept from an earlier one */
	uint64_t pool_bytes; /* buffers kept for reuse now */
};
void chunks_get_stats(struct chunk_cache *cc, struct chunks_stats *out);

#endif
