#ifndef WHARF_LOADER_CUDA_H
#define WHARF_LOADER_CUDA_H
/*
 * cuda.c's internal side, for tests and benchmarks: a busy-wait kernel of a
 * given duration (JIT-compiled from PTX through the runtime's library API,
 * so that no nvcc is needed to build libwharf or its tests).
 */
#include <stdint.h>

struct wharf_loader;

/* Enqueues on stream (a cudaStream_t) a one-thread kernel that spins for ns
 * nanoseconds of GPU time.  Not thread-safe on its first call.
 * @return 0, -ENOTSUP without CUDA, -EIO with the runtime's message. */
int cuda_spin(void *stream, uint64_t ns) __attribute__((warn_unused_result));

/* For tests: the events (cudaEvent_t) recorded on the copy stream before and
 * after the last copy into device buffer `buffer`.
 * @return 0, or -EINVAL (no CUDA prefetch, or no such buffer). */
int cuda_copy_events(const struct wharf_loader *l, uint32_t buffer,
		     void **start, void **done);

#endif
