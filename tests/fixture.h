#ifndef WHARF_TEST_FIXTURE_H
#define WHARF_TEST_FIXTURE_H
/* Shared test fixtures: temp dirs, deterministic files, helper daemons. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Skipping a test where it cannot run.  Check knows no skip: a test that
 * returns early counts as passed.  fx_skip prints one line to stdout,
 * "SKIP: NAME: REASON" (NAME the test's, REASON from the printf format),
 * and returns from the test; quickstart's summarize counts such lines as
 * skipped, not passed.  Only in the body of a START_TEST, before it has
 * checked anything.
 */
#define fx_skip(...)                                                           \
	do {                                                                   \
		fx_skip_note(__func__, __VA_ARGS__);                           \
		return;                                                        \
	} while (0)
/* The line fx_skip prints; func is the test's function (NAME_fn, as
 * START_TEST names it) or the test's name. */
void fx_skip_note(const char *func, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* When why is not NULL, skips the whole program: "SKIP: WHY" and exit
 * status 77.  Only before the tests run: later it would hide what they
 * found. */
void fx_need(const char *why);
/* Why /dev/fuse cannot be used here, or NULL. */
const char *fx_fuse_missing(void);
/* A server from npm (s3rver, azurite-blob): $ENV when set, else what
 * ./quickstart deps installed, build/node/node_modules/.bin/NAME of the
 * source tree.  The path stays valid until the next call. */
const char *fx_node_bin(const char *env, const char *name);
/* Why fx_node_bin(env, name) cannot be run, with the fix, or NULL. */
const char *fx_node_missing(const char *env, const char *name);
/* Why nginx cannot be started here (not installed), or NULL. */
const char *fx_nginx_missing(void);

/* A fresh directory under $TMPDIR (or /tmp), "wharf-TAG-XXXXXX"; caller frees. */
char *fx_tmpdir(const char *tag);
/* rm -rf, refusing anything outside /tmp or $TMPDIR. */
void fx_rmtree(const char *path);
/* Writes `size` deterministic bytes (a function of seed and offset). */
int fx_write_file(const char *path, uint64_t size, uint32_t seed);
/* The byte fx_write_file puts at offset off. */
uint8_t fx_byte(uint32_t seed, uint64_t off);
/*
 * Reads dir/name to its end or its first error, comparing with what
 * fx_write_file made of seed; *got: the bytes read.  @return how many of
 * them differ, or -1 when it does not open or an error other than EIO
 * (what a mount says when it cannot keep its pin) ended the read.
 */
long long fx_read_seed(const char *dir, const char *name, uint32_t seed,
		       uint64_t *got);
/* mkdir -p */
int fx_mkdirs(const char *path);
/* Reads a whole file into a malloc'd buffer; NULL on error. */
void *fx_read_file(const char *path, size_t *len);
/* Runs a shell command; returns its exit status (or -1). */
int fx_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* What `ps` shows of process pid: its /proc/PID/cmdline, the arguments
 * joined by spaces (malloc'd), or NULL. */
char *fx_cmdline(pid_t pid);
/* A free TCP port on 127.0.0.1. */
int fx_free_port(void);
/* Waits until 127.0.0.1:port accepts, up to timeout_ms; 0 or -1. */
int fx_wait_port(int port, int timeout_ms);
/* Starts argv[0] with argv; returns its pid (-1 on error). Output goes to
 * log_path when not NULL. */
pid_t fx_spawn(char *const argv[], const char *log_path);
/* fx_spawn of a server that listens on 127.0.0.1:port, waiting up to
 * timeout_ms for it.  @return its pid; -1 when it did not come up (its
 * log is then on stderr, and it is stopped). */
pid_t fx_spawn_server(char *const argv[], const char *log_path, int port,
		      int timeout_ms);
/* Waits up to timeout_ms until path exists while daemon *pid runs (a
 * mount coming up).  @return 0; -1 when it died (*pid is then -1) or the
 * time ran out; either way a line on stderr points at log. */
int fx_wait_path(pid_t *pid, const char *path, int timeout_ms, const char *log);
/* SIGTERM, then SIGKILL after timeout_ms; returns the wait status. */
int fx_stop(pid_t pid, int timeout_ms);
/* Waits up to timeout_ms for child pid to end.  @return its wait status,
 * or -1 (it still runs). */
int fx_wait_exit(pid_t pid, int timeout_ms);
/* Whether process pid is gone or a zombie (one not this process's child,
 * or whose parent died, may wait long for its reaping). */
bool fx_process_gone(pid_t pid);

/*
 * bench/origin over `root` with extra options (NULL-terminated), its port
 * file and log WORK_DIR/TAG.port and .log; url gets "http://127.0.0.1:PORT/".
 * @return its pid (stop it with fx_stop), or -1 (with a line on stderr):
 * it did not start, or bench/origin is not built, which a build with the
 * filesystem always does (and only such a build has these tests).
 */
pid_t fx_origin_start(const char *root, const char *const extra[],
		      const char *work_dir, const char *tag, char *url,
		      size_t url_cap);

/*
 * tests/bad-cache: a site cache that answers with every body byte zeroed
 * (as the origin X-Wharf-Origin names answers, otherwise), its log
 * WORK_DIR/bad-cache.log; url gets "http://127.0.0.1:PORT" for
 * --site-cache.  @return its pid (stop it with fx_stop), or -1.
 */
pid_t fx_bad_cache_start(const char *work_dir, char *url, size_t url_cap);

/* A number bench/origin logged at exit, right after `marker` ("..., N
 * slow" after " stalls, "); -1 when absent. */
long fx_origin_logged(const char *log, const char *marker);

/*
 * nginx on 127.0.0.1 over `root`: /json/ is the JSON autoindex, /html/ the
 * HTML autoindex, /plain/ files without listing, /jsonfile/ serves
 * DIR/listing.json as the listing of DIR/; /status/NNN answers NNN.
 * Without nginx installed, this and the other nginx starts fail (-1):
 * ask fx_nginx_missing first to skip instead.
 */
struct fx_nginx {
	pid_t pid;
	int port;
	char *dir; /* its conf, logs and temp files */
	char base[128]; /* "http://127.0.0.1:PORT" */
};
int fx_nginx_start(struct fx_nginx *ng, const char *root);
void fx_nginx_stop(struct fx_nginx *ng);
/* Stops nginx as an outage would, keeping its port and conf for resume. */
void fx_nginx_pause(struct fx_nginx *ng);
/* Starts a paused nginx again on the same port.  @return 0 or -1. */
int fx_nginx_resume(struct fx_nginx *ng);

/*
 * nginx as a site cache: examples/site-cache/nginx-wharf.conf as shipped,
 * but for its port, cache directory and slice (the lines it marks EDIT),
 * letting through the origins listed (NULL-terminated "http://H:P", as
 * X-Wharf-Origin names them), and with each further pair of strings of
 * `more` (from, to, ..., NULL) replaced.  A string to replace that the
 * shipped file lacks fails the start: the test then no longer tests it.
 * ng->base is the URL for --site-cache.  @return 0 or -1.
 */
int fx_site_cache_start(struct fx_nginx *ng, const char *const origins[],
			const char *slice, const char *const more[]);
/*
 * nginx over TLS on 127.0.0.1 over `root` (JSON listings), with a
 * certificate of its own for 127.0.0.1 in ng->dir/cert.pem, logging the
 * body bytes of each answer to ng->dir/bytes.log.  ng->base is
 * "https://127.0.0.1:PORT".  @return 0, or -1 (openssl or nginx failed).
 */
int fx_nginx_tls_start(struct fx_nginx *ng, const char *root);
/*
 * nginx on 127.0.0.1 with two virtual hosts on one port: the default one
 * serves `root` (JSON listings), the one named `other_name` serves
 * `other_root`.  Both gzip what they send to a client that accepts it,
 * proxies included.
 * ng->base is "http://127.0.0.1:PORT".  @return 0 or -1.
 */
int fx_nginx_vhosts_start(struct fx_nginx *ng, const char *root,
			  const char *other_name, const char *other_root);

/* Whether a line of file log matches grep's basic regular expression. */
bool fx_log_has(const char *log, const char *pattern);
/* How many names in directory path begin with prefix; -1 when it does
 * not open. */
int fx_count_names(const char *path, const char *prefix);

/* The resident memory of process pid (VmRSS) in KiB, or -1. */
long fx_rss_kib(pid_t pid);
/* The sum of the numbers in a file, one a line (bytes.log); -1 if none. */
long long fx_sum_lines(const char *path);

/* Why Squid cannot be started here (not installed), or NULL. */
const char *fx_squid_missing(void);
/*
 * Squid as a site cache: examples/site-cache/squid-wharf.conf as shipped,
 * but for the lines it marks EDIT: its port, cache directory and sizes,
 * its StoreID helper (copied from the source tree), and its origins file,
 * which lets through the one origin "http://127.0.0.1:PORT".  Stop it with
 * fx_nginx_stop.  ng->base is the URL for --site-cache.  @return 0 or -1.
 */
int fx_squid_start(struct fx_nginx *ng, const char *origin);

/* Pieces of the site cache's counters from its log: GETs it answered
 * from its cache (HIT), fetched (MISS) and refused (403). */
struct fx_site_cache_log {
	long hit, miss, refused;
};
int fx_site_cache_counts(const struct fx_nginx *ng,
			 struct fx_site_cache_log *out);

/* The number after the first "key": in json, or -1. */
long long fx_json_num(const char *json, const char *key);

/* A mount's stats and `wharf mount` daemons: fixture-ck.h. */

/* The built `wharf` command ($WHARF_BIN, set by tests/Makefile.am). */
const char *fx_wharf_bin(void);
/* The program itself, not libtool's wrapper script around it (for a link
 * under another name, mount.fuse.wharf: the script would run it as
 * wharf); sets LD_LIBRARY_PATH to the build tree's libraries for it. */
const char *fx_wharf_real_bin(void);

#endif
