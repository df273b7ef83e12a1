#ifndef WHARF_INCLUDE_WHARF_HINTS_H
#define WHARF_INCLUDE_WHARF_HINTS_H
/*
 * Read-order hints to a wharf mount (wharf(1), "Hints"), for programs that
 * do not use libwharf's loader, which sends them by itself.
 *
 * A wharf mount is read-only, so its hints file takes no write(2): open
 * MOUNT/.wharf/hints read-only (O_RDONLY) and hand over the lines with
 *
 *     struct wharf_hints h;
 *     h.len = (uint32_t)snprintf(h.text, sizeof(h.text), "a/b 0 0\n");
 *     ioctl(fd, WHARF_IOC_HINTS, &h);
 *
 * text holds len bytes of whole lines "PATH OFFSET LENGTH\n", PATH relative
 * to the mount root (or absolute under the mountpoint), OFFSET and LENGTH
 * decimal (a LENGTH of 0: to the end of the file).  A line cut by the end
 * of len is counted as bad and ignored: it is not joined to the next call.
 * The mount only parses and queues, so the call returns at once.
 *
 * @return 0 once the lines are queued (bad ones counted in the stats file,
 * "hints": "bad_lines"), or -1 with errno: EINVAL when len is over
 * WHARF_HINTS_MAX, ENOTTY when fd is not a wharf mount's hints file.
 */
#include <stdint.h>
#include <sys/ioctl.h>

/* The kernel copies the whole struct on each call, and an ioctl's size
 * field holds at most 16383 bytes. */
#define WHARF_HINTS_MAX 16376

struct wharf_hints {
	uint32_t len; /* bytes of text used */
	char text[WHARF_HINTS_MAX];
};

#define WHARF_IOC_HINTS _IOW('W', 0x48, struct wharf_hints)

#endif
