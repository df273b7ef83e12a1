/*
 * An example decoder plug-in (wharf/decode.h): uint8 pixels to float32 in
 * [0, 1], optionally scaled by the factor given as arg.  Load it with
 *
 *   wharf.decode.plugin("plugin_scale.so", arg="2.0", dtype="float32",
 *                       shape=(3, 224, 224))
 *
 * The _init function runs once in each worker and parses arg there.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <wharf/loader.h>

int wharf_transform_init(const char *arg, uint32_t worker, void **state);
int wharf_transform(void *state, uint64_t sample, const void *in,
		    uint64_t in_len, void *out, uint64_t out_cap,
		    uint64_t *out_len);

static float scale = 1.0f / 255.0f;

int wharf_transform_init(const char *arg, uint32_t worker, void **state)
{
	char *end;

	if (arg && *arg) {
		const float f = strtof(arg, &end);

		if (*end) {
			wharf_set_error("plugin_scale: bad factor \"%s\"", arg);
			return -EINVAL;
		}
		scale = f / 255.0f;
	}
	*state = &scale;
	return 0;
}

int wharf_transform(void *state, uint64_t sample, const void *in,
		    uint64_t in_len, void *out, uint64_t out_cap,
		    uint64_t *out_len)
{
	const float k = *(const float *)state;
	const uint8_t *src = in;
	float *dst = out;

	if (in_len * sizeof(float) > out_cap) {
		wharf_set_error("plugin_scale: sample %llu: %llu pixels do not "
				"fit %llu bytes",
				(unsigned long long)sample,
				(unsigned long long)in_len,
				(unsigned long long)out_cap);
		return -ENOBUFS;
	}
	for (uint64_t i = 0; i < in_len; i++)
		dst[i] = (float)src[i] * k;
	*out_len = in_len * sizeof(float);
	return 0;
}
