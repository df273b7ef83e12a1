#ifndef WHARF_CLI_CMD_H
#define WHARF_CLI_CMD_H
#include <getopt.h>
#include <stdio.h>
#include <sys/types.h>

/* cmd: the `wharf` subcommands (their table is in main.c).  Each gets argv
 * starting at its own name (argv[0] == "mount"), parses, calls the mount or
 * the loader, prints, and returns the process exit status: 0 ok, 1
 * failure, 2 usage error. */

int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
/* mount.fuse.wharf SOURCE DIR [-o OPTS]: the form mount(8) runs. */
int cmd_mount_helper(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_prefetch(int argc, char **argv);
int cmd_hints(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_shm(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* For usage errors: "wharf SUB: MESSAGE" + "Try 'wharf SUB --help'." */
int cmd_usage_error(const char *sub, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The usage error for what getopt_long returned as '?' or ':' (run with
 * opterr = 0 and an optstring that starts with ':'), naming the option:
 * see getopt_problem.  Returns 2. */
int cmd_bad_option(const char *sub, int c, char *const *argv,
		   const struct option *longopts);

/*
 * "wharf SUB: PATH: what errno err says" on stderr, and the fix where
 * there is one: ENOTCONN is a wharf mount whose process is gone (killed,
 * crashed), which `wharf umount PATH` lets go.
 */
void cmd_path_error(const char *sub, const char *path, int err);

/*
 * Whether path is a wharf mount's: on one when dev is path's st_dev (the
 * mount whose device it is), or, with dev 0, at one: path (absolute and
 * resolved) is a mountpoint, looked up by name, so that a mount whose
 * daemon died (it answers no stat) is found too.  @return 0 with the
 * mount's root in root (PATH_MAX bytes; root may be NULL), or 1 after
 * "wharf SUB: PATH is not on a wharf mount (it is on M, a TYPE)HINT", or
 * what else it is, or why it cannot tell.
 */
int cmd_wharf_mount(const char *sub, const char *path, dev_t dev, char *root,
		    const char *hint);

#endif
