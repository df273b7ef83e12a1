/* fs/util: size parsing and formatting, reading whole files, secrets in
 * URLs, escaping for a terminal, opening without links. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "fileio.h"
#include "fixture.h"
#include "holders.h"
#include "text.h"
#include "units.h"
#include "url.h"

/* A pipe, as `--manifest <(cmd)` gives, and a /proc file both report a
 * size of 0 and still hold bytes: they are read to the end. */
START_TEST(test_read_file_pipe)
{
	char path[64], *text = NULL, *err = NULL;
	static char big[200000];
	int fds[2];
	size_t len = 0;

	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(write(fds[1], "a 1\nb 2\n", 8), 8);
	close(fds[1]);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
	ck_assert_int_eq(read_file_capped(path, 1024, &text, &len, &err), 0);
	ck_assert_uint_eq(len, 8);
	ck_assert_str_eq(text, "a 1\nb 2\n");
	free(text);
	close(fds[0]);

	ck_assert_int_eq(
	    read_file_capped("/proc/self/status", 1 << 20, &text, &len, &err),
	    0);
	ck_assert_ptr_nonnull(strstr(text, "Pid:"));
	free(text);

	/* Over the cap, from a pipe too (more than one buffer's worth). */
	memset(big, 'x', sizeof(big));
	ck_assert_int_eq(pipe(fds), 0);
	if (fork() == 0) {
		close(fds[0]);
		(void)!write(fds[1], big, sizeof(big));
		_exit(0);
	}
	close(fds[1]);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
	ck_assert_int_eq(read_file_capped(path, 100000, &text, &len, &err),
			 -EFBIG);
	ck_assert_ptr_null(text);
	ck_assert_ptr_nonnull(strstr(err, "larger than 100000 bytes"));
	free(err);
	close(fds[0]);
	wait(NULL);
}
END_TEST

/* --outage-wait's durations: seconds bare or with a unit; nothing else. */
START_TEST(test_parse_duration)
{
	static const char *const bad[] = {"",	 "-1", " 5",
					  "5x",	 "m",  "1.5m",
					  "5 s", "5S", "99999999999999999999"};
	static const struct {
		const char *text;
		uint64_t ms;
	} good[] = {{"0", 0},	     {"45", 45000},   {"90s", 90000},
		    {"500ms", 500},  {"10m", 600000}, {"2h", 7200000},
		    {"1d", 86400000}};
	uint64_t v = 0;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_int_eq(parse_duration(good[i].text, &v), 0);
		ck_assert_uint_eq(v, good[i].ms);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse_duration(bad[i], &v) == -EINVAL, "'%s'",
			      bad[i]);
}
END_TEST

START_TEST(test_parse_size_units)
{
	uint64_t v = 0;

	ck_assert_int_eq(parse_size("123", &v), 0);
	ck_assert_uint_eq(v, 123);
	ck_assert_int_eq(parse_size("4M", &v), 0);
	ck_assert_uint_eq(v, 4u << 20);
	ck_assert_int_eq(parse_size("512k", &v), 0);
	ck_assert_uint_eq(v, 512u << 10);
	ck_assert_int_eq(parse_size("10GiB", &v), 0);
	ck_assert_uint_eq(v, 10ull << 30);
	ck_assert_int_eq(parse_size("2T", &v), 0);
	ck_assert_uint_eq(v, 2ull << 40);
	/* One rule: K, KB and KiB are 1024; decimals where they come out
	 * whole. */
	ck_assert_int_eq(parse_size("500MB", &v), 0);
	ck_assert_uint_eq(v, 500ull << 20);
	ck_assert_int_eq(parse_size("500mib", &v), 0);
	ck_assert_uint_eq(v, 500ull << 20);
	ck_assert_int_eq(parse_size("1.5G", &v), 0);
	ck_assert_uint_eq(v, 3ull << 29);
	ck_assert_int_eq(parse_size("0.25KiB", &v), 0);
	ck_assert_uint_eq(v, 256);
	ck_assert_int_eq(parse_size("2.0T", &v), 0);
	ck_assert_uint_eq(v, 2ull << 40);
}
END_TEST

START_TEST(test_parse_size_rejects)
{
	uint64_t v = 77;

	ck_assert_int_eq(parse_size("", &v), -EINVAL);
	ck_assert_int_eq(parse_size("-1", &v), -EINVAL);
	ck_assert_int_eq(parse_size("4X", &v), -EINVAL);
	ck_assert_int_eq(parse_size("M", &v), -EINVAL);
	ck_assert_int_eq(parse_size("99999999999T", &v), -EINVAL);
	ck_assert_int_eq(parse_size("4Mfoo", &v), -EINVAL);
	/* strtoull skips white space, then wraps a negative number (old
	 * code: " -1" was 2^64 - 1 bytes) */
	ck_assert_int_eq(parse_size(" -1", &v), -EINVAL);
	ck_assert_int_eq(parse_size("\n-5M", &v), -EINVAL);
	ck_assert_int_eq(parse_size(" 4M", &v), -EINVAL);
	/* Not a whole number of bytes, or not a number. */
	ck_assert_int_eq(parse_size("1.5", &v), -EINVAL);
	ck_assert_int_eq(parse_size("1.0001K", &v), -EINVAL);
	ck_assert_int_eq(parse_size("1.G", &v), -EINVAL);
	ck_assert_int_eq(parse_size("1..5G", &v), -EINVAL);
	ck_assert_int_eq(parse_size("1.5GG", &v), -EINVAL);
	ck_assert_int_eq(parse_size("16777216.5T", &v), -EINVAL);
	ck_assert_uint_eq(v, 77);
}
END_TEST

START_TEST(test_format_size)
{
	char buf[32];

	ck_assert_str_eq(format_size(999, buf, sizeof(buf)), "999 B");
	ck_assert_str_eq(format_size(1536, buf, sizeof(buf)), "1.5 KiB");
	ck_assert_str_eq(format_size(3ull << 30, buf, sizeof(buf)), "3.0 GiB");
}
END_TEST

/* What of a URL is secret: user information, query, fragment; hidden
 * in log lines, overwritten in argv. */
START_TEST(test_url_secrets)
{
	char buf[256], url[] = "https://me:pw@host:8080/a/m.txt?X-Amz-Signature=ab#f";

	ck_assert_str_eq(url_redact(url, buf, sizeof(buf)),
			 "https://host:8080/a/m.txt");
	ck_assert_str_eq(url_redact("http://host/x/", buf, sizeof(buf)),
			 "http://host/x/");
	ck_assert_str_eq(url_redact("m.txt?x=1", buf, sizeof(buf)), "m.txt");
	ck_assert_str_eq(url_redact("http://h/p@q?s", buf, sizeof(buf)),
			 "http://h/p@q");
	ck_assert_str_eq(url_redact("http://h/a", buf, 8), "http://");
	url_scrub(url, strlen(url));
	ck_assert_str_eq(url, "https://*****@host:8080/a/m.txt?*****************"
			      "***");
	/* Only within the length given (an -o item ends at its comma). */
	snprintf(buf, sizeof(buf), "http://h/m?sig=1,other=2");
	url_scrub(buf, strlen("http://h/m?sig=1"));
	ck_assert_str_eq(buf, "http://h/m?*****,other=2");
}
END_TEST

/* Bytes a terminal would act on are escaped; UTF-8 text stays. */
START_TEST(test_str_escape)
{
	char *e;

	e = str_escape("a\x1b[2Jb\n\t\\\x9b\xc2\x9b\x7f\xc3\xa9\xe2\x82", "\n",
		       false);
	ck_assert_str_eq(e, "a\\x1b[2Jb\n\\x09\\\\\\x9b\\xc2\\x9b\\x7f\xc3\xa9"
			    "\\xe2\\x82");
	free(e);
	/* A JSON document stays one, and means the same. */
	e = str_escape("{\"s\": \"\x1b\xc2\x9b\x9b\\\"\xc3\xa9\"}\n", "\t\n\r",
		       true);
	ck_assert_str_eq(e, "{\"s\": \"\\u001b\\u009b\\\\x9b\\\"\xc3\xa9\"}\n");
	free(e);
	/* Overlong forms and surrogates are not UTF-8. */
	e = str_escape("\xc0\xaf\xed\xa0\x80", "", false);
	ck_assert_str_eq(e, "\\xc0\\xaf\\xed\\xa0\\x80");
	free(e);
}
END_TEST

/* A link anywhere in the path is refused, and so is a FIFO, at once. */
START_TEST(test_open_nofollow)
{
	char dir[] = "/tmp/wharf-util-XXXXXX", path[128], link[128];
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/d", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/d/f", dir);
	ck_assert_int_eq(close(creat(path, 0600)), 0);
	fd = open_nofollow(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);
	ck_assert_int_eq(open_nofollow(path, O_RDONLY | O_DIRECTORY), -ENOTDIR);
	snprintf(link, sizeof(link), "%s/l", dir);
	ck_assert_int_eq(symlink("d", link), 0);
	snprintf(path, sizeof(path), "%s/l/f", dir);
	ck_assert_int_eq(open_nofollow(path, O_RDONLY), -ELOOP);
	snprintf(link, sizeof(link), "%s/d/lf", dir);
	ck_assert_int_eq(symlink("f", link), 0);
	ck_assert_int_eq(open_nofollow(link, O_RDONLY), -ELOOP);
	snprintf(path, sizeof(path), "%s/d/fifo", dir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	alarm(10); /* a hang is a failure, not a stuck test */
	ck_assert_int_eq(open_nofollow(path, O_RDONLY), -EINVAL);
	alarm(0);
	snprintf(path, sizeof(path), "%s/d", dir);
	fd = open_nofollow(path, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(open_nofollow(path, O_RDONLY), -EINVAL);
	ck_assert_int_eq(open_nofollow("/nonexistent/x", O_RDONLY), -ENOENT);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(path), 0);
}
END_TEST

/* run_capture of a command that sleeps 20 s in a child, on a thread. */
struct slow_run {
	char cmd[PATH_MAX + 64];
	int rc;
};

static void *slow_run(void *arg)
{
	struct slow_run *r = arg;
	char out[64];
	size_t len;
	int status;

	r->rc = run_capture(r->cmd, NULL, 30000, out, sizeof(out), &len,
			    &status);
	return NULL;
}

/*
 * run_capture_stop (what a stop signal calls) ends a command that runs
 * on another thread, within a fraction of a second, with the child it
 * started (its process group), and refuses commands from then on.
 */
START_TEST(test_run_capture_stop)
{
	char *dir = fx_tmpdir("util-stop"), pidfile[PATH_MAX], out[64];
	struct slow_run r = {0};
	pthread_t th;
	pid_t sleeper = 0;
	size_t len;
	int status;

	snprintf(pidfile, sizeof(pidfile), "%s/sleep.pid", dir);
	/* The child marks its end in DIR/done: only if it is not killed. */
	snprintf(r.cmd, sizeof(r.cmd),
		 "sh -c \"sleep 20; touch '%s/done'\" & echo $! > '%s'; wait",
		 dir, pidfile);
	ck_assert_int_eq(pthread_create(&th, NULL, slow_run, &r), 0);
	for (int i = 0; i < 500 && sleeper <= 0; i++) {
		char *c = fx_read_file(pidfile, &len);

		sleeper = c ? (pid_t)atoi(c) : 0;
		free(c);
		usleep(10000);
	}
	ck_assert_int_gt(sleeper, 0);
	run_capture_stop();
	pthread_join(th, NULL);
	/* Ended by the stop: not by its end (20 s, status 0) nor by the
	 * timeout (30 s, -ETIMEDOUT).  How fast is not asked: a loaded
	 * machine may take its time. */
	ck_assert_int_eq(r.rc, -ECANCELED);
	/* Its child was in its group: killed, before it could mark its end
	 * (60 s only stop a hang; it would mark it after 20). */
	for (int i = 0; i < 6000 && !fx_process_gone(sleeper); i++)
		usleep(10000);
	ck_assert_msg(fx_process_gone(sleeper), "the command's child lives on");
	snprintf(pidfile, sizeof(pidfile), "%s/done", dir);
	ck_assert_msg(access(pidfile, F_OK) != 0,
		      "the command ran to its end: the stop waited for it");
	ck_assert_int_eq(run_capture("echo late", NULL, 1000, out, sizeof(out),
				     &len, &status),
			 -ECANCELED);
	fx_rmtree(dir);
	free(dir);
}
END_TEST

/* holders_scan's callback: what it was given, of the processes pids. */
struct seen {
	pid_t pid[2];
	struct holder got[2];
	unsigned calls, stop_after;
};

static bool seen_holder(const struct holder *h, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	for (int i = 0; i < 2; i++)
		if (h->pid == s->pid[i])
			s->got[i] = *h;
	return !s->stop_after || s->calls < s->stop_after;
}

/* A child that holds path (open and mapped) and its directory dir (as its
 * working directory) until its parent closes *release. */
static pid_t holding_child(const char *dir, const char *path, int release[2])
{
	int ready[2];
	char c;
	pid_t pid;

	ck_assert_int_eq(pipe(ready), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		const int fd = open(path, O_RDONLY);

		close(ready[0]);
		close(release[1]);
		if (fd < 0 || chdir(dir) ||
		    mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) ==
			MAP_FAILED)
			_exit(1);
		(void)!write(ready[1], "", 1);
		(void)!read(release[0], &c, 1);
		_exit(0);
	}
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return pid;
}

/*
 * holders_scan finds the processes that hold files under a directory, and
 * what each holds (its working directory, an open file, a mapping, in
 * that order), names them, leaves this process out, and stops when the
 * callback says so.
 */
START_TEST(test_holders_scan)
{
	char *tmp = fx_tmpdir("util-holders"), dir[PATH_MAX];
	char path[PATH_MAX + 16];
	char want[PATH_MAX + 32];
	struct seen s = {0};
	int release[2], status;
	bool denied = false;
	int fd;

	ck_assert_ptr_nonnull(realpath(tmp, dir));
	snprintf(path, sizeof(path), "%s/held.bin", dir);
	ck_assert_int_eq(fx_write_file(path, 8192, 1), 0);
	ck_assert_int_eq(pipe(release), 0);
	s.pid[0] = holding_child(dir, path, release);
	s.pid[1] = holding_child(dir, path, release);
	close(release[0]);
	/* This process holds it too, and is not listed. */
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);

	ck_assert_int_eq(holders_scan(dir, seen_holder, &s, &denied), 0);
	ck_assert_uint_eq(s.calls, 2);
	for (int i = 0; i < 2; i++) {
		const struct holder *h = &s.got[i];

		ck_assert_int_eq(h->pid, s.pid[i]);
		ck_assert_uint_eq(h->n, 3);
		snprintf(want, sizeof(want), "its working directory %s", dir);
		ck_assert_str_eq(h->what[0], want);
		snprintf(want, sizeof(want), "open %s", path);
		ck_assert_str_eq(h->what[1], want);
		snprintf(want, sizeof(want), "mapped %s", path);
		ck_assert_str_eq(h->what[2], want);
		snprintf(want, sizeof(want), ", child of %d", (int)getpid());
		ck_assert_msg(strlen(h->name) > strlen(want) &&
				  !strcmp(h->name + strlen(h->name) -
					      strlen(want),
					  want),
			      "name \"%s\"", h->name);
	}

	/* A callback that says stop: called once. */
	memset(&s.got, 0, sizeof(s.got));
	s.calls = 0;
	s.stop_after = 1;
	ck_assert_int_eq(holders_scan(dir, seen_holder, &s, &denied), 0);
	ck_assert_uint_eq(s.calls, 1);

	/* Nothing under a directory next to it (a prefix of its name). */
	s.calls = 0;
	s.stop_after = 0;
	dir[strlen(dir) - 1] = '\0';
	ck_assert_int_eq(holders_scan(dir, seen_holder, &s, &denied), 0);
	ck_assert_uint_eq(s.calls, 0);

	close(release[1]);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(waitpid(s.pid[i], &status, 0), s.pid[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	close(fd);
	fx_rmtree(tmp);
	free(tmp);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_parse_size_units);
	tcase_add_test(tc, test_parse_duration);
	tcase_add_test(tc, test_parse_size_rejects);
	tcase_add_test(tc, test_format_size);
	tcase_add_test(tc, test_read_file_pipe);
	tcase_add_test(tc, test_url_secrets);
	tcase_add_test(tc, test_str_escape);
	tcase_add_test(tc, test_open_nofollow);
	tcase_add_test(tc, test_run_capture_stop);
	tcase_add_test(tc, test_holders_scan);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
