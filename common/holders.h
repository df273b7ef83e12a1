#ifndef WHARF_HOLDERS_H
#define WHARF_HOLDERS_H
/*
 * holders: which processes hold files under a directory (open, mapped,
 * or as their working or root directory), read from /proc.  It knows
 * nothing of mounts: `wharf umount` asks it after an unmount failed with
 * EBUSY, to tell the user what to close.
 */
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

/* Of each process, the things held that are named, before "and N more". */
#define HOLDER_SHOWN 3

/* What one process holds under the directory. */
struct holder {
	pid_t pid;
	char name[96]; /* "NAME, child of PPID" ("NAME" for init's), "?" */
	unsigned n;    /* things held; the first HOLDER_SHOWN are in what */
	/* "open PATH", "mapped PATH", "its working directory PATH", "its
	 * root directory PATH" */
	char what[HOLDER_SHOWN][PATH_MAX + 16];
};

/*
 * Calls fn for each process but this one that holds something under dir
 * (an absolute path, without a trailing '/'), in /proc's order, until fn
 * returns false.  Links in /proc are read with readlink, never followed
 * or stat'ed, so that nothing reaches a mount on dir (a dead daemon's
 * would hang).  *denied is set when the entries of a process could not be
 * read for want of permission (other users' processes, unless root);
 * processes that end during the scan are skipped.
 * @return 0, or -errno when /proc cannot be listed or memory is gone.
 */
int holders_scan(const char *dir, bool (*fn)(const struct holder *h,
					     void *arg),
		 void *arg, bool *denied);

#endif
