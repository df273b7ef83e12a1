#ifndef WHARF_STORE_H
#define WHARF_STORE_H
/*
 * store: the on-disk chunk cache under --cache-dir.  One file per chunk,
 * one zstd frame each, or raw bytes when compression saves less than the
 * threshold, with a header (lengths, codec, checksum) in an xattr where
 * the filesystem keeps them; or, for an object handed whole to the
 * kernel, one file of all its raw chunks (a pack: store_open_object).
 * Every chunk carries a checksum that is verified on every read from
 * disk, unless a seal vouches for its file (store_seal.c: checked before,
 * its stat unchanged since).  Writes are atomic (temp file + rename).
 * The total is capped; eviction is least-recently-used and keeps the cap
 * while the mount runs.
 * One mount per cache dir (an flock on DIR/lock); the dir is created 0700.
 * The files of fs/store implement it; store_i.h says which does what.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A chunk's key, the identity of its file, a mapping of its bytes. */
#include "chunkkey.h"
#include "compiler.h"

struct store_config {
	const char *dir;
	uint64_t max_bytes;	 /* cap on chunk files' disk usage; 0: no cap */
	int zstd_level;		 /* 0: the default, 3 */
	unsigned min_saving_pct; /* store raw when zstd saves less; 0: 10;
				  * 100: always raw */
	/* Called (from the evicting thread, no store lock held) for each
	 * chunk file eviction removed, so that whoever maps it lets it go
	 * and its blocks are freed; may be NULL. */
	void (*evicted)(void *arg, const struct chunk_key *key);
	void *evicted_arg;
	/* Write headers at the start of chunk files (format 1) even where
	 * the filesystem keeps xattrs: for tests of caches made that way. */
	bool inline_headers;
	/* How often a cap lowered for a full disk looks whether room came
	 * back (store_put); 0: every minute. */
	unsigned cap_recheck_ms;
	/* Trust no seal (store_seal.c): every chunk file is checked at each
	 * load into memory and every pack at its first open in a mount, as
	 * before seals (--verify=mount). */
	bool check_each_mount;
	/* How long store_open waits for a holder of the lock that is no
	 * longer mounted (a mount still writing its last chunks after an
	 * unmount: `umount DIR && mount DIR`); 0: it does not wait. */
	unsigned holder_exit_wait_ms;
	/* The free-space floor on the cache's filesystem
	 * (--cache-min-free): min_free_pct percent of it when that is not
	 * 0, else min_free bytes; unless min_free_set, 5% or 1 GiB,
	 * whichever is smaller.  The cap comes down (and chunks are
	 * evicted) so that the disk keeps it, also when other files grow. */
	uint64_t min_free;
	unsigned min_free_pct;
	bool min_free_set;
};

struct store;

/* Opens (creating 0700) the cache dir and takes its lock.  The dir, its
 * lock file and chunk dirs must belong to the user and be writable by
 * nobody else (-EPERM with *err otherwise); links are never followed in
 * it.
 * A holder that is no longer mounted is waited for (holder_exit_wait_ms).
 * @return 0; -EBUSY with *err naming the holder when another mount has it;
 * other -errno with *err (caller frees). */
int store_open(const struct store_config *cfg, struct store **out,
	       char **err) WHARF_CHECK;
void store_close(struct store *st);

/*
 * Reads the chunk into buf (cap bytes), decompressing if needed, after
 * verifying its checksum (unless sealed).  Thread-safe; no allocation
 * per call once the pool of codec contexts is warm (one per CPU at most,
 * kept for the process's life).
 * @return 0 with *len set; -ENOENT when not cached; -EBADMSG when the file
 * is corrupt (it is removed and a warning logged, so the caller refetches);
 * -EOVERFLOW when the chunk is longer than cap; -EIO on a read error.
 */
int store_get(struct store *st, const struct chunk_key *key, void *buf,
	      size_t cap, size_t *len) WHARF_CHECK;

/* Whether the store holds the chunk (by its index: no file is opened, so
 * a file removed by hand still counts until a read finds it gone). */
bool store_has(struct store *st, const struct chunk_key *key);

/* As store_get, but a raw (uncompressed) chunk is mapped, and verified by
 * a hash of the mapping, instead of copied into a buffer of the caller's.
 * Chunk files are 0600 in a 0700 dir and never truncated by the store: a
 * file cut short under a mapping by hand would fault the reader.
 * @return store_get's, and -ENOTSUP when the chunk is compressed or its
 * file cannot be mapped: use store_get then. */
int store_map(struct store *st, const struct chunk_key *key, size_t cap,
	      struct store_map *m, size_t *len) WHARF_CHECK;

/*
 * Opens the file of a raw chunk that holds the chunk's bytes alone (the
 * header in its xattr: see chunkfile.c), verified, so that the kernel can
 * read the file in the mount's place (passthrough.h).  *checked names the
 * file this caller verified last for key: if it is still the same file,
 * its bytes are not read again (a mount checks a file once, not at every
 * open); on success it names the file opened.  The descriptor is
 * read-only and the caller's to close; the file is never written again,
 * and stays readable through it if evicted meanwhile.
 * @return store_map's, and -ENOTSUP also for a chunk file that starts with
 * its header (made where the filesystem kept no xattrs, or by an older
 * version). */
int store_open_raw(struct store *st, const struct chunk_key *key, size_t cap,
		   struct store_file_id *checked, int *fd,
		   size_t *len) WHARF_CHECK;

/* Whether the chunk file of key is still the file *id names, as
 * store_open_raw last checked it (one stat, no open): a cache file handed
 * to the kernel may be handed again without a check while it is. */
bool store_raw_unchanged(struct store *st, const struct chunk_key *key,
			 const struct store_file_id *id);

/*
 * As store_open_raw, for an object of n chunks (keys, in order; n >= 2),
 * each chunk_size long but the last, size bytes in all: opens a file that
 * holds the object's bytes alone, a pack (see pack.c).  The first call
 * for an object makes its pack from its chunk files, which must all be in
 * the store, raw, with their headers beside them; the pack then replaces
 * them.  While it is made the store holds both (its size is reserved
 * under the cap).  A pack is verified whole when made, and once per
 * mount after that (*checked) unless its seal vouches for it; its
 * chunks are read as chunk files are, and any of them evicted evicts it
 * whole.
 * @return 0 with *fd (read-only, the caller's); -ENOENT (not all cached);
 * -ENOTSUP (a chunk compressed or in a format 1 file, or a cache without
 * xattrs); -EBADMSG (corrupt: removed, the chunks are fetched again);
 * -ENOSPC (the cap or the disk cannot hold the pack beside its chunk
 * files for a moment, or the cache fills its filesystem and the pack
 * would evict chunks); -EINVAL (sizes that do not fit n); -EIO; -ENOMEM;
 * -ECANCELED (store_packs_until).
 */
int store_open_object(struct store *st, const struct chunk_key *keys,
		      uint32_t n, uint64_t chunk_size, uint64_t size,
		      struct store_file_id *checked, int *fd) WHARF_CHECK;

/* Makes the object's pack, as store_open_object would, and opens
 * nothing: for a pack made ahead of the open that hands it over.
 * @return 0 (made, or there already), or store_open_object's errors. */
int store_pack_object(struct store *st, const struct chunk_key *keys,
		      uint32_t n, uint64_t chunk_size,
		      uint64_t size) WHARF_CHECK;

/*
 * Packs being made or checked stop once now_ns() passes deadline_ns (1:
 * now): a stop must not wait for a copy of gigabytes at idle priority.
 * What stops leaves nothing behind that counts (no pack renamed into
 * place, none marked checked); its calls return -ECANCELED, and so do
 * later ones.  A deadline only moves earlier.  Async-signal-safe (atomics
 * alone): a stop signal's handler calls it.
 */
void store_packs_until(struct store *st, uint64_t deadline_ns);

/* Whether the store holds the chunk in a pack (by its index, as
 * store_has). */
bool store_packed(struct store *st, const struct chunk_key *key);

/* Stores a chunk atomically, evicting old chunks to stay under the cap.
 * The cap is the smaller of cfg.max_bytes and what the filesystem holds
 * (looked at by store_open); a write that finds the disk full lowers it
 * to what the disk holds then (less a margin), evicts to it, and tries
 * once more; the first time, a warning names the filesystem.  A lowered
 * cap rises again, up to cfg.max_bytes, when room comes back (looked at
 * every cfg.cap_recheck_ms at most).  A chunk not
 * written is counted (store_stats.writes_dropped).
 * @return 0, -ENOSPC (disk full, or the chunk is larger than the cap: it
 * is simply not cached, no partial file is left), -EIO (logged), -ENOMEM,
 * -EFBIG (over 1 GiB). */
int store_put(struct store *st, const struct chunk_key *key, const void *data,
	      size_t len) WHARF_CHECK;

/* Removes the chunk from the store (its pack whole, when it is in one):
 * its bytes failed a check the store cannot make itself, the origin's
 * checksum of its object.  Whoever maps it is told (store_config.evicted).
 * A chunk the store does not hold: nothing. */
void store_remove(struct store *st, const struct chunk_key *key);

/*
 * The origin checksums on record: DIR/sums, a line per object whose
 * bytes a mount found to match the checksum its origin gave, appended
 * then.  `wharf cache verify` reads the object's chunks again and checks
 * them against it: a chunk whose bytes changed after the fact, though
 * its own checksum was made to match, is caught there.  Lines of objects
 * evicted since stay (one per object verified, a few hundred bytes each)
 * until the cache is emptied (store_prune to 0); the last line of an
 * object wins.
 */
struct store_sum {
	const char *source, *path, *version; /* as in store_key */
	uint64_t size;
	int64_t mtime;
	uint32_t chunk_size;
	const char *digest; /* the origin's, "ALGO:HEX" (checksum.h) */
};
/* Appends s to st's record.  @return 0 or -errno (the caller warns). */
int store_sum_record(struct store *st, const struct store_sum *s) WHARF_CHECK;

/* One object on record, as store_sums_verify found it. */
struct store_sum_check {
	struct store_sum sum;
	/* 0: its bytes match; -ENOENT: not all its chunks are cached (not
	 * checked); -EBADMSG: they do not match (got says what they give);
	 * else a chunk could not be read (why says how). */
	int state;
	const char *got; /* "ALGO:HEX" of the bytes, with -EBADMSG */
	const char *why; /* with another error */
	bool removed;	 /* -EBADMSG: its chunks were removed */
};
typedef int (*store_sum_fn)(const struct store_sum_check *c, void *arg);
/*
 * Checks each object on record in dir (the last line of each) against
 * the origin's checksum, reading its chunk files or pack without the
 * lock, as store_walk does, and removes the chunks of one that does not
 * match.  fn returning nonzero stops and is returned.
 * @return 0, fn's value, or -errno with *err (caller frees); no record
 * at all is 0 with no call.
 */
int store_sums_verify(const char *dir, store_sum_fn fn, void *arg,
		      char **err) WHARF_CHECK;

/*
 * A file beside the chunks (a listing snapshot) of `bytes` could not be
 * written for want of room (err: -ENOSPC or -EDQUOT): lowers the cap as a
 * chunk write that finds the disk full does, so that `bytes` more are
 * free, and evicts to it.  st may be NULL (no store: nothing to do).
 * @return 0 (write it again, once), or err where nothing can be done.
 */
int store_room(struct store *st, int err, uint64_t bytes);

/* The cap eviction keeps now (store_stats.cap_bytes; 0: none), without
 * a lock. */
uint64_t store_cap(struct store *st);

struct store_stats {
	uint64_t chunks, packs, bytes_on_disk, bytes_raw, max_bytes;
	uint64_t hits, misses, evictions, corrupt;
	/* The cap eviction keeps (0: none): max_bytes, or less where the
	 * filesystem holds less. */
	uint64_t cap_bytes;
	/* Chunks not written to disk (no room, or a write error); times a
	 * full disk lowered cap_bytes while open. */
	uint64_t writes_dropped, cap_lowered;
	/* Bytes hashed to check chunks and packs read from disk; loads and
	 * pack opens that a seal spared a hash (store_seal.c). */
	uint64_t checked_bytes, sealed;
	/* Files the index held that were gone when read: removed behind the
	 * mount's back (by hand, `wharf cache verify`), not by it. */
	uint64_t vanished;
};
void store_get_stats(struct store *st, struct store_stats *out);

/*
 * Records the mountpoint in DIR/lock (second line, after the pid), so that
 * `wharf cache stats` can find DIR/.wharf/stats of the mount.  The pid
 * written is the caller's: call it from the process that serves the mount
 * (after daemonizing; the lock itself survives fork).
 * @return 0 or -errno.
 */
int store_set_mountpoint(struct store *st, const char *mountpoint) WHARF_CHECK;

/*
 * Who holds DIR's lock.  @return 0 with *pid and *mountpoint (malloc'd,
 * NULL when none was recorded; caller frees); -ENOENT when nobody holds
 * it; other -errno when DIR/lock cannot be read.
 */
int store_lock_holder(const char *dir, pid_t *pid,
		      char **mountpoint) WHARF_CHECK;

/* Whether dir holds a chunk cache (its lock file, made by the first
 * open, or its chunk dir): commands that must not make one of any dir ask
 * this first. */
bool store_is_cache(const char *dir);

/* The default cache dir: /var/cache/wharf for root, else
 * $XDG_CACHE_HOME/wharf, else ~/.cache/wharf (HOME, else the password
 * file's home).  Caller frees.  NULL with errno ENOENT when no home is
 * known, else ENOMEM. */
char *store_default_dir(void);

/*
 * Listing snapshots live beside the chunks, one file per source:
 * DIR/snapshots/HASH.list, HASH from the source id (snapshot.h says what
 * a snapshot holds; the file names its source, so a hash collision is
 * caught on load).  Each returns a malloc'd path, NULL without memory.
 */
char *store_snapshot_dir(const char *dir);
char *store_snapshot_path(const char *dir, const char *source_id);

/*
 * Maintenance: one place that knows the layout DIR/chunks/XX/KEY.
 *
 * store_walk visits every chunk file under dir without taking the lock
 * (it is safe while the cache is mounted: files that vanish are skipped).
 * It reads each file's header; with STORE_WALK_VERIFY it also reads,
 * decompresses and checksums the whole chunk and removes a bad file (unless
 * a mount replaced it meanwhile).  fn returning nonzero stops the walk and
 * is returned.  Temp files of unfinished writes are not visited.
 * @return 0, fn's value, or -errno with *err (caller frees).
 */
enum { STORE_WALK_VERIFY = 1 };
struct store_entry {
	struct chunk_key key;
	const char *path;    /* the chunk file */
	uint64_t disk_bytes; /* file size rounded up to 4 KiB blocks */
	uint64_t raw_bytes;  /* 0 when bad */
	int64_t atime_ns;    /* last use (atime or mtime), ns since 1970 */
	bool zstd;
	int error;	 /* 0; -EBADMSG: corrupt; else unreadable */
	bool removed;	 /* a corrupt file that was removed */
	const char *why; /* what is wrong, when error */
	/* Where the chunk is in a pack (path is the pack's bytes): the
	 * store's own, for its scan; NULL for a chunk file. */
	const struct spack *pack;
	uint32_t pack_index;
};
typedef int (*store_walk_fn)(const struct store_entry *e, void *arg);
int store_walk(const char *dir, unsigned flags, store_walk_fn fn, void *arg,
	       char **err) WHARF_CHECK;

/* Evicts least recently used chunks until the store holds at most
 * max_bytes (0 empties it, and drops its checksums on record).  Needs the
 * store open, i.e. its lock.  *chunks and *bytes (may be NULL) get what
 * was removed.  @return 0. */
int store_prune(struct store *st, uint64_t max_bytes, uint64_t *chunks,
		uint64_t *bytes);

#endif
