/*
 * The pool's queues and bounds: jobs queued by class (enqueue), taken in
 * priority order (queue_first, queue_take), their room handed on when
 * they end (job_end), and the threads started as work comes (pool_grow,
 * through struct prefetch.worker, which prefetch_new sets to pool.c's
 * pool_worker: pool.c, above, calls down into here, and nothing here
 * calls up into it).
 */
#include "config.h"

#include "log.h"
#include "read_i.h"

#include <string.h>

/* Pool threads beyond one per core: for loads from the store that wait
 * on the disk. */
#define POOL_SPARE 2

/* Under qmu: the highest class with a job, or NULL. */
struct queue *queue_first(struct prefetch *pf)
{
	for (int k = 0; k < PF_NCLASS; k++)
		if (pf->q[k].len)
			return &pf->q[k];
	return NULL;
}

/* Under qmu: takes the first job of q (not empty). */
struct job queue_take(struct queue *q)
{
	const struct job j = q->jobs[q->head];

	q->head = (q->head + 1) % q->cap;
	q->len--;
	return j;
}

/* A pool job of `want` bytes ended: its room goes to the next. */
void job_end(struct prefetch *pf, uint64_t want)
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

/* The threads the pool should have: one per core and a few more, for
 * loads from the store that wait on the disk, within the configured
 * ceiling.  Loads from the origin hold no thread. */
unsigned pool_target(const struct prefetch *pf)
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
void pool_grow(struct prefetch *pf)
{
	const unsigned target = pool_target(pf);
	uint64_t jobs = pf->nwrites;
	int rc;

	if (pf->stopping) /* prefetch_free joins the threads it saw */
		return;
	for (int k = 0; k < PF_NCLASS; k++)
		jobs += pf->q[k].len;
	while (pf->nthreads < target && jobs > pf->idle) {
		rc = pthread_create(&pf->threads[pf->nthreads], NULL,
				    pf->worker, pf);
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
uint64_t enqueue(struct prefetch *pf, struct pf_file *f, uint64_t from,
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
