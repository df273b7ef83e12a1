/*
 * A read of a file: prefetch_read and its waits, prefetch_read_done (see
 * prefetch.h for the contract; the rest of the read path is in the other
 * files of fs/read/, read_i.h says which).
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

#include "log.h"
#include "read_i.h"

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
