#ifndef WHARF_COMMON_MOUNTINFO_H
#define WHARF_COMMON_MOUNTINFO_H
/* mountinfo: what the kernel's mount table says about one directory. */

/*
 * Finds the mount on `dir` (an absolute, resolved path) in
 * /proc/self/mountinfo.  @return 1 when found (its "major:minor" in dev,
 * filesystem type in type), 0 when nothing is mounted there, -errno.  The
 * last one wins: it is the mount on top.
 */
int mountinfo_find(const char *dir, char dev[32], char type[64]);

#endif
