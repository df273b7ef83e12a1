/*
 * Ending a mount in bounded time: `wharf umount` and SIGTERM after a walk
 * of a million files (the kernel's freeing of its inodes is left to a
 * child, which outlives the stop), and SIGTERM while the packer copies a
 * large file at idle priority on CPUs that spinning processes keep busy
 * (the copy is dropped, not finished).  Each decided on what happened,
 * not on how long it took.  (SIGTERM while a --token-command runs:
 * test-gcs.)
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture.h"

/* Files in the listing that the walk makes the kernel hold: before, an
 * unmount took 2.5-4 s here and SIGTERM 8 s, all of it the kernel's. */
#define WALK_FILES 1000000
#define PER_DIR 1000
/* Files of 48 chunks (of 1 MiB), three of them for the packer's queue. */
#define BIG_SIZE (48ull << 20)
#define N_BIG 3

static char *work_dir;

/* Under a sanitizer the daemon's exit (its leak scan of a heap that held
 * a million names) can outlast the kernel's freeing: then no unmounting
 * child is left to see, and whether the stop waited for it is unknown. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLOW_EXIT true
#else
#define SLOW_EXIT false
#endif

/* Fails with msg when no unmounting child outlived the stop, except where
 * the daemon's own exit may be slower than the freeing (SLOW_EXIT): there
 * a visible skip of this one check. */
static void check_freeing_outlived(const char *func, int freeing,
				   const char *msg)
{
	if (freeing < 1 && SLOW_EXIT) {
		fx_skip_note(func, "%s (under a sanitizer the daemon's exit "
				   "can outlast the kernel's freeing; "
				   "unchecked)",
			     msg);
		return;
	}
	ck_assert_msg(freeing >= 1, "%s", msg);
}

/* How many live processes whose command line holds `word` (but except)
 * are this process's children now: with this process a subreaper, the
 * children of processes that ended before them. */
static int orphans_alive(pid_t except, const char *word)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		char path[64], buf[512], state;
		const pid_t pid = (pid_t)atoi(de->d_name);
		char *close_paren, *cmd;
		int ppid;
		FILE *f;

		if (pid <= 0 || pid == except)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		close_paren =
		    fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		if (!close_paren ||
		    sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2 ||
		    ppid != (int)getpid() || state == 'Z')
			continue;
		cmd = fx_cmdline(pid);
		n += cmd && strstr(cmd, word);
		free(cmd);
	}
	closedir(d);
	return n;
}

/* Reaps this process's children (the orphans it took in), waiting up to
 * 60 s for them to end: a bound that only stops a hang. */
static void orphans_reap(void)
{
	for (int i = 0; i < 6000; i++) {
		const pid_t pid = waitpid(-1, NULL, WNOHANG);

		if (pid < 0)
			return; /* ECHILD: none left */
		if (pid == 0)
			usleep(10000);
	}
}

/* SIGTERM to m's daemon, which must exit 0 and leave nothing mounted
 * (it is killed, and the test fails, when it is still up after 60 s: a
 * bound that only stops a hang). */
static void sigterm_stop(struct fx_mount *m)
{
	int status;

	ck_assert_int_eq(kill(m->pid, SIGTERM), 0);
	status = fx_wait_exit(m->pid, 60000);
	if (status == -1)
		fx_stop(m->pid, 1000);
	m->pid = -1;
	ck_assert_msg(status != -1, "still up 60 s after SIGTERM");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the daemon ended with status %#x", status);
	ck_assert_msg(fx_sh("mountpoint -q '%s'", m->dir) != 0,
		      "left mounted after SIGTERM");
}

/* A manifest of WALK_FILES files in directories of PER_DIR. */
static void write_walk_manifest(const char *path)
{
	FILE *f = fopen(path, "we");

	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < WALK_FILES; i++)
		fprintf(f, "d%04d/f%07d %d\n", i / PER_DIR, i, 1 + i % 4096);
	ck_assert_int_eq(fclose(f), 0);
}

/* Walks the whole mount as `find` does: every directory listed, every
 * file looked up (the kernel then holds an inode for each). */
static void walk(const char *dir)
{
	ck_assert_int_eq(fx_sh("test \"$(find '%s' -type f | wc -l)\" = %d",
			       dir, WALK_FILES),
			 0);
}

START_TEST(test_stop_after_large_walk)
{
	char manifest[PATH_MAX], url[64], *cache = fx_tmpdir("shut-walk");
	const char *extra[] = {"--manifest", manifest, NULL};
	struct fx_mount m;
	int status, freeing;

	/* The unmounting children, once their parents are gone, are this
	 * process's: it sees whether they outlive the stop. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	/* Nothing listens there: the manifest lists, nothing is read. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/none/",
		 fx_free_port());
	snprintf(manifest, sizeof(manifest), "%s/walk.manifest", work_dir);
	write_walk_manifest(manifest);
	fx_mount_init(&m, work_dir, "walk");
	snprintf(m.cache, sizeof(m.cache), "%s", cache);
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, extra), 0);
	walk(m.dir);

	/* `wharf umount` returns once the daemon is gone, and says
	 * nothing (no "still running"); the kernel's freeing of the walk's
	 * inodes (seconds of it) goes on in its unmounting child, which
	 * outlives it: the command did not wait for it. */
	ck_assert_int_eq(fx_sh("'%s' umount '%s' >>'%s' 2>&1", fx_wharf_bin(),
			       m.dir, m.log),
			 0);
	freeing = orphans_alive(m.pid, " umount ");
	status = fx_wait_exit(m.pid, 60000);
	if (status == -1)
		fx_stop(m.pid, 1000);
	m.pid = -1;
	orphans_reap();
	ck_assert_msg(status == 0, "the daemon: status %#x", status);
	check_freeing_outlived(__func__, freeing,
			       "no unmounting child outlived wharf umount: "
			       "the command waited for the kernel's freeing");

	/* At once the mountpoint and the cache take a new mount; after its
	 * walk, SIGTERM ends it as soon: the daemon's unmounting child
	 * outlives it. */
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, extra), 0);
	walk(m.dir);
	sigterm_stop(&m);
	freeing = orphans_alive(-1, " mount ");
	orphans_reap();
	check_freeing_outlived(__func__, freeing,
			       "no unmounting child outlived the daemon: "
			       "SIGTERM waited for the kernel's freeing");
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/* Starts 16 processes spinning for each online CPU, at nice 19: the
 * packer (SCHED_IDLE) crawls behind them (1% of a CPU), while the reads
 * and the daemon (nice 0) go first (80%), so that a loaded machine does
 * not make the test's own reads crawl too.  @return how many (their pids
 * in pids). */
static int hogs_start(pid_t *pids, int max)
{
	long n = 16 * sysconf(_SC_NPROCESSORS_ONLN);
	int made = 0;

	if (n < 1)
		n = 1;
	if (n > max)
		n = max;
	for (; made < n; made++) {
		pids[made] = fork();
		ck_assert_int_ge(pids[made], 0);
		if (pids[made] == 0) {
			(void)setpriority(PRIO_PROCESS, 0, 19);
			for (volatile unsigned long x = 0;; x++)
				;
		}
	}
	return made;
}

static void hogs_stop(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
}

/* Whether the cache under dir holds a pack being written (a temporary
 * file of one: TMP_PREFIX in store_i.h). */
static bool pack_being_made(const char *cache)
{
	return fx_sh("find '%s' -name '.tmp.*.pack.*' | grep -q .", cache) ==
	       0;
}

/* How many finished packs the cache under dir holds. */
static int packs_made(const char *cache)
{
	return fx_sh("exit $(find '%s' -name '*.pack' ! -name '.tmp.*' | "
		     "wc -l)",
		     cache);
}

/* The path of a pack being written under cache, into out ("" if none). */
static void pack_under_way(const char *cache, char *out, size_t cap)
{
	char cmd[PATH_MAX + 64];
	FILE *p;

	out[0] = '\0';
	snprintf(cmd, sizeof(cmd),
		 "find '%s' -name '.tmp.*.pack.*' -print -quit", cache);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	if (!fgets(out, (int)cap, p))
		out[0] = '\0';
	pclose(p);
	out[strcspn(out, "\n")] = '\0';
}

/* Stops what test_sigterm_during_pack started, before it skips. */
static void pack_test_undo(struct fx_mount *m, struct fx_nginx *ng,
			   char *cache, char *data)
{
	fx_mount_stop(m);
	fx_nginx_stop(ng);
	rmdir(m->dir);
	fx_rmtree(cache);
	fx_rmtree(data);
	free(cache);
	free(data);
}

/*
 * SIGTERM while the packer copies files of 48 chunks into their packs, at
 * idle priority, with every CPU taken by a spinning process: the copy
 * stops mid-way and the rest of the queue is dropped, so the daemon exits
 * with no pack finished after the signal (before, it waited for the copy,
 * which such CPUs let crawl, and took more jobs for up to 5 s).  Nothing
 * half-written counts: no temporary file is left, `wharf cache verify`
 * finds the cache sound, and a remount reads the files whole.
 */
START_TEST(test_sigterm_during_pack)
{
	char *data, *cache;
	char path[PATH_MAX], url[256], name[16];
	struct fx_nginx ng;
	struct fx_mount m;
	char tmp[PATH_MAX];
	pid_t hogs[64];
	uint64_t got = 0;
	int nhogs = 0, before = -1;

	if (!fx_passthrough_expected())
		fx_skip("packs are made where FUSE passthrough is (root, "
			"Linux 6.9 or later)");
	data = fx_tmpdir("shut-data");
	cache = fx_tmpdir("shut-pack");
	for (int i = 0; i < N_BIG; i++) {
		snprintf(path, sizeof(path), "%s/big%d", data, i);
		ck_assert_int_eq(fx_write_file(path, BIG_SIZE, 77 + i), 0);
	}
	ck_assert_int_eq(fx_nginx_start(&ng, data), 0);
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(&m, work_dir, "pack");
	snprintf(m.cache, sizeof(m.cache), "%s", cache);
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, NULL), 0);
	/* Read through the mount (their first read): each release has the
	 * packer make a pack. */
	nhogs = hogs_start(hogs, 64);
	for (int i = 0; i < N_BIG; i++) {
		snprintf(name, sizeof(name), "big%d", i);
		ck_assert_int_eq(fx_read_seed(m.dir, name, 77 + i, &got), 0);
		ck_assert_uint_eq(got, BIG_SIZE);
	}
	for (int i = 0; i < 1000 && !pack_being_made(cache); i++)
		usleep(10000);
	if (!pack_being_made(cache)) {
		const long long packs =
		    fx_mount_stat(m.dir, "disk_cache", "packs");
		hogs_stop(hogs, nhogs);
		/* Every pack made before one was seen under way: nothing to
		 * stop, so nothing tested (say so, do not pass). */
		if (packs >= N_BIG) {
			pack_test_undo(&m, &ng, cache, data);
			fx_skip("the packer made all %lld packs before one "
				"could be seen under way",
				packs);
		}
		ck_abort_msg("no pack was being made 10 s after the read "
			     "(packs: %lld)",
			     packs);
	}
	/* The packs finished before a pack seen under way is finished: its
	 * temporary file still there after they were counted. */
	for (int i = 0; i < 1000 && before < 0; i++) {
		pack_under_way(cache, tmp, sizeof(tmp));
		if (!tmp[0]) {
			/* Between two packs, or past the last one. */
			if (packs_made(cache) >= N_BIG)
				break;
			usleep(10000);
			continue;
		}
		before = packs_made(cache);
		if (access(tmp, F_OK))
			before = -1; /* it was finished meanwhile */
	}
	if (before < 0) {
		const int packs = packs_made(cache);

		hogs_stop(hogs, nhogs);
		/* The last pack finished before one could be seen under
		 * way: nothing to stop, so nothing tested (say so). */
		if (packs >= N_BIG) {
			pack_test_undo(&m, &ng, cache, data);
			fx_skip("the packer made all %d packs before one "
				"stayed under way to be stopped",
				packs);
		}
		ck_abort_msg("no pack stayed under way to be stopped "
			     "(packs: %d of %d)",
			     packs, N_BIG);
	}
	sigterm_stop(&m);
	hogs_stop(hogs, nhogs);
	ck_assert_msg(packs_made(cache) == before,
		      "%d packs finished after SIGTERM: the stop waited for "
		      "the packer",
		      packs_made(cache) - before);
	ck_assert_msg(!pack_being_made(cache),
		      "a pack's temporary file was left");
	ck_assert_int_eq(fx_sh("'%s' cache verify --cache-dir '%s' >>'%s' "
			       "2>&1",
			       fx_wharf_bin(), cache, m.log),
			 0);
	ck_assert_int_eq(fx_mount_start(&m, url, NULL, NULL), 0);
	for (int i = 0; i < N_BIG; i++) {
		snprintf(name, sizeof(name), "big%d", i);
		ck_assert_int_eq(fx_read_seed(m.dir, name, 77 + i, &got), 0);
		ck_assert_uint_eq(got, BIG_SIZE);
	}
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	fx_nginx_stop(&ng);
	rmdir(m.dir);
	fx_rmtree(cache);
	fx_rmtree(data);
	free(cache);
	free(data);
}
END_TEST

static void setup(void)
{
	work_dir = fx_tmpdir("shut-work");
}

static void teardown(void)
{
	fx_unmount_leftovers(work_dir);
	fx_rmtree(work_dir);
	free(work_dir);
}

static Suite *shutdown_suite(void)
{
	Suite *s = suite_create("shutdown");
	TCase *tc = tcase_create("shutdown");
	const char *why = fx_fuse_missing();
	const char *no_nginx = fx_nginx_missing();

	if (!why && fx_sh("'%s' mount --help >/dev/null 2>&1", fx_wharf_bin()))
		why = "this wharf has no mount command";
	if (!why)
		tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	fx_tcase_add(tc, test_stop_after_large_walk, why);
	fx_tcase_add(tc, test_sigterm_during_pack, why ? why : no_nginx);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(shutdown_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
