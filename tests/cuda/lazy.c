/*
 * test-cuda-lazy.sh's program, linked against libwharf alone: libcudart is
 * not in the process until the first CUDA call, and then that call gets
 * an answer from it (a device, or why none), not a failed load.
 */
#include <stdio.h>
#include <string.h>

#include <wharf/cuda.h>
#include <wharf/loader.h>

static int cudart_mapped(void)
{
	char line[4096];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "libcudart"))
			found = 1;
	fclose(f);
	return found;
}

/* With "missing": the runtime was hidden; the call must say so, naming
 * the library and what to install. */
int main(int argc, char **argv)
{
	int before = cudart_mapped(), avail, after;
	const int missing = argc > 1 && !strcmp(argv[1], "missing");

	avail = wharf_cuda_available();
	after = cudart_mapped();
	printf("libcudart mapped before the first call: %d, after: %d; "
	       "wharf_cuda_available: %d (%s)\n",
	       before, after, avail, wharf_last_error());
	if (missing)
		return !(before == 0 && !avail &&
			 strstr(wharf_last_error(), "libcudart.so") &&
			 strstr(wharf_last_error(), "install CUDA"));
	if (before != 0 || after != 1)
		return 1;
	/* With the runtime loaded, no device is a device question. */
	if (!avail && strstr(wharf_last_error(), "cannot be loaded"))
		return 1;
	return 0;
}
