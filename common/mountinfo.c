/* mountinfo: parsing /proc/self/mountinfo (see mountinfo.h). */
#include "config.h"

#include "mountinfo.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

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

/* Calls match on each entry of the mount table of process pid (0: this
 * one), in order; the last entry it accepts is copied to *out.
 * @return 1 found, 0 not, -errno. */
static int scan(pid_t pid,
		bool (*match)(const struct mountinfo_entry *, const void *),
		const void *ctx, struct mountinfo_entry *out)
{
	char table[64], *line = NULL;
	size_t cap = 0;
	int found = 0;
	FILE *f;

	if (pid > 0)
		snprintf(table, sizeof(table), "/proc/%d/mountinfo", (int)pid);
	else
		snprintf(table, sizeof(table), "/proc/self/mountinfo");
	f = fopen(table, "re");

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		struct mountinfo_entry e;
		const char *sep;

		/* id parent major:minor root mountpoint opts ... - type */
		if (sscanf(line, "%*s %*s %31s %*s %4095s", e.dev, e.mnt) != 2)
			continue;
		sep = strstr(line, " - ");
		if (!sep || sscanf(sep + 3, "%63s", e.type) != 1)
			continue;
		unescape_mountinfo(e.mnt);
		if (match(&e, ctx)) {
			found = 1;
			*out = e;
		}
	}
	free(line);
	fclose(f);
	return found;
}

static bool at_dir(const struct mountinfo_entry *e, const void *dir)
{
	return !strcmp(e->mnt, dir);
}

static bool of_dev(const struct mountinfo_entry *e, const void *dev)
{
	return !strcmp(e->dev, dev);
}

int mountinfo_find(const char *dir, char dev[32], char type[64])
{
	return mountinfo_find_pid(0, dir, dev, type);
}

int mountinfo_find_pid(pid_t pid, const char *dir, char dev[32],
		       char type[64])
{
	struct mountinfo_entry e;
	int rc = scan(pid, at_dir, dir, &e);

	if (rc == 1) {
		snprintf(dev, 32, "%s", e.dev);
		snprintf(type, 64, "%s", e.type);
	}
	return rc;
}

int mountinfo_of_dev(dev_t dev, struct mountinfo_entry *out)
{
	char d[32];

	snprintf(d, sizeof(d), "%u:%u", major(dev), minor(dev));
	return scan(0, of_dev, d, out);
}
