/* Index files through the public API (wharf_index_open and the calls a
 * loader makes on what it opened), on any bytes: a corrupted or hostile
 * index must fail cleanly, never read outside the file.  When the first
 * byte is odd, the header's own checksum is set right before the rest is
 * written, so that the fuzzer reaches past the checksum into the section
 * bounds; the body checksum is only checked with WHARF_INDEX_VERIFY. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <wharf/loader.h>

#include "fuzz.h"
#include "index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wharf_index_info info = {.size = sizeof(info)};
	wharf_index *idx = NULL;
	uint8_t *buf;
	uint32_t flags;
	uint64_t count;
	int rc;

	if (size < 1)
		return 0;
	flags = data[0] & 2 ? WHARF_INDEX_VERIFY : 0;
	buf = malloc(size);
	FUZZ_ASSERT(buf != NULL);
	memcpy(buf, data + 1, size - 1);
	if ((data[0] & 1) && size - 1 >= INDEX_HEADER_SIZE) {
		struct index_header h;

		memcpy(&h, buf, sizeof(h));
		h.header_hash = index_header_hash(&h);
		memcpy(buf, &h, sizeof(h));
	}
	rc = wharf_index_open(fuzz_file(buf, size - 1), flags, &idx);
	free(buf);
	if (rc) {
		FUZZ_ASSERT(rc < 0 && idx == NULL);
		return 0;
	}
	count = wharf_index_count(idx);
	FUZZ_ASSERT(wharf_index_info(idx, &info) == 0);
	FUZZ_ASSERT(info.count == count);
	(void)wharf_index_verify(idx);
	/* Every sample and every path: each must lie inside the file. */
	for (uint64_t i = 0; i < count && i < 4096; i++) {
		struct wharf_sample s;
		char path[4096];
		int n;

		FUZZ_ASSERT(wharf_index_sample(idx, i, &s) == 0);
		n = wharf_index_path(idx, s.file, path, sizeof(path));
		/* -ERANGE: the path table is corrupt, which only
		 * WHARF_INDEX_VERIFY sees at open. */
		FUZZ_ASSERT(n >= 0 || n == -ENAMETOOLONG || n == -ERANGE);
		FUZZ_ASSERT(n < 0 || (size_t)n == strlen(path));
	}
	FUZZ_ASSERT(wharf_index_sample(idx, count, &(struct wharf_sample){0}) ==
		    -ERANGE);
	(void)wharf_index_path(idx, (uint32_t)wharf_index_num_files(idx),
			       (char[64]){0}, 64);
	wharf_index_close(idx);
	return 0;
}
