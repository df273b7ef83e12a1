/*
 * A file's read state (struct pf_file): made by prefetch_open, closed by
 * prefetch_close, freed with its last reference (file_unref: queued jobs
 * and deferred writes hold one each).
 */
#include "config.h"

#include "read_i.h"

#include <stdlib.h>
#include <string.h>

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

void file_unref(struct pf_file *f)
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

void prefetch_close(struct prefetch *pf, struct pf_file *f)
{
	if (!f)
		return;
	__atomic_store_n(&f->closed, true, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&pf->stats.files, 1, __ATOMIC_RELAXED);
	file_unref(f);
}
