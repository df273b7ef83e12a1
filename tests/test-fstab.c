/*
 * wharf in the system's mount machinery: mount.fuse.wharf run exactly as
 * mount(8) runs it for an fstab line (SOURCE DIR -o OPTIONS), and, as
 * root, mount(8) and umount(8) themselves.  mount(8) finds helpers only in
 * /sbin and /usr/sbin, so that test runs in a private mount namespace with
 * the build tree's helper bound over /usr/sbin.  The origin is a real
 * nginx on 127.0.0.1; every read is compared byte for byte, and after each
 * unmount the daemon must be gone and the cache lock free.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture.h"

#define FILE_SIZE 300001u /* a few 64K chunks and a part */
#define SEED 19u

static char *data_dir, *work_dir, *sbin_dir, *usr_sbin;
static char helper[PATH_MAX]; /* SBIN/mount.fuse.wharf */
static struct fx_nginx ng;

static void setup(void)
{
	char path[PATH_MAX];

	data_dir = fx_tmpdir("fstab-data");
	work_dir = fx_tmpdir("fstab-work");
	snprintf(path, sizeof(path), "%s/a", data_dir);
	if (fx_mkdirs(path))
		abort();
	snprintf(path, sizeof(path), "%s/a/b.bin", data_dir);
	if (fx_write_file(path, FILE_SIZE, SEED))
		abort();
	sbin_dir = fx_tmpdir("fstab-sbin");
	snprintf(helper, sizeof(helper), "%s/mount.fuse.wharf", sbin_dir);
	/* The binary itself: the helper is known by the name it is run
	 * under, which libtool's wrapper script would not pass on. */
	if (symlink(fx_wharf_real_bin(), helper))
		abort();
	/* What mount(8) will find: it runs helpers with a clean environment,
	 * so a script hands the helper its arguments with the library path
	 * of the build tree. */
	usr_sbin = fx_tmpdir("fstab-usr-sbin");
	if (fx_sh("printf '#!/bin/sh\\nLD_LIBRARY_PATH=\"%%s\" exec \"%%s\" "
		  "\"$@\"\\n' \"$LD_LIBRARY_PATH\" '%s' "
		  "> '%s/mount.fuse.wharf' && chmod 755 '%s/mount.fuse.wharf'",
		  helper, usr_sbin, usr_sbin))
		abort();
	if (fx_nginx_start(&ng, data_dir))
		abort();
}

static void teardown(void)
{
	fx_nginx_stop(&ng);
	fx_rmtree(data_dir);
	fx_rmtree(work_dir);
	fx_rmtree(sbin_dir);
	fx_rmtree(usr_sbin);
	free(data_dir);
	free(work_dir);
	free(sbin_dir);
	free(usr_sbin);
}

/* A file's text, NUL-terminated, or NULL. */
static char *read_text(const char *path)
{
	size_t len;

	return fx_read_file(path, &len);
}

/* A fresh mountpoint and cache dir under the work dir. */
static void dirs(const char *tag, char mnt[PATH_MAX], char cache[PATH_MAX])
{
	snprintf(mnt, PATH_MAX, "%s/%s-mnt", work_dir, tag);
	snprintf(cache, PATH_MAX, "%s/%s-cache", work_dir, tag);
	ck_assert_int_eq(fx_mkdirs(mnt), 0);
}

static void check_bytes(const char *mnt)
{
	char path[PATH_MAX];
	unsigned char *b;
	size_t len;

	snprintf(path, sizeof(path), "%s/a/b.bin", mnt);
	b = fx_read_file(path, &len);
	ck_assert_msg(b != NULL, "cannot read %s", path);
	ck_assert_uint_eq(len, FILE_SIZE);
	for (size_t i = 0; i < len; i++)
		if (b[i] != fx_byte(SEED, i))
			ck_abort_msg("%s: byte %zu differs", path, i);
	free(b);
}

/* The options field of mnt's line in /proc/mounts, with its type. */
static bool mount_line(const char *mnt, char *type, char *opts)
{
	char dev[512], dir[PATH_MAX];
	bool found = false;
	FILE *f = fopen("/proc/mounts", "re");

	ck_assert_ptr_nonnull(f);
	while (fscanf(f, "%511s %4095s %63s %1023s %*d %*d", dev, dir, type,
		      opts) == 4)
		if (!strcmp(dir, mnt)) {
			found = true;
			break;
		}
	fclose(f);
	return found;
}

static pid_t daemon_pid(const char *mnt)
{
	const long long pid = fx_mount_stat(mnt, NULL, "pid");

	ck_assert_msg(pid > 0, "no pid in %s/.wharf/stats", mnt);
	return (pid_t)pid;
}

/* Gone, or a zombie that its parent (init, here) has not reaped yet. */
static bool process_gone(pid_t pid)
{
	char path[64], *stat;
	const char *rp;
	bool gone;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	stat = read_text(path);
	if (!stat)
		return true;
	rp = strrchr(stat, ')');
	gone = rp && (rp[2] == 'Z' || rp[2] == 'X');
	free(stat);
	return gone;
}

/* After an unmount: no daemon, no mount, no lock on the cache. */
static void check_released(pid_t pid, const char *mnt, const char *cache)
{
	char type[64], opts[1024], out[PATH_MAX];
	char *text;
	int waited = 0;

	while (!process_gone(pid) && waited < 10000) {
		usleep(20000);
		waited += 20;
	}
	ck_assert_msg(process_gone(pid), "daemon %d still runs", (int)pid);
	ck_assert(!mount_line(mnt, type, opts));
	snprintf(out, sizeof(out), "%s/stats.out", work_dir);
	ck_assert_int_eq(fx_sh("'%s' cache stats --cache-dir '%s' > '%s'",
			       fx_wharf_bin(), cache, out),
			 0);
	text = read_text(out);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "not mounted"), "cache stats: %s", text);
	free(text);
}

/* The options an fstab line would carry, mount(8)'s own among them. */
#define FSTAB_OPTS                                                             \
	"chunk_size=64K,memory_cache=8M,readahead=256K,max_connections=4,"     \
	"origin_wait=20,passthrough=off,"                                      \
	"ro,nosuid,nodev,noatime,allow_other,default_permissions,_netdev,"     \
	"nofail,noauto,x-systemd.automount,X-mount.mkdir,"                     \
	"user,comment=x"

START_TEST(test_helper_as_mount_runs_it)
{
	char mnt[PATH_MAX], cache[PATH_MAX], type[64], opts[1024];
	char err[PATH_MAX], *text;
	pid_t pid;

	dirs("helper", mnt, cache);
	ck_assert_int_eq(fx_sh("'%s' '%s/json/' '%s' -o cache_dir='%s',"
			       FSTAB_OPTS,
			       helper, ng.base, mnt, cache),
			 0);
	check_bytes(mnt);
	ck_assert(mount_line(mnt, type, opts));
	ck_assert_str_eq(type, "fuse.wharf");
	ck_assert_msg(!strncmp(opts, "ro,", 3), "mount options %s", opts);
	pid = daemon_pid(mnt);
	ck_assert_int_eq(fx_sh("umount '%s'", mnt), 0);
	check_released(pid, mnt, cache);

	/* rw, as mount(8) passes it for a line without ro, mounts
	 * read-only with a notice; wharf umount leaves nothing behind. */
	snprintf(err, sizeof(err), "%s/helper.err", work_dir);
	ck_assert_int_eq(fx_sh("'%s' '%s/json/' '%s' -o cache_dir='%s',rw "
			       "2> '%s'",
			       helper, ng.base, mnt, cache, err),
			 0);
	text = read_text(err);
	ck_assert_msg(text && strstr(text, "-o rw: wharf is a read-only "
					   "filesystem; mounting read-only"),
		      "stderr: %s", text ? text : "(none)");
	free(text);
	ck_assert(mount_line(mnt, type, opts));
	ck_assert_msg(!strncmp(opts, "ro,", 3), "mount options %s", opts);
	check_bytes(mnt); /* now from the cache */
	pid = daemon_pid(mnt);
	ck_assert_int_eq(fx_sh("'%s' umount '%s'", fx_wharf_bin(), mnt), 0);
	check_released(pid, mnt, cache);
}
END_TEST

START_TEST(test_mount8_and_umount8)
{
	char mnt[PATH_MAX], cache[PATH_MAX], script[PATH_MAX];
	char pid_file[PATH_MAX], *text;
	FILE *f;

	if (geteuid() != 0)
		fx_skip("mount(8) of a fuse.wharf line needs root");
	if (fx_sh("unshare -m true 2>/dev/null") != 0)
		fx_skip("unshare -m fails here (a mount namespace of its own "
			"is what keeps the test's mount out of the system's)");
	dirs("mount8", mnt, cache);
	snprintf(script, sizeof(script), "%s/mount8.sh", work_dir);
	snprintf(pid_file, sizeof(pid_file), "%s/mount8.pid", work_dir);
	f = fopen(script, "we");
	ck_assert_ptr_nonnull(f);
	/* In a private mount namespace, /usr/sbin (and /sbin) hold only
	 * the helper; the daemon lives in it too, and goes with the
	 * unmount. */
	fprintf(f,
		"set -e\n"
		"mount --make-rprivate /\n"
		"mount --bind '%s' /usr/sbin\n"
		"[ -x /sbin/mount.fuse.wharf ]\n"
		"mount -t fuse.wharf '%s/json/' '%s' -o cache_dir='%s',"
		FSTAB_OPTS "\n"
		"cmp '%s/a/b.bin' '%s/a/b.bin'\n"
		"grep -q \"^[^ ]* %s fuse.wharf ro,\" /proc/mounts\n"
		"sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p' '%s/.wharf/stats'"
		" > '%s'\n"
		"umount '%s'\n",
		usr_sbin, ng.base, mnt, cache, mnt, data_dir, mnt, mnt,
		pid_file, mnt);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(fx_sh("unshare -m sh '%s'", script), 0);
	text = read_text(pid_file);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_gt(atoi(text), 0);
	check_released((pid_t)atoi(text), mnt, cache);
	free(text);
}
END_TEST

/*
 * What an operator types, without ro: README's `mount -t fuse.wharf`
 * line, then the same as an /etc/fstab line (bound over the namespace's
 * own) with `mount -a` twice (the second finds it mounted: the mount
 * table's source is the fstab's), `findmnt SOURCE`, and `umount DIR &&
 * mount DIR` at once (a restart).
 */
START_TEST(test_fstab_line_without_ro)
{
	char mnt[PATH_MAX], cache[PATH_MAX], script[PATH_MAX];
	char fstab[PATH_MAX], out[PATH_MAX], *text;
	FILE *f;

	if (geteuid() != 0)
		fx_skip("mount(8) of a fuse.wharf line needs root");
	if (fx_sh("unshare -m true 2>/dev/null") != 0)
		fx_skip("unshare -m fails here (a mount namespace of its own "
			"is what keeps the test's mount out of the system's)");
	dirs("fstab", mnt, cache);
	snprintf(fstab, sizeof(fstab), "%s/fstab", work_dir);
	snprintf(script, sizeof(script), "%s/fstab.sh", work_dir);
	snprintf(out, sizeof(out), "%s/fstab.out", work_dir);
	f = fopen(fstab, "we");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s/json/ %s fuse.wharf _netdev,allow_other,cache_dir=%s 0 0\n",
		ng.base, mnt, cache);
	ck_assert_int_eq(fclose(f), 0);
	f = fopen(script, "we");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"set -e\n"
		"mount --make-rprivate /\n"
		"mount --bind '%s' /usr/sbin\n"
		"mount --bind '%s' /etc/fstab\n"
		/* README's line, as written. */
		"mount -t fuse.wharf '%s/json/' '%s' -o cache_dir='%s',"
		"allow_other\n"
		"cmp '%s/a/b.bin' '%s/a/b.bin'\n"
		"grep -q \"^[^ ]* %s fuse.wharf ro,\" /proc/mounts\n"
		"umount '%s'\n"
		/* The fstab line: mount -a twice, one mount. */
		"mount -a -t fuse.wharf\n"
		"mount -a -t fuse.wharf\n"
		"cmp '%s/a/b.bin' '%s/a/b.bin'\n"
		"test \"$(grep -c ' %s fuse.wharf ' /proc/mounts)\" = 1\n"
		"findmnt -n -o TARGET --source '%s/json/' > '%s'\n"
		/* A restart, at once. */
		"umount '%s' && mount '%s'\n"
		"cmp '%s/a/b.bin' '%s/a/b.bin'\n"
		"umount '%s'\n",
		usr_sbin, fstab, ng.base, mnt, cache, mnt, data_dir, mnt, mnt,
		mnt, data_dir, mnt, ng.base, out, mnt, mnt, mnt, data_dir,
		mnt);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(fx_sh("unshare -m sh -x '%s' > '%s.log' 2>&1", script,
			       script),
			 0);
	text = read_text(out);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(!strncmp(text, mnt, strlen(mnt)),
		      "findmnt --source found: %s", text);
	free(text);
}
END_TEST

START_TEST(test_bad_options_refused_by_name)
{
	static const struct {
		const char *opts, *says;
	} bad[] = {
	    {"bogus", "unknown option -o bogus"},
	    {"ro,cache_sise=1G", "unknown option -o cache_sise=1G"},
	    {"insecure=yes", "-o insecure takes no value"},
	    {"manifest", "-o manifest needs a value"},
	    {"chunk_size=1K", "--chunk-size: 1K is outside 64K to 256M"},
	    {"cache_size=500", "--cache-size 500 bytes is less than one chunk"},
	    {"cache_size=1.5", "--cache-size: '1.5' is not a size"},
	    {"cache_min_free=100%", "--cache-min-free: '100%' is not a "
				    "percentage below 100"},
	    {"cache_min_free=5x", "--cache-min-free: '5x' is not a size"},
	    {"passthrough=always", "--passthrough=always: auto, on or off"},
	};
	char mnt[PATH_MAX], cache[PATH_MAX], err[PATH_MAX], *text;

	dirs("bad", mnt, cache);
	snprintf(err, sizeof(err), "%s/bad.err", work_dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(fx_sh("'%s' '%s/json/' '%s' -o "
				       "cache_dir='%s',%s 2> '%s'",
				       helper, ng.base, mnt, cache,
				       bad[i].opts, err),
				 2);
		text = read_text(err);
		ck_assert_ptr_nonnull(text);
		ck_assert_msg(strstr(text, bad[i].says), "-o %s: %s",
			      bad[i].opts, text);
		free(text);
		/* The same from the command line. */
		ck_assert_int_eq(fx_sh("'%s' mount -o %s '%s/json/' '%s' "
				       "2> '%s'",
				       fx_wharf_bin(), bad[i].opts, ng.base,
				       mnt, err),
				 2);
	}
	ck_assert_int_eq(fx_sh("'%s' '%s/json/' '%s' -x 2> /dev/null", helper,
			       ng.base, mnt),
			 2);
}
END_TEST

static Suite *fstab_suite(void)
{
	Suite *s = suite_create("fstab");
	TCase *tc = tcase_create("fstab");
	/* What cannot run here is named, one SKIP line each, from a case
	 * of its own (without the fixture, which needs nginx). */
	TCase *left = tcase_create("left out");
	const char *why = fx_nginx_missing();
	const char *why_mount = why ? why : fx_fuse_missing();

	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	fx_tcase_add(why_mount ? left : tc, test_helper_as_mount_runs_it,
		     why_mount);
	fx_tcase_add(why_mount ? left : tc, test_mount8_and_umount8, why_mount);
	fx_tcase_add(why_mount ? left : tc, test_fstab_line_without_ro,
		     why_mount);
	fx_tcase_add(why ? left : tc, test_bad_options_refused_by_name, why);
	if (!why) /* its fixture would run without a test */
		suite_add_tcase(s, tc);
	suite_add_tcase(s, left);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fstab_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
