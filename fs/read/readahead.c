/*
 * Read-ahead planning: a sequential reader's window (plan_readahead, under
 * the file's lock on each read), directory read-ahead (prefetch_ahead),
 * hints (prefetch_hint), and what the kernel's page cache holds, which
 * hints and read-ahead skip (the per-chunk bits are read_i.h's inline
 * kernel_*, as prefetch_read touches them per chunk).  It queues chunks
 * for the pool (queue.c) and never loads one itself.
 */
#include "config.h"

#include "read_i.h"

#include <stdint.h>

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

bool prefetch_kernel_had(const struct pf_file *f, uint64_t idx)
{
	return kernel_had(f, idx);
}

void prefetch_kernel_reads_cached(struct prefetch *pf, unsigned what)
{
	__atomic_store_n(&pf->kernel_reads_cached, pf->st ? what : 0,
			 __ATOMIC_RELAXED);
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
void plan_readahead(struct prefetch *pf, struct pf_file *f, uint64_t off,
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
