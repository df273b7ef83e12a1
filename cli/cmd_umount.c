/*
 * `wharf umount DIR`: finds the wharf mount on DIR (also one whose daemon
 * died), unmounts it (umount2 as root, else fusermount3) and waits for its
 * process to exit.
 *
 * The unmount runs in a child that this command does not wait for once
 * the mount has left the mount table: the kernel frees the mount's inodes
 * in the process whose unmount lets go of it, 2-3 us each here, 11-15 s
 * after a walk of 5M files (bench/RESULTS.md, 2026-11-27), and the mount
 * is gone for every purpose (a remount on DIR, the cache lock) before
 * that ends.
 *
 * An unmount that fails while something holds a file on the mount (EBUSY)
 * is followed by the processes that do, found in /proc, so that the user
 * knows what to close.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "holders.h"
#include "mountinfo.h"

static void umount_usage(FILE *out)
{
	fputs("Usage: wharf umount DIR\n"
	      "\n"
	      "Unmounts the wharf mount on DIR; its process then exits.\n"
	      "  -h, --help    show this help\n",
	      out);
}

/* Unmounts dir in the child, its messages into err_fd and its other
 * output to /dev/null: exits 0, or non-zero after a message. */
static void unmount_child(const char *dir, int err_fd)
{
	char *const argv[] = {"fusermount3", "-u", (char *)dir, NULL};
	const int nul = open("/dev/null", O_RDWR);

	if (nul < 0 || dup2(nul, STDIN_FILENO) < 0 ||
	    dup2(nul, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)
		_exit(126);
	/* The kernel's freeing after the detach is nobody's wait. */
	(void)setpriority(PRIO_PROCESS, 0, 19);
	if (geteuid() == 0) {
		if (umount2(dir, UMOUNT_NOFOLLOW)) {
			fprintf(stderr, "wharf umount: %s: %s\n", dir,
				strerror(errno));
			_exit(1);
		}
		_exit(0);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "wharf umount: cannot run fusermount3: %s\n",
		strerror(errno));
	_exit(127);
}

/*
 * Unmounts dir (the mount of device dev) in a child, and waits until the
 * child failed or the mount left the mount table, whichever comes first.
 * The child's messages come through a pipe that is let go then: a caller
 * reading this command's output to its end must not wait for the kernel.
 * @return 0, or -1 after a message.
 */
static int unmount(const char *dir, const char *dev)
{
	char now_dev[32], type[64], buf[512];
	int status = -1, pfd[2], rc;
	pid_t pid;

	fflush(stderr);
	if (pipe2(pfd, O_CLOEXEC)) {
		fprintf(stderr, "wharf umount: %s\n", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "wharf umount: %s: %s\n", dir,
			strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0)
		unmount_child(dir, pfd[1]);
	close(pfd[1]);
	for (;;) {
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		const int found = mountinfo_find(dir, now_dev, type);
		ssize_t n;

		if (found == 0 || (found == 1 && strcmp(now_dev, dev))) {
			rc = 0; /* detached: the kernel frees it meanwhile */
			break;
		}
		if (poll(&p, 1, 10) <= 0)
			continue;
		n = read(pfd[0], buf, sizeof(buf));
		if (n > 0) {
			fwrite(buf, 1, (size_t)n, stderr);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		/* Its end: the child's status says how it went. */
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		rc = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
		break;
	}
	close(pfd[0]);
	return rc;
}

/* Processes listed before "and more processes". */
#define HOLDERS_MAX 20

/* print_holders' count of the processes it printed, and its directory. */
struct holders_print {
	const char *dir;
	unsigned found;
};

/* One process that holds files on the mount, to stderr: false once
 * HOLDERS_MAX are printed (and "and more processes"), to stop the scan. */
static bool print_holder(const struct holder *h, void *arg)
{
	struct holders_print *p = arg;

	if (!p->found)
		fprintf(stderr,
			"wharf umount: %s is busy: these processes "
			"hold files on it; close them (a wharf "
			"loader: close() it, or drop it and the "
			"index; kept batches do not hold the mount) "
			"or end the processes, then run wharf umount "
			"again\n",
			p->dir);
	if (p->found++ == HOLDERS_MAX) {
		fprintf(stderr, "  and more processes\n");
		return false;
	}
	fprintf(stderr, "  process %d (%s):\n", (int)h->pid, h->name);
	for (unsigned k = 0; k < h->n && k < HOLDER_SHOWN; k++)
		fprintf(stderr, "    %s\n", h->what[k]);
	if (h->n > HOLDER_SHOWN)
		fprintf(stderr, "    and %u more\n", h->n - HOLDER_SHOWN);
	return true;
}

/*
 * After a failed unmount of dir: the processes that hold files on it
 * (open, mapped, or as their working directory), from /proc, with what to
 * do.  Prints nothing when it finds none (the failure was another one).
 */
static void print_holders(const char *dir)
{
	struct holders_print p = {dir, 0};
	bool denied = false;

	if (holders_scan(dir, print_holder, &p, &denied))
		return;
	if (p.found && denied)
		fprintf(stderr, "  (other users' processes are not shown: run "
				"it as root to see them)\n");
}

/*
 * The absolute path of dir, resolving only its parent: the mount's own root
 * is not looked at, since a mount whose daemon died answers ENOTCONN, and
 * such a mount must still be found and unmounted.
 */
static int resolve_under_parent(const char *dir, char out[PATH_MAX])
{
	char parent[PATH_MAX], base[NAME_MAX + 1], *slash;
	size_t len = strlen(dir);

	if (len >= sizeof(parent))
		return -ENAMETOOLONG;
	memcpy(parent, dir, len + 1);
	while (len > 1 && parent[len - 1] == '/')
		parent[--len] = '\0';
	slash = strrchr(parent, '/');
	if (snprintf(base, sizeof(base), "%s", slash ? slash + 1 : parent) >=
	    (int)sizeof(base))
		return -ENAMETOOLONG;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		/* "/", "." or "..": nothing to protect, resolve it all */
		return realpath(dir, out) ? 0 : -errno;
	}
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		parent[1] = '\0';
	else
		*slash = '\0';
	if (!realpath(parent, out))
		return -errno;
	len = strlen(out);
	if (len + 1 + strlen(base) >= PATH_MAX)
		return -ENAMETOOLONG;
	snprintf(out + len, PATH_MAX - len, "%s%s",
		 out[len - 1] == '/' ? "" : "/", base);
	return 0;
}

/*
 * resolve_under_parent, following dir when it is a symlink (to the
 * mountpoint, say): readlink does not look at a mount's root, as stat would.
 */
static int resolve_mount_dir(const char *dir, char out[PATH_MAX])
{
	char path[PATH_MAX], target[PATH_MAX];
	ssize_t n;
	int rc;

	snprintf(path, sizeof(path), "%s", dir);
	for (int hops = 0;; hops++) {
		rc = resolve_under_parent(path, out);
		if (rc)
			return rc;
		n = readlink(out, target, sizeof(target) - 1);
		if (n < 0)
			return 0; /* not a symlink */
		if (hops == 40)
			return -ELOOP;
		target[n] = '\0';
		if (target[0] == '/')
			rc = snprintf(path, sizeof(path), "%s", target);
		else
			rc = snprintf(path, sizeof(path), "%.*s/%s",
				      (int)(strrchr(out, '/') - out), out,
				      target);
		if (rc >= (int)sizeof(path))
			return -ENAMETOOLONG;
	}
}

/* The pid of the process serving the mount on dir, from its stats file;
 * 0 when it cannot be read (a dead daemon's mount answers ENOTCONN). */
static pid_t mount_pid(const char *dir)
{
	char path[PATH_MAX + 16], buf[1024];
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/.wharf/stats", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strstr(buf, "\"pid\": ");
	return p ? (pid_t)atoi(p + 7) : 0;
}

/* Is pid gone (or a zombie waiting for its parent)? */
static bool process_gone(pid_t pid)
{
	char path[64], line[512], state = 0;
	const char *rp;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	/* "pid (comm) S ...": comm may hold spaces and parentheses. */
	if (fgets(line, sizeof(line), f)) {
		rp = strrchr(line, ')');
		if (rp && rp[1] == ' ')
			state = rp[2];
	}
	fclose(f);
	return state == 'Z' || state == 'X';
}

/* The CPU and block I/O wait time pid has had, in clock ticks (utime,
 * stime and delayacct_blkio_ticks of /proc/PID/stat), or 0. */
static unsigned long long process_work(pid_t pid)
{
	char path[64], line[1024];
	unsigned long long sum = 0, v;
	const char *p = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(line, sizeof(line), f))
		p = strrchr(line, ')');
	fclose(f);
	/* Fields from 3 on, after "pid (comm)": 14, 15 and 42 count. */
	for (int field = 3; p && (p = strchr(p + 1, ' ')); field++) {
		if (field != 14 && field != 15 && field != 42)
			continue;
		if (sscanf(p + 1, "%llu", &v) == 1)
			sum += v;
	}
	return sum;
}

/* How long the daemon may go without any work before it counts as stuck. */
#define DAEMON_STALL_MS 10000

/*
 * Waits for the daemon to let go of its cache lock and exit, so that a
 * mount right after this command can take the cache dir: for as long as
 * it works (saving the listing of millions of files, finishing a pack),
 * and up to DAEMON_STALL_MS of no work at all.
 */
static void wait_for_daemon(pid_t pid, const char *dir)
{
	unsigned long long work = process_work(pid);
	int idle = 0;

	while (idle < DAEMON_STALL_MS) {
		unsigned long long now;

		if (process_gone(pid))
			return;
		usleep(20000);
		now = process_work(pid);
		idle = now == work ? idle + 20 : 0;
		work = now;
	}
	fprintf(stderr,
		"wharf umount: %s is unmounted, but its process %d is still "
		"running and has done nothing for %d s (kill %d ends it)\n",
		dir, (int)pid, DAEMON_STALL_MS / 1000, (int)pid);
}

int cmd_umount(int argc, char **argv)
{
	char dir[PATH_MAX], dev[32], type[64];
	pid_t pid;
	int rc;

	if (argc == 2 &&
	    (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		umount_usage(stdout);
		return 0;
	}
	if (argc != 2)
		return cmd_usage_error("umount", "expected one DIR");
	if (argv[1][0] == '-')
		return cmd_usage_error("umount", "unknown option '%s'",
				       argv[1]);
	rc = resolve_mount_dir(argv[1], dir);
	if (rc) {
		fprintf(stderr, "wharf umount: %s: %s\n", argv[1],
			strerror(-rc));
		return 1;
	}
	if (cmd_wharf_mount("umount", dir, 0, NULL, ""))
		return 1;
	/* Its device: the unmount is over when another (or none) is there. */
	if (mountinfo_find(dir, dev, type) != 1) {
		fprintf(stderr, "wharf umount: %s: left the mount table\n", dir);
		return 1;
	}
	pid = mount_pid(dir);
	if (unmount(dir, dev)) {
		print_holders(dir);
		return 1;
	}
	if (pid > 0)
		wait_for_daemon(pid, dir);
	return 0;
}
