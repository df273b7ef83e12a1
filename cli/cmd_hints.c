/*
 * `wharf hints DIR`: hands the hint lines on standard input to the mount on
 * DIR (wharf-hints(1)).  The mount is read-only, so a shell cannot write
 * them to DIR/.wharf/hints; this sends them through the ioctl that
 * include/wharf/hints.h describes, in calls of whole lines.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <wharf/hints.h>

#include "cmd.h"

static void usage(FILE *out)
{
	fputs("Usage: wharf hints DIR < LINES\n"
	      "\n"
	      "Tells the wharf mount on DIR what will be read next: each line\n"
	      "of standard input is PATH OFFSET LENGTH (LENGTH 0: to the end "
	      "of\n"
	      "the file), PATH relative to DIR.  The mount fetches them "
	      "ahead,\n"
	      "in that order.  See wharf-hints(1).\n"
	      "  -h, --help    show this help\n",
	      out);
}

/* Sends h (whole lines) to fd.  @return 0, or 1 after a message. */
static int send_lines(int fd, struct wharf_hints *h, const char *dir)
{
	if (!h->len)
		return 0;
	if (ioctl(fd, WHARF_IOC_HINTS, h)) {
		fprintf(stderr, "wharf hints: %s: %s\n", dir,
			errno == ENOTTY ? "not a wharf mount"
					: strerror(errno));
		return 1;
	}
	h->len = 0;
	return 0;
}

int cmd_hints(int argc, char **argv)
{
	struct wharf_hints *h;
	char path[4096], *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int fd, rc = 0;

	if (argc == 2 &&
	    (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc != 2)
		return cmd_usage_error("hints", "expected one DIR");
	if (argv[1][0] == '-')
		return cmd_usage_error("hints", "unknown option '%s'",
				       argv[1]);
	snprintf(path, sizeof(path), "%s/.wharf/hints", argv[1]);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			fprintf(stderr, "wharf hints: %s: not a wharf mount\n",
				argv[1]);
		else
			cmd_path_error("hints", argv[1], errno);
		return 1;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		close(fd);
		fprintf(stderr, "wharf hints: out of memory\n");
		return 1;
	}
	while (!rc && (n = getline(&line, &cap, stdin)) > 0) {
		/* The mount counts a line without its newline as bad. */
		if (line[n - 1] != '\n') {
			fprintf(stderr, "wharf hints: the last line has no "
					"newline; not sent\n");
			rc = 1;
			break;
		}
		if ((size_t)n > sizeof(h->text) - h->len)
			rc = send_lines(fd, h, argv[1]);
		if (!rc && (size_t)n > sizeof(h->text)) {
			fprintf(stderr, "wharf hints: a line of %zd bytes is "
					"too long\n",
				n);
			rc = 1;
		}
		if (rc)
			break;
		memcpy(h->text + h->len, line, (size_t)n);
		h->len += (uint32_t)n;
	}
	if (!rc && ferror(stdin)) {
		fprintf(stderr, "wharf hints: standard input: %s\n",
			strerror(errno));
		rc = 1;
	}
	if (!rc)
		rc = send_lines(fd, h, argv[1]);
	free(line);
	free(h);
	close(fd);
	return rc;
}
