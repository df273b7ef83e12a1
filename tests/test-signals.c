/*
 * A mount's daemon ended by a signal: kill -9 during a cold read leaves
 * no bad chunk, SIGTERM cancels a slow read and exits 0, SIGTERM at any
 * moment of start-up neither crashes nor leaves a mount behind.  Logs
 * and signals: SIGHUP reopens a rotated log and the mount stays, the
 * signal that ended a mount is named, the next mount after a kill -9 says
 * so and removes the dead mount's metrics file, start-up warnings reach
 * --log-file, and a log file planted by another user is refused.  (Ending
 * in bounded time after a huge walk or during a pack: test-shutdown.)
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture-mount.h"
#include "fixture.h"

/*
 * kill -9 of the daemon during a cold read, three times: then `wharf cache
 * verify` finds no bad chunk, and every byte reads right.  The origin
 * answers each request 200 ms late at 8 MB/s a connection, so the 50 MB
 * file is still coming (for seconds) when the kill comes.
 */
START_TEST(test_kill_during_cold_read)
{
	/* A total cap too: the mount opens as many connections as the
	 * origin's throughput rewards, so a cap per connection alone lets
	 * the read end before the kill. */
	static const char *const slow[] = {
	    "--ttfb-ms",    "200", "--conn-rate", "8M",
	    "--total-rate", "16M", NULL};
	char *cache = fx_tmpdir("mount-kill"), url[256], path[PATH_MAX + 8];
	char vlog[PATH_MAX];
	struct fx_mount m;
	pid_t origin;

	origin = fx_origin_start(data_dir, slow, work_dir, "kill-origin", url,
				 sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work_dir, "kill");
	for (int round = 0; round < 3; round++) {
		pid_t reader;
		int status = 0;

		ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
		reader = fork();
		ck_assert_int_ge(reader, 0);
		if (reader == 0) {
			size_t n = 0;

			snprintf(path, sizeof(path), "%s/big", m.dir);
			/* fx_read_file stops at an error: a short file. */
			_exit(fx_read_file(path, &n) && n == BIG_SIZE ? 0 : 1);
		}
		usleep(100000 + 300000 * (useconds_t)round);
		kill(m.pid, SIGKILL);
		waitpid(m.pid, NULL, 0);
		m.pid = -1;
		waitpid(reader, &status, 0);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
			      "round %d: the read was over before the kill "
			      "(status %#x)",
			      round, status);
		/* A dead daemon's mount answers ENOTCONN until unmounted. */
		ck_assert_int_eq(fx_sh("'%s' umount '%s' >>'%s' 2>&1",
				       fx_wharf_bin(), m.dir, m.log),
				 0);
	}
	snprintf(vlog, sizeof(vlog), "%s/kill-verify.log", work_dir);
	ck_assert_int_eq(fx_sh("'%s' cache verify --cache-dir '%s' >'%s' 2>&1",
			       fx_wharf_bin(), cache, vlog),
			 0);
	ck_assert_int_eq(count_in_file(vlog, " 0 bad, 0 removed"), 1);
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++)
		ck_assert_int_eq(
		    check_file(m.dir, sized_files[i].name, sized_files[i].size),
		    0);
	own_mount_end(&m, cache);
	fx_stop(origin, 5000);
}
END_TEST

/*
 * SIGTERM ends the daemon while a read waits on an origin that trickles
 * at 4 KB/s a connection: fast enough not to count as a stall, so the
 * 1 MiB chunk would take minutes.  The fetches in flight are cancelled,
 * the daemon exits 0 (waited for up to 60 s, well short of the minutes
 * a fetch would take), and the reader gets an error.
 */
START_TEST(test_sigterm_during_slow_read)
{
	static const char *const slow[] = {"--conn-rate", "4k", NULL};
	char *cache = fx_tmpdir("mount-term"), url[256], path[PATH_MAX + 8];
	struct fx_mount m;
	pid_t origin, reader;
	int status, rstatus;

	origin = fx_origin_start(data_dir, slow, work_dir, "term-origin", url,
				 sizeof(url));
	ck_assert_int_gt(origin, 0);
	fx_mount_init(&m, work_dir, "term");
	ck_assert_int_eq(mount_start(&m, url, cache, NULL), 0);
	reader = fork();
	ck_assert_int_ge(reader, 0);
	if (reader == 0) {
		static char buf[65536];
		ssize_t n;
		int fd;

		snprintf(path, sizeof(path), "%s/big", m.dir);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			_exit(1);
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			;
		/* 2: the read was cancelled, or the daemon was gone (the
		 * kernel then fails what it had sent with ECONNABORTED, and
		 * later requests with ENOTCONN). */
		if (n < 0 && (errno == ECANCELED || errno == ECONNABORTED ||
			      errno == ENOTCONN))
			_exit(2);
		_exit(n == 0 ? 0 : 3);
	}
	/* The read is under way: its first chunk is coming. */
	for (int i = 0; i < 100 && fx_mount_stat(m.dir, NULL, "requests") < 2;
	     i++)
		usleep(50000);
	usleep(300000);
	kill(m.pid, SIGTERM);
	status = fx_wait_exit(m.pid, 60000);
	if (status == -1)
		fx_stop(m.pid, 1000);
	m.pid = -1;
	rstatus = fx_wait_exit(reader, 60000);
	if (rstatus == -1)
		fx_stop(reader, 1000);
	fx_sh("umount -l '%s' 2>/dev/null", m.dir);
	fx_stop(origin, 5000);
	ck_assert_msg(status != -1,
		      "the daemon is still up 60 s after SIGTERM");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the daemon ended with status %#x", status);
	ck_assert_msg(rstatus != -1 && WIFEXITED(rstatus) &&
			  WEXITSTATUS(rstatus) == 2,
		      "the reader: status %#x, not a cancelled read", rstatus);
	ck_assert_int_eq(count_in_file(m.log, "unmounting"), 1);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/*
 * SIGTERM at any moment of start-up: before the mount, while the kernel's
 * INIT is unanswered, while the waiter's first stat is in flight.  The
 * daemon ends (0, 1, or killed before its handlers were set), never
 * crashes (under ASan: no use of a destroyed session), and leaves
 * nothing mounted.  A signal that was pending from the start is taken
 * too, at the point where it is most likely to race with start-up.
 */
START_TEST(test_sigterm_during_startup)
{
	char *cache = fx_tmpdir("mount-termstart"), url[256];
	struct fx_mount m;

	char *argv[] = {(char *)fx_wharf_bin(),
			"mount",
			"-f",
			"--cache-dir",
			cache,
			url,
			m.dir,
			NULL};
	char stats[PATH_MAX + 16];
	double up;

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(&m, work_dir, "termstart");
	/* How long start-up takes here; then signals from 0 to 150% of
	 * that, in steps of 5%, so that some land in each stage. */
	snprintf(stats, sizeof(stats), "%s/.wharf/stats", m.dir);
	up = seconds_now();
	m.pid = fx_spawn(argv, m.log);
	ck_assert_int_gt(m.pid, 0);
	for (int i = 0; i < 10000 && access(stats, F_OK); i++)
		usleep(1000);
	up = seconds_now() - up;
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	for (int round = 0; round < 30; round++) {
		int status;

		m.pid = fx_spawn(argv, m.log);
		ck_assert_int_gt(m.pid, 0);
		usleep((useconds_t)(up * 0.05 * round * 1e6));
		kill(m.pid, SIGTERM);
		status = fx_wait_exit(m.pid, 60000);
		if (status == -1)
			fx_stop(m.pid, 1000);
		m.pid = -1;
		ck_assert_msg(status != -1, "round %d: still up after SIGTERM",
			      round);
		ck_assert_msg(
		    (WIFEXITED(status) && WEXITSTATUS(status) <= 1) ||
			(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM),
		    "round %d: status %#x", round, status);
		ck_assert_int_eq(count_in_file(m.log, "Sanitizer"), 0);
		ck_assert_int_eq(count_in_file(m.log, "runtime error"), 0);
		ck_assert_msg(fx_sh("mountpoint -q '%s'", m.dir) != 0,
			      "round %d: left mounted", round);
	}
	/* Started with SIGTERM blocked (a launcher's mask is inherited) and
	 * already sent: the daemon takes it as soon as its handlers are
	 * set, so the session ends before the kernel's INIT is answered,
	 * while the waiter's first stat of the mountpoint is in flight
	 * (which it need not be every time: rounds enough that one is). */
	for (int round = 0; round < 6; round++) {
		sigset_t term, old;
		int status;

		sigemptyset(&term);
		sigaddset(&term, SIGTERM);
		sigprocmask(SIG_BLOCK, &term, &old);
		m.pid = fx_spawn(argv, m.log);
		sigprocmask(SIG_SETMASK, &old, NULL);
		ck_assert_int_gt(m.pid, 0);
		kill(m.pid, SIGTERM);
		status = fx_wait_exit(m.pid, 60000);
		if (status == -1)
			fx_stop(m.pid, 1000);
		m.pid = -1;
		ck_assert_msg(status == 0, "pending SIGTERM: status %#x%s",
			      status, status == -1 ? " (still up)" : "");
		/* A stop, not a mount that failed to answer. */
		ck_assert_int_eq(count_in_file(m.log, "does not answer"), 0);
		ck_assert_int_eq(count_in_file(m.log, "Sanitizer"), 0);
		ck_assert_msg(fx_sh("mountpoint -q '%s'", m.dir) != 0,
			      "left mounted");
	}
	/* ... and the waiter, whose stat failed, said so. */
	ck_assert_int_ge(count_in_file(m.log, "stopped before it was up"), 1);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/* Waits (up to 20 s) until path holds s n times.  @return whether it did. */
static bool wait_in_file(const char *path, const char *s, int n)
{
	for (int i = 0; i < 2000; i++) {
		if (count_in_file(path, s) >= n)
			return true;
		usleep(10000);
	}
	return false;
}

/*
 * logrotate's way: the log renamed, then SIGHUP.  The mount stays up and
 * serves, the new file (created by the mount) gets the next lines, the
 * old one none of them; SIGTERM then ends it, named in the log.
 */
START_TEST(test_sighup_reopens_log)
{
	char log[PATH_MAX], rotated[PATH_MAX + 8];
	const char *extra[] = {"--log-file", log, NULL};
	struct fx_mount m;
	char *cache;
	int status;

	snprintf(log, sizeof(log), "%s/hup.log", work_dir);
	snprintf(rotated, sizeof(rotated), "%s.1", log);
	cache = own_mount_start(&m, "hup", extra);
	ck_assert(wait_in_file(log, "mounted ", 1));
	ck_assert_int_eq(rename(log, rotated), 0);
	ck_assert_int_eq(kill(m.pid, SIGHUP), 0);
	ck_assert_msg(wait_in_file(log, "SIGHUP: reopened the log file", 1),
		      "no reopened log after SIGHUP (the daemon %s)",
		      fx_process_gone(m.pid) ? "is gone" : "is up");
	ck_assert(!fx_process_gone(m.pid));
	ck_assert_int_eq(
	    check_file(m.dir, sized_files[0].name, sized_files[0].size), 0);
	/* Twice: the second reopen is of the file the first made. */
	ck_assert_int_eq(kill(m.pid, SIGHUP), 0);
	ck_assert(wait_in_file(log, "SIGHUP: reopened the log file", 2));
	ck_assert_int_eq(kill(m.pid, SIGTERM), 0);
	status = fx_wait_exit(m.pid, 60000);
	if (status == -1)
		fx_stop(m.pid, 1000);
	m.pid = -1;
	ck_assert_msg(status == 0, "the daemon ended with status %#x", status);
	ck_assert_int_eq(count_in_file(log, "SIGTERM: unmounting"), 1);
	ck_assert_int_eq(count_in_file(rotated, "SIGHUP"), 0);
	ck_assert_int_eq(count_in_file(rotated, "unmounting"), 0);
	ck_assert_int_eq(count_in_file(rotated, "mounted "), 1);
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/*
 * kill -9 leaves the cache's run mark and the metrics file; the next
 * mount of that cache says the last one ended uncleanly and removes that
 * file, which would show a dead mount as alive.  A clean end leaves no
 * mark: the mount after it says nothing.
 */
START_TEST(test_unclean_end_said)
{
	char log[PATH_MAX], prom[PATH_MAX], url[256];
	const char *first[] = {"--log-file", log, "--metrics-file", prom, NULL};
	const char *then[] = {"--log-file", log, NULL};
	char *cache = fx_tmpdir("mount-unclean");
	struct fx_mount m;
	struct stat st;

	snprintf(log, sizeof(log), "%s/unclean.log", work_dir);
	snprintf(prom, sizeof(prom), "%s/unclean.prom", work_dir);
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(&m, work_dir, "unclean");
	ck_assert_int_eq(mount_start(&m, url, cache, first), 0);
	ck_assert_int_eq(stat(prom, &st), 0);
	kill(m.pid, SIGKILL);
	waitpid(m.pid, NULL, 0);
	m.pid = -1;
	ck_assert_int_eq(
	    fx_sh("'%s' umount '%s' >>'%s' 2>&1", fx_wharf_bin(), m.dir, m.log),
	    0);
	ck_assert_int_eq(stat(prom, &st), 0); /* nobody removed it */
	ck_assert_int_eq(count_in_file(log, "ended uncleanly"), 0);

	ck_assert_int_eq(mount_start(&m, url, cache, then), 0);
	ck_assert_int_eq(count_in_file(log, "ended uncleanly"), 1);
	ck_assert_int_eq(count_in_file(log, "removed "), 1);
	ck_assert_msg(stat(prom, &st) && errno == ENOENT,
		      "the killed mount's %s is still there", prom);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	ck_assert_int_eq(mount_start(&m, url, cache, then), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(count_in_file(log, "ended uncleanly"), 1);
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

static bool refused_in_time(const char *tag, const char *args, const char *dir,
			    const char *expect);

/* A start-up warning (here: the cache's filesystem smaller than
 * --cache-size) and a start-up error (a mountpoint that is not empty)
 * are in --log-file, not only on the terminal. */
START_TEST(test_startup_lines_logged)
{
	char log[PATH_MAX], args[2 * PATH_MAX + 64], busy[PATH_MAX + 8];
	const char *extra[] = {"--log-file", log, "--cache-size", "1000T",
			       NULL};
	struct fx_mount m;
	char *cache;

	snprintf(log, sizeof(log), "%s/startup.log", work_dir);
	cache = own_mount_start(&m, "startwarn", extra);
	ck_assert_int_eq(count_in_file(m.log, "cannot hold --cache-size"), 1);
	ck_assert_int_eq(count_in_file(log, "cannot hold --cache-size"), 1);
	own_mount_end(&m, cache);

	snprintf(busy, sizeof(busy), "%s/busy", work_dir);
	ck_assert_int_eq(fx_mkdirs(busy), 0);
	ck_assert_int_eq(fx_sh("touch '%s/x'", busy), 0);
	snprintf(args, sizeof(args), "--log-file '%s' '%s/json/'", log,
		 ng.base);
	ck_assert(refused_in_time("startup-busy", args, busy, "is not empty"));
	ck_assert_int_eq(count_in_file(log, "is not empty"), 1);
}
END_TEST

/* `wharf mount -f ARGS DIR` fails, saying expect (in WORK/TAG).  A mount
 * that comes up instead is ended after 15 s (timeout's SIGTERM), not
 * waited for. */
static bool refused_in_time(const char *tag, const char *args, const char *dir,
			    const char *expect)
{
	char path[PATH_MAX];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", work_dir, tag);
	rc = fx_sh("timeout 15 '%s' mount -f --retries 0 %s '%s' >'%s' 2>&1",
		   fx_wharf_bin(), args, dir, path);
	if (rc == 124)
		fprintf(stderr, "%s: mounted, not refused\n", tag);
	return rc != 0 && rc != 124 && count_in_file(path, expect) > 0;
}

/*
 * --log-file where another user could have laid a trap (root appends to
 * it): a link to a file of root's, a hard link to one, a file of another
 * user, a FIFO.  Each is refused, naming the fix, and the file it leads
 * to is untouched.  A directory others write gets a warning.
 */
START_TEST(test_log_file_planted)
{
	char dir[PATH_MAX], victim[PATH_MAX + 16], log[PATH_MAX + 16];
	char args[3 * PATH_MAX], url[256];
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-logtrap");
	struct stat st;
	FILE *f;

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	snprintf(dir, sizeof(dir), "%s/logs", work_dir);
	ck_assert_int_eq(fx_mkdirs(dir), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	snprintf(victim, sizeof(victim), "%s/victim", work_dir);
	f = fopen(victim, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(log, sizeof(log), "%s/log", dir);
	fx_mount_init(&m, work_dir, "logtrap");
	snprintf(args, sizeof(args), "--cache-dir '%s' --log-file '%s' '%s'",
		 cache, log, url);

	ck_assert_int_eq(symlink(victim, log), 0);
	ck_assert_msg(
	    refused_in_time("logtrap-link", args, m.dir, "is a symbolic link"),
	    "a log file that is a link was not refused");
	ck_assert_int_eq(unlink(log), 0);
	ck_assert_int_eq(link(victim, log), 0);
	ck_assert(
	    refused_in_time("logtrap-hard", args, m.dir, "has 2 hard links"));
	ck_assert_int_eq(unlink(log), 0);
	ck_assert_int_eq(mkfifo(log, 0600), 0);
	ck_assert(refused_in_time("logtrap-fifo", args, m.dir,
				  "is not a regular file"));
	ck_assert_int_eq(unlink(log), 0);
	f = fopen(log, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chown(log, 65534, 65534), 0);
	ck_assert(refused_in_time("logtrap-owner", args, m.dir,
				  "belongs to user 65534"));
	ck_assert_int_eq(stat(victim, &st), 0);
	ck_assert_int_eq(st.st_size, 0);

	/* A file of our own there: mounted, with the warning. */
	ck_assert_int_eq(unlink(log), 0);
	ck_assert_int_eq(
	    mount_start(&m, url, cache,
			(const char *const[]){"--log-file", log, NULL}),
	    0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_ge(count_in_file(log, "(mode 0777) is writable by every "
					    "user without the sticky bit"),
			 1);
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

static Suite *signals_suite(void)
{
	Suite *s = suite_create("signals");
	const char *why;
	TCase *tc = mount_tcase("signals", &why);

	fx_tcase_add(tc, test_kill_during_cold_read, why);
	fx_tcase_add(tc, test_sigterm_during_slow_read, why);
	fx_tcase_add(tc, test_sigterm_during_startup, why);
	fx_tcase_add(tc, test_sighup_reopens_log, why);
	fx_tcase_add(tc, test_unclean_end_said, why);
	fx_tcase_add(tc, test_startup_lines_logged, why);
	fx_tcase_add(tc, test_log_file_planted, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return fx_suite_run(signals_suite());
}
