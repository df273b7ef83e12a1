/*
 * Listing snapshots over a tree of a fake source: what is saved loads
 * back entry for entry, a snapshot of another source or a damaged one is
 * refused, a save keeps the directories the last snapshot had that this
 * tree did not list, and tree_revalidate takes changed versions.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "snapshot.h"
#include "store.h"
#include "tree.h"

#define ID "fake://bucket/pre fix/"

/* The fake origin: the root holds d/ and e/ and three files; d holds x
 * and y; e holds z.  `gen` changes the version (and size) of d/x. */
static int gen;

static int put(source_list_cb cb, void *arg, const char *name, bool dir,
	       uint64_t size, const char *version)
{
	struct source_object o = {.name = name,
				  .is_dir = dir,
				  .size = size,
				  .mtime = 1700000000 + (int64_t)size,
				  .version = version};

	return cb(arg, &o);
}

static int fake_list(struct source *src, const char *dir, source_list_cb cb,
		     void *arg)
{
	char ver[32];
	int rc = 0;

	(void)src;
	if (!*dir) {
		rc = put(cb, arg, "d", true, 0, "");
		rc = rc ? rc : put(cb, arg, "e", true, 0, "");
		/* Spaces, '%' and quotes must survive the encoding. */
		rc = rc ? rc : put(cb, arg, "a b%20c", false, 10, "\"q 1\"");
		rc = rc ? rc : put(cb, arg, "empty", false, 0, "");
		rc = rc ? rc : put(cb, arg, "big", false, 1ull << 40, "v/2");
		return rc;
	}
	if (!strcmp(dir, "d")) {
		snprintf(ver, sizeof(ver), "x-%d", gen);
		rc = put(cb, arg, "x", false, 100 + (uint64_t)gen, ver);
		return rc ? rc : put(cb, arg, "y", false, 5, "y-0");
	}
	if (!strcmp(dir, "e"))
		return put(cb, arg, "z", false, 7, "z-0");
	return -ENOENT;
}

static void fake_destroy(struct source *src)
{
	(void)src;
}

static const struct source_ops fake_ops = {
    .scheme = "fake", .list_dir = fake_list, .destroy = fake_destroy};
static struct source fake = {.ops = &fake_ops, .id = ID};

/* A tree over the fake source with the root and `sub` (or none) listed. */
static struct tree *tree_listed(const char *sub)
{
	struct tree *t;
	struct tree_attr a;

	ck_assert_int_eq(tree_new(&fake, &t), 0);
	ck_assert_int_eq(tree_list(t, TREE_ROOT, NULL), 0);
	if (sub) {
		ck_assert_int_eq(tree_lookup(t, TREE_ROOT, sub, &a), 0);
		ck_assert_int_eq(tree_list(t, a.ino, NULL), 0);
	}
	return t;
}

/* Every entry as "name|d|size|mtime|version;". */
static int cat(void *arg, const struct source_object *o)
{
	char *out = arg;
	size_t l = strlen(out);

	snprintf(out + l, 1024 - l, "%s|%c|%" PRIu64 "|%" PRId64 "|%s;",
		 o->name, o->is_dir ? 'd' : 'f', o->size, o->mtime, o->version);
	return 0;
}

static void listing_of(struct snapshot *s, const char *dir, char out[1024])
{
	out[0] = '\0';
	ck_assert_int_eq(snapshot_list(s, dir, cat, out), 0);
}

static void fake_listing(const char *dir, char out[1024])
{
	out[0] = '\0';
	ck_assert_int_eq(fake_list(&fake, dir, cat, out), 0);
}

/* A cache dir of a test's own and the fake source's snapshot in it. */
struct place {
	char *dir, *path;
};

static struct place place_new(const char *tag)
{
	struct place p = {.dir = fx_tmpdir(tag)};

	p.path = store_snapshot_path(p.dir, ID);
	ck_assert_ptr_nonnull(p.path);
	return p;
}

static void place_free(struct place *p, struct tree *t)
{
	tree_free(t);
	fx_rmtree(p->dir);
	free(p->dir);
	free(p->path);
}

START_TEST(save_and_load)
{
	struct place pl = place_new("snap");
	char *err = NULL;
	char got[1024], want[1024];
	struct tree *t = tree_listed("d");
	struct snapshot *s;
	struct snapshot_info si;
	struct source_object o;

	ck_assert_int_eq(snapshot_load(pl.path, ID, &s, &err), -ENOENT);
	free(err);
	err = NULL;
	ck_assert_int_eq(snapshot_save(pl.path, ID, t, NULL, NULL, &err), 0);
	ck_assert_int_eq(snapshot_load(pl.path, ID, &s, &err), 0);
	/* In the tree's order, which sorts by name. */
	listing_of(s, "", got);
	ck_assert_str_eq(got, "a b%20c|f|10|1700000010|\"q 1\";"
			      "big|f|1099511627776|1101211627776|v/2;"
			      "d|d|0|1700000000|;e|d|0|1700000000|;"
			      "empty|f|0|1700000000|;");
	listing_of(s, "d", got);
	fake_listing("d", want);
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(snapshot_list(s, "e", cat, got), -ENOENT);
	ck_assert_int_eq(snapshot_stat(s, "d/y", &o), 0);
	ck_assert_str_eq(o.version, "y-0");
	ck_assert_int_eq(snapshot_stat(s, "d/nope", &o), -ENOENT);
	snapshot_info(s, &si);
	ck_assert_str_eq(si.source, ID);
	ck_assert_uint_eq(si.dirs, 2);
	ck_assert_uint_eq(si.entries, 7);
	snapshot_free(s);

	/* Another source never takes it. */
	ck_assert_int_eq(
	    snapshot_load(pl.path, "fake://bucket/other/", &s, &err), -ESTALE);
	ck_assert_ptr_nonnull(strstr(err, ID));
	free(err);
	place_free(&pl, t);
}
END_TEST

START_TEST(damaged_refused)
{
	struct place pl = place_new("snap-bad");
	char *err = NULL;
	struct tree *t = tree_listed("d");
	struct snapshot *s;

	ck_assert_int_eq(snapshot_save(pl.path, ID, t, NULL, NULL, &err), 0);
	/* One byte changed in the middle. */
	ck_assert_int_eq(fx_sh("printf Q | dd of='%s' bs=1 seek=60 "
			       "conv=notrunc status=none",
			       pl.path),
			 0);
	ck_assert_int_eq(snapshot_load(pl.path, ID, &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "checksum"));
	free(err);
	err = NULL;
	/* Cut short. */
	ck_assert_int_eq(snapshot_save(pl.path, ID, t, NULL, NULL, &err), 0);
	ck_assert_int_eq(fx_sh("truncate -s -20 '%s'", pl.path), 0);
	ck_assert_int_eq(snapshot_load(pl.path, ID, &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "refused"));
	free(err);
	place_free(&pl, t);
}
END_TEST

START_TEST(save_keeps_what_was_not_listed)
{
	struct place pl = place_new("snap-merge");
	char *err = NULL;
	struct tree *t1 = tree_listed("d"), *t2 = tree_listed("e");
	char got[1024], want[1024];
	struct snapshot *old, *s;

	ck_assert_int_eq(snapshot_save(pl.path, ID, t1, NULL, NULL, &err), 0);
	ck_assert_int_eq(snapshot_load(pl.path, ID, &old, &err), 0);
	ck_assert_int_eq(snapshot_save(pl.path, ID, t2, old, NULL, &err), 0);
	ck_assert_int_eq(snapshot_load(pl.path, ID, &s, &err), 0);
	listing_of(s, "d", got);
	fake_listing("d", want);
	ck_assert_str_eq(got, want);
	listing_of(s, "e", got);
	fake_listing("e", want);
	ck_assert_str_eq(got, want);
	listing_of(s, "", got);
	fake_listing("", want);
	ck_assert_uint_eq(strlen(got), strlen(want));
	snapshot_free(s);
	snapshot_free(old);
	tree_free(t1);
	place_free(&pl, t2);
}
END_TEST

START_TEST(each_and_clear)
{
	struct place pl = place_new("snap-clear");
	char *err = NULL;
	struct tree *t = tree_listed(NULL);
	uint64_t removed = 0;

	ck_assert_int_eq(snapshot_clear(pl.dir, &removed, &err), 0);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(snapshot_save(pl.path, ID, t, NULL, NULL, &err), 0);
	/* A temp file a crash left is removed too, but not counted. */
	ck_assert_int_eq(fx_sh("touch '%s.tmp'", pl.path), 0);
	ck_assert_int_eq(snapshot_clear(pl.dir, &removed, &err), 0);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(fx_sh("test -z \"$(ls -A '%s/snapshots')\"", pl.dir),
			 0);
	place_free(&pl, t);
}
END_TEST

START_TEST(revalidate_takes_new_versions)
{
	struct tree *t = tree_listed("d");
	uint64_t listings = tree_listings(t);
	struct tree_attr d, x;

	gen = 0;
	ck_assert_int_eq(tree_revalidate(t, "d"), 0);
	ck_assert_uint_eq(tree_listings(t), listings);
	gen = 1;
	ck_assert_int_eq(tree_revalidate(t, "d"), 1);
	/* The snapshot is saved again when versions change. */
	ck_assert_uint_gt(tree_listings(t), listings);
	ck_assert_int_eq(tree_lookup(t, TREE_ROOT, "d", &d), 0);
	ck_assert_int_eq(tree_lookup(t, d.ino, "x", &x), 0);
	ck_assert_str_eq(x.version, "x-1");
	ck_assert_uint_eq(x.size, 101);
	/* Only listed directories. */
	ck_assert_int_eq(tree_revalidate(t, "e"), -ENOENT);
	ck_assert_int_eq(tree_revalidate(t, "d/x"), -ENOENT);
	gen = 0;
	tree_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("snapshot");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, save_and_load);
	tcase_add_test(tc, damaged_refused);
	tcase_add_test(tc, save_keeps_what_was_not_listed);
	tcase_add_test(tc, each_and_clear);
	tcase_add_test(tc, revalidate_takes_new_versions);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
