#ifndef WHARF_CHILD_H
#define WHARF_CHILD_H
/* child: a shell command run as a child process, with a deadline and its
 * output captured; and the stop that ends all of them at once. */
#include <stddef.h>

#include "compiler.h"

/*
 * Runs `command` with /bin/sh -c in directory dir (NULL: this process's),
 * stdin from /dev/null, and captures at most
 * cap - 1 bytes of its standard output into out (NUL-terminated; the rest is
 * read and dropped).  A command still running after timeout_ms is killed
 * (SIGTERM to its process group, then SIGKILL).  *status gets its wait
 * status.  @return 0 when it ran to its end (whatever its status),
 * -ETIMEDOUT when it was killed, -ECANCELED when run_capture_stop killed
 * it (or came first), or -errno when it could not run.
 */
int run_capture(const char *command, const char *dir, unsigned timeout_ms,
		char *out, size_t cap, size_t *len, int *status) WHARF_CHECK;

/* Ends the commands run_capture runs, on every thread, within a fraction
 * of a second (their process groups killed), and refuses new ones: the
 * process is stopping.  Async-signal-safe, for a stop signal's handler. */
void run_capture_stop(void);

#endif
