/*
 * The read path and read-ahead: see prefetch.h for the contract.
 *
 * What a read costs when its chunks are in the memory cache: per chunk
 * touched, one key hash and one chunks_get/chunks_put pair (a per-bucket
 * lock each); per read, the file's own mutex once (when it has hints
 * pending or read-ahead is on) and a few relaxed
 * atomic counter increments.  No allocation, no global lock.  The bytes are
 * not copied here: the caller replies with iovecs that point into chunk
 * memory, so the only copy is the kernel's, into the reader's pages.  A
 * chunk loaded from the origin is written once, by the fetch engine, into
 * the chunk's own buffer; one loaded from the store is decompressed (or
 * read) straight into it.  The read-ahead queue's lock is taken only when a
 * sequential reader enters a new chunk.
 */
#include "config.h"

#include "prefetch.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checksum.h"

#define QUEUE_CAP 1024
/* Hinted chunks queued at most: 24 bytes each, so 384 KiB whatever the
 * number of objects hinted; more are dropped and counted. */
#define HINT_CAP 16384
/* A hint this many hints behind the newest one a reader has reached is
 * stale: the reader has passed it (or will fetch it itself sooner).  The
 * slack covers readers that run a few batches out of order. */
#define HINT_SLACK 256
/* Hint spans (see struct pf_file) remembered at most, over all files:
 * 24 bytes each, so 6 MiB live (arrays shrink as they drain).  A span no
 * read finishes (a file read only in part, or from the page cache) goes
 * when its file is touched again or its hint is found stale; a bound
 * keeps the rest in check. */
#define SPANS_MAX (1u << 18)

/* Pool jobs under way beyond the fetch engine's concurrency: loads also
 * spend time in the store and in the memory cache, off the wire. */
#define POOL_SLACK 8
/* Pool threads beyond one per core: for loads from the store that wait
 * on the disk. */
#define POOL_SPARE 2
/* A sequential reader's window is at most this many times the fetch
 * engine's concurrency: enough that its loads wait for the limit (which
 * tells the controller that more would help), no more. */
#define RA_PER_CONC 2
/* The window while a file's chunks come from the chunk store: loads then
 * cost CPU, not waiting, and a deeper window only has the pool's loads
 * compete with the reader for the cores and take fresh buffers (16 MiB
 * against 256 MiB: 10% faster over raw shards, 25% over compressed ones,
 * after a remount on 2 cores). */
#define RA_STORE_BYTES (16ull << 20)
/* Objects of more chunks than this (64 TiB of 4 MiB chunks) keep no bits
 * of which chunks the kernel had whole. */
#define WHOLE_MAX (1ull << 24)

#define STAT_ADD(field, n) __atomic_fetch_add(&(field), (n), __ATOMIC_RELAXED)
#define STAT_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* A hint naming bytes [off, end) of a file, seq in hint order. */
struct hint_span {
	uint64_t seq, off, end;
};

struct pf_file {
	char *path;
	char *version;
	uint64_t size;
	int64_t mtime;
	uint64_t nchunks;
	unsigned refs;	    /* the opener + queued jobs; atomic */
	bool closed;	    /* atomic: read-ahead for it is pointless */
	pthread_mutex_t mu; /* the sequential-read state below */
	uint64_t next_off;  /* where a sequential reader reads next */
	uint64_t ra_next;   /* first chunk not yet queued */
	uint32_t window;    /* read-ahead window in chunks; 0: random */
	uint64_t spilled;   /* chunks of this pass's window handed to the
			     * next file (pf_read.spill) */
	bool from_store;    /* atomic: its last load came from the store */
	uint64_t hint_seq;  /* atomic: the last hint naming it, 0: never */
	/* Hints naming it that no read has finished, oldest first (under
	 * mu): a read reaches the oldest one whose bytes it touches, so a
	 * file hinted many times (a record shard) is not taken as read up to
	 * its newest hint.  Freed when empty. */
	struct hint_span *spans;
	/* Bits: chunks the kernel has had whole (its page cache of the file
	 * holds them), so a hint for one loads nothing; atomic. */
	uint64_t *whole, whole_inline;
	uint32_t span_head, span_len, span_cap;
	uint32_t pending;     /* atomic: span_len - span_head, read unlocked */
	uint64_t *spans_live; /* atomic: the mount's count of spans */
	/* The origin's checksum of the object (algo CHECKSUM_NONE: none,
	 * and nothing below is used) and its check: see "Origin
	 * checksums". */
	struct checksum want;
	struct sums *sums;
};

/* The check of one object against its origin's checksum (sums_*). */
struct sums {
	uint64_t *got;	 /* bits: chunks loaded in this file's life */
	uint64_t *known; /* bits: crc[i] is chunk i's CRC32C */
	uint32_t *crc;	 /* each chunk's CRC32C; atomic */
	uint64_t ngot;	 /* atomic: bits set in got */
	bool fetched;	 /* atomic: a chunk came from the origin */
	/* atomic: 0 unchecked; SUMS_GOOD: matched, and crc[] holds the
	 * good chunks' CRCs, against which a chunk fetched again is
	 * checked; SUMS_BAD: the origin's own bytes did not match either:
	 * reads fail */
	int verdict;
	/* Read side: a chunk's bytes on their way to the store and the
	 * memory cache; write side: the object found bad, and its chunks
	 * dropped (sums_quarantine). */
	pthread_rwlock_t gate;
	bool bypass; /* atomic: found bad: loads go to the origin itself */
	/* MD5 and SHA-256, which do not combine: the object's digest fed
	 * with its chunks in order as they come, [0, next) so far, so that
	 * the check reads back only the chunks that came ahead of their
	 * turn; broken: a chunk could not be read back (the check reads
	 * all).  Under mu. */
	pthread_mutex_t mu;
	struct checksum_ctx stream; /* algo CHECKSUM_NONE: not begun */
	uint64_t next;
	bool broken;
	uint64_t inline_bits[2];
	uint32_t inline_crc;
};
enum { SUMS_GOOD = 1, SUMS_BAD = 2 };

/* A chunk published before it is stored: its store write, which a pool
 * thread makes (store_later).  Holds a reference to the chunk, so that
 * its bytes stay, and to its file. */
struct write {
	struct chunk *c;
	struct pf_file *f;
	uint64_t idx;
	struct write *next;
};

struct job {
	struct pf_file *f;
	uint64_t idx;
	uint64_t seq; /* hints: its place in hint order */
};

struct queue {
	struct job *jobs;
	unsigned head, len, cap;
};

struct prefetch {
	struct prefetch_config cfg;
	uint32_t window_cap; /* chunks */
	/* atomic: which files the kernel reads from their cache files
	 * (PF_KERNEL_*: prefetch_kernel_reads_cached); hints skip them */
	unsigned kernel_reads_cached;
	struct source *src;
	struct store *st;
	struct chunk_cache *cc;

	pthread_mutex_t qmu;
	pthread_cond_t qcond;
	struct queue q[PF_NCLASS];
	bool stopping;	    /* under qmu; atomic for load_end */
	pthread_t *threads; /* cfg.threads places, nthreads started */
	unsigned nthreads;  /* under qmu; atomic for readers */
	unsigned idle;	    /* under qmu: threads waiting for a job */
	unsigned ncpu;
	/* Pool loads under way (under qmu, atomic for readers): each holds
	 * its chunk's bytes in `inflight`; those at the origin hold no
	 * thread, and land in `landed` for a pool thread to finish. */
	unsigned loads;
	struct load *landed, *landed_tail;
	/* Store writes of chunks published already, oldest first, their
	 * bytes (bounded: past a quarter of cfg.inflight_bytes a loader
	 * writes its own), and the threads writing (one, or all but one at
	 * most, so that a load that lands finds a thread while writes wait
	 * on the disk); under qmu.  The pool ends only once they are done. */
	struct write *writes, *writes_tail;
	uint64_t write_bytes;
	unsigned nwrites, writing;
	/* Writes under way (under qmu), and threads waiting in writes_flush
	 * for one of them to end (wcond). */
	struct write *running;
	unsigned flushers;
	pthread_cond_t wcond;

	uint64_t hint_seq;   /* atomic: hints queued so far */
	uint64_t read_seq;   /* atomic: newest hint a reader has reached */
	uint64_t spans_live; /* atomic: hint spans remembered, all files */
	uint64_t inflight;   /* under qmu, atomic for readers: bytes the pool
			      * is loading now */
	/* Hints for chunks the kernel had whole, and reads of such chunks
	 * (it lost them since): how far its page cache can be trusted to
	 * hold what it was sent.  Halved now and then; atomic. */
	uint64_t kernel_hinted, kernel_lost;

	struct prefetch_stats stats; /* atomic fields */
};

static void file_ref(struct pf_file *f)
{
	__atomic_fetch_add(&f->refs, 1, __ATOMIC_RELAXED);
}

static void file_unref(struct pf_file *f)
{
	if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_destroy(&f->mu);
	__atomic_sub_fetch(f->spans_live, f->span_len - f->span_head,
			   __ATOMIC_RELAXED);
	free(f->spans);
	if (f->whole != &f->whole_inline)
		free(f->whole); /* or NULL */
	if (f->sums) {
		pthread_mutex_destroy(&f->sums->mu);
		pthread_rwlock_destroy(&f->sums->gate);
		checksum_abort(&f->sums->stream);
		free(f->sums);
	}
	free(f->path);
	free(f->version);
	free(f);
}

/* Under f->mu: moves the pending spans to the front of the array. */
static void spans_compact(struct pf_file *f)
{
	f->span_len -= f->span_head;
	memmove(f->spans, f->spans + f->span_head,
		f->span_len * sizeof(*f->spans));
	f->span_head = 0;
}

/* Under f->mu: drops the spans before i; frees the array once empty. */
static void spans_drop_before(struct pf_file *f, uint32_t i)
{
	__atomic_sub_fetch(f->spans_live, i - f->span_head, __ATOMIC_RELAXED);
	f->span_head = i;
	if (f->span_head == f->span_len) {
		free(f->spans);
		f->spans = NULL;
		f->span_head = f->span_len = f->span_cap = 0;
	} else if (f->span_cap > 16 &&
		   (f->span_len - f->span_head) * 4 < f->span_cap) {
		/* Mostly drained: give back half, so that a shard hinted
		 * thousands of times does not keep its peak. */
		struct hint_span *n;

		spans_compact(f);
		n = realloc(f->spans, f->span_cap / 2 * sizeof(*n));
		if (n) {
			f->spans = n;
			f->span_cap /= 2;
		}
	}
	__atomic_store_n(&f->pending, f->span_len - f->span_head,
			 __ATOMIC_RELAXED);
}

/* Under f->mu: drops the spans readers have passed by more than the
 * slack (rs: the newest hint reached). */
static void spans_trim(struct pf_file *f, uint64_t rs)
{
	uint32_t i = f->span_head;

	while (i < f->span_len && f->spans[i].seq + HINT_SLACK < rs)
		i++;
	if (i != f->span_head)
		spans_drop_before(f, i);
}

/*
 * Numbers a hint over bytes [off, end) of f and remembers it; the number
 * is taken under f->mu so that the spans stay in hint order.  At most
 * HINT_CAP spans a file and SPANS_MAX in all: past that the hint is
 * numbered but not remembered (its reads reach an older hint or none:
 * staleness is a heuristic, the bytes are always right).
 * @return the hint's number.
 */
static uint64_t spans_add(struct prefetch *pf, struct pf_file *f, uint64_t off,
			  uint64_t end)
{
	uint64_t seq;

	pthread_mutex_lock(&f->mu);
	seq = __atomic_add_fetch(&pf->hint_seq, 1, __ATOMIC_RELAXED);
	spans_trim(f, __atomic_load_n(&pf->read_seq, __ATOMIC_RELAXED));
	if (f->span_len == f->span_cap && f->span_head)
		spans_compact(f);
	if (f->span_len == f->span_cap && f->span_cap < HINT_CAP &&
	    __atomic_load_n(f->spans_live, __ATOMIC_RELAXED) < SPANS_MAX) {
		const uint32_t cap = f->span_cap ? f->span_cap * 2 : 1;
		struct hint_span *n = realloc(f->spans, cap * sizeof(*n));

		if (n) {
			f->spans = n;
			f->span_cap = cap;
		}
	}
	/* SPANS_MAX is a bound on memory, not exact: two files may both
	 * take the last place. */
	if (f->span_len < f->span_cap &&
	    __atomic_load_n(f->spans_live, __ATOMIC_RELAXED) < SPANS_MAX) {
		f->spans[f->span_len++] =
		    (struct hint_span){.seq = seq, .off = off, .end = end};
		__atomic_add_fetch(f->spans_live, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&f->pending, f->span_len - f->span_head,
			 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->mu);
	return seq;
}

/*
 * Under f->mu.  A read of bytes [off, end) of f: the hint it reaches is
 * the oldest pending one whose bytes it touches (0: none).  A read that
 * gets to the end of that hint's bytes finishes it, and the older ones the
 * reader skipped go with it; a second read inside a hint (a record's
 * header, then its body) reaches the same hint again.  A scan of f's
 * pending spans, oldest first.
 */
static uint64_t spans_reach(struct pf_file *f, uint64_t rs, uint64_t off,
			    uint64_t end)
{
	uint64_t seq = 0;

	spans_trim(f, rs);
	for (uint32_t i = f->span_head; i < f->span_len; i++) {
		const struct hint_span *sp = &f->spans[i];

		if (sp->off >= end || off >= sp->end)
			continue;
		seq = sp->seq;
		if (end >= sp->end)
			spans_drop_before(f, i + 1);
		break;
	}
	return seq;
}

static size_t chunk_len(const struct prefetch *pf, const struct pf_file *f,
			uint64_t idx)
{
	uint64_t start = idx * pf->cfg.chunk_size;

	assert(start < f->size);
	return f->size - start < pf->cfg.chunk_size ? f->size - start
						    : pf->cfg.chunk_size;
}

static void file_key(const struct prefetch *pf, const struct pf_file *f,
		     uint64_t idx, struct chunk_key *key)
{
	store_key(key, pf->src->id, f->path, f->version, f->size, f->mtime,
		  pf->cfg.chunk_size, idx);
}

/* Errors a reader may see: the origin's refusals, else EIO. */
static int reader_errno(int rc)
{
	switch (rc) {
	case -ENOENT:
	case -EACCES:
	case -ENOMEM:
		return rc;
	default:
		return -EIO;
	}
}

/*
 * A load from the origin: what its request and its end need.  A reader's
 * load lives on its stack (fetch_run); a pool load is allocated when it
 * goes to the origin (a few KiB beside a chunk of 64 KiB or more) and
 * freed when it lands, so that no pool thread waits for it.
 */
struct load {
	struct prefetch *pf;
	struct pf_file *f; /* a pool load: the job's reference */
	uint64_t idx;
	struct chunk_key key;
	struct chunk *c;
	void *buf;
	size_t want;
	bool pool;    /* read-ahead's or a hint's, not a reader's */
	bool hint;    /* a pool load: a hint's, else read-ahead's */
	bool renewed; /* a 401 was answered with fresh credentials */
	/* Its bytes came from the origin itself, not through a site cache,
	 * or matched the object's checksum. */
	bool trusted;
	bool gated; /* holds the read side of f->sums->gate */
	int rc;	    /* the request's result */
	struct source_read rd;
	struct fetch_res res;
	struct load *next; /* in the pool's list of loads that landed */
};

/*
 * Prepares ld's ranged GET of its chunk straight into its buffer.  Pool
 * loads are background work, which waits for room under the host's
 * concurrency limit; a reader's starts at once.
 * @return 0, or prepare_read's error (logged).
 */
static int load_prepare(struct load *ld, bool background)
{
	struct prefetch *pf = ld->pf;
	struct pf_file *f = ld->f;
	const uint64_t off = ld->idx * pf->cfg.chunk_size;
	int rc;

	memset(&ld->rd, 0, sizeof(ld->rd));
	rc = pf->src->ops->prepare_read(pf->src, f->path, f->version, off,
					ld->want, &ld->rd);
	/* -ENOLINK: offline, and the source said so once. */
	if (rc && rc != -ENOLINK)
		log_error_limited("%s%s: bytes %llu-%llu: cannot prepare the "
			  "request: %s",
			  pf->src->id, f->path, (unsigned long long)off,
			  (unsigned long long)(off + ld->want - 1),
			  strerror(-rc));
	if (rc) {
		source_read_done(&ld->rd);
		return rc;
	}
	ld->rd.req.background = background;
	/* Found bad through the site cache: that is not asked again. */
	if (f->sums && __atomic_load_n(&f->sums->bypass, __ATOMIC_ACQUIRE))
		ld->rd.req.origin_only = ld->trusted = true;
	ld->rd.req.size = f->size; /* an answer must be of this version's */
	ld->rd.req.buf = ld->buf;
	ld->rd.req.cap = ld->want;
	ld->rd.req.grow = false;
	return 0;
}

/* The request of ld ended with ld->rc: true when it is to be made again,
 * once, with fresh credentials (fetch_auth_expired: a 401, an S3
 * ExpiredToken). */
static bool load_renew(struct load *ld)
{
	const struct source_ops *ops = ld->pf->src->ops;

	source_read_done(&ld->rd);
	if (!ld->rc || !fetch_auth_expired(&ld->res) || ld->renewed ||
	    !ops->auth_refused ||
	    !ops->auth_refused(ld->pf->src, ld->rd.auth_serial))
		return false;
	ld->renewed = true;
	return true;
}

/* ---- origin checksums ----
 *
 * An object whose origin gives a checksum (pf_file.want) is checked whole
 * once all its chunks are in.  A chunk's CRC32C is taken as it lands from
 * the origin (one pass over bytes just written, before the store hashes
 * them), and the chunk that completes the object runs the check: a
 * CRC32C object's comes from its chunks' CRCs, combined, with no byte
 * read again.  MD5 and SHA-256 do not combine: such an object's digest is
 * fed with its chunks in order as they come, and a chunk that came ahead
 * of its turn is read back from the store when its turn comes (a
 * sequential reader's read-ahead lands nearly in order).  An object of
 * one chunk is checked
 * before its bytes are stored or served; a larger one before its last
 * chunk is served, after the others were.  A mismatch drops the object's
 * chunks from the store and the memory cache and fetches them all again
 * from the origin itself, not through a site cache.  From then on no
 * byte the site cache sent for it is stored or served: its chunks' loads
 * go to the origin itself, and one that went to the site cache before
 * the mismatch and lands after it is fetched again from the origin
 * (struct sums.gate orders the two: a chunk that was on its way to the
 * caches at the mismatch is there before the drop).  If those do not
 * match either, they are dropped again and reads of the object fail with
 * EIO until a remount.  Once matched, the chunks' CRCs are kept, and a
 * chunk fetched again later (evicted meanwhile) is checked against its
 * own before it is served.  A match is recorded in the store, for `wharf
 * cache verify`.
 */

static bool bit_get(const uint64_t *v, uint64_t i)
{
	return __atomic_load_n(&v[i / 64], __ATOMIC_ACQUIRE) &
	       (1ull << (i % 64));
}

/* @return whether the bit was clear. */
static bool bit_set(uint64_t *v, uint64_t i)
{
	const uint64_t bit = 1ull << (i % 64);

	return !(__atomic_fetch_or(&v[i / 64], bit, __ATOMIC_ACQ_REL) & bit);
}

/* Loads of a chunk from the origin itself may land while the object is
 * fetched again, each noting the chunk's CRC. */
static void note_crc(struct sums *sm, uint64_t i, uint32_t crc)
{
	__atomic_store_n(&sm->crc[i], crc, __ATOMIC_RELAXED);
	bit_set(sm->known, i);
}

static uint32_t crc_of(const struct sums *sm, uint64_t i)
{
	return __atomic_load_n(&sm->crc[i], __ATOMIC_RELAXED);
}

/*
 * The object's checksum into *got: chunk idx's bytes from buf (when not
 * NULL), a CRC32C object's other chunks from their CRCs where known, the
 * rest read from the store (*reread counts them).  Every chunk's CRC is
 * known after.  @return 0; -ENOENT (a chunk is no longer cached), -EIO,
 * -ENOMEM.
 */
static int sums_compute(struct prefetch *pf, struct pf_file *f, uint64_t idx,
			const void *buf, struct checksum *got, unsigned *reread)
{
	struct sums *sm = f->sums;
	const bool crc_only = f->want.algo == CHECKSUM_CRC32C;
	struct checksum_ctx ctx;
	void *scratch = NULL;
	int rc = checksum_begin(&ctx, f->want.algo);

	for (uint64_t i = 0; !rc && i < f->nchunks; i++) {
		const size_t len = chunk_len(pf, f, i);
		const void *data = i == idx ? buf : NULL;
		struct chunk_key key;
		size_t n = 0;

		if (!(crc_only && bit_get(sm->known, i)) && !data) {
			if (!scratch && !(scratch = malloc(pf->cfg.chunk_size)))
				rc = -ENOMEM;
			file_key(pf, f, i, &key);
			if (!rc)
				rc = pf->st ? store_get(pf->st, &key, scratch,
							len, &n)
					    : -ENOENT;
			if (!rc && n != len)
				rc = -EIO;
			if (rc == -EBADMSG) /* corrupt, and removed */
				rc = -ENOENT;
			data = scratch;
			(*reread)++;
		}
		if (rc)
			break;
		if (data && !bit_get(sm->known, i))
			note_crc(sm, i, crc32c_update(0, data, len));
		if (crc_only)
			checksum_feed_crc32c(&ctx, crc_of(sm, i), len);
		else
			checksum_feed(&ctx, data, len);
	}
	free(scratch);
	if (rc) {
		checksum_abort(&ctx);
		return rc;
	}
	checksum_end(&ctx, got);
	return 0;
}

/* Feeds f's running digest (an MD5 or SHA-256 object's) with the chunks
 * whose turn has come: idx's bytes from buf when not NULL, the others'
 * read back from the store (they came ahead of their turn).  Chunk idx
 * is marked got. */
static void sums_advance(struct prefetch *pf, struct pf_file *f, uint64_t idx,
			 const void *buf)
{
	struct sums *sm = f->sums;
	void *scratch = NULL;

	pthread_mutex_lock(&sm->mu);
	if (!sm->broken && sm->stream.algo == CHECKSUM_NONE &&
	    checksum_begin(&sm->stream, f->want.algo))
		sm->broken = true;
	while (!sm->broken && sm->next < f->nchunks &&
	       bit_get(sm->got, sm->next)) {
		const size_t len = chunk_len(pf, f, sm->next);
		const void *data = sm->next == idx ? buf : NULL;
		struct chunk_key key;
		size_t n = 0;

		if (!data) {
			if (!scratch)
				scratch = malloc(pf->cfg.chunk_size);
			file_key(pf, f, sm->next, &key);
			if (!scratch ||
			    store_get(pf->st, &key, scratch, len, &n) ||
			    n != len) {
				sm->broken = true;
				break;
			}
			data = scratch;
		}
		checksum_feed(&sm->stream, data, len);
		if (!bit_get(sm->known, sm->next))
			note_crc(sm, sm->next, crc32c_update(0, data, len));
		sm->next++;
	}
	pthread_mutex_unlock(&sm->mu);
	free(scratch);
}

/* The running digest of f when it has had every chunk: into *got.
 * @return whether it had. */
static bool sums_streamed(struct pf_file *f, struct checksum *got)
{
	struct sums *sm = f->sums;
	bool done;

	if (f->want.algo == CHECKSUM_CRC32C || f->nchunks < 2)
		return false;
	pthread_mutex_lock(&sm->mu);
	done = !sm->broken && sm->next == f->nchunks &&
	       sm->stream.algo != CHECKSUM_NONE;
	if (done) {
		checksum_end(&sm->stream, got);
		sm->stream.algo = CHECKSUM_NONE;
	}
	pthread_mutex_unlock(&sm->mu);
	return done;
}

/* Fetches [off, off + want) of chunk idx of f from the origin itself
 * into buf.  @return 0 or -errno (logged). */
static int fetch_direct(struct prefetch *pf, struct pf_file *f, uint64_t idx,
			void *buf, size_t want)
{
	struct load ld = {
	    .pf = pf, .f = f, .idx = idx, .buf = buf, .want = want};
	int rc;

	do {
		rc = load_prepare(&ld, false);
		if (rc)
			return ld.renewed ? -EACCES : rc;
		ld.rd.req.origin_only = true;
		ld.rc = fetch_run(pf->src->fetch, &ld.rd.req, &ld.res);
	} while (load_renew(&ld));
	if (!ld.rc && ld.res.len != want) {
		snprintf(ld.res.err, sizeof(ld.res.err),
			 "%zu bytes came, expected %zu", ld.res.len, want);
		ld.rc = -EIO;
	}
	if (ld.rc)
		log_error("%s%s: chunk %llu, fetched again from the origin: "
			  "%s",
			  pf->src->id, f->path, (unsigned long long)idx,
			  ld.res.err[0] ? ld.res.err : strerror(-ld.rc));
	return ld.rc;
}

/*
 * f was found bad: from now on its loads go to the origin itself (or
 * fail, verdict SUMS_BAD), and its chunks are dropped from the store and
 * the memory cache.  Under the gate's write side, so that a chunk on its
 * way there is there first, and dropped; a load in flight, as the one
 * that runs the check, is left to its owner, which admits it through the
 * gate (sums_admit).
 */
static void sums_quarantine(struct prefetch *pf, struct pf_file *f, int verdict)
{
	struct sums *sm = f->sums;

	pthread_rwlock_wrlock(&sm->gate);
	__atomic_store_n(&sm->bypass, true, __ATOMIC_RELEASE);
	if (verdict)
		__atomic_store_n(&sm->verdict, verdict, __ATOMIC_RELEASE);
	for (uint64_t i = 0; i < f->nchunks; i++) {
		struct chunk_key key;

		file_key(pf, f, i, &key);
		if (pf->st)
			store_remove(pf->st, &key);
		chunks_forget(pf->cc, &key);
	}
	pthread_rwlock_unlock(&sm->gate);
}

/* Fetches all of f again from the origin itself: into the store, chunk
 * idx into buf when not NULL (its chunk is not published yet), each
 * chunk's CRC noted, the object's checksum into *got.  @return 0 or
 * -errno (logged). */
static int sums_refetch(struct prefetch *pf, struct pf_file *f, uint64_t idx,
			void *buf, struct checksum *got)
{
	const bool crc_only = f->want.algo == CHECKSUM_CRC32C;
	struct checksum_ctx ctx;
	void *scratch = malloc(pf->cfg.chunk_size);
	int rc = scratch ? checksum_begin(&ctx, f->want.algo) : -ENOMEM;

	for (uint64_t i = 0; !rc && i < f->nchunks; i++) {
		const size_t len = chunk_len(pf, f, i);
		void *dst = i == idx && buf ? buf : scratch;
		struct chunk_key key;
		uint32_t crc;

		rc = fetch_direct(pf, f, i, dst, len);
		if (rc) {
			checksum_abort(&ctx);
			break;
		}
		crc = crc32c_update(0, dst, len);
		note_crc(f->sums, i, crc);
		if (crc_only)
			checksum_feed_crc32c(&ctx, crc, len);
		else
			checksum_feed(&ctx, dst, len);
		file_key(pf, f, i, &key);
		if (pf->st)
			(void)!store_put(pf->st, &key, dst, len);
	}
	if (!rc)
		checksum_end(&ctx, got);
	free(scratch);
	return rc;
}

/* f matched (the checksum matched: the origin's, or for an ETag that is
 * no MD5 the one its own bytes give): its chunks' CRCs known so far
 * stand, and the store records it. */
static void sums_good(struct prefetch *pf, struct pf_file *f,
		      const struct checksum *matched)
{
	char digest[CHECKSUM_TEXT_MAX];
	const struct store_sum rec = {.source = pf->src->id,
				      .path = f->path,
				      .version = f->version,
				      .size = f->size,
				      .mtime = f->mtime,
				      .chunk_size = pf->cfg.chunk_size,
				      .digest =
					  checksum_format(matched, digest)};
	int rc;

	__atomic_store_n(&f->sums->verdict, SUMS_GOOD, __ATOMIC_RELEASE);
	if (!pf->st)
		return;
	rc = store_sum_record(pf->st, &rec);
	if (rc)
		log_warn("%s%s: cannot record its checksum in the cache (%s): "
			 "`wharf cache verify` will not check it",
			 pf->src->id, f->path, strerror(-rc));
}

/* The bytes of f cannot be had right: reads fail from now on. */
static int sums_fail(struct prefetch *pf, struct pf_file *f)
{
	sums_quarantine(pf, f, SUMS_BAD);
	STAT_ADD(pf->stats.sums_failed, 1);
	return -EIO;
}

/*
 * All of f is in; chunk idx's bytes are in buf (NULL: all are in the
 * store): checks f against the origin's checksum, and on a mismatch
 * fetches it again from the origin itself.  @return 0 (matched, or could
 * not be checked: logged), -EIO (the origin's own bytes do not match).
 */
static int sums_check(struct prefetch *pf, struct pf_file *f, uint64_t idx,
		      void *buf)
{
	char want[CHECKSUM_TEXT_MAX], got1[CHECKSUM_TEXT_MAX],
	    got2[CHECKSUM_TEXT_MAX];
	struct checksum got;
	unsigned reread = 0;
	int rc = sums_streamed(f, &got)
		     ? 0
		     : sums_compute(pf, f, idx, buf, &got, &reread);

	checksum_format(&f->want, want);
	if (rc) {
		STAT_ADD(pf->stats.sums_unchecked, 1);
		log_warn("%s%s: not checked against the origin's %s: %s",
			 pf->src->id, f->path, want,
			 rc == -ENOENT ? "a chunk of it is no longer cached"
				       : strerror(-rc));
		return 0;
	}
	STAT_ADD(pf->stats.sums_checked, 1);
	if (checksum_equal(&f->want, &got)) {
		sums_good(pf, f, &f->want);
		return 0;
	}
	/* Before it is counted: a reader that sees the count finds the bad
	 * bytes gone. */
	sums_quarantine(pf, f, 0);
	STAT_ADD(pf->stats.sums_bad, 1);
	log_error("%s%s: its bytes do not match the origin's checksum: "
		  "expected %s (from the origin's listing or manifest), got "
		  "%s from the bytes received (%llu chunks, %u of them read "
		  "back from the chunk cache); dropping them and fetching "
		  "the object again from the origin itself, not through a "
		  "site cache",
		  pf->src->id, f->path, want, checksum_format(&got, got1),
		  (unsigned long long)f->nchunks, reread);
	rc = sums_refetch(pf, f, idx, buf, &got);
	if (rc) {
		log_error("%s%s: cannot fetch it again (%s): reads of it fail "
			  "with EIO until a remount",
			  pf->src->id, f->path, strerror(-rc));
		return sums_fail(pf, f);
	}
	checksum_format(&got, got2);
	if (checksum_equal(&f->want, &got)) {
		STAT_ADD(pf->stats.sums_repaired, 1);
		log_warn("%s%s: fetched again from the origin itself, its "
			 "bytes match %s: those are served and cached",
			 pf->src->id, f->path, want);
		sums_good(pf, f, &f->want);
		return 0;
	}
	if (f->want.weak) {
		STAT_ADD(pf->stats.sums_etag_not_md5, 1);
		log_warn("%s%s: the origin itself sends bytes whose MD5 is "
			 "%s, and its ETag says %s: that ETag is no MD5 of the "
			 "object (SSE-KMS or SSE-C encryption, or a store "
			 "whose ETags are not MD5s); served as the origin "
			 "sends them",
			 pf->src->id, f->path, got2, want);
		/* recorded as the origin's bytes give it, for verify */
		sums_good(pf, f, &got);
		return 0;
	}
	log_error("%s%s: fetched again from the origin itself, its bytes "
		  "still do not match: expected %s (from the origin's listing "
		  "or manifest), got %s from the origin's own bytes; reads of "
		  "it fail with EIO until a remount",
		  pf->src->id, f->path, want, got2);
	return sums_fail(pf, f);
}

/* A chunk of a matched object came from the origin again (evicted
 * since): it must have the CRC it had then.  @return 0 or -EIO. */
static int sums_chunk_again(struct prefetch *pf, struct pf_file *f,
			    uint64_t idx, void *buf, size_t len, uint32_t crc)
{
	const uint32_t want = crc_of(f->sums, idx);
	int rc;

	/* Unknown: a chunk the check had from the store and no CRC of. */
	if (!bit_get(f->sums->known, idx) || crc == want)
		return 0;
	STAT_ADD(pf->stats.sums_bad, 1);
	log_error("%s%s: chunk %llu, fetched again, has CRC32C %08x, and "
		  "%08x when the object matched the origin's checksum; "
		  "fetching it again from the origin itself",
		  pf->src->id, f->path, (unsigned long long)idx, crc, want);
	rc = fetch_direct(pf, f, idx, buf, len);
	if (!rc)
		crc = crc32c_update(0, buf, len);
	if (!rc && crc == want) {
		STAT_ADD(pf->stats.sums_repaired, 1);
		return 0;
	}
	STAT_ADD(pf->stats.sums_failed, 1);
	if (!rc)
		log_error("%s%s: chunk %llu from the origin itself has CRC32C "
			  "%08x, not %08x: the read fails with EIO",
			  pf->src->id, f->path, (unsigned long long)idx, crc,
			  want);
	return -EIO;
}

/*
 * Takes the read side of f's gate for ld's chunk, which landed from the
 * origin, until it is published (sums_leave).  If f was found bad since
 * the chunk was asked for through the site cache, it is fetched again
 * from the origin itself first.  @return 0 (held), -EIO (f is bad), or
 * fetch_direct's (not held).
 */
static int sums_admit(struct load *ld)
{
	struct sums *sm = ld->f->sums;
	int rc;

	for (;;) {
		pthread_rwlock_rdlock(&sm->gate);
		if (__atomic_load_n(&sm->verdict, __ATOMIC_ACQUIRE) ==
		    SUMS_BAD) {
			pthread_rwlock_unlock(&sm->gate);
			return -EIO;
		}
		if (ld->trusted ||
		    !__atomic_load_n(&sm->bypass, __ATOMIC_ACQUIRE)) {
			ld->gated = true;
			return 0;
		}
		pthread_rwlock_unlock(&sm->gate);
		rc = fetch_direct(ld->pf, ld->f, ld->idx, ld->buf, ld->want);
		if (rc)
			return rc;
		ld->trusted = true;
	}
}

static void sums_leave(struct load *ld)
{
	if (ld->gated)
		pthread_rwlock_unlock(&ld->f->sums->gate);
	ld->gated = false;
}

/*
 * ld's chunk of f landed from the origin, before it is stored: an object
 * of one chunk is checked whole (before the gate is taken: a mismatch
 * takes its write side); then, through the gate (sums_admit), the
 * chunk's CRC is noted, or checked against the one it had when f
 * matched.  @return 0 (the gate held) or -errno (not held).
 */
static int sums_landed(struct load *ld)
{
	struct pf_file *f = ld->f;
	struct sums *sm = f->sums;
	bool checked = false;
	uint32_t crc;
	int rc;

	if (f->nchunks == 1 &&
	    !__atomic_load_n(&sm->verdict, __ATOMIC_ACQUIRE)) {
		note_crc(sm, 0, crc32c_update(0, ld->buf, ld->want));
		__atomic_store_n(&sm->fetched, true, __ATOMIC_RELAXED);
		bit_set(sm->got, 0);
		rc = sums_check(ld->pf, f, 0, ld->buf);
		if (rc)
			return rc;
		/* It matched, or was fetched again from the origin itself. */
		ld->trusted = checked = true;
	}
	rc = sums_admit(ld);
	if (rc || checked)
		return rc;
	crc = crc32c_update(0, ld->buf, ld->want);
	if (__atomic_load_n(&sm->verdict, __ATOMIC_ACQUIRE) == SUMS_GOOD) {
		rc = sums_chunk_again(ld->pf, f, ld->idx, ld->buf, ld->want,
				      crc);
		if (rc)
			sums_leave(ld);
		return rc;
	}
	note_crc(sm, ld->idx, crc);
	__atomic_store_n(&sm->fetched, true, __ATOMIC_RELAXED);
	return 0;
}

/* Chunk idx of f is in the store or published (buf: its bytes, NULL when
 * in the store alone).  @return whether it completes an object of many
 * chunks, of which one came from the origin now: its check is due
 * (sums_check, not under the gate). */
static bool sums_got(struct prefetch *pf, struct pf_file *f, uint64_t idx,
		     void *buf)
{
	struct sums *sm = f->sums;

	if (f->nchunks < 2 || !bit_set(sm->got, idx))
		return false;
	/* Before the count: the one that completes it finds every chunk
	 * fed that any chunk's turn allowed.  Only once a chunk came from
	 * the origin: an object read whole from the store is not checked,
	 * and a warm read costs no digest. */
	if (f->want.algo != CHECKSUM_CRC32C &&
	    __atomic_load_n(&sm->fetched, __ATOMIC_RELAXED))
		sums_advance(pf, f, idx, buf);
	return __atomic_add_fetch(&sm->ngot, 1, __ATOMIC_ACQ_REL) ==
		   f->nchunks &&
	       __atomic_load_n(&sm->fetched, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&sm->verdict, __ATOMIC_ACQUIRE);
}

/* Sets up f's check when its origin gave a checksum (once per file, not
 * per read).  @return 0 or -ENOMEM. */
static int sums_open(struct pf_file *f, const char *digest)
{
	const size_t words = (f->nchunks + 63) / 64;
	struct sums *sm;

	if (!digest || !*digest || checksum_parse(digest, &f->want))
		f->want.algo = CHECKSUM_NONE;
	/* Empty objects have nothing to check; objects of more than
	 * WHOLE_MAX chunks keep no state for it. */
	if (f->want.algo == CHECKSUM_NONE || !f->nchunks ||
	    f->nchunks > WHOLE_MAX)
		return 0;
	if (f->nchunks == 1) {
		sm = calloc(1, sizeof(*sm));
		if (!sm)
			return -ENOMEM;
		sm->got = &sm->inline_bits[0];
		sm->known = &sm->inline_bits[1];
		sm->crc = &sm->inline_crc;
	} else {
		sm = calloc(1, sizeof(*sm) + 2 * words * sizeof(uint64_t) +
				   f->nchunks * sizeof(uint32_t));
		if (!sm)
			return -ENOMEM;
		sm->got = (uint64_t *)(sm + 1);
		sm->known = sm->got + words;
		sm->crc = (uint32_t *)(sm->known + words);
	}
	pthread_mutex_init(&sm->mu, NULL);
	pthread_rwlock_init(&sm->gate, NULL);
	f->sums = sm;
	return 0;
}

/* Writes chunk idx of f to the store.  Every chunk not cached is counted
 * by the store; a full disk it says once itself (naming the filesystem),
 * a write error too. */
static void store_chunk(struct prefetch *pf, const struct pf_file *f,
			uint64_t idx, const void *buf, size_t len,
			const struct chunk_key *key)
{
	const int rc = store_put(pf->st, key, buf, len);

	if (rc && rc != -ENOSPC && rc != -EIO)
		log_warn("%s%s: chunk %llu not cached on disk: %s", pf->src->id,
			 f->path, (unsigned long long)idx, strerror(-rc));
}

/* Stores w's chunk and lets w go; running: w is in pf->running. */
static void write_run(struct prefetch *pf, struct write *w, bool running)
{
	store_chunk(pf, w->f, w->idx, w->c->data, w->c->len, &w->c->key);
	chunks_put(pf->cc, w->c);
	if (running) {
		struct write **p;

		pthread_mutex_lock(&pf->qmu);
		for (p = &pf->running; *p != w; p = &(*p)->next)
			;
		*p = w->next;
		if (pf->flushers)
			pthread_cond_broadcast(&pf->wcond);
		pthread_mutex_unlock(&pf->qmu);
	}
	file_unref(w->f);
	free(w);
}

/* Whether a and b are the same object (two opens have a pf_file each). */
static bool same_object(const struct pf_file *a, const struct pf_file *b)
{
	return a == b || (a->size == b->size && a->mtime == b->mtime &&
			  !strcmp(a->path, b->path) &&
			  !strcmp(a->version, b->version));
}

/* Under qmu: whether a write of f's chunks is under way. */
static bool writing_of(const struct prefetch *pf, const struct pf_file *f)
{
	for (const struct write *w = pf->running; w; w = w->next)
		if (same_object(w->f, f))
			return true;
	return false;
}

/*
 * Has f's chunks whose store writes wait written now (on this thread),
 * and waits for those under way: for the packer, which copies f's chunk
 * files into a pack.
 */
static void writes_flush(struct prefetch *pf, struct pf_file *f)
{
	struct write **p, *prev = NULL, *mine = NULL, *w;

	pthread_mutex_lock(&pf->qmu);
	for (p = &pf->writes; (w = *p);) {
		if (!same_object(w->f, f)) {
			prev = w;
			p = &w->next;
			continue;
		}
		*p = w->next;
		if (pf->writes_tail == w)
			pf->writes_tail = prev;
		pf->write_bytes -= w->c->len;
		pf->nwrites--;
		w->next = mine;
		mine = w;
	}
	pthread_mutex_unlock(&pf->qmu);
	while ((w = mine)) {
		mine = w->next;
		write_run(pf, w, false);
	}
	pthread_mutex_lock(&pf->qmu);
	pf->flushers++;
	while (writing_of(pf, f))
		pthread_cond_wait(&pf->wcond, &pf->qmu);
	pf->flushers--;
	pthread_mutex_unlock(&pf->qmu);
}

static void pool_grow(struct prefetch *pf);

/*
 * Chunk c (idx of f), just published, is stored by a pool thread, so
 * that the thread that loaded it (a reader's, or the pool's with more
 * loads landed) does not wait for the store's compress, create, write
 * and rename.  Written here when the pool cannot take it: no pool, no
 * memory, or too many bytes wait already.
 */
static void store_later(struct prefetch *pf, struct pf_file *f, uint64_t idx,
			struct chunk *c)
{
	struct write *w = NULL;

	if (pf->cfg.threads)
		w = malloc(sizeof(*w));
	if (w) {
		chunks_hold(pf->cc, c);
		file_ref(f);
		*w = (struct write){.c = c, .f = f, .idx = idx};
		pthread_mutex_lock(&pf->qmu);
		if (!pf->stopping &&
		    pf->write_bytes + c->len <= pf->cfg.inflight_bytes / 4) {
			pf->write_bytes += c->len;
			pf->nwrites++;
			if (pf->writes_tail)
				pf->writes_tail->next = w;
			else
				pf->writes = w;
			pf->writes_tail = w;
			if (pf->idle)
				pthread_cond_signal(&pf->qcond);
			else
				pool_grow(pf);
			w = NULL;
			c = NULL;
		}
		pthread_mutex_unlock(&pf->qmu);
	}
	if (w)
		write_run(pf, w, false);
	else if (c)
		store_chunk(pf, f, idx, c->data, c->len, &c->key);
}

/*
 * The origin's answer for ld's chunk is in: checks it, publishes the
 * chunk and stores it (or the other way round, see below), or fails it
 * (dropping our reference).  The chunk
 * must be exactly as long as the object's size implies: a short or long
 * body is an error, never short data inside a file.
 */
static int load_landed(struct load *ld)
{
	struct prefetch *pf = ld->pf;
	struct pf_file *f = ld->f;
	const uint64_t off = ld->idx * pf->cfg.chunk_size;
	const unsigned long long idx = ld->idx;
	int rc = ld->rc;

	STAT_ADD(pf->stats.chunks_fetched, 1);
	if (rc && ld->pool) {
		/* No reader asked for it yet; one that does asks again
		 * (origin.gave_up counts these). */
		log_info("%s%s: %s of chunk %llu gave up: %s; a reader that "
			 "needs it fetches it again",
			 pf->src->id, f->path,
			 ld->hint ? "a hint's load" : "read-ahead", idx,
			 ld->res.err[0] ? ld->res.err : strerror(-rc));
		rc = reader_errno(rc);
		chunks_fail(pf->cc, ld->c, rc);
		return rc;
	}
	if (rc) {
		log_error_limited("%s%s: chunk %llu (bytes %llu-%llu): %s%s",
			  pf->src->id, f->path, idx, (unsigned long long)off,
			  (unsigned long long)(off + ld->want - 1),
			  ld->res.err[0] ? ld->res.err : strerror(-rc),
			  rc == -ESTALE ? ": the object changed while open "
					  "(its version no longer matches); "
					  "read fails rather than mix versions"
					: "");
		goto fail;
	}
	if (ld->res.len != ld->want) {
		log_error("%s%s: chunk %llu (bytes %llu-%llu): the origin sent "
			  "%zu bytes, expected %zu (the object changed?)",
			  pf->src->id, f->path, idx, (unsigned long long)off,
			  (unsigned long long)(off + ld->want - 1), ld->res.len,
			  ld->want);
		rc = -EIO;
		goto fail;
	}
	if (f->sums) {
		rc = sums_landed(ld);
		if (rc)
			goto fail;
	}
	/* Its bytes are final (no check of the whole object is pending; one
	 * of one chunk was checked in sums_landed): served first, stored
	 * after, off the reader's way.  A larger object's check may drop
	 * its stored chunks, so those are stored before it runs. */
	if (!f->sums || f->nchunks == 1) {
		__atomic_store_n(&f->from_store, false, __ATOMIC_RELAXED);
		chunks_ready(pf->cc, ld->c, ld->want);
		sums_leave(ld);
		STAT_ADD(pf->stats.chunks_loaded, 1);
		store_later(pf, f, ld->idx, ld->c);
		return 0;
	}
	store_chunk(pf, f, ld->idx, ld->buf, ld->want, &ld->key);
	if (sums_got(pf, f, ld->idx, ld->buf)) {
		/* Its bytes are not published yet: their check may drop the
		 * object's chunks, which takes the gate's write side. */
		sums_leave(ld);
		rc = sums_check(pf, f, ld->idx, ld->buf);
		if (rc)
			goto fail;
	}
	__atomic_store_n(&f->from_store, false, __ATOMIC_RELAXED);
	chunks_ready(pf->cc, ld->c, ld->want);
	sums_leave(ld);
	STAT_ADD(pf->stats.chunks_loaded, 1);
	return 0;
fail:
	sums_leave(ld);
	rc = reader_errno(rc);
	STAT_ADD(pf->stats.chunk_errors, 1);
	chunks_fail(pf->cc, ld->c, rc);
	return rc;
}

/* load_from_store's, which see. */
static int store_load(struct load *ld)
{
	struct prefetch *pf = ld->pf;
	struct pf_file *f = ld->f;
	const unsigned long long idx = ld->idx;
	struct store_map m;
	size_t len = 0;
	int rc;

	/* A raw chunk on disk is served from its mapping, no copy. */
	rc = store_map(pf->st, &ld->key, ld->want, &m, &len);
	if (rc == 0 && len == ld->want) {
		chunks_adopt(pf->cc, ld->c, m.map, m.map_len, m.data);
		goto ready;
	}
	if (rc == 0)
		munmap(m.map, m.map_len);
	ld->buf = chunks_fill_buffer(pf->cc, ld->c, ld->want);
	if (!ld->buf) {
		log_error("%s%s: chunk %llu: out of memory", pf->src->id,
			  f->path, idx);
		STAT_ADD(pf->stats.chunk_errors, 1);
		chunks_fail(pf->cc, ld->c, -ENOMEM);
		return -ENOMEM;
	}
	/* Compressed, or not mappable (or no memory to map it): read it.
	 * Absent or corrupt (and removed): fetch it. */
	if (rc != -ENOENT && rc != -EBADMSG)
		rc = store_get(pf->st, &ld->key, ld->buf, ld->want, &len);
	if (rc == 0 && len == ld->want)
		goto ready;
	if (rc == 0)
		log_warn("%s%s: cached chunk %llu has %zu bytes, expected %zu; "
			 "fetching it again",
			 pf->src->id, f->path, idx, len, ld->want);
	else if (rc != -ENOENT && rc != -EBADMSG)
		log_warn("%s%s: cannot read cached chunk %llu (%s); fetching "
			 "it again",
			 pf->src->id, f->path, idx, strerror(-rc));
	return 1;
ready:
	__atomic_store_n(&f->from_store, true, __ATOMIC_RELAXED);
	chunks_ready(pf->cc, ld->c, ld->want);
	STAT_ADD(pf->stats.chunks_loaded, 1);
	return 0;
}

/*
 * Fills ld's chunk (which we own) from the store when it holds it, and
 * publishes it.  @return 0 (ready), 1 (not in the store: ld->buf is the
 * chunk's buffer, to be fetched into), or -errno (the chunk is failed).
 */
static int load_from_store(struct load *ld)
{
	struct pf_file *f = ld->f;
	int rc;

	/* Through the gate: bytes read before a mismatch's drop are not
	 * published after it. */
	if (f->sums) {
		pthread_rwlock_rdlock(&f->sums->gate);
		ld->gated = true;
	}
	rc = store_load(ld);
	sums_leave(ld);
	/* Published already: a mismatch found here drops it. */
	if (!rc && f->sums && sums_got(ld->pf, f, ld->idx, NULL))
		(void)sums_check(ld->pf, f, ld->idx, NULL);
	return rc;
}

/*
 * A reader's load of chunk c of f (which it owns): the store, else the
 * origin, waiting for it.  *fetched says whether a request went out.
 * @return 0, or -errno with the chunk failed.
 */
static int load_chunk(struct prefetch *pf, struct pf_file *f, uint64_t idx,
		      const struct chunk_key *key, struct chunk *c,
		      bool *fetched)
{
	struct load ld = {.pf = pf, .f = f, .idx = idx, .key = *key, .c = c};
	int rc;

	ld.want = chunk_len(pf, f, idx);
	rc = load_from_store(&ld);
	if (rc <= 0)
		return rc;
	do {
		rc = load_prepare(&ld, false);
		/* A renewal that cannot be prepared: the 401 stands. */
		if (rc && ld.renewed)
			break;
		if (rc) {
			STAT_ADD(pf->stats.chunk_errors, 1);
			chunks_fail(pf->cc, c, reader_errno(rc));
			return reader_errno(rc);
		}
		*fetched = true;
		ld.rc = fetch_run(pf->src->fetch, &ld.rd.req, &ld.res);
	} while (load_renew(&ld));
	return load_landed(&ld);
}

/* Under qmu: the highest class with a job, or NULL. */
static struct queue *queue_first(struct prefetch *pf)
{
	for (int k = 0; k < PF_NCLASS; k++)
		if (pf->q[k].len)
			return &pf->q[k];
	return NULL;
}

/* Under qmu: takes the first job of q (not empty). */
static struct job queue_take(struct queue *q)
{
	const struct job j = q->jobs[q->head];

	q->head = (q->head + 1) % q->cap;
	q->len--;
	return j;
}

static bool kernel_had(const struct pf_file *f, uint64_t idx)
{
	return f->whole &&
	       __atomic_load_n(&f->whole[idx / 64], __ATOMIC_RELAXED) &
		   (1ull << (idx % 64));
}

bool prefetch_kernel_had(const struct pf_file *f, uint64_t idx)
{
	return kernel_had(f, idx);
}

/* Notes that the kernel has had chunk idx whole.  A plain load first: the
 * read path writes the shared word only when the bit changes. */
static void kernel_has_it(struct pf_file *f, uint64_t idx)
{
	if (f->whole && !kernel_had(f, idx))
		__atomic_fetch_or(&f->whole[idx / 64], 1ull << (idx % 64),
				  __ATOMIC_RELAXED);
}

static void halve(uint64_t *n)
{
	__atomic_store_n(n, __atomic_load_n(n, __ATOMIC_RELAXED) / 2,
			 __ATOMIC_RELAXED);
}

/* Counts a hint (lost: a read) of a chunk the kernel had whole, halving
 * both counts past 2^16 so that the judgement follows the page cache as
 * memory comes and goes (racy halving only blurs a rough estimate). */
static void kernel_count(struct prefetch *pf, bool lost)
{
	uint64_t *n = lost ? &pf->kernel_lost : &pf->kernel_hinted;

	if (__atomic_add_fetch(n, 1, __ATOMIC_RELAXED) < (1u << 16))
		return;
	halve(&pf->kernel_hinted);
	halve(&pf->kernel_lost);
}

/* A read of chunk idx: if the kernel had it whole, it lost it since
 * (counted once: the bit goes until it has the chunk whole again). */
static void kernel_lost_it(struct prefetch *pf, struct pf_file *f, uint64_t idx)
{
	const uint64_t bit = 1ull << (idx % 64);

	if (kernel_had(f, idx) &&
	    __atomic_fetch_and(&f->whole[idx / 64], ~bit, __ATOMIC_RELAXED) &
		bit)
		kernel_count(pf, true);
}

/* Whether the kernel keeps what it had, so that hints and read-ahead for
 * such chunks load nothing: fewer than 1 in 8 of the chunks hinted again
 * after it had them whole were read again (it lost them: a dataset larger
 * than the memory for its page cache), or too few seen to tell. */
static bool kernel_keeps(const struct prefetch *pf)
{
	return __atomic_load_n(&pf->kernel_lost, __ATOMIC_RELAXED) * 8 <
	       __atomic_load_n(&pf->kernel_hinted, __ATOMIC_RELAXED) + 64;
}

static void job_end(struct prefetch *pf, uint64_t want);

/* A pool load's request ended (on a fetch engine thread): a pool thread
 * takes it from here. */
static void load_done(void *arg, int rc)
{
	struct load *ld = arg;
	struct prefetch *pf = ld->pf;

	ld->rc = rc;
	ld->next = NULL;
	pthread_mutex_lock(&pf->qmu);
	if (pf->landed_tail)
		pf->landed_tail->next = ld;
	else
		pf->landed = ld;
	pf->landed_tail = ld;
	pthread_cond_signal(&pf->qcond);
	pthread_mutex_unlock(&pf->qmu);
}

/* Sends a pool load to the origin without waiting for it.  @return 0
 * (load_done follows), or -errno when nothing went (logged). */
static int load_submit(struct load *ld)
{
	struct prefetch *pf = ld->pf;
	int rc = load_prepare(ld, true);

	if (rc)
		return rc;
	rc = fetch_submit(pf->src->fetch, &ld->rd.req, &ld->res, load_done, ld);
	if (rc) {
		log_error("%s%s: chunk %llu: %s", pf->src->id, ld->f->path,
			  (unsigned long long)ld->idx, ld->res.err);
		source_read_done(&ld->rd);
	}
	return rc;
}

/* A pool load that landed (pool thread): asked again with fresh
 * credentials, or checked, stored and published; then its job ends. */
static void load_end(struct load *ld)
{
	struct prefetch *pf = ld->pf;

	/* Asked again with fresh credentials, unless the pool is stopping;
	 * one that cannot go keeps the 401 it got. */
	if (load_renew(ld) &&
	    !__atomic_load_n(&pf->stopping, __ATOMIC_RELAXED) &&
	    !load_submit(ld))
		return;
	if (!load_landed(ld)) {
		STAT_ADD(
		    *(ld->hint ? &pf->stats.hint_loaded : &pf->stats.ra_loaded),
		    1);
		chunks_put(pf->cc, ld->c);
	}
	file_unref(ld->f);
	job_end(pf, ld->want);
	free(ld);
}

/*
 * A pool job: loads the chunk unless it is cached, in flight or stale.
 * One in the store is loaded here; one that must come from the origin is
 * sent there and the thread goes on.
 * @return true when its load went to the origin: load_end ends the job.
 */
static bool run_job(struct prefetch *pf, const struct job *j, bool hint)
{
	const uint64_t rs = __atomic_load_n(&pf->read_seq, __ATOMIC_RELAXED);
	struct load st = {
	    .pf = pf, .f = j->f, .idx = j->idx, .pool = true, .hint = hint};
	struct load *ld;
	bool owner;
	int rc;

	if (__atomic_load_n(&j->f->closed, __ATOMIC_RELAXED))
		return false;
	if (hint && j->seq + HINT_SLACK < rs) {
		STAT_ADD(pf->stats.hint_stale, 1);
		/* Its span too, and any other the reader left behind in a
		 * file it may never touch again. */
		pthread_mutex_lock(&j->f->mu);
		spans_trim(j->f, rs);
		pthread_mutex_unlock(&j->f->mu);
		return false;
	}
	/* Read whole by the kernel already (a job queued before the reader
	 * got there, run after): loading it again would be waste. */
	if (!hint && kernel_had(j->f, j->idx) && kernel_keeps(pf)) {
		STAT_ADD(pf->stats.ra_behind, 1);
		return false;
	}
	file_key(pf, j->f, j->idx, &st.key);
	/* Without waiting: a chunk in flight is someone else's load, and a
	 * ready one needs nothing. */
	rc = chunks_get(pf->cc, &st.key, false, &st.c, &owner);
	if (rc) {
		/* -EAGAIN: another thread is loading it. */
		if (hint && rc == -EAGAIN)
			STAT_ADD(pf->stats.hint_cached, 1);
		return false;
	}
	if (!owner) {
		if (hint)
			STAT_ADD(pf->stats.hint_cached, 1);
		chunks_put(pf->cc, st.c);
		return false;
	}
	st.want = chunk_len(pf, j->f, j->idx);
	rc = load_from_store(&st);
	if (rc == 0) {
		STAT_ADD(
		    *(hint ? &pf->stats.hint_loaded : &pf->stats.ra_loaded), 1);
		chunks_put(pf->cc, st.c);
	}
	if (rc <= 0)
		return false;
	ld = malloc(sizeof(*ld));
	if (!ld) {
		log_error("%s%s: chunk %llu: out of memory", pf->src->id,
			  j->f->path, (unsigned long long)j->idx);
		STAT_ADD(pf->stats.chunk_errors, 1);
		chunks_fail(pf->cc, st.c, -ENOMEM);
		return false;
	}
	memcpy(ld, &st, offsetof(struct load, rd));
	rc = load_submit(ld);
	if (rc) {
		STAT_ADD(pf->stats.chunk_errors, 1);
		chunks_fail(pf->cc, ld->c, reader_errno(rc));
		free(ld);
		return false;
	}
	return true;
}

/*
 * Under qmu: whether a load of `want` bytes fits the memory bound.  It
 * counts what a load can bring (the chunk's length, so a small object
 * counts its own size); one load always fits, however large.
 */
static bool inflight_fits(const struct prefetch *pf, uint64_t want)
{
	return !pf->inflight || pf->inflight + want <= pf->cfg.inflight_bytes;
}

/* Pool loads under way at most: what the fetch engine lets run at once,
 * plus slack, within the configured ceiling. */
static unsigned loads_cap(const struct prefetch *pf)
{
	const unsigned n = fetch_concurrency(pf->src->fetch) + POOL_SLACK;

	return n < pf->cfg.threads ? n : pf->cfg.threads;
}

/* A pool job of `want` bytes ended: its room goes to the next. */
static void job_end(struct prefetch *pf, uint64_t want)
{
	pthread_mutex_lock(&pf->qmu);
	__atomic_store_n(&pf->inflight, pf->inflight - want, __ATOMIC_RELAXED);
	__atomic_store_n(&pf->loads, pf->loads - 1, __ATOMIC_RELAXED);
	if (pf->stopping) {
		if (!pf->loads)
			pthread_cond_broadcast(&pf->qcond);
	} else if (queue_first(pf)) {
		/* A thread held back by the bounds may go now, and the pool
		 * follows a limit that has grown since these jobs were
		 * queued. */
		if (pf->idle)
			pthread_cond_signal(&pf->qcond);
		pool_grow(pf);
	}
	pthread_mutex_unlock(&pf->qmu);
}

static void *worker(void *arg)
{
	struct prefetch *pf = arg;
	struct queue *q;
	struct write *w;
	struct load *ld;
	struct job j;
	uint64_t want;

	pthread_mutex_lock(&pf->qmu);
	for (;;) {
		/* Loads that landed first: they hold memory and a reader
		 * may be waiting for them. */
		ld = pf->landed;
		if (ld) {
			pf->landed = ld->next;
			if (!pf->landed)
				pf->landed_tail = NULL;
			pthread_mutex_unlock(&pf->qmu);
			load_end(ld);
			pthread_mutex_lock(&pf->qmu);
			continue;
		}
		/* Stopping: queued jobs are dropped; loads at the origin
		 * still land here, and the chunks published are stored. */
		if (pf->stopping && !pf->loads && !pf->writes)
			break;
		q = pf->stopping ? NULL : queue_first(pf);
		want =
		    q ? chunk_len(pf, q->jobs[q->head].f, q->jobs[q->head].idx)
		      : 0;
		if (!q || !inflight_fits(pf, want) ||
		    pf->loads >= loads_cap(pf)) {
			/* Store writes after loads: a load keeps the wire
			 * busy, a write has a reader waiting for nothing. */
			w = pf->writes;
			if (w && (!pf->writing ||
				  pf->writing + 1 < pf->nthreads ||
				  pf->stopping)) {
				pf->writes = w->next;
				if (!pf->writes)
					pf->writes_tail = NULL;
				pf->write_bytes -= w->c->len;
				pf->nwrites--;
				pf->writing++;
				w->next = pf->running;
				pf->running = w;
				pthread_mutex_unlock(&pf->qmu);
				write_run(pf, w, true);
				pthread_mutex_lock(&pf->qmu);
				pf->writing--;
				continue;
			}
			pf->idle++;
			pthread_cond_wait(&pf->qcond, &pf->qmu);
			pf->idle--;
			continue;
		}
		j = queue_take(q);
		__atomic_store_n(&pf->inflight, pf->inflight + want,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&pf->loads, pf->loads + 1, __ATOMIC_RELAXED);
		if (pf->loads > pf->stats.loads_max)
			__atomic_store_n(&pf->stats.loads_max, pf->loads,
					 __ATOMIC_RELAXED);
		if (pf->inflight > pf->stats.inflight_max)
			__atomic_store_n(&pf->stats.inflight_max, pf->inflight,
					 __ATOMIC_RELAXED);
		pthread_mutex_unlock(&pf->qmu);

		/* Hints carry a sequence number from 1; read-ahead none. */
		if (!run_job(pf, &j, j.seq != 0)) {
			file_unref(j.f);
			job_end(pf, want);
		}
		pthread_mutex_lock(&pf->qmu);
	}
	pthread_mutex_unlock(&pf->qmu);
	return NULL;
}

/* The threads the pool should have: one per core and a few more, for
 * loads from the store that wait on the disk, within the configured
 * ceiling.  Loads from the origin hold no thread. */
static unsigned pool_target(const struct prefetch *pf)
{
	const unsigned n = pf->ncpu + POOL_SPARE;

	return n < pf->cfg.threads ? n : pf->cfg.threads;
}

/*
 * Under qmu: starts threads while jobs wait that no idle thread can take
 * and the pool is below its target.  The pool only grows, to its target.
 * A thread that cannot start is logged; the pool goes on with the ones it
 * has.
 */
static void pool_grow(struct prefetch *pf)
{
	const unsigned target = pool_target(pf);
	uint64_t jobs = pf->nwrites;
	int rc;

	if (pf->stopping) /* prefetch_free joins the threads it saw */
		return;
	for (int k = 0; k < PF_NCLASS; k++)
		jobs += pf->q[k].len;
	while (pf->nthreads < target && jobs > pf->idle) {
		rc = pthread_create(&pf->threads[pf->nthreads], NULL, worker,
				    pf);
		if (rc) {
			log_warn("prefetch: cannot start thread %u of the "
				 "pool: %s",
				 pf->nthreads + 1, strerror(rc));
			return;
		}
		__atomic_store_n(&pf->nthreads, pf->nthreads + 1,
				 __ATOMIC_RELAXED);
		jobs--;
	}
}

/* Queues chunks [from, to] of f in class k; a full queue drops the rest.
 * @return how many were queued. */
static uint64_t enqueue(struct prefetch *pf, struct pf_file *f, uint64_t from,
			uint64_t to, enum pf_class k, uint64_t seq)
{
	struct queue *q = &pf->q[k];
	uint64_t queued = 0, dropped = 0;

	pthread_mutex_lock(&pf->qmu);
	for (uint64_t i = from; i <= to; i++) {
		if (q->len == q->cap) {
			dropped += to - i + 1;
			break;
		}
		file_ref(f);
		q->jobs[(q->head + q->len) % q->cap] =
		    (struct job){.f = f, .idx = i, .seq = seq};
		q->len++;
		queued++;
	}
	if (queued)
		pool_grow(pf);
	pthread_mutex_unlock(&pf->qmu);
	if (queued == 1)
		pthread_cond_signal(&pf->qcond);
	else if (queued)
		pthread_cond_broadcast(&pf->qcond);
	if (k == PF_HINT) {
		STAT_ADD(pf->stats.hint_queued, queued);
		STAT_ADD(pf->stats.hint_dropped, dropped);
	} else {
		STAT_ADD(pf->stats.ra_queued, queued);
		STAT_ADD(pf->stats.ra_dropped, dropped);
	}
	return queued;
}

/* Whether a hinted chunk needs no load: it is in memory, or the kernel has
 * had it whole (a later epoch in the same mount) and keeps such chunks. */
static bool needs_no_load(struct prefetch *pf, struct pf_file *f, uint64_t idx)
{
	bool kernel_has = kernel_had(f, idx);
	struct chunk_key key;

	if (kernel_has) {
		kernel_count(pf, false);
		kernel_has = kernel_keeps(pf);
	}
	if (!kernel_has) {
		const unsigned kernel =
		    __atomic_load_n(&pf->kernel_reads_cached, __ATOMIC_RELAXED);

		file_key(pf, f, idx, &key);
		/* A file of one chunk the store holds: stored raw, its open
		 * hands the cache file to the kernel (loaded here, it would
		 * be read and checked twice, for nothing); compressed, its
		 * reader loads it, faster than a pool thread would for it
		 * (as prefetch_ahead finds for any file the store holds).
		 * A chunk of a pack: its open hands the pack over. */
		if (!chunks_contains(pf->cc, &key) &&
		    !(f->nchunks == 1 ? (kernel & PF_KERNEL_ONE_CHUNK) &&
					    store_has(pf->st, &key)
				      : (kernel & PF_KERNEL_PACKS) &&
					    store_packed(pf->st, &key)))
			return false;
	}
	STAT_ADD(pf->stats.hint_cached, 1);
	return true;
}

int prefetch_hint(struct prefetch *pf, struct pf_file *f, uint64_t off,
		  uint64_t len)
{
	const uint64_t cs = pf->cfg.chunk_size;
	uint64_t seq, end, first, last;

	if (!pf->cfg.threads)
		return -EOPNOTSUPP;
	if (off >= f->size)
		return -ERANGE;
	end = len == 0 || f->size - off < len ? f->size : off + len;
	seq = spans_add(pf, f, off, end);
	__atomic_store_n(&f->hint_seq, seq, __ATOMIC_RELAXED);
	first = off / cs;
	last = (end - 1) / cs;
	/* A chunk in memory, or in the kernel's page cache, needs no job:
	 * waking a pool thread to find it there made a warm epoch's hints
	 * cost the mount as much CPU as its reads, and the loader's epoch
	 * twice its time. */
	while (first <= last && needs_no_load(pf, f, first))
		first++;
	while (last > first && needs_no_load(pf, f, last))
		last--;
	if (first <= last)
		enqueue(pf, f, first, last, PF_HINT, seq);
	return 0;
}

uint64_t prefetch_ahead(struct prefetch *pf, struct pf_file *f,
			uint64_t max_bytes)
{
	const uint64_t cs = pf->cfg.chunk_size;
	const uint64_t len = f->size < max_bytes ? f->size : max_bytes;
	uint64_t from, last, queued;
	struct chunk_key key;

	/* Directory read-ahead is read-ahead: --readahead 0 turns it off. */
	if (!pf->cfg.threads || !pf->window_cap || !len)
		return 0;
	/* A file the cache holds is loaded faster by its reader than handed
	 * to a pool thread and back: over 3,000 small cached files, the
	 * handoffs cost the mount 40% more CPU and the readers 25% of their
	 * speed, from the page cache and from disk alike. */
	file_key(pf, f, 0, &key);
	if (store_has(pf->st, &key))
		return len;
	last = (len - 1) / cs;
	pthread_mutex_lock(&f->mu);
	if (f->next_off >= f->size) {
		/* A pass over it ended: the next starts afresh. */
		f->next_off = f->ra_next = 0;
		f->window = 0;
		f->spilled = 0;
	}
	/* A reader of its own is under way, and its window does this. */
	from = f->next_off ? last + 1 : f->ra_next;
	if (from <= last)
		f->ra_next = last + 1;
	pthread_mutex_unlock(&f->mu);
	if (from > last)
		return len;
	/* Queued in calls that ask for more each time (a reader spilling
	 * into this file as it goes), each chunk once. */
	queued = enqueue(pf, f, from, last, PF_READAHEAD, 0);
	pthread_mutex_lock(&f->mu);
	if (!f->next_off) {
		/* Its reader's window starts where this one ends. */
		f->ra_next = from + queued;
		if (f->window < f->ra_next)
			f->window = f->ra_next < pf->window_cap
					? (uint32_t)f->ra_next
					: pf->window_cap;
	}
	pthread_mutex_unlock(&f->mu);
	return (from + queued) * cs < len ? (from + queued) * cs : len;
}

/*
 * Under f->mu.  Updates f's sequential state for a read of [off, end) and
 * says which
 * chunks to read ahead: [*from, *to], none when *from > *to.  Reads that
 * land within a chunk of where the last one ended count as sequential: the
 * kernel issues its read-ahead in parallel, slightly out of order.
 */
static void plan_readahead(struct prefetch *pf, struct pf_file *f, uint64_t off,
			   uint64_t end, uint64_t *from, uint64_t *to,
			   uint64_t *spill)
{
	const uint64_t cs = pf->cfg.chunk_size;
	const uint64_t last = (end - 1) / cs;
	const uint64_t conc = fetch_concurrency(pf->src->fetch) * RA_PER_CONC;
	const uint64_t stored = RA_STORE_BYTES / cs ? RA_STORE_BYTES / cs : 1;
	uint32_t cap = conc < pf->window_cap ? (uint32_t)conc : pf->window_cap;
	bool seq;

	if (__atomic_load_n(&f->from_store, __ATOMIC_RELAXED) && cap > stored)
		cap = (uint32_t)stored;

	*from = 1;
	*to = 0;
	seq = off <= f->next_off + cs && off + cs >= f->next_off;
	if (!seq) {
		f->window = 0;
		f->ra_next = 0;
		f->next_off = end;
		f->spilled = 0;
		return;
	}
	/* Each read that moves the reader on doubles the window: doubling
	 * per chunk entered would cost a chunk's first-byte latency for each
	 * step, so a large file's reader would wait half a second before the
	 * window covered the origin's bandwidth-delay product. */
	if (f->window == 0 || end > f->next_off) {
		f->window = f->window ? f->window * 2 : 1;
		if (f->window > cap)
			f->window = cap;
	}
	if (end > f->next_off)
		f->next_off = end;
	*from = f->ra_next > last + 1 ? f->ra_next : last + 1;
	*to = last + f->window;
	if (*to >= f->nchunks) {
		/* The window passes the end: what it has left may go to the
		 * next file, but no more than this reader has read of this
		 * one in order (`last` chunks): a reader that streams a file
		 * gets the next one started early and more as it goes on,
		 * one that reads files of two chunks whole in any order gets
		 * a chunk, a reader of one-chunk files nothing. */
		uint64_t over = *to - (f->nchunks - 1);

		if (over > last)
			over = last;
		if (over > f->spilled) {
			f->spilled = over;
			*spill = over * cs;
		}
		*to = f->nchunks - 1;
	}
	if (*from <= *to)
		f->ra_next = *to + 1;
}

void prefetch_read_done(struct prefetch *pf, struct pf_read *rd, bool served)
{
	for (unsigned i = 0; i < rd->n; i++)
		if (chunks_put_served(pf->cc, rd->span[i].c,
				      served ? rd->span[i].len : 0))
			kernel_has_it(rd->f, rd->first + i);
	rd->n = 0;
}

int prefetch_read(struct prefetch *pf, struct pf_file *f, uint64_t off,
		  size_t size, struct pf_read *rd)
{
	const uint64_t cs = pf->cfg.chunk_size;
	uint64_t end, first, last, ra_from, ra_to, hs, rs, reached;
	bool pending;
	int rc = 0;

	rd->n = 0;
	rd->bytes = 0;
	rd->spill = 0;
	STAT_ADD(pf->stats.reads, 1);
	if (off >= f->size || size == 0)
		return 0;
	if (f->sums &&
	    __atomic_load_n(&f->sums->verdict, __ATOMIC_RELAXED) == SUMS_BAD)
		return -EIO; /* logged when it was found */
	end = f->size - off < size ? f->size : off + size;
	first = off / cs;
	last = (end - 1) / cs;
	rd->f = f;
	rd->first = first;
	if (last - first + 1 > PF_MAX_SPANS) {
		log_error("%s%s: a read of %zu bytes spans more chunks than "
			  "one reply can carry",
			  pf->src->id, f->path, size);
		return -EINVAL;
	}

	/* One lock for the hint this read reaches (older ones are stale)
	 * and the sequential state; a CAS only when read_seq moves on. */
	hs = __atomic_load_n(&f->hint_seq, __ATOMIC_RELAXED);
	rs = __atomic_load_n(&pf->read_seq, __ATOMIC_RELAXED);
	pending = __atomic_load_n(&f->pending, __ATOMIC_RELAXED) != 0;
	reached = 0;
	ra_from = 1;
	ra_to = 0;
	if (pending || pf->window_cap) {
		pthread_mutex_lock(&f->mu);
		if (pending)
			reached = spans_reach(f, rs, off, end);
		if (pf->window_cap)
			plan_readahead(pf, f, off, end, &ra_from, &ra_to,
				       &rd->spill);
		pthread_mutex_unlock(&f->mu);
	}
	/* A hinted reader says itself what it reads next. */
	if (hs)
		rd->spill = 0;
	while (reached > rs &&
	       !__atomic_compare_exchange_n(&pf->read_seq, &rs, reached, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	/* Queue read-ahead first, so it overlaps this read's own loads. */
	if (ra_from <= ra_to)
		enqueue(pf, f, ra_from, ra_to, PF_READAHEAD, 0);

	for (uint64_t idx = first; idx <= last; idx++) {
		const uint64_t cstart = idx * cs;
		const uint64_t s = off > cstart ? off - cstart : 0;
		const uint64_t e =
		    (end < cstart + cs ? end : cstart + cs) - cstart;
		struct chunk_key key;
		struct chunk *c;
		bool owner, fetched = false;

		file_key(pf, f, idx, &key);
		kernel_lost_it(pf, f, idx);
		rc = chunks_get(pf->cc, &key, true, &c, &owner);
		/* The load it waited for failed (read-ahead that gave up,
		 * say): this reader asks again, once, on its own. */
		if (rc && rc != -ENOMEM)
			rc = chunks_get(pf->cc, &key, true, &c, &owner);
		if (rc) {
			rc = reader_errno(rc);
			goto fail;
		}
		if (owner) {
			rc = load_chunk(pf, f, idx, &key, c, &fetched);
			if (rc)
				goto fail;
		}
		if (fetched)
			STAT_ADD(pf->stats.demand_fetches, 1);
		if (hs)
			STAT_ADD(*(fetched ? &pf->stats.hint_misses
					   : &pf->stats.hint_hits),
				 1);
		if (c->len < e) {
			log_error("%s%s: chunk %llu holds %zu bytes, expected "
				  "at least %llu",
				  pf->src->id, f->path, (unsigned long long)idx,
				  c->len, (unsigned long long)e);
			chunks_put(pf->cc, c);
			rc = -EIO;
			goto fail;
		}
		rd->span[rd->n++] = (struct pf_span){
		    .c = c, .data = (const char *)c->data + s, .len = e - s};
		rd->bytes += e - s;
	}
	STAT_ADD(pf->stats.bytes_served, rd->bytes);
	return 0;
fail:
	prefetch_read_done(pf, rd, false);
	rd->bytes = 0;
	return rc;
}

int prefetch_open(struct prefetch *pf, const char *path, const char *version,
		  const char *digest, uint64_t size, int64_t mtime,
		  struct pf_file **out)
{
	struct pf_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->path = strdup(path);
	f->version = strdup(version ? version : "");
	if (!f->path || !f->version) {
		free(f->path);
		free(f->version);
		free(f);
		return -ENOMEM;
	}
	f->size = size;
	f->mtime = mtime;
	f->nchunks = (size + pf->cfg.chunk_size - 1) / pf->cfg.chunk_size;
	/* A bit per chunk; none kept for objects of more than WHOLE_MAX
	 * chunks (a listing may claim any size). */
	f->whole = &f->whole_inline;
	if (f->nchunks > 64)
		f->whole =
		    f->nchunks <= WHOLE_MAX
			? calloc((f->nchunks + 63) / 64, sizeof(uint64_t))
			: NULL;
	if (sums_open(f, digest)) {
		if (f->whole != &f->whole_inline)
			free(f->whole);
		free(f->path);
		free(f->version);
		free(f);
		return -ENOMEM;
	}
	f->refs = 1;
	f->spans_live = &pf->spans_live;
	pthread_mutex_init(&f->mu, NULL);
	STAT_ADD(pf->stats.files, 1);
	*out = f;
	return 0;
}

void prefetch_kernel_reads_cached(struct prefetch *pf, unsigned what)
{
	__atomic_store_n(&pf->kernel_reads_cached, pf->st ? what : 0,
			 __ATOMIC_RELAXED);
}

/* The keys of all of f's chunks, in a malloc'd array (per open of a
 * file of many chunks, not per read).  @return 0, -ENOTSUP, -ENOMEM. */
static int file_keys(struct prefetch *pf, struct pf_file *f,
		     struct chunk_key **out)
{
	struct chunk_key *keys;

	*out = NULL;
	if (f->nchunks > UINT32_MAX)
		return -ENOTSUP;
	keys = malloc(f->nchunks * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (uint64_t i = 0; i < f->nchunks; i++)
		file_key(pf, f, i, &keys[i]);
	*out = keys;
	return 0;
}

int prefetch_open_whole(struct prefetch *pf, struct pf_file *f,
			struct store_file_id *checked, int *fd)
{
	struct chunk_key key, *keys;
	size_t len = 0;
	int rc;

	if (!pf->st || f->nchunks == 0)
		return -ENOTSUP;
	if (f->nchunks == 1) {
		file_key(pf, f, 0, &key);
		rc = store_open_raw(pf->st, &key, f->size, checked, fd, &len);
		if (!rc && len != f->size) {
			close(*fd);
			rc = -ENOTSUP;
		}
		return rc;
	}
	/* A pack is made apart (prefetch_pack_whole): making it here would
	 * hold this open for a copy of the whole file. */
	file_key(pf, f, 0, &key);
	if (!store_packed(pf->st, &key))
		return -EAGAIN;
	rc = file_keys(pf, f, &keys);
	if (!rc)
		rc =
		    store_open_object(pf->st, keys, (uint32_t)f->nchunks,
				      pf->cfg.chunk_size, f->size, checked, fd);
	free(keys);
	return rc;
}

bool prefetch_whole_unchanged(struct prefetch *pf, struct pf_file *f,
			      const struct store_file_id *checked)
{
	struct chunk_key key;

	if (!pf->st || f->nchunks != 1)
		return false;
	file_key(pf, f, 0, &key);
	return store_raw_unchanged(pf->st, &key, checked);
}

int prefetch_pack_whole(struct prefetch *pf, struct pf_file *f)
{
	struct chunk_key *keys = NULL;
	int rc;

	if (!pf->st || f->nchunks < 2)
		return -ENOTSUP;
	writes_flush(pf, f);
	rc = file_keys(pf, f, &keys);
	if (!rc)
		rc = store_pack_object(pf->st, keys, (uint32_t)f->nchunks,
				       pf->cfg.chunk_size, f->size);
	free(keys);
	return rc;
}

void prefetch_close(struct prefetch *pf, struct pf_file *f)
{
	if (!f)
		return;
	__atomic_store_n(&f->closed, true, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&pf->stats.files, 1, __ATOMIC_RELAXED);
	file_unref(f);
}

int prefetch_new(const struct prefetch_config *cfg, struct source *src,
		 struct store *st, struct chunk_cache *cc,
		 struct prefetch **out)
{
	struct prefetch *pf;
	uint64_t cap, inflight;
	int rc;

	if (cfg->chunk_size < PF_MIN_CHUNK || !src || !src->fetch)
		return -EINVAL;
	pf = calloc(1, sizeof(*pf));
	if (!pf)
		return -ENOMEM;
	pf->cfg = *cfg;
	pf->src = src;
	pf->st = st;
	pf->cc = cc;
	cap = cfg->threads ? cfg->readahead_bytes / cfg->chunk_size : 0;
	/* A window of more chunks than the pool may load at once (half the
	 * memory cache) has the chunks it loaded first evicted before the
	 * reader gets to them, and loaded again. */
	inflight =
	    cfg->inflight_bytes ? cfg->inflight_bytes : PF_INFLIGHT_DEFAULT;
	if (cap > inflight / cfg->chunk_size)
		cap = inflight / cfg->chunk_size;
	pf->window_cap = cap > 1024 ? 1024 : (uint32_t)cap;
	if (cfg->readahead_bytes && cfg->threads && !pf->window_cap)
		pf->window_cap = 1;
	{
		const long n = sysconf(_SC_NPROCESSORS_ONLN);

		pf->ncpu = n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
	}
	pthread_mutex_init(&pf->qmu, NULL);
	pthread_cond_init(&pf->qcond, NULL);
	pthread_cond_init(&pf->wcond, NULL);
	for (int k = 0; k < PF_NCLASS; k++) {
		pf->q[k].cap = k == PF_HINT ? HINT_CAP : QUEUE_CAP;
		pf->q[k].jobs = calloc(pf->q[k].cap, sizeof(struct job));
		if (!pf->q[k].jobs) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if (!pf->cfg.inflight_bytes)
		pf->cfg.inflight_bytes = PF_INFLIGHT_DEFAULT;
	/* Threads start as work comes (pool_grow), up to cfg->threads; the
	 * pool serves hints too, so it exists without read-ahead. */
	pf->threads =
	    calloc(cfg->threads ? cfg->threads : 1, sizeof(pthread_t));
	if (!pf->threads) {
		rc = -ENOMEM;
		goto fail;
	}
	*out = pf;
	return 0;
fail:
	prefetch_free(pf);
	return rc;
}

void prefetch_free(struct prefetch *pf)
{
	struct queue *q;
	unsigned n;

	if (!pf)
		return;
	pthread_mutex_lock(&pf->qmu);
	/* atomic: load_end reads it unlocked */
	__atomic_store_n(&pf->stopping, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&pf->qcond);
	/* No thread starts once stopping is set (job_end). */
	n = pf->nthreads;
	pthread_mutex_unlock(&pf->qmu);
	for (unsigned i = 0; i < n; i++)
		pthread_join(pf->threads[i], NULL);
	/* Queued while no thread could start: stored now, before the store
	 * closes. */
	while (pf->writes) {
		struct write *w = pf->writes;

		pf->writes = w->next;
		write_run(pf, w, false);
	}
	while ((q = queue_first(pf)))
		file_unref(queue_take(q).f);
	for (int k = 0; k < PF_NCLASS; k++)
		free(pf->q[k].jobs);
	free(pf->threads);
	pthread_cond_destroy(&pf->qcond);
	pthread_cond_destroy(&pf->wcond);
	pthread_mutex_destroy(&pf->qmu);
	free(pf);
}

void prefetch_get_stats(struct prefetch *pf, struct prefetch_stats *out)
{
	out->reads = STAT_GET(pf->stats.reads);
	out->bytes_served = STAT_GET(pf->stats.bytes_served);
	out->chunks_loaded = STAT_GET(pf->stats.chunks_loaded);
	out->chunks_fetched = STAT_GET(pf->stats.chunks_fetched);
	out->chunk_errors = STAT_GET(pf->stats.chunk_errors);
	out->ra_queued = STAT_GET(pf->stats.ra_queued);
	out->ra_loaded = STAT_GET(pf->stats.ra_loaded);
	out->ra_dropped = STAT_GET(pf->stats.ra_dropped);
	out->ra_behind = STAT_GET(pf->stats.ra_behind);
	out->files = STAT_GET(pf->stats.files);
	out->demand_fetches = STAT_GET(pf->stats.demand_fetches);
	out->hint_queued = STAT_GET(pf->stats.hint_queued);
	out->hint_loaded = STAT_GET(pf->stats.hint_loaded);
	out->hint_cached = STAT_GET(pf->stats.hint_cached);
	out->hint_dropped = STAT_GET(pf->stats.hint_dropped);
	out->hint_stale = STAT_GET(pf->stats.hint_stale);
	out->hint_reached = __atomic_load_n(&pf->read_seq, __ATOMIC_RELAXED);
	out->hint_hits = STAT_GET(pf->stats.hint_hits);
	out->hint_misses = STAT_GET(pf->stats.hint_misses);
	out->kernel_had = STAT_GET(pf->kernel_hinted);
	out->kernel_lost = STAT_GET(pf->kernel_lost);
	out->inflight = STAT_GET(pf->inflight);
	out->inflight_max = STAT_GET(pf->stats.inflight_max);
	out->inflight_cap = pf->cfg.inflight_bytes;
	out->threads = __atomic_load_n(&pf->nthreads, __ATOMIC_RELAXED);
	out->threads_cap = pool_target(pf);
	out->loads = __atomic_load_n(&pf->loads, __ATOMIC_RELAXED);
	out->loads_max = STAT_GET(pf->stats.loads_max);
	out->loads_cap = loads_cap(pf);
	out->sums_checked = STAT_GET(pf->stats.sums_checked);
	out->sums_bad = STAT_GET(pf->stats.sums_bad);
	out->sums_repaired = STAT_GET(pf->stats.sums_repaired);
	out->sums_failed = STAT_GET(pf->stats.sums_failed);
	out->sums_etag_not_md5 = STAT_GET(pf->stats.sums_etag_not_md5);
	out->sums_unchecked = STAT_GET(pf->stats.sums_unchecked);
	pthread_mutex_lock(&pf->qmu);
	out->hint_queue = pf->q[PF_HINT].len;
	pthread_mutex_unlock(&pf->qmu);
	out->hint_queue_cap = HINT_CAP;
}
