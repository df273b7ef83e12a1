/* What listing.h and source.h promise about every entry a parser hands
 * on. */
#include "config.h"

#include <string.h>

#include "checksum.h"
#include "fuzz.h"
#include "listing.h"
#include "source.h"

int fuzz_check_entry(void *arg, const struct listing_entry *e)
{
	size_t n = strlen(e->name);

	FUZZ_ASSERT(n <= LISTING_NAME_MAX);
	if (!e->bad) {
		FUZZ_ASSERT(n > 0);
		FUZZ_ASSERT(!strchr(e->name, '/'));
		FUZZ_ASSERT(!e->has_size || e->size <= (uint64_t)INT64_MAX);
	}
	(*(size_t *)arg)++;
	return 0;
}

int fuzz_check_object(void *arg, const struct source_object *o)
{
	/* Names with '/' go on: the tree names them and leaves them out. */
	FUZZ_ASSERT(o->bad || o->size <= (uint64_t)INT64_MAX);
	FUZZ_ASSERT(!o->is_dir || o->size == 0);
	FUZZ_ASSERT(o->version != NULL);
	/* a checksum handed on is one the mount can parse */
	if (o->digest && *o->digest) {
		struct checksum c;

		FUZZ_ASSERT(checksum_parse(o->digest, &c) == 0);
	}
	(*(size_t *)arg) += strlen(o->name) > 0;
	return 0;
}

const char *fuzz_list_prefix(uint8_t pick)
{
	static const char *const prefixes[] = {"", "data/", "a/b/"};

	return prefixes[pick % 3];
}
