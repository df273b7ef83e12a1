#ifndef WHARF_CLI_STATS_FMT_H
#define WHARF_CLI_STATS_FMT_H
/*
 * stats_fmt: a mount's .wharf/stats in lines a person reads, for `wharf
 * stats DIR` (the whole screen) and `wharf cache stats` (a summary under
 * what the cache holds).  One place for these lines, so that both say a
 * thing the same way.
 */
#include <stddef.h>

#define STATS_KV_MAX 512

/* The stats JSON flattened: "origin.requests", "concurrency.0.why". */
struct stats_kv {
	char path[64];
	const char *str; /* a string's value, escaped for a terminal */
	double num;	 /* a number's (true 1, false 0), else NAN */
};

struct stats_doc {
	struct stats_kv kv[STATS_KV_MAX];
	unsigned n;
	char strs[16384]; /* the strings' bytes */
	size_t used;
};

/* Parses the stats text (len bytes) into d.  @return 0, or -EINVAL with
 * *err (malloc'd) saying where it is not a mount's stats. */
int stats_doc_parse(struct stats_doc *d, const char *text, size_t len,
		    char **err);
/* A number of the stats, 0 when absent (an older mount's stats). */
double stats_num(const struct stats_doc *d, const char *path);

/* What a report compares: now, and the last report (or the mount's
 * start: then NULL), dt seconds apart. */
struct stats_span {
	const struct stats_doc *now, *then;
	double dt;
};

/* `wharf stats`' screen; interval > 0: its rates are over the last
 * report's (--watch), else since the mount started. */
void stats_report(const struct stats_span *sp, double interval);
/* The mount's state in a few indented lines (under one that names the
 * mount), counted since it started: its source, reads, memory and disk
 * cache, the disk cache's cap, the origin and its checksums. */
void stats_summary(const struct stats_doc *d);

#endif
