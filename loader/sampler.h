#ifndef WHARF_LOADER_SAMPLER_H
#define WHARF_LOADER_SAMPLER_H
/*
 * The sampler: which samples batch b of epoch e holds on this rank, as a pure
 * function of (n, seed, epoch, rank, world, batch size, flags).  Nothing is
 * stored per sample: the shuffle is a keyed bijection of [0, n) (a Feistel
 * network on the next even power of two, cycle-walked into range), so the
 * same order comes out on every machine and run and any position is O(1).
 *
 * Sharding follows PyTorch's DistributedSampler: the epoch order is padded
 * by wrapping to a multiple of world (or cut down to one), and rank r takes
 * positions r, r + world, r + 2 world, ...
 *
 * Shard-aware order (sampler_use_shards): a shard is a run of consecutive
 * samples of one file.  Per epoch the shards go in a keyed order; the
 * samples of that order are cut into world consecutive ranges (rank r takes
 * the r-th, of n / world samples, one more for the first n % world ranks),
 * so ranks hold whole shards except that a range may end inside one: that
 * shard's samples are split between two ranks in index order, each reading
 * only its part.  A rank's pieces (shards, or parts of one) go in groups of
 * `window`, and the samples of a group in a keyed order of their own, so
 * at most `window` shards are open at any point.  pad repeats the rank's
 * last sample (its shard is still open); drop leaves it out.  Memory: 24
 * bytes per shard, allocated once; nothing per sample; O(shards) per epoch
 * and O(log shards) per position.
 */
#include <stdbool.h>
#include <stdint.h>

struct sampler {
	uint64_t n; /* samples in the index */
	uint64_t seed;
	uint64_t per_rank; /* samples each rank sees per epoch */
	uint64_t nbatches; /* batches each rank sees per epoch */
	uint32_t rank, world, batch;
	bool shuffle, drop_last, drop_uneven;
	/* Feistel parameters, set per epoch by sampler_keys(). */
	uint32_t half_bits;
	/* Shard-aware order (sampler_use_shards), else nshards == 0. */
	uint32_t window;     /* pieces shuffled together */
	uint32_t shard_bits; /* Feistel half width over the shards */
	uint64_t nshards;
	uint64_t *shard_start; /* nshards + 1: first sample of each shard */
	/* This epoch's pieces of this rank, filled by sampler_epoch_keys:
	 * one epoch at a time per sampler. */
	uint64_t *piece_first; /* first sample id of each piece */
	uint64_t *piece_pos; /* npieces + 1: rank position where each starts */
};

struct sampler_epoch {
	uint64_t key[6];
	uint64_t mask; /* (1 << half_bits) - 1 */
	uint32_t half_bits;
	bool shuffle;
	/* Shard-aware order: this rank's pieces (pointers into the sampler),
	 * or npieces == 0. */
	const uint64_t *piece_first, *piece_pos;
	uint64_t npieces;
	uint32_t window;
};

/* @return 0, or -EINVAL with *err set (rank >= world, no batch for this
 * rank, batch 0). */
int sampler_init(struct sampler *s, uint64_t n, uint64_t seed, uint32_t batch,
		 uint32_t rank, uint32_t world, bool shuffle, bool drop_last,
		 bool drop_uneven, char **err)
    __attribute__((warn_unused_result));

/* Switches s (after sampler_init, shuffled) to the shard-aware order over
 * the index's file array (n entries): at most `window` shards open at once.
 * @return 0, -ENOMEM, or -EINVAL with *err set (window 0, fewer samples
 * than ranks with padding). */
int sampler_use_shards(struct sampler *s, const uint32_t *file, uint32_t window,
		       char **err) __attribute__((warn_unused_result));

/* Frees what sampler_use_shards allocated; the sampler is then unusable. */
void sampler_free(struct sampler *s);

/* Rank and world from $RANK/$WORLD_SIZE, else $SLURM_PROCID/$SLURM_NTASKS,
 * else 0/1; a value given (>= 0) wins.  -EINVAL on junk in the environment. */
int sampler_rank_world(int32_t rank, int32_t world, uint32_t *r, uint32_t *w,
		       char **err) __attribute__((warn_unused_result));

/* The epoch's keys, and in shard-aware order the rank's pieces (written
 * into the sampler's arrays: e is valid until the next call on s). */
void sampler_epoch_keys(const struct sampler *s, uint64_t epoch,
			struct sampler_epoch *e);

/* The permuted position of global position g < n. */
uint64_t sampler_permute(const struct sampler_epoch *e, uint64_t n, uint64_t g);

/* Sample id at rank-local position pos < per_rank. */
uint64_t sampler_at(const struct sampler *s, const struct sampler_epoch *e,
		    uint64_t pos);

/* The seed of sample id's transform in epoch epoch: a pure function of the
 * three, so a resumed or re-run epoch makes the same random choices
 * whichever worker (or process) decodes the sample. */
uint64_t sampler_sample_seed(uint64_t seed, uint64_t epoch, uint64_t id);

/* Moving windows: the shift, in steps, of every sample of `steps` steps in
 * epoch epoch: 0 in epoch 0 (the index's own records), else in
 * [1, steps), a pure function of (seed, epoch). */
uint64_t sampler_shift(uint64_t seed, uint64_t epoch, uint64_t steps);

/* Writes batch b's sample ids into out (room for s->batch).
 * @return the count, 0 when b >= nbatches. */
uint32_t sampler_batch(const struct sampler *s, const struct sampler_epoch *e,
		       uint64_t b, uint64_t *out);

#endif
