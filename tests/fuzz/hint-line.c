/* Hint lines ("PATH OFFSET LENGTH", control_hint_parse) as a loader or any
 * other process writes them to .wharf/hints, cut into lines as the mount
 * cuts them. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t i = 0;

	while (i < size) {
		const uint8_t *nl = memchr(data + i, '\n', size - i);
		size_t n = (nl ? (size_t)(nl - data) : size) - i;
		/* n bytes and the one the parser may write at line[n]. */
		char *line = malloc(n + 1), *path;
		uint64_t off, len;

		FUZZ_ASSERT(line != NULL);
		memcpy(line, data + i, n);
		if (!control_hint_parse(line, n, "/mnt/w", &path, &off, &len)) {
			FUZZ_ASSERT(path >= line && path <= line + n);
			FUZZ_ASSERT(strlen(path) < n);
		}
		free(line);
		i += n + 1;
	}
	return 0;
}
