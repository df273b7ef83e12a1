/*
 * `wharf umount DIR`: finds the wharf mount on DIR (also one whose daemon
 * died), unmounts it with fusermount3 and waits for its process to exit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "util.h"

static void umount_usage(FILE *out)
{
	fputs("Usage: wharf umount DIR\n"
	      "\n"
	      "Unmounts the wharf mount on DIR; its process then exits.\n"
	      "  -h, --help    show this help\n",
	      out);
}

/* Runs fusermount3 -u DIR.  @return its exit status, or -1. */
static int run_fusermount(const char *dir)
{
	char *const argv[] = {"fusermount3", "-u", (char *)dir, NULL};
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "wharf umount: cannot run fusermount3: %s\n",
			strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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

/* Waits (bounded) for the daemon to let go of its cache lock and exit,
 * so that a mount right after this command can take the cache dir. */
static void wait_for_daemon(pid_t pid, const char *dir)
{
	for (int waited = 0; waited < 10000; waited += 20) {
		if (process_gone(pid))
			return;
		usleep(20000);
	}
	fprintf(stderr,
		"wharf umount: %s is unmounted, but its process %d "
		"is still running\n",
		dir, (int)pid);
}

int cmd_umount(int argc, char **argv)
{
	char dir[PATH_MAX];
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
	pid = mount_pid(dir);
	if (geteuid() == 0) {
		if (umount2(dir, UMOUNT_NOFOLLOW)) {
			fprintf(stderr, "wharf umount: %s: %s\n", dir,
				strerror(errno));
			return 1;
		}
	} else if (run_fusermount(dir)) {
		return 1;
	}
	if (pid > 0)
		wait_for_daemon(pid, dir);
	return 0;
}
