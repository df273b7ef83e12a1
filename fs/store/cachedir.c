/*
 * cachedir: the layout of a cache dir, and where one is.
 *
 * DIR/lock (flock'd by the mount: store_open.c), DIR/chunks/XX/KEY,
 * where KEY is the chunk key in hex and XX its first byte, so that no
 * directory holds more than 1/256 of the chunks (a chunk file:
 * chunkfile.c), and beside them a pack's DIR/chunks/XX/KEY.pack and
 * KEY.idx (pack.c); DIR/seals (store_seal.c), DIR/sums (store_sums.c),
 * and DIR/snapshots/HASH.list (snapshot.h).  Temp files of unfinished
 * writes start with TMP_PREFIX.  These names are store_i.h's CACHEDIR_*
 * and the like, which every file of the store uses.
 *
 * store_walk visits the layout for `wharf cache` and for the scan that
 * rebuilds the index at open; cachedir_remove_strays clears what a crash
 * left in it.  store_default_dir says where a cache dir is by default.
 */
#include "config.h"

#include "store_i.h"
#include "text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


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
	/* At least a byte: chunkfile_read checks only the header when given
	 * no buffer, and an empty chunk has a checksum too. */
	const size_t need = h->raw_len ? h->raw_len : 1;

	if (w->rawcap < need) {
		void *p = realloc(w->raw, need);

		if (!p)
			return -ENOMEM;
		w->raw = p;
		w->rawcap = need;
	}
	return chunkfile_read(fd, key, &w->tp, w->raw, w->rawcap, h, why, NULL,
			      NULL);
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

		if (name_is(de->d_name, PACK_INDEX_SUFFIX, &e.key)) {
			rc =
			    pack_walk(chunkdir, d, fan, &e.key, flags, fn, arg);
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
		r = chunkfile_read(fd, &e.key, &w->tp, NULL, 0, &h, &why, NULL,
				   NULL);
		if (r == 0 && (flags & STORE_WALK_VERIFY))
			r = walk_verify(w, fd, &e.key, &h, &why);
		e.error = r;
		if (r == -EBADMSG) {
			e.why = why;
			if ((flags & STORE_WALK_VERIFY) &&
			    store_unlink_if_same(dirfd(d), de->d_name, fd) == 0)
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
	char *chunkdir = strdupf("%s/" CACHEDIR_CHUNKS, dir);
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

		snprintf(fan, sizeof(fan), CACHEDIR_FAN, i);
		fd = openat(top, fan, DIR_OPEN);
		if (fd < 0)
			continue;
		rc = walk_dir(chunkdir, fd, fan, flags, &w, fn, arg);
		if (rc < 0 && err)
			err_set(err, "%s/%s: %s", chunkdir, fan, strerror(-rc));
	}
	close(top);
out:
	chunkfile_codec_free(&w.t);
	free(w.raw);
	free(chunkdir);
	return rc;
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
void cachedir_remove_strays(const int fan_fd[FANOUT])
{
	struct chunk_key key;

	for (unsigned i = 0; i < FANOUT; i++) {
		int fd = dup(fan_fd[i]);
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
			    (name_is(de->d_name, PACK_INDEX_SUFFIX, &key) &&
			     !sibling_exists(fan_fd[i], de->d_name,
					     PACK_DATA_SUFFIX)) ||
			    (name_is(de->d_name, PACK_DATA_SUFFIX, &key) &&
			     !sibling_exists(fan_fd[i], de->d_name,
					     PACK_INDEX_SUFFIX)))
				unlinkat(fan_fd[i], de->d_name, 0);
		closedir(d);
	}
}

/* ---- where a cache dir is ---- */

bool store_is_cache(const char *dir)
{
	char *lock = strdupf("%s/" CACHEDIR_LOCK, dir);
	char *chunks = strdupf("%s/" CACHEDIR_CHUNKS, dir);
	bool is =
	    lock && chunks && (!access(lock, F_OK) || !access(chunks, F_OK));

	free(lock);
	free(chunks);
	return is;
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
	return strdupf("%s/" CACHEDIR_SNAPSHOTS, dir);
}

char *store_snapshot_path(const char *dir, const char *source_id)
{
	return strdupf("%s/" CACHEDIR_SNAPSHOTS "/%016llx.list", dir,
		       (unsigned long long)store_hash64(
			   source_id, strlen(source_id), 0x5eed));
}
