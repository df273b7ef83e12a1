#ifndef WHARF_CMD_H
#define WHARF_CMD_H
/* The `wharf` subcommands.  Each gets argv starting at its own name
 * (argv[0] == "mount"), parses, calls a library, prints, and returns the
 * process exit status: 0 ok, 1 failure, 2 usage error. */

int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_prefetch(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_shm(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* For usage errors: "wharf SUB: MESSAGE" + "Try 'wharf SUB --help'." */
int cmd_usage_error(const char *sub, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
