/* Response header lines (fetch_header_line): status lines, ETag,
 * Content-Type, Last-Modified, Content-Length, Content-Encoding and
 * Content-Range, x-goog-generation, as the origin sends them, each line
 * handed over as curl hands it (not NUL-terminated); then whether they fit
 * a ranged GET (fetch_range_mismatch) as a 206 and as a 200, and each kind
 * of pinned version (fetch_version_mismatch).  The first 8 bytes are the
 * asked range's offset. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fetch_res res;
	struct fetch_head h;
	uint64_t range_off = 0;
	size_t i = 0;

	if (size < sizeof(range_off))
		return 0;
	memcpy(&range_off, data, sizeof(range_off));
	data += sizeof(range_off);
	size -= sizeof(range_off);
	memset(&res, 0, sizeof(res));
	memset(&h, 0, sizeof(h));
	res.content_length = -1;
	while (i < size) {
		const uint8_t *nl = memchr(data + i, '\n', size - i);
		size_t n = (nl ? (size_t)(nl - data) + 1 : size) - i;
		/* Exactly the line, so that a read past it is seen. */
		char *line = malloc(n);

		FUZZ_ASSERT(line != NULL);
		memcpy(line, data + i, n);
		fetch_header_line(line, n, &res, &h);
		free(line);
		i += n;
	}
	FUZZ_ASSERT(memchr(res.etag, '\0', sizeof(res.etag)));
	FUZZ_ASSERT(memchr(res.content_type, '\0', sizeof(res.content_type)));
	FUZZ_ASSERT(memchr(h.reason, '\0', sizeof(h.reason)));
	FUZZ_ASSERT(memchr(h.encoding, '\0', sizeof(h.encoding)));
	FUZZ_ASSERT(res.content_length >= -1);
	FUZZ_ASSERT(res.mtime >= 0);
	FUZZ_ASSERT(memchr(h.range, '\0', sizeof(h.range)));
	FUZZ_ASSERT(!h.range_ok || h.range_first <= h.range_last);
	{
		/* a range of 64 KiB at the offset, of an object whose size
		 * the listing gave, and of one whose size is not known */
		struct fetch_req req = {.range_off = range_off >> 1,
					.range_len = 65536};
		char why[160];

		for (int k = 0; k < 2; k++) {
			req.size = k ? 0 : req.range_off + 100000;
			if (fetch_range_mismatch(&req, 206, &res, &h, why,
						 sizeof(why)))
				FUZZ_ASSERT(memchr(why, '\0', sizeof(why)));
			else
				FUZZ_ASSERT(h.range_ok &&
					    h.range_first == req.range_off);
			(void)fetch_range_mismatch(&req, 200, &res, &h, why,
						   sizeof(why));
		}
	}
	FUZZ_ASSERT(memchr(h.generation, '\0', sizeof(h.generation)));
	{
		/* the answer's validators against each kind of version */
		static const char *const pinned[] = {
		    "\"v1\"", "W/\"v1\"", "1700000000001", "t1700000040-s9",
		    "s9"};
		char why[320];

		for (size_t k = 0; k < sizeof(pinned) / sizeof(*pinned); k++) {
			struct fetch_req req = {.version = pinned[k],
						.range_len = 1};

			if (fetch_version_mismatch(&req, 206, &res, &h, why,
						   sizeof(why)))
				FUZZ_ASSERT(memchr(why, '\0', sizeof(why)));
		}
	}
	return 0;
}
