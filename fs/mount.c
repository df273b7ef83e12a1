/*
 * mount: a whole mount from a settled mount_config (see mount.h): opens the
 * fetch engine, the source (or its offline stand-in), the memory cache, the
 * store, the prefetcher and the tree, then the FUSE session; serves it;
 * tears it down in reverse order.
 *
 * A mount is checked before anything is mounted: the source is opened (its
 * root listed or its manifest read) and the cache dir locked, and every
 * failure there is one line on the terminal and exit status 1.
 *
 * Daemonizing: the fetch engine and the read-ahead pool are threads, and a
 * fork keeps only the thread that forks, so the CLI forks first, before
 * any thread exists, and calls mount_serve in the child.  The child does
 * all the work and tells the parent, through a pipe, once the kernel mount
 * is in place (or that it failed, after printing why on the inherited
 * terminal); only then does it let go of the terminal.
 */
#include "config.h"

#define FUSE_USE_VERSION 312

#include "mount.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chunks.h"
#include "mountinfo.h"
#include "offline.h"
#include "passthrough.h"
#include "prefetch.h"
#include "metrics.h"
#include "stats.h"
#include "store.h"
#include "tree.h"
#include "units.h"
#include "text.h"
#include "child.h"
#include "fileio.h"
#include "log.h"
#include "runmark.h"

void mount_config_default(struct mount_config *c)
{
	memset(c, 0, sizeof(*c));
	c->cache_size = 10ull << 30;
	c->memory_cache = 512ull << 20;
	c->chunk_size = 4u << 20;
	c->passthrough = OPS_PASSTHROUGH_AUTO;
	c->zstd_level = 3;
	c->readahead = 256ull << 20;
	c->origin_wait_ms = 30000;
	c->uid = c->gid = -1;
	c->log_level = WHARF_LOG_INFO;
	c->file_mode = 0444;
	c->dir_mode = 0555;
	c->error_ttl_ms = 10000;
	c->metrics_interval_ms = 5000;
	fetch_config_default(&c->fetch);
}

/* A start-up error: one line on the terminal, as ever, and in the log
 * file (or kept for it), where an operator looks later. */
static void say_error(const char *fmt, ...) WHARF_PRINTF(1, 2);

static void say_error(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "wharf mount: %s\n", msg);
	log_file_only(WHARF_LOG_ERROR, "%s", msg);
}

/* DIR must be an empty directory.  @return 0 or -1 after a message. */
static int check_mountpoint(const char *dir)
{
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (stat(dir, &st)) {
		say_error("%s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		say_error("%s is not a directory", dir);
		return -1;
	}
	d = opendir(dir);
	if (!d) {
		say_error("%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			break;
	closedir(d);
	if (de) {
		say_error("%s is not empty (is something mounted there "
			  "already?)",
			  dir);
		return -1;
	}
	return 0;
}

/*
 * Sets the kernel's read-ahead for the mount's backing device: by default
 * FUSE gets the kernel's 128 KiB, which is small for remote data.  Best
 * effort: a failure only costs speed.
 */
static void set_kernel_readahead(const char *mountpoint, uint64_t readahead)
{
	char dev[32], type[64], path[96];
	uint64_t kb = readahead >> 10;
	FILE *f;

	if (kb < 1024)
		kb = 1024;
	if (kb > 16384)
		kb = 16384;
	if (mountinfo_find(mountpoint, dev, type) != 1)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "we");
	if (!f)
		return;
	fprintf(f, "%llu\n", (unsigned long long)kb);
	if (fclose(f))
		log_debug("%s: cannot set the kernel read-ahead", path);
}

/* What a running mount holds, torn down in reverse order. */
struct mount_state {
	const struct mount_config *o;
	char mountpoint[PATH_MAX];
	struct fetch_engine *fe;
	struct source *src;
	struct store *st;
	struct chunk_cache *cc;
	struct prefetch *pf;
	struct tree *tree;
	struct ops_ctx ctx;
	struct fuse_args args;
	struct fuse_session *se;
	bool handlers, mounted;
	pthread_t waiter; /* see mount_ready() */
	bool waiting;
	/* The waiter may stop the session only while its loop runs: a stat
	 * the waiter still has in flight fails only when the session is
	 * destroyed (its fd closed), so the join must come after that. */
	pthread_mutex_t se_mu;
	bool se_gone; /* under se_mu: the session loop has returned */
	bool failed;  /* the mount never answered */
	int ready_fd; /* the daemonizing parent's pipe, or -1 */
	int log_fd;   /* the log file once detached (or now), or -1 */
	char log_path[PATH_MAX]; /* its path, when it is the default one */
	struct metrics_writer *metrics; /* --metrics-file's, or NULL */
	bool marked;	 /* the cache dir's run mark is ours (runmark.h) */
	int hup_pipe[2]; /* SIGHUP's handler to hup_main */
	pthread_t hup_thread;
	bool hup_running;
};

/* Opens everything a mount needs, up to the FUSE session (not mounted).
 * @return 0, or -1 after one line on stderr. */
static int mount_open(struct mount_state *m)
{
	const struct mount_config *o = m->o;
	struct store_config sc = {
	    .dir = o->cache_dir,
	    .max_bytes = o->cache_size,
	    .zstd_level = o->zstd_level,
	    /* Level 0: every chunk raw, as if zstd never saved enough. */
	    .min_saving_pct = o->zstd_level ? 0 : 100,
	    .check_each_mount = o->verify_each_mount,
	    /* `umount DIR && mount DIR`: the last mount may still be
	     * writing its last chunks. */
	    .holder_exit_wait_ms = 60000,
	    .min_free = o->cache_min_free,
	    .min_free_pct = o->cache_min_free_pct,
	    .min_free_set = o->cache_min_free_set,
	};
	struct prefetch_config pc = {
	    .chunk_size = (uint32_t)o->chunk_size,
	    .readahead_bytes = o->readahead,
	    .threads = o->threads, /* read-ahead and hints */
	    /* Loaded chunks land in the memory cache: half of it may be in
	     * flight, so that read-ahead does not evict itself. */
	    .inflight_bytes = o->memory_cache / 2,
	};
	struct offline_config oc = {
	    .spec = o->spec,
	    .opt = &o->src,
	    .fetch = &o->fetch,
	    .cache_dir = o->cache_dir,
	    .forced = o->offline,
	};
	char *err = NULL, *fsname = NULL, *mopts = NULL;
	int rc;

	rc = fetch_engine_new(&o->fetch, &m->fe);
	if (rc) {
		say_error("cannot start the fetch engine: %s", strerror(-rc));
		return -1;
	}
	/* Comes up from the listing snapshot when the origin cannot be
	 * reached; the cache lock is not held yet, but only a mount writes
	 * a snapshot, and it does so once it holds the lock. */
	rc = offline_open(&oc, m->fe, &m->src, &err);
	if (rc)
		goto fail;
	/* The memory cache first: it maps chunk files, and lets them go
	 * when the store evicts them (or disk use would exceed the cap). */
	rc = chunks_new(o->memory_cache, &m->cc);
	if (rc) {
		err_set(&err, "cannot set up the mount: %s", strerror(-rc));
		goto fail;
	}
	sc.evicted = chunks_file_removed;
	sc.evicted_arg = m->cc;
	rc = store_open(&sc, &m->st, &err);
	if (rc)
		goto fail;
	rc = prefetch_new(&pc, m->src, m->st, m->cc, &m->pf);
	if (!rc)
		rc = tree_new(m->src, &m->tree);
	if (!rc)
		tree_set_error_ttl(m->tree, o->error_ttl_ms);
	if (!rc)
		rc = offline_start(m->src, m->tree, m->st);
	if (rc) {
		err_set(&err, "cannot set up the mount: %s", strerror(-rc));
		goto fail;
	}

	m->ctx = (struct ops_ctx){
	    .tree = m->tree,
	    .prefetch = m->pf,
	    .uid = o->uid >= 0 ? (uid_t)o->uid : getuid(),
	    .gid = o->gid >= 0 ? (gid_t)o->gid : getgid(),
	    .file_mode = (mode_t)o->file_mode,
	    .dir_mode = (mode_t)o->dir_mode,
	    .mounted_at = time(NULL),
	    .walk_readahead = o->readahead > 0,
	    .passthrough = o->passthrough,
	    .chunk_size = o->chunk_size,
	    .stats = {.fetch = m->fe,
		      .store = m->st,
		      .chunks = m->cc,
		      .prefetch = m->pf,
		      .tree = m->tree,
		      .source_id = m->src->id,
		      .source = m->src,
		      .mountpoint = m->mountpoint,
		      .cache_dir = o->cache_dir,
		      .started_ns = now_ns(),
		      .error_ttl_ms = o->error_ttl_ms},
	};
	/* The source as written, so that mount(8) (mount -a, findmnt
	 * SOURCE) matches it with an fstab line.  A comma in fsname would
	 * split the option string. */
	fsname = o->spec_shown ? strdupf("%s", o->spec_shown)
			       : strdupf("wharf:%s", m->src->id);
	for (char *p = fsname; *p; p++)
		if (*p == ',')
			*p = '_';
	/* "ro": the mount table says what the mount is, and the kernel
	 * refuses writes before they reach ops.c.  Hints come by ioctl. */
	mopts = strdupf("ro,default_permissions,subtype=wharf,fsname=%s,"
			"max_read=%u",
			fsname, PF_MAX_READ);
	if (fuse_opt_add_arg(&m->args, "wharf") ||
	    fuse_opt_add_arg(&m->args, "-o") ||
	    fuse_opt_add_arg(&m->args, mopts) ||
	    (o->debug && fuse_opt_add_arg(&m->args, "-d"))) {
		err_set(&err, "out of memory");
		goto fail;
	}
	for (unsigned i = 0; i < o->n_fuse_opts; i++)
		if (fuse_opt_add_arg(&m->args, "-o") ||
		    fuse_opt_add_arg(&m->args, o->fuse_opts[i])) {
			err_set(&err, "out of memory");
			goto fail;
		}
	free(fsname);
	free(mopts);
	fsname = mopts = NULL;
	m->se = ops_session_new(&m->args, &m->ctx);
	if (!m->se) {
		/* libfuse said why (a bad -o option, say). */
		err_set(&err, "cannot start a FUSE session (see above)");
		goto fail;
	}
	return 0;
fail:
	say_error("%s", err ? err : strerror(-rc));
	free(err);
	free(fsname);
	free(mopts);
	return -1;
}

/*
 * SIGINT and SIGTERM: libfuse's handler ends the session loop, and ours,
 * around it, records which signal it was (for the log), cancels the
 * fetches in flight, ends a --token-command that runs (its process
 * group), and stops the packs being made or checked.  The loop joins its
 * threads before it returns, so a read waiting on an origin that
 * trickles, or on a token command, would otherwise keep the daemon up for
 * as long as they take; and the packer copies at idle priority, which on
 * busy CPUs is slow.
 *
 * SIGHUP reopens the log file (logrotate's postrotate habit) and the
 * mount goes on: the handler only writes a byte to a pipe, and a thread
 * of ours does the reopen, which may allocate and log.
 */
static const int stop_signals[] = {SIGINT, SIGTERM};
#define N_STOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))
static struct sigaction fuse_stop_action[N_STOP_SIGNALS];
static bool stop_caught[N_STOP_SIGNALS];
static volatile sig_atomic_t stop_cancel_fd = -1;
static volatile sig_atomic_t stop_by_signal; /* the first one's number */
static struct store *stop_store;
static struct sigaction hup_before; /* libfuse's, given back at the end */
static bool hup_caught;
static volatile sig_atomic_t hup_fd = -1; /* the pipe's write end */

static void on_stop_signal(int sig)
{
	const int saved = errno;
	struct store *const st = stop_store;

	if (!stop_by_signal)
		stop_by_signal = sig;
	for (size_t i = 0; i < N_STOP_SIGNALS; i++)
		if (stop_signals[i] == sig)
			fuse_stop_action[i].sa_handler(sig);
	if (stop_cancel_fd >= 0)
		(void)!write(stop_cancel_fd, "", 1);
	run_capture_stop();
	if (st)
		store_packs_until(st, 1);
	errno = saved;
}

static void on_hup(int sig)
{
	const int saved = errno;

	(void)sig;
	if (hup_fd >= 0)
		(void)!write(hup_fd, "h", 1);
	errno = saved;
}

static const char *signal_name(int sig)
{
	return sig == SIGTERM  ? "SIGTERM"
	       : sig == SIGINT ? "SIGINT"
			       : "a signal";
}

/* The log file the mount writes, or NULL (stderr or syslog). */
static const char *log_path_of(const struct mount_state *m)
{
	if (m->log_fd < 0)
		return NULL;
	return m->o->log_file ? m->o->log_file : m->log_path;
}

/* The thread that SIGHUP wakes, until the pipe says 'q' or closes. */
static void *hup_main(void *arg)
{
	const struct mount_state *m = arg;
	const char *path = log_path_of(m);
	/* Read before the waiter starts: it lets go of ready_fd. */
	const char *const instead = m->ready_fd < 0 ? "stderr" : "syslog";

	for (;;) {
		char c, *err = NULL;
		const ssize_t n = read(m->hup_pipe[0], &c, 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || c == 'q')
			break;
		if (!path) {
			log_info("SIGHUP: no log file to reopen (the mount "
				 "logs to %s); it goes on",
				 instead);
		} else if (log_reopen(path, &err)) {
			log_error("SIGHUP: cannot reopen the log: %s; lines go "
				  "on to the file open before",
				  err);
		} else {
			log_info("SIGHUP: reopened the log file %s; the mount "
				 "goes on",
				 path);
		}
		free(err);
	}
	return NULL;
}

/* Starts the SIGHUP thread and its pipe.  @return 0 or -errno. */
static int hup_start(struct mount_state *m)
{
	int rc;

	if (pipe2(m->hup_pipe, O_CLOEXEC))
		return -errno;
	/* A handler never blocks: a full pipe already has a reopen due. */
	if (fcntl(m->hup_pipe[1], F_SETFL, O_NONBLOCK)) {
		rc = -errno;
		goto fail;
	}
	rc = -pthread_create(&m->hup_thread, NULL, hup_main, m);
	if (rc)
		goto fail;
	m->hup_running = true;
	return 0;
fail:
	close(m->hup_pipe[0]);
	close(m->hup_pipe[1]);
	m->hup_pipe[0] = m->hup_pipe[1] = -1;
	return rc;
}

/* After stop_signals_release: no handler writes to the pipe. */
static void hup_stop(struct mount_state *m)
{
	if (!m->hup_running)
		return;
	while (write(m->hup_pipe[1], "q", 1) < 0 && errno == EAGAIN)
		usleep(1000);
	pthread_join(m->hup_thread, NULL);
	close(m->hup_pipe[0]);
	close(m->hup_pipe[1]);
	m->hup_running = false;
}

/*
 * After fuse_set_signal_handlers; a stop signal it left alone (one
 * ignored from the start) stays alone.  SIGHUP is always ours: it no
 * longer stops anything.  The signals are then unblocked: a launcher may
 * have blocked them (the mask is inherited), and one sent during
 * start-up, pending until now, is taken here.
 */
static void stop_signals_catch(struct mount_state *m)
{
	struct sigaction sa = {.sa_handler = on_stop_signal};
	struct sigaction hup = {.sa_handler = on_hup, .sa_flags = SA_RESTART};
	sigset_t caught;

	/* No SA_RESTART, as libfuse: the loop's wait must end with EINTR. */
	sigemptyset(&sa.sa_mask);
	sigemptyset(&hup.sa_mask);
	sigemptyset(&caught);
	stop_cancel_fd = m->fe ? fetch_engine_cancel_fd(m->fe) : -1;
	stop_store = m->st;
	for (size_t i = 0; i < N_STOP_SIGNALS; i++) {
		struct sigaction *fa = &fuse_stop_action[i];

		stop_caught[i] =
		    !sigaction(stop_signals[i], NULL, fa) &&
		    fa->sa_handler != SIG_IGN && fa->sa_handler != SIG_DFL &&
		    !(fa->sa_flags & SA_SIGINFO) &&
		    !sigaction(stop_signals[i], &sa, NULL);
		if (stop_caught[i])
			sigaddset(&caught, stop_signals[i]);
	}
	if (m->hup_running) {
		hup_fd = m->hup_pipe[1];
		hup_caught = !sigaction(SIGHUP, &hup, &hup_before);
		if (hup_caught)
			sigaddset(&caught, SIGHUP);
	}
	pthread_sigmask(SIG_UNBLOCK, &caught, NULL);
}

/* Before fuse_remove_signal_handlers, which removes only its own. */
static void stop_signals_release(void)
{
	for (size_t i = 0; i < N_STOP_SIGNALS; i++)
		if (stop_caught[i])
			sigaction(stop_signals[i], &fuse_stop_action[i], NULL);
	if (hup_caught)
		sigaction(SIGHUP, &hup_before, NULL);
	hup_caught = false;
	hup_fd = -1;
	stop_cancel_fd = -1;
	stop_store = NULL;
}

/* How long the daemon waits for its unmounting child to detach the mount
 * (which the kernel does first, before any freeing). */
#define DETACH_WAIT_MS 2000

/*
 * Unmounts in a child process.  The kernel frees a mount's inodes and
 * dentries in the process whose unmount lets go of it, 2-3 us each
 * here: 11-15 s after a walk of 5M files (bench/RESULTS.md, 2026-11-27), all
 * in the kernel, and a stop must not wait for that.  The child keeps only
 * the session's fd (the cache lock must go with this process), and this
 * process waits only until the mount has left the mount table, so that a
 * mount right after finds the mountpoint free.  Where fork fails, it
 * unmounts itself.
 */
static void unmount_aside(struct mount_state *m)
{
	const int fd = fuse_session_fd(m->se);
	char dev[32] = "", now_dev[32], type[64];
	pid_t pid;

	/* Its device: the mountpoint may be a mount itself, under it. */
	if (mountinfo_find(m->mountpoint, dev, type) != 1)
		dev[0] = '\0';
	pid = fork();
	if (pid < 0) {
		fuse_session_unmount(m->se);
		return;
	}
	if (pid == 0) {
		/* The parent has threads: system calls and libfuse's unmount
		 * (umount2, or fusermount3 run as a child) only.  The freeing
		 * is nobody's wait: it yields to whoever wants the CPU. */
		(void)setpriority(PRIO_PROCESS, 0, 19);
		if (fd > 3)
			(void)close_range(3, (unsigned)fd - 1, 0);
		(void)close_range((unsigned)fd + 1, ~0u, 0);
		fuse_session_unmount(m->se);
		_exit(0);
	}
	for (int ms = 0; ms < DETACH_WAIT_MS; ms += 10) {
		if (waitpid(pid, NULL, WNOHANG) == pid ||
		    mountinfo_find(m->mountpoint, now_dev, type) != 1 ||
		    strcmp(now_dev, dev))
			break;
		usleep(10000);
	}
}

/* Undoes mount_open and the mount, in reverse order. */
static void mount_close(struct mount_state *m)
{
	metrics_writer_stop(m->metrics); /* it reads what follows */
	if (m->handlers) {
		stop_signals_release();
		fuse_remove_signal_handlers(m->se);
	}
	hup_stop(m);
	if (m->mounted)
		unmount_aside(m);
	pthread_mutex_lock(&m->se_mu);
	m->se_gone = true;
	pthread_mutex_unlock(&m->se_mu);
	if (m->se)
		fuse_session_destroy(m->se);
	/* After the destroy: a stat still waiting on the mount has failed. */
	if (m->waiting)
		pthread_join(m->waiter, NULL);
	pthread_mutex_destroy(&m->se_mu);
	ops_cleanup(&m->ctx);
	prefetch_free(m->pf);
	if (m->src)
		offline_stop(m->src, stop_by_signal != 0);
	tree_free(m->tree);
	/* A clean end, while the cache dir is still ours. */
	if (m->marked)
		runmark_clear(m->o->cache_dir);
	store_close(m->st); /* first: it may call into the memory cache */
	chunks_free(m->cc);
	source_close(m->src);
	if (m->fe)
		fetch_engine_free(m->fe);
	fuse_opt_free_args(&m->args);
	/* What the rate limits held back, before the last line. */
	log_limits_flush();
}

/* The warning for a file written as root in a directory others write. */
static void warn_open_dir(const char *path, const char *option)
{
	char *why = dir_open_to_others(path);

	if (why)
		log_warn("%s %s: %s: another user can replace or remove the "
			 "file; make the directory writable by its owner alone "
			 "(chmod go-w) or give it the sticky bit (chmod +t)",
			 option, path, why);
	free(why);
}

/*
 * --log-file, opened first of all, so that every start-up warning and
 * error reaches it (the terminal too, while one watches).
 * @return 0, or -1 after a line on stderr.
 */
static int log_open_asked(struct mount_state *m)
{
	char *err = NULL;

	if (!m->o->log_file)
		return 0;
	m->log_fd = log_file_open(m->o->log_file, &err);
	if (m->log_fd < 0) {
		fprintf(stderr, "wharf mount: %s (--log-file)\n",
			err ? err : strerror(-m->log_fd));
		free(err);
		return -1;
	}
	log_echo_stderr(true);
	log_to_fd(m->log_fd);
	warn_open_dir(m->o->log_file, "--log-file");
	return 0;
}

/*
 * A mount that detaches with no syslog to take its lines (most
 * containers) and no --log-file logs to the cache directory's wharf.log,
 * so that errors a reader meets leave a trace; opened once the directory
 * is ours, with the warnings said before it (log_keep_early).  A
 * foreground mount without --log-file keeps stderr.
 * @return 0, or -1 after a line on stderr.
 */
static int log_open_default(struct mount_state *m)
{
	char *err = NULL;

	if (m->o->log_file || m->ready_fd < 0 || log_syslog_present())
		return 0;
	snprintf(m->log_path, sizeof(m->log_path), "%s/wharf.log",
		 m->o->cache_dir);
	m->log_fd = log_file_open(m->log_path, &err);
	if (m->log_fd < 0) {
		fprintf(stderr, "wharf mount: %s (give --log-file FILE)\n",
			err ? err : strerror(-m->log_fd));
		free(err);
		return -1;
	}
	log_echo_stderr(true);
	log_to_fd(m->log_fd);
	return 0;
}

/* The cache dir's run mark: what an unclean end of the last mount left
 * is said and cleared, and this mount's is set. */
static void mark_run(struct mount_state *m)
{
	m->marked =
	    !runmark_take(m->o->cache_dir, m->mountpoint, m->o->metrics_file);
}

/* Starts the --metrics-file writer, if asked for.
 * @return 0, or -1 after a line on stderr. */
static int metrics_plan(struct mount_state *m)
{
	char *err = NULL;
	int rc;

	if (!m->o->metrics_file)
		return 0;
	rc = metrics_writer_start(&m->ctx.stats, m->o->metrics_file,
				  m->o->metrics_interval_ms, &m->metrics, &err);
	if (rc)
		say_error("%s (--metrics-file)", err ? err : strerror(-rc));
	free(err);
	return rc ? -1 : 0;
}

/* Lets go of the terminal: the parent has exited by the time it matters. */
static void detach(struct mount_state *m)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	log_echo_stderr(false);
	if (m->log_fd < 0)
		log_to_syslog("wharf");
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	if (chdir("/"))
		log_debug("cannot chdir to /");
	setsid();
}

/* Tells the daemonizing parent how it went (0: up, 1: failed), once. */
static void tell_parent(struct mount_state *m, char status)
{
	if (m->ready_fd < 0)
		return;
	if (write(m->ready_fd, &status, 1) != 1)
		log_warn("the waiting parent is gone");
	close(m->ready_fd);
	m->ready_fd = -1;
}

/*
 * Runs beside the FUSE loop: a stat of the mountpoint returns once the
 * kernel's INIT has been answered and a request served, so the mount is
 * up.  Only then can the kernel read-ahead be raised (INIT lowers it to
 * what was offered at mount time), and only then is the parent told.
 */
static void *mount_ready(void *arg)
{
	struct mount_state *m = arg;
	struct stat st;

	if (stat(m->mountpoint, &st)) {
		const int err = errno;
		bool ended;

		/* A session already ended (a signal during start-up) fails
		 * the stat; that is a stop, not a failure. */
		pthread_mutex_lock(&m->se_mu);
		ended = m->se_gone || fuse_session_exited(m->se);
		if (!ended)
			fuse_session_exit(m->se);
		pthread_mutex_unlock(&m->se_mu);
		if (ended) {
			log_info("%s: stopped before it was up",
				 m->mountpoint);
		} else {
			log_error("%s does not answer: %s", m->mountpoint,
				  strerror(err));
			m->failed = true;
		}
		tell_parent(m, 1);
		return NULL;
	}
	set_kernel_readahead(m->mountpoint, m->o->readahead);
	if (m->ready_fd >= 0) {
		/* Named while the terminal still shows it: a log nobody
		 * asked for must be easy to find. */
		if (m->log_path[0])
			fprintf(stderr,
				"wharf mount: logging to %s (no syslog here; "
				"--log-file FILE to choose)\n",
				m->log_path);
		tell_parent(m, 0);
		detach(m);
	}
	/* Up: from now on the log file alone, as before. */
	log_echo_stderr(false);
	log_info("mounted %s on %s (cache %s%s%s)", m->src->id, m->mountpoint,
		 m->o->cache_dir,
		 m->o->fetch.site_cache ? "; chunk reads through the site cache "
					: "",
		 m->o->fetch.site_cache ? m->o->fetch.site_cache : "");
	return NULL;
}

/* FUSE session threads, at most and kept idle. */
#define FUSE_THREADS 64

int mount_serve(const struct mount_config *o, int ready_fd)
{
	struct mount_state m = {.o = o,
				.args = FUSE_ARGS_INIT(0, NULL),
				.ready_fd = ready_fd,
				.log_fd = -1,
				.hup_pipe = {-1, -1},
				.se_mu = PTHREAD_MUTEX_INITIALIZER};
	struct fuse_loop_config *lc = NULL;
	int rc, status = 1;

	assert(o->mountpoint[0] == '/' && o->cache_dir[0] == '/');
	log_keep_early();
	if (log_open_asked(&m))
		goto out;
	if (snprintf(m.mountpoint, sizeof(m.mountpoint), "%s",
		     o->mountpoint) >= (int)sizeof(m.mountpoint)) {
		say_error("%s: %s", o->mountpoint, strerror(ENAMETOOLONG));
		goto out;
	}
	if (check_mountpoint(m.mountpoint) || mount_open(&m) ||
	    log_open_default(&m))
		goto out;
	/* Before the metrics writer: the last mount's file may be at the
	 * same path. */
	mark_run(&m);
	if (metrics_plan(&m))
		goto out;
	rc = hup_start(&m);
	if (rc) {
		say_error("cannot start a thread: %s", strerror(-rc));
		goto out;
	}
	if (fuse_set_signal_handlers(m.se)) {
		say_error("cannot set signal handlers");
		goto out;
	}
	m.handlers = true;
	stop_signals_catch(&m);
	if (fuse_session_mount(m.se, m.mountpoint)) {
		say_error("cannot mount on %s (see above)", m.mountpoint);
		goto out;
	}
	m.mounted = true;
	/* Before the loop reads INIT, where the kernel offers it.  By
	 * default only for files of many chunks, and only while they make a
	 * share of the opens (ops.h): every open is then a round trip, which
	 * made a loader's warm epochs over small files 2-3x slower than the
	 * kernel's page cache without opens (bench/RESULTS.md, 2026-11-25). */
	if (o->passthrough != OPS_PASSTHROUGH_OFF) {
		rc = passthrough_attach(m.se);
		if (rc)
			m.ctx.passthrough = OPS_PASSTHROUGH_OFF;
		if (rc && o->passthrough == OPS_PASSTHROUGH_ON)
			log_warn("--passthrough: %s",
				 rc == -EPERM ? "needs CAP_SYS_ADMIN (root): "
						"reads go through the mount"
					      : strerror(-rc));
		else if (rc)
			log_debug("passthrough: %s", strerror(-rc));
	}
	rc = store_set_mountpoint(m.st, m.mountpoint);
	if (rc)
		log_warn(
		    "%s: cannot record the mountpoint in its lock file: %s",
		    o->cache_dir, strerror(-rc));
	lc = fuse_loop_cfg_create();
	if (!lc) {
		say_error("out of memory");
		goto out;
	}
	/* A thread per channel keeps requests from queuing on one fd; the
	 * cap bounds threads blocked on origin fetches.  Idle threads are
	 * kept: with 8 kept, 8 parallel readers made the loop start and end
	 * 33 threads over 3,000 files, each with a fresh 1 MiB buffer to
	 * fault in. */
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, FUSE_THREADS);
	fuse_loop_cfg_set_idle_threads(lc, FUSE_THREADS);

	rc = pthread_create(&m.waiter, NULL, mount_ready, &m);
	if (rc) {
		say_error("cannot start a thread: %s", strerror(rc));
		goto out;
	}
	m.waiting = true;
	rc = fuse_session_loop_mt(m.se, lc);
	pthread_mutex_lock(&m.se_mu);
	m.se_gone = true;
	pthread_mutex_unlock(&m.se_mu);
	/* Unmounted (0) or stopped by a signal (its number): both clean. */
	if (rc < 0)
		log_error("the FUSE session of %s ended: %s", m.mountpoint,
			  strerror(-rc));
	else
		status = 0;
	if (stop_by_signal)
		log_info("%s: unmounting %s", signal_name(stop_by_signal),
			 m.mountpoint);
	else
		log_info("unmounting %s", m.mountpoint);
out:
	if (lc)
		fuse_loop_cfg_destroy(lc);
	mount_close(&m);
	if (m.failed)
		status = 1;
	/* A failure before the mount was up (the waiter has been joined). */
	tell_parent(&m, 1);
	return status;
}
