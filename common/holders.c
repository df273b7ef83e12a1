/*
 * holders: the processes that hold files under a directory, from /proc
 * (see holders.h).  Its own file: a scan of every process's fds, maps and
 * directories is no part of the command that prints it (cli/cmd_umount.c).
 */
#include "config.h"

#include "holders.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The scan's state: the directory, and the process at hand. */
struct scan {
	const char *dir;
	size_t dir_len;
	struct holder h;
};

/* Is path (a link's target in /proc) dir or under it? */
static bool path_under(const char *path, const char *dir, size_t dir_len)
{
	return !strncmp(path, dir, dir_len) &&
	       (path[dir_len] == '\0' || path[dir_len] == '/');
}

/* One thing held: what (a label, or "" for the path alone), path. */
static void held(struct scan *s, const char *what, const char *path)
{
	struct holder *h = &s->h;

	if (h->n < HOLDER_SHOWN)
		snprintf(h->what[h->n], sizeof(h->what[0]), "%s%s", what, path);
	h->n++;
}

/* A /proc/PID link (cwd, root, fd/N) whose target lies under the dir:
 * readlink, never stat, so that no request reaches the mount. */
static void held_link(struct scan *s, const char *link, const char *what)
{
	char target[PATH_MAX];
	const ssize_t n = readlink(link, target, sizeof(target) - 1);

	if (n <= 0)
		return;
	target[n] = '\0';
	if (path_under(target, s->dir, s->dir_len))
		held(s, what, target);
}

/* The files pid maps from under the dir, each once (a file is mapped in
 * several ranges, listed in a row). */
static void held_maps(struct scan *s, pid_t pid)
{
	char path[64], line[PATH_MAX + 256], last[PATH_MAX] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *file = strchr(line, '/');

		if (!file)
			continue;
		file[strcspn(file, "\n")] = '\0';
		if (!path_under(file, s->dir, s->dir_len) ||
		    !strcmp(file, last))
			continue;
		snprintf(last, sizeof(last), "%s", file);
		held(s, "mapped ", file);
	}
	fclose(f);
}

/* What process pid holds under the dir, into s->h; false when its /proc
 * entries cannot be read (*denied set where that is for permission). */
static bool held_by(pid_t pid, struct scan *s, bool *denied)
{
	char path[64], link[PATH_MAX];
	struct dirent *e;
	DIR *fds;

	s->h.n = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	fds = opendir(path);
	if (!fds) {
		*denied |= errno == EACCES;
		return false;
	}
	snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
	held_link(s, link, "its working directory ");
	snprintf(link, sizeof(link), "/proc/%d/root", (int)pid);
	held_link(s, link, "its root directory ");
	while ((e = readdir(fds))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		held_link(s, link, "open ");
	}
	closedir(fds);
	held_maps(s, pid);
	return true;
}

/* "NAME, child of PPID" from /proc/PID/status into out (a loader's
 * workers are its children), "?" when gone. */
static void process_name(pid_t pid, char *out, size_t cap)
{
	char path[64], line[256], name[64] = "?";
	int ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Name:\t", 6))
			snprintf(name, sizeof(name), "%.*s",
				 (int)strcspn(line + 6, "\n"), line + 6);
		else if (sscanf(line, "PPid: %d", &ppid) == 1)
			break;
	}
	if (f)
		fclose(f);
	if (ppid > 1)
		snprintf(out, cap, "%s, child of %d", name, ppid);
	else
		snprintf(out, cap, "%s", name);
}

int holders_scan(const char *dir, bool (*fn)(const struct holder *h,
					     void *arg),
		 void *arg, bool *denied)
{
	struct scan *s = malloc(sizeof(*s)); /* 12 KiB: off the stack */
	struct dirent *e;
	DIR *proc;

	if (!s)
		return -ENOMEM;
	proc = opendir("/proc");
	if (!proc) {
		const int rc = -errno;

		free(s);
		return rc;
	}
	s->dir = dir;
	s->dir_len = strlen(dir);
	while ((e = readdir(proc))) {
		const pid_t pid = (pid_t)atoi(e->d_name);

		if (pid <= 0 || pid == getpid() || !held_by(pid, s, denied) ||
		    !s->h.n)
			continue;
		s->h.pid = pid;
		process_name(pid, s->h.name, sizeof(s->h.name));
		if (!fn(&s->h, arg))
			break;
	}
	closedir(proc);
	free(s);
	return 0;
}
