/* The --metrics-file writer: see metrics.h. */
#include "config.h"

#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "text.h"

struct metrics_writer {
	const struct stats_sources *src;
	char *path, *tmp;
	unsigned interval_ms;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	bool stop;	   /* under mu */
	bool failing;	   /* the last write failed (logged once) */
};

/*
 * One snapshot written to tmp and renamed over path.  No fsync: the file
 * is rewritten in seconds, and a reader needs only the rename's atomicity.
 * The mode lets the collector, often another user, read it.
 */
static int write_once(struct metrics_writer *mw, char **err)
{
	struct stats_snapshot snap;
	char *text = NULL;
	size_t len = 0, off = 0;
	int fd, rc;

	stats_take(mw->src, &snap);
	rc = stats_metrics(&snap, &text, &len);
	if (rc) {
		err_set(err, "cannot write %s: %s", mw->path, strerror(-rc));
		return rc;
	}
	fd = open(mw->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
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
	if (!rc && rename(mw->tmp, mw->path))
		rc = -errno;
	if (rc) {
		unlink(mw->tmp);
		err_set(err, "cannot write %s: %s", mw->path, strerror(-rc));
	}
	free(text);
	return rc;
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
	free(mw->tmp);
	free(mw);
}

int metrics_writer_start(const struct stats_sources *s, const char *path,
			 unsigned interval_ms, struct metrics_writer **out,
			 char **err)
{
	struct metrics_writer *mw = calloc(1, sizeof(*mw));
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	if (!mw)
		return -ENOMEM;
	mw->src = s;
	mw->interval_ms = interval_ms ? interval_ms : 1;
	mw->path = strdup(path);
	mw->tmp = strdupf("%s.tmp", path);
	pthread_mutex_init(&mw->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&mw->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (!mw->path || !mw->tmp) {
		writer_free(mw);
		return -ENOMEM;
	}
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
