/* child: running a shell command as a child process with a deadline and
 * its output captured, and stopping all of them at once (see child.h). */
#include "config.h"

#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "units.h"

/* Waits for pid.  With `grace_ms`, its group gets SIGTERM, that long to
 * go, then SIGKILL, so that nothing it started (which may ignore SIGTERM)
 * outlives it. */
static void reap(pid_t pid, int grace_ms, int *status)
{
	bool gone = false;

	if (grace_ms) {
		kill(-pid, SIGTERM);
		for (int i = 0; i < grace_ms / 10 && !gone; i++) {
			gone = waitpid(pid, status, WNOHANG) == pid;
			if (!gone)
				usleep(10000);
		}
		kill(-pid, SIGKILL);
	}
	while (!gone && waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

/*
 * run_capture_stop: stopped is set, then the pipe's write end written;
 * run_capture makes the pipe, then looks at stopped (both sequentially
 * consistent): one of the two sees the other.  The pipe is never drained,
 * so its read end stays readable for every command from then on.
 */
static int stopped;
static int stop_rfd = -1, stop_wfd = -1;
static pthread_once_t stop_once = PTHREAD_ONCE_INIT;

static void stop_pipe_make(void)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK))
		return; /* a stop then waits for the command's end */
	stop_rfd = p[0];
	__atomic_store_n(&stop_wfd, p[1], __ATOMIC_SEQ_CST);
}

void run_capture_stop(void)
{
	int fd;

	__atomic_store_n(&stopped, 1, __ATOMIC_SEQ_CST);
	fd = __atomic_load_n(&stop_wfd, __ATOMIC_SEQ_CST);
	if (fd >= 0)
		(void)!write(fd, "", 1);
}

/* A command's grace between SIGTERM and SIGKILL: at a timeout, and at a
 * stop (whose whole must fit in 2 s). */
#define GRACE_TIMEOUT_MS 1000
#define GRACE_STOP_MS 200

int run_capture(const char *command, const char *dir, unsigned timeout_ms,
		char *out, size_t cap, size_t *len, int *status)
{
	const uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
	char drop[4096];
	size_t n = 0;
	int pfd[2], rc = 0;
	pid_t pid;

	*len = 0;
	*status = 0;
	if (cap == 0)
		return -EINVAL;
	out[0] = '\0';
	pthread_once(&stop_once, stop_pipe_make);
	if (__atomic_load_n(&stopped, __ATOMIC_SEQ_CST))
		return -ECANCELED;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return rc;
	}
	if (pid == 0) {
		/* Only async-signal-safe calls: the parent has threads. */
		int nul = open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(pfd[1], 1) < 0 ||
		    (dir && chdir(dir)))
			_exit(127);
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		_exit(127);
	}
	/* Also here: the group must exist before a kill can name it. */
	setpgid(pid, pid);
	close(pfd[1]);
	for (;;) {
		struct pollfd p[2] = {{.fd = pfd[0], .events = POLLIN},
				      {.fd = stop_rfd, .events = POLLIN}};
		uint64_t t = now_ns();
		char *dst = n + 1 < cap ? out + n : drop;
		size_t room = n + 1 < cap ? cap - 1 - n : sizeof(drop);
		ssize_t k;
		int r;

		if (t >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		r = poll(p, 2, (int)((deadline - t) / 1000000) + 1);
		if (r < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		if (p[1].revents) {
			rc = -ECANCELED;
			break;
		}
		if (r <= 0)
			continue;
		k = read(pfd[0], dst, room);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break; /* the end of its output */
		if (dst != drop)
			n += (size_t)k;
	}
	close(pfd[0]);
	reap(pid,
	     !rc ? 0 : rc == -ECANCELED ? GRACE_STOP_MS : GRACE_TIMEOUT_MS,
	     status);
	out[n] = '\0';
	*len = n;
	return rc;
}
