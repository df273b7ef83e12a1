/*
 * hints: read-order hints for a wharf mount (see hints.h and wharf(1),
 * "Hints").
 *
 * Detection, once: the first file of the index must lie on a FUSE
 * filesystem (statfs) and one of its parent directories on the same device
 * must hold `.wharf/hints`: that directory is the mount root.  Anything else
 * (another filesystem, an old mount without hints, no permission) gives
 * NULL, and hints_send(NULL, ...) costs one branch.
 *
 * Sending: the samples become "PATH OFFSET LENGTH\n" lines (PATH relative to
 * the mount root) in a buffer allocated once, handed over with whole lines
 * per WHARF_IOC_HINTS ioctl (include/wharf/hints.h) on the hints file
 * opened read-only: the mount is read-only, so the file takes no writes.
 * A call that fails for any reason is dropped: hints are advice, and a late
 * hint is worth nothing.  (The ioctl waits for the daemon's answer; the
 * daemon only parses and queues, so that is a short wait, never a fetch.)
 * A mount that went away (ENOTCONN, EIO...), or one that does not know the
 * ioctl (ENOTTY), turns hints off.
 */
#include "config.h"

#include "fileio.h"
#include "hints.h"
#include "index.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <wharf/hints.h>

#define FUSE_MAGIC 0x65735546
#define HINTS_BUF WHARF_HINTS_MAX
#define HINTS_FILE "/.wharf/hints"

struct hints {
	const struct index *idx;
	int fd;
	bool off; /* the mount stopped answering */
	char *mount; /* the mount root, no trailing slash */
	size_t mount_len;
	struct wharf_hints *msg;
	char *buf; /* msg->text, HINTS_BUF bytes */
	size_t used;
	int64_t last_f; /* the file rel names, -1: none (shards repeat) */
	char rel[PATH_MAX];
	bool rel_ok;
	const bool *want; /* the fields read, or NULL: whole samples */
};

/* The mount root above path (a file on a FUSE mount), or NULL. */
static char *find_mount_root(const char *file)
{
	struct stat fst, st;
	char dir[PATH_MAX], probe[PATH_MAX + sizeof(HINTS_FILE)];
	char *slash;

	if (!realpath(file, dir) || stat(dir, &fst))
		return NULL;
	for (;;) {
		slash = strrchr(dir, '/');
		if (!slash)
			return NULL;
		*slash = '\0';
		if (!dir[0])
			return NULL; /* "/" is never a wharf mount here */
		if (stat(dir, &st) || st.st_dev != fst.st_dev)
			return NULL;
		snprintf(probe, sizeof(probe), "%s%s", dir, HINTS_FILE);
		if (!access(probe, R_OK))
			return strdup(dir);
	}
}

struct hints *hints_new(const struct index *idx)
{
	char path[PATH_MAX];
	struct statfs sfs;
	struct hints *h;
	char *mount;

	/* An off switch for comparisons (bench/fs-cold). */
	if (!idx || !idx->nfiles || !idx->count || getenv("WHARF_NO_HINTS"))
		return NULL;
	if (index_full_path(idx, 0, path, sizeof(path)) < 0)
		return NULL;
	if (statfs(path, &sfs) || sfs.f_type != FUSE_MAGIC)
		return NULL;
	mount = find_mount_root(path);
	if (!mount)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		goto fail;
	h->msg = malloc(sizeof(*h->msg));
	if (!h->msg)
		goto fail;
	h->buf = h->msg->text;
	snprintf(path, sizeof(path), "%s%s", mount, HINTS_FILE);
	h->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (h->fd < 0)
		goto fail;
	h->idx = idx;
	h->mount = mount;
	h->mount_len = strlen(mount);
	h->last_f = -1;
	return h;
fail:
	if (h)
		free(h->msg);
	free(h);
	free(mount);
	return NULL;
}

uint64_t hints_cache_cap(const struct hints *h)
{
	char path[PATH_MAX], *text;
	const char *p;
	uint64_t cap = 0;
	size_t len;

	if (!h)
		return 0;
	snprintf(path, sizeof(path), "%s/.wharf/stats", h->mount);
	if (read_file_capped(path, 1 << 20, &text, &len, NULL))
		return 0;
	/* The one "cap_bytes" of the stats is disk_cache's (fs/stats.c). */
	p = strstr(text, "\"cap_bytes\":");
	if (p)
		cap = strtoull(p + strlen("\"cap_bytes\":"), NULL, 10);
	free(text);
	return cap;
}

static void flush(struct hints *h)
{
	if (!h->used)
		return;
	h->msg->len = (uint32_t)h->used;
	if (ioctl(h->fd, WHARF_IOC_HINTS, h->msg) && errno != EAGAIN &&
	    errno != EINTR)
		h->off = true;
	h->used = 0;
}

/* The file's path relative to the mount root into out; false when it does
 * not lie under the mount (then no hint is sent for it). */
static bool rel_path(struct hints *h, uint32_t f, char *out, size_t cap)
{
	char full[PATH_MAX], real[PATH_MAX];
	const char *p;
	int n = index_full_path(h->idx, f, full, sizeof(full));

	if (n < 0)
		return false;
	p = full;
	if (strncmp(p, h->mount, h->mount_len) || p[h->mount_len] != '/') {
		/* A relative root or a symlink: resolve it (slow path, but
		 * a path that resolves under the mount is rare). */
		if (!realpath(full, real))
			return false;
		p = real;
		if (strncmp(p, h->mount, h->mount_len) ||
		    p[h->mount_len] != '/')
			return false;
	}
	snprintf(out, cap, "%s", p + h->mount_len + 1);
	return true;
}

void hints_set_field(struct hints *h, const bool *want)
{
	if (h)
		h->want = want;
}

void hints_send(struct hints *h, const uint64_t *samples, size_t n)
{
	const char *rel = h ? h->rel : NULL;

	if (!h || h->off)
		return;
	for (size_t i = 0; i < n && !h->off; i++) {
		const uint64_t s = samples[i];
		uint64_t len;
		int k;

		if (s >= h->idx->count)
			continue;
		if (index_file(h->idx, s) != h->last_f) {
			h->last_f = index_file(h->idx, s);
			h->rel_ok = rel_path(h, (uint32_t)h->last_f, h->rel,
					     sizeof(h->rel));
		}
		if (!h->rel_ok)
			continue;
		uint64_t off = index_offset(h->idx, s);
		len = index_length(h->idx, s);
		const int64_t f =
		    h->want ? index_field_pick(h->idx, h->want, s) : -1;
		if (f >= 0) {
			off = h->idx->foff[f];
			len = h->idx->flen[f];
			if (!len)
				continue; /* 0 would mean "to the end" */
		}
		if (len == WHARF_LENGTH_UNKNOWN)
			len = 0; /* to the end of the file */
		for (;;) {
			k = snprintf(h->buf + h->used, HINTS_BUF - h->used,
				     "%s %llu %llu\n", rel,
				     (unsigned long long)off,
				     (unsigned long long)len);
			if (k > 0 && (size_t)k < HINTS_BUF - h->used)
				break;
			if (!h->used)
				break; /* a line longer than the buffer */
			flush(h);
		}
		if (k > 0 && (size_t)k < HINTS_BUF - h->used)
			h->used += (size_t)k;
	}
	flush(h);
}

int hints_fd(const struct hints *h)
{
	return h ? h->fd : -1;
}

void hints_free(struct hints *h)
{
	if (!h)
		return;
	close(h->fd);
	free(h->msg);
	free(h->mount);
	free(h);
}
