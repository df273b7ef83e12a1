#ifndef WHARF_STORE_H
#define WHARF_STORE_H
/*
 * store: the on-disk chunk cache under --cache-dir.  One file per chunk,
 * one zstd frame each, or raw bytes when compression saves less than the
 * threshold; every chunk carries a checksum that is verified on every read
 * from disk.  Writes are atomic (temp file + rename).  The total is capped;
 * eviction is least-recently-used and keeps the cap while the mount runs.
 * One mount per cache dir (an flock on DIR/lock); the dir is created 0700.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* A chunk's identity: a hash of (source id, object path, object version,
 * size, mtime, chunk size, chunk index).  A changed object gets new keys. */
struct chunk_key {
	uint8_t b[16];
};

void store_key(struct chunk_key *key, const char *source_id, const char *path,
	       const char *version, uint64_t size, int64_t mtime,
	       uint32_t chunk_size, uint64_t chunk_index);
/* Lowercase hex of the key into out[33]. */
void store_key_hex(const struct chunk_key *key, char out[33]);

struct store_config {
	const char *dir;
	uint64_t max_bytes;     /* cap on chunk files' disk usage; 0: no cap */
	int zstd_level;         /* default 3 */
	unsigned min_saving_pct; /* store raw when zstd saves less, default 10 */
};

struct store;

/* Opens (creating 0700) the cache dir and takes its lock.
 * @return 0; -EBUSY with *err naming the holder when another mount has it;
 * other -errno with *err (caller frees). */
int store_open(const struct store_config *cfg, struct store **out,
	       char **err) WHARF_CHECK;
void store_close(struct store *st);

/*
 * Reads the chunk into buf (cap bytes), decompressing if needed, after
 * verifying its checksum.  Thread-safe; no allocation per call.
 * @return 0 with *len set; -ENOENT when not cached; -EBADMSG when the file
 * is corrupt (it is removed and a warning logged, so the caller refetches);
 * -EIO on a read error.
 */
int store_get(struct store *st, const struct chunk_key *key, void *buf,
	      size_t cap, size_t *len) WHARF_CHECK;

/* Stores a chunk atomically, evicting old chunks to stay under the cap.
 * @return 0, -ENOSPC (disk full: the chunk is simply not cached, no partial
 * file is left), -EIO. */
int store_put(struct store *st, const struct chunk_key *key,
	      const void *data, size_t len) WHARF_CHECK;

struct store_stats {
	uint64_t chunks, bytes_on_disk, bytes_raw, max_bytes;
	uint64_t hits, misses, evictions, corrupt;
};
void store_get_stats(struct store *st, struct store_stats *out);

#endif
