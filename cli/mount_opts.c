/*
 * mount_opts: the settling of `wharf mount`'s options into a checked
 * mount_config (see mount_opts.h), apart from their parsing in
 * cmd_mount.c: the command parses, calls and prints; what the values must
 * be, and the paths made absolute, are decided here once.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "fileio.h"
#include "mount_opts.h"
#include "source_http.h"
#include "store.h"

void mount_opts_free(struct mount_opts *o)
{
	for (unsigned i = 0; i < o->n_owned; i++)
		free(o->owned[i]);
	free(o->owned);
	free(o->o_args);
	free(o->cache_dir);
}

char *mount_opts_own(struct mount_opts *o, char *p)
{
	char **v = p ? realloc(o->owned, (o->n_owned + 1) * sizeof(*v))
		     : NULL;

	if (!v) {
		free(p);
		return NULL;
	}
	o->owned = v;
	o->owned[o->n_owned++] = p;
	return p;
}

/*
 * A path option made absolute against the current directory, owned by o:
 * the daemon runs in "/", and the fetch engine, the credentials and an
 * offline mount going back online read these files long after the start.
 * @return 0, or 1 after a message.
 */
static int settle_path(struct mount_opts *o, const char *option,
		       const char **path)
{
	char *abs;

	if (*path && !**path) {
		fprintf(stderr, "wharf mount: %s: an empty path\n", option);
		return 1;
	}
	if (!*path || (*path)[0] == '/')
		return 0;
	abs = mount_opts_own(o, path_absolute(*path));
	if (!abs) {
		fprintf(stderr, "wharf mount: %s %s: %s\n", option, *path,
			strerror(errno));
		return 1;
	}
	*path = abs;
	return 0;
}

/* 0 when path is a regular file this process can open for reading, else
 * -1 with errno (EISDIR for a directory). */
static int check_readable_file(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc = 0;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st))
		rc = -1;
	else if (!S_ISREG(st.st_mode)) {
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		rc = -1;
	}
	close(fd);
	return rc;
}

/*
 * Settles every path of the configuration before anything uses it, so
 * that nothing after the daemon detaches resolves a user's input again.
 * A URL (a manifest on the web) is not a path.  @return 0, or 1 after a
 * message.
 */
static int settle_paths(struct mount_opts *o)
{
	struct mount_config *c = &o->cfg;
	DIR *d;

	if (!realpath(c->mountpoint, o->mountpoint)) {
		cmd_path_error("mount", c->mountpoint, errno);
		return 1;
	}
	/* A dead mount's root may still stat (attributes the kernel kept);
	 * opening it says ENOTCONN, whose fix is named here. */
	d = opendir(o->mountpoint);
	if (!d && errno == ENOTCONN) {
		cmd_path_error("mount", c->mountpoint, errno);
		return 1;
	}
	if (d)
		closedir(d);
	c->mountpoint = o->mountpoint;
	c->cache_dir = o->cache_dir;
	if (settle_path(o, "--cache-dir", &c->cache_dir) ||
	    settle_path(o, "--log-file", &c->log_file) ||
	    settle_path(o, "--metrics-file", &c->metrics_file) ||
	    settle_path(o, "--ca-file", &c->fetch.ca_file) ||
	    settle_path(o, "--token-file", &c->src.token_file))
		return 1;
	/* Else every TLS request would fail, after the mount is up.  A
	 * token file may come later: it is read at each renewal. */
	if (c->fetch.ca_file && check_readable_file(c->fetch.ca_file)) {
		fprintf(stderr, "wharf mount: --ca-file %s: %s\n",
			c->fetch.ca_file, strerror(errno));
		return 1;
	}
	if (c->src.manifest && !source_http_is_url(c->src.manifest) &&
	    settle_path(o, "--manifest", &c->src.manifest))
		return 1;
	/* A token command runs where the mount was started, as it would in
	 * the foreground: "./get-token" keeps working after the detach. */
	if (c->src.token_command) {
		c->src.token_command_dir = mount_opts_own(o, getcwd(NULL, 0));
		if (!c->src.token_command_dir) {
			fprintf(stderr, "wharf mount: --token-command: %s\n",
				strerror(errno));
			return 1;
		}
	}
	return 0;
}

int mount_opts_settle(struct mount_opts *o, int nargs)
{
	/* Retries stop within the wait, and so does a connect: an origin
	 * that does not answer costs about that long, once per request. */
	if (o->cfg.fetch.retry_budget_ms > o->cfg.origin_wait_ms)
		o->cfg.fetch.retry_budget_ms = o->cfg.origin_wait_ms;
	if (o->cfg.fetch.connect_timeout_ms > o->cfg.origin_wait_ms)
		o->cfg.fetch.connect_timeout_ms = o->cfg.origin_wait_ms;
	/* A cap that cannot hold one chunk caches nothing: "500" is
	 * 500 bytes, not 500M. */
	if (o->cfg.cache_size && o->cfg.cache_size < o->cfg.chunk_size)
		return cmd_usage_error("mount",
				       "--cache-size %llu bytes is less than "
				       "one chunk (%llu bytes), so nothing "
				       "would be cached: give a unit (e.g. "
				       "--cache-size 500M), or 0 for no cap",
				       (unsigned long long)o->cfg.cache_size,
				       (unsigned long long)o->cfg.chunk_size);
	/* Whatever the order of the options; nothing can be written. */
	o->cfg.file_mode &= ~o->umask & ~0222u;
	o->cfg.dir_mode &= ~o->umask & ~0222u;
	if (nargs != 2)
		return cmd_usage_error("mount",
				       "expected SOURCE and DIR, got "
				       "%d arguments",
				       nargs);
	if (!o->cache_dir)
		o->cache_dir = store_default_dir();
	if (!o->cache_dir)
		return cmd_usage_error(
		    "mount", "%s",
		    errno == ENOENT ? "no home directory to keep a cache "
				      "in: give --cache-dir DIR"
				    : "out of memory");
	/* The pool may grow as far as the fetch engine may go; reads a
	 * program waits for never queue behind it (only background requests
	 * wait for a host's limit). */
	if (!o->cfg.threads)
		o->cfg.threads = o->cfg.fetch.max_connections;
	return settle_paths(o);
}
