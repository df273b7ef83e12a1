/* Size arguments ("64M", "1.5G" refused, "10GiB"; parse_size) as the
 * command line and mount options give them; a size that parses formats
 * back (format_size) within its buffer. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_str(data, size), buf[32];
	uint64_t v;

	if (!parse_size(s, &v)) {
		FUZZ_ASSERT(s[0] >= '0' && s[0] <= '9');
		FUZZ_ASSERT(strlen(format_size(v, buf, sizeof(buf))) <
			    sizeof(buf));
	}
	free(s);
	return 0;
}
