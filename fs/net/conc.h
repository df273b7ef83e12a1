#ifndef WHARF_FS_CONC_H
#define WHARF_FS_CONC_H
/*
 * conc: how many requests one origin host is given at once.
 *
 * The fetch engine keeps one struct conc per host and feeds it what it
 * measures: the body bytes that arrive, each successful request's server
 * latency, duration and size, requests that had to wait for the limit, and
 * the origin's refusals (429, 503, SlowDown) and broken connections.  The
 * controller answers with a limit, between 1 and a hard ceiling:
 *
 *  - grow: over an epoch (about two request durations) in which requests
 *    waited for the limit, a throughput higher than the best recent one
 *    raises the limit (doubling until the first epoch that gains nothing,
 *    then by a quarter); after a few flat epochs it probes one eighth
 *    higher and goes back if that gained nothing;
 *  - cover the bandwidth-delay product: the limit does not stay below the
 *    requests needed to carry the measured throughput across the measured
 *    first-byte latency;
 *  - back off: a refusal or a broken connection (the engine does not
 *    report a body cut mid-way, which is not a sign of load) halves what
 *    is in flight, at most once per request duration (one burst of 503s
 *    is one signal);
 *    then each quiet saturated epoch adds a sixteenth (at least one) until
 *    the limit is back where it was cut from, and a rise grows it by a
 *    quarter, not double, until the origin has taken the load without a
 *    refusal for a few seconds.
 *
 * Pure arithmetic: no lock and no clock of its own (the caller passes the
 * time), so one thread drives it and the tests drive it with figures.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONC_START 32 /* limit of a host not yet measured */

struct conc {
	unsigned limit, ceiling;
	bool slow_start;     /* doubling until a rise gains nothing */
	bool probing;	     /* the last change was a probe, judged next */
	bool saturated;	     /* a request waited for the limit this epoch */
	bool congested;	     /* a refusal came this epoch */
	unsigned probe_from; /* the limit before the probe */
	unsigned recover_to; /* the limit before the last back-off */
	unsigned flat;	     /* saturated epochs since the last rise */
	uint64_t epoch_ns, epoch_bytes;
	double rate;	  /* bytes/s over the last epoch */
	double best;	  /* best recent rate, decaying */
	double lat_ns;	  /* server latency, moving average */
	double dur_ns;	  /* request duration, moving average */
	double req_bytes; /* bytes a request brings, moving average */
	uint64_t last_cut_ns;
	uint64_t backoffs, changes;
	uint64_t changed_ns; /* when it last changed its mind */
	char why[160];	     /* ... and why, in words */
};

/* A fresh controller: CONC_START requests (at most ceiling), slow start. */
void conc_init(struct conc *c, unsigned ceiling, uint64_t now_ns);

/* Body bytes arrived (called per curl write, so cheap). */
static inline void conc_bytes(struct conc *c, size_t n)
{
	c->epoch_bytes += n;
}

/* A request could not start: the limit was reached. */
static inline void conc_waited(struct conc *c)
{
	c->saturated = true;
}

/* A request succeeded: its first-byte latency (after it went out), its
 * duration (from joining the engine) and its body bytes. */
void conc_done(struct conc *c, uint64_t lat_ns, uint64_t dur_ns,
	       uint64_t bytes);

/*
 * The origin refused (what: "HTTP 503", "connection reset") while
 * `running` requests were in flight.
 * @return true when the limit went down.
 */
bool conc_congested(struct conc *c, unsigned running, const char *what,
		    uint64_t now_ns);

/* Whether the origin refused requests in the last few seconds (the quiet
 * time after which growth doubles again). */
bool conc_refused_lately(const struct conc *c, uint64_t now_ns);

/*
 * Called often (each turn of the engine's loop); ends an epoch when one
 * is due and decides.  `busy`: requests are in flight or waiting (an idle
 * host's epoch is restarted, not judged).
 * @return true when the limit changed.
 */
bool conc_tick(struct conc *c, bool busy, uint64_t now_ns);

#endif
