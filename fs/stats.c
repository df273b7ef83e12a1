/* The JSON behind DIR/.wharf/stats: see stats.h for the layout. */
#include "config.h"

#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chunks.h"
#include "creds_renew.h"
#include "fetch.h"
#include "jsonw.h"
#include "listing.h"
#include "offline.h"
#include "passthrough.h"
#include "prefetch.h"
#include "store.h"
#include "tree.h"

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* Opens the kernel served from cache files: their reads never reach the
 * mount, so "reads" does not count them. */
static void put_passthrough(struct jsonw *w, const struct passthrough_stats *p)
{
	jsonw_object(w, "passthrough", JSONW_INLINE);
	jsonw_bool(w, "on", p->offered);
	jsonw_bool(w, "stopped", p->stopped);
	jsonw_u64(w, "opens", p->opens);
	jsonw_u64(w, "bytes", p->bytes);
	jsonw_u64(w, "backing_files", p->backing);
	jsonw_u64(w, "refused", p->open_errors);
	jsonw_end(w);
}

/* "concurrency": one object per origin host, as its controller last
 * published itself (see fetch.h), on three lines. */
static void put_hosts(struct jsonw *w, const struct stats_snapshot *s)
{
	const struct fetch_host_stats *h = s->hosts;

	jsonw_array(w, "concurrency", JSONW_BLOCK);
	for (unsigned i = 0; i < s->nhosts; i++) {
		jsonw_object(w, NULL, JSONW_INLINE);
		jsonw_str(w, "host", h[i].host);
		jsonw_u64(w, "limit", h[i].limit);
		jsonw_u64(w, "ceiling", h[i].ceiling);
		jsonw_u64(w, "in_flight", h[i].running);
		jsonw_u64(w, "waiting", h[i].waiting);
		jsonw_break(w);
		jsonw_double(w, "latency_ms", ms(h[i].latency_ns), 3);
		jsonw_double(w, "throughput_mbs", (double)h[i].throughput / 1e6,
			     3);
		jsonw_u64(w, "backoffs", h[i].backoffs);
		jsonw_u64(w, "changes", h[i].changes);
		jsonw_break(w);
		jsonw_double(w, "last_change_s_ago",
			     (double)(s->now_ns - h[i].changed_ns) / 1e9, 3);
		jsonw_str(w, "why", h[i].why);
		jsonw_end(w);
	}
	jsonw_end(w);
}

/* The bucket whose bound is 1 s. */
#define READ_LE_1S 13

const uint64_t stats_read_le_ns[STATS_READ_BUCKETS] = {
    50000,     100000,	  250000,      500000,	    1000000,
    2500000,   5000000,	  10000000,    25000000,    50000000,
    100000000, 250000000, 500000000,   1000000000,  2500000000,
    5000000000, 10000000000, 60000000000,
};

void stats_note_read(struct stats_sources *s, uint64_t ns)
{
	unsigned b = 0;

	/* A short scan: most reads stop in the first few buckets. */
	while (b < STATS_READ_BUCKETS && ns > stats_read_le_ns[b])
		b++;
	__atomic_fetch_add(&s->read_in[b], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->read_sum_ns, ns, __ATOMIC_RELAXED);
}

/* Where the mount stands towards its origin (offline.h). */
static void offline_snapshot(struct source *src, struct stats_snapshot *out)
{
	struct offline_status os;

	offline_status(src, &os);
	out->offline = os.state != OFFLINE_NO;
	out->offline_state = offline_state_name(os.state);
	out->outage_now = os.outage.hosts > 0;
	out->outage_since = (uint64_t)os.outage.since_unix;
	out->outage_s = os.outage.since_ns
			    ? (double)(out->now_ns - os.outage.since_ns) / 1e9
			    : 0;
	out->outage_waiting = os.outage.waiting;
	out->outages = os.outage.outages;
	out->outage_waited = os.outage.waited;
	out->outage_wait_s = os.outage.wait_ms / 1000;
}

void stats_take(const struct stats_sources *s, struct stats_snapshot *out)
{
	uint64_t acc = 0;

	memset(out, 0, sizeof(*out));
	out->src = s;
	out->now_ns = now_ns();
	out->uptime_s = (double)(out->now_ns - s->started_ns) / 1e9;
	offline_snapshot(s->source, out);
	if (s->fetch) {
		fetch_get_stats(s->fetch, &out->fetch);
		out->nhosts =
		    fetch_get_hosts(s->fetch, out->hosts, STATS_HOSTS);
	}
	if (s->store)
		store_get_stats(s->store, &out->store);
	if (s->chunks)
		chunks_get_stats(s->chunks, &out->chunks);
	if (s->prefetch)
		prefetch_get_stats(s->prefetch, &out->prefetch);
	if (s->tree) {
		tree_usage(s->tree, &out->inodes, &out->tree_bytes);
		out->listing_errors_cached = tree_errors_cached(s->tree);
	}
	passthrough_get_stats(&out->passthrough);
	out->skipped_entries = listing_skipped();
	creds_renew_counts(&out->creds_renewals, &out->creds_renew_failures);
	out->hint_lines = __atomic_load_n(&s->hint_lines, __ATOMIC_RELAXED);
	out->hint_bad = __atomic_load_n(&s->hint_bad, __ATOMIC_RELAXED);
	out->errors_cached =
	    __atomic_load_n(&s->errors_cached, __ATOMIC_RELAXED);
	out->error_ttl_ms = s->error_ttl_ms;
	for (unsigned b = 0; b <= STATS_READ_BUCKETS; b++) {
		acc += __atomic_load_n(&s->read_in[b], __ATOMIC_RELAXED);
		out->read_le[b] = acc;
	}
	out->read_sum_ns = __atomic_load_n(&s->read_sum_ns, __ATOMIC_RELAXED);
}

int stats_json(const struct stats_snapshot *s, char **out, size_t *len)
{
	const struct fetch_stats *const fs = &s->fetch;
	const struct store_stats *const ss = &s->store;
	const struct chunks_stats *const cs = &s->chunks;
	const struct prefetch_stats *const ps = &s->prefetch;
	char *buf = NULL;
	size_t n = 0;
	struct jsonw w;
	FILE *f;

	f = open_memstream(&buf, &n);
	if (!f)
		return -ENOMEM;
	jsonw_init(&w, f);
	jsonw_object(&w, NULL, JSONW_BLOCK);
	jsonw_str(&w, "source", s->src->source_id);
	jsonw_str(&w, "mountpoint", s->src->mountpoint);
	jsonw_str(&w, "cache_dir", s->src->cache_dir);
	/* `wharf umount` waits for this process to be gone. */
	jsonw_i64(&w, "pid", getpid());
	jsonw_double(&w, "uptime_s", s->uptime_s, 3);
	jsonw_bool(&w, "offline", s->offline);
	jsonw_str(&w, "offline_state", s->offline_state);
	jsonw_object(&w, "outage", JSONW_INLINE);
	jsonw_bool(&w, "now", s->outage_now);
	jsonw_u64(&w, "since", s->outage_since);
	jsonw_double(&w, "seconds", s->outage_s, 3);
	jsonw_u64(&w, "waiting", s->outage_waiting);
	jsonw_u64(&w, "outages", s->outages);
	jsonw_u64(&w, "waited", s->outage_waited);
	jsonw_u64(&w, "wait_s", s->outage_wait_s);
	jsonw_end(&w);

	jsonw_object(&w, "memory_cache", JSONW_INLINE);
	jsonw_u64(&w, "hits", cs->hits);
	jsonw_u64(&w, "misses", cs->misses);
	jsonw_u64(&w, "waits", cs->waits);
	jsonw_u64(&w, "bytes", cs->bytes);
	jsonw_u64(&w, "cap", cs->cap);
	jsonw_u64(&w, "evictions", cs->evictions);
	jsonw_u64(&w, "read_whole", cs->read_whole);
	jsonw_u64(&w, "buffers_reused", cs->reused);
	jsonw_u64(&w, "buffers_kept", cs->pool_bytes);
	jsonw_end(&w);

	jsonw_object(&w, "disk_cache", JSONW_INLINE);
	jsonw_u64(&w, "hits", ss->hits);
	jsonw_u64(&w, "misses", ss->misses);
	jsonw_u64(&w, "chunks", ss->chunks);
	jsonw_u64(&w, "packs", ss->packs);
	jsonw_u64(&w, "bytes_on_disk", ss->bytes_on_disk);
	jsonw_u64(&w, "bytes_raw", ss->bytes_raw);
	jsonw_u64(&w, "max_bytes", ss->max_bytes);
	jsonw_u64(&w, "cap_bytes", ss->cap_bytes);
	jsonw_u64(&w, "evictions", ss->evictions);
	jsonw_u64(&w, "corrupt", ss->corrupt);
	jsonw_u64(&w, "writes_dropped", ss->writes_dropped);
	jsonw_u64(&w, "cap_lowered", ss->cap_lowered);
	jsonw_u64(&w, "checked_bytes", ss->checked_bytes);
	jsonw_u64(&w, "sealed", ss->sealed);
	jsonw_u64(&w, "vanished", ss->vanished);
	jsonw_end(&w);

	jsonw_object(&w, "origin", JSONW_INLINE);
	jsonw_u64(&w, "requests", fs->requests);
	jsonw_u64(&w, "retries", fs->retries);
	jsonw_u64(&w, "errors", fs->errors);
	jsonw_u64(&w, "gave_up", fs->gave_up);
	jsonw_u64(&w, "bytes_fetched", fs->bytes);
	jsonw_u64(&w, "hedges", fs->hedges);
	jsonw_u64(&w, "hedge_wins", fs->hedge_wins);
	jsonw_object(&w, "ttfb_ms", JSONW_INLINE);
	jsonw_double(&w, "p50", ms(fs->ttfb_p50_ns), 3);
	jsonw_double(&w, "p90", ms(fs->ttfb_p90_ns), 3);
	jsonw_double(&w, "p99", ms(fs->ttfb_p99_ns), 3);
	jsonw_u64(&w, "count", fs->ttfb_le[FETCH_TTFB_BUCKETS]);
	jsonw_end(&w);
	jsonw_end(&w);

	put_hosts(&w, s);

	jsonw_object(&w, "reads", JSONW_INLINE);
	jsonw_u64(&w, "count", ps->reads);
	jsonw_u64(&w, "bytes_served", ps->bytes_served);
	jsonw_u64(&w, "latency_count", s->read_le[STATS_READ_BUCKETS]);
	jsonw_double(&w, "latency_sum_s", (double)s->read_sum_ns / 1e9, 6);
	jsonw_u64(&w, "latency_over_1s",
		  s->read_le[STATS_READ_BUCKETS] - s->read_le[READ_LE_1S]);
	jsonw_u64(&w, "chunks_loaded", ps->chunks_loaded);
	jsonw_u64(&w, "chunks_fetched", ps->chunks_fetched);
	jsonw_u64(&w, "chunk_errors", ps->chunk_errors);
	jsonw_u64(&w, "files", ps->files);
	jsonw_u64(&w, "errors_cached", s->errors_cached);
	jsonw_u64(&w, "error_ttl_ms", s->error_ttl_ms);
	jsonw_end(&w);

	put_passthrough(&w, &s->passthrough);

	jsonw_object(&w, "readahead", JSONW_INLINE);
	jsonw_u64(&w, "queued", ps->ra_queued);
	jsonw_u64(&w, "loaded", ps->ra_loaded);
	jsonw_u64(&w, "dropped", ps->ra_dropped);
	jsonw_u64(&w, "behind", ps->ra_behind);
	jsonw_end(&w);

	jsonw_object(&w, "hints", JSONW_INLINE);
	jsonw_u64(&w, "lines", s->hint_lines);
	jsonw_u64(&w, "bad_lines", s->hint_bad);
	jsonw_u64(&w, "queued", ps->hint_queued);
	jsonw_u64(&w, "loaded", ps->hint_loaded);
	jsonw_u64(&w, "cached", ps->hint_cached);
	jsonw_u64(&w, "dropped", ps->hint_dropped);
	jsonw_u64(&w, "stale", ps->hint_stale);
	jsonw_u64(&w, "hits", ps->hint_hits);
	jsonw_u64(&w, "misses", ps->hint_misses);
	jsonw_u64(&w, "queue", ps->hint_queue);
	jsonw_u64(&w, "queue_cap", ps->hint_queue_cap);
	jsonw_u64(&w, "reached", ps->hint_reached);
	jsonw_u64(&w, "kernel_had", ps->kernel_had);
	jsonw_u64(&w, "kernel_lost", ps->kernel_lost);
	jsonw_end(&w);

	jsonw_object(&w, "prefetch", JSONW_INLINE);
	jsonw_u64(&w, "demand_fetches", ps->demand_fetches);
	jsonw_u64(&w, "inflight_bytes", ps->inflight);
	jsonw_u64(&w, "inflight_max", ps->inflight_max);
	jsonw_u64(&w, "inflight_cap", ps->inflight_cap);
	jsonw_u64(&w, "threads", ps->threads);
	jsonw_u64(&w, "threads_cap", ps->threads_cap);
	jsonw_u64(&w, "loads", ps->loads);
	jsonw_u64(&w, "loads_max", ps->loads_max);
	jsonw_u64(&w, "loads_cap", ps->loads_cap);
	jsonw_end(&w);

	jsonw_object(&w, "origin_checksums", JSONW_INLINE);
	jsonw_u64(&w, "checked", ps->sums_checked);
	jsonw_u64(&w, "mismatches", ps->sums_bad);
	jsonw_u64(&w, "repaired", ps->sums_repaired);
	jsonw_u64(&w, "failed", ps->sums_failed);
	jsonw_u64(&w, "etag_not_md5", ps->sums_etag_not_md5);
	jsonw_u64(&w, "unchecked", ps->sums_unchecked);
	jsonw_end(&w);

	jsonw_object(&w, "tree", JSONW_INLINE);
	jsonw_u64(&w, "inodes", s->inodes);
	jsonw_u64(&w, "bytes", s->tree_bytes);
	jsonw_u64(&w, "skipped_entries", s->skipped_entries);
	jsonw_u64(&w, "errors_cached", s->listing_errors_cached);
	jsonw_end(&w);

	jsonw_object(&w, "credentials", JSONW_INLINE);
	jsonw_u64(&w, "renewals", s->creds_renewals);
	jsonw_u64(&w, "renewal_failures", s->creds_renew_failures);
	jsonw_end(&w);
	jsonw_end(&w);
	if (fclose(f)) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = n;
	return 0;
}

/*
 * The metrics: each a number of the snapshot, named by the Prometheus
 * conventions (a unit in the name, _total for counters) and described by
 * its HELP line, which ends with the JSON member it is.
 */
enum metric_type { COUNTER, GAUGE };

#define SNAP(field) offsetof(struct stats_snapshot, field)

static const struct metric {
	const char *name;
	enum metric_type type;
	size_t at; /* a uint64_t in struct stats_snapshot */
	const char *help;
} metrics[] = {
    {"memory_cache_hits_total", COUNTER, SNAP(chunks.hits),
     "Chunk lookups the memory cache answered (memory_cache.hits)."},
    {"memory_cache_misses_total", COUNTER, SNAP(chunks.misses),
     "Chunk lookups the memory cache did not hold (memory_cache.misses)."},
    {"memory_cache_waits_total", COUNTER, SNAP(chunks.waits),
     "Lookups that waited for a load in flight (memory_cache.waits)."},
    {"memory_cache_bytes", GAUGE, SNAP(chunks.bytes),
     "Bytes of chunks in the memory cache (memory_cache.bytes)."},
    {"memory_cache_capacity_bytes", GAUGE, SNAP(chunks.cap),
     "The memory cache's cap, --memory-cache (memory_cache.cap)."},
    {"memory_cache_evictions_total", COUNTER, SNAP(chunks.evictions),
     "Chunks the memory cache let go for room (memory_cache.evictions)."},
    {"disk_cache_hits_total", COUNTER, SNAP(store.hits),
     "Chunk loads the disk cache answered (disk_cache.hits)."},
    {"disk_cache_misses_total", COUNTER, SNAP(store.misses),
     "Chunk loads the disk cache did not hold (disk_cache.misses)."},
    {"disk_cache_chunks", GAUGE, SNAP(store.chunks),
     "Chunks in the disk cache (disk_cache.chunks)."},
    {"disk_cache_packs", GAUGE, SNAP(store.packs),
     "Packs in the disk cache (disk_cache.packs)."},
    {"disk_cache_bytes", GAUGE, SNAP(store.bytes_on_disk),
     "Bytes the disk cache takes on disk (disk_cache.bytes_on_disk)."},
    {"disk_cache_raw_bytes", GAUGE, SNAP(store.bytes_raw),
     "Bytes of data the disk cache holds, uncompressed "
     "(disk_cache.bytes_raw)."},
    {"disk_cache_capacity_bytes", GAUGE, SNAP(store.max_bytes),
     "The disk cache's cap, --cache-size (disk_cache.max_bytes)."},
    {"disk_cache_evictions_total", COUNTER, SNAP(store.evictions),
     "Chunks evicted from the disk cache (disk_cache.evictions)."},
    {"disk_cache_corrupt_total", COUNTER, SNAP(store.corrupt),
     "Chunk files found corrupt and dropped (disk_cache.corrupt)."},
    {"disk_cache_effective_capacity_bytes", GAUGE, SNAP(store.cap_bytes),
     "The cap eviction keeps now: --cache-size or what the filesystem "
     "holds, the smaller; 0: none (disk_cache.cap_bytes)."},
    {"disk_cache_writes_dropped_total", COUNTER, SNAP(store.writes_dropped),
     "Chunks not cached on disk: no room even after eviction, or a write "
     "error (disk_cache.writes_dropped)."},
    {"disk_cache_cap_lowered_total", COUNTER, SNAP(store.cap_lowered),
     "Times a full filesystem lowered the cap (disk_cache.cap_lowered)."},
    {"origin_requests_total", COUNTER, SNAP(fetch.requests),
     "Requests sent to the origin, retries included (origin.requests)."},
    {"origin_retries_total", COUNTER, SNAP(fetch.retries),
     "Requests to the origin that were retries (origin.retries)."},
    {"origin_errors_total", COUNTER, SNAP(fetch.errors),
     "Fetches that failed after their retries (origin.errors)."},
    {"origin_gave_up_total", COUNTER, SNAP(fetch.gave_up),
     "Read-ahead fetches that failed after their retries; a reader that "
     "needed the chunk fetched it itself (origin.gave_up)."},
    {"origin_outage", GAUGE, SNAP(outage_now),
     "1 while the origin does not answer and reads that need it wait "
     "(outage.now)."},
    {"origin_outage_start_timestamp_seconds", GAUGE, SNAP(outage_since),
     "When the outage now on began, in seconds since the epoch; 0: none "
     "(outage.since)."},
    {"origin_outage_waiting_reads", GAUGE, SNAP(outage_waiting),
     "Reads waiting for the origin now (outage.waiting)."},
    {"origin_outages_total", COUNTER, SNAP(outages),
     "Times the origin stopped answering (outage.outages)."},
    {"origin_outage_waited_reads_total", COUNTER, SNAP(outage_waited),
     "Reads that waited for the origin in an outage (outage.waited)."},
    {"origin_outage_wait_seconds", GAUGE, SNAP(outage_wait_s),
     "How long a read waits for an origin that does not answer, "
     "--outage-wait (outage.wait_s)."},
    {"origin_received_bytes_total", COUNTER, SNAP(fetch.bytes),
     "Body bytes received from the origin (origin.bytes_fetched)."},
    {"origin_hedges_total", COUNTER, SNAP(fetch.hedges),
     "Second requests sent for late ones (origin.hedges)."},
    {"origin_hedge_wins_total", COUNTER, SNAP(fetch.hedge_wins),
     "Second requests that answered first (origin.hedge_wins)."},
    {"reads_total", COUNTER, SNAP(prefetch.reads),
     "Reads the mount served, not counting passthrough (reads.count)."},
    {"read_bytes_total", COUNTER, SNAP(prefetch.bytes_served),
     "Bytes the mount's reads returned (reads.bytes_served)."},
    {"chunks_loaded_total", COUNTER, SNAP(prefetch.chunks_loaded),
     "Chunk loads done, from disk or origin (reads.chunks_loaded)."},
    {"chunks_fetched_total", COUNTER, SNAP(prefetch.chunks_fetched),
     "Chunk loads done from the origin (reads.chunks_fetched)."},
    {"chunk_errors_total", COUNTER, SNAP(prefetch.chunk_errors),
     "Chunk loads that failed (reads.chunk_errors)."},
    {"files_tracked", GAUGE, SNAP(prefetch.files),
     "Files read whose read state the mount keeps now (reads.files)."},
    {"errors_cached_total", COUNTER, SNAP(errors_cached),
     "Reads answered with a failure that stood, without a request "
     "(reads.errors_cached)."},
    {"passthrough_opens_total", COUNTER, SNAP(passthrough.opens),
     "Opens the kernel served from cache files itself "
     "(passthrough.opens)."},
    {"passthrough_bytes_total", COUNTER, SNAP(passthrough.bytes),
     "The sizes of the files those opens handed to the kernel: what "
     "readers may read without the mount seeing it (passthrough.bytes)."},
    {"passthrough_backing_files", GAUGE, SNAP(passthrough.backing),
     "Cache files handed to the kernel now (passthrough.backing_files)."},
    {"passthrough_refused_total", COUNTER, SNAP(passthrough.open_errors),
     "Cache files the kernel refused (passthrough.refused)."},
    {"readahead_queued_total", COUNTER, SNAP(prefetch.ra_queued),
     "Chunks queued by read-ahead (readahead.queued)."},
    {"readahead_loaded_total", COUNTER, SNAP(prefetch.ra_loaded),
     "Chunks read-ahead loaded (readahead.loaded)."},
    {"readahead_dropped_total", COUNTER, SNAP(prefetch.ra_dropped),
     "Read-ahead chunks dropped before loading (readahead.dropped)."},
    {"hint_lines_total", COUNTER, SNAP(hint_lines),
     "Hint lines taken (hints.lines)."},
    {"hint_bad_lines_total", COUNTER, SNAP(hint_bad),
     "Hint lines refused (hints.bad_lines)."},
    {"hint_hits_total", COUNTER, SNAP(prefetch.hint_hits),
     "Reads of hinted files that found the chunk loaded or loading "
     "(hints.hits)."},
    {"hint_misses_total", COUNTER, SNAP(prefetch.hint_misses),
     "Reads of hinted files that fetched the chunk themselves "
     "(hints.misses)."},
    {"demand_fetches_total", COUNTER, SNAP(prefetch.demand_fetches),
     "Chunks a reader fetched from the origin itself "
     "(prefetch.demand_fetches)."},
    {"prefetch_inflight_bytes", GAUGE, SNAP(prefetch.inflight),
     "Bytes the read-ahead pool is loading now "
     "(prefetch.inflight_bytes)."},
    {"prefetch_threads", GAUGE, SNAP(prefetch.threads),
     "Read-ahead pool threads started (prefetch.threads)."},
    {"origin_checksums_checked_total", COUNTER, SNAP(prefetch.sums_checked),
     "Objects whose bytes matched the origin's checksum "
     "(origin_checksums.checked)."},
    {"origin_checksum_mismatches_total", COUNTER, SNAP(prefetch.sums_bad),
     "Objects whose bytes did not match the origin's checksum "
     "(origin_checksums.mismatches)."},
    {"origin_checksum_repaired_total", COUNTER,
     SNAP(prefetch.sums_repaired),
     "Mismatched objects that matched when fetched again from the origin "
     "(origin_checksums.repaired)."},
    {"origin_checksum_failed_total", COUNTER, SNAP(prefetch.sums_failed),
     "Objects that mismatched again from the origin: reads fail "
     "(origin_checksums.failed)."},
    {"origin_checksum_etag_not_md5_total", COUNTER,
     SNAP(prefetch.sums_etag_not_md5),
     "S3 ETags that looked like an MD5 and were not "
     "(origin_checksums.etag_not_md5)."},
    {"origin_checksums_unchecked_total", COUNTER,
     SNAP(prefetch.sums_unchecked),
     "Objects read whole with no checksum to check them against "
     "(origin_checksums.unchecked)."},
    {"credential_renewals_total", COUNTER, SNAP(creds_renewals),
     "Renewals of expiring credentials, AWS, GCS or Azure "
     "(credentials.renewals)."},
    {"credential_renewal_failures_total", COUNTER,
     SNAP(creds_renew_failures),
     "Renewals of expiring credentials that failed, each retried "
     "(credentials.renewal_failures)."},
    {"tree_inodes", GAUGE, SNAP(inodes),
     "Files and directories listed so far (tree.inodes)."},
    {"tree_bytes", GAUGE, SNAP(tree_bytes),
     "Memory the listed tree takes (tree.bytes)."},
    {"tree_errors_cached_total", COUNTER, SNAP(listing_errors_cached),
     "Lookups and listings of a directory answered with its listing's "
     "recent origin error without a request (tree.errors_cached)."},
};

/* Per origin host, from "concurrency". */
static const struct host_metric {
	const char *name;
	enum metric_type type;
	size_t at; /* in struct fetch_host_stats */
	bool u32;
	double scale;
	const char *help;
} host_metrics[] = {
#define HOST(f) offsetof(struct fetch_host_stats, f)
    {"origin_concurrency_limit", GAUGE, HOST(limit), true, 1,
     "Requests the host may have in flight (concurrency.limit)."},
    {"origin_concurrency_ceiling", GAUGE, HOST(ceiling), true, 1,
     "The most it may reach, --max-connections (concurrency.ceiling)."},
    {"origin_in_flight_requests", GAUGE, HOST(running), true, 1,
     "Requests in flight now (concurrency.in_flight)."},
    {"origin_waiting_requests", GAUGE, HOST(waiting), true, 1,
     "Requests waiting for a place (concurrency.waiting)."},
    {"origin_latency_seconds", GAUGE, HOST(latency_ns), false, 1e-9,
     "Average time to the first byte lately (concurrency.latency_ms)."},
    {"origin_throughput_bytes_per_second", GAUGE, HOST(throughput), false, 1,
     "Bytes per second received lately (concurrency.throughput_mbs)."},
    {"origin_backoffs_total", COUNTER, HOST(backoffs), false, 1,
     "Times the limit was lowered (concurrency.backoffs)."},
    {"origin_concurrency_changes_total", COUNTER, HOST(changes), false, 1,
     "Times the limit changed (concurrency.changes)."},
#undef HOST
};

/* A label value: backslash, double quote and newline escaped. */
static void put_label(FILE *f, const char *name, const char *v)
{
	fprintf(f, "%s=\"", name);
	for (; v && *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

static void put_head(FILE *f, const char *name, const char *type,
		     const char *help)
{
	fprintf(f, "# HELP wharf_%s %s\n# TYPE wharf_%s %s\n", name, help, name,
		type);
}

/* "wharf_NAME{mountpoint="..."" with the brace left open. */
static void put_sample(FILE *f, const struct stats_snapshot *s,
		       const char *name)
{
	fprintf(f, "wharf_%s{", name);
	put_label(f, "mountpoint", s->src->mountpoint);
}

static const char *type_name(enum metric_type t)
{
	return t == COUNTER ? "counter" : "gauge";
}

/* A histogram, buckets in seconds: n bounds le_ns and n + 1 cumulative
 * counts (the last: all). */
static void put_histogram(FILE *f, const struct stats_snapshot *s,
			  const char *name, const char *help,
			  const uint64_t *le_ns, unsigned n,
			  const uint64_t *cumulative, uint64_t sum_ns)
{
	char sample[64];

	put_head(f, name, "histogram", help);
	snprintf(sample, sizeof(sample), "%s_bucket", name);
	for (unsigned b = 0; b <= n; b++) {
		put_sample(f, s, sample);
		if (b < n)
			fprintf(f, ",le=\"%g\"} %" PRIu64 "\n",
				(double)le_ns[b] / 1e9, cumulative[b]);
		else
			fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n",
				cumulative[b]);
	}
	snprintf(sample, sizeof(sample), "%s_sum", name);
	put_sample(f, s, sample);
	fprintf(f, "} %.9f\n", (double)sum_ns / 1e9);
	snprintf(sample, sizeof(sample), "%s_count", name);
	put_sample(f, s, sample);
	fprintf(f, "} %" PRIu64 "\n", cumulative[n]);
}

static void put_host_metrics(FILE *f, const struct stats_snapshot *s)
{
	for (size_t m = 0; s->nhosts && m < ARRAY_SIZE(host_metrics); m++) {
		const struct host_metric *hm = &host_metrics[m];

		put_head(f, hm->name, type_name(hm->type), hm->help);
		for (unsigned i = 0; i < s->nhosts; i++) {
			const char *p = (const char *)&s->hosts[i] + hm->at;
			double v = hm->u32 ? *(const unsigned *)p
					   : (double)*(const uint64_t *)p;

			put_sample(f, s, hm->name);
			fputc(',', f);
			put_label(f, "host", s->hosts[i].host);
			fprintf(f, "} %.17g\n", v * hm->scale);
		}
	}
}

int stats_metrics(const struct stats_snapshot *s, char **out, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return -ENOMEM;
	put_head(f, "mount_info", "gauge",
		 "Always 1; names the mount's source and cache directory.");
	put_sample(f, s, "mount_info");
	fputc(',', f);
	put_label(f, "source", s->src->source_id);
	fputc(',', f);
	put_label(f, "cache_dir", s->src->cache_dir);
	fputs("} 1\n", f);
	put_head(f, "build_info", "gauge",
		 "Always 1; names the version of wharf that runs the mount.");
	put_sample(f, s, "build_info");
	fputc(',', f);
	put_label(f, "version", PACKAGE_VERSION);
	fputs("} 1\n", f);
	put_head(f, "uptime_seconds", "gauge",
		 "Seconds since the mount started (uptime_s).");
	put_sample(f, s, "uptime_seconds");
	fprintf(f, "} %.3f\n", s->uptime_s);
	put_head(f, "offline", "gauge",
		 "1 while the origin does not answer: reads that need it "
		 "wait (an outage) or, from the snapshot, fail (offline).");
	put_sample(f, s, "offline");
	fprintf(f, "} %d\n", s->offline);
	put_head(f, "passthrough_enabled", "gauge",
		 "1 while the kernel reads cached files itself "
		 "(passthrough.on).");
	put_sample(f, s, "passthrough_enabled");
	fprintf(f, "} %d\n", s->passthrough.offered);
	for (size_t i = 0; i < ARRAY_SIZE(metrics); i++) {
		const struct metric *m = &metrics[i];

		put_head(f, m->name, type_name(m->type), m->help);
		put_sample(f, s, m->name);
		fprintf(f, "} %" PRIu64 "\n",
			*(const uint64_t *)((const char *)s + m->at));
	}
	put_histogram(f, s, "origin_ttfb_seconds",
		      "Time to the first byte of successful origin requests "
		      "(origin.ttfb_ms).",
		      fetch_ttfb_le_ns, FETCH_TTFB_BUCKETS, s->fetch.ttfb_le,
		      s->fetch.ttfb_sum_ns);
	put_histogram(f, s, "read_latency_seconds",
		      "Time from a reader's FUSE read of a file to its reply, "
		      "not counting passthrough (reads.latency_sum_s).",
		      stats_read_le_ns, STATS_READ_BUCKETS, s->read_le,
		      s->read_sum_ns);
	put_host_metrics(f, s);
	if (fclose(f)) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = n;
	return 0;
}
