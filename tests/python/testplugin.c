/*
 * A decoder plug-in for tests/python: reverses each sample's bytes, and with
 * arg "crash=N" kills its worker (SIGKILL: no core file) on sample N, so the
 * tests can check how a worker crash reaches Python.
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int wharf_transform_init(const char *arg, uint32_t worker, void **state);
int wharf_transform(void *state, uint64_t sample, const void *in,
		    uint64_t in_len, void *out, uint64_t out_cap,
		    uint64_t *out_len);

static uint64_t crash_at = UINT64_MAX;

int wharf_transform_init(const char *arg, uint32_t worker, void **state)
{
	if (!strncmp(arg, "crash=", 6))
		crash_at = strtoull(arg + 6, NULL, 10);
	*state = &crash_at;
	return 0;
}

int wharf_transform(void *state, uint64_t sample, const void *in,
		    uint64_t in_len, void *out, uint64_t out_cap,
		    uint64_t *out_len)
{
	const unsigned char *src = in;
	unsigned char *dst = out;

	if (sample == *(const uint64_t *)state)
		kill(getpid(), SIGKILL);
	if (in_len > out_cap)
		return -105; /* -ENOBUFS */
	for (uint64_t i = 0; i < in_len; i++)
		dst[i] = src[in_len - 1 - i];
	*out_len = in_len;
	return 0;
}
