#ifndef WHARF_COMMON_MOUNTINFO_H
#define WHARF_COMMON_MOUNTINFO_H
/* mountinfo: what the kernel's mount table says about one directory. */
#include <limits.h>
#include <sys/types.h>

/* The type the kernel's mount table shows for a wharf mount. */
#define WHARF_FSTYPE "fuse.wharf"

struct mountinfo_entry {
	char dev[32];	      /* "major:minor" */
	char mnt[PATH_MAX];   /* the mountpoint */
	char type[64];	      /* WHARF_FSTYPE for a wharf mount */
};

/*
 * Finds the mount on `dir` (an absolute, resolved path) in
 * /proc/self/mountinfo.  @return 1 when found (its "major:minor" in dev,
 * filesystem type in type), 0 when nothing is mounted there, -errno.  The
 * last one wins: it is the mount on top.
 */
int mountinfo_find(const char *dir, char dev[32], char type[64]);
/* The same in the mount table of process pid (its mount namespace):
 * whether a mount is that process's to see.  pid 0: this process. */
int mountinfo_find_pid(pid_t pid, const char *dir, char dev[32],
		       char type[64]);

/* The mount whose device is dev (st_dev of a file on it): 1 and *out set,
 * 0 when none, -errno. */
int mountinfo_of_dev(dev_t dev, struct mountinfo_entry *out);

#endif
