/*
 * `wharf mount` and `wharf umount`.
 *
 * A mount is checked before anything is mounted: the source is opened (its
 * root listed or its manifest read) and the cache dir locked, and every
 * failure there is one line on the terminal and exit status 1.
 *
 * Daemonizing: the fetch engine and the read-ahead pool are threads, and a
 * fork keeps only the thread that forks, so the process forks first, before
 * any thread exists.  The child does all the work and tells the parent,
 * through a pipe, once the kernel mount is in place (or that it failed,
 * after printing why on the inherited terminal); only then does it let go
 * of the terminal.  The parent exits 0 only for a mount that is up.
 */
#include "config.h"

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <pthread.h>
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
#include <dirent.h>

#include "chunks.h"
#include "cmd.h"
#include "fetch.h"
#include "offline.h"
#include "ops.h"
#include "passthrough.h"
#include "prefetch.h"
#include "source.h"
#include "stats.h"
#include "store.h"
#include "tree.h"
#include "util.h"

#define FSTYPE "fuse.wharf"

struct mount_opts {
	const char *spec;
	const char *mountpoint; /* as given */
	char *cache_dir;	/* malloc'd */
	uint64_t cache_size;
	uint64_t memory_cache;
	uint64_t chunk_size;
	int zstd_level;
	uint64_t readahead;
	unsigned threads; /* 0: max_connections */
	struct fetch_config fetch;
	struct source_options src;
	const char *fuse_opts[16];
	unsigned n_fuse_opts;
	bool foreground;
	bool debug;
	bool offline; /* --offline */
	enum ops_passthrough passthrough; /* --passthrough */
	unsigned origin_wait_ms;
	long uid, gid; /* owner shown; -1: the mounting user's */
	/* Long options given as -o name=value, parsed after the rest. */
	char **o_args; /* "--name=value", malloc'd */
	unsigned n_o_args;
	char **owned; /* what fuse_opts and optarg may point into */
	unsigned n_owned;
};

enum {
	OPT_CACHE_DIR = 256,
	OPT_CACHE_SIZE,
	OPT_MEMORY_CACHE,
	OPT_CHUNK_SIZE,
	OPT_ZSTD_LEVEL,
	OPT_READAHEAD,
	OPT_THREADS,
	OPT_PASSTHROUGH,
	OPT_MAX_CONNECTIONS,
	OPT_RETRIES,
	OPT_TIMEOUT,
	OPT_MANIFEST,
	OPT_CA_FILE,
	OPT_INSECURE,
	OPT_SITE_CACHE,
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
	OPT_UID,
	OPT_GID,
};

static const struct option mount_longopts[] = {
    {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
    {"cache-size", required_argument, NULL, OPT_CACHE_SIZE},
    {"memory-cache", required_argument, NULL, OPT_MEMORY_CACHE},
    {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
    {"zstd-level", required_argument, NULL, OPT_ZSTD_LEVEL},
    {"readahead", required_argument, NULL, OPT_READAHEAD},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"passthrough", optional_argument, NULL, OPT_PASSTHROUGH},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
    {"retries", required_argument, NULL, OPT_RETRIES},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"manifest", required_argument, NULL, OPT_MANIFEST},
    {"ca-file", required_argument, NULL, OPT_CA_FILE},
    {"insecure", no_argument, NULL, OPT_INSECURE},
    {"site-cache", required_argument, NULL, OPT_SITE_CACHE},
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
    {"uid", required_argument, NULL, OPT_UID},
    {"gid", required_argument, NULL, OPT_GID},
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
	    "that --manifest describes, or an s3:// or gs:// bucket prefix.\n"
	    "\n"
	    "Cache:\n"
	    "  --cache-dir DIR       chunk cache (default /var/cache/wharf for "
	    "root,\n"
	    "                        else ~/.cache/wharf)\n"
	    "  --cache-size SIZE     cap on the cache on disk (default 10G; "
	    "0: no cap)\n"
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
	    "Origin:\n"
	    "  --max-connections N   ceiling on requests in parallel (default "
	    "256); the\n"
	    "                        number in use adapts to each host's "
	    "measured\n"
	    "                        throughput, latency and refusals\n"
	    "  --retries N           retries of a failed request (default 5)\n"
	    "  --timeout SECONDS     stall and connect timeout (default 30 and "
	    "10)\n"
	    "  --manifest URL|FILE   list objects from \"path size [etag]\" "
	    "lines\n"
	    "  --ca-file FILE        trust the CA certificates in FILE too\n"
	    "  --insecure            do not verify TLS certificates\n"
	    "  --no-hedge            never send a late request a second time\n"
	    "  --site-cache URL      send chunk reads through the site's HTTP "
	    "cache\n"
	    "                        (http://cache:8080, nginx or Squid as "
	    "shipped);\n"
	    "                        requests stay the origin's (Host, "
	    "signature)\n"
	    "  --endpoint URL        S3 or GCS endpoint\n"
	    "  --region REGION       S3 region\n"
	    "  --no-sign             S3: anonymous requests\n"
	    "  --path-style          S3: path-style addressing\n"
	    "  --virtual-host        S3: virtual-host addressing\n"
	    "  --profile NAME        S3: profile of ~/.aws/credentials\n"
	    "  --token-file FILE     GCS: OAuth access token from FILE\n"
	    "  --token-command CMD   GCS: run CMD for an access token\n"
	    "  --token-lifetime SEC  GCS: seconds a bare CMD token lasts "
	    "(300)\n"
	    "  --token-timeout SEC   GCS: kill CMD after SEC seconds (30)\n"
	    "  --anonymous           GCS: anonymous requests\n"
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
	    "Process:\n"
	    "  --uid N, --gid N      owner shown for every file (default: "
	    "yours)\n"
	    "  -o OPT[,OPT...]       any option above as name=value "
	    "(cache_dir=DIR),\n"
	    "                        or a mount option (allow_other, "
	    "nosuid...)\n"
	    "  -f, --foreground      stay in the foreground, log to stderr\n"
	    "  -d, --debug           debug messages and FUSE requests; implies "
	    "-f\n"
	    "  -h, --help            show this help\n"
	    "\n"
	    "SIZE takes the suffixes K, M, G, T.  See wharf(1).\n",
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

static void mount_opts_free(struct mount_opts *o)
{
	for (unsigned i = 0; i < o->n_owned; i++)
		free(o->owned[i]);
	free(o->owned);
	free(o->o_args);
	free(o->cache_dir);
}

/* Keeps p until mount_opts_free.  @return p, or NULL (p freed). */
static char *own(struct mount_opts *o, char *p)
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

/*
 * One -o argument, as mount(8) and fstab give it: each NAME[=VALUE] that
 * names a long option becomes "--NAME=VALUE" for parse_mount's second
 * pass (so options added to the table are reachable here too), mount
 * options go to libfuse, fstab-only ones are dropped, the rest refused.
 * @return 0 or 2 after the usage message.
 */
static int mount_o(struct mount_opts *o, const char *arg)
{
	char *copy = own(o, strdupf("%s", arg));
	char *fuse = own(o, calloc(1, strlen(arg) + 1));
	char *item, *save = NULL;

	if (!copy || !fuse)
		return cmd_usage_error("mount", "out of memory");
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
			if (!v || !own(o, strdupf("--%s%s", lo->name,
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
			return cmd_usage_error("mount",
					       "-o rw: wharf is a read-only "
					       "filesystem");
		} else if (!in_list(fstab_opts, item) &&
			   strncmp(item, "x-", 2) && strncmp(item, "X-", 2) &&
			   strncmp(item, "comment=", 8)) {
			return cmd_usage_error("mount", "unknown option -o %s",
					       item);
		}
	}
	if (!*fuse)
		return 0;
	if (o->n_fuse_opts == ARRAY_SIZE(o->fuse_opts))
		return cmd_usage_error("mount", "too many -o options");
	o->fuse_opts[o->n_fuse_opts++] = fuse;
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
			rc = opt_size("cache-size", optarg, &o->cache_size);
			break;
		case OPT_MEMORY_CACHE:
			rc = opt_size("memory-cache", optarg, &o->memory_cache);
			break;
		case OPT_CHUNK_SIZE:
			rc = opt_size("chunk-size", optarg, &o->chunk_size);
			if (!rc && (o->chunk_size < PF_MIN_CHUNK ||
				    o->chunk_size > (256u << 20)))
				rc = cmd_usage_error(
				    "mount",
				    "--chunk-size: %s is outside 64K to 256M",
				    optarg);
			break;
		case OPT_ZSTD_LEVEL:
			rc = opt_uint("zstd-level", optarg, 0, 22, &v);
			o->zstd_level = (int)v;
			break;
		case OPT_READAHEAD:
			rc = opt_size("readahead", optarg, &o->readahead);
			break;
		case OPT_THREADS:
			rc = opt_uint("threads", optarg, 1, 1024, &v);
			o->threads = (unsigned)v;
			break;
		case OPT_MAX_CONNECTIONS:
			rc = opt_uint("max-connections", optarg, 1, 1024, &v);
			o->fetch.max_connections = (unsigned)v;
			break;
		case OPT_RETRIES:
			rc = opt_uint("retries", optarg, 0, 100, &v);
			o->fetch.retries = (unsigned)v;
			break;
		case OPT_TIMEOUT:
			rc = opt_uint("timeout", optarg, 1, 86400, &v);
			o->fetch.stall_timeout_ms = (unsigned)v * 1000;
			if (o->fetch.connect_timeout_ms >
			    o->fetch.stall_timeout_ms)
				o->fetch.connect_timeout_ms =
				    o->fetch.stall_timeout_ms;
			break;
		case OPT_MANIFEST:
			o->src.manifest = optarg;
			break;
		case OPT_CA_FILE:
			o->fetch.ca_file = optarg;
			break;
		case OPT_INSECURE:
			o->fetch.insecure = true;
			break;
		case OPT_SITE_CACHE: {
			const char *why = fetch_site_cache_check(optarg);

			if (why)
				rc = cmd_usage_error("mount",
						     "--site-cache %s: %s",
						     optarg, why);
			o->fetch.site_cache = optarg;
			break;
		}
		case OPT_NO_HEDGE:
			o->fetch.hedge = false;
			break;
		case OPT_PASSTHROUGH:
			if (!optarg || !strcmp(optarg, "on"))
				o->passthrough = OPS_PASSTHROUGH_ON;
			else if (!strcmp(optarg, "auto"))
				o->passthrough = OPS_PASSTHROUGH_AUTO;
			else if (!strcmp(optarg, "off"))
				o->passthrough = OPS_PASSTHROUGH_OFF;
			else
				return cmd_usage_error(
				    "mount",
				    "--passthrough=%s: auto, on or off",
				    optarg);
			break;
		case OPT_ENDPOINT:
			o->src.endpoint = optarg;
			break;
		case OPT_REGION:
			o->src.region = optarg;
			break;
		case OPT_NO_SIGN:
			o->src.no_sign = true;
			break;
		case OPT_PATH_STYLE:
			o->src.addressing = 1;
			break;
		case OPT_VIRTUAL_HOST:
			o->src.addressing = 2;
			break;
		case OPT_PROFILE:
			o->src.profile = optarg;
			break;
		case OPT_TOKEN_FILE:
			o->src.token_file = optarg;
			break;
		case OPT_TOKEN_COMMAND:
			o->src.token_command = optarg;
			break;
		case OPT_TOKEN_LIFETIME:
			rc = opt_uint("token-lifetime", optarg, 1, 86400, &v);
			o->src.token_lifetime = (unsigned)v;
			break;
		case OPT_TOKEN_TIMEOUT:
			rc = opt_uint("token-timeout", optarg, 1, 3600, &v);
			o->src.token_timeout = (unsigned)v;
			break;
		case OPT_ANONYMOUS:
			o->src.anonymous = true;
			break;
		case OPT_OFFLINE:
			o->offline = true;
			break;
		case OPT_ORIGIN_WAIT:
			rc = opt_uint("origin-wait", optarg, 1, 3600, &v);
			o->origin_wait_ms = (unsigned)v * 1000;
			break;
		case OPT_UID:
			rc = opt_uint("uid", optarg, 0, INT32_MAX, &o->uid);
			break;
		case OPT_GID:
			rc = opt_uint("gid", optarg, 0, INT32_MAX, &o->gid);
			break;
		case 'o':
			rc = mount_o(o, optarg);
			break;
		case 'f':
			o->foreground = true;
			break;
		case 'd':
			o->debug = o->foreground = true;
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
	o->cache_size = 10ull << 30;
	o->memory_cache = 512ull << 20;
	o->chunk_size = 4u << 20;
	o->passthrough = OPS_PASSTHROUGH_AUTO;
	o->zstd_level = 3;
	o->readahead = 256ull << 20;
	o->origin_wait_ms = 30000;
	o->uid = o->gid = -1;
	fetch_config_default(&o->fetch);

	rc = parse_options(argc, argv, o);
	if (rc)
		return rc;
	nargs = argc - optind;
	if (nargs == 2) {
		o->spec = argv[optind];
		o->mountpoint = argv[optind + 1];
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
	/* Retries stop within the wait, and so does a connect: an origin
	 * that does not answer costs about that long, once per request. */
	if (o->fetch.retry_budget_ms > o->origin_wait_ms)
		o->fetch.retry_budget_ms = o->origin_wait_ms;
	if (o->fetch.connect_timeout_ms > o->origin_wait_ms)
		o->fetch.connect_timeout_ms = o->origin_wait_ms;
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
	if (!o->threads)
		o->threads = o->fetch.max_connections;
	return 0;
}

/* DIR must be an empty directory.  @return 0 or -1 after a message. */
static int check_mountpoint(const char *dir)
{
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (stat(dir, &st)) {
		fprintf(stderr, "wharf mount: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "wharf mount: %s is not a directory\n", dir);
		return -1;
	}
	d = opendir(dir);
	if (!d) {
		fprintf(stderr, "wharf mount: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			break;
	closedir(d);
	if (de) {
		fprintf(stderr,
			"wharf mount: %s is not empty (is something mounted "
			"there already?)\n",
			dir);
		return -1;
	}
	return 0;
}

/* Unescapes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_mountinfo(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] &&
		    s[3]) {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/*
 * Finds the mount on `dir` (an absolute, resolved path) in mountinfo.
 * @return 1 when found (its "major:minor" in dev, filesystem type in
 * type), 0 when nothing is mounted there, -errno.  The last one wins: it
 * is the mount on top.
 */
static int find_mount(const char *dir, char dev[32], char type[64])
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char mnt[PATH_MAX], d[32], fstype[64];
		const char *sep;

		/* id parent major:minor root mountpoint opts ... - type */
		if (sscanf(line, "%*s %*s %31s %*s %4095s", d, mnt) != 2)
			continue;
		sep = strstr(line, " - ");
		if (!sep || sscanf(sep + 3, "%63s", fstype) != 1)
			continue;
		unescape_mountinfo(mnt);
		if (strcmp(mnt, dir))
			continue;
		found = 1;
		snprintf(dev, 32, "%s", d);
		snprintf(type, 64, "%s", fstype);
	}
	free(line);
	fclose(f);
	return found;
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
	if (find_mount(mountpoint, dev, type) != 1)
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
	struct mount_opts *o;
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
};

/* Opens everything a mount needs, up to the FUSE session (not mounted).
 * @return 0, or -1 after one line on stderr. */
static int mount_open(struct mount_state *m)
{
	struct mount_opts *o = m->o;
	struct store_config sc = {
	    .dir = o->cache_dir,
	    .max_bytes = o->cache_size,
	    .zstd_level = o->zstd_level,
	    /* Level 0: every chunk raw, as if zstd never saved enough. */
	    .min_saving_pct = o->zstd_level ? 0 : 100,
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
		fprintf(stderr,
			"wharf mount: cannot start the fetch engine: "
			"%s\n",
			strerror(-rc));
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
		rc = offline_start(m->src, m->tree);
	if (rc) {
		err_set(&err, "cannot set up the mount: %s", strerror(-rc));
		goto fail;
	}

	m->ctx = (struct ops_ctx){
	    .tree = m->tree,
	    .prefetch = m->pf,
	    .uid = o->uid >= 0 ? (uid_t)o->uid : getuid(),
	    .gid = o->gid >= 0 ? (gid_t)o->gid : getgid(),
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
		      .started_ns = now_ns()},
	};
	/* A comma in fsname would split the option string. */
	fsname = strdupf("wharf:%s", m->src->id);
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
	fprintf(stderr, "wharf mount: %s\n", err ? err : strerror(-rc));
	free(err);
	free(fsname);
	free(mopts);
	return -1;
}

/*
 * SIGHUP, SIGINT and SIGTERM: libfuse's handler ends the session loop,
 * and ours, around it, cancels the fetches in flight.  The loop joins its
 * threads before it returns, so a read waiting on an origin that trickles
 * would otherwise keep the daemon up for as long as the origin takes.
 */
static const int stop_signals[] = {SIGHUP, SIGINT, SIGTERM};
#define N_STOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))
static struct sigaction fuse_stop_action[N_STOP_SIGNALS];
static bool stop_caught[N_STOP_SIGNALS];
static volatile sig_atomic_t stop_cancel_fd = -1;

static void on_stop_signal(int sig)
{
	const int saved = errno;

	for (size_t i = 0; i < N_STOP_SIGNALS; i++)
		if (stop_signals[i] == sig)
			fuse_stop_action[i].sa_handler(sig);
	if (stop_cancel_fd >= 0)
		(void)!write(stop_cancel_fd, "", 1);
	errno = saved;
}

/*
 * After fuse_set_signal_handlers; a signal it left alone (SIGHUP under
 * nohup is ignored) stays alone.  The signals are then unblocked: a
 * launcher may have blocked them (the mask is inherited), and one sent
 * during start-up, pending until now, is taken here.
 */
static void stop_signals_catch(struct fetch_engine *fe)
{
	struct sigaction sa = {.sa_handler = on_stop_signal};
	sigset_t caught;

	/* No SA_RESTART, as libfuse: the loop's wait must end with EINTR. */
	sigemptyset(&sa.sa_mask);
	sigemptyset(&caught);
	stop_cancel_fd = fe ? fetch_engine_cancel_fd(fe) : -1;
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
	pthread_sigmask(SIG_UNBLOCK, &caught, NULL);
}

/* Before fuse_remove_signal_handlers, which removes only its own. */
static void stop_signals_release(void)
{
	for (size_t i = 0; i < N_STOP_SIGNALS; i++)
		if (stop_caught[i])
			sigaction(stop_signals[i], &fuse_stop_action[i], NULL);
	stop_cancel_fd = -1;
}

/* Undoes mount_open and the mount, in reverse order. */
static void mount_close(struct mount_state *m)
{
	if (m->handlers) {
		stop_signals_release();
		fuse_remove_signal_handlers(m->se);
	}
	if (m->mounted)
		fuse_session_unmount(m->se);
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
		offline_stop(m->src);
	tree_free(m->tree);
	store_close(m->st); /* first: it may call into the memory cache */
	chunks_free(m->cc);
	source_close(m->src);
	if (m->fe)
		fetch_engine_free(m->fe);
	fuse_opt_free_args(&m->args);
}

/* Lets go of the terminal: the parent has exited by the time it matters. */
static void detach(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

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
		tell_parent(m, 0);
		detach();
	}
	log_info("mounted %s on %s (cache %s%s%s)", m->src->id, m->mountpoint,
		 m->o->cache_dir,
		 m->o->fetch.site_cache ? "; chunk reads through the site cache "
					: "",
		 m->o->fetch.site_cache ? m->o->fetch.site_cache : "");
	return NULL;
}

/* FUSE session threads, at most and kept idle. */
#define FUSE_THREADS 64

/*
 * The mount itself: in the foreground process, or in the child of a
 * daemonizing one, which writes one byte to ready_fd (0: mounted, 1:
 * failed).  @return the exit status.
 */
static int serve(struct mount_opts *o, int ready_fd)
{
	struct mount_state m = {.o = o,
				.args = FUSE_ARGS_INIT(0, NULL),
				.ready_fd = ready_fd,
				.se_mu = PTHREAD_MUTEX_INITIALIZER};
	struct fuse_loop_config *lc = NULL;
	int rc, status = 1;

	if (!realpath(o->mountpoint, m.mountpoint)) {
		fprintf(stderr, "wharf mount: %s: %s\n", o->mountpoint,
			strerror(errno));
		goto out;
	}
	if (check_mountpoint(m.mountpoint) || mount_open(&m))
		goto out;
	if (fuse_set_signal_handlers(m.se)) {
		fprintf(stderr, "wharf mount: cannot set signal handlers\n");
		goto out;
	}
	m.handlers = true;
	stop_signals_catch(m.fe);
	if (fuse_session_mount(m.se, m.mountpoint)) {
		fprintf(stderr, "wharf mount: cannot mount on %s (see above)\n",
			m.mountpoint);
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
		fprintf(stderr, "wharf mount: out of memory\n");
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
		fprintf(stderr, "wharf mount: cannot start a thread: %s\n",
			strerror(rc));
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
	if (o.debug)
		log_set_level(WHARF_LOG_DEBUG);
	if (o.foreground) {
		rc = serve(&o, -1);
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
		rc = serve(&o, pipefd[1]);
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
				"wharf(1).\n");
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

/* ---- wharf umount ---- */

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
	rc = find_mount(dir, dev, type);
	if (rc < 0) {
		fprintf(stderr,
			"wharf umount: cannot read the mount table: "
			"%s\n",
			strerror(-rc));
		return 1;
	}
	if (rc == 0 || strcmp(type, FSTYPE)) {
		fprintf(stderr, "wharf umount: %s is not a wharf mount\n", dir);
		return 1;
	}
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
