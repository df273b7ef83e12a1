#ifndef WHARF_FILEIO_H
#define WHARF_FILEIO_H
/* fileio: paths and files: a path made absolute, a whole file read with a
 * cap, a file opened without following links, a directory others may
 * write. */
#include <stddef.h>

#include "compiler.h"

/* path made absolute against the current directory (not resolved: links
 * and ".." stay), malloc'd.  @return NULL with errno set on failure. */
char *path_absolute(const char *path);

/* Reads a whole file of at most cap bytes into a malloc'd, NUL-terminated
 * buffer (the caller frees it).  @return 0, or -errno with *err saying
 * "PATH: what" (-EFBIG when it is larger than cap). */
int read_file_capped(const char *path, size_t cap, char **text, size_t *len,
		     char **err) WHARF_CHECK;

/*
 * Opens path without following a symbolic link in any of its components
 * and without blocking: each directory is opened O_NOFOLLOW, the last one
 * with flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, and it must
 * be a regular file (a directory when flags has O_DIRECTORY).  For a path
 * that another user may have laid out: a link to a file of theirs, a FIFO
 * that never answers.  @return the fd (blocking again, for a regular
 * file); -ELOOP when a component is a link; -EINVAL when the last is not a
 * regular file (-ENOTDIR: not a directory, for O_DIRECTORY); else -errno.
 */
int open_nofollow(const char *path, int flags) WHARF_CHECK;

/*
 * Whether another user may add, replace or remove names in the directory
 * of path (a file's path): one writable by its group or by every user
 * without the sticky bit, or owned by another user than this process's
 * (root aside).  There a file written as root can be swapped or planted.
 * @return NULL (not so, or unknown), or a malloc'd phrase naming the
 * directory and why ("DIR (mode 0777) is writable by every user without
 * the sticky bit"), for a warning.
 */
char *dir_open_to_others(const char *path);

#endif
