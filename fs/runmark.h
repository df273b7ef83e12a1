#ifndef WHARF_FS_RUNMARK_H
#define WHARF_FS_RUNMARK_H
/*
 * runmark: CACHE/running, a mark a mount leaves in its cache directory
 * while it runs (its pid, mountpoint, start and --metrics-file) and
 * removes at a clean end.  The next mount of that cache, holding its lock,
 * finds the mark only if the last one was killed, crashed or went down
 * with the machine: it says so and removes that mount's metrics file,
 * which would otherwise show a dead mount as alive.
 */
#include "compiler.h"

/*
 * Under the cache dir's lock: says what a mark left there means, removes
 * the stale metrics file it names (a regular file of this user, never
 * through a link), and writes this mount's mark.  metrics_file may be
 * NULL.  @return 0, or -errno when the mark could not be written (logged;
 * the mount goes on without one).
 */
int runmark_take(const char *cache_dir, const char *mountpoint,
		 const char *metrics_file) WHARF_CHECK;
/* A clean end: the mark goes. */
void runmark_clear(const char *cache_dir);

#endif
