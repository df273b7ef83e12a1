#ifndef WHARF_FS_OFFLINE_H
#define WHARF_FS_OFFLINE_H
/*
 * offline: the source a mount uses, a layer over the backend's (http, s3,
 * gs) that keeps the listing snapshot current and stands in for the origin
 * while it cannot be reached.
 *
 * Online, listings and reads go to the backend, and a thread saves what
 * the tree has listed to the snapshot a little after it changes (and once
 * more when the mount stops).  Offline (the origin could not be reached at
 * mount time, or a listing failed for want of it, or --offline), listings
 * come from the snapshot and a read that needs the origin fails at once
 * with -ENOLINK (one log line per file; readers see EIO); cached chunks
 * are served as always.  Unless forced, the thread tries the origin after
 * 5 seconds, then twice as long each time up to a minute, and goes back
 * online when it answers, without a remount; it first lists again the
 * directories the snapshot gave and takes the new version of each file
 * that changed meanwhile (tree_revalidate).
 *
 * The snapshot stays in memory while mounted (about as large as its file):
 * online it is merged into each save, offline it is the listing.
 *
 * An origin that stops answering while mounted is the other way of being
 * offline: an outage (fetch.h, "Outages").  Listings and reads keep going
 * to the backend, and those the cache cannot answer wait for the origin,
 * up to --outage-wait, instead of failing.  offline_status says which of
 * the two a mount is in: stats show both as offline, with the state.
 */
#include <stdbool.h>

#include "compiler.h"
#include "fetch.h"
#include "source.h"
#include "store.h"
#include "tree.h"

struct offline_config {
	const char *spec;		  /* as given to source_open */
	const struct source_options *opt; /* outlives the source */
	const struct fetch_config *fetch; /* the mount's, for the probes */
	const char *cache_dir;		  /* absolute: the snapshot's dir */
	bool forced;			  /* --offline: never ask the origin */
	unsigned probe_ms;		  /* first try offline; 0: 5000 */
};

/*
 * Opens the backend for cfg->spec on fe.  When the origin cannot be
 * reached (no answer, 5xx until the retries ran out) or cfg->forced, comes up
 * offline from the snapshot in cfg->cache_dir, with a warning that names
 * its age.  @return 0, or -errno with *err (the backend's error, and why
 * no snapshot could stand in).
 */
int offline_open(const struct offline_config *cfg, struct fetch_engine *fe,
		 struct source **out, char **err) WHARF_CHECK;

/* Starts the thread that keeps the snapshot of tree current and, while
 * offline, tries the origin; st (may be NULL), the store of the cache
 * dir, makes room for the snapshot on a full disk.  The mount is up: from
 * now on its engine waits out outages (fetch_outage_arm).  @return 0 or
 * -errno. */
int offline_start(struct source *src, struct tree *tree,
		  struct store *st) WHARF_CHECK;

/* Saves the snapshot a last time (when the tree changed since) and stops
 * the thread.  hurry (a stop signal): a snapshot whose last save took
 * over half a second is not saved again (the last periodic save stands),
 * so that a stop ends in bounded time.  Before tree_free; source_close
 * frees the rest. */
void offline_stop(struct source *src, bool hurry);

/* Whether src (a source offline_open made) serves from its snapshot. */
bool offline_is_offline(struct source *src);

/* Where a mount stands towards its origin. */
enum offline_state {
	OFFLINE_NO,	  /* online: the origin answers */
	OFFLINE_OUTAGE,	  /* it stopped answering: uncached reads wait */
	OFFLINE_SNAPSHOT, /* from the snapshot: uncached reads fail */
};
struct offline_status {
	enum offline_state state;
	struct fetch_outage outage; /* the engine's figures, in any state */
};
/* src's state (OFFLINE_NO for NULL): its own, or its engine's outage. */
void offline_status(struct source *src, struct offline_status *out);
/* "online", "outage" or "snapshot". */
const char *offline_state_name(enum offline_state state);

#endif
