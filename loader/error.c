/*
 * error: what passes, per thread, between the library and the code around
 * it: errors, a transform's message and its seed (see error.h).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wharf/loader.h>

#include "error.h"

static __thread char tl_last[1024];
static __thread char tl_transform[256];
static __thread uint64_t tl_seed;

int error_set(int rc, char *msg)
{
	snprintf(tl_last, sizeof(tl_last), "%s",
		 msg ? msg : strerror(rc < 0 ? -rc : rc));
	free(msg);
	return rc;
}

void error_note(const char *msg)
{
	snprintf(tl_last, sizeof(tl_last), "%s", msg);
}

const char *wharf_last_error(void)
{
	return tl_last;
}

void wharf_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tl_transform, sizeof(tl_transform), fmt, ap);
	va_end(ap);
}

const char *error_transform(void)
{
	return tl_transform;
}

void error_transform_clear(void)
{
	tl_transform[0] = '\0';
}

uint64_t wharf_sample_seed(void)
{
	return tl_seed;
}

void error_seed_set(uint64_t seed)
{
	tl_seed = seed;
}
