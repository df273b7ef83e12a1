/* The --metrics-file writer: see metrics.h. */
#include "config.h"

#include "metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "text.h"

struct metrics_writer {
	const struct stats_sources *src;
	char *path;
	char *tmp_template; /* DIR/.NAME.XXXXXX, for mkostemp */
	unsigned interval_ms;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	bool stop;	   /* under mu */
	bool failing;	   /* the last write failed (logged once) */
};

/*
 * One snapshot written to a new file of its own beside path and renamed
 * over it.  The directory may be one others write (node_exporter's is
 * often group-writable): mkostemp's O_EXCL creates a fresh file and
 * follows no link planted under the name, and rename replaces the name,
 * not what a link there points at.  No fsync: the file is rewritten in
 * seconds, and a reader needs only the rename's atomicity.  The mode lets
 * the collector, often another user, read it.
 */
static int write_once(struct metrics_writer *mw, char **err)
{
	struct stats_snapshot snap;
	char *text = NULL, *tmp = NULL;
	size_t len = 0, off = 0;
	int fd = -1, rc;

	stats_take(mw->src, &snap);
	rc = stats_metrics(&snap, &text, &len);
	if (!rc) {
		tmp = strdup(mw->tmp_template);
		rc = tmp ? 0 : -ENOMEM;
	}
	if (!rc) {
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0)
			rc = -errno;
	}
	if (!rc && fchmod(fd, 0644))
		rc = -errno;
	while (!rc && off < len) {
		const ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (fd >= 0 && close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, mw->path))
		rc = -errno;
	if (rc && fd >= 0)
		unlink(tmp);
	if (rc)
		err_set(err, "cannot write %s: %s", mw->path, strerror(-rc));
	free(tmp);
	free(text);
	return rc;
}

/*
 * The temporary files an earlier writer of path left when it was killed
 * between mkostemp and rename: only names of our own pattern, only
 * regular files of this process's user (a link planted under such a name
 * is left, and unlinkat would remove the link, never its target).
 */
static void remove_leftovers(const struct metrics_writer *mw)
{
	const char *slash = strrchr(mw->tmp_template, '/');
	const char *prefix = slash + 1; /* ".NAME." */
	const size_t plen = strlen(prefix) - 6;
	char *dir = strndup(
	    mw->tmp_template,
	    slash == mw->tmp_template ? 1 : (size_t)(slash - mw->tmp_template));
	const int dfd =
	    dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	struct stat st;

	if (!d && dfd >= 0)
		close(dfd);
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, prefix, plen) ||
		    strlen(de->d_name) != plen + 6 ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		if (!unlinkat(dfd, de->d_name, 0))
			log_info("metrics: removed %s/%s, left by a mount "
				 "that was killed while writing",
				 dir, de->d_name);
	}
	if (d)
		closedir(d);
	free(dir);
}

static void *writer_main(void *arg)
{
	struct metrics_writer *mw = arg;
	struct timespec due;

	clock_gettime(CLOCK_MONOTONIC, &due);
	pthread_mutex_lock(&mw->mu);
	while (!mw->stop) {
		char *err = NULL;

		due.tv_sec += mw->interval_ms / 1000;
		due.tv_nsec += (long)(mw->interval_ms % 1000) * 1000000;
		if (due.tv_nsec >= 1000000000) {
			due.tv_sec++;
			due.tv_nsec -= 1000000000;
		}
		while (!mw->stop && pthread_cond_timedwait(&mw->cv, &mw->mu,
							   &due) != ETIMEDOUT)
			;
		if (mw->stop)
			break;
		pthread_mutex_unlock(&mw->mu);
		/* A full or read-only disk fails every write: one line when it
		 * starts, one when it ends. */
		if (write_once(mw, &err)) {
			if (!mw->failing)
				log_warn("metrics: %s (retried every %u ms)",
					 err, mw->interval_ms);
			mw->failing = true;
		} else if (mw->failing) {
			log_info("metrics: %s written again", mw->path);
			mw->failing = false;
		}
		free(err);
		pthread_mutex_lock(&mw->mu);
	}
	pthread_mutex_unlock(&mw->mu);
	return NULL;
}

static void writer_free(struct metrics_writer *mw)
{
	pthread_cond_destroy(&mw->cv);
	pthread_mutex_destroy(&mw->mu);
	free(mw->path);
	free(mw->tmp_template);
	free(mw);
}

int metrics_writer_start(const struct stats_sources *s, const char *path,
			 unsigned interval_ms, struct metrics_writer **out,
			 char **err)
{
	struct metrics_writer *mw = calloc(1, sizeof(*mw));
	const char *slash = strrchr(path, '/');
	pthread_condattr_t ca;
	char *open_to_others;
	int rc;

	*out = NULL;
	if (!mw)
		return -ENOMEM;
	mw->src = s;
	mw->interval_ms = interval_ms ? interval_ms : 1;
	mw->path = strdup(path);
	/* In the target's directory, so that rename never crosses a
	 * filesystem. */
	mw->tmp_template = slash ? strdupf("%.*s/.%s.XXXXXX",
					   (int)(slash - path), path, slash + 1)
				 : strdupf("./.%s.XXXXXX", path);
	pthread_mutex_init(&mw->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&mw->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (!mw->path || !mw->tmp_template) {
		writer_free(mw);
		return -ENOMEM;
	}
	open_to_others = dir_open_to_others(path);
	if (open_to_others)
		log_warn("--metrics-file %s: %s: another user can replace the "
			 "numbers there; make the directory writable by its "
			 "owner alone (chmod go-w) or give it the sticky bit "
			 "(chmod +t)",
			 path, open_to_others);
	free(open_to_others);
	remove_leftovers(mw);
	rc = write_once(mw, err);
	if (!rc) {
		rc = -pthread_create(&mw->th, NULL, writer_main, mw);
		if (rc) {
			unlink(mw->path);
			err_set(err, "cannot start the metrics writer: %s",
				strerror(-rc));
		}
	}
	if (rc) {
		writer_free(mw);
		return rc;
	}
	*out = mw;
	return 0;
}

void metrics_writer_stop(struct metrics_writer *mw)
{
	if (!mw)
		return;
	pthread_mutex_lock(&mw->mu);
	mw->stop = true;
	pthread_cond_signal(&mw->cv);
	pthread_mutex_unlock(&mw->mu);
	pthread_join(mw->th, NULL);
	unlink(mw->path);
	writer_free(mw);
}
