/*
 * The pool's threads (pool_worker): a thread takes loads that landed from
 * the origin, then queued jobs while the bounds allow (loads_cap, memory),
 * then deferred store writes.  A job's chunk is loaded from the store on
 * the thread, or sent to the origin (load_submit) and finished by a pool
 * thread when it lands (load_done, load_end).  Its queues, bounds and
 * growth are queue.c's, below, so that the write-back can wake the pool
 * without calling up into here.
 */
#include "config.h"

#include "log.h"
#include "read_i.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Pool jobs under way beyond the fetch engine's concurrency: loads also
 * spend time in the store and in the memory cache, off the wire. */
#define POOL_SLACK 8

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
unsigned loads_cap(const struct prefetch *pf)
{
	const unsigned n = fetch_concurrency(pf->src->fetch) + POOL_SLACK;

	return n < pf->cfg.threads ? n : pf->cfg.threads;
}

/* A pool thread: loads that landed first, then queued jobs, then store
 * writes; it ends when the pool stops and all is done. */
void *pool_worker(void *arg)
{
	struct prefetch *pf = arg;
	struct queue *q;
	struct pf_write *w;
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
