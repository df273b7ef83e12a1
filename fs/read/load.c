/*
 * Loading one chunk: from the chunk store (mapped, or read and
 * decompressed into the chunk's buffer), else the origin's answer checked
 * (verify.c), published and stored (writeback.c).  A reader's load waits
 * on its own thread (load_chunk); the pool's use the same steps
 * (pool.c).
 */
#include "config.h"

#include "log.h"
#include "read_i.h"

#include <string.h>
#include <sys/mman.h>

/*
 * The origin's answer for ld's chunk is in: checks it, publishes the
 * chunk and stores it (or the other way round, see below), or fails it
 * (dropping our reference).  The chunk
 * must be exactly as long as the object's size implies: a short or long
 * body is an error, never short data inside a file.
 */
int load_landed(struct load *ld)
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
int load_from_store(struct load *ld)
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
int load_chunk(struct prefetch *pf, struct pf_file *f, uint64_t idx,
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
