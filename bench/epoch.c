/*
 * epoch: reads epochs of a libwharf index with the loader (shuffled, forked
 * workers) and prints one JSON line per epoch: seconds, samples, bytes.
 * The benchmarks use it as "the trainer"; it does nothing with the data.
 *   epoch [--workers N] [--batch N] [--epochs N] [--seed N] INDEX
 * On a wharf mount the loader sends read-order hints unless WHARF_NO_HINTS
 * is set in the environment.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <wharf/loader.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"workers", required_argument, NULL, 'w'},
	    {"batch", required_argument, NULL, 'b'},
	    {"epochs", required_argument, NULL, 'e'},
	    {"seed", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	struct wharf_options opt;
	wharf_index *idx = NULL;
	wharf_loader *l = NULL;
	unsigned epochs = 1;
	int o;

	wharf_options_init(&opt);
	opt.num_workers = 2;
	opt.shuffle = 1;
	while ((o = getopt_long(argc, argv, "w:b:e:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'w':
			opt.num_workers = (uint32_t)atoi(optarg);
			break;
		case 'b':
			opt.batch_size = (uint32_t)atoi(optarg);
			break;
		case 'e':
			epochs = (unsigned)atoi(optarg);
			break;
		case 's':
			opt.seed = strtoull(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr,
				"usage: epoch [--workers N] [--batch N] "
				"[--epochs N] [--seed N] INDEX\n");
			return o == 'h' ? 0 : 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "epoch: expected one INDEX\n");
		return 2;
	}
	if (wharf_index_open(argv[optind], 0, &idx) ||
	    wharf_loader_open(idx, &opt, &l)) {
		fprintf(stderr, "epoch: %s\n", wharf_last_error());
		return 1;
	}
	for (unsigned e = 0; e < epochs; e++) {
		const struct wharf_batch *b;
		uint64_t samples = 0, bytes = 0;
		double t0 = now_s();
		int rc;

		if (wharf_loader_set_epoch(l, e)) {
			fprintf(stderr, "epoch: %s\n", wharf_loader_error(l));
			return 1;
		}
		while ((rc = wharf_loader_next(l, &b)) == 0) {
			samples += b->count;
			bytes += b->bytes;
			if (wharf_loader_release(l, b))
				break;
		}
		if (rc < 0) {
			fprintf(stderr, "epoch: %s\n", wharf_loader_error(l));
			return 1;
		}
		printf(
		    "{\"epoch\": %u, \"seconds\": %.3f, \"samples\": %" PRIu64
		    ", \"bytes\": %" PRIu64 "}\n",
		    e, now_s() - t0, samples, bytes);
		fflush(stdout);
	}
	wharf_loader_close(l);
	wharf_index_close(idx);
	return 0;
}
