/*
 * chunkfile: one chunk file's format, and the keys that name chunks.
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
 */
#include "config.h"

#include "chunkfile.h"
#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>
/* For XXH64_state_t and XXH3_state_t, so that a streaming sum needs no
 * allocation. */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>


/* Compress a sample of this much first; see chunkfile_payload. */
#define SAMPLE_SIZE (64 * 1024)
#define SAMPLE_MIN_CHUNK (256 * 1024)
/* The same for small chunks (an image or a caption as a whole object):
 * a full attempt on an incompressible 100 KB chunk was about a tenth of a
 * cold mount's CPU on the 1 ms small cell of bench/fs-concurrency. */
#define SMALL_SAMPLE_SIZE (16 * 1024)
#define SMALL_SAMPLE_MIN_CHUNK (64 * 1024)

static const uint8_t magic[4] = {'W', 'H', 'C', 'K'};

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

/* ---- checksums ---- */

/* chunk_sum (chunkfile.h), piece by piece. */
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
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct tctx *pool_free;
static unsigned pool_made, pool_max;

/* @return a set, or NULL when memory is gone. */
struct tctx *chunkfile_codec_take(void)
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

void chunkfile_codec_give(struct tctx *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&pool_mu);
	t->next = pool_free;
	pool_free = t;
	pthread_cond_signal(&pool_cond);
	pthread_mutex_unlock(&pool_mu);
}

void chunkfile_codec_free(struct tctx *t)
{
	ZSTD_freeDCtx(t->d);
	ZSTD_freeCCtx(t->c);
	free(t->buf);
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

void chunkfile_hdr_encode(uint8_t out[HDR_SIZE], const struct hdr *h)
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

/* @return 0, -EIO, or -ENODATA when the file ends early. */
int chunkfile_pread(int fd, void *buf, size_t n, off_t off)
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
int chunkfile_check_in_map(const uint8_t *map, uint64_t off, uint64_t len,
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
 * mapping stays valid until unmapped.  chunkfile_map maps and verifies len
 * bytes at off (a chunk file's payload, or a chunk in a pack).
 * @return 0; -ENOTSUP for a compressed chunk or a file that cannot be
 * mapped; -EBADMSG with *why.
 */
int chunkfile_map(int fd, uint64_t off, uint64_t len, uint8_t sum_kind,
		  uint64_t seed, uint64_t sum, struct store_map *m,
		  const char **why, bool trusted)
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
	/* A sealed file is populated all the same: the copy into the FUSE
	 * reply then takes no fault per page. */
	if (trusted)
		rc = madvise(p, map_len, MADV_POPULATE_READ) && errno != EINVAL
			 ? -EIO
			 : 0;
	else
		rc = chunkfile_check_in_map(p, lead, len, sum_kind, seed, sum,
					    why);
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
	return chunkfile_map(fd, (uint64_t)h->payload, h->raw_len, h->sum_kind,
			     key_seed(&h->key), h->sum, m, why, h->trusted);
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
		rc = chunkfile_pread(fd, raw, HDR_SIZE, 0);
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
int chunkfile_read(int fd, const struct chunk_key *key, struct tctx **tp,
		   void *buf, size_t cap, struct hdr *h, const char **why,
		   struct store_map *m, const struct seal *trust)
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
	h->file = file_id(&sb);
	rc = read_hdr(fd, (uint64_t)sb.st_size, h, why);
	if (rc)
		return rc;
	if (key && memcmp(key->b, h->key.b, 16)) {
		*why = "holds another key's chunk";
		return -EBADMSG;
	}
	h->trusted = trust && seal_trusts(trust, &h->file, h->sum);
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
			*tp = chunkfile_codec_take();
		t = *tp;
		src = t ? tctx_buf(t, h->stored_len) : NULL;
		if (!src)
			return -ENOMEM;
	}
	rc = chunkfile_pread(fd, src, h->stored_len, h->payload);
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
	if (!h->trusted && chunk_sum(h->sum_kind, buf, h->raw_len,
				     key_seed(&h->key)) != h->sum) {
		*why = "checksum mismatch";
		return -EBADMSG;
	}
	return 0;
}

/* chunkfile_check_range reads a file in pieces of this size: a piece
 * stays in the CPU's cache between the copy and the hash. */
#define CHECK_PIECE (64 * 1024)

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

/*
 * Checks a raw chunk file whose header h was read: the file must hold the
 * payload alone, and the payload its checksum (chunkfile_check_range: len bytes
 * of fd at start, as a pack's chunk is checked; with copy_to >= 0 they are also
 * written there at copy_off, as a pack is made).  It is read in pieces into a
 * buffer on the stack (the codec pool's buffers are one per CPU, and parallel
 * opens would queue for them) and hashed as it comes rather than mapped: in a
 * threaded daemon, mapping and unmapping a file per open costs page-table work
 * and a TLB shootdown on every CPU (10% more of the daemon's CPU, measured),
 * and a piece read into a warm buffer is hashed from the CPU's cache.
 * @return 0; -ENOTSUP (compressed, or the header in the file);
 * -EOVERFLOW; -EBADMSG with *why; -EIO.
 */
int chunkfile_check_range(int fd, uint64_t start, uint64_t len,
			  uint8_t sum_kind, uint64_t seed, uint64_t sum,
			  const char **why, int copy_to, uint64_t copy_off)
{
	uint8_t buf[CHECK_PIECE];
	struct sum_state s;
	uint64_t off;
	size_t n;
	int rc;

	sum_init(&s, sum_kind, seed);
	for (off = 0; off < len; off += n) {
		n = len - off < CHECK_PIECE ? len - off : CHECK_PIECE;
		rc = chunkfile_pread(fd, buf, n, (off_t)(start + off));
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
int chunkfile_check_raw(int fd, const struct hdr *h, size_t cap,
			const char **why)
{
	const uint64_t seed = key_seed(&h->key);
	struct store_map m;
	int rc;

	if (h->codec != CODEC_RAW || h->payload)
		return -ENOTSUP;
	if (h->raw_len > cap)
		return -EOVERFLOW;
	rc = chunkfile_map(fd, 0, h->raw_len, h->sum_kind, seed, h->sum, &m,
			   why, false);
	if (rc == -ENOTSUP)
		return chunkfile_check_range(fd, 0, h->raw_len, h->sum_kind,
					     seed, h->sum, why, -1, 0);
	if (!rc)
		munmap(m.map, m.map_len);
	return rc;
}

/*
 * Decides how chunk data is stored: a zstd frame in the thread's scratch
 * buffer, or the raw bytes.  Data that zstd cannot shrink by min_saving_pct
 * (JPEG, PNG, video, anything already compressed) is stored raw, and for a
 * chunk of 64 KiB or more that is found out from a sample of its start
 * first (64 KiB, or 16 KiB under 256 KiB), so such data costs a fraction
 * of a full compression (about 2% for large chunks, 15% for a 100 KB
 * one); if the sample compresses, the
 * whole chunk is compressed into a buffer no larger than the biggest
 * acceptable result, and not fitting means raw.  A chunk whose sample
 * misleads is only stored less compactly: never wrongly.
 */
void chunkfile_payload(struct tctx *t, int zstd_level, unsigned min_saving_pct,
		       const void *data, size_t len, const void **payload,
		       size_t *plen, uint8_t *codec)
{
	const unsigned pct = min_saving_pct;
	const size_t limit = len - len * pct / 100;
	const size_t sample = len >= SAMPLE_MIN_CHUNK	      ? SAMPLE_SIZE
			      : len >= SMALL_SAMPLE_MIN_CHUNK ? SMALL_SAMPLE_SIZE
							      : 0;
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
	if (sample) {
		dst = tctx_buf(t, ZSTD_compressBound(sample));
		if (!dst)
			return;
		/* Half the threshold: a sample has less history to match. */
		n = ZSTD_compressCCtx(t->c, dst, t->cap, data, sample,
				      zstd_level);
		if (ZSTD_isError(n) || n > sample - sample * pct / 200)
			return;
	}
	dst = tctx_buf(t, limit);
	if (!dst)
		return;
	n = ZSTD_compressCCtx(t->c, dst, limit, data, len, zstd_level);
	if (ZSTD_isError(n))
		return; /* dstSize_tooSmall: it saves too little */
	*payload = dst;
	*plen = n;
	*codec = CODEC_ZSTD;
}

/* Writes a chunk file: the header as an xattr (version 2) or ahead of
 * the payload (version 1), as the header itself says. */
int chunkfile_write(int dirfd, const char *name, const uint8_t *hdr,
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
