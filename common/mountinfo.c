/* mountinfo: parsing /proc/self/mountinfo (see mountinfo.h). */
#include "config.h"

#include "mountinfo.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unescapes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_mountinfo(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] &&
		    s[3]) {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

int mountinfo_find(const char *dir, char dev[32], char type[64])
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char mnt[PATH_MAX], d[32], fstype[64];
		const char *sep;

		/* id parent major:minor root mountpoint opts ... - type */
		if (sscanf(line, "%*s %*s %31s %*s %4095s", d, mnt) != 2)
			continue;
		sep = strstr(line, " - ");
		if (!sep || sscanf(sep + 3, "%63s", fstype) != 1)
			continue;
		unescape_mountinfo(mnt);
		if (strcmp(mnt, dir))
			continue;
		found = 1;
		snprintf(dev, 32, "%s", d);
		snprintf(type, 64, "%s", fstype);
	}
	free(line);
	fclose(f);
	return found;
}
