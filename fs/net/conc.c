/* The per-host concurrency controller: see conc.h for what it does. */
#include "config.h"

#include "conc.h"

#include <stdio.h>
#include <string.h>

#define MS 1000000ull
/* An epoch lasts two request durations, so that requests started after a
 * change finish inside the next one, within these bounds. */
#define EPOCH_MIN_NS (100 * MS)
#define EPOCH_MAX_NS (2000 * MS)
#define EPOCH_FIRST_NS (200 * MS)
/* A rise is a rate this much above the best recent one: less is noise. */
#define RISE 1.05
/* The best rate fades so that a lucky epoch long ago does not make every
 * later one look flat. */
#define BEST_DECAY 0.97
/* Saturated epochs without a rise before a probe. */
#define PROBE_AFTER 3
/* Growth goes back to doubling after this long without a refusal. */
#define QUIET_NS (5000 * MS)
/* Moving averages take 1/8 of each new sample. */
#define EWMA 0.125

void conc_init(struct conc *c, unsigned ceiling, uint64_t now_ns)
{
	memset(c, 0, sizeof(*c));
	c->ceiling = ceiling ? ceiling : 1;
	c->limit = CONC_START < c->ceiling ? CONC_START : c->ceiling;
	c->slow_start = true;
	c->epoch_ns = now_ns;
	c->changed_ns = now_ns;
	snprintf(c->why, sizeof(c->why), "start: %u requests until measured",
		 c->limit);
}

static void ewma(double *avg, double sample)
{
	*avg = *avg > 0 ? *avg + (sample - *avg) * EWMA : sample;
}

void conc_done(struct conc *c, uint64_t lat_ns, uint64_t dur_ns, uint64_t bytes)
{
	if (lat_ns)
		ewma(&c->lat_ns, (double)lat_ns);
	if (dur_ns)
		ewma(&c->dur_ns, (double)dur_ns);
	ewma(&c->req_bytes, (double)bytes);
}

/* Sets the limit (clamped to [1, ceiling]) and says why.
 * @return true when it changed. */
static bool set_limit(struct conc *c, double want, uint64_t now_ns,
		      const char *why)
{
	unsigned n = want < 1		 ? 1
		     : want > c->ceiling ? c->ceiling
					 : (unsigned)want;

	if (n == c->limit)
		return false;
	snprintf(c->why, sizeof(c->why), "%u -> %u: %s", c->limit, n, why);
	c->limit = n;
	c->changes++;
	c->changed_ns = now_ns;
	return true;
}

bool conc_congested(struct conc *c, unsigned running, const char *what,
		    uint64_t now_ns)
{
	const uint64_t gap =
	    c->dur_ns > 50.0 * MS ? (uint64_t)c->dur_ns : 50 * MS;
	unsigned from = running < c->limit ? running : c->limit;
	char why[128];

	c->congested = true;
	c->slow_start = false;
	c->probing = false;
	/* The refusals of one burst arrive together: one cut for them. */
	if (c->last_cut_ns && now_ns - c->last_cut_ns < gap)
		return false;
	c->last_cut_ns = now_ns;
	c->backoffs++;
	/* Growth is judged against what comes after the cut. */
	c->best = 0;
	if (c->limit > c->recover_to)
		c->recover_to = c->limit;
	snprintf(why, sizeof(why), "%s from the origin: backing off", what);
	if (!from)
		from = 1;
	return set_limit(c, from / 2.0, now_ns, why);
}

bool conc_refused_lately(const struct conc *c, uint64_t now_ns)
{
	return c->last_cut_ns && now_ns - c->last_cut_ns < QUIET_NS;
}

/* The requests needed in flight to carry the measured rate across the
 * measured first-byte latency (0 until both are known). */
static double bdp_requests(const struct conc *c)
{
	double n;

	if (c->lat_ns <= 0 || c->req_bytes <= 0)
		return 0;
	n = c->rate * (c->lat_ns / 1e9) / c->req_bytes;
	/* rounded up: a part of a request in flight is a request */
	return (double)(uint64_t)n + ((double)(uint64_t)n < n);
}

/* A saturated epoch without refusals: grow, probe, or hold. */
static bool judge(struct conc *c, uint64_t now_ns)
{
	const double mb = c->rate / 1e6;
	const double bdp = bdp_requests(c);
	char why[128];

	if (c->probing) {
		c->probing = false;
		if (c->rate <= c->best * RISE) {
			snprintf(why, sizeof(why),
				 "%u in flight gained nothing over %u "
				 "(%.1f MB/s): back",
				 c->limit, c->probe_from, mb);
			return set_limit(c, c->probe_from, now_ns, why);
		}
	}
	if (c->rate > c->best * RISE) {
		c->best = c->rate;
		c->flat = 0;
		snprintf(why, sizeof(why),
			 "throughput rose to %.1f MB/s: more in flight", mb);
		return set_limit(
		    c, c->slow_start ? c->limit * 2.0 : c->limit * 1.25 + 1,
		    now_ns, why);
	}
	c->slow_start = false;
	if (c->limit < c->recover_to) {
		snprintf(why, sizeof(why),
			 "no refusal since the back-off: recovering towards "
			 "%u",
			 c->recover_to);
		return set_limit(c,
				 c->limit + (c->limit / 16 ? c->limit / 16 : 1),
				 now_ns, why);
	}
	c->recover_to = 0;
	if (bdp > c->limit) {
		snprintf(why, sizeof(why),
			 "%.1f MB/s x %.1f ms first byte needs %.0f requests "
			 "of %.0f KB in flight",
			 mb, c->lat_ns / 1e6, bdp, c->req_bytes / 1e3);
		return set_limit(c, bdp, now_ns, why);
	}
	if (++c->flat < PROBE_AFTER)
		return false;
	c->flat = 0;
	if (c->limit >= c->ceiling)
		return false;
	c->probing = true;
	c->probe_from = c->limit;
	snprintf(why, sizeof(why), "throughput flat at %.1f MB/s: probing", mb);
	return set_limit(c, c->limit + (c->limit / 8 ? c->limit / 8 : 1),
			 now_ns, why);
}

bool conc_tick(struct conc *c, bool busy, uint64_t now_ns)
{
	uint64_t len =
	    c->dur_ns > 0 ? (uint64_t)(2 * c->dur_ns) : EPOCH_FIRST_NS;
	bool changed = false;

	if (len < EPOCH_MIN_NS)
		len = EPOCH_MIN_NS;
	if (len > EPOCH_MAX_NS)
		len = EPOCH_MAX_NS;
	if (!busy && !c->epoch_bytes) {
		/* Idle: the next epoch starts with the next request. */
		c->epoch_ns = now_ns;
		c->saturated = c->congested = false;
		return false;
	}
	if (now_ns - c->epoch_ns < len)
		return false;
	c->rate = (double)c->epoch_bytes * 1e9 / (double)(now_ns - c->epoch_ns);
	if (!c->slow_start && !c->congested && c->last_cut_ns &&
	    now_ns - c->last_cut_ns > QUIET_NS) {
		/* The origin has taken the load for a while: grow fast
		 * again, from what it takes now. */
		c->slow_start = true;
		c->last_cut_ns = 0;
	}
	/* Without waiting requests the limit is not what holds throughput
	 * back, and after a refusal the cut stands for this epoch. */
	if (c->saturated && !c->congested)
		changed = judge(c, now_ns);
	c->best *= BEST_DECAY;
	if (c->rate > c->best)
		c->best = c->rate;
	c->epoch_ns = now_ns;
	c->epoch_bytes = 0;
	c->saturated = c->congested = false;
	return changed;
}
