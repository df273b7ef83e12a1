/*
 * The mount's tree of names (fs/tree.c) alone, over fake sources: a
 * directory of 100,000 files, and a slow listing that holds up no other
 * directory.  No FUSE, no origin.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture-ck.h"
#include "tree.h"

/* The tree alone, over a fake source: one directory of 100,000 files. */
#define BIG_DIR 100000

static int fake_list(struct source *src, const char *dir, source_list_cb cb,
		     void *arg)
{
	struct source_object o = {.version = "etag"};
	char name[32];
	int rc;

	if (*dir && strcmp(dir, "big") && strcmp(dir, "sub"))
		return -ENOENT;
	if (!*dir) {
		/* A duplicate and names that cannot be shown are dropped. */
		static const char *const dirs[] = {"big", "sub", "sub",
						   "a/b", ".",	 ".."};

		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
			o.name = dirs[i];
			o.is_dir = true;
			rc = cb(arg, &o);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (!strcmp(dir, "sub")) {
		o.name = "leaf";
		o.size = 42;
		o.mtime = 1700000000;
		return cb(arg, &o);
	}
	/* Backwards: the tree sorts a listing by name. */
	for (int i = BIG_DIR - 1; i >= 0; i--) {
		snprintf(name, sizeof(name), "file-%06d.jpg", i);
		o.name = name;
		o.size = (uint64_t)i;
		rc = cb(arg, &o);
		if (rc)
			return rc;
	}
	return 0;
}

static int count_child(void *arg, const struct tree_attr *child,
		       uint64_t next_index)
{
	uint64_t *n = arg;

	/* Children come in name order with consecutive inodes. */
	if (child->size != *n)
		return 1;
	(*n)++;
	return 0;
}

START_TEST(test_tree_large_directory)
{
	static const struct source_ops ops = {.scheme = "fake",
					      .list_dir = fake_list};
	struct source src = {.ops = &ops, .id = "fake://"};
	struct tree_attr a, b, root_big;
	uint64_t n = 0, nodes, bytes;
	struct tree *t;
	char path[256];

	ck_assert_int_eq(tree_new(&src, &t), 0);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "big", &root_big), 0);
	ck_assert(root_big.is_dir);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "a/b", &a), -ENOENT);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "..", &a), -ENOENT);
	ck_assert_int_eq(tree_readdir(t, root_big.ino, 0, count_child, &n), 0);
	ck_assert_uint_eq(n, BIG_DIR);
	ck_assert_int_eq(tree_lookup(t, root_big.ino, "file-031337.jpg", &a),
			 0);
	ck_assert_uint_eq(a.size, 31337);
	ck_assert_str_eq(a.version, "etag");
	ck_assert_int_eq(tree_lookup(t, root_big.ino, "file-031337.jpg", &b),
			 0);
	ck_assert_uint_eq(a.ino, b.ino); /* stable */
	ck_assert_int_eq(tree_path(t, a.ino, path, sizeof(path)), 19);
	ck_assert_str_eq(path, "big/file-031337.jpg");
	ck_assert_int_eq(tree_path(t, a.ino, path, 10), -ENAMETOOLONG);
	ck_assert_int_eq(tree_lookup(t, a.ino, "x", &b), -ENOTDIR);
	ck_assert_int_eq(tree_lookup(t, root_big.ino, "file-100000.jpg", &b),
			 -ENOENT);
	/* Readdir resumes at an index. */
	n = BIG_DIR - 5;
	ck_assert_int_eq(
	    tree_readdir(t, root_big.ino, BIG_DIR - 5, count_child, &n), 0);
	ck_assert_uint_eq(n, BIG_DIR);
	/* The duplicate "sub" was dropped; its child is found. */
	n = 0;
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "sub", &b), 0);
	ck_assert_int_eq(tree_lookup(t, b.ino, "leaf", &a), 0);
	ck_assert_int_eq(a.mtime, 1700000000);
	tree_usage(t, &nodes, &bytes);
	ck_assert_uint_eq(nodes, 1 + 2 + BIG_DIR + 1);
	/* Compact: well under 200 bytes an entry, names included. */
	ck_assert_msg(bytes < (uint64_t)BIG_DIR * 200, "%llu bytes",
		      (unsigned long long)bytes);
	tree_free(t);
}
END_TEST

/* A source whose directory "slow" lists only when released, counting its
 * listings. */
static pthread_mutex_t slow_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cond = PTHREAD_COND_INITIALIZER;
static bool slow_released;
static int slow_listings;

static int slow_list(struct source *src, const char *dir, source_list_cb cb,
		     void *arg)
{
	struct source_object o = {.version = "etag", .size = 1};

	(void)src;
	if (!*dir) {
		static const char *const dirs[] = {"fast", "slow"};

		for (int i = 0; i < 2; i++) {
			int rc;

			o.name = dirs[i];
			o.is_dir = true;
			rc = cb(arg, &o);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (!strcmp(dir, "slow")) {
		pthread_mutex_lock(&slow_mu);
		slow_listings++;
		while (!slow_released)
			pthread_cond_wait(&slow_cond, &slow_mu);
		pthread_mutex_unlock(&slow_mu);
	}
	o.name = "f";
	return cb(arg, &o);
}

struct lister_arg {
	struct tree *t;
	uint64_t ino;
	int rc;
	bool done; /* under slow_mu */
};

static void *list_one(void *arg)
{
	struct lister_arg *a = arg;
	char *err = NULL;

	a->rc = tree_list(a->t, a->ino, &err);
	free(err);
	pthread_mutex_lock(&slow_mu);
	a->done = true;
	pthread_cond_broadcast(&slow_cond);
	pthread_mutex_unlock(&slow_mu);
	return NULL;
}

/* Directories are listed independently: while one listing hangs on a slow
 * origin, another directory lists; two askers of the slow one share one
 * listing. */
START_TEST(test_tree_slow_listing_blocks_no_other)
{
	static const struct source_ops ops = {.scheme = "fake",
					      .list_dir = slow_list};
	struct source src = {.ops = &ops, .id = "fake://"};
	struct lister_arg slow1, slow2, fast;
	struct tree_attr fa, sa, f;
	struct timespec until;
	pthread_t th[3];
	struct tree *t;
	int rc = 0;

	ck_assert_int_eq(tree_new(&src, &t), 0);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "fast", &fa), 0);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "slow", &sa), 0);
	slow1 = (struct lister_arg){.t = t, .ino = sa.ino};
	slow2 = slow1;
	fast = (struct lister_arg){.t = t, .ino = fa.ino};
	ck_assert_int_eq(pthread_create(&th[0], NULL, list_one, &slow1), 0);
	ck_assert_int_eq(pthread_create(&th[1], NULL, list_one, &slow2), 0);
	ck_assert_int_eq(pthread_create(&th[2], NULL, list_one, &fast), 0);

	/* The fast directory lists while the slow one hangs (60 s at most,
	 * then the slow one is let go so that a failure cannot hang). */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	pthread_mutex_lock(&slow_mu);
	while (!fast.done && rc == 0)
		rc = pthread_cond_timedwait(&slow_cond, &slow_mu, &until);
	const bool fast_first = fast.done && !slow1.done && !slow2.done;
	slow_released = true;
	pthread_cond_broadcast(&slow_cond);
	pthread_mutex_unlock(&slow_mu);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(fast_first, "a slow listing held up another directory");
	ck_assert_int_eq(slow1.rc, 0);
	ck_assert_int_eq(slow2.rc, 0);
	ck_assert_int_eq(fast.rc, 0);
	ck_assert_int_eq(slow_listings, 1);
	ck_assert_int_eq(tree_lookup(t, sa.ino, "f", &f), 0);
	ck_assert_int_eq(tree_lookup(t, fa.ino, "f", &f), 0);
	tree_free(t);
}
END_TEST

static Suite *tree_suite(void)
{
	Suite *s = suite_create("tree");
	TCase *tt = tcase_create("tree");

	tcase_add_test(tt, test_tree_large_directory);
	tcase_add_test(tt, test_tree_slow_listing_blocks_no_other);
	suite_add_tcase(s, tt);
	return s;
}

int main(void)
{
	return fx_suite_run(tree_suite());
}
