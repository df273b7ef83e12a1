/*
 * A host-only stand-in for the CUDA runtime, linked into test-cuda-host in
 * place of libcudart, so that the pipeline runs in CI where no GPU is.
 *
 * It keeps the runtime's ordering model: each stream is a thread that runs
 * its queue in order (copies, kernels that sleep, event records, waits on
 * events), so work on different streams overlaps and a read on the wrong
 * stream sees the bytes of before the copy.  "Device" memory is malloc'd.
 * Knobs (fake-cudart.h): more devices, a probe that fails as a too old
 * driver does, slow host-to-device copies, a caller's pending error; and a
 * count of misuses a GPU would punish.  $WHARF_FAKE_NO_REGISTER makes
 * cudaHostRegister fail.  cudaHostRegister advises the range
 * MADV_DONTFORK, the worst a driver may do to pinned pages.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fake-cudart.h"

#define MAXDEV 8

enum op_kind { OP_COPY, OP_RECORD, OP_WAIT, OP_KERNEL };

struct op {
	enum op_kind kind;
	void *dst;
	const void *src;
	size_t n;
	unsigned delay_us;
	cudaEvent_t ev;
	uint64_t seq;
	uint64_t ns;
	struct op *next;
};

struct CUstream_st {
	int device;
	pthread_t thread;
	struct op *head, *tail; /* head stays queued while it runs */
	bool stop;
	struct CUstream_st *next_stream;
};

struct CUevent_st {
	unsigned flags;
	int device;
	uint64_t recorded, completed; /* record number asked, reached */
	unsigned waiters;	      /* queued waits on it */
	double t;		      /* ms, when the last record ran */
};

struct alloc {
	void *p;
	size_t n;
	int device;
	struct alloc *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct CUstream_st *streams, *defaults[MAXDEV];
static struct alloc *allocs;
static int ndev = 1, driver_version = CUDART_VERSION;
static __thread int cur;
static cudaError_t probe_error, last_error;
static unsigned copy_delay_us, misuses, kernels_done;
static char first_misuse[256];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Under mu. */
static void misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void misuse(const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "fake-cudart: misuse: %s\n", msg);
	if (!misuses++)
		snprintf(first_misuse, sizeof(first_misuse), "%s", msg);
}

/* A failed call leaves its error for cudaGetLastError, as the runtime
 * does. */
static cudaError_t fail(cudaError_t e)
{
	if (e != cudaErrorNotReady)
		last_error = e;
	return e;
}

void fake_cuda_set_devices(int n)
{
	ndev = n < 1 ? 1 : n > MAXDEV ? MAXDEV : n;
}

void fake_cuda_set_probe_error(cudaError_t e)
{
	probe_error = e;
}

void fake_cuda_set_driver_version(int v)
{
	driver_version = v;
}

void fake_cuda_set_copy_delay_us(unsigned us)
{
	copy_delay_us = us;
}

void fake_cuda_set_last_error(cudaError_t e)
{
	last_error = e;
}

unsigned fake_cuda_misuses(void)
{
	pthread_mutex_lock(&mu);
	unsigned n = misuses;
	pthread_mutex_unlock(&mu);
	return n;
}

const char *fake_cuda_first_misuse(void)
{
	return first_misuse;
}

unsigned fake_cuda_kernels_done(void)
{
	pthread_mutex_lock(&mu);
	unsigned n = kernels_done;
	pthread_mutex_unlock(&mu);
	return n;
}

static void *stream_main(void *arg)
{
	struct CUstream_st *s = arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!s->head && !s->stop)
			pthread_cond_wait(&cv, &mu);
		if (!s->head)
			break;
		struct op *o = s->head;
		switch (o->kind) {
		case OP_WAIT:
			while (o->ev->completed < o->seq)
				pthread_cond_wait(&cv, &mu);
			o->ev->waiters--;
			break;
		case OP_RECORD:
			o->ev->t = now();
			if (o->seq > o->ev->completed)
				o->ev->completed = o->seq;
			break;
		case OP_COPY:
			pthread_mutex_unlock(&mu);
			if (o->delay_us)
				usleep(o->delay_us);
			memcpy(o->dst, o->src, o->n);
			pthread_mutex_lock(&mu);
			break;
		case OP_KERNEL:
			pthread_mutex_unlock(&mu);
			usleep((useconds_t)(o->ns / 1000));
			pthread_mutex_lock(&mu);
			kernels_done++;
			break;
		}
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		free(o);
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* Under mu. */
static struct CUstream_st *stream_new(int device)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	s->device = device;
	if (pthread_create(&s->thread, NULL, stream_main, s))
		abort();
	s->next_stream = streams;
	streams = s;
	return s;
}

/* The stream a call means: NULL is the current device's default stream.
 * Under mu. */
static struct CUstream_st *resolve(cudaStream_t s)
{
	if (s)
		return s;
	if (!defaults[cur])
		defaults[cur] = stream_new(cur);
	return defaults[cur];
}

/* Under mu. */
static void enqueue(struct CUstream_st *s, struct op o)
{
	struct op *p = malloc(sizeof(*p));
	if (!p)
		abort();
	*p = o;
	p->next = NULL;
	if (s->tail)
		s->tail->next = p;
	else
		s->head = p;
	s->tail = p;
	pthread_cond_broadcast(&cv);
}

static void drain(struct CUstream_st *s)
{
	while (s->head)
		pthread_cond_wait(&cv, &mu);
}

cudaError_t cudaGetDeviceCount(int *n)
{
	if (probe_error)
		return fail(probe_error);
	*n = ndev;
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
	*v = driver_version;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
	if (probe_error)
		return fail(probe_error);
	*d = cur;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	if (d < 0 || d >= ndev)
		return fail(cudaErrorInvalidDevice);
	cur = d;
	return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInsufficientDriver:
		return "CUDA driver version is insufficient for CUDA runtime "
		       "version";
	case cudaErrorNoDevice:
		return "no CUDA-capable device is detected";
	default:
		return "fake error";
	}
}

const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "cudaSuccess";
	case cudaErrorInsufficientDriver:
		return "cudaErrorInsufficientDriver";
	case cudaErrorNoDevice:
		return "cudaErrorNoDevice";
	default:
		return "cudaErrorFake";
	}
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError(void)
{
	return last_error;
}

cudaError_t cudaHostRegister(void *p, size_t n, unsigned f)
{
	(void)f;
	if (getenv("WHARF_FAKE_NO_REGISTER"))
		return fail(cudaErrorInvalidValue);
	(void)madvise(p, n, MADV_DONTFORK);
	return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p)
{
	(void)p;
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
	(void)f;
	pthread_mutex_lock(&mu);
	*s = stream_new(cur);
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	return cudaStreamCreateWithFlags(s, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	pthread_mutex_lock(&mu);
	drain(s);
	s->stop = true;
	pthread_cond_broadcast(&cv);
	for (struct CUstream_st **p = &streams; *p; p = &(*p)->next_stream)
		if (*p == s) {
			*p = s->next_stream;
			break;
		}
	pthread_mutex_unlock(&mu);
	pthread_join(s->thread, NULL);
	free(s);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	pthread_mutex_lock(&mu);
	drain(resolve(s));
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	pthread_mutex_lock(&mu);
	for (struct CUstream_st *s = streams; s; s = s->next_stream)
		drain(s);
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
	(void)f;
	pthread_mutex_lock(&mu);
	if (e->recorded) {
		e->waiters++;
		enqueue(
		    resolve(s),
		    (struct op){.kind = OP_WAIT, .ev = e, .seq = e->recorded});
	}
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

static void track(void *p, size_t n, int device)
{
	struct alloc *a = malloc(sizeof(*a));
	if (!a)
		abort();
	*a = (struct alloc){p, n, device, NULL};
	pthread_mutex_lock(&mu);
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&mu);
}

/* Forgets p; a misuse when queued work still reads or writes it, or when
 * device memory is freed with another device current. */
static cudaError_t untrack(void *p, bool device)
{
	if (!p)
		return cudaSuccess;
	pthread_mutex_lock(&mu);
	struct alloc **pa = &allocs;
	while (*pa && (*pa)->p != p)
		pa = &(*pa)->next;
	if (!*pa) {
		misuse("free of %p, not allocated", p);
		pthread_mutex_unlock(&mu);
		return fail(cudaErrorInvalidValue);
	}
	struct alloc *a = *pa;
	*pa = a->next;
	const char *lo = a->p, *hi = lo + a->n;
	for (struct CUstream_st *s = streams; s; s = s->next_stream)
		for (struct op *o = s->head; o; o = o->next)
			if (o->kind == OP_COPY &&
			    (((const char *)o->dst >= lo &&
			      (const char *)o->dst < hi) ||
			     ((const char *)o->src >= lo &&
			      (const char *)o->src < hi)))
				misuse("%zu bytes freed while a queued copy "
				       "uses them",
				       a->n);
	if (device && a->device != cur)
		misuse("cudaFree of device %d memory with device %d current",
		       a->device, cur);
	pthread_mutex_unlock(&mu);
	free(a);
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = malloc(n);
	if (!*p)
		return fail(cudaErrorMemoryAllocation);
	track(*p, n, cur);
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	cudaError_t e = untrack(p, true);
	if (!e)
		free(p);
	return e;
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
	*p = malloc(n);
	if (!*p)
		return fail(cudaErrorMemoryAllocation);
	track(*p, n, -1);
	return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
	cudaError_t e = untrack(p, false);
	if (!e)
		free(p);
	return e;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f)
{
	*e = calloc(1, sizeof(**e));
	if (!*e)
		return fail(cudaErrorMemoryAllocation);
	(*e)->flags = f;
	(*e)->device = cur;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	pthread_mutex_lock(&mu);
	while (e->completed < e->recorded || e->waiters)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	free(e);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	pthread_mutex_lock(&mu);
	struct CUstream_st *st = resolve(s);
	if (st->device != e->device) {
		misuse("event of device %d recorded on a stream of device %d",
		       e->device, st->device);
		pthread_mutex_unlock(&mu);
		return fail(cudaErrorInvalidResourceHandle);
	}
	enqueue(st,
		(struct op){.kind = OP_RECORD, .ev = e, .seq = ++e->recorded});
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
	pthread_mutex_lock(&mu);
	bool done = e->completed >= e->recorded;
	pthread_mutex_unlock(&mu);
	return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	pthread_mutex_lock(&mu);
	if (!(e->flags & cudaEventBlockingSync) && e->completed < e->recorded)
		misuse("the host waits on an event without "
		       "cudaEventBlockingSync (it spins a core)");
	while (e->completed < e->recorded)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	cudaError_t rc = cudaSuccess;
	pthread_mutex_lock(&mu);
	if ((a->flags | b->flags) & cudaEventDisableTiming) {
		misuse("timing an event made with cudaEventDisableTiming");
		rc = cudaErrorInvalidResourceHandle;
	} else if (!a->recorded || !b->recorded) {
		rc = cudaErrorInvalidResourceHandle;
	} else if (a->completed < a->recorded || b->completed < b->recorded) {
		rc = cudaErrorNotReady;
	} else {
		*ms = (float)(b->t - a->t);
	}
	pthread_mutex_unlock(&mu);
	return rc ? fail(rc) : cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n,
			    enum cudaMemcpyKind k, cudaStream_t st)
{
	pthread_mutex_lock(&mu);
	enqueue(resolve(st), (struct op){.kind = OP_COPY,
					 .dst = d,
					 .src = s,
					 .n = n,
					 .delay_us = k == cudaMemcpyHostToDevice
							 ? copy_delay_us
							 : 0});
	pthread_mutex_unlock(&mu);
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

/* The spin kernel: its stream sleeps for its nanoseconds. */
cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t sm,
			     cudaStream_t s)
{
	(void)f;
	(void)g;
	(void)b;
	(void)sm;
	pthread_mutex_lock(&mu);
	struct CUstream_st *st = resolve(s);
	if (st->device != cur)
		misuse("kernel launched on a stream of device %d with device "
		       "%d current",
		       st->device, cur);
	enqueue(st, (struct op){.kind = OP_KERNEL, .ns = *(uint64_t *)a[0]});
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	(void)d;
	memset(p, 0, sizeof(*p));
	strcpy(p->name, "fake");
	return cudaSuccess;
}
