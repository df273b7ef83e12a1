/*
 * `wharf stats DIR`: a mount's live state in a screen of lines a person
 * reads, from DIR/.wharf/stats: rates per second, hit ratios, the
 * origin's latency, each host's concurrency and why, offline, passthrough.
 * --watch prints a report every interval with the rates over it, as
 * iostat and nfsiostat do; --json prints the stats file as it is.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd.h"
#include "json.h"
#include "mount.h"
#include "mountinfo.h"
#include "util.h"

#define STATS_MAX (1u << 20) /* a stats file is a few KiB */
#define KV_MAX 512
#define WATCH_DEFAULT 2.0

static void stats_usage(FILE *out)
{
	fputs("Usage: wharf stats [OPTIONS] DIR\n"
	      "\n"
	      "Shows the live state of the wharf mount that DIR is on: reads "
	      "and origin\n"
	      "requests per second, cache hit ratios, first-byte latency, "
	      "each origin\n"
	      "host's concurrency and why, offline and passthrough.  Rates are "
	      "averages\n"
	      "since the mount started, or with --watch over each interval.\n"
	      "\n"
	      "  -w, --watch[=SEC]   a report every SEC seconds (default 2; "
	      "also\n"
	      "                      --watch SEC), until interrupted\n"
	      "  -c, --count N       with --watch: stop after N reports\n"
	      "      --json          print DIR/.wharf/stats, the JSON "
	      "behind it\n"
	      "  -h, --help          show this help\n",
	      out);
}

/* The stats JSON flattened: "origin.requests", "concurrency.0.why". */
struct kv {
	char path[64];
	char str[256]; /* a string's value */
	double num;    /* a number's (true 1, false 0), else NAN */
};

struct doc {
	struct kv kv[KV_MAX];
	unsigned n;
};

static int flatten(struct json *s, const char *path, struct doc *d,
		   unsigned depth);

static int flatten_members(struct json *s, const char *path, struct doc *d,
			   unsigned depth, char close)
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

static int flatten(struct json *s, const char *path, struct doc *d,
		   unsigned depth)
{
	struct kv *kv = d->n < KV_MAX ? &d->kv[d->n] : NULL;
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
	kv->str[0] = '\0';
	if (*s->p == '"') {
		rc = json_string(s, kv->str, sizeof(kv->str), &len);
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

static const struct kv *find(const struct doc *d, const char *path)
{
	for (unsigned i = 0; i < d->n; i++)
		if (!strcmp(d->kv[i].path, path))
			return &d->kv[i];
	return NULL;
}

/* A number of the stats, 0 when absent (an older mount's stats). */
static double num(const struct doc *d, const char *path)
{
	const struct kv *kv = find(d, path);

	return kv && !isnan(kv->num) ? kv->num : 0;
}

static const char *str(const struct doc *d, const char *path)
{
	const struct kv *kv = find(d, path);

	return kv ? kv->str : "";
}

/*
 * The mount that dir is on: its root in root (PATH_MAX).  @return 0, or 1
 * after a message saying why dir is not on a wharf mount.
 */
static int find_mount(const char *dir, char *root)
{
	struct mountinfo_entry e;
	struct stat st;
	int rc;

	if (stat(dir, &st)) {
		fprintf(stderr, "wharf stats: %s: %s%s\n", dir, strerror(errno),
			errno == ENOTCONN ? " (its daemon is gone: wharf "
					    "umount it, then mount again)"
					  : "");
		return 1;
	}
	rc = mountinfo_of_dev(st.st_dev, &e);
	if (rc == 1 && !strcmp(e.type, MOUNT_FSTYPE)) {
		snprintf(root, PATH_MAX, "%s", e.mnt);
		return 0;
	}
	if (rc == 1)
		fprintf(stderr,
			"wharf stats: %s is not on a wharf mount (it is on %s, "
			"a %s); give a directory of a mount that `wharf mount` "
			"made\n",
			dir, e.mnt, e.type);
	else
		fprintf(stderr,
			"wharf stats: %s: cannot tell which mount it is on "
			"(%s)\n",
			dir, rc < 0 ? strerror(-rc) : "not in the mount table");
	return 1;
}

/* ROOT/.wharf/stats, malloc'd in *text.  @return 0, or 1 after a message. */
static int read_stats(const char *root, char **text, size_t *len)
{
	char *path = strdupf("%s/.wharf/stats", root), *err = NULL;
	int rc = read_file_capped(path, STATS_MAX, text, len, &err);

	if (rc)
		fprintf(stderr, "wharf stats: %s%s\n", err,
			rc == -EAGAIN ? " (too many readers at once: try "
					"again)"
				      : "");
	free(err);
	free(path);
	return rc ? 1 : 0;
}

static int load(const char *root, struct doc *d)
{
	char *text = NULL, *err = NULL;
	struct json s;
	size_t len;
	int rc;

	if (read_stats(root, &text, &len))
		return 1;
	d->n = 0;
	json_init(&s, text, len, "the mount's stats", &err);
	rc = flatten(&s, "", d, 0);
	if (!rc)
		rc = json_end(&s);
	if (rc)
		fprintf(stderr, "wharf stats: %s/.wharf/stats: %s\n", root,
			err ? err : "unreadable");
	free(err);
	free(text);
	return rc ? 1 : 0;
}

/* What a report compares: now, and the last report (or the mount's
 * start, all zero), dt seconds apart. */
struct span {
	const struct doc *now, *then;
	double dt;
};

static double delta(const struct span *sp, const char *path)
{
	double d = num(sp->now, path) - (sp->then ? num(sp->then, path) : 0);

	return d > 0 ? d : 0;
}

static double rate(const struct span *sp, const char *path)
{
	return sp->dt > 0 ? delta(sp, path) / sp->dt : 0;
}

static const char *size(double bytes, char *buf, size_t len)
{
	return format_size(bytes > 0 ? (uint64_t)bytes : 0, buf, len);
}

/* "93.2% of 1200 lookups" or "no lookups". */
static void ratio(const struct span *sp, const char *section, const char *what)
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

static void print_hosts(const struct doc *d)
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

static void print_passthrough(const struct doc *d)
{
	printf("  passthrough ");
	if (num(d, "passthrough.on") > 0)
		printf("on: %.0f opens read by the kernel from cache files, "
		       "%.0f files held, %.0f refused\n",
		       num(d, "passthrough.opens"),
		       num(d, "passthrough.backing_files"),
		       num(d, "passthrough.refused"));
	else if (num(d, "passthrough.stopped") > 0)
		printf("stopped: opens of one-chunk files were most of them "
		       "(%.0f opens served before)\n",
		       num(d, "passthrough.opens"));
	else
		printf("off (every read goes through the mount)\n");
}

static void report(const struct span *sp, double interval)
{
	const struct doc *d = sp->now;
	char a[32], b[32], c[32], up[32];

	format_age((int64_t)num(d, "uptime_s"), up, sizeof(up));
	printf("%s: %s, up %s, pid %.0f\n", str(d, "mountpoint"),
	       str(d, "source"), up, num(d, "pid"));
	if (num(d, "offline") > 0)
		printf("  OFFLINE     listings come from the snapshot in the "
		       "cache, the origin is not\n"
		       "              asked, and reads of what the cache lacks "
		       "fail (EIO)\n");
	if (interval > 0)
		printf("  (rates over the last %.1f s)\n", sp->dt);
	else
		printf("  (rates averaged since the mount started)\n");
	printf("  reads       %8.1f/s  %10s/s   %.0f files read\n",
	       rate(sp, "reads.count"),
	       size(rate(sp, "reads.bytes_served"), a, sizeof(a)),
	       num(d, "reads.files"));
	printf("  memory      ");
	ratio(sp, "memory_cache", "lookups");
	printf(", %.0f waited; %s of %s held\n",
	       delta(sp, "memory_cache.waits"),
	       size(num(d, "memory_cache.bytes"), a, sizeof(a)),
	       size(num(d, "memory_cache.cap"), b, sizeof(b)));
	printf("  disk        ");
	ratio(sp, "disk_cache", "loads");
	printf("; %s of data in %s (cap %s)\n",
	       size(num(d, "disk_cache.bytes_raw"), a, sizeof(a)),
	       size(num(d, "disk_cache.bytes_on_disk"), b, sizeof(b)),
	       size(num(d, "disk_cache.max_bytes"), c, sizeof(c)));
	printf("  origin      %8.1f req/s%10s/s   %.0f retries, %.0f errors, "
	       "%.0f hedges\n",
	       rate(sp, "origin.requests"),
	       size(rate(sp, "origin.bytes_fetched"), a, sizeof(a)),
	       delta(sp, "origin.retries"), delta(sp, "origin.errors"),
	       delta(sp, "origin.hedges"));
	printf("  first byte  p50 %.1f ms, p90 %.1f ms, p99 %.1f ms (since "
	       "the mount started)\n",
	       num(d, "origin.ttfb_ms.p50"), num(d, "origin.ttfb_ms.p90"),
	       num(d, "origin.ttfb_ms.p99"));
	print_hosts(d);
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

/* --watch's SEC: a positive number of seconds.  @return 0 or 2. */
static int parse_interval(const char *arg, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= 0.1 && v <= 86400))
		return cmd_usage_error("stats",
				       "--watch: '%s' is not a number of "
				       "seconds from 0.1 to 86400",
				       arg);
	*out = v;
	return 0;
}

static bool is_number(const char *s)
{
	char *end;

	strtod(s, &end);
	return end != s && !*end;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int print_json(const char *root)
{
	char *text = NULL;
	size_t len;

	if (read_stats(root, &text, &len))
		return 1;
	/* One newline at the end (a snapshot may end with two). */
	while (len && text[len - 1] == '\n')
		len--;
	printf("%.*s\n", (int)len, text);
	free(text);
	return 0;
}

int cmd_stats(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"watch", optional_argument, NULL, 'w'},
	    {"count", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct doc docs[2];
	double interval = 0;
	long count = -1;
	bool json = false;
	char root[PATH_MAX], *end;
	const char *dir;
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":w::c:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'w':
			interval = WATCH_DEFAULT;
			if (optarg && parse_interval(optarg, &interval))
				return 2;
			break;
		case 'c':
			count = strtol(optarg, &end, 10);
			if (*end || end == optarg || count < 1)
				return cmd_usage_error(
				    "stats",
				    "--count: '%s' is not a number of "
				    "reports (1 or more)",
				    optarg);
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			stats_usage(stdout);
			return 0;
		default:
			return cmd_bad_option("stats", c, argv, longopts);
		}
	}
	/* --watch SEC DIR (or DIR --watch SEC: getopt put DIR first), as
	 * iostat takes its interval. */
	if (interval > 0 && argc - optind == 2) {
		const bool dir_first =
		    !is_number(argv[optind]) && is_number(argv[optind + 1]);

		if (parse_interval(argv[optind + dir_first], &interval))
			return 2;
		if (dir_first)
			argv[optind + 1] = argv[optind];
		optind++;
	}
	if (argc - optind != 1)
		return cmd_usage_error("stats", "%s",
				       argc - optind ? "give one DIR"
						     : "which mount? give DIR");
	if (count > 0 && interval <= 0)
		return cmd_usage_error("stats", "--count needs --watch");
	dir = argv[optind];
	if (find_mount(dir, root))
		return 1;
	for (long i = 0; count < 0 || i < count; i++) {
		struct doc *now = &docs[i % 2], *then = &docs[(i + 1) % 2];
		struct span sp = {.now = now, .then = i ? then : NULL};

		if (i)
			sleep_s(interval);
		if (json) {
			rc = print_json(root);
		} else {
			rc = load(root, now);
			if (!rc) {
				sp.dt = num(now, "uptime_s") -
					(sp.then ? num(then, "uptime_s") : 0);
				if (i)
					printf("\n");
				report(&sp, i ? interval : 0);
			}
		}
		fflush(stdout);
		if (rc || interval <= 0)
			return rc;
	}
	return 0;
}
