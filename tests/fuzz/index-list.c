/* List files for wharf_index_build_list, "PATH [LABEL]" lines and, after a
 * first line "#wharf-list offsets", "PATH OFFSET LENGTH [LABEL]" lines: any
 * bytes must either build an index that opens and verifies, or fail with a
 * message.  Byte 0 odd: stat the files (then every range of a built index
 * must lie inside its file). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wharf/loader.h>

#include "fuzz.h"

static char out[80];

static void out_remove(void)
{
	unlink(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wharf_index *idx = NULL;
	int stat_files, rc;
	const char *list;

	if (size < 1)
		return 0;
	stat_files = data[0] & 1;
	list = fuzz_file(data + 1, size - 1);
	if (!out[0]) {
		snprintf(out, sizeof(out), "%s.idx", list);
		atexit(out_remove);
	}
	rc = wharf_index_build_list(list, stat_files, out);
	if (rc) {
		FUZZ_ASSERT(rc < 0);
		FUZZ_ASSERT(wharf_last_error()[0] != '\0');
		return 0;
	}
	FUZZ_ASSERT(wharf_index_open(out, WHARF_INDEX_VERIFY, &idx) == 0);
	/* No more samples than lines. */
	FUZZ_ASSERT(wharf_index_count(idx) <= size);
	for (uint64_t i = 0; i < wharf_index_count(idx) && i < 4096; i++) {
		struct wharf_sample s;
		char path[4096];
		struct stat st;

		FUZZ_ASSERT(wharf_index_sample(idx, i, &s) == 0);
		FUZZ_ASSERT(s.label >= -1);
		if (!stat_files || s.length == WHARF_LENGTH_UNKNOWN)
			continue;
		if (wharf_index_path(idx, s.file, path, sizeof(path)) < 0 ||
		    stat(path, &st))
			continue;
		FUZZ_ASSERT(s.offset <= (uint64_t)st.st_size);
		FUZZ_ASSERT(s.length <= (uint64_t)st.st_size - s.offset);
	}
	wharf_index_close(idx);
	return 0;
}
