/*
 * The dataset and helpers of the mount's end-to-end tests (test-mount,
 * test-readahead, test-mount-cache, test-passthrough, test-offline,
 * test-signals): one nginx over one dataset, one shared mount, and the
 * checks and mounts of their own the tests make.  In one place so that
 * the programs split by concern share it instead of copying it.
 */
#include "config.h"

#include "fixture-mount.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

const struct sized_file sized_files[N_SIZED] = {
    {"empty", 0},
    {"one", 1},
    {"chunk-1", CHUNK - 1},
    {"chunk", CHUNK},
    {"chunk+1", CHUNK + 1},
    {"big", BIG_SIZE},
    {"sub/deeper/leaf", 3 * CHUNK + 17},
};

char *data_dir;
char *cache_dir;
static struct fx_mount shared; /* the shared mount */
char *mnt_dir;
char *work_dir;
struct fx_nginx ng;

uint32_t seed_of(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h;
}

uint64_t small_size(int i)
{
	return 1 + (uint64_t)(i * 7919) % 8192;
}

uint64_t gap_size(int i)
{
	return i % 2 ? 0 : small_size(i);
}

/* Files PREFIX0000.. PREFIX(n-1) under the data dir, file i of
 * size_of(i) bytes; PREFIX is "dir/" and the names' first letters. */
static void write_numbered(const char *prefix, int n, uint64_t (*size_of)(int))
{
	char path[PATH_MAX], name[64];

	snprintf(path, sizeof(path), "%s/%s", data_dir, prefix);
	*strrchr(path, '/') = '\0';
	if (fx_mkdirs(path))
		abort();
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%04d", prefix, i);
		snprintf(path, sizeof(path), "%s/%s", data_dir, name);
		if (fx_write_file(path, size_of(i), seed_of(name)))
			abort();
	}
}

static void make_dataset(void)
{
	char path[PATH_MAX];

	data_dir = fx_tmpdir("mount-data");
	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++) {
		char dir[PATH_MAX], *slash;

		snprintf(path, sizeof(path), "%s/%s", data_dir,
			 sized_files[i].name);
		snprintf(dir, sizeof(dir), "%s", path);
		slash = strrchr(dir, '/');
		*slash = '\0';
		if (fx_mkdirs(dir) ||
		    fx_write_file(path, sized_files[i].size,
				  seed_of(sized_files[i].name))) {
			fprintf(stderr, "cannot write %s\n", path);
			abort();
		}
	}
	write_numbered("many/f", N_SMALL, small_size);
	write_numbered("gaps/g", N_GAPS, gap_size);
}

int mount_start(struct fx_mount *m, const char *url, const char *cache,
		const char *const extra[])
{
	static const char *const opts[] = {"--retries", "1", NULL};

	snprintf(m->cache, sizeof(m->cache), "%s", cache);
	return fx_mount_start(m, url, opts, extra);
}

int check_file_as(const char *root, const char *name, const char *as,
		  uint64_t size)
{
	char path[PATH_MAX];
	uint32_t seed = seed_of(as);
	size_t len;
	uint8_t *buf;
	int bad = 0;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	buf = fx_read_file(path, &len);
	if (!buf) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (len != size) {
		fprintf(stderr, "%s: %zu bytes, expected %llu\n", path, len,
			(unsigned long long)size);
		bad = 1;
	}
	for (size_t i = 0; !bad && i < len; i++)
		if (buf[i] != fx_byte(seed, i)) {
			fprintf(stderr, "%s: byte %zu differs\n", path, i);
			bad = 1;
		}
	free(buf);
	return bad ? -1 : 0;
}

int check_file(const char *root, const char *name, uint64_t size)
{
	return check_file_as(root, name, name, size);
}

void mount_setup(void)
{
	char url[256];

	work_dir = fx_tmpdir("mount-work");
	make_dataset();
	if (fx_nginx_start(&ng, data_dir))
		abort();
	cache_dir = fx_tmpdir("mount-cache");
	fx_mount_init(&shared, work_dir, "mnt");
	mnt_dir = shared.dir;
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	if (mount_start(&shared, url, cache_dir, NULL)) {
		fx_sh("cat '%s' >&2", shared.log);
		abort();
	}
}

void mount_teardown(void)
{
	const int status = fx_mount_stop(&shared);

	if (status != 0) {
		fprintf(stderr, "the shared mount exited with status %d\n",
			status);
		fx_sh("cat '%s' >&2", shared.log);
	}
	fx_unmount_leftovers(work_dir);
	fx_nginx_stop(&ng);
	fx_rmtree(data_dir);
	fx_rmtree(cache_dir);
	fx_rmtree(work_dir);
	free(data_dir);
	free(cache_dir);
	free(work_dir);
}

void write_manifest(const char *path, const char *prefix, const char *extra)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++)
		fprintf(f, "%s%s %llu\n", prefix, sized_files[i].name,
			(unsigned long long)sized_files[i].size);
	for (int i = 0; i < N_SMALL; i += 10)
		fprintf(f, "%smany/f%04d %llu\n", prefix, i,
			(unsigned long long)small_size(i));
	if (extra)
		fputs(extra, f);
	ck_assert_int_eq(fclose(f), 0);
}

void check_manifest_files(const char *root, const char *prefix)
{
	char name[PATH_MAX];

	for (size_t i = 0; i < sizeof(sized_files) / sizeof(sized_files[0]);
	     i++) {
		snprintf(name, sizeof(name), "%s%s", prefix,
			 sized_files[i].name);
		ck_assert_msg(check_file(root, name, sized_files[i].size) == 0,
			      "%s differs", name);
	}
	for (int i = 0; i < N_SMALL; i += 10) {
		snprintf(name, sizeof(name), "%smany/f%04d", prefix, i);
		ck_assert_msg(check_file(root, name, small_size(i)) == 0,
			      "%s differs", name);
	}
}

char *own_mount_start(struct fx_mount *m, const char *tag,
		      const char *const extra[])
{
	static const char *const none[] = {NULL};
	char *cache = fx_tmpdir(tag), url[256];

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(m, work_dir, tag);
	ck_assert_int_eq(mount_start(m, url, cache, extra ? extra : none), 0);
	return cache;
}

void own_mount_end(struct fx_mount *m, char *cache)
{
	ck_assert_int_eq(fx_mount_stop(m), 0);
	rmdir(m->dir);
	fx_rmtree(cache);
	free(cache);
}

int corrupt_chunks(const char *dir)
{
	char cmd[PATH_MAX + 256];

	snprintf(cmd, sizeof(cmd),
		 "n=0; for f in $(find '%s' -type f -regextype egrep "
		 "-regex '.*/[0-9a-f]{32}[^/]*'); do "
		 "s=$(stat -c %%s \"$f\"); o=$((s / 2)); "
		 "b=$(od -An -tu1 -j$o -N1 \"$f\" | tr -d ' '); "
		 "printf \"\\\\$(printf %%o $(( (b + 1) %% 256 )))\" | "
		 "dd of=\"$f\" bs=1 seek=$o conv=notrunc status=none; "
		 "n=$((n+1)); done; exit $((n > 200 ? 200 : n))",
		 dir);
	return fx_sh("%s", cmd);
}

int count_packs(const char *dir)
{
	return fx_sh("exit $(find '%s' -name '*.pack' | wc -l)", dir);
}

int read_errno(const char *root, const char *name)
{
	char path[PATH_MAX], b[64];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno;
	n = read(fd, b, sizeof(b));
	n = n < 0 ? errno : 0;
	close(fd);
	return (int)n;
}

void list_names(const char *dir, char *out, size_t cap)
{
	struct dirent **v;
	int n = scandir(dir, &v, NULL, alphasort);
	size_t l = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, ".."))
			l += (size_t)snprintf(out + l, cap - l, "%s ",
					      v[i]->d_name);
		free(v[i]);
	}
	if (n >= 0)
		free(v);
}

double seconds_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int count_in_file(const char *path, const char *s)
{
	size_t len;
	char *text = fx_read_file(path, &len), *p = text;
	int n = 0;

	while (p && (p = strstr(p, s))) {
		n++;
		p += strlen(s);
	}
	free(text);
	return n;
}

bool mount_refused(const char *tag, const char *args, const char *dir,
		   const char *expect)
{
	char path[PATH_MAX];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", work_dir, tag);
	rc = fx_sh("'%s' mount -f --retries 0 --origin-wait 1 %s '%s' "
		   ">'%s' 2>&1",
		   fx_wharf_bin(), args, dir, path);
	if (rc == 0)
		fx_sh("'%s' umount '%s'", fx_wharf_bin(), dir);
	return rc != 0 && count_in_file(path, expect) > 0;
}

const char *mount_missing(void)
{
	const char *why = fx_fuse_missing();

	if (!why && fx_sh("'%s' mount --help >/dev/null 2>&1", fx_wharf_bin()))
		why = "this wharf has no mount command";
	if (!why)
		why = fx_nginx_missing();
	return why;
}

TCase *mount_tcase(const char *name, const char **why)
{
	TCase *tc = tcase_create(name);

	*why = mount_missing();
	/* Without what the mounts need, each test is named as skipped. */
	if (!*why)
		tcase_add_unchecked_fixture(tc, mount_setup, mount_teardown);
	tcase_set_timeout(tc, 180);
	return tc;
}
