#ifndef WHARF_FS_STATS_H
#define WHARF_FS_STATS_H
/*
 * stats: one snapshot of a mount's counters (stats_take), written as the
 * JSON of DIR/.wharf/stats (stats_json) or as Prometheus text for
 * DIR/.wharf/metrics and --metrics-file (stats_metrics).  Both are written
 * from the same snapshot, so they cannot disagree.  Built once when a file
 * is opened, so every read of that open file sees the same numbers.
 *
 * Layout (all counters since the mount started; sizes in bytes):
 *   {"source", "mountpoint", "cache_dir", "pid", "uptime_s", "offline",
 *    "offline_state",
 *    "outage": {now, since, seconds, waiting, outages, waited, wait_s},
 *    "memory_cache": {hits, misses, waits, bytes, cap, evictions},
 *    "disk_cache": {hits, misses, chunks, packs, bytes_on_disk,
 *                   bytes_raw, max_bytes, cap_bytes, evictions, corrupt,
 *                   writes_dropped, cap_lowered, checked_bytes,
 *                   sealed, vanished},
 *    "origin": {requests, retries, errors, bytes_fetched,
 *               "ttfb_ms": {p50, p90, p99, count}},
 *    "concurrency": [{host, limit, ceiling, in_flight, waiting, latency_ms,
 *                     throughput_mbs, backoffs, changes,
 *                     last_change_s_ago, why}, ...],
 *    "reads": {count, bytes_served, latency_count, latency_sum_s,
 *              latency_over_1s, chunks_loaded, chunks_fetched,
 *              chunk_errors, files, errors_cached, error_ttl_ms},
 *    "passthrough": {on, stopped, opens, bytes, backing_files, refused},
 *    "readahead": {queued, loaded, dropped},
 *    "hints": {lines, bad_lines, queued, loaded, cached, dropped, stale,
 *              hits, misses, queue, queue_cap},
 *    "prefetch": {demand_fetches, inflight_bytes, inflight_max,
 *                 inflight_cap, threads, threads_cap},
 *    "tree": {inodes, bytes, skipped_entries, errors_cached},
 *    "credentials": {renewals, renewal_failures}}
 * disk_cache: max_bytes is --cache-size, cap_bytes the cap eviction keeps
 * (less where the cache's filesystem holds less; 0: none); writes_dropped
 * counts chunks not written to disk, cap_lowered the times a full disk
 * lowered cap_bytes (store.h); checked_bytes the bytes hashed to check
 * chunks and packs read from disk, sealed the loads and opens a seal
 * spared that (store_seal.c), vanished the files the index held that
 * something else removed; corrupt counts the scan's removals at open.
 * passthrough: whether the kernel reads cached files itself (see
 * passthrough.h), whether the mount stopped that (always false since
 * --passthrough=auto keeps opens coming), the opens it served so,
 * the cache files it holds now, and the ones it refused.
 * errors_cached: reads of a file whose read had failed at the origin less
 * than error_ttl_ms before, answered with that error and no request.
 * offline: true while the origin does not answer: offline_state says how,
 * "outage" (reads that need the origin wait for it, up to wait_s) or
 * "snapshot" (listings come from the snapshot and such reads fail; see
 * offline.h); "online" otherwise.  outage: whether one is on now, since
 * when (epoch seconds, 0: none) and for how many seconds, the reads
 * waiting now, the outages since the mount and the reads that waited in
 * them, and --outage-wait (0: reads fail as at any failure).
 * skipped_entries: listing entries left out because no filesystem can show
 * them (see listing_skip()).
 * credentials: renewals of expiring credentials made and failed
 * (creds_renew.h).
 */
#include <stddef.h>
#include <stdint.h>

#include "chunks.h"
#include "compiler.h"
#include "fetch.h"
#include "passthrough.h"
#include "prefetch.h"
#include "store.h"
#include "units.h"

struct fetch_engine;
struct store;
struct chunk_cache;
struct prefetch;
struct tree;
struct source;

/* The read latency histogram's bucket bounds, 50 us to 60 s. */
#define STATS_READ_BUCKETS 18
extern const uint64_t stats_read_le_ns[STATS_READ_BUCKETS];

struct stats_sources {
	struct fetch_engine *fetch;
	struct store *store;
	struct chunk_cache *chunks;
	struct prefetch *prefetch;
	struct tree *tree;
	const char *source_id;
	struct source *source; /* offline_open's, for "offline" */
	const char *mountpoint;
	const char *cache_dir;
	uint64_t started_ns; /* now_ns() at mount */
	/* .wharf/hints lines taken and refused (control.c counts, atomic). */
	uint64_t hint_lines, hint_bad;
	/* Reads (and hints) of files whose last fetch failed, answered with
	 * that error without a request (files.c counts, atomic). */
	uint64_t errors_cached;
	unsigned error_ttl_ms; /* how long such an error stands */
	/* FUSE reads of files by their time from request to reply, as
	 * readers see it (stats_note_read; atomic, per bucket of
	 * stats_read_le_ns, the last one above them all). */
	uint64_t read_in[STATS_READ_BUCKETS + 1];
	uint64_t read_sum_ns;
};

/* Records one read of ns nanoseconds: two atomic additions. */
void stats_note_read(struct stats_sources *s, uint64_t ns);

#define STATS_HOSTS 8 /* origin hosts shown */

/* Everything either form shows, read once. */
struct stats_snapshot {
	const struct stats_sources *src; /* its names and paths */
	uint64_t now_ns;
	double uptime_s;
	bool offline;
	const char *offline_state; /* offline_state_name */
	/* The outage's figures, as "outage" shows them (uint64_t each, for
	 * the metrics' table). */
	uint64_t outage_now, outage_since, outage_waiting, outages,
	    outage_waited, outage_wait_s;
	double outage_s;
	struct fetch_stats fetch;
	struct store_stats store;
	struct chunks_stats chunks;
	struct prefetch_stats prefetch;
	struct passthrough_stats passthrough;
	struct fetch_host_stats hosts[STATS_HOSTS];
	unsigned nhosts;
	uint64_t inodes, tree_bytes, skipped_entries, listing_errors_cached;
	uint64_t hint_lines, hint_bad, errors_cached, error_ttl_ms;
	uint64_t creds_renewals, creds_renew_failures;
	/* Reads at or below each bound (cumulative; the last: all). */
	uint64_t read_le[STATS_READ_BUCKETS + 1];
	uint64_t read_sum_ns;
};

/* Reads every source of s into *out (s must outlive *out). */
void stats_take(const struct stats_sources *s, struct stats_snapshot *out);

/* A malloc'd, NUL-terminated text (ends with a newline) in *out: the
 * JSON above, or the Prometheus text exposition format (version 0.0.4;
 * the metrics and their names are in wharf(1)).  @return 0 or -ENOMEM. */
int stats_json(const struct stats_snapshot *s, char **out,
	       size_t *len) WHARF_CHECK;
int stats_metrics(const struct stats_snapshot *s, char **out,
		  size_t *len) WHARF_CHECK;

#endif
