/*
 * A host-only stand-in for the CUDA runtime, linked into test-cuda-host in
 * place of libcudart: "device" memory is malloc'd, every copy and kernel runs
 * at once on the calling thread, events take a timestamp.  It cannot show
 * ordering on a GPU (test-cuda does that where a device exists); it runs the
 * pipeline's bookkeeping (buffers, ring slots, order, state save/restore,
 * staging fallback, stats) through the real loader in CI, where no GPU is.
 * $WHARF_FAKE_NO_REGISTER makes cudaHostRegister fail.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
struct CUevent_st {
	double t;
	int flags;
};
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return cudaSuccess;
}
cudaError_t cudaSetDevice(int d)
{
	(void)d;
	return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e)
{
	(void)e;
	return "fake error";
}
const char *cudaGetErrorName(cudaError_t e)
{
	(void)e;
	return "cudaErrorFake";
}
cudaError_t cudaGetLastError(void)
{
	return cudaSuccess;
}
cudaError_t cudaHostRegister(void *p, size_t n, unsigned f)
{
	(void)p;
	(void)n;
	(void)f;
	return getenv("WHARF_FAKE_NO_REGISTER") ? cudaErrorInvalidValue
						: cudaSuccess;
}
cudaError_t cudaHostUnregister(void *p)
{
	(void)p;
	return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
	(void)f;
	*s = (cudaStream_t)malloc(8);
	return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	return cudaStreamCreateWithFlags(s, 0);
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	free(s);
	return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
	(void)s;
	(void)e;
	(void)f;
	return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = malloc(n);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n)
{
	return cudaMalloc(p, n);
}
cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = calloc(1, sizeof(**e));
	return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f)
{
	cudaEventCreate(e);
	(*e)->flags = f;
	return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	free(e);
	return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	(void)s;
	e->t = now();
	return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = (float)(b->t - a->t);
	return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n,
			    enum cudaMemcpyKind k, cudaStream_t st)
{
	(void)k;
	(void)st;
	memcpy(d, s, n);
	return cudaSuccess;
}
cudaError_t cudaLibraryLoadData(cudaLibrary_t *l, const void *c,
				enum cudaJitOption *a, void **b, unsigned n,
				enum cudaLibraryOption *o, void **v, unsigned m)
{
	(void)c;
	(void)a;
	(void)b;
	(void)n;
	(void)o;
	(void)v;
	(void)m;
	*l = (cudaLibrary_t)1;
	return cudaSuccess;
}
cudaError_t cudaLibraryGetKernel(cudaKernel_t *k, cudaLibrary_t l,
				 const char *n)
{
	(void)l;
	(void)n;
	*k = (cudaKernel_t)1;
	return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sm,
			     cudaStream_t s)
{
	(void)f;
	(void)g;
	(void)b;
	(void)sm;
	(void)s;
	uint64_t ns = *(uint64_t *)a[0];
	double t0 = now();
	while ((now() - t0) * 1e6 < (double)ns)
		;
	return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	(void)d;
	memset(p, 0, sizeof(*p));
	strcpy(p->name, "fake");
	return cudaSuccess;
}
