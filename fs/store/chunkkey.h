#ifndef WHARF_CHUNKKEY_H
#define WHARF_CHUNKKEY_H
/*
 * chunkkey: what names a chunk and the file that holds it, shared by the
 * store's contract (store.h) and one chunk file's format (chunkfile.h)
 * below it: the key, the identity of a chunk's file, a mapping of its
 * bytes.  Its own header, so that the format needs nothing from the
 * store above it; the functions are chunkfile.c's.
 */
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"


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
/* Parses 32 hex digits (a chunk file's name).  @return 0 or -EINVAL. */
int store_key_parse(const char *hex, struct chunk_key *key) WHARF_CHECK;

/* XXH64 of len bytes (the checksum in every chunk file; exposed for tests). */
uint64_t store_hash64(const void *data, size_t len, uint64_t seed);

/* Which file a chunk was read from: the same one (device, inode, size,
 * mtime and ctime) holds the same bytes, since chunk files are never
 * written in place, and any write to a file moves its ctime.  All zero:
 * none. */
struct store_file_id {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

/* A chunk file mapped read-only: the chunk's bytes are at data. */
struct store_map {
	void *map; /* munmap(map, map_len) when done */
	size_t map_len;
	void *data;
};

#endif
