/* The batch ring: one contiguous reserved mapping; too-small tmpfs refused
 * at open; `wharf shm ls|gc` tell leftovers from segments in use. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "loader_i.h"
#include "ring.h"

static char *shm; /* a private tmpfs */

START_TEST(layout_and_reservation)
{
	struct ring r;
	char *err = NULL;
	int rc = ring_open(&r, shm, 5, 33, 10000, 3, &err);
	ck_assert_msg(rc == 0, "ring_open: %s", err);
	ck_assert_uint_eq(r.size, ring_bytes(5, 33, 10000, 3));
	ck_assert_uint_eq(r.size, r.slots_off + 5 * r.slot_size);
	ck_assert_uint_eq(r.slot_size % 4096, 0);
	ck_assert_uint_ge(r.slot_size - r.off_data, 10000);
	ck_assert_uint_ge(r.off_samples, sizeof(struct slot_hdr));
	ck_assert_uint_ge(r.off_labels, r.off_samples + 33 * 8);
	ck_assert_uint_ge(r.off_offsets, r.off_labels + 33 * 4);
	ck_assert_uint_ge(r.off_data, r.off_offsets + 34 * 8);
	ck_assert_uint_eq(r.off_data % 64, 0);
	/* Slots follow each other inside the one mapping. */
	for (uint32_t s = 0; s < 5; s++) {
		char *d = ring_data(&r, s);
		ck_assert_ptr_eq(ring_slot_base(&r, s), (char *)r.base +
							    r.slots_off +
							    s * r.slot_size);
		memset(d, (int)s + 1, 10000);
		ring_samples(&r, s)[32] = s;
		ring_offsets(&r, s)[33] = s;
	}
	for (uint32_t s = 0; s < 5; s++) {
		ck_assert_int_eq(ring_data(&r, s)[0], (int)s + 1);
		ck_assert_int_eq(ring_data(&r, s)[9999], (int)s + 1);
		ck_assert_uint_eq(ring_samples(&r, s)[32], s);
	}
	/* The pages are charged to the tmpfs already: writing all of them
	 * cannot fault, and the space shows as used. */
	ring_stats(&r, 2)->busy_ns = 5;
	memset(r.base, 0, r.size);
	ring_close(&r);
}
END_TEST

START_TEST(too_small)
{
	struct ring r;
	char *err = NULL;
	int rc = ring_open(&r, shm, 64, 1024, 1 << 20, 1, &err);
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_msg(strstr(err, shm) && strstr(err, "needs") &&
			  strstr(err, "bytes are free") &&
			  strstr(err, "64 slots"),
		      "message: %s", err);
	free(err);
	/* A missing directory is named too. */
	rc = ring_open(&r, "/nonexistent-wharf-dir", 1, 1, 1, 1, &err);
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent-wharf-dir"));
	free(err);
}
END_TEST

static pid_t dead_pid(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	return p;
}

START_TEST(shm_ls_gc)
{
	const char *w = fx_wharf_bin();
	if (access(w, X_OK))
		fx_skip("no wharf command at %s (a --disable-fs build)", w);
	char p[4096];
	pid_t dead = dead_pid();
	/* A wharf leftover, another program's leftover, and a wharf-named
	 * file that a live process (us) holds open. */
	snprintf(p, sizeof(p), "%s/wharf-%d-ring-0", shm, (int)dead);
	ck_assert_int_eq(fx_write_file(p, 100, 1), 0);
	snprintf(p, sizeof(p), "%s/torch_%d_123", shm, (int)dead);
	ck_assert_int_eq(fx_write_file(p, 100, 1), 0);
	snprintf(p, sizeof(p), "%s/wharf-held", shm);
	ck_assert_int_eq(fx_write_file(p, 100, 1), 0);
	int fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);

	ck_assert_int_eq(
	    fx_sh("'%s' shm ls --dir '%s' > '%s/ls.out'", w, shm, shm), 0);
	char out[4096];
	snprintf(out, sizeof(out), "%s/ls.out", shm);
	size_t len;
	char *txt = fx_read_file(out, &len);
	txt = realloc(txt, len + 1);
	txt[len] = '\0';
	char a[64], b[64];
	snprintf(a, sizeof(a), "wharf-%d-ring-0", (int)dead);
	snprintf(b, sizeof(b), "torch_%d_123", (int)dead);
	ck_assert_msg(strstr(txt, a) && strstr(txt, b) &&
			  !strstr(txt, "wharf-held"),
		      "ls: %s", txt);
	free(txt);
	unlink(out);

	ck_assert_int_eq(fx_sh("'%s' shm gc --dir '%s' >/dev/null", w, shm), 0);
	snprintf(p, sizeof(p), "%s/%s", shm, a);
	ck_assert_int_eq(access(p, F_OK), -1); /* removed */
	snprintf(p, sizeof(p), "%s/%s", shm, b);
	ck_assert_int_eq(access(p, F_OK), 0); /* not ours: kept */
	unlink(p);
	snprintf(p, sizeof(p), "%s/wharf-held", shm);
	ck_assert_int_eq(access(p, F_OK), 0); /* in use: kept */
	close(fd);
	unlink(p);
	ck_assert_int_eq(fx_sh("'%s' shm bogus 2>/dev/null", w), 2);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("ring");
	tcase_add_test(tc, layout_and_reservation);
	tcase_add_test(tc, too_small);
	tcase_add_test(tc, shm_ls_gc);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	shm = fx_tmpdir("ring");
	if (mount("none", shm, "tmpfs", 0, "size=4M")) {
		printf("SKIP: cannot mount a tmpfs on %s: %s\n", shm,
		       strerror(errno));
		fx_rmtree(shm);
		free(shm);
		return 77;
	}
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	umount2(shm, MNT_DETACH);
	fx_rmtree(shm);
	free(shm);
	return failed ? 1 : 0;
}
