/*
 * control: the .wharf directory and its files (see control.h): the stats
 * and metrics files' snapshots, and the hints file's lines, parsed and
 * applied.
 *
 * Files need no open (ops.c), so neither can a snapshot file rely on one:
 * without opens its snapshot is taken when its attributes are asked for,
 * and two snapshots in a row differ in size.  The hints ioctl needs no
 * open either.  Few readers, so one lock for all snapshots.
 */
#include "config.h"

#include "control.h"
#include "ops_i.h"
#include "stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <wharf/hints.h>

#define HINT_LINE_MAX 4200 /* a path and two numbers */
/*
 * Stats and metrics files open at once, each with its snapshot (a few
 * KiB): anyone who may read the mount may open them, and without a cap
 * the memory of the daemon would grow with the files others hold open
 * (and the search of a read with them).  Monitors open, read and close; more
 * opens wait.
 */
#define CONTROL_STATS_OPENS 128

const struct control_entry control_files[CONTROL_NFILES] = {
    {"stats", CONTROL_STATS},
    {"hints", CONTROL_HINTS},
    {"metrics", CONTROL_METRICS},
};

void control_setup(struct ops_ctx *ctx)
{
	pthread_mutex_init(&ctx->state->control.mu, NULL);
}

static void stats_file_free(struct stats_file *sf)
{
	free(sf->text);
	free(sf);
}

void control_cleanup(struct ops_ctx *ctx)
{
	struct ops_control *c = &ctx->state->control;

	while (c->opened) {
		struct stats_file *sf = c->opened;

		c->opened = sf->next;
		stats_file_free(sf);
	}
	free(c->stats.text);
	free(c->metrics.text);
	c->stats = c->metrics = (struct stats_file){0};
	pthread_mutex_destroy(&c->mu);
}

int control_lookup(uint64_t parent, const char *name, uint64_t *ino)
{
	*ino = 0;
	if (parent == TREE_ROOT && !strcmp(name, CONTROL_NAME)) {
		*ino = CONTROL_DIR;
		return 0;
	}
	if (parent != CONTROL_DIR)
		return 0;
	for (size_t i = 0; i < CONTROL_NFILES; i++)
		if (!strcmp(name, control_files[i].name)) {
			*ino = control_files[i].ino;
			return 0;
		}
	return -ENOENT;
}

void control_stat(const struct ops_ctx *ctx, uint64_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = ctx->uid;
	st->st_gid = ctx->gid;
	st->st_mtime = st->st_ctime = st->st_atime = ctx->mounted_at;
	if (ino == CONTROL_DIR) {
		st->st_mode = S_IFDIR | ctx->dir_mode;
		st->st_nlink = 2;
	} else {
		/* Hints is opened read-only for the ioctl and reads empty;
		 * stats and metrics have no size before their snapshot.  Both
		 * are the mount's like its files: who cannot read the dataset
		 * can neither read its stats nor steer its reads. */
		st->st_mode = S_IFREG | ctx->file_mode;
		st->st_nlink = 1;
	}
}

/* A new snapshot of snapshot file ino, as its text.  @return 0 or
 * -ENOMEM. */
static int snapshot_text(struct ops_ctx *ctx, uint64_t ino,
			 struct stats_file *sf)
{
	struct stats_snapshot snap;

	stats_take(&ctx->stats, &snap);
	if (ino == CONTROL_METRICS)
		return stats_metrics(&snap, &sf->text, &sf->len);
	return stats_json(&snap, &sf->text, &sf->len);
}

/* The getattr snapshot of snapshot file ino (under the lock). */
static struct stats_file *getattr_file(struct ops_control *c, uint64_t ino)
{
	return ino == CONTROL_METRICS ? &c->metrics : &c->stats;
}

/* Takes a new getattr snapshot of file ino; returns its length. */
static size_t stats_refresh(struct ops_ctx *ctx, uint64_t ino)
{
	struct ops_control *c = &ctx->state->control;
	struct stats_file fresh = {0}, *cur;
	size_t len;

	if (snapshot_text(ctx, ino, &fresh))
		fresh = (struct stats_file){0};
	pthread_mutex_lock(&c->mu);
	cur = getattr_file(c, ino);
	/*
	 * The kernel drops the pages it cached of the last snapshot only when
	 * the size changes (an invalidation from here would race with this
	 * very getattr), so two snapshots in a row never have the same size:
	 * the text ends in one newline or two.
	 */
	if (fresh.text && fresh.len == cur->len) {
		char *longer = realloc(fresh.text, fresh.len + 2);

		if (longer) {
			longer[fresh.len] = '\n';
			longer[++fresh.len] = '\0';
			fresh.text = longer;
		}
	}
	free(cur->text);
	*cur = fresh;
	len = fresh.len;
	pthread_mutex_unlock(&c->mu);
	return len;
}

void control_getattr(struct ops_ctx *ctx, uint64_t ino, struct stat *st)
{
	control_stat(ctx, ino, st);
	/* Reads without open see this snapshot. */
	if (control_is_snapshot(ino) &&
	    __atomic_load_n(&ctx->state->no_open, __ATOMIC_ACQUIRE))
		st->st_size = (off_t)stats_refresh(ctx, ino);
}

int control_open(struct ops_ctx *ctx, uint64_t ino, uint64_t *fh)
{
	struct ops_control *c = &ctx->state->control;
	struct stats_file *sf;
	bool full;

	*fh = 0;
	if (ino == CONTROL_DIR)
		return -EISDIR;
	if (!control_is_snapshot(ino))
		return 0;
	/* The place first: a refused open costs no snapshot. */
	pthread_mutex_lock(&c->mu);
	full = c->n_opened == CONTROL_STATS_OPENS;
	if (!full)
		c->n_opened++;
	pthread_mutex_unlock(&c->mu);
	if (full)
		return -EAGAIN;
	sf = calloc(1, sizeof(*sf));
	if (!sf || snapshot_text(ctx, ino, sf)) {
		free(sf);
		pthread_mutex_lock(&c->mu);
		c->n_opened--;
		pthread_mutex_unlock(&c->mu);
		return -ENOMEM;
	}
	pthread_mutex_lock(&c->mu);
	sf->id = ++c->last_id;
	sf->next = c->opened;
	c->opened = sf;
	pthread_mutex_unlock(&c->mu);
	*fh = sf->id;
	return 0;
}

int control_read(struct ops_ctx *ctx, uint64_t ino, uint64_t fh, size_t size,
		 uint64_t off, const char **data, size_t *n)
{
	struct ops_control *c = &ctx->state->control;
	const struct stats_file *sf;

	*data = NULL;
	*n = 0;
	if (ino == CONTROL_DIR)
		return -EISDIR;
	if (!control_is_snapshot(ino))
		return 0;
	pthread_mutex_lock(&c->mu);
	sf = getattr_file(c, ino);
	/* The open's snapshot, or getattr's when the kernel does without
	 * opens (fh 0). */
	if (fh)
		for (sf = c->opened; sf && sf->id != fh; sf = sf->next)
			;
	if (!sf) {
		pthread_mutex_unlock(&c->mu);
		return -EBADF;
	}
	if (off < sf->len) {
		*n =
		    sf->len - (size_t)off < size ? sf->len - (size_t)off : size;
		*data = sf->text + off;
	}
	return 0;
}

void control_read_done(struct ops_ctx *ctx, uint64_t ino)
{
	if (control_is_snapshot(ino))
		pthread_mutex_unlock(&ctx->state->control.mu);
}

void control_release(struct ops_ctx *ctx, uint64_t ino, uint64_t fh)
{
	struct ops_control *c = &ctx->state->control;
	struct stats_file **at, *gone = NULL;

	if (!control_is_snapshot(ino) || !fh)
		return;
	pthread_mutex_lock(&c->mu);
	for (at = &c->opened; *at; at = &(*at)->next)
		if ((*at)->id == fh) {
			gone = *at;
			*at = gone->next;
			c->n_opened--;
			break;
		}
	pthread_mutex_unlock(&c->mu);
	if (gone)
		stats_file_free(gone);
}

int control_hint_parse(char *line, size_t len, const char *mp, char **path,
		       uint64_t *off, uint64_t *n)
{
	unsigned long long o, k;
	char *sp2, *sp1, *p, *end;
	size_t mpl;

	line[len] = '\0';
	sp2 = strrchr(line, ' ');
	if (!sp2 || sp2 == line)
		return -EINVAL;
	*sp2 = '\0';
	sp1 = strrchr(line, ' ');
	if (!sp1 || sp1 == line)
		return -EINVAL;
	*sp1 = '\0';
	errno = 0;
	o = strtoull(sp1 + 1, &end, 10);
	if (errno || *end || end == sp1 + 1)
		return -EINVAL;
	k = strtoull(sp2 + 1, &end, 10);
	if (errno || *end || end == sp2 + 1)
		return -EINVAL;
	p = line;
	mpl = mp ? strlen(mp) : 0;
	if (mpl && !strncmp(p, mp, mpl) && p[mpl] == '/')
		p += mpl;
	*path = p;
	*off = o;
	*n = k;
	return 0;
}

/*
 * One hint line: resolves its path one component at a time and queues the
 * range.  A directory not yet listed is listed here, once.  line[len] must
 * be there to be written.  @return 0 or -errno.
 */
static int hint_line(struct ops_ctx *ctx, char *line, size_t len)
{
	uint64_t off, n, ino = TREE_ROOT;
	struct tree_attr a;
	struct ops_file *f;
	char *path;
	int rc;

	rc = control_hint_parse(line, len, ctx->stats.mountpoint, &path, &off,
				&n);
	if (rc)
		return rc;
	while (*path) {
		char *slash;

		while (*path == '/')
			path++;
		if (!*path)
			break;
		slash = strchr(path, '/');
		if (slash)
			*slash = '\0';
		rc = tree_lookup(ctx->tree, ino, path, &a);
		if (rc)
			return rc;
		ino = a.ino;
		path = slash ? slash + 1 : path + strlen(path);
	}
	if (ino == TREE_ROOT)
		return -EISDIR;
	rc = files_get(ctx, ino, &f);
	if (!rc)
		rc = files_failed(ctx, f);
	if (rc)
		return rc;
	return prefetch_hint(ctx->prefetch, f->pf, off, n);
}

int control_ioctl(struct ops_ctx *ctx, uint64_t ino, unsigned cmd,
		  const void *in, size_t in_len)
{
	const struct wharf_hints *h = in;
	uint64_t lines = 0, bad = 0;
	char line[HINT_LINE_MAX + 1];
	size_t i = 0;

	if (ino != CONTROL_HINTS || cmd != WHARF_IOC_HINTS)
		return -ENOTTY;
	if (in_len < sizeof(*h) || h->len > sizeof(h->text))
		return -EINVAL;
	while (i < h->len) {
		const char *nl = memchr(h->text + i, '\n', h->len - i);
		const size_t n = (nl ? (size_t)(nl - h->text) : h->len) - i;

		/* A line cut by the end of text is bad: nothing joins it. */
		if (!nl || n > HINT_LINE_MAX) {
			bad++;
		} else if (n) {
			memcpy(line, h->text + i, n);
			if (hint_line(ctx, line, n))
				bad++;
			else
				lines++;
		}
		i += n + 1;
	}
	__atomic_fetch_add(&ctx->stats.hint_lines, lines, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->stats.hint_bad, bad, __ATOMIC_RELAXED);
	return 0;
}
