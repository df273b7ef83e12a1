#ifndef WHARF_CHUNKFILE_H
#define WHARF_CHUNKFILE_H
/*
 * chunkfile: the format of one chunk file (its header, codecs and
 * checksums, described in chunkfile.c) and the keys that name chunks
 * (chunkkey.h); reading, checking and writing one file.  It knows nothing
 * of the store around it, and includes nothing of it.  Only the store's
 * own files include it; other modules go through store.h.
 */
#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <xxhash.h>
#ifdef HAVE_XXH3_64BITS_WITHSEED_DISPATCH
#include <xxh_x86dispatch.h>
#endif
#include <zstd.h>

#include "chunkkey.h"

#define HDR_SIZE 48
#define FORMAT_INLINE 1 /* the header at the start of the file */
#define FORMAT_XATTR 2	/* the header in HDR_XATTR, the payload alone */
#define HDR_XATTR "user.wharf.chunk"
#define SUM_XXH64 0
#define SUM_XXH3 1
#define CODEC_RAW 0
#define CODEC_ZSTD 1
#define BLOCK 4096
/* No chunk is larger (--chunk-size stops at 256M): a bigger raw length in
 * a header is corruption, and must not size an allocation. */
#define MAX_RAW (1ull << 30)

/* A chunk file's header, decoded. */
struct hdr {
	uint8_t version, codec, sum_kind;
	off_t payload; /* where the payload starts in the file */
	uint64_t raw_len, stored_len, sum;
	struct chunk_key key;
	struct store_file_id file; /* nor this: which file it came from */
	bool trusted;		   /* nor this: its seal spared the hash */
};

/*
 * A seal (store_seal.c): a file a check found good, as fstat saw it
 * then, the checksum that was checked (a chunk's, or a pack index's),
 * and when the seal was taken.  No file: file.ino 0.
 */
struct seal {
	struct store_file_id file;
	uint64_t sum;
	int64_t taken_ns; /* CLOCK_REALTIME, after the fstat */
};

/* A set of zstd contexts and a scratch buffer for compressed bytes, from
 * the process's pool (chunkfile_codec_take), or a caller's own. */
struct tctx {
	ZSTD_DCtx *d;
	ZSTD_CCtx *c;
	void *buf;
	size_t cap;
	struct tctx *next; /* in the pool */
};

/* ---- little-endian fields ---- */

static inline uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

/* ---- checksums: inline, as every read sums a chunk ---- */

/* The seed of a chunk's checksum: its key's first 8 bytes. */
static inline uint64_t key_seed(const struct chunk_key *key)
{
	return rd64(key->b);
}

/* libxxhash's dispatching entry points where it has them (x86). */
#ifdef HAVE_XXH3_64BITS_WITHSEED_DISPATCH
#define XXH3_ONESHOT XXH3_64bits_withSeed_dispatch
#define XXH3_UPDATE XXH3_64bits_update_dispatch
#else
#define XXH3_ONESHOT XXH3_64bits_withSeed
#define XXH3_UPDATE XXH3_64bits_update
#endif

/* The checksum of a chunk's raw bytes, of the kind its header names. */
static inline uint64_t chunk_sum(uint8_t kind, const void *data, size_t len,
				 uint64_t seed)
{
	if (kind == SUM_XXH64)
		return XXH64(data, len, seed);
	return XXH3_ONESHOT(data, len, seed);
}

/* ---- files ---- */

static inline int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* What a file of file_size bytes takes on disk. */
static inline uint64_t disk_bytes(uint64_t file_size)
{
	return (file_size + BLOCK - 1) / BLOCK * BLOCK;
}

static inline struct store_file_id file_id(const struct stat *sb)
{
	return (struct store_file_id){.dev = sb->st_dev,
				      .ino = sb->st_ino,
				      .mtime_ns = ts_ns(&sb->st_mtim),
				      .ctime_ns = ts_ns(&sb->st_ctim),
				      .size = (uint64_t)sb->st_size};
}

/* Whether a is the file b was (chunk files are never written in place:
 * a new chunk is renamed in as a new inode; a write by hand moves the
 * ctime, which no one can set back). */
static inline bool same_file(const struct store_file_id *a,
			     const struct store_file_id *b)
{
	return b->ino && a->dev == b->dev && a->ino == b->ino &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns &&
	       a->size == b->size;
}

/* How far past a file's ctime a seal must be taken to vouch for it: a
 * write in the ctime's own tick would not move it (store_seal.c). */
#define SEAL_SETTLE_NS 100000000ll	   /* 100 ms: past any jiffy */
#define SEAL_SETTLE_COARSE_NS 2000000000ll /* stamps of whole seconds */

/* Whether a seal of a file whose ctime is ctime_ns, taken at taken_ns,
 * came after the ctime's tick. */
static inline bool seal_settled(int64_t ctime_ns, int64_t taken_ns)
{
	const int64_t settle =
	    ctime_ns % 1000000000 ? SEAL_SETTLE_NS : SEAL_SETTLE_COARSE_NS;

	return taken_ns - ctime_ns > settle;
}

/* Whether seal s vouches for file id holding bytes of checksum sum. */
static inline bool seal_trusts(const struct seal *s,
			       const struct store_file_id *id, uint64_t sum)
{
	return s->file.ino && s->sum == sum && same_file(id, &s->file) &&
	       seal_settled(s->file.ctime_ns, s->taken_ns);
}

/* ---- chunkfile.c ---- */

/* A set from the pool (waits while every CPU's is taken); NULL without
 * memory.  Give it back with chunkfile_codec_give (NULL: nothing). */
struct tctx *chunkfile_codec_take(void);
void chunkfile_codec_give(struct tctx *t);
/* Frees what a set of the caller's own (not the pool's) holds. */
void chunkfile_codec_free(struct tctx *t);

/* h's 48 bytes, as a chunk file's header. */
void chunkfile_hdr_encode(uint8_t out[HDR_SIZE], const struct hdr *h);

/* pread of exactly n bytes.  @return 0, -EIO, or -ENODATA when the file
 * ends early. */
int chunkfile_pread(int fd, void *buf, size_t n, off_t off);

/* Checks len bytes at off of a read-only mapping against sum (see
 * chunkfile.c).  @return 0, -EBADMSG with *why, -EIO. */
int chunkfile_check_in_map(const uint8_t *map, uint64_t off, uint64_t len,
			   uint8_t sum_kind, uint64_t seed, uint64_t sum,
			   const char **why);

/* Maps len bytes of fd at off into *m and checks them against sum.
 * @return 0; -ENOTSUP (empty, or fd cannot be mapped); -EBADMSG with
 * *why. */
int chunkfile_map(int fd, uint64_t off, uint64_t len, uint8_t sum_kind,
		  uint64_t seed, uint64_t sum, struct store_map *m,
		  const char **why, bool trusted);

/* Reads and checks chunk file fd: its header only, or its chunk into buf
 * (with *tp, a codec set taken when needed), or mapped into *m; with no
 * hash where trust (may be NULL) is a seal that vouches for the file.
 * See chunkfile.c. */
int chunkfile_read(int fd, const struct chunk_key *key, struct tctx **tp,
		   void *buf, size_t cap, struct hdr *h, const char **why,
		   struct store_map *m, const struct seal *trust);

/* Reads len bytes of fd at start in pieces, checks them against sum, and
 * with copy_to >= 0 writes them there at copy_off too. */
int chunkfile_check_range(int fd, uint64_t start, uint64_t len,
			  uint8_t sum_kind, uint64_t seed, uint64_t sum,
			  const char **why, int copy_to, uint64_t copy_off);

/* Checks a raw chunk file whose header h was read, whole.  @return 0;
 * -ENOTSUP (compressed, or the header in the file); -EOVERFLOW;
 * -EBADMSG with *why; -EIO. */
int chunkfile_check_raw(int fd, const struct hdr *h, size_t cap,
			const char **why);

/* How a chunk is stored: *payload and *plen, a zstd frame in t's buffer
 * or data itself, as *codec says. */
void chunkfile_payload(struct tctx *t, int zstd_level, unsigned min_saving_pct,
		       const void *data, size_t len, const void **payload,
		       size_t *plen, uint8_t *codec);

/* Writes a new chunk file `name` in dirfd: header hdr (encoded) and the
 * payload.  @return 0 or -errno (the file removed). */
int chunkfile_write(int dirfd, const char *name, const uint8_t *hdr,
		    const void *payload, size_t plen);

#endif
