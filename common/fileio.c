/* fileio: paths and files: a path made absolute, a whole file read with a
 * cap, a file opened without following links, a directory others may
 * write (see fileio.h). */
#include "config.h"

#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text.h"

char *path_absolute(const char *path)
{
	char *cwd, *abs;

	if (path[0] == '/')
		return strdup(path);
	cwd = getcwd(NULL, 0);
	if (!cwd)
		return NULL;
	abs = malloc(strlen(cwd) + 1 + strlen(path) + 1);
	if (abs)
		sprintf(abs, "%s%s%s", cwd, cwd[1] ? "/" : "", path);
	free(cwd);
	return abs;
}

int read_file_capped(const char *path, size_t cap, char **text, size_t *len,
		     char **err)
{
	/* Read to the end, never trusting st_size: a pipe (`<(cmd)`), a
	 * FIFO or a /proc file says 0 and still has bytes. */
	FILE *f = fopen(path, "re");
	size_t n = 0, size = 0;
	char *buf = NULL;
	int rc = 0;

	*text = NULL;
	*len = 0;
	if (!f) {
		rc = -errno;
		err_set(err, "%s: %s", path, strerror(-rc));
		return rc;
	}
	for (;;) {
		if (n == size) {
			const size_t want = size ? size * 2 : 64 * 1024;
			char *p;

			if (size > cap) {
				err_set(err, "%s: larger than %zu bytes", path,
					cap);
				rc = -EFBIG;
				goto out;
			}
			p = realloc(buf, (want > cap ? cap : want) + 2);
			if (!p) {
				rc = -ENOMEM;
				goto out;
			}
			buf = p;
			size = (want > cap ? cap : want) + 1;
		}
		n += fread(buf + n, 1, size - n, f);
		if (ferror(f)) {
			err_set(err, "%s: read error", path);
			rc = -EIO;
			goto out;
		}
		if (feof(f))
			break;
	}
	if (n > cap) {
		err_set(err, "%s: larger than %zu bytes", path, cap);
		rc = -EFBIG;
		goto out;
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	fclose(f);
	return rc;
}

int open_nofollow(const char *path, int flags)
{
	const bool want_dir = flags & O_DIRECTORY;
	char *copy = strdup(path), *name, *save = NULL, *next;
	int dfd, fd = -1, rc = 0;
	struct stat st;

	if (!copy)
		return -ENOMEM;
	dfd = open(path[0] == '/' ? "/" : ".",
		   O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		goto out;
	}
	name = strtok_r(copy, "/", &save);
	/* "/" itself is a directory and no link. */
	if (!name) {
		fd = dfd;
		dfd = -1;
		if (!want_dir)
			rc = -EINVAL;
		goto out;
	}
	for (; name; name = next) {
		const bool last = !(next = strtok_r(NULL, "/", &save));
		const int f = last ? flags | O_NOFOLLOW | O_NONBLOCK |
					 O_NOCTTY | O_CLOEXEC
				   : O_PATH | O_DIRECTORY | O_NOFOLLOW |
					 O_CLOEXEC;

		fd = openat(dfd, name, f);
		if (fd < 0) {
			rc = -errno;
			/* O_NOFOLLOW on a link: ELOOP, or ENOTDIR with
			 * O_DIRECTORY.  Say which it was. */
			if ((rc == -ENOTDIR || rc == -ELOOP) &&
			    !fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
				rc = S_ISLNK(st.st_mode) ? -ELOOP : rc;
			goto out;
		}
		close(dfd);
		dfd = -1;
		if (!last) {
			dfd = fd;
			fd = -1;
		}
	}
	if (fstat(fd, &st))
		rc = -errno;
	else if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		rc = -EINVAL;
	else if (!want_dir && (flags & O_NONBLOCK) == 0 &&
		 fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK))
		rc = -errno;
out:
	if (rc && fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(copy);
	return rc ? rc : fd;
}

char *dir_open_to_others(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir =
	    slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
		  : strdup(".");
	char *why = NULL;
	struct stat st;

	if (!dir || stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		free(dir);
		return NULL;
	}
	/* The sticky bit: others may add names, but not replace ours. */
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		why =
		    strdupf("%s (mode %04o) is writable by %s without the "
			    "sticky bit",
			    dir, (unsigned)(st.st_mode & 07777),
			    st.st_mode & S_IWOTH ? "every user" : "its group");
	else if (st.st_uid != geteuid() && st.st_uid != 0)
		why =
		    strdupf("%s belongs to user %u", dir, (unsigned)st.st_uid);
	free(dir);
	return why;
}
