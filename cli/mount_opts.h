#ifndef WHARF_CLI_MOUNT_OPTS_H
#define WHARF_CLI_MOUNT_OPTS_H
/*
 * mount_opts: what `wharf mount` parsed (cmd_mount.c) and its settling
 * (mount_opts.c) into a mount_config that fs/mount.c can build a mount
 * from: paths absolute, values checked, defaults filled, before the daemon
 * detaches.  Parse, then mount_opts_settle, then mount_serve; and
 * mount_opts_free in every case.
 */
#include <limits.h>
#include <stdbool.h>

#include "mount.h"

/* The command line: the configuration it settles, and what owns its
 * strings. */
struct mount_opts {
	struct mount_config cfg;
	char *cache_dir; /* as given, malloc'd; cfg.cache_dir is absolute */
	bool foreground;
	unsigned umask; /* applied to the modes once all are parsed */
	/* Long options given as -o name=value, parsed after the rest. */
	char **o_args; /* "--name=value", malloc'd */
	unsigned n_o_args;
	char **owned; /* what cfg and optarg may point into */
	unsigned n_owned;
	char mountpoint[PATH_MAX]; /* cfg.mountpoint, resolved */
};


/* Frees what o owns (its strings, which o->cfg may point into). */
void mount_opts_free(struct mount_opts *o);

/* Keeps p until mount_opts_free.  @return p, or NULL (p freed). */
char *mount_opts_own(struct mount_opts *o, char *p);

/*
 * Settles o after its options are parsed, nargs the count of operands
 * (SOURCE and DIR): the limits that follow from others (retries and
 * connects within --origin-wait, the threads), a cache cap that holds a
 * chunk, the modes under the umask, the default cache directory, and every
 * path made absolute (settle_paths).  @return 0, or the exit status after
 * a message (2: a usage error).
 */
int mount_opts_settle(struct mount_opts *o, int nargs);

#endif
