/*
 * cudart: dlopen of the CUDA runtime at first use (cudart.h).
 */
#include "config.h"

#ifdef HAVE_CUDA
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDART_NO_REDIRECT
#include "cudart.h"
#include "error.h"
#include "text.h"

struct cudart cudart;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_why[768];

#define CUDART_MAJOR (CUDART_VERSION / 1000)
/* configure's, from the same header's CUDART_VERSION. */
#define CUDART_SONAME WHARF_CUDART_SONAME

/* Every entry from handle (RTLD_DEFAULT: what the process has loaded).
 * @return NULL, or the first name missing. */
static const char *resolve(void *handle)
{
#define CUDART_RESOLVE(name)                                                   \
	*(void **)&cudart.name = dlsym(handle, #name);                         \
	if (!cudart.name)                                                      \
		return #name;
	CUDART_FUNCS(CUDART_RESOLVE)
#undef CUDART_RESOLVE
	return NULL;
}

static void load(void)
{
	const char *tried[] = {CUDART_SONAME,
#ifdef WHARF_CUDA_LIBDIR
			       WHARF_CUDA_LIBDIR "/" CUDART_SONAME,
#endif
			       NULL};
	char first_err[384] = "";
	const char *missing;

	/* A runtime the process has already (PyTorch's, a test's stand-in)
	 * serves: one runtime per process, and its devices and streams are
	 * the ones the caller hands us. */
	if (!resolve(RTLD_DEFAULT))
		return;
	for (int i = 0; tried[i]; i++) {
		void *h = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			if (!first_err[0])
				snprintf(first_err, sizeof(first_err), "%s",
					 dlerror());
			continue;
		}
		missing = resolve(h);
		if (!missing)
			return;
		snprintf(load_why, sizeof(load_why),
			 "the CUDA runtime %s has no %s: libwharf needs CUDA "
			 "%d.x (the toolkit it was built with)",
			 tried[i], missing, CUDART_MAJOR);
		dlclose(h);
		load_rc = -ENOTSUP;
		return;
	}
	snprintf(load_why, sizeof(load_why),
		 "the CUDA runtime cannot be loaded (%s): install CUDA %d's "
		 "runtime (%s, e.g. the cuda-cudart-%d package) or add its "
		 "directory to LD_LIBRARY_PATH; the host loader works without "
		 "it",
		 first_err, CUDART_MAJOR, CUDART_SONAME, CUDART_MAJOR);
	load_rc = -ENOTSUP;
}

int cudart_load(void)
{
	pthread_once(&load_once, load);
	if (load_rc)
		return error_set(load_rc, strdupf("%s", load_why));
	return 0;
}
#endif /* HAVE_CUDA */
