/*
 * sampler: a keyed bijection of [0, n) per epoch, and the rank's share.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "sampler.h"

#define ROUNDS 6

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

int sampler_rank_world(int32_t rank, int32_t world, uint32_t *r, uint32_t *w,
		       char **err)
{
	static const char *const envs[][2] = {{"RANK", "WORLD_SIZE"},
					      {"SLURM_PROCID", "SLURM_NTASKS"}};
	long vr = rank, vw = world;
	for (size_t i = 0; i < 2 && (vr < 0 || vw < 0); i++) {
		const char *er = getenv(envs[i][0]), *ew = getenv(envs[i][1]);
		if (!er && !ew)
			continue;
		for (int k = 0; k < 2; k++) {
			const char *s = k ? ew : er;
			long *v = k ? &vw : &vr;
			if (!s || *v >= 0)
				continue;
			char *end;
			errno = 0;
			long x = strtol(s, &end, 10);
			if (errno || end == s || *end || x < 0 ||
			    x > INT32_MAX) {
				*err = strdupf("$%s=%s: not a rank/world size",
					       envs[i][k], s);
				return -EINVAL;
			}
			*v = x;
		}
	}
	if (vr < 0)
		vr = 0;
	if (vw < 0)
		vw = 1;
	if (vw == 0 || vr >= vw) {
		*err = strdupf("rank %ld is not below world size %ld", vr, vw);
		return -EINVAL;
	}
	*r = (uint32_t)vr;
	*w = (uint32_t)vw;
	return 0;
}

int sampler_init(struct sampler *s, uint64_t n, uint64_t seed, uint32_t batch,
		 uint32_t rank, uint32_t world, bool shuffle, bool drop_last,
		 bool drop_uneven, char **err)
{
	memset(s, 0, sizeof(*s));
	if (batch == 0 || world == 0 || rank >= world) {
		*err = strdupf("batch size %u, rank %u, world %u: "
			       "need batch > 0 and rank < world",
			       batch, rank, world);
		return -EINVAL;
	}
	s->n = n;
	s->seed = seed;
	s->rank = rank;
	s->world = world;
	s->batch = batch;
	s->shuffle = shuffle;
	s->drop_last = drop_last;
	s->drop_uneven = drop_uneven;
	uint64_t total =
	    drop_uneven ? n / world * world : (n + world - 1) / world * world;
	s->per_rank = total / world;
	s->nbatches =
	    drop_last ? s->per_rank / batch : (s->per_rank + batch - 1) / batch;
	if (n == 0) {
		*err = strdupf("the index has no samples");
		return -EINVAL;
	}
	uint32_t bits = 2;
	while (bits < 64 && (1ull << bits) < n)
		bits++;
	if (bits % 2)
		bits++;
	s->half_bits = bits / 2;
	return 0;
}

uint64_t sampler_sample_seed(uint64_t seed, uint64_t epoch, uint64_t id)
{
	/* Not the shuffle's keys: a transform's choices should not be
	 * correlated with where the sample lands in the order. */
	const uint64_t k = splitmix64(seed ^ splitmix64(epoch ^ 0x6a09e667ull));
	return splitmix64(k ^ splitmix64(id));
}

uint64_t sampler_shift(uint64_t seed, uint64_t epoch, uint64_t steps)
{
	/* Never 0 after epoch 0: with epoch 0's records, any one later epoch
	 * then covers every pair of tokens that epoch 0 splits. */
	if (epoch == 0 || steps < 2)
		return 0;
	return 1 + splitmix64(seed ^ splitmix64(epoch ^ 0xbb67ae85ull)) %
		       (steps - 1);
}

void sampler_epoch_keys(const struct sampler *s, uint64_t epoch,
			struct sampler_epoch *e)
{
	uint64_t k = splitmix64(s->seed ^ splitmix64(epoch));
	for (int i = 0; i < ROUNDS; i++) {
		k = splitmix64(k + (uint64_t)i);
		e->key[i] = k;
	}
	e->half_bits = s->half_bits;
	e->mask = (1ull << s->half_bits) - 1;
	e->shuffle = s->shuffle;
}

/* A balanced Feistel network on 2 * half_bits bits: a bijection. */
static uint64_t feistel(const struct sampler_epoch *e, uint64_t x)
{
	uint64_t l = x >> e->half_bits, r = x & e->mask;
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t = l ^ (splitmix64(r ^ e->key[i]) & e->mask);
		l = r;
		r = t;
	}
	return (l << e->half_bits) | r;
}

uint64_t sampler_permute(const struct sampler_epoch *e, uint64_t n, uint64_t g)
{
	if (!e->shuffle)
		return g;
	/* Cycle-walking keeps a bijection of the domain a bijection of
	 * [0, n); the domain is < 4n, so few steps on average. */
	uint64_t x = feistel(e, g);
	while (x >= n)
		x = feistel(e, x);
	return x;
}

uint64_t sampler_at(const struct sampler *s, const struct sampler_epoch *e,
		    uint64_t pos)
{
	uint64_t g = pos * s->world + s->rank;
	if (g >= s->n)
		g %= s->n; /* padding repeats the start of the order */
	return sampler_permute(e, s->n, g);
}

uint32_t sampler_batch(const struct sampler *s, const struct sampler_epoch *e,
		       uint64_t b, uint64_t *out)
{
	if (b >= s->nbatches)
		return 0;
	uint64_t start = b * s->batch, end = start + s->batch;
	if (end > s->per_rank)
		end = s->per_rank;
	for (uint64_t p = start; p < end; p++)
		out[p - start] = sampler_at(s, e, p);
	return (uint32_t)(end - start);
}
