#ifndef WHARF_FS_METRICS_H
#define WHARF_FS_METRICS_H
/*
 * metrics: the --metrics-file writer, a thread that writes the mount's
 * counters in Prometheus' text format (stats_metrics) to one file every
 * interval, for node_exporter's textfile collector.  Each write goes to
 * a new file DIR/.NAME.XXXXXX (mkostemp, no link followed) and is renamed
 * over PATH, so a reader sees a whole snapshot, the last or the one
 * before, never a part, and a link planted in DIR leads nowhere.  The file is removed when the
 * writer stops: a mount that is gone has no numbers to show.
 */
#include "compiler.h"
#include "stats.h"

struct metrics_writer;

/*
 * Writes the file once now, then every interval_ms from a thread of its
 * own, until metrics_writer_stop.  s must outlive the writer.  A
 * directory others may write gets a warning; temporary files a killed
 * writer of PATH left there are removed.
 * @return 0, or -errno with *err set ("cannot write PATH: why";
 * caller frees) when the first write fails.
 */
int metrics_writer_start(const struct stats_sources *s, const char *path,
			 unsigned interval_ms, struct metrics_writer **out,
			 char **err) WHARF_CHECK;
/* Stops the thread (within a moment: it waits on a condition, not a
 * sleep) and removes the file.  NULL: nothing. */
void metrics_writer_stop(struct metrics_writer *mw);

#endif
