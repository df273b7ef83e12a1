#ifndef WHARF_FS_READ_I_H
#define WHARF_FS_READ_I_H
/*
 * The read path's internals, shared by the files of fs/read/ (the front
 * includes prefetch.h alone): the state (struct prefetch, pf_file, sums,
 * load, the queues and writes), the few helpers a read calls per chunk,
 * inline as they were when the read path was one file, and each file's
 * functions that files above it call.  The files, from the top down (a
 * file calls only files below it):
 *   lifecycle.c (set up, torn down, counters), whole.c (whole-file opens
 *   for passthrough), read.c (a read and its waits)
 *   -> readahead.c (the reader's window, directory read-ahead, hints)
 *   -> pool.c (the pool's threads: jobs, loads at the origin)
 *   -> load.c (one chunk: from the store, or the origin's answer)
 *   -> writeback.c (deferred store writes) -> file.c (a file's state)
 *   -> queue.c (queues, bounds, growth) -> verify.c (origin checksums)
 *   -> request.c (one chunk's GET) -> spans.c (hint spans)
 *   -> chunks.c (the memory cache)
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "checksum.h"
#include "prefetch.h"

/* Hinted chunks queued at most: 24 bytes each, so 384 KiB whatever the
 * number of objects hinted; more are dropped and counted. */
#define HINT_CAP 16384
/* A hint this many hints behind the newest one a reader has reached is
 * stale: the reader has passed it (or will fetch it itself sooner).  The
 * slack covers readers that run a few batches out of order. */
#define HINT_SLACK 256
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
struct pf_write {
	struct chunk *c;
	struct pf_file *f;
	uint64_t idx;
	struct pf_write *next;
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
	/* pool_worker: the pool threads' function, set once by prefetch_new
	 * (pool_grow, below the pool, starts them without calling up). */
	void *(*worker)(void *);
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
	struct pf_write *writes, *writes_tail;
	uint64_t write_bytes;
	unsigned nwrites, writing;
	/* Writes under way (under qmu), and threads waiting in writes_flush
	 * for one of them to end (wcond). */
	struct pf_write *running;
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

/* ---- per chunk of a read: inline, as in one file ---- */

static inline void file_ref(struct pf_file *f)
{
	__atomic_fetch_add(&f->refs, 1, __ATOMIC_RELAXED);
}

static inline size_t chunk_len(const struct prefetch *pf,
			       const struct pf_file *f, uint64_t idx)
{
	uint64_t start = idx * pf->cfg.chunk_size;

	assert(start < f->size);
	return f->size - start < pf->cfg.chunk_size ? f->size - start
						    : pf->cfg.chunk_size;
}

static inline void file_key(const struct prefetch *pf, const struct pf_file *f,
			    uint64_t idx, struct chunk_key *key)
{
	store_key(key, pf->src->id, f->path, f->version, f->size, f->mtime,
		  pf->cfg.chunk_size, idx);
}

/* Errors a reader may see: the origin's refusals, else EIO. */
static inline int reader_errno(int rc)
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

static inline bool kernel_had(const struct pf_file *f, uint64_t idx)
{
	return f->whole &&
	       __atomic_load_n(&f->whole[idx / 64], __ATOMIC_RELAXED) &
		   (1ull << (idx % 64));
}

/* Notes that the kernel has had chunk idx whole.  A plain load first: the
 * read path writes the shared word only when the bit changes. */
static inline void kernel_has_it(struct pf_file *f, uint64_t idx)
{
	if (f->whole && !kernel_had(f, idx))
		__atomic_fetch_or(&f->whole[idx / 64], 1ull << (idx % 64),
				  __ATOMIC_RELAXED);
}

static inline void halve(uint64_t *n)
{
	__atomic_store_n(n, __atomic_load_n(n, __ATOMIC_RELAXED) / 2,
			 __ATOMIC_RELAXED);
}

/* Counts a hint (lost: a read) of a chunk the kernel had whole, halving
 * both counts past 2^16 so that the judgement follows the page cache as
 * memory comes and goes (racy halving only blurs a rough estimate). */
static inline void kernel_count(struct prefetch *pf, bool lost)
{
	uint64_t *n = lost ? &pf->kernel_lost : &pf->kernel_hinted;

	if (__atomic_add_fetch(n, 1, __ATOMIC_RELAXED) < (1u << 16))
		return;
	halve(&pf->kernel_hinted);
	halve(&pf->kernel_lost);
}

/* A read of chunk idx: if the kernel had it whole, it lost it since
 * (counted once: the bit goes until it has the chunk whole again). */
static inline void kernel_lost_it(struct prefetch *pf, struct pf_file *f,
				  uint64_t idx)
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
static inline bool kernel_keeps(const struct prefetch *pf)
{
	return __atomic_load_n(&pf->kernel_lost, __ATOMIC_RELAXED) * 8 <
	       __atomic_load_n(&pf->kernel_hinted, __ATOMIC_RELAXED) + 64;
}

/* ---- readahead.c ---- */

/* Under f->mu: a read of [off, end) moves f's sequential state on;
 * [*from, *to]: the chunks to read ahead (none when *from > *to);
 * *spill: bytes of the window past the end of f (pf_read.spill). */
void plan_readahead(struct prefetch *pf, struct pf_file *f, uint64_t off,
		    uint64_t end, uint64_t *from, uint64_t *to,
		    uint64_t *spill);

/* ---- pool.c ---- */

/* The function of every pool thread (struct prefetch.worker). */
void *pool_worker(void *arg);

/* Pool loads under way at most now: the fetch engine's concurrency
 * plus slack, within the configured ceiling. */
unsigned loads_cap(const struct prefetch *pf);

/* ---- load.c ---- */

/* The origin's answer for ld's chunk is in: checked, published and
 * stored, or the chunk failed.  @return 0 or -errno (reader_errno). */
int load_landed(struct load *ld);

/* Fills ld's chunk from the store when it holds it, and publishes it.
 * @return 0, 1 (not in the store: fetch into ld->buf), or -errno. */
int load_from_store(struct load *ld);

/* A reader's load of chunk c (idx of f, which it owns): the store,
 * else the origin, waiting.  *fetched: a request went out.
 * @return 0, or -errno with the chunk failed. */
int load_chunk(struct prefetch *pf, struct pf_file *f, uint64_t idx,
	       const struct chunk_key *key, struct chunk *c,
	       bool *fetched);

/* ---- writeback.c ---- */

/* Writes chunk idx of f to the store now; failures are logged. */
void store_chunk(struct prefetch *pf, const struct pf_file *f,
		 uint64_t idx, const void *buf, size_t len,
		 const struct chunk_key *key);

/* Stores w's chunk and frees w; running: w is in pf->running. */
void write_run(struct prefetch *pf, struct pf_write *w, bool running);

/* Writes f's waiting chunks on this thread and waits for those under
 * way (before f's chunk files are packed). */
void writes_flush(struct prefetch *pf, struct pf_file *f);

/* Hands the store write of c (idx of f, just published) to a pool
 * thread, or makes it here when the pool cannot take it. */
void store_later(struct prefetch *pf, struct pf_file *f, uint64_t idx,
		 struct chunk *c);

/* ---- file.c ---- */

/* Drops a reference to f; the last one frees it. */
void file_unref(struct pf_file *f);

/* ---- queue.c ---- */

/* Under qmu: the highest class with a job, or NULL. */
struct queue *queue_first(struct prefetch *pf);

/* Under qmu: takes the first job of q (not empty). */
struct job queue_take(struct queue *q);

/* A pool job of `want` bytes ended: its room goes to the next. */
void job_end(struct prefetch *pf, uint64_t want);

/* The threads the pool should have (one per core and a few). */
unsigned pool_target(const struct prefetch *pf);

/* Under qmu: starts pool threads (pf->worker) while jobs wait that no
 * idle thread can take, up to pool_target. */
void pool_grow(struct prefetch *pf);

/* Queues chunks [from, to] of f in class k (seq: a hint's number);
 * a full queue drops the rest.  @return how many were queued. */
uint64_t enqueue(struct prefetch *pf, struct pf_file *f, uint64_t from,
		 uint64_t to, enum pf_class k, uint64_t seq);

/* ---- verify.c ---- */

/* ld's chunk landed from the origin: checked (an object of one
 * chunk whole), and f's gate taken.  @return 0 (gate held) or -errno
 * (not held). */
int sums_landed(struct load *ld);

/* Lets go of the gate sums_landed or load_from_store took, if held. */
void sums_leave(struct load *ld);

/* Chunk idx of f is in (buf: its bytes, or NULL: in the store).
 * @return whether f's check is now due (sums_check). */
bool sums_got(struct prefetch *pf, struct pf_file *f, uint64_t idx,
	      void *buf);

/* Checks all of f against the origin's checksum, fetching it again
 * from the origin itself on a mismatch.  @return 0 or -EIO. */
int sums_check(struct prefetch *pf, struct pf_file *f, uint64_t idx,
	       void *buf);

/* Sets up f's check when digest names the origin's checksum.
 * @return 0 or -ENOMEM. */
int sums_open(struct pf_file *f, const char *digest);

/* ---- request.c ---- */

/* Prepares ld's ranged GET of its chunk into ld->buf (background: a
 * pool load).  @return 0, or prepare_read's error (logged). */
int load_prepare(struct load *ld, bool background);

/* After ld's request: whether to make it again, once, with fresh
 * credentials (releases ld->rd either way). */
bool load_renew(struct load *ld);

/* Fetches chunk idx of f from the origin itself (no site cache) into
 * buf, want bytes.  @return 0 or -errno (logged). */
int fetch_direct(struct prefetch *pf, struct pf_file *f, uint64_t idx,
		 void *buf, size_t want);

/* ---- spans.c ---- */

/* Under f->mu: drops f's spans readers have passed (rs: the newest
 * hint reached) by more than HINT_SLACK. */
void spans_trim(struct pf_file *f, uint64_t rs);

/* Numbers a hint of bytes [off, end) of f and remembers it (within
 * bounds).  @return its number. */
uint64_t spans_add(struct prefetch *pf, struct pf_file *f, uint64_t off,
		   uint64_t end);

/* Under f->mu: the hint a read of [off, end) reaches (0: none); the
 * spans it finishes go. */
uint64_t spans_reach(struct pf_file *f, uint64_t rs, uint64_t off,
		     uint64_t end);

#endif
