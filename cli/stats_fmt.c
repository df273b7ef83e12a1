/* stats_fmt: a mount's stats in people's lines (see stats_fmt.h). */
#include "config.h"

#include "stats_fmt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "text.h"
#include "units.h"

static int flatten(struct json *s, const char *path, struct stats_doc *d,
		   unsigned depth);

static int flatten_members(struct json *s, const char *path,
			   struct stats_doc *d, unsigned depth, char close)
{
	char key[64], sub[64];
	bool first = true;
	unsigned i = 0;
	int rc;

	while ((rc = json_next(s, close, &first)) == 1) {
		if (close == '}') {
			rc = json_key(s, key, sizeof(key));
			if (rc)
				return rc;
		} else {
			snprintf(key, sizeof(key), "%u", i++);
		}
		if (snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "",
			     key) >= (int)sizeof(sub))
			return json_fail(s, "a key too long");
		rc = flatten(s, sub, d, depth + 1);
		if (rc)
			return rc;
	}
	return rc;
}

/* A string value into d's strings, escaped for a terminal: the mount
 * writes a path's bytes as they are (its JSON escapes only C0). */
static int take_string(struct json *s, struct stats_doc *d, struct stats_kv *kv)
{
	char *at = d->strs + d->used, *safe;
	const size_t room = sizeof(d->strs) - d->used;
	size_t len;
	int rc = json_string(s, at, room, &len);

	if (rc)
		return rc;
	safe = str_escape(at, "", false);
	if (!safe || strlen(safe) >= room) {
		free(safe);
		return json_fail(s,
				 safe ? "strings too long" : "out of memory");
	}
	memcpy(at, safe, strlen(safe) + 1);
	d->used += strlen(safe) + 1;
	kv->str = at;
	free(safe);
	return 0;
}

static int flatten(struct json *s, const char *path, struct stats_doc *d,
		   unsigned depth)
{
	struct stats_kv *kv = d->n < STATS_KV_MAX ? &d->kv[d->n] : NULL;
	const char *tok;
	size_t len;
	int rc;

	json_ws(s);
	if (s->p >= s->end || depth > 4)
		return json_fail(s, "not the stats of a wharf mount");
	if (*s->p == '{' || *s->p == '[') {
		const char close = *s->p == '{' ? '}' : ']';

		s->p++;
		return flatten_members(s, path, d, depth, close);
	}
	if (!kv) /* more than any mount writes: the rest is not shown */
		return json_skip(s);
	snprintf(kv->path, sizeof(kv->path), "%s", path);
	kv->num = NAN;
	kv->str = "";
	if (*s->p == '"') {
		rc = take_string(s, d, kv);
	} else {
		rc = json_scalar(s, &tok, &len);
		if (!rc && *tok == 't')
			kv->num = 1;
		else if (!rc && *tok == 'f')
			kv->num = 0;
		else if (!rc && *tok != 'n')
			kv->num = strtod(tok, NULL);
	}
	if (!rc)
		d->n++;
	return rc;
}

int stats_doc_parse(struct stats_doc *d, const char *text, size_t len,
		    char **err)
{
	struct json s;
	int rc;

	d->n = 0;
	d->used = 0;
	*err = NULL;
	json_init(&s, text, len, "the mount's stats", err);
	rc = flatten(&s, "", d, 0);
	if (!rc)
		rc = json_end(&s);
	if (rc && !*err)
		*err = strdupf("unreadable");
	return rc ? -EINVAL : 0;
}

static const struct stats_kv *find(const struct stats_doc *d, const char *path)
{
	for (unsigned i = 0; i < d->n; i++)
		if (!strcmp(d->kv[i].path, path))
			return &d->kv[i];
	return NULL;
}

double stats_num(const struct stats_doc *d, const char *path)
{
	const struct stats_kv *kv = find(d, path);

	return kv && !isnan(kv->num) ? kv->num : 0;
}

#define num stats_num

static const char *str(const struct stats_doc *d, const char *path)
{
	const struct stats_kv *kv = find(d, path);

	return kv ? kv->str : "";
}

static double delta(const struct stats_span *sp, const char *path)
{
	double d = num(sp->now, path) - (sp->then ? num(sp->then, path) : 0);

	return d > 0 ? d : 0;
}

static double rate(const struct stats_span *sp, const char *path)
{
	return sp->dt > 0 ? delta(sp, path) / sp->dt : 0;
}

static const char *size(double bytes, char *buf, size_t len)
{
	return format_size(bytes > 0 ? (uint64_t)bytes : 0, buf, len);
}

/* "93.2% of 1200 lookups" or "no lookups". */
static void ratio(const struct stats_span *sp, const char *section,
		  const char *what)
{
	char hits[64], misses[64];
	double h, m;

	snprintf(hits, sizeof(hits), "%s.hits", section);
	snprintf(misses, sizeof(misses), "%s.misses", section);
	h = delta(sp, hits);
	m = delta(sp, misses);
	if (h + m > 0)
		printf("hit %5.1f%% of %.0f %s", 100 * h / (h + m), h + m,
		       what);
	else
		printf("no %s", what);
}

/* Whether the mount is offline, and how, said first; then the outages
 * it rode out. */
static void print_offline(const struct stats_doc *d)
{
	char lasted[32], wait[32];

	if (!strcmp(str(d, "offline_state"), "outage")) {
		format_age((int64_t)num(d, "outage.seconds"), lasted,
			   sizeof(lasted));
		/* "10m" as the option reads, not "10m0s" */
		if ((int64_t)num(d, "outage.wait_s") % 60)
			format_age((int64_t)num(d, "outage.wait_s"), wait,
				   sizeof(wait));
		else
			snprintf(wait, sizeof(wait), "%.0fm",
				 num(d, "outage.wait_s") / 60);
		printf("  OFFLINE     the origin stopped answering %s ago "
		       "(an outage): %.0f reads wait\n"
		       "              for it, each up to %s (--outage-wait); "
		       "cached data is served\n",
		       lasted, num(d, "outage.waiting"), wait);
	} else if (num(d, "offline") > 0) {
		printf("  OFFLINE     listings come from the snapshot in the "
		       "cache, the origin is not\n"
		       "              asked, and reads of what the cache lacks "
		       "fail (EIO)\n");
	}
	if (num(d, "outage.outages") > 0)
		printf("  outages     %.0f since the mount, %.0f reads waited "
		       "in them\n",
		       num(d, "outage.outages"), num(d, "outage.waited"));
}

static void print_memory(const struct stats_span *sp)
{
	const struct stats_doc *d = sp->now;
	char a[32], b[32];

	printf("  memory      ");
	ratio(sp, "memory_cache", "lookups");
	printf(", %.0f waited; %s of %s held\n",
	       delta(sp, "memory_cache.waits"),
	       size(num(d, "memory_cache.bytes"), a, sizeof(a)),
	       size(num(d, "memory_cache.cap"), b, sizeof(b)));
}

/* The disk cache: hits, what it holds against its cap (--cache-size, or
 * less where the cache's filesystem holds less), what it let go. */
static void print_disk(const struct stats_span *sp)
{
	const struct stats_doc *d = sp->now;
	const double max = num(d, "disk_cache.max_bytes"),
		     cap = num(d, "disk_cache.cap_bytes"),
		     lowered = delta(sp, "disk_cache.cap_lowered");
	char a[32], b[32];

	printf("  disk        ");
	ratio(sp, "disk_cache", "loads");
	printf("; %s of data in %s\n",
	       size(num(d, "disk_cache.bytes_raw"), a, sizeof(a)),
	       size(num(d, "disk_cache.bytes_on_disk"), b, sizeof(b)));
	printf("              ");
	if (cap <= 0 && max <= 0)
		printf("no cap");
	else if (max > 0 && cap > 0 && cap < max)
		printf("cap %s (--cache-size %s: the filesystem holds less)",
		       size(cap, a, sizeof(a)), size(max, b, sizeof(b)));
	else
		printf("cap %s", size(cap > 0 ? cap : max, a, sizeof(a)));
	if (lowered > 0)
		printf(", lowered %.0f times by a full disk", lowered);
	printf("; %.0f packs, %.0f evictions, %.0f writes dropped, %.0f "
	       "corrupt\n",
	       num(d, "disk_cache.packs"), delta(sp, "disk_cache.evictions"),
	       delta(sp, "disk_cache.writes_dropped"),
	       delta(sp, "disk_cache.corrupt"));
}

static void print_origin(const struct stats_span *sp)
{
	char a[32];

	printf("  origin      %8.1f req/s%10s/s   %.0f retries, %.0f errors, "
	       "%.0f hedges\n",
	       rate(sp, "origin.requests"),
	       size(rate(sp, "origin.bytes_fetched"), a, sizeof(a)),
	       delta(sp, "origin.retries"), delta(sp, "origin.errors"),
	       delta(sp, "origin.hedges"));
}

/* The objects checked whole against the origin's own checksum
 * (origin_checksums). */
static void print_checksums(const struct stats_span *sp)
{
	printf("  checksums   %.0f objects checked, %.0f mismatches: %.0f "
	       "repaired, %.0f failed; %.0f unchecked\n",
	       delta(sp, "origin_checksums.checked"),
	       delta(sp, "origin_checksums.mismatches"),
	       delta(sp, "origin_checksums.repaired"),
	       delta(sp, "origin_checksums.failed"),
	       delta(sp, "origin_checksums.unchecked"));
}

static void print_hosts(const struct stats_doc *d)
{
	for (unsigned i = 0;; i++) {
		char p[64], a[32], age[32];
		const char *host;

		snprintf(p, sizeof(p), "concurrency.%u.host", i);
		if (!find(d, p))
			break;
		host = str(d, p);
#define HOST_NUM(k) (snprintf(p, sizeof(p), "concurrency.%u." k, i), num(d, p))
		printf("  host        %s: limit %.0f of %.0f, %.0f in flight, "
		       "%.0f waiting; ",
		       host, HOST_NUM("limit"), HOST_NUM("ceiling"),
		       HOST_NUM("in_flight"), HOST_NUM("waiting"));
		if (HOST_NUM("latency_ms") > 0)
			printf("first byte %.1f ms, %s/s\n",
			       HOST_NUM("latency_ms"),
			       size(HOST_NUM("throughput_mbs") * 1e6, a,
				    sizeof(a)));
		else
			printf("not measured yet\n");
		format_age((int64_t)HOST_NUM("last_change_s_ago"), age,
			   sizeof(age));
		snprintf(p, sizeof(p), "concurrency.%u.why", i);
		printf(
		    "              %.0f changes, %.0f backoffs; %s ago: %s\n",
		    HOST_NUM("changes"), HOST_NUM("backoffs"), age, str(d, p));
#undef HOST_NUM
	}
}

static void print_passthrough(const struct stats_doc *d)
{
	char a[32];

	printf("  passthrough ");
	if (num(d, "passthrough.on") > 0)
		printf("on: %.0f opens (%s of files) read by the kernel from "
		       "cache files, %.0f files held, %.0f refused\n",
		       num(d, "passthrough.opens"),
		       size(num(d, "passthrough.bytes"), a, sizeof(a)),
		       num(d, "passthrough.backing_files"),
		       num(d, "passthrough.refused"));
	else if (num(d, "passthrough.stopped") > 0)
		printf("stopped: opens of one-chunk files were most of them "
		       "(%.0f opens served before)\n",
		       num(d, "passthrough.opens"));
	else
		printf("off (every read goes through the mount)\n");
}

static void print_reads(const struct stats_span *sp)
{
	const double timed = rate(sp, "reads.latency_count");
	char a[32];

	printf("  reads       %8.1f/s  %10s/s   %.0f files read",
	       rate(sp, "reads.count"),
	       size(rate(sp, "reads.bytes_served"), a, sizeof(a)),
	       num(sp->now, "reads.files"));
	/* As readers see them, over the span; slow ones since the mount. */
	if (timed > 0)
		printf(", %.2f ms each", rate(sp, "reads.latency_sum_s") /
					     timed * 1e3);
	if (num(sp->now, "reads.latency_over_1s") > 0)
		printf(", %.0f over 1 s", num(sp->now, "reads.latency_over_1s"));
	putchar('\n');
}

void stats_report(const struct stats_span *sp, double interval)
{
	const struct stats_doc *d = sp->now;
	char up[32];

	format_age((int64_t)num(d, "uptime_s"), up, sizeof(up));
	printf("%s: %s, up %s, pid %.0f\n", str(d, "mountpoint"),
	       str(d, "source"), up, num(d, "pid"));
	print_offline(d);
	if (interval > 0)
		printf("  (rates over the last %.1f s)\n", sp->dt);
	else
		printf("  (rates averaged since the mount started)\n");
	print_reads(sp);
	print_memory(sp);
	print_disk(sp);
	print_origin(sp);
	printf("  first byte  p50 %.1f ms, p90 %.1f ms, p99 %.1f ms (since "
	       "the mount started)\n",
	       num(d, "origin.ttfb_ms.p50"), num(d, "origin.ttfb_ms.p90"),
	       num(d, "origin.ttfb_ms.p99"));
	print_hosts(d);
	print_checksums(sp);
	printf("  read-ahead  %.0f chunks queued, %.0f loaded, %.0f dropped\n",
	       delta(sp, "readahead.queued"), delta(sp, "readahead.loaded"),
	       delta(sp, "readahead.dropped"));
	printf("  hints       %.0f lines (%.0f bad), %.0f chunks loaded; "
	       "reads found %.0f ready, %.0f not\n",
	       delta(sp, "hints.lines"), delta(sp, "hints.bad_lines"),
	       delta(sp, "hints.loaded"), delta(sp, "hints.hits"),
	       delta(sp, "hints.misses"));
	print_passthrough(d);
}

void stats_summary(const struct stats_doc *d)
{
	const struct stats_span sp = {.now = d, .dt = num(d, "uptime_s")};
	char up[32];

	format_age((int64_t)sp.dt, up, sizeof(up));
	printf("  source      %s, up %s (counted since; wharf stats DIR "
	       "shows more)\n",
	       str(d, "source"), up);
	print_offline(d);
	print_reads(&sp);
	print_memory(&sp);
	print_disk(&sp);
	print_origin(&sp);
	print_checksums(&sp);
}
