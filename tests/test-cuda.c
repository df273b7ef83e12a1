/*
 * test-cuda: the CUDA prefetch.  Plain C, no Check, so that it runs on a GPU
 * machine that has only a compiler and CUDA (tests/gpu/run).
 *
 * Always: the options' defaults and the error of a build without CUDA or a
 * machine without a device.  On a GPU: device bytes equal the files (fixed
 * and variable-size, registered ring and staging, in and out of order), the
 * copy of batch s+1 overlaps the kernel on batch s (events), the host runs
 * ahead of the caller's stream, tiny rings with random delays lose no byte,
 * workers forked again after registration (persistent = 0), the loader's
 * device kept apart from the caller's, close with kernels pending, a ring of
 * several GiB registered, state save/restore and set_epoch with batches read
 * ahead, buffer misuse errors.  Without a device each GPU test prints a SKIP
 * line of its own (test-cuda-skips.sh) and the program passes on what it
 * checked; a CUDA that is installed but broken (a driver too old) fails.
 * Built with WHARF_FAKE_CUDART and fake-cudart.c
 * (test-cuda-host) it runs the same tests but the big ring against a
 * stand-in whose streams are threads, in CI; there it also checks that a
 * driver too old is an error, that the caller's pending CUDA error survives,
 * and that the stand-in saw no misuse (host waits that spin, memory freed
 * under queued work, the wrong device).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <wharf/cuda.h>
#include <wharf/loader.h>

#include "cuda.h"
#include "fixture.h"
#include "loader_i.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef WHARF_FAKE_CUDART
#include "fake-cudart.h"
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
	uint64_t rec; /* record bytes; 0 for whole files */
};

/* nfiles files of per_file records of rec bytes. */
static int data_records_sized(struct data *d, uint64_t rec, unsigned per_file,
			      unsigned nfiles)
{
	char *files[NFILES];
	int rc = -1;
	if (nfiles > NFILES)
		abort();
	d->dir = fx_tmpdir("cuda");
	d->rec = rec;
	for (unsigned i = 0; i < nfiles; i++) {
		files[i] = NULL;
		if (asprintf(&files[i], "%s/f%u", d->dir, i) < 0)
			abort();
		if (fx_write_file(files[i], rec * per_file, 100 + i))
			goto out;
	}
	snprintf(d->idx_path, sizeof(d->idx_path), "%s/index", d->dir);
	if (wharf_index_build_records(rec, (const char *const *)files, nfiles,
				      d->idx_path) ||
	    wharf_index_open(d->idx_path, 0, &d->idx))
		goto out;
	rc = 0;
out:
	for (unsigned i = 0; i < nfiles; i++)
		free(files[i]);
	return rc;
}

static int data_records(struct data *d)
{
	return data_records_sized(d, REC, RECS_PER_FILE, NFILES);
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
	uint32_t fresh_workers; /* persistent = 0: forked again each epoch */
	uint32_t max_delay_us;	/* random delay in the worker per sample */
	uint64_t spin_ns;	/* kernel per batch */
	bool random_spin;	/* random kernel lengths up to spin_ns */
};

/* The run most tests make: in order, two device buffers, no delays; a
 * test changes what it is about. */
static struct run run_of(uint32_t workers, uint32_t prefetch, uint32_t batch)
{
	return (struct run){.workers = workers,
			    .prefetch = prefetch,
			    .batch = batch,
			    .in_order = 1,
			    .buffers = 2};
}

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
	o.persistent = !r->fresh_workers;
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
	size_t cap = (size_t)r->batch * (d->rec > 65536 ? d->rec : 65536);
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
			struct run r = run_of(2, 2, 8);
			r.in_order = in_order;
			r.flags = flags;
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
	struct run r0 = run_of(0, 1, 7);
	r0.buffers = 3;
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
		struct run r = run_of(1, 1, 4);
		r.flags = flags;
		r.max_delay_us = 800;
		r.spin_ns = 3000000;
		r.random_spin = true;
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

/* Events the host waits on: blocking sync, so that a wait sleeps. */
static cudaEvent_t event_new(void)
{
	cudaEvent_t e = NULL;
	if (cudaEventCreateWithFlags(&e, cudaEventBlockingSync) != cudaSuccess)
		abort();
	return e;
}

/* The spin kernel's first use compiles it: not inside what is timed. */
static int spin_ready(cudaStream_t st)
{
	return cuda_spin(st, 1000) || cudaStreamSynchronize(st) ? -1 : 0;
}

/* What most tests below start from: data (records, unless made already), a
 * stream with the spin kernel loaded, a loader as r says. */
struct setup {
	struct data d;
	cudaStream_t st;
	wharf_loader *l;
};

static int setup_open(struct setup *s, const struct run *r)
{
	if (!s->d.idx && data_records(&s->d))
		return -1;
	if (cudaStreamCreate(&s->st) != cudaSuccess) {
		s->st = NULL;
		return -1;
	}
	if (spin_ready(s->st))
		return -1;
	return open_loader(&s->d, r, &s->l);
}

static void setup_close(struct setup *s)
{
	wharf_loader_close(s->l);
	if (s->st)
		cudaStreamDestroy(s->st);
	data_free(&s->d);
	memset(s, 0, sizeof(*s));
}

/*
 * The copy of batch s+1 runs while the kernel on batch s runs: its start
 * event lies before the kernel's end and its end after the kernel's start.
 * With compute (40 ms) far above load, the caller's stream never waits for a
 * copy after the first batch: the copy of s+1 is done before kernel s ends,
 * and most of the copies' time is hidden (overlap_ns).  Copies long enough
 * to be seen running: 8 MiB batches on a GPU, 5 ms copies in the stand-in.
 */
static void test_overlap(void)
{
	struct setup su = {0};
	enum { STEPS = 8 };
	cudaEvent_t kbeg[STEPS], kend[STEPS];
	int nev = 0;
#ifdef WHARF_FAKE_CUDART
	fake_cuda_set_copy_delay_us(5000);
#else
	REQUIRE(data_records_sized(&su.d, 1u << 20, 24, 3) == 0, "data");
#endif
	struct run r = run_of(2, 2, 8);
	REQUIRE(setup_open(&su, &r) == 0, "open");
	wharf_loader *l = su.l;
	cudaStream_t st = su.st;
	for (; nev < STEPS; nev++) {
		kbeg[nev] = event_new();
		kend[nev] = event_new();
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
			overlapped += a > 0 && b > 0; /* ended after it began */
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
	CHECK(overlapped == STEPS - 1,
	      "copy of s+1 ran during kernel s in %d of %d steps", overlapped,
	      STEPS - 1);
	CHECK(hidden == STEPS - 1,
	      "copy of s+1 done before kernel s ended in %d of %d steps",
	      hidden, STEPS - 1);
	cudaStreamSynchronize(st);
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	CHECK(wharf_loader_cuda_stats(l, &cs) == 0, "stats");
	CHECK(cs.copies >= STEPS && cs.overlap_ns > cs.copy_ns / 2,
	      "%" PRIu64 " copies: %" PRIu64 " of %" PRIu64
	      " ns hidden behind kernels",
	      cs.copies, cs.overlap_ns, cs.copy_ns);
	printf("overlap: started %d/%d, overlapped %d/%d, hidden %d/%d; copy "
	       "%.3f ms, exposed %.3f ms, host wait %.3f ms over %d x 40 ms "
	       "kernels\n",
	       started, STEPS - 1, overlapped, STEPS - 1, hidden, STEPS - 1,
	       cs.copy_ns / 1e6, cs.exposed_ns / 1e6, cs.wait_ns / 1e6, STEPS);
out:
#ifdef WHARF_FAKE_CUDART
	fake_cuda_set_copy_delay_us(0);
#endif
	for (int i = 0; i < nev; i++) {
		cudaEventDestroy(kbeg[i]);
		cudaEventDestroy(kend[i]);
	}
	setup_close(&su);
}

/*
 * The host runs ahead of the caller's stream as far as the ring allows: four
 * steps of 500 ms kernels are enqueued before the second kernel ends (the
 * host once waited in each step for the kernel two steps back).
 */
static void test_run_ahead(void)
{
	struct setup su = {0};
	enum { STEPS = 4 };
	cudaEvent_t kend[STEPS];
	int nev = 0;
	struct run r = run_of(2, 4, 8);
	REQUIRE(setup_open(&su, &r) == 0, "open");
	wharf_loader *l = su.l;
	cudaStream_t st = su.st;
	for (; nev < STEPS; nev++)
		kend[nev] = event_new();
	/* The first batch is there before the clock starts. */
	const struct wharf_device_batch *db;
	REQUIRE(wharf_loader_next_device(l, st, &db) == 0, "next");
	for (int s = 0; s < STEPS; s++) {
		if (s > 0)
			REQUIRE(wharf_loader_next_device(l, st, &db) == 0,
				"next %d", s);
		REQUIRE(cuda_spin(st, 500000000) == 0, "spin");
		REQUIRE(cudaEventRecord(kend[s], st) == cudaSuccess, "record");
		REQUIRE(wharf_loader_release_device(l, db, st) == 0, "release");
	}
	int ended = 0;
	for (int s = 0; s < STEPS; s++)
		ended += cudaEventQuery(kend[s]) == cudaSuccess;
	CHECK(ended <= 1,
	      "%d of %d kernels had ended when the host had enqueued all: "
	      "it waited for the caller's stream",
	      ended, STEPS);
	CHECK(cudaStreamSynchronize(st) == cudaSuccess, "sync");
out:
	for (int i = 0; i < nev; i++)
		cudaEventDestroy(kend[i]);
	setup_close(&su);
}

/* Workers forked again each epoch (persistent = 0), after the ring was
 * registered, fill it as the first ones did. */
static void test_fresh_workers(void)
{
	struct data d = {0};
	REQUIRE(data_records(&d) == 0, "data");
	struct run r = run_of(2, 2, 8);
	r.fresh_workers = 1;
	check_epoch(&d, &r, "persistent 0, registered");
out:
	data_free(&d);
}

/*
 * The loader's device is its own: with another device current, each call
 * works on the loader's (a NULL stream is its default stream) and leaves the
 * caller's current; close frees on the loader's device.
 */
static void test_device_select(void)
{
	struct data d = {0};
	wharf_loader *l = NULL;
	cudaStream_t st = NULL;
	int n = 0, dev = -1;
	uint8_t *seen = NULL;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
		fx_skip_note(__func__, "one GPU: a loader on device 1 needs "
				       "two");
		return;
	}
	REQUIRE(data_records(&d) == 0, "data");
	seen = calloc(wharf_index_count(d.idx), 1);
	REQUIRE(cudaSetDevice(1) == cudaSuccess, "device 1");
	REQUIRE(cudaStreamCreate(&st) == cudaSuccess, "stream");
	struct run r = run_of(1, 2, 8);
	REQUIRE(open_loader(&d, &r, &l) == 0, "open");
	REQUIRE(cudaSetDevice(0) == cudaSuccess, "device 0");
	const struct wharf_device_batch *db;
	REQUIRE(wharf_loader_next_device(l, NULL, &db) == 0, "next");
	CHECK(cudaGetDevice(&dev) == cudaSuccess && dev == 0,
	      "device %d current after next_device", dev);
	REQUIRE(wharf_loader_release_device(l, db, NULL) == 0, "release");
	CHECK(cudaGetDevice(&dev) == cudaSuccess && dev == 0,
	      "device %d current after release_device", dev);
	/* The caller's own work on device 1 (its stream's). */
	REQUIRE(cudaSetDevice(1) == cudaSuccess, "device 1");
	long nb = epoch_verify(&d, l, &r, st, seen);
	CHECK(nb > 0, "%ld batches on device 1", nb);
	REQUIRE(cudaSetDevice(0) == cudaSuccess, "device 0");
	wharf_loader_close(l);
	l = NULL;
	CHECK(cudaGetDevice(&dev) == cudaSuccess && dev == 0,
	      "device %d current after close", dev);
out:
	wharf_loader_close(l);
	cudaSetDevice(0);
	if (st)
		cudaStreamDestroy(st);
	free(seen);
	data_free(&d);
}

/* Close while the caller's kernels still read a released batch: their
 * reads see the batch's bytes, not freed memory. */
static void test_close_pending(void)
{
	struct setup su = {0};
	char *data = NULL; /* pinned: a copy into it does not block the host */
	int32_t labels[8];
	struct run r = run_of(2, 2, 8);
	REQUIRE(setup_open(&su, &r) == 0, "open");
	cudaStream_t st = su.st;
	const struct wharf_device_batch *db;
	REQUIRE(wharf_loader_next_device(su.l, st, &db) == 0, "next");
	struct wharf_device_batch keep = *db;
	uint64_t samples[8];
	memcpy(samples, db->samples, db->count * sizeof(uint64_t));
	keep.samples = samples;
	keep.host_labels = labels;
	memcpy(labels, db->host_labels, db->count * sizeof(int32_t));
	REQUIRE(cudaMallocHost((void **)&data,
			       db->bytes + 8 * sizeof(int32_t)) == cudaSuccess,
		"cudaMallocHost");
	int32_t *dlabels = (int32_t *)(void *)(data + db->bytes);
	REQUIRE(cuda_spin(st, 300000000) == 0, "spin");
	REQUIRE(cudaMemcpyAsync(data, db->data, db->bytes,
				cudaMemcpyDeviceToHost, st) == cudaSuccess,
		"copy back");
	REQUIRE(cudaMemcpyAsync(dlabels, db->labels,
				db->count * sizeof(int32_t),
				cudaMemcpyDeviceToHost, st) == cudaSuccess,
		"copy back");
	REQUIRE(wharf_loader_release_device(su.l, db, st) == 0, "release");
	wharf_loader_close(su.l);
	su.l = NULL;
	CHECK(cudaStreamSynchronize(st) == cudaSuccess, "sync");
	CHECK(verify_batch(su.d.idx, &keep, data, NULL, dlabels) == 0,
	      "the kernel's reads after close");
out:
	cudaFreeHost(data);
	setup_close(&su);
}

/*
 * A ring of several GiB ($WHARF_GPU_RING_GIB, 4) registered as pinned memory
 * and read through: 8 slots of 16 records.
 */
static void test_big_ring(void)
{
#ifdef WHARF_FAKE_CUDART
	fx_skip_note(__func__, "needs a GPU: the stand-in pins nothing");
#else
	struct data d = {0};
	wharf_loader *l = NULL;
	cudaStream_t st = NULL;
	uint8_t *seen = NULL;
	const char *env = getenv("WHARF_GPU_RING_GIB");
	uint64_t gib = env ? strtoull(env, NULL, 10) : 4;
	uint64_t rec = (gib << 30) / 8 / 16;
	const char *shm =
	    getenv("WHARF_SHM_DIR") ? getenv("WHARF_SHM_DIR") : "/dev/shm";
	struct statvfs sv;
	if (statvfs(shm, &sv) ||
	    (uint64_t)sv.f_bavail * sv.f_frsize < (gib + 1) << 30) {
		fx_skip_note(__func__,
			     "%s holds less than %" PRIu64
			     " GiB free (set WHARF_SHM_DIR to a larger "
			     "tmpfs, or WHARF_GPU_RING_GIB lower)",
			     shm, gib + 1);
		return;
	}
	REQUIRE(data_records_sized(&d, rec, 32, 1) == 0, "data");
	seen = calloc(wharf_index_count(d.idx), 1);
	REQUIRE(cudaStreamCreate(&st) == cudaSuccess, "stream");
	struct run r = run_of(4, 2, 16);
	REQUIRE(open_loader(&d, &r, &l) == 0, "open");
	size_t size;
	(void)loader_ring_base(l, &size);
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	CHECK(wharf_loader_cuda_stats(l, &cs) == 0 && cs.registered,
	      "a ring of %zu bytes not registered", size);
	CHECK(size >= (gib << 30), "ring of %zu bytes", size);
	long nb = epoch_verify(&d, l, &r, st, seen);
	CHECK(nb == 2, "%ld batches", nb);
	printf("big ring: %.2f GiB registered, %ld batches of %.0f MiB\n",
	       size / (double)(1 << 30), nb, 16.0 * rec / (1 << 20));
out:
	wharf_loader_close(l);
	if (st)
		cudaStreamDestroy(st);
	free(seen);
	data_free(&d);
#endif
}

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
		struct run r = run_of(2, 2, 8);
		r.in_order = in_order;
		r.buffers = 3;
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
	const struct wharf_device_batch *a, *b, *c, *e;
	struct wharf_device_batch kept;
	REQUIRE(data_records(&d) == 0, "data");
	struct run r = run_of(1, 2, 8);
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
	kept = *a;
	CHECK(wharf_loader_release_device(l, a, NULL) == 0, "release a");
	CHECK(wharf_loader_release_device(l, a, NULL) == -EINVAL,
	      "release a twice");
	REQUIRE(wharf_loader_next_device(l, NULL, &c) == 0 && c->index == 2,
		"next after release");
	/* c went out in a's buffer: a late release of a, by its pointer or
	 * by a copy, must not give c's buffer back. */
	CHECK(c->buffer == kept.buffer && c->generation == kept.generation + 1,
	      "c in a's buffer, the next generation");
	CHECK(wharf_loader_release_device(l, a, NULL) == -EINVAL &&
		  strstr(wharf_last_error(), "released already"),
	      "a's pointer released again after its buffer went out");
	CHECK(wharf_loader_release_device(l, &kept, NULL) == -EINVAL,
	      "a copy of a released again");
	CHECK(wharf_loader_next_device(l, NULL, &e) == -ENOBUFS,
	      "c and b still hold both buffers");
	kept = *c;
	CHECK(wharf_loader_release_device(l, &kept, NULL) == 0,
	      "a copy of c releases it");
	CHECK(wharf_loader_release_device(l, c, NULL) == -EINVAL,
	      "c once only");
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

#ifdef WHARF_FAKE_CUDART
/* A driver too old for the runtime is an error with the runtime's words and
 * the fix; no driver at all, or no device, is "no device". */
static void test_broken_driver(void)
{
	struct data d = {0};
	wharf_loader *l = NULL;
	struct wharf_options o;
	struct wharf_cuda_options co;
	int rc;
	REQUIRE(data_records(&d) == 0, "data");
	wharf_options_init(&o);
	o.num_workers = 0;
	REQUIRE(wharf_loader_open(d.idx, &o, &l) == 0, "open");
	wharf_cuda_options_init(&co);
	fake_cuda_set_probe_error(cudaErrorInsufficientDriver);
	fake_cuda_set_driver_version(12020);
	rc = wharf_cuda_available();
	CHECK(rc == -EIO && strstr(wharf_last_error(), "insufficient") &&
		  strstr(wharf_last_error(), "supports CUDA 12.2") &&
		  strstr(wharf_last_error(), "update the driver"),
	      "a driver too old: %d", rc);
	rc = wharf_loader_cuda_enable(l, &co);
	CHECK(rc == -EIO && strstr(wharf_last_error(), "insufficient"),
	      "enable with a driver too old: %d", rc);
	fake_cuda_set_driver_version(0);
	rc = wharf_cuda_available();
	CHECK(rc == 0 && strstr(wharf_last_error(), "no NVIDIA driver"),
	      "no driver: %d", rc);
	CHECK(wharf_loader_cuda_enable(l, &co) == -ENODEV,
	      "enable without a driver");
	fake_cuda_set_probe_error(cudaErrorNoDevice);
	rc = wharf_cuda_available();
	CHECK(rc == 0 && strstr(wharf_last_error(), "no CUDA device"),
	      "no device: %d", rc);
	CHECK(wharf_loader_cuda_enable(l, &co) == -ENODEV,
	      "enable without a device");
out:
	fake_cuda_set_probe_error(cudaSuccess);
	fake_cuda_set_driver_version(CUDART_VERSION);
	/* The probe's own error, left pending as the runtime does. */
	(void)cudaGetLastError();
	wharf_loader_close(l);
	data_free(&d);
}

/* The caller's pending CUDA error is still there after an epoch, stats and
 * close, also when copies were found running (cudaErrorNotReady). */
static void test_pending_error(void)
{
	struct setup su = {0};
	uint8_t *seen = NULL;
	fake_cuda_set_copy_delay_us(2000);
	fake_cuda_set_last_error(cudaErrorInvalidConfiguration);
	struct run r = run_of(2, 2, 8);
	r.buffers = 3;
	REQUIRE(setup_open(&su, &r) == 0, "open");
	seen = calloc(wharf_index_count(su.d.idx), 1);
	long nb = epoch_verify(&su.d, su.l, &r, su.st, seen);
	CHECK(nb == (long)wharf_loader_num_batches(su.l), "%ld batches", nb);
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	CHECK(wharf_loader_cuda_stats(su.l, &cs) == 0, "stats");
	wharf_loader_close(su.l);
	su.l = NULL;
	cudaError_t e = cudaGetLastError();
	CHECK(e == cudaErrorInvalidConfiguration,
	      "the caller's pending error is %d (%s), not "
	      "cudaErrorInvalidConfiguration",
	      e, cudaGetErrorName(e));
out:
	fake_cuda_set_copy_delay_us(0);
	free(seen);
	setup_close(&su);
}
#endif

/* The tests that need a device, and what each would have checked: its
 * SKIP line says it without one. */
static const struct {
	const char *name;
	void (*fn)(void);
	const char *what;
} gpu_list[] = {
    {"test_bytes", test_bytes, "device bytes equal the files"},
    {"test_stress", test_stress, "tiny rings with random delays"},
    {"test_overlap", test_overlap, "the copy overlapping the kernel"},
    {"test_run_ahead", test_run_ahead, "the host running ahead"},
    {"test_fresh_workers", test_fresh_workers, "workers forked again"},
    {"test_device_select", test_device_select, "the loader's own device"},
    {"test_close_pending", test_close_pending, "close with kernels pending"},
    {"test_big_ring", test_big_ring, "a ring of several GiB"},
    {"test_state", test_state, "state save and restore"},
    {"test_misuse", test_misuse, "buffer misuse errors"},
};

static int gpu_tests(void)
{
	size_t n = sizeof(gpu_list) / sizeof(gpu_list[0]);
#ifdef WHARF_FAKE_CUDART
	test_broken_driver();
	test_pending_error();
	fake_cuda_set_devices(2);
#endif
	int avail = wharf_cuda_available();
	if (avail < 0) {
		CHECK(avail >= 0, "CUDA is installed but does not work");
		return 1;
	}
	/* Each test its own SKIP line, and the program passes with what it
	 * checked: an exit of 77 would have summaries show one line for all
	 * (quickstart shows a skipped program's last). */
	if (!avail) {
		char why[256];

		snprintf(why, sizeof(why), "%s", wharf_last_error());
		for (size_t i = 0; i < n; i++)
			fx_skip_note(gpu_list[i].name, "%s (%s unchecked)", why,
				     gpu_list[i].what);
		return 0;
	}
	struct cudaDeviceProp p;
	int dev = 0;
	cudaGetDevice(&dev);
	if (cudaGetDeviceProperties(&p, dev) == cudaSuccess)
		printf("device %d: %s\n", dev, p.name);
	for (size_t i = 0; i < n; i++) {
		int before = failures;
		gpu_list[i].fn();
		if (failures > before)
			printf("FAIL: %s\n", gpu_list[i].name);
	}
#ifdef WHARF_FAKE_CUDART
	CHECK(fake_cuda_misuses() == 0, "%u misuses of CUDA, the first: %s",
	      fake_cuda_misuses(), fake_cuda_first_misuse());
#endif
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
	/* A SKIP line as the tests' (see the other gpu_tests). */
	fx_skip_note("gpu_tests",
		     "built without CUDA (./configure --with-cuda "
		     "builds them; the -ENOTSUP path was checked)");
	return 0;
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
	if (wharf_cuda_available() == 0) {
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
