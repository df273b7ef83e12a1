#ifndef WHARF_LOADER_CUDART_H
#define WHARF_LOADER_CUDART_H
/*
 * cudart: the CUDA runtime, loaded with dlopen at first use, so that
 * libwharf NEEDs no CUDA library and loads on a machine without one.
 * cuda.c calls the runtime by its usual names; the macros below send each
 * call through the table cudart_load() filled.
 */
#include <cuda_runtime_api.h>

/* X(name) for every runtime function cuda.c calls. */
#define CUDART_FUNCS(X)                                                        \
	X(cudaDriverGetVersion)                                                \
	X(cudaEventCreateWithFlags)                                            \
	X(cudaEventDestroy)                                                    \
	X(cudaEventElapsedTime)                                                \
	X(cudaEventQuery)                                                      \
	X(cudaEventRecord)                                                     \
	X(cudaEventSynchronize)                                                \
	X(cudaFree)                                                            \
	X(cudaFreeHost)                                                        \
	X(cudaGetDevice)                                                       \
	X(cudaGetDeviceCount)                                                  \
	X(cudaGetErrorName)                                                    \
	X(cudaGetErrorString)                                                  \
	X(cudaGetLastError)                                                    \
	X(cudaHostRegister)                                                    \
	X(cudaHostUnregister)                                                  \
	X(cudaLaunchKernel)                                                    \
	X(cudaLibraryGetKernel)                                                \
	X(cudaLibraryLoadData)                                                 \
	X(cudaMalloc)                                                          \
	X(cudaMallocHost)                                                      \
	X(cudaMemcpyAsync)                                                     \
	X(cudaSetDevice)                                                       \
	X(cudaStreamCreateWithFlags)                                           \
	X(cudaStreamDestroy)                                                   \
	X(cudaStreamSynchronize)                                               \
	X(cudaStreamWaitEvent)

#define CUDART_FIELD(name) __typeof__(name) *name;
struct cudart {
	CUDART_FUNCS(CUDART_FIELD)
};
#undef CUDART_FIELD

extern struct cudart cudart;

/*
 * Fills the table once per process: the runtime already in the process
 * (a trainer's, or a stand-in a test preloads) if there is one, else
 * libcudart.so.MAJOR of the CUDA libwharf was built with, from the
 * linker's path and then from that toolkit's lib64.
 * @return 0, or -ENOTSUP with a message that names the library and how to
 *         get it (the same on every later call).
 */
int cudart_load(void) __attribute__((warn_unused_result));

#ifndef CUDART_NO_REDIRECT
#define cudaDriverGetVersion (*cudart.cudaDriverGetVersion)
#define cudaEventCreateWithFlags (*cudart.cudaEventCreateWithFlags)
#define cudaEventDestroy (*cudart.cudaEventDestroy)
#define cudaEventElapsedTime (*cudart.cudaEventElapsedTime)
#define cudaEventQuery (*cudart.cudaEventQuery)
#define cudaEventRecord (*cudart.cudaEventRecord)
#define cudaEventSynchronize (*cudart.cudaEventSynchronize)
#define cudaFree (*cudart.cudaFree)
#define cudaFreeHost (*cudart.cudaFreeHost)
#define cudaGetDevice (*cudart.cudaGetDevice)
#define cudaGetDeviceCount (*cudart.cudaGetDeviceCount)
#define cudaGetErrorName (*cudart.cudaGetErrorName)
#define cudaGetErrorString (*cudart.cudaGetErrorString)
#define cudaGetLastError (*cudart.cudaGetLastError)
#define cudaHostRegister (*cudart.cudaHostRegister)
#define cudaHostUnregister (*cudart.cudaHostUnregister)
#define cudaLaunchKernel (*cudart.cudaLaunchKernel)
#define cudaLibraryGetKernel (*cudart.cudaLibraryGetKernel)
#define cudaLibraryLoadData (*cudart.cudaLibraryLoadData)
#define cudaMalloc (*cudart.cudaMalloc)
#define cudaMallocHost (*cudart.cudaMallocHost)
#define cudaMemcpyAsync (*cudart.cudaMemcpyAsync)
#define cudaSetDevice (*cudart.cudaSetDevice)
#define cudaStreamCreateWithFlags (*cudart.cudaStreamCreateWithFlags)
#define cudaStreamDestroy (*cudart.cudaStreamDestroy)
#define cudaStreamSynchronize (*cudart.cudaStreamSynchronize)
#define cudaStreamWaitEvent (*cudart.cudaStreamWaitEvent)
#endif

#endif
