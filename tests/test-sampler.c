/* The sampler: permutations, determinism across processes, shards. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "loader_i.h"
#include "sampler.h"

/* The order of 10 samples, seed 0, epoch 0: fixed forever (a change
 * reshuffles every saved run). */
#define PINNED_ORDER "5823601947"
/* Rank 0 of 1, 40 samples in uneven shards, seed 3, epoch 2, window 2. */
#define PINNED_SHARD_ORDER                                                     \
	"38,36,11,31,12,29,32,34,35,39,33,13,30,37,4,8,10,3,2,6,5,0,7,9,1,19," \
	"17,25,18,27,20,26,24,23,16,14,22,28,15,21,"

static void init(struct sampler *s, uint64_t n, uint64_t seed, uint32_t batch,
		 uint32_t rank, uint32_t world, bool shuffle, bool drop_last,
		 bool drop_uneven)
{
	char *err = NULL;
	int rc = sampler_init(s, n, seed, batch, rank, world, shuffle,
			      drop_last, drop_uneven, &err);
	ck_assert_msg(rc == 0, "sampler_init: %s", err);
}

START_TEST(permutation_is_bijection)
{
	/* Sizes around powers of two and odd bit counts. */
	static const uint64_t sizes[] = {1, 2,	 3,    4,    5,	   7,	 8,
					 9, 100, 1000, 1023, 1024, 1025, 65537};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t n = sizes[i];
		struct sampler s;
		struct sampler_epoch e;
		init(&s, n, 5, 1, 0, 1, true, false, false);
		sampler_epoch_keys(&s, 2, &e);
		char *seen = calloc(n, 1);
		uint64_t fixed = 0;
		for (uint64_t g = 0; g < n; g++) {
			uint64_t x = sampler_permute(&e, n, g);
			ck_assert_uint_lt(x, n);
			ck_assert_int_eq(seen[x], 0);
			seen[x] = 1;
			fixed += x == g;
		}
		if (n >= 100)
			ck_assert_uint_lt(fixed, n / 10);
		free(seen);
	}
}
END_TEST

START_TEST(sequential_is_identity)
{
	struct sampler s;
	struct sampler_epoch e;
	init(&s, 10, 5, 4, 0, 1, false, false, false);
	sampler_epoch_keys(&s, 7, &e);
	ck_assert_uint_eq(s.nbatches, 3);
	uint64_t ids[4];
	ck_assert_uint_eq(sampler_batch(&s, &e, 0, ids), 4);
	ck_assert_uint_eq(ids[3], 3);
	ck_assert_uint_eq(sampler_batch(&s, &e, 2, ids), 2);
	ck_assert_uint_eq(ids[0], 8);
	ck_assert_uint_eq(ids[1], 9);
	ck_assert_uint_eq(sampler_batch(&s, &e, 3, ids), 0);
	init(&s, 10, 5, 4, 0, 1, false, true, false);
	ck_assert_uint_eq(s.nbatches, 2);
}
END_TEST

/* The first 64 positions of (seed, epoch), as a child process sees them. */
static void order_in_child(uint64_t seed, uint64_t epoch, uint64_t *out)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sampler s;
		struct sampler_epoch e;
		char *err;
		uint64_t v[64];
		if (sampler_init(&s, 1000003, seed, 64, 0, 1, true, false,
				 false, &err))
			_exit(1);
		sampler_epoch_keys(&s, epoch, &e);
		sampler_batch(&s, &e, 0, v);
		_exit(write(p[1], v, sizeof(v)) == sizeof(v) ? 0 : 1);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], out, 64 * 8), 64 * 8);
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	ck_assert_int_eq(st, 0);
}

START_TEST(deterministic_across_processes)
{
	uint64_t a[64], b[64], c[64], d[64];
	order_in_child(11, 4, a);
	order_in_child(11, 4, b);
	order_in_child(11, 5, c);
	order_in_child(12, 4, d);
	ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
	ck_assert_int_ne(memcmp(a, c, sizeof(a)), 0);
	ck_assert_int_ne(memcmp(a, d, sizeof(a)), 0);
	/* And the same as here. */
	struct sampler s;
	struct sampler_epoch e;
	uint64_t here[64];
	init(&s, 1000003, 11, 64, 0, 1, true, false, false);
	sampler_epoch_keys(&s, 4, &e);
	sampler_batch(&s, &e, 0, here);
	ck_assert_int_eq(memcmp(a, here, sizeof(a)), 0);
	/* Known values pin the order across builds and machines. */
	init(&s, 10, 0, 10, 0, 1, true, false, false);
	sampler_epoch_keys(&s, 0, &e);
	sampler_batch(&s, &e, 0, here);
	char got[64] = "", *p = got;
	for (int i = 0; i < 10; i++)
		p += sprintf(p, "%d", (int)here[i]);
	ck_assert_str_eq(got, PINNED_ORDER);
}
END_TEST

START_TEST(shards)
{
	/* _i: 0 pad, 1 drop uneven. n = 103 over world 4. */
	const uint64_t n = 103;
	const uint32_t world = 4;
	bool drop = _i == 1;
	uint32_t *count = calloc(n, sizeof(*count));
	uint64_t per = 0;
	for (uint32_t r = 0; r < world; r++) {
		struct sampler s;
		struct sampler_epoch e;
		init(&s, n, 3, 5, r, world, true, false, drop);
		sampler_epoch_keys(&s, 1, &e);
		if (r == 0)
			per = s.per_rank;
		ck_assert_uint_eq(s.per_rank, per); /* equal on every rank */
		ck_assert_uint_eq(s.nbatches, (per + 4) / 5);
		for (uint64_t p = 0; p < s.per_rank; p++)
			count[sampler_at(&s, &e, p)]++;
	}
	uint64_t total = 0, twice = 0, missing = 0;
	for (uint64_t i = 0; i < n; i++) {
		total += count[i];
		twice += count[i] > 1;
		missing += count[i] == 0;
	}
	if (drop) {
		ck_assert_uint_eq(per, 25);
		ck_assert_uint_eq(total, 100);
		ck_assert_uint_eq(twice, 0); /* disjoint */
		ck_assert_uint_eq(missing, 3);
	} else {
		ck_assert_uint_eq(per, 26);
		ck_assert_uint_eq(total, 104);
		ck_assert_uint_eq(missing, 0); /* covers everything */
		ck_assert_uint_eq(twice, 1);   /* one padding sample */
	}
	free(count);
}
END_TEST

START_TEST(rank_world_from_env)
{
	uint32_t r, w;
	char *err = NULL;
	unsetenv("RANK");
	unsetenv("WORLD_SIZE");
	unsetenv("SLURM_PROCID");
	unsetenv("SLURM_NTASKS");
	ck_assert_int_eq(sampler_rank_world(-1, -1, &r, &w, &err), 0);
	ck_assert_uint_eq(r, 0);
	ck_assert_uint_eq(w, 1);
	setenv("SLURM_PROCID", "2", 1);
	setenv("SLURM_NTASKS", "5", 1);
	ck_assert_int_eq(sampler_rank_world(-1, -1, &r, &w, &err), 0);
	ck_assert_uint_eq(r, 2);
	ck_assert_uint_eq(w, 5);
	setenv("RANK", "3", 1);
	setenv("WORLD_SIZE", "8", 1);
	ck_assert_int_eq(sampler_rank_world(-1, -1, &r, &w, &err), 0);
	ck_assert_uint_eq(r, 3);
	ck_assert_uint_eq(w, 8);
	ck_assert_int_eq(sampler_rank_world(1, 2, &r, &w, &err), 0);
	ck_assert_uint_eq(r, 1);
	ck_assert_uint_eq(w, 2);
	setenv("RANK", "x", 1);
	ck_assert_int_eq(sampler_rank_world(-1, -1, &r, &w, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "$RANK=x"));
	free(err);
	setenv("RANK", "9", 1);
	ck_assert_int_eq(sampler_rank_world(-1, -1, &r, &w, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "rank 9"));
	free(err);
	unsetenv("RANK");
	unsetenv("WORLD_SIZE");
	unsetenv("SLURM_PROCID");
	unsetenv("SLURM_NTASKS");
}
END_TEST

/* Shard-aware order over a file array: every rank's order, checked for
 * coverage, disjointness, the window bound and the rank split. */
struct shard_case {
	uint64_t n;
	uint32_t *file;
	uint32_t world, window;
	bool drop;
};

static void init_shards(struct sampler *s, const struct shard_case *c,
			uint32_t rank, uint64_t seed)
{
	char *err = NULL;
	init(s, c->n, seed, 7, rank, c->world, true, false, c->drop);
	int rc = sampler_use_shards(s, c->file, c->window, &err);
	ck_assert_msg(rc == 0, "sampler_use_shards: %s", err);
}

/* The most shards open at once in ids[0..len): a shard is open from its
 * first sample in the order to its last. */
static uint64_t max_open(const struct shard_case *c, const uint64_t *ids,
			 uint64_t len)
{
	uint64_t *first = malloc(c->n * sizeof(*first));
	uint64_t *last = malloc(c->n * sizeof(*last));
	int64_t *delta = calloc(len + 1, sizeof(*delta));
	for (uint64_t f = 0; f < c->n; f++)
		first[f] = UINT64_MAX;
	for (uint64_t p = 0; p < len; p++) {
		uint32_t f = c->file[ids[p]];
		if (first[f] == UINT64_MAX)
			first[f] = p;
		last[f] = p;
	}
	for (uint64_t f = 0; f < c->n; f++)
		if (first[f] != UINT64_MAX) {
			delta[first[f]]++;
			delta[last[f] + 1]--;
		}
	int64_t open = 0, most = 0;
	for (uint64_t p = 0; p < len; p++) {
		open += delta[p];
		if (open > most)
			most = open;
	}
	free(first);
	free(last);
	free(delta);
	return (uint64_t)most;
}

static void check_shard_order(const struct shard_case *c, uint64_t epoch)
{
	uint32_t *count = calloc(c->n, sizeof(*count));
	uint32_t *owner = malloc(c->n * sizeof(*owner)); /* by file */
	uint64_t per = 0, shared = 0;
	for (uint64_t f = 0; f < c->n; f++)
		owner[f] = UINT32_MAX;
	for (uint32_t r = 0; r < c->world; r++) {
		struct sampler s;
		struct sampler_epoch e;
		init_shards(&s, c, r, 21);
		sampler_epoch_keys(&s, epoch, &e);
		if (r == 0)
			per = s.per_rank;
		ck_assert_uint_eq(s.per_rank, per); /* equal on every rank */
		uint64_t *ids = malloc((s.per_rank + 1) * sizeof(*ids));
		for (uint64_t p = 0; p < s.per_rank; p++) {
			ids[p] = sampler_at(&s, &e, p);
			ck_assert_uint_lt(ids[p], c->n);
			count[ids[p]]++;
			/* Ranks share a shard only where a range ends in
			 * it: with the rank before. */
			uint32_t f = c->file[ids[p]];
			if (owner[f] != r && owner[f] != UINT32_MAX &&
			    owner[f] + 1 != r)
				ck_abort_msg("file %u on ranks %u and %u", f,
					     owner[f], r);
			shared += owner[f] != UINT32_MAX && owner[f] + 1 == r;
			owner[f] = r;
		}
		ck_assert_uint_le(max_open(c, ids, s.per_rank), c->window);
		free(ids);
		sampler_free(&s);
	}
	/* At most one shard is split at each of the world - 1 borders. */
	ck_assert_uint_le(shared, c->world - 1);
	uint64_t once = 0, twice = 0, missing = 0;
	for (uint64_t i = 0; i < c->n; i++) {
		once += count[i] == 1;
		twice += count[i] == 2;
		missing += count[i] == 0;
		ck_assert_uint_le(count[i], 2);
	}
	const uint64_t rem = c->n % c->world;
	if (c->drop) {
		ck_assert_uint_eq(per, c->n / c->world);
		ck_assert_uint_eq(twice, 0); /* disjoint */
		ck_assert_uint_eq(missing, rem);
	} else {
		ck_assert_uint_eq(per, (c->n + c->world - 1) / c->world);
		ck_assert_uint_eq(missing, 0); /* covers everything */
		ck_assert_uint_eq(twice, rem ? c->world - rem : 0);
	}
	free(count);
	free(owner);
}

/* Shard sizes 1 to 12, uneven, in index order. */
static uint32_t *uneven_files(uint64_t n)
{
	uint32_t *file = malloc(n * sizeof(*file));
	uint32_t f = 0, left = 3;
	for (uint64_t i = 0; i < n; i++) {
		if (!left) {
			f++;
			left = 1 + (f * 7) % 12;
		}
		file[i] = f;
		left--;
	}
	return file;
}

START_TEST(shard_order_ranks_and_window)
{
	/* _i: world 1..4, times pad/drop, times window 1/4. */
	const uint32_t world = 1 + (uint32_t)_i % 4;
	struct shard_case c = {.n = 301,
			       .world = world,
			       .window = _i / 8 ? 4 : 1,
			       .drop = (_i / 4) % 2};
	c.file = uneven_files(c.n);
	check_shard_order(&c, 0);
	check_shard_order(&c, 5);
	free(c.file);
}
END_TEST

START_TEST(shard_order_one_shard_and_tiny_shards)
{
	struct shard_case c = {.n = 500, .world = 3, .window = 4};
	c.file = calloc(c.n, sizeof(*c.file)); /* one shard */
	check_shard_order(&c, 1);
	/* One shard shuffled whole: not the index order. */
	struct sampler s;
	struct sampler_epoch e;
	c.world = 1;
	init_shards(&s, &c, 0, 21);
	sampler_epoch_keys(&s, 1, &e);
	uint64_t in_place = 0;
	for (uint64_t p = 0; p < c.n; p++)
		in_place += sampler_at(&s, &e, p) == p;
	ck_assert_uint_lt(in_place, c.n / 10);
	sampler_free(&s);
	/* One sample per file (a --dir index): a shard order. */
	for (uint64_t i = 0; i < c.n; i++)
		c.file[i] = (uint32_t)i;
	c.world = 4;
	check_shard_order(&c, 1);
	c.drop = true;
	check_shard_order(&c, 2);
	free(c.file);
}
END_TEST

/* Rank 0's order of seed, epoch over the uneven shards, as a string. */
static void shard_order_str(uint64_t seed, uint64_t epoch, uint32_t window,
			    char *out, size_t len)
{
	struct shard_case c = {.n = 40, .world = 1, .window = window};
	struct sampler s;
	struct sampler_epoch e;
	c.file = uneven_files(c.n);
	init_shards(&s, &c, 0, seed);
	sampler_epoch_keys(&s, epoch, &e);
	size_t k = 0;
	for (uint64_t p = 0; p < c.n; p++)
		k +=
		    (size_t)snprintf(out + k, len - k, "%llu,",
				     (unsigned long long)sampler_at(&s, &e, p));
	sampler_free(&s);
	free(c.file);
}

START_TEST(shard_order_deterministic)
{
	char a[256], b[256], c[256], d[256], w[256];
	shard_order_str(3, 2, 2, a, sizeof(a));
	shard_order_str(3, 2, 2, b, sizeof(b));
	shard_order_str(3, 3, 2, c, sizeof(c));
	shard_order_str(4, 2, 2, d, sizeof(d));
	shard_order_str(3, 2, 3, w, sizeof(w));
	ck_assert_str_eq(a, b);
	ck_assert_str_ne(a, c); /* epoch */
	ck_assert_str_ne(a, d); /* seed */
	ck_assert_str_ne(a, w); /* window */
	/* Pinned: a change reorders every saved shard-aware run. */
	ck_assert_str_eq(a, PINNED_SHARD_ORDER);
	/* Any position alone gives what a walk from the start gives (what
	 * a resumed epoch relies on), also in another process. */
	struct shard_case sc = {.n = 40, .world = 1, .window = 2};
	sc.file = uneven_files(sc.n);
	struct sampler s;
	struct sampler_epoch e;
	init_shards(&s, &sc, 0, 3);
	sampler_epoch_keys(&s, 2, &e);
	uint64_t ids[7];
	ck_assert_uint_eq(sampler_batch(&s, &e, 3, ids), 7);
	char tail[256] = "";
	size_t k = 0;
	for (int i = 0; i < 7; i++)
		k += (size_t)snprintf(tail + k, sizeof(tail) - k, "%llu,",
				      (unsigned long long)ids[i]);
	const char *p = a;
	for (int comma = 0; comma < 21; p++)
		comma += *p == ',';
	ck_assert_int_eq(strncmp(p, tail, strlen(tail)), 0);
	sampler_free(&s);
	free(sc.file);
}
END_TEST

START_TEST(shard_order_refused)
{
	struct sampler s;
	uint32_t file[3] = {0, 0, 1};
	char *err = NULL;
	init(&s, 3, 1, 1, 0, 1, true, false, false);
	ck_assert_int_eq(sampler_use_shards(&s, file, 0, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "window 0"));
	free(err);
	init(&s, 3, 1, 1, 0, 4, true, false, false);
	ck_assert_int_eq(sampler_use_shards(&s, file, 4, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "even=drop"));
	free(err);
	init(&s, 3, 1, 1, 0, 4, true, false, true);
	ck_assert_int_eq(sampler_use_shards(&s, file, 4, &err), 0);
	ck_assert_uint_eq(s.per_rank, 0);
	sampler_free(&s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sampler");
	TCase *tc = tcase_create("sampler");
	tcase_add_test(tc, permutation_is_bijection);
	tcase_add_test(tc, sequential_is_identity);
	tcase_add_test(tc, deterministic_across_processes);
	tcase_add_loop_test(tc, shards, 0, 2);
	tcase_add_test(tc, rank_world_from_env);
	tcase_add_loop_test(tc, shard_order_ranks_and_window, 0, 16);
	tcase_add_test(tc, shard_order_one_shard_and_tiny_shards);
	tcase_add_test(tc, shard_order_deterministic);
	tcase_add_test(tc, shard_order_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
