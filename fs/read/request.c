/*
 * One chunk's request to the origin: prepared as a ranged GET straight
 * into the chunk's buffer (load_prepare), made again once with fresh
 * credentials after a 401 (load_renew), or made to the origin itself,
 * past a site cache, when a checksum found its bytes bad (fetch_direct).
 * The bottom of the read path's calls to the origin: load.c, pool.c and
 * verify.c use it.
 */
#include "config.h"

#include "log.h"
#include "read_i.h"

#include <stdio.h>
#include <string.h>

/*
 * Prepares ld's ranged GET of its chunk straight into its buffer.  Pool
 * loads are background work, which waits for room under the host's
 * concurrency limit; a reader's starts at once.
 * @return 0, or prepare_read's error (logged).
 */
int load_prepare(struct load *ld, bool background)
{
	struct prefetch *pf = ld->pf;
	struct pf_file *f = ld->f;
	const uint64_t off = ld->idx * pf->cfg.chunk_size;
	int rc;

	memset(&ld->rd, 0, sizeof(ld->rd));
	rc = pf->src->ops->prepare_read(pf->src, f->path, f->version, off,
					ld->want, &ld->rd);
	/* -ENOLINK: offline, and the source said so once. */
	if (rc && rc != -ENOLINK)
		log_error_limited("%s%s: bytes %llu-%llu: cannot prepare the "
			  "request: %s",
			  pf->src->id, f->path, (unsigned long long)off,
			  (unsigned long long)(off + ld->want - 1),
			  strerror(-rc));
	if (rc) {
		source_read_done(&ld->rd);
		return rc;
	}
	ld->rd.req.background = background;
	/* Found bad through the site cache: that is not asked again. */
	if (f->sums && __atomic_load_n(&f->sums->bypass, __ATOMIC_ACQUIRE))
		ld->rd.req.origin_only = ld->trusted = true;
	ld->rd.req.size = f->size; /* an answer must be of this version's */
	ld->rd.req.buf = ld->buf;
	ld->rd.req.cap = ld->want;
	ld->rd.req.grow = false;
	return 0;
}

/* The request of ld ended with ld->rc: true when it is to be made again,
 * once, with fresh credentials (fetch_auth_expired: a 401, an S3
 * ExpiredToken). */
bool load_renew(struct load *ld)
{
	const struct source_ops *ops = ld->pf->src->ops;

	source_read_done(&ld->rd);
	if (!ld->rc || !fetch_auth_expired(&ld->res) || ld->renewed ||
	    !ops->auth_refused ||
	    !ops->auth_refused(ld->pf->src, ld->rd.auth_serial))
		return false;
	ld->renewed = true;
	return true;
}

/* Fetches [off, off + want) of chunk idx of f from the origin itself
 * into buf.  @return 0 or -errno (logged). */
int fetch_direct(struct prefetch *pf, struct pf_file *f, uint64_t idx,
		 void *buf, size_t want)
{
	struct load ld = {
	    .pf = pf, .f = f, .idx = idx, .buf = buf, .want = want};
	int rc;

	do {
		rc = load_prepare(&ld, false);
		if (rc)
			return ld.renewed ? -EACCES : rc;
		ld.rd.req.origin_only = true;
		ld.rc = fetch_run(pf->src->fetch, &ld.rd.req, &ld.res);
	} while (load_renew(&ld));
	if (!ld.rc && ld.res.len != want) {
		snprintf(ld.res.err, sizeof(ld.res.err),
			 "%zu bytes came, expected %zu", ld.res.len, want);
		ld.rc = -EIO;
	}
	if (ld.rc)
		log_error("%s%s: chunk %llu, fetched again from the origin: "
			  "%s",
			  pf->src->id, f->path, (unsigned long long)idx,
			  ld.res.err[0] ? ld.res.err : strerror(-ld.rc));
	return ld.rc;
}
