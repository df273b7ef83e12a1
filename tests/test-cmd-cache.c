/*
 * cmd-cache: `wharf cache` through the built command: verify (the chunks'
 * own checksums and the origin's on record), prune, stats and ls, on a
 * cache mounted or not, and the errors it gives.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checksum.h"
#include "fixture-store.h"
#include "text.h"

static char *populate(unsigned n)
{
	char *cache = strdupf("%s/cache", dir);
	struct store *st = open_store(cache, 0);
	uint8_t data[30000];
	struct chunk_key k;

	for (unsigned i = 0; i < n; i++) {
		if (i % 2)
			fill_text(data, sizeof(data), i);
		else
			fill_random(data, sizeof(data), i);
		key_n(&k, i);
		ck_assert_int_eq(store_put(st, &k, data, sizeof(data)), 0);
	}
	store_close(st);
	return cache;
}

START_TEST(cli_verify)
{
	char *cache = populate(6), *out = NULL, *args, path[1024], hex[33];
	struct chunk_key k;

	args = strdupf("verify --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	free(out);
	key_n(&k, 3);
	chunk_path(cache, &k, path, sizeof(path));
	flip_byte(path, payload_off(path) + 5, 0xff);
	ck_assert_int_eq(wharf(args, &out), 1);
	store_key_hex(&k, hex);
	ck_assert_msg(out && strstr(out, hex), "verify said: %s", out);
	ck_assert_int_eq(access(path, F_OK), -1);
	free(out);
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_uint_eq(tally(cache, 0).n, 5);
	free(out);
	free(args);
	free(cache);
}
END_TEST

/* verify on a mounted cache: the bad chunk goes, the store forgets it. */
START_TEST(cli_verify_mounted)
{
	char *cache = populate(4), *out = NULL, *args, path[1024];
	struct store *st = open_store(cache, 0);
	struct store_stats ss;
	struct chunk_key k;
	uint8_t buf[30000];
	size_t len;

	key_n(&k, 2);
	chunk_path(cache, &k, path, sizeof(path));
	flip_byte(path, payload_off(path) + 100, 0x10);
	args = strdupf("verify --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 1);
	ck_assert_msg(out && strstr(out, "1 bad"), "verify said: %s", out);
	free(out);
	ck_assert_int_eq(store_get(st, &k, buf, sizeof(buf), &len), -ENOENT);
	store_get_stats(st, &ss);
	ck_assert_uint_eq(ss.chunks, 3);
	ck_assert_uint_eq(ss.corrupt, 0);
	store_close(st);
	free(args);
	free(cache);
}
END_TEST

START_TEST(cli_prune_clear)
{
	char *cache = populate(10), *out = NULL, *args;
	struct store *st;

	args = strdupf("prune --max-size 64K --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	free(out);
	free(args);
	ck_assert_uint_le(tally(cache, 0).bytes, 64 * 1024);
	ck_assert_uint_gt(tally(cache, 0).n, 0);

	/* Refused while the cache is in use. */
	st = open_store(cache, 0);
	args = strdupf("clear --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 1);
	ck_assert_msg(out && strstr(out, "in use"), "clear said: %s", out);
	free(out);
	ck_assert_uint_gt(tally(cache, 0).n, 0);
	store_close(st);

	ck_assert_int_eq(wharf(args, &out), 0);
	free(out);
	ck_assert_uint_eq(tally(cache, 0).n, 0);
	free(args);
	free(cache);
}
END_TEST

START_TEST(cli_stats_ls)
{
	char *cache = populate(7), *out = NULL, *args;
	unsigned lines = 0;

	args = strdupf("stats --json --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	free(out);
	free(args);
	ck_assert_int_eq(
	    fx_sh("/usr/bin/python3 -c 'import json,sys; "
		  "d = json.load(open(sys.argv[1])); "
		  "sys.exit(0 if d[\"chunks\"] == 7 and "
		  "d[\"bytes_raw\"] == 7 * 30000 and not d[\"mounted\"] "
		  "else 1)' '%s/out'",
		  dir),
	    0);

	args = strdupf("stats --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_ptr_nonnull(strstr(out, "7 chunks"));
	/* Not mounted: what the cache holds, and no mount's lines. */
	ck_assert_msg(strstr(out, "\nnot mounted\n") && !strchr(out, '{') &&
			  !strstr(out, "  source "),
		      "%s", out);
	free(out);
	free(args);

	args = strdupf("ls --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	for (char *p = out; p && (p = strchr(p, '\n')); p++)
		lines++;
	ck_assert_uint_eq(lines, 7);
	free(out);
	free(args);

	/* Held, the holder is named; a directory that only looks like a
	 * mount (the live counters of a real one: test-secrets) is not
	 * read, and says so. */
	{
		struct store *st = open_store(cache, 0);
		char *mnt = strdupf("%s/mnt", dir);

		ck_assert_int_eq(fx_mkdirs(mnt), 0);
		ck_assert_int_eq(fx_sh("mkdir '%s/.wharf' && echo "
				       "'{\"reads\": {\"count\": 987654321}}' > "
				       "'%s/.wharf/stats'",
				       mnt, mnt),
				 0);
		ck_assert_int_eq(store_set_mountpoint(st, mnt), 0);
		ck_assert_int_eq(fx_sh("'%s' cache stats --json --cache-dir "
				       "'%s' >'%s/out' 2>/dev/null",
				       fx_wharf_bin(), cache, dir),
				 1);
		ck_assert_int_eq(
		    fx_sh("/usr/bin/python3 -c 'import json,sys; "
			  "d = json.load(open(sys.argv[1])); "
			  "sys.exit(0 if d[\"mounted\"] and "
			  "d[\"pid\"] == int(sys.argv[3]) and "
			  "d[\"mountpoint\"] == sys.argv[2] and "
			  "d[\"mount\"] is None "
			  "else 1)' '%s/out' '%s' %d",
			  dir, mnt, (int)getpid()),
		    0);
		args = strdupf("stats --cache-dir '%s'", cache);
		ck_assert_int_eq(wharf(args, &out), 1);
		ck_assert_msg(strstr(out, "it is not a wharf mount of process"),
			      "stats said: %s", out);
		/* (A number no pid or path holds: "42" was in pid 4286.) */
		ck_assert_msg(!strstr(out, "987654321"), "stats said: %s",
			      out);
		ck_assert_msg(strstr(out, "mounted on ") &&
				  !strstr(out, "  source ") &&
				  !strstr(out, "  reads "),
			      "stats said: %s", out);
		free(out);
		free(args);
		store_close(st);
		free(mnt);
	}

	ck_assert_int_eq(wharf("--help", &out), 0);
	ck_assert_ptr_nonnull(strstr(out, "prune"));
	free(out);
	ck_assert_int_eq(wharf("frobnicate", NULL), 2);
	ck_assert_int_eq(wharf("prune", NULL), 2); /* --max-size missing */
	free(cache);
}
END_TEST

/* A directory that is not a cache is refused, and nothing is made in it. */
START_TEST(cli_not_a_cache)
{
	static const char *const cmds[] = {"clear", "prune --max-size 1M",
					   "stats", "ls", "verify"};
	char *home = strdupf("%s/home", dir), *out = NULL, *args;

	ck_assert_int_eq(fx_mkdirs(home), 0);
	ck_assert_int_eq(fx_sh("echo keep > '%s/keep.txt'", home), 0);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		args = strdupf("%s --cache-dir '%s'", cmds[i], home);
		ck_assert_int_eq(wharf(args, &out), 1);
		ck_assert_msg(out && strstr(out, "is not a wharf cache "
						 "directory"),
			      "%s said: %s", cmds[i], out);
		free(out);
		free(args);
	}
	ck_assert_int_eq(fx_sh("test \"$(ls -A '%s')\" = keep.txt", home), 0);
	free(home);
}
END_TEST

/* A bad option is named once, by wharf, not by getopt. */
START_TEST(cli_bad_options)
{
	static const struct {
		const char *args, *says;
	} cases[] = {
	    {"stats --bogus", "unknown option '--bogus'"},
	    {"stats -x", "unknown option '-x'"},
	    {"stats --cache-dir", "option --cache-dir needs a value"},
	    {"stats --json=yes", "option --json takes no value"},
	};
	char *out = NULL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(wharf(cases[i].args, &out), 2);
		ck_assert_msg(out && strstr(out, cases[i].says) &&
				  !strstr(out, "unrecognized") &&
				  !strstr(out, "invalid option") &&
				  !strstr(out, "requires an argument"),
			      "%s said: %s", cases[i].args, out);
		free(out);
	}
	/* Numbers out of range, or not numbers, are refused by name. */
	ck_assert_int_eq(wharf_cmd("prefetch -j 4294967297 /tmp", &out), 2);
	ck_assert_msg(out && strstr(out, "--jobs: expected 1 to 1024, got "
					 "'4294967297'"),
		      "prefetch said: %s", out);
	free(out);
	ck_assert_int_eq(wharf_cmd("bench loader --seed abc x.idx", &out), 2);
	ck_assert_msg(out && strstr(out, "--seed: bad number 'abc'"),
		      "bench said: %s", out);
	free(out);
}
END_TEST

/* Records that an object (obj_keys's) matched its origin's checksum, as
 * a mount does. */
static void record_sum(struct store *st, const char *path, const uint8_t *data,
		       enum checksum_algo a)
{
	char text[CHECKSUM_TEXT_MAX];
	struct checksum_ctx ctx;
	struct checksum c;
	struct store_sum s = {.source = "http://origin/",
			      .path = path,
			      .version = "etag-9",
			      .size = PSIZE,
			      .mtime = 1700000000,
			      .chunk_size = PCS};

	ck_assert_int_eq(checksum_begin(&ctx, a), 0);
	checksum_feed(&ctx, data, PSIZE);
	checksum_end(&ctx, &c);
	s.digest = checksum_format(&c, text);
	ck_assert_int_eq(store_sum_record(st, &s), 0);
}

/* `wharf cache verify` checks the objects on record against their
 * origin's checksums: a chunk changed after the fact whose own checksum
 * was made to match (store_put writes one) is found by them alone. */
START_TEST(cli_verify_origin_sums)
{
	char *cache = strdupf("%s/cache", dir), *out = NULL, *args;
	struct store *st = open_store(cache, 0);
	uint8_t *data = malloc(PSIZE), *bad = malloc(PCS);
	struct chunk_key a[PN], b[PN], p[PN];
	char path[1024];
	int rc;

	fill_random(data, PSIZE, 5);
	obj_keys(a, "a b.bin");
	obj_keys(b, "md5.bin");
	obj_keys(p, "packed.bin");
	put_object(st, a, data);
	record_sum(st, "a b.bin", data, CHECKSUM_CRC32C);
	put_object(st, b, data);
	record_sum(st, "md5.bin", data, CHECKSUM_MD5);
	put_object(st, p, data);
	/* a pack where the filesystem keeps xattrs: read as one file */
	rc = store_pack_object(st, p, PN, PCS, PSIZE);
	ck_assert_msg(rc == 0 || rc == -ENOTSUP, "%d", rc);
	record_sum(st, "packed.bin", data, CHECKSUM_SHA256);
	/* a second line of the same object: checked once */
	record_sum(st, "a b.bin", data, CHECKSUM_CRC32C);
	store_close(st);
	ck_assert_int_eq(fx_sh("echo 'not a record' >> '%s/sums'", cache), 0);

	args = strdupf("verify --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_msg(strstr(out, "3 objects checked against their origin's "
				  "checksum: 3 good, 0 bad; 0 not cached "
				  "whole"),
		      "verify said: %s", out);
	free(out);

	st = open_store(cache, 0);
	memcpy(bad, data + 2 * PCS, PCS);
	bad[100] ^= 1;
	ck_assert_int_eq(store_put(st, &a[2], bad, PCS), 0);
	ck_assert_int_eq(store_put(st, &b[2], bad, PCS), 0);
	store_close(st);
	ck_assert_uint_eq(tally(cache, STORE_WALK_VERIFY).bad, 0);
	ck_assert_int_eq(wharf(args, &out), 1);
	ck_assert_msg(strstr(out, "http://origin/a b.bin (version etag-9): "
				  "its cached bytes give crc32c:") &&
			  strstr(out, ", not the origin's crc32c:") &&
			  strstr(out, "http://origin/md5.bin (version etag-9): "
				      "its cached bytes give md5:") &&
			  strstr(out, "; its chunks removed") &&
			  strstr(out, ": 1 good, 2 bad"),
		      "verify said: %s", out);
	free(out);
	for (unsigned i = 0; i < PN; i++) {
		chunk_path(cache, &a[i], path, sizeof(path));
		ck_assert_int_eq(access(path, F_OK), -1);
		chunk_path(cache, &b[i], path, sizeof(path));
		ck_assert_int_eq(access(path, F_OK), -1);
	}
	/* What is left is good; the rest is not cached whole. */
	ck_assert_int_eq(wharf(args, &out), 0);
	ck_assert_msg(strstr(out, "1 objects checked against their origin's "
				  "checksum: 1 good, 0 bad; 2 not cached "
				  "whole"),
		      "verify said: %s", out);
	free(out);
	/* emptied with the cache */
	snprintf(path, sizeof(path), "%s/sums", cache);
	ck_assert_int_eq(access(path, F_OK), 0);
	free(args);
	args = strdupf("clear --cache-dir '%s'", cache);
	ck_assert_int_eq(wharf(args, NULL), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	free(args);
	free(data);
	free(bad);
	free(cache);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, cli_verify);
	tcase_add_test(tc, cli_verify_origin_sums);
	tcase_add_test(tc, cli_verify_mounted);
	tcase_add_test(tc, cli_prune_clear);
	tcase_add_test(tc, cli_stats_ls);
	tcase_add_test(tc, cli_not_a_cache);
	tcase_add_test(tc, cli_bad_options);
}

int main(void)
{
	return store_fx_main("cli", add_tests);
}
