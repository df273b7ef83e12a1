/*
 * The chunk store under a running mount: chunks reloaded and sealed, the
 * size cap, corrupt chunks fetched again, a manifest's digests through a
 * site cache that damages bodies, chunks served before their store writes
 * end (fanotify holds the writes), and packs made after such writes.
 * Its own program: the store (fs/store) and the deferred writes (fs/read)
 * as a mount drives them; test-store tests the store alone.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture-ck.h"
#include "fixture-mount.h"
#include "fixture.h"
#include "checksum.h"
#include "text.h"

/* The errno of a read of all of root/name, 0 when it reads whole. */
static int read_whole_errno(const char *root, const char *name)
{
	char path[PATH_MAX + 64], buf[65536];
	ssize_t r;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno;
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		;
	if (r < 0)
		err = errno;
	close(fd);
	return err;
}

/* "ALGO:HEX" of data_dir/name into out. */
static const char *digest_of(const char *name, enum checksum_algo a,
			     char out[CHECKSUM_TEXT_MAX])
{
	char path[PATH_MAX];
	struct checksum_ctx ctx;
	struct checksum c;
	size_t len;
	void *buf;

	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	buf = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(checksum_begin(&ctx, a), 0);
	checksum_feed(&ctx, buf, len);
	checksum_end(&ctx, &c);
	free(buf);
	return checksum_format(&c, out);
}

/*
 * A manifest's digest column, through a site cache that zeroes every
 * body: each object is found out, fetched again from the origin itself
 * and served right; an object whose digest is wrong fails with EIO and a
 * clear log line, and nothing of it stays cached.
 */
START_TEST(test_manifest_digests_bad_site_cache)
{
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-digests");
	char manifest[PATH_MAX], url[256], bad[64], d[3][CHECKSUM_TEXT_MAX];
	char path[PATH_MAX + 64];
	const char *extra[] = {"--manifest", manifest, "--site-cache", bad,
			       NULL};
	pid_t bad_pid;
	FILE *f;
	int fd;

	bad_pid = fx_bad_cache_start(work_dir, bad, sizeof(bad));
	ck_assert_int_gt(bad_pid, 0);
	snprintf(manifest, sizeof(manifest), "%s/manifest-digests", work_dir);
	f = fopen(manifest, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "chunk-1 %u - %s\n", CHUNK - 1,
		digest_of("chunk-1", CHECKSUM_SHA256, d[0]));
	fprintf(f, "chunk+1 %u - %s\n", CHUNK + 1,
		digest_of("chunk+1", CHECKSUM_MD5, d[1]));
	fprintf(f, "sub/deeper/leaf %u - %s\n", 3 * CHUNK + 17,
		digest_of("sub/deeper/leaf", CHECKSUM_CRC32C, d[2]));
	/* the digest of another file: no bytes of "one" match it */
	fprintf(f, "one 1 - %s\n", d[0]);
	/* an S3 ETag that is no MD5: the origin's own bytes are served */
	fprintf(f, "chunk %u - md5-etag:%s\n", CHUNK, strchr(d[1], ':') + 1);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(url, sizeof(url), "%s/plain/", ng.base);
	fx_mount_init(&m, work_dir, "digests");
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);

	/* One chunk: checked before a byte is served. */
	ck_assert_int_eq(check_file(m.dir, "chunk-1", CHUNK - 1), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_eq(read_whole_errno(m.dir, "one"), EIO);
	/* Many: the first read may have had bad bytes, a read after the
	 * kernel's pages are dropped has none. */
	for (int i = 0; i < 2; i++) {
		const char *name = i ? "sub/deeper/leaf" : "chunk+1";
		const uint64_t size = i ? 3 * CHUNK + 17 : CHUNK + 1;

		ck_assert_int_eq(read_whole_errno(m.dir, name), 0);
		snprintf(path, sizeof(path), "%s/%s", m.dir, name);
		fd = open(path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED),
				 0);
		close(fd);
		ck_assert_int_eq(check_file(m.dir, name, size), 0);
	}
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin_checksums", "checked"),
			 5);
	ck_assert_int_eq(fx_mount_stat(m.dir, "origin_checksums", "failed"), 1);
	ck_assert_int_eq(
	    fx_mount_stat(m.dir, "origin_checksums", "etag_not_md5"), 1);
	ck_assert_int_eq(
	    fx_mount_stat(m.dir, "origin_checksums", "repaired") + 2,
	    fx_mount_stat(m.dir, "origin_checksums", "mismatches"));
	/* "one" again: it fails at once */
	ck_assert_int_eq(read_whole_errno(m.dir, "one"), EIO);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(
	    fx_sh("grep -q 'one: fetched again from the origin itself, its "
		  "bytes still do not match: expected %s (from the origin.s "
		  "listing or manifest), got sha256:[0-9a-f]* from the "
		  "origin.s own bytes; reads of it fail with EIO' '%s'",
		  d[0], m.log),
	    0);
	/* what was verified is on record, and nothing of "one" is cached */
	ck_assert_int_eq(fx_sh("'%s' cache verify --cache-dir '%s' | grep -q "
			       "'^4 objects checked against their origin.s "
			       "checksum: 4 good, 0 bad; 0 not cached whole'",
			       fx_wharf_bin(), cache),
			 0);
	/* 1 + 1 + 2 + 4 chunks: none of "one" */
	ck_assert_int_eq(fx_sh("test $('%s' cache ls --cache-dir '%s' | wc -l) "
			       "= 8",
			       fx_wharf_bin(), cache),
			 0);
	fx_stop(bad_pid, 5000);
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/* Drops the kernel's pages of root/name, so that its next read reaches
 * the mount. */
static void drop_pages(const char *root, const char *name)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
}

/*
 * A one-chunk file's chunk, loaded from disk (a mapping of its file), is
 * evicted from a small memory cache by the read of a larger file; read
 * again in the same mount, it is loaded without a hash when the first
 * load checked and sealed it (the load does not touch the file, which
 * would break the seal).  Its chunk file's times are set back two hours
 * between the mounts (its stat changes: the first load checks it).
 * _i 1: a byte of it flipped between the two loads is caught, and the
 * chunk fetched again.
 */
START_TEST(test_reload_in_mount_sealed)
{
	static const char *const small[] = {"--passthrough=off",
					    "--memory-cache", "4M", NULL};
	struct fx_mount m;
	char *cache = own_mount_start(&m, "mount-reload-sealed", small);
	char url[256], file[PATH_MAX + 64];
	long long checked, sealed;
	char *find;
	FILE *p;

	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	/* Its chunk file: raw, the object's bytes alone. */
	find = strdupf("for f in $(find '%s/chunks' -type f -size %uc); do "
		       "cmp -s $f '%s/chunk' && echo $f; done",
		       cache, CHUNK, m.dir);
	p = popen(find, "r");
	free(find);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(file, sizeof(file), p));
	pclose(p);
	file[strcspn(file, "\n")] = 0;
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_eq(fx_sh("touch -d '2 hours ago' '%s'", file), 0);
	usleep(200000); /* past the ctime's tick (store_seal.c) */
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, small), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	ck_assert_int_ge(fx_mount_stat(m.dir, "disk_cache", "checked_bytes"),
			 CHUNK);
	ck_assert_int_eq(check_file(m.dir, "big", BIG_SIZE), 0);
	if (_i)
		ck_assert_int_eq(fx_sh("printf '\\377' | dd of='%s' bs=1 "
				       "seek=999 conv=notrunc status=none",
				       file),
				 0);
	checked = fx_mount_stat(m.dir, "disk_cache", "checked_bytes");
	sealed = fx_mount_stat(m.dir, "disk_cache", "sealed");
	drop_pages(m.dir, "chunk");
	ck_assert_int_eq(check_file(m.dir, "chunk", CHUNK), 0);
	if (_i) {
		ck_assert_int_ge(fx_mount_stat(m.dir, "disk_cache", "corrupt"),
				 1);
	} else {
		ck_assert_int_eq(
		    fx_mount_stat(m.dir, "disk_cache", "checked_bytes"),
		    checked);
		ck_assert_int_gt(fx_mount_stat(m.dir, "disk_cache", "sealed"),
				 sealed);
	}
	own_mount_end(&m, cache);
}
END_TEST

/* Sums the sizes of the chunk files under cache dir: what --cache-size
 * caps. */
static uint64_t cache_bytes(const char *dir)
{
	char cmd[PATH_MAX + 128], line[64];
	uint64_t total = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "find '%s/chunks' -type f -printf '%%s\\n'",
		 dir);
	p = popen(cmd, "r");
	if (!p)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), p))
		total += strtoull(line, NULL, 10);
	pclose(p);
	return total;
}

/*
 * Bytes of files under dir that process pid still maps though they were
 * removed: their disk blocks stay taken until they are unmapped.
 */
static uint64_t removed_but_mapped(pid_t pid, const char *dir)
{
	char path[64], line[PATH_MAX + 128], real[PATH_MAX];
	uint64_t total = 0;
	size_t dlen;
	FILE *f;

	ck_assert_ptr_nonnull(realpath(dir, real));
	dlen = strlen(real);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end;
		char *file = strchr(line, '/');

		if (!file || strncmp(file, real, dlen) || file[dlen] != '/' ||
		    !strstr(file, " (deleted)") ||
		    sscanf(line, "%llx-%llx", &start, &end) != 2)
			continue;
		total += end - start;
	}
	fclose(f);
	return total;
}

START_TEST(test_size_cap_holds)
{
	static const char *const extra[] = {"--cache-size", "6M", NULL};
	struct fx_mount m;
	char *cache = own_mount_start(&m, "mount-cap", extra);
	const uint64_t leaf_size = 3 * CHUNK + 17;
	char url[256];
	uint64_t total, held;

	/* The leaf's chunks on disk; then, in a new mount, read from there,
	 * so that the memory cache maps their files (they do not compress). */
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", leaf_size), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	snprintf(url, sizeof(url), "%s/json/", ng.base);
	ck_assert_int_eq(mount_start(&m, url, cache, extra), 0);
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", leaf_size), 0);
	ck_assert_uint_eq(removed_but_mapped(m.pid, cache), 0);

	/* 50 MiB through the 6 MiB cache evicts them. */
	ck_assert_int_eq(check_file(m.dir, "big", BIG_SIZE), 0);
	total = cache_bytes(cache);
	ck_assert_msg(total <= (6u << 20),
		      "the cache holds %llu bytes, over its 6 MiB cap",
		      (unsigned long long)total);
	ck_assert_msg(total > 0, "nothing was cached");
	/* Evicted files must not live on in the memory cache's mappings:
	 * no reader holds a chunk now, so none may be left. */
	held = removed_but_mapped(m.pid, cache);
	ck_assert_msg(held == 0,
		      "%llu bytes of evicted chunk files are still mapped",
		      (unsigned long long)held);
	own_mount_end(&m, cache);
}
END_TEST

START_TEST(test_corrupt_chunk_refetched)
{
	/* Chunk files (0); packs, made by default where the kernel offers
	 * passthrough (1). */
	static const char *const off[] = {"--passthrough=off", NULL};
	const char *const *opts = _i ? NULL : off;
	struct fx_mount m;
	char *cache = fx_tmpdir("mount-corrupt");
	char url[256], *json;
	int n, packs, rc;

	snprintf(url, sizeof(url), "%s/json/", ng.base);
	fx_mount_init(&m, work_dir, "corrupt");
	ck_assert_int_eq(mount_start(&m, url, cache, opts), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", 3 * CHUNK + 17),
			 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);

	packs = count_packs(cache);
	ck_assert_int_eq(packs, _i && fx_passthrough_expected() ? 2 : 0);
	n = corrupt_chunks(cache);
	/* 6 chunk files, or two packs and their indexes and a chunk file
	 * of the listing's. */
	ck_assert_msg(n >= (packs ? 4 : 6), "found %d chunk files to corrupt",
		      n);
	rc = fx_sh("'%s' cache verify --cache-dir '%s' >>'%s' 2>&1",
		   fx_wharf_bin(), cache, m.log);
	ck_assert_msg(rc != 0, "wharf cache verify found nothing");
	/* verify removed them; corrupt the survivors again below */
	ck_assert_int_eq(mount_start(&m, url, cache, opts), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(fx_mount_stop(&m), 0);
	ck_assert_int_gt(corrupt_chunks(cache), 0);
	ck_assert_int_eq(mount_start(&m, url, cache, opts), 0);
	ck_assert_int_eq(check_file(m.dir, "chunk+1", CHUNK + 1), 0);
	ck_assert_int_eq(check_file(m.dir, "sub/deeper/leaf", 3 * CHUNK + 17),
			 0);
	json = fx_mount_stats(m.dir);
	ck_assert_ptr_nonnull(json);
	ck_assert_msg(fx_json_num(json, "chunks_fetched") >= 1,
		      "corrupt chunks were not fetched again: %s", json);
	free(json);
	own_mount_end(&m, cache);
}
END_TEST

/* A reader's read of one file, for the tests of deferred store writes. */
struct later_read {
	const char *root, *name;
	uint64_t size;
	int rc;
	bool done; /* atomic */
};

static void *later_read_run(void *arg)
{
	struct later_read *r = arg;

	r->rc = check_file_as(r->root, r->name, r->name, r->size);
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void *later_stop_run(void *arg)
{
	return (void *)(intptr_t)fx_mount_stop(arg);
}

/* fanotify permission events on a cache's chunk directories: the
 * daemon's creates of chunk files, held until let go. */
struct fan_hold {
	int fan;
	pid_t pid;	/* whose events are held; others are allowed */
	int held[64];	/* their event fds */
	int n, max;	/* held, and at most */
};

/* Starts holding pid's creates under CACHE/chunks (at most max at a
 * time).  @return 0, or -errno when fanotify cannot (not CAP_SYS_ADMIN,
 * or no permission events in this kernel). */
static int fan_start(struct fan_hold *h, const char *cache, pid_t pid,
		     int max)
{
	char path[PATH_MAX];

	h->fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC,
			       O_RDONLY | O_LARGEFILE);
	if (h->fan < 0)
		return -errno;
	h->pid = pid;
	h->n = 0;
	h->max = max;
	for (int i = 0; i < 256; i++) {
		snprintf(path, sizeof(path), "%s/chunks/%02x", cache, i);
		if (fanotify_mark(h->fan, FAN_MARK_ADD,
				  FAN_OPEN_PERM | FAN_EVENT_ON_CHILD, AT_FDCWD,
				  path))
			return -errno;
	}
	return 0;
}

static void fan_reply(int fan, int fd)
{
	const struct fanotify_response r = {.fd = fd, .response = FAN_ALLOW};

	ck_assert_int_eq(write(fan, &r, sizeof(r)), sizeof(r));
	close(fd);
}

/* Takes the events that come within ms (0: those waiting), holding
 * pid's while there is room.  @return how many are held. */
static int fan_take(struct fan_hold *h, int ms)
{
	struct pollfd p = {.fd = h->fan, .events = POLLIN};
	char buf[4096] __attribute__((aligned(8)));

	while (poll(&p, 1, ms) > 0) {
		const ssize_t n = read(h->fan, buf, sizeof(buf));
		struct fanotify_event_metadata *ev = (void *)buf;
		ssize_t left = n;

		for (; n > 0 && FAN_EVENT_OK(ev, left);
		     ev = FAN_EVENT_NEXT(ev, left)) {
			if (ev->pid == h->pid && h->n < h->max)
				h->held[h->n++] = ev->fd;
			else
				fan_reply(h->fan, ev->fd);
		}
		ms = 0;
	}
	return h->n;
}

/* Lets every held create go, and stops watching. */
static void fan_stop(struct fan_hold *h)
{
	for (int i = 0; i < h->n; i++)
		fan_reply(h->fan, h->held[i]);
	h->n = 0;
	close(h->fan);
}

/* Waits up to ms for r to end, answering events meanwhile. */
static bool later_wait(struct fan_hold *h, struct later_read *r, int ms)
{
	for (int waited = 0;
	     !__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) && waited < ms;
	     waited += 20)
		(void)fan_take(h, 20);
	return __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
}

/* Writes DATA/dir/name of size bytes, alone in its directory (no other
 * file's chunk is read ahead). */
static void write_alone(const char *dir, const char *name, uint64_t size)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", data_dir, dir);
	ck_assert_int_eq(fx_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	ck_assert_int_eq(fx_write_file(path, size, seed_of(name)), 0);
}

/* An own mount (tag) whose chunk file creates h holds (max at a time),
 * and a thread reading rd from it.  @return 0, or fan_start's -errno
 * (the mount ended: the caller skips). */
static int later_start(struct fx_mount *m, char **cache, const char *tag,
		       struct fan_hold *h, int max, struct later_read *rd,
		       pthread_t *reader)
{
	int rc;

	write_alone(tag, rd->name, rd->size);
	*cache = own_mount_start(m, tag, NULL);
	rc = fan_start(h, *cache, m->pid, max);
	if (rc) {
		own_mount_end(m, *cache);
		return rc;
	}
	rd->root = m->dir;
	ck_assert_int_eq(pthread_create(reader, NULL, later_read_run, rd), 0);
	return 0;
}

#define FAN_SKIP_WHY                                                           \
	"fanotify: %s (permission events need CAP_SYS_ADMIN and "             \
	"CONFIG_FANOTIFY_ACCESS_PERMISSIONS)"

/*
 * A chunk fetched from the origin is served before it is stored: while
 * the store's create of its file waits (a fanotify permission event on
 * the cache's chunk directories, left unanswered), a read of the file
 * still ends.  A clean unmount started then waits for that write: the
 * chunk is on disk afterwards, and no temp file is left.
 */
START_TEST(test_chunk_served_before_stored)
{
	struct later_read rd = {.name = "later/only", .size = 300000};
	char path[PATH_MAX], *cache, *listing;
	pthread_t reader, stopper;
	struct fan_hold h;
	struct fx_mount m;
	void *status;
	size_t len;
	int rc;

	rc = later_start(&m, &cache, "later", &h, 1, &rd, &reader);
	if (rc)
		fx_skip(FAN_SKIP_WHY, strerror(-rc));
	for (int waited = 0; !fan_take(&h, 100) && waited < 30000;
	     waited += 100)
		;
	ck_assert_msg(h.n == 1, "the daemon never created a chunk file");
	/* The write waits: the read must end all the same. */
	ck_assert_msg(later_wait(&h, &rd, 60000),
		      "the read waited for the chunk's store write");
	ck_assert_int_eq(pthread_join(reader, NULL), 0);
	ck_assert_int_eq(rd.rc, 0);
	/* Unmounting with the write still held: it waits for it. */
	ck_assert_int_eq(pthread_create(&stopper, NULL, later_stop_run, &m),
			 0);
	usleep(300000);
	fan_stop(&h);
	ck_assert_int_eq(pthread_join(stopper, &status), 0);
	ck_assert_int_eq((int)(intptr_t)status, 0);
	snprintf(path, sizeof(path), "%s/listing", work_dir);
	ck_assert_int_eq(fx_sh("cd '%s/chunks' && find . -type f >'%s'",
			       cache, path),
			 0);
	listing = fx_read_file(path, &len);
	ck_assert_ptr_nonnull(listing);
	ck_assert_msg(!strstr(listing, "/.tmp."), "a temp file was left: %s",
		      listing);
	ck_assert_msg(strchr(listing, '\n') &&
			  strchr(listing, '\n') == strrchr(listing, '\n'),
		      "expected one chunk file, found: %s", listing);
	free(listing);
	rmdir(m.dir);
	fx_rmtree(cache);
	free(cache);
}
END_TEST

/*
 * A file of several chunks read through the mount is packed, though its
 * chunks' store writes come after its reads: the packer has them written
 * first.  Here the creates of its chunk files are held for a second after
 * the read, longer than the packer's retries for chunks not yet stored.
 */
START_TEST(test_pack_after_deferred_writes)
{
	struct later_read rd = {.name = "laterpack/big", .size = 3 * CHUNK + 5};
	pthread_t reader;
	struct fan_hold h;
	struct fx_mount m;
	long long packs = 0;
	char *cache;
	int rc;

	if (!fx_passthrough_expected())
		fx_skip("packs are made where FUSE passthrough is (root, "
			"Linux 6.9 or later)");
	rc = later_start(&m, &cache, "laterpack", &h, 64, &rd, &reader);
	if (rc)
		fx_skip(FAN_SKIP_WHY, strerror(-rc));
	ck_assert_msg(later_wait(&h, &rd, 60000),
		      "the read waited for its chunks' store writes");
	ck_assert_int_eq(pthread_join(reader, NULL), 0);
	ck_assert_int_eq(rd.rc, 0);
	for (int waited = 0; waited < 1000; waited += 20)
		(void)fan_take(&h, 20);
	ck_assert_int_gt(h.n, 0);
	fan_stop(&h);
	for (int waited = 0; waited < 60000 && packs < 1; waited += 50) {
		usleep(50000);
		packs = fx_mount_stat(m.dir, "disk_cache", "packs");
	}
	ck_assert_int_eq(packs, 1);
	own_mount_end(&m, cache);
}
END_TEST

static Suite *mount_cache_suite(void)
{
	Suite *s = suite_create("mount-cache");
	const char *why;
	TCase *tc = mount_tcase("mount-cache", &why);

	fx_tcase_add(tc, test_manifest_digests_bad_site_cache, why);
	fx_tcase_add_loop(tc, test_reload_in_mount_sealed, 0, 2, why);
	fx_tcase_add(tc, test_size_cap_holds, why);
	fx_tcase_add_loop(tc, test_corrupt_chunk_refetched, 0, 2, why);
	fx_tcase_add(tc, test_chunk_served_before_stored, why);
	fx_tcase_add(tc, test_pack_after_deferred_writes, why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return fx_suite_run(mount_cache_suite());
}
