/*
 * A mount whose origin is down: a remount served from the cache and the
 * listing snapshot, uncached reads failing at once, the origin's return
 * noticed by the same mount, snapshots that belong to their source, and
 * objects changed meanwhile never read stale.  And an origin that goes
 * down under a mount (an outage): reads wait for it, up to --outage-wait.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture-mount.h"
#include "fixture.h"

START_TEST(test_remount_from_cache_origin_down)
{
	struct fx_nginx ng2;
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-remount");
	char manifest[PATH_MAX], url[256], *json;
	const char *extra[] = {"--manifest", manifest, NULL};

	ck_assert_int_eq(fx_nginx_start(&ng2, data_dir), 0);
	snprintf(manifest, sizeof(manifest), "%s/manifest-remount", work_dir);
	write_manifest(manifest, "", NULL);
	snprintf(url, sizeof(url), "%s/plain/", ng2.base);
	fx_mount_init(&m, work_dir, "remount");
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);
	check_manifest_files(m.dir, "");
	/* The daemon exits 0 after `wharf umount`. */
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	fx_nginx_stop(&ng2);
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);
	check_manifest_files(m.dir, "");
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(fx_json_num(json, "chunks_fetched") == 0,
		      "chunks came from the origin: %s", json);
	/* By the mount, or by the kernel from the cache files
	 * (passthrough: opens). */
	ck_assert_int_gt(fx_json_num(json, "bytes_served") +
			     fx_json_num(json, "opens"),
			 0);
	free(json);
	own_mount_end(&m, cache);
}
END_TEST

/* An origin of a test's own, to take down and bring back: a, b, d/c,
 * d/e and u, each fx_write_file of its own name. */
struct origin {
	struct fx_nginx ng;
	char *data;
	char url[256];
};

static const struct {
	const char *name;
	uint64_t size;
} origin_files[] = {
    {"a", CHUNK + 5}, {"b", 2 * CHUNK + 3}, {"d/c", 1000},
    {"d/e", 5000},    {"u", 3000},
};

static void origin_write(struct origin *o, const char *name, const char *as,
			 uint64_t size)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", o->data, name);
	ck_assert_int_eq(fx_write_file(path, size, seed_of(as)), 0);
}

static void origin_start(struct origin *o, const char *tag)
{
	char path[PATH_MAX];

	o->data = fx_tmpdir(tag);
	snprintf(path, sizeof(path), "%s/d", o->data);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	for (size_t i = 0; i < sizeof(origin_files) / sizeof(origin_files[0]);
	     i++)
		origin_write(o, origin_files[i].name, origin_files[i].name,
			     origin_files[i].size);
	ck_assert_int_eq(fx_nginx_start(&o->ng, o->data), 0);
	snprintf(o->url, sizeof(o->url), "%s/json/", o->ng.base);
}

static void origin_stop(struct origin *o)
{
	fx_nginx_stop(&o->ng);
	fx_rmtree(o->data);
	free(o->data);
}

/* Waits (bounded) until the mount's stats say offline is `want`. */
static bool wait_offline(const char *dir, bool want)
{
	for (int waited = 0; waited < 30000; waited += 200) {
		char *json = fx_mount_stats(dir);
		bool now = json && strstr(json, "\"offline\": true");

		free(json);
		if (now == want)
			return true;
		usleep(200000);
	}
	return false;
}

/*
 * Mount, read part of the tree, unmount, take the origin down, mount
 * again: the listing comes from the snapshot, cached bytes are served, an
 * uncached file fails with EIO at once (one log line for it); the origin
 * back, the same mount reads it.  Another prefix or URL of the same origin
 * never takes that snapshot.
 */
START_TEST(test_offline_remount)
{
	const char *extra[] = {"--origin-wait", "2", NULL};
	char *cache = fx_tmpdir("mount-offline");
	char root_on[256], d_on[256], names[256], path[PATH_MAX + 32];
	char args[PATH_MAX + 512], *json;
	struct origin o;
	struct fx_mount m;

	ck_assert_int_eq(fx_sh("'%s' mount --help | grep -q -- '--offline ' && "
			       "'%s' mount --help | grep -q -- "
			       "'--origin-wait SEC '",
			       fx_wharf_bin(), fx_wharf_bin()),
			 0);
	origin_start(&o, "offline-data");
	fx_mount_init(&m, work_dir, "offline");
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_int_eq(check_file(m.dir, "a", CHUNK + 5), 0);
	ck_assert_int_eq(check_file(m.dir, "d/c", 1000), 0);
	list_names(m.dir, root_on, sizeof(root_on));
	snprintf(path, sizeof(path), "%s/d", m.dir);
	list_names(path, d_on, sizeof(d_on));
	ck_assert_str_eq(root_on, "a b d u ");
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(
	    fx_sh("test -s \"$(ls '%s'/snapshots/*.list)\"", cache), 0);

	/* Up from the snapshot after --origin-wait (fx_mount_start's bounded
	 * wait only stops a hang): offline, as its stats say. */
	fx_nginx_pause(&o.ng);
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(strstr(json, "\"offline\": true"), "%s", json);
	free(json);
	ck_assert_int_gt(count_in_file(m.log, "snapshot saved"), 0);
	list_names(m.dir, names, sizeof(names));
	ck_assert_str_eq(names, root_on);
	snprintf(path, sizeof(path), "%s/d", m.dir);
	list_names(path, names, sizeof(names));
	ck_assert_str_eq(names, d_on);
	ck_assert_int_eq(check_file(m.dir, "a", CHUNK + 5), 0);
	ck_assert_int_eq(check_file(m.dir, "d/c", 1000), 0);
	/* At once: the offline source fails them without asking the
	 * origin (the line it logs says so), one line a file. */
	ck_assert_int_eq(read_errno(m.dir, "u"), EIO);
	ck_assert_int_eq(read_errno(m.dir, "u"), EIO);
	ck_assert_int_eq(read_errno(m.dir, "d/e"), EIO);
	ck_assert_int_eq(count_in_file(m.log, "/u: not cached, and the origin "
					      "cannot be reached (offline)"),
			 1);
	ck_assert_int_eq(count_in_file(m.log, "/d/e: not cached, and the "
					      "origin cannot be reached "
					      "(offline)"),
			 1);

	/* The origin is back: the same mount notices and reads again. */
	ck_assert_int_eq(fx_nginx_resume(&o.ng), 0);
	ck_assert(wait_offline(m.dir, false));
	ck_assert_int_eq(check_file(m.dir, "u", 3000), 0);
	ck_assert_int_eq(check_file(m.dir, "d/e", 5000), 0);
	ck_assert_int_eq(check_file(m.dir, "b", 2 * CHUNK + 3), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* A snapshot belongs to its source. */
	fx_nginx_pause(&o.ng);
	snprintf(args, sizeof(args), "--cache-dir '%s' '%sd/'", cache, o.url);
	ck_assert(mount_refused("other-prefix", args, m.dir,
				"no listing snapshot of"));
	snprintf(args, sizeof(args), "--cache-dir '%s' '%s/html/'", cache,
		 o.ng.base);
	ck_assert(
	    mount_refused("other-url", args, m.dir, "no listing snapshot of"));
	snprintf(args, sizeof(args), "--offline --cache-dir '%s' '%sd/'", cache,
		 o.url);
	ck_assert(mount_refused("other-offline", args, m.dir,
				"no listing snapshot of"));
	/* --offline takes its own, and never asks the origin. */
	ck_assert_int_eq(fx_nginx_resume(&o.ng), 0);
	{
		const char *off[] = {"--offline", NULL};

		ck_assert_int_eq(mount_start(&m, o.url, cache, off), 0);
		ck_assert(wait_offline(m.dir, true));
		ck_assert_int_eq(check_file(m.dir, "u", 3000), 0);
		json = fx_mount_stats(m.dir);
		ck_assert_ptr_nonnull(json);
		ck_assert_msg(fx_json_num(json, "requests") == 0, "%s", json);
		free(json);
	}
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	/* `wharf cache stats` shows it; `wharf cache clear` removes it. */
	snprintf(path, sizeof(path), "%s/cache-stats", work_dir);
	ck_assert_int_eq(fx_sh("'%s' cache stats --cache-dir '%s' >'%s'",
			       fx_wharf_bin(), cache, path),
			 0);
	snprintf(args, sizeof(args), "listing snapshot of %s: 2 directories",
		 o.url);
	ck_assert_int_eq(count_in_file(path, args), 1);
	ck_assert_int_eq(fx_sh("'%s' cache clear --cache-dir '%s' >'%s'",
			       fx_wharf_bin(), cache, path),
			 0);
	ck_assert_int_eq(count_in_file(path, ", 1 listing snapshots"), 1);
	snprintf(args, sizeof(args), "--offline --cache-dir '%s' '%s'", cache,
		 o.url);
	ck_assert(
	    mount_refused("cleared", args, m.dir, "no listing snapshot of"));
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
	origin_stop(&o);
}
END_TEST

/*
 * Chunk keys include the version: an object changed between two mounts is
 * read in its new version, and so is one that changed while a mount was
 * offline, once the origin is back.
 */
START_TEST(test_changed_object_not_stale)
{
	const char *extra[] = {"--origin-wait", "2", NULL};
	char *cache = fx_tmpdir("mount-changed");
	char path[PATH_MAX];
	struct origin o;
	struct fx_mount m;

	origin_start(&o, "changed-data");
	snprintf(path, sizeof(path), "%s/a", o.data);
	fx_mount_init(&m, work_dir, "changed");
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_int_eq(check_file(m.dir, "a", CHUNK + 5), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	/* Same size, other bytes, a later mtime: a new version. */
	origin_write(&o, "a", "a2", CHUNK + 5);
	ck_assert_int_eq(fx_sh("touch -d '+100 seconds' '%s'", path), 0);
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_int_eq(check_file_as(m.dir, "a", "a2", CHUNK + 5), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	fx_nginx_pause(&o.ng);
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert(wait_offline(m.dir, true));
	origin_write(&o, "a", "a3", CHUNK + 5);
	ck_assert_int_eq(fx_sh("touch -d '+200 seconds' '%s'", path), 0);
	ck_assert_int_eq(fx_nginx_resume(&o.ng), 0);
	ck_assert(wait_offline(m.dir, false));
	ck_assert_int_eq(check_file_as(m.dir, "a", "a3", CHUNK + 5), 0);
	own_mount_end(&m, cache);
	origin_stop(&o);
}
END_TEST

/* ---- outages: the origin stops answering under a mount ---- */

#define BLIP_FILES 12
#define BLIP_SIZE 70000

/* One reader of w/fNN that the outage catches: what its read gave. */
struct blip_reader {
	const char *dir;
	char name[16];
	pthread_t th;
	bool bad;    /* a failed read, or other bytes than the origin's */
	int err;     /* the errno of a read that failed, or 0 */
	double took; /* seconds */
};

/* check_file with a descriptor of its own that no child inherits: the
 * origin starts again while these are open. */
static void *blip_read(void *arg)
{
	struct blip_reader *r = arg;
	const double t0 = seconds_now();
	const uint32_t seed = seed_of(r->name);
	static __thread uint8_t buf[BLIP_SIZE + 1];
	char path[PATH_MAX];
	size_t got = 0;
	ssize_t n = 1;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", r->dir, r->name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd >= 0 && got < sizeof(buf) &&
	       (n = read(fd, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	r->err = fd < 0 || n < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	r->bad = r->err || got != BLIP_SIZE;
	for (size_t i = 0; !r->bad && i < got; i++)
		r->bad = buf[i] != fx_byte(seed, i);
	r->took = seconds_now() - t0;
	return NULL;
}

/* Whether the mount's stats hold `what` ("\"offline_state\": \"outage\""),
 * polled (bounded) until they do. */
static bool wait_stats_has(const char *dir, const char *what)
{
	for (int waited = 0; waited < 30000; waited += 100) {
		char *json = fx_mount_stats(dir);
		bool has = json && strstr(json, what);

		free(json);
		if (has)
			return true;
		usleep(100000);
	}
	return false;
}

/* Writes w/f00.. of the origin, BLIP_SIZE bytes each. */
static void blip_files(struct origin *o)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/w", o->data);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	for (int i = 0; i < BLIP_FILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "w/f%02d", i);
		origin_write(o, name, name, BLIP_SIZE);
	}
}

/*
 * The origin stops for about 4 s while readers wait for files the cache
 * does not hold: every read returns the right bytes, none EIO; the mount
 * shows itself offline in an outage meanwhile (stats and metrics), serves
 * what it has cached, and logs both edges, once each.  On the code before
 * outages, each read failed with EIO after its retries.
 */
START_TEST(test_outage_blip_reads_wait)
{
	const char *extra[] = {"--readahead", "0", NULL};
	struct blip_reader r[BLIP_FILES];
	char *cache = fx_tmpdir("mount-blip"), names[256], path[PATH_MAX];
	char *json, *metrics;
	struct origin o;
	struct fx_mount m;
	size_t len;
	int eio = 0, bad = 0, stop, cached;
	bool seen, shown;

	origin_start(&o, "blip-data");
	blip_files(&o);
	fx_mount_init(&m, work_dir, "blip");
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_int_eq(check_file(m.dir, "a", CHUNK + 5), 0);
	snprintf(path, sizeof(path), "%s/w", m.dir);
	list_names(path, names, sizeof(names));
	ck_assert_msg(strstr(names, "f00 ") && strstr(names, "f11 "), "%s",
		      names);
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(strstr(json, "\"offline\": false"), "%s", json);
	free(json);

	fx_nginx_pause(&o.ng);
	for (int i = 0; i < BLIP_FILES; i++) {
		r[i] = (struct blip_reader){.dir = m.dir};
		snprintf(r[i].name, sizeof(r[i].name), "w/f%02d", i);
		ck_assert_int_eq(
		    pthread_create(&r[i].th, NULL, blip_read, &r[i]), 0);
	}
	/* Offline from the first failed retry, readers waiting; what the
	 * cache holds is served meanwhile.  Seen now, said after the reads,
	 * which matter most. */
	seen = wait_stats_has(m.dir, "\"offline_state\": \"outage\"") &&
	       wait_stats_has(m.dir, "\"offline\": true");
	cached = check_file(m.dir, "a", CHUNK + 5);
	snprintf(path, sizeof(path), "%s/.wharf/metrics", m.dir);
	metrics = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(metrics);
	shown = fx_sh("grep -q '^wharf_origin_outage{.*} 1$' '%s' && "
		      "grep -q '^wharf_offline{.*} 1$' '%s'",
		      path, path) == 0;
	sleep(4);
	ck_assert_int_eq(fx_nginx_resume(&o.ng), 0);
	for (int i = 0; i < BLIP_FILES; i++) {
		pthread_join(r[i].th, NULL);
		bad += r[i].bad;
		eio += r[i].err == EIO;
		if (r[i].bad)
			fprintf(stderr, "%s: errno %d after %.1f s\n",
				r[i].name, r[i].err, r[i].took);
	}
	ck_assert_msg(bad == 0 && eio == 0,
		      "%d of %d reads failed (%d EIO) in a 4 s outage; see %s",
		      bad, BLIP_FILES, eio, m.log);
	ck_assert_msg(seen, "the stats never showed the outage; see %s", m.log);
	ck_assert_msg(cached == 0, "a cached file failed in the outage");
	ck_assert_msg(shown, "the metrics did not show the outage: %s",
		      metrics);
	free(metrics);
	ck_assert(wait_stats_has(m.dir, "\"offline_state\": \"online\""));
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(strstr(json, "\"offline\": false") &&
			  fx_stats_num(json, "outage", "outages") == 1 &&
			  fx_stats_num(json, "outage", "waiting") == 0 &&
			  fx_stats_num(json, "outage", "waited") >= 1,
		      "%s", json);
	free(json);
	stop = fx_mount_stop(&m);
	if (stop)
		fx_sh("cat '%s' >&2", m.log);
	ck_assert_int_eq(stop, 0);
	ck_assert_int_eq(count_in_file(m.log, "stopped answering"), 1);
	ck_assert_int_eq(count_in_file(m.log, "wait up to 10m (--outage-wait)"),
			 1);
	ck_assert_int_eq(count_in_file(m.log, "answers again after"), 1);
	ck_assert_int_eq(count_in_file(m.log, "retrying in"), 0);
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
	origin_stop(&o);
}
END_TEST

/*
 * --outage-wait bounds the wait: with 2 s, a read of an uncached file
 * fails with EIO (the mount stays up and says so); a 404 is an answer, not
 * an outage, and fails at once even with the default of 10 minutes (the
 * bounds here only stop a hang).
 */
START_TEST(test_outage_wait_bounded)
{
	const char *extra[] = {"--readahead", "0", "--outage-wait", "2", NULL};
	const char *deflt[] = {"--readahead", "0", NULL};
	char *cache = fx_tmpdir("mount-outage-wait"), path[PATH_MAX];
	struct origin o;
	struct fx_mount m;
	double t0;

	ck_assert_int_eq(
	    fx_sh("'%s' mount --help | grep -q -- '--outage-wait DURATION'",
		  fx_wharf_bin()),
	    0);
	origin_start(&o, "outage-wait-data");
	fx_mount_init(&m, work_dir, "outage-wait");
	ck_assert_int_eq(mount_start(&m, o.url, cache, extra), 0);
	ck_assert_int_eq(check_file(m.dir, "d/c", 1000), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "outage", "wait_s"), 2);
	fx_nginx_pause(&o.ng);
	t0 = seconds_now();
	ck_assert_int_eq(read_errno(m.dir, "d/e"), EIO);
	ck_assert_msg(seconds_now() - t0 < 60, "EIO after %.1f s",
		      seconds_now() - t0);
	ck_assert_int_eq(count_in_file(m.log, "wait up to 2s (--outage-wait)"),
			 1);
	ck_assert_int_eq(check_file(m.dir, "d/c", 1000), 0);
	ck_assert_int_eq(fx_nginx_resume(&o.ng), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	rmdir(m.dir);

	/* Listed, then gone from the origin: a 404, at once. */
	fx_mount_init(&m, work_dir, "outage-404");
	ck_assert_int_eq(mount_start(&m, o.url, cache, deflt), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "outage", "wait_s"), 600);
	snprintf(path, sizeof(path), "%s/u", m.dir);
	ck_assert_int_eq(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/u", o.data);
	ck_assert_int_eq(unlink(path), 0);
	t0 = seconds_now();
	ck_assert_int_ne(read_errno(m.dir, "u"), 0);
	ck_assert_msg(seconds_now() - t0 < 30, "a 404 failed after %.1f s",
		      seconds_now() - t0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "outage", "outages"), 0);
	ck_assert_int_eq(count_in_file(m.log, "stopped answering"), 0);
	own_mount_end(&m, cache);
	origin_stop(&o);
}
END_TEST

static Suite *offline_suite(void)
{
	Suite *s = suite_create("offline");
	const char *why;
	TCase *tc = mount_tcase("offline", &why);

	fx_tcase_add(tc, test_remount_from_cache_origin_down, why);
	fx_tcase_add(tc, test_offline_remount, why);
	fx_tcase_add(tc, test_changed_object_not_stale, why);
	fx_tcase_add(tc, test_outage_blip_reads_wait, why);
	fx_tcase_add(tc, test_outage_wait_bounded, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return fx_suite_run(offline_suite());
}
