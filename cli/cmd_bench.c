/*
 * `wharf bench loader INDEX`: runs libwharf over an index and reports what a
 * training loop would see: samples/s, GB/s and the stall share (the part of
 * the wall time the caller spent waiting inside wharf_loader_next).  The
 * consumer only releases each batch: the figures are the loader's ceiling.
 * --sweep tries workers 1..2 x cores and prefetch 1..4 and recommends one.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wharf/decode.h>
#include <wharf/loader.h>

#include "cmd.h"
#include "jsonw.h"
#include "units.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: wharf bench loader INDEX [OPTIONS]\n\n"
	    "Measures the libwharf loader on INDEX: samples/s, GB/s and "
	    "the stall\n"
	    "share (time the caller waited for batches / wall time).\n\n"
	    "  -b, --batch N         samples per batch (32)\n"
	    "  -w, --workers N       worker processes, 0 = in the caller "
	    "(2)\n"
	    "  -p, --prefetch N      ring slots per worker (2)\n"
	    "  --shuffle[=shards]    shuffled order (seed 0 unless "
	    "--seed); =shards:\n"
	    "                        shards in a shuffled order, samples "
	    "shuffled\n"
	    "                        within a window of open shards\n"
	    "  --shard-window N      shards open at once with "
	    "--shuffle=shards (4)\n"
	    "  --seed N              shuffle seed\n"
	    "  --epochs N            epochs to run (1; --sweep: 2); with "
	    "2 or more,\n"
	    "                        the first only warms up (workers start, "
	    "the\n"
	    "                        ring is mapped) and is not counted\n"
	    "  --max-batches N       stop each run after N batches\n"
	    "  --sample-bytes SIZE   bytes per sample when the index does "
	    "not say\n"
	    "  --slot-bytes SIZE     data bytes per ring slot\n"
	    "  --decode SPEC         decoder run in the workers "
	    "(wharf/decode.h), e.g.\n"
	    "                        'jpeg size=224'\n"
	    "  --sweep               try workers 1..2 x cores and prefetch "
	    "1..4,\n"
	    "                        recommend the fastest (within 5%%, the "
	    "fewest\n"
	    "                        workers)\n"
	    "  --json                one JSON object per run\n"
	    "  -h, --help            show this help\n\n"
	    "A progress line is shown on a terminal.\n");
}

struct bench {
	const char *path;
	const char *decode; /* decoder spec, or NULL: raw */
	struct wharf_options o;
	uint64_t epochs, max_batches;
	bool json, tty;
};

struct result {
	uint64_t samples, bytes, batches, wait_ns, wall_ns;
	double samples_s, gb_s, stall;
};

static int run_once(const struct bench *b, const wharf_index *idx,
		    struct result *r)
{
	struct wharf_options o = b->o;
	wharf_decoder *dec = NULL;
	wharf_loader *l;
	memset(r, 0, sizeof(*r));
	if ((b->decode && (wharf_decoder_new(b->decode, &dec) ||
			   wharf_decoder_apply(dec, &o))) ||
	    wharf_loader_open(idx, &o, &l)) {
		fprintf(stderr, "wharf bench: %s\n", wharf_last_error());
		wharf_decoder_free(dec);
		return 1;
	}
	uint64_t t0 = now_ns(), last = t0, nb = 0;
	uint64_t total = wharf_loader_num_batches(l) * b->epochs;
	struct wharf_stats warm = {.size = sizeof(warm)};
	if (b->max_batches && b->max_batches < total)
		total = b->max_batches;
	int rc = 0;
	for (uint64_t e = 0; e < b->epochs && nb < total && !rc; e++) {
		if (e && wharf_loader_set_epoch(l, e)) {
			rc = -1;
			break;
		}
		if (e == 1) {
			/* What the first epoch did is warm-up: not counted. */
			(void)wharf_loader_stats(l, &warm);
			t0 = now_ns();
		}
		const struct wharf_batch *bt;
		while (nb < total && (rc = wharf_loader_next(l, &bt)) == 0) {
			nb++;
			(void)wharf_loader_release(l, bt);
			uint64_t now = now_ns();
			if (b->tty && now - last > 200000000u) {
				last = now;
				fprintf(stderr,
					"\r  w=%u p=%u  batch %llu/%llu  "
					"%.0f samples/s ",
					b->o.num_workers, b->o.prefetch,
					(unsigned long long)nb,
					(unsigned long long)total,
					(double)nb * b->o.batch_size /
					    ((double)(now - t0) / 1e9));
			}
		}
		if (rc == WHARF_END)
			rc = 0;
	}
	if (b->tty)
		fprintf(stderr, "\r\033[K");
	r->wall_ns = now_ns() - t0;
	if (rc) {
		fprintf(stderr, "wharf bench: %s\n",
			wharf_loader_error(l)[0] ? wharf_loader_error(l)
						 : wharf_last_error());
		wharf_loader_close(l);
		wharf_decoder_free(dec);
		return 1;
	}
	struct wharf_stats st = {.size = sizeof(st)};
	(void)wharf_loader_stats(l, &st);
	wharf_loader_close(l);
	wharf_decoder_free(dec);
	r->samples = st.samples - warm.samples;
	r->bytes = st.bytes - warm.bytes;
	r->batches = st.batches - warm.batches;
	r->wait_ns = st.wait_ns - warm.wait_ns;
	double s = (double)r->wall_ns / 1e9;
	r->samples_s = s > 0 ? (double)r->samples / s : 0;
	r->gb_s = s > 0 ? (double)r->bytes / s / 1e9 : 0;
	r->stall = r->wall_ns ? (double)r->wait_ns / (double)r->wall_ns : 0;
	return 0;
}

static const char *order_name(const struct wharf_options *o)
{
	return o->shuffle == WHARF_SHUFFLE_SHARDS ? "shards"
	       : o->shuffle			  ? "global"
						  : "sequential";
}

static void print(const struct bench *b, const struct result *r)
{
	if (b->json) {
		struct jsonw w;

		jsonw_init(&w, stdout);
		jsonw_object(&w, NULL, JSONW_INLINE);
		jsonw_str(&w, "index", b->path);
		jsonw_u64(&w, "workers", b->o.num_workers);
		jsonw_u64(&w, "prefetch", b->o.prefetch);
		jsonw_u64(&w, "batch", b->o.batch_size);
		jsonw_bool(&w, "shuffle", b->o.shuffle);
		jsonw_str(&w, "order", order_name(&b->o));
		if (b->o.shuffle == WHARF_SHUFFLE_SHARDS)
			jsonw_u64(&w, "shard_window", b->o.shard_window);
		jsonw_u64(&w, "batches", r->batches);
		jsonw_u64(&w, "samples", r->samples);
		jsonw_u64(&w, "bytes", r->bytes);
		jsonw_double(&w, "seconds", (double)r->wall_ns / 1e9, 6);
		jsonw_double(&w, "samples_per_s", r->samples_s, 1);
		jsonw_double(&w, "gb_per_s", r->gb_s, 4);
		jsonw_double(&w, "stall_share", r->stall, 4);
		jsonw_end(&w);
		return;
	}
	printf("workers %2u  prefetch %u  batch %u: %llu samples in %.3f s, "
	       "%.0f samples/s, %.3f GB/s, stall %.1f%%\n",
	       b->o.num_workers, b->o.prefetch, b->o.batch_size,
	       (unsigned long long)r->samples, (double)r->wall_ns / 1e9,
	       r->samples_s, r->gb_s, r->stall * 100);
}

/* A decimal number of at most max, or the usage error (2) naming s. */
static int parse_num(const char *opt, const char *s, uint64_t max,
		     uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!*s || *end || errno || *s == '-' || v > max)
		return cmd_usage_error("bench", "%s: bad number '%s'", opt, s);
	*out = v;
	return 0;
}

static int parse_u32(const char *opt, const char *s, uint32_t *out)
{
	uint64_t v;

	if (parse_num(opt, s, UINT32_MAX, &v))
		return 2;
	*out = (uint32_t)v;
	return 0;
}

static int loader_bench(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"batch", required_argument, NULL, 'b'},
	    {"workers", required_argument, NULL, 'w'},
	    {"prefetch", required_argument, NULL, 'p'},
	    {"shuffle", optional_argument, NULL, 's'},
	    {"shard-window", required_argument, NULL, 'N'},
	    {"seed", required_argument, NULL, 'S'},
	    {"epochs", required_argument, NULL, 'e'},
	    {"max-batches", required_argument, NULL, 'm'},
	    {"sample-bytes", required_argument, NULL, 'B'},
	    {"slot-bytes", required_argument, NULL, 'L'},
	    {"decode", required_argument, NULL, 'D'},
	    {"sweep", no_argument, NULL, 'W'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct bench b = {.epochs = 0};
	bool sweep = false, window = false;
	uint32_t v;
	int c;
	wharf_options_init(&b.o);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:w:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (parse_u32("--batch", optarg, &b.o.batch_size))
				return 2;
			break;
		case 'w':
			if (parse_u32("--workers", optarg, &b.o.num_workers))
				return 2;
			break;
		case 'p':
			if (parse_u32("--prefetch", optarg, &b.o.prefetch))
				return 2;
			break;
		case 's':
			if (optarg && strcmp(optarg, "shards"))
				return cmd_usage_error("bench",
						       "--shuffle=%s: the one "
						       "value is 'shards' "
						       "(--shuffle alone: a "
						       "global shuffle)",
						       optarg);
			b.o.shuffle = optarg ? WHARF_SHUFFLE_SHARDS : 1;
			break;
		case 'N':
			if (parse_u32("--shard-window", optarg,
				      &b.o.shard_window))
				return 2;
			window = true;
			break;
		case 'S':
			if (parse_num("--seed", optarg, UINT64_MAX,
				      &b.o.seed))
				return 2;
			break;
		case 'e':
			if (parse_u32("--epochs", optarg, &v))
				return 2;
			b.epochs = v;
			break;
		case 'm':
			if (parse_u32("--max-batches", optarg, &v))
				return 2;
			b.max_batches = v;
			break;
		case 'B':
			if (parse_size(optarg, &b.o.sample_bytes))
				return cmd_usage_error("bench",
						       "--sample-bytes: bad "
						       "size '%s'",
						       optarg);
			break;
		case 'L':
			if (parse_size(optarg, &b.o.slot_bytes))
				return cmd_usage_error("bench",
						       "--slot-bytes: bad "
						       "size '%s'",
						       optarg);
			break;
		case 'D':
			b.decode = optarg;
			break;
		case 'W':
			sweep = true;
			break;
		case 'j':
			b.json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cmd_bad_option("bench", c, argv, lo);
		}
	}
	if (optind + 1 != argc)
		return cmd_usage_error("bench", "loader needs one INDEX");
	if (window && b.o.shuffle != WHARF_SHUFFLE_SHARDS)
		return cmd_usage_error("bench", "--shard-window is for "
						"--shuffle=shards");
	b.path = argv[optind];
	b.tty = isatty(STDERR_FILENO);
	wharf_index *idx;
	if (wharf_index_open(b.path, 0, &idx)) {
		fprintf(stderr, "wharf bench: %s\n", wharf_last_error());
		return 1;
	}
	struct result r;
	int status = 0;
	if (!b.epochs)
		b.epochs = sweep ? 2 : 1;
	if (!sweep) {
		status = run_once(&b, idx, &r);
		if (!status)
			print(&b, &r);
		wharf_index_close(idx);
		return status;
	}
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t maxw = (uint32_t)(cores > 0 ? cores * 2 : 2);
	struct setting {
		uint32_t w, p;
		double gb;
	} *best = calloc((size_t)maxw * 4, sizeof(*best));
	size_t nbest = 0;
	if (!best) {
		wharf_index_close(idx);
		fprintf(stderr, "wharf bench: out of memory\n");
		return 1;
	}
	for (uint32_t w = 1; w <= maxw && !status; w++) {
		for (uint32_t p = 1; p <= 4 && !status; p++) {
			b.o.num_workers = w;
			b.o.prefetch = p;
			status = run_once(&b, idx, &r);
			if (status)
				break;
			print(&b, &r);
			best[nbest].w = w;
			best[nbest].p = p;
			best[nbest++].gb = r.gb_s;
		}
	}
	wharf_index_close(idx);
	if (status || !nbest) {
		free(best);
		return 1;
	}
	double top = 0;
	for (size_t i = 0; i < nbest; i++)
		if (best[i].gb > top)
			top = best[i].gb;
	/* The cheapest setting within 5% of the fastest: fewer workers,
	 * then less shared memory. */
	size_t pick = 0;
	for (size_t i = 0; i < nbest; i++)
		if (best[i].gb >= top * 0.95) {
			pick = i;
			break;
		}
	if (b.json) {
		struct jsonw w;

		jsonw_init(&w, stdout);
		jsonw_object(&w, NULL, JSONW_INLINE);
		jsonw_object(&w, "recommend", JSONW_INLINE);
		jsonw_u64(&w, "workers", best[pick].w);
		jsonw_u64(&w, "prefetch", best[pick].p);
		jsonw_double(&w, "gb_per_s", best[pick].gb, 4);
		jsonw_double(&w, "best_gb_per_s", top, 4);
		jsonw_end(&w);
		jsonw_end(&w);
	} else {
		printf("recommended: --workers %u --prefetch %u (%.3f GB/s; "
		       "fastest seen %.3f GB/s)\n",
		       best[pick].w, best[pick].p, best[pick].gb, top);
	}
	free(best);
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	if (argc < 2)
		return cmd_usage_error("bench", "missing what to measure "
						"(loader)");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "loader"))
		return loader_bench(argc - 1, argv + 1);
	return cmd_usage_error("bench", "unknown benchmark '%s'", argv[1]);
}
