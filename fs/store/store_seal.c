/*
 * store_seal: seals, what lets a mount trust a cache file that a check
 * found good before, as git's index trusts a file whose stat is the one
 * it recorded.
 *
 * A seal names a chunk file or a pack as fstat saw it when its bytes
 * were checked (or written by the store itself): device, inode, size,
 * mtime and ctime in nanoseconds, with the checksum that was checked (a
 * chunk's, or its pack index's) and the time it was taken.  Any write to
 * a file moves its ctime, and no one can set a ctime back (touch -d sets
 * the mtime, and moves the ctime to now), so a file whose stat still
 * matches its seal holds the bytes that were checked: it is read without
 * a hash.  Any other file is checked, and sealed again when good.
 *
 * Racy seals: a file's ctime comes from a clock that may tick coarsely
 * (a jiffy; a second on some filesystems), so a write in the same tick
 * as the change the seal saw could leave the ctime as it was.  A seal
 * taken within SEAL_SETTLE of its file's ctime (SEAL_SETTLE_COARSE where
 * the ctime has no nanoseconds) vouches for nothing yet.  Seals of files
 * the store just wrote or renamed are such; at close the store
 * looks at each again (fstat), and one whose file is unchanged once the
 * tick has passed is kept: what it misses is a write by another program
 * in the tick that follows the store's own change, on a kernel whose
 * ctimes are coarse (before 6.13's fine-grained ones).
 *
 * Last uses: the file carries each chunk's last use as well, sealed or
 * not, so that the next open orders the LRU as this mount left it.  The
 * store keeps a use in its index and never on the file: a touch of its
 * atime would move its ctime, and the file's seal would vouch for
 * nothing until the next close (a reload in the same mount would hash
 * again).  A chunk the seals do not name (a mount that ended without
 * closing its store, an older version's cache) is ranked by its file's
 * atime or mtime, as the scan found them.
 *
 * Crashes: a cache is written without fsync (store_rw.c), and a file whose
 * data a power loss took keeps its stat: a seal must never name it.  So
 * the filesystem is synced (syncfs) before the seals are written, and
 * where that fails no seal is kept.  DIR/seals is then written to a temp
 * file renamed into place: one lost or torn in a crash fails its own
 * checksum or is gone, and every file is checked.  Little-endian:
 *   0 magic "WHSL"   4 version (1)   5-7 reserved   8 entries (n)
 *   16 n entries of 80 bytes: the key (a pack's: its chunk 0's), kind
 *      (0 a chunk file, 1 a pack), 7 reserved, then dev, ino, size,
 *      mtime_ns, ctime_ns, the checksum, taken_ns
 *   16 + 80 n: XXH3 of the bytes before it
 * A file that does not verify is ignored whole: everything is checked.
 */
#include "config.h"

#include "log.h"
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEALS_HDR 16
#define SEAL_ENTRY 88
#define SEAL_ENTRY_V1 80
#define SEALS_VERSION 2
#define SEALS_MAX (1u << 26)
#define SEAL_CHUNK 0
#define SEAL_PACK 1

static const uint8_t seals_magic[4] = {'W', 'H', 'S', 'L'};

int64_t seal_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts_ns(&ts);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

/* ---- load ---- */

static void seal_decode(const uint8_t *b, size_t esize, struct chunk_key *key,
			uint8_t *kind, struct seal *s, int64_t *used_ns)
{
	memcpy(key->b, b, 16);
	*kind = b[16];
	s->file.dev = rd64(b + 24);
	s->file.ino = rd64(b + 32);
	s->file.size = rd64(b + 40);
	s->file.mtime_ns = (int64_t)rd64(b + 48);
	s->file.ctime_ns = (int64_t)rd64(b + 56);
	s->sum = rd64(b + 64);
	s->taken_ns = (int64_t)rd64(b + 72);
	*used_ns = esize > SEAL_ENTRY_V1 ? (int64_t)rd64(b + 80) : 0;
}

/* Under mu: e was last used at used_ns, if that is later than what the
 * scan found. */
static void used_put(struct sentry *e, int64_t used_ns)
{
	if (e && used_ns > e->used_ns)
		e->used_ns = used_ns;
}

/* Under mu: puts seal s and last use used_ns on the chunk file or pack
 * `key` names, if the index has it so. */
static void seal_put(struct store *st, const struct chunk_key *key,
		     uint8_t kind, const struct seal *s, int64_t used_ns)
{
	struct sentry *e = index_find(st, key);
	struct spack *p;

	if (!e)
		return;
	if (kind == SEAL_CHUNK && !e->pack) {
		e->seal = *s;
		used_put(e, used_ns);
	} else if (kind == SEAL_PACK && e->pack && e->idx == 0) {
		p = e->pack;
		p->seal = *s;
		for (uint32_t i = 0; i < p->n; i++) {
			struct sentry *c = index_find(st, &p->ent[i].key);

			if (c && c->pack == p)
				used_put(c, used_ns);
		}
	}
}

void seal_load(struct store *st, int dirfd)
{
	const int fd = openat(dirfd, CACHEDIR_SEALS, CHUNK_OPEN);
	uint8_t *b = NULL;
	struct stat sb;
	size_t len, esize;
	uint64_t n;

	if (fd < 0)
		return;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) ||
	    sb.st_size < SEALS_HDR + 8 ||
	    (uint64_t)sb.st_size >
		SEALS_HDR + 8 + (uint64_t)SEALS_MAX * SEAL_ENTRY)
		goto out;
	len = (size_t)sb.st_size;
	b = malloc(len);
	if (!b || chunkfile_pread(fd, b, len, 0))
		goto out;
	n = rd64(b + 8);
	esize = b[4] == SEALS_VERSION ? SEAL_ENTRY : SEAL_ENTRY_V1;
	if (memcmp(b, seals_magic, 4) || b[4] < 1 || b[4] > SEALS_VERSION ||
	    n > SEALS_MAX || len != SEALS_HDR + n * esize + 8 ||
	    XXH3_ONESHOT(b, len - 8, 0) != rd64(b + len - 8)) {
		log_warn("%s/%s: not a valid seal file: every cached chunk "
			 "is checked at its first read",
			 st->dir, CACHEDIR_SEALS);
		goto out;
	}
	pthread_mutex_lock(&st->mu);
	for (uint64_t i = 0; i < n; i++) {
		struct chunk_key key;
		struct seal s;
		int64_t used;
		uint8_t kind;

		seal_decode(b + SEALS_HDR + i * esize, esize, &key, &kind, &s,
			    &used);
		seal_put(st, &key, kind, &s, used);
	}
	/* Not fatal: the scan's order (the files' times) stays. */
	(void)store_index_sort(st);
	pthread_mutex_unlock(&st->mu);
out:
	free(b);
	close(fd);
}

/* ---- save ---- */

struct seal_out {
	uint8_t *b;
	size_t n, cap; /* entries */
	size_t sealed; /* of them with a seal */
	int64_t now;
};

/* Settles seal s of file `name` in dirfd (see "Racy seals").  @return
 * whether it is one to keep. */
static bool settle(struct seal *s, int dirfd, const char *name, int64_t now)
{
	struct stat sb;
	struct store_file_id id;

	if (!s->file.ino)
		return false;
	if (seal_settled(s->file.ctime_ns, s->taken_ns))
		return true;
	if (!seal_settled(s->file.ctime_ns, now) ||
	    fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW))
		return false;
	id = file_id(&sb);
	if (!same_file(&id, &s->file))
		return false;
	s->taken_ns = now;
	return true;
}

/* Adds the entry of `key`: seal s where keep (else none), and its last
 * use. */
static int seal_add(struct seal_out *o, const struct chunk_key *key,
		    uint8_t kind, const struct seal *s, bool keep,
		    int64_t used_ns)
{
	uint8_t *e;

	if (o->n == o->cap) {
		const size_t ncap = o->cap * 2;
		uint8_t *b = realloc(o->b, SEALS_HDR + ncap * SEAL_ENTRY + 8);

		if (!b)
			return -ENOMEM;
		o->b = b;
		o->cap = ncap;
	}
	e = o->b + SEALS_HDR + o->n++ * SEAL_ENTRY;
	memset(e, 0, SEAL_ENTRY);
	memcpy(e, key->b, 16);
	e[16] = kind;
	put64(e + 80, (uint64_t)used_ns);
	if (!keep)
		return 0;
	o->sealed++;
	put64(e + 24, s->file.dev);
	put64(e + 32, s->file.ino);
	put64(e + 40, s->file.size);
	put64(e + 48, (uint64_t)s->file.mtime_ns);
	put64(e + 56, (uint64_t)s->file.ctime_ns);
	put64(e + 64, s->sum);
	put64(e + 72, (uint64_t)s->taken_ns);
	return 0;
}

/* The seals of the index into o, settled: no other thread runs. */
static int seal_collect(struct store *st, struct seal_out *o)
{
	int rc = 0;

	for (struct sentry *e = st->lru.next; !rc && e != &st->lru;
	     e = e->next) {
		const int fd = st->dirfd[e->key.b[0]];
		char name[PACK_NAME_MAX], idx[PACK_NAME_MAX];

		if (!e->pack) {
			store_key_hex(&e->key, name);
			rc = seal_add(o, &e->key, SEAL_CHUNK, &e->seal,
				      settle(&e->seal, fd, name, o->now),
				      e->used_ns);
		} else if (e->idx == 0) {
			pack_names(&e->key, name, idx);
			rc = seal_add(o, &e->key, SEAL_PACK, &e->pack->seal,
				      settle(&e->pack->seal, fd, name, o->now),
				      e->used_ns);
		}
	}
	return rc;
}

void seal_save(struct store *st)
{
	static unsigned long tmp_seq;
	struct seal_out o = {.now = seal_clock()};
	char tmp[80];
	size_t len;
	int top = -1, fd = -1, rc;

	o.cap = 1024;
	o.b = malloc(SEALS_HDR + o.cap * SEAL_ENTRY + 8);
	rc = o.b ? seal_collect(st, &o) : -ENOMEM;
	if (rc)
		goto out;
	memcpy(o.b, seals_magic, 4);
	memset(o.b + 4, 0, 4);
	o.b[4] = SEALS_VERSION;
	put64(o.b + 8, o.n);
	len = SEALS_HDR + o.n * SEAL_ENTRY;
	put64(o.b + len, XXH3_ONESHOT(o.b, len, 0));
	len += 8;
	snprintf(tmp, sizeof(tmp), TMP_PREFIX CACHEDIR_SEALS ".%d.%lu",
		 (int)getpid(),
		 __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
	top = open(st->dir, DIR_OPEN);
	if (top < 0) {
		rc = -errno;
		goto out;
	}
	/* The bytes the seals vouch for on disk first (see "Crashes"); a
	 * writeback error: the old seals go too. */
	if (o.sealed && syncfs(top)) {
		rc = -errno;
		(void)unlinkat(top, CACHEDIR_SEALS, 0);
		goto out;
	}
	fd = openat(top, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	errno = ENOSPC; /* a short write sets none */
	if (write(fd, o.b, len) != (ssize_t)len)
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && renameat(top, tmp, top, CACHEDIR_SEALS))
		rc = -errno;
	if (rc)
		(void)unlinkat(top, tmp, 0);
out:
	/* Not fatal: the next mount checks what it would have trusted. */
	if (rc)
		log_warn("%s/%s: cannot save the seals: %s", st->dir,
			 CACHEDIR_SEALS, strerror(-rc));
	if (top >= 0)
		close(top);
	free(o.b);
}
