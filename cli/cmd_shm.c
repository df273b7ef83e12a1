/*
 * `wharf shm ls|gc`: finds files in /dev/shm that nobody uses any more.
 *
 * A file there is left behind when no live process has it open (any
 * /proc/PID/fd entry) or mapped (any /proc/PID/maps line with its inode), and,
 * when its name carries the pid of its creator (wharf-PID-..., torch_PID_...,
 * or any name whose first number is followed by - or _ and names no live
 * process), that process is gone.  wharf's own segments are unnamed while in
 * use; a named one (wharf-PID-ring-N, where O_TMPFILE is refused) exists only
 * between its creation and an immediate unlink, so one found here is a
 * leftover of a process killed in between.  ls lists leftovers of any kind;
 * gc removes only wharf's.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cmd.h"
#include "units.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: wharf shm ls [--all] [--dir DIR]\n"
	    "       wharf shm gc [--dry-run] [--dir DIR]\n\n"
	    "Finds shared-memory files left behind by dead processes.\n"
	    "A file is left behind when no process has it open or mapped\n"
	    "and the process named in it (wharf-PID-..., torch_PID_...) is\n"
	    "gone.\n\n"
	    "  ls             list leftovers of any program: name, bytes, "
	    "pid\n"
	    "  gc             remove wharf's own leftovers (wharf-*)\n"
	    "  --all          ls: list every file, with in-use/leftover\n"
	    "  --dry-run      gc: say what would be removed\n"
	    "  --dir DIR      the directory (default: $WHARF_SHM_DIR or "
	    "/dev/shm)\n"
	    "  -h, --help     show this help\n");
}

/* Inodes on one device that some process holds, as a sorted array. */
struct held {
	ino_t *ino;
	size_t n, cap;
};

static void held_add(struct held *h, ino_t ino)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 256;
		h->ino = realloc(h->ino, h->cap * sizeof(*h->ino));
		if (!h->ino)
			abort();
	}
	h->ino[h->n++] = ino;
}

static int cmp_ino(const void *a, const void *b)
{
	ino_t x = *(const ino_t *)a, y = *(const ino_t *)b;
	return x < y ? -1 : x > y;
}

static bool held_has(const struct held *h, ino_t ino)
{
	return bsearch(&ino, h->ino, h->n, sizeof(ino), cmp_ino) != NULL;
}

/* Every process's open files and mappings on device dev. */
static void scan_proc(dev_t dev, struct held *h)
{
	DIR *pd = opendir("/proc");
	struct dirent *pe;
	if (!pd)
		return;
	while ((pe = readdir(pd))) {
		if (!isdigit((unsigned char)pe->d_name[0]))
			continue;
		char p[300];
		snprintf(p, sizeof(p), "/proc/%s/fd", pe->d_name);
		DIR *fd = opendir(p);
		if (fd) {
			struct dirent *fe;
			while ((fe = readdir(fd))) {
				char q[600];
				struct stat st;
				if (fe->d_name[0] == '.')
					continue;
				snprintf(q, sizeof(q), "%s/%s", p, fe->d_name);
				if (!stat(q, &st) && st.st_dev == dev)
					held_add(h, st.st_ino);
			}
			closedir(fd);
		}
		snprintf(p, sizeof(p), "/proc/%s/maps", pe->d_name);
		FILE *m = fopen(p, "re");
		if (!m)
			continue;
		char line[4096];
		while (fgets(line, sizeof(line), m)) {
			unsigned maj, min;
			unsigned long long ino;
			if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min,
				   &ino) == 3 &&
			    ino && makedev(maj, min) == dev)
				held_add(h, (ino_t)ino);
		}
		fclose(m);
	}
	closedir(pd);
	qsort(h->ino, h->n, sizeof(*h->ino), cmp_ino);
}

/* The pid a name carries: the first run of digits followed by - or _ (or
 * the end), after a prefix like "wharf-" or "torch_"; 0 when none. */
static long name_pid(const char *name)
{
	const char *p = name;
	while (*p && !isdigit((unsigned char)*p))
		p++;
	if (p == name || (p[-1] != '-' && p[-1] != '_'))
		return 0;
	char *end;
	long v = strtol(p, &end, 10);
	if (*end && *end != '-' && *end != '_')
		return 0;
	return v > 0 && v < (1L << 22) ? v : 0;
}

static bool pid_alive(long pid)
{
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

int cmd_shm(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"all", no_argument, NULL, 'a'},
	    {"dry-run", no_argument, NULL, 'n'},
	    {"dir", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	bool all = false, dry = false;
	const char *dir = getenv("WHARF_SHM_DIR");
	if (!dir || !*dir)
		dir = "/dev/shm";
	if (argc < 2)
		return cmd_usage_error("shm", "missing command (ls or gc)");
	const char *sub = argv[1];
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
		usage(stdout);
		return 0;
	}
	bool gc = !strcmp(sub, "gc");
	if (!gc && strcmp(sub, "ls"))
		return cmd_usage_error("shm", "unknown command '%s'", sub);
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'a':
			all = true;
			break;
		case 'n':
			dry = true;
			break;
		case 'd':
			dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cmd_bad_option("shm", c, argv + 1, lo);
		}
	}
	if (optind < argc - 1)
		return cmd_usage_error("shm", "unexpected argument '%s'",
				       argv[optind + 1]);
	struct stat dst;
	DIR *d = opendir(dir);
	if (!d || fstat(dirfd(d), &dst)) {
		fprintf(stderr, "wharf shm: %s: %s\n", dir, strerror(errno));
		if (d)
			closedir(d);
		return 1;
	}
	struct held h = {0};
	scan_proc(dst.st_dev, &h);
	int status = 0;
	unsigned found = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (de->d_name[0] == '.' ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		long pid = name_pid(de->d_name);
		bool used = held_has(&h, st.st_ino) || (pid && pid_alive(pid));
		bool ours = !strncmp(de->d_name, "wharf-", 6);
		char sz[32];
		format_size((uint64_t)st.st_size, sz, sizeof(sz));
		if (!gc) {
			if (used && !all)
				continue;
			char ps[24] = "-";
			if (pid)
				snprintf(ps, sizeof(ps), "%ld", pid);
			found++;
			printf("%-40s %10s  pid %-8s %s\n", de->d_name, sz, ps,
			       used ? "in use" : "left behind");
			continue;
		}
		if (used || !ours)
			continue;
		found++;
		if (dry) {
			printf("would remove %s/%s (%s)\n", dir, de->d_name,
			       sz);
		} else if (unlinkat(dirfd(d), de->d_name, 0)) {
			fprintf(stderr, "wharf shm: %s/%s: %s\n", dir,
				de->d_name, strerror(errno));
			status = 1;
		} else {
			printf("removed %s/%s (%s)\n", dir, de->d_name, sz);
		}
	}
	closedir(d);
	free(h.ino);
	if (!found && !all)
		printf(gc ? "no wharf leftovers in %s\n"
			  : "nothing left behind in %s\n",
		       dir);
	return status;
}
