#ifndef WHARF_TESTS_FAKE_CUDART_H
#define WHARF_TESTS_FAKE_CUDART_H
/*
 * The knobs of fake-cudart.c, the host-only stand-in for the CUDA runtime
 * that test-cuda-host links in place of libcudart.
 */
#include <cuda_runtime_api.h>

/* Devices cudaGetDeviceCount reports (1 at start). */
void fake_cuda_set_devices(int n);

/* Makes cudaGetDeviceCount (and so every probe) fail with e, as a driver
 * too old for the runtime does; cudaSuccess undoes it. */
void fake_cuda_set_probe_error(cudaError_t e);

/* What cudaDriverGetVersion says (CUDART_VERSION at start; 0: no driver
 * is installed). */
void fake_cuda_set_driver_version(int v);

/* Each host-to-device copy takes at least us microseconds on its stream. */
void fake_cuda_set_copy_delay_us(unsigned us);

/* Leaves e pending, as a caller's failed launch does: the next
 * cudaGetLastError() returns it (and clears it). */
void fake_cuda_set_last_error(cudaError_t e);

/* Uses of the runtime that a GPU would punish or that cost a core: freeing
 * memory queued work still uses, a resource used from the wrong device, a
 * host wait on an event without cudaEventBlockingSync, timing an event made
 * with cudaEventDisableTiming.  The count, and the first one's words. */
unsigned fake_cuda_misuses(void);
const char *fake_cuda_first_misuse(void);

/* Kernels (cudaLaunchKernel) that ran to their end. */
unsigned fake_cuda_kernels_done(void);

#endif
