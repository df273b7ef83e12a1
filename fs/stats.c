/* The JSON behind DIR/.wharf/stats: see stats.h for the layout. */
#include "config.h"

#include "stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "chunks.h"
#include "fetch.h"
#include "listing.h"
#include "offline.h"
#include "passthrough.h"
#include "prefetch.h"
#include "store.h"
#include "tree.h"

static void put_str(FILE *f, const char *key, const char *s)
{
	fprintf(f, "  \"%s\": ", key);
	json_put_str(f, s);
	fputs(",\n", f);
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

#define HOSTS_SHOWN 8

/* "concurrency": one object per origin host, as its controller last
 * published itself (see fetch.h). */
/* Opens the kernel served from cache files: their reads never reach the
 * mount, so "reads" does not count them. */
static void put_passthrough(FILE *f)
{
	struct passthrough_stats p;

	passthrough_get_stats(&p);
	fprintf(
	    f,
	    "  \"passthrough\": {\"on\": %s, \"stopped\": %s, "
	    "\"opens\": %llu, \"backing_files\": %llu, \"refused\": %llu},\n",
	    p.offered ? "true" : "false", p.stopped ? "true" : "false",
	    (unsigned long long)p.opens, (unsigned long long)p.backing,
	    (unsigned long long)p.open_errors);
}

static void put_hosts(FILE *f, struct fetch_engine *fe)
{
	struct fetch_host_stats h[HOSTS_SHOWN];
	const unsigned n = fe ? fetch_get_hosts(fe, h, HOSTS_SHOWN) : 0;
	const uint64_t now = now_ns();

	fputs("  \"concurrency\": [", f);
	for (unsigned i = 0; i < n; i++) {
		fprintf(f, "%s\n    {\"host\": ", i ? "," : "");
		json_put_str(f, h[i].host);
		fprintf(f,
			", \"limit\": %u, \"ceiling\": %u, "
			"\"in_flight\": %u, \"waiting\": %u,\n     "
			"\"latency_ms\": %.3f, \"throughput_mbs\": %.3f, "
			"\"backoffs\": %llu, \"changes\": %llu,\n     "
			"\"last_change_s_ago\": %.3f, \"why\": ",
			h[i].limit, h[i].ceiling, h[i].running, h[i].waiting,
			ms(h[i].latency_ns), (double)h[i].throughput / 1e6,
			(unsigned long long)h[i].backoffs,
			(unsigned long long)h[i].changes,
			(double)(now - h[i].changed_ns) / 1e9);
		json_put_str(f, h[i].why);
		fputs("}", f);
	}
	fputs(n ? "\n  ],\n" : "],\n", f);
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
	fputs("{\n", f);
	put_str(f, "source", s->source_id);
	put_str(f, "mountpoint", s->mountpoint);
	put_str(f, "cache_dir", s->cache_dir);
	/* `wharf umount` waits for this process to be gone. */
	fprintf(f, "  \"pid\": %d,\n", (int)getpid());
	fprintf(f, "  \"uptime_s\": %.3f,\n",
		(double)(now_ns() - s->started_ns) / 1e9);
	fprintf(f, "  \"offline\": %s,\n",
		offline_is_offline(s->source) ? "true" : "false");
	fprintf(f,
		"  \"memory_cache\": {\"hits\": %llu, \"misses\": %llu, "
		"\"waits\": %llu, \"bytes\": %llu, \"cap\": %llu, "
		"\"evictions\": %llu, \"read_whole\": %llu, "
		"\"buffers_reused\": %llu, \"buffers_kept\": %llu},\n",
		(unsigned long long)cs.hits, (unsigned long long)cs.misses,
		(unsigned long long)cs.waits, (unsigned long long)cs.bytes,
		(unsigned long long)cs.cap, (unsigned long long)cs.evictions,
		(unsigned long long)cs.read_whole,
		(unsigned long long)cs.reused,
		(unsigned long long)cs.pool_bytes);
	fprintf(
	    f,
	    "  \"disk_cache\": {\"hits\": %llu, \"misses\": %llu, "
	    "\"chunks\": %llu, \"packs\": %llu, \"bytes_on_disk\": %llu, "
	    "\"bytes_raw\": %llu, \"max_bytes\": %llu, "
	    "\"evictions\": %llu, \"corrupt\": %llu},\n",
	    (unsigned long long)ss.hits, (unsigned long long)ss.misses,
	    (unsigned long long)ss.chunks, (unsigned long long)ss.packs,
	    (unsigned long long)ss.bytes_on_disk,
	    (unsigned long long)ss.bytes_raw, (unsigned long long)ss.max_bytes,
	    (unsigned long long)ss.evictions, (unsigned long long)ss.corrupt);
	fprintf(f,
		"  \"origin\": {\"requests\": %llu, \"retries\": %llu, "
		"\"errors\": %llu, \"bytes_fetched\": %llu, "
		"\"hedges\": %llu, \"hedge_wins\": %llu, "
		"\"ttfb_ms\": {\"p50\": %.3f, \"p90\": %.3f, "
		"\"p99\": %.3f}},\n",
		(unsigned long long)fs.requests, (unsigned long long)fs.retries,
		(unsigned long long)fs.errors, (unsigned long long)fs.bytes,
		(unsigned long long)fs.hedges,
		(unsigned long long)fs.hedge_wins, ms(fs.ttfb_p50_ns),
		ms(fs.ttfb_p90_ns), ms(fs.ttfb_p99_ns));
	put_hosts(f, s->fetch);
	fprintf(
	    f,
	    "  \"reads\": {\"count\": %llu, \"bytes_served\": %llu, "
	    "\"chunks_loaded\": %llu, \"chunks_fetched\": %llu, "
	    "\"chunk_errors\": %llu, \"files\": %llu},\n",
	    (unsigned long long)ps.reads, (unsigned long long)ps.bytes_served,
	    (unsigned long long)ps.chunks_loaded,
	    (unsigned long long)ps.chunks_fetched,
	    (unsigned long long)ps.chunk_errors, (unsigned long long)ps.files);
	put_passthrough(f);
	fprintf(f,
		"  \"readahead\": {\"queued\": %llu, \"loaded\": %llu, "
		"\"dropped\": %llu, \"behind\": %llu},\n",
		(unsigned long long)ps.ra_queued,
		(unsigned long long)ps.ra_loaded,
		(unsigned long long)ps.ra_dropped,
		(unsigned long long)ps.ra_behind);
	fprintf(
	    f,
	    "  \"hints\": {\"lines\": %llu, \"bad_lines\": %llu, "
	    "\"queued\": %llu, \"loaded\": %llu, \"cached\": %llu, "
	    "\"dropped\": %llu, \"stale\": %llu, \"hits\": %llu, "
	    "\"misses\": %llu, \"queue\": %llu, \"queue_cap\": %llu, "
	    "\"reached\": %llu, \"kernel_had\": %llu, \"kernel_lost\": "
	    "%llu},\n",
	    (unsigned long long)__atomic_load_n(&s->hint_lines,
						__ATOMIC_RELAXED),
	    (unsigned long long)__atomic_load_n(&s->hint_bad, __ATOMIC_RELAXED),
	    (unsigned long long)ps.hint_queued,
	    (unsigned long long)ps.hint_loaded,
	    (unsigned long long)ps.hint_cached,
	    (unsigned long long)ps.hint_dropped,
	    (unsigned long long)ps.hint_stale, (unsigned long long)ps.hint_hits,
	    (unsigned long long)ps.hint_misses,
	    (unsigned long long)ps.hint_queue,
	    (unsigned long long)ps.hint_queue_cap,
	    (unsigned long long)ps.hint_reached,
	    (unsigned long long)ps.kernel_had,
	    (unsigned long long)ps.kernel_lost);
	fprintf(
	    f,
	    "  \"prefetch\": {\"demand_fetches\": %llu, "
	    "\"inflight_bytes\": %llu, \"inflight_max\": %llu, "
	    "\"inflight_cap\": %llu, \"threads\": %llu, "
	    "\"threads_cap\": %llu, \"loads\": %llu, "
	    "\"loads_max\": %llu, \"loads_cap\": %llu},\n",
	    (unsigned long long)ps.demand_fetches,
	    (unsigned long long)ps.inflight,
	    (unsigned long long)ps.inflight_max,
	    (unsigned long long)ps.inflight_cap, (unsigned long long)ps.threads,
	    (unsigned long long)ps.threads_cap, (unsigned long long)ps.loads,
	    (unsigned long long)ps.loads_max, (unsigned long long)ps.loads_cap);
	fprintf(f,
		"  \"tree\": {\"inodes\": %llu, \"bytes\": %llu, "
		"\"skipped_entries\": %llu}\n}\n",
		(unsigned long long)inodes, (unsigned long long)tree_bytes,
		(unsigned long long)listing_skipped());
	if (fclose(f)) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = n;
	return 0;
}
