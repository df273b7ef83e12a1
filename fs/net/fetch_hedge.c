/* Hedging: the recent first-byte latencies of each kind of request, and
 * when a request late against them is sent a second time. */
#include "config.h"

#include "fetch_i.h"
#include "units.h"

#include <stdlib.h>
#include <string.h>

/* How many latencies a kind needs before it hedges, and the budget: a
 * hedge for at most one request in HEDGE_EVERY, a burst of at most
 * HEDGE_BURST. */
#define HEDGE_MIN_SAMPLES 32
#define HEDGE_EVERY 20
#define HEDGE_BURST 8
/* Never hedge before 10 ms: an origin that answers faster is near, and a
 * second transfer would cost more than it saves. */
#define HEDGE_FLOOR_NS 10000000ull

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void fetch_hedge_sample(struct fetch_engine *fe, enum req_kind k, uint64_t ns)
{
	struct lat_window *w = &fe->lat[k];

	w->ns[w->at] = ns;
	w->at = (w->at + 1) % HEDGE_WINDOW;
	if (w->n < HEDGE_WINDOW)
		w->n++;
	/* The p99 is recomputed every few samples: a sort of 128. */
	if (w->n >= HEDGE_MIN_SAMPLES && ++w->since >= 8) {
		uint64_t v[HEDGE_WINDOW];

		w->since = 0;
		memcpy(v, w->ns, w->n * sizeof(v[0]));
		qsort(v, w->n, sizeof(v[0]), cmp_u64);
		w->p99 = v[(w->n * 99 - 1) / 100];
	}
}

/* Each attempt adds a token, a hedge takes HEDGE_EVERY. */
void fetch_hedge_earn(struct fetch_engine *fe)
{
	if (fe->hedge_tokens < HEDGE_BURST * HEDGE_EVERY)
		fe->hedge_tokens++;
}

void fetch_hedge_scan_begin(struct fetch_engine *fe, struct hedge_scan *s)
{
	s->now = now_ns();
	s->soonest = UINT64_MAX;
	s->at = fe->run_head;
	/* Without budget or room nothing can be hedged; a new request or a
	 * finished one wakes the engine anyway. */
	s->idle = !fe->cfg.hedge || fe->hedge_tokens < HEDGE_EVERY ||
		  fe->running >= fe->cfg.max_connections;
}

struct xfer *fetch_hedge_next(struct fetch_engine *fe, struct hedge_scan *s)
{
	if (s->idle)
		return NULL;
	while (s->at) {
		struct xfer *x = s->at;
		const uint64_t p99 = fe->lat[x->kind].p99;
		const uint64_t after =
		    p99 > HEDGE_FLOOR_NS ? p99 : HEDGE_FLOOR_NS;
		struct leg *l = &x->leg[0];
		curl_off_t pre = 0;
		uint64_t sent, due;

		s->at = x->run_next;
		/* A POST (a token exchange) is not sent twice. */
		if (x->hedged || x->winner || !l->easy || !p99 || x->req->post)
			continue;
		/* A host that refused requests lately gets no extra load: a
		 * hedge there would add to what made it slow.  Otherwise a
		 * hedge may go past the limit (not the ceiling): the limit is
		 * full whenever prefetch keeps the host busy, and the hedge
		 * budget keeps the extra small. */
		if (conc_refused_lately(&x->host->conc, s->now))
			continue;
		/* Not yet sent (waiting for a connection): not late. */
		if (curl_easy_getinfo(l->easy, CURLINFO_PRETRANSFER_TIME_T,
				      &pre) != CURLE_OK ||
		    pre <= 0)
			continue;
		sent = l->added_ns + (uint64_t)pre * 1000;
		due = sent + after;
		if (due > s->now) {
			if (due < s->soonest)
				s->soonest = due;
			continue;
		}
		if (fe->hedge_tokens < HEDGE_EVERY ||
		    fe->running >= fe->cfg.max_connections)
			continue;
		x->hedged = true;
		return x;
	}
	return NULL;
}

void fetch_hedge_started(struct fetch_engine *fe)
{
	fe->hedge_tokens -= HEDGE_EVERY;
	STAT_ADD(fe->st.hedges, 1);
}

long fetch_hedge_wait_ms(const struct hedge_scan *s)
{
	if (s->idle || s->soonest == UINT64_MAX)
		return 1000;
	return (long)((s->soonest - s->now) / 1000000) + 1;
}
