/* cmd: what every subcommand shares: its usage errors (see cmd.h). */
#include "config.h"

#include "cmd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
