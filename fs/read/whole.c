/*
 * Whole files for passthrough (passthrough.h): the cache file that holds
 * all of a file's bytes (its one raw chunk, or a pack of its chunks)
 * opened or made, with no request to the origin.
 */
#include "config.h"

#include "read_i.h"

#include <stdlib.h>
#include <unistd.h>

/* The keys of all of f's chunks, in a malloc'd array (per open of a
 * file of many chunks, not per read).  @return 0, -ENOTSUP, -ENOMEM. */
static int file_keys(struct prefetch *pf, struct pf_file *f,
		     struct chunk_key **out)
{
	struct chunk_key *keys;

	*out = NULL;
	if (f->nchunks > UINT32_MAX)
		return -ENOTSUP;
	keys = malloc(f->nchunks * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (uint64_t i = 0; i < f->nchunks; i++)
		file_key(pf, f, i, &keys[i]);
	*out = keys;
	return 0;
}

int prefetch_open_whole(struct prefetch *pf, struct pf_file *f,
			struct store_file_id *checked, int *fd)
{
	struct chunk_key key, *keys;
	size_t len = 0;
	int rc;

	if (!pf->st || f->nchunks == 0)
		return -ENOTSUP;
	if (f->nchunks == 1) {
		file_key(pf, f, 0, &key);
		rc = store_open_raw(pf->st, &key, f->size, checked, fd, &len);
		if (!rc && len != f->size) {
			close(*fd);
			rc = -ENOTSUP;
		}
		return rc;
	}
	/* A pack is made apart (prefetch_pack_whole): making it here would
	 * hold this open for a copy of the whole file. */
	file_key(pf, f, 0, &key);
	if (!store_packed(pf->st, &key))
		return -EAGAIN;
	rc = file_keys(pf, f, &keys);
	if (!rc)
		rc =
		    store_open_object(pf->st, keys, (uint32_t)f->nchunks,
				      pf->cfg.chunk_size, f->size, checked, fd);
	free(keys);
	return rc;
}

bool prefetch_whole_unchanged(struct prefetch *pf, struct pf_file *f,
			      const struct store_file_id *checked)
{
	struct chunk_key key;

	if (!pf->st || f->nchunks != 1)
		return false;
	file_key(pf, f, 0, &key);
	return store_raw_unchanged(pf->st, &key, checked);
}

int prefetch_pack_whole(struct prefetch *pf, struct pf_file *f)
{
	struct chunk_key *keys = NULL;
	int rc;

	if (!pf->st || f->nchunks < 2)
		return -ENOTSUP;
	writes_flush(pf, f);
	rc = file_keys(pf, f, &keys);
	if (!rc)
		rc = store_pack_object(pf->st, keys, (uint32_t)f->nchunks,
				       pf->cfg.chunk_size, f->size);
	free(keys);
	return rc;
}
