/*
 * cachedir: the cache dir itself: its lock (one mount per dir), who may
 * own it and write in it, links and FIFOs planted in it, and where it is
 * by default.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture-store.h"
#include "text.h"

START_TEST(lock_one_mount)
{
	struct store_config cfg = {.dir = dir};
	struct store *st = open_store(dir, 0), *st2 = NULL;
	char *err = NULL, *mp = NULL, want[64];
	pid_t pid;

	ck_assert_int_eq(store_open(&cfg, &st2, &err), -EBUSY);
	ck_assert_ptr_null(st2);
	ck_assert_ptr_nonnull(err);
	snprintf(want, sizeof(want), "process %d", (int)getpid());
	ck_assert_msg(strstr(err, want), "'%s' lacks '%s'", err, want);
	ck_assert_ptr_nonnull(strstr(err, dir));
	free(err);
	err = NULL;

	ck_assert_int_eq(store_set_mountpoint(st, "/mnt/data set"), 0);
	ck_assert_int_eq(store_open(&cfg, &st2, &err), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "mounted on /mnt/data set"));
	free(err);
	ck_assert_int_eq(store_lock_holder(dir, &pid, &mp), 0);
	ck_assert_int_eq(pid, getpid());
	ck_assert_str_eq(mp, "/mnt/data set");
	free(mp);

	store_close(st);
	ck_assert_int_eq(store_lock_holder(dir, &pid, &mp), -ENOENT);
	st = open_store(dir, 0);
	store_close(st);
}
END_TEST

static void *close_later(void *st)
{
	usleep(150 * 1000);
	store_close(st);
	return NULL;
}

/* A holder that lets go within half a second (`wharf cache stats`
 * probing, a mount on its way out): the open waits for it instead of
 * failing. */
START_TEST(lock_waits_for_exiting_holder)
{
	struct store_config cfg = {.dir = dir};
	struct store *st = open_store(dir, 0), *st2 = NULL;
	char *err = NULL;
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, close_later, st), 0);
	ck_assert_int_eq(store_open(&cfg, &st2, &err), 0);
	ck_assert_ptr_null(err);
	pthread_join(t, NULL);
	store_close(st2);
}
END_TEST

/* A mount that was unmounted but is still writing its last chunks
 * (`umount DIR && mount DIR`): a child holds the lock for 3 s with a
 * mountpoint where nothing is mounted.  Without a wait the open is refused
 * as before; with one it waits for the holder to end, and says so. */
START_TEST(lock_waits_for_unmounted_holder)
{
	struct store_config cfg = {.dir = dir};
	struct store *st2 = NULL;
	char *err = NULL, ready;
	int fds[2], status;
	pid_t child;

	ck_assert_int_eq(pipe(fds), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		struct store *st = open_store(dir, 0);

		if (store_set_mountpoint(st, "/nonexistent/wharf-mnt"))
			_exit(1);
		if (write(fds[1], "r", 1) != 1)
			_exit(1);
		sleep(3);
		store_close(st);
		_exit(0);
	}
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], &ready, 1), 1);
	close(fds[0]);

	ck_assert_int_eq(store_open(&cfg, &st2, &err), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "mounted on /nonexistent/wharf-mnt"));
	free(err);
	err = NULL;

	cfg.holder_exit_wait_ms = 60000;
	ck_assert_msg(store_open(&cfg, &st2, &err) == 0,
		      "not opened after the holder ended: %s", err);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	store_close(st2);
}
END_TEST

START_TEST(mode_0700)
{
	char *d = strdupf("%s/a/b/cache", dir), *a = strdupf("%s/a", dir);
	struct store *st = open_store(d, 0);
	struct stat sb;

	ck_assert_int_eq(stat(d, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(a, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 07777, 0700);
	store_close(st);
	free(d);
	free(a);
}
END_TEST

/* store_open's err, for a dir that must be refused with -EPERM. */
static void refused(const char *d, const char *says)
{
	struct store_config cfg = {.dir = d};
	struct store *st = NULL;
	char *err = NULL;

	ck_assert_int_eq(store_open(&cfg, &st, &err), -EPERM);
	ck_assert_ptr_null(st);
	ck_assert_msg(err && strstr(err, says), "message: %s", err);
	free(err);
}

/* A cache dir another user could write to is refused, as one that
 * belongs to another user; fixed, it opens. */
START_TEST(foreign_dir_refused)
{
	struct store *st;

	ck_assert_int_eq(chmod(dir, 0777), 0);
	refused(dir, "writable by others");
	ck_assert_int_eq(chmod(dir, 0770), 0);
	refused(dir, "chmod go-w");
	ck_assert_int_eq(chmod(dir, 0700), 0);
	st = open_store(dir, 0);
	store_close(st);
	/* Its chunk dirs too. */
	{
		char *fan = strdupf("%s/chunks/7f", dir);

		ck_assert_int_eq(chmod(fan, 0757), 0);
		refused(dir, "chunks/7f is writable by others");
		free(fan);
	}
}
END_TEST

/* A cache dir that belongs to another user is refused (only root can
 * give it away to try). */
START_TEST(foreign_owner_refused)
{
	struct store *st;

	if (geteuid() != 0)
		fx_skip("not root: cannot chown the cache dir to another user");
	st = open_store(dir, 0);
	store_close(st);
	ck_assert_int_eq(chown(dir, 65534, 65534), 0);
	refused(dir, "belongs to uid 65534");
	ck_assert_int_eq(chown(dir, 0, 0), 0);
	st = open_store(dir, 0);
	store_close(st);
}
END_TEST

/* Links planted in a cache dir are not followed: a `lock` link would
 * make the mount truncate and write its target. */
START_TEST(planted_links_refused)
{
	char *target = strdupf("%s/victim", root),
	     *lock = strdupf("%s/lock", dir);
	char *chunks = strdupf("%s/chunks", dir), *elsewhere;
	struct store_config cfg = {.dir = dir};
	struct store *st = NULL;
	char *err = NULL;

	ck_assert_int_eq(fx_sh("printf precious >'%s'", target), 0);
	ck_assert_int_eq(symlink(target, lock), 0);
	ck_assert_int_lt(store_open(&cfg, &st, &err), 0);
	ck_assert_ptr_null(st);
	free(err);
	err = NULL;
	ck_assert_int_eq(fx_sh("test \"$(cat '%s')\" = precious", target), 0);
	ck_assert_int_eq(unlink(lock), 0);

	elsewhere = fx_tmpdir("store-elsewhere");
	ck_assert_int_eq(symlink(elsewhere, chunks), 0);
	ck_assert_int_lt(store_open(&cfg, &st, &err), 0);
	ck_assert_ptr_null(st);
	ck_assert_int_eq(fx_sh("test -z \"$(ls -A '%s')\"", elsewhere), 0);
	free(err);
	free(elsewhere);
	free(target);
	free(lock);
	free(chunks);
}
END_TEST

static int count_bad(const struct store_entry *e, void *arg)
{
	if (e->error == -EINVAL && !strcmp(e->why, "not a regular file"))
		++*(int *)arg;
	return 0;
}

/* A FIFO with a chunk's name hangs nothing: not the scan at open, not a
 * read of that chunk, not a walk, which reports it. */
START_TEST(fifo_chunk_skipped)
{
	struct store *st = open_store(dir, 0);
	uint8_t buf[64];
	char path[1024], *err = NULL;
	struct chunk_key k;
	size_t len;
	int n = 0;

	key_n(&k, 9);
	store_close(st);
	chunk_path(dir, &k, path, sizeof(path));
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	st = open_store(dir, 0); /* the scan skips it */
	ck_assert_int_eq(
	    store_walk(dir, STORE_WALK_VERIFY, count_bad, &n, &err), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(store_get(st, &k, buf, sizeof(buf), &len), -EBADMSG);
	ck_assert_int_eq(store_get(st, &k, buf, sizeof(buf), &len), -ENOENT);
	store_close(st);
}
END_TEST

/* Without HOME, a user's default cache is in the home the password file
 * names, never in a shared dir such as /tmp. */
START_TEST(default_dir_without_home)
{
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	char *xdg =
	    getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
	char *d;

	unsetenv("HOME");
	unsetenv("XDG_CACHE_HOME");
	d = store_default_dir();
	if (geteuid() == 0)
		ck_assert_str_eq(d, "/var/cache/wharf");
	else
		ck_assert_msg(!d || strncmp(d, "/tmp", 4), "default %s", d);
	free(d);
	if (home)
		setenv("HOME", home, 1);
	if (xdg)
		setenv("XDG_CACHE_HOME", xdg, 1);
	free(home);
	free(xdg);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, lock_one_mount);
	tcase_add_test(tc, lock_waits_for_exiting_holder);
	tcase_add_test(tc, lock_waits_for_unmounted_holder);
	tcase_add_test(tc, mode_0700);
	tcase_add_test(tc, foreign_dir_refused);
	tcase_add_test(tc, foreign_owner_refused);
	tcase_add_test(tc, planted_links_refused);
	tcase_add_test(tc, fifo_chunk_skipped);
	tcase_add_test(tc, default_dir_without_home);
}

int main(void)
{
	return store_fx_main("cachedir", add_tests);
}
