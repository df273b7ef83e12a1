/* Index files through the public API (wharf_index_open and the calls a
 * loader makes on what it opened), on any bytes: a corrupted or hostile
 * index must fail cleanly, never read outside the file.  When the first
 * byte is odd, the header's own checksum is set right before the rest is
 * written, so that the fuzzer reaches past the checksum into the section
 * bounds; the body checksum is only checked with WHARF_INDEX_VERIFY. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <wharf/loader.h>

#include "fuzz.h"
#include "index.h"

/* The fields (tar shards' members), as the accessors and a loader's
 * field lookup see them: inside the arrays, or refused. */
static void fields(wharf_index *w, uint64_t count,
		   const struct wharf_index_info *info)
{
	const struct index *idx = (const struct index *)(void *)w;
	bool *want = calloc(info->num_field_names + 1, sizeof(*want));

	FUZZ_ASSERT(want != NULL);
	for (uint32_t k = 0; k < info->num_field_names; k++) {
		const char *name = wharf_index_field_name(w, k);

		FUZZ_ASSERT(name != NULL);
		want[k] = k % 2 == 0;
	}
	FUZZ_ASSERT(wharf_index_field_name(w, info->num_field_names) == NULL);
	for (uint64_t i = 0; i < count && i < 4096; i++) {
		uint32_t n = wharf_index_num_fields(w, i);
		struct wharf_field f;

		for (uint32_t k = 0; k < n && k < 64; k++) {
			int rc = wharf_index_field(w, i, k, &f);

			FUZZ_ASSERT(rc == 0 || rc == -EINVAL);
			FUZZ_ASSERT(rc || f.name != NULL);
		}
		FUZZ_ASSERT(wharf_index_field(w, i, n, &f) != 0);
		int64_t pick = index_field_pick(idx, want, i);
		FUZZ_ASSERT(pick == -EINVAL || pick == -ENOENT ||
			    (pick >= 0 && (uint64_t)pick < idx->nfields));
	}
	free(want);
}

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
	fields(idx, count, &info);
	(void)wharf_index_path(idx, (uint32_t)wharf_index_num_files(idx),
			       (char[64]){0}, 64);
	wharf_index_close(idx);
	return 0;
}
