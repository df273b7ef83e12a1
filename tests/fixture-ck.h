#ifndef WHARF_TEST_FIXTURE_CK_H
#define WHARF_TEST_FIXTURE_CK_H
/*
 * The fixture's parts that fail or skip a test through Check: tests left
 * out by name, `wharf mount -f` daemons, and the numbers in their stats.
 * (fixture.h is the rest, plain C for test-cuda.)
 */
#include <check.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * Adds test t to tc or, when why is not NULL, a stand-in that prints
 * "SKIP: NAME: WHY" (fx_skip's line) in its place: for tests that cannot
 * run here, each named in the results.  Put the stand-ins in a TCase of
 * their own, without the fixtures that could not start; and leave out of
 * the suite a TCase left without tests: Check runs its unchecked fixture
 * all the same.
 */
void fx_tcase_add(TCase *tc, const TTest *t, const char *why);
/* The same for a loop test over [start, end): a stand-in for each. */
void fx_tcase_add_loop(TCase *tc, const TTest *t, int start, int end,
		       const char *why);

/* The paths in struct fx_mount: short enough that a test's PATH_MAX
 * buffer holds one and a file name after it (fx_mount_init refuses
 * longer ones). */
#define FX_MOUNT_PATH 1024

/* A `wharf mount -f` daemon and what it keeps where. */
struct fx_mount {
	pid_t pid;		    /* -1 when it is not running */
	char dir[FX_MOUNT_PATH];    /* the mountpoint */
	char cache[FX_MOUNT_PATH];  /* --cache-dir (the caller may change it) */
	char log[FX_MOUNT_PATH];    /* the daemon's output, appended to */
	char mounts[FX_MOUNT_PATH]; /* WORK/mounts, for fx_unmount_leftovers */
};

/*
 * A fresh mountpoint $TMPDIR/wharf-TAG-XXXXXX (outside work, which is
 * removed with rm -rf: a mount left there by a failed test would be
 * walked), recorded in WORK/mounts; the cache WORK/wharf-TAG-XXXXXX.cache
 * (made by fx_mount_start) and the log WORK/wharf-TAG-XXXXXX.log.  Not
 * started: pid is -1.
 */
void fx_mount_init(struct fx_mount *m, const char *work, const char *tag);
/*
 * Starts `wharf mount -f --cache-dir CACHE --chunk-size 1M OPTS... EXTRA...
 * URL DIR` (opts and extra NULL-terminated, or NULL: a program's options,
 * then a test's) and waits (bounded) until DIR/.wharf/stats appears.
 * @return 0; -1 when the daemon died first or never came up (a line on
 * stderr points at its log).
 */
int fx_mount_start(struct fx_mount *m, const char *url,
		   const char *const opts[], const char *const extra[]);
/*
 * For a mount that must come up: rc is what fx_mount_start (or a test's
 * helper around it) returned for m.  Not 0: the daemon's log goes to
 * stderr and the test fails at the caller's line.
 */
#define fx_mount_ok(rc, m) fx_mount_ok_at(__FILE__, __LINE__, rc, m)
void fx_mount_ok_at(const char *file, int line, int rc,
		    const struct fx_mount *m);
/*
 * `wharf umount`, then waits (bounded) for the daemon to exit.
 * @return its wait status (0: a clean exit); -1 when umount failed or the
 * daemon outlived the wait (it is then killed, the mount detached).
 */
int fx_mount_stop(struct fx_mount *m);
/* Unmounts what fx_mount_init recorded in WORK/mounts and is still
 * mounted (a failed test's process is gone), and removes the
 * mountpoints. */
void fx_unmount_leftovers(const char *work);

/* The end of a suite's helper servers' work directory *work (NULL:
 * nothing): fx_unmount_leftovers, then rm -rf, free, and NULL. */
void fx_work_free(char **work);
/* Runs every test of s (CK_NORMAL), frees it.  @return main's exit
 * status: EXIT_FAILURE when a test failed. */
int fx_suite_run(Suite *s);

/* A mount's MOUNT/.wharf/stats (malloc'd), or NULL. */
char *fx_mount_stats(const char *mnt);
/*
 * The number named key in stats (the JSON of MOUNT/.wharf/stats): in the
 * object that section names at the top (in the first object of an array
 * section), or first found anywhere for a NULL section.  A key, section
 * or number that is not there fails the test at the caller's line,
 * naming it: a renamed counter must not pass for a zero.
 */
#define fx_stats_num(stats, section, key)                                      \
	fx_stats_num_at(__FILE__, __LINE__, stats, section, key)
long long fx_stats_num_at(const char *file, int line, const char *stats,
			  const char *section, const char *key);
/* fx_stats_num on the mount's stats as they are now; unreadable stats
 * fail the test too. */
#define fx_mount_stat(mnt, section, key)                                       \
	fx_mount_stat_at(__FILE__, __LINE__, mnt, section, key)
long long fx_mount_stat_at(const char *file, int line, const char *mnt,
			   const char *section, const char *key);
/* Whether the mount's stats say FUSE passthrough is on ("passthrough":
 * {"on": true}; its absence fails the test). */
#define fx_mount_passthrough_on(mnt)                                           \
	fx_mount_passthrough_on_at(__FILE__, __LINE__, mnt)
bool fx_mount_passthrough_on_at(const char *file, int line, const char *mnt);
/* Whether mounts here must get passthrough: as root on Linux 6.9 or
 * later.  A mount without it there is a failure, elsewhere a skip. */
bool fx_passthrough_expected(void);

#endif
