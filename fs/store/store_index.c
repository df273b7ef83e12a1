/*
 * store_index: the index of chunks (a hash table), its LRU order, and
 * eviction under the cap with the removal of the evicted files, chunk
 * files and packs alike: what store_rw.c, store_open.c, pack.c and
 * cachedir.c share.  It calls none of them; they call it.
 *
 * The cap is the smaller of the one asked for and what the cache's
 * filesystem can hold above its free-space floor (--cache-min-free):
 * looked at when the store opens, every few seconds as chunks are written
 * (other files on the disk grow too), and each time the disk says it is
 * full (a quota, a file grown in between), when it is lowered to what the
 * chunks use then, less the floor, and eviction makes the room.  A
 * lowered cap rises again when room comes back.
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
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"
#include "mountinfo.h"
#include "units.h"

/* ---- the index ---- */

void pack_unref(struct spack *p)
{
	if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(p);
}

void sentry_free(struct sentry *e)
{
	if (e)
		pack_unref(e->pack);
	free(e);
}

static size_t bucket(const struct store *st, const struct chunk_key *key)
{
	return (size_t)rd64(key->b + 8) & (st->tabsize - 1);
}

/* Under mu. */
struct sentry *index_find(struct store *st, const struct chunk_key *key)
{
	struct sentry *e = st->tab[bucket(st, key)];

	while (e && memcmp(e->key.b, key->b, 16))
		e = e->hnext;
	return e;
}

void lru_unlink(struct sentry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

/* Under mu: e is used now. */
void lru_push_front(struct store *st, struct sentry *e)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	e->used_ns = ts_ns(&now);
	e->next = st->lru.next;
	e->prev = &st->lru;
	st->lru.next->prev = e;
	st->lru.next = e;
}

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

struct lru_item {
	struct sentry *e;
	size_t pos;
};

static int by_use_desc(const void *a, const void *b)
{
	const struct lru_item *x = a, *y = b;

	if (x->e->used_ns != y->e->used_ns)
		return x->e->used_ns < y->e->used_ns ? 1 : -1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

int store_index_sort(struct store *st)
{
	struct lru_item *v;
	size_t n = 0;

	for (struct sentry *e = st->lru.next; e != &st->lru; e = e->next)
		n++;
	v = malloc((n ? n : 1) * sizeof(*v));
	n = 0;
	if (!v)
		return -ENOMEM;
	for (struct sentry *e = st->lru.next; e != &st->lru; e = e->next) {
		v[n].e = e;
		v[n].pos = n;
		n++;
	}
	qsort(v, n, sizeof(*v), by_use_desc);
	st->lru.next = st->lru.prev = &st->lru;
	for (size_t i = 0; i < n; i++)
		lru_push_back(st, v[i].e);
	free(v);
	return 0;
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
bool store_index_forget(struct store *st, const struct chunk_key *key,
			const char *name)
{
	struct sentry *e;

	if (faccessat(st->dirfd[key->b[0]], name, F_OK, 0) == 0)
		return false;
	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e && e->pack)
		e = NULL; /* in a pack since: its chunk file went for that */
	if (e)
		store_index_remove(st, e);
	pthread_mutex_unlock(&st->mu);
	sentry_free(e);
	return e != NULL;
}

void store_vanished(struct store *st, const char *name)
{
	STAT_ADD(st->vanished, 1);
	log_warn_limited("%s/%s: a cached file is gone, removed by something "
			 "else than this mount (by hand, or `wharf cache "
			 "verify`); its chunks are fetched again when read",
			 st->chunkdir, name);
}

/* ---- removing files ---- */

/* KEY.pack and KEY.idx, in the fan-out dir of key->b[0]. */
void pack_names(const struct chunk_key *key, char data[PACK_NAME_MAX],
		char idx[PACK_NAME_MAX])
{
	char hex[33];

	store_key_hex(key, hex);
	snprintf(data, PACK_NAME_MAX, "%s" PACK_DATA_SUFFIX, hex);
	snprintf(idx, PACK_NAME_MAX, "%s" PACK_INDEX_SUFFIX, hex);
}

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
		(void)store_index_forget(st, key, hex);
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
			log_warn("%s/%.2s/%s" PACK_DATA_SUFFIX
				 ": cannot evict: %s",
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

/* ---- the cap ---- */

/* Under mu (or where the cap is read atomically). */
bool store_fs_bound(const struct store *st)
{
	return __atomic_load_n(&st->cap, __ATOMIC_RELAXED) <
	       (st->cfg.max_bytes ? st->cfg.max_bytes : UINT64_MAX);
}

/* Left free on the filesystem beside the cap: the floor, and at least
 * room for the files that are not chunks (the listing snapshot, a log)
 * and the blocks the counts miss (directories).  The default floor: 5% of
 * the filesystem or 1 GiB, whichever is smaller (other programs on that
 * disk must not be the first to fail). */
#define MARGIN_MIN (256ull << 10)
#define FLOOR_PCT 5
#define FLOOR_MAX (1ull << 30)
/* The cap is looked at this often as chunks are written. */
#define CAP_RECHECK_MS 5000

static uint64_t floor_of(const struct store_config *cfg, uint64_t fs_bytes)
{
	uint64_t floor = fs_bytes / 100 * FLOOR_PCT;

	if (cfg->min_free_pct)
		floor = fs_bytes / 100 * cfg->min_free_pct;
	else if (cfg->min_free_set)
		floor = cfg->min_free;
	else if (floor > FLOOR_MAX)
		floor = FLOOR_MAX;
	return floor;
}

static uint64_t margin_of(const struct store *st, const struct statvfs *sv)
{
	const uint64_t m =
	    floor_of(&st->cfg, (uint64_t)sv->f_blocks * sv->f_frsize);

	return m < MARGIN_MIN ? MARGIN_MIN : m;
}

/* Under mu: what the chunks may use, by sv (NULL: unknown): what they use
 * now, `flight` bytes of writes under way (on the disk in part) and what
 * is free, less the margin and `beside`.  A quota (err -EDQUOT), or no
 * inode left, shows no lack of blocks: then what they use now is what
 * the disk gives them. */
static uint64_t fs_holds(struct store *st, const struct statvfs *sv, int err,
			 uint64_t flight, uint64_t beside)
{
	uint64_t room = st->used;

	if (sv) {
		st->margin = margin_of(st, sv);
		if (err != -EDQUOT && !(sv->f_files && !sv->f_favail))
			room += flight + (uint64_t)sv->f_bavail * sv->f_frsize;
	}
	if (!st->margin)
		st->margin = MARGIN_MIN;
	return room > st->margin + beside ? room - st->margin - beside : 0;
}

/* Under mu or not: the next time a lowered cap may rise. */
static void recheck_later(struct store *st)
{
	const uint64_t ms = st->cfg.cap_recheck_ms ? st->cfg.cap_recheck_ms
						   : CAP_RECHECK_MS;

	__atomic_store_n(&st->recheck_ns, now_ns() + ms * 1000000,
			 __ATOMIC_RELAXED);
}

/* The first time the filesystem holds less than the cache wants: one
 * warning that names it and says what to do.  Later lowerings are
 * counted, and logged at the warn level too (rate-limited): a full disk
 * is what an operator filters for. */
static void say_full(struct store *st, const struct statvfs *sv, uint64_t cap)
{
	struct mountinfo_entry mi = {0};
	char total[32] = "?", avail[32] = "?", want[32], keep[32];
	struct stat sb;

	format_size(cap, keep, sizeof(keep));
	if (__atomic_exchange_n(&st->full_said, true, __ATOMIC_RELAXED)) {
		log_limited_at(WHARF_LOG_WARN,
			       "%s: the disk is full: the cache now keeps at "
			       "most %s",
			       st->dir, keep);
		return;
	}
	if (fstat(st->lockfd, &sb) || mountinfo_of_dev(sb.st_dev, &mi) != 1) {
		snprintf(mi.mnt, sizeof(mi.mnt), "%s", st->dir);
		snprintf(mi.type, sizeof(mi.type), "?");
	}
	if (sv) {
		format_size((uint64_t)sv->f_blocks * sv->f_frsize, total,
			    sizeof(total));
		format_size((uint64_t)sv->f_bavail * sv->f_frsize, avail,
			    sizeof(avail));
	}
	if (st->cfg.max_bytes)
		format_size(st->cfg.max_bytes, want, sizeof(want));
	else
		snprintf(want, sizeof(want), "0 (no cap)");
	log_warn("%s: the filesystem on %s (%s, %s, %s free) cannot hold "
		 "--cache-size %s: the cache keeps at most %s there and "
		 "evicts to stay under it; give it room (a larger filesystem, "
		 "or a --cache-dir on another) or a --cache-size it holds",
		 st->dir, mi.mnt, mi.type, total, avail, want, keep);
}

void store_cap_fit(struct store *st)
{
	struct statvfs sv;
	struct sentry *victims;
	const bool known = fstatvfs(st->lockfd, &sv) == 0;
	uint64_t holds = 0;
	bool less = false;

	pthread_mutex_lock(&st->mu);
	__atomic_store_n(&st->cap,
			 st->cfg.max_bytes ? st->cfg.max_bytes : UINT64_MAX,
			 __ATOMIC_RELAXED);
	/* No cap asked for (`wharf cache prune` opens so): none is made up
	 * before the disk says it is full. */
	if (known && st->cfg.max_bytes) {
		holds = fs_holds(st, &sv, 0, 0, 0);
		less = holds < st->cap;
	}
	if (less)
		__atomic_store_n(&st->cap, holds, __ATOMIC_RELAXED);
	recheck_later(st);
	/* A smaller cap than last time is honoured now too. */
	victims = store_evict_locked(st, st->cap, 0);
	pthread_mutex_unlock(&st->mu);
	store_evict_files(st, victims, NULL, NULL);
	if (less)
		say_full(st, &sv, holds);
}

bool store_disk_full(struct store *st, int err, uint64_t mine,
		     uint64_t beside)
{
	struct statvfs sv;
	struct sentry *victims = NULL;
	const bool known = fstatvfs(st->lockfd, &sv) == 0;
	uint64_t holds;
	bool lowered = false, fits;

	pthread_mutex_lock(&st->mu);
	/* The other writes under way count as written: their blocks are
	 * taken, in part, and had the disk room for the rest, this write
	 * would have found it.  Counted short, the cap would stay lower by
	 * all that was in flight. */
	holds = fs_holds(st, known ? &sv : NULL, err, st->reserved - mine,
			 beside);
	if (holds < st->cap) {
		__atomic_store_n(&st->cap, holds, __ATOMIC_RELAXED);
		lowered = true;
		recheck_later(st);
	}
	/* Writes in flight larger than the cap: evicting everything would
	 * not make them fit. */
	fits = st->reserved <= st->cap;
	if (fits)
		victims = store_evict_locked(st, st->cap, 0);
	pthread_mutex_unlock(&st->mu);
	store_evict_files(st, victims, NULL, NULL);
	if (lowered) {
		STAT_ADD(st->lowered, 1);
		say_full(st, known ? &sv : NULL, holds);
	}
	return fits;
}

/* Every CAP_RECHECK_MS as chunks are written: the cap follows what the
 * filesystem holds above the floor, down (other files grew: evict now,
 * before the disk is full) and up again (room came back), never above
 * the one asked for.  One warning when even an empty cache would leave
 * the disk below its floor. */
void store_cap_recheck(struct store *st)
{
	const uint64_t asked =
	    st->cfg.max_bytes ? st->cfg.max_bytes : UINT64_MAX;
	uint64_t when = __atomic_load_n(&st->recheck_ns, __ATOMIC_RELAXED);
	struct sentry *victims = NULL;
	struct statvfs sv;
	uint64_t holds = 0;
	bool rose = false, lowered = false, below = false;
	char keep[32];

	/* No cap asked for (`wharf cache prune`): none is made up. */
	if (!st->cfg.max_bytes || now_ns() < when)
		return;
	/* One thread looks; the others go on. */
	if (!__atomic_compare_exchange_n(&st->recheck_ns, &when, UINT64_MAX,
					 false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	if (!fstatvfs(st->lockfd, &sv)) {
		pthread_mutex_lock(&st->mu);
		/* Moves of less than an eighth of the margin are left
		 * alone: a log growing by a line must not evict. */
		const uint64_t slack = st->margin / 8;

		holds = fs_holds(st, &sv, 0, 0, 0);
		below = holds == 0;
		if (holds > asked)
			holds = asked;
		rose = holds > st->cap + slack ||
		       (holds == asked && holds > st->cap);
		lowered = holds + slack < st->cap;
		if (rose || lowered)
			__atomic_store_n(&st->cap, holds, __ATOMIC_RELAXED);
		if (lowered)
			victims = store_evict_locked(st, st->cap, 0);
		pthread_mutex_unlock(&st->mu);
	}
	recheck_later(st);
	store_evict_files(st, victims, NULL, NULL);
	if (lowered) {
		STAT_ADD(st->lowered, 1);
		say_full(st, &sv, holds);
	}
	if (below && !__atomic_exchange_n(&st->floor_said, true,
					  __ATOMIC_RELAXED))
		log_warn("%s: its filesystem has %s free, below the cache's "
			 "floor (--cache-min-free) with nothing of the cache's "
			 "left to evict: other files fill it",
			 st->dir,
			 format_size((uint64_t)sv.f_bavail * sv.f_frsize, keep,
				     sizeof(keep)));
	if (rose) {
		__atomic_store_n(&st->floor_said, false, __ATOMIC_RELAXED);
		log_info("%s: room came back on its filesystem: the cache now "
			 "keeps at most %s",
			 st->dir, format_size(holds, keep, sizeof(keep)));
	}
}
