#ifndef WHARF_FS_MOUNT_H
#define WHARF_FS_MOUNT_H
/*
 * mount: a whole wharf mount built from a settled configuration: the
 * fetch engine, the source, the caches, the FUSE session, its signals and
 * its daemonizing.  The CLI parses and settles; nothing here resolves a
 * user's input again.
 */
#include <stdbool.h>
#include <stdint.h>

#include "fetch.h"
#include "ops.h"
#include "wharf/log.h"
#include "source.h"
#include "log.h"


/*
 * Everything a mount is made of.  Settled: every path is absolute (the
 * daemon runs in "/"), every value is checked, and the defaults are filled
 * in (mount_config_default, then the options).
 */
struct mount_config {
	const char *spec;	/* the source: "https://…", "s3://…", "gs://…" */
	/* The source as the user wrote it, its secrets starred: what the
	 * mount table shows, so that mount(8) finds an fstab line's mount
	 * (NULL: "wharf:" and the source's id). */
	const char *spec_shown;
	const char *mountpoint; /* absolute, resolved */
	const char *cache_dir;	/* absolute */
	uint64_t cache_size;
	/* --cache-min-free: a size, or a percentage of the cache's
	 * filesystem; unset: the store's default (store_config). */
	uint64_t cache_min_free;
	unsigned cache_min_free_pct;
	bool cache_min_free_set;
	uint64_t memory_cache;
	uint64_t chunk_size;
	int zstd_level;
	uint64_t readahead;
	unsigned threads; /* the read-ahead and hint pool */
	/* Paths in them (ca_file, manifest, token_file) are absolute, and
	 * src.token_command_dir is where a token command runs. */
	struct fetch_config fetch;
	struct source_options src;
	const char *fuse_opts[16]; /* -o options for the kernel, libfuse's */
	unsigned n_fuse_opts;
	bool debug;
	bool offline; /* --offline */
	enum ops_passthrough passthrough;
	/* --verify=mount: no seal is trusted (store_config). */
	bool verify_each_mount;
	unsigned origin_wait_ms;
	long uid, gid; /* owner shown; -1: the mounting user's */
	/* Where a detached mount logs: this file (absolute) if set, else
	 * syslog, else CACHE_DIR/wharf.log; a foreground one to stderr
	 * unless this is set. */
	const char *log_file;
	enum wharf_log_level log_level;
	/* Modes shown (and, with default_permissions, enforced by the
	 * kernel): --umask applied, never a write bit. */
	unsigned file_mode, dir_mode;
	/* How long a file whose read failed at the origin answers that
	 * error without asking again (--error-ttl); 0: never cached. */
	unsigned error_ttl_ms;
	/* Where the counters are written in Prometheus' text format
	 * (absolute; NULL: nowhere), and how often (--metrics-file,
	 * --metrics-interval). */
	const char *metrics_file;
	unsigned metrics_interval_ms;
};

/* The defaults of every field (the paths and spec stay NULL). */
void mount_config_default(struct mount_config *c);

/*
 * Mounts and serves until unmounted or stopped by SIGINT or SIGTERM
 * (SIGHUP reopens the log file): in the foreground process (ready_fd -1),
 * or in the child of a daemonizing one, which writes one byte to ready_fd
 * (0: mounted, 1: failed) and then detaches from the terminal.  Failures
 * before the mount is up are one line on stderr, "wharf mount: …", and in
 * the log file.  @return the exit status (0 or 1).
 */
int mount_serve(const struct mount_config *c, int ready_fd);

#endif
