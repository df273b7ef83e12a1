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

static Suite *suite(void)
{
	Suite *s = suite_create("sampler");
	TCase *tc = tcase_create("sampler");
	tcase_add_test(tc, permutation_is_bijection);
	tcase_add_test(tc, sequential_is_identity);
	tcase_add_test(tc, deterministic_across_processes);
	tcase_add_loop_test(tc, shards, 0, 2);
	tcase_add_test(tc, rank_world_from_env);
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
