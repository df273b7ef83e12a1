/* runmark: the cache dir's mark of a running mount (see runmark.h). */
#include "config.h"

#include "runmark.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "text.h"

#define RUNMARK_NAME "running"
#define RUNMARK_CAP 8192

/* The value of "KEY VALUE\n" in text, malloc'd, or NULL. */
static char *field(const char *text, const char *key)
{
	const size_t klen = strlen(key);

	for (const char *p = text; p && *p;
	     p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (!strncmp(p, key, klen) && p[klen] == ' ') {
			const char *v = p + klen + 1;

			return strndup(v, strcspn(v, "\n"));
		}
	return NULL;
}

/* The metrics file of a mount that is gone: removed if it is a regular
 * file of ours (lstat: a link put there is left alone). */
static void remove_stale_metrics(const char *path)
{
	struct stat st;

	if (lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return;
	if (unlink(path))
		log_warn("cannot remove %s, the metrics file of that mount: "
			 "%s; remove it, or it shows a dead mount as alive",
			 path, strerror(errno));
	else
		log_info("removed %s, the metrics file of that mount", path);
}

/* What a mark found at start means: the last mount did not end cleanly. */
static void say_unclean(const char *cache_dir, const char *text)
{
	char *pid = field(text, "pid"), *mp = field(text, "mountpoint");
	char *since = field(text, "started"), *metrics = field(text, "metrics");

	log_warn("%s: the last mount of this cache (pid %s on %s, up since "
		 "%s) ended uncleanly: killed, crashed, or the machine went "
		 "down",
		 cache_dir, pid ? pid : "?", mp ? mp : "?",
		 since ? since : "?");
	if (metrics)
		remove_stale_metrics(metrics);
	free(pid);
	free(mp);
	free(since);
	free(metrics);
}

int runmark_take(const char *cache_dir, const char *mountpoint,
		 const char *metrics_file)
{
	char *path = strdupf("%s/" RUNMARK_NAME, cache_dir);
	char *text = NULL, *err = NULL, *mark = NULL, when[32];
	const time_t now = time(NULL);
	size_t len;
	struct tm tm;
	int fd, rc = 0;

	if (!path)
		return -ENOMEM;
	if (!read_file_capped(path, RUNMARK_CAP, &text, &len, &err))
		say_unclean(cache_dir, text);
	free(text);
	free(err);
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* One path a line: a name with a newline is left out. */
	mark = strdupf(
	    "pid %d\nstarted %s\nmountpoint %s\n%s%s%s", (int)getpid(), when,
	    strchr(mountpoint, '\n') ? "?" : mountpoint,
	    metrics_file && !strchr(metrics_file, '\n') ? "metrics " : "",
	    metrics_file && !strchr(metrics_file, '\n') ? metrics_file : "",
	    metrics_file && !strchr(metrics_file, '\n') ? "\n" : "");
	fd = mark ? open(path,
			 O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			 0600)
		  : -1;
	if (!mark) {
		rc = -ENOMEM;
	} else if (fd < 0) {
		rc = -errno;
	} else {
		errno = 0; /* a short write sets none */
		if (write(fd, mark, strlen(mark)) != (ssize_t)strlen(mark))
			rc = errno ? -errno : -ENOSPC;
	}
	if (fd >= 0 && close(fd) && !rc)
		rc = -errno;
	if (rc)
		log_warn("%s: cannot write it: %s; the next mount cannot tell "
			 "whether this one ended cleanly",
			 path, strerror(-rc));
	free(mark);
	free(path);
	return rc;
}

void runmark_clear(const char *cache_dir)
{
	char *path = strdupf("%s/" RUNMARK_NAME, cache_dir);

	if (path && unlink(path) && errno != ENOENT)
		log_warn("%s: cannot remove it: %s; the next mount will take "
			 "this clean end for an unclean one",
			 path, strerror(errno));
	free(path);
}
