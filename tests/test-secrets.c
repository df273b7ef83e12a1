/*
 * What other local users and the process table may learn or do: `wharf
 * cache stats` on a cache that another user laid out (run as root, it
 * must print none of root's files and hang on no FIFO), escaped output,
 * and secrets of the command line (a signed --manifest URL) scrubbed from
 * what `ps` shows of the mount and of its detached daemon.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture.h"

#define NOBODY 65534
#define SECRET "TOP-SECRET-4242"
#define SIG "X-Amz-Signature=5ec7e7516a7"

static char *data_dir, *work_dir;
static struct fx_nginx ng;

static void setup(void)
{
	char path[PATH_MAX];

	data_dir = fx_tmpdir("secrets-data");
	work_dir = fx_tmpdir("secrets-work");
	/* Another user must be able to reach what the tests give it. */
	if (chmod(work_dir, 0755))
		abort();
	snprintf(path, sizeof(path), "%s/a", data_dir);
	if (fx_write_file(path, 100000, 1))
		abort();
	snprintf(path, sizeof(path), "%s/manifest.txt", data_dir);
	if (fx_sh("echo 'a 100000' >'%s'", path))
		abort();
	if (fx_nginx_start(&ng, data_dir))
		abort();
}

static void teardown(void)
{
	fx_unmount_leftovers(work_dir);
	fx_nginx_stop(&ng);
	fx_rmtree(data_dir);
	fx_rmtree(work_dir);
	free(data_dir);
	free(work_dir);
}

/* Runs the command line cmd, its stdout into *out and stderr into *err
 * (caller frees); returns its exit status. */
static int run(const char *cmd, char **out, char **err)
{
	char path[PATH_MAX];
	size_t n;
	int rc;

	rc = fx_sh("%s >'%s/out' 2>'%s/err'", cmd, work_dir, work_dir);
	snprintf(path, sizeof(path), "%s/out", work_dir);
	*out = fx_read_file(path, &n);
	snprintf(path, sizeof(path), "%s/err", work_dir);
	*err = fx_read_file(path, &n);
	ck_assert_ptr_nonnull(*out);
	ck_assert_ptr_nonnull(*err);
	return rc;
}

/* `wharf cache stats [--json]` on cache, through run(). */
static int stats(const char *cache, bool json, char **out, char **err)
{
	char cmd[PATH_MAX + 128];

	snprintf(cmd, sizeof(cmd),
		 "timeout 20 '%s' cache stats %s --cache-dir '%s'",
		 fx_wharf_bin(), json ? "--json" : "", cache);
	return run(cmd, out, err);
}

/* Whether any byte of s is one a terminal acts on (C0 but newline, DEL,
 * 0x80..0x9f: a C1 control alone or inside UTF-8). */
static bool has_control(const char *s)
{
	for (; *s; s++) {
		const unsigned char c = (unsigned char)*s;

		if ((c < 0x20 && c != '\n') || c == 0x7f ||
		    (c >= 0x80 && c <= 0x9f))
			return true;
	}
	return false;
}

/* ---- cache stats of one's own live mount: read, and escaped ---- */

/*
 * A mount whose mountpoint and cache have bytes a terminal acts on in
 * their names (ESC, a C1 CSI, a byte of invalid UTF-8): the mount's own
 * stats carry them (its JSON writer escapes only C0), and `wharf cache
 * stats` prints them escaped, in text and as JSON that a strict reader
 * takes.
 */
START_TEST(stats_live_mount_escaped)
{
	static const char *const none[] = {NULL};
	char url[256], *out, *err;
	struct fx_mount m;

	fx_mount_init(&m, work_dir, "esc\x1b[2J\xc2\x9b" "31m\x9b");
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(fx_mount_start(&m, url, none, none), 0);
	ck_assert_int_eq(fx_sh("cat '%s/a' >/dev/null", m.dir), 0);
	/* The mount's state in people's lines, none of its JSON. */
	ck_assert_int_eq(stats(m.cache, false, &out, &err), 0);
	ck_assert_msg(strstr(out, "\n  source      http://"), "%s", out);
	/* (Then the read time, when a span of two snapshots gives it.) */
	ck_assert_msg(strstr(out, " 1 files read\n") ||
			  strstr(out, " 1 files read, "),
		      "%s", out);
	ck_assert_msg(strstr(out, "\n  disk        "), "%s", out);
	ck_assert_msg(strstr(out, "\n              cap "), "%s", out);
	ck_assert_msg(strstr(out, "\n  checksums   "), "%s", out);
	ck_assert_msg(!strchr(out, '{') && !strstr(out, "bytes_served"),
		      "JSON in the text: %s", out);
	ck_assert_msg(!*err, "%s", err);
	ck_assert_msg(!has_control(out), "unescaped: %s", out);
	ck_assert_msg(strstr(out, "esc\\x1b[2J\\xc2\\x9b31m\\x9b"), "%s", out);
	free(out);
	free(err);
	ck_assert_int_eq(stats(m.cache, true, &out, &err), 0);
	ck_assert_msg(!has_control(out), "unescaped: %s", out);
	free(out);
	free(err);
	ck_assert_int_eq(
	    fx_sh("/usr/bin/python3 -c 'import json,sys; "
		  "d = json.loads(open(sys.argv[1], \"rb\").read()"
		  ".decode(\"utf-8\")); "
		  "m = d[\"mount\"]; "
		  "sys.exit(0 if m[\"mountpoint\"].endswith("
		  "\"esc\\x1b[2J\\x9b31m\\\\x9b\" + sys.argv[2]) and "
		  "\"bytes_served\" in json.dumps(m) else 1)' '%s/out' '%s'",
		  work_dir, strrchr(m.dir, '-')),
	    0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	rmdir(m.dir);
}
END_TEST

/* ---- a cache another user laid out, read by root ---- */

struct foreign {
	char base[PATH_MAX], cache[PATH_MAX + 8], mnt[PATH_MAX + 8];
	pid_t owner_proc; /* a process of the cache's owner */
	int lock_fd;
};

/* A process that runs as nobody until killed. */
static pid_t nobody_process(void)
{
	const pid_t pid = fork();

	if (pid == 0) {
		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(1);
		/* Gone with the test, even one that failed half-way. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(600);
		for (;;)
			pause();
	}
	ck_assert_int_gt(pid, 0);
	return pid;
}

/* What the cache's mountpoint has as its .wharf/stats. */
enum planted { PLANT_NONE, PLANT_LINK, PLANT_FIFO };

/* Writes "PID\nMOUNTPOINT\n" into f's lock file, as a mount does. */
static void lock_names(struct foreign *f, pid_t pid)
{
	char text[PATH_MAX + 32];
	const int n = snprintf(text, sizeof(text), "%d\n%s\n", (int)pid,
			       f->mnt);

	ck_assert_int_eq(ftruncate(f->lock_fd, 0), 0);
	ck_assert_int_eq(pwrite(f->lock_fd, text, (size_t)n, 0), n);
}

/*
 * nobody's cache BASE/c, held (its lock file flocked, by this process)
 * and naming a process of nobody's and BASE/m as its mount, where
 * .wharf/stats is what `plant` says: a link to root's BASE/secret, which
 * holds SECRET, or a FIFO.
 */
static void foreign_cache(struct foreign *f, enum planted plant)
{
	char *base = fx_tmpdir("secrets-foreign");
	char path[PATH_MAX + 32];

	snprintf(f->base, sizeof(f->base), "%s", base);
	free(base);
	snprintf(f->cache, sizeof(f->cache), "%s/c", f->base);
	snprintf(f->mnt, sizeof(f->mnt), "%s/m", f->base);
	ck_assert_int_eq(chmod(f->base, 0755), 0);
	ck_assert_int_eq(fx_sh("printf '%s' >'%s/secret' && chmod 600 "
			       "'%s/secret'",
			       SECRET, f->base, f->base),
			 0);
	ck_assert_int_eq(fx_sh("mkdir -p '%s/chunks' '%s/.wharf' && touch "
			       "'%s/lock'",
			       f->cache, f->mnt, f->cache),
			 0);
	snprintf(path, sizeof(path), "%s/.wharf/stats", f->mnt);
	if (plant == PLANT_LINK)
		ck_assert_int_eq(fx_sh("ln -s '%s/secret' '%s'", f->base, path),
				 0);
	if (plant == PLANT_FIFO)
		ck_assert_int_eq(mkfifo(path, 0644), 0);
	ck_assert_int_eq(fx_sh("chown -hR %d:%d '%s' '%s' && chmod 700 '%s'",
			       NOBODY, NOBODY, f->cache, f->mnt, f->cache),
			 0);
	/* Before the lock is taken: it would hold it too. */
	f->owner_proc = nobody_process();
	snprintf(path, sizeof(path), "%s/lock", f->cache);
	f->lock_fd = open(path, O_RDWR);
	ck_assert_int_ge(f->lock_fd, 0);
	ck_assert_int_eq(flock(f->lock_fd, LOCK_EX), 0);
	lock_names(f, f->owner_proc);
}

static void foreign_end(struct foreign *f)
{
	if (f->lock_fd >= 0)
		close(f->lock_fd);
	if (f->owner_proc > 0) {
		kill(f->owner_proc, SIGKILL);
		waitpid(f->owner_proc, NULL, 0);
	}
	fx_rmtree(f->base);
}

/* `wharf cache stats [--json]` as root on f's cache: refused (status 1)
 * with a message that has `says`, never SECRET, within 20 s. */
static void stats_refused(const struct foreign *f, const char *says)
{
	char *out, *err;
	int rc;

	for (int json = 0; json < 2; json++) {
		rc = stats(f->cache, json, &out, &err);
		ck_assert_msg(rc != 124, "cache stats hung");
		ck_assert_msg(!strstr(out, SECRET) && !strstr(err, SECRET),
			      "cache stats printed the secret: %s%s", out,
			      err);
		ck_assert_int_eq(rc, 1);
		ck_assert_msg(strstr(err, "not reading the live counters"),
			      "%s", err);
		ck_assert_msg(strstr(err, says), "'%s' lacks '%s'", err, says);
		/* What the cache holds is still shown. */
		ck_assert_msg(strstr(out, json ? "\"mount\": null" : "0 chunks"),
			      "%s", out);
		free(out);
		free(err);
	}
}

static const char *need_root(void)
{
	return geteuid() ? "not root: cannot lay out another user's cache"
			 : NULL;
}

/* The case: .wharf/stats a link to a file only root reads. */
START_TEST(stats_foreign_link)
{
	struct foreign f;
	char want[128];

	if (need_root())
		fx_skip("%s", need_root());
	foreign_cache(&f, PLANT_LINK);
	/* The lock names a process of the owner's, whose mount it is not. */
	snprintf(want, sizeof(want), "it is not a wharf mount of process %d",
		 (int)f.owner_proc);
	stats_refused(&f, want);
	/* It names a process of root's (this one). */
	lock_names(&f, getpid());
	stats_refused(&f, "runs as uid 0, not as the cache's owner (uid "
			  "65534)");
	foreign_end(&f);
}
END_TEST

/* A FIFO there: no hang. */
START_TEST(stats_foreign_fifo)
{
	struct foreign f;

	if (need_root())
		fx_skip("%s", need_root());
	foreign_cache(&f, PLANT_FIFO);
	stats_refused(&f, "not a wharf mount");
	foreign_end(&f);
}
END_TEST

/* Another user's cache is refused to a user who is not root; root reads
 * it, as its owner. */
START_TEST(stats_foreign_owner)
{
	struct foreign f;
	char cmd[PATH_MAX + 128], *out, *err;

	if (need_root())
		fx_skip("%s", need_root());
	foreign_cache(&f, PLANT_NONE);
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=1 --regid=1 --clear-groups '%s' cache stats "
		 "--cache-dir '%s'",
		 fx_wharf_bin(), f.cache);
	ck_assert_int_eq(run(cmd, &out, &err), 1);
	ck_assert_msg(strstr(err, "belongs to uid 65534, not to you"), "%s",
		      err);
	free(out);
	free(err);
	close(f.lock_fd); /* not mounted */
	f.lock_fd = -1;
	ck_assert_int_eq(stats(f.cache, false, &out, &err), 0);
	ck_assert_msg(strstr(out, "not mounted"), "%s", out);
	free(out);
	free(err);
	foreign_end(&f);
}
END_TEST

/* ---- secrets on the command line ---- */

/* The pid in CACHE/lock: the mount's daemon. */
static pid_t daemon_of(const char *cache)
{
	char path[PATH_MAX + 8], *text;
	size_t n;
	long pid;

	snprintf(path, sizeof(path), "%s/lock", cache);
	text = fx_read_file(path, &n);
	ck_assert_ptr_nonnull(text);
	pid = strtol(text, NULL, 10);
	free(text);
	ck_assert_int_gt(pid, 0);
	return (pid_t)pid;
}

/*
 * A signed manifest URL, given as an option, as -o, and through
 * mount.fuse.wharf: the detached daemon's command line shows the URL
 * without its query, and the mount reads the manifest all the same.  A
 * manifest that cannot be fetched is named without its query.
 */
START_TEST(manifest_query_scrubbed)
{
	char *base = fx_tmpdir("secrets-manifest"), cmd[4 * PATH_MAX];
	char man[512], src[256], path[PATH_MAX], *text, *out, *err;
	size_t n;

	snprintf(man, sizeof(man),
		 "'%s/plain/manifest.txt?" SIG "&X-Amz-Credential=AKIA1'",
		 ng.base);
	snprintf(src, sizeof(src), "%s/plain/", ng.base);
	/* mount(8)'s helper is the same program under that name. */
	ck_assert_int_eq(fx_sh("mkdir -p '%s/m' && ln -s '%s' "
			       "'%s/mount.fuse.wharf'",
			       base, fx_wharf_real_bin(), base),
			 0);
	for (int form = 0; form < 3; form++) {
		if (form == 0)
			snprintf(cmd, sizeof(cmd),
				 "'%s' mount --cache-dir '%s/c' --manifest %s "
				 "%s '%s/m'",
				 fx_wharf_bin(), base, man, src, base);
		else if (form == 1)
			snprintf(cmd, sizeof(cmd),
				 "'%s' mount -o cache_dir=%s/c,manifest=%s,"
				 "chunk_size=1M %s '%s/m'",
				 fx_wharf_bin(), base, man, src, base);
		else
			snprintf(cmd, sizeof(cmd),
				 "'%s/mount.fuse.wharf' %s '%s/m' -o "
				 "cache_dir=%s/c,manifest=%s",
				 base, src, base, base, man);
		ck_assert_msg(fx_sh("%s", cmd) == 0, "%s", cmd);
		snprintf(path, sizeof(path), "%s/c", base);
		text = fx_cmdline(daemon_of(path));
		ck_assert_ptr_nonnull(text);
		ck_assert_msg(!strstr(text, "5ec7e7516a7") &&
				  !strstr(text, "AKIA1"),
			      "ps shows the signature: %s", text);
		ck_assert_msg(strstr(text, "manifest.txt?"), "%s", text);
		free(text);
		snprintf(path, sizeof(path), "%s/m/a", base);
		text = fx_read_file(path, &n);
		ck_assert_ptr_nonnull(text);
		ck_assert_uint_eq(n, 100000);
		free(text);
		ck_assert_int_eq(
		    fx_sh("'%s' umount '%s/m'", fx_wharf_bin(), base), 0);
	}
	snprintf(man, sizeof(man), "'%s/plain/none.txt?" SIG "'", ng.base);
	snprintf(cmd, sizeof(cmd),
		 "'%s' mount --cache-dir '%s/c' --manifest %s %s '%s/m'",
		 fx_wharf_bin(), base, man, src, base);
	ck_assert_int_eq(run(cmd, &out, &err), 1);
	ck_assert_msg(strstr(err, "none.txt") && !strstr(err, "5ec7e7516a7"),
		      "%s", err);
	free(out);
	free(err);
	fx_rmtree(base);
	free(base);
}
END_TEST

static Suite *secrets_suite(void)
{
	Suite *s = suite_create("secrets");
	TCase *tc = tcase_create("secrets");
	const char *why = fx_fuse_missing();

	if (!why && fx_sh("'%s' mount --help >/dev/null 2>&1", fx_wharf_bin()))
		why = "this wharf has no mount command";
	if (!why)
		why = fx_nginx_missing();
	if (!why)
		tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	fx_tcase_add(tc, stats_live_mount_escaped, why);
	fx_tcase_add(tc, stats_foreign_link, why);
	fx_tcase_add(tc, stats_foreign_fifo, why);
	fx_tcase_add(tc, stats_foreign_owner, why);
	fx_tcase_add(tc, manifest_query_scrubbed, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(secrets_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
