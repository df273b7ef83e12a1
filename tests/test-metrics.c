/*
 * test-metrics: a mount's counters for others to read.  DIR/.wharf/metrics
 * and --metrics-file in Prometheus' text format, parsed by Debian's
 * python3-prometheus-client and compared number by number with
 * DIR/.wharf/stats (tests/metrics-check.py); the file replaced whole while
 * it is read in a loop, and removed at unmount; links planted beside it
 * lead nowhere; `wharf stats DIR`'s lines,
 * and those it shares with `wharf cache stats` (cli/stats_fmt.c) made of
 * stats written here.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture.h"
#include "stats.h"
#include "stats_fmt.h"

#define PYTHON "/usr/bin/python3"
#define NFILES 3
#define FILE_BYTES (3 << 20)

static char *work_dir, *data_dir;
static pid_t origin = -1;
static char url[128];

static void setup(void)
{
	char path[PATH_MAX];

	work_dir = fx_tmpdir("metrics-work");
	data_dir = fx_tmpdir("metrics-data");
	for (int i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "%s/f%d", data_dir, i);
		ck_assert_int_eq(fx_write_file(path, FILE_BYTES, 10 + i), 0);
	}
	/* A first byte a few ms late, so that the histogram spreads. */
	origin = fx_origin_start(data_dir,
				 (const char *const[]){"--ttfb-ms", "2", NULL},
				 work_dir, "origin", url, sizeof(url));
	ck_assert_int_gt(origin, 0);
}

static void teardown(void)
{
	fx_unmount_leftovers(work_dir);
	if (origin > 0)
		fx_stop(origin, 5000);
	fx_rmtree(work_dir);
	fx_rmtree(data_dir);
	free(work_dir);
	free(data_dir);
}

/* Why metrics-check.py cannot run here, or NULL. */
static const char *checker_missing(void)
{
	if (fx_sh(PYTHON " -c 'import prometheus_client.parser' "
			 ">/dev/null 2>&1"))
		return PYTHON " lacks prometheus_client (apt-get install "
			      "python3-prometheus-client)";
	return NULL;
}

/* tests/metrics-check.py ARGS, its lines in the test's log.  @return its
 * exit status. */
static int check_metrics(const char *args)
{
	return fx_sh(PYTHON " '%s/tests/metrics-check.py' %s",
		     getenv("WHARF_SRCDIR"), args);
}

static void read_all(const char *dir)
{
	char name[16];
	uint64_t got;

	for (int i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(fx_read_seed(dir, name, 10 + i, &got), 0);
		ck_assert_uint_eq(got, FILE_BYTES);
	}
}

/* Waits (up to 10 s) until the file at path has been replaced n times.
 * @return 0 or -1. */
static int wait_rewrites(const char *path, int n)
{
	struct stat st;
	ino_t last = 0;

	for (int i = 0; i < 1000 && n >= 0; i++) {
		if (!stat(path, &st) && st.st_ino != last) {
			last = st.st_ino;
			n--;
		}
		if (n >= 0)
			usleep(10000);
	}
	return n < 0 ? 0 : -1;
}

static bool exists(const char *path)
{
	struct stat st;

	return !stat(path, &st);
}

/* Label values are escaped as the format wants: a path may hold any byte
 * but NUL. */
START_TEST(test_label_escaping)
{
	static const char mp[] = "/mnt/a\"b\\c\nd";
	const struct stats_sources src = {
	    .source_id = "http://o/", .mountpoint = mp, .cache_dir = "/c"};
	char path[PATH_MAX], *text = NULL;
	struct stats_snapshot snap;
	size_t len;
	FILE *f;

	stats_take(&src, &snap);
	ck_assert_int_eq(stats_metrics(&snap, &text, &len), 0);
	ck_assert_uint_eq(strlen(text), len);
	ck_assert_ptr_nonnull(strstr(
	    text,
	    "wharf_reads_total{mountpoint=\"/mnt/a\\\"b\\\\c\\nd\"} 0\n"));
	if (checker_missing()) {
		free(text);
		fx_skip("%s", checker_missing());
	}
	/* And the parser reads back the path. */
	snprintf(path, sizeof(path), "%s/escaped.prom", work_dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	free(text);
	ck_assert_int_eq(
	    fx_sh(PYTHON " -c 'import sys; from prometheus_client.parser "
			 "import text_string_to_metric_families as p; "
			 "l = [s.labels[\"mountpoint\"] for f in "
			 "p(open(sys.argv[1]).read()) for s in f.samples]; "
			 "sys.exit(not l or set(l) != {sys.argv[2]})' '%s' "
			 "\"$(printf '/mnt/a\"b\\\\c\\nd')\"",
		  path),
	    0);
}
END_TEST

START_TEST(test_metrics_agree_with_stats)
{
	char prom[PATH_MAX], opt[PATH_MAX + 64], args[2 * PATH_MAX];
	const char *why = checker_missing();
	struct fx_mount m;

	if (why)
		fx_skip("%s", why);
	/* -o names: the same table as the long options. */
	snprintf(prom, sizeof(prom), "%s/wharf.prom", work_dir);
	snprintf(opt, sizeof(opt), "metrics_file=%s,metrics_interval=1", prom);
	fx_mount_init(&m, work_dir, "agree");
	ck_assert_int_eq(fx_mount_start(&m, url, NULL,
					(const char *const[]){"-o", opt, NULL}),
			 0);
	ck_assert(exists(prom)); /* written before the mount is up */
	read_all(m.dir);
	/* Reads done: the second rewrite from now was begun after them. */
	ck_assert_int_eq(wait_rewrites(prom, 2), 0);
	snprintf(args, sizeof(args), "same '%s' '%s'", m.dir, prom);
	ck_assert_int_eq(check_metrics(args), 0);
	snprintf(args, sizeof(args), "whole '%s' 3.5", prom);
	ck_assert_int_eq(check_metrics(args), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	/* A mount that is gone leaves no numbers to scrape. */
	ck_assert(!exists(prom));
}
END_TEST

START_TEST(test_metrics_file_refused)
{
	char prom[PATH_MAX];
	struct fx_mount m;

	snprintf(prom, sizeof(prom), "%s/no-such-dir/wharf.prom", work_dir);
	fx_mount_init(&m, work_dir, "refused");
	ck_assert_int_eq(
	    fx_mount_start(&m, url, NULL,
			   (const char *const[]){"--metrics-file", prom, NULL}),
	    -1);
	ck_assert_int_eq(fx_sh("grep -q 'cannot write %s.*--metrics-file' '%s'",
			       prom, m.log),
			 0);
	ck_assert_int_ne(fx_sh("'%s' mount --metrics-interval 0 %s %s "
			       "2>/dev/null",
			       fx_wharf_bin(), url, m.dir),
			 0);
}
END_TEST

/* path's bytes are text, exactly. */
static bool file_is(const char *path, const char *text)
{
	size_t len = 0;
	char *got = fx_read_file(path, &len);
	const bool same = got && len == strlen(text) && !memcmp(got, text, len);

	free(got);
	return same;
}

/*
 * --metrics-file in a directory another user can write (node_exporter's
 * textfile directory often is): links planted there under the names an
 * old writer used (NAME.tmp) and under our temporary files' pattern lead
 * nowhere: the files they point at are untouched, the metrics file is a
 * file of its own, a leftover temporary file of a killed writer is
 * removed, and the directory gets a warning that names it.
 */
START_TEST(test_metrics_planted_links)
{
	static const char victim_text[] = "root's own file\n";
	char dir[PATH_MAX], prom[PATH_MAX + 16], victim[PATH_MAX + 16];
	char link[PATH_MAX + 32], leftover[PATH_MAX + 32];
	struct fx_mount m;
	struct stat st;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/textfile", work_dir);
	ck_assert_int_eq(fx_mkdirs(dir), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	snprintf(prom, sizeof(prom), "%s/wharf.prom", dir);
	snprintf(victim, sizeof(victim), "%s/victim", work_dir);
	f = fopen(victim, "w");
	ck_assert_ptr_nonnull(f);
	fputs(victim_text, f);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(link, sizeof(link), "%s.tmp", prom);
	ck_assert_int_eq(symlink(victim, link), 0);
	snprintf(link, sizeof(link), "%s/.wharf.prom.zzzzzz", dir);
	ck_assert_int_eq(symlink(victim, link), 0);
	snprintf(leftover, sizeof(leftover), "%s/.wharf.prom.AbC123", dir);
	f = fopen(leftover, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fclose(f), 0);

	fx_mount_init(&m, work_dir, "planted");
	ck_assert_int_eq(fx_mount_start(&m, url, NULL,
					(const char *const[]){
					    "--metrics-file", prom,
					    "--metrics-interval", "1", NULL}),
			 0);
	ck_assert_int_eq(wait_rewrites(prom, 2), 0);
	ck_assert_msg(file_is(victim, victim_text),
		      "the file a planted link points at was written");
	ck_assert_int_eq(lstat(prom, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0644);
	ck_assert_msg(!exists(leftover), "a killed writer's %s is still there",
		      leftover);
	ck_assert_int_eq(lstat(link, &st), 0); /* a link is not ours */
	ck_assert_int_eq(
	    fx_sh("grep -q 'metrics-file %s: %s (mode 0777) is writable by "
		  "every user without the sticky bit.*chmod go-w' '%s'",
		  prom, dir, m.log),
	    0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert(!exists(prom));
	ck_assert(file_is(victim, victim_text));
}
END_TEST

/* `wharf stats ARGS` into WORK/out; @return its exit status. */
static int wharf_stats(const char *args)
{
	return fx_sh("'%s' stats %s >'%s/out' 2>&1", fx_wharf_bin(), args,
		     work_dir);
}

/* Whether WORK/out has a line matching the grep -E pattern re. */
static bool out_has(const char *re)
{
	return !fx_sh("grep -Eq '%s' '%s/out'", re, work_dir);
}

START_TEST(test_stats_lines)
{
	char args[PATH_MAX + 64];
	struct fx_mount m;

	fx_mount_init(&m, work_dir, "lines");
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, NULL), 0);
	read_all(m.dir);
	ck_assert_int_eq(wharf_stats(m.dir), 0);
	fx_sh("cat '%s/out'", work_dir);
	ck_assert(out_has("rates averaged since the mount started"));
	ck_assert(out_has("^  reads +[0-9.]+/s +[0-9.]+ [KMG]iB/s"));
	ck_assert(out_has("^  memory +hit +[0-9.]+% of [0-9]+ lookups"));
	/* Not 0.0%: a chunk stored during the cold read may be loaded
	 * again from disk (from its pack, once its file is packed) before
	 * the stats are taken (a CI run saw 18.2% of 11 loads). */
	ck_assert(out_has("^  disk +hit +[0-9.]+% of [0-9]+ loads"));
	ck_assert(out_has("^  origin +[0-9.]+ req/s"));
	ck_assert(out_has("^  first byte +p50 [0-9.]+ ms"));
	ck_assert(out_has("^  host +http://127.0.0.1:[0-9]+: limit [0-9]+"));
	ck_assert(out_has("^  passthrough "));
	ck_assert(out_has("^ +cap [0-9.]+ [KMGT]iB; [0-9]+ packs, [0-9]+ "
			  "evictions, 0 writes dropped, 0 corrupt$"));
	ck_assert(out_has("^  checksums +0 objects checked, 0 mismatches"));
	ck_assert(!out_has("OFFLINE"));
	/* Any path on the mount names it. */
	snprintf(args, sizeof(args), "--json '%s/.'", m.dir);
	ck_assert_int_eq(wharf_stats(args), 0);
	ck_assert(out_has("^  \"mountpoint\": "));
	/* Two reports, the second over its interval; nothing read between. */
	snprintf(args, sizeof(args), "--watch 0.5 --count 2 '%s'", m.dir);
	ck_assert_int_eq(wharf_stats(args), 0);
	ck_assert_int_eq(
	    fx_sh("test $(grep -c '^  reads' '%s/out') = 2", work_dir), 0);
	ck_assert(out_has("rates over the last 0.[0-9] s"));
	ck_assert(out_has("^  reads +0.0/s"));
	/* DIR first, as getopt leaves it: the number is still the interval. */
	snprintf(args, sizeof(args), "'%s' --watch 0.2 -c 1", m.dir);
	ck_assert_int_eq(wharf_stats(args), 0);
	ck_assert(out_has("^  reads "));
	/* Not a mount: refused, saying what it is. */
	ck_assert_int_eq(wharf_stats(work_dir), 1);
	ck_assert(out_has("is not on a wharf mount"));
	/* umount asks the same question, of the path itself. */
	ck_assert_int_ne(fx_sh("'%s' umount '%s' >'%s/out' 2>&1",
			       fx_wharf_bin(), work_dir, work_dir),
			 0);
	ck_assert(out_has("is not a wharf mount \\(nothing is mounted "
			  "there\\)"));
	ck_assert_int_eq(wharf_stats("--count 2 /"), 2);
	ck_assert_int_eq(wharf_stats(""), 2);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	/* Offline, from the listing snapshot the mount left: said first. */
	ck_assert_int_eq(
	    fx_mount_start(&m, url, NULL,
			   (const char *const[]){"--offline", NULL}),
	    0);
	ck_assert_int_eq(wharf_stats(m.dir), 0);
	ck_assert(out_has("^  OFFLINE +listings come from the snapshot"));
	ck_assert_int_eq(
	    fx_sh("grep -q '^wharf_offline{.*} 1$' '%s/.wharf/metrics'", m.dir),
	    0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
}
END_TEST

/* ---- the lines, of stats written here ---- */

/* What f(d) printed of the stats text json, into buf (cap bytes). */
static void lines_of(const char *json, void (*f)(const struct stats_doc *),
		     char *buf, size_t cap)
{
	static struct stats_doc d;
	char *err = NULL, path[] = "/tmp/wharf-lines-XXXXXX";
	const int fd = mkstemp(path), out = dup(1);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(stats_doc_parse(&d, json, strlen(json), &err), 0);
	fflush(stdout);
	ck_assert_int_ge(dup2(fd, 1), 0);
	f(&d);
	fflush(stdout);
	ck_assert_int_ge(dup2(out, 1), 0);
	close(out);
	n = pread(fd, buf, cap - 1, 0);
	close(fd);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
}

static void report_since_start(const struct stats_doc *d)
{
	const struct stats_span sp = {.now = d, .dt = stats_num(d, "uptime_s")};

	stats_report(&sp, 0);
}

/* A mount whose full disk lowered its cap, with checksum mismatches: its
 * cap, what was dropped and what was checked, in people's lines. */
START_TEST(test_lines_cap_and_checksums)
{
	static const char json[] =
	    "{\"source\": \"http://o/\\u001b[2J\", \"mountpoint\": \"/m\", "
	    "\"pid\": 7, \"uptime_s\": 10.5, \"offline\": false,\n"
	    "\"memory_cache\": {\"hits\": 3, \"misses\": 1, \"bytes\": 1024, "
	    "\"cap\": 1048576},\n"
	    "\"disk_cache\": {\"hits\": 9, \"misses\": 1, \"packs\": 2, "
	    "\"bytes_on_disk\": 2048, \"bytes_raw\": 4096, "
	    "\"max_bytes\": 10737418240, \"cap_bytes\": 8589934592, "
	    "\"evictions\": 5, \"corrupt\": 0, \"writes_dropped\": 3, "
	    "\"cap_lowered\": 2},\n"
	    "\"origin\": {\"requests\": 21, \"errors\": 1},\n"
	    "\"origin_checksums\": {\"checked\": 4, \"mismatches\": 1, "
	    "\"repaired\": 1, \"failed\": 0, \"unchecked\": 2}}\n";
	char out[8192];

	lines_of(json, stats_summary, out, sizeof(out));
	ck_assert_msg(strstr(out, "  source      http://o/\\x1b[2J, up 10s "),
		      "%s", out);
	ck_assert_msg(strstr(out, "  disk        hit  90.0% of 10 loads; 4.0 "
				  "KiB of data in 2.0 KiB\n"),
		      "%s", out);
	ck_assert_msg(strstr(out, "              cap 8.0 GiB (--cache-size "
				  "10.0 GiB: the filesystem holds less), "
				  "lowered 2 times by a full disk; 2 packs, 5 "
				  "evictions, 3 writes dropped, 0 corrupt\n"),
		      "%s", out);
	ck_assert_msg(strstr(out, "  origin           2.0 req/s"), "%s", out);
	ck_assert_msg(strstr(out, "  checksums   4 objects checked, 1 "
				  "mismatches: 1 repaired, 0 failed; 2 "
				  "unchecked\n"),
		      "%s", out);
	ck_assert_msg(!strchr(out, '{') && !strchr(out, '\x1b'), "%s", out);
	/* wharf stats' screen says the same, after the mount's name. */
	lines_of(json, report_since_start, out, sizeof(out));
	ck_assert_msg(
	    !strncmp(out, "/m: http://o/\\x1b[2J, up 10s, pid 7\n", 35), "%s",
	    out);
	ck_assert_msg(strstr(out, "lowered 2 times by a full disk"), "%s", out);
	ck_assert_msg(strstr(out, "  checksums   4 objects checked"), "%s",
		      out);
}
END_TEST

/* No cap at all, and a cap that is --cache-size itself. */
START_TEST(test_lines_caps)
{
	char out[8192];

	lines_of("{\"disk_cache\": {\"max_bytes\": 0, \"cap_bytes\": 0}}",
		 stats_summary, out, sizeof(out));
	ck_assert_msg(strstr(out, "              no cap; 0 packs"), "%s", out);
	lines_of("{\"disk_cache\": {\"max_bytes\": 1048576, "
		 "\"cap_bytes\": 1048576}}",
		 stats_summary, out, sizeof(out));
	ck_assert_msg(strstr(out, "              cap 1.0 MiB; 0 packs"), "%s",
		      out);
}
END_TEST

/* What is not a mount's stats is refused, saying where. */
START_TEST(test_lines_refused)
{
	static struct stats_doc d;
	static const char *const bad[] = {"", "{\"a\": ", "[1, 2",
					  "{\"a\": {\"b\": {\"c\": {\"d\": "
					  "{\"e\": 1}}}}}"};
	char *err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = NULL;
		ck_assert_int_eq(
		    stats_doc_parse(&d, bad[i], strlen(bad[i]), &err), -EINVAL);
		ck_assert_msg(err && strstr(err, "the mount's stats"), "%s: %s",
			      bad[i], err);
		free(err);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("mount");
	const char *why = fx_fuse_missing();
	SRunner *sr;
	int failed;

	if (!why)
		tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	fx_tcase_add(tc, test_label_escaping, why);
	fx_tcase_add(tc, test_metrics_agree_with_stats, why);
	fx_tcase_add(tc, test_metrics_file_refused, why);
	fx_tcase_add(tc, test_metrics_planted_links, why);
	fx_tcase_add(tc, test_stats_lines, why);
	suite_add_tcase(s, tc);
	tc = tcase_create("lines");
	tcase_add_test(tc, test_lines_cap_and_checksums);
	tcase_add_test(tc, test_lines_caps);
	tcase_add_test(tc, test_lines_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
