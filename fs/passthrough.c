/*
 * FUSE passthrough under libfuse 3.14: see passthrough.h for the contract.
 *
 * The two replies that need more than libfuse can say are recognised on
 * their way to /dev/fuse: the INIT reply by its unique id (noted when the
 * INIT request was read), an OPEN reply by the thread-local armed id (set
 * by the caller around fuse_reply_open, so no other reply can carry it).
 * Each is copied, amended and written in libfuse's place; every other
 * message is written as it is.  The per-message cost is one compare.
 */
#include "config.h"

#define FUSE_USE_VERSION 312
#include "passthrough.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

/* The kernel ABI of protocol 7.40 (Linux 6.9), which the system's
 * <linux/fuse.h> may predate. */
#define PT_INIT_FLAG (1ull << 37) /* FUSE_PASSTHROUGH, in flags2 */
#define PT_OPEN_FLAG (1u << 7)	  /* FOPEN_PASSTHROUGH */
#define PT_INIT_EXT (1u << 30)	  /* FUSE_INIT_EXT: flags2 is meant */
/* A cache on a filesystem that stacks on another (overlayfs) would need
 * 2, which would forbid stacking anything on the mount itself. */
#define PT_STACK_DEPTH 1

struct pt_init_in {
	uint32_t major, minor, max_readahead, flags, flags2;
};

struct pt_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
	uint32_t unused[6];
};
_Static_assert(sizeof(struct pt_init_out) == 64, "fuse_init_out is 64 bytes");

struct pt_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};
_Static_assert(sizeof(struct pt_open_out) == 16, "fuse_open_out is 16 bytes");

struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_BACKING_OPEN _IOW(229, 1, struct pt_backing_map)
#define PT_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* One session per process (a daemon serves one mount): the hooks, which
 * libfuse calls with the file system's own userdata, find it here. */
static int dev_fd = -1;
static uint64_t init_unique; /* atomic; 0 until INIT is read */
static bool offered;	     /* atomic */
static uint64_t n_opens, n_bytes, n_backing, n_errors; /* atomic */
static __thread int armed_id;

static bool may_register(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &
	       CAP_TO_MASK(CAP_SYS_ADMIN);
}

static void note_init(const void *buf, size_t len)
{
	const struct fuse_in_header *in = buf;
	struct pt_init_in init;
	uint64_t flags;

	if (len < sizeof(*in) + sizeof(init))
		return;
	memcpy(&init, (const char *)buf + sizeof(*in), sizeof(init));
	flags = init.flags;
	if (flags & PT_INIT_EXT)
		flags |= (uint64_t)init.flags2 << 32;
	if (!(flags & PT_INIT_FLAG))
		return;
	__atomic_store_n(&offered, true, __ATOMIC_RELEASE);
	__atomic_store_n(&init_unique, in->unique, __ATOMIC_RELEASE);
}

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	const ssize_t n = read(fd, buf, len);

	(void)userdata;
	if (n >= (ssize_t)sizeof(struct fuse_in_header) &&
	    ((const struct fuse_in_header *)buf)->opcode == FUSE_INIT)
		note_init(buf, (size_t)n);
	return n;
}

static ssize_t hook_writev(int fd, struct iovec *iov, int count,
			   void *userdata)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	const uint64_t init = __atomic_load_n(&init_unique, __ATOMIC_ACQUIRE);
	struct iovec amended[2];
	struct pt_init_out io;
	struct pt_open_out oo;

	(void)userdata;
	if (count != 2 || iov[0].iov_len != sizeof(*out) || out->error)
		return writev(fd, iov, count);
	amended[0] = iov[0];
	if (armed_id > 0 && iov[1].iov_len == sizeof(oo)) {
		memcpy(&oo, iov[1].iov_base, sizeof(oo));
		oo.open_flags |= PT_OPEN_FLAG;
		oo.backing_id = armed_id;
		amended[1] = (struct iovec){&oo, sizeof(oo)};
		return writev(fd, amended, 2);
	}
	if (init && out->unique == init && iov[1].iov_len == sizeof(io)) {
		memcpy(&io, iov[1].iov_base, sizeof(io));
		io.flags |= PT_INIT_EXT;
		io.flags2 |= (uint32_t)(PT_INIT_FLAG >> 32);
		io.max_stack_depth = PT_STACK_DEPTH;
		amended[1] = (struct iovec){&io, sizeof(io)};
		__atomic_store_n(&init_unique, 0, __ATOMIC_RELAXED);
		return writev(fd, amended, 2);
	}
	return writev(fd, iov, count);
}

int passthrough_attach(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
	    .read = hook_read,
	    .writev = hook_writev,
	};
	const int fd = fuse_session_fd(se);
	int rc;

	if (!may_register())
		return -EPERM;
	rc = fuse_session_custom_io(se, &io, fd);
	if (rc)
		return rc < 0 ? rc : -EIO;
	dev_fd = fd;
	return 0;
}

bool passthrough_offered(void)
{
	return __atomic_load_n(&offered, __ATOMIC_ACQUIRE);
}

int passthrough_open(int fd)
{
	struct pt_backing_map map = {.fd = fd};
	const int id = ioctl(dev_fd, PT_BACKING_OPEN, &map);

	if (id <= 0) {
		__atomic_fetch_add(&n_errors, 1, __ATOMIC_RELAXED);
		return id < 0 ? -errno : -EIO;
	}
	__atomic_fetch_add(&n_backing, 1, __ATOMIC_RELAXED);
	return id;
}

void passthrough_close(int backing_id)
{
	const uint32_t id = (uint32_t)backing_id;

	(void)ioctl(dev_fd, PT_BACKING_CLOSE, &id);
	__atomic_fetch_sub(&n_backing, 1, __ATOMIC_RELAXED);
}

void passthrough_arm(int backing_id, uint64_t size)
{
	armed_id = backing_id;
	__atomic_fetch_add(&n_opens, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n_bytes, size, __ATOMIC_RELAXED);
}

void passthrough_disarm(void)
{
	armed_id = 0;
}

void passthrough_get_stats(struct passthrough_stats *out)
{
	out->stopped = false;
	out->offered = passthrough_offered();
	out->opens = __atomic_load_n(&n_opens, __ATOMIC_RELAXED);
	out->bytes = __atomic_load_n(&n_bytes, __ATOMIC_RELAXED);
	out->backing = __atomic_load_n(&n_backing, __ATOMIC_RELAXED);
	out->open_errors = __atomic_load_n(&n_errors, __ATOMIC_RELAXED);
}
