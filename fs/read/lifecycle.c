/*
 * The read path's life: set up (prefetch_new, which also ties the pool's
 * threads to its queues), stopped (prefetch_free: the threads joined, the
 * waiting store writes made), and its counters read.  prefetch.h, the one
 * header the front includes, is the contract of all of fs/read/; the read
 * itself is read.c's, and read_i.h lists the files in their order.
 */
#include "config.h"

#include "read_i.h"

#include <stdlib.h>
#include <unistd.h>

#define QUEUE_CAP 1024

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
	pf->worker = pool_worker;
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
		struct pf_write *w = pf->writes;

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
