/*
 * Origin checksums (struct sums, pf_file.want).
 *
 * An object whose origin gives a checksum (pf_file.want) is checked whole
 * once all its chunks are in.  A chunk's CRC32C is taken as it lands from
 * the origin (one pass over bytes just written, before the store hashes
 * them), and the chunk that completes the object runs the check: a
 * CRC32C object's comes from its chunks' CRCs, combined, with no byte
 * read again.  MD5 and SHA-256 do not combine: such an object's digest is
 * fed with its chunks in order as they come, and a chunk that came ahead
 * of its turn is read back from the store when its turn comes (a
 * sequential reader's read-ahead lands nearly in order).  An object of
 * one chunk is checked
 * before its bytes are stored or served; a larger one before its last
 * chunk is served, after the others were.  A mismatch drops the object's
 * chunks from the store and the memory cache and fetches them all again
 * from the origin itself, not through a site cache.  From then on no
 * byte the site cache sent for it is stored or served: its chunks' loads
 * go to the origin itself, and one that went to the site cache before
 * the mismatch and lands after it is fetched again from the origin
 * (struct sums.gate orders the two: a chunk that was on its way to the
 * caches at the mismatch is there before the drop).  If those do not
 * match either, they are dropped again and reads of the object fail with
 * EIO until a remount.  Once matched, the chunks' CRCs are kept, and a
 * chunk fetched again later (evicted meanwhile) is checked against its
 * own before it is served.  A match is recorded in the store, for `wharf
 * cache verify`.
 */
#include "config.h"

#include "log.h"
#include "read_i.h"

#include <stdlib.h>
#include <string.h>

static bool bit_get(const uint64_t *v, uint64_t i)
{
	return __atomic_load_n(&v[i / 64], __ATOMIC_ACQUIRE) &
	       (1ull << (i % 64));
}

/* @return whether the bit was clear. */
static bool bit_set(uint64_t *v, uint64_t i)
{
	const uint64_t bit = 1ull << (i % 64);

	return !(__atomic_fetch_or(&v[i / 64], bit, __ATOMIC_ACQ_REL) & bit);
}

/* Loads of a chunk from the origin itself may land while the object is
 * fetched again, each noting the chunk's CRC. */
static void note_crc(struct sums *sm, uint64_t i, uint32_t crc)
{
	__atomic_store_n(&sm->crc[i], crc, __ATOMIC_RELAXED);
	bit_set(sm->known, i);
}

static uint32_t crc_of(const struct sums *sm, uint64_t i)
{
	return __atomic_load_n(&sm->crc[i], __ATOMIC_RELAXED);
}

/*
 * The object's checksum into *got: chunk idx's bytes from buf (when not
 * NULL), a CRC32C object's other chunks from their CRCs where known, the
 * rest read from the store (*reread counts them).  Every chunk's CRC is
 * known after.  @return 0; -ENOENT (a chunk is no longer cached), -EIO,
 * -ENOMEM.
 */
static int sums_compute(struct prefetch *pf, struct pf_file *f, uint64_t idx,
			const void *buf, struct checksum *got, unsigned *reread)
{
	struct sums *sm = f->sums;
	const bool crc_only = f->want.algo == CHECKSUM_CRC32C;
	struct checksum_ctx ctx;
	void *scratch = NULL;
	int rc = checksum_begin(&ctx, f->want.algo);

	for (uint64_t i = 0; !rc && i < f->nchunks; i++) {
		const size_t len = chunk_len(pf, f, i);
		const void *data = i == idx ? buf : NULL;
		struct chunk_key key;
		size_t n = 0;

		if (!(crc_only && bit_get(sm->known, i)) && !data) {
			if (!scratch && !(scratch = malloc(pf->cfg.chunk_size)))
				rc = -ENOMEM;
			file_key(pf, f, i, &key);
			if (!rc)
				rc = pf->st ? store_get(pf->st, &key, scratch,
							len, &n)
					    : -ENOENT;
			if (!rc && n != len)
				rc = -EIO;
			if (rc == -EBADMSG) /* corrupt, and removed */
				rc = -ENOENT;
			data = scratch;
			(*reread)++;
		}
		if (rc)
			break;
		if (data && !bit_get(sm->known, i))
			note_crc(sm, i, crc32c_update(0, data, len));
		if (crc_only)
			checksum_feed_crc32c(&ctx, crc_of(sm, i), len);
		else
			checksum_feed(&ctx, data, len);
	}
	free(scratch);
	if (rc) {
		checksum_abort(&ctx);
		return rc;
	}
	checksum_end(&ctx, got);
	return 0;
}

/* Feeds f's running digest (an MD5 or SHA-256 object's) with the chunks
 * whose turn has come: idx's bytes from buf when not NULL, the others'
 * read back from the store (they came ahead of their turn).  Chunk idx
 * is marked got. */
static void sums_advance(struct prefetch *pf, struct pf_file *f, uint64_t idx,
			 const void *buf)
{
	struct sums *sm = f->sums;
	void *scratch = NULL;

	pthread_mutex_lock(&sm->mu);
	if (!sm->broken && sm->stream.algo == CHECKSUM_NONE &&
	    checksum_begin(&sm->stream, f->want.algo))
		sm->broken = true;
	while (!sm->broken && sm->next < f->nchunks &&
	       bit_get(sm->got, sm->next)) {
		const size_t len = chunk_len(pf, f, sm->next);
		const void *data = sm->next == idx ? buf : NULL;
		struct chunk_key key;
		size_t n = 0;

		if (!data) {
			if (!scratch)
				scratch = malloc(pf->cfg.chunk_size);
			file_key(pf, f, sm->next, &key);
			if (!scratch ||
			    store_get(pf->st, &key, scratch, len, &n) ||
			    n != len) {
				sm->broken = true;
				break;
			}
			data = scratch;
		}
		checksum_feed(&sm->stream, data, len);
		if (!bit_get(sm->known, sm->next))
			note_crc(sm, sm->next, crc32c_update(0, data, len));
		sm->next++;
	}
	pthread_mutex_unlock(&sm->mu);
	free(scratch);
}

/* The running digest of f when it has had every chunk: into *got.
 * @return whether it had. */
static bool sums_streamed(struct pf_file *f, struct checksum *got)
{
	struct sums *sm = f->sums;
	bool done;

	if (f->want.algo == CHECKSUM_CRC32C || f->nchunks < 2)
		return false;
	pthread_mutex_lock(&sm->mu);
	done = !sm->broken && sm->next == f->nchunks &&
	       sm->stream.algo != CHECKSUM_NONE;
	if (done) {
		checksum_end(&sm->stream, got);
		sm->stream.algo = CHECKSUM_NONE;
	}
	pthread_mutex_unlock(&sm->mu);
	return done;
}

/*
 * f was found bad: from now on its loads go to the origin itself (or
 * fail, verdict SUMS_BAD), and its chunks are dropped from the store and
 * the memory cache.  Under the gate's write side, so that a chunk on its
 * way there is there first, and dropped; a load in flight, as the one
 * that runs the check, is left to its owner, which admits it through the
 * gate (sums_admit).
 */
static void sums_quarantine(struct prefetch *pf, struct pf_file *f, int verdict)
{
	struct sums *sm = f->sums;

	pthread_rwlock_wrlock(&sm->gate);
	__atomic_store_n(&sm->bypass, true, __ATOMIC_RELEASE);
	if (verdict)
		__atomic_store_n(&sm->verdict, verdict, __ATOMIC_RELEASE);
	for (uint64_t i = 0; i < f->nchunks; i++) {
		struct chunk_key key;

		file_key(pf, f, i, &key);
		if (pf->st)
			store_remove(pf->st, &key);
		chunks_forget(pf->cc, &key);
	}
	pthread_rwlock_unlock(&sm->gate);
}

/* Fetches all of f again from the origin itself: into the store, chunk
 * idx into buf when not NULL (its chunk is not published yet), each
 * chunk's CRC noted, the object's checksum into *got.  @return 0 or
 * -errno (logged). */
static int sums_refetch(struct prefetch *pf, struct pf_file *f, uint64_t idx,
			void *buf, struct checksum *got)
{
	const bool crc_only = f->want.algo == CHECKSUM_CRC32C;
	struct checksum_ctx ctx;
	void *scratch = malloc(pf->cfg.chunk_size);
	int rc = scratch ? checksum_begin(&ctx, f->want.algo) : -ENOMEM;

	for (uint64_t i = 0; !rc && i < f->nchunks; i++) {
		const size_t len = chunk_len(pf, f, i);
		void *dst = i == idx && buf ? buf : scratch;
		struct chunk_key key;
		uint32_t crc;

		rc = fetch_direct(pf, f, i, dst, len);
		if (rc) {
			checksum_abort(&ctx);
			break;
		}
		crc = crc32c_update(0, dst, len);
		note_crc(f->sums, i, crc);
		if (crc_only)
			checksum_feed_crc32c(&ctx, crc, len);
		else
			checksum_feed(&ctx, dst, len);
		file_key(pf, f, i, &key);
		if (pf->st)
			(void)!store_put(pf->st, &key, dst, len);
	}
	if (!rc)
		checksum_end(&ctx, got);
	free(scratch);
	return rc;
}

/* f matched (the checksum matched: the origin's, or for an ETag that is
 * no MD5 the one its own bytes give): its chunks' CRCs known so far
 * stand, and the store records it. */
static void sums_good(struct prefetch *pf, struct pf_file *f,
		      const struct checksum *matched)
{
	char digest[CHECKSUM_TEXT_MAX];
	const struct store_sum rec = {.source = pf->src->id,
				      .path = f->path,
				      .version = f->version,
				      .size = f->size,
				      .mtime = f->mtime,
				      .chunk_size = pf->cfg.chunk_size,
				      .digest =
					  checksum_format(matched, digest)};
	int rc;

	__atomic_store_n(&f->sums->verdict, SUMS_GOOD, __ATOMIC_RELEASE);
	if (!pf->st)
		return;
	rc = store_sum_record(pf->st, &rec);
	if (rc)
		log_warn("%s%s: cannot record its checksum in the cache (%s): "
			 "`wharf cache verify` will not check it",
			 pf->src->id, f->path, strerror(-rc));
}

/* The bytes of f cannot be had right: reads fail from now on. */
static int sums_fail(struct prefetch *pf, struct pf_file *f)
{
	sums_quarantine(pf, f, SUMS_BAD);
	STAT_ADD(pf->stats.sums_failed, 1);
	return -EIO;
}

/*
 * All of f is in; chunk idx's bytes are in buf (NULL: all are in the
 * store): checks f against the origin's checksum, and on a mismatch
 * fetches it again from the origin itself.  @return 0 (matched, or could
 * not be checked: logged), -EIO (the origin's own bytes do not match).
 */
int sums_check(struct prefetch *pf, struct pf_file *f, uint64_t idx,
	       void *buf)
{
	char want[CHECKSUM_TEXT_MAX], got1[CHECKSUM_TEXT_MAX],
	    got2[CHECKSUM_TEXT_MAX];
	struct checksum got;
	unsigned reread = 0;
	int rc = sums_streamed(f, &got)
		     ? 0
		     : sums_compute(pf, f, idx, buf, &got, &reread);

	checksum_format(&f->want, want);
	if (rc) {
		STAT_ADD(pf->stats.sums_unchecked, 1);
		log_warn("%s%s: not checked against the origin's %s: %s",
			 pf->src->id, f->path, want,
			 rc == -ENOENT ? "a chunk of it is no longer cached"
				       : strerror(-rc));
		return 0;
	}
	STAT_ADD(pf->stats.sums_checked, 1);
	if (checksum_equal(&f->want, &got)) {
		sums_good(pf, f, &f->want);
		return 0;
	}
	/* Before it is counted: a reader that sees the count finds the bad
	 * bytes gone. */
	sums_quarantine(pf, f, 0);
	STAT_ADD(pf->stats.sums_bad, 1);
	log_error("%s%s: its bytes do not match the origin's checksum: "
		  "expected %s (from the origin's listing or manifest), got "
		  "%s from the bytes received (%llu chunks, %u of them read "
		  "back from the chunk cache); dropping them and fetching "
		  "the object again from the origin itself, not through a "
		  "site cache",
		  pf->src->id, f->path, want, checksum_format(&got, got1),
		  (unsigned long long)f->nchunks, reread);
	rc = sums_refetch(pf, f, idx, buf, &got);
	if (rc) {
		log_error("%s%s: cannot fetch it again (%s): reads of it fail "
			  "with EIO until a remount",
			  pf->src->id, f->path, strerror(-rc));
		return sums_fail(pf, f);
	}
	checksum_format(&got, got2);
	if (checksum_equal(&f->want, &got)) {
		STAT_ADD(pf->stats.sums_repaired, 1);
		log_warn("%s%s: fetched again from the origin itself, its "
			 "bytes match %s: those are served and cached",
			 pf->src->id, f->path, want);
		sums_good(pf, f, &f->want);
		return 0;
	}
	if (f->want.weak) {
		STAT_ADD(pf->stats.sums_etag_not_md5, 1);
		log_warn("%s%s: the origin itself sends bytes whose MD5 is "
			 "%s, and its ETag says %s: that ETag is no MD5 of the "
			 "object (SSE-KMS or SSE-C encryption, or a store "
			 "whose ETags are not MD5s); served as the origin "
			 "sends them",
			 pf->src->id, f->path, got2, want);
		/* recorded as the origin's bytes give it, for verify */
		sums_good(pf, f, &got);
		return 0;
	}
	log_error("%s%s: fetched again from the origin itself, its bytes "
		  "still do not match: expected %s (from the origin's listing "
		  "or manifest), got %s from the origin's own bytes; reads of "
		  "it fail with EIO until a remount",
		  pf->src->id, f->path, want, got2);
	return sums_fail(pf, f);
}

/* A chunk of a matched object came from the origin again (evicted
 * since): it must have the CRC it had then.  @return 0 or -EIO. */
static int sums_chunk_again(struct prefetch *pf, struct pf_file *f,
			    uint64_t idx, void *buf, size_t len, uint32_t crc)
{
	const uint32_t want = crc_of(f->sums, idx);
	int rc;

	/* Unknown: a chunk the check had from the store and no CRC of. */
	if (!bit_get(f->sums->known, idx) || crc == want)
		return 0;
	STAT_ADD(pf->stats.sums_bad, 1);
	log_error("%s%s: chunk %llu, fetched again, has CRC32C %08x, and "
		  "%08x when the object matched the origin's checksum; "
		  "fetching it again from the origin itself",
		  pf->src->id, f->path, (unsigned long long)idx, crc, want);
	rc = fetch_direct(pf, f, idx, buf, len);
	if (!rc)
		crc = crc32c_update(0, buf, len);
	if (!rc && crc == want) {
		STAT_ADD(pf->stats.sums_repaired, 1);
		return 0;
	}
	STAT_ADD(pf->stats.sums_failed, 1);
	if (!rc)
		log_error("%s%s: chunk %llu from the origin itself has CRC32C "
			  "%08x, not %08x: the read fails with EIO",
			  pf->src->id, f->path, (unsigned long long)idx, crc,
			  want);
	return -EIO;
}

/*
 * Takes the read side of f's gate for ld's chunk, which landed from the
 * origin, until it is published (sums_leave).  If f was found bad since
 * the chunk was asked for through the site cache, it is fetched again
 * from the origin itself first.  @return 0 (held), -EIO (f is bad), or
 * fetch_direct's (not held).
 */
static int sums_admit(struct load *ld)
{
	struct sums *sm = ld->f->sums;
	int rc;

	for (;;) {
		pthread_rwlock_rdlock(&sm->gate);
		if (__atomic_load_n(&sm->verdict, __ATOMIC_ACQUIRE) ==
		    SUMS_BAD) {
			pthread_rwlock_unlock(&sm->gate);
			return -EIO;
		}
		if (ld->trusted ||
		    !__atomic_load_n(&sm->bypass, __ATOMIC_ACQUIRE)) {
			ld->gated = true;
			return 0;
		}
		pthread_rwlock_unlock(&sm->gate);
		rc = fetch_direct(ld->pf, ld->f, ld->idx, ld->buf, ld->want);
		if (rc)
			return rc;
		ld->trusted = true;
	}
}

void sums_leave(struct load *ld)
{
	if (ld->gated)
		pthread_rwlock_unlock(&ld->f->sums->gate);
	ld->gated = false;
}

/*
 * ld's chunk of f landed from the origin, before it is stored: an object
 * of one chunk is checked whole (before the gate is taken: a mismatch
 * takes its write side); then, through the gate (sums_admit), the
 * chunk's CRC is noted, or checked against the one it had when f
 * matched.  @return 0 (the gate held) or -errno (not held).
 */
int sums_landed(struct load *ld)
{
	struct pf_file *f = ld->f;
	struct sums *sm = f->sums;
	bool checked = false;
	uint32_t crc;
	int rc;

	if (f->nchunks == 1 &&
	    !__atomic_load_n(&sm->verdict, __ATOMIC_ACQUIRE)) {
		note_crc(sm, 0, crc32c_update(0, ld->buf, ld->want));
		__atomic_store_n(&sm->fetched, true, __ATOMIC_RELAXED);
		bit_set(sm->got, 0);
		rc = sums_check(ld->pf, f, 0, ld->buf);
		if (rc)
			return rc;
		/* It matched, or was fetched again from the origin itself. */
		ld->trusted = checked = true;
	}
	rc = sums_admit(ld);
	if (rc || checked)
		return rc;
	crc = crc32c_update(0, ld->buf, ld->want);
	if (__atomic_load_n(&sm->verdict, __ATOMIC_ACQUIRE) == SUMS_GOOD) {
		rc = sums_chunk_again(ld->pf, f, ld->idx, ld->buf, ld->want,
				      crc);
		if (rc)
			sums_leave(ld);
		return rc;
	}
	note_crc(sm, ld->idx, crc);
	__atomic_store_n(&sm->fetched, true, __ATOMIC_RELAXED);
	return 0;
}

/* Chunk idx of f is in the store or published (buf: its bytes, NULL when
 * in the store alone).  @return whether it completes an object of many
 * chunks, of which one came from the origin now: its check is due
 * (sums_check, not under the gate). */
bool sums_got(struct prefetch *pf, struct pf_file *f, uint64_t idx,
	      void *buf)
{
	struct sums *sm = f->sums;

	if (f->nchunks < 2 || !bit_set(sm->got, idx))
		return false;
	/* Before the count: the one that completes it finds every chunk
	 * fed that any chunk's turn allowed.  Only once a chunk came from
	 * the origin: an object read whole from the store is not checked,
	 * and a warm read costs no digest. */
	if (f->want.algo != CHECKSUM_CRC32C &&
	    __atomic_load_n(&sm->fetched, __ATOMIC_RELAXED))
		sums_advance(pf, f, idx, buf);
	return __atomic_add_fetch(&sm->ngot, 1, __ATOMIC_ACQ_REL) ==
		   f->nchunks &&
	       __atomic_load_n(&sm->fetched, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&sm->verdict, __ATOMIC_ACQUIRE);
}

/* Sets up f's check when its origin gave a checksum (once per file, not
 * per read).  @return 0 or -ENOMEM. */
int sums_open(struct pf_file *f, const char *digest)
{
	const size_t words = (f->nchunks + 63) / 64;
	struct sums *sm;

	if (!digest || !*digest || checksum_parse(digest, &f->want))
		f->want.algo = CHECKSUM_NONE;
	/* Empty objects have nothing to check; objects of more than
	 * WHOLE_MAX chunks keep no state for it. */
	if (f->want.algo == CHECKSUM_NONE || !f->nchunks ||
	    f->nchunks > WHOLE_MAX)
		return 0;
	if (f->nchunks == 1) {
		sm = calloc(1, sizeof(*sm));
		if (!sm)
			return -ENOMEM;
		sm->got = &sm->inline_bits[0];
		sm->known = &sm->inline_bits[1];
		sm->crc = &sm->inline_crc;
	} else {
		sm = calloc(1, sizeof(*sm) + 2 * words * sizeof(uint64_t) +
				   f->nchunks * sizeof(uint32_t));
		if (!sm)
			return -ENOMEM;
		sm->got = (uint64_t *)(sm + 1);
		sm->known = sm->got + words;
		sm->crc = (uint32_t *)(sm->known + words);
	}
	pthread_mutex_init(&sm->mu, NULL);
	pthread_rwlock_init(&sm->gate, NULL);
	f->sums = sm;
	return 0;
}
