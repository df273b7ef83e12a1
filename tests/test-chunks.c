/* chunks: the memory cache's owner/waiter protocol, cap and eviction. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "chunks.h"

#define KiB 1024

static struct chunk_cache *cc;

static void setup(void)
{
	ck_assert_int_eq(chunks_new(4 * 64 * KiB, &cc), 0);
}

static void teardown(void)
{
	chunks_free(cc);
	cc = NULL;
}

static void key_n(struct chunk_key *k, unsigned n)
{
	store_key(k, "src", "/obj", "v1", 1u << 30, 0, 64 * KiB, n);
}

static uint8_t pattern(unsigned key, size_t i)
{
	return (uint8_t)(key * 31 + i * 7 + (i >> 9));
}

/* Gets chunk n as its owner and fills it with its pattern. */
static struct chunk *load(unsigned n, size_t len)
{
	struct chunk_key k;
	struct chunk *c;
	bool owner = false;
	uint8_t *p;

	key_n(&k, n);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	ck_assert(owner);
	p = chunks_fill_buffer(cc, c, len);
	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(n, i);
	chunks_ready(cc, c, len);
	return c;
}

START_TEST(hit_miss_owner)
{
	struct chunks_stats s;
	struct chunk_key k;
	struct chunk *c, *c2;
	bool owner = true;

	key_n(&k, 1);
	ck_assert(!chunks_contains(cc, &k));
	c = load(1, 1000);
	ck_assert(chunks_contains(cc, &k));
	chunks_put(cc, c);
	ck_assert(chunks_contains(cc, &k));

	ck_assert_int_eq(chunks_get(cc, &k, true, &c2, &owner), 0);
	ck_assert(!owner);
	ck_assert_ptr_eq(c2, c);
	ck_assert_uint_eq(c2->len, 1000);
	for (size_t i = 0; i < 1000; i++)
		ck_assert_uint_eq(((uint8_t *)c2->data)[i], pattern(1, i));
	chunks_put(cc, c2);

	/* An empty chunk is a chunk too. */
	c = load(2, 0);
	chunks_put(cc, c);
	key_n(&k, 2);
	ck_assert_int_eq(chunks_get(cc, &k, false, &c, &owner), 0);
	ck_assert(!owner);
	ck_assert_uint_eq(c->len, 0);
	chunks_put(cc, c);

	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.misses, 2);
	ck_assert_uint_eq(s.hits, 2);
	ck_assert_uint_eq(s.cap, 4 * 64 * KiB);
	ck_assert_uint_eq(s.bytes, 1000);
}
END_TEST

/* Bad bytes forgotten: the next get loads afresh, a holder keeps the old
 * chunk until it lets go, and its memory is given back then. */
START_TEST(forget_bad_bytes)
{
	struct chunks_stats st;
	struct chunk_key k;
	struct chunk *held, *c;
	bool owner = false;

	key_n(&k, 3);
	held = load(3, 5000);
	chunks_forget(cc, &k);
	ck_assert(!chunks_contains(cc, &k));
	ck_assert_uint_eq(((uint8_t *)held->data)[10], pattern(3, 10));
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	ck_assert(owner);
	ck_assert_ptr_ne(c, held);
	ck_assert_ptr_nonnull(chunks_fill_buffer(cc, c, 100));
	chunks_ready(cc, c, 100);
	chunks_put(cc, held);
	chunks_get_stats(cc, &st);
	ck_assert_uint_eq(st.bytes, 100);
	chunks_put(cc, c);
	/* unheld: gone at once; a key not cached: nothing */
	chunks_forget(cc, &k);
	ck_assert(!chunks_contains(cc, &k));
	chunks_forget(cc, &k);
	chunks_get_stats(cc, &st);
	ck_assert_uint_eq(st.bytes, 0);
}
END_TEST

START_TEST(eagain_without_wait)
{
	struct chunk_key k;
	struct chunk *c, *c2;
	bool owner;

	key_n(&k, 5);
	ck_assert_int_eq(chunks_get(cc, &k, false, &c, &owner), 0);
	ck_assert(owner);
	ck_assert_int_eq(chunks_get(cc, &k, false, &c2, &owner), -EAGAIN);
	ck_assert(!chunks_contains(cc, &k));
	ck_assert_ptr_nonnull(chunks_fill_buffer(cc, c, 10));
	chunks_ready(cc, c, 10);
	ck_assert_int_eq(chunks_get(cc, &k, false, &c2, &owner), 0);
	ck_assert(!owner);
	chunks_put(cc, c2);
	chunks_put(cc, c);
}
END_TEST

struct waiter {
	pthread_t th;
	unsigned n;
	int rc;
	bool owner;
	bool data_ok;
};

static void *wait_for(void *arg)
{
	struct waiter *w = arg;
	struct chunk_key k;
	struct chunk *c;

	key_n(&k, w->n);
	w->rc = chunks_get(cc, &k, true, &c, &w->owner);
	if (w->rc)
		return NULL;
	if (w->owner) {
		chunks_fail(cc, c, -ECANCELED);
		return NULL;
	}
	w->data_ok = c->len == 5000;
	for (size_t i = 0; w->data_ok && i < c->len; i++)
		w->data_ok = ((uint8_t *)c->data)[i] == pattern(w->n, i);
	chunks_put(cc, c);
	return NULL;
}

/* Starts n waiters on chunk key and returns once all of them sleep. */
static void start_waiters(struct waiter *w, int n, unsigned key)
{
	struct chunks_stats s;

	for (int i = 0; i < n; i++) {
		w[i] = (struct waiter){.n = key};
		ck_assert_int_eq(
		    pthread_create(&w[i].th, NULL, wait_for, &w[i]), 0);
	}
	/* Synchronisation, not timing: the waits counter says when. */
	do {
		sched_yield();
		chunks_get_stats(cc, &s);
	} while (s.waits < (uint64_t)n);
}

START_TEST(waiters_ready)
{
	struct waiter w[4];
	struct chunk_key k;
	struct chunk *c;
	bool owner;
	uint8_t *p;

	key_n(&k, 9);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	ck_assert(owner);
	start_waiters(w, 4, 9);
	p = chunks_fill_buffer(cc, c, 5000);
	for (size_t i = 0; i < 5000; i++)
		p[i] = pattern(9, i);
	chunks_ready(cc, c, 5000);
	for (int i = 0; i < 4; i++) {
		pthread_join(w[i].th, NULL);
		ck_assert_int_eq(w[i].rc, 0);
		ck_assert(!w[i].owner);
		ck_assert(w[i].data_ok);
	}
	chunks_put(cc, c);
}
END_TEST

START_TEST(waiters_fail)
{
	struct chunks_stats s;
	struct waiter w[4];
	struct chunk_key k;
	struct chunk *c;
	bool owner;

	key_n(&k, 11);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	ck_assert(owner);
	start_waiters(w, 4, 11);
	ck_assert_ptr_nonnull(chunks_fill_buffer(cc, c, 5000));
	chunks_fail(cc, c, -EIO);
	for (int i = 0; i < 4; i++) {
		pthread_join(w[i].th, NULL);
		ck_assert_int_eq(w[i].rc, -EIO);
	}
	/* The failed load is gone: the next asker owns a new one. */
	ck_assert(!chunks_contains(cc, &k));
	ck_assert_int_eq(chunks_get(cc, &k, false, &c, &owner), 0);
	ck_assert(owner);
	chunks_fail(cc, c, -EIO);
	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.bytes, 0);
}
END_TEST

START_TEST(cap_evicts_unreferenced_only)
{
	struct chunks_stats s;
	struct chunk_key k;
	struct chunk *held, *c[6];

	/* Chunk 0 stays held while 20 more pass through a cap of 4. */
	held = load(0, 64 * KiB);
	for (unsigned i = 1; i <= 20; i++) {
		struct chunk *x = load(i, 64 * KiB);

		chunks_put(cc, x);
		chunks_get_stats(cc, &s);
		ck_assert_uint_le(s.bytes, 4 * 64 * KiB);
	}
	key_n(&k, 0);
	ck_assert(chunks_contains(cc, &k));
	for (size_t i = 0; i < 64 * KiB; i++)
		ck_assert_uint_eq(((uint8_t *)held->data)[i], pattern(0, i));
	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.evictions, 20 - 3);
	/* The most recent ones are still there. */
	key_n(&k, 20);
	ck_assert(chunks_contains(cc, &k));
	chunks_put(cc, held);

	/* Held chunks are never evicted: the cap gives way, then holds
	 * again once they are released. */
	for (unsigned i = 0; i < 6; i++)
		c[i] = load(100 + i, 64 * KiB);
	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.bytes, 6 * 64 * KiB);
	for (unsigned i = 0; i < 6; i++) {
		key_n(&k, 100 + i);
		ck_assert(chunks_contains(cc, &k));
		for (size_t j = 0; j < 64 * KiB; j += 4099)
			ck_assert_uint_eq(((uint8_t *)c[i]->data)[j],
					  pattern(100 + i, j));
	}
	for (unsigned i = 0; i < 6; i++)
		chunks_put(cc, c[i]);
	chunks_get_stats(cc, &s);
	ck_assert_uint_le(s.bytes, 4 * 64 * KiB);
}
END_TEST

/* Hands c, loading chunk n, a read-only mapping holding its pattern after
 * a 48-byte header, as a mapped chunk file is, and publishes it. */
static struct chunk *adopt_loading(struct chunk *c, unsigned n, size_t len)
{
	const size_t map_len = 48 + len;
	uint8_t *m;

	m = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	for (size_t i = 0; i < len; i++)
		m[48 + i] = pattern(n, i);
	ck_assert_int_eq(mprotect(m, map_len, PROT_READ), 0);
	chunks_adopt(cc, c, m, map_len, m + 48);
	chunks_ready(cc, c, len);
	return c;
}

/* Gets chunk n as its owner and adopts a mapping for it. */
static struct chunk *adopt(unsigned n, size_t len, bool fill_first)
{
	struct chunk_key k;
	struct chunk *c;
	bool owner = false;

	key_n(&k, n);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	ck_assert(owner);
	if (fill_first) /* a buffer the adoption must replace */
		ck_assert_ptr_nonnull(chunks_fill_buffer(cc, c, len));
	return adopt_loading(c, n, len);
}

/* Adopted mappings are served, counted against the cap, and evicted like
 * buffers; a key evicted that way loads into a buffer of ours again. */
START_TEST(adopted_mappings)
{
	struct chunks_stats s;
	struct chunk_key k;
	struct chunk *c;
	bool owner = true;

	for (unsigned i = 0; i < 12; i++) {
		c = adopt(i, 60 * KiB, i % 2);
		ck_assert_uint_eq(c->len, 60 * KiB);
		for (size_t j = 0; j < c->len; j += 997)
			ck_assert_uint_eq(((uint8_t *)c->data)[j],
					  pattern(i, j));
		chunks_put(cc, c);
		chunks_get_stats(cc, &s);
		ck_assert_uint_le(s.bytes, 4 * 64 * KiB);
	}
	chunks_get_stats(cc, &s);
	ck_assert_uint_gt(s.evictions, 0);
	key_n(&k, 11);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	ck_assert(!owner);
	ck_assert_uint_eq(((uint8_t *)c->data)[5], pattern(11, 5));
	chunks_put(cc, c);
	key_n(&k, 0);
	ck_assert(!chunks_contains(cc, &k));
	c = load(0, 64 * KiB);
	ck_assert_uint_eq(((uint8_t *)c->data)[64 * KiB - 1],
			  pattern(0, 64 * KiB - 1));
	chunks_put(cc, c);
}
END_TEST

/* A removed chunk file's mapping goes at once when nobody holds it, and
 * on the last release when somebody does (the holder still reads it);
 * a buffer of ours, which holds no file, stays. */
START_TEST(removed_files_unmapped)
{
	struct chunks_stats s;
	struct chunk_key k0, k1, k2;
	struct chunk *held, *again;
	bool owner = true;

	key_n(&k0, 0);
	key_n(&k1, 1);
	key_n(&k2, 2);
	chunks_put(cc, adopt(0, 8 * KiB, false));
	held = adopt(1, 8 * KiB, false);
	chunks_put(cc, load(2, 8 * KiB));

	chunks_file_removed(cc, &k0);
	ck_assert(!chunks_contains(cc, &k0));

	chunks_file_removed(cc, &k1);
	ck_assert(chunks_contains(cc, &k1));
	ck_assert_int_eq(chunks_get(cc, &k1, true, &again, &owner), 0);
	ck_assert(!owner && again == held);
	chunks_put(cc, again);
	ck_assert(chunks_contains(cc, &k1));
	ck_assert_uint_eq(((uint8_t *)held->data)[100], pattern(1, 100));
	chunks_put(cc, held);
	ck_assert(!chunks_contains(cc, &k1));

	chunks_file_removed(cc, &k2);
	ck_assert(chunks_contains(cc, &k2));
	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.bytes, 8 * KiB);
	ck_assert_uint_eq(s.evictions, 2);
}
END_TEST

/* A file removed while its chunk is being loaded (its owner may have
 * mapped it already) is let go when the owner releases the chunk. */
START_TEST(removed_while_loading)
{
	struct chunk_key k;
	struct chunk *c;
	bool owner = false;

	key_n(&k, 5);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	ck_assert(owner);
	chunks_file_removed(cc, &k);
	chunks_put(cc, adopt_loading(c, 5, 8 * KiB));
	ck_assert(!chunks_contains(cc, &k));

	/* Marked while loading, then loaded into a buffer of ours (not a
	 * mapping): it stays, and goes once the kernel had it whole. */
	key_n(&k, 6);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	ck_assert(owner);
	chunks_file_removed(cc, &k);
	ck_assert_ptr_nonnull(chunks_fill_buffer(cc, c, 100 * KiB));
	chunks_ready(cc, c, 100 * KiB);
	ck_assert(chunks_put_served(cc, c, 100 * KiB));
	ck_assert(!chunks_contains(cc, &k));
}
END_TEST

START_TEST(recently_used_survives)
{
	struct chunk_key k;
	struct chunk *c;
	bool owner;

	for (unsigned i = 0; i < 4; i++)
		chunks_put(cc, load(i, 64 * KiB));
	/* Touch 0: a new chunk evicts one of the others. */
	key_n(&k, 0);
	ck_assert_int_eq(chunks_get(cc, &k, false, &c, &owner), 0);
	ck_assert(!owner);
	chunks_put(cc, c);
	chunks_put(cc, load(4, 64 * KiB));
	ck_assert(chunks_contains(cc, &k));
	key_n(&k, 4);
	ck_assert(chunks_contains(cc, &k));
}
END_TEST

/* Many threads on few keys under a small cap: every hit sees its own
 * chunk's bytes, waits end, failures propagate, nothing leaks. */
#define HKEYS 48
#define HLEN (16 * KiB)
static uint64_t hammer_bad;

static void *hammer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (int op = 0; op < 20000; op++) {
		const unsigned n = (unsigned)rand_r(&seed) % HKEYS;
		const bool wait = rand_r(&seed) % 4 != 0;
		struct chunk_key k;
		struct chunk *c;
		bool owner;
		int rc;

		key_n(&k, n);
		rc = chunks_get(cc, &k, wait, &c, &owner);
		if (rc == -EAGAIN && !wait)
			continue;
		if (rc == -EIO)
			continue; /* someone's load failed */
		if (rc) {
			__atomic_fetch_add(&hammer_bad, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (owner) {
			uint8_t *p = chunks_fill_buffer(cc, c, HLEN);

			if (!p || rand_r(&seed) % 10 == 0) {
				chunks_fail(cc, c, -EIO);
				continue;
			}
			for (size_t i = 0; i < HLEN; i++)
				p[i] = pattern(n, i);
			chunks_ready(cc, c, HLEN);
		}
		if (c->len != HLEN ||
		    ((uint8_t *)c->data)[0] != pattern(n, 0) ||
		    ((uint8_t *)c->data)[HLEN - 1] != pattern(n, HLEN - 1) ||
		    memcmp(c->key.b, k.b, 16))
			__atomic_fetch_add(&hammer_bad, 1, __ATOMIC_RELAXED);
		chunks_put(cc, c);
	}
	return NULL;
}

/* A chunk the kernel has had whole is let go once nobody holds it; one
 * read in part, or empty, stays. */
START_TEST(read_whole_let_go)
{
	struct chunks_stats s;
	struct chunk_key k;
	struct chunk *c, *c2;
	bool owner;

	c = load(1, 100 * KiB);
	chunks_put(cc, c);
	key_n(&k, 1);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	chunks_put_served(cc, c, 60 * KiB);
	ck_assert(chunks_contains(cc, &k));
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	chunks_put_served(cc, c, 40 * KiB);
	ck_assert(!chunks_contains(cc, &k));

	/* Served whole while its loader still holds it: it goes when the
	 * loader lets go, though the loader served nothing. */
	c = load(2, 100 * KiB);
	key_n(&k, 2);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c2, &owner), 0);
	ck_assert(!owner);
	chunks_put_served(cc, c2, 100 * KiB);
	ck_assert(chunks_contains(cc, &k));
	chunks_put(cc, c);
	ck_assert(!chunks_contains(cc, &k));

	c = load(3, 100 * KiB);
	chunks_put_served(cc, c, 100 * KiB - 1);
	key_n(&k, 3);
	ck_assert(chunks_contains(cc, &k));
	c = load(4, 0);
	chunks_put_served(cc, c, 0);
	key_n(&k, 4);
	ck_assert(chunks_contains(cc, &k));

	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.read_whole, 2);
	ck_assert_uint_eq(s.evictions, 0);
}
END_TEST

/* A buffer let go is the next same-class load's, and what the chunks hold
 * and what is kept stay under the cap together. */
START_TEST(buffers_reused_within_cap)
{
	struct chunks_stats s;
	struct chunk_key k;
	struct chunk *c;
	bool owner;
	void *first;

	c = load(1, 100 * KiB);
	first = c->data;
	chunks_put_served(cc, c, 100 * KiB);
	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.bytes, 0);
	ck_assert_uint_eq(s.pool_bytes, 112 * KiB); /* 100 KiB's class */
	ck_assert_uint_eq(s.reused, 0);

	/* 110 KiB is in the same class: the same memory, loaded anew. */
	c = load(2, 110 * KiB);
	ck_assert_ptr_eq(c->data, first);
	chunks_put(cc, c);
	key_n(&k, 2);
	ck_assert_int_eq(chunks_get(cc, &k, true, &c, &owner), 0);
	for (size_t i = 0; i < 110 * KiB; i++)
		ck_assert_uint_eq(((uint8_t *)c->data)[i], pattern(2, i));
	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.reused, 1);
	ck_assert_uint_eq(s.pool_bytes, 0);
	ck_assert_uint_eq(s.bytes, 112 * KiB);
	chunks_put_served(cc, c, 110 * KiB);

	/* Another class: fresh memory, and the kept buffer goes, since both
	 * would not fit the 256 KiB cap. */
	c = load(3, 200 * KiB);
	ck_assert_ptr_ne(c->data, first);
	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.reused, 1);
	ck_assert_uint_eq(s.bytes, 224 * KiB);
	ck_assert_uint_eq(s.pool_bytes, 0);
	chunks_put(cc, c);

	/* Evicted to make room, its buffer is the next load's. */
	c = load(4, 200 * KiB);
	chunks_get_stats(cc, &s);
	ck_assert_uint_eq(s.evictions, 1);
	ck_assert_uint_eq(s.reused, 2);
	ck_assert_uint_le(s.bytes + s.pool_bytes, 256 * KiB);
	chunks_put(cc, c);
}
END_TEST

START_TEST(many_threads)
{
	struct chunks_stats s;
	pthread_t th[8];

	chunks_free(cc);
	ck_assert_int_eq(chunks_new(12 * HLEN, &cc), 0);
	for (uintptr_t i = 0; i < 8; i++)
		ck_assert_int_eq(
		    pthread_create(&th[i], NULL, hammer, (void *)(i + 1)), 0);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_eq(hammer_bad, 0);
	chunks_get_stats(cc, &s);
	ck_assert_uint_le(s.bytes, 12 * HLEN);
	ck_assert_uint_gt(s.hits, 0);
	ck_assert_uint_gt(s.evictions, 0);
	ck_assert_uint_gt(s.misses, HKEYS);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("chunks");
	TCase *tc = tcase_create("chunks");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hit_miss_owner);
	tcase_add_test(tc, eagain_without_wait);
	tcase_add_test(tc, waiters_ready);
	tcase_add_test(tc, waiters_fail);
	tcase_add_test(tc, cap_evicts_unreferenced_only);
	tcase_add_test(tc, recently_used_survives);
	tcase_add_test(tc, adopted_mappings);
	tcase_add_test(tc, removed_files_unmapped);
	tcase_add_test(tc, removed_while_loading);
	tcase_add_test(tc, read_whole_let_go);
	tcase_add_test(tc, forget_bad_bytes);
	tcase_add_test(tc, buffers_reused_within_cap);
	tcase_add_test(tc, many_threads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
