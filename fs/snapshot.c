/* Listing snapshots: see snapshot.h for the format and the contract. */
#include "config.h"

#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "listing.h"
#include "store.h"
#include "text.h"
#include "url.h"

#define SNAP_MAGIC "wharf-snapshot 1\n"
#define SNAP_CAP (4ull << 30) /* bytes of one snapshot file */
#define HASH_SEED 0x11571ull
#define SUFFIX ".list"
#define TMP_SUFFIX ".list.tmp"

struct snap_ent {
	const char *name, *version;
	uint64_t size;
	int64_t mtime;
	bool is_dir;
};

struct snap_dir {
	const char *path;
	size_t first, n; /* entries [first, first + n) */
};

struct snapshot {
	char *text; /* the file, decoded in place; every string points here */
	const char *source;
	int64_t saved;
	struct snap_dir *dirs; /* sorted by path */
	size_t n_dirs;
	struct snap_ent *ents;
	size_t n_ents;
};

/* ---- saving ---- */

struct save {
	FILE *f; /* a memory stream: the hash needs every byte first */
	uint64_t entries;
	const struct snapshot *old;
	bool *old_seen; /* old's directories the tree listed too */
	/* encoded fields: 3 bytes per byte at most */
	char a[3 * 4096 + 1], b[3 * 256 + 1];
};

static int put_dir(struct save *sv, const char *dir)
{
	if (url_encode(dir, true, sv->a, sizeof(sv->a)) < 0)
		return -ENAMETOOLONG;
	fprintf(sv->f, "D %s\n", sv->a);
	return 0;
}

static int put_ent(struct save *sv, const char *name, bool is_dir,
		   uint64_t size, int64_t mtime, const char *version)
{
	if (url_encode(name, false, sv->a, sizeof(sv->a)) < 0 ||
	    url_encode(version, true, sv->b, sizeof(sv->b)) < 0)
		return -ENAMETOOLONG;
	if (is_dir)
		fprintf(sv->f, "d %" PRId64 " %s\n", mtime, sv->a);
	else
		fprintf(sv->f, "f %" PRIu64 " %" PRId64 " %s %s\n", size, mtime,
			sv->a, sv->b);
	sv->entries++;
	return 0;
}

static const struct snap_dir *find_dir(const struct snapshot *s,
				       const char *path);

static int save_tree_entry(void *arg, const char *dir,
			   const struct tree_attr *c)
{
	struct save *sv = arg;

	if (!c) {
		const struct snap_dir *d =
		    sv->old ? find_dir(sv->old, dir) : NULL;

		if (d)
			sv->old_seen[d - sv->old->dirs] = true;
		return put_dir(sv, dir);
	}
	return put_ent(sv, c->name, c->is_dir, c->size, c->mtime, c->version);
}

/* old's directories that this mount has not listed, as they were. */
static int save_old(struct save *sv)
{
	const struct snapshot *o = sv->old;
	int rc = 0;

	for (size_t i = 0; o && i < o->n_dirs && !rc; i++) {
		const struct snap_dir *d = &o->dirs[i];

		if (sv->old_seen[i])
			continue;
		rc = put_dir(sv, d->path);
		for (size_t j = d->first; j < d->first + d->n && !rc; j++) {
			const struct snap_ent *e = &o->ents[j];

			rc = put_ent(sv, e->name, e->is_dir, e->size, e->mtime,
				     e->version);
		}
	}
	return rc;
}

/* Writes len bytes to a new file tmp and makes them durable: the bytes
 * reach the disk before the name does, so that after a crash the name
 * holds the old snapshot or the whole new one.  A failed write leaves no
 * file.  @return 0 or -errno. */
static int write_tmp(const char *tmp, const char *buf, size_t len)
{
	size_t off = 0;
	int fd, rc = 0;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (!rc && off < len) {
		ssize_t n = write(fd, buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			rc = n < 0 ? -errno : -ENOSPC;
		else
			off += (size_t)n;
	}
	if (!rc && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* Writes len bytes and makes them durable under path, atomically: the
 * old snapshot stays until the new one is whole.  A disk too full for it
 * has the store evict chunks to make room, and the write is tried once
 * more. */
static int write_atomic(const char *path, const char *buf, size_t len,
			struct store *st, char **err)
{
	char *tmp = strdupf("%s.tmp", path), *dir = strdup(path), *slash;
	int dfd = -1, rc = 0;

	if (!tmp || !dir) {
		rc = -ENOMEM;
		goto out;
	}
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = -errno;
		if (store_room(st, rc, len) == 0 &&
		    (!mkdir(dir, 0700) || errno == EEXIST))
			rc = 0;
	}
	if (rc) {
		err_set(err, "cannot make %s: %s", dir, strerror(-rc));
		goto out;
	}
	rc = write_tmp(tmp, buf, len);
	if (rc && store_room(st, rc, len) == 0)
		rc = write_tmp(tmp, buf, len);
	if (rc) {
		err_set(err, "cannot write %s: %s", tmp, strerror(-rc));
		goto out;
	}
	if (rename(tmp, path)) {
		rc = -errno;
		unlink(tmp);
		err_set(err, "cannot save %s: %s", path, strerror(-rc));
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd)) {
		rc = -errno;
		err_set(err, "cannot sync %s: %s", dir, strerror(-rc));
	}
out:
	if (dfd >= 0)
		close(dfd);
	free(tmp);
	free(dir);
	return rc;
}

/* Appends the end line: the count and the hash of every byte before it. */
static int append_end(char **buf, size_t *len, uint64_t entries)
{
	char end[64];
	int n = snprintf(end, sizeof(end), "end %" PRIu64 " %016" PRIx64 "\n",
			 entries, store_hash64(*buf, *len, HASH_SEED));
	char *all = realloc(*buf, *len + (size_t)n);

	if (!all)
		return -ENOMEM;
	memcpy(all + *len, end, (size_t)n);
	*buf = all;
	*len += (size_t)n;
	return 0;
}

int snapshot_save(const char *path, const char *source_id, struct tree *tree,
		  const struct snapshot *old, struct store *st, char **err)
{
	struct save *sv = calloc(1, sizeof(*sv));
	char *buf = NULL;
	size_t len = 0;
	int rc = 0;

	if (!sv)
		return -ENOMEM;
	sv->old = old;
	if (old && old->n_dirs) {
		sv->old_seen = calloc(old->n_dirs, sizeof(*sv->old_seen));
		if (!sv->old_seen)
			rc = -ENOMEM;
	}
	/* In memory first: the tree's read lock is held only while the text
	 * is built, and the end line needs the hash of all of it. */
	sv->f = rc ? NULL : open_memstream(&buf, &len);
	if (!rc && !sv->f)
		rc = -ENOMEM;
	if (!rc && url_encode(source_id, true, sv->a, sizeof(sv->a)) < 0)
		rc = -ENAMETOOLONG;
	if (!rc) {
		fprintf(sv->f, SNAP_MAGIC "source %s\nsaved %lld\n", sv->a,
			(long long)time(NULL));
		rc = tree_walk_listed(tree, save_tree_entry, sv);
	}
	if (!rc)
		rc = save_old(sv);
	if (sv->f && fclose(sv->f) && !rc)
		rc = -ENOMEM;
	if (!rc)
		rc = append_end(&buf, &len, sv->entries);
	if (!rc)
		rc = write_atomic(path, buf, len, st, err);
	else
		err_set(err, "cannot save %s: %s", path, strerror(-rc));
	free(sv->old_seen);
	free(sv);
	free(buf);
	return rc;
}

/* ---- loading ---- */

/* Percent-decodes the n bytes at s in place (decoding never lengthens,
 * and s[n], a separator, becomes the NUL).  @return the length or < 0. */
static int dec(char *s, size_t n)
{
	return listing_url_decode(s, n, s, n + 1);
}

/* Splits off the next space-separated field of *p (NUL-terminating it in
 * place).  @return it, or NULL when no space is left. */
static char *field(char **p)
{
	char *s = *p, *sp = strchr(s, ' ');

	if (!sp)
		return NULL;
	*sp = '\0';
	*p = sp + 1;
	return s;
}

static int dir_cmp(const void *a, const void *b)
{
	return strcmp(((const struct snap_dir *)a)->path,
		      ((const struct snap_dir *)b)->path);
}

static int grow(void **v, size_t n, size_t *cap, size_t size)
{
	void *nv;

	if (n < *cap)
		return 0;
	nv = realloc(*v, (*cap ? *cap * 2 : 256) * size);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = *cap ? *cap * 2 : 256;
	return 0;
}

/* One "d" or "f" line (after its tag) into e.  @return 0 or -EINVAL. */
static int parse_ent(char *rest, bool is_dir, struct snap_ent *e)
{
	char *sz = NULL, *mt, *name, *end;
	int nl, vl;

	memset(e, 0, sizeof(*e));
	e->is_dir = is_dir;
	e->version = "";
	if (!is_dir) {
		sz = field(&rest);
		if (!sz)
			return -EINVAL;
	}
	mt = field(&rest);
	if (!mt)
		return -EINVAL;
	if (is_dir) {
		name = rest;
	} else {
		name = field(&rest);
		if (!name)
			return -EINVAL;
		vl = dec(rest, strlen(rest));
		if (vl < 0)
			return -EINVAL;
		e->version = rest;
	}
	errno = 0;
	e->size = sz ? strtoull(sz, &end, 10) : 0;
	if (errno || (sz && *end) || e->size > (uint64_t)INT64_MAX)
		return -EINVAL;
	e->mtime = strtoll(mt, &end, 10);
	if (errno || *end)
		return -EINVAL;
	nl = dec(name, strlen(name));
	if (nl <= 0 || strchr(name, '/'))
		return -EINVAL;
	e->name = name;
	return 0;
}

/* The records between the header and the end line (NUL-terminated). */
static int parse_body(struct snapshot *s, char *p, const char **why)
{
	size_t dcap = 0, ecap = 0;
	char *nl;

	for (; *p; p = nl + 1) {
		char tag = p[0];

		nl = strchr(p, '\n');
		if (!nl || p[1] != ' ') {
			*why = "a malformed line";
			return -EINVAL;
		}
		*nl = '\0';
		p += 2;
		if (tag == 'D') {
			struct snap_dir *d;

			if (grow((void **)&s->dirs, s->n_dirs, &dcap,
				 sizeof(*s->dirs)))
				return -ENOMEM;
			if (dec(p, strlen(p)) < 0) {
				*why = "a bad directory path";
				return -EINVAL;
			}
			d = &s->dirs[s->n_dirs++];
			d->path = p;
			d->first = s->n_ents;
			d->n = 0;
		} else if (tag == 'd' || tag == 'f') {
			if (!s->n_dirs) {
				*why = "an entry before any directory";
				return -EINVAL;
			}
			if (grow((void **)&s->ents, s->n_ents, &ecap,
				 sizeof(*s->ents)))
				return -ENOMEM;
			if (parse_ent(p, tag == 'd', &s->ents[s->n_ents])) {
				*why = "a malformed entry";
				return -EINVAL;
			}
			s->n_ents++;
			s->dirs[s->n_dirs - 1].n++;
		} else {
			*why = "an unknown record";
			return -EINVAL;
		}
	}
	if (s->n_dirs) /* dirs is NULL without one: not for qsort */
		qsort(s->dirs, s->n_dirs, sizeof(*s->dirs), dir_cmp);
	for (size_t i = 1; i < s->n_dirs; i++)
		if (!strcmp(s->dirs[i - 1].path, s->dirs[i].path)) {
			*why = "a directory listed twice";
			return -EINVAL;
		}
	return 0;
}

/*
 * Checks the end line of text (len bytes), cuts it off, and reads the
 * header.  @return the first record, or NULL with *why.
 */
static char *parse_frame(struct snapshot *s, char *text, size_t len,
			 const char **why)
{
	char *last, *p, *end;
	unsigned long long entries, hash;

	if (len < 2 || text[len - 1] != '\n') {
		*why = "it does not end with a whole line (cut short?)";
		return NULL;
	}
	text[len - 1] = '\0';
	last = strrchr(text, '\n');
	if (!last || sscanf(last + 1, "end %llu %llx", &entries, &hash) != 2) {
		*why = "it has no end line (cut short?)";
		return NULL;
	}
	last[1] = '\0';
	if (store_hash64(text, (size_t)(last + 1 - text), HASH_SEED) != hash) {
		*why = "its checksum does not match (damaged)";
		return NULL;
	}
	if (strncmp(text, SNAP_MAGIC, strlen(SNAP_MAGIC))) {
		*why = "not a wharf snapshot, or of another version";
		return NULL;
	}
	p = text + strlen(SNAP_MAGIC);
	end = strchr(p, '\n');
	if (strncmp(p, "source ", 7) || !end) {
		*why = "no source line";
		return NULL;
	}
	*end = '\0';
	if (dec(p + 7, strlen(p + 7)) <= 0) {
		*why = "a bad source line";
		return NULL;
	}
	s->source = p + 7;
	p = end + 1;
	end = strchr(p, '\n');
	if (sscanf(p, "saved %" SCNd64, &s->saved) != 1 || !end) {
		*why = "no saved line";
		return NULL;
	}
	/* What the body must hold; the caller counts it again. */
	s->n_ents = (size_t)entries;
	return end + 1;
}

int snapshot_load(const char *path, const char *source_id,
		  struct snapshot **out, char **err)
{
	struct snapshot *s = calloc(1, sizeof(*s));
	const char *why = NULL;
	size_t len, expect;
	char *body;
	int rc;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	rc = read_file_capped(path, SNAP_CAP, &s->text, &len, err);
	if (rc)
		goto fail;
	body = parse_frame(s, s->text, len, &why);
	if (!body) {
		rc = -EINVAL;
		goto fail;
	}
	if (source_id && strcmp(source_id, s->source)) {
		err_set(err, "%s is the snapshot of %s, not of %s", path,
			s->source, source_id);
		rc = -ESTALE;
		goto fail;
	}
	expect = s->n_ents;
	s->n_ents = 0;
	rc = parse_body(s, body, &why);
	if (!rc && s->n_ents != expect) {
		why = "its entry count does not match";
		rc = -EINVAL;
	}
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	if (why)
		err_set(err, "snapshot %s is refused: %s", path, why);
	else if (rc == -ENOMEM)
		err_set(err, "snapshot %s: out of memory", path);
	snapshot_free(s);
	return rc;
}

void snapshot_free(struct snapshot *s)
{
	if (!s)
		return;
	free(s->dirs);
	free(s->ents);
	free(s->text);
	free(s);
}

static const struct snap_dir *find_dir(const struct snapshot *s,
				       const char *path)
{
	struct snap_dir key = {.path = path};

	if (!s->n_dirs)
		return NULL;
	return bsearch(&key, s->dirs, s->n_dirs, sizeof(*s->dirs), dir_cmp);
}

static void object_of(const struct snap_ent *e, struct source_object *o)
{
	*o = (struct source_object){.name = e->name,
				    .is_dir = e->is_dir,
				    .size = e->size,
				    .mtime = e->mtime,
				    .version = e->version};
}

int snapshot_list(const struct snapshot *s, const char *dir, source_list_cb cb,
		  void *arg)
{
	const struct snap_dir *d = find_dir(s, dir);
	struct source_object o;
	int rc = 0;

	if (!d)
		return -ENOENT;
	for (size_t i = d->first; i < d->first + d->n && !rc; i++) {
		object_of(&s->ents[i], &o);
		rc = cb(arg, &o);
	}
	return rc;
}

int snapshot_stat(const struct snapshot *s, const char *path,
		  struct source_object *out)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	const struct snap_dir *d;

	if (!*path) {
		*out = (struct source_object){
		    .name = "", .is_dir = true, .version = ""};
		return 0;
	}
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 0,
		 path);
	d = find_dir(s, dir);
	for (size_t i = d ? d->first : 0; d && i < d->first + d->n; i++)
		if (!strcmp(s->ents[i].name, slash ? slash + 1 : path)) {
			object_of(&s->ents[i], out);
			return 0;
		}
	return -ENOENT;
}

void snapshot_info(const struct snapshot *s, struct snapshot_info *out)
{
	out->source = s->source;
	out->saved = s->saved;
	out->dirs = s->n_dirs;
	out->entries = s->n_ents;
}

/* ---- the snapshots of a cache dir ---- */

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && !strcmp(s + n - k, suffix);
}

/* Calls fn for each file of the snapshot dir that ends with SUFFIX, or
 * with TMP_SUFFIX too when temps. */
static int each_file(const char *dir, bool temps, snapshot_each_fn fn,
		     void *arg, char **err)
{
	char *sdir = store_snapshot_dir(dir);
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (!sdir)
		return -ENOMEM;
	d = opendir(sdir);
	if (!d) {
		rc = errno == ENOENT ? 0 : -errno;
		if (rc)
			err_set(err, "%s: %s", sdir, strerror(-rc));
		free(sdir);
		return rc;
	}
	while (!rc && (de = readdir(d))) {
		char *path;

		if (!ends_with(de->d_name, SUFFIX) &&
		    !(temps && ends_with(de->d_name, TMP_SUFFIX)))
			continue;
		path = strdupf("%s/%s", sdir, de->d_name);
		rc = path ? fn(arg, path) : -ENOMEM;
		free(path);
	}
	closedir(d);
	free(sdir);
	return rc;
}

int snapshot_each(const char *dir, snapshot_each_fn fn, void *arg, char **err)
{
	return each_file(dir, false, fn, arg, err);
}

struct clear {
	uint64_t removed;
	char **err;
};

static int remove_one(void *arg, const char *path)
{
	struct clear *c = arg;

	if (unlink(path) && errno != ENOENT) {
		int rc = -errno;

		err_set(c->err, "cannot remove %s: %s", path, strerror(-rc));
		return rc;
	}
	c->removed += ends_with(path, SUFFIX);
	return 0;
}

int snapshot_clear(const char *dir, uint64_t *removed, char **err)
{
	struct clear c = {.err = err};
	int rc = each_file(dir, true, remove_one, &c, err);

	*removed = c.removed;
	return rc;
}
