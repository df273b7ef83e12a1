/* Decoder specs (wharf_decoder_new: "array shape=3,224,224 dtype=u8",
 * "tokens ...", "jpeg ..."), then the decoder's transform on the bytes
 * after the spec's newline, as a worker runs it on a sample: the spec
 * comes from a user, the sample from the dataset.  "plugin" specs are
 * left out: they load a shared object by name. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <wharf/decode.h>

#include "fuzz.h"

#define OUT_MAX (1u << 22)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t spec_len = nl ? (size_t)(nl - data) : size;
	char *spec = fuzz_str(data, spec_len);
	struct wharf_options opt;
	wharf_decoder *d = NULL;

	if (!strncmp(spec + strspn(spec, " \t"), "plugin", 6) ||
	    wharf_decoder_new(spec, &d)) {
		free(spec);
		return 0;
	}
	wharf_options_init(&opt);
	FUZZ_ASSERT(wharf_decoder_apply(d, &opt) == 0);
	if (opt.sample_fn && nl && opt.sample_bytes <= OUT_MAX) {
		size_t in_len = size - spec_len - 1;
		uint64_t cap = opt.sample_bytes ? opt.sample_bytes : OUT_MAX;
		uint64_t out_len = 0;
		uint8_t *in = malloc(in_len ? in_len : 1);
		uint8_t *out = malloc(cap);

		FUZZ_ASSERT(in && out);
		memcpy(in, nl + 1, in_len);
		if (opt.worker_init == NULL &&
		    opt.sample_fn(opt.user, 0, in, in_len, out, cap,
				  &out_len) == 0)
			FUZZ_ASSERT(out_len <= cap);
		free(in);
		free(out);
	}
	wharf_decoder_free(d);
	free(spec);
	return 0;
}
