/*
 * sampler: a keyed bijection of [0, n) per epoch, and the rank's share.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "sampler.h"
#include "text.h"

#define ROUNDS 6

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Half the width of the Feistel domain for n elements: the next even power
 * of two at or above n, at least 4. */
static uint32_t half_bits_for(uint64_t n)
{
	uint32_t bits = n <= 4 ? 2 : 64 - (uint32_t)__builtin_clzll(n - 1);

	return (bits + 1) / 2;
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
	s->half_bits = half_bits_for(n);
	return 0;
}

int sampler_use_shards(struct sampler *s, const uint32_t *file, uint32_t window,
		       char **err)
{
	uint64_t nshards = 0;

	if (window == 0) {
		*err = strdupf("shard window 0: at least one shard must be "
			       "open");
		return -EINVAL;
	}
	/* Padding repeats a rank's own last sample: a rank needs one. */
	if (!s->drop_uneven && s->n < s->world) {
		*err = strdupf("the index has %llu samples, fewer than the "
			       "world size %u: the shard-aware order cannot "
			       "pad a rank that has none (use even=drop)",
			       (unsigned long long)s->n, s->world);
		return -EINVAL;
	}
	for (uint64_t i = 0; i < s->n; i++)
		nshards += i == 0 || file[i] != file[i - 1];
	s->shard_start = malloc((nshards + 1) * sizeof(uint64_t));
	s->piece_first = malloc(nshards * sizeof(uint64_t));
	s->piece_pos = malloc((nshards + 1) * sizeof(uint64_t));
	if (!s->shard_start || !s->piece_first || !s->piece_pos) {
		sampler_free(s);
		*err = strdupf("sampler: out of memory for %llu shards",
			       (unsigned long long)nshards);
		return -ENOMEM;
	}
	for (uint64_t i = 0, k = 0; i < s->n; i++)
		if (i == 0 || file[i] != file[i - 1])
			s->shard_start[k++] = i;
	s->shard_start[nshards] = s->n;
	s->nshards = nshards;
	s->window = window;
	s->shard_bits = half_bits_for(nshards);
	return 0;
}

void sampler_free(struct sampler *s)
{
	free(s->shard_start);
	free(s->piece_first);
	free(s->piece_pos);
	s->shard_start = s->piece_first = s->piece_pos = NULL;
	s->nshards = 0;
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

/* A balanced Feistel network on 2 * half bits, keyed by the epoch's keys
 * mixed with salt (0: the global order): a bijection. */
static uint64_t feistel(const uint64_t *key, uint64_t salt, uint32_t half,
			uint64_t x)
{
	const uint64_t mask = (1ull << half) - 1;
	uint64_t l = x >> half, r = x & mask;
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t = l ^ (splitmix64(r ^ key[i] ^ salt) & mask);
		l = r;
		r = t;
	}
	return (l << half) | r;
}

/* Cycle-walking keeps a bijection of the domain a bijection of [0, n); the
 * domain is < 4n, so few steps on average. */
static uint64_t permute_keyed(const uint64_t *key, uint64_t salt, uint32_t half,
			      uint64_t n, uint64_t g)
{
	uint64_t x = feistel(key, salt, half, g);
	while (x >= n)
		x = feistel(key, salt, half, x);
	return x;
}

uint64_t sampler_permute(const struct sampler_epoch *e, uint64_t n, uint64_t g)
{
	if (!e->shuffle)
		return g;
	return permute_keyed(e->key, 0, e->half_bits, n, g);
}

/* Rank r's range of the epoch's shard-ordered samples: [*lo, *lo + count). */
static uint64_t rank_range(const struct sampler *s, uint64_t *lo)
{
	const uint64_t base = s->n / s->world, rem = s->n % s->world;

	*lo = s->rank * base + (s->rank < rem ? s->rank : rem);
	return base + (s->rank < rem);
}

/* Walks the shards in the epoch's keyed order (the same on every rank) and
 * keeps the parts that fall in this rank's range, in that order. */
static void shard_pieces(const struct sampler *s, struct sampler_epoch *e)
{
	uint64_t lo, cum = 0, m = 0;
	const uint64_t count = rank_range(s, &lo), hi = lo + count;

	for (uint64_t j = 0; j < s->nshards && cum < hi; j++) {
		const uint64_t sh =
		    permute_keyed(e->key, 0, s->shard_bits, s->nshards, j);
		const uint64_t a = s->shard_start[sh];
		const uint64_t len = s->shard_start[sh + 1] - a;
		const uint64_t from = cum > lo ? cum : lo;
		const uint64_t to = cum + len < hi ? cum + len : hi;
		if (from < to) {
			s->piece_first[m] = a + (from - cum);
			s->piece_pos[m] = from - lo;
			m++;
		}
		cum += len;
	}
	s->piece_pos[m] = count;
	e->piece_first = s->piece_first;
	e->piece_pos = s->piece_pos;
	e->npieces = m;
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
	e->piece_first = e->piece_pos = NULL;
	e->npieces = 0;
	e->window = s->window;
	if (s->nshards)
		shard_pieces(s, e);
}

/* The last piece in [a, b) that starts at or before rank position pos. */
static uint64_t piece_at(const struct sampler_epoch *e, uint64_t a, uint64_t b,
			 uint64_t pos)
{
	while (b - a > 1) {
		const uint64_t mid = a + (b - a) / 2;
		if (e->piece_pos[mid] <= pos)
			a = mid;
		else
			b = mid;
	}
	return a;
}

/* Shard-aware order: the group of `window` pieces that holds pos, then a
 * keyed permutation of that group's samples, salted by the group. */
static uint64_t shard_order_at(const struct sampler_epoch *e, uint64_t pos)
{
	const uint64_t count = e->piece_pos[e->npieces];
	if (pos >= count)
		pos = count - 1; /* padding: the rank's last sample again */
	const uint64_t g = piece_at(e, 0, e->npieces, pos) / e->window;
	const uint64_t first = g * e->window;
	const uint64_t end =
	    first + e->window < e->npieces ? first + e->window : e->npieces;
	const uint64_t start = e->piece_pos[first];
	const uint64_t len = e->piece_pos[end] - start;
	const uint64_t k =
	    start + permute_keyed(e->key, splitmix64(g + 0x3c6ef372ull),
				  half_bits_for(len), len, pos - start);
	const uint64_t p = piece_at(e, first, end, k);
	return e->piece_first[p] + (k - e->piece_pos[p]);
}

uint64_t sampler_at(const struct sampler *s, const struct sampler_epoch *e,
		    uint64_t pos)
{
	if (e->npieces)
		return shard_order_at(e, pos);
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
