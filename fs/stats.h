#ifndef WHARF_FS_STATS_H
#define WHARF_FS_STATS_H
/*
 * stats: the JSON snapshot behind DIR/.wharf/stats.  Built once when the
 * file is opened, so every read of that open file sees the same numbers.
 *
 * Layout (all counters since the mount started; sizes in bytes):
 *   {"source", "mountpoint", "cache_dir", "pid", "uptime_s", "offline",
 *    "memory_cache": {hits, misses, waits, bytes, cap, evictions},
 *    "disk_cache": {hits, misses, chunks, packs, bytes_on_disk,
 *                   bytes_raw, max_bytes, cap_bytes, evictions, corrupt,
 *                   writes_dropped, cap_lowered},
 *    "origin": {requests, retries, errors, bytes_fetched,
 *               "ttfb_ms": {p50, p90, p99}},
 *    "concurrency": [{host, limit, ceiling, in_flight, waiting, latency_ms,
 *                     throughput_mbs, backoffs, changes,
 *                     last_change_s_ago, why}, ...],
 *    "reads": {count, bytes_served, chunks_loaded, chunks_fetched,
 *              chunk_errors, files, errors_cached, error_ttl_ms},
 *    "passthrough": {on, stopped, opens, backing_files, refused},
 *    "readahead": {queued, loaded, dropped},
 *    "hints": {lines, bad_lines, queued, loaded, cached, dropped, stale,
 *              hits, misses, queue, queue_cap},
 *    "prefetch": {demand_fetches, inflight_bytes, inflight_max,
 *                 inflight_cap, threads, threads_cap},
 *    "tree": {inodes, bytes, skipped_entries}}
 * disk_cache: max_bytes is --cache-size, cap_bytes the cap eviction keeps
 * (less where the cache's filesystem holds less; 0: none); writes_dropped
 * counts chunks not written to disk, cap_lowered the times a full disk
 * lowered cap_bytes (store.h).
 * passthrough: whether the kernel reads cached files itself (see
 * passthrough.h), whether the mount stopped that (--passthrough=auto,
 * when files of one chunk made nearly all opens), the opens it served so,
 * the cache files it holds now, and the ones it refused.
 * errors_cached: reads of a file whose read had failed at the origin less
 * than error_ttl_ms before, answered with that error and no request.
 * offline: true while listings come from the snapshot and reads that need
 * the origin fail (see offline.h).
 * skipped_entries: listing entries left out because no filesystem can show
 * them (see listing_skip()).
 */
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct fetch_engine;
struct store;
struct chunk_cache;
struct prefetch;
struct tree;
struct source;

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
};

/* A malloc'd, NUL-terminated JSON text (ends with a newline) in *out.
 * @return 0 or -ENOMEM. */
int stats_json(const struct stats_sources *s, char **out,
	       size_t *len) WHARF_CHECK;

#endif
