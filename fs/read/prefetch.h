#ifndef WHARF_FS_PREFETCH_H
#define WHARF_FS_PREFETCH_H
/*
 * prefetch: the read path of a mount and its read-ahead.
 *
 * A read of [off, off+size) of a file takes a reference on each chunk
 * it touches (chunks_get, waiting for a load in flight), loads the chunks it
 * owns (chunk store, else the origin: one ranged GET straight into the
 * chunk's buffer), and hands back spans that point into chunk memory; the
 * caller replies from them and then calls prefetch_read_done().
 *
 * Read-ahead: each file watches whether it is read sequentially; if it
 * is, a window of 1, 2, 4, ... chunks (doubling with each read that moves
 * the reader on) beyond the read is queued for a pool of threads, which
 * load chunks nobody else is loading (chunks_get without waiting), so
 * nothing is fetched twice.  The window is capped by the
 * configured bytes and by twice the fetch engine's concurrency (what its
 * controller lets run at once), so that a sequential reader keeps the
 * origin as busy as the controller allows.  The queue has priority
 * classes; demand reads never queue (they load on the reader's own
 * thread), hinted chunks come before read-ahead ones.
 *
 * The pool: a job (a chunk to load) is taken while the loads under way
 * stay within the fetch engine's concurrency plus a few (and the
 * configured ceiling) and their memory within inflight_bytes, each load
 * counted at its chunk's length (a small object's own size).  A chunk in
 * the store is loaded on the pool thread; one that must come from the
 * origin is submitted to the fetch engine (fetch_submit) and holds no
 * thread until it lands, when a pool thread checks and publishes it; its
 * store write is a later pool job (see load_landed).  So the pool has one thread per core and a few more, and it is the
 * host's controller, not a thread count, that sets how much goes to the
 * origin at once (the engine holds background requests until the
 * controller has room).  Queued jobs hold no buffers; a full queue drops
 * read-ahead.
 *
 * Call order: prefetch_new -> (prefetch_open -> (prefetch_read ->
 * prefetch_read_done)* -> prefetch_close)* -> prefetch_free.  A pf_file
 * may be shared by any number of readers and threads (the mount keeps one
 * per inode).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunks.h"
#include "compiler.h"
#include "source.h"
#include "store.h"

/* Smallest chunk size allowed: with 1 MiB kernel reads a read spans at most
 * PF_MAX_SPANS chunks. */
#define PF_MIN_CHUNK (64u << 10)
#define PF_MAX_READ (1u << 20)
#define PF_MAX_SPANS (PF_MAX_READ / PF_MIN_CHUNK + 2)

/* Queue classes, highest priority first.  Demand reads do not queue. */
enum pf_class {
	PF_HINT,      /* chunks a loader said it will read next (later) */
	PF_READAHEAD, /* sequential read-ahead */
	PF_NCLASS
};

/* Bytes the pool may be loading at once unless told. */
#define PF_INFLIGHT_DEFAULT (256ull << 20)

struct prefetch_config {
	uint32_t chunk_size;	  /* >= PF_MIN_CHUNK */
	uint64_t readahead_bytes; /* window cap; 0 turns read-ahead off */
	unsigned threads;	  /* ceiling on pool loads at once and on
				   * pool threads; 0: no pool (no
				   * read-ahead, no hints) */
	uint64_t inflight_bytes;  /* bound on bytes being loaded by the
				   * pool; 0: PF_INFLIGHT_DEFAULT */
};

struct prefetch;
struct pf_file;

/* Sets up the pool (its threads start with the first jobs).  The source
 * (with its fetch engine), store and chunk cache must outlive it.
 * @return 0, -EINVAL (bad config, no source), -ENOMEM. */
int prefetch_new(const struct prefetch_config *cfg, struct source *src,
		 struct store *st, struct chunk_cache *cc,
		 struct prefetch **out) WHARF_CHECK;
/* Stops the pool (jobs still queued are dropped; chunks published but not
 * yet stored are stored first) and frees it. */
void prefetch_free(struct prefetch *pf);

/* A file's read state: copies path and version.  digest: the origin's
 * checksum of the object, "ALGO:HEX" (checksum.h), or NULL or "": its
 * bytes are checked against it once they are all in (verify.c says
 * when, and what a mismatch does).  @return 0 or -ENOMEM. */
int prefetch_open(struct prefetch *pf, const char *path, const char *version,
		  const char *digest, uint64_t size, int64_t mtime,
		  struct pf_file **out) WHARF_CHECK;
/*
 * Opens the cache file that holds all of f's bytes and nothing else,
 * verified unless it is the file *checked names: for passthrough.h.  A
 * file of one chunk is its chunk file (stored raw, its header beside it:
 * store_open_raw); a file of many is a pack of its chunks
 * (store_open_object), once prefetch_pack_whole made it.  No origin
 * request is made.
 * @return 0 with *fd (the caller closes it); -ENOENT (not all cached);
 * -EAGAIN (many chunks, no pack yet); -ENOTSUP (compressed, no store, or
 * a format 1 file); -EBADMSG (a cached chunk was corrupt and is removed);
 * -EIO; -ENOMEM.
 */
int prefetch_open_whole(struct prefetch *pf, struct pf_file *f,
			struct store_file_id *checked, int *fd) WHARF_CHECK;
/* Whether f, a file of one chunk, is still held by the very file
 * prefetch_open_whole last opened and checked (*checked): one stat. */
bool prefetch_whole_unchanged(struct prefetch *pf, struct pf_file *f,
			      const struct store_file_id *checked);
/* Makes the pack of f, a file of many chunks all in the store and raw, if
 * it has none (a copy of the whole file: run it off the read path).  Its
 * chunks' store writes still waiting are made first, on this thread.
 * @return 0, or store_pack_object's errors. */
int prefetch_pack_whole(struct prefetch *pf, struct pf_file *f) WHARF_CHECK;
/* Says which opens of files the store holds whole and raw are handed to
 * the kernel (prefetch_open_whole, passthrough.h; PF_KERNEL_* flags, 0:
 * none): hints then load nothing for such files of one chunk the store
 * holds, or for chunks in a pack, as their reader never asks the mount
 * for their bytes (or, for a compressed chunk, loads it itself). */
enum {
	PF_KERNEL_ONE_CHUNK = 1, /* files of one raw chunk */
	PF_KERNEL_PACKS = 2	 /* files of many, in packs */
};
void prefetch_kernel_reads_cached(struct prefetch *pf, unsigned what);
/* Whether the kernel had all of chunk idx of f from this mount's reads
 * (its page cache of the file, unless memory pressure took it since): an
 * open with keep_cache then reads it without a request. */
bool prefetch_kernel_had(const struct pf_file *f, uint64_t idx);
/* The file may still be referenced by queued jobs; it is freed after them. */
void prefetch_close(struct prefetch *pf, struct pf_file *f);

struct pf_span {
	struct chunk *c;  /* referenced until prefetch_read_done */
	const void *data; /* into c's memory */
	size_t len;
};

struct pf_read {
	struct pf_span span[PF_MAX_SPANS];
	unsigned n;
	size_t bytes; /* sum of span lengths: short only at end of file */
	/* A sequential reader's read-ahead window passes the end of the
	 * file by this many bytes (more than at its last read): the caller
	 * may spend them on the file it will read next. */
	uint64_t spill;
	struct pf_file *f; /* the file read, and its chunk in span[0] */
	uint64_t first;
};

/*
 * Reads [off, off+size) (size <= PF_MAX_READ) as spans into chunk memory.
 * @return 0 (rd->bytes may be less than size at the end of the file, 0
 * past it), or -ENOENT/-EACCES/-EIO (the origin refused, or a chunk came
 * back with the wrong length), -ENOMEM; on error no reference is held and
 * a log line names the object, the chunk and what happened.
 */
int prefetch_read(struct prefetch *pf, struct pf_file *f, uint64_t off,
		  size_t size, struct pf_read *rd) WHARF_CHECK;
/* Drops the references of a successful prefetch_read; served: the spans
 * went to the kernel (the reply was taken), so chunks it now has whole
 * can go (chunks_put_served). */
void prefetch_read_done(struct prefetch *pf, struct pf_read *rd, bool served);

/*
 * A hint: a reader will read [off, off+len) of f (len 0: to the end) after
 * the ranges hinted before it.  Queues its chunks in the PF_HINT class
 * without waiting for anything; the pool loads them in hint order unless
 * they are cached, being loaded, or stale (a reader has already reached a
 * hint more than 256 later: the oldest pending hint whose bytes a read
 * touches is the one it reaches).  A full queue drops them (counted).
 * @return 0, -ERANGE (off past the end), -EOPNOTSUPP (no pool).
 */
int prefetch_hint(struct prefetch *pf, struct pf_file *f, uint64_t off,
		  uint64_t len) WHARF_CHECK;

/*
 * Directory read-ahead: a reader is about to open f (it read the files
 * before it in listing order).  Queues f's first chunks, covering at most
 * max_bytes, in the PF_READAHEAD class, unless the cache on disk holds f's
 * first chunk: its reader then loads it.  Calls for the same f queue
 * only what earlier ones did not, and none once f's own reader has
 * started; that reader's window goes on from the chunks queued.
 * @return the bytes queued or found cached (0 when the queue is full or
 * there is no pool).
 */
uint64_t prefetch_ahead(struct prefetch *pf, struct pf_file *f,
			uint64_t max_bytes);

struct prefetch_stats {
	uint64_t reads;		 /* prefetch_read calls */
	uint64_t bytes_served;	 /* bytes handed to readers */
	uint64_t chunks_loaded;	 /* loads done (store or origin) */
	uint64_t chunks_fetched; /* of which from the origin */
	uint64_t chunk_errors;	 /* loads that failed, but for the pool's
				  * that gave up (origin.gave_up) */
	uint64_t ra_queued, ra_loaded, ra_dropped;
	uint64_t ra_behind;	 /* read-ahead the kernel had had whole */
	uint64_t files;		 /* pf_files alive */
	uint64_t demand_fetches; /* chunks a reader fetched from the origin */
	/* Hints: chunks queued, loaded by the pool, found cached or in
	 * flight, dropped (queue full), dropped as stale (the reader had
	 * passed them); demand chunk reads of hinted files that found the
	 * chunk loaded or loading (hits) or fetched it themselves (misses). */
	uint64_t hint_queued, hint_loaded, hint_cached, hint_dropped,
	    hint_stale, hint_hits, hint_misses;
	uint64_t hint_queue, hint_queue_cap; /* jobs queued now, most */
	/* Hints of chunks the kernel had had whole, and reads of such
	 * chunks (it had lost them): the first are not loaded while the
	 * second stay under 1 in 8 (decaying counts). */
	uint64_t kernel_had, kernel_lost;
	/* The newest hint a read has reached (hints count from 1 in the
	 * order they came): the pool drops hints far behind it. */
	uint64_t hint_reached;
	/* Bytes the pool is loading now, the most seen, and the bound. */
	uint64_t inflight, inflight_max, inflight_cap;
	uint64_t threads, threads_cap; /* pool threads started, ceiling */
	/* Pool loads under way now (from the store on a pool thread, or at
	 * the origin on no thread), the most seen, and the bound now: the
	 * fetch engine's concurrency plus a few, within --threads. */
	uint64_t loads, loads_max, loads_cap;
	/* Origin checksums: objects checked whole; objects (or chunks
	 * fetched again) that did not match; of those, matched once
	 * fetched again from the origin itself; still bad (EIO); S3 ETags
	 * found to be no MD5 (served as the origin sent them); objects not
	 * checked (a chunk no longer cached when the last came). */
	uint64_t sums_checked, sums_bad, sums_repaired, sums_failed;
	uint64_t sums_etag_not_md5, sums_unchecked;
};
void prefetch_get_stats(struct prefetch *pf, struct prefetch_stats *out);

#endif
