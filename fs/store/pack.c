/*
 * pack: packs, the chunks of one object in one file for the kernel to
 * read (store_open_object, store_pack_object).
 *
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
 * written in place, and goes whole: evicting any of its chunks evicts it
 * (store_index.c, which removes its files: pack_names and
 * store_unlink_pack are shared through store_i.h for that).
 */
#include "config.h"

#include "log.h"
#include "store_i.h"
#include "units.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


/* How often a pack's chunks move up the LRU (pack_used). */
#define PACK_USED_EVERY_NS 1000000000ull

#define PACK_HDR 56
#define PACK_ENTRY 24
#define PACK_VERSION 1
#define PACK_MAX_CHUNKS (1u << 22)
#define PACK_CHECK_THREADS 8

/* ---- a pack in the index ---- */

struct spack *pack_of(struct store *st, const struct chunk_key *key,
		      uint32_t *idx, struct seal *seal)
{
	struct spack *p = NULL;
	struct sentry *e;

	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e && e->pack) {
		p = e->pack;
		*idx = e->idx;
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
	} else if (e && seal) {
		*seal = e->seal;
	}
	pthread_mutex_unlock(&st->mu);
	return p;
}

/* ---- a pack's files ---- */

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

static uint64_t pack_chunk_len(const struct spack *p, uint32_t i)
{
	return i + 1 < p->n ? p->chunk_size
			    : p->size - (uint64_t)i * p->chunk_size;
}

void store_packs_until(struct store *st, uint64_t deadline_ns)
{
	uint64_t was = __atomic_load_n(&st->packs_until_ns, __ATOMIC_SEQ_CST);

	while ((!was || deadline_ns < was) &&
	       !__atomic_compare_exchange_n(&st->packs_until_ns, &was,
					    deadline_ns, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
}

/* Whether packs stop now (store_packs_until); until may be NULL (none). */
static bool packs_stopped(const uint64_t *until)
{
	const uint64_t t = until ? __atomic_load_n(until, __ATOMIC_SEQ_CST) : 0;

	return t && (t == 1 || now_ns() > t);
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
	p->idx_sum = rd64(b + 32);
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
	rc = b ? chunkfile_pread(fd, b, (size_t)sb.st_size, 0) : -ENOMEM;
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

/* A pack's check, shared by the threads that run it. */
struct pack_checker {
	int fd;
	const uint8_t *map; /* the whole pack, or NULL: read it */
	const struct spack *p;
	const uint64_t *until; /* store_packs_until's deadline, or NULL */
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
		    packs_stopped(c->until) ? -ECANCELED
		    : c->map ? chunkfile_check_in_map(
				 c->map, off, pack_chunk_len(p, i), p->sum_kind,
				 key_seed(&p->ent[i].key), p->ent[i].sum, &why)
			   : chunkfile_check_range(
				 c->fd, off, pack_chunk_len(p, i), p->sum_kind,
				 key_seed(&p->ent[i].key), p->ent[i].sum, &why,
				 -1, 0);

		if (!rc)
			continue;
		pthread_mutex_lock(&c->mu);
		if (!c->rc || (rc != -ECANCELED && i < c->bad)) {
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
 * work per chunk.  Each chunk looks at the deadline `until` first (NULL:
 * none).
 * @return 0, -EBADMSG with *why and *bad (a bad chunk), -EIO, -ECANCELED.
 */
static int pack_check(int fd, const struct spack *p, unsigned threads,
		      const uint64_t *until, uint32_t *bad, const char **why)
{
	struct pack_checker c = {.fd = fd, .p = p, .until = until};
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

/* ---- packs in the store ---- */

/* Under mu: takes the chunks that point to p out of the index, onto
 * *gone (chained by hnext) for the caller to free after dropping mu. */
static void pack_forget_locked(struct store *st, const struct spack *p,
			       struct sentry **gone)
{
	for (uint32_t i = 0; i < p->n; i++) {
		struct sentry *e = index_find(st, &p->ent[i].key);

		if (e && e->pack == p) {
			store_index_remove(st, e);
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
	if (store_unlink_if_same(st->dirfd[fan], data, fd) == 0)
		(void)unlinkat(st->dirfd[fan], idx, 0);
	pthread_mutex_lock(&st->mu);
	pack_forget_locked(st, p, &gone);
	pthread_mutex_unlock(&st->mu);
	pthread_mutex_unlock(&st->stripe[fan]);
	free_chain(gone);
}

/* Whether p's seal vouches for its .pack, file id. */
static bool pack_sealed(struct store *st, const struct spack *p,
			const struct store_file_id *id)
{
	bool sealed;

	if (st->cfg.check_each_mount)
		return false;
	pthread_mutex_lock(&st->mu);
	sealed = seal_trusts(&p->seal, id, p->idx_sum);
	pthread_mutex_unlock(&st->mu);
	return sealed;
}

/* Seals pack p's .pack, file id, which a check found good (or the store
 * wrote) after seal_clock gave t. */
static void pack_seal(struct store *st, struct spack *p,
		      const struct store_file_id *id, int64_t t)
{
	if (st->cfg.check_each_mount)
		return;
	pthread_mutex_lock(&st->mu);
	p->seal = (struct seal){.file = *id, .sum = p->idx_sum, .taken_ns = t};
	pthread_mutex_unlock(&st->mu);
}

/* Pack p's .pack is gone (removed by hand, or by `wharf cache verify`):
 * forgets its chunks, and says so once. */
static void pack_vanished(struct store *st, const struct spack *p)
{
	char data[PACK_NAME_MAX], idx[PACK_NAME_MAX], rel[PACK_NAME_MAX + 3];
	struct sentry *gone = NULL;

	pthread_mutex_lock(&st->mu);
	pack_forget_locked(st, p, &gone);
	pthread_mutex_unlock(&st->mu);
	if (gone) {
		pack_names(&p->key, data, idx);
		snprintf(rel, sizeof(rel), "%.2s/%s", data, data);
		store_vanished(st, rel);
	}
	free_chain(gone);
}

/* Marks a use of pack p: its chunks become the most recent.  Its file
 * is not touched (that would move its ctime, and break its seal). */
static void pack_used(struct store *st, struct spack *p)
{
	const uint64_t now = now_ns();
	uint64_t last = __atomic_load_n(&p->used_ns, __ATOMIC_RELAXED);

	/* Every chunk moves (eviction takes the pack whole), which costs n
	 * steps under mu: at most once a second per pack, not per read (a
	 * 4 GiB file of 64 KiB chunks made each read hold mu for 0.8 ms). */
	if (now - last < PACK_USED_EVERY_NS ||
	    !__atomic_compare_exchange_n(&p->used_ns, &last, now, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
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

/* get() for chunk idx of pack p. */
int pack_get(struct store *st, struct spack *p, uint32_t idx, void *buf,
	     size_t cap, size_t *len, struct store_map *m)
{
	const uint64_t off = (uint64_t)idx * p->chunk_size;
	const uint64_t n = pack_chunk_len(p, idx);
	const uint64_t seed = key_seed(&p->ent[idx].key);
	const char *why = NULL;
	struct store_file_id id;
	bool sealed = false;
	struct stat sb;
	int fd, rc;

	rc = pack_open_data(st->dirfd[p->key.b[0]], p, 0, &fd, &sb, &why);
	if (!rc) {
		id = file_id(&sb);
		sealed = pack_sealed(st, p, &id);
	}
	if (rc == -ENOENT) {
		STAT_ADD(st->misses, 1);
		pack_vanished(st, p);
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
		rc = chunkfile_map(fd, off, n, p->sum_kind, seed,
				   p->ent[idx].sum, m, &why, sealed);
	} else {
		rc = chunkfile_pread(fd, buf, (size_t)n, (off_t)off);
		if (rc == -ENODATA)
			why = "truncated";
		else if (!rc && !sealed &&
			 chunk_sum(p->sum_kind, buf, n, seed) !=
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
	if (sealed)
		STAT_ADD(st->sealed, 1);
	else
		STAT_ADD(st->checked_bytes, n);
	pack_used(st, p);
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

/* ---- making a pack ---- */

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

	if (packs_stopped(&st->packs_until_ns))
		return -ECANCELED;
	store_key_hex(key, hex);
	fd = openat(st->dirfd[fan], hex, CHUNK_OPEN);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	rc = chunkfile_read(fd, key, NULL, NULL, 0, &h, &why, NULL, NULL);
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
		 * a CPU, and so would a reader waiting on its lock.  A stop
		 * raises the thread again, after its deadline: looked at
		 * after the lowering, a stop that raised it first is seen. */
		rc = packs_stopped(&st->packs_until_ns)
			 ? -ECANCELED
			 : chunkfile_check_range(fd, 0, h.raw_len, h.sum_kind,
						 key_seed(key), h.sum, &why,
						 out,
						 (uint64_t)i * p->chunk_size);
		if (lowered)
			(void)pthread_setschedparam(pthread_self(), policy,
						    &was);
	}
	if (rc == -EBADMSG)
		store_chunk_bad(st, key, fd, why);
	else if (!rc)
		STAT_ADD(st->checked_bytes, h.raw_len);
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
 * chunk was corrupt: removed), -ENOSPC, -EIO, -ENOMEM, -ECANCELED
 * (store_packs_until: nothing renamed into place).
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
	} else if (st->reserved + members + pdisk > st->cap) {
		rc = -ENOSPC;
	} else if (store_fs_bound(st) &&
		   st->used + st->reserved + pdisk > st->cap) {
		/* The cache fills its filesystem: a pack would evict as
		 * much of it as it packs, most likely to be evicted itself
		 * before its next read.  Left for a mount with room. */
		rc = -ENOSPC;
	} else {
		for (uint32_t i = p->n; i-- > 0;) {
			struct sentry *e = index_find(st, &p->ent[i].key);

			lru_unlink(e);
			lru_push_front(st, e);
		}
		victims = store_evict_locked(st, st->cap, pdisk);
		st->reserved += pdisk;
	}
	pthread_mutex_unlock(&st->mu);
	if (rc)
		return rc;
	store_evict_files(st, victims, NULL, NULL);

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
		ib = pack_encode(p, &ilen);
		if (ib)
			p->idx_sum = rd64(ib + 32);
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
			(void)store_unlink_pack(st->dirfd[fan], &p->key);
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
		/* Made whole from checked chunks: checked (the rename moved
		 * its ctime), and sealed (settled at close). */
		if (!rc) {
			const int64_t t = seal_clock();

			if (!fstatat(st->dirfd[fan], data, &sb,
				     AT_SYMLINK_NOFOLLOW)) {
				*made = file_id(&sb);
				pack_seal(st, p, made, t);
			}
		}
		if (rc == -ENOENT && still_whole)
			(void)store_unlink_pack(st->dirfd[fan], &p->key);
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
	/* The disk is full below the cap: lowered to what it holds, so that
	 * the chunks that come next find room (a pack is not tried again:
	 * the next open or release asks for it). */
	if (rc == -ENOSPC || rc == -EDQUOT)
		(void)store_disk_full(st, rc, 0, 0);
	if (rc == -EDQUOT)
		rc = -ENOSPC;
	if (rc && rc != -ENOSPC && rc != -ENOENT && rc != -ENOTSUP &&
	    rc != -EBADMSG && rc != -ENOMEM && rc != -ECANCELED) {
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
	p = pack_of(st, &keys[0], &idx, NULL);
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
	struct store_file_id made = {0};
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
	int64_t t;
	int fd, rc;

	rc = pack_find_or_make(st, keys, n, chunk_size, size, &p, &made);
	if (rc)
		return rc;
	if (made.ino)
		*checked = made;
	t = seal_clock();
	rc = pack_open_data(st->dirfd[p->key.b[0]], p, 0, &fd, &sb, &why);
	if (!rc) {
		const struct store_file_id id = file_id(&sb);
		const bool unchecked = !same_file(&id, checked);

		if (unchecked && pack_sealed(st, p, &id)) {
			STAT_ADD(st->sealed, 1);
		} else if (unchecked) {
			rc = pack_check(fd, p, st->ncpu, &st->packs_until_ns,
					&bad, &why);
			if (!rc) {
				STAT_ADD(st->checked_bytes, p->size);
				pack_seal(st, p, &id, t);
			}
		}
		if (!rc)
			*checked = id;
	}
	/* A read error in the check too: see pack_get.  (-EIO from
	 * pack_open_data leaves no fd.) */
	if (rc == -EBADMSG || (rc == -EIO && fd >= 0)) {
		pack_drop_bad(st, p, fd, bad, why ? why : "read error");
		close(fd);
	} else if (rc && fd >= 0) {
		close(fd);
	} else if (rc == -ENOENT) {
		pack_vanished(st, p);
	}
	if (rc) {
		STAT_ADD(st->misses, 1);
	} else {
		STAT_ADD(st->hits, 1);
		pack_used(st, p);
		*fdout = fd;
	}
	pack_unref(p);
	return rc;
}

/* ---- the walk ---- */

/*
 * Visits the chunks of pack `key` (its KEY.idx is in dir d), one entry
 * each.  A pack is good or bad whole: a bad index or size, or with
 * STORE_WALK_VERIFY a bad chunk, makes every chunk's entry bad, and the
 * pack is removed when the walk verifies or its caller holds the lock
 * (WALK_LOCKED).  A .idx without its .pack is a pack being made: skipped.
 */
int pack_walk(const char *chunkdir, DIR *d, const char *fan,
	      const struct chunk_key *key, unsigned flags, store_walk_fn fn,
	      void *arg)
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
		r = pack_check(fd, p, 1, NULL, &bad, &why);
	if (r == -EBADMSG && (flags & (STORE_WALK_VERIFY | WALK_LOCKED)))
		removed =
		    (fd < 0 || store_unlink_if_same(dirfd(d), data, fd) == 0) &&
		    store_unlink_pack(dirfd(d), key) == 0;
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
