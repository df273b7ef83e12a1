#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

void fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: broken promise: %s\n", file, line, what);
	abort();
}

char *fuzz_str(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	FUZZ_ASSERT(s != NULL);
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

static char tmp_path[64];

static void tmp_remove(void)
{
	unlink(tmp_path);
}

const char *fuzz_file(const uint8_t *data, size_t size)
{
	FILE *f;

	if (!tmp_path[0]) {
		const char *dir = getenv("TMPDIR");
		int fd;

		snprintf(tmp_path, sizeof(tmp_path), "%.40s/wharf-fuzz-XXXXXX",
			 dir && *dir && strlen(dir) <= 40 ? dir : "/tmp");
		fd = mkstemp(tmp_path);
		FUZZ_ASSERT(fd >= 0);
		close(fd);
		atexit(tmp_remove);
	}
	f = fopen(tmp_path, "w");
	FUZZ_ASSERT(f != NULL);
	FUZZ_ASSERT(fwrite(data, 1, size, f) == size);
	FUZZ_ASSERT(fclose(f) == 0);
	return tmp_path;
}
