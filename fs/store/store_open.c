/*
 * store_open: opening a cache dir and closing it: making it and checking
 * it is the user's alone, taking its lock, and rebuilding the index by a
 * scan of the files (cachedir.c's walk); who holds the lock.  With
 * store_rw.c the top of the store's files (store_i.h gives their order).
 *
 * The lock: DIR/lock, flock'd by the mount, holds "pid\nmountpoint\n".
 */
#include "config.h"

#include "log.h"
#include "mountinfo.h"
#include "store_i.h"
#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>


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

/* Whether process pid, which recorded mountpoint mp, is a wharf mount
 * there no longer (as its own mount table shows): after an unmount it may
 * still be writing its last chunks. */
static bool holder_unmounted(pid_t pid, const char *mp)
{
	char dev[32], type[64];
	int found;

	if (pid <= 0 || !mp || kill(pid, 0))
		return false;
	found = mountinfo_find_pid(pid, mp, dev, type);
	return found == 0 || (found == 1 && strcmp(type, WHARF_FSTYPE));
}

/* Waits up to wait_ms for the lock an unmounted holder has (polling: flock
 * has no timeout).  @return 0 once it is ours, -1 with errno. */
static int lock_after_holder(int fd, const char *dir, pid_t pid,
			     const char *mp, unsigned wait_ms)
{
	log_warn("the cache directory %s is held by wharf process %d, no "
		 "longer mounted on %s: waiting up to %u s for it to finish",
		 dir, (int)pid, mp, (wait_ms + 999) / 1000);
	for (unsigned waited = 0; waited < wait_ms; waited += 50) {
		if (!flock(fd, LOCK_EX | LOCK_NB))
			return 0;
		if (errno != EWOULDBLOCK)
			return -1;
		usleep(50000);
	}
	errno = EWOULDBLOCK;
	return -1;
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
		if (st->cfg.holder_exit_wait_ms && holder_unmounted(pid, mp) &&
		    !lock_after_holder(st->lockfd, st->dir, pid, mp,
				       st->cfg.holder_exit_wait_ms)) {
			free(mp);
			goto locked;
		}
		err_set(
		    err,
		    "the cache directory %s is in use by wharf process %d%s%s "
		    "(one mount per cache directory)",
		    st->dir, (int)pid, mp ? ", mounted on " : "", mp ? mp : "");
		free(mp);
		goto fail;
	}
locked:
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
