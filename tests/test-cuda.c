/*
 * test-cuda: the CUDA prefetch.  Plain C, no Check, so that it runs on a GPU
 * machine that has only a compiler and CUDA (tests/gpu/run).
 *
 * Always: the options' defaults and the error of a build without CUDA or a
 * machine without a device.  On a GPU: device bytes equal the files (fixed
 * and variable-size, registered ring and staging, in and out of order), the
 * copy of batch s+1 overlaps the kernel on batch s (events), tiny rings with
 * random delays lose no byte, state save/restore and set_epoch with batches
 * read ahead, buffer misuse errors.  Without a device the GPU part prints
 * SKIP and the test exits 77.  Built with WHARF_FAKE_CUDART and
 * fake-cudart.c (test-cuda-host) it runs the same parts but overlap on the
 * host, in CI.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wharf/cuda.h>
#include <wharf/loader.h>

#include "cuda.h"
#include "fixture.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static int failures, checks;

static void check_fail(const char *file, int line, const char *cond,
		       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void check_fail(const char *file, int line, const char *cond,
		       const char *fmt, ...)
{
	va_list ap;
	failures++;
	fprintf(stderr, "%s:%d: FAIL: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (last error: %s)\n", wharf_last_error());
}

/* Counts a check; evaluates cond once. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		checks++;                                                      \
		if (!(cond))                                                   \
			check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);    \
	} while (0)

/* A check the rest of the test depends on: jumps to its `out` cleanup. */
#define REQUIRE(cond, ...)                                                     \
	do {                                                                   \
		checks++;                                                      \
		if (!(cond)) {                                                 \
			check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);    \
			goto out;                                              \
		}                                                              \
	} while (0)

static void test_options(void)
{
	struct wharf_cuda_options o;
	memset(&o, 0xff, sizeof(o));
	wharf_cuda_options_init(&o);
	CHECK(o.size == sizeof(o), "size %u", o.size);
	CHECK(o.buffers == 2, "buffers %u", o.buffers);
	CHECK(o.flags == 0, "flags %u", o.flags);
}

/* Files of fixed-size records, file i filled with seed 100 + i. */
#define REC 6144u
#define RECS_PER_FILE 40u
#define NFILES 3u

struct data {
	char *dir;
	char idx_path[512];
	wharf_index *idx;
};

static int data_records(struct data *d)
{
	char *files[NFILES];
	int rc = -1;
	d->dir = fx_tmpdir("cuda");
	for (unsigned i = 0; i < NFILES; i++) {
		files[i] = NULL;
		if (asprintf(&files[i], "%s/f%u", d->dir, i) < 0)
			abort();
		if (fx_write_file(files[i], (uint64_t)REC * RECS_PER_FILE,
				  100 + i))
			goto out;
	}
	snprintf(d->idx_path, sizeof(d->idx_path), "%s/index", d->dir);
	if (wharf_index_build_records(REC, (const char *const *)files, NFILES,
				      d->idx_path) ||
	    wharf_index_open(d->idx_path, 0, &d->idx))
		goto out;
	rc = 0;
out:
	for (unsigned i = 0; i < NFILES; i++)
		free(files[i]);
	return rc;
}

static void data_free(struct data *d)
{
	wharf_index_close(d->idx);
	if (d->dir)
		fx_rmtree(d->dir);
	free(d->dir);
	memset(d, 0, sizeof(*d));
}

#ifdef HAVE_CUDA
/* Variable-size samples: whole files of different lengths, seed 200 + i. */
static int data_files(struct data *d, unsigned n)
{
	char path[512];
	d->dir = fx_tmpdir("cudav");
	snprintf(path, sizeof(path), "%s/files", d->dir);
	if (fx_mkdirs(path))
		return -1;
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/files/v%03u", d->dir, i);
		if (fx_write_file(path, 1000 + (uint64_t)i * 997 % 20000,
				  200 + i))
			return -1;
	}
	snprintf(path, sizeof(path), "%s/files", d->dir);
	snprintf(d->idx_path, sizeof(d->idx_path), "%s/index", d->dir);
	if (wharf_index_build_dir(path, d->idx_path) ||
	    wharf_index_open(d->idx_path, 0, &d->idx))
		return -1;
	return 0;
}

/* The seed fx_write_file used for the file that sample id holds. */
static uint32_t sample_seed(const wharf_index *idx, uint64_t id,
			    struct wharf_sample *s)
{
	char path[512];
	if (wharf_index_sample(idx, id, s) ||
	    wharf_index_path(idx, s->file, path, sizeof(path)) < 0)
		return UINT32_MAX;
	const char *base = strrchr(path, '/') + 1;
	return (uint32_t)strtoul(base + 1, NULL, 10) +
	       (base[0] == 'f' ? 100 : 200);
}

/* Compares host bytes (copied back from the device) with the files. */
static int verify_batch(const wharf_index *idx,
			const struct wharf_device_batch *db, const char *data,
			const uint64_t *offsets, const int32_t *labels)
{
	int bad = 0;
	for (uint32_t k = 0; k < db->count && !bad; k++) {
		struct wharf_sample s;
		uint32_t seed = sample_seed(idx, db->samples[k], &s);
		uint64_t off =
		    db->sample_size ? k * db->sample_size : offsets[k];
		uint64_t len = db->sample_size ? db->sample_size
					       : offsets[k + 1] - offsets[k];
		if (seed == UINT32_MAX || len != s.length) {
			bad = 1;
			break;
		}
		if (labels[k] != db->host_labels[k] || labels[k] != s.label)
			bad = 2;
		for (uint64_t j = 0; j < len; j++)
			if ((uint8_t)data[off + j] !=
			    fx_byte(seed, s.offset + j)) {
				fprintf(stderr,
					"batch %" PRIu64
					" sample %u (id %" PRIu64
					") byte %" PRIu64 " differs\n",
					db->index, k, db->samples[k], j);
				bad = 3;
				break;
			}
	}
	return bad;
}

struct run {
	uint32_t workers, prefetch, batch, in_order, buffers, flags;
	uint32_t max_delay_us; /* random delay in the worker per sample */
	uint64_t spin_ns;      /* kernel per batch */
	bool random_spin;      /* random kernel lengths up to spin_ns */
};

static int slow_sample(void *user, uint64_t sample, const void *in,
		       uint64_t in_len, void *out, uint64_t out_cap,
		       uint64_t *out_len)
{
	const struct run *r = user;
	(void)sample;
	if (in_len > out_cap)
		return -EOVERFLOW;
	if (r->max_delay_us)
		usleep((useconds_t)(rand() % (int)r->max_delay_us));
	memcpy(out, in, in_len);
	*out_len = in_len;
	return 0;
}

static int open_loader(const struct data *d, const struct run *r,
		       wharf_loader **l)
{
	struct wharf_options o;
	struct wharf_cuda_options co;
	wharf_options_init(&o);
	o.batch_size = r->batch;
	o.num_workers = r->workers;
	o.prefetch = r->prefetch;
	o.in_order = r->in_order;
	o.shuffle = 1;
	o.seed = 7;
	o.rank = 0;
	o.world = 1;
	if (r->max_delay_us) {
		o.sample_fn = slow_sample;
		o.user = (void *)r;
	}
	int rc = wharf_loader_open(d->idx, &o, l);
	if (rc)
		return rc;
	wharf_cuda_options_init(&co);
	co.buffers = r->buffers;
	co.flags = r->flags;
	rc = wharf_loader_cuda_enable(*l, &co);
	if (rc) {
		wharf_loader_close(*l);
		*l = NULL;
	}
	return rc;
}

/* Host copies of one device batch. */
struct back {
	char *data;
	uint64_t *offsets;
	int32_t *labels;
};

static int copy_back(const struct wharf_device_batch *db, cudaStream_t st,
		     struct back *h)
{
	if (cudaMemcpyAsync(h->data, db->data, db->bytes,
			    cudaMemcpyDeviceToHost, st) ||
	    cudaMemcpyAsync(h->labels, db->labels, db->count * sizeof(int32_t),
			    cudaMemcpyDeviceToHost, st) ||
	    (db->offsets && cudaMemcpyAsync(h->offsets, db->offsets,
					    (db->count + 1) * sizeof(uint64_t),
					    cudaMemcpyDeviceToHost, st)) ||
	    cudaStreamSynchronize(st))
		return -EIO;
	return 0;
}

/*
 * Reads one epoch through the device and checks every byte.  seen counts
 * how often each sample id came.  Returns batches read, or -1.
 */
static long epoch_verify(const struct data *d, wharf_loader *l,
			 const struct run *r, cudaStream_t st, uint8_t *seen)
{
	struct back h = {0};
	long nb = 0;
	size_t cap = (size_t)r->batch * 64 * 1024;
	h.data = malloc(cap);
	h.offsets = calloc(r->batch + 1, sizeof(uint64_t));
	h.labels = calloc(r->batch, sizeof(int32_t));
	for (;;) {
		const struct wharf_device_batch *db;
		int rc = wharf_loader_next_device(l, st, &db);
		if (rc == WHARF_END)
			break;
		if (rc) {
			CHECK(rc == 0, "next_device: %d", rc);
			nb = -1;
			break;
		}
		if (r->spin_ns) {
			uint64_t ns = r->random_spin
					  ? (uint64_t)rand() % r->spin_ns
					  : r->spin_ns;
			if (cuda_spin(st, ns)) {
				CHECK(0, "spin kernel");
				nb = -1;
				break;
			}
		}
		CHECK(db->bytes <= cap, "batch of %" PRIu64 " bytes",
		      db->bytes);
		if (db->bytes > cap || copy_back(db, st, &h)) {
			CHECK(0, "copy back");
			nb = -1;
			break;
		}
		int bad = verify_batch(d->idx, db, h.data, h.offsets, h.labels);
		CHECK(bad == 0,
		      "batch %" PRIu64 " of epoch %" PRIu64
		      ": verify %d (workers %u prefetch %u "
		      "buffers %u flags %u in_order %u)",
		      db->index, db->epoch, bad, r->workers, r->prefetch,
		      r->buffers, r->flags, r->in_order);
		for (uint32_t k = 0; k < db->count; k++)
			seen[db->samples[k]]++;
		if (r->max_delay_us)
			usleep((useconds_t)(rand() % (int)r->max_delay_us));
		CHECK(wharf_loader_release_device(l, db, st) == 0, "release");
		nb++;
	}
	free(h.data);
	free(h.offsets);
	free(h.labels);
	return nb;
}

static void check_epoch(const struct data *d, const struct run *r,
			const char *what)
{
	wharf_loader *l = NULL;
	cudaStream_t st = NULL;
	uint64_t n = wharf_index_count(d->idx);
	uint8_t *seen = calloc(n, 1);
	REQUIRE(cudaStreamCreate(&st) == cudaSuccess, "stream");
	REQUIRE(open_loader(d, r, &l) == 0, "%s: open", what);
	for (uint64_t epoch = 0; epoch < 2; epoch++) {
		memset(seen, 0, n);
		CHECK(wharf_loader_device_set_epoch(l, epoch) == 0, "epoch");
		long nb = epoch_verify(d, l, r, st, seen);
		CHECK(nb == (long)wharf_loader_num_batches(l),
		      "%s: %ld batches of %" PRIu64, what, nb,
		      wharf_loader_num_batches(l));
		uint64_t once = 0;
		for (uint64_t i = 0; i < n; i++)
			once += seen[i] == 1;
		CHECK(once == n, "%s: %" PRIu64 " of %" PRIu64 " samples once",
		      what, once, n);
	}
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	CHECK(wharf_loader_cuda_stats(l, &cs) == 0, "stats");
	CHECK(cs.registered == !(r->flags & WHARF_CUDA_NO_REGISTER),
	      "%s: registered %u", what, cs.registered);
	CHECK(cs.batches == 2 * wharf_loader_num_batches(l),
	      "%s: stats batches %" PRIu64, what, cs.batches);
	CHECK(cs.bytes > 0 && cs.copies > 0, "%s: copy stats", what);
	CHECK(cs.overlap_ns + cs.exposed_ns == cs.copy_ns, "overlap");
	printf("%s: %" PRIu64 " copies, %.3f ms copying, %.3f ms exposed\n",
	       what, cs.copies, cs.copy_ns / 1e6, cs.exposed_ns / 1e6);
out:
	wharf_loader_close(l);
	if (st)
		cudaStreamDestroy(st);
	free(seen);
}

static void test_bytes(void)
{
	struct data d = {0}, v = {0};
	REQUIRE(data_records(&d) == 0, "records data");
	REQUIRE(data_files(&v, 70) == 0, "variable data");
	for (uint32_t flags = 0; flags < 2; flags++)
		for (uint32_t in_order = 0; in_order < 2; in_order++) {
			struct run r = {.workers = 2,
					.prefetch = 2,
					.batch = 8,
					.in_order = in_order,
					.buffers = 2,
					.flags = flags};
			char what[64];
			snprintf(what, sizeof(what), "records %s %s",
				 flags ? "staged" : "registered",
				 in_order ? "in order" : "first ready");
			check_epoch(&d, &r, what);
			snprintf(what, sizeof(what), "files %s %s",
				 flags ? "staged" : "registered",
				 in_order ? "in order" : "first ready");
			r.batch = 5;
			check_epoch(&v, &r, what);
		}
	/* No workers: the caller reads, one slot per prefetch. */
	struct run r0 = {.workers = 0,
			 .prefetch = 1,
			 .batch = 7,
			 .in_order = 1,
			 .buffers = 3};
	check_epoch(&d, &r0, "records, no workers, 1 slot, 3 buffers");
out:
	data_free(&d);
	data_free(&v);
}

/* Tiny rings, random delays in workers, host and kernels. */
static void test_stress(void)
{
	struct data d = {0};
	srand(42);
	REQUIRE(data_records(&d) == 0, "data");
	for (uint32_t flags = 0; flags < 2; flags++) {
		struct run r = {.workers = 1,
				.prefetch = 1,
				.batch = 4,
				.in_order = 1,
				.buffers = 2,
				.flags = flags,
				.max_delay_us = 800,
				.spin_ns = 3000000,
				.random_spin = true};
		check_epoch(&d, &r,
			    flags ? "stress 1 slot staged" : "stress 1 slot");
		r.workers = 3;
		r.in_order = 0;
		r.buffers = 4;
		check_epoch(&d, &r,
			    flags ? "stress 3 slots first-ready staged"
				  : "stress 3 slots first-ready");
	}
out:
	data_free(&d);
}

/*
 * The copy of batch s+1 runs while the kernel on batch s runs: its start
 * event lies before the kernel's end and its end after the kernel's start.
 * With compute (40 ms) far above load, the caller's stream never waits for a
 * copy after the first batch: the copy of s+1 is done before kernel s ends.
 */
#ifndef WHARF_FAKE_CUDART /* the host stand-in has no concurrency */
static void test_overlap(void)
{
	struct data d = {0};
	wharf_loader *l = NULL;
	cudaStream_t st = NULL;
	enum { STEPS = 8 };
	cudaEvent_t kbeg[STEPS], kend[STEPS];
	int nev = 0;
	REQUIRE(data_records(&d) == 0, "data");
	REQUIRE(cudaStreamCreate(&st) == cudaSuccess, "stream");
	struct run r = {.workers = 2,
			.prefetch = 2,
			.batch = 8,
			.in_order = 1,
			.buffers = 2};
	REQUIRE(open_loader(&d, &r, &l) == 0, "open");
	for (; nev < STEPS; nev++) {
		cudaEventCreate(&kbeg[nev]);
		cudaEventCreate(&kend[nev]);
	}
	int started = 0, overlapped = 0, hidden = 0;
	for (int s = 0; s < STEPS; s++) {
		const struct wharf_device_batch *db;
		REQUIRE(wharf_loader_next_device(l, st, &db) == 0, "next");
		if (s > 0) {
			/* db is batch s; compare its copy with kernel s-1. */
			void *cs, *ce;
			REQUIRE(cuda_copy_events(l, db->buffer, &cs, &ce) == 0,
				"events");
			REQUIRE(cudaEventSynchronize(kend[s - 1]) ==
					cudaSuccess &&
				    cudaEventSynchronize((cudaEvent_t)ce) ==
					cudaSuccess,
				"sync");
			float a = 0, b = 0, e = 0;
			cudaEventElapsedTime(&a, (cudaEvent_t)cs, kend[s - 1]);
			cudaEventElapsedTime(&b, kbeg[s - 1], (cudaEvent_t)ce);
			cudaEventElapsedTime(&e, (cudaEvent_t)ce, kend[s - 1]);
			started += a > 0;
			/* Also ended after kernel s began: a true overlap
			 * (printed, not asserted: a copy this short may
			 * finish as the kernel is launched). */
			overlapped += a > 0 && b > 0;
			hidden += e > 0;
		}
		REQUIRE(cudaEventRecord(kbeg[s], st) == cudaSuccess, "record");
		REQUIRE(cuda_spin(st, 40000000) == 0, "spin");
		REQUIRE(cudaEventRecord(kend[s], st) == cudaSuccess, "record");
		REQUIRE(wharf_loader_release_device(l, db, st) == 0, "release");
	}
	CHECK(started == STEPS - 1,
	      "copy of s+1 started before kernel s ended in %d of %d steps",
	      started, STEPS - 1);
	CHECK(hidden == STEPS - 1,
	      "copy of s+1 done before kernel s ended in %d of %d steps",
	      hidden, STEPS - 1);
	cudaStreamSynchronize(st);
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	CHECK(wharf_loader_cuda_stats(l, &cs) == 0, "stats");
	printf("overlap: started %d/%d, overlapped %d/%d, hidden %d/%d; copy "
	       "%.3f ms, exposed %.3f ms, host wait %.3f ms over %d x 40 ms "
	       "kernels\n",
	       started, STEPS - 1, overlapped, STEPS - 1, hidden, STEPS - 1,
	       cs.copy_ns / 1e6, cs.exposed_ns / 1e6, cs.wait_ns / 1e6, STEPS);
out:
	for (int i = 0; i < nev; i++) {
		cudaEventDestroy(kbeg[i]);
		cudaEventDestroy(kend[i]);
	}
	wharf_loader_close(l);
	if (st)
		cudaStreamDestroy(st);
	data_free(&d);
}
#endif

/* Save after k batches (with one read ahead), restore into a new loader:
 * the two together give every batch exactly once. */
static void test_state(void)
{
	struct data d = {0};
	wharf_loader *l = NULL, *l2 = NULL;
	cudaStream_t st = NULL;
	uint64_t n;
	uint8_t *seen = NULL;
	REQUIRE(data_records(&d) == 0, "data");
	n = wharf_index_count(d.idx);
	seen = calloc(n, 1);
	REQUIRE(cudaStreamCreate(&st) == cudaSuccess, "stream");
	for (uint32_t in_order = 0; in_order < 2; in_order++) {
		struct run r = {.workers = 2,
				.prefetch = 2,
				.batch = 8,
				.in_order = in_order,
				.buffers = 3};
		memset(seen, 0, n);
		REQUIRE(open_loader(&d, &r, &l) == 0, "open");
		REQUIRE(wharf_loader_device_set_epoch(l, 3) == 0, "epoch");
		for (int k = 0; k < 5; k++) {
			const struct wharf_device_batch *db;
			REQUIRE(wharf_loader_next_device(l, st, &db) == 0,
				"next");
			for (uint32_t j = 0; j < db->count; j++)
				seen[db->samples[j]]++;
			REQUIRE(wharf_loader_release_device(l, db, st) == 0,
				"release");
		}
		struct wharf_state s;
		REQUIRE(wharf_loader_device_state_save(l, &s) == 0, "save");
		CHECK(s.epoch == 3, "epoch %" PRIu64, s.epoch);
		if (in_order)
			CHECK(s.position == 5 && s.done_mask == 0,
			      "position %" PRIu64 " mask %" PRIx64, s.position,
			      s.done_mask);
		r.workers = 1;
		REQUIRE(open_loader(&d, &r, &l2) == 0, "open 2");
		REQUIRE(wharf_loader_device_state_restore(l2, &s) == 0,
			"restore");
		long nb = epoch_verify(&d, l2, &r, st, seen);
		CHECK(nb + 5 == (long)wharf_loader_num_batches(l2),
		      "%ld batches after restore", nb);
		uint64_t once = 0;
		for (uint64_t i = 0; i < n; i++)
			once += seen[i] == 1;
		CHECK(once == n,
		      "in_order %u: %" PRIu64 " of %" PRIu64
		      " once across save/restore",
		      in_order, once, n);
		/* Restoring into the first loader, with batches read ahead,
		 * gives the same rest. */
		memset(seen, 0, n);
		REQUIRE(wharf_loader_device_state_restore(l, &s) == 0,
			"restore 1");
		nb = epoch_verify(&d, l, &r, st, seen);
		CHECK(nb + 5 == (long)wharf_loader_num_batches(l),
		      "%ld batches after restore in place", nb);
		wharf_loader_close(l);
		wharf_loader_close(l2);
		l = l2 = NULL;
	}
out:
	wharf_loader_close(l);
	wharf_loader_close(l2);
	if (st)
		cudaStreamDestroy(st);
	free(seen);
	data_free(&d);
}

static void test_misuse(void)
{
	struct data d = {0};
	wharf_loader *l = NULL;
	const struct wharf_device_batch *a, *b, *c;
	REQUIRE(data_records(&d) == 0, "data");
	struct run r = {.workers = 1,
			.prefetch = 2,
			.batch = 8,
			.in_order = 1,
			.buffers = 2};
	REQUIRE(open_loader(&d, &r, &l) == 0, "open");
	struct wharf_cuda_options co;
	wharf_cuda_options_init(&co);
	CHECK(wharf_loader_cuda_enable(l, &co) == -EEXIST, "twice");
	REQUIRE(wharf_loader_next_device(l, NULL, &a) == 0, "next a");
	REQUIRE(wharf_loader_next_device(l, NULL, &b) == 0, "next b");
	CHECK(a->index == 0 && b->index == 1, "order %" PRIu64 " %" PRIu64,
	      a->index, b->index);
	CHECK(wharf_loader_next_device(l, NULL, &c) == -ENOBUFS &&
		  strstr(wharf_last_error(), "device buffers"),
	      "all buffers held");
	CHECK(wharf_loader_release_device(l, a, NULL) == 0, "release a");
	CHECK(wharf_loader_release_device(l, a, NULL) == -EINVAL,
	      "release a twice");
	CHECK(wharf_loader_next_device(l, NULL, &c) == 0 && c->index == 2,
	      "next after release");
	co.buffers = 0;
	wharf_loader *l2 = NULL;
	struct wharf_options o;
	wharf_options_init(&o);
	o.num_workers = 0;
	REQUIRE(wharf_loader_open(d.idx, &o, &l2) == 0, "open 2");
	CHECK(wharf_loader_cuda_enable(l2, &co) == -EINVAL, "0 buffers");
	CHECK(wharf_loader_next_device(l2, NULL, &c) == -EINVAL &&
		  strstr(wharf_last_error(), "cuda_enable"),
	      "not enabled");
	wharf_loader_close(l2);
out:
	wharf_loader_close(l);
	data_free(&d);
}

static int gpu_tests(void)
{
	if (!wharf_cuda_available()) {
		printf("SKIP: GPU tests: %s\n", wharf_last_error());
		return 77;
	}
	struct cudaDeviceProp p;
	int dev = 0;
	cudaGetDevice(&dev);
	if (cudaGetDeviceProperties(&p, dev) == cudaSuccess)
		printf("device %d: %s\n", dev, p.name);
	test_bytes();
	test_stress();
#ifndef WHARF_FAKE_CUDART
	test_overlap();
#else
	printf("host stand-in for CUDA: overlap is tested by test-cuda on "
	       "a GPU\n");
#endif
	test_state();
	test_misuse();
	return 0;
}

#else

/* Every entry point of a build without CUDA says so. */
static int gpu_tests(void)
{
	const struct wharf_device_batch *db = (void *)1;
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	struct wharf_state s;
	CHECK(wharf_cuda_available() == 0, "available");
	CHECK(strstr(wharf_last_error(), "built without CUDA"), "message");
	CHECK(wharf_loader_cuda_enable(NULL, NULL) == -ENOTSUP, "enable");
	CHECK(wharf_loader_next_device(NULL, NULL, &db) == -ENOTSUP &&
		  db == NULL,
	      "next");
	CHECK(wharf_loader_release_device(NULL, NULL, NULL) == -ENOTSUP,
	      "release");
	CHECK(wharf_loader_device_set_epoch(NULL, 1) == -ENOTSUP, "epoch");
	CHECK(wharf_loader_device_state_save(NULL, &s) == -ENOTSUP, "save");
	CHECK(wharf_loader_device_state_restore(NULL, &s) == -ENOTSUP,
	      "restore");
	CHECK(wharf_loader_cuda_stats(NULL, &cs) == -ENOTSUP, "stats");
	CHECK(strstr(wharf_last_error(), "built without CUDA"), "message");
	printf("SKIP: built without CUDA (the -ENOTSUP path was checked)\n");
	return 77;
}

#endif

/* A loader without CUDA prefetch refuses the _device calls clearly, in any
 * build. */
static void test_not_enabled(void)
{
	struct data d = {0};
	wharf_loader *l = NULL;
	struct wharf_options o;
	const struct wharf_device_batch *db;
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	REQUIRE(data_records(&d) == 0, "data");
	wharf_options_init(&o);
	o.num_workers = 0;
	REQUIRE(wharf_loader_open(d.idx, &o, &l) == 0, "open");
	int rc = wharf_loader_next_device(l, NULL, &db);
#ifdef HAVE_CUDA
	CHECK(rc == -EINVAL && strstr(wharf_last_error(), "cuda_enable"),
	      "rc %d", rc);
	CHECK(wharf_loader_cuda_stats(l, &cs) == -EINVAL, "stats");
	/* Without a device, enable names what is missing. */
	if (!wharf_cuda_available()) {
		struct wharf_cuda_options co;
		wharf_cuda_options_init(&co);
		rc = wharf_loader_cuda_enable(l, &co);
		CHECK(rc == -ENODEV && strlen(wharf_last_error()) > 0,
		      "enable without a device: %d", rc);
	}
#else
	CHECK(rc == -ENOTSUP, "rc %d", rc);
	CHECK(wharf_loader_cuda_stats(l, &cs) == -ENOTSUP, "stats");
#endif
	/* The host path is untouched. */
	const struct wharf_batch *b;
	CHECK(wharf_loader_next(l, &b) == 0 && b->index == 0, "host next");
	if (b)
		CHECK(wharf_loader_release(l, b) == 0, "host release");
out:
	wharf_loader_close(l);
	data_free(&d);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_options();
	test_not_enabled();
	int rc = gpu_tests();
	printf("%d checks, %d failures\n", checks, failures);
	if (failures)
		return 1;
	return rc;
}
