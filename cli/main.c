/* `wharf`: dispatches to the subcommands in cmd_*.c. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{"mount", cmd_mount, "mount a remote dataset read-only"},
	{"umount", cmd_umount, "unmount a wharf mount"},
	{"cache", cmd_cache, "inspect, verify, prune or clear a chunk cache"},
	{"prefetch", cmd_prefetch, "fill the cache for files on a mount"},
	{"hints", cmd_hints, "tell a mount what will be read next"},
	{"index", cmd_index, "build or describe a loader index"},
	{"shm", cmd_shm, "list or remove leftover /dev/shm segments"},
	{"bench", cmd_bench, "measure the loader on an index"},
};

static void usage(FILE *out)
{
	fprintf(out, "Usage: wharf COMMAND [OPTIONS]\n\n"
		     "wharf mounts remote datasets (HTTP(S), S3, GCS) as a "
		     "cached read-only\nfilesystem and feeds training jobs "
		     "from them.\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(out, "\n'wharf COMMAND --help' describes a command; "
		     "man wharf(1) has everything.\n");
}

int cmd_usage_error(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "wharf %s: ", sub);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'wharf %s --help'.\n", sub);
	return 2;
}

int main(int argc, char **argv)
{
	const char *slash = strrchr(argv[0], '/');

	/* Installed as a link named for mount(8)'s helper of fuse.wharf. */
	if (!strcmp(slash ? slash + 1 : argv[0], "mount.fuse.wharf"))
		return cmd_mount_helper(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("wharf %s\n", PACKAGE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "wharf: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
