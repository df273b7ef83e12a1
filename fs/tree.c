/* Inodes from listings: see tree.h for the contract. */
#include "config.h"

#include "tree.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listing.h"
#include "text.h"
#include "units.h"

#define ARENA_BLOCK (1u << 20)
#define NAME_MAX_LEN 255

struct node {
	const char *name;    /* in the arena */
	const char *version; /* in the arena, or "" */
	uint64_t size;
	int64_t mtime;
	uint32_t parent;
	uint32_t first_child; /* children are [first_child, +nchild) */
	uint32_t nchild;
	uint8_t is_dir;
	uint8_t listed;
	uint8_t has_digest; /* the digest follows the version's NUL */
};

struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	char data[];
};

struct tree {
	struct source *src;
	pthread_rwlock_t lock;	    /* nodes[], n_nodes, slots[] */
	/*
	 * Directories are listed independently: a slow listing holds up only
	 * the readers of its own directory.  list_mu guards the set of
	 * directories being listed (on the listers' stacks); a second asker
	 * of one waits on listed_cond for the first.
	 */
	pthread_mutex_t list_mu;
	pthread_cond_t listed_cond;
	struct lister *listers; /* under list_mu */
	/* Directories whose listing failed lately (under list_mu): asked
	 * again only when the error is error_ttl_ms old, like a failed
	 * read (files.c), so that a loop of lookups in a 403 prefix costs
	 * the origin one listing per ttl, not one per lookup. */
	struct list_failure *failures;
	unsigned n_failures;
	unsigned error_ttl_ms;
	uint64_t errors_cached; /* atomic */
	pthread_mutex_t arena_mu; /* the arena */
	struct node *nodes;	    /* index == inode number; 0 unused */
	uint32_t n_nodes, cap_nodes;
	uint32_t *slots; /* open addressing: inode numbers, 0 = empty */
	uint32_t n_slots;
	uint32_t n_hashed;
	uint64_t n_listed; /* tree_listings(), atomic */
	struct arena_block *arena;
	uint64_t arena_bytes;
};

static uint64_t hash_name(uint32_t parent, const char *name, size_t len)
{
	uint64_t h =
	    0xcbf29ce484222325ull ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ull);

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 31;
	return h;
}

/* A directory being listed, on its lister's stack. */
struct lister {
	uint64_t ino;
	struct lister *next;
};

/* The arena only grows, and only under arena_mu; its strings never move,
 * so readers use them without any lock. */
static const char *arena_dup(struct tree *t, const char *s, size_t len)
{
	struct arena_block *b;
	char *p = NULL;

	pthread_mutex_lock(&t->arena_mu);
	b = t->arena;
	if (!b || b->cap - b->used < len + 1) {
		size_t cap = len + 1 > ARENA_BLOCK ? len + 1 : ARENA_BLOCK;

		b = malloc(sizeof(*b) + cap);
		if (!b)
			goto out;
		b->next = t->arena;
		b->used = 0;
		b->cap = cap;
		t->arena = b;
		t->arena_bytes += sizeof(*b) + cap;
	}
	p = b->data + b->used;
	memcpy(p, s, len);
	p[len] = '\0';
	b->used += len + 1;
out:
	pthread_mutex_unlock(&t->arena_mu);
	return p;
}

/* The version of obj in the arena, and its digest after the version's
 * NUL ("V\0D"), so that a node is no larger for it; "" when it has
 * neither.  NULL without memory. */
static const char *version_dup(struct tree *t, const struct source_object *obj,
			       uint8_t *has_digest)
{
	const char *v = obj->version ? obj->version : "";
	const char *d = obj->digest ? obj->digest : "";
	const size_t vl = strlen(v), dl = strlen(d);
	char buf[512];

	*has_digest = dl && vl + 1 + dl < sizeof(buf);
	if (!*has_digest)
		return vl ? arena_dup(t, v, vl) : "";
	memcpy(buf, v, vl + 1);
	memcpy(buf + vl + 1, d, dl);
	return arena_dup(t, buf, vl + 1 + dl);
}

/* A directory whose listing failed with rc; it stands until until_ns. */
struct list_failure {
	struct list_failure *next;
	uint64_t ino, until_ns;
	int rc;
};

/* Failed directories kept at most: beyond, a failure is not kept (each
 * such directory then asks the origin again, as with --error-ttl 0). */
#define LIST_FAILURES_MAX 4096

/* The error that stands for ino's listing (0: none), dropping those that
 * are over on the way. */
static int failure_standing(struct tree *t, uint64_t ino)
{
	const uint64_t now = now_ns();
	struct list_failure **pp, *f;
	int rc = 0;

	pthread_mutex_lock(&t->list_mu);
	pp = &t->failures;
	while ((f = *pp)) {
		if (now >= f->until_ns) {
			*pp = f->next;
			t->n_failures--;
			free(f);
			continue;
		}
		if (f->ino == ino)
			rc = f->rc;
		pp = &f->next;
	}
	pthread_mutex_unlock(&t->list_mu);
	if (rc)
		__atomic_fetch_add(&t->errors_cached, 1, __ATOMIC_RELAXED);
	return rc;
}

/* Under list_mu: keeps the failure rc of ino's listing for the ttl. */
static void failure_keep(struct tree *t, uint64_t ino, int rc)
{
	struct list_failure *f;

	if (!t->error_ttl_ms || !origin_error_stands(rc) ||
	    t->n_failures >= LIST_FAILURES_MAX)
		return;
	f = malloc(sizeof(*f));
	if (!f)
		return; /* then it is asked again: no harm */
	*f = (struct list_failure){
	    .next = t->failures,
	    .ino = ino,
	    .until_ns = now_ns() + (uint64_t)t->error_ttl_ms * 1000000,
	    .rc = rc};
	t->failures = f;
	t->n_failures++;
}

/* Makes the caller the lister of directory ino, after waiting for one
 * already at it: false when that one listed it meanwhile (nothing to do),
 * or when it is not a directory to list (*rc then -errno). */
typedef int (*list_state_fn)(struct tree *t, uint64_t ino);

static bool lister_begin(struct tree *t, struct lister *me,
			 list_state_fn state, int *rc)
{
	bool mine = false;

	pthread_mutex_lock(&t->list_mu);
	for (;;) {
		struct lister *l = t->listers;

		while (l && l->ino != me->ino)
			l = l->next;
		if (!l)
			break;
		pthread_cond_wait(&t->listed_cond, &t->list_mu);
	}
	*rc = state(t, me->ino);
	if (*rc == 0) {
		me->next = t->listers;
		t->listers = me;
		mine = true;
	}
	pthread_mutex_unlock(&t->list_mu);
	return mine;
}

/* Ends me's listing, which ended with rc (a failure is kept for the
 * askers that come within the ttl, the waiting ones included). */
static void lister_end(struct tree *t, struct lister *me, int rc)
{
	struct lister **pp;

	pthread_mutex_lock(&t->list_mu);
	if (rc < 0)
		failure_keep(t, me->ino, rc);
	for (pp = &t->listers; *pp != me; pp = &(*pp)->next)
		;
	*pp = me->next;
	pthread_cond_broadcast(&t->listed_cond);
	pthread_mutex_unlock(&t->list_mu);
}

/* Under the write lock (or before the tree is shared). */
static int hash_grow(struct tree *t)
{
	uint32_t n = t->n_slots ? t->n_slots * 2 : 1024;
	uint32_t *slots = calloc(n, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_slots; i++) {
		uint32_t ino = t->slots[i];
		const struct node *nd;
		uint64_t h;

		if (!ino)
			continue;
		nd = &t->nodes[ino];
		h = hash_name(nd->parent, nd->name, strlen(nd->name));
		while (slots[h & (n - 1)])
			h++;
		slots[h & (n - 1)] = ino;
	}
	free(t->slots);
	t->slots = slots;
	t->n_slots = n;
	return 0;
}

/* Under at least the read lock.  Returns the inode or 0. */
static uint32_t hash_find(const struct tree *t, uint32_t parent,
			  const char *name, size_t len)
{
	uint64_t h = hash_name(parent, name, len);

	for (;; h++) {
		uint32_t ino = t->slots[h & (t->n_slots - 1)];
		const struct node *nd;

		if (!ino)
			return 0;
		nd = &t->nodes[ino];
		if (nd->parent == parent && !strncmp(nd->name, name, len) &&
		    nd->name[len] == '\0')
			return ino;
	}
}

/* Under the write lock; the slot table has room. */
static void hash_insert(struct tree *t, uint32_t ino)
{
	const struct node *nd = &t->nodes[ino];
	uint64_t h = hash_name(nd->parent, nd->name, strlen(nd->name));

	while (t->slots[h & (t->n_slots - 1)])
		h++;
	t->slots[h & (t->n_slots - 1)] = ino;
	t->n_hashed++;
}

int tree_new(struct source *src, struct tree **out)
{
	struct tree *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->src = src;
	t->cap_nodes = 1024;
	t->nodes = calloc(t->cap_nodes, sizeof(*t->nodes));
	if (!t->nodes || hash_grow(t)) {
		free(t->nodes);
		free(t);
		return -ENOMEM;
	}
	pthread_rwlock_init(&t->lock, NULL);
	pthread_mutex_init(&t->list_mu, NULL);
	pthread_cond_init(&t->listed_cond, NULL);
	pthread_mutex_init(&t->arena_mu, NULL);
	/* 0 is no inode; 1 is the root. */
	t->n_nodes = 2;
	t->nodes[TREE_ROOT] = (struct node){
	    .name = "", .version = "", .is_dir = 1, .parent = TREE_ROOT};
	*out = t;
	return 0;
}

void tree_set_error_ttl(struct tree *t, unsigned ms)
{
	t->error_ttl_ms = ms;
}

uint64_t tree_errors_cached(struct tree *t)
{
	return __atomic_load_n(&t->errors_cached, __ATOMIC_RELAXED);
}

void tree_free(struct tree *t)
{
	if (!t)
		return;
	while (t->arena) {
		struct arena_block *b = t->arena;

		t->arena = b->next;
		free(b);
	}
	while (t->failures) {
		struct list_failure *f = t->failures;

		t->failures = f->next;
		free(f);
	}
	pthread_rwlock_destroy(&t->lock);
	pthread_mutex_destroy(&t->list_mu);
	pthread_cond_destroy(&t->listed_cond);
	pthread_mutex_destroy(&t->arena_mu);
	free(t->slots);
	free(t->nodes);
	free(t);
}

static void fill_attr(const struct tree *t, uint32_t ino, struct tree_attr *a)
{
	const struct node *nd = &t->nodes[ino];

	a->ino = ino;
	a->parent = nd->parent;
	a->is_dir = nd->is_dir;
	a->size = nd->size;
	a->mtime = nd->mtime;
	a->name = nd->name;
	a->version = nd->version;
	a->digest = nd->has_digest ? nd->version + strlen(nd->version) + 1 : "";
}

/* Under at least the read lock. */
static int path_locked(const struct tree *t, uint32_t ino, char *buf,
		       size_t len)
{
	size_t pos = len - 1;
	uint32_t i = ino;

	if (len == 0)
		return -ENAMETOOLONG;
	buf[pos] = '\0';
	while (i != TREE_ROOT) {
		const struct node *nd = &t->nodes[i];
		size_t n = strlen(nd->name);

		if (pos < n + (pos != len - 1))
			return -ENAMETOOLONG;
		if (pos != len - 1)
			buf[--pos] = '/';
		pos -= n;
		memcpy(buf + pos, nd->name, n);
		i = nd->parent;
	}
	memmove(buf, buf + pos, len - pos);
	return (int)(len - 1 - pos);
}

int tree_path(struct tree *t, uint64_t ino, char *buf, size_t len)
{
	int rc;

	pthread_rwlock_rdlock(&t->lock);
	if (ino == 0 || ino >= t->n_nodes)
		rc = -ENOENT;
	else
		rc = path_locked(t, (uint32_t)ino, buf, len);
	pthread_rwlock_unlock(&t->lock);
	return rc;
}

/* Entries collected by one listing before they are published. */
struct pending {
	struct tree *t;
	struct node *v;
	size_t n, cap;
	const char *dir; /* the listed directory's path, for warnings */
};

/* Why the kernel cannot show obj, or NULL: such an entry is left out
 * rather than mangled, and the rest of its directory is shown. */
static const char *unshowable(const struct source_object *obj)
{
	size_t len = strlen(obj->name);

	if (obj->bad)
		return obj->bad;
	if (len == 0 || !strcmp(obj->name, ".") || !strcmp(obj->name, ".."))
		return "not a file name";
	if (strchr(obj->name, '/'))
		return "a name with '/'";
	if (len > NAME_MAX_LEN)
		return "a name longer than 255 bytes";
	/* st_size is signed. */
	if (!obj->is_dir && obj->size > (uint64_t)INT64_MAX)
		return "a size past 2^63-1";
	return NULL;
}

static int collect(void *arg, const struct source_object *obj)
{
	struct pending *p = arg;
	size_t len = strlen(obj->name);
	const char *why = unshowable(obj);
	struct node nd = {0};

	if (why) {
		char where[4096 + 256];

		snprintf(where, sizeof(where), "%s%s", p->t->src->id, p->dir);
		listing_skip(where, obj->name, why);
		return 0;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct node *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	nd.name = arena_dup(p->t, obj->name, len);
	nd.version = version_dup(p->t, obj, &nd.has_digest);
	if (!nd.name || !nd.version)
		return -ENOMEM;
	nd.is_dir = obj->is_dir;
	nd.size = obj->is_dir ? 0 : obj->size;
	nd.mtime = obj->mtime;
	/* Until publish(): the place in the listing, for a stable sort. */
	nd.parent = (uint32_t)p->n;
	p->v[p->n++] = nd;
	return 0;
}

/* By name (bytes), then by place in the listing. */
static int node_cmp(const void *a, const void *b)
{
	const struct node *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->parent > y->parent) - (x->parent < y->parent);
}

/*
 * After the sort: one entry a name, for a listing that names one twice.
 * A directory wins over a file of the same name (an S3 object "a" beside
 * objects under "a/": the directory holds more); otherwise the first
 * listed stays.  What goes is logged and counted as skipped.
 */
static void drop_twins(struct pending *p)
{
	char where[4096 + 256];
	size_t w = 0;

	snprintf(where, sizeof(where), "%s%s", p->t->src->id, p->dir);
	for (size_t i = 0; i < p->n; i++) {
		struct node *kept = w ? &p->v[w - 1] : NULL;

		if (!kept || strcmp(kept->name, p->v[i].name)) {
			p->v[w++] = p->v[i];
			continue;
		}
		if (p->v[i].is_dir && !kept->is_dir) {
			listing_skip(where, kept->name,
				     "a file named as a directory beside it; "
				     "the directory is shown");
			*kept = p->v[i];
		} else {
			listing_skip(where, p->v[i].name,
				     "named twice in the listing; the first "
				     "is shown");
		}
	}
	p->n = w;
}

/* Appends the collected children of dir under the write lock. */
static int publish(struct tree *t, uint32_t dir, struct pending *p)
{
	int rc = 0;

	pthread_rwlock_wrlock(&t->lock);
	if ((uint64_t)t->n_nodes + p->n >= UINT32_MAX) {
		rc = -EOVERFLOW;
		goto out;
	}
	if (t->n_nodes + p->n > t->cap_nodes) {
		uint32_t cap = t->cap_nodes;
		struct node *v;

		while (cap < t->n_nodes + p->n)
			cap = cap > UINT32_MAX / 2 ? UINT32_MAX : cap * 2;
		v = realloc(t->nodes, (size_t)cap * sizeof(*v));
		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		t->nodes = v;
		t->cap_nodes = cap;
	}
	while ((uint64_t)(t->n_hashed + p->n) * 2 > t->n_slots) {
		rc = hash_grow(t);
		if (rc)
			goto out;
	}
	t->nodes[dir].first_child = t->n_nodes;
	for (size_t i = 0; i < p->n; i++) {
		struct node *nd = &p->v[i];

		/* Some origins list "x" both as an object and as a prefix;
		 * the first one listed wins. */
		if (hash_find(t, dir, nd->name, strlen(nd->name)))
			continue;
		nd->parent = dir;
		t->nodes[t->n_nodes] = *nd;
		hash_insert(t, t->n_nodes);
		t->n_nodes++;
	}
	t->nodes[dir].nchild = t->n_nodes - t->nodes[dir].first_child;
	t->nodes[dir].listed = 1;
	__atomic_add_fetch(&t->n_listed, 1, __ATOMIC_RELEASE);
out:
	pthread_rwlock_unlock(&t->lock);
	return rc;
}

/* Checks ino under the read lock: 1 listed, 0 needs listing, or -errno. */
static int list_state(struct tree *t, uint64_t ino)
{
	int rc;

	pthread_rwlock_rdlock(&t->lock);
	if (ino == 0 || ino >= t->n_nodes)
		rc = -ENOENT;
	else if (!t->nodes[ino].is_dir)
		rc = -ENOTDIR;
	else
		rc = t->nodes[ino].listed;
	pthread_rwlock_unlock(&t->lock);
	return rc;
}

int tree_list(struct tree *t, uint64_t ino, char **err)
{
	struct pending p = {.t = t};
	struct lister me = {.ino = ino};
	char path[4096];
	int rc;

	rc = list_state(t, ino);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	/* Someone may be listing it, or have listed it while we waited. */
	if (!lister_begin(t, &me, list_state, &rc))
		return rc < 0 ? rc : 0;
	rc = tree_path(t, ino, path, sizeof(path));
	if (rc < 0)
		goto out;
	/* After the wait: a listing that failed lately (while we waited,
	 * say) stands for us too. */
	rc = failure_standing(t, ino);
	if (rc) {
		err_set(err, "cannot list %s%s: %s (failed less than "
			"--error-ttl ago)", t->src->id, path, strerror(-rc));
		lister_end(t, &me, 0);
		return rc;
	}
	p.dir = path;
	rc = t->src->ops->list_dir(t->src, path, collect, &p);
	if (rc) {
		err_set(err, "cannot list %s%s: %s", t->src->id, path,
			strerror(-rc));
		goto out;
	}
	/* Sorted whatever the origin's order: readdir is then in name order,
	 * and so are the inode numbers, which directory read-ahead walks. */
	qsort(p.v, p.n, sizeof(*p.v), node_cmp);
	drop_twins(&p);
	rc = publish(t, (uint32_t)ino, &p);
	if (rc)
		err_set(err, "cannot list %s%s: %s", t->src->id, path,
			strerror(-rc));
out:
	lister_end(t, &me, rc);
	free(p.v);
	return rc;
}

/* The listed directory at path ("" the root), or 0.  Under the read lock. */
static uint32_t find_dir_locked(const struct tree *t, const char *path)
{
	uint32_t ino = TREE_ROOT;
	const char *p = path;

	while (*p && ino) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		ino = t->nodes[ino].listed ? hash_find(t, ino, p, len) : 0;
		p += len + (slash != NULL);
	}
	return ino && t->nodes[ino].is_dir && t->nodes[ino].listed ? ino : 0;
}

/* Under the write lock: takes what p says of the files of dir that are
 * known already.  @return how many changed. */
static int take_versions(struct tree *t, uint32_t dir, const struct pending *p)
{
	int changed = 0;

	for (size_t i = 0; i < p->n; i++) {
		const struct node *nd = &p->v[i];
		uint32_t ino = hash_find(t, dir, nd->name, strlen(nd->name));
		struct node *old = ino ? &t->nodes[ino] : NULL;

		if (!old || old->is_dir || nd->is_dir ||
		    (!strcmp(old->version, nd->version) &&
		     old->size == nd->size))
			continue;
		/* Both strings live in the arena until tree_free: a reader
		 * holding the old pointer still reads a whole string. */
		old->version = nd->version;
		old->has_digest = nd->has_digest;
		old->size = nd->size;
		old->mtime = nd->mtime;
		changed++;
	}
	return changed;
}

/* lister_begin's state for a listed directory: 0, it may be listed
 * again. */
static int relist_state(struct tree *t, uint64_t ino)
{
	(void)t;
	(void)ino;
	return 0;
}

int tree_revalidate(struct tree *t, const char *path)
{
	struct pending p = {.t = t, .dir = path};
	struct lister me = {0};
	uint32_t dir;
	int rc;

	pthread_rwlock_rdlock(&t->lock);
	dir = find_dir_locked(t, path);
	pthread_rwlock_unlock(&t->lock);
	if (!dir)
		return -ENOENT;
	me.ino = dir;
	(void)lister_begin(t, &me, relist_state, &rc);
	rc = t->src->ops->list_dir(t->src, path, collect, &p);
	if (!rc) {
		pthread_rwlock_wrlock(&t->lock);
		rc = take_versions(t, dir, &p);
		pthread_rwlock_unlock(&t->lock);
	}
	/* New versions are news for the snapshot too. */
	if (rc > 0)
		__atomic_add_fetch(&t->n_listed, 1, __ATOMIC_RELEASE);
	/* A failed relisting leaves the listing it had: nothing to keep. */
	lister_end(t, &me, 0);
	free(p.v);
	return rc;
}

int tree_lookup(struct tree *t, uint64_t parent, const char *name,
		struct tree_attr *out)
{
	uint32_t ino;
	int rc;

	rc = tree_list(t, parent, NULL);
	if (rc)
		return rc;
	pthread_rwlock_rdlock(&t->lock);
	ino = hash_find(t, (uint32_t)parent, name, strlen(name));
	if (ino)
		fill_attr(t, ino, out);
	pthread_rwlock_unlock(&t->lock);
	return ino ? 0 : -ENOENT;
}

int tree_getattr(struct tree *t, uint64_t ino, struct tree_attr *out)
{
	int rc = 0;

	pthread_rwlock_rdlock(&t->lock);
	if (ino == 0 || ino >= t->n_nodes)
		rc = -ENOENT;
	else
		fill_attr(t, (uint32_t)ino, out);
	pthread_rwlock_unlock(&t->lock);
	return rc;
}

int tree_readdir(struct tree *t, uint64_t dir, uint64_t index, tree_dir_cb cb,
		 void *arg)
{
	struct tree_attr a;
	int rc;

	rc = tree_list(t, dir, NULL);
	if (rc)
		return rc;
	pthread_rwlock_rdlock(&t->lock);
	{
		const struct node *d = &t->nodes[dir];

		for (uint64_t i = index; i < d->nchild; i++) {
			fill_attr(t, d->first_child + (uint32_t)i, &a);
			if (cb(arg, &a, i + 1))
				break;
		}
	}
	pthread_rwlock_unlock(&t->lock);
	return 0;
}

int tree_walk_listed(struct tree *t, tree_walk_fn fn, void *arg)
{
	char path[4096];
	struct tree_attr a;
	int rc = 0;

	pthread_rwlock_rdlock(&t->lock);
	for (uint32_t ino = TREE_ROOT; ino < t->n_nodes && !rc; ino++) {
		const struct node *d = &t->nodes[ino];

		if (!d->is_dir || !d->listed)
			continue;
		/* A path too long for a listing was never listed either. */
		if (path_locked(t, ino, path, sizeof(path)) < 0)
			continue;
		rc = fn(arg, path, NULL);
		for (uint32_t i = 0; i < d->nchild && !rc; i++) {
			fill_attr(t, d->first_child + i, &a);
			rc = fn(arg, path, &a);
		}
	}
	pthread_rwlock_unlock(&t->lock);
	return rc;
}

uint64_t tree_listings(struct tree *t)
{
	return __atomic_load_n(&t->n_listed, __ATOMIC_ACQUIRE);
}

void tree_usage(struct tree *t, uint64_t *nodes, uint64_t *bytes)
{
	pthread_rwlock_rdlock(&t->lock);
	*nodes = t->n_nodes - 1;
	*bytes = (uint64_t)t->cap_nodes * sizeof(struct node) +
		 (uint64_t)t->n_slots * sizeof(uint32_t);
	pthread_rwlock_unlock(&t->lock);
	pthread_mutex_lock(&t->arena_mu);
	*bytes += t->arena_bytes;
	pthread_mutex_unlock(&t->arena_mu);
}
