#ifndef WHARF_LOADER_ERROR_H
#define WHARF_LOADER_ERROR_H
/*
 * error: what passes, per thread, between the library and the code around
 * it: the last error (wharf_last_error), the message a transform leaves
 * (wharf_set_error) and the seed a sample transform runs with
 * (wharf_sample_seed).  The bottom of loader/: every other file may call
 * it, it calls none of them, so that a transform (jpeg.c) or a module
 * (index.c, workers.c) never calls back into the file that called it.
 *
 * Messages are formatted with common's strdupf() (text.h), which aborts
 * when memory is gone, as the loader's own formatter did: one formatter for
 * the project, and no change of behaviour.  Why a library may abort there:
 * a large allocation that fails (a ring, a worker table, a decode buffer)
 * is an error with a message, returned as -ENOMEM; a message of a few
 * hundred bytes that cannot be allocated means the heap is gone and the
 * caller's own allocations are failing too, and a NULL-message path at
 * each of a hundred call sites (some use the string for more than a
 * message: a temporary file's name) would be a hundred paths no test runs.
 */
#include <stdint.h>

/* Records msg (NULL: strerror(-rc)) as this thread's last error and returns
 * rc.  Takes ownership of msg. */
int error_set(int rc, char *msg);

/* Copies msg as this thread's last error; the caller keeps msg. */
void error_note(const char *msg);

/* What a transform passed to wharf_set_error() on this thread ("" if none),
 * and its reset before each call of a transform. */
const char *error_transform(void);
void error_transform_clear(void);

/* What wharf_sample_seed() returns on this thread: set by the fill before
 * each call of a sample transform. */
void error_seed_set(uint64_t seed);

#endif
