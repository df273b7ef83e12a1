/*
 * The hint channel end to end: bench/origin serves a dataset with an
 * injected first-byte latency (and, for some tests, bandwidth caps or
 * faults), `wharf mount -f` serves it, hints go in through an ioctl on
 * MOUNT/.wharf/hints (by hand or from the loader), and the counters in
 * MOUNT/.wharf/stats say what the mount did.  Every byte read is compared
 * with what the origin holds.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <wharf/hints.h>
#include <wharf/loader.h>
#include <wharf/log.h>

#include "fixture-ck.h"
#include "fixture.h"

#define N_SMALL 600
#define SMALL_SIZE 20000
#define N_BIG 4
#define BIG_SIZE (8ull << 20)
/* Shards for the shard-aware order: 2 chunks each. */
#define N_SHARD 8
#define SHARD_SIZE (2ull << 20)
#define SHARD_REC 65536
/* Mounts cut files into 1 MiB chunks (fx_mount_start). */
/* The first window: reads that may start before the pool got going. */
#define FIRST_WINDOW 32

static char *data_dir, *work_dir;

struct origin {
	pid_t pid;
	char url[64];
};

static struct origin plain; /* TTFB 20 ms, no caps, no faults */

static uint32_t seed_of(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h;
}

static const char *small_name(int i, char *buf, size_t len)
{
	snprintf(buf, len, "small/s%04d", i);
	return buf;
}

static const char *big_name(int i, char *buf, size_t len)
{
	snprintf(buf, len, "big/b%d", i);
	return buf;
}

static const char *shard_name(int i, char *buf, size_t len)
{
	snprintf(buf, len, "shards/t%d", i);
	return buf;
}

static void make_dataset(void)
{
	char path[PATH_MAX], name[64];

	data_dir = fx_tmpdir("hints-data");
	snprintf(path, sizeof(path), "%s/small", data_dir);
	if (fx_mkdirs(path))
		abort();
	snprintf(path, sizeof(path), "%s/big", data_dir);
	if (fx_mkdirs(path))
		abort();
	snprintf(path, sizeof(path), "%s/shards", data_dir);
	if (fx_mkdirs(path))
		abort();
	for (int i = 0; i < N_SHARD; i++) {
		shard_name(i, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", data_dir, name);
		if (fx_write_file(path, SHARD_SIZE, seed_of(name)))
			abort();
	}
	for (int i = 0; i < N_SMALL + N_BIG; i++) {
		bool big = i >= N_SMALL;

		if (big)
			big_name(i - N_SMALL, name, sizeof(name));
		else
			small_name(i, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", data_dir, name);
		if (fx_write_file(path, big ? BIG_SIZE : SMALL_SIZE,
				  seed_of(name)))
			abort();
	}
}

/* bench/origin over the dataset with extra options. */
static int origin_start(struct origin *o, const char *tag,
			const char *const extra[])
{
	o->pid = fx_origin_start(data_dir, extra, work_dir, tag, o->url,
				 sizeof(o->url));
	return o->pid > 0 ? 0 : -1;
}

static void origin_stop(struct origin *o)
{
	if (o->pid > 0)
		fx_stop(o->pid, 5000);
	o->pid = -1;
}

/* `wharf mount -f` on a fresh mountpoint and cache (fx_mount_start). */
static int mount_start(struct fx_mount *m, const char *url,
		       const char *const extra[])
{
	fx_mount_init(m, work_dir, "hints-mnt");
	return fx_mount_start(m, url, NULL, extra);
}

/* Unmounts, and removes the cache. */
static void mount_stop(struct fx_mount *m)
{
	fx_mount_stop(m);
	if (m->cache[0])
		fx_rmtree(m->cache);
}

/* The mount stopped and started again on the same cache. */
static int remount(struct fx_mount *m, const char *url,
		   const char *const extra[])
{
	fx_mount_stop(m);
	return fx_mount_start(m, url, NULL, extra);
}

/* The mount's hints file, opened read-only (as it must be: the mount is
 * read-only) for WHARF_IOC_HINTS. */
static int open_hints(const struct fx_mount *m)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/.wharf/hints", m->dir);
	fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	return fd;
}

/* Hands len bytes of text to the mount in one ioctl. */
static void hints_ioctl(int fd, const char *text, size_t len)
{
	static struct wharf_hints h;

	ck_assert_uint_le(len, sizeof(h.text));
	memcpy(h.text, text, len);
	h.len = (uint32_t)len;
	ck_assert_msg(ioctl(fd, WHARF_IOC_HINTS, &h) == 0, "ioctl: %s",
		      strerror(errno));
}

/* Sends lines to the hints file in calls of whole lines. */
static void send_hints(const struct fx_mount *m, char *const lines[], int n)
{
	char buf[WHARF_HINTS_MAX];
	size_t used = 0;
	int fd = open_hints(m);

	for (int i = 0; i <= n; i++) {
		size_t l = i < n ? strlen(lines[i]) : 0;

		if (i == n || used + l > sizeof(buf)) {
			hints_ioctl(fd, buf, used);
			used = 0;
		}
		memcpy(buf + used, i < n ? lines[i] : "", l);
		used += l;
	}
	close(fd);
}

/* On a failure: what the mount and the origins logged (the logs go with
 * the work directory at teardown). */
static void dump_logs(const struct fx_mount *m)
{
	fx_sh("echo '--- %s:' >&2; grep -A40 -m1 'ERROR: ' '%s' >&2 || "
	      "tail -n 20 '%s' >&2; for f in '%s'/*.log; "
	      "do echo \"--- $f:\" >&2; tail -n 5 \"$f\" >&2; done",
	      m->log, m->log, m->log, work_dir);
}

/* Compares MOUNT/name with the origin's bytes. */
static void check_bytes(const struct fx_mount *m, const char *name,
			uint64_t size)
{
	char path[PATH_MAX];
	uint32_t seed = seed_of(name);
	uint8_t *buf;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", m->dir, name);
	buf = fx_read_file(path, &len);
	if (!buf || len != size)
		dump_logs(m);
	ck_assert_msg(buf != NULL, "%s: %s", path, strerror(errno));
	ck_assert_msg(len == size, "%s: %zu bytes, expected %llu", path, len,
		      (unsigned long long)size);
	for (size_t i = 0; i < len; i++)
		if (buf[i] != fx_byte(seed, i))
			ck_abort_msg("%s: byte %zu differs", path, i);
	free(buf);
}

/* A fixed shuffle of 0..n-1. */
static void shuffle(int *v, int n, uint32_t seed)
{
	for (int i = 0; i < n; i++)
		v[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j, t;

		seed = seed * 1664525u + 1013904223u;
		j = (int)(seed % (uint32_t)(i + 1));
		t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static char **small_hints(const int *order, int n)
{
	char **lines = calloc((size_t)n, sizeof(*lines));
	char name[64];

	for (int i = 0; i < n; i++) {
		small_name(order[i], name, sizeof(name));
		ck_assert_int_gt(asprintf(&lines[i], "%s 0 0\n", name), 0);
	}
	return lines;
}

static void free_lines(char **lines, int n)
{
	for (int i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
}

/* Hinted chunks the pool is done with: loaded, found cached, or stale. */
static long long hints_settled(const struct fx_mount *m)
{
	return fx_mount_stat(m->dir, "hints", "loaded") +
	       fx_mount_stat(m->dir, "hints", "cached") +
	       fx_mount_stat(m->dir, "hints", "stale");
}

/* Waits (bounded) until the hint queue is empty and the pool idle, and,
 * when settled >= 0, that many hinted chunks settled (a job just taken
 * off the queue is neither queued nor in flight yet). */
static void wait_drained(const struct fx_mount *m, long long settled)
{
	for (int i = 0; i < 1200; i++) {
		if (fx_mount_stat(m->dir, "hints", "queue") == 0 &&
		    fx_mount_stat(m->dir, "prefetch", "inflight_bytes") == 0 &&
		    (settled < 0 || hints_settled(m) == settled))
			return;
		usleep(50000);
	}
	dump_logs(m);
	ck_abort_msg("the hint queue did not drain (%lld queued, %lld bytes "
		     "in flight, %lld settled, expected %lld)",
		     fx_mount_stat(m->dir, "hints", "queue"),
		     fx_mount_stat(m->dir, "prefetch", "inflight_bytes"),
		     hints_settled(m), settled);
}

START_TEST(test_hints_honoured)
{
	/* Every read through the mount: with passthrough the kernel reads a
	 * file a hint put in the store from its cache file, asking nothing. */
	static const char *const opts[] = {"--max-connections", "32",
					   "--passthrough=off", NULL};
	struct fx_mount m = {0};
	int order[N_SMALL];
	char **lines, name[64];

	ck_assert_int_eq(mount_start(&m, plain.url, opts), 0);
	shuffle(order, N_SMALL, 7);
	lines = small_hints(order, N_SMALL);
	send_hints(&m, lines, N_SMALL);
	for (int i = 0; i < N_SMALL; i++)
		check_bytes(&m, small_name(order[i], name, sizeof(name)),
			    SMALL_SIZE);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "lines"), N_SMALL);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "bad_lines"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "hits") +
			     fx_mount_stat(m.dir, "hints", "misses"),
			 N_SMALL);
	/* After the first window every read found its chunk fetched or in
	 * flight: the reader never paid a first-byte latency itself. */
	ck_assert_int_le(fx_mount_stat(m.dir, "hints", "misses"), FIRST_WINDOW);
	ck_assert_int_le(fx_mount_stat(m.dir, "prefetch", "demand_fetches"),
			 FIRST_WINDOW);
	free_lines(lines, N_SMALL);
	mount_stop(&m);
}
END_TEST

/* Opens MOUNT/name and gives the kernel advice on it. */
static int open_advised(const struct fx_mount *m, const char *name, int advice)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", m->dir, name);
	fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, advice), 0);
	return fd;
}

/* Reads and checks the N_SMALL small files in order. */
static void read_in_order(const struct fx_mount *m, const int *order)
{
	char name[64];

	for (int i = 0; i < N_SMALL; i++)
		check_bytes(m, small_name(order[i], name, sizeof(name)),
			    SMALL_SIZE);
}

/* Drops the kernel's page cache of a file under the mount, as memory
 * pressure would. */
static void forget_pages(const struct fx_mount *m, const char *name)
{
	close(open_advised(m, name, POSIX_FADV_DONTNEED));
}

/* One epoch: the kernel's page cache of every file dropped, the hints
 * sent, every file read and checked.  The hints queued in it. */
static long long epoch_after_forgetting(struct fx_mount *m, const int *order)
{
	long long queued = fx_mount_stat(m->dir, "hints", "queued");
	char **lines, name[64];

	for (int i = 0; i < N_SMALL; i++)
		forget_pages(m, small_name(order[i], name, sizeof(name)));
	lines = small_hints(order, N_SMALL);
	send_hints(m, lines, N_SMALL);
	read_in_order(m, order);
	free_lines(lines, N_SMALL);
	wait_drained(m, -1);
	return fx_mount_stat(m->dir, "hints", "queued") - queued;
}

/* Hints for chunks the kernel was sent whole load nothing while the kernel
 * keeps them (test_hints_for_cached_chunks), and load the chunks again
 * once it is seen to drop them.  The memory cache holds a few chunks only,
 * so that hints find them in neither cache. */
START_TEST(test_hints_when_kernel_forgets)
{
	/* Through the mount: with passthrough a file whose pages the kernel
	 * lost is read from its cache file, for which hints load nothing
	 * (test_hints_passthrough_cached). */
	static const char *const opts[] = {"--memory-cache", "128K",
					   "--passthrough=off", NULL};
	struct fx_mount m = {0};
	int order[N_SMALL];

	ck_assert_int_eq(mount_start(&m, plain.url, opts), 0);
	shuffle(order, N_SMALL, 13);
	read_in_order(&m, order);
	wait_drained(&m, -1);
	/* Trusted at first: nothing queued, every read comes back. */
	ck_assert_int_eq(epoch_after_forgetting(&m, order), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, "hints", "kernel_had"), N_SMALL);
	ck_assert_int_ge(fx_mount_stat(m.dir, "hints", "kernel_lost"), N_SMALL);
	/* Then the hints load their chunks again. */
	ck_assert_int_ge(epoch_after_forgetting(&m, order), N_SMALL / 2);
	mount_stop(&m);
}
END_TEST

/* Hints for every small file, in order, which must queue no load: each
 * is found cached. */
static void hints_queue_nothing(const struct fx_mount *m, const int *order)
{
	const long long queued = fx_mount_stat(m->dir, "hints", "queued");
	char **lines = small_hints(order, N_SMALL);

	send_hints(m, lines, N_SMALL);
	free_lines(lines, N_SMALL);
	ck_assert_int_eq(fx_mount_stat(m->dir, "hints", "lines"), N_SMALL);
	ck_assert_int_eq(fx_mount_stat(m->dir, "hints", "queued"), queued);
	ck_assert_int_ge(fx_mount_stat(m->dir, "hints", "cached"), N_SMALL);
}

/* Hints for chunks already in memory queue nothing: a warm epoch's hints
 * wake no pool thread. */
START_TEST(test_hints_for_cached_chunks)
{
	struct fx_mount m = {0};
	int order[N_SMALL];

	ck_assert_int_eq(mount_start(&m, plain.url, NULL), 0);
	shuffle(order, N_SMALL, 11);
	read_in_order(&m, order);
	wait_drained(&m, -1);
	hints_queue_nothing(&m, order);
	read_in_order(&m, order);
	mount_stop(&m);
}
END_TEST

/* With --passthrough, after a remount, hints for files the kernel will
 * read from their cache files load nothing: their readers never ask the
 * mount for a byte. */
START_TEST(test_hints_passthrough_cached)
{
	static const char *const opts[] = {"--passthrough", NULL};
	struct fx_mount m = {0};
	int order[N_SMALL];

	ck_assert_int_eq(mount_start(&m, plain.url, opts), 0);
	shuffle(order, N_SMALL, 17);
	read_in_order(&m, order);
	wait_drained(&m, -1);
	ck_assert_int_eq(remount(&m, plain.url, opts), 0);
	if (!fx_mount_passthrough_on(m.dir)) {
		ck_assert_msg(!fx_passthrough_expected(),
			      "no passthrough as root on Linux 6.9 or later");
		mount_stop(&m);
		fx_skip("no FUSE passthrough here (it needs root and Linux "
			"6.9 or later)");
	}
	hints_queue_nothing(&m, order);
	read_in_order(&m, order);
	ck_assert_int_ge(fx_mount_stat(m.dir, "passthrough", "opens"), N_SMALL);
	ck_assert_int_eq(fx_mount_stat(m.dir, "reads", "chunks_loaded"), 0);
	mount_stop(&m);
}
END_TEST

START_TEST(test_hints_never_change_bytes)
{
	struct fx_mount m = {0};
	char *lines[3 * N_BIG + 3], name[64];
	int n = 0;

	ck_assert_int_eq(mount_start(&m, plain.url, NULL), 0);
	/* Ranges that start and end inside chunks, whole files, a range past
	 * the end, a missing file and junk: none changes a byte read. */
	for (int i = 0; i < N_BIG; i++) {
		big_name(i, name, sizeof(name));
		ck_assert_int_gt(asprintf(&lines[n++], "%s %llu %llu\n", name,
					  (unsigned long long)(i * 300001 + 5),
					  1500000ull),
				 0);
		ck_assert_int_gt(asprintf(&lines[n++], "/%s 0 0\n", name), 0);
		ck_assert_int_gt(asprintf(&lines[n++], "%s %llu 10\n", name,
					  (unsigned long long)BIG_SIZE + 1),
				 0);
	}
	lines[n++] = strdup("small/none 0 0\n");
	lines[n++] = strdup("no numbers here\n");
	lines[n++] = strdup("small/s0001 x 0\n");
	send_hints(&m, lines, n);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "lines"), 2 * N_BIG);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "bad_lines"), N_BIG + 3);
	wait_drained(&m, -1);
	for (int i = 0; i < N_BIG; i++)
		check_bytes(&m, big_name(i, name, sizeof(name)), BIG_SIZE);
	check_bytes(&m, "small/s0001", SMALL_SIZE);
	ck_assert_int_gt(fx_mount_stat(m.dir, "hints", "loaded"), 0);
	for (int i = 0; i < n; i++)
		free(lines[i]);
	mount_stop(&m);
}
END_TEST

START_TEST(test_stale_hints_dropped)
{
	/* One pool thread: the queue stays long while the reader runs ahead. */
	static const char *const opts[] = {"--threads", "1", NULL};
	struct fx_mount m = {0};
	int order[N_SMALL];
	char **lines, name[64];

	ck_assert_int_eq(mount_start(&m, plain.url, opts), 0);
	shuffle(order, N_SMALL, 11);
	lines = small_hints(order, N_SMALL);
	send_hints(&m, lines, N_SMALL);
	/* The reader jumps to the end of the hinted order: everything more
	 * than the slack behind it is stale now. */
	for (int i = N_SMALL - 8; i < N_SMALL; i++)
		check_bytes(&m, small_name(order[i], name, sizeof(name)),
			    SMALL_SIZE);
	wait_drained(&m, N_SMALL);
	ck_assert_int_gt(fx_mount_stat(m.dir, "hints", "stale"), 0);
	ck_assert_int_lt(fx_mount_stat(m.dir, "hints", "loaded"), N_SMALL);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "loaded") +
			     fx_mount_stat(m.dir, "hints", "stale") +
			     fx_mount_stat(m.dir, "hints", "cached"),
			 N_SMALL);
	/* A stale hint is only a hint: the file still reads right. */
	check_bytes(&m, small_name(order[0], name, sizeof(name)), SMALL_SIZE);
	free_lines(lines, N_SMALL);
	mount_stop(&m);
}
END_TEST

/* Hint lines of HINT_LEN bytes each, all valid (a range of a small file),
 * as one block of n lines. */
#define HINT_LEN 40
static char *hint_block(int n)
{
	char *b = malloc((size_t)n * HINT_LEN + 1), name[64];

	ck_assert_ptr_nonnull(b);
	for (int i = 0; i < n; i++)
		snprintf(b + (size_t)i * HINT_LEN, HINT_LEN + 1,
			 "%s %021d %05d\n",
			 small_name(i % N_SMALL, name, sizeof(name)), i % 1000,
			 1000 + i % 9000);
	return b;
}

/*
 * The hints file on a read-only mount: no write reaches it, an ioctl of
 * whole lines does, before any read (the mount sees opens) and after one
 * (it sees none); a line cut by the end of a call is bad, not joined to the
 * next call; a call too long, or on another file, is refused.
 */
START_TEST(test_hints_ioctl)
{
	enum { N = WHARF_HINTS_MAX / HINT_LEN };
	char path[PATH_MAX], *b = hint_block(N);
	const size_t len = (size_t)N * HINT_LEN;
	struct wharf_hints *h = calloc(1, sizeof(*h));

	ck_assert_ptr_nonnull(h);
	for (int read_first = 0; read_first < 2; read_first++) {
		struct fx_mount m = {0};
		int fd;

		ck_assert_int_eq(mount_start(&m, plain.url, NULL), 0);
		if (read_first)
			check_bytes(&m, "small/s0000", SMALL_SIZE);
		snprintf(path, sizeof(path), "%s/.wharf/hints", m.dir);
		ck_assert_int_eq(open(path, O_WRONLY), -1);
		ck_assert_int_eq(errno, EROFS);
		fd = open_hints(&m);
		hints_ioctl(fd, b, len);
		hints_ioctl(fd, b, 16 * HINT_LEN);
		/* Cut inside a line: the two halves are two bad lines. */
		hints_ioctl(fd, b, HINT_LEN / 2);
		hints_ioctl(fd, b + HINT_LEN / 2, HINT_LEN - HINT_LEN / 2);
		ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "lines"),
				 N + 16);
		ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "bad_lines"), 2);
		/* From a shell: wharf hints. */
		ck_assert_int_eq(fx_sh("printf 'small/s0001 0 0\\n%%s/small/"
				       "s0002 0 0\\n' '%s' | '%s' hints '%s'",
				       m.dir, fx_wharf_bin(), m.dir),
				 0);
		ck_assert_int_eq(fx_sh("printf 'small/s0003 0 0' | '%s' hints "
				       "'%s' 2>/dev/null",
				       fx_wharf_bin(), m.dir),
				 1);
		ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "lines"),
				 N + 18);
		ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "bad_lines"), 2);
		h->len = WHARF_HINTS_MAX + 1;
		ck_assert_int_eq(ioctl(fd, WHARF_IOC_HINTS, h), -1);
		ck_assert_int_eq(errno, EINVAL);
		close(fd);
		snprintf(path, sizeof(path), "%s/small/s0000", m.dir);
		fd = open(path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		h->len = 0;
		ck_assert_int_eq(ioctl(fd, WHARF_IOC_HINTS, h), -1);
		ck_assert_int_eq(errno, ENOTTY);
		close(fd);
		mount_stop(&m);
	}
	free(h);
	free(b);
}
END_TEST

/* Reads len bytes of MOUNT/name at off with the kernel's read-ahead off
 * (so the mount sees reads of these bytes only) and compares them. */
static void check_range(const struct fx_mount *m, const char *name,
			uint64_t off, size_t len)
{
	uint32_t seed = seed_of(name);
	uint8_t *buf = malloc(len);
	int fd = open_advised(m, name, POSIX_FADV_RANDOM);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	for (size_t i = 0; i < len; i++)
		if (buf[i] != fx_byte(seed, off + i))
			ck_abort_msg("%s: byte %llu differs", name,
				     (unsigned long long)(off + i));
	close(fd);
	free(buf);
}

START_TEST(test_shard_hinted_many_times)
{
	/* A record shard: 64 KiB records of big/b0, one at the start of each
	 * MiB (its chunks), hinted with 70 small files between them (hint
	 * numbers 1, 72, 143, ...); last, its first record again, as the
	 * next epoch's hints would. */
	enum { GAP = 70, PARTS = (int)(BIG_SIZE >> 20), REC = 65536 };
	static char *lines[PARTS * (GAP + 1) + 1];
	struct fx_mount m = {0};
	int n = 0;
	char name[64];

	ck_assert_int_eq(mount_start(&m, plain.url, NULL), 0);
	for (int k = 0; k < PARTS; k++) {
		ck_assert_int_gt(
		    asprintf(&lines[n++], "big/b0 %d %d\n", k << 20, REC), 0);
		for (int i = 0; i < GAP; i++)
			ck_assert_int_gt(asprintf(&lines[n++], "%s 0 0\n",
						  small_name(k * GAP + i, name,
							     sizeof(name))),
					 0);
	}
	ck_assert_int_gt(asprintf(&lines[n++], "big/b0 0 %d\n", REC), 0);
	send_hints(&m, lines, n);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "reached"), 0);
	/* Its first record's head, then more of it: both reach its first
	 * hint, not its newest (the rule that went by the newest hint naming
	 * the file said 569, which made 300 hints stale). */
	check_range(&m, "big/b0", 5, 512);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "reached"), 1);
	check_range(&m, "big/b0", 517, 8192);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "reached"), 1);
	check_range(&m, "big/b0", (1 << 20) + 7, 4096);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "reached"), GAP + 2);
	/* A file that was never hinted reaches nothing. */
	check_range(&m, "big/b1", 0, 4096);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "reached"), GAP + 2);
	wait_drained(&m, n);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "stale"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "loaded") +
			     fx_mount_stat(m.dir, "hints", "cached"),
			 n);
	check_bytes(&m, "big/b0", BIG_SIZE);
	for (int i = 0; i < n; i++)
		free(lines[i]);
	mount_stop(&m);
}
END_TEST

START_TEST(test_memory_cap_10000_objects)
{
	static const char *const opts[] = {"--memory-cache", "16M", NULL};
	enum { N = 10000 };
	struct fx_mount m = {0};
	char **lines = calloc(N, sizeof(*lines)), name[64];
	long before, after;

	ck_assert_int_eq(mount_start(&m, plain.url, opts), 0);
	before = fx_rss_kib(m.pid);
	/* 10,000 hinted objects: the small files over and over, and the big
	 * files' chunks. */
	for (int i = 0; i < N; i++) {
		if (i % 50 == 49)
			big_name(i % N_BIG, name, sizeof(name));
		else
			small_name(i % N_SMALL, name, sizeof(name));
		ck_assert_int_gt(asprintf(&lines[i], "%s 0 0\n", name), 0);
	}
	send_hints(&m, lines, N);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "lines"), N);
	ck_assert_int_le(fx_mount_stat(m.dir, "hints", "queue"),
			 fx_mount_stat(m.dir, "hints", "queue_cap"));
	wait_drained(&m, -1);
	after = fx_rss_kib(m.pid);
	ck_assert_int_le(fx_mount_stat(m.dir, "prefetch", "inflight_max"),
			 fx_mount_stat(m.dir, "prefetch", "inflight_cap"));
	ck_assert_int_gt(fx_mount_stat(m.dir, "prefetch", "inflight_max"), 0);
	/* Memory: the 16 MiB chunk cache plus the in-flight cap plus
	 * bookkeeping; nothing grows with the number of hints.  (Not under
	 * AddressSanitizer, whose quarantine keeps freed memory resident, nor
	 * ThreadSanitizer, whose shadow memory grows with what is touched.) */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	ck_assert_msg(after - before <
			  16 * 1024 +
			      fx_mount_stat(m.dir, "prefetch", "inflight_cap") /
				  1024 +
			      32 * 1024,
		      "the mount grew by %ld KiB", after - before);
#else
	(void)before;
	(void)after;
#endif
	free_lines(lines, N);
	mount_stop(&m);
}
END_TEST

START_TEST(test_demand_read_first)
{
	/* A slow origin: the big files take 8 s at 4 MB/s, a wide margin
	 * on a loaded machine (at 16 MB/s a CI run once lost the race). */
	static const char *const oopts[] = {"--ttfb-ms", "20", "--total-rate",
					    "4M", NULL};
	struct origin slow = {.pid = -1};
	struct fx_mount m = {0};
	char *lines[N_BIG], name[64];
	long long queued, loaded;

	ck_assert_int_eq(origin_start(&slow, "slow", oopts), 0);
	ck_assert_int_eq(mount_start(&m, slow.url, NULL), 0);
	for (int i = 0; i < N_BIG; i++)
		ck_assert_int_gt(asprintf(&lines[i], "%s 0 0\n",
					  big_name(i, name, sizeof(name))),
				 0);
	send_hints(&m, lines, N_BIG);
	check_bytes(&m, "small/s0002", SMALL_SIZE);
	/* The demand read finished while the large prefetch was still
	 * going: it did not wait behind it. */
	queued = fx_mount_stat(m.dir, "hints", "queued");
	loaded = fx_mount_stat(m.dir, "hints", "loaded");
	ck_assert_int_eq(queued, N_BIG * (BIG_SIZE >> 20));
	ck_assert_msg(loaded < queued,
		      "the demand read came after all %lld hinted chunks",
		      queued);
	ck_assert_int_eq(fx_mount_stat(m.dir, "prefetch", "demand_fetches"), 1);
	for (int i = 0; i < N_BIG; i++)
		free(lines[i]);
	mount_stop(&m);
	origin_stop(&slow);
}
END_TEST

START_TEST(test_origin_faults)
{
	static const char *const oopts[] = {
	    "--ttfb-ms",  "5",		"--fail-5xx", "0.08",	 "--reset",
	    "0.05",	  "--truncate", "0.05",	      "--stall", "0.01",
	    "--stall-ms", "3000",	"--seed",     "3",	 NULL};
	static const char *const mopts[] = {"--retries", "10", "--timeout", "1",
					    NULL};
	struct origin bad = {.pid = -1};
	struct fx_mount m = {0};
	int order[N_SMALL];
	char **lines, name[64];

	ck_assert_int_eq(origin_start(&bad, "faulty", oopts), 0);
	ck_assert_int_eq(mount_start(&m, bad.url, mopts), 0);
	shuffle(order, N_SMALL, 5);
	lines = small_hints(order, N_SMALL / 2);
	send_hints(&m, lines, N_SMALL / 2);
	/* Half hinted, half read on demand, and the big files: every byte
	 * right despite 503s, resets, short bodies and stalls. */
	for (int i = 0; i < N_SMALL; i++)
		check_bytes(&m, small_name(order[i], name, sizeof(name)),
			    SMALL_SIZE);
	for (int i = 0; i < N_BIG; i++)
		check_bytes(&m, big_name(i, name, sizeof(name)), BIG_SIZE);
	ck_assert_int_gt(fx_mount_stat(m.dir, "origin", "retries"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "reads", "chunk_errors"), 0);
	free_lines(lines, N_SMALL / 2);
	mount_stop(&m);
	origin_stop(&bad);
}
END_TEST

START_TEST(test_origin_sheds_load)
{
	/* A store that answers 503 past 4 requests in flight, under all the
	 * hints at once and read-ahead over the big files: the mount's
	 * controller backs off to what the store takes, and every byte is
	 * right.  Default options but for patience with retries. */
	static const char *const oopts[] = {"--ttfb-ms", "20", "--max-inflight",
					    "4", NULL};
	static const char *const mopts[] = {"--retries", "20", NULL};
	struct origin busy = {.pid = -1};
	struct fx_mount m = {0};
	int order[N_SMALL];
	char **lines, name[64];

	ck_assert_int_eq(origin_start(&busy, "busy", oopts), 0);
	ck_assert_int_eq(mount_start(&m, busy.url, mopts), 0);
	shuffle(order, N_SMALL, 9);
	lines = small_hints(order, N_SMALL);
	send_hints(&m, lines, N_SMALL);
	for (int i = 0; i < N_SMALL; i++)
		check_bytes(&m, small_name(order[i], name, sizeof(name)),
			    SMALL_SIZE);
	for (int i = 0; i < N_BIG; i++)
		check_bytes(&m, big_name(i, name, sizeof(name)), BIG_SIZE);
	ck_assert_int_eq(fx_mount_stat(m.dir, "reads", "chunk_errors"), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, "concurrency", "backoffs"), 1);
	/* It starts at 32; the store takes 4. */
	ck_assert_int_le(fx_mount_stat(m.dir, "concurrency", "limit"), 8);
	ck_assert_int_eq(fx_mount_stat(m.dir, "concurrency", "ceiling"), 256);
	free_lines(lines, N_SMALL);
	mount_stop(&m);
	origin_stop(&busy);
}
END_TEST

/* Loads at the origin hold no pool thread: against an origin 200 ms from
 * its first byte, many hinted loads are under way at once on a pool of one
 * thread per core and two more, and every byte is right. */
START_TEST(test_pool_loads_hold_no_thread)
{
	static const char *const oopts[] = {"--ttfb-ms", "200", NULL};
	struct origin slow = {.pid = -1};
	struct fx_mount m = {0};
	const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	enum { N = 200 };
	int order[N_SMALL];
	long long threads, loads_max;
	char **lines, name[64];

	ck_assert_int_eq(origin_start(&slow, "slow200", oopts), 0);
	ck_assert_int_eq(mount_start(&m, slow.url, NULL), 0);
	shuffle(order, N_SMALL, 11);
	lines = small_hints(order, N);
	send_hints(&m, lines, N);
	wait_drained(&m, N);
	threads = fx_mount_stat(m.dir, "prefetch", "threads");
	loads_max = fx_mount_stat(m.dir, "prefetch", "loads_max");
	fprintf(stderr, "pool: %lld threads, %lld loads at once at most\n",
		threads, loads_max);
	ck_assert_int_ge(threads, 1);
	ck_assert_int_le(threads, ncpu + 2);
	ck_assert_int_eq(fx_mount_stat(m.dir, "prefetch", "threads_cap"),
			 ncpu + 2 < 256 ? ncpu + 2 : 256);
	ck_assert_msg(loads_max > threads, "%lld loads at once on %lld threads",
		      loads_max, threads);
	ck_assert_int_le(loads_max,
			 fx_mount_stat(m.dir, "prefetch", "loads_cap"));
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "loaded"), N);
	for (int i = 0; i < N; i++)
		check_bytes(&m, small_name(order[i], name, sizeof(name)),
			    SMALL_SIZE);
	ck_assert_int_eq(fx_mount_stat(m.dir, "prefetch", "demand_fetches"), 0);
	ck_assert_int_eq(fx_mount_stat(m.dir, "reads", "chunk_errors"), 0);
	free_lines(lines, N);
	mount_stop(&m);
	origin_stop(&slow);
}
END_TEST

/* A loader's options here: 2 workers, the ring in the work directory. */
static void loader_options(struct wharf_options *opt, uint32_t batch,
			   uint32_t shuffle, uint64_t seed)
{
	wharf_options_init(opt);
	opt->batch_size = batch;
	opt->num_workers = 2;
	opt->shuffle = shuffle;
	opt->seed = seed;
	opt->shm_dir = work_dir;
}

/* CLOCK_MONOTONIC in ns, as the loader's own clock. */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits (60 s at most: a bound that only stops a hang) until the mount
 * has read at least want hint lines.  @return the count then. */
static long long hint_lines_reach(const struct fx_mount *m, long long want)
{
	long long v = fx_mount_stat(m->dir, "hints", "lines");

	for (int i = 0; i < 3000 && v < want; i++) {
		usleep(20000);
		v = fx_mount_stat(m->dir, "hints", "lines");
	}
	return v;
}

START_TEST(test_loader_sends_hints)
{
	static const char *const opts[] = {"--max-connections", "32", NULL};
	struct wharf_options opt;
	const struct wharf_batch *b;
	wharf_loader *l = NULL;
	wharf_index *idx = NULL;
	struct fx_mount m = {0};
	char dir[PATH_MAX], index_path[PATH_MAX];
	uint64_t samples = 0, last_ns = 0, gap_max = 0;
	int rc;

	ck_assert_int_eq(mount_start(&m, plain.url, opts), 0);
	snprintf(dir, sizeof(dir), "%s/small", m.dir);
	snprintf(index_path, sizeof(index_path), "%s/small.idx", work_dir);
	ck_assert_msg(wharf_index_build_dir(dir, index_path) == 0, "%s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_index_open(index_path, 0, &idx), 0);
	/* A file read first: the mount sees no opens from then on, and the
	 * loader's hints still arrive (see test_hints_ioctl). */
	check_bytes(&m, "small/s0000", SMALL_SIZE);
	loader_options(&opt, 16, 1, 42);
	ck_assert_msg(wharf_loader_open(idx, &opt, &l) == 0, "%s",
		      wharf_last_error());
	while ((rc = wharf_loader_next(l, &b)) == 0) {
		const uint64_t now = mono_ns();

		if (last_ns && samples < 5 * 16 && now - last_ns > gap_max)
			gap_max = now - last_ns;
		last_ns = now;
		samples += b->count;
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
		/* The hints run ahead by time (2 s of batches at the rate
		 * they come), not by a fixed count (the 4 slots + 1 it starts
		 * from).  The lead is checked against the gaps this loop saw
		 * (the loader averages the same gaps, here halved for
		 * safety), up to 10: a loaded machine's slower batches ask
		 * less of it, never a failure. */
		if (samples == 5 * 16) {
			uint64_t lead = gap_max ? 1000000000ull / gap_max : 10;

			lead = lead < 5 ? 5 : lead > 10 ? 10 : lead;
			ck_assert_msg(
			    hint_lines_reach(&m, (5 + lead) * 16) >=
				(long long)(5 + lead) * 16,
			    "a lead of %llu batches expected (batches "
			    "%llu ms apart at most)",
			    (unsigned long long)lead,
			    (unsigned long long)(gap_max / 1000000));
		}
	}
	ck_assert_int_eq(samples, N_SMALL);
	wharf_loader_close(l);
	wharf_index_close(idx);
	/* Every sample was hinted, and the shuffled epoch paid at most a
	 * first window of origin latencies itself. */
	ck_assert_int_ge(fx_mount_stat(m.dir, "hints", "lines"), N_SMALL);
	ck_assert_int_eq(fx_mount_stat(m.dir, "hints", "bad_lines"), 0);
	ck_assert_int_le(fx_mount_stat(m.dir, "hints", "misses"), FIRST_WINDOW);
	mount_stop(&m);
}
END_TEST

/* A caller that keeps a batch after wharf_loader_stop, with its index
 * closed, holds nothing on the mount: `wharf umount` succeeds (before,
 * the hints file, and with no workers the files read, kept it busy), and
 * the batch, in the ring, still reads right.  2 x _i workers: none (the
 * caller reads), or two.  Another loader, over local files and opened
 * after it, stays open: its workers must not have inherited the hints
 * file. */
START_TEST(test_stopped_loader_lets_go_of_the_mount)
{
	struct wharf_options opt;
	const struct wharf_batch *b;
	wharf_loader *l = NULL, *other = NULL;
	wharf_index *idx = NULL, *local = NULL;
	struct fx_mount m = {0};
	char dir[PATH_MAX], index_path[PATH_MAX], name[64];

	snprintf(dir, sizeof(dir), "%s/small", data_dir);
	snprintf(index_path, sizeof(index_path), "%s/local%d.idx", work_dir,
		 _i);
	ck_assert_msg(wharf_index_build_dir(dir, index_path) == 0, "%s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_index_open(index_path, 0, &local), 0);
	ck_assert_int_eq(mount_start(&m, plain.url, NULL), 0);
	snprintf(dir, sizeof(dir), "%s/small", m.dir);
	snprintf(index_path, sizeof(index_path), "%s/hold%d.idx", work_dir, _i);
	ck_assert_msg(wharf_index_build_dir(dir, index_path) == 0, "%s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_index_open(index_path, 0, &idx), 0);
	loader_options(&opt, 4, 0, 1);
	opt.num_workers = 2u * (uint32_t)_i;
	ck_assert_msg(wharf_loader_open(idx, &opt, &l) == 0, "%s",
		      wharf_last_error());
	opt.num_workers = 2;
	ck_assert_msg(wharf_loader_open(local, &opt, &other) == 0, "%s",
		      wharf_last_error());
	ck_assert_int_eq(wharf_loader_next(l, &b), 0);
	wharf_loader_stop(l);
	wharf_index_close(idx);
	ck_assert_msg(fx_mount_stop(&m) == 0,
		      "the mount stayed busy after wharf_loader_stop (%s)",
		      m.log);
	/* Sequential order: batch 0 is s0000..s0003, whole files. */
	ck_assert_int_eq(b->count, 4);
	ck_assert_int_eq(b->sample_size, SMALL_SIZE);
	for (uint32_t k = 0; k < b->count; k++) {
		const uint8_t *d =
		    (const uint8_t *)b->data + (size_t)k * SMALL_SIZE;
		const uint32_t seed =
		    seed_of(small_name((int)k, name, sizeof(name)));

		ck_assert_int_eq(b->samples[k], k);
		for (size_t i = 0; i < SMALL_SIZE; i++)
			if (d[i] != fx_byte(seed, i))
				ck_abort_msg("%s: byte %zu differs", name, i);
	}
	ck_assert_int_eq(wharf_loader_release(l, b), 0);
	wharf_loader_close(l);
	wharf_loader_close(other);
	wharf_index_close(local);
	if (m.cache[0])
		fx_rmtree(m.cache);
}
END_TEST

/* `wharf umount` of a mount that a process keeps busy names the process
 * and the file it holds, then the mount unmounts once it is let go. */
START_TEST(test_umount_names_the_holder)
{
	struct fx_mount m = {0};
	char path[PATH_MAX], out[PATH_MAX], want[PATH_MAX + 64];
	char *said;
	size_t len;
	int fd;

	ck_assert_int_eq(mount_start(&m, plain.url, NULL), 0);
	snprintf(path, sizeof(path), "%s/small/s0001", m.dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	snprintf(out, sizeof(out), "%s/umount-busy.out", work_dir);
	ck_assert_int_ne(
	    fx_sh("'%s' umount '%s' >'%s' 2>&1", fx_wharf_bin(), m.dir, out),
	    0);
	said = fx_read_file(out, &len);
	ck_assert_ptr_nonnull(said);
	snprintf(want, sizeof(want), "process %d (", (int)getpid());
	ck_assert_msg(strstr(said, want), "no \"%s\" in: %s", want, said);
	snprintf(want, sizeof(want), "open %s\n", path);
	ck_assert_msg(strstr(said, want), "no \"%s\" in: %s", want, said);
	ck_assert_msg(strstr(said, "is busy"), "%s", said);
	free(said);
	close(fd);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	if (m.cache[0])
		fx_rmtree(m.cache);
}
END_TEST

/* The index of shards/t0..t7 cut into SHARD_REC records. */
static void shard_records_index(const struct fx_mount *m, const char *out)
{
	wharf_index_builder *b = NULL;
	char path[PATH_MAX], name[64];

	ck_assert_int_eq(wharf_index_builder_new(out, NULL, &b), 0);
	for (int k = 0; k < N_SHARD; k++) {
		snprintf(path, sizeof(path), "%s/%s", m->dir,
			 shard_name(k, name, sizeof(name)));
		for (uint64_t off = 0; off < SHARD_SIZE; off += SHARD_REC)
			ck_assert_int_eq(
			    wharf_index_builder_add(b, path, off, SHARD_REC, k),
			    0);
	}
	ck_assert_int_eq(wharf_index_builder_finish(b), 0);
	wharf_index_builder_free(b);
}

/* One cold epoch over the shards in the given order on a fresh mount whose
 * caches hold half the data (4 of the 8 shards: the window being read, the
 * one before, which the cache's LRU may keep longer, and the one hinted
 * ahead), the kernel's page cache dropped after each batch.
 * @return the bytes the origin sent. */
static long long shard_epoch_fetched(uint32_t shuffle)
{
	/* clang-format off */
	static const char *const opts[] = {"--max-connections", "32",
					   "--cache-size", "8M",
					   "--memory-cache", "2M", NULL};
	/* clang-format on */
	struct wharf_options opt;
	const struct wharf_batch *b;
	wharf_loader *l = NULL;
	wharf_index *idx = NULL;
	struct fx_mount m = {0};
	char index_path[PATH_MAX], name[64];
	uint64_t samples = 0;
	long long fetched;
	int rc;

	ck_assert_int_eq(mount_start(&m, plain.url, opts), 0);
	snprintf(index_path, sizeof(index_path), "%s/shards.idx", work_dir);
	shard_records_index(&m, index_path);
	ck_assert_int_eq(wharf_index_open(index_path, 0, &idx), 0);
	loader_options(&opt, 8, shuffle, 5);
	opt.shard_window = 1;
	ck_assert_msg(wharf_loader_open(idx, &opt, &l) == 0, "%s",
		      wharf_last_error());
	while ((rc = wharf_loader_next(l, &b)) == 0) {
		samples += b->count;
		ck_assert_int_eq(wharf_loader_release(l, b), 0);
		/* Data larger than memory: the kernel keeps no pages. */
		for (int k = 0; k < N_SHARD; k++)
			forget_pages(&m, shard_name(k, name, sizeof(name)));
	}
	ck_assert_int_eq(rc, WHARF_END);
	ck_assert_int_eq(samples, N_SHARD * (SHARD_SIZE / SHARD_REC));
	wharf_loader_close(l);
	wharf_index_close(idx);
	fetched = fx_mount_stat(m.dir, "origin", "bytes_fetched");
	mount_stop(&m);
	return fetched;
}

/* The shard-aware order reads each shard in one stretch and its hints run
 * no further ahead than a window: every byte comes from the origin once,
 * where a global shuffle over caches smaller than the data fetches chunks
 * again and again. */
/* libwharf's warnings, appended (the loader logs from the caller's
 * thread at open). */
static char warned[4096];

static void keep_warning(enum wharf_log_level level, const char *msg,
			 void *arg)
{
	const size_t n = strlen(warned);

	(void)arg;
	if (level == WHARF_LOG_WARN && n + 1 < sizeof(warned))
		snprintf(warned + n, sizeof(warned) - n, "%s\n", msg);
}

START_TEST(test_shard_order_fetches_once)
{
	const long long data = (long long)N_SHARD * SHARD_SIZE;
	long long global, shards;

	/* The global shuffle over shards larger than the cache says so,
	 * naming the fix; the shard order does not. */
	wharf_log_set_func(keep_warning, NULL);
	warned[0] = '\0';
	global = shard_epoch_fetched(1);
	ck_assert_msg(strstr(warned, "use shuffle=\"shards\""),
		      "no warning of the global shuffle: '%s'", warned);
	warned[0] = '\0';
	shards = shard_epoch_fetched(WHARF_SHUFFLE_SHARDS);
	wharf_log_set_func(NULL, NULL);
	ck_assert_msg(!strstr(warned, "global shuffle"), "warned: '%s'",
		      warned);

	/* The order decides, not the machine's speed: a wrong order fetches
	 * several times the data (the global shuffle more than twice); the
	 * shard order each byte once, but for hinted chunks that a loaded
	 * machine evicts before their read and fetches again (one chunk is
	 * 6% here; 3 seen once under CI-like load): less than twice the
	 * data, where the global shuffle is over.  bench/shards measures
	 * the 1.05x target at scale. */
	ck_assert_msg(shards >= data && shards < 2 * data,
		      "shard order: %lld bytes fetched for %lld (the global "
		      "shuffle: %lld)",
		      shards, data, global);
	ck_assert_msg(global > 2 * data, "global shuffle: %lld bytes for %lld",
		      global, data);
}
END_TEST

/* `wharf prefetch` fills the cache: afterwards every byte comes without a
 * request to the origin; a file it cannot read is named and fails it. */
START_TEST(test_prefetch_command)
{
	char out[PATH_MAX], err[PATH_MAX], list[PATH_MAX], name[64], *text;
	struct fx_mount m = {0};
	long long before;
	size_t len;
	FILE *f;

	ck_assert_int_eq(mount_start(&m, plain.url, NULL), 0);
	snprintf(out, sizeof(out), "%s/prefetch.json", work_dir);
	snprintf(err, sizeof(err), "%s/prefetch.err", work_dir);
	ck_assert_int_eq(fx_sh("'%s' prefetch --jobs 8 --json '%s/small' "
			       ">'%s' 2>'%s'",
			       fx_wharf_bin(), m.dir, out, err),
			 0);
	text = fx_read_file(out, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(fx_json_num(text, "objects"), N_SMALL);
	ck_assert_int_eq(fx_json_num(text, "bytes"),
			 (long long)N_SMALL * SMALL_SIZE);
	ck_assert_int_eq(fx_json_num(text, "errors"), 0);
	free(text);
	/* Not a terminal: progress as plain lines, the last one complete. */
	text = fx_read_file(err, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "prefetch: 600/600 objects"), "%s", text);
	free(text);
	before = fx_mount_stat(m.dir, "origin", "requests");
	for (int i = 0; i < N_SMALL; i++)
		check_bytes(&m, small_name(i, name, sizeof(name)), SMALL_SIZE);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin", "requests"), before);
	/* A list with a file that is not there. */
	snprintf(list, sizeof(list), "%s/prefetch.list", work_dir);
	f = fopen(list, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s/big/b0\n%s/big/nope\n%s/big/b1\n", m.dir, m.dir, m.dir);
	fclose(f);
	ck_assert_int_eq(fx_sh("'%s' prefetch -q --json --list '%s' >'%s' "
			       "2>'%s'",
			       fx_wharf_bin(), list, out, err),
			 1);
	text = fx_read_file(err, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "big/nope"), "%s", text);
	free(text);
	before = fx_mount_stat(m.dir, "origin", "requests");
	check_bytes(&m, big_name(0, name, sizeof(name)), BIG_SIZE);
	check_bytes(&m, big_name(1, name, sizeof(name)), BIG_SIZE);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin", "requests"), before);
	mount_stop(&m);
}
END_TEST

static void setup(void)
{
	static const char *const oopts[] = {"--ttfb-ms", "20", NULL};

	work_dir = fx_tmpdir("hints-work");
	make_dataset();
	plain.pid = -1;
	if (origin_start(&plain, "plain", oopts)) {
		fprintf(stderr, "bench/origin did not start\n");
		abort();
	}
}

static void teardown(void)
{
	fx_unmount_leftovers(work_dir);
	origin_stop(&plain);
	fx_rmtree(data_dir);
	fx_rmtree(work_dir);
	free(data_dir);
	free(work_dir);
}

static Suite *hints_suite(void)
{
	Suite *s = suite_create("hints");
	TCase *tc = tcase_create("hints");
	const char *why = fx_fuse_missing();

	if (!why)
		tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	fx_tcase_add(tc, test_hints_honoured, why);
	fx_tcase_add(tc, test_hints_for_cached_chunks, why);
	fx_tcase_add(tc, test_hints_passthrough_cached, why);
	fx_tcase_add(tc, test_hints_when_kernel_forgets, why);
	fx_tcase_add(tc, test_hints_never_change_bytes, why);
	fx_tcase_add(tc, test_hints_ioctl, why);
	fx_tcase_add(tc, test_stale_hints_dropped, why);
	fx_tcase_add(tc, test_shard_hinted_many_times, why);
	fx_tcase_add(tc, test_memory_cap_10000_objects, why);
	fx_tcase_add(tc, test_demand_read_first, why);
	fx_tcase_add(tc, test_origin_faults, why);
	fx_tcase_add(tc, test_origin_sheds_load, why);
	fx_tcase_add(tc, test_pool_loads_hold_no_thread, why);
	fx_tcase_add(tc, test_loader_sends_hints, why);
	fx_tcase_add(tc, test_shard_order_fetches_once, why);
	fx_tcase_add(tc, test_prefetch_command, why);
	suite_add_tcase(s, tc);
	/* A case of its own: CK_RUN_CASE=hold runs it alone. */
	tc = tcase_create("hold");
	if (!why)
		tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	fx_tcase_add_loop(tc, test_stopped_loader_lets_go_of_the_mount, 0, 2,
			  why);
	fx_tcase_add(tc, test_umount_names_the_holder, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hints_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
