/*
 * Deferred store writes: a chunk published before it is stored (a struct
 * pf_write) is written by a pool thread (store_later), so that the thread
 * that loaded it does not wait for the store's compress, create, write
 * and rename; the packer has a file's writes made first (writes_flush).
 */
#include "config.h"

#include "log.h"
#include "read_i.h"

#include <stdlib.h>
#include <string.h>

/* Writes chunk idx of f to the store.  Every chunk not cached is counted
 * by the store; a full disk it says once itself (naming the filesystem),
 * a write error too. */
void store_chunk(struct prefetch *pf, const struct pf_file *f,
		 uint64_t idx, const void *buf, size_t len,
		 const struct chunk_key *key)
{
	const int rc = store_put(pf->st, key, buf, len);

	if (rc && rc != -ENOSPC && rc != -EIO)
		log_warn("%s%s: chunk %llu not cached on disk: %s", pf->src->id,
			 f->path, (unsigned long long)idx, strerror(-rc));
}

/* Stores w's chunk and lets w go; running: w is in pf->running. */
void write_run(struct prefetch *pf, struct pf_write *w, bool running)
{
	store_chunk(pf, w->f, w->idx, w->c->data, w->c->len, &w->c->key);
	chunks_put(pf->cc, w->c);
	if (running) {
		struct pf_write **p;

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
	for (const struct pf_write *w = pf->running; w; w = w->next)
		if (same_object(w->f, f))
			return true;
	return false;
}

/*
 * Has f's chunks whose store writes wait written now (on this thread),
 * and waits for those under way: for the packer, which copies f's chunk
 * files into a pack.
 */
void writes_flush(struct prefetch *pf, struct pf_file *f)
{
	struct pf_write **p, *prev = NULL, *mine = NULL, *w;

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

/*
 * Chunk c (idx of f), just published, is stored by a pool thread, so
 * that the thread that loaded it (a reader's, or the pool's with more
 * loads landed) does not wait for the store's compress, create, write
 * and rename.  Written here when the pool cannot take it: no pool, no
 * memory, or too many bytes wait already.
 */
void store_later(struct prefetch *pf, struct pf_file *f, uint64_t idx,
		 struct chunk *c)
{
	struct pf_write *w = NULL;

	if (pf->cfg.threads)
		w = malloc(sizeof(*w));
	if (w) {
		chunks_hold(pf->cc, c);
		file_ref(f);
		*w = (struct pf_write){.c = c, .f = f, .idx = idx};
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
