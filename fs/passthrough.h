#ifndef WHARF_FS_PASSTHROUGH_H
#define WHARF_FS_PASSTHROUGH_H
/*
 * passthrough: the kernel reads a file's bytes from a cache file itself
 * (FUSE passthrough, Linux 6.9 and later), so that a warm read costs what
 * a read of a local file costs: one copy, from the cache file's page cache
 * to the reader, and no round trip to the mount.
 *
 * libfuse 3.14 (Debian 12's) has no API for it: it cannot ask for it in
 * its INIT reply nor name a backing file in an OPEN reply.  This module
 * sits between libfuse and /dev/fuse (libfuse's custom I/O hooks) and adds
 * exactly those two things to the replies libfuse writes, in the kernel's
 * own ABI (struct fuse_init_out.flags2 and max_stack_depth, struct
 * fuse_open_out.open_flags and backing_id); nothing else is touched.
 * Registering a backing file takes CAP_SYS_ADMIN: an unprivileged mount
 * goes without, as on a kernel that does not offer it.
 *
 * Use: passthrough_attach() after fuse_session_mount(); from the INIT
 * callback on, passthrough_offered() says whether the kernel offered it.
 * For an open that the kernel should serve from file fd:
 *     id = passthrough_open(fd);            (a backing id, or -errno)
 *     passthrough_arm(id, size);
 *     fuse_reply_open(req, fi);             (this reply carries id)
 *     passthrough_disarm();
 * and passthrough_close(id) when the last open using id is released.
 * The kernel requires every open of one inode to use one backing id while
 * any is open, and no passthrough open while a cached one is: the caller
 * keeps those counts (backing.c).
 */
#include <stdbool.h>
#include <stdint.h>

struct fuse_session;

/* Hooks the session's /dev/fuse descriptor, when this process may
 * register backing files (CAP_SYS_ADMIN).  One session per process.
 * @return 0 (hooked), -EPERM (not privileged: nothing done), -errno. */
int passthrough_attach(struct fuse_session *se);

/* Whether the kernel offered passthrough in its INIT and it was asked
 * for; false before INIT and without passthrough_attach. */
bool passthrough_offered(void);

/* Registers fd (read-only, a regular file) as a backing file.
 * @return a backing id (> 0), or -errno (-EPERM, -ELOOP for a cache on a
 * stacked filesystem, -EOPNOTSUPP...). */
int passthrough_open(int fd);
void passthrough_close(int backing_id);

/* The next OPEN reply this thread writes passes through to backing_id:
 * a file of `size` bytes handed to the kernel (counted, as the mount no
 * longer sees its reads). */
void passthrough_arm(int backing_id, uint64_t size);
void passthrough_disarm(void);

struct passthrough_stats {
	bool offered;
	bool stopped; /* always false: auto mode no longer stops opens */
	uint64_t opens;	      /* opens served by passthrough */
	uint64_t bytes;	      /* the sizes of the files those opens hold */
	uint64_t backing;     /* backing files registered now */
	uint64_t open_errors; /* registrations refused by the kernel */
};
void passthrough_get_stats(struct passthrough_stats *out);

#endif
