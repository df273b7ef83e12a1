/*
 * wharf prefetch: fills a mount's cache for a tree or a list of files.
 *
 * It reads every file through the mount with --jobs threads rather than
 * writing hints: a read finishes only when the chunks are cached (on disk
 * and verified), so the command knows what is done and what failed, file by
 * file, and can report progress and errors honestly; the mount's read-ahead
 * keeps each large file's chunks in flight.  Pages read are dropped from the
 * page cache as they come (POSIX_FADV_DONTNEED) so a warm-up does not push
 * out the trainer's memory.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "jsonw.h"
#include "units.h"
#include "wharf/loader.h"

#define READ_BUF (1u << 20)

struct item {
	char *path;
	uint64_t size;
};

static struct plan {
	struct item *v;
	size_t n, cap;
	uint64_t bytes;
} plan;

static struct progress {
	size_t next; /* atomic: the next item to take */
	uint64_t done_objects, done_bytes, errors; /* atomic */
} prog;

/* add_item, add_path and add_list say what went wrong themselves. */
static int add_item(const char *path, uint64_t size)
{
	if (plan.n == plan.cap) {
		size_t cap = plan.cap ? plan.cap * 2 : 1024;
		struct item *v = realloc(plan.v, cap * sizeof(*v));

		if (!v)
			goto oom;
		plan.v = v;
		plan.cap = cap;
	}
	plan.v[plan.n].path = strdup(path);
	if (!plan.v[plan.n].path)
		goto oom;
	plan.v[plan.n++].size = size;
	plan.bytes += size;
	return 0;
oom:
	fprintf(stderr, "wharf prefetch: out of memory\n");
	return -ENOMEM;
}

static int walk_cb(const char *path, const struct stat *sb, int type,
		   struct FTW *ftw)
{
	/* The mount's control directory is not data. */
	if (type == FTW_D && !strcmp(path + ftw->base, ".wharf"))
		return FTW_SKIP_SUBTREE;
	if (type == FTW_F && S_ISREG(sb->st_mode))
		return add_item(path, (uint64_t)sb->st_size) ? FTW_STOP
							     : FTW_CONTINUE;
	if (type == FTW_DNR || type == FTW_NS) {
		fprintf(stderr, "wharf prefetch: %s: cannot %s\n", path,
			type == FTW_DNR ? "list it" : "stat it");
		prog.errors++;
	}
	return FTW_CONTINUE;
}

static bool any_path; /* --any: read paths that are not on a wharf mount */

/* Reading a file that is not on a wharf mount fills no cache: refused
 * (once per device, so a long list costs one look at the mount table). */
static int on_wharf(const char *path, dev_t dev)
{
	static dev_t ok_dev;
	static bool ok;

	if (any_path || (ok && dev == ok_dev))
		return 0;
	if (cmd_wharf_mount("prefetch", path, dev, NULL,
			    ": prefetch fills a mount's cache by reading "
			    "through it; give a path under the mount, or --any "
			    "to read it anyway"))
		return -EINVAL;
	ok = true;
	ok_dev = dev;
	return 0;
}

static int add_path(const char *path)
{
	struct stat sb;

	if (stat(path, &sb)) {
		fprintf(stderr, "wharf prefetch: %s: %s\n", path,
			strerror(errno));
		prog.errors++;
		return 0;
	}
	if (on_wharf(path, sb.st_dev))
		return -EINVAL;
	if (!S_ISDIR(sb.st_mode))
		return add_item(path, (uint64_t)sb.st_size);
	if (nftw(path, walk_cb, 64, FTW_PHYS | FTW_ACTIONRETVAL) == FTW_STOP)
		return -ENOMEM;
	return 0;
}

static int add_list(const char *list)
{
	FILE *f = strcmp(list, "-") ? fopen(list, "r") : stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	if (!f) {
		fprintf(stderr, "wharf prefetch: --list %s: %s\n", list,
			strerror(errno));
		return -errno;
	}
	while (!rc && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (n && line[0] != '#')
			rc = add_path(line);
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return rc;
}

/* Reads one file to the end; 0 or -errno. */
static int read_one(const struct item *it, char *buf)
{
	int fd = open(it->path, O_RDONLY | O_CLOEXEC);
	uint64_t off = 0;
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return -errno;
	while ((n = pread(fd, buf, READ_BUF, (off_t)off)) > 0) {
		off += (uint64_t)n;
		__atomic_fetch_add(&prog.done_bytes, (uint64_t)n,
				   __ATOMIC_RELAXED);
	}
	if (n < 0)
		rc = -errno;
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return rc;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct item *)a)->path,
		      ((const struct item *)b)->path);
}

/*
 * Keeps rank's share of the plan: the files in path order, every world-th
 * from the rank-th.  Each node of a job names the same files in the same
 * order, so the shares of ranks 0 to world-1 cover the plan without
 * overlap, and N nodes warm a site cache together, each byte once.
 */
static void keep_share(uint32_t rank, uint32_t world)
{
	size_t kept = 0;

	qsort(plan.v, plan.n, sizeof(*plan.v), by_path);
	plan.bytes = 0;
	for (size_t i = 0; i < plan.n; i++) {
		if (i % world != rank) {
			free(plan.v[i].path);
			continue;
		}
		plan.bytes += plan.v[i].size;
		plan.v[kept++] = plan.v[i];
	}
	plan.n = kept;
}

static void *job(void *arg)
{
	char *buf = malloc(READ_BUF);

	(void)arg;
	if (!buf)
		return NULL;
	for (;;) {
		size_t i = __atomic_fetch_add(&prog.next, 1, __ATOMIC_RELAXED);
		int rc;

		if (i >= plan.n)
			break;
		rc = read_one(&plan.v[i], buf);
		if (rc) {
			fprintf(stderr, "%swharf prefetch: %s: %s\n",
				isatty(STDERR_FILENO) ? "\r\033[K" : "",
				plan.v[i].path, strerror(-rc));
			__atomic_fetch_add(&prog.errors, 1, __ATOMIC_RELAXED);
		}
		__atomic_fetch_add(&prog.done_objects, 1, __ATOMIC_RELAXED);
	}
	free(buf);
	return NULL;
}

static void report(bool tty, bool final, uint64_t t0)
{
	const uint64_t objs =
	    __atomic_load_n(&prog.done_objects, __ATOMIC_RELAXED);
	const uint64_t bytes =
	    __atomic_load_n(&prog.done_bytes, __ATOMIC_RELAXED);
	const double secs = (double)(now_ns() - t0) / 1e9;
	const double rate = secs > 0 ? (double)bytes / secs : 0;
	char b1[32], b2[32], b3[32], eta[32] = "-";

	if (rate > 0 && bytes < plan.bytes)
		snprintf(eta, sizeof(eta), "%.0fs",
			 (double)(plan.bytes - bytes) / rate);
	else if (bytes >= plan.bytes)
		snprintf(eta, sizeof(eta), "0s");
	format_size(bytes, b1, sizeof(b1));
	format_size(plan.bytes, b2, sizeof(b2));
	format_size((uint64_t)rate, b3, sizeof(b3));
	if (tty) {
		const int width = 30;
		int fill =
		    plan.bytes
			? (int)((double)bytes * width / (double)plan.bytes)
			: width;

		if (fill > width)
			fill = width;
		fprintf(stderr,
			"\r\033[K[%.*s%*s] %" PRIu64 "/%zu objects, %s/%s, "
			"%s/s, ETA %s%s",
			fill, "##############################", width - fill,
			"", objs, plan.n, b1, b2, b3, eta, final ? "\n" : "");
	} else {
		fprintf(stderr,
			"prefetch: %" PRIu64 "/%zu objects, %s/%s, %s/s, "
			"ETA %s\n",
			objs, plan.n, b1, b2, b3, eta);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: wharf prefetch [OPTIONS] PATH...\n"
		   "       wharf prefetch [OPTIONS] --list FILE\n"
		   "\n"
		   "Fills the cache of a wharf mount with the files under each "
		   "PATH (files\n"
		   "or directories, recursively) or named in FILE (one path a "
		   "line, '-' for\n"
		   "standard input), by reading them through the mount.\n"
		   "\n"
		   "  -j, --jobs N    files read in parallel (default 16)\n"
		   "  -l, --list FILE the files to read\n"
		   "      --rank R    read only share R of --world W: the "
		   "files in path\n"
		   "      --world W   order, every W-th from the R-th "
		   "(defaults: $RANK and\n"
		   "                  $WORLD_SIZE, else $SLURM_PROCID and "
		   "$SLURM_NTASKS,\n"
		   "                  else 0 and 1), so that the nodes of a "
		   "job warm a\n"
		   "                  site cache together, each file once\n"
		   "      --json      print a JSON summary on standard output\n"
		   "      --any       read PATHs that are not on a wharf mount "
		   "too\n"
		   "                  (refused otherwise: reading them fills "
		   "no cache)\n"
		   "  -q, --quiet     no progress\n"
		   "  -h, --help      this text\n"
		   "\n"
		   "Progress goes to standard error: a bar on a terminal "
		   "(objects, bytes,\n"
		   "rate, ETA), else a line every 5 seconds.  Exit status 1 "
		   "when a file\n"
		   "could not be read (each is named).\n");
}

int cmd_prefetch(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"jobs", required_argument, NULL, 'j'},
	    {"list", required_argument, NULL, 'l'},
	    {"rank", required_argument, NULL, 'R'},
	    {"world", required_argument, NULL, 'W'},
	    {"json", no_argument, NULL, 'J'},
	    {"any", no_argument, NULL, 'A'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	const char *list = NULL;
	unsigned long jobs = 16;
	long arg_rank = -1, arg_world = -1;
	uint32_t rank, world;
	unsigned started = 0;
	bool json = false, quiet = false, tty;
	pthread_t *th;
	uint64_t t0, last;
	double secs;
	int opt, rc = 0;
	char *end;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":j:l:qh", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			errno = 0;
			jobs = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || jobs < 1 ||
			    jobs > 1024)
				return cmd_usage_error(
				    "prefetch",
				    "--jobs: expected 1 to 1024, "
				    "got '%s'",
				    optarg);
			break;
		case 'l':
			list = optarg;
			break;
		case 'R':
		case 'W': {
			const bool is_rank = opt == 'R';
			long v;

			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end ||
			    v < (is_rank ? 0 : 1) || v > INT32_MAX)
				return cmd_usage_error(
				    "prefetch", "--%s: '%s' is not a %s",
				    is_rank ? "rank" : "world", optarg,
				    is_rank ? "rank (0, 1, ...)"
					    : "world size (1, 2, ...)");
			*(is_rank ? &arg_rank : &arg_world) = v;
			break;
		}
		case 'J':
			json = true;
			break;
		case 'A':
			any_path = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cmd_bad_option("prefetch", opt, argv, opts);
		}
	}
	if (!list && optind == argc)
		return cmd_usage_error("prefetch",
				       "expected PATH... or --list");
	if (list && optind != argc)
		return cmd_usage_error("prefetch",
				       "PATH... and --list exclude each other");
	if (wharf_rank_world((int32_t)arg_rank, (int32_t)arg_world, &rank,
			     &world))
		return cmd_usage_error("prefetch", "%s", wharf_last_error());
	if (list)
		rc = add_list(list);
	for (int i = optind; !rc && i < argc; i++)
		rc = add_path(argv[i]);
	if (rc)
		return 1;
	if (world > 1)
		keep_share(rank, world);
	th = calloc(jobs, sizeof(*th));
	if (!th)
		return 1;
	tty = isatty(STDERR_FILENO);
	t0 = last = now_ns();
	for (; started < jobs && started < plan.n; started++)
		if (pthread_create(&th[started], NULL, job, NULL))
			break;
	if (!started && plan.n) {
		fprintf(stderr, "wharf prefetch: cannot start threads\n");
		return 1;
	}
	while (__atomic_load_n(&prog.done_objects, __ATOMIC_RELAXED) < plan.n) {
		usleep(100000);
		if (!quiet && (tty || now_ns() - last >= 5000000000ull)) {
			report(tty, false, t0);
			last = now_ns();
		}
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	if (!quiet)
		report(tty, true, t0);
	secs = (double)(now_ns() - t0) / 1e9;
	if (json) {
		struct jsonw w;

		jsonw_init(&w, stdout);
		jsonw_object(&w, NULL, JSONW_INLINE);
		jsonw_u64(&w, "objects", plan.n);
		jsonw_u64(&w, "bytes", prog.done_bytes);
		jsonw_u64(&w, "errors", prog.errors);
		jsonw_double(&w, "seconds", secs, 3);
		jsonw_double(&w, "bytes_per_second",
			     secs > 0 ? (double)prog.done_bytes / secs : 0.0, 0);
		jsonw_u64(&w, "rank", rank);
		jsonw_u64(&w, "world", world);
		jsonw_end(&w);
	}
	for (size_t i = 0; i < plan.n; i++)
		free(plan.v[i].path);
	free(plan.v);
	return prog.errors ? 1 : 0;
}
