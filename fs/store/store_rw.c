/*
 * store_rw: the store as a mount uses it once open: reading a chunk
 * (copied, mapped, or its file handed to the kernel), writing one under
 * the cap, removing one, pruning, and the counts.  With store_open.c the
 * top of the store's files (store_i.h gives their order): store_index.c
 * keeps the index, the LRU and eviction, chunkfile.c a chunk file's
 * format, pack.c packs.
 *
 * Writes go to a temp file in the chunk's own directory and are renamed
 * into place, so a reader never sees a partial chunk.  No fsync: this is
 * a cache; a file that lost its data in a crash fails its checksum at the
 * next read and is fetched again, while an fsync per chunk would cost a
 * disk flush for every chunk fetched.  The locks are store_i.h's.
 */
#include "config.h"

#include "log.h"
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reads and writes ---- */

bool store_packed(struct store *st, const struct chunk_key *key)
{
	bool packed;
	struct sentry *e;

	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	packed = e && e->pack;
	pthread_mutex_unlock(&st->mu);
	return packed;
}

bool store_raw_unchanged(struct store *st, const struct chunk_key *key,
			 const struct store_file_id *id)
{
	struct store_file_id now;
	struct stat sb;
	char hex[33];

	store_key_hex(key, hex);
	if (fstatat(st->dirfd[key->b[0]], hex, &sb, AT_SYMLINK_NOFOLLOW))
		return false;
	now = file_id(&sb);
	return same_file(&now, id);
}

/* store_get; store_map when m is not NULL (buf is then unused);
 * store_open_raw when fdout is not NULL (buf and m unused; checked is
 * its). */
static int get(struct store *st, const struct chunk_key *key, void *buf,
	       size_t cap, size_t *len, struct store_map *m, int *fdout,
	       struct store_file_id *checked)
{
	const unsigned fan = key->b[0];
	const bool seals = !st->cfg.check_each_mount;
	const int64_t t0 = seals ? seal_clock() : 0;
	struct seal seal = {0};
	struct tctx *t = NULL;
	const char *why = NULL;
	char hex[33], rel[36];
	struct sentry *e;
	struct spack *p;
	uint32_t idx = 0;
	bool hashed;
	struct hdr h;
	int fd = -1, open_errno = 0, rc;

	p = pack_of(st, key, &idx, &seal);
	if (!p) {
		store_key_hex(key, hex);
		fd = openat(st->dirfd[fan], hex, CHUNK_OPEN);
		open_errno = errno;
		/* Put in a pack between the look and the open, which then
		 * found its chunk file removed. */
		if (fd < 0 && open_errno == ENOENT)
			p = pack_of(st, key, &idx, &seal);
	}
	if (p) {
		/* store_open_raw hands over files of one chunk: never a
		 * pack's. */
		rc = fdout ? -ENOTSUP : pack_get(st, p, idx, buf, cap, len, m);
		pack_unref(p);
		return rc;
	}
	if (fd < 0) {
		rc = open_errno;
		STAT_ADD(st->misses, 1);
		if (rc != ENOENT) {
			store_chunk_relpath(key, rel);
			log_warn("%s/%s: cannot open cached chunk: %s",
				 st->chunkdir, rel, strerror(rc));
			return -EIO;
		}
		/* Known but gone (`wharf cache verify` removed it)? */
		pthread_mutex_lock(&st->mu);
		e = index_find(st, key);
		pthread_mutex_unlock(&st->mu);
		if (e) {
			bool forgot;

			pthread_mutex_lock(&st->stripe[fan]);
			forgot = store_index_forget(st, key, hex);
			pthread_mutex_unlock(&st->stripe[fan]);
			store_chunk_relpath(key, rel);
			if (forgot)
				store_vanished(st, rel);
		}
		return -ENOENT;
	}
	rc = chunkfile_read(fd, key, &t, buf, cap, &h, &why, m,
			    seals ? &seal : NULL);
	hashed = !rc && !fdout && !h.trusted;
	if (!rc && fdout) {
		hashed = !same_file(&h.file, checked) && !h.trusted;
		rc = !hashed && h.codec == CODEC_RAW && !h.payload
			 ? (h.raw_len > cap ? -EOVERFLOW : 0)
			 : chunkfile_check_raw(fd, &h, cap, &why);
		if (!rc)
			*checked = h.file;
	}
	chunkfile_codec_give(t);
	if (rc == -EBADMSG) {
		STAT_ADD(st->misses, 1);
		store_chunk_bad(st, key, fd, why);
		goto out;
	}
	/* store_map: compressed, or not mappable; store_open_raw: compressed,
	 * or format 1 (the header comes first). */
	if (rc == -ENOTSUP)
		goto out;
	if (rc) {
		STAT_ADD(st->misses, 1);
		if (rc == -EIO) {
			store_chunk_relpath(key, rel);
			log_warn("%s/%s: read error on a cached chunk",
				 st->chunkdir, rel);
		}
		goto out;
	}
	*len = h.raw_len;
	STAT_ADD(st->hits, 1);
	if (hashed)
		STAT_ADD(st->checked_bytes, h.raw_len);
	else if (h.trusted)
		STAT_ADD(st->sealed, 1);
	/* The use is recorded in the index, not on the file: a touch would
	 * move its ctime, and with it break its seal for the rest of the
	 * mount. */
	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e) {
		lru_unlink(e);
		lru_push_front(st, e);
		/* A hash just made seals the file as fstat saw it after t0. */
		if (seals && !e->pack && hashed)
			e->seal = (struct seal){
			    .file = h.file, .sum = h.sum, .taken_ns = t0};
	}
	pthread_mutex_unlock(&st->mu);
	if (fdout) {
		*fdout = fd;
		return 0;
	}
out:
	close(fd);
	return rc;
}

bool store_has(struct store *st, const struct chunk_key *key)
{
	bool has;

	pthread_mutex_lock(&st->mu);
	has = index_find(st, key) != NULL;
	pthread_mutex_unlock(&st->mu);
	return has;
}

int store_get(struct store *st, const struct chunk_key *key, void *buf,
	      size_t cap, size_t *len)
{
	return get(st, key, buf, cap, len, NULL, NULL, NULL);
}

int store_map(struct store *st, const struct chunk_key *key, size_t cap,
	      struct store_map *m, size_t *len)
{
	return get(st, key, NULL, cap, len, m, NULL, NULL);
}

int store_open_raw(struct store *st, const struct chunk_key *key, size_t cap,
		   struct store_file_id *checked, int *fd, size_t *len)
{
	return get(st, key, NULL, cap, len, NULL, fd, checked);
}

int store_put(struct store *st, const struct chunk_key *key, const void *data,
	      size_t len)
{
	static unsigned long tmp_seq;
	const unsigned fan = key->b[0];
	struct tctx *t;
	struct sentry *victims, *e, *old;
	uint8_t hdr[HDR_SIZE];
	char hex[33], tmp[80], rel[36];
	const void *payload;
	struct hdr h;
	uint64_t disk;
	size_t plen;
	int rc;

	if (len > MAX_RAW)
		return -EFBIG; /* no chunk is that big: a caller's bug */
	/* Fetched while its object was being packed: the pack has it. */
	if (store_packed(st, key))
		return 0;
	e = calloc(1, sizeof(*e));
	t = chunkfile_codec_take();
	if (!e || !t) {
		sentry_free(e);
		chunkfile_codec_give(t);
		return -ENOMEM;
	}
	/* payload may point into t's buffer: t is given back once written. */
	chunkfile_payload(t, st->cfg.zstd_level, st->cfg.min_saving_pct, data,
			  len, &payload, &plen, &h.codec);
	h.version = st->hdr_xattr ? FORMAT_XATTR : FORMAT_INLINE;
	h.payload = st->hdr_xattr ? 0 : HDR_SIZE;
	h.raw_len = len;
	h.stored_len = plen;
	h.sum_kind = SUM_XXH3;
	h.sum = chunk_sum(h.sum_kind, data, len, key_seed(key));
	h.key = *key;
	chunkfile_hdr_encode(hdr, &h);
	disk = disk_bytes((uint64_t)h.payload + plen);
	e->key = *key;
	e->disk = disk;
	e->raw = len;
	e->zstd = h.codec == CODEC_ZSTD;

	store_cap_recheck(st);
	/* Make room first, so the files on disk never exceed the cap. */
	pthread_mutex_lock(&st->mu);
	/* Larger than the room that writes in flight leave under the cap:
	 * evicting everything would not make it fit, so evict nothing. */
	if (st->reserved + disk > st->cap) {
		pthread_mutex_unlock(&st->mu);
		chunkfile_codec_give(t);
		sentry_free(e);
		STAT_ADD(st->dropped, 1);
		return -ENOSPC;
	}
	/* Then eviction can always make room (an empty index uses none). */
	victims = store_evict_locked(st, st->cap, disk);
	st->reserved += disk;
	pthread_mutex_unlock(&st->mu);
	store_evict_files(st, victims, NULL, NULL);

	store_key_hex(key, hex);
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s.%d.%lu", hex, (int)getpid(),
		 __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
	rc = chunkfile_write(st->dirfd[fan], tmp, hdr, payload, plen);
	/* The disk is full below the cap: the cap comes down to what it
	 * holds, eviction makes the room, and the write is tried once
	 * more (a failed write leaves no file). */
	if ((rc == -ENOSPC || rc == -EDQUOT) &&
	    store_disk_full(st, rc, disk, 0))
		rc = chunkfile_write(st->dirfd[fan], tmp, hdr, payload, plen);
	chunkfile_codec_give(t);
	if (rc == -EDQUOT)
		rc = -ENOSPC;
	if (!rc) {
		pthread_mutex_lock(&st->stripe[fan]);
		if (renameat(st->dirfd[fan], tmp, st->dirfd[fan], hex)) {
			rc = -errno;
			unlinkat(st->dirfd[fan], tmp, 0);
		} else if (!st->cfg.check_each_mount) {
			/* Written by us: sealed as it is (settled at close,
			 * see store_seal.c). */
			const int64_t now = seal_clock();
			struct stat sb;

			if (!fstatat(st->dirfd[fan], hex, &sb,
				     AT_SYMLINK_NOFOLLOW))
				e->seal = (struct seal){.file = file_id(&sb),
							.sum = h.sum,
							.taken_ns = now};
		}
		pthread_mutex_lock(&st->mu);
		st->reserved -= disk;
		if (!rc) {
			old = index_find(st, key);
			if (old)
				store_index_remove(st, old);
			store_index_insert(st, e, true);
			e = old;
		}
		pthread_mutex_unlock(&st->mu);
		pthread_mutex_unlock(&st->stripe[fan]);
	} else {
		pthread_mutex_lock(&st->mu);
		st->reserved -= disk;
		pthread_mutex_unlock(&st->mu);
	}
	sentry_free(e);
	if (rc)
		STAT_ADD(st->dropped, 1);
	if (rc && rc != -ENOSPC) {
		store_chunk_relpath(key, rel);
		log_warn("%s/%s: cannot write chunk: %s", st->chunkdir, rel,
			 strerror(-rc));
		rc = -EIO;
	}
	return rc;
}

void store_remove(struct store *st, const struct chunk_key *key)
{
	struct sentry *victims = NULL, *e;

	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e)
		victims = store_evict_one_locked(st, e);
	pthread_mutex_unlock(&st->mu);
	store_evict_files(st, victims, NULL, NULL);
}

int store_room(struct store *st, int err, uint64_t bytes)
{
	if (!st || (err != -ENOSPC && err != -EDQUOT))
		return err;
	(void)store_disk_full(st, err, 0, bytes);
	return 0;
}

uint64_t store_cap(struct store *st)
{
	const uint64_t cap = __atomic_load_n(&st->cap, __ATOMIC_RELAXED);

	return cap == UINT64_MAX ? 0 : cap;
}

void store_get_stats(struct store *st, struct store_stats *out)
{
	pthread_mutex_lock(&st->mu);
	out->chunks = st->n;
	out->packs = st->packs;
	out->bytes_on_disk = st->used;
	out->bytes_raw = st->raw;
	pthread_mutex_unlock(&st->mu);
	out->cap_bytes = store_cap(st);
	out->max_bytes = st->cfg.max_bytes;
	out->hits = STAT_GET(st->hits);
	out->misses = STAT_GET(st->misses);
	out->evictions = STAT_GET(st->evictions);
	out->corrupt = STAT_GET(st->corrupt);
	out->writes_dropped = STAT_GET(st->dropped);
	out->checked_bytes = STAT_GET(st->checked_bytes);
	out->sealed = STAT_GET(st->sealed);
	out->vanished = STAT_GET(st->vanished);
	out->cap_lowered = STAT_GET(st->lowered);
}

int store_prune(struct store *st, uint64_t max_bytes, uint64_t *chunks,
		uint64_t *bytes)
{
	struct sentry *victims;

	if (chunks)
		*chunks = 0;
	if (bytes)
		*bytes = 0;
	pthread_mutex_lock(&st->mu);
	victims = store_evict_locked(st, max_bytes, 0);
	pthread_mutex_unlock(&st->mu);
	store_evict_files(st, victims, chunks, bytes);
	/* Emptied: no object is left to check against its record. */
	if (!max_bytes)
		store_sums_clear(st);
	return 0;
}
