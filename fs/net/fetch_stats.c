/* The engine's figures: its counters, the first-byte latency histogram and
 * each host's controller, as fetch_get_stats and fetch_get_hosts read them
 * from any thread. */
#include "config.h"

#include "fetch_i.h"

#include <string.h>

static unsigned hist_bucket(uint64_t ns)
{
	unsigned lg, sub;

	if (ns < HIST_SUB)
		return (unsigned)ns;
	lg = 63 - (unsigned)__builtin_clzll(ns);
	/* two mantissa bits below the leading one */
	sub = (unsigned)(ns >> (lg - 2)) & (HIST_SUB - 1);
	return lg * HIST_SUB + sub;
}

/* Upper bound of a bucket's values, the figure a percentile reports. */
static uint64_t hist_upper(unsigned b)
{
	unsigned lg = b / HIST_SUB, sub = b % HIST_SUB;

	if (lg < 2)
		return b;
	return ((uint64_t)(HIST_SUB + sub + 1) << (lg - 2)) - 1;
}

const uint64_t fetch_ttfb_le_ns[FETCH_TTFB_BUCKETS] = {
    250000,    500000,	   1000000,    2500000,	   5000000,
    10000000,  25000000,   50000000,   100000000,  250000000,
    500000000, 1000000000, 2500000000, 5000000000,
};

/* Atomic adds only: the engine's threads record, any thread reads. */
void fetch_stats_ttfb(struct fetch_engine *fe, uint64_t ttfb_ns)
{
	unsigned b = 0;

	while (b < FETCH_TTFB_BUCKETS && ttfb_ns > fetch_ttfb_le_ns[b])
		b++;
	STAT_ADD(fe->st.hist[hist_bucket(ttfb_ns)], 1);
	STAT_ADD(fe->st.ttfb_le[b], 1);
	STAT_ADD(fe->st.ttfb_sum_ns, ttfb_ns);
}

void fetch_get_stats(struct fetch_engine *fe, struct fetch_stats *out)
{
	uint64_t h[HIST_BUCKETS], total = 0, acc = 0;
	uint64_t want50, want90, want99;
	unsigned i;

	memset(out, 0, sizeof(*out));
	out->requests = STAT_GET(fe->st.requests);
	out->retries = STAT_GET(fe->st.retries);
	out->errors = STAT_GET(fe->st.errors);
	out->gave_up = STAT_GET(fe->st.gave_up);
	out->bytes = STAT_GET(fe->st.bytes);
	out->connects = STAT_GET(fe->st.connects);
	out->hedges = STAT_GET(fe->st.hedges);
	out->hedge_wins = STAT_GET(fe->st.hedge_wins);
	out->ttfb_sum_ns = STAT_GET(fe->st.ttfb_sum_ns);
	for (i = 0; i <= FETCH_TTFB_BUCKETS; i++) {
		acc += STAT_GET(fe->st.ttfb_le[i]);
		out->ttfb_le[i] = acc;
	}
	acc = 0;
	for (i = 0; i < HIST_BUCKETS; i++) {
		h[i] = STAT_GET(fe->st.hist[i]);
		total += h[i];
	}
	if (!total)
		return;
	want50 = (total * 50 + 99) / 100;
	want90 = (total * 90 + 99) / 100;
	want99 = (total * 99 + 99) / 100;
	for (i = 0; i < HIST_BUCKETS; i++) {
		if (!h[i])
			continue;
		acc += h[i];
		if (!out->ttfb_p50_ns && acc >= want50)
			out->ttfb_p50_ns = hist_upper(i);
		if (!out->ttfb_p90_ns && acc >= want90)
			out->ttfb_p90_ns = hist_upper(i);
		if (!out->ttfb_p99_ns && acc >= want99) {
			out->ttfb_p99_ns = hist_upper(i);
			break;
		}
	}
}

/* The controller changes its mind a few times a second at most: the lock
 * costs nothing that matters. */
void fetch_host_publish(struct fetch_engine *fe, struct host *h)
{
	const struct conc *c = &h->conc;
	struct fetch_host_stats *p = &h->pub;
	unsigned i, most = 0;

	pthread_mutex_lock(&fe->lock);
	p->limit = c->limit;
	p->ceiling = c->ceiling;
	p->running = h->running;
	p->waiting = h->waiting;
	p->latency_ns = (uint64_t)c->lat_ns;
	p->throughput = (uint64_t)c->rate;
	p->backoffs = c->backoffs;
	p->changes = c->changes;
	p->changed_ns = c->changed_ns;
	memcpy(p->why, c->why, sizeof(p->why));
	pthread_mutex_unlock(&fe->lock);
	for (i = 0; i < fe->nhosts; i++)
		if (fe->hosts[i].conc.limit > most)
			most = fe->hosts[i].conc.limit;
	__atomic_store_n(&fe->conc_max, most, __ATOMIC_RELAXED);
}

unsigned fetch_get_hosts(struct fetch_engine *fe, struct fetch_host_stats *out,
			 unsigned max)
{
	unsigned n;

	pthread_mutex_lock(&fe->lock);
	n = fe->nhosts < max ? fe->nhosts : max;
	for (unsigned i = 0; i < n; i++)
		out[i] = fe->hosts[i].pub;
	pthread_mutex_unlock(&fe->lock);
	return n;
}

unsigned fetch_concurrency(struct fetch_engine *fe)
{
	unsigned n = __atomic_load_n(&fe->conc_max, __ATOMIC_RELAXED);

	if (n)
		return n;
	return CONC_START < fe->cfg.max_connections ? CONC_START
						    : fe->cfg.max_connections;
}
