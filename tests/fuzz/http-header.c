/* Response header lines (fetch_header_line): status lines, ETag,
 * Content-Type, Last-Modified, Content-Length, Content-Encoding and
 * Content-Range, as the origin sends them, each line handed over as curl
 * hands it (not NUL-terminated).  The first 8 bytes are the asked range's
 * offset. */
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
		fetch_header_line(line, n, range_off, &res, &h);
		free(line);
		i += n;
	}
	FUZZ_ASSERT(memchr(res.etag, '\0', sizeof(res.etag)));
	FUZZ_ASSERT(memchr(res.content_type, '\0', sizeof(res.content_type)));
	FUZZ_ASSERT(memchr(h.reason, '\0', sizeof(h.reason)));
	FUZZ_ASSERT(memchr(h.encoding, '\0', sizeof(h.encoding)));
	FUZZ_ASSERT(res.content_length >= -1);
	FUZZ_ASSERT(res.mtime >= 0);
	return 0;
}
