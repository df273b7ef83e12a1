/*
 * `wharf mount` and mount.fuse.wharf: the command line, -o options as
 * mount(8) and fstab give them, settled into a mount_config by
 * mount_opts.c (paths absolute, values checked, defaults filled) before
 * fs/mount.c builds the mount.  The parent forks before any thread exists
 * and exits 0 only for a mount that is up (mount.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "compiler.h"
#include "log.h"
#include "mount.h"
#include "mount_opts.h"
#include "text.h"
#include "units.h"
#include "url.h"

enum {
	OPT_CACHE_DIR = 256,
	OPT_CACHE_SIZE,
	OPT_CACHE_MIN_FREE,
	OPT_MEMORY_CACHE,
	OPT_CHUNK_SIZE,
	OPT_ZSTD_LEVEL,
	OPT_READAHEAD,
	OPT_THREADS,
	OPT_PASSTHROUGH,
	OPT_VERIFY,
	OPT_MAX_CONNECTIONS,
	OPT_RETRIES,
	OPT_TIMEOUT,
	OPT_MANIFEST,
	OPT_CA_FILE,
	OPT_INSECURE,
	OPT_SITE_CACHE,
	OPT_SITE_CACHE_INSECURE_CREDENTIALS,
	OPT_INSECURE_CREDENTIALS,
	OPT_NO_HEDGE,
	OPT_ENDPOINT,
	OPT_REGION,
	OPT_NO_SIGN,
	OPT_PATH_STYLE,
	OPT_VIRTUAL_HOST,
	OPT_PROFILE,
	OPT_TOKEN_FILE,
	OPT_TOKEN_COMMAND,
	OPT_TOKEN_LIFETIME,
	OPT_TOKEN_TIMEOUT,
	OPT_ANONYMOUS,
	OPT_OFFLINE,
	OPT_ORIGIN_WAIT,
	OPT_OUTAGE_WAIT,
	OPT_UID,
	OPT_GID,
	OPT_LOG_FILE,
	OPT_LOG_LEVEL,
	OPT_FILE_MODE,
	OPT_DIR_MODE,
	OPT_UMASK,
	OPT_ERROR_TTL,
	OPT_METRICS_FILE,
	OPT_METRICS_INTERVAL,
};

static const struct option mount_longopts[] = {
    {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
    {"cache-size", required_argument, NULL, OPT_CACHE_SIZE},
    {"cache-min-free", required_argument, NULL, OPT_CACHE_MIN_FREE},
    {"memory-cache", required_argument, NULL, OPT_MEMORY_CACHE},
    {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
    {"zstd-level", required_argument, NULL, OPT_ZSTD_LEVEL},
    {"readahead", required_argument, NULL, OPT_READAHEAD},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"passthrough", optional_argument, NULL, OPT_PASSTHROUGH},
    {"verify", required_argument, NULL, OPT_VERIFY},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
    {"retries", required_argument, NULL, OPT_RETRIES},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"manifest", required_argument, NULL, OPT_MANIFEST},
    {"ca-file", required_argument, NULL, OPT_CA_FILE},
    {"insecure", no_argument, NULL, OPT_INSECURE},
    {"site-cache", required_argument, NULL, OPT_SITE_CACHE},
    {"site-cache-insecure-credentials", no_argument, NULL,
     OPT_SITE_CACHE_INSECURE_CREDENTIALS},
    {"insecure-credentials", no_argument, NULL, OPT_INSECURE_CREDENTIALS},
    {"no-hedge", no_argument, NULL, OPT_NO_HEDGE},
    {"endpoint", required_argument, NULL, OPT_ENDPOINT},
    {"region", required_argument, NULL, OPT_REGION},
    {"no-sign", no_argument, NULL, OPT_NO_SIGN},
    {"path-style", no_argument, NULL, OPT_PATH_STYLE},
    {"virtual-host", no_argument, NULL, OPT_VIRTUAL_HOST},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"token-command", required_argument, NULL, OPT_TOKEN_COMMAND},
    {"token-lifetime", required_argument, NULL, OPT_TOKEN_LIFETIME},
    {"token-timeout", required_argument, NULL, OPT_TOKEN_TIMEOUT},
    {"anonymous", no_argument, NULL, OPT_ANONYMOUS},
    {"offline", no_argument, NULL, OPT_OFFLINE},
    {"origin-wait", required_argument, NULL, OPT_ORIGIN_WAIT},
    {"outage-wait", required_argument, NULL, OPT_OUTAGE_WAIT},
    {"uid", required_argument, NULL, OPT_UID},
    {"gid", required_argument, NULL, OPT_GID},
    {"log-file", required_argument, NULL, OPT_LOG_FILE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"file-mode", required_argument, NULL, OPT_FILE_MODE},
    {"dir-mode", required_argument, NULL, OPT_DIR_MODE},
    {"umask", required_argument, NULL, OPT_UMASK},
    {"error-ttl", required_argument, NULL, OPT_ERROR_TTL},
    {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
    {"metrics-interval", required_argument, NULL, OPT_METRICS_INTERVAL},
    {"foreground", no_argument, NULL, 'f'},
    {"debug", no_argument, NULL, 'd'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void mount_usage(FILE *out)
{
	fputs(
	    "Usage: wharf mount [OPTIONS] SOURCE DIR\n"
	    "\n"
	    "Shows the objects under SOURCE read-only on DIR.  SOURCE is an\n"
	    "http(s):// prefix that can be listed (JSON or HTML index pages) "
	    "or\n"
	    "that --manifest describes, an s3:// or gs:// bucket prefix, or "
	    "an\n"
	    "az://ACCOUNT/CONTAINER prefix (Azure Blob Storage).\n"
	    "\n"
	    "Cache:\n"
	    "  --cache-dir DIR       chunk cache (default /var/cache/wharf for "
	    "root,\n"
	    "                        else ~/.cache/wharf)\n"
	    "  --cache-size SIZE     cap on the cache on disk (default 10G; "
	    "0: no cap)\n"
	    "  --cache-min-free SIZE|N%%  left free on the cache's filesystem "
	    "(default\n"
	    "                        5%% or 1G, whichever is smaller)\n"
	    "  --memory-cache SIZE   cap on decompressed chunks in memory "
	    "(512M)\n"
	    "  --chunk-size SIZE     chunk size, 64K to 256M (default 4M)\n"
	    "  --zstd-level N        compression level, 1 to 22 (default 3); "
	    "0\n"
	    "                        stores chunks raw (faster warm reads, "
	    "more\n"
	    "                        disk)\n"
	    "Reading:\n"
	    "  --readahead SIZE      cap on a sequential reader's read-ahead "
	    "(256M; 0: off)\n"
	    "  --threads N           ceiling on read-ahead and hint loads at "
	    "once (default:\n"
	    "                        --max-connections)\n"
	    "  --passthrough[=WHEN]  let the kernel read a file cached whole "
	    "and raw from\n"
	    "                        its cache file (root, Linux 6.9+): auto "
	    "(default) for\n"
	    "                        files of many chunks while they are a "
	    "share of the\n"
	    "                        opens; on (no WHEN) for every such file; "
	    "off\n"
	    "  --verify=WHEN         when a cached file is checked: sealed "
	    "(default): once,\n"
	    "                        then not while its stat is unchanged; "
	    "mount: at each\n"
	    "                        load, and a file handed to the kernel "
	    "once a mount\n"
	    "Origin:\n"
	    "  --max-connections N   ceiling on requests in parallel (default "
	    "256); the\n"
	    "                        number in use adapts to each host's "
	    "measured\n"
	    "                        throughput, latency and refusals\n"
	    "  --retries N           retries of a failed request (default 5)\n"
	    "  --timeout SECONDS     stall and connect timeout (default 30 and "
	    "10)\n"
	    "  --outage-wait DURATION\n"
	    "                        an origin that stops answering while "
	    "mounted\n"
	    "                        (refused, reset, timeouts, 5xx) is "
	    "waited for:\n"
	    "                        reads of uncached data wait up to "
	    "DURATION\n"
	    "                        (10m; 90s, 2h; 0: they fail after "
	    "--retries)\n"
	    "  --error-ttl SEC       a file whose read failed at the origin "
	    "fails again\n"
	    "                        without a request for SEC seconds (10; "
	    "0: off)\n"
	    "  --manifest URL|FILE   list objects from \"path size [etag]\" "
	    "lines\n"
	    "  --ca-file FILE        trust the CA certificates in FILE too\n"
	    "  --insecure            do not verify TLS certificates (anyone on "
	    "the way\n"
	    "                        can then read and change the data)\n"
	    "  --no-hedge            never send a late request a second time\n"
	    "  --site-cache URL      send chunk reads through the site's HTTP "
	    "cache\n"
	    "                        (http://cache:8080, nginx or Squid as "
	    "shipped);\n"
	    "                        requests stay the origin's (Host, "
	    "signature)\n"
	    "  --site-cache-insecure-credentials\n"
	    "                        let an s3:// or gs:// source's "
	    "credentials go to\n"
	    "                        an http:// site cache in clear "
	    "(refused without)\n"
	    "  --endpoint URL        S3, GCS or Azure Blob endpoint (Azurite:\n"
	    "                        http://127.0.0.1:10000/ACCOUNT)\n"
	    "  --insecure-credentials\n"
	    "                        let credentials go in clear to an "
	    "http:// endpoint\n"
	    "                        that is not this machine (refused "
	    "without)\n"
	    "  --region REGION       S3 region\n"
	    "  --no-sign             S3: anonymous requests\n"
	    "  --path-style          S3: path-style addressing\n"
	    "  --virtual-host        S3: virtual-host addressing\n"
	    "  --profile NAME        S3: profile of ~/.aws/credentials, "
	    "config\n"
	    "  --token-file FILE     GCS: OAuth access token from FILE\n"
	    "  --token-command CMD   GCS: run CMD for an access token\n"
	    "  --token-lifetime SEC  GCS: seconds a bare CMD token lasts "
	    "(300)\n"
	    "  --token-timeout SEC   GCS: kill CMD after SEC seconds (30)\n"
	    "  --anonymous           GCS, Azure: anonymous requests\n"
	    "Offline:\n"
	    "  --origin-wait SEC     give up on an unreachable origin after "
	    "about SEC\n"
	    "                        seconds (30): the mount then comes up "
	    "from the\n"
	    "                        listing snapshot in the cache, a read "
	    "fails (EIO)\n"
	    "  --offline             mount from the listing snapshot; never "
	    "ask the\n"
	    "                        origin\n"
	    "Access (the kernel checks modes: default_permissions is always "
	    "on):\n"
	    "  --uid USER, --gid GROUP  owner shown for every file, a name or "
	    "a number\n"
	    "                        (default: yours)\n"
	    "  --file-mode MODE      mode of files, octal (default 0444)\n"
	    "  --dir-mode MODE       mode of directories, octal (default "
	    "0555)\n"
	    "  --umask MASK          bits taken from both modes, octal "
	    "(default 0);\n"
	    "                        write bits are always dropped: read-only\n"
	    "                        (-o allow_other,gid=G,file_mode=0440,"
	    "dir_mode=0550:\n"
	    "                        the owner and group G read, no one "
	    "else)\n"
	    "Process:\n"
	    "  -o OPT[,OPT...]       any option above as name=value "
	    "(cache_dir=DIR),\n"
	    "                        or a mount option (allow_other, "
	    "nosuid...)\n"
	    "  --log-file FILE       log here (default: syslog once detached, "
	    "else\n"
	    "                        CACHE_DIR/wharf.log, named at mount "
	    "time)\n"
	    "  --log-level LEVEL     error, warn, info (default) or debug\n"
	    "  --metrics-file FILE   write the counters in Prometheus' text "
	    "format to FILE\n"
	    "                        (for node_exporter's textfile "
	    "collector: FILE.prom)\n"
	    "  --metrics-interval SEC  rewrite it every SEC seconds (5)\n"
	    "  -f, --foreground      stay in the foreground, log to stderr\n"
	    "  -d, --debug           debug messages and FUSE requests; implies "
	    "-f\n"
	    "  -h, --help            show this help\n"
	    "\n"
	    "SIZE is bytes, or a number (1.5 too) with K, M, G or T (KB and "
	    "KiB alike:\n"
	    "1024).  Relative paths (DIR, "
	    "--cache-dir,\n"
	    "--ca-file, --manifest, --token-file) are from the current "
	    "directory, and\n"
	    "a --token-command runs there, also after the mount detaches.  "
	    "See wharf-mount(1).\n",
	    out);
}

/* A size option; 2 (after the usage message) when malformed. */
static int opt_size(const char *name, const char *arg, uint64_t *out)
{
	if (parse_size(arg, out))
		return cmd_usage_error("mount", "--%s: '%s' is not a size",
				       name, arg);
	return 0;
}

/* --cache-min-free SIZE or N% (of the cache's filesystem, below 100).
 * @return 0 or 2. */
static int opt_min_free(const char *arg, struct mount_config *c)
{
	const size_t n = strlen(arg);
	char *end;
	unsigned long pct;

	c->cache_min_free_set = true;
	c->cache_min_free_pct = 0;
	if (n && arg[n - 1] == '%') {
		errno = 0;
		pct = strtoul(arg, &end, 10);
		if (errno || end == arg || end != arg + n - 1 || pct >= 100)
			return cmd_usage_error(
			    "mount",
			    "--cache-min-free: '%s' is not a percentage below "
			    "100 (5%%) or a size (2G)",
			    arg);
		c->cache_min_free_pct = (unsigned)pct;
		c->cache_min_free = 0;
		return 0;
	}
	return opt_size("cache-min-free", arg, &c->cache_min_free);
}

/* A mode option: octal digits, at most 0777.  @return 0 or 2. */
static int opt_mode(const char *name, const char *arg, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 8);
	if (errno || end == arg || *end || arg[strspn(arg, "01234567")] ||
	    v > 0777)
		return cmd_usage_error("mount",
				       "--%s: '%s' is not an octal mode from "
				       "0 to 0777 (such as 0440)",
				       name, arg);
	*out = (unsigned)v;
	return 0;
}

/*
 * --uid or --gid: a number, or a user's (group's) name, looked up now:
 * nothing after the start resolves a name again.  @return 0 or 2.
 */
static int opt_owner(const char *name, const char *arg, bool group, long *out)
{
	const char *const what = group ? "group" : "user";
	long id = -1;
	char *end;
	unsigned long v;

	if (arg[0] >= '0' && arg[0] <= '9') {
		errno = 0;
		v = strtoul(arg, &end, 10);
		/* (uid_t)-1 means "no change" to the kernel. */
		if (errno || *end || v >= UINT32_MAX)
			return cmd_usage_error(
			    "mount",
			    "--%s: '%s' is not a %s name or a number "
			    "below 4294967295",
			    name, arg, what);
		*out = (long)v;
		return 0;
	}
	errno = 0;
	if (group) {
		const struct group *gr = getgrnam(arg);

		if (gr)
			id = (long)gr->gr_gid;
	} else {
		const struct passwd *pw = getpwnam(arg);

		if (pw)
			id = (long)pw->pw_uid;
	}
	if (id >= 0) {
		*out = id;
		return 0;
	}
	if (errno && errno != ENOENT && errno != ESRCH)
		return cmd_usage_error("mount",
				       "--%s %s: cannot look up the "
				       "%s: %s",
				       name, arg, what, strerror(errno));
	return cmd_usage_error("mount",
			       "--%s: no %s named '%s' (give a %s name or a "
			       "number)",
			       name, what, arg, what);
}

/* A duration (parse_duration: "10m", "90s", "0") of at most max_ms;
 * 2 when not. */
static int opt_duration(const char *name, const char *arg, uint64_t max_ms,
			unsigned *ms)
{
	uint64_t v;

	if (parse_duration(arg, &v) || v > max_ms)
		return cmd_usage_error("mount",
				       "--%s: '%s' is not a duration up to "
				       "%llu days (10m, 90s, 2h, 0)",
				       name, arg,
				       (unsigned long long)(max_ms / 86400000));
	*ms = (unsigned)v;
	return 0;
}

/* An integer option within [lo, hi]; 2 when not. */
static int opt_uint(const char *name, const char *arg, long lo, long hi,
		    long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi)
		return cmd_usage_error("mount",
				       "--%s: '%s' is not a number from %ld "
				       "to %ld",
				       name, arg, lo, hi);
	*out = v;
	return 0;
}

/*
 * Mount options that go to the kernel through libfuse, and options that
 * only mount(8), systemd or an fstab reader act on: mount(8) hands the
 * helper every option of an fstab line, so those are taken and dropped.
 * The access-time options libfuse does not know are dropped too: nothing
 * on a read-only mount updates an access time.
 */
static const char *const kernel_opts[] = {
    "ro",     "allow_other", "allow_root", "auto_unmount",
    "default_permissions",   "nosuid",	   "suid",
    "nodev",  "dev",	     "noexec",	   "exec",
    "atime",  "noatime",     "sync",	   "async",
    "dirsync", NULL};
static const char *const fstab_opts[] = {
    "defaults",	   "auto",	 "noauto",	"user",	      "nouser",
    "users",	   "owner",	 "group",	"_netdev",    "nofail",
    "loud",	   "relatime",	 "norelatime",	"strictatime", "nostrictatime",
    "diratime",	   "nodiratime", "lazytime",	"nolazytime", NULL};

static bool in_list(const char *const *list, const char *name)
{
	for (; *list; list++)
		if (!strcmp(*list, name))
			return true;
	return false;
}

/* The long option called name, or name with '_' for '-'; NULL if none. */
static const struct option *long_opt_named(const char *name, size_t n)
{
	char buf[64];

	if (n >= sizeof(buf))
		return NULL;
	for (size_t i = 0; i < n; i++)
		buf[i] = name[i] == '_' && i ? '-' : name[i];
	buf[n] = '\0';
	for (const struct option *lo = mount_longopts; lo->name; lo++)
		if (!strcmp(lo->name, buf))
			return lo;
	return NULL;
}

/* ---- secrets on the command line ---- */

/* Options whose value may carry a credential, which `ps` must not show:
 * a signed URL's query, a URL's user and password, a command (that may
 * hold a key or a password). */
static bool secret_option(int opt)
{
	return opt == OPT_MANIFEST || opt == OPT_ENDPOINT ||
	       opt == OPT_SITE_CACHE || opt == OPT_TOKEN_COMMAND;
}

/* Overwrites the secret part of value[0, len) of option opt in place. */
static void scrub_value(int opt, char *value, size_t len)
{
	if (opt == OPT_TOKEN_COMMAND)
		memset(value, '*', len);
	else
		url_scrub(value, len);
}

/*
 * The value of a secret option, copied for the configuration (owned by
 * o), then scrubbed where it was: in argv, whose memory is what
 * /proc/PID/cmdline and `ps` read, in this process and in the daemon
 * forked from it.  NULL without memory.
 */
static char *keep_secret(struct mount_opts *o, int opt, char *value)
{
	char *copy = mount_opts_own(o, strdupf("%s", value));

	if (copy)
		scrub_value(opt, value, strlen(value));
	return copy;
}

/* Scrubs the secret options among the NAME=VALUE items of an -o argument
 * in place, once it has been copied. */
static void scrub_o(char *arg)
{
	char *item = arg;

	while (*item) {
		const size_t len = strcspn(item, ",");
		const size_t n = strcspn(item, "=,");
		const struct option *lo = long_opt_named(item, n);

		if (lo && item[n] == '=' && secret_option(lo->val))
			scrub_value(lo->val, item + n + 1, len - n - 1);
		item += len + (item[len] == ',');
	}
}

/*
 * One -o argument, as mount(8) and fstab give it: each NAME[=VALUE] that
 * names a long option becomes "--NAME=VALUE" for parse_mount's second
 * pass (so options added to the table are reachable here too), mount
 * options go to libfuse, fstab-only ones are dropped, the rest refused.
 * @return 0 or 2 after the usage message.
 */
static int mount_o(struct mount_opts *o, char *arg)
{
	char *copy = mount_opts_own(o, strdupf("%s", arg));
	char *fuse = mount_opts_own(o, calloc(1, strlen(arg) + 1));
	char *item, *save = NULL;

	if (!copy || !fuse)
		return cmd_usage_error("mount", "out of memory");
	scrub_o(arg);
	for (item = strtok_r(copy, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		const size_t n = strcspn(item, "=");
		const struct option *lo = long_opt_named(item, n);
		char **v;

		if (lo && ((lo->has_arg == no_argument && item[n]) ||
			   (lo->has_arg == required_argument && !item[n])))
			return cmd_usage_error(
			    "mount", "-o %.*s %s", (int)n, item,
			    item[n] ? "takes no value" : "needs a value");
		if (lo) {
			v = realloc(o->o_args,
				    (o->n_o_args + 1) * sizeof(*v));
			if (!v || !mount_opts_own(o, strdupf("--%s%s", lo->name,
						  item + n)))
				return cmd_usage_error("mount",
						       "out of memory");
			o->o_args = v;
			o->o_args[o->n_o_args++] = o->owned[o->n_owned - 1];
		} else if (in_list(kernel_opts, item)) {
			if (*fuse)
				strcat(fuse, ",");
			strcat(fuse, item);
		} else if (!strcmp(item, "rw")) {
			/* mount(8) adds rw where an fstab line has no ro:
			 * the mount is read-only all the same, as an
			 * iso9660 one is. */
			fputs("wharf mount: -o rw: wharf is a read-only "
			      "filesystem; mounting read-only\n",
			      stderr);
		} else if (!in_list(fstab_opts, item) &&
			   strncmp(item, "x-", 2) && strncmp(item, "X-", 2) &&
			   strncmp(item, "comment=", 8)) {
			return cmd_usage_error("mount", "unknown option -o %s",
					       item);
		}
	}
	if (!*fuse)
		return 0;
	if (o->cfg.n_fuse_opts == ARRAY_SIZE(o->cfg.fuse_opts))
		return cmd_usage_error("mount", "too many -o options");
	o->cfg.fuse_opts[o->cfg.n_fuse_opts++] = fuse;
	return 0;
}

/* The options of argv (getopt's state reset).  @return 0, or the exit
 * status (2, or -1 after --help). */
static int parse_options(int argc, char **argv, struct mount_opts *o)
{
	long v;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:fdho:", mount_longopts, NULL)) !=
	       -1) {
		rc = 0;
		switch (c) {
		case OPT_CACHE_DIR:
			free(o->cache_dir);
			o->cache_dir = strdupf("%s", optarg);
			break;
		case OPT_CACHE_SIZE:
			rc = opt_size("cache-size", optarg, &o->cfg.cache_size);
			break;
		case OPT_CACHE_MIN_FREE:
			rc = opt_min_free(optarg, &o->cfg);
			break;
		case OPT_MEMORY_CACHE:
			rc = opt_size("memory-cache", optarg, &o->cfg.memory_cache);
			break;
		case OPT_CHUNK_SIZE:
			rc = opt_size("chunk-size", optarg, &o->cfg.chunk_size);
			if (!rc && (o->cfg.chunk_size < PF_MIN_CHUNK ||
				    o->cfg.chunk_size > (256u << 20)))
				rc = cmd_usage_error(
				    "mount",
				    "--chunk-size: %s is outside 64K to 256M",
				    optarg);
			break;
		case OPT_ZSTD_LEVEL:
			rc = opt_uint("zstd-level", optarg, 0, 22, &v);
			o->cfg.zstd_level = (int)v;
			break;
		case OPT_READAHEAD:
			rc = opt_size("readahead", optarg, &o->cfg.readahead);
			break;
		case OPT_THREADS:
			rc = opt_uint("threads", optarg, 1, 1024, &v);
			o->cfg.threads = (unsigned)v;
			break;
		case OPT_MAX_CONNECTIONS:
			rc = opt_uint("max-connections", optarg, 1, 1024, &v);
			o->cfg.fetch.max_connections = (unsigned)v;
			break;
		case OPT_RETRIES:
			rc = opt_uint("retries", optarg, 0, 100, &v);
			o->cfg.fetch.retries = (unsigned)v;
			break;
		case OPT_TIMEOUT:
			rc = opt_uint("timeout", optarg, 1, 86400, &v);
			o->cfg.fetch.stall_timeout_ms = (unsigned)v * 1000;
			if (o->cfg.fetch.connect_timeout_ms >
			    o->cfg.fetch.stall_timeout_ms)
				o->cfg.fetch.connect_timeout_ms =
				    o->cfg.fetch.stall_timeout_ms;
			break;
		case OPT_MANIFEST:
			o->cfg.src.manifest = keep_secret(o, c, optarg);
			rc = o->cfg.src.manifest ? 0 : 1;
			break;
		case OPT_CA_FILE:
			o->cfg.fetch.ca_file = optarg;
			break;
		case OPT_INSECURE:
			o->cfg.fetch.insecure = true;
			break;
		case OPT_SITE_CACHE: {
			const char *url = keep_secret(o, c, optarg);
			const char *why =
			    url ? fetch_site_cache_check(url) : "out of memory";

			if (why)
				rc = cmd_usage_error("mount",
						     "--site-cache %s: %s",
						     url ? url : optarg, why);
			o->cfg.fetch.site_cache = url;
			break;
		}
		case OPT_SITE_CACHE_INSECURE_CREDENTIALS:
			o->cfg.fetch.site_cache_insecure_credentials = true;
			break;
		case OPT_INSECURE_CREDENTIALS:
			o->cfg.fetch.insecure_credentials = true;
			break;
		case OPT_NO_HEDGE:
			o->cfg.fetch.hedge = false;
			break;
		case OPT_PASSTHROUGH:
			if (!optarg || !strcmp(optarg, "on"))
				o->cfg.passthrough = OPS_PASSTHROUGH_ON;
			else if (!strcmp(optarg, "auto"))
				o->cfg.passthrough = OPS_PASSTHROUGH_AUTO;
			else if (!strcmp(optarg, "off"))
				o->cfg.passthrough = OPS_PASSTHROUGH_OFF;
			else
				return cmd_usage_error(
				    "mount",
				    "--passthrough=%s: auto, on or off",
				    optarg);
			break;
		case OPT_VERIFY:
			if (strcmp(optarg, "sealed") && strcmp(optarg, "mount"))
				return cmd_usage_error(
				    "mount", "--verify=%s: sealed or mount",
				    optarg);
			o->cfg.verify_each_mount = !strcmp(optarg, "mount");
			break;
		case OPT_ENDPOINT:
			o->cfg.src.endpoint = keep_secret(o, c, optarg);
			rc = o->cfg.src.endpoint ? 0 : 1;
			break;
		case OPT_REGION:
			o->cfg.src.region = optarg;
			break;
		case OPT_NO_SIGN:
			o->cfg.src.no_sign = true;
			break;
		case OPT_PATH_STYLE:
			o->cfg.src.addressing = 1;
			break;
		case OPT_VIRTUAL_HOST:
			o->cfg.src.addressing = 2;
			break;
		case OPT_PROFILE:
			o->cfg.src.profile = optarg;
			break;
		case OPT_TOKEN_FILE:
			o->cfg.src.token_file = optarg;
			break;
		case OPT_TOKEN_COMMAND:
			o->cfg.src.token_command = keep_secret(o, c, optarg);
			rc = o->cfg.src.token_command ? 0 : 1;
			break;
		case OPT_TOKEN_LIFETIME:
			rc = opt_uint("token-lifetime", optarg, 1, 86400, &v);
			o->cfg.src.token_lifetime = (unsigned)v;
			break;
		case OPT_TOKEN_TIMEOUT:
			rc = opt_uint("token-timeout", optarg, 1, 3600, &v);
			o->cfg.src.token_timeout = (unsigned)v;
			break;
		case OPT_ANONYMOUS:
			o->cfg.src.anonymous = true;
			break;
		case OPT_OFFLINE:
			o->cfg.offline = true;
			break;
		case OPT_ORIGIN_WAIT:
			rc = opt_uint("origin-wait", optarg, 1, 3600, &v);
			o->cfg.origin_wait_ms = (unsigned)v * 1000;
			break;
		case OPT_OUTAGE_WAIT:
			rc = opt_duration("outage-wait", optarg,
					  30 * 86400000ull,
					  &o->cfg.fetch.outage_wait_ms);
			break;
		case OPT_UID:
			rc = opt_owner("uid", optarg, false, &o->cfg.uid);
			break;
		case OPT_GID:
			rc = opt_owner("gid", optarg, true, &o->cfg.gid);
			break;
		case OPT_FILE_MODE:
			rc = opt_mode("file-mode", optarg, &o->cfg.file_mode);
			break;
		case OPT_DIR_MODE:
			rc = opt_mode("dir-mode", optarg, &o->cfg.dir_mode);
			break;
		case OPT_UMASK:
			rc = opt_mode("umask", optarg, &o->umask);
			break;
		case OPT_ERROR_TTL:
			rc = opt_uint("error-ttl", optarg, 0, 3600, &v);
			o->cfg.error_ttl_ms = (unsigned)v * 1000;
			break;
		case OPT_LOG_FILE:
			o->cfg.log_file = optarg;
			break;
		case OPT_METRICS_FILE:
			o->cfg.metrics_file = optarg;
			break;
		case OPT_METRICS_INTERVAL:
			rc = opt_uint("metrics-interval", optarg, 1, 3600, &v);
			o->cfg.metrics_interval_ms = (unsigned)v * 1000;
			break;
		case OPT_LOG_LEVEL:
			if (log_level_parse(optarg, &o->cfg.log_level))
				rc = cmd_usage_error(
				    "mount",
				    "--log-level: '%s' is not error, warn, "
				    "info or debug",
				    optarg);
			break;
		case 'o':
			rc = mount_o(o, optarg);
			break;
		case 'f':
			o->foreground = true;
			break;
		case 'd':
			o->cfg.debug = o->foreground = true;
			break;
		case 'h':
			mount_usage(stdout);
			return -1;
		default:
			rc = cmd_bad_option("mount", c, argv, mount_longopts);
			break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* @return 0 with *o filled, or the exit status (2, or -1 after --help);
 * mount_opts_free(o) either way. */
static int parse_mount(int argc, char **argv, struct mount_opts *o)
{
	int rc, nargs;

	memset(o, 0, sizeof(*o));
	mount_config_default(&o->cfg);

	rc = parse_options(argc, argv, o);
	if (rc)
		return rc;
	nargs = argc - optind;
	if (nargs == 2) {
		/* A SAS may be the source URL's query: ps must not show it. */
		o->cfg.spec = keep_secret(o, 0, argv[optind]);
		/* argv[optind] is scrubbed now: the source as written. */
		o->cfg.spec_shown =
		    mount_opts_own(o, strdupf("%s", argv[optind]));
		if (!o->cfg.spec || !o->cfg.spec_shown)
			return 1;
		o->cfg.mountpoint = argv[optind + 1];
	}
	if (o->n_o_args) {
		/* getopt skips argv[0]; o_args has room for it. */
		char **v = realloc(o->o_args,
				   (o->n_o_args + 2) * sizeof(*v));

		if (!v)
			return cmd_usage_error("mount", "out of memory");
		memmove(v + 1, v, o->n_o_args * sizeof(*v));
		v[0] = argv[0];
		v[o->n_o_args + 1] = NULL;
		o->o_args = v;
		rc = parse_options((int)o->n_o_args + 1, v, o);
		if (rc)
			return rc;
	}
	return mount_opts_settle(o, nargs);
}


int cmd_mount(int argc, char **argv)
{
	struct mount_opts o;
	int pipefd[2], rc;
	pid_t pid;
	char ok;

	rc = parse_mount(argc, argv, &o);
	if (rc) {
		mount_opts_free(&o);
		return rc < 0 ? 0 : rc;
	}
	log_set_level(o.cfg.debug ? WHARF_LOG_DEBUG : o.cfg.log_level);
	if (o.foreground) {
		rc = mount_serve(&o.cfg, -1);
		mount_opts_free(&o);
		return rc;
	}
	if (pipe2(pipefd, O_CLOEXEC)) {
		fprintf(stderr, "wharf mount: pipe: %s\n", strerror(errno));
		mount_opts_free(&o);
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "wharf mount: fork: %s\n", strerror(errno));
		mount_opts_free(&o);
		return 1;
	}
	if (pid == 0) {
		close(pipefd[0]);
		rc = mount_serve(&o.cfg, pipefd[1]);
		mount_opts_free(&o);
		_exit(rc);
	}
	close(pipefd[1]);
	mount_opts_free(&o);
	do
		rc = (int)read(pipefd[0], &ok, 1);
	while (rc < 0 && errno == EINTR);
	close(pipefd[0]);
	if (rc == 1 && ok == 0)
		return 0;
	/* It failed (and said why) or died; reap it if it is done. */
	waitpid(pid, NULL, WNOHANG);
	if (rc != 1)
		fprintf(stderr, "wharf mount: the mount process died before "
				"the mount was up\n");
	return 1;
}

/*
 * mount.fuse.wharf, as mount(8) runs it for an fstab line or `mount -t
 * fuse.wharf`: SOURCE DIR [-sfnv] [-N NS] [-o OPTS] [-t TYPE].  mount(8)
 * has already read the fstab and keeps no mtab, so -s, -n and -v change
 * nothing, and -f (fake) mounts nothing.
 */
int cmd_mount_helper(int argc, char **argv)
{
	static const struct option no_longopts[] = {{NULL, 0, NULL, 0}};
	char *args[6], *opts = NULL, *more;
	int n = 0, c;
	bool fake = false;

	if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') {
		fprintf(stderr, "Usage: mount.fuse.wharf SOURCE DIR "
				"[-o OPTIONS]\n"
				"mount(8) runs this for type fuse.wharf; see "
				"wharf-mount(1).\n");
		return 2;
	}
	optind = 3;
	opterr = 0;
	while ((c = getopt(argc, argv, "+:sfnvN:o:t:")) != -1) {
		if (c == 'o') {
			more = opts ? strdupf("%s,%s", opts, optarg)
				    : strdupf("%s", optarg);
			free(opts);
			opts = more;
			/* mount(8) ran this with the fstab line's options. */
			scrub_o(optarg);
		} else if (c == 'f') {
			fake = true;
		} else if (c == '?' || c == ':') {
			free(opts);
			return cmd_bad_option("mount", c, argv, no_longopts);
		}
	}
	if (optind != argc) {
		free(opts);
		return cmd_usage_error("mount", "unexpected argument '%s'",
				       argv[optind]);
	}
	args[n++] = "mount";
	if (opts) {
		args[n++] = "-o";
		args[n++] = opts;
	}
	args[n++] = argv[1];
	args[n++] = argv[2];
	args[n] = NULL;
	c = fake ? 0 : cmd_mount(n, args);
	free(opts);
	return c;
}
