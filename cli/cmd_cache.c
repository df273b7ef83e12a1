/*
 * `wharf cache stats|ls|verify|prune|clear`: parses, calls the store
 * (fs/cachedir.c is the one place that knows the cache layout) and
 * snapshot.c (what a listing snapshot holds), prints.
 *
 * stats, ls and verify work on a cache that a mount is using: they only
 * read, and verify removes nothing but corrupt files (the mount forgets a
 * chunk whose file is gone at its next read of it).  prune and clear take
 * the cache's lock like a mount does, so they refuse a mounted cache.
 *
 * A cache and its lock file are its owner's to lay out, and root may be
 * the one who asks: stats, ls and verify run as the cache's owner, stats
 * reads a mount's counters only from that owner's live wharf mount, and
 * everything a cache or a mount says is escaped before it is printed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "fileio.h"
#include "jsonw.h"
#include "mountinfo.h"
#include "snapshot.h"
#include "stats_fmt.h"
#include "store.h"
#include "text.h"
#include "units.h"

static void usage(FILE *out)
{
	char *def = store_default_dir();

	fprintf(out,
		"Usage: wharf cache COMMAND [--cache-dir DIR] [OPTIONS]\n\n"
		"Inspects and maintains a wharf chunk cache.\n\n"
		"Commands:\n"
		"  stats [--json]         chunks and bytes on disk; the listing "
		"snapshots;\n"
		"                         the state of the mount using the "
		"cache: hits, cap,\n"
		"                         evictions, checksums (only the cache "
		"owner's own\n"
		"                         live wharf mount)\n"
		"  ls                     one line per chunk: key, bytes on "
		"disk, raw bytes,\n"
		"                         codec, last use\n"
		"  verify                 check every chunk, and every object "
		"whose origin\n"
		"                         checksum is on record; report and "
		"remove bad ones\n"
		"                         (exit status 1 when any was bad)\n"
		"  prune --max-size SIZE  evict the least recently used "
		"chunks down to SIZE\n"
		"  clear                  remove every chunk and listing "
		"snapshot\n\n"
		"Options:\n"
		"  --cache-dir DIR  the cache (default: %s)\n"
		"  --json           stats: print JSON\n"
		"  --max-size SIZE  prune: the size to keep (K, M, G, T "
		"suffixes)\n"
		"  -h, --help       show this help\n\n"
		"prune and clear refuse a cache that a mount is using.  stats, "
		"ls and verify\n"
		"read only your own cache; root reads one as its owner.\n",
		def ? def : "(none: no home directory)");
	free(def);
}

/* The most of a mount's .wharf/stats that is read (they are a few KiB). */
#define MOUNT_STATS_MAX (1u << 20)

struct opts {
	const char *sub;
	char *dir;
	bool json;
	bool has_max;
	uint64_t max_size;
};

/* ---- stats ---- */

struct totals {
	uint64_t chunks, disk, raw, zstd, packed, unreadable;
};

static int add_entry(const struct store_entry *e, void *arg)
{
	struct totals *t = arg;

	if (e->error) {
		t->unreadable++;
		return 0;
	}
	t->chunks++;
	t->disk += e->disk_bytes;
	t->raw += e->raw_bytes;
	t->zstd += e->zstd;
	t->packed += e->pack != NULL;
	return 0;
}

/* ---- whose cache, whose mount ---- */

/* Text from a cache or a mount, escaped for a terminal (see str_escape);
 * keep: the control characters left as they are.  Never NULL. */
static char *shown(const char *s, const char *keep)
{
	char *e = s ? str_escape(s, keep, false) : NULL;

	if (s && !e) {
		fputs("wharf cache: out of memory\n", stderr);
		exit(1);
	}
	return e ? e : strdupf("%s", "");
}

/* The real and effective uid of process pid (both must be uid).
 * @return 0, -ESRCH when it is gone, -EPERM when they differ. */
static int process_uid_is(pid_t pid, uid_t uid, uid_t *found)
{
	char path[64], line[256];
	unsigned long r = 0, e = 0;
	bool got = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	while (!got && fgets(line, sizeof(line), f))
		got = sscanf(line, "Uid: %lu %lu", &r, &e) == 2;
	fclose(f);
	if (!got)
		return -ESRCH;
	*found = (uid_t)(r != uid ? r : e);
	return r == uid && e == uid ? 0 : -EPERM;
}

/*
 * The cache must be the caller's: its owner, or root.  Root reads it as
 * its owner from here on (the owner's uid and gid, no other group), so
 * that nothing the owner laid out in it, a link to /etc/shadow say, can
 * show what the owner could not read.  o->dir becomes the resolved path.
 * @return 0 with *owner set, or 1 after a message.
 */
static int become_owner(struct opts *o, uid_t *owner)
{
	char *real = realpath(o->dir, NULL);
	const uid_t me = geteuid();
	struct stat st;

	if (!real || stat(real, &st)) {
		fprintf(stderr, "wharf cache %s: %s: %s\n", o->sub, o->dir,
			strerror(errno));
		free(real);
		return 1;
	}
	free(o->dir);
	o->dir = real;
	*owner = st.st_uid;
	if (st.st_uid == me)
		return 0;
	if (me != 0) {
		fprintf(stderr,
			"wharf cache %s: %s belongs to uid %u, not to you: run "
			"this as its owner (or as root)\n",
			o->sub, o->dir, (unsigned)st.st_uid);
		return 1;
	}
	if (setgroups(0, NULL) || setresgid(st.st_gid, st.st_gid, st.st_gid) ||
	    setresuid(st.st_uid, st.st_uid, st.st_uid)) {
		fprintf(stderr,
			"wharf cache %s: cannot take the identity of %s's owner "
			"(uid %u): %s\n",
			o->sub, o->dir, (unsigned)st.st_uid, strerror(errno));
		return 1;
	}
	return 0;
}

/*
 * The live counters of the mount that holds the cache, from its
 * MOUNTPOINT/.wharf/stats; NULL when the lock names no mountpoint, or
 * with *why saying why they may not be read.  The lock file is
 * the owner's to write, so what it names is checked before anything is
 * read: the process runs as the cache's owner, MOUNTPOINT is a wharf mount
 * in that process's mount table, the file is a regular one on that very
 * mount, reached through no link.
 */
static char *read_mount_stats(pid_t pid, const char *mp, uid_t owner,
			      char **why)
{
	char dev[32], type[64], *path, *buf;
	unsigned maj, min;
	struct stat st;
	ssize_t r = 0;
	size_t n = 0;
	uid_t uid;
	int fd, rc;

	*why = NULL;
	if (!mp) /* a cache held by no mount: prune, another tool */
		return NULL;
	if (pid <= 0 || mp[0] != '/') {
		*why = strdupf("the lock names no process or no absolute "
			       "path");
		return NULL;
	}
	rc = process_uid_is(pid, owner, &uid);
	if (rc == -ESRCH) {
		*why = strdupf("process %d is not running", (int)pid);
		return NULL;
	}
	if (rc) {
		*why = strdupf("process %d runs as uid %u, not as the "
			       "cache's owner (uid %u)",
			       (int)pid, (unsigned)uid, (unsigned)owner);
		return NULL;
	}
	if (mountinfo_find_pid(pid, mp, dev, type) != 1 ||
	    strcmp(type, WHARF_FSTYPE) ||
	    sscanf(dev, "%u:%u", &maj, &min) != 2) {
		*why = strdupf("it is not a wharf mount of process %d",
			       (int)pid);
		return NULL;
	}
	path = strdupf("%s/.wharf/stats", mp);
	fd = open_nofollow(path, O_RDONLY);
	free(path);
	if (fd < 0 || fstat(fd, &st) || st.st_dev != makedev(maj, min)) {
		*why = strdupf(
		    "its .wharf/stats %s",
		    fd == -ELOOP    ? "is reached through a link"
		    : fd == -EINVAL ? "is not a regular file"
		    : fd < 0	    ? strerror(-fd)
				    : "is not on the mount");
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	/* Stats are a few kilobytes; the cap bounds a stranger's file. */
	buf = malloc(MOUNT_STATS_MAX + 1);
	while (buf && n < MOUNT_STATS_MAX &&
	       ((r = read(fd, buf + n, MOUNT_STATS_MAX - n)) > 0 ||
		(r < 0 && errno == EINTR)))
		n += r > 0 ? (size_t)r : 0;
	close(fd);
	if (!buf || r < 0) {
		*why = strdupf("its .wharf/stats: %s",
			       buf ? strerror(errno) : "out of memory");
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* One snapshot of the cache, as a line or a JSON object (w set). */
struct snap_print {
	struct jsonw *w;
	unsigned n;
};

static int print_snapshot(void *arg, const char *path)
{
	struct snap_print *p = arg;
	struct snapshot *s = NULL;
	struct snapshot_info si;
	char *err = NULL, age[32], *where = shown(path, ""), *what;
	int rc = snapshot_load(path, NULL, &s, &err);

	if (p->w) {
		jsonw_object(p->w, NULL, JSONW_INLINE);
		jsonw_str(p->w, "path", where);
	}
	p->n++;
	if (rc) {
		what = shown(err ? err : strerror(-rc), "");
		if (p->w) {
			jsonw_str(p->w, "error", what);
			jsonw_end(p->w);
		} else {
			printf("%s\n", what);
		}
		free(what);
		free(where);
		free(err);
		return 0;
	}
	snapshot_info(s, &si);
	what = shown(si.source, "");
	if (p->w) {
		jsonw_str(p->w, "source", what);
		jsonw_i64(p->w, "saved", si.saved);
		jsonw_u64(p->w, "directories", si.dirs);
		jsonw_u64(p->w, "entries", si.entries);
		jsonw_end(p->w);
	} else {
		printf("listing snapshot of %s: %llu directories, %llu "
		       "entries, saved %s ago (%s)\n",
		       what, (unsigned long long)si.dirs,
		       (unsigned long long)si.entries,
		       format_age((int64_t)time(NULL) - si.saved, age,
				  sizeof(age)),
		       where);
	}
	free(what);
	free(where);
	snapshot_free(s);
	return 0;
}

/* The listing snapshots: a line each, or the member "snapshots" of w. */
static void print_snapshots(const struct opts *o, struct jsonw *w)
{
	struct snap_print p = {.w = w};
	char *err = NULL;
	int rc;

	if (w)
		jsonw_array(w, "snapshots", JSONW_INLINE);
	rc = snapshot_each(o->dir, print_snapshot, &p, &err);
	if (w)
		jsonw_end(w);
	else if (!p.n && !rc)
		printf("no listing snapshots\n");
	if (rc) {
		char *what = shown(err ? err : strerror(-rc), "");

		fprintf(stderr, "wharf cache stats: %s\n", what);
		free(what);
		free(err);
	}
}

/* The live mount's stats, parsed for stats_summary; NULL after a
 * message when they are not a mount's stats. */
static struct stats_doc *parse_live(const char *live, const char *where)
{
	struct stats_doc *d = malloc(sizeof(*d));
	char *err = NULL, *what;

	if (d && !stats_doc_parse(d, live, strlen(live), &err)) {
		free(err);
		return d;
	}
	what = shown(err ? err : "out of memory", "");
	fprintf(stderr, "wharf cache stats: %s/.wharf/stats: %s\n", where,
		what);
	free(what);
	free(err);
	free(d);
	return NULL;
}

static int do_stats(const struct opts *o, uid_t owner)
{
	struct totals t = {0};
	char *err = NULL, *mp = NULL, *live = NULL, *why = NULL;
	char *dir = shown(o->dir, ""), *where, a[32], b[32];
	pid_t pid = 0;
	bool mounted;
	int rc;

	rc = store_walk(o->dir, 0, add_entry, &t, &err);
	if (rc) {
		where = shown(err, "");
		fprintf(stderr, "wharf cache stats: %s\n", where);
		free(where);
		free(err);
		free(dir);
		return 1;
	}
	mounted = store_lock_holder(o->dir, &pid, &mp) == 0;
	if (mounted)
		live = read_mount_stats(pid, mp, owner, &why);
	where = shown(mp, "");
	if (o->json) {
		struct jsonw w;
		char *doc = live ? str_escape(live, "\t\n\r", true) : NULL;

		jsonw_init(&w, stdout);
		jsonw_object(&w, NULL, JSONW_INLINE);
		jsonw_str(&w, "cache_dir", dir);
		jsonw_u64(&w, "chunks", t.chunks);
		jsonw_u64(&w, "bytes_on_disk", t.disk);
		jsonw_u64(&w, "bytes_raw", t.raw);
		jsonw_u64(&w, "zstd_chunks", t.zstd);
		jsonw_u64(&w, "packed_chunks", t.packed);
		jsonw_u64(&w, "unreadable", t.unreadable);
		jsonw_bool(&w, "mounted", mounted);
		print_snapshots(o, &w);
		if (mounted) {
			jsonw_i64(&w, "pid", pid);
			jsonw_str(&w, "mountpoint", mp ? where : NULL);
			/* The mount's own JSON, as it wrote it but for
			 * what a terminal would act on. */
			if (jsonw_raw(&w, "mount", doc) && doc)
				fprintf(stderr,
					"wharf cache stats: %s/.wharf/stats "
					"is not one JSON value; \"mount\" is "
					"null\n",
					where);
		}
		jsonw_end(&w);
		free(doc);
	} else {
		printf("cache directory: %s\n", dir);
		printf("%llu chunks, %s on disk, %s raw, %llu compressed",
		       (unsigned long long)t.chunks,
		       format_size(t.disk, a, sizeof(a)),
		       format_size(t.raw, b, sizeof(b)),
		       (unsigned long long)t.zstd);
		if (t.packed)
			printf(", %llu in packs", (unsigned long long)t.packed);
		if (t.unreadable)
			printf(", %llu unreadable",
			       (unsigned long long)t.unreadable);
		printf("\n");
		print_snapshots(o, NULL);
		struct stats_doc *d = live ? parse_live(live, where) : NULL;

		if (!mounted)
			printf("not mounted\n");
		else
			printf("in use by wharf process %d%s%s%s\n", (int)pid,
			       mp ? ", mounted on " : "", where, d ? ":" : "");
		if (d)
			stats_summary(d);
		free(d);
	}
	if (why) {
		char *what = shown(why, "");

		fprintf(stderr,
			"wharf cache stats: not reading the live counters of "
			"the mount on %s: %s\n",
			where, what);
		free(what);
	}
	rc = why ? 1 : 0;
	free(why);
	free(where);
	free(live);
	free(mp);
	free(dir);
	return rc;
}

/* ---- ls, verify ---- */

static int print_entry(const struct store_entry *e, void *arg)
{
	char hex[33], when[32];
	const time_t t = (time_t)(e->atime_ns / 1000000000);
	struct tm tm;

	(void)arg;
	store_key_hex(&e->key, hex);
	if (e->error) {
		printf("%s %llu - bad: %s\n", hex,
		       (unsigned long long)e->disk_bytes, e->why);
		return 0;
	}
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%s %llu %llu %s %s\n", hex, (unsigned long long)e->disk_bytes,
	       (unsigned long long)e->raw_bytes, e->zstd ? "zstd" : "raw",
	       when);
	return 0;
}

struct vtally {
	uint64_t ok, bad, removed;
	uint64_t objects, objects_bad, objects_partial, objects_unreadable;
};

static int verify_entry(const struct store_entry *e, void *arg)
{
	struct vtally *v = arg;
	char hex[33];

	if (!e->error) {
		v->ok++;
		return 0;
	}
	store_key_hex(&e->key, hex);
	v->bad++;
	v->removed += e->removed;
	printf("%s: chunk %s is bad (%s)%s\n", e->path, hex, e->why,
	       e->removed ? "; removed" : "");
	return 0;
}

/* An object on record, checked against its origin's checksum: only
 * what is wrong is printed. */
static int verify_object(const struct store_sum_check *c, void *arg)
{
	struct vtally *v = arg;

	switch (c->state) {
	case 0:
		v->objects++;
		break;
	case -ENOENT: /* partly evicted: nothing to check */
		v->objects_partial++;
		break;
	case -EBADMSG:
		v->objects++;
		v->objects_bad++;
		printf("%s%s (version %s): its cached bytes give %s, not the "
		       "origin's %s%s\n",
		       c->sum.source, c->sum.path, c->sum.version, c->got,
		       c->sum.digest,
		       c->removed ? "; its chunks removed, a mount fetches it "
				    "again"
				  : "");
		break;
	default:
		v->objects_unreadable++;
		printf("%s%s (version %s): not checked against the origin's "
		       "%s: %s\n",
		       c->sum.source, c->sum.path, c->sum.version,
		       c->sum.digest, c->why);
		break;
	}
	return 0;
}

static int do_walk(const struct opts *o)
{
	const bool verify = !strcmp(o->sub, "verify");
	struct vtally v = {0};
	char *err = NULL;
	int rc;

	if (verify) {
		rc = store_walk(o->dir, STORE_WALK_VERIFY, verify_entry, &v,
				&err);
		if (!rc)
			rc = store_sums_verify(o->dir, verify_object, &v, &err);
	} else
		rc = store_walk(o->dir, 0, print_entry, NULL, &err);
	if (rc) {
		fprintf(stderr, "wharf cache %s: %s\n", o->sub, err);
		free(err);
		return 1;
	}
	if (!verify)
		return 0;
	printf("%llu chunks checked: %llu good, %llu bad, %llu removed\n",
	       (unsigned long long)(v.ok + v.bad), (unsigned long long)v.ok,
	       (unsigned long long)v.bad, (unsigned long long)v.removed);
	printf("%llu objects checked against their origin's checksum: %llu "
	       "good, %llu bad; %llu not cached whole, %llu unreadable\n",
	       (unsigned long long)v.objects,
	       (unsigned long long)(v.objects - v.objects_bad),
	       (unsigned long long)v.objects_bad,
	       (unsigned long long)v.objects_partial,
	       (unsigned long long)v.objects_unreadable);
	return v.bad || v.objects_bad ? 1 : 0;
}

/* ---- prune, clear ---- */

static int do_prune(const struct opts *o)
{
	struct store_config cfg = {.dir = o->dir};
	struct store *st = NULL;
	uint64_t chunks = 0, bytes = 0, snaps = 0;
	char *err = NULL, buf[32];
	int rc;

	rc = store_open(&cfg, &st, &err);
	if (rc) {
		fprintf(stderr, "wharf cache %s: %s%s\n", o->sub, err,
			rc == -EBUSY ? "; unmount it first" : "");
		free(err);
		return 1;
	}
	rc = store_prune(st, o->has_max ? o->max_size : 0, &chunks, &bytes);
	if (rc) {
		fprintf(stderr, "wharf cache %s: %s: %s\n", o->sub, o->dir,
			strerror(-rc));
		store_close(st);
		return 1;
	}
	/* Under the lock still: no mount is saving one meanwhile. */
	if (!o->has_max)
		rc = snapshot_clear(o->dir, &snaps, &err);
	store_close(st);
	printf("removed %llu chunks, %s", (unsigned long long)chunks,
	       format_size(bytes, buf, sizeof(buf)));
	if (!o->has_max)
		printf(", %llu listing snapshots", (unsigned long long)snaps);
	printf("\n");
	if (rc) {
		fprintf(stderr, "wharf cache %s: %s\n", o->sub,
			err ? err : strerror(-rc));
		free(err);
		return 1;
	}
	return 0;
}

/*
 * Every command refuses a directory that is not a cache, before it looks
 * further: store_open would make one of it (DIR/lock, DIR/chunks/00..ff), so
 * a typo like --cache-dir ~ would fill that directory.
 */
static int check_cache_dir(const struct opts *o)
{
	if (access(o->dir, F_OK)) {
		fprintf(stderr, "wharf cache %s: %s: %s\n", o->sub, o->dir,
			strerror(errno));
		return 1;
	}
	if (!store_is_cache(o->dir)) {
		fprintf(stderr,
			"wharf cache %s: %s is not a wharf cache directory\n",
			o->sub, o->dir);
		return 1;
	}
	return 0;
}

int cmd_cache(int argc, char **argv)
{
	enum { OPT_DIR = 256, OPT_JSON, OPT_MAX };
	static const struct option longopts[] = {
	    {"cache-dir", required_argument, NULL, OPT_DIR},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"max-size", required_argument, NULL, OPT_MAX},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const char *const subs[] = {"stats", "ls", "verify", "prune",
					   "clear"};
	struct opts o = {0};
	uid_t owner = 0;
	int c, rc;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (!strcmp(argv[1], subs[i]))
			o.sub = subs[i];
	if (!o.sub)
		return cmd_usage_error("cache", "unknown command '%s'",
				       argv[1]);
	optind = 1;
	opterr = 0;
	rc = -1;
	while (rc < 0 && (c = getopt_long(argc - 1, argv + 1, ":h", longopts,
					  NULL)) != -1) {
		switch (c) {
		case OPT_DIR:
			free(o.dir);
			o.dir = strdup(optarg);
			break;
		case OPT_JSON:
			if (strcmp(o.sub, "stats"))
				rc = cmd_usage_error(
				    "cache", "--json goes with stats only");
			o.json = true;
			break;
		case OPT_MAX:
			if (strcmp(o.sub, "prune"))
				rc = cmd_usage_error(
				    "cache", "--max-size goes with prune only");
			else if (parse_size(optarg, &o.max_size))
				rc = cmd_usage_error(
				    "cache", "--max-size: bad size '%s'",
				    optarg);
			o.has_max = true;
			break;
		case 'h':
			usage(stdout);
			rc = 0;
			break;
		default:
			rc = cmd_bad_option("cache", c, argv + 1, longopts);
		}
	}
	if (rc < 0 && optind < argc - 1)
		rc = cmd_usage_error("cache", "unexpected argument '%s'",
				     argv[optind + 1]);
	if (rc < 0 && !strcmp(o.sub, "prune") && !o.has_max)
		rc = cmd_usage_error("cache", "prune needs --max-size SIZE");
	if (rc >= 0)
		goto out;
	if (!o.dir)
		o.dir = store_default_dir();
	if (!o.dir) {
		fprintf(stderr, "wharf cache: %s\n",
			errno == ENOENT ? "no home directory to keep a cache "
					  "in: give --cache-dir DIR"
					: "out of memory");
		return 1;
	}
	/* The commands that only read: as the cache's owner, who alone
	 * may be able to look inside it. */
	rc = 0;
	if (strcmp(o.sub, "prune") && strcmp(o.sub, "clear"))
		rc = become_owner(&o, &owner);
	if (!rc)
		rc = check_cache_dir(&o);
	if (rc)
		goto out;
	if (!strcmp(o.sub, "stats"))
		rc = do_stats(&o, owner);
	else if (!strcmp(o.sub, "ls") || !strcmp(o.sub, "verify"))
		rc = do_walk(&o);
	else
		rc = do_prune(&o);
out:
	free(o.dir);
	return rc;
}
