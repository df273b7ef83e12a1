/* Listing snapshots (snapshot_load) as a later mount reads them from its
 * cache dir, which another program or a damaged disk may have written.
 * When the first byte is odd, the end line ("end ENTRIES HASH") is made
 * for the rest, so that the fuzzer reaches past the checksum into the
 * records; then every directory lists and every entry is found again. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log.h"
#include "snapshot.h"
#include "store.h"

#define HASH_SEED 0x11571ull /* snapshot.c's */

/* An entry of the root listing is found again by its name (the first of
 * that name: a listing may repeat one, and the tree keeps one). */
static int stat_again(void *arg, const struct source_object *o)
{
	struct source_object again;

	FUZZ_ASSERT(o->name && o->version);
	FUZZ_ASSERT(snapshot_stat(arg, o->name, &again) == 0);
	FUZZ_ASSERT(!strcmp(again.name, o->name));
	return 0;
}

/* data, and the end line snapshot.c would write for it. */
static char *with_end(const uint8_t *data, size_t size, size_t *len)
{
	char *text = malloc(size + 64);
	size_t n = size, ents = 0;

	FUZZ_ASSERT(text != NULL);
	memcpy(text, data, size);
	if (!n || text[n - 1] != '\n')
		text[n++] = '\n';
	for (size_t i = 0; i < n; i++)
		if ((i == 0 || text[i - 1] == '\n') && i + 1 < n &&
		    (text[i] == 'd' || text[i] == 'f') && text[i + 1] == ' ')
			ents++;
	n += (size_t)snprintf(text + n, 64, "end %zu %016" PRIx64 "\n", ents,
			      store_hash64(text, n, HASH_SEED));
	*len = n;
	return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snapshot *s = NULL;
	struct snapshot_info info;
	struct source_object o;
	char *err = NULL, *text = NULL;
	const char *path;
	size_t len;
	int rc;

	if (size < 1)
		return 0;
	log_set_level(WHARF_LOG_ERROR);
	if (data[0] & 1) {
		text = with_end(data + 1, size - 1, &len);
		path = fuzz_file((const uint8_t *)text, len);
		free(text);
	} else {
		path = fuzz_file(data + 1, size - 1);
	}
	rc = snapshot_load(path, NULL, &s, &err);
	free(err);
	if (rc) {
		FUZZ_ASSERT(rc < 0 && s == NULL);
		return 0;
	}
	snapshot_info(s, &info);
	FUZZ_ASSERT(info.source != NULL);
	rc = snapshot_list(s, "", stat_again, s);
	FUZZ_ASSERT(rc == 0 || rc == -ENOENT);
	(void)snapshot_stat(s, "a/b", &o);
	(void)snapshot_stat(s, "", &o);
	snapshot_free(s);
	return 0;
}
