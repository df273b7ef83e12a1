#ifndef WHARF_LOADER_INDEX_I_H
#define WHARF_LOADER_INDEX_I_H
/* index_i: what the index file's reader (index.c) and writer
 * (index_write.c) share of its format: the sections' alignment and the
 * hash over them.  For those two files alone. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ALIGN 64u

/* A 64-bit running hash over 8-byte words: fast enough to verify gigabytes
 * and sensitive to every bit, which is all a corruption check needs. */
#define HASH_SEED 0x9e3779b97f4a7c15ull
static inline uint64_t hash_words(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;
	assert(len % 8 == 0);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h;
}

static inline uint64_t align_up(uint64_t v)
{
	return (v + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
}

#endif
