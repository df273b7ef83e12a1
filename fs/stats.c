/* The JSON behind DIR/.wharf/stats: see stats.h for the layout. */
#include "config.h"

#include "stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "chunks.h"
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

#define HOSTS_SHOWN 8

/* Opens the kernel served from cache files: their reads never reach the
 * mount, so "reads" does not count them. */
static void put_passthrough(struct jsonw *w)
{
	struct passthrough_stats p;

	passthrough_get_stats(&p);
	jsonw_object(w, "passthrough", JSONW_INLINE);
	jsonw_bool(w, "on", p.offered);
	jsonw_bool(w, "stopped", p.stopped);
	jsonw_u64(w, "opens", p.opens);
	jsonw_u64(w, "backing_files", p.backing);
	jsonw_u64(w, "refused", p.open_errors);
	jsonw_end(w);
}

/* "concurrency": one object per origin host, as its controller last
 * published itself (see fetch.h), on three lines. */
static void put_hosts(struct jsonw *w, struct fetch_engine *fe)
{
	struct fetch_host_stats h[HOSTS_SHOWN];
	const unsigned n = fe ? fetch_get_hosts(fe, h, HOSTS_SHOWN) : 0;
	const uint64_t now = now_ns();

	jsonw_array(w, "concurrency", JSONW_BLOCK);
	for (unsigned i = 0; i < n; i++) {
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
			     (double)(now - h[i].changed_ns) / 1e9, 3);
		jsonw_str(w, "why", h[i].why);
		jsonw_end(w);
	}
	jsonw_end(w);
}

int stats_json(const struct stats_sources *s, char **out, size_t *len)
{
	struct fetch_stats fs = {0};
	struct store_stats ss = {0};
	struct chunks_stats cs = {0};
	struct prefetch_stats ps = {0};
	uint64_t inodes = 0, tree_bytes = 0;
	char *buf = NULL;
	size_t n = 0;
	struct jsonw w;
	FILE *f;

	if (s->fetch)
		fetch_get_stats(s->fetch, &fs);
	if (s->store)
		store_get_stats(s->store, &ss);
	if (s->chunks)
		chunks_get_stats(s->chunks, &cs);
	if (s->prefetch)
		prefetch_get_stats(s->prefetch, &ps);
	if (s->tree)
		tree_usage(s->tree, &inodes, &tree_bytes);

	f = open_memstream(&buf, &n);
	if (!f)
		return -ENOMEM;
	jsonw_init(&w, f);
	jsonw_object(&w, NULL, JSONW_BLOCK);
	jsonw_str(&w, "source", s->source_id);
	jsonw_str(&w, "mountpoint", s->mountpoint);
	jsonw_str(&w, "cache_dir", s->cache_dir);
	/* `wharf umount` waits for this process to be gone. */
	jsonw_i64(&w, "pid", getpid());
	jsonw_double(&w, "uptime_s", (double)(now_ns() - s->started_ns) / 1e9,
		     3);
	jsonw_bool(&w, "offline", offline_is_offline(s->source));

	jsonw_object(&w, "memory_cache", JSONW_INLINE);
	jsonw_u64(&w, "hits", cs.hits);
	jsonw_u64(&w, "misses", cs.misses);
	jsonw_u64(&w, "waits", cs.waits);
	jsonw_u64(&w, "bytes", cs.bytes);
	jsonw_u64(&w, "cap", cs.cap);
	jsonw_u64(&w, "evictions", cs.evictions);
	jsonw_u64(&w, "read_whole", cs.read_whole);
	jsonw_u64(&w, "buffers_reused", cs.reused);
	jsonw_u64(&w, "buffers_kept", cs.pool_bytes);
	jsonw_end(&w);

	jsonw_object(&w, "disk_cache", JSONW_INLINE);
	jsonw_u64(&w, "hits", ss.hits);
	jsonw_u64(&w, "misses", ss.misses);
	jsonw_u64(&w, "chunks", ss.chunks);
	jsonw_u64(&w, "packs", ss.packs);
	jsonw_u64(&w, "bytes_on_disk", ss.bytes_on_disk);
	jsonw_u64(&w, "bytes_raw", ss.bytes_raw);
	jsonw_u64(&w, "max_bytes", ss.max_bytes);
	jsonw_u64(&w, "evictions", ss.evictions);
	jsonw_u64(&w, "corrupt", ss.corrupt);
	jsonw_end(&w);

	jsonw_object(&w, "origin", JSONW_INLINE);
	jsonw_u64(&w, "requests", fs.requests);
	jsonw_u64(&w, "retries", fs.retries);
	jsonw_u64(&w, "errors", fs.errors);
	jsonw_u64(&w, "gave_up", fs.gave_up);
	jsonw_u64(&w, "bytes_fetched", fs.bytes);
	jsonw_u64(&w, "hedges", fs.hedges);
	jsonw_u64(&w, "hedge_wins", fs.hedge_wins);
	jsonw_object(&w, "ttfb_ms", JSONW_INLINE);
	jsonw_double(&w, "p50", ms(fs.ttfb_p50_ns), 3);
	jsonw_double(&w, "p90", ms(fs.ttfb_p90_ns), 3);
	jsonw_double(&w, "p99", ms(fs.ttfb_p99_ns), 3);
	jsonw_end(&w);
	jsonw_end(&w);

	put_hosts(&w, s->fetch);

	jsonw_object(&w, "reads", JSONW_INLINE);
	jsonw_u64(&w, "count", ps.reads);
	jsonw_u64(&w, "bytes_served", ps.bytes_served);
	jsonw_u64(&w, "chunks_loaded", ps.chunks_loaded);
	jsonw_u64(&w, "chunks_fetched", ps.chunks_fetched);
	jsonw_u64(&w, "chunk_errors", ps.chunk_errors);
	jsonw_u64(&w, "files", ps.files);
	jsonw_u64(&w, "errors_cached",
		  __atomic_load_n(&s->errors_cached, __ATOMIC_RELAXED));
	jsonw_u64(&w, "error_ttl_ms", s->error_ttl_ms);
	jsonw_end(&w);

	put_passthrough(&w);

	jsonw_object(&w, "readahead", JSONW_INLINE);
	jsonw_u64(&w, "queued", ps.ra_queued);
	jsonw_u64(&w, "loaded", ps.ra_loaded);
	jsonw_u64(&w, "dropped", ps.ra_dropped);
	jsonw_u64(&w, "behind", ps.ra_behind);
	jsonw_end(&w);

	jsonw_object(&w, "hints", JSONW_INLINE);
	jsonw_u64(&w, "lines",
		  __atomic_load_n(&s->hint_lines, __ATOMIC_RELAXED));
	jsonw_u64(&w, "bad_lines",
		  __atomic_load_n(&s->hint_bad, __ATOMIC_RELAXED));
	jsonw_u64(&w, "queued", ps.hint_queued);
	jsonw_u64(&w, "loaded", ps.hint_loaded);
	jsonw_u64(&w, "cached", ps.hint_cached);
	jsonw_u64(&w, "dropped", ps.hint_dropped);
	jsonw_u64(&w, "stale", ps.hint_stale);
	jsonw_u64(&w, "hits", ps.hint_hits);
	jsonw_u64(&w, "misses", ps.hint_misses);
	jsonw_u64(&w, "queue", ps.hint_queue);
	jsonw_u64(&w, "queue_cap", ps.hint_queue_cap);
	jsonw_u64(&w, "reached", ps.hint_reached);
	jsonw_u64(&w, "kernel_had", ps.kernel_had);
	jsonw_u64(&w, "kernel_lost", ps.kernel_lost);
	jsonw_end(&w);

	jsonw_object(&w, "prefetch", JSONW_INLINE);
	jsonw_u64(&w, "demand_fetches", ps.demand_fetches);
	jsonw_u64(&w, "inflight_bytes", ps.inflight);
	jsonw_u64(&w, "inflight_max", ps.inflight_max);
	jsonw_u64(&w, "inflight_cap", ps.inflight_cap);
	jsonw_u64(&w, "threads", ps.threads);
	jsonw_u64(&w, "threads_cap", ps.threads_cap);
	jsonw_u64(&w, "loads", ps.loads);
	jsonw_u64(&w, "loads_max", ps.loads_max);
	jsonw_u64(&w, "loads_cap", ps.loads_cap);
	jsonw_end(&w);

	jsonw_object(&w, "tree", JSONW_INLINE);
	jsonw_u64(&w, "inodes", inodes);
	jsonw_u64(&w, "bytes", tree_bytes);
	jsonw_u64(&w, "skipped_entries", listing_skipped());
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
