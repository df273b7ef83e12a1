/*
 * store: the store as store.h gives it: opening, locking and closing a
 * cache dir and rebuilding its index by a scan at open; reading and
 * writing chunks, pruning, and the stats.  It is the top of the store's
 * files (store_i.h gives their order): store_index.c keeps the index, the
 * LRU and eviction, chunkfile.c a chunk file's format, pack.c packs,
 * cachedir.c the layout of the dir.
 *
 * The lock: DIR/lock, flock'd by the mount, holds "pid\nmountpoint\n".
 *
 * Writes go to a temp file in the chunk's own directory and are renamed
 * into place, so a reader never sees a partial chunk.  No fsync: this is
 * a cache; a file that lost its data in a crash fails its checksum at the
 * next read and is fetched again, while an fsync per chunk would cost a
 * disk flush for every chunk fetched.  The locks are store_i.h's.
 */
#include "config.h"

#include "store_i.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util.h"

/* ---- reads and writes ---- */

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

bool store_raw_unchanged(struct store *st, const struct chunk_key *key,
			 const struct store_file_id *id)
{
	struct store_file_id now;
	struct stat sb;
	char hex[33];

	store_key_hex(key, hex);
	if (fstatat(st->dirfd[key->b[0]], hex, &sb, AT_SYMLINK_NOFOLLOW))
		return false;
	now = file_id(&sb);
	return same_file(&now, id);
}

/* store_get; store_map when m is not NULL (buf is then unused);
 * store_open_raw when fdout is not NULL (buf and m unused; checked is
 * its). */
static int get(struct store *st, const struct chunk_key *key, void *buf,
	       size_t cap, size_t *len, struct store_map *m, int *fdout,
	       struct store_file_id *checked)
{
	const unsigned fan = key->b[0];
	const bool seals = !st->cfg.check_each_mount;
	const int64_t t0 = seals ? seal_clock() : 0;
	struct seal seal = {0};
	struct tctx *t = NULL;
	const char *why = NULL;
	char hex[33], rel[36];
	struct sentry *e;
	struct spack *p;
	uint32_t idx = 0;
	bool hashed;
	struct hdr h;
	int fd = -1, open_errno = 0, rc;

	p = pack_of(st, key, &idx, &seal);
	if (!p) {
		store_key_hex(key, hex);
		fd = openat(st->dirfd[fan], hex, CHUNK_OPEN);
		open_errno = errno;
		/* Put in a pack between the look and the open, which then
		 * found its chunk file removed. */
		if (fd < 0 && open_errno == ENOENT)
			p = pack_of(st, key, &idx, &seal);
	}
	if (p) {
		/* store_open_raw hands over files of one chunk: never a
		 * pack's. */
		rc = fdout ? -ENOTSUP : pack_get(st, p, idx, buf, cap, len, m);
		pack_unref(p);
		return rc;
	}
	if (fd < 0) {
		rc = open_errno;
		STAT_ADD(st->misses, 1);
		if (rc != ENOENT) {
			store_chunk_relpath(key, rel);
			log_warn("%s/%s: cannot open cached chunk: %s",
				 st->chunkdir, rel, strerror(rc));
			return -EIO;
		}
		/* Known but gone (`wharf cache verify` removed it)? */
		pthread_mutex_lock(&st->mu);
		e = index_find(st, key);
		pthread_mutex_unlock(&st->mu);
		if (e) {
			bool forgot;

			pthread_mutex_lock(&st->stripe[fan]);
			forgot = store_index_forget(st, key, hex);
			pthread_mutex_unlock(&st->stripe[fan]);
			store_chunk_relpath(key, rel);
			if (forgot)
				store_vanished(st, rel);
		}
		return -ENOENT;
	}
	rc = chunkfile_read(fd, key, &t, buf, cap, &h, &why, m,
			    seals ? &seal : NULL);
	hashed = !rc && !fdout && !h.trusted;
	if (!rc && fdout) {
		hashed = !same_file(&h.file, checked) && !h.trusted;
		rc = !hashed && h.codec == CODEC_RAW && !h.payload
			 ? (h.raw_len > cap ? -EOVERFLOW : 0)
			 : chunkfile_check_raw(fd, &h, cap, &why);
		if (!rc)
			*checked = h.file;
	}
	chunkfile_codec_give(t);
	if (rc == -EBADMSG) {
		STAT_ADD(st->misses, 1);
		store_chunk_bad(st, key, fd, why);
		goto out;
	}
	/* store_map: compressed, or not mappable; store_open_raw: compressed,
	 * or format 1 (the header comes first). */
	if (rc == -ENOTSUP)
		goto out;
	if (rc) {
		STAT_ADD(st->misses, 1);
		if (rc == -EIO) {
			store_chunk_relpath(key, rel);
			log_warn("%s/%s: read error on a cached chunk",
				 st->chunkdir, rel);
		}
		goto out;
	}
	*len = h.raw_len;
	STAT_ADD(st->hits, 1);
	if (hashed)
		STAT_ADD(st->checked_bytes, h.raw_len);
	else if (h.trusted)
		STAT_ADD(st->sealed, 1);
	/* The use is recorded in the index, not on the file: a touch would
	 * move its ctime, and with it break its seal for the rest of the
	 * mount. */
	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e) {
		lru_unlink(e);
		lru_push_front(st, e);
		/* A hash just made seals the file as fstat saw it after t0. */
		if (seals && !e->pack && hashed)
			e->seal = (struct seal){
			    .file = h.file, .sum = h.sum, .taken_ns = t0};
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
	t = chunkfile_codec_take();
	if (!e || !t) {
		sentry_free(e);
		chunkfile_codec_give(t);
		return -ENOMEM;
	}
	/* payload may point into t's buffer: t is given back once written. */
	chunkfile_payload(t, st->cfg.zstd_level, st->cfg.min_saving_pct, data,
			  len, &payload, &plen, &h.codec);
	h.version = st->hdr_xattr ? FORMAT_XATTR : FORMAT_INLINE;
	h.payload = st->hdr_xattr ? 0 : HDR_SIZE;
	h.raw_len = len;
	h.stored_len = plen;
	h.sum_kind = SUM_XXH3;
	h.sum = chunk_sum(h.sum_kind, data, len, key_seed(key));
	h.key = *key;
	chunkfile_hdr_encode(hdr, &h);
	disk = disk_bytes((uint64_t)h.payload + plen);
	e->key = *key;
	e->disk = disk;
	e->raw = len;
	e->zstd = h.codec == CODEC_ZSTD;

	store_cap_recheck(st);
	/* Make room first, so the files on disk never exceed the cap. */
	pthread_mutex_lock(&st->mu);
	/* Larger than the room that writes in flight leave under the cap:
	 * evicting everything would not make it fit, so evict nothing. */
	if (st->reserved + disk > st->cap) {
		pthread_mutex_unlock(&st->mu);
		chunkfile_codec_give(t);
		sentry_free(e);
		STAT_ADD(st->dropped, 1);
		return -ENOSPC;
	}
	/* Then eviction can always make room (an empty index uses none). */
	victims = store_evict_locked(st, st->cap, disk);
	st->reserved += disk;
	pthread_mutex_unlock(&st->mu);
	store_evict_files(st, victims, NULL, NULL);

	store_key_hex(key, hex);
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s.%d.%lu", hex, (int)getpid(),
		 __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
	rc = chunkfile_write(st->dirfd[fan], tmp, hdr, payload, plen);
	/* The disk is full below the cap: the cap comes down to what it
	 * holds, eviction makes the room, and the write is tried once
	 * more (a failed write leaves no file). */
	if ((rc == -ENOSPC || rc == -EDQUOT) &&
	    store_disk_full(st, rc, disk, 0))
		rc = chunkfile_write(st->dirfd[fan], tmp, hdr, payload, plen);
	chunkfile_codec_give(t);
	if (rc == -EDQUOT)
		rc = -ENOSPC;
	if (!rc) {
		pthread_mutex_lock(&st->stripe[fan]);
		if (renameat(st->dirfd[fan], tmp, st->dirfd[fan], hex)) {
			rc = -errno;
			unlinkat(st->dirfd[fan], tmp, 0);
		} else if (!st->cfg.check_each_mount) {
			/* Written by us: sealed as it is (settled at close,
			 * see store_seal.c). */
			const int64_t now = seal_clock();
			struct stat sb;

			if (!fstatat(st->dirfd[fan], hex, &sb,
				     AT_SYMLINK_NOFOLLOW))
				e->seal = (struct seal){.file = file_id(&sb),
							.sum = h.sum,
							.taken_ns = now};
		}
		pthread_mutex_lock(&st->mu);
		st->reserved -= disk;
		if (!rc) {
			old = index_find(st, key);
			if (old)
				store_index_remove(st, old);
			store_index_insert(st, e, true);
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
	if (rc)
		STAT_ADD(st->dropped, 1);
	if (rc && rc != -ENOSPC) {
		store_chunk_relpath(key, rel);
		log_warn("%s/%s: cannot write chunk: %s", st->chunkdir, rel,
			 strerror(-rc));
		rc = -EIO;
	}
	return rc;
}

void store_remove(struct store *st, const struct chunk_key *key)
{
	struct sentry *victims = NULL, *e;

	pthread_mutex_lock(&st->mu);
	e = index_find(st, key);
	if (e)
		victims = store_evict_one_locked(st, e);
	pthread_mutex_unlock(&st->mu);
	store_evict_files(st, victims, NULL, NULL);
}

int store_room(struct store *st, int err, uint64_t bytes)
{
	if (!st || (err != -ENOSPC && err != -EDQUOT))
		return err;
	(void)store_disk_full(st, err, 0, bytes);
	return 0;
}

uint64_t store_cap(struct store *st)
{
	const uint64_t cap = __atomic_load_n(&st->cap, __ATOMIC_RELAXED);

	return cap == UINT64_MAX ? 0 : cap;
}

void store_get_stats(struct store *st, struct store_stats *out)
{
	pthread_mutex_lock(&st->mu);
	out->chunks = st->n;
	out->packs = st->packs;
	out->bytes_on_disk = st->used;
	out->bytes_raw = st->raw;
	pthread_mutex_unlock(&st->mu);
	out->cap_bytes = store_cap(st);
	out->max_bytes = st->cfg.max_bytes;
	out->hits = STAT_GET(st->hits);
	out->misses = STAT_GET(st->misses);
	out->evictions = STAT_GET(st->evictions);
	out->corrupt = STAT_GET(st->corrupt);
	out->writes_dropped = STAT_GET(st->dropped);
	out->checked_bytes = STAT_GET(st->checked_bytes);
	out->sealed = STAT_GET(st->sealed);
	out->vanished = STAT_GET(st->vanished);
	out->cap_lowered = STAT_GET(st->lowered);
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
	victims = store_evict_locked(st, max_bytes, 0);
	pthread_mutex_unlock(&st->mu);
	store_evict_files(st, victims, chunks, bytes);
	/* Emptied: no object is left to check against its record. */
	if (!max_bytes)
		store_sums_clear(st);
	return 0;
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

int store_lock_holder(const char *dir, pid_t *pid, char **mountpoint)
{
	char *path = strdupf("%s/" CACHEDIR_LOCK, dir);
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

struct scan_item {
	int64_t time;
	struct sentry *e;
};

struct scan {
	struct scan_item *v;
	size_t n, cap;
	size_t bad; /* files removed: the first SCAN_BAD_LOGGED are logged */
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
		 * it already).  A pack counts once, at its first chunk. */
		if (e->pack && e->pack_index)
			return 0;
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
	se->used_ns = e->atime_ns;
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

/* Rebuilds the index and the LRU order from the files (by last use). */
static int scan(struct store *st, char **err)
{
	struct scan s = {0};
	int rc;

	cachedir_remove_strays(st->dirfd);
	rc = store_walk(st->dir, WALK_LOCKED, scan_one, &s, err);
	if (s.bad > SCAN_BAD_LOGGED)
		log_warn("%s: removed %zu bad cached chunks in all, %zu not "
			 "named above; they will be fetched again (a copy of "
			 "a cache must keep extended attributes: cp -a, "
			 "rsync -X)",
			 st->dir, s.bad, s.bad - SCAN_BAD_LOGGED);
	/* In the mount's stats too: a pack the scan removed is no more a
	 * silent loss than one a read found bad. */
	STAT_ADD(st->corrupt, s.bad);
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
				store_index_remove(st, old);
			store_index_insert(st, e, false);
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
	st->chunkdir = strdupf("%s/" CACHEDIR_CHUNKS, cfg->dir);
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
	path = strdupf("%s/" CACHEDIR_LOCK, st->dir);
	st->lockfd =
	    openat(top, CACHEDIR_LOCK, O_RDWR | O_CREAT | CHUNK_OPEN, 0600);
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
	rc = open_private_subdir(top, CACHEDIR_CHUNKS, st->dir, &chunks, err);
	for (unsigned i = 0; !rc && i < FANOUT; i++) {
		char fan[3];

		snprintf(fan, sizeof(fan), CACHEDIR_FAN, i);
		rc = open_private_subdir(chunks, fan, st->chunkdir,
					 &st->dirfd[i], err);
	}
	if (rc)
		goto fail;
	rc = scan(st, err);
	if (rc)
		goto fail;
	seal_load(st, top);
	st->opened = true;
	/* A smaller cap than last time, or a filesystem that holds less
	 * than it: honoured now. */
	store_cap_fit(st);
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
	if (st->opened)
		seal_save(st);
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
			log_warn("%s/" CACHEDIR_LOCK ": %s", st->dir,
				 strerror(errno));
	}
	if (st->lockfd >= 0)
		close(st->lockfd);
	pthread_mutex_destroy(&st->mu);
	free(st->tab);
	free(st->chunkdir);
	free(st->dir);
	free(st);
}
