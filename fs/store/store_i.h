#ifndef WHARF_STORE_I_H
#define WHARF_STORE_I_H
/*
 * store_i: what the store's own files share, and no other module may use
 * (store.h is the contract).  They call each other one way only, from the
 * top down:
 *   store_open.c (open, lock, close, the scan at open) and store_rw.c
 *   (get, put, remove, prune, the counts), side by side
 *   -> store_sums.c (the origin checksums on record)
 *   -> cachedir.c (the layout of the cache dir, its walk)
 *   -> pack.c (packs)
 *   -> store_seal.c (seals: which files need no check)
 *   -> store_index.c (the index, the LRU, eviction)
 *   -> chunkfile.c (one chunk file's format; the keys: chunkkey.h).
 * store.h, the contract, has no file of its own: these implement it.
 * This header declares and holds no code.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "chunkfile.h"
#include "store.h"

/* The names in a cache dir, spelled here alone: cachedir.c draws the
 * layout they make, and every file of the store that opens one uses
 * these. */
#define CACHEDIR_LOCK "lock"	       /* flock'd: store_open.c */
#define CACHEDIR_CHUNKS "chunks"       /* its fan-out dirs, XX/KEY */
#define CACHEDIR_FAN "%02x"	       /* XX: a fan-out dir, of key->b[0] */
#define CACHEDIR_SEALS "seals"	       /* store_seal.c */
#define CACHEDIR_SUMS "sums"	       /* store_sums.c */
#define CACHEDIR_SNAPSHOTS "snapshots" /* snapshot.h */
#define PACK_DATA_SUFFIX ".pack"       /* KEY.pack: a pack's bytes */
#define PACK_INDEX_SUFFIX ".idx"       /* KEY.idx: its index (pack.c) */
#define TMP_PREFIX ".tmp."	       /* a write not yet renamed in */
#define FANOUT 256
/* store_walk's flag for the scan at open, which holds the lock: a bad
 * pack is removed as it is found. */
#define WALK_LOCKED 0x100
/* KEY.pack, KEY.idx and their like, with the NUL. */
#define PACK_NAME_MAX 40

/* Whatever sits in a cache dir is opened without following a link or
 * blocking on a FIFO: the dir is checked to be the user's alone, but a
 * file planted before, or by root, must not redirect or hang us. */
#define CHUNK_OPEN (O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
#define DIR_OPEN (O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)

#define STAT_ADD(field, n) __atomic_fetch_add(&(field), (n), __ATOMIC_RELAXED)
#define STAT_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* A pack (pack.c) as the index knows it.  Freed with the last sentry
 * that points to it. */
struct spack {
	struct chunk_key key; /* chunk 0's: it names the pack's files */
	uint64_t chunk_size, size;
	uint32_t n;
	uint8_t sum_kind;
	unsigned refs;	  /* sentries and callers holding it (atomic) */
	uint32_t indexed; /* its chunks in the index, under mu */
	uint64_t used_ns; /* its chunks last moved up the LRU (atomic) */
	uint64_t idx_sum; /* its index's checksum (bytes 32-39 of KEY.idx) */
	struct seal seal; /* of its .pack, under mu */
	struct pack_ent {
		struct chunk_key key;
		uint64_t sum; /* of the chunk's bytes */
	} ent[];	      /* n */
};

struct sentry {
	struct chunk_key key;
	uint64_t disk, raw;
	struct sentry *hnext;
	struct sentry *prev, *next; /* LRU: lru.next is the most recent */
	/* NULL: the chunk is a chunk file; else chunk idx of this pack. */
	struct spack *pack;
	uint32_t idx;
	bool zstd; /* stored compressed: it cannot join a pack */
	struct seal seal; /* of its chunk file (not in a pack), under mu */
	/* Last use (CLOCK_REALTIME, coarse), under mu: it ranks the chunk at
	 * the next open (DIR/seals keeps it; the file's atime or mtime where
	 * the seals do not name it). */
	int64_t used_ns;
};

/*
 * Locks: st->mu guards the index (hash table + LRU list + byte counts) and
 * is never held during disk I/O or compression.  A stripe lock per fan-out
 * directory orders a rename into place against an unlink of the same key
 * (eviction, a corrupt file), so an eviction never removes a chunk that
 * was just written again.  Order: stripe, then mu.
 */
struct store {
	char *dir;
	char *chunkdir; /* DIR/chunks */
	struct store_config cfg;
	int lockfd;
	bool locked;
	bool hdr_xattr;	   /* chunk headers go in an xattr (version 2) */
	unsigned ncpu;	   /* online CPUs at open */
	int dirfd[FANOUT]; /* the fan-out dirs, for *at() calls */
	pthread_mutex_t stripe[FANOUT];

	pthread_mutex_t mu; /* everything below but the stats */
	struct sentry **tab;
	size_t tabsize, n;
	struct sentry lru;
	uint64_t used, raw, reserved;
	uint64_t packs; /* with a chunk in the index */
	/* The cap eviction keeps: cfg.max_bytes (UINT64_MAX for none), or
	 * less where the filesystem holds less (store_index.c: the cap).
	 * Written atomically under mu, so that store_cap needs no lock. */
	uint64_t cap;
	uint64_t margin; /* left free on the filesystem beside the cap */
	uint64_t recheck_ns; /* when a lowered cap may rise (atomic) */

	uint64_t hits, misses, evictions, corrupt; /* atomic */
	uint64_t checked_bytes, sealed;		   /* atomic */
	uint64_t vanished;			   /* atomic */
	bool opened; /* store_open finished: store_close saves the seals */
	/* Chunks not written for want of room; times the cap was lowered
	 * for a full disk; whether that was said (atomic). */
	uint64_t dropped, lowered;
	bool full_said;
	bool floor_said; /* the disk below its floor, the cache empty */
	uint64_t packs_until_ns; /* atomic: store_packs_until, 0 none */
};

/* ---- store_seal.c ---- */

/* CLOCK_REALTIME in ns: a seal's time, read before the fstat it goes
 * with. */
int64_t seal_clock(void);
/* At open, after the scan: puts the seals of DIR/seals on the chunks and
 * packs of the index whose files they name, and their last uses, which
 * then order the LRU.  With check_each_mount the seals are not trusted,
 * only kept for the next mount (each still vouches only for a file whose
 * stat matches).  A bad or missing file: no seal, all is checked, and
 * the files' times rank the chunks. */
void seal_load(struct store *st, int dirfd);
/* At close: writes the seals and last uses of the index to DIR/seals,
 * atomically. */
void seal_save(struct store *st);

/* ---- store_index.c ---- */

/* Drops a reference to pack p (NULL: none); the last one frees it. */
void pack_unref(struct spack *p);
/* Frees entry e (NULL: none), which is out of the index, and its
 * reference to its pack. */
void sentry_free(struct sentry *e);
/* Under mu: key's entry in the index, or NULL.  Every chunk lookup runs
 * it. */
struct sentry *index_find(struct store *st, const struct chunk_key *key);
/* Under mu: takes e out of the LRU list (not out of the hash table). */
void lru_unlink(struct sentry *e);
/* Under mu: e is used now: to the front of the LRU. */
void lru_push_front(struct store *st, struct sentry *e);

/* Under mu: puts new entry e in the index, as the most recently used
 * (front) or the least. */
void store_index_insert(struct store *st, struct sentry *e, bool front);
/* Under mu: takes e out of the index. */
void store_index_remove(struct store *st, struct sentry *e);
/* Under mu: orders the LRU by used_ns, the latest first (ties keep their
 * order).  @return 0 or -ENOMEM (the order is left as it was). */
int store_index_sort(struct store *st);
/* Under key's stripe: forgets the chunk file `name` of key if it is gone
 * and its entry is still a chunk file's.  @return whether it did. */
bool store_index_forget(struct store *st, const struct chunk_key *key,
			const char *name);
/* A file the index held is gone, removed behind the store's back
 * (`name`, relative to the chunk dir, for the message): counted and
 * said, as no eviction or check of ours removed it. */
void store_vanished(struct store *st, const char *name);

/* KEY.pack and KEY.idx, in the fan-out dir of key->b[0]. */
void pack_names(const struct chunk_key *key, char data[PACK_NAME_MAX],
		char idx[PACK_NAME_MAX]);
/* "XX/KEY" relative to the chunk dir, for messages. */
void store_chunk_relpath(const struct chunk_key *key, char out[36]);
/* Removes the file `name` in dirfd if it is still the inode fd reads.
 * @return 0 or -errno (-ESTALE: replaced). */
int store_unlink_if_same(int dirfd, const char *name, int fd);
/* Removes the files of pack `key` in dirfd (the .pack first), where they
 * exist.  @return 0 or -errno of the first failure. */
int store_unlink_pack(int dirfd, const struct chunk_key *key);
/* Chunk file fd of key is corrupt: removes it and says so. */
void store_chunk_bad(struct store *st, const struct chunk_key *key, int fd,
		     const char *why);

/* Under mu: takes least recently used chunks out of the index until
 * used + reserved + need <= target (a pack's chunks go together); returns
 * them for store_evict_files. */
struct sentry *store_evict_locked(struct store *st, uint64_t target,
				  uint64_t need);
/* Under mu: takes e out of the index (its pack's chunks with it) and
 * returns it for store_evict_files. */
struct sentry *store_evict_one_locked(struct store *st, struct sentry *e);
/* Without mu: removes the victims' files (a pack's whole) and frees
 * them. */
void store_evict_files(struct store *st, struct sentry *victims,
		       uint64_t *chunks, uint64_t *bytes);

/* Under mu (or where the cap is read atomically): whether the cap is the
 * filesystem's room, less than the one asked for. */
bool store_fs_bound(const struct store *st);

/* At open, with the index built: sets the cap to the smaller of
 * cfg.max_bytes and what the cache's filesystem can hold (when a cap was
 * asked for), saying so once where that is less, and evicts to it. */
void store_cap_fit(struct store *st);
/* Without mu: the disk said it is full (err: -ENOSPC or -EDQUOT) while
 * something was written (`mine` bytes of it still reserved, its file
 * gone), or `beside` more bytes are wanted on it for a file that is not
 * a chunk: lowers the cap to what the filesystem holds now, less the
 * margin and `beside`, and evicts to it (writes in flight included).
 * @return whether the writes in flight fit under the cap (a write may
 * then be tried again). */
bool store_disk_full(struct store *st, int err, uint64_t mine,
		     uint64_t beside);
/* Without mu: the cap follows what the filesystem holds above the floor
 * (down, evicting, and up to cfg.max_bytes), looked at every
 * cfg.cap_recheck_ms at most (a clock read otherwise). */
void store_cap_recheck(struct store *st);

/* ---- pack.c ---- */

/* The pack holding key, with a reference, or NULL; then, where seal is
 * not NULL, the seal of its chunk file goes there (none: file.ino 0). */
struct spack *pack_of(struct store *st, const struct chunk_key *key,
		      uint32_t *idx, struct seal *seal);
/* store_get or store_map (m not NULL) for chunk idx of pack p. */
int pack_get(struct store *st, struct spack *p, uint32_t idx, void *buf,
	     size_t cap, size_t *len, struct store_map *m);
/* store_walk's visit of pack `key`, whose KEY.idx is in d. */
int pack_walk(const char *chunkdir, DIR *d, const char *fan,
	      const struct chunk_key *key, unsigned flags, store_walk_fn fn,
	      void *arg);

/* ---- store_sums.c ---- */

/* Removes the origin checksums on record (the cache was emptied). */
void store_sums_clear(struct store *st);

/* ---- cachedir.c ---- */

/* Removes what a crash left in the fan-out dirs (open as fan_fd): temp
 * files, and half a pack. */
void cachedir_remove_strays(const int fan_fd[FANOUT]);

#endif
