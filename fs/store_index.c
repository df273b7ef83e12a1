/*
 * store_index: the index of chunks (a hash table), its LRU order, and
 * eviction under the cap with the removal of the evicted files, chunk
 * files and packs alike: what store.c, pack.c and cachedir.c share.  It
 * calls none of them; they call it.
 */
#include "config.h"

#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* ---- the index ---- */

static void lru_push_back(struct store *st, struct sentry *e)
{
	e->prev = st->lru.prev;
	e->next = &st->lru;
	st->lru.prev->next = e;
	st->lru.prev = e;
}

/* Under mu.  Growing the table is best effort: chains just get longer. */
static void index_grow(struct store *st)
{
	const size_t nsize = st->tabsize * 2;
	struct sentry **nt = calloc(nsize, sizeof(*nt));

	if (!nt)
		return;
	for (size_t i = 0; i < st->tabsize; i++) {
		struct sentry *e = st->tab[i], *next;

		for (; e; e = next) {
			const size_t b =
			    (size_t)rd64(e->key.b + 8) & (nsize - 1);

			next = e->hnext;
			e->hnext = nt[b];
			nt[b] = e;
		}
	}
	free(st->tab);
	st->tab = nt;
	st->tabsize = nsize;
}

/* Under mu; e is new.  front: most recent, else least recent. */
void store_index_insert(struct store *st, struct sentry *e, bool front)
{
	size_t b;

	if (st->n >= st->tabsize)
		index_grow(st);
	b = bucket(st, &e->key);
	e->hnext = st->tab[b];
	st->tab[b] = e;
	st->n++;
	st->used += e->disk;
	st->raw += e->raw;
	if (e->pack && !e->pack->indexed++)
		st->packs++;
	if (front)
		lru_push_front(st, e);
	else
		lru_push_back(st, e);
}

/* Under mu. */
void store_index_remove(struct store *st, struct sentry *e)
{
	struct sentry **pp = &st->tab[bucket(st, &e->key)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(e);
	st->n--;
	st->used -= e->disk;
	st->raw -= e->raw;
	if (e->pack && !--e->pack->indexed)
		st->packs--;
}

/*
 * A chunk file is gone (removed by `wharf cache verify`, say): forget it,
 * unless it was written again meanwhile.  Under the key's stripe.
 */
void store_index_forget(struct store *st, const struct chunk_key *key,
			const char *name)
{
	struct sentry *e;

	if (faccessat(st->dirfd[key->b[0]], name, F_OK, 0) == 0)
		return;
	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e && e->pack)
		e = NULL; /* in a pack since: its chunk file went for that */
	if (e)
		store_index_remove(st, e);
	pthread_mutex_unlock(&st->mu);
	sentry_free(e);
}

/* ---- removing files ---- */

/* "XX/KEY" relative to the chunk dir, for messages. */
void store_chunk_relpath(const struct chunk_key *key, char out[36])
{
	char hex[33];

	store_key_hex(key, hex);
	snprintf(out, 36, "%.2s/%s", hex, hex);
}

/* Removes the file `name` in dirfd if it is still the inode fd reads. */
int store_unlink_if_same(int dirfd, const char *name, int fd)
{
	struct stat a, b;

	if (fstat(fd, &a) || fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		return -ESTALE;
	return unlinkat(dirfd, name, 0) ? -errno : 0;
}

/* Removes the files of pack `key` in dirfd (the .pack first), where they
 * exist: eviction's, and pack.c's when a pack is bad or made in vain.
 * @return 0 or -errno of the first failure. */
int store_unlink_pack(int dirfd, const struct chunk_key *key)
{
	char data[PACK_NAME_MAX], idx[PACK_NAME_MAX];
	int rc = 0;

	pack_names(key, data, idx);
	if (unlinkat(dirfd, data, 0) && errno != ENOENT)
		rc = -errno;
	if (unlinkat(dirfd, idx, 0) && errno != ENOENT && !rc)
		rc = -errno;
	return rc;
}

/* Chunk file fd of key is corrupt: removes it (unless it was replaced
 * meanwhile) and says so. */
void store_chunk_bad(struct store *st, const struct chunk_key *key, int fd,
		     const char *why)
{
	const unsigned fan = key->b[0];
	char hex[33], rel[36];

	store_key_hex(key, hex);
	store_chunk_relpath(key, rel);
	log_warn("%s/%s: cached chunk %s is corrupt (%s); removed, it will be "
		 "fetched again",
		 st->chunkdir, rel, hex, why);
	STAT_ADD(st->corrupt, 1);
	pthread_mutex_lock(&st->stripe[fan]);
	if (store_unlink_if_same(st->dirfd[fan], hex, fd) == 0)
		store_index_forget(st, key, hex);
	pthread_mutex_unlock(&st->stripe[fan]);
}

/* ---- eviction ---- */

/* Under mu: takes e out of the index onto *victims, and the other chunks
 * of its pack with it (a pack's file goes whole). */
static void evict_entry(struct store *st, struct sentry *e,
			struct sentry **victims)
{
	struct spack *p = e->pack;

	store_index_remove(st, e);
	e->hnext = *victims;
	*victims = e;
	for (uint32_t i = 0; p && i < p->n; i++) {
		struct sentry *o = index_find(st, &p->ent[i].key);

		if (o && o->pack == p) {
			store_index_remove(st, o);
			o->hnext = *victims;
			*victims = o;
		}
	}
}

struct sentry *store_evict_one_locked(struct store *st, struct sentry *e)
{
	struct sentry *victims = NULL;

	evict_entry(st, e, &victims);
	return victims;
}

/*
 * Under mu: takes least recently used chunks out of the index until
 * used + reserved + need <= target, and returns them (chained by hnext)
 * for the caller to unlink after dropping mu.
 */
struct sentry *store_evict_locked(struct store *st, uint64_t target,
				  uint64_t need)
{
	struct sentry *victims = NULL;

	while (st->n && st->used + st->reserved + need > target)
		evict_entry(st, st->lru.prev, &victims);
	return victims;
}

/* Removes evicted pack p's files, unless a pack of the same name was
 * made since (its chunks point to another spack).  @return 0 when they
 * are gone. */
static int evict_pack_files(struct store *st, const struct spack *p)
{
	const unsigned fan = p->key.b[0];
	struct sentry *e;
	bool again;
	int rc = 0;

	pthread_mutex_lock(&st->stripe[fan]);
	pthread_mutex_lock(&st->mu);
	e = index_find(st, &p->key);
	again = e && e->pack && e->pack != p;
	pthread_mutex_unlock(&st->mu);
	if (!again) {
		rc = store_unlink_pack(st->dirfd[fan], &p->key);
		if (rc) {
			char hex[33];

			store_key_hex(&p->key, hex);
			log_warn("%s/%.2s/%s.pack: cannot evict: %s",
				 st->chunkdir, hex, hex, strerror(-rc));
		}
	}
	pthread_mutex_unlock(&st->stripe[fan]);
	return rc;
}

/* Unlinks the victims' files and frees them; counts them into chunks and
 * bytes. */
void store_evict_files(struct store *st, struct sentry *victims,
		       uint64_t *chunks, uint64_t *bytes)
{
	char hex[33];

	while (victims) {
		struct sentry *e = victims;
		const unsigned fan = e->key.b[0];
		bool again, gone = false;

		victims = e->hnext;
		if (e->pack) {
			gone = evict_pack_files(st, e->pack) == 0;
			goto done;
		}
		store_key_hex(&e->key, hex);
		pthread_mutex_lock(&st->stripe[fan]);
		/* Written again since it was picked: that copy stays. */
		pthread_mutex_lock(&st->mu);
		again = index_find(st, &e->key) != NULL;
		pthread_mutex_unlock(&st->mu);
		if (!again) {
			gone = !unlinkat(st->dirfd[fan], hex, 0) ||
			       errno == ENOENT;
			if (!gone)
				log_warn("%s/%.2s/%s: cannot evict: %s",
					 st->chunkdir, hex, hex,
					 strerror(errno));
		}
		pthread_mutex_unlock(&st->stripe[fan]);
	done:
		if (gone && st->cfg.evicted)
			st->cfg.evicted(st->cfg.evicted_arg, &e->key);
		STAT_ADD(st->evictions, 1);
		if (chunks)
			(*chunks)++;
		if (bytes)
			*bytes += e->disk;
		sentry_free(e);
	}
}
