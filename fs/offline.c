/* The mount's source, online or from its snapshot: see offline.h. */
#include "config.h"

#include "offline.h"
#include "origins.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "snapshot.h"
#include "store.h"
#include "text.h"
#include "units.h"

#define PROBE_MS 5000	   /* the first try after going offline... */
#define PROBE_MAX_MS 60000 /* ...then twice as long each time, up to this */
#define PROBE_CONNECT_MS 5000
#define SAVE_GAP_MS 2000  /* at least this between two saves... */
#define SAVE_COST_TIMES 4 /* ...and four times what the last one took */
#define FAILED_MAX 4096	  /* files named in "cannot be read" lines */

struct offline_src {
	struct source base; /* id: the backend's; fetch: the mount's */
	struct offline_config cfg;
	char *snap_path;
	struct snapshot *snap; /* the last saved listing, or NULL */
	struct store *st;      /* makes room for a save; may be NULL */
	/* The backend, or NULL until the origin has answered once (atomic;
	 * set once, freed by destroy: readers never wait on it). */
	struct source *inner;
	struct source *idsrc; /* unchecked, for the id only (offline start) */
	bool offline;	      /* atomic */
	/* Atomic: the origin answered again and the directories the
	 * snapshot gave are being listed anew, before reads go online. */
	bool relisting;

	pthread_mutex_t lock; /* all below */
	pthread_cond_t wake;
	pthread_t thread;
	bool running, stop;
	struct tree *tree;
	uint64_t saved_listings; /* tree_listings() at the last save */
	uint64_t save_ms, saved_ns; /* how long the last save took, when */
	/* Directories listed from the snapshot: listed again once online. */
	char **stale_dirs;
	size_t n_stale, cap_stale;
	/* Hashes of the files already named in a "cannot be read" line. */
	uint64_t *failed;
	size_t n_failed;
};

static const struct source_ops offline_ops;
static int probe(struct offline_src *os);

static struct offline_src *os_of(struct source *src)
{
	return (struct offline_src *)src;
}

static struct source *inner_of(struct offline_src *os)
{
	return __atomic_load_n(&os->inner, __ATOMIC_ACQUIRE);
}

static bool is_offline(struct offline_src *os)
{
	return __atomic_load_n(&os->offline, __ATOMIC_ACQUIRE);
}

bool offline_is_offline(struct source *src)
{
	return src && src->ops == &offline_ops && is_offline(os_of(src));
}

void offline_status(struct source *src, struct offline_status *out)
{
	memset(out, 0, sizeof(*out));
	if (src && src->fetch)
		fetch_get_outage(src->fetch, &out->outage);
	if (offline_is_offline(src))
		out->state = OFFLINE_SNAPSHOT;
	else if (out->outage.hosts)
		out->state = OFFLINE_OUTAGE;
	else
		out->state = OFFLINE_NO;
}

const char *offline_state_name(enum offline_state state)
{
	return state == OFFLINE_OUTAGE	   ? "outage"
	       : state == OFFLINE_SNAPSHOT ? "snapshot"
					   : "online";
}

/* Errors that say the origin is out of reach, not that the source or its
 * credentials are wrong: a snapshot may stand in for it.  Refused or
 * missing credentials and a TLS certificate not trusted (-EKEYREJECTED)
 * fail as before (--offline mounts all the same). */
static bool unreachable(int rc)
{
	return rc == -EIO || rc == -ETIMEDOUT || rc == -ECONNREFUSED ||
	       rc == -EHOSTUNREACH || rc == -ENETUNREACH;
}

/* A certificate that stopped being trusted while mounted is the reader's
 * EIO (the log said why); at mount time it fails the mount. */
static int to_reader(int rc)
{
	return rc == -EKEYREJECTED ? -EIO : rc;
}

static void go_offline(struct offline_src *os, const char *why)
{
	struct snapshot_info si;
	char age[32];

	if (__atomic_exchange_n(&os->offline, true, __ATOMIC_ACQ_REL))
		return;
	snapshot_info(os->snap, &si);
	format_age((int64_t)time(NULL) - si.saved, age, sizeof(age));
	log_warn("%s: offline (%s): serving the listing snapshot saved %s "
		 "ago (%s) and cached chunks%s",
		 os->base.id, why, age, os->snap_path,
		 os->cfg.forced ? "" : " until the origin answers");
	pthread_mutex_lock(&os->lock);
	pthread_cond_signal(&os->wake);
	pthread_mutex_unlock(&os->lock);
}

/* Keeps dir to be listed again once the origin answers. */
static void note_stale_dir(struct offline_src *os, const char *dir)
{
	char *copy = strdup(dir);

	pthread_mutex_lock(&os->lock);
	if (copy && os->n_stale == os->cap_stale) {
		size_t cap = os->cap_stale ? os->cap_stale * 2 : 64;
		char **v = realloc(os->stale_dirs, cap * sizeof(*v));

		if (v) {
			os->stale_dirs = v;
			os->cap_stale = cap;
		}
	}
	if (copy && os->n_stale < os->cap_stale) {
		os->stale_dirs[os->n_stale++] = copy;
		copy = NULL;
	}
	pthread_mutex_unlock(&os->lock);
	if (copy) {
		log_warn("%s%s: out of memory; changed files in it keep their "
			 "snapshot version until a remount",
			 os->base.id, dir);
		free(copy);
	}
}

static int offline_list_dir(struct source *src, const char *dir,
			    source_list_cb cb, void *arg)
{
	struct offline_src *os = os_of(src);
	struct source *in = inner_of(os);
	int rc;

	if (in && (!is_offline(os) ||
		   __atomic_load_n(&os->relisting, __ATOMIC_ACQUIRE))) {
		rc = in->ops->list_dir(in, dir, cb, arg);
		/* One directory may fail for reasons of its own (a 403, a
		 * bad page): only an origin that fails a probe of its root
		 * too takes the whole mount offline.  Entries the failed
		 * listing handed on already win over the snapshot's. */
		if (!unreachable(rc) || !os->snap || probe(os) == 0)
			return to_reader(rc);
		go_offline(os, "a listing failed and so did a probe of the "
			       "origin");
	}
	if (!os->snap)
		return -EIO;
	rc = snapshot_list(os->snap, dir, cb, arg);
	if (rc == -ENOENT) {
		log_error("%s%s: not in the listing snapshot, and the origin "
			  "cannot be reached",
			  src->id, dir);
		return -EIO;
	}
	if (!rc && !os->cfg.forced)
		note_stale_dir(os, dir);
	return rc;
}

static int offline_stat(struct source *src, const char *path,
			struct source_object *out)
{
	struct offline_src *os = os_of(src);
	struct source *in = inner_of(os);

	if (in && !is_offline(os))
		return to_reader(in->ops->stat(in, path, out));
	return os->snap ? snapshot_stat(os->snap, path, out) : -EIO;
}

/* One line per file that a read needs from an unreachable origin: a
 * reader that retries, or read-ahead over the same file, adds none. */
static void note_failed_read(struct offline_src *os, const char *path)
{
	uint64_t h = store_hash64(path, strlen(path), 0) | 1;
	bool named = false, full = false;

	pthread_mutex_lock(&os->lock);
	for (size_t i = 0; i < os->n_failed && !named; i++)
		named = os->failed[i] == h;
	if (!named && os->n_failed < FAILED_MAX) {
		if (!os->failed)
			os->failed = calloc(FAILED_MAX, sizeof(*os->failed));
		if (os->failed)
			os->failed[os->n_failed++] = h;
		full = os->n_failed == FAILED_MAX;
	} else if (!named) {
		named = true; /* past the cap: said once, below */
	}
	pthread_mutex_unlock(&os->lock);
	if (!named)
		log_error("%s%s: not cached, and the origin cannot be reached "
			  "(offline): reads of it fail with EIO%s",
			  os->base.id, path,
			  full ? "; further files are not named" : "");
}

static int offline_prepare_read(struct source *src, const char *path,
				const char *version, uint64_t off, uint64_t len,
				struct source_read *rd)
{
	struct offline_src *os = os_of(src);
	struct source *in = inner_of(os);

	if (in && !is_offline(os))
		return in->ops->prepare_read(in, path, version, off, len, rd);
	note_failed_read(os, path);
	return -ENOLINK;
}

static bool offline_auth_refused(struct source *src, unsigned serial)
{
	struct source *in = inner_of(os_of(src));

	return in && in->ops->auth_refused && in->ops->auth_refused(in, serial);
}

static void join_thread(struct offline_src *os)
{
	pthread_mutex_lock(&os->lock);
	os->stop = true;
	pthread_cond_signal(&os->wake);
	pthread_mutex_unlock(&os->lock);
	if (os->running)
		pthread_join(os->thread, NULL);
	os->running = false;
}

static void offline_destroy(struct source *src)
{
	struct offline_src *os = os_of(src);

	join_thread(os);
	source_close(os->inner);
	source_close(os->idsrc);
	snapshot_free(os->snap);
	for (size_t i = 0; i < os->n_stale; i++)
		free(os->stale_dirs[i]);
	free(os->stale_dirs);
	free(os->failed);
	free(os->snap_path);
	pthread_mutex_destroy(&os->lock);
	pthread_cond_destroy(&os->wake);
	free(os);
}

static const struct source_ops offline_ops = {
    .scheme = "offline",
    .list_dir = offline_list_dir,
    .stat = offline_stat,
    .prepare_read = offline_prepare_read,
    .destroy = offline_destroy,
    .auth_refused = offline_auth_refused,
};

/* ---- the thread: saves, probes ---- */

/* A save slower than this is skipped at a signal's stop (offline_stop). */
#define HURRY_SAVE_MS 500

/* Saves the snapshot when the tree listed something since the last save.
 * @return how long it took, in ms (0 when nothing was saved). */
static uint64_t save_if_changed(struct offline_src *os)
{
	uint64_t gen = tree_listings(os->tree), t0 = now_ns();
	char *err = NULL;
	int rc;

	if (gen == os->saved_listings || is_offline(os))
		return 0;
	rc = snapshot_save(os->snap_path, os->base.id, os->tree, os->snap,
			   os->st, &err);
	if (rc)
		log_warn("%s (the mount goes on; a remount while the origin "
			 "is down may lack the newest listings)",
			 err ? err : strerror(-rc));
	else
		os->saved_listings = gen;
	free(err);
	os->saved_ns = now_ns();
	os->save_ms = (os->saved_ns - t0) / 1000000;
	return os->save_ms;
}

/* One try of the origin, on an engine of its own that does not retry, so
 * that a dead origin costs one connect timeout.  @return 0 when the source
 * opens (it listed its root or read its manifest). */
static int probe(struct offline_src *os)
{
	struct fetch_config fc = *os->cfg.fetch;
	struct fetch_engine *fe = NULL;
	struct source *s = NULL;
	char *err = NULL;
	int rc;

	fc.retries = 0;
	fc.hedge = false;
	if (fc.connect_timeout_ms > PROBE_CONNECT_MS)
		fc.connect_timeout_ms = PROBE_CONNECT_MS;
	rc = fetch_engine_new(&fc, &fe);
	if (!rc)
		rc = source_open(os->cfg.spec, os->cfg.opt, fe, &s, &err);
	if (rc)
		log_debug("%s: still unreachable: %s", os->base.id,
			  err ? err : strerror(-rc));
	source_close(s);
	if (fe)
		fetch_engine_free(fe);
	free(err);
	return rc;
}

/*
 * Lists again the directories the snapshot gave, as the origin came back
 * (and those a listing took from it meanwhile, at the next turn), so that
 * files changed while it was away are read in their new version.
 */
static void revalidate_stale(struct offline_src *os)
{
	uint64_t changed = 0;
	char **dirs;
	size_t n;
	int rc;

	pthread_mutex_lock(&os->lock);
	dirs = os->stale_dirs;
	n = os->n_stale;
	os->stale_dirs = NULL;
	os->n_stale = os->cap_stale = 0;
	pthread_mutex_unlock(&os->lock);
	for (size_t i = 0; i < n; i++) {
		rc = tree_revalidate(os->tree, dirs[i]);
		if (rc > 0)
			changed += (uint64_t)rc;
		else if (rc < 0)
			log_warn("%s%s: cannot list it again (%s); its files "
				 "keep their snapshot version until a remount",
				 os->base.id, dirs[i], strerror(-rc));
		free(dirs[i]);
	}
	free(dirs);
	if (n)
		log_info("%s: %llu files changed while the origin was away; "
			 "they are read in their new version",
			 os->base.id, (unsigned long long)changed);
}

/* The origin answered a probe: opens the backend on the mount's engine
 * (once), lists again what the snapshot gave, and goes online. */
static void go_online(struct offline_src *os)
{
	struct source *in = inner_of(os);
	char *err = NULL;
	int rc;

	if (!in) {
		rc = source_open(os->cfg.spec, os->cfg.opt, os->base.fetch, &in,
				 &err);
		if (rc) {
			log_debug("%s: %s", os->base.id,
				  err ? err : strerror(-rc));
			free(err);
			return;
		}
		__atomic_store_n(&os->inner, in, __ATOMIC_RELEASE);
	}
	/* Files changed meanwhile get their new version before the first
	 * read goes to the origin, so none mixes the two. */
	__atomic_store_n(&os->relisting, true, __ATOMIC_RELEASE);
	revalidate_stale(os);
	pthread_mutex_lock(&os->lock);
	os->n_failed = 0;
	pthread_mutex_unlock(&os->lock);
	__atomic_store_n(&os->offline, false, __ATOMIC_RELEASE);
	__atomic_store_n(&os->relisting, false, __ATOMIC_RELEASE);
	log_warn("%s answers again: online", os->base.id);
}

static void *offline_main(void *arg)
{
	struct offline_src *os = arg;
	const unsigned first_ms =
	    os->cfg.probe_ms ? os->cfg.probe_ms : PROBE_MS;
	/* A failed try logs a line: a long outage costs one a minute. */
	uint64_t next_save = 0, next_probe = 0, probe_ms = 0;

	pthread_mutex_lock(&os->lock);
	while (!os->stop) {
		struct timespec ts;
		uint64_t now = now_ns() / 1000000;

		pthread_mutex_unlock(&os->lock);
		if (now >= next_save) {
			uint64_t took = save_if_changed(os);

			next_save = now + SAVE_GAP_MS + SAVE_COST_TIMES * took;
		}
		if (!is_offline(os) || os->cfg.forced) {
			probe_ms = 0;
		} else if (!probe_ms) {
			/* It just failed: the first try waits. */
			probe_ms = first_ms;
			next_probe = now + probe_ms;
		} else if (now >= next_probe) {
			if (probe(os) == 0)
				go_online(os);
			probe_ms = probe_ms * 2 < PROBE_MAX_MS ? probe_ms * 2
							       : PROBE_MAX_MS;
			next_probe = now_ns() / 1000000 + probe_ms;
		}
		if (!is_offline(os) && os->tree)
			revalidate_stale(os);
		pthread_mutex_lock(&os->lock);
		if (os->stop)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&os->wake, &os->lock, &ts);
	}
	pthread_mutex_unlock(&os->lock);
	return NULL;
}

int offline_start(struct source *src, struct tree *tree, struct store *st)
{
	struct offline_src *os = os_of(src);
	int rc;

	os->tree = tree;
	os->st = st;
	rc = pthread_create(&os->thread, NULL, offline_main, os);
	if (rc)
		return -rc;
	os->running = true;
	/* At the start an origin out of reach is a mount from the snapshot
	 * after --origin-wait; from here on it is an outage, waited for. */
	fetch_outage_arm(src->fetch);
	return 0;
}

void offline_stop(struct source *src, bool hurry)
{
	struct offline_src *os = os_of(src);

	join_thread(os);
	/* A stop signal promises an end within 2 s: a snapshot that took
	 * longer than HURRY_SAVE_MS to save (millions of files) is left as
	 * the last periodic save made it. */
	if (os->tree && hurry && os->saved_listings &&
	    os->save_ms > HURRY_SAVE_MS &&
	    tree_listings(os->tree) != os->saved_listings)
		log_info("%s: stopping: the listing snapshot saved %llu s ago "
			 "is kept as it is (saving it takes about %llu ms); "
			 "listings since are not in it",
			 os->base.id,
			 (unsigned long long)((now_ns() - os->saved_ns) /
					      1000000000u),
			 (unsigned long long)os->save_ms);
	else if (os->tree)
		save_if_changed(os);
	os->tree = NULL;
}

/* ---- opening ---- */

/*
 * Loads the snapshot of os's source.  Online, a missing or bad one only
 * means there is nothing to merge (a warning for a bad one); offline it
 * must be there.  @return 0 or -errno with *err.
 */
static int load_snapshot(struct offline_src *os, bool needed, char **err)
{
	char *lerr = NULL;
	int rc;

	os->snap_path = store_snapshot_path(os->cfg.cache_dir, os->base.id);
	if (!os->snap_path)
		return -ENOMEM;
	rc = snapshot_load(os->snap_path, os->base.id, &os->snap, &lerr);
	if (rc == -ENOENT)
		err_set(err,
			"the cache %s holds no listing snapshot of %s "
			"(a mount of it while it answers makes one)",
			os->cfg.cache_dir, os->base.id);
	else if (rc)
		err_set(err, "%s", lerr ? lerr : strerror(-rc));
	if (rc && !needed && rc != -ENOENT)
		log_warn("%s; the next save replaces it", *err);
	free(lerr);
	return rc;
}

/* What fixes the setup error rc that opening the source met, or "". */
static const char *setup_fix(const struct offline_config *cfg, int rc)
{
	if (rc == -EKEYREJECTED)
		return "; the origin's TLS certificate is not trusted here: "
		       "give the CA certificate that signed it with --ca-file "
		       "FILE "
		       "(--insecure turns the check off, and anyone on the "
		       "way could then read and change what the mount serves)";
	if (rc == -EACCES && !cfg->opt->manifest)
		return "; the origin refused to list: give credentials that "
		       "may list it, or name the objects with --manifest "
		       "URL|FILE";
	return "";
}

int offline_open(const struct offline_config *cfg, struct fetch_engine *fe,
		 struct source **out, char **err)
{
	struct offline_src *os = calloc(1, sizeof(*os));
	struct source_options idopt = *cfg->opt;
	char *oerr = NULL, *serr = NULL;
	const char *fix = "";
	int rc = 0;

	*out = NULL;
	if (!os)
		return -ENOMEM;
	os->base.ops = &offline_ops;
	os->base.fetch = fe;
	os->cfg = *cfg;
	pthread_mutex_init(&os->lock, NULL);
	pthread_cond_init(&os->wake, NULL);
	if (!cfg->forced)
		rc = source_open(cfg->spec, cfg->opt, fe, &os->inner, &oerr);
	if (!cfg->forced && !rc) {
		os->base.id = os->inner->id;
		if (load_snapshot(os, false, &serr) == -ENOMEM)
			rc = -ENOMEM;
		goto out;
	}
	if (!cfg->forced && !unreachable(rc)) {
		fix = setup_fix(cfg, rc);
		goto out;
	}
	/* The id names the snapshot; finding it asks nothing of anyone. */
	idopt.no_check = true;
	rc = source_open(cfg->spec, &idopt, fe, &os->idsrc, &serr);
	if (rc)
		goto out;
	os->base.id = os->idsrc->id;
	rc = load_snapshot(os, true, &serr);
	if (rc)
		goto out;
	if (cfg->forced)
		go_offline(os, "--offline");
	else
		go_offline(os, oerr);
out:
	if (rc) {
		if (oerr && serr)
			err_set(err, "%s; %s", oerr, serr);
		else
			err_set(err, "%s%s",
				oerr   ? oerr
				: serr ? serr
				       : strerror(-rc),
				fix);
		offline_destroy(&os->base);
	} else {
		*out = &os->base;
	}
	free(oerr);
	free(serr);
	return rc;
}
