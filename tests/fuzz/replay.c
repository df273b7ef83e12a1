/*
 * The regression half of a fuzz target: a main() that feeds
 * LLVMFuzzerTestOneInput every file of tests/fuzz/corpus/NAME and
 * tests/fuzz/regress/NAME, NAME being the program's name after
 * "fuzz-replay-".  Built by make check with any compiler; a crash, a
 * sanitizer report or a broken promise fails it, and so does a corpus
 * directory that is missing or empty (nothing would be tested).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define INPUT_MAX (4u << 20)

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	size_t n;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	buf = malloc(INPUT_MAX);
	if (!buf) {
		fclose(f);
		return -1;
	}
	n = fread(buf, 1, INPUT_MAX, f);
	fclose(f);
	/* A copy of exactly n bytes, so that ASan sees a read past the end. */
	{
		uint8_t *exact = malloc(n ? n : 1);

		if (!exact) {
			free(buf);
			return -1;
		}
		memcpy(exact, buf, n);
		free(buf);
		LLVMFuzzerTestOneInput(exact, n);
		free(exact);
	}
	return 0;
}

/* @return the number of files replayed, or -1. */
static int replay_dir(const char *dir, int must_exist)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int count = 0;

	if (!d) {
		if (must_exist || errno != ENOENT) {
			fprintf(stderr, "%s: %s\n", dir, strerror(errno));
			return -1;
		}
		return 0;
	}
	while ((e = readdir(d))) {
		char path[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (replay_file(path)) {
			closedir(d);
			return -1;
		}
		count++;
	}
	closedir(d);
	return count;
}

int main(int argc, char **argv)
{
	const char *src = getenv("WHARF_SRCDIR"), *name;
	char dir[4096];
	int seeds, regress;

	name = strrchr(argv[0], '/');
	name = name ? name + 1 : argv[0];
	if (!strncmp(name, "lt-", 3))
		name += 3;
	if (strncmp(name, "fuzz-replay-", 12) || !src) {
		fprintf(stderr,
			"%s: run as fuzz-replay-NAME with "
			"WHARF_SRCDIR set (make check does)\n",
			argv[0]);
		return 1;
	}
	name += 12;
	snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", src, name);
	seeds = replay_dir(dir, 1);
	snprintf(dir, sizeof(dir), "%s/tests/fuzz/regress/%s", src, name);
	regress = seeds < 0 ? -1 : replay_dir(dir, 0);
	if (seeds <= 0 || regress < 0) {
		fprintf(
		    stderr,
		    "%s: a corpus directory is missing, empty or unreadable\n",
		    name);
		return 1;
	}
	printf("%s: %d seed and %d regression inputs replayed\n", name, seeds,
	       regress);
	return 0;
}
