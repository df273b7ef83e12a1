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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd.h"
#include "fileio.h"
#include "stats_fmt.h"
#include "text.h"

#define STATS_MAX (1u << 20) /* a stats file is a few KiB */
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

/*
 * The mount that dir is on: its root in root (PATH_MAX).  @return 0, or 1
 * after a message saying why dir is not on a wharf mount.
 */
static int find_mount(const char *dir, char *root)
{
	struct stat st;

	if (stat(dir, &st)) {
		fprintf(stderr, "wharf stats: %s: %s%s\n", dir, strerror(errno),
			errno == ENOTCONN ? " (its daemon is gone: wharf "
					    "umount it, then mount again)"
					  : "");
		return 1;
	}
	return cmd_wharf_mount("stats", dir, st.st_dev, root,
			       "; give a directory of a mount that `wharf "
			       "mount` made");
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

static int load(const char *root, struct stats_doc *d)
{
	char *text = NULL, *err = NULL;
	size_t len;
	int rc;

	if (read_stats(root, &text, &len))
		return 1;
	rc = stats_doc_parse(d, text, len, &err);
	if (rc)
		fprintf(stderr, "wharf stats: %s/.wharf/stats: %s\n", root,
			err);
	free(err);
	free(text);
	return rc ? 1 : 0;
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
	static struct stats_doc docs[2];
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
		struct stats_doc *now = &docs[i % 2],
				 *then = &docs[(i + 1) % 2];
		struct stats_span sp = {.now = now, .then = i ? then : NULL};

		if (i)
			sleep_s(interval);
		if (json) {
			rc = print_json(root);
		} else {
			rc = load(root, now);
			if (!rc) {
				sp.dt =
				    stats_num(now, "uptime_s") -
				    (sp.then ? stats_num(then, "uptime_s") : 0);
				if (i)
					printf("\n");
				stats_report(&sp, i ? interval : 0);
			}
		}
		fflush(stdout);
		if (rc || interval <= 0)
			return rc;
	}
	return 0;
}
