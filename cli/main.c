/*
 * `wharf`: the table of subcommands and the dispatch to them.
 *
 * Adding a command: write cli/cmd_NAME.c with `int cmd_NAME(int argc,
 * char **argv)` (parse, call the mount or the loader, print; exit status 0,
 * 1 or 2), declare it in cmd.h, add a row below and the file to
 * cli/Makefile.am (a command that needs the mount: inside `if ENABLE_FS`,
 * and its row's function in MOUNT_CMD()), and document it in man/wharf.1.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cmd.h"

/* A command of the mount, in a build without it (configure --disable-fs). */
#ifdef HAVE_FS
#define MOUNT_CMD(fn) fn
#else
#define MOUNT_CMD(fn) NULL
#endif

static const struct {
	const char *name;
	/* NULL: a command of the mount in a build without it (MOUNT_CMD) */
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
    {"mount", MOUNT_CMD(cmd_mount), "mount a remote dataset read-only"},
    {"umount", MOUNT_CMD(cmd_umount), "unmount a wharf mount"},
    {"cache", MOUNT_CMD(cmd_cache),
     "inspect, verify, prune or clear a chunk cache"},
    {"stats", MOUNT_CMD(cmd_stats),
     "show a mount's live state (--watch: every few seconds)"},
    {"prefetch", cmd_prefetch, "fill the cache for files on a mount"},
    {"hints", cmd_hints, "tell a mount what will be read next"},
    {"index", cmd_index, "build or describe a loader index"},
    {"shm", cmd_shm, "list or remove leftover /dev/shm segments"},
    {"bench", cmd_bench, "measure the loader on an index"},
};

/* What a build without the filesystem says for the mount's commands. */
static int not_built(const char *name)
{
	fprintf(stderr,
		"wharf %s: this wharf was built without the filesystem "
		"(configure --disable-fs).\n"
		"Rebuild it with the filesystem: apt-get install "
		"libfuse3-dev libcurl4-openssl-dev libzstd-dev libssl-dev "
		"libxxhash-dev, then ./configure && make.\n",
		name);
	return 1;
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: wharf COMMAND [OPTIONS]\n\n"
		     "wharf mounts remote datasets (HTTP(S), S3, GCS, Azure "
		     "Blob) as a "
		     "cached read-only\nfilesystem and feeds training jobs "
		     "from them.\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s%s\n", commands[i].name,
			commands[i].summary,
			commands[i].run ? "" : " (not built)");
	fprintf(out, "\n'wharf COMMAND --help' describes a command; "
		     "man wharf-COMMAND(1) is its page,\nwharf(1) the rest.\n");
}

int main(int argc, char **argv)
{
	const char *slash = strrchr(argv[0], '/');

	/* Installed as a link named for mount(8)'s helper of fuse.wharf. */
	if (!strcmp(slash ? slash + 1 : argv[0], "mount.fuse.wharf"))
#ifdef HAVE_FS
		return cmd_mount_helper(argc, argv);
#else
		return not_built("mount");
#endif
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
			return commands[i].run
				   ? commands[i].run(argc - 1, argv + 1)
				   : not_built(commands[i].name);
	fprintf(stderr, "wharf: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
