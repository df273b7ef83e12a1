/*
 * The on-disk chunk store: see store.h for the contract.
 *
 * Layout: DIR/lock (flock'd by the mount; "pid\nmountpoint\n") and
 * DIR/chunks/XX/KEY, where KEY is the chunk key in hex and XX its first
 * byte, so that no directory holds more than 1/256 of the chunks.
 *
 * A chunk has a 48-byte header and the payload, all little-endian:
 *   0  magic "WHCK"        4  version (1, 2)   5  codec (0 raw, 1 zstd)
 *   6  checksum (0 XXH64, 1 XXH3-64)  7  reserved (0)
 *   8  raw length          16 stored (payload) length
 *   24 the checksum of the raw bytes, seeded with the key's first 8 bytes
 *   32 the key (16 bytes)
 * The payload is the raw bytes or one zstd frame.  The checksum is of the
 * raw bytes so that it covers the decompressor too, and its seed and the
 * key in the header tie the bytes to the name: a file copied or renamed
 * to another key does not verify.  Chunks are written with XXH3 from
 * libxxhash, whose x86 build picks AVX2 or AVX-512 at run time (43-52
 * GB/s here, 5x XXH64); chunks written with XXH64 (before XXH3, which the
 * byte at 6 tells apart: it was 0 then) are still read, with libxxhash's
 * XXH64, which makes the chunk keys too.
 *
 * Where the header lives: version 2 keeps it in the file's extended
 * attribute user.wharf.chunk and the payload alone in the file, so that a
 * raw chunk's file holds exactly the chunk's bytes and the kernel can
 * read it in the mount's place (store_open_raw, passthrough.h).  Version 1
 * puts the header at the start of the file; it is still read, and written
 * on a filesystem that takes no user xattrs (probed once at open).
 *
 * Writes go to a temp file in the chunk's own directory and are renamed
 * into place, so a reader never sees a partial chunk.  No fsync: this is
 * a cache; a file that lost its data in a crash fails its checksum at the
 * next read and is fetched again, while an fsync per chunk would cost a
 * disk flush for every chunk fetched.
 *
 * Locks: st->mu guards the index (hash table + LRU list + byte counts) and
 * is never held during disk I/O or compression.  A stripe lock per fan-out
 * directory orders a rename into place against an unlink of the same key
 * (eviction, a corrupt file), so an eviction never removes a chunk that
 * was just written again.  Order: stripe, then mu.
 */
#include "config.h"

#include "store.h"

#include <assert.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
/* For XXH64_state_t and XXH3_state_t, so that a streaming sum needs no
 * allocation. */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#ifdef HAVE_XXH3_64BITS_WITHSEED_DISPATCH
#include <xxh_x86dispatch.h>
#endif
#include <zstd.h>

#define HDR_SIZE 48
#define FORMAT_INLINE 1 /* the header at the start of the file */
#define FORMAT_XATTR 2	/* the header in HDR_XATTR, the payload alone */
#define HDR_XATTR "user.wharf.chunk"
#define SUM_XXH64 0
#define SUM_XXH3 1
#define CODEC_RAW 0
#define CODEC_ZSTD 1
#define FANOUT 256
#define BLOCK 4096
#define TMP_PREFIX ".tmp."
/* No chunk is larger (--chunk-size stops at 256M): a bigger raw length in
 * a header is corruption, and must not size an allocation. */
#define MAX_RAW (1ull << 30)
/* Compress a sample of this much first; see choose_payload. */
#define SAMPLE_SIZE (64 * 1024)
#define SAMPLE_MIN_CHUNK (256 * 1024)
#define TOUCH_EVERY_S 60
/* store_walk's flag for the scan at open, which holds the lock: a bad
 * pack is removed as it is found. */
#define WALK_LOCKED 0x100

static const uint8_t magic[4] = {'W', 'H', 'C', 'K'};

/* Whatever sits in a cache dir is opened without following a link or
 * blocking on a FIFO: the dir is checked to be the user's alone, but a
 * file planted before, or by root, must not redirect or hang us. */
#define CHUNK_OPEN (O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
#define DIR_OPEN (O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)

#define STAT_ADD(field, n) __atomic_fetch_add(&(field), (n), __ATOMIC_RELAXED)
#define STAT_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

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

/* ---- keys ---- */

uint64_t store_hash64(const void *data, size_t len, uint64_t seed)
{
	return XXH64(data, len, seed);
}

static void key_feed_u64(XXH64_state_t s[2], uint64_t v)
{
	const uint64_t le = htole64(v);

	(void)XXH64_update(&s[0], &le, 8);
	(void)XXH64_update(&s[1], &le, 8);
}

/* Length first, so that ("ab","c") and ("a","bc") differ. */
static void key_feed_str(XXH64_state_t s[2], const char *str)
{
	const size_t n = str ? strlen(str) : 0;

	key_feed_u64(s, n);
	(void)XXH64_update(&s[0], str ? str : "", n);
	(void)XXH64_update(&s[1], str ? str : "", n);
}

/* Appends v, little-endian, at *pos in buf; returns false when full. */
static bool ser_u64(uint8_t *buf, size_t cap, size_t *pos, uint64_t v)
{
	const uint64_t le = htole64(v);

	if (cap - *pos < 8)
		return false;
	memcpy(buf + *pos, &le, 8);
	*pos += 8;
	return true;
}

static bool ser_str(uint8_t *buf, size_t cap, size_t *pos, const char *str)
{
	const size_t n = str ? strlen(str) : 0;

	if (!ser_u64(buf, cap, pos, n) || cap - *pos < n)
		return false;
	memcpy(buf + *pos, str ? str : "", n);
	*pos += n;
	return true;
}

void store_key(struct chunk_key *key, const char *source_id, const char *path,
	       const char *version, uint64_t size, int64_t mtime,
	       uint32_t chunk_size, uint64_t chunk_index)
{
	/* Two independently seeded 64-bit hashes of the fields make the
	 * 128-bit key; the seeds are fixed forever, since cached chunks
	 * outlive the process.  The fields are laid out in a stack buffer
	 * and hashed in one pass each (this runs for every chunk a read
	 * touches); names too long for it are streamed, with the same
	 * result. */
	static const uint64_t seed[2] = {0x7768617266000001ull,
					 0x7768617266000002ull};
	uint8_t buf[1024];
	size_t n = 0;
	uint64_t h[2];

	if (ser_str(buf, sizeof(buf), &n, source_id) &&
	    ser_str(buf, sizeof(buf), &n, path) &&
	    ser_str(buf, sizeof(buf), &n, version) &&
	    ser_u64(buf, sizeof(buf), &n, size) &&
	    ser_u64(buf, sizeof(buf), &n, (uint64_t)mtime) &&
	    ser_u64(buf, sizeof(buf), &n, chunk_size) &&
	    ser_u64(buf, sizeof(buf), &n, chunk_index)) {
		h[0] = XXH64(buf, n, seed[0]);
		h[1] = XXH64(buf, n, seed[1]);
	} else {
		XXH64_state_t s[2];

		(void)XXH64_reset(&s[0], seed[0]);
		(void)XXH64_reset(&s[1], seed[1]);
		key_feed_str(s, source_id);
		key_feed_str(s, path);
		key_feed_str(s, version);
		key_feed_u64(s, size);
		key_feed_u64(s, (uint64_t)mtime);
		key_feed_u64(s, chunk_size);
		key_feed_u64(s, chunk_index);
		h[0] = XXH64_digest(&s[0]);
		h[1] = XXH64_digest(&s[1]);
	}
	h[0] = htole64(h[0]);
	h[1] = htole64(h[1]);
	memcpy(key->b, h, 16);
}

void store_key_hex(const struct chunk_key *key, char out[33])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[key->b[i] >> 4];
		out[2 * i + 1] = hex[key->b[i] & 15];
	}
	out[32] = '\0';
}

int store_key_parse(const char *hex, struct chunk_key *key)
{
	for (int i = 0; i < 16; i++) {
		const int hi = hex_value(hex[2 * i]);
		const int lo = hi < 0 ? -1 : hex_value(hex[2 * i + 1]);

		/* Lowercase only: that is how names are written. */
		if (lo < 0 || (hex[2 * i] >= 'A' && hex[2 * i] <= 'F') ||
		    (hex[2 * i + 1] >= 'A' && hex[2 * i + 1] <= 'F'))
			return -EINVAL;
		key->b[i] = (uint8_t)(hi << 4 | lo);
	}
	return hex[32] ? -EINVAL : 0;
}

static uint64_t key_seed(const struct chunk_key *key)
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
static uint64_t chunk_sum(uint8_t kind, const void *data, size_t len,
			  uint64_t seed)
{
	if (kind == SUM_XXH64)
		return XXH64(data, len, seed);
	return XXH3_ONESHOT(data, len, seed);
}

/* The same, piece by piece. */
struct sum_state {
	uint8_t kind;
	XXH64_state_t x64;
	XXH3_state_t x3;
};

static void sum_init(struct sum_state *s, uint8_t kind, uint64_t seed)
{
	s->kind = kind;
	if (kind == SUM_XXH64)
		(void)XXH64_reset(&s->x64, seed);
	else
		(void)XXH3_64bits_reset_withSeed(&s->x3, seed);
}

static void sum_update(struct sum_state *s, const void *data, size_t len)
{
	if (s->kind == SUM_XXH64)
		(void)XXH64_update(&s->x64, data, len);
	else
		(void)XXH3_UPDATE(&s->x3, data, len);
}

static uint64_t sum_digest(const struct sum_state *s)
{
	return s->kind == SUM_XXH64 ? XXH64_digest(&s->x64)
				    : XXH3_64bits_digest(&s->x3);
}

/* ---- codec contexts ---- */

/*
 * zstd contexts and a scratch buffer for compressed bytes come from one
 * pool per process, at most one set per CPU: compressing is CPU-bound, so
 * more at once gains nothing, and the memory (a few MiB per set with 4 MiB
 * chunks) stays bounded however many FUSE and read-ahead threads there
 * are.  Buffers only grow, so once warm nothing is allocated per call.
 * Taking a set is a short lock per chunk compressed or decompressed, not
 * per read; a raw chunk's load holds one for its scratch buffer while it
 * reads and verifies the chunk, so that at most one load per CPU does.
 */
struct tctx {
	ZSTD_DCtx *d;
	ZSTD_CCtx *c;
	void *buf;
	size_t cap;
	struct tctx *next; /* in the pool */
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct tctx *pool_free;
static unsigned pool_made, pool_max;

/* @return a set, or NULL when memory is gone. */
static struct tctx *codec_take(void)
{
	struct tctx *t;

	pthread_mutex_lock(&pool_mu);
	if (!pool_max) {
		const long n = sysconf(_SC_NPROCESSORS_ONLN);

		pool_max = n < 2 ? 2 : n > 64 ? 64 : (unsigned)n;
	}
	while (!pool_free && pool_made >= pool_max)
		pthread_cond_wait(&pool_cond, &pool_mu);
	t = pool_free;
	if (t) {
		pool_free = t->next;
	} else {
		t = calloc(1, sizeof(*t));
		if (t)
			pool_made++;
	}
	pthread_mutex_unlock(&pool_mu);
	return t;
}

static void codec_give(struct tctx *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&pool_mu);
	t->next = pool_free;
	pool_free = t;
	pthread_cond_signal(&pool_cond);
	pthread_mutex_unlock(&pool_mu);
}

static void *tctx_buf(struct tctx *t, size_t n)
{
	void *p;

	if (t->cap >= n)
		return t->buf;
	p = realloc(t->buf, n);
	if (!p)
		return NULL;
	t->buf = p;
	t->cap = n;
	return p;
}

/* ---- chunk files ---- */

struct hdr {
	uint8_t version, codec, sum_kind;
	off_t payload; /* where the payload starts in the file */
	uint64_t raw_len, stored_len, sum;
	struct chunk_key key;
	int64_t used_s; /* not in the header: the file's atime or mtime */
	struct store_file_id file; /* nor this: which file it came from */
};

static void hdr_encode(uint8_t out[HDR_SIZE], const struct hdr *h)
{
	uint64_t v;

	memset(out, 0, HDR_SIZE);
	memcpy(out, magic, 4);
	out[4] = h->version;
	out[5] = h->codec;
	out[6] = h->sum_kind;
	v = htole64(h->raw_len);
	memcpy(out + 8, &v, 8);
	v = htole64(h->stored_len);
	memcpy(out + 16, &v, 8);
	v = htole64(h->sum);
	memcpy(out + 24, &v, 8);
	memcpy(out + 32, h->key.b, 16);
}

static const char *hdr_decode(const uint8_t in[HDR_SIZE], struct hdr *h)
{
	if (memcmp(in, magic, 4))
		return "not a wharf chunk file (bad magic)";
	if (in[4] != h->version)
		return in[4] == FORMAT_INLINE || in[4] == FORMAT_XATTR
			   ? "format version differs from where the header is"
			   : "unknown format version";
	if (in[5] != CODEC_RAW && in[5] != CODEC_ZSTD)
		return "unknown codec";
	if (in[6] != SUM_XXH64 && in[6] != SUM_XXH3)
		return "unknown checksum";
	h->codec = in[5];
	h->sum_kind = in[6];
	h->raw_len = rd64(in + 8);
	h->stored_len = rd64(in + 16);
	h->sum = rd64(in + 24);
	memcpy(h->key.b, in + 32, 16);
	if (h->codec == CODEC_RAW && h->raw_len != h->stored_len)
		return "raw chunk with differing lengths";
	if (h->raw_len > MAX_RAW)
		return "implausible length in the header";
	/* Bounds the buffer a compressed payload is read into. */
	if (h->codec == CODEC_ZSTD &&
	    h->stored_len > ZSTD_compressBound(h->raw_len))
		return "compressed payload longer than zstd can make it";
	return NULL;
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static uint64_t disk_bytes(uint64_t file_size)
{
	return (file_size + BLOCK - 1) / BLOCK * BLOCK;
}

/* @return 0, -EIO, or -ENODATA when the file ends early. */
static int pread_full(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;

	while (n) {
		const ssize_t r = pread(fd, p, n, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -EIO;
		if (r == 0)
			return -ENODATA;
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

/*
 * Checks len bytes at off in map (a read-only mapping of a file from a
 * page boundary): populates them first, which fills the page table in one
 * call and, unlike MAP_POPULATE, reports a read error where a touch of
 * the page would raise SIGBUS (kernels before 5.14 lack it: EINVAL, and
 * the hash then faults the pages in).
 * @return 0, -EBADMSG with *why, -EIO.
 */
static int check_in_map(const uint8_t *map, uint64_t off, uint64_t len,
			uint8_t sum_kind, uint64_t seed, uint64_t sum,
			const char **why)
{
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	const uint64_t lead = off % page;

	if (len &&
	    madvise((void *)(map + off - lead), lead + len,
		    MADV_POPULATE_READ) &&
	    errno != EINVAL)
		return -EIO;
	if (chunk_sum(sum_kind, map + off, len, seed) != sum) {
		*why = "checksum mismatch";
		return -EBADMSG;
	}
	return 0;
}

/*
 * Maps a raw chunk's file for the memory cache instead of copying it into
 * a fresh buffer (on a virtual machine whose host takes freed memory back,
 * the first touch of each fresh page costs ten times a copy), and verifies
 * it by hashing the mapping itself.  Populating it fills the page table in
 * one call: the hash then takes no fault per page, and the kernel's copy
 * into the FUSE reply finds the pages mapped.  Against a pread into a
 * reused buffer and a hash of that (the way before), this saves one copy
 * of every byte: 256 MiB read after a remount went from 2.2-2.3 to
 * 2.4-2.8 GB/s (bench/RESULTS.md, 2026-11-24).
 * Chunk files are never written in place (a new one is renamed in;
 * eviction unlinks), so the bytes verified are the bytes mapped, and the
 * mapping stays valid until unmapped.  map_checked maps and verifies len
 * bytes at off (a chunk file's payload, or a chunk in a pack).
 * @return 0; -ENOTSUP for a compressed chunk or a file that cannot be
 * mapped; -EBADMSG with *why.
 */
static int map_checked(int fd, uint64_t off, uint64_t len, uint8_t sum_kind,
		       uint64_t seed, uint64_t sum, struct store_map *m,
		       const char **why)
{
	/* A pack's chunk may start anywhere when the chunk size is not a
	 * multiple of the page size. */
	const uint64_t lead = off % (uint64_t)sysconf(_SC_PAGESIZE);
	const size_t map_len = (size_t)(lead + len);
	uint8_t *p;
	int rc;

	/* Nothing to map (an empty chunk): read it instead. */
	if (!map_len)
		return -ENOTSUP;
	p = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fd, (off_t)(off - lead));
	/* A cache on a filesystem that cannot map files: read it instead. */
	if (p == MAP_FAILED)
		return -ENOTSUP;
	rc = check_in_map(p, lead, len, sum_kind, seed, sum, why);
	if (rc) {
		munmap(p, map_len);
		return rc;
	}
	m->map = p;
	m->map_len = map_len;
	m->data = p + lead;
	return 0;
}

static int map_raw(int fd, const struct hdr *h, struct store_map *m,
		   const char **why)
{
	if (h->codec != CODEC_RAW)
		return -ENOTSUP;
	if (h->stored_len != h->raw_len) {
		*why = "raw chunk's lengths differ";
		return -EBADMSG;
	}
	return map_checked(fd, (uint64_t)h->payload, h->raw_len, h->sum_kind,
			   key_seed(&h->key), h->sum, m, why);
}

/*
 * The header of chunk file fd (size bytes long), from its xattr (version
 * 2) or the file's start (version 1), checked against the file's size.
 * @return 0; -EBADMSG with *why; -EIO.
 */
static int read_hdr(int fd, uint64_t size, struct hdr *h, const char **why)
{
	uint8_t raw[HDR_SIZE];
	const ssize_t n = fgetxattr(fd, HDR_XATTR, raw, sizeof(raw));
	int rc;

	if (n == HDR_SIZE) {
		h->version = FORMAT_XATTR;
		h->payload = 0;
	} else if (n >= 0 || errno == ERANGE) {
		*why = "bad header attribute";
		return -EBADMSG;
	} else if (errno == ENODATA || errno == ENOTSUP) {
		/* No xattr: format 1, or a format 2 chunk that lost its
		 * header in a copy (hdr_decode finds no magic then). */
		h->version = FORMAT_INLINE;
		h->payload = HDR_SIZE;
		if (size < HDR_SIZE) {
			*why = "truncated header";
			return -EBADMSG;
		}
		rc = pread_full(fd, raw, HDR_SIZE, 0);
		if (rc)
			return rc == -ENODATA
				   ? (*why = "truncated header", -EBADMSG)
				   : rc;
	} else {
		return -EIO;
	}
	*why = hdr_decode(raw, h);
	if (*why && h->version == FORMAT_INLINE && memcmp(raw, magic, 4))
		*why = "no header (not a chunk file, or a copy of it that "
		       "lost its extended attributes)";
	if (*why)
		return -EBADMSG;
	if (size - (uint64_t)h->payload != h->stored_len) {
		*why = size - (uint64_t)h->payload < h->stored_len
			   ? "truncated"
			   : "longer than its header says";
		return -EBADMSG;
	}
	return 0;
}

/*
 * Reads and checks chunk file fd, expected to hold key (NULL: the header's
 * own key), into buf (cap bytes).  With buf NULL only the header is read
 * and checked against the file size.  The header goes to *h.
 * @return 0; -EBADMSG with *why; -EOVERFLOW when the chunk is longer than
 * cap; -EIO; -ENOMEM.
 */
static int read_chunk(int fd, const struct chunk_key *key, struct tctx **tp,
		      void *buf, size_t cap, struct hdr *h, const char **why,
		      struct store_map *m)
{
	struct tctx *t = NULL;
	struct stat sb;
	void *src;
	size_t n;
	int rc;

	if (fstat(fd, &sb))
		return -EIO;
	if (!S_ISREG(sb.st_mode)) {
		*why = "not a regular file";
		return -EBADMSG;
	}
	h->used_s = sb.st_atime > sb.st_mtime ? sb.st_atime : sb.st_mtime;
	h->file = (struct store_file_id){.dev = sb.st_dev,
					 .ino = sb.st_ino,
					 .mtime_ns = ts_ns(&sb.st_mtim),
					 .size = (uint64_t)sb.st_size};
	rc = read_hdr(fd, (uint64_t)sb.st_size, h, why);
	if (rc)
		return rc;
	if (key && memcmp(key->b, h->key.b, 16)) {
		*why = "holds another key's chunk";
		return -EBADMSG;
	}
	if (!buf && !m)
		return 0;
	if (h->raw_len > cap)
		return -EOVERFLOW;
	if (m)
		return map_raw(fd, h, m, why);
	if (h->codec == CODEC_RAW) {
		src = buf;
	} else {
		if (!*tp)
			*tp = codec_take();
		t = *tp;
		src = t ? tctx_buf(t, h->stored_len) : NULL;
		if (!src)
			return -ENOMEM;
	}
	rc = pread_full(fd, src, h->stored_len, h->payload);
	if (rc == -ENODATA) {
		*why = "truncated";
		return -EBADMSG;
	}
	if (rc)
		return rc;
	if (h->codec == CODEC_ZSTD) {
		if (!t->d) {
			t->d = ZSTD_createDCtx();
			if (!t->d)
				return -ENOMEM;
		}
		n = ZSTD_decompressDCtx(t->d, buf, cap, src, h->stored_len);
		if (ZSTD_isError(n)) {
			*why = ZSTD_getErrorName(n);
			return -EBADMSG;
		}
		if (n != h->raw_len) {
			*why = "decompressed length differs from the header";
			return -EBADMSG;
		}
	}
	if (chunk_sum(h->sum_kind, buf, h->raw_len, key_seed(&h->key)) !=
	    h->sum) {
		*why = "checksum mismatch";
		return -EBADMSG;
	}
	return 0;
}

/* ---- the store ---- */

/* How often a pack's chunks move up the LRU (pack_used). */
#define PACK_USED_EVERY_NS 1000000000ull

/* A pack (see "packs" below) as the index knows it.  Freed with the last
 * sentry that points to it. */
struct spack {
	struct chunk_key key; /* chunk 0's: it names the pack's files */
	uint64_t chunk_size, size;
	uint32_t n;
	uint8_t sum_kind;
	unsigned refs;	  /* sentries and callers holding it (atomic) */
	uint32_t indexed; /* its chunks in the index, under mu */
	uint64_t used_ns; /* its chunks last moved up the LRU (atomic) */
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
};

static void pack_unref(struct spack *p)
{
	if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(p);
}

static void sentry_free(struct sentry *e)
{
	if (e)
		pack_unref(e->pack);
	free(e);
}

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

	uint64_t hits, misses, evictions, corrupt; /* atomic */
};

/* "XX/KEY" relative to the chunk dir, for messages. */
static void chunk_relpath(const struct chunk_key *key, char out[36])
{
	char hex[33];

	store_key_hex(key, hex);
	snprintf(out, 36, "%.2s/%s", hex, hex);
}

static size_t bucket(const struct store *st, const struct chunk_key *key)
{
	return (size_t)rd64(key->b + 8) & (st->tabsize - 1);
}

/* Under mu. */
static struct sentry *index_find(struct store *st, const struct chunk_key *key)
{
	struct sentry *e = st->tab[bucket(st, key)];

	while (e && memcmp(e->key.b, key->b, 16))
		e = e->hnext;
	return e;
}

static void lru_unlink(struct sentry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void lru_push_front(struct store *st, struct sentry *e)
{
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
static void index_insert(struct store *st, struct sentry *e, bool front)
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
static void index_remove(struct store *st, struct sentry *e)
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

/* Under mu: takes e out of the index onto *victims, and the other chunks
 * of its pack with it (a pack's file goes whole). */
static void evict_entry(struct store *st, struct sentry *e,
			struct sentry **victims)
{
	struct spack *p = e->pack;

	index_remove(st, e);
	e->hnext = *victims;
	*victims = e;
	for (uint32_t i = 0; p && i < p->n; i++) {
		struct sentry *o = index_find(st, &p->ent[i].key);

		if (o && o->pack == p) {
			index_remove(st, o);
			o->hnext = *victims;
			*victims = o;
		}
	}
}

/*
 * Under mu: takes least recently used chunks out of the index until
 * used + reserved + need <= target, and returns them (chained by hnext)
 * for the caller to unlink after dropping mu.
 */
static struct sentry *evict_locked(struct store *st, uint64_t target,
				   uint64_t need)
{
	struct sentry *victims = NULL;

	while (st->n && st->used + st->reserved + need > target)
		evict_entry(st, st->lru.prev, &victims);
	return victims;
}

static int pack_remove_files(struct store *st, const struct spack *p);

/* Unlinks the victims' files and frees them; counts them into chunks and bytes.
 */
static void evict_files(struct store *st, struct sentry *victims,
			uint64_t *chunks, uint64_t *bytes)
{
	char hex[33];

	while (victims) {
		struct sentry *e = victims;
		const unsigned fan = e->key.b[0];
		bool again, gone = false;

		victims = e->hnext;
		if (e->pack) {
			gone = pack_remove_files(st, e->pack) == 0;
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

/*
 * A chunk file is gone (removed by `wharf cache verify`, say): forget it,
 * unless it was written again meanwhile.  Under the key's stripe.
 */
static void index_forget(struct store *st, const struct chunk_key *key,
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
		index_remove(st, e);
	pthread_mutex_unlock(&st->mu);
	sentry_free(e);
}

/* Removes the file `name` in dirfd if it is still the inode fd reads. */
static int unlink_if_same(int dirfd, const char *name, int fd)
{
	struct stat a, b;

	if (fstat(fd, &a) || fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		return -ESTALE;
	return unlinkat(dirfd, name, 0) ? -errno : 0;
}

/* Chunk file fd of key is corrupt: removes it (unless it was replaced
 * meanwhile) and says so. */
static void chunk_file_bad(struct store *st, const struct chunk_key *key,
			   int fd, const char *why)
{
	const unsigned fan = key->b[0];
	char hex[33], rel[36];

	store_key_hex(key, hex);
	chunk_relpath(key, rel);
	log_warn("%s/%s: cached chunk %s is corrupt (%s); removed, it will be "
		 "fetched again",
		 st->chunkdir, rel, hex, why);
	STAT_ADD(st->corrupt, 1);
	pthread_mutex_lock(&st->stripe[fan]);
	if (unlink_if_same(st->dirfd[fan], hex, fd) == 0)
		index_forget(st, key, hex);
	pthread_mutex_unlock(&st->stripe[fan]);
}

/* Whether a is the file b was (chunk files are never written in place:
 * a new chunk is renamed in as a new inode). */
static bool same_file(const struct store_file_id *a,
		      const struct store_file_id *b)
{
	return b->ino && a->dev == b->dev && a->ino == b->ino &&
	       a->mtime_ns == b->mtime_ns && a->size == b->size;
}

/* check_raw_file reads a file in pieces of this size: a piece stays in
 * the CPU's cache between the copy and the hash. */
#define CHECK_PIECE (64 * 1024)

/*
 * Checks a raw chunk file whose header h was read: the file must hold the
 * payload alone, and the payload its checksum (check_range: len bytes of
 * fd at start, as a pack's chunk is checked; with copy_to >= 0 they are
 * also written there at copy_off, as a pack is made).  It is read in
 * pieces into
 * a buffer on the stack (the codec pool's buffers are one per CPU, and
 * parallel opens would queue for them) and hashed as it comes rather than
 * mapped: in a threaded daemon, mapping and unmapping a file per open
 * costs page-table work and a TLB shootdown on every CPU (10% more of the
 * daemon's CPU, measured), and a piece read into a warm buffer is hashed
 * from the CPU's cache.
 * @return 0; -ENOTSUP (compressed, or the header in the file);
 * -EOVERFLOW; -EBADMSG with *why; -EIO.
 */
static int pwrite_full(int fd, const uint8_t *p, size_t n, uint64_t off)
{
	while (n) {
		const ssize_t k = pwrite(fd, p, n, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 && errno != ENOSPC && errno != EDQUOT
				   ? -EIO
				   : -ENOSPC;
		p += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

static int check_range(int fd, uint64_t start, uint64_t len, uint8_t sum_kind,
		       uint64_t seed, uint64_t sum, const char **why,
		       int copy_to, uint64_t copy_off)
{
	uint8_t buf[CHECK_PIECE];
	struct sum_state s;
	uint64_t off;
	size_t n;
	int rc;

	sum_init(&s, sum_kind, seed);
	for (off = 0; off < len; off += n) {
		n = len - off < CHECK_PIECE ? len - off : CHECK_PIECE;
		rc = pread_full(fd, buf, n, (off_t)(start + off));
		if (rc == -ENODATA) {
			*why = "truncated";
			return -EBADMSG;
		}
		if (!rc && copy_to >= 0)
			rc = pwrite_full(copy_to, buf, n, copy_off + off);
		if (rc)
			return rc;
		sum_update(&s, buf, n);
	}
	if (sum_digest(&s) != sum) {
		*why = "checksum mismatch";
		return -EBADMSG;
	}
	return 0;
}

/* Checks a raw chunk file whole, by hashing a mapping of it (no copy into
 * a buffer), or reading it where it cannot be mapped. */
static int check_raw_file(int fd, const struct hdr *h, size_t cap,
			  const char **why)
{
	const uint64_t seed = key_seed(&h->key);
	struct store_map m;
	int rc;

	if (h->codec != CODEC_RAW || h->payload)
		return -ENOTSUP;
	if (h->raw_len > cap)
		return -EOVERFLOW;
	rc = map_checked(fd, 0, h->raw_len, h->sum_kind, seed, h->sum, &m, why);
	if (rc == -ENOTSUP)
		return check_range(fd, 0, h->raw_len, h->sum_kind, seed, h->sum,
				   why, -1, 0);
	if (!rc)
		munmap(m.map, m.map_len);
	return rc;
}

/* The recency survives a remount: open() ranks chunks by atime, which
 * relatime or noatime would otherwise leave stale.  A minute's precision
 * is enough for that, and spares an inode write per read of a hot chunk.
 * used_s: the file's atime or mtime, whichever is later. */
static void touch_file(int fd, int64_t used_s)
{
	static const struct timespec touch[2] = {{.tv_nsec = UTIME_NOW},
						 {.tv_nsec = UTIME_OMIT}};
	struct timespec now;

	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	if (now.tv_sec - used_s > TOUCH_EVERY_S)
		(void)futimens(fd, touch);
}

/* ---- packs ---- */

/*
 * A pack holds the chunks of one object, all stored raw, back to back in
 * one file (chunk i at i * chunk size), so that the kernel can read the
 * whole object from it in the mount's place (passthrough.h): it takes one
 * file per open file, and an object of many chunks has as many chunk
 * files.  store_open_object makes a pack from the chunk files the first
 * time a mount hands the object to the kernel, then removes them.
 *
 * chunks/XX/KEY.pack holds the object's bytes and nothing else; KEY.idx
 * beside it is its index (KEY is chunk 0's key, XX its first byte), all
 * little-endian:
 *   0  magic "WHPK"   4  version (1)   5  checksum kind   6  reserved (0)
 *   8  chunks (n, 32 bits)   12 reserved (0)   16 chunk size
 *   24 the object's size (the .pack's length)
 *   32 the checksum of bytes 40 to the end, seeded as chunk 0's
 *   40 chunk 0's key
 *   56 n entries of 24 bytes: a chunk's key, the checksum of its bytes
 * A chunk's checksum is the one its chunk file had, so a chunk in a pack
 * is verified as a chunk file is: whenever it is loaded into memory, and
 * before a mount first hands the pack to the kernel.
 * The .idx is renamed in before the .pack and removed after it, so a
 * .pack never stands alone; a .idx alone is a pack being made, or one a
 * crash cut short (the scan at mount removes it).  A pack is never
 * written in place, and goes whole: evicting any of its chunks evicts it.
 */
#define PACK_HDR 56
#define PACK_ENTRY 24
#define PACK_VERSION 1
#define PACK_MAX_CHUNKS (1u << 22)
#define PACK_NAME_MAX 40
#define PACK_CHECK_THREADS 8

static const uint8_t pack_magic[4] = {'W', 'H', 'P', 'K'};

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

/* KEY.pack and KEY.idx, in the fan-out dir of key->b[0]. */
static void pack_names(const struct chunk_key *key, char data[PACK_NAME_MAX],
		       char idx[PACK_NAME_MAX])
{
	char hex[33];

	store_key_hex(key, hex);
	snprintf(data, PACK_NAME_MAX, "%s.pack", hex);
	snprintf(idx, PACK_NAME_MAX, "%s.idx", hex);
}

static uint64_t pack_chunk_len(const struct spack *p, uint32_t i)
{
	return i + 1 < p->n ? p->chunk_size
			    : p->size - (uint64_t)i * p->chunk_size;
}

static struct spack *pack_new(uint32_t n)
{
	struct spack *p = calloc(1, sizeof(*p) + (size_t)n * sizeof(p->ent[0]));

	if (p) {
		p->n = n;
		p->refs = 1;
	}
	return p;
}

/* The index file's bytes (caller frees), NULL without memory. */
static uint8_t *pack_encode(const struct spack *p, size_t *len)
{
	const size_t n = PACK_HDR + (size_t)p->n * PACK_ENTRY;
	uint8_t *b = calloc(1, n);

	if (!b)
		return NULL;
	memcpy(b, pack_magic, 4);
	b[4] = PACK_VERSION;
	b[5] = p->sum_kind;
	put32(b + 8, p->n);
	put64(b + 16, p->chunk_size);
	put64(b + 24, p->size);
	memcpy(b + 40, p->key.b, 16);
	for (uint32_t i = 0; i < p->n; i++) {
		memcpy(b + PACK_HDR + (size_t)i * PACK_ENTRY, p->ent[i].key.b,
		       16);
		put64(b + PACK_HDR + (size_t)i * PACK_ENTRY + 16,
		      p->ent[i].sum);
	}
	put64(b + 32,
	      chunk_sum(p->sum_kind, b + 40, n - 40, key_seed(&p->key)));
	*len = n;
	return b;
}

/* @return NULL with *out (a reference), or what is wrong (*out NULL also
 * without memory: then "out of memory"). */
static const char *pack_decode(const uint8_t *b, size_t len,
			       const struct chunk_key *name, struct spack **out)
{
	uint64_t cs, size;
	struct spack *p;
	uint32_t n;

	*out = NULL;
	if (len < PACK_HDR || memcmp(b, pack_magic, 4))
		return "not a wharf pack index";
	if (b[4] != PACK_VERSION)
		return "unknown pack version";
	if (b[5] != SUM_XXH64 && b[5] != SUM_XXH3)
		return "unknown checksum";
	n = rd32(b + 8);
	cs = rd64(b + 16);
	size = rd64(b + 24);
	if (n < 2 || n > PACK_MAX_CHUNKS ||
	    len != PACK_HDR + (size_t)n * PACK_ENTRY)
		return "bad chunk count or index length";
	if (memcmp(b + 40, name->b, 16))
		return "names another pack";
	if (chunk_sum(b[5], b + 40, len - 40, key_seed(name)) != rd64(b + 32))
		return "checksum mismatch in the index";
	/* Checked after the sum: corruption, else a bug of ours. */
	if (!cs || cs > MAX_RAW || size <= (uint64_t)(n - 1) * cs ||
	    size > (uint64_t)n * cs || memcmp(b + PACK_HDR, name->b, 16))
		return "inconsistent pack index";
	p = pack_new(n);
	if (!p)
		return "out of memory";
	p->key = *name;
	p->chunk_size = cs;
	p->size = size;
	p->sum_kind = b[5];
	for (uint32_t i = 0; i < n; i++) {
		memcpy(p->ent[i].key.b, b + PACK_HDR + (size_t)i * PACK_ENTRY,
		       16);
		p->ent[i].sum =
		    rd64(b + PACK_HDR + (size_t)i * PACK_ENTRY + 16);
	}
	*out = p;
	return NULL;
}

/* Reads the index of pack `key` in dirfd.  @return 0 with *out; -ENOENT;
 * -EBADMSG with *why; -ENOMEM; -EIO. */
static int pack_load(int dirfd, const struct chunk_key *key, struct spack **out,
		     const char **why)
{
	char data[PACK_NAME_MAX], idx[PACK_NAME_MAX];
	struct stat sb;
	uint8_t *b;
	int fd, rc;

	pack_names(key, data, idx);
	fd = openat(dirfd, idx, CHUNK_OPEN | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(dirfd, idx, CHUNK_OPEN);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	if (fstat(fd, &sb)) {
		close(fd);
		return -EIO;
	}
	if (!S_ISREG(sb.st_mode) ||
	    (uint64_t)sb.st_size >
		PACK_HDR + (uint64_t)PACK_MAX_CHUNKS * PACK_ENTRY) {
		close(fd);
		*why = S_ISREG(sb.st_mode) ? "pack index too long"
					   : "pack index not a regular file";
		return -EBADMSG;
	}
	b = malloc((size_t)sb.st_size + 1);
	rc = b ? pread_full(fd, b, (size_t)sb.st_size, 0) : -ENOMEM;
	close(fd);
	if (rc == -ENODATA) {
		*why = "pack index truncated";
		rc = -EBADMSG;
	}
	if (!rc) {
		*why = pack_decode(b, (size_t)sb.st_size, key, out);
		rc = !*why				     ? 0
		     : *out || strcmp(*why, "out of memory") ? -EBADMSG
							     : -ENOMEM;
	}
	free(b);
	return rc;
}

/* Opens pack p's bytes (flags added to CHUNK_OPEN), checked to be a
 * regular file of p's size; *sb gets its stat.
 * @return 0 with *fd; -ENOENT; -EBADMSG with *why and *fd still open, so
 * that the file judged is the one removed; -EIO. */
static int pack_open_data(int dirfd, const struct spack *p, int flags, int *fd,
			  struct stat *sb, const char **why)
{
	char data[PACK_NAME_MAX], idx[PACK_NAME_MAX];

	pack_names(&p->key, data, idx);
	*fd = openat(dirfd, data, CHUNK_OPEN | flags);
	if (*fd < 0 && errno == EPERM && flags)
		*fd = openat(dirfd, data, CHUNK_OPEN);
	if (*fd < 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	if (fstat(*fd, sb)) {
		close(*fd);
		*fd = -1;
		return -EIO;
	}
	if (S_ISREG(sb->st_mode) && (uint64_t)sb->st_size == p->size)
		return 0;
	*why = !S_ISREG(sb->st_mode) ? "pack not a regular file"
	       : (uint64_t)sb->st_size < p->size
		   ? "pack truncated"
		   : "pack longer than its index says";
	return -EBADMSG;
}

static struct store_file_id file_id(const struct stat *sb)
{
	return (struct store_file_id){.dev = sb->st_dev,
				      .ino = sb->st_ino,
				      .mtime_ns = ts_ns(&sb->st_mtim),
				      .size = (uint64_t)sb->st_size};
}

/* A pack's check, shared by the threads that run it. */
struct pack_checker {
	int fd;
	const uint8_t *map; /* the whole pack, or NULL: read it */
	const struct spack *p;
	uint32_t next; /* the next chunk to check (atomic) */
	bool failed;   /* atomic: the others stop */
	pthread_mutex_t mu;
	int rc; /* under mu: the failure of the first bad chunk found */
	uint32_t bad;
	const char *why;
};

static void *pack_check_run(void *arg)
{
	struct pack_checker *c = arg;
	const struct spack *p = c->p;
	uint32_t i;

	while (!__atomic_load_n(&c->failed, __ATOMIC_RELAXED) &&
	       (i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED)) < p->n) {
		const char *why = NULL;
		const uint64_t off = (uint64_t)i * p->chunk_size;
		const int rc =
		    c->map ? check_in_map(c->map, off, pack_chunk_len(p, i),
					  p->sum_kind, key_seed(&p->ent[i].key),
					  p->ent[i].sum, &why)
			   : check_range(c->fd, off, pack_chunk_len(p, i),
					 p->sum_kind, key_seed(&p->ent[i].key),
					 p->ent[i].sum, &why, -1, 0);

		if (!rc)
			continue;
		pthread_mutex_lock(&c->mu);
		if (!c->rc || i < c->bad) {
			c->rc = rc;
			c->bad = i;
			c->why = why;
		}
		pthread_mutex_unlock(&c->mu);
		__atomic_store_n(&c->failed, true, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * Checks every chunk of pack p (open as fd), on up to `threads` threads:
 * a reader waits for this at the open that hands the pack over (its first
 * in a mount), and the chunks' checksums are independent, so every CPU
 * can take a share (a 256 MiB pack: 27-37 ms on one core here).  Threads
 * are made per check: that costs microseconds, against milliseconds of
 * work per chunk.
 * @return 0, -EBADMSG with *why and *bad (a bad chunk), -EIO.
 */
static int pack_check(int fd, const struct spack *p, unsigned threads,
		      uint32_t *bad, const char **why)
{
	struct pack_checker c = {.fd = fd, .p = p};
	pthread_t helper[PACK_CHECK_THREADS];
	unsigned made = 0;
	void *map;

	/* Hashing a mapping spares copying each byte into a buffer: a
	 * 256 MiB pack in the page cache, on 2 threads, took 22-24 ms read
	 * through a buffer and takes 16-23 ms (bench/RESULTS.md,
	 * 2026-11-26 23:40). */
	map = p->size ? mmap(NULL, p->size, PROT_READ, MAP_SHARED, fd, 0)
		      : MAP_FAILED;
	if (map != MAP_FAILED)
		c.map = map;

	if (threads > p->n)
		threads = p->n;
	if (threads > PACK_CHECK_THREADS)
		threads = PACK_CHECK_THREADS;
	pthread_mutex_init(&c.mu, NULL);
	while (made + 1 < threads &&
	       !pthread_create(&helper[made], NULL, pack_check_run, &c))
		made++;
	pack_check_run(&c);
	for (unsigned i = 0; i < made; i++)
		pthread_join(helper[i], NULL);
	pthread_mutex_destroy(&c.mu);
	if (c.map)
		munmap(map, p->size);
	*bad = c.bad;
	*why = c.why;
	return c.rc;
}

/* Removes pack p's files (the .pack first), where they exist.
 * @return 0 or -errno of the first failure. */
static int pack_unlink(int dirfd, const struct chunk_key *key)
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

/* Under mu: takes the chunks that point to p out of the index, onto
 * *gone (chained by hnext) for the caller to free after dropping mu. */
static void pack_forget_locked(struct store *st, const struct spack *p,
			       struct sentry **gone)
{
	for (uint32_t i = 0; i < p->n; i++) {
		struct sentry *e = index_find(st, &p->ent[i].key);

		if (e && e->pack == p) {
			index_remove(st, e);
			e->hnext = *gone;
			*gone = e;
		}
	}
}

static void free_chain(struct sentry *e)
{
	while (e) {
		struct sentry *next = e->hnext;

		sentry_free(e);
		e = next;
	}
}

/* Removes evicted pack p's files, unless a pack of the same name was
 * made since (its chunks point to another spack).  @return 0 when they
 * are gone. */
static int pack_remove_files(struct store *st, const struct spack *p)
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
		rc = pack_unlink(st->dirfd[fan], &p->key);
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

/* Pack p (open as fd) is bad: removes it and forgets its chunks, which
 * will be fetched again. */
static void pack_drop_bad(struct store *st, const struct spack *p, int fd,
			  uint32_t bad, const char *why)
{
	const unsigned fan = p->key.b[0];
	char data[PACK_NAME_MAX], idx[PACK_NAME_MAX];
	struct sentry *gone = NULL;

	pack_names(&p->key, data, idx);
	log_warn("%s/%.2s/%s: cannot use chunk %u of this cached pack (%s); "
		 "removed, its %u chunks will be fetched again",
		 st->chunkdir, data, data, bad, why, p->n);
	STAT_ADD(st->corrupt, 1);
	pthread_mutex_lock(&st->stripe[fan]);
	if (unlink_if_same(st->dirfd[fan], data, fd) == 0)
		(void)unlinkat(st->dirfd[fan], idx, 0);
	pthread_mutex_lock(&st->mu);
	pack_forget_locked(st, p, &gone);
	pthread_mutex_unlock(&st->mu);
	pthread_mutex_unlock(&st->stripe[fan]);
	free_chain(gone);
}

/* The pack holding key, with a reference, or NULL. */
static struct spack *pack_of(struct store *st, const struct chunk_key *key,
			     uint32_t *idx)
{
	struct spack *p = NULL;
	struct sentry *e;

	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e && e->pack) {
		p = e->pack;
		*idx = e->idx;
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&st->mu);
	return p;
}

/* Marks a use of pack p: its chunks become the most recent, and its
 * file's time moves (as touch_file does for a chunk file). */
static void pack_used(struct store *st, struct spack *p, int fd,
		      const struct stat *sb)
{
	const uint64_t now = now_ns();
	uint64_t last = __atomic_load_n(&p->used_ns, __ATOMIC_RELAXED);

	/* Every chunk moves (eviction takes the pack whole), which costs n
	 * steps under mu: at most once a second per pack, not per read (a
	 * 4 GiB file of 64 KiB chunks made each read hold mu for 0.8 ms). */
	if (now - last >= PACK_USED_EVERY_NS &&
	    __atomic_compare_exchange_n(&p->used_ns, &last, now, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&st->mu);
		for (uint32_t i = 0; i < p->n; i++) {
			struct sentry *e = index_find(st, &p->ent[i].key);

			if (e && e->pack == p) {
				lru_unlink(e);
				lru_push_front(st, e);
			}
		}
		pthread_mutex_unlock(&st->mu);
	}
	touch_file(fd,
		   sb->st_atime > sb->st_mtime ? sb->st_atime : sb->st_mtime);
}

/* get() for chunk idx of pack p. */
static int get_packed(struct store *st, struct spack *p, uint32_t idx,
		      void *buf, size_t cap, size_t *len, struct store_map *m)
{
	const uint64_t off = (uint64_t)idx * p->chunk_size;
	const uint64_t n = pack_chunk_len(p, idx);
	const uint64_t seed = key_seed(&p->ent[idx].key);
	const char *why = NULL;
	struct sentry *gone = NULL;
	struct stat sb;
	int fd, rc;

	rc = pack_open_data(st->dirfd[p->key.b[0]], p, 0, &fd, &sb, &why);
	if (rc == -ENOENT) {
		/* Removed by hand, or by `wharf cache verify`. */
		STAT_ADD(st->misses, 1);
		pthread_mutex_lock(&st->mu);
		pack_forget_locked(st, p, &gone);
		pthread_mutex_unlock(&st->mu);
		free_chain(gone);
		return -ENOENT;
	}
	if (rc == -EBADMSG) {
		STAT_ADD(st->misses, 1);
		pack_drop_bad(st, p, fd, idx, why);
		close(fd);
		return rc;
	}
	if (rc)
		goto miss;
	if (n > cap) {
		rc = -EOVERFLOW;
	} else if (m) {
		rc = map_checked(fd, off, n, p->sum_kind, seed, p->ent[idx].sum,
				 m, &why);
	} else {
		rc = pread_full(fd, buf, (size_t)n, (off_t)off);
		if (rc == -ENODATA)
			why = "truncated";
		else if (!rc && chunk_sum(p->sum_kind, buf, n, seed) !=
				    p->ent[idx].sum)
			why = "checksum mismatch";
		if (why)
			rc = -EBADMSG;
	}
	/* A read error too: a pack is never written in place, so its chunk
	 * would be fetched again at every read, and never cached. */
	if (rc == -EBADMSG || rc == -EIO) {
		STAT_ADD(st->misses, 1);
		pack_drop_bad(st, p, fd, idx, why ? why : "read error");
		close(fd);
		return rc;
	}
	if (rc == -ENOTSUP) {
		close(fd);
		return rc;
	}
	if (rc)
		goto miss;
	*len = n;
	STAT_ADD(st->hits, 1);
	pack_used(st, p, fd, &sb);
	close(fd);
	return 0;
miss:
	STAT_ADD(st->misses, 1);
	if (rc == -EIO)
		log_warn("%s/%.2x: read error on a cached pack", st->chunkdir,
			 p->key.b[0]);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Copies chunk i of p (a raw chunk file with its header beside it) into
 * out, and its checksum into p.  A corrupt chunk file is removed, as a
 * read would. */
static int pack_copy_chunk(struct store *st, struct spack *p, uint32_t i,
			   int out)
{
	const struct chunk_key *key = &p->ent[i].key;
	const unsigned fan = key->b[0];
	const char *why = NULL;
	char hex[33];
	struct hdr h;
	int fd, rc;

	store_key_hex(key, hex);
	fd = openat(st->dirfd[fan], hex, CHUNK_OPEN);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	rc = read_chunk(fd, key, NULL, NULL, 0, &h, &why, NULL);
	if (!rc && (h.codec != CODEC_RAW || h.payload ||
		    h.raw_len != pack_chunk_len(p, i) ||
		    (i && h.sum_kind != p->sum_kind)))
		rc = -ENOTSUP;
	if (!rc) {
		int policy;
		struct sched_param was;
		const struct sched_param idle = {0};
		const bool lowered =
		    !pthread_getschedparam(pthread_self(), &policy, &was) &&
		    !pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);

		p->sum_kind = h.sum_kind;
		p->ent[i].sum = h.sum;
		/* The copy runs only on a CPU nothing else wants: a pack is
		 * for later reads, and beside a CPU-bound cold read the
		 * copying slowed it by 40% on 2 cores (bench/RESULTS.md,
		 * 2026-11-26 17:15).  Only the copy, where no lock is held:
		 * a thread preempted at idle priority can wait a second for
		 * a CPU, and so would a reader waiting on its lock. */
		rc = check_range(fd, 0, h.raw_len, h.sum_kind, key_seed(key),
				 h.sum, &why, out, (uint64_t)i * p->chunk_size);
		if (lowered)
			(void)pthread_setschedparam(pthread_self(), policy,
						    &was);
	}
	if (rc == -EBADMSG)
		chunk_file_bad(st, key, fd, why);
	close(fd);
	return rc;
}

/* Writes buf to a new file `name` in dirfd.  @return 0 or -errno. */
static int write_new(int dirfd, const char *name, const void *buf, size_t len)
{
	const int fd =
	    openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ssize_t w;
	int rc = 0;

	if (fd < 0)
		return -errno;
	w = write(fd, buf, len);
	if (w != (ssize_t)len)
		rc = w < 0 ? -errno : -ENOSPC;
	if (close(fd) && !rc)
		rc = -errno;
	return rc;
}

/* Under mu: whether any chunk of p (every one in the index) is stored
 * compressed. */
static bool pack_members_compressed(struct store *st, const struct spack *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		if (index_find(st, &p->ent[i].key)->zstd)
			return true;
	return false;
}

/* Under mu: whether every chunk of p is in the index, as a chunk file
 * (packed: a pack made meanwhile) of the length p gives it. */
static bool pack_members_present(struct store *st, const struct spack *p,
				 bool packed, uint64_t *disk)
{
	*disk = 0;
	for (uint32_t i = 0; i < p->n; i++) {
		const struct sentry *e = index_find(st, &p->ent[i].key);

		if (!e || (e->pack != NULL) != packed ||
		    e->raw != pack_chunk_len(p, i))
			return false;
		*disk += e->disk;
	}
	return true;
}

/*
 * Makes pack p (its key, sizes and chunk keys set) from its chunk files,
 * which it then removes.  While it is written the store holds both: its
 * size is reserved under the cap like a chunk's (and -ENOSPC when the cap
 * cannot hold both).  The chunks are moved to the front of the LRU so
 * that making room never evicts them.  On success p is in the index (the
 * caller keeps its reference) and *made names the file written.
 * @return 0, -ENOENT (a chunk is not cached, or went meanwhile), -ENOTSUP
 * (a chunk is compressed or has its header in its file), -EBADMSG (a
 * chunk was corrupt: removed), -ENOSPC, -EIO, -ENOMEM.
 */
static int pack_make(struct store *st, struct spack *p,
		     struct store_file_id *made)
{
	static unsigned long tmp_seq;
	const unsigned fan = p->key.b[0];
	const uint64_t pdisk = disk_bytes(p->size);
	char data[PACK_NAME_MAX], idx[PACK_NAME_MAX];
	char tdata[80], tidx[80];
	struct sentry *victims = NULL;
	bool still_whole = false;
	uint64_t members;
	uint8_t *ib = NULL;
	size_t ilen;
	struct stat sb;
	int out = -1, rc = 0;

	if (!st->hdr_xattr)
		return -ENOTSUP;
	pthread_mutex_lock(&st->mu);
	if (!pack_members_present(st, p, false, &members)) {
		rc = -ENOENT;
	} else if (pack_members_compressed(st, p)) {
		/* Found before making room: it would evict for nothing. */
		rc = -ENOTSUP;
	} else if (st->cfg.max_bytes &&
		   st->reserved + members + pdisk > st->cfg.max_bytes) {
		rc = -ENOSPC;
	} else {
		for (uint32_t i = p->n; i-- > 0;) {
			struct sentry *e = index_find(st, &p->ent[i].key);

			lru_unlink(e);
			lru_push_front(st, e);
		}
		if (st->cfg.max_bytes)
			victims = evict_locked(st, st->cfg.max_bytes, pdisk);
		st->reserved += pdisk;
	}
	pthread_mutex_unlock(&st->mu);
	if (rc)
		return rc;
	evict_files(st, victims, NULL, NULL);

	pack_names(&p->key, data, idx);
	snprintf(tdata, sizeof(tdata), TMP_PREFIX "%s.%d.%lu", data,
		 (int)getpid(),
		 __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
	snprintf(tidx, sizeof(tidx), TMP_PREFIX "%s.%d.%lu", idx, (int)getpid(),
		 __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
	out = openat(st->dirfd[fan], tdata,
		     O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		rc = -errno;
	for (uint32_t i = 0; !rc && i < p->n; i++)
		rc = pack_copy_chunk(st, p, i, out);
	if (!rc && fstat(out, &sb))
		rc = -errno;
	if (out >= 0 && close(out) && !rc)
		rc = -errno;
	if (!rc) {
		*made = file_id(&sb);
		ib = pack_encode(p, &ilen);
		rc = ib ? write_new(st->dirfd[fan], tidx, ib, ilen) : -ENOMEM;
		free(ib);
	}
	if (!rc) {
		pthread_mutex_lock(&st->stripe[fan]);
		/* Made by another meanwhile: renaming over its files and then
		 * finding the chunks packed would remove them. */
		pthread_mutex_lock(&st->mu);
		still_whole = pack_members_present(st, p, false, &members);
		pthread_mutex_unlock(&st->mu);
		if (!still_whole) {
			rc = -ENOENT;
		} else if (renameat(st->dirfd[fan], tidx, st->dirfd[fan],
				    idx) ||
			   renameat(st->dirfd[fan], tdata, st->dirfd[fan],
				    data)) {
			rc = -errno;
			(void)pack_unlink(st->dirfd[fan], &p->key);
		}
		pthread_mutex_lock(&st->mu);
		/* A chunk evicted or written again meanwhile: the pack
		 * would not be whole. */
		if (!rc && !pack_members_present(st, p, false, &members))
			rc = -ENOENT;
		for (uint32_t i = 0; !rc && i < p->n; i++) {
			struct sentry *e = index_find(st, &p->ent[i].key);

			e->pack = p;
			e->idx = i;
			__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
		}
		if (!rc) {
			p->indexed = p->n;
			st->packs++;
		}
		pthread_mutex_unlock(&st->mu);
		if (rc == -ENOENT && still_whole)
			(void)pack_unlink(st->dirfd[fan], &p->key);
		pthread_mutex_unlock(&st->stripe[fan]);
	}
	(void)unlinkat(st->dirfd[fan], tdata, 0);
	(void)unlinkat(st->dirfd[fan], tidx, 0);
	/* The chunk files the pack replaces (a chunk written again since is
	 * a chunk file in the index again, and stays). */
	for (uint32_t i = 0; !rc && i < p->n; i++) {
		const struct chunk_key *key = &p->ent[i].key;
		struct sentry *e;
		bool removed;
		char hex[33];

		store_key_hex(key, hex);
		pthread_mutex_lock(&st->stripe[key->b[0]]);
		pthread_mutex_lock(&st->mu);
		e = index_find(st, key);
		pthread_mutex_unlock(&st->mu);
		removed = e && e->pack == p &&
			  !unlinkat(st->dirfd[key->b[0]], hex, 0);
		pthread_mutex_unlock(&st->stripe[key->b[0]]);
		/* A mapping of the file would keep its blocks. */
		if (removed && st->cfg.evicted)
			st->cfg.evicted(st->cfg.evicted_arg, key);
	}
	pthread_mutex_lock(&st->mu);
	st->reserved -= pdisk;
	pthread_mutex_unlock(&st->mu);
	if (rc == -EDQUOT)
		rc = -ENOSPC;
	if (rc && rc != -ENOSPC && rc != -ENOENT && rc != -ENOTSUP &&
	    rc != -EBADMSG && rc != -ENOMEM) {
		log_warn("%s/%.2x/%s: cannot write pack: %s", st->chunkdir, fan,
			 data, strerror(-rc));
		rc = -EIO;
	}
	return rc;
}

/* The object's pack, with a reference, made if need be (*made then names
 * its file, else it is left alone).  @return 0 or pack_make's errors. */
static int pack_find_or_make(struct store *st, const struct chunk_key *keys,
			     uint32_t n, uint64_t chunk_size, uint64_t size,
			     struct spack **out, struct store_file_id *made)
{
	struct spack *p;
	uint32_t idx = 0;
	int rc;

	if (n < 2 || n > PACK_MAX_CHUNKS || !chunk_size ||
	    chunk_size > MAX_RAW || size <= (uint64_t)(n - 1) * chunk_size ||
	    size > (uint64_t)n * chunk_size)
		return -EINVAL;
	p = pack_of(st, &keys[0], &idx);
	if (p && (idx || p->n != n || p->size != size ||
		  p->chunk_size != chunk_size ||
		  memcmp(p->ent[n - 1].key.b, keys[n - 1].b, 16))) {
		/* Chunk 0's key is a hash of the object and the chunk size:
		 * a pack of other sizes under it is a bug, not a cache. */
		pack_unref(p);
		return -ENOTSUP;
	}
	if (!p) {
		p = pack_new(n);
		if (!p)
			return -ENOMEM;
		p->key = keys[0];
		p->chunk_size = chunk_size;
		p->size = size;
		for (uint32_t i = 0; i < n; i++)
			p->ent[i].key = keys[i];
		rc = pack_make(st, p, made);
		if (rc) {
			pack_unref(p);
			return rc;
		}
	}
	*out = p;
	return 0;
}

int store_pack_object(struct store *st, const struct chunk_key *keys,
		      uint32_t n, uint64_t chunk_size, uint64_t size)
{
	struct store_file_id made;
	struct spack *p;
	const int rc =
	    pack_find_or_make(st, keys, n, chunk_size, size, &p, &made);

	if (!rc)
		pack_unref(p);
	return rc;
}

int store_open_object(struct store *st, const struct chunk_key *keys,
		      uint32_t n, uint64_t chunk_size, uint64_t size,
		      struct store_file_id *checked, int *fdout)
{
	struct store_file_id made = {0};
	const char *why = NULL;
	struct spack *p;
	uint32_t bad = 0;
	struct stat sb;
	int fd, rc;

	rc = pack_find_or_make(st, keys, n, chunk_size, size, &p, &made);
	if (rc)
		return rc;
	if (made.ino)
		*checked = made;
	rc = pack_open_data(st->dirfd[p->key.b[0]], p, 0, &fd, &sb, &why);
	if (!rc) {
		const struct store_file_id id = file_id(&sb);

		if (!same_file(&id, checked))
			rc = pack_check(fd, p, st->ncpu, &bad, &why);
		if (!rc)
			*checked = id;
	}
	/* A read error in the check too: see get_packed.  (-EIO from
	 * pack_open_data leaves no fd.) */
	if (rc == -EBADMSG || (rc == -EIO && fd >= 0)) {
		pack_drop_bad(st, p, fd, bad, why ? why : "read error");
		close(fd);
	} else if (rc && fd >= 0) {
		close(fd);
	} else if (rc == -ENOENT) {
		struct sentry *gone = NULL;

		pthread_mutex_lock(&st->mu);
		pack_forget_locked(st, p, &gone);
		pthread_mutex_unlock(&st->mu);
		free_chain(gone);
	}
	if (rc) {
		STAT_ADD(st->misses, 1);
	} else {
		STAT_ADD(st->hits, 1);
		pack_used(st, p, fd, &sb);
		*fdout = fd;
	}
	pack_unref(p);
	return rc;
}

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

/* store_get; store_map when m is not NULL (buf is then unused);
 * store_open_raw when fdout is not NULL (buf and m unused; checked is
 * its). */
static int get(struct store *st, const struct chunk_key *key, void *buf,
	       size_t cap, size_t *len, struct store_map *m, int *fdout,
	       struct store_file_id *checked)
{
	const unsigned fan = key->b[0];
	struct tctx *t = NULL;
	const char *why = NULL;
	char hex[33], rel[36];
	struct sentry *e;
	struct spack *p;
	uint32_t idx = 0;
	struct hdr h;
	int fd = -1, open_errno = 0, rc;

	p = pack_of(st, key, &idx);
	if (!p) {
		store_key_hex(key, hex);
		fd = openat(st->dirfd[fan], hex, CHUNK_OPEN);
		open_errno = errno;
		/* Put in a pack between the look and the open, which then
		 * found its chunk file removed. */
		if (fd < 0 && open_errno == ENOENT)
			p = pack_of(st, key, &idx);
	}
	if (p) {
		/* store_open_raw hands over files of one chunk: never a
		 * pack's. */
		rc =
		    fdout ? -ENOTSUP : get_packed(st, p, idx, buf, cap, len, m);
		pack_unref(p);
		return rc;
	}
	if (fd < 0) {
		rc = open_errno;
		STAT_ADD(st->misses, 1);
		if (rc != ENOENT) {
			chunk_relpath(key, rel);
			log_warn("%s/%s: cannot open cached chunk: %s",
				 st->chunkdir, rel, strerror(rc));
			return -EIO;
		}
		/* Known but gone (`wharf cache verify` removed it)? */
		pthread_mutex_lock(&st->mu);
		e = index_find(st, key);
		pthread_mutex_unlock(&st->mu);
		if (e) {
			pthread_mutex_lock(&st->stripe[fan]);
			index_forget(st, key, hex);
			pthread_mutex_unlock(&st->stripe[fan]);
		}
		return -ENOENT;
	}
	rc = read_chunk(fd, key, &t, buf, cap, &h, &why, m);
	if (!rc && fdout) {
		rc = same_file(&h.file, checked) && h.codec == CODEC_RAW &&
			     !h.payload
			 ? (h.raw_len > cap ? -EOVERFLOW : 0)
			 : check_raw_file(fd, &h, cap, &why);
		if (!rc)
			*checked = h.file;
	}
	codec_give(t);
	if (rc == -EBADMSG) {
		STAT_ADD(st->misses, 1);
		chunk_file_bad(st, key, fd, why);
		goto out;
	}
	/* store_map: compressed, or not mappable; store_open_raw: compressed,
	 * or format 1 (the header comes first). */
	if (rc == -ENOTSUP)
		goto out;
	if (rc) {
		STAT_ADD(st->misses, 1);
		if (rc == -EIO) {
			chunk_relpath(key, rel);
			log_warn("%s/%s: read error on a cached chunk",
				 st->chunkdir, rel);
		}
		goto out;
	}
	*len = h.raw_len;
	STAT_ADD(st->hits, 1);
	touch_file(fd, h.used_s);
	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e) {
		lru_unlink(e);
		lru_push_front(st, e);
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

/*
 * Decides how chunk data is stored: a zstd frame in the thread's scratch
 * buffer, or the raw bytes.  Data that zstd cannot shrink by min_saving_pct
 * (JPEG, PNG, video, anything already compressed) is stored raw, and for a
 * large chunk that is found out from a 64 KiB sample first, so such data
 * costs about 2% of a full compression; if the sample compresses, the
 * whole chunk is compressed into a buffer no larger than the biggest
 * acceptable result, and not fitting means raw.  A chunk whose sample
 * misleads is only stored less compactly: never wrongly.
 */
static void choose_payload(struct store *st, struct tctx *t, const void *data,
			   size_t len, const void **payload, size_t *plen,
			   uint8_t *codec)
{
	const unsigned pct = st->cfg.min_saving_pct;
	const size_t limit = len - len * pct / 100;
	void *dst;
	size_t n;

	*payload = data;
	*plen = len;
	*codec = CODEC_RAW;
	if (len == 0 || pct >= 100 || limit == 0)
		return;
	if (!t->c) {
		t->c = ZSTD_createCCtx();
		if (!t->c)
			return;
	}
	if (len >= SAMPLE_MIN_CHUNK) {
		dst = tctx_buf(t, ZSTD_compressBound(SAMPLE_SIZE));
		if (!dst)
			return;
		/* Half the threshold: a sample has less history to match. */
		n = ZSTD_compressCCtx(t->c, dst, t->cap, data, SAMPLE_SIZE,
				      st->cfg.zstd_level);
		if (ZSTD_isError(n) ||
		    n > SAMPLE_SIZE - SAMPLE_SIZE * pct / 200)
			return;
	}
	dst = tctx_buf(t, limit);
	if (!dst)
		return;
	n = ZSTD_compressCCtx(t->c, dst, limit, data, len, st->cfg.zstd_level);
	if (ZSTD_isError(n))
		return; /* dstSize_tooSmall: it saves too little */
	*payload = dst;
	*plen = n;
	*codec = CODEC_ZSTD;
}

/* Writes a chunk file: the header as an xattr (version 2) or ahead of
 * the payload (version 1), as the header itself says. */
static int write_tmp(int dirfd, const char *name, const uint8_t *hdr,
		     const void *payload, size_t plen)
{
	const bool inline_hdr = hdr[4] == FORMAT_INLINE;
	struct iovec iov[2] = {{(void *)hdr, inline_hdr ? HDR_SIZE : 0},
			       {(void *)payload, plen}};
	size_t left = iov[0].iov_len + plen;
	int fd, rc = 0;

	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (!inline_hdr && fsetxattr(fd, HDR_XATTR, hdr, HDR_SIZE, 0))
		rc = -errno;
	while (!rc && left) {
		ssize_t w = writev(fd, iov[0].iov_len ? iov : iov + 1,
				   iov[0].iov_len ? 2 : 1);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = w < 0 ? -errno : -ENOSPC;
			break;
		}
		left -= (size_t)w;
		for (int i = 0; i < 2 && w; i++) {
			const size_t k = (size_t)w < iov[i].iov_len
					     ? (size_t)w
					     : iov[i].iov_len;

			iov[i].iov_base = (char *)iov[i].iov_base + k;
			iov[i].iov_len -= k;
			w -= (ssize_t)k;
		}
	}
	if (close(fd) && !rc)
		rc = -errno;
	if (rc)
		unlinkat(dirfd, name, 0);
	return rc;
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
	t = codec_take();
	if (!e || !t) {
		sentry_free(e);
		codec_give(t);
		return -ENOMEM;
	}
	/* payload may point into t's buffer: t is given back once written. */
	choose_payload(st, t, data, len, &payload, &plen, &h.codec);
	h.version = st->hdr_xattr ? FORMAT_XATTR : FORMAT_INLINE;
	h.payload = st->hdr_xattr ? 0 : HDR_SIZE;
	h.raw_len = len;
	h.stored_len = plen;
	h.sum_kind = SUM_XXH3;
	h.sum = chunk_sum(h.sum_kind, data, len, key_seed(key));
	h.key = *key;
	hdr_encode(hdr, &h);
	disk = disk_bytes((uint64_t)h.payload + plen);
	e->key = *key;
	e->disk = disk;
	e->raw = len;
	e->zstd = h.codec == CODEC_ZSTD;

	/* Make room first, so the files on disk never exceed the cap. */
	pthread_mutex_lock(&st->mu);
	/* Larger than the room that writes in flight leave under the cap:
	 * evicting everything would not make it fit, so evict nothing. */
	if (st->cfg.max_bytes && st->reserved + disk > st->cfg.max_bytes) {
		pthread_mutex_unlock(&st->mu);
		codec_give(t);
		sentry_free(e);
		return -ENOSPC;
	}
	/* Then eviction can always make room (an empty index uses none). */
	victims = st->cfg.max_bytes ? evict_locked(st, st->cfg.max_bytes, disk)
				    : NULL;
	st->reserved += disk;
	pthread_mutex_unlock(&st->mu);
	evict_files(st, victims, NULL, NULL);

	store_key_hex(key, hex);
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s.%d.%lu", hex, (int)getpid(),
		 __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
	rc = write_tmp(st->dirfd[fan], tmp, hdr, payload, plen);
	codec_give(t);
	if (rc == -EDQUOT)
		rc = -ENOSPC;
	if (!rc) {
		pthread_mutex_lock(&st->stripe[fan]);
		if (renameat(st->dirfd[fan], tmp, st->dirfd[fan], hex)) {
			rc = -errno;
			unlinkat(st->dirfd[fan], tmp, 0);
		}
		pthread_mutex_lock(&st->mu);
		st->reserved -= disk;
		if (!rc) {
			old = index_find(st, key);
			if (old)
				index_remove(st, old);
			index_insert(st, e, true);
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
	if (rc && rc != -ENOSPC) {
		chunk_relpath(key, rel);
		log_warn("%s/%s: cannot write chunk: %s", st->chunkdir, rel,
			 strerror(-rc));
		rc = -EIO;
	}
	return rc;
}

void store_get_stats(struct store *st, struct store_stats *out)
{
	pthread_mutex_lock(&st->mu);
	out->chunks = st->n;
	out->packs = st->packs;
	out->bytes_on_disk = st->used;
	out->bytes_raw = st->raw;
	pthread_mutex_unlock(&st->mu);
	out->max_bytes = st->cfg.max_bytes;
	out->hits = STAT_GET(st->hits);
	out->misses = STAT_GET(st->misses);
	out->evictions = STAT_GET(st->evictions);
	out->corrupt = STAT_GET(st->corrupt);
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
	victims = evict_locked(st, max_bytes, 0);
	pthread_mutex_unlock(&st->mu);
	evict_files(st, victims, chunks, bytes);
	return 0;
}

/* ---- walking the layout ---- */

/* A walk's buffers: t holds compressed bytes, raw the chunk. */
struct walker {
	struct tctx t, *tp; /* tp: &t, the walk's own set */
	void *raw;
	size_t rawcap;
};

static int walk_verify(struct walker *w, int fd, const struct chunk_key *key,
		       struct hdr *h, const char **why)
{
	/* At least a byte: read_chunk checks only the header when given
	 * no buffer, and an empty chunk has a checksum too. */
	const size_t need = h->raw_len ? h->raw_len : 1;

	if (w->rawcap < need) {
		void *p = realloc(w->raw, need);

		if (!p)
			return -ENOMEM;
		w->raw = p;
		w->rawcap = need;
	}
	return read_chunk(fd, key, &w->tp, w->raw, w->rawcap, h, why, NULL);
}

/* Whether name is "KEY" + suffix, with KEY into *key. */
static bool name_is(const char *name, const char *suffix, struct chunk_key *key)
{
	char hex[33];

	if (strlen(name) != 32 + strlen(suffix) || strcmp(name + 32, suffix))
		return false;
	memcpy(hex, name, 32);
	hex[32] = '\0';
	return store_key_parse(hex, key) == 0;
}

/*
 * Visits the chunks of pack `key` (its KEY.idx is in dir d), one entry
 * each.  A pack is good or bad whole: a bad index or size, or with
 * STORE_WALK_VERIFY a bad chunk, makes every chunk's entry bad, and the
 * pack is removed when the walk verifies or its caller holds the lock
 * (WALK_LOCKED).  A .idx without its .pack is a pack being made: skipped.
 */
static int walk_pack(const char *chunkdir, DIR *d, const char *fan,
		     const struct chunk_key *key, unsigned flags,
		     store_walk_fn fn, void *arg)
{
	char data[PACK_NAME_MAX], idx[PACK_NAME_MAX], path[PATH_MAX];
	const char *why = NULL;
	struct spack *p = NULL;
	uint32_t bad = UINT32_MAX;
	bool removed = false;
	struct stat sb;
	int fd = -1, r, rc = 0;

	pack_names(key, data, idx);
	/* Being made (or removed) now: its index comes first and goes
	 * last. */
	if (faccessat(dirfd(d), data, F_OK, AT_SYMLINK_NOFOLLOW) &&
	    errno == ENOENT)
		return 0;
	r = pack_load(dirfd(d), key, &p, &why);
	if (r == -ENOENT)
		return 0; /* removed meanwhile */
	if (!r)
		r = pack_open_data(dirfd(d), p, O_NOATIME, &fd, &sb, &why);
	if (r == -ENOENT) {
		pack_unref(p);
		return 0;
	}
	if (!r && (flags & STORE_WALK_VERIFY))
		r = pack_check(fd, p, 1, &bad, &why);
	if (r == -EBADMSG && (flags & (STORE_WALK_VERIFY | WALK_LOCKED)))
		removed = (fd < 0 || unlink_if_same(dirfd(d), data, fd) == 0) &&
			  pack_unlink(dirfd(d), key) == 0;
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/%s/%s", chunkdir, fan, p ? data : idx);
	if (!p) {
		/* The index itself is bad: one entry, for chunk 0. */
		struct store_entry e = {.key = *key,
					.path = path,
					.error = r,
					.removed = removed,
					.why =
					    r == -EBADMSG ? why : strerror(-r)};

		return fn(&e, arg);
	}
	for (uint32_t i = 0; !rc && i < p->n; i++) {
		struct store_entry e = {.key = p->ent[i].key,
					.path = path,
					.pack = p,
					.pack_index = i,
					.error = r,
					.removed = removed};

		e.disk_bytes = disk_bytes(pack_chunk_len(p, i));
		if (!r) {
			e.raw_bytes = pack_chunk_len(p, i);
			e.atime_ns = ts_ns(&sb.st_atim) > ts_ns(&sb.st_mtim)
					 ? ts_ns(&sb.st_atim)
					 : ts_ns(&sb.st_mtim);
		} else if (r == -EBADMSG) {
			e.why = bad == UINT32_MAX || bad == i
				    ? why
				    : "in a pack with a bad chunk";
		} else {
			e.why = strerror(-r);
		}
		rc = fn(&e, arg);
	}
	pack_unref(p);
	return rc;
}

static int walk_dir(const char *chunkdir, int fan_fd, const char *fan,
		    unsigned flags, struct walker *w, store_walk_fn fn,
		    void *arg)
{
	DIR *d = fdopendir(fan_fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		close(fan_fd);
		return -errno;
	}
	while (!rc && (de = readdir(d))) {
		struct store_entry e = {0};
		char path[PATH_MAX];
		const char *why = NULL;
		struct stat sb;
		struct hdr h;
		int fd, r;

		if (name_is(de->d_name, ".idx", &e.key)) {
			rc =
			    walk_pack(chunkdir, d, fan, &e.key, flags, fn, arg);
			continue;
		}
		/* ".", "..", temp files, a pack's bytes (visited by its
		 * index), strangers */
		if (store_key_parse(de->d_name, &e.key))
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", chunkdir, fan,
			 de->d_name);
		e.path = path;
		/* O_NOATIME: looking is not using; a read would reset the
		 * atime that ranks the chunk (only the owner may ask). */
		fd = openat(dirfd(d), de->d_name, CHUNK_OPEN | O_NOATIME);
		if (fd < 0 && errno == EPERM)
			fd = openat(dirfd(d), de->d_name, CHUNK_OPEN);
		if (fd < 0)
			continue; /* evicted meanwhile, or not ours */
		if (fstat(fd, &sb)) {
			close(fd);
			continue;
		}
		if (!S_ISREG(sb.st_mode)) {
			/* Planted or made by hand: never read, never
			 * counted, left where it is. */
			close(fd);
			e.error = -EINVAL;
			e.why = "not a regular file";
			rc = fn(&e, arg);
			continue;
		}
		e.disk_bytes = disk_bytes((uint64_t)sb.st_size);
		e.atime_ns = ts_ns(&sb.st_atim) > ts_ns(&sb.st_mtim)
				 ? ts_ns(&sb.st_atim)
				 : ts_ns(&sb.st_mtim);
		r = read_chunk(fd, &e.key, &w->tp, NULL, 0, &h, &why, NULL);
		if (r == 0 && (flags & STORE_WALK_VERIFY))
			r = walk_verify(w, fd, &e.key, &h, &why);
		e.error = r;
		if (r == -EBADMSG) {
			e.why = why;
			if ((flags & STORE_WALK_VERIFY) &&
			    unlink_if_same(dirfd(d), de->d_name, fd) == 0)
				e.removed = true;
		} else if (r) {
			e.why = strerror(-r);
		} else {
			e.raw_bytes = h.raw_len;
			e.zstd = h.codec == CODEC_ZSTD;
		}
		close(fd);
		rc = fn(&e, arg);
	}
	closedir(d);
	return rc;
}

int store_walk(const char *dir, unsigned flags, store_walk_fn fn, void *arg,
	       char **err)
{
	struct walker w = {0};
	char *chunkdir = strdupf("%s/chunks", dir);
	int top, rc = 0;

	w.tp = &w.t;
	top = open(chunkdir, DIR_OPEN);
	if (top < 0) {
		rc = -errno;
		if (rc == -ENOENT) /* no chunk written yet */
			rc = access(dir, F_OK) ? -errno : 0;
		if (rc)
			err_set(err, "%s: %s", rc == -ENOENT ? dir : chunkdir,
				strerror(-rc));
		goto out;
	}
	for (unsigned i = 0; !rc && i < FANOUT; i++) {
		char fan[3];
		int fd;

		snprintf(fan, sizeof(fan), "%02x", i);
		fd = openat(top, fan, DIR_OPEN);
		if (fd < 0)
			continue;
		rc = walk_dir(chunkdir, fd, fan, flags, &w, fn, arg);
		if (rc < 0 && err)
			err_set(err, "%s/%s: %s", chunkdir, fan, strerror(-rc));
	}
	close(top);
out:
	ZSTD_freeDCtx(w.t.d);
	free(w.t.buf);
	free(w.raw);
	free(chunkdir);
	return rc;
}

/* ---- open, lock, close ---- */

static int mkdirs(const char *path, mode_t mode)
{
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) && errno != EEXIST)
			rc = -errno;
		*s = '/';
		if (rc)
			break;
	}
	if (!rc && mkdir(p, mode) && errno != EEXIST)
		rc = -errno;
	free(p);
	return rc;
}

static int read_holder(int fd, pid_t *pid, char **mountpoint)
{
	char buf[PATH_MAX + 32], *nl, *end;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long v;

	*pid = 0;
	*mountpoint = NULL;
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	v = strtol(buf, &end, 10);
	if (end != buf && v > 0)
		*pid = (pid_t)v;
	nl = strchr(buf, '\n');
	if (nl && nl[1]) {
		char *mp = nl + 1;

		mp[strcspn(mp, "\n")] = '\0';
		if (*mp) {
			*mountpoint = strdup(mp);
			if (!*mountpoint)
				return -ENOMEM;
		}
	}
	return 0;
}

bool store_is_cache(const char *dir)
{
	char *lock = strdupf("%s/lock", dir);
	char *chunks = strdupf("%s/chunks", dir);
	bool is =
	    lock && chunks && (!access(lock, F_OK) || !access(chunks, F_OK));

	free(lock);
	free(chunks);
	return is;
}

int store_lock_holder(const char *dir, pid_t *pid, char **mountpoint)
{
	char *path = strdupf("%s/lock", dir);
	int fd, rc;

	*pid = 0;
	*mountpoint = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	free(path);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		close(fd);
		return -ENOENT;
	}
	rc = errno == EWOULDBLOCK ? read_holder(fd, pid, mountpoint) : -errno;
	close(fd);
	return rc;
}

static int write_lockfile(struct store *st, const char *mountpoint)
{
	char *s = strdupf("%d\n%s%s", (int)getpid(),
			  mountpoint ? mountpoint : "", mountpoint ? "\n" : "");
	const size_t n = strlen(s);
	int rc = 0;

	if (ftruncate(st->lockfd, 0))
		rc = -errno;
	else if (pwrite(st->lockfd, s, n, 0) != (ssize_t)n)
		rc = -EIO;
	free(s);
	return rc;
}

int store_set_mountpoint(struct store *st, const char *mountpoint)
{
	return write_lockfile(st, mountpoint);
}

char *store_default_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	const struct passwd *pw;

	if (geteuid() == 0)
		return strdup("/var/cache/wharf");
	if (xdg && xdg[0] == '/')
		return strdupf("%s/wharf", xdg);
	if (!home || home[0] != '/') {
		/* Never a shared dir such as /tmp: anyone could be there
		 * first. */
		pw = getpwuid(geteuid());
		home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir
								: NULL;
	}
	if (!home) {
		errno = ENOENT;
		return NULL;
	}
	return strdupf("%s/.cache/wharf", home);
}

char *store_snapshot_dir(const char *dir)
{
	return strdupf("%s/snapshots", dir);
}

char *store_snapshot_path(const char *dir, const char *source_id)
{
	return strdupf("%s/snapshots/%016llx.list", dir,
		       (unsigned long long)store_hash64(
			   source_id, strlen(source_id), 0x5eed));
}

struct scan_item {
	int64_t time;
	struct sentry *e;
};

struct scan {
	struct scan_item *v;
	size_t n, cap;
	size_t bad; /* removed: the first SCAN_BAD_LOGGED are logged */
};

/* A cache copied without its xattrs has every chunk bad: a summary line
 * says so instead of a line per chunk. */
#define SCAN_BAD_LOGGED 10

static int scan_one(const struct store_entry *e, void *arg)
{
	struct scan *s = arg;
	struct sentry *se;

	if (e->error == -EINVAL) {
		log_warn("%s: skipped: %s", e->path, e->why);
		return 0;
	}
	if (e->error == -EBADMSG) {
		/* Ours to remove: we hold the lock (a pack's walk removed
		 * it already). */
		if (++s->bad <= SCAN_BAD_LOGGED)
			log_warn("%s: removing a bad cached chunk (%s)",
				 e->path, e->why);
		if (!e->removed && !e->pack)
			unlink(e->path);
		return 0;
	}
	/* Unreadable now (an I/O error): indexed all the same, so that it
	 * counts against the cap and eviction can remove it; a read of it
	 * fails and fetches the chunk again. */
	if (e->error)
		log_warn("%s: cannot read a cached chunk (%s)", e->path,
			 e->why ? e->why : strerror(-e->error));
	if (s->n == s->cap) {
		const size_t ncap = s->cap ? s->cap * 2 : 1024;
		struct scan_item *v = realloc(s->v, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = ncap;
	}
	se = calloc(1, sizeof(*se));
	if (!se)
		return -ENOMEM;
	se->key = e->key;
	se->disk = e->disk_bytes;
	se->raw = e->raw_bytes;
	se->zstd = e->zstd;
	if (e->pack) {
		se->pack = (struct spack *)e->pack;
		se->idx = e->pack_index;
		__atomic_add_fetch(&se->pack->refs, 1, __ATOMIC_RELAXED);
	}
	s->v[s->n].time = e->atime_ns;
	s->v[s->n++].e = se;
	return 0;
}

static int by_time_desc(const void *a, const void *b)
{
	const int64_t x = ((const struct scan_item *)a)->time;
	const int64_t y = ((const struct scan_item *)b)->time;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Whether dirfd holds name, KEY with another suffix. */
static bool sibling_exists(int dirfd, const char *name, const char *suffix)
{
	char other[PACK_NAME_MAX];

	snprintf(other, sizeof(other), "%.32s%s", name, suffix);
	return faccessat(dirfd, other, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
	       errno != ENOENT;
}

/* Removes what a crash left behind: temp files, and half a pack (its
 * index alone, or its bytes alone). */
static void remove_strays(struct store *st)
{
	struct chunk_key key;

	for (unsigned i = 0; i < FANOUT; i++) {
		int fd = dup(st->dirfd[i]);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *de;

		if (!d) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		while ((de = readdir(d)))
			if (!strncmp(de->d_name, TMP_PREFIX,
				     strlen(TMP_PREFIX)) ||
			    (name_is(de->d_name, ".idx", &key) &&
			     !sibling_exists(st->dirfd[i], de->d_name,
					     ".pack")) ||
			    (name_is(de->d_name, ".pack", &key) &&
			     !sibling_exists(st->dirfd[i], de->d_name, ".idx")))
				unlinkat(st->dirfd[i], de->d_name, 0);
		closedir(d);
	}
}

/* Rebuilds the index and the LRU order from the files (by last use). */
static int scan(struct store *st, char **err)
{
	struct scan s = {0};
	int rc;

	remove_strays(st);
	rc = store_walk(st->dir, WALK_LOCKED, scan_one, &s, err);
	if (s.bad > SCAN_BAD_LOGGED)
		log_warn("%s: removed %zu bad cached chunks in all, %zu not "
			 "named above; they will be fetched again (a copy of "
			 "a cache must keep extended attributes: cp -a, "
			 "rsync -X)",
			 st->dir, s.bad, s.bad - SCAN_BAD_LOGGED);
	if (rc == -ENOMEM && err && !*err)
		err_set(err, "%s: out of memory reading the cache", st->dir);
	if (!rc && s.n) {
		qsort(s.v, s.n, sizeof(*s.v), by_time_desc);
		pthread_mutex_lock(&st->mu);
		for (size_t i = 0; i < s.n; i++) {
			struct sentry *e = s.v[i].e;
			struct sentry *old = index_find(st, &e->key);

			/* A chunk both in a pack and in a chunk file: a crash
			 * stopped the pack's maker from removing the file.
			 * The pack wins; the file is removed below. */
			if (old && (old->pack || !e->pack))
				continue;
			if (old)
				index_remove(st, old);
			index_insert(st, e, false);
			s.v[i].e = old;
		}
		pthread_mutex_unlock(&st->mu);
	}
	/* Left over: chunk files a pack holds too.  After a failed scan none
	 * went into the index, and every file stays. */
	for (size_t i = 0; i < s.n; i++) {
		struct sentry *e = s.v[i].e;
		char hex[33];

		if (!rc && e && !e->pack) {
			store_key_hex(&e->key, hex);
			(void)unlinkat(st->dirfd[e->key.b[0]], hex, 0);
		}
		sentry_free(e);
	}
	free(s.v);
	return rc;
}

/*
 * A cache dir, and every dir and file the store makes in it, must be the
 * user's alone, as ssh asks of ~/.ssh: another user who can write there
 * could plant a link that makes us overwrite a file of ours (root's!) or
 * forge chunks (a key and its checksum are computed from public data).
 * @return 0, or -EPERM with *err saying what is wrong and what to do.
 */
static int private_check(int fd, const char *path, mode_t type,
			 const char *what, char **err)
{
	struct stat sb;

	if (fstat(fd, &sb))
		return -errno;
	if ((sb.st_mode & S_IFMT) != type) {
		err_set(err, "%s: not a %s", path, what);
		return -EPERM;
	}
	if (sb.st_uid != geteuid()) {
		err_set(
		    err,
		    "%s belongs to uid %u, not to uid %u that runs wharf: a "
		    "cache must belong to its user",
		    path, (unsigned)sb.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		err_set(err,
			"%s is writable by others (mode %04o): a cache must be "
			"writable by its user alone (chmod go-w %s)",
			path, (unsigned)(sb.st_mode & 07777), path);
		return -EPERM;
	}
	return 0;
}

static int private_dir(int fd, const char *path, char **err)
{
	return private_check(fd, path, S_IFDIR, "directory", err);
}

static int private_file(int fd, const char *path, char **err)
{
	return private_check(fd, path, S_IFREG, "regular file", err);
}

/* Makes (0700) and opens dir NAME under the dir fd parent (at path
 * parent_path, for messages), and checks it.  @return 0 or -errno with
 * *err. */
static int open_private_subdir(int parent, const char *name,
			       const char *parent_path, int *out, char **err)
{
	char *path = strdupf("%s/%s", parent_path, name);
	int rc;

	*out = -1;
	if (mkdirat(parent, name, 0700) && errno != EEXIST)
		rc = -errno;
	else if ((*out = openat(parent, name, DIR_OPEN)) < 0)
		rc = -errno;
	else
		rc = private_dir(*out, path, err);
	if (rc && err && !*err)
		err_set(err, "%s: %s", path, strerror(-rc));
	free(path);
	return rc;
}

/* flock(LOCK_EX | LOCK_NB), tried for up to half a second while the
 * holder could be `wharf cache stats` probing with a brief shared lock
 * (a mount holds it for good, and the last try says so). */
static int lock_exclusive(int fd)
{
	for (int i = 0;; i++) {
		if (!flock(fd, LOCK_EX | LOCK_NB))
			return 0;
		if (errno != EWOULDBLOCK || i == 25)
			return -1;
		usleep(20000);
	}
}

/* Whether the cache dir's filesystem keeps user xattrs (ext4, xfs, btrfs,
 * tmpfs do; some network filesystems do not). */
static bool xattr_works(int fd)
{
	static const char probe[] = HDR_XATTR ".probe";

	if (fsetxattr(fd, probe, "", 0, 0))
		return false;
	(void)fremovexattr(fd, probe);
	return true;
}

int store_open(const struct store_config *cfg, struct store **out, char **err)
{
	struct store *st;
	char *path = NULL;
	struct sentry *victims;
	int top = -1, chunks = -1, rc;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->lockfd = -1;
	for (unsigned i = 0; i < FANOUT; i++) {
		st->dirfd[i] = -1;
		pthread_mutex_init(&st->stripe[i], NULL);
	}
	pthread_mutex_init(&st->mu, NULL);
	st->lru.next = st->lru.prev = &st->lru;
	st->cfg = *cfg;
	st->dir = strdup(cfg->dir);
	st->chunkdir = strdupf("%s/chunks", cfg->dir);
	st->cfg.dir = st->dir;
	st->tabsize = 1024;
	st->tab = calloc(st->tabsize, sizeof(*st->tab));
	if (!st->dir || !st->tab) {
		rc = -ENOMEM;
		goto fail;
	}
	if (st->cfg.zstd_level == 0)
		st->cfg.zstd_level = 3;
	if (st->cfg.min_saving_pct == 0)
		st->cfg.min_saving_pct = 10;

	rc = mkdirs(st->dir, 0700);
	if (rc) {
		err_set(err, "cannot create the cache directory %s: %s",
			st->dir, strerror(-rc));
		goto fail;
	}
	top = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = top < 0 ? -errno : private_dir(top, st->dir, err);
	if (rc) {
		if (err && !*err)
			err_set(err, "%s: %s", st->dir, strerror(-rc));
		goto fail;
	}
	path = strdupf("%s/lock", st->dir);
	st->lockfd = openat(top, "lock", O_RDWR | O_CREAT | CHUNK_OPEN, 0600);
	rc = st->lockfd < 0 ? -errno : private_file(st->lockfd, path, err);
	if (rc) {
		if (err && !*err)
			err_set(err, "%s: %s", path, strerror(-rc));
		goto fail;
	}
	if (lock_exclusive(st->lockfd)) {
		pid_t pid = 0;
		char *mp = NULL;

		rc = -errno;
		if (rc != -EWOULDBLOCK) {
			err_set(err, "%s: cannot lock: %s", path,
				strerror(-rc));
			goto fail;
		}
		rc = -EBUSY;
		(void)read_holder(st->lockfd, &pid, &mp);
		err_set(
		    err,
		    "the cache directory %s is in use by wharf process %d%s%s "
		    "(one mount per cache directory)",
		    st->dir, (int)pid, mp ? ", mounted on " : "", mp ? mp : "");
		free(mp);
		goto fail;
	}
	st->locked = true;
	rc = write_lockfile(st, NULL);
	if (rc) {
		err_set(err, "%s: %s", path, strerror(-rc));
		goto fail;
	}
	st->hdr_xattr = !cfg->inline_headers && xattr_works(st->lockfd);
	{
		const long n = sysconf(_SC_NPROCESSORS_ONLN);

		st->ncpu = n < 1 ? 1 : (unsigned)n;
	}
	rc = open_private_subdir(top, "chunks", st->dir, &chunks, err);
	for (unsigned i = 0; !rc && i < FANOUT; i++) {
		char fan[3];

		snprintf(fan, sizeof(fan), "%02x", i);
		rc = open_private_subdir(chunks, fan, st->chunkdir,
					 &st->dirfd[i], err);
	}
	if (rc)
		goto fail;
	rc = scan(st, err);
	if (rc)
		goto fail;
	/* A smaller cap than last time: honour it now. */
	if (st->cfg.max_bytes) {
		pthread_mutex_lock(&st->mu);
		victims = evict_locked(st, st->cfg.max_bytes, 0);
		pthread_mutex_unlock(&st->mu);
		evict_files(st, victims, NULL, NULL);
	}
	free(path);
	close(top);
	close(chunks);
	*out = st;
	return 0;
fail:
	free(path);
	if (top >= 0)
		close(top);
	if (chunks >= 0)
		close(chunks);
	store_close(st);
	return rc;
}

void store_close(struct store *st)
{
	struct sentry *e, *next;

	if (!st)
		return;
	for (e = st->lru.next; e && e != &st->lru; e = next) {
		next = e->next;
		sentry_free(e);
	}
	for (unsigned i = 0; i < FANOUT; i++) {
		if (st->dirfd[i] >= 0)
			close(st->dirfd[i]);
		pthread_mutex_destroy(&st->stripe[i]);
	}
	if (st->locked) {
		/* Leave the file, drop its contents: nobody holds it. */
		if (ftruncate(st->lockfd, 0))
			log_warn("%s/lock: %s", st->dir, strerror(errno));
	}
	if (st->lockfd >= 0)
		close(st->lockfd);
	pthread_mutex_destroy(&st->mu);
	free(st->tab);
	free(st->chunkdir);
	free(st->dir);
	free(st);
}
