/* cmd: what every subcommand shares: its usage errors, which mount a
 * path is on (see cmd.h). */
#include "config.h"

#include "cmd.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mountinfo.h"
#include "text.h"

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

int cmd_bad_option(const char *sub, int c, char *const *argv,
		   const struct option *longopts)
{
	char msg[256];

	return cmd_usage_error(
	    sub, "%s", getopt_problem(c, argv, longopts, msg, sizeof(msg)));
}

void cmd_path_error(const char *sub, const char *path, int err)
{
	fprintf(stderr, "wharf %s: %s: %s", sub, path, strerror(err));
	if (err == ENOTCONN)
		fprintf(stderr,
			" (a mount whose process is gone): run 'wharf umount "
			"%s' to let it go, then mount again",
			path);
	fputc('\n', stderr);
}

int cmd_wharf_mount(const char *sub, const char *path, dev_t dev, char *root,
		    const char *hint)
{
	struct mountinfo_entry e;
	char ddev[32];
	int rc;

	if (dev) {
		rc = mountinfo_of_dev(dev, &e);
	} else {
		rc = mountinfo_find(path, ddev, e.type);
		snprintf(e.mnt, sizeof(e.mnt), "%s", path);
	}
	if (rc == 1 && !strcmp(e.type, WHARF_FSTYPE)) {
		if (root)
			snprintf(root, PATH_MAX, "%s", e.mnt);
		return 0;
	}
	if (rc == 1 && dev)
		fprintf(stderr,
			"wharf %s: %s is not on a wharf mount (it is on %s, a "
			"%s)%s\n",
			sub, path, e.mnt, e.type, hint);
	else if (rc == 1)
		fprintf(stderr,
			"wharf %s: %s is not a wharf mount (it is a %s)%s\n",
			sub, path, e.type, hint);
	else if (rc == 0 && !dev)
		fprintf(stderr,
			"wharf %s: %s is not a wharf mount (nothing is mounted "
			"there)%s\n",
			sub, path, hint);
	else
		fprintf(
		    stderr,
		    "wharf %s: %s: cannot tell which mount it is on (%s)%s\n",
		    sub, path,
		    rc < 0 ? strerror(-rc) : "not in the mount table", hint);
	return 1;
}
