/*
 * The memory chunk cache: see chunks.h for the contract.
 *
 * Entries live in a hash table of buckets, each with its own mutex and
 * condition variable; a lookup, a reference and a wakeup touch only the
 * key's bucket.  Eviction order is CLOCK (second chance), an approximation
 * of LRU that lets a hit mark its entry with one relaxed store instead of
 * moving it on a shared list, which would take a global lock on every
 * read.  The clock ring and its hand are under evict_mu, taken only when
 * an entry is added (a miss), evicted or dropped after a failed load.
 *
 * Lock order: evict_mu, then a bucket's mu.
 *
 * An entry is freed by whoever drops it last: the evictor (ready, nobody
 * holds it), or the last holder of a failed entry.  A failed entry has left
 * its bucket and the ring before its holders see it fail.
 */
#include "config.h"

#include "chunks.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define STAT_ADD(field, n) __atomic_fetch_add(&(field), (n), __ATOMIC_RELAXED)
#define STAT_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* Buckets: one per 64 KiB of cap, so a full cache keeps chains short. */
#define BUCKET_BYTES (64 * 1024)
#define MIN_BUCKETS 256
#define MAX_BUCKETS 65536

enum state { LOADING, READY, FAILED };

#define POOL_CLASSES 64

struct centry {
	struct chunk pub; /* first: chunks.h hands out &pub */
	struct centry *hnext;
	struct centry *cprev, *cnext; /* clock ring, under evict_mu */
	size_t cap;		      /* bytes allocated at pub.data */
	size_t mapped;		      /* bytes mmap'd there; 0: malloc'd */
	size_t served;		      /* bytes replied from it; under mu */
	void *file_map;		      /* chunks_adopt: the mapping's start */
	unsigned refs;		      /* under the bucket's mu */
	enum state state;	      /* under the bucket's mu */
	int err;		      /* a failed load's -errno */
	bool in_ring;		      /* under evict_mu */
	bool unmap_when_let_go;	      /* its file was removed; under mu */
	bool orphan; /* forgotten while held: out of the table and the ring,
		      * freed by its last holder; under mu */
	bool used;		      /* CLOCK bit; atomic */
};

struct bucket {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct centry *head;
} __attribute__((aligned(64)));

struct chunk_cache {
	struct bucket *b;
	size_t nb;
	uint64_t cap;

	pthread_mutex_t evict_mu;
	struct centry *hand; /* clock ring; NULL when empty */
	size_t nring;

	uint64_t bytes; /* allocated chunk buffers; atomic */
	uint64_t hits, misses, waits, evictions; /* atomic */
	uint64_t reused, read_whole;		 /* atomic */

	/* Buffers let go, by size class, linked through their first bytes. */
	pthread_mutex_t pool_mu;
	void *pool[POOL_CLASSES];
	uint64_t pool_bytes; /* under pool_mu; beside bytes, within cap */
};

static struct centry *entry_of(struct chunk *c)
{
	return (struct centry *)c;
}

static struct bucket *bucket_of(struct chunk_cache *cc,
				const struct chunk_key *key)
{
	uint64_t h;

	/* Keys are hashes already: any 8 bytes are uniform. */
	memcpy(&h, key->b + 8, 8);
	return &cc->b[h & (cc->nb - 1)];
}

/* Under the bucket's mu. */
static struct centry *bucket_find(struct bucket *b, const struct chunk_key *key)
{
	struct centry *e = b->head;

	while (e && memcmp(e->pub.key.b, key->b, 16))
		e = e->hnext;
	return e;
}

/* Under the bucket's mu. */
static void bucket_unlink(struct bucket *b, struct centry *e)
{
	struct centry **pp = &b->head;

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
}

/*
 * Chunk buffers of MAP_MIN bytes or more are mapped with MAP_POPULATE and,
 * once let go, kept for the next load of their size class while the cap
 * has room for them (the pool): fresh memory costs a fault and a page
 * clear per 4 KiB, and on a virtual machine whose host takes freed pages
 * back, a trap as well.  Faulting a fresh buffer in page by page cost more
 * than the load itself (4-5x slower loads from the store); mapping fresh
 * ones was 12% of the mount's CPU in a cold small-file epoch (perf), and
 * with reuse (and chunks let go once read whole) the mount used 8% less.
 */
#define MAP_MIN (64u << 10)

/* Size classes (POOL_CLASSES of them) a quarter of a power of two apart,
 * from MAP_MIN: a buffer is at most 25% longer than asked. */
static unsigned size_class(size_t n, size_t *class_bytes)
{
	unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)n);
	size_t step = (size_t)1 << (lg - 2);
	size_t q = (n + step - 1) / step;

	if (q == 8) {
		lg++;
		step <<= 1;
		q = 4;
	}
	*class_bytes = q * step;
	return (lg - 16) * 4 + (unsigned)(q - 4);
}

static size_t class_bytes(unsigned k)
{
	return ((size_t)4 + k % 4) << (k / 4 + 14);
}

/* Under pool_mu.  A kept buffer of class k, or NULL. */
static void *pool_pop(struct chunk_cache *cc, unsigned k)
{
	void *p = cc->pool[k];

	if (p) {
		memcpy(&cc->pool[k], p, sizeof(void *));
		cc->pool_bytes -= class_bytes(k);
	}
	return p;
}

/* Unmaps kept buffers until the pool and the chunks fit the cap. */
static void pool_trim(struct chunk_cache *cc)
{
	unsigned k = 0;

	pthread_mutex_lock(&cc->pool_mu);
	while (cc->pool_bytes &&
	       __atomic_load_n(&cc->bytes, __ATOMIC_RELAXED) + cc->pool_bytes >
		   cc->cap) {
		void *p;

		while (!cc->pool[k])
			k++;
		p = pool_pop(cc, k);
		munmap(p, class_bytes(k));
	}
	pthread_mutex_unlock(&cc->pool_mu);
}

/* A buffer of at least cap bytes: *mapped is its length (its class's), or
 * 0 for a malloc'd one. */
static void *buf_alloc(struct chunk_cache *cc, size_t cap, size_t *mapped)
{
	size_t len;
	unsigned k;
	void *p = NULL;

	*mapped = 0;
	if (cap < MAP_MIN)
		return malloc(cap ? cap : 1);
	k = size_class(cap, &len);
	if (k < POOL_CLASSES) {
		pthread_mutex_lock(&cc->pool_mu);
		p = pool_pop(cc, k);
		pthread_mutex_unlock(&cc->pool_mu);
	}
	if (p) {
		STAT_ADD(cc->reused, 1);
	} else {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
	}
	*mapped = len;
	return p;
}

/* Keeps a mapped buffer if the cap has room for it beside the chunks. */
static void buf_free(struct chunk_cache *cc, void *p, size_t mapped)
{
	size_t len;
	unsigned k;
	bool kept = false;

	if (!mapped) {
		free(p);
		return;
	}
	k = size_class(mapped, &len);
	if (k < POOL_CLASSES && len == mapped) {
		pthread_mutex_lock(&cc->pool_mu);
		if (__atomic_load_n(&cc->bytes, __ATOMIC_RELAXED) +
			cc->pool_bytes + len <=
		    cc->cap) {
			memcpy(p, &cc->pool[k], sizeof(void *));
			cc->pool[k] = p;
			cc->pool_bytes += len;
			kept = true;
		}
		pthread_mutex_unlock(&cc->pool_mu);
	}
	if (!kept)
		munmap(p, mapped);
}

/* Frees the entry's buffer, whether allocated here or adopted. */
static void entry_drop_buf(struct chunk_cache *cc, struct centry *e)
{
	if (e->file_map)
		munmap(e->file_map, e->mapped);
	else
		buf_free(cc, e->pub.data, e->mapped);
	e->file_map = NULL;
	e->pub.data = NULL;
	e->mapped = 0;
}

static void entry_free(struct chunk_cache *cc, struct centry *e)
{
	if (e->cap)
		__atomic_fetch_sub(&cc->bytes, e->cap, __ATOMIC_RELAXED);
	entry_drop_buf(cc, e);
	free(e);
}

/* Under evict_mu. */
static void ring_add(struct chunk_cache *cc, struct centry *e)
{
	if (!cc->hand) {
		e->cprev = e->cnext = e;
		cc->hand = e;
	} else {
		/* Just behind the hand: the last to be considered. */
		e->cnext = cc->hand;
		e->cprev = cc->hand->cprev;
		e->cprev->cnext = e;
		cc->hand->cprev = e;
	}
	e->in_ring = true;
	cc->nring++;
}

/* Under evict_mu. */
static void ring_remove(struct chunk_cache *cc, struct centry *e)
{
	if (!e->in_ring)
		return;
	if (e->cnext == e) {
		cc->hand = NULL;
	} else {
		e->cprev->cnext = e->cnext;
		e->cnext->cprev = e->cprev;
		if (cc->hand == e)
			cc->hand = e->cnext;
	}
	e->in_ring = false;
	cc->nring--;
}

/*
 * Evicts unreferenced ready entries until `need` more bytes fit under the
 * cap, or no entry can go (then the cache runs over its cap until chunks
 * are released: a reader is never refused for lack of room).  Two turns of
 * the clock are enough: the first clears every used bit.
 */
static void make_room(struct chunk_cache *cc, size_t need)
{
	struct centry *gone_list = NULL;
	size_t steps;

	pthread_mutex_lock(&cc->evict_mu);
	steps = 2 * cc->nring + 1;
	while (cc->hand && steps-- &&
	       __atomic_load_n(&cc->bytes, __ATOMIC_RELAXED) + need > cc->cap) {
		struct centry *e = cc->hand;
		struct bucket *b;
		bool gone = false;

		cc->hand = e->cnext;
		if (__atomic_exchange_n(&e->used, false, __ATOMIC_RELAXED))
			continue;
		b = bucket_of(cc, &e->pub.key);
		pthread_mutex_lock(&b->mu);
		if (e->refs == 0 && e->state == READY) {
			bucket_unlink(b, e);
			gone = true;
		}
		pthread_mutex_unlock(&b->mu);
		if (!gone)
			continue;
		ring_remove(cc, e);
		/* Counted now, freed after the lock: free may munmap. */
		__atomic_fetch_sub(&cc->bytes, e->cap, __ATOMIC_RELAXED);
		e->cap = 0;
		e->hnext = gone_list;
		gone_list = e;
		STAT_ADD(cc->evictions, 1);
	}
	pthread_mutex_unlock(&cc->evict_mu);
	while (gone_list) {
		struct centry *e = gone_list;

		gone_list = e->hnext;
		entry_free(cc, e);
	}
}

int chunks_new(uint64_t cap_bytes, struct chunk_cache **out)
{
	struct chunk_cache *cc = calloc(1, sizeof(*cc));
	size_t nb = MIN_BUCKETS;

	if (!cc)
		return -ENOMEM;
	while (nb < MAX_BUCKETS && nb * BUCKET_BYTES < cap_bytes)
		nb *= 2;
	if (posix_memalign((void **)&cc->b, 64, nb * sizeof(*cc->b))) {
		free(cc);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nb; i++) {
		pthread_mutex_init(&cc->b[i].mu, NULL);
		pthread_cond_init(&cc->b[i].cond, NULL);
		cc->b[i].head = NULL;
	}
	cc->nb = nb;
	cc->cap = cap_bytes;
	pthread_mutex_init(&cc->evict_mu, NULL);
	pthread_mutex_init(&cc->pool_mu, NULL);
	*out = cc;
	return 0;
}

void chunks_free(struct chunk_cache *cc)
{
	if (!cc)
		return;
	for (size_t i = 0; i < cc->nb; i++) {
		struct centry *e = cc->b[i].head, *next;

		for (; e; e = next) {
			next = e->hnext;
			/* Nobody may hold a chunk when the cache goes. */
			assert(e->refs == 0);
			entry_free(cc, e);
		}
		pthread_mutex_destroy(&cc->b[i].mu);
		pthread_cond_destroy(&cc->b[i].cond);
	}
	pthread_mutex_destroy(&cc->evict_mu);
	for (unsigned k = 0; k < POOL_CLASSES; k++) {
		void *p;

		while ((p = pool_pop(cc, k)))
			munmap(p, class_bytes(k));
	}
	pthread_mutex_destroy(&cc->pool_mu);
	free(cc->b);
	free(cc);
}

int chunks_get(struct chunk_cache *cc, const struct chunk_key *key, bool wait,
	       struct chunk **out, bool *owner)
{
	struct bucket *b = bucket_of(cc, key);
	struct centry *e;
	int rc;

	pthread_mutex_lock(&b->mu);
	e = bucket_find(b, key);
	if (e && e->state == READY) {
		e->refs++;
		pthread_mutex_unlock(&b->mu);
		if (!__atomic_load_n(&e->used, __ATOMIC_RELAXED))
			__atomic_store_n(&e->used, true, __ATOMIC_RELAXED);
		STAT_ADD(cc->hits, 1);
		*out = &e->pub;
		*owner = false;
		return 0;
	}
	if (e) {
		assert(e->state == LOADING);
		if (!wait) {
			pthread_mutex_unlock(&b->mu);
			return -EAGAIN;
		}
		e->refs++;
		STAT_ADD(cc->waits, 1);
		while (e->state == LOADING)
			pthread_cond_wait(&b->cond, &b->mu);
		if (e->state == READY) {
			pthread_mutex_unlock(&b->mu);
			*out = &e->pub;
			*owner = false;
			return 0;
		}
		rc = e->err;
		if (--e->refs) {
			pthread_mutex_unlock(&b->mu);
			return rc;
		}
		pthread_mutex_unlock(&b->mu);
		entry_free(cc, e);
		return rc;
	}

	/* A miss: this caller owns the load. */
	e = calloc(1, sizeof(*e));
	if (!e) {
		pthread_mutex_unlock(&b->mu);
		return -ENOMEM;
	}
	e->pub.key = *key;
	e->state = LOADING;
	e->refs = 1;
	e->hnext = b->head;
	b->head = e;
	pthread_mutex_unlock(&b->mu);
	STAT_ADD(cc->misses, 1);

	/* Loading and held: no evictor can take it before it is ringed. */
	pthread_mutex_lock(&cc->evict_mu);
	ring_add(cc, e);
	pthread_mutex_unlock(&cc->evict_mu);
	*out = &e->pub;
	*owner = true;
	return 0;
}

void *chunks_fill_buffer(struct chunk_cache *cc, struct chunk *c, size_t cap)
{
	struct centry *e = entry_of(c);
	size_t mapped;
	void *p;

	/* Only the owner changes a loading entry's state: no lock needed to
	 * look at it here (refs, which waiters change, is not looked at). */
	assert(e->state == LOADING);
	if (e->cap >= cap && e->pub.data && !e->file_map)
		return e->pub.data;
	make_room(cc, cap > e->cap ? cap - e->cap : 0);
	/* The owner loads the whole chunk: nothing to keep from before.  At
	 * least one byte, so that an empty chunk has a buffer too. */
	p = buf_alloc(cc, cap, &mapped);
	if (!p)
		return NULL;
	entry_drop_buf(cc, e);
	if (mapped)
		cap = mapped;
	__atomic_fetch_add(&cc->bytes, cap - e->cap, __ATOMIC_RELAXED);
	e->pub.data = p;
	e->cap = cap;
	e->mapped = mapped;
	pool_trim(cc);
	return p;
}

void chunks_adopt(struct chunk_cache *cc, struct chunk *c, void *map,
		  size_t map_len, void *data)
{
	struct centry *e = entry_of(c);

	assert(e->state == LOADING);
	assert((char *)data >= (char *)map &&
	       (char *)data <= (char *)map + map_len);
	if (map_len > e->cap)
		make_room(cc, map_len - e->cap);
	entry_drop_buf(cc, e);
	/* Counted like a buffer of ours, so that the cap bounds mappings
	 * too, though the kernel may drop their page-cache pages. */
	__atomic_fetch_add(&cc->bytes, map_len - e->cap, __ATOMIC_RELAXED);
	e->cap = map_len;
	e->mapped = map_len;
	e->file_map = map;
	e->pub.data = data;
	pool_trim(cc);
}

void chunks_ready(struct chunk_cache *cc, struct chunk *c, size_t len)
{
	struct centry *e = entry_of(c);
	struct bucket *b = bucket_of(cc, &c->key);

	assert(len <= e->cap);
	pthread_mutex_lock(&b->mu);
	assert(e->state == LOADING);
	e->pub.len = len;
	e->state = READY;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

void chunks_fail(struct chunk_cache *cc, struct chunk *c, int err)
{
	struct centry *e = entry_of(c);
	struct bucket *b = bucket_of(cc, &c->key);
	bool last;

	assert(err < 0);
	pthread_mutex_lock(&cc->evict_mu);
	ring_remove(cc, e);
	pthread_mutex_unlock(&cc->evict_mu);

	pthread_mutex_lock(&b->mu);
	assert(e->state == LOADING);
	e->state = FAILED;
	e->err = err;
	bucket_unlink(b, e);
	last = --e->refs == 0;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
	if (last)
		entry_free(cc, e);
}

/*
 * Drops the entry found for key if judge (called under evict_mu and the
 * bucket's mu) says so, counting it in *counter.  One still held
 * (chunks_forget's) leaves the table now and is freed by its last
 * holder.  Callers that saw the entry before find it again by key, under
 * the locks in their order: it may be gone, or a new load of the key, so
 * judge looks afresh.
 */
static void drop_by_key(struct chunk_cache *cc, const struct chunk_key *key,
			bool (*judge)(struct centry *e, bool arg), bool arg,
			uint64_t *counter)
{
	struct bucket *b = bucket_of(cc, key);
	struct centry *e;
	bool gone = false;

	pthread_mutex_lock(&cc->evict_mu);
	pthread_mutex_lock(&b->mu);
	e = bucket_find(b, key);
	if (e && judge(e, arg)) {
		bucket_unlink(b, e);
		ring_remove(cc, e);
		/* Held (chunks_forget's only): its last holder frees it. */
		gone = !e->refs;
		e->orphan = !gone;
	}
	pthread_mutex_unlock(&b->mu);
	pthread_mutex_unlock(&cc->evict_mu);
	if (gone) {
		STAT_ADD(*counter, 1);
		entry_free(cc, e);
	}
}

/*
 * Whether to drop an entry whose file was removed: one that maps a file
 * and nobody holds; a held one is marked, and dropped by its last
 * chunks_put.  Only a mapping is dropped: a buffer of ours holds no disk
 * blocks.  only_marked: drop it only if it is still the entry that was
 * marked (not a new load of the same key, which maps a new file).
 */
static bool file_gone(struct centry *e, bool only_marked)
{
	if (e->state == LOADING && !only_marked) {
		/* Its owner may have mapped the file before it was removed:
		 * the owner's chunks_put looks again. */
		e->unmap_when_let_go = true;
	} else if (e->state == READY && e->file_map &&
		   (!only_marked || e->unmap_when_let_go)) {
		if (!e->refs)
			return true;
		e->unmap_when_let_go = true;
	}
	return false;
}

void chunks_file_removed(void *cache, const struct chunk_key *key)
{
	struct chunk_cache *cc = cache;

	drop_by_key(cc, key, file_gone, false, &cc->evictions);
}

/* Whether nobody holds e and the kernel has had all of a buffer of ours:
 * the kernel keeps what it was sent in the file's page cache (every open
 * keeps it), so the buffer is worth more to the next load than to a
 * reader. */
static bool read_whole(struct centry *e, bool unused)
{
	(void)unused;
	return e->state == READY && !e->refs && !e->file_map && e->pub.len &&
	       e->served >= e->pub.len;
}

void chunks_hold(struct chunk_cache *cc, struct chunk *c)
{
	struct centry *e = entry_of(c);
	struct bucket *b = bucket_of(cc, &c->key);

	pthread_mutex_lock(&b->mu);
	assert(e->refs > 0 && e->state == READY);
	e->refs++;
	pthread_mutex_unlock(&b->mu);
}

void chunks_put(struct chunk_cache *cc, struct chunk *c)
{
	(void)chunks_put_served(cc, c, 0);
}

bool chunks_put_served(struct chunk_cache *cc, struct chunk *c, size_t served)
{
	struct centry *e = entry_of(c);
	struct bucket *b = bucket_of(cc, &c->key);
	struct chunk_key key;
	bool over, unmap, drop, whole;

	pthread_mutex_lock(&b->mu);
	assert(e->refs > 0 && e->state == READY);
	e->refs--;
	if (e->orphan) {
		const bool last = !e->refs;

		pthread_mutex_unlock(&b->mu);
		if (last)
			entry_free(cc, e);
		return false;
	}
	e->served += served;
	whole = served && e->served >= e->pub.len;
	/* Marked while loading, it may hold a buffer of ours instead. */
	unmap = !e->refs && e->unmap_when_let_go && e->file_map;
	/* Also when a loader lets go after a reader had it whole. */
	drop = read_whole(e, false);
	if (unmap || drop)
		key = e->pub.key;
	pthread_mutex_unlock(&b->mu);
	/* Under the locks in their order, by key: e may be gone already. */
	if (unmap)
		drop_by_key(cc, &key, file_gone, true, &cc->evictions);
	else if (drop)
		drop_by_key(cc, &key, read_whole, false, &cc->read_whole);
	/* Chunks held past the cap are evicted once they are let go.  Only
	 * then is the global evict_mu taken here: a cap too small for the
	 * chunks that readers hold at once makes every release pay it. */
	over = __atomic_load_n(&cc->bytes, __ATOMIC_RELAXED) > cc->cap;
	if (over)
		make_room(cc, 0);
	return whole;
}

/* Whether an entry with bad bytes goes: any that is ready. */
static bool bad_bytes(struct centry *e, bool unused)
{
	(void)unused;
	return e->state == READY;
}

void chunks_forget(struct chunk_cache *cc, const struct chunk_key *key)
{
	drop_by_key(cc, key, bad_bytes, false, &cc->evictions);
}

bool chunks_contains(struct chunk_cache *cc, const struct chunk_key *key)
{
	struct bucket *b = bucket_of(cc, key);
	struct centry *e;
	bool ready;

	pthread_mutex_lock(&b->mu);
	e = bucket_find(b, key);
	ready = e && e->state == READY;
	/* Asked because it will be read: it counts as used. */
	if (ready && !__atomic_load_n(&e->used, __ATOMIC_RELAXED))
		__atomic_store_n(&e->used, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&b->mu);
	return ready;
}

void chunks_get_stats(struct chunk_cache *cc, struct chunks_stats *out)
{
	out->hits = STAT_GET(cc->hits);
	out->misses = STAT_GET(cc->misses);
	out->waits = STAT_GET(cc->waits);
	out->bytes = STAT_GET(cc->bytes);
	out->cap = cc->cap;
	out->evictions = STAT_GET(cc->evictions);
	out->reused = STAT_GET(cc->reused);
	out->read_whole = STAT_GET(cc->read_whole);
	pthread_mutex_lock(&cc->pool_mu);
	out->pool_bytes = cc->pool_bytes;
	pthread_mutex_unlock(&cc->pool_mu);
}
