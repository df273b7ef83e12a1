/*
 * cuda-bench: the CUDA prefetch on a real GPU.
 *
 *   cuda-bench h2d FILE...      H2D GB/s out of the registered ring versus
 *                               cudaMemcpyAsync from a cudaMallocHost buffer
 *                               alone (the peak)
 *   cuda-bench loop FILE...     end-to-end: one epoch, a spin kernel of
 *                               --compute-us per batch; steps/s, stall
 *                               share, the copies' share hidden behind
 *                               kernels (overlap)
 *
 * Exits 77 (SKIP) without a device, 1 when CUDA is there but broken.
 *
 * FILEs are cut into --record-byte samples (602,112 by default: one
 * 3x224x224 fp32 image), --batch per batch.
 * Results are printed one per line as "key value" for tests/gpu/run.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <wharf/cuda.h>
#include <wharf/loader.h>

#include "cuda.h"
#include "loader_i.h"

static uint64_t record = 602112, compute_us = 10000;
static uint32_t batch = 32, workers = 8, prefetch = 2, buffers = 2;
static uint32_t reps = 40, flags;
static const char *index_path = "/tmp/wharf-cuda-bench.index";

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "cuda-bench: %s: %s (%d)\n", what, wharf_last_error(),
		rc);
	exit(1);
}

static void cu(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "cuda-bench: %s: %s\n", what,
			cudaGetErrorString(e));
		exit(1);
	}
}

static wharf_loader *open_loader(wharf_index **idx, char **files, int n)
{
	struct wharf_options o;
	struct wharf_cuda_options co;
	wharf_loader *l;
	int rc;
	if ((rc = wharf_index_build_records(record, (const char *const *)files,
					    (size_t)n, index_path)))
		die("index build", rc);
	if ((rc = wharf_index_open(index_path, 0, idx)))
		die("index open", rc);
	wharf_options_init(&o);
	o.batch_size = batch;
	o.num_workers = workers;
	o.prefetch = prefetch;
	o.shuffle = 1;
	o.rank = 0;
	o.world = 1;
	if ((rc = wharf_loader_open(*idx, &o, &l)))
		die("loader open", rc);
	wharf_cuda_options_init(&co);
	co.buffers = buffers;
	co.flags = flags;
	if ((rc = wharf_loader_cuda_enable(l, &co)))
		die("cuda enable", rc);
	return l;
}

/* GB/s of `reps` copies of `bytes` each, source k at src(k). */
static double h2d_rate(char *const *src, int nsrc, void *dst, size_t bytes,
		       cudaStream_t st)
{
	cudaEvent_t a, b;
	float ms = 0;
	cu(cudaEventCreate(&a), "event");
	cu(cudaEventCreate(&b), "event");
	/* Warm up: the first copies pay for mappings and clocks. */
	for (int k = 0; k < 3; k++)
		cu(cudaMemcpyAsync(dst, src[k % nsrc], bytes,
				   cudaMemcpyHostToDevice, st),
		   "copy");
	cu(cudaEventRecord(a, st), "record");
	for (uint32_t k = 0; k < reps; k++)
		cu(cudaMemcpyAsync(dst, src[k % (uint32_t)nsrc], bytes,
				   cudaMemcpyHostToDevice, st),
		   "copy");
	cu(cudaEventRecord(b, st), "record");
	cu(cudaEventSynchronize(b), "sync");
	cu(cudaEventElapsedTime(&ms, a, b), "elapsed");
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return (double)bytes * reps / (ms * 1e-3) / 1e9;
}

static int cmd_h2d(char **files, int n)
{
	wharf_index *idx;
	wharf_loader *l = open_loader(&idx, files, n);
	cudaStream_t st;
	void *dst, *peak;
	size_t bytes = (size_t)record * batch;
	char *slots[64];
	int ns = (int)(l->nslots < 64 ? l->nslots : 64);

	cu(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
	cu(cudaMalloc(&dst, bytes), "cudaMalloc");
	cu(cudaMallocHost(&peak, bytes), "cudaMallocHost");
	memset(peak, 1, bytes);
	/* Slot data areas of the ring, registered by cuda_enable. */
	for (int k = 0; k < ns; k++)
		slots[k] = ring_data(&l->ring, (uint32_t)k);
	double ring = h2d_rate(slots, ns, dst, bytes, st);
	char *p[1] = {peak};
	double pk = h2d_rate(p, 1, dst, bytes, st);
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	(void)wharf_loader_cuda_stats(l, &cs);
	printf("h2d_bytes %zu\n", bytes);
	printf("h2d_ring_registered %u\n", cs.registered);
	printf("h2d_ring_gbps %.2f\n", ring);
	printf("h2d_mallochost_gbps %.2f\n", pk);
	printf("h2d_ratio %.3f\n", ring / pk);
	cudaFree(dst);
	cudaFreeHost(peak);
	cudaStreamDestroy(st);
	wharf_loader_close(l);
	wharf_index_close(idx);
	return 0;
}

static int cmd_loop(char **files, int n)
{
	wharf_index *idx;
	wharf_loader *l = open_loader(&idx, files, n);
	cudaStream_t st;
	const struct wharf_device_batch *db;
	uint64_t t0 = 0, t_first = mono_ns(), steps = 0;
	int rc;

	cu(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
	/* Load the kernel before timing. */
	if (cuda_spin(st, 1000))
		die("spin", -EIO);
	cu(cudaStreamSynchronize(st), "sync");
	for (;;) {
		rc = wharf_loader_next_device(l, st, &db);
		if (rc == WHARF_END)
			break;
		if (rc)
			die("next_device", rc);
		if (steps == 0) {
			/* Time from the first batch on: worker start-up and
			 * the first read are the same for every step time. */
			t0 = mono_ns();
			t_first = t0 - t_first;
		}
		if (cuda_spin(st, compute_us * 1000))
			die("spin", -EIO);
		if ((rc = wharf_loader_release_device(l, db, st)))
			die("release", rc);
		steps++;
	}
	cu(cudaStreamSynchronize(st), "sync");
	double wall = (double)(mono_ns() - t0) / 1e9;
	double compute = (double)steps * compute_us / 1e6;
	struct wharf_cuda_stats cs = {.size = sizeof(cs)};
	(void)wharf_loader_cuda_stats(l, &cs);
	printf("loop_compute_us %" PRIu64 "\n", compute_us);
	printf("loop_steps %" PRIu64 "\n", steps);
	printf("loop_first_batch_s %.3f\n", t_first / 1e9);
	printf("loop_wall_s %.3f\n", wall);
	printf("loop_stall_share %.3f\n",
	       wall > compute ? (wall - compute) / wall : 0.0);
	printf("loop_samples_per_s %.0f\n", (double)steps * batch / wall);
	printf("loop_steps_per_s %.2f\n", (double)steps / wall);
	printf("loop_registered %u\n", cs.registered);
	printf("loop_copy_gbps %.2f\n",
	       cs.copy_ns ? (double)cs.bytes / (double)cs.copy_ns : 0.0);
	printf("loop_copy_exposed_share %.3f\n",
	       cs.copy_ns ? (double)cs.exposed_ns / (double)cs.copy_ns : 0.0);
	printf("loop_copy_overlap_share %.3f\n",
	       cs.copy_ns ? (double)cs.overlap_ns / (double)cs.copy_ns : 0.0);
	printf("loop_host_wait_s %.3f\n", cs.wait_ns / 1e9);
	cudaStreamDestroy(st);
	wharf_loader_close(l);
	wharf_index_close(idx);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cuda-bench h2d|loop [options] FILE...\n"
		"  --record BYTES      sample size (602112)\n"
		"  --batch N           samples per batch (32)\n"
		"  --workers N         loader workers (8)\n"
		"  --prefetch N        ring slots per worker (2)\n"
		"  --buffers N         device buffers (2)\n"
		"  --compute-us US     spin kernel per batch, loop (10000)\n"
		"  --reps N            copies timed, h2d (40)\n"
		"  --staging           do not register the ring\n"
		"  --index PATH        index to write (%s)\n",
		index_path);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"record", 1, NULL, 'r'},  {"batch", 1, NULL, 'b'},
	    {"workers", 1, NULL, 'w'}, {"prefetch", 1, NULL, 'p'},
	    {"buffers", 1, NULL, 'B'}, {"compute-us", 1, NULL, 'c'},
	    {"reps", 1, NULL, 'n'},    {"staging", 0, NULL, 's'},
	    {"index", 1, NULL, 'i'},   {"help", 0, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	int c;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			record = strtoull(optarg, NULL, 10);
			break;
		case 'b':
			batch = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'w':
			workers = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'p':
			prefetch = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'B':
			buffers = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'c':
			compute_us = strtoull(optarg, NULL, 10);
			break;
		case 'n':
			reps = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 's':
			flags |= WHARF_CUDA_NO_REGISTER;
			break;
		case 'i':
			index_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc || !record || !batch || !reps) {
		usage(stderr);
		return 2;
	}
	int avail = wharf_cuda_available();
	if (avail < 0) {
		fprintf(stderr, "cuda-bench: %s\n", wharf_last_error());
		return 1;
	}
	if (!avail) {
		printf("SKIP: %s\n", wharf_last_error());
		return 77;
	}
	if (!strcmp(cmd, "h2d"))
		return cmd_h2d(argv + optind, argc - optind);
	if (!strcmp(cmd, "loop"))
		return cmd_loop(argv + optind, argc - optind);
	usage(stderr);
	return 2;
}
