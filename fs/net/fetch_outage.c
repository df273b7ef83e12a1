/*
 * Outages: an origin host that stopped answering is a state of the engine
 * (fetch.h, "Outages"), not a stream of errors.  A retry that fails too
 * begins it, with one warning; the first answer from the host ends it,
 * with one line that says how long it lasted and how many requests
 * waited.  Meanwhile the retries of each request are not logged one by
 * one, and the stats show the outage: since when, and who waits.
 */
#include "config.h"

#include "fetch_i.h"
#include "log.h"
#include "units.h"

#include <stdio.h>
#include <time.h>

#define OUT_GET(f) __atomic_load_n(&(f), __ATOMIC_ACQUIRE)
#define OUT_SET(f, v) __atomic_store_n(&(f), (v), __ATOMIC_RELEASE)

void fetch_outage_arm(struct fetch_engine *fe)
{
	if (fe)
		OUT_SET(fe->outage.armed, true);
}

bool fetch_outage_armed(const struct fetch_engine *fe)
{
	return fe->cfg.outage_wait_ms &&
	       __atomic_load_n(&fe->outage.armed, __ATOMIC_ACQUIRE);
}

/* "10m", "90s", "1h": how long a reader waits, as the option reads. */
static const char *wait_words(unsigned ms, char *buf, size_t len)
{
	const unsigned s = (ms + 999) / 1000;

	if (s >= 3600 && s % 3600 == 0)
		snprintf(buf, len, "%uh", s / 3600);
	else if (s >= 60 && s % 60 == 0)
		snprintf(buf, len, "%um", s / 60);
	else
		format_age(s, buf, len);
	return buf;
}

/* The engine's figures after a host's outage began or ended: how many
 * hosts are out, and since when the oldest of them is. */
static void publish(struct fetch_engine *fe)
{
	uint64_t since = 0;
	int64_t since_unix = 0;
	unsigned hosts = 0;

	for (unsigned i = 0; i < fe->nhosts; i++) {
		const struct host *h = &fe->hosts[i];

		if (!h->outage_ns)
			continue;
		hosts++;
		if (!since || h->outage_ns < since) {
			since = h->outage_ns;
			since_unix = h->outage_unix;
		}
	}
	OUT_SET(fe->outage.since_ns, since);
	OUT_SET(fe->outage.since_unix, since_unix);
	OUT_SET(fe->outage.hosts, hosts);
}

static void outage_begin(struct fetch_engine *fe, struct host *h,
			 const char *what)
{
	char wait[32];

	h->outage_ns = now_ns();
	h->outage_unix = (int64_t)time(NULL);
	h->outage_waited = 0;
	snprintf(h->outage_why, sizeof(h->outage_why), "%s", what);
	STAT_ADD(fe->outage.outages, 1);
	publish(fe);
	log_warn("origin %s stopped answering (%s); reads of uncached data "
		 "wait up to %s (--outage-wait)",
		 h->name, h->outage_why,
		 wait_words(fe->cfg.outage_wait_ms, wait, sizeof(wait)));
}

static void outage_end(struct fetch_engine *fe, struct host *h)
{
	const uint64_t secs =
	    (now_ns() - h->outage_ns + 500000000) / 1000000000;

	h->outage_ns = 0;
	publish(fe);
	log_warn("origin %s answers again after %llu s; %llu read%s waited",
		 h->name, (unsigned long long)secs,
		 (unsigned long long)h->outage_waited,
		 h->outage_waited == 1 ? "" : "s");
}

bool fetch_outage_note(struct fetch_engine *fe, struct call *c,
		       enum fetch_verdict v, const char *what)
{
	struct host *h = c->x.host;

	if (!h)
		return false;
	if (v != V_OUTAGE) {
		h->answered_ns = now_ns();
		if (!h->outage_ns)
			return false;
		outage_end(fe, h);
		return true;
	}
	/* One failed attempt is a blip; its retry failing too is not, unless
	 * the host answered others meanwhile (one object's 5xx). */
	if (!h->outage_ns && c->n >= 1 && fetch_outage_armed(fe) &&
	    h->answered_ns < c->first_fail)
		outage_begin(fe, h, what);
	return false;
}

bool fetch_outage_retrying(struct fetch_engine *fe, struct call *c,
			   enum fetch_verdict v)
{
	struct host *h = c->x.host;

	/* Armed, a failure to answer says nothing alone: a retry mends a
	 * blip (origin.retries counts it), and one that does not begins an
	 * outage, which says so once. */
	if (!h || !h->outage_ns)
		return v != V_OUTAGE || !fetch_outage_armed(fe);
	if (!c->waiting && !c->r.background) {
		c->waiting = true;
		STAT_ADD(fe->outage.waiting, 1);
		STAT_ADD(fe->outage.waited, 1);
		h->outage_waited++;
	}
	return false;
}

void fetch_outage_call_end(struct fetch_engine *fe, struct call *c)
{
	if (c->waiting) {
		c->waiting = false;
		__atomic_fetch_sub(&fe->outage.waiting, 1, __ATOMIC_RELAXED);
	}
}

void fetch_get_outage(struct fetch_engine *fe, struct fetch_outage *out)
{
	out->hosts = OUT_GET(fe->outage.hosts);
	out->since_ns = out->hosts ? OUT_GET(fe->outage.since_ns) : 0;
	out->since_unix = out->hosts ? OUT_GET(fe->outage.since_unix) : 0;
	out->waiting = OUT_GET(fe->outage.waiting);
	out->outages = OUT_GET(fe->outage.outages);
	out->waited = OUT_GET(fe->outage.waited);
	out->wait_ms = fetch_outage_armed(fe) ? fe->cfg.outage_wait_ms : 0;
}
